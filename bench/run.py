"""Benchmarks W1-W9: fgrad's backends next to NumPy, PyTorch and JAX (when installed).

    python bench/run.py                  # full sizes (~10 minutes on 2 cores)
    python bench/run.py --quick          # small sizes, a smoke run (~2 minutes)
    python bench/run.py --only W3,W7     # some workloads only
    python bench/run.py --markdown out.md
    python bench/run.py --threads 1      # pin NumPy/PyTorch/JAX to one thread each
    python bench/run.py --check          # exit 1 if a workload is >= 1.5x worse (vs NumPy)
                                         # than the committed bench/baseline.json (in this
                                         # run and again when re-measured)
    python bench/run.py --write-baseline # store this run's fgrad/NumPy ratios as the baseline
    python bench/run.py --contended      # run everything while a process keeps a core busy
    python bench/run.py --slowdown --only W3,W5   # each contender quiet, then at once with
                                         # a core busy: the slowdown of each, in one run

Prints the machine, then per workload the median time per call of every contender (after a
warm-up call), its ratio to NumPy and to the fastest anchor (NumPy, PyTorch, JAX) measured
in the same run. A failing contender shows "error: ..." in its cell. Timing is never
asserted anywhere; the numbers describe this machine, at this moment, only.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable

import check
import handoff
import mlp
import peak
import report
import workloads
import transformer
from cold_start import w6_rows, w9_rows
from harness import Row, Settings, guarded, header, run_row, short_error, timed

FULL = {"w1": 24, "w2": 4096, "w3": [256, 1024, 2048], "w4": 32, "w5": 256, "w8": 128}
QUICK = {"w1": 16, "w2": 256, "w3": [64, 128, 256], "w4": 4, "w5": 32, "w8": 8}


def pin_threads(n: int) -> None:
    """Restart this process with every library's thread pool limited to `n` threads."""
    if os.environ.get("FGRAD_BENCH_THREADS") == str(n):
        return
    env = dict(os.environ, FGRAD_BENCH_THREADS=str(n), OMP_NUM_THREADS=str(n),
               OPENBLAS_NUM_THREADS=str(n), MKL_NUM_THREADS=str(n))
    eigen = "true" if n > 1 else "false"
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + f" --xla_cpu_multi_thread_eigen={eigen}"
                        f" intra_op_parallelism_threads={n}").strip()
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def mlp_row(label: str, factories: dict[str, mlp.Factory], settings: Settings,
            inner: int | None = None, unit: str = "ms") -> Row:
    """A Row timing each factory's call (`inner` calls per sample; None: `timed`'s
    default)."""
    return Row(label, {k: timed(f, settings, inner) for k, f in factories.items()}, unit=unit)


def _fast_backends(factories: dict[str, mlp.Factory]) -> dict[str, mlp.Factory]:
    """The factories without fgrad's numpy backend (minutes per W9 step here)."""
    return {k: f for k, f in factories.items() if k != "fgrad-numpy"}


def workload_table(sizes: dict, settings: Settings, inner_w7: int) -> list[tuple[str, Callable]]:
    """(id, builder of Rows) per workload, in table order; nothing is built yet."""
    return [
        ("W1", lambda: workloads.w1(sizes["w1"], settings)),
        ("W2", lambda: workloads.w2(sizes["w2"], settings)),
        ("W3", lambda: workloads.w3(sizes["w3"], settings)),
        ("W4", lambda: workloads.w4(sizes["w4"], settings)),
        ("W5", lambda: [mlp_row(f"W5 MLP 784-512-512-10 train step, Adam, batch {sizes['w5']}",
                                mlp.w5_factories(sizes["w5"]), settings)]),
        ("W6", lambda: w6_rows(sizes["w5"], settings)),
        ("W7", lambda: [mlp_row("W7 jitted x+1 on one element (torch: eager), per call",
                                mlp.w7_factories(), settings, inner_w7, unit="us")]),
        ("W8", lambda: [mlp_row(f"W8 vmap(grad) per-example grads of the W5 MLP, batch "
                                f"{sizes['w8']}", mlp.w8_factories(sizes["w8"]), settings)]),
        ("W9", lambda: [mlp_row("W9 2-block transformer train step (batch 8, 64 tokens, "
                                "d=128), Adam", _fast_backends(transformer.w9_factories()),
                                settings)] + w9_rows(settings)),
    ]


def parse_args() -> argparse.Namespace:
    """The command-line flags."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--repeats", type=int, default=None, help="timed samples per case")
    parser.add_argument("--only", default="", help="comma-separated workload ids, e.g. W1,W5")
    parser.add_argument("--markdown", default="", help="also write a Markdown table here")
    parser.add_argument("--stat", choices=("median", "min"), default="median",
                        help="statistic over the timed samples")
    parser.add_argument("--threads", type=int, default=0,
                        help="threads per library (0: library defaults)")
    parser.add_argument("--check", action="store_true",
                        help=f"flag workloads >= {check.FACTOR}x worse than bench/baseline.json "
                             "(ratios to NumPy); exit status 1 if any")
    parser.add_argument("--write-baseline", action="store_true",
                        help="merge this run's fgrad/NumPy ratios into bench/baseline.json")
    parser.add_argument("--contended", action="store_true",
                        help="keep one core busy with a spinning process during the run")
    parser.add_argument("--slowdown", action="store_true",
                        help="time each contender quiet and then with one core busy, and "
                             "print its slowdown (busy / quiet)")
    return parser.parse_args()


def run_workloads(args: argparse.Namespace, settings: Settings) -> list[Row]:
    """Build and time the chosen workloads, printing each row as soon as it is measured."""
    only = {w.strip().upper() for w in args.only.split(",") if w.strip()}
    sizes = QUICK if args.quick else FULL
    rows = []
    for wid, build in workload_table(sizes, settings, 200 if args.quick else 1000):
        if only and wid not in only:
            continue
        try:
            built = build()
        except Exception as exc:  # noqa: BLE001  (set-up failed: report it, go on)
            built = [Row(f"{wid} (set-up)", {}, results={"numpy": short_error(exc)})]
        for row in built:
            before = handoff.measure(repeats=1)
            rows.append(run_slowdown(row, settings) if args.slowdown else run_row(row, settings))
            row.note = handoff.split_note(before, handoff.measure(repeats=1))
            print("\n".join(report.text_lines(row)), flush=True)
    return rows


SLOWDOWN_ROUNDS = 5   # one round's slowdown of W3 n=256 spread over 0.8-1.8x for one code
# fgrad-llvm's workers spin short for ~1 s after they saw a thread preempted (llvm/pool.py):
# a quiet round waits that out, so that it is timed as on a quiet machine
POOL_HOLD_S = 1.5


def run_slowdown(row: Row, settings: Settings, rounds: int = SLOWDOWN_ROUNDS) -> Row:
    """Time each contender quiet, then at once again while a process keeps a core busy,
    `rounds` times in turn; its cell becomes "quiet -> busy ms (slowdown x)" from the
    medians (the goal "slowdown no worse than JAX's under the same load" compares these).
    A row that interleaves two calls itself (reference not NumPy) is left out."""
    if row.reference != "numpy":
        row.results = {name: "not timed under --slowdown" for name in row.measures}
        row.measures = {}
        return row
    for name, measure in row.measures.items():
        try:
            quiet, busy = [], []
            for i in range(rounds):
                if i and name == "fgrad-llvm":
                    time.sleep(POOL_HOLD_S)
                quiet.append(float(guarded(measure, settings.guard_s)))
                with check.busy_core():
                    time.sleep(0.2)   # the spinning process has started
                    busy.append(float(guarded(measure, settings.guard_s)))
            q, b = statistics.median(quiet), statistics.median(busy)
            row.results[name] = f"{q:.4g} -> {b:.4g} {row.unit} (slowdown {b / q:.2f}x)"
        except Exception as exc:  # noqa: BLE001
            row.results[name] = short_error(exc)
    row.measures = {}
    return row


def main() -> None:
    """Run the chosen workloads, print the table (and optionally write it as Markdown)."""
    args = parse_args()
    if args.threads:
        pin_threads(args.threads)
    quick = Settings(repeats=3, budget_s=0.5, guard_s=60, cold_runs=1)
    settings = quick if args.quick else Settings()
    settings.repeats = args.repeats or settings.repeats
    settings.stat = args.stat
    print("\n".join(header(args.quick, args.stat)))
    before, handoff_before = peak.measure(), handoff.measure()
    print(peak.describe(before))
    print(handoff.describe(handoff_before))
    print(report.column_header())
    if args.contended:
        print("contended: a spinning process keeps one core busy")
    start = time.perf_counter()
    with check.busy_core() if args.contended else contextlib.nullcontext():
        rows = run_workloads(args, settings)
    print(f"total {time.perf_counter() - start:.0f} s")
    after, handoff_after = peak.measure(), handoff.measure()
    machine = [peak.describe(before), handoff.describe(handoff_before),
               "after the run, " + peak.describe(after),
               "after the run, " + handoff.describe(handoff_after)]
    moved = peak.changed(before, after)
    if moved:
        machine.append("warning: " + moved)
    print("\n".join(machine[2:]))
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write("\n".join([*machine, "", *report.markdown(rows)]) + "\n")
    if args.write_baseline:
        check.write_baseline(rows, " ".join(header(args.quick, args.stat)))
    if args.check:
        found = confirmed_regressions(args, settings, rows)
        print("\n".join(found) or f"check: no workload >= {check.FACTOR}x worse than baseline")
        sys.exit(1 if found else 0)


def confirmed_regressions(args: argparse.Namespace, settings: Settings,
                          rows: list[Row]) -> list[str]:
    """The regressions of this run that hold again when their workloads run once more
    (check.confirmed); the first run's flags are printed either way."""
    baseline = check.load_baseline()
    first = check.flagged(rows, baseline)
    if not first:
        return []
    print("\n".join(first.values()))
    ids = sorted({key.split()[0] for key in first})
    print(f"check: measuring {','.join(ids)} again to confirm", flush=True)
    again = run_workloads(argparse.Namespace(**{**vars(args), "only": ",".join(ids)}), settings)
    return check.confirmed(first, check.flagged(again, baseline))


if __name__ == "__main__":
    main()
