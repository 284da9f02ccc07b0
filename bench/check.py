"""The committed baseline of fgrad/NumPy ratios, the regression check and the busy core.

In: measured Rows (bench/run.py). Out: `write_baseline` (per workload label and fgrad
backend, time / NumPy time, into baseline.json beside this file), `regressions` (the cells
whose ratio is at least `FACTOR` times the baseline's: a workload that got >= 1.5x worse
relative to NumPy measured in the same run; `confirmed` keeps those flagged again when
their workloads are measured once more) and `busy_core()`, a process that keeps one
core busy while the workloads run (`--contended`). Ratios to NumPy, not times, are stored:
NumPy runs beside fgrad in the same run, so machine load cancels to first order.
"""
from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Iterator
from contextlib import contextmanager

from harness import Row, ratios

BASELINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "baseline.json")
FACTOR = 1.5
CHECKED = ("fgrad-llvm", "fgrad-numpy")


def row_ratios(rows: list[Row]) -> dict[str, float]:
    """`label | contender` -> time / NumPy time, for the checked fgrad contenders."""
    found = {}
    for row in rows:
        for name in CHECKED:
            vs_numpy, _ = ratios(row, name)
            if vs_numpy is not None:
                found[f"{row.label} | {name}"] = round(vs_numpy, 4)
    return found


def load_baseline(path: str = BASELINE) -> dict[str, float]:
    """The committed ratios ({} when there is no baseline file)."""
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)["ratios"]


def write_baseline(rows: list[Row], note: str, path: str = BASELINE) -> None:
    """Merge this run's ratios into the baseline file (other workloads keep theirs)."""
    merged = {**load_baseline(path), **row_ratios(rows)}
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"note": note, "ratios": dict(sorted(merged.items()))}, f, indent=1)
        f.write("\n")


def regressions(rows: list[Row], baseline: dict[str, float],
                factor: float = FACTOR) -> list[str]:
    """One line per measured cell whose ratio to NumPy is >= factor x the baseline's."""
    return list(flagged(rows, baseline, factor).values())


def flagged(rows: list[Row], baseline: dict[str, float],
            factor: float = FACTOR) -> dict[str, str]:
    """`regressions` keyed by cell (`label | contender`)."""
    lines = {}
    for key, ratio in row_ratios(rows).items():
        base = baseline.get(key)
        if base is not None and ratio >= factor * base:
            lines[key] = (f"REGRESSION {key}: {ratio:.3g}x NumPy, baseline {base:.3g}x "
                          f"({ratio / base:.2f}x worse)")
    return lines


def confirmed(first: dict[str, str], again: dict[str, str]) -> list[str]:
    """The cells flagged in a run and again when their workloads were measured once more
    (`bench/run.py --check`): a flag from one noisy measurement does not fail the check
    (W7's NumPy reference, one call of ~1 us, read 0.7 us in one run and 1.3 in the next,
    which moved fgrad's ratio past 1.5x its baseline with fgrad unchanged)."""
    return [f"{line} (re-measured: {again[key][len(f'REGRESSION {key}: '):]})"
            for key, line in first.items() if key in again]


def _spin() -> None:
    while True:
        pass


@contextmanager
def busy_core() -> Iterator[None]:
    """Keep one core busy (a spinning child process) for the duration of the block."""
    child = multiprocessing.get_context("spawn").Process(target=_spin, daemon=True)
    child.start()
    try:
        yield
    finally:
        child.terminate()
        child.join()
