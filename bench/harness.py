"""Timing, contender discovery, the machine header and the result tables of bench/run.py.

In: Rows (a workload label plus, per contender, a function that returns milliseconds per
call). Out: per row a dict contender -> milliseconds or an "error: ..." string, printed as a
text table (and optionally written as a Markdown table).
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import platform
import signal
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ANCHORS = ("numpy", "torch", "jax")
CONTENDERS = ANCHORS + ("fgrad-numpy", "fgrad-llvm", "fgrad-opencl")
TITLES = {"numpy": "NumPy", "torch": "PyTorch", "jax": "JAX", "fgrad-numpy": "fgrad numpy",
          "fgrad-llvm": "fgrad llvm", "fgrad-opencl": "fgrad opencl"}

Call = Callable[[], Any]
Measure = Callable[[], float]
Result = float | str
LOWER_ERROR: list[str] = []
MAX_INNER = 1000  # calls per sample at most


@dataclass
class Settings:
    """How to time: samples per case, seconds of timed calls per case, the least seconds
    per sample (calls are repeated to fill it), seconds of rest before a case (the
    previous contender's thread pool, OpenBLAS's or OpenMP's, spins for a while after its
    last call and would take a core from the next), guard seconds, the statistic over the
    samples ("median", or "min" on a very noisy machine), and fresh processes per W6
    cell."""

    repeats: int = 7
    budget_s: float = 3.0
    min_sample_s: float = 0.02
    settle_s: float = 0.3
    guard_s: int = 120
    stat: str = "median"
    cold_runs: int = 3


@dataclass
class Row:
    """One line of the table: a label, and per contender a function giving ms per call.

    `flops` (per call) adds a GFLOP/s figure; `unit` "us" prints microseconds per call;
    `reference` names the entry the "vs NumPy" column divides by (NumPy unless a row says).
    """

    label: str
    measures: dict[str, Measure]
    flops: float | None = None
    unit: str = "ms"
    results: dict[str, Result] = field(default_factory=dict)
    reference: str = "numpy"
    note: str = ""   # printed after the label (not part of it: the baseline keys on labels)


def optional(name: str) -> Any:
    """The module `name`, or None when it is not installed (or fails to import)."""
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001  (a broken install counts as absent)
        return None


def available(name: str) -> bool:
    """Whether module `name` is installed (without importing it)."""
    return importlib.util.find_spec(name) is not None


@functools.cache
def fgrad_backends() -> tuple[str, ...]:
    """The fgrad jit backends present here: numpy always, llvm/opencl when registered (only
    those named in FGRAD_BENCH_BACKENDS, comma-separated, when it is set)."""
    from fgrad.transforms import executables
    try:
        import fgrad.lower  # noqa: F401  registers the native compilers
    except Exception as exc:  # noqa: BLE001  (reported in the header; numpy still runs)
        LOWER_ERROR.append(short_error(exc))
    found = ("numpy",) + tuple(b for b in ("llvm", "opencl") if b in executables.COMPILERS)
    wanted = os.environ.get("FGRAD_BENCH_BACKENDS", "")  # e.g. "llvm": a shorter run
    return tuple(b for b in found if b in wanted.split(",")) if wanted else found


def fgrad_place(backend: str, tree: Any) -> Any:
    """`tree`'s Tensors, moved to the OpenCL device for the opencl backend (if they can be)."""
    if backend != "opencl":
        return tree
    import fgrad
    try:
        return fgrad.tree_util.tree_map(lambda t: t.to("CL"), tree)
    except Exception:  # noqa: BLE001  (no device placement: inputs stay on the host)
        return tree


def fgrad_sync(out: Any) -> Any:
    """Wait for every Tensor leaf of `out`, as JAX's `block_until_ready` does: device
    (OpenCL) arrays wait for their queue and stay on the device. A host Tensor is ready when
    it is returned: checked first, so that the harness adds nothing to a tiny call (W7)."""
    import fgrad
    if type(out) is fgrad.Tensor and out.device == "CPU":
        return out
    return fgrad.block_until_ready(out)


class Timeout(Exception):
    """A case ran past the per-case time guard."""


def _raise_timeout(signum: int, frame: Any) -> None:
    raise Timeout("over the per-case time guard (see Settings.guard_s)")


def guarded(fn: Callable[[], Result], seconds: int) -> Result:
    """fn() with an alarm after `seconds` (it fires once Python code runs again)."""
    old = signal.signal(signal.SIGALRM, _raise_timeout)
    signal.alarm(seconds)
    try:
        return fn()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _seconds(call: Call, inner: int) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        call()
    return (time.perf_counter() - start) / inner


def timed(factory: Callable[[], Call], settings: Settings, inner: int | None = None
          ) -> Measure:
    """A Measure: build the call, warm it up, then the median (or min) ms of timed samples.

    A sample is `inner` calls back to back, by default as many as make it last
    `settings.min_sample_s` (as `timeit` sizes its loops: a one-call sample of a
    sub-millisecond case measured mostly the machine's noise and the first call after a
    pause). The number of samples shrinks (down to one) so that a slow case stays within
    the per-case budget.
    """
    def measure() -> float:
        call = factory()
        time.sleep(settings.settle_s)   # other libraries' worker threads stop spinning
        call()
        loop = inner
        if loop is None:
            first = _seconds(call, 1)
            loop = max(1, min(MAX_INNER, round(settings.min_sample_s / max(first, 1e-9))))
        samples = [_seconds(call, loop)]
        more = min(settings.repeats - 1, int(settings.budget_s / (samples[0] * loop)))
        samples += [_seconds(call, loop) for _ in range(max(0, more))]
        pick = min if settings.stat == "min" else statistics.median
        return pick(samples) * 1e3
    return measure


def interleaved(factories: dict[str, Callable[[], Call]], settings: Settings
                ) -> dict[str, Measure]:
    """Measures of calls timed side by side: every round takes one sample of each in turn,
    so the machine's drift over the case (other load, clock changes) moves them alike and
    their ratio is steadier than that of two cases timed minutes apart. The first measure
    run times them all; the first call gives its own median (or min), each other one that
    times the median over rounds of its sample / the first's sample of the same round (a
    round's drift cancels in its ratio; two medians taken apart let one noisy round move
    the ratio)."""
    results: dict[str, float] = {}

    def run_all() -> None:
        calls = {name: factory() for name, factory in factories.items()}
        for call in calls.values():
            call()
        time.sleep(settings.settle_s)
        first = max(_seconds(call, 1) for call in calls.values())
        loop = max(1, min(MAX_INNER, round(settings.min_sample_s / max(first, 1e-9))))
        rounds = max(1, min(3 * settings.repeats,
                            int(settings.budget_s / (first * loop * len(calls)))))
        samples: dict[str, list[float]] = {name: [] for name in calls}
        for r in range(rounds):   # the order turns every round: no call always goes first
            for name, call in (list(calls.items())[::-1] if r % 2 else calls.items()):
                samples[name].append(_seconds(call, loop))
        pick = min if settings.stat == "min" else statistics.median
        results.update({name: pick(s) * 1e3 for name, s in samples.items()})
        first_name = next(iter(calls))
        for name in list(calls)[1:]:   # its time: the first's, times the paired ratio
            ratio = statistics.median(a / b for a, b in zip(samples[name],
                                                             samples[first_name]))
            results[name] = results[first_name] * ratio

    def measure_of(name: str) -> Measure:
        def measure() -> float:
            if name not in results:
                run_all()
            return results.pop(name)
        return measure
    return {name: measure_of(name) for name in factories}


def short_error(exc: BaseException) -> str:
    """'error: <type>: <first line of the message>', cut to a table cell."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return "error: " + (text if len(text) <= 70 else text[:67] + "...")


def run_row(row: Row, settings: Settings) -> Row:
    """Fill `row.results`; an exception becomes an "error: ..." cell, never a crash.

    The measures (and the data they hold) are dropped afterwards.
    """
    for name, measure in row.measures.items():
        try:
            row.results[name] = guarded(measure, settings.guard_s)
        except Exception as exc:  # noqa: BLE001
            row.results[name] = short_error(exc)
    row.measures = {}
    return row


def ratios(row: Row, name: str) -> tuple[float | None, float | None]:
    """(time / NumPy time (the row's reference), time / fastest anchor time); None where
    either is missing."""
    value = row.results.get(name)
    if not isinstance(value, float):
        return None, None
    ref = row.results.get(row.reference)
    anchors = [v for k, v in row.results.items() if k in ANCHORS and isinstance(v, float)]
    vs_numpy = value / ref if isinstance(ref, float) else None
    return vs_numpy, (value / min(anchors) if anchors else None)


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (platform.processor() elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _simd() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return ""
    return " (AVX-512)" if " avx512f" in text else " (AVX2)" if " avx2" in text else ""


def _versions() -> list[str]:
    torch, jax = optional("torch"), optional("jax")
    out = [f"python {platform.python_version()}", f"numpy {np.__version__}"]
    out.append(f"torch {torch.__version__} ({torch.get_num_threads()} threads)" if torch
               else "torch absent")
    out.append(f"jax {jax.__version__} ({jax.devices()[0].platform})" if jax else "jax absent")
    backends = ", ".join(fgrad_backends())
    out.append(f"fgrad backends: {backends}" + "".join(f" (fgrad.lower {e})" for e in LOWER_ERROR))
    return out


def header(quick: bool, stat: str) -> list[str]:
    """The machine, versions and thread counts, as printed above the table."""
    pinned = os.environ.get("FGRAD_BENCH_THREADS")
    threads = f"threads pinned to {pinned}" if pinned else "library default threads"
    return [f"machine: {cpu_model()}{_simd()}, {os.cpu_count()} cores, {platform.system()}",
            "versions: " + ", ".join(_versions()),
            (f"mode: {'quick' if quick else 'full'}, {threads}; {stat} per call after warm-up; "
             "ratio < 1: faster than the reference")]
