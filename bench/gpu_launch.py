"""Where the per-call time of a launch-bound OpenCL step goes on a GPU (W5 and W9 steps).

    python bench/gpu_launch.py          # a markdown table, milliseconds per call (median)
    python bench/gpu_launch.py quick    # its first row only

Each step runs as the bench runs it (bench/mlp.py, bench/transformer.py), waiting for its
results in three ways, then again with a JAX GPU context in the process and after fgrad's
llvm backend ran (the bench's order: its CPU thread pool has just worked):
- "tree wait": `fgrad.block_until_ready` over the outputs (each device's queue once);
- "wait per leaf": every output leaf finishes the queue (what the bench did before);
- "no wait": nothing waits; the queue fills, so this is the device-bound rate.
"""
from __future__ import annotations

import statistics
import sys
import time
from typing import Any, Callable

import mlp
import transformer
from fgrad import tree_util

import fgrad


def _per_leaf(out: Any) -> Any:
    for leaf in tree_util.tree_leaves(out):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return out


WAITS: dict[str, Callable[[Any], Any]] = {
    "tree wait": fgrad.block_until_ready, "wait per leaf": _per_leaf, "no wait": lambda o: o}


def _median_ms(call: Callable[[], Any], calls: int) -> float:
    for _ in range(3):
        call()
    laps = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        fgrad.block_until_ready(call())
        laps.append((time.perf_counter() - start) / (calls + 1))
    return statistics.median(laps) * 1e3


def _steps() -> dict[str, Callable[[], Callable[[], Any]]]:
    return {"W5": mlp.w5_factories(256)["fgrad-opencl"],
            "W9": transformer.w9_factories()["fgrad-opencl"]}


def _row(label: str, calls: int) -> None:
    cells = []
    for name, factory in _steps().items():
        for wait_name, wait in WAITS.items():
            mlp.fgrad_sync = transformer.fgrad_sync = wait  # the factories' wait, by name
            cells.append(f"{_median_ms(factory(), calls):.3f}")
    print(f"| {label} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    """Print the table."""
    heads = [f"{step} {wait}" for step in ("W5", "W9") for wait in WAITS]
    print("| process state, ms per call | " + " | ".join(heads) + " |")
    print("|---" * (len(heads) + 1) + "|")
    _row("fgrad only", 50)
    if sys.argv[1:2] == ["quick"]:
        return
    try:
        import jax
        jax.numpy.ones(4).block_until_ready()
        _row("with a JAX GPU context", 50)
    except Exception as err:  # noqa: BLE001
        print(f"(no JAX: {err})")
    llvm = transformer.w9_factories()["fgrad-llvm"]()
    for _ in range(10):
        llvm()
    _row("right after fgrad-llvm W9 calls", 50)


if __name__ == "__main__":
    sys.exit(main())
