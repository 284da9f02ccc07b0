"""The FMA peak this machine actually delivers, measured: the ceiling for the GEMM rows.

A loop of independent vector FMAs (more chains than the FMA latency times the FMA ports
needs) is built with llvmlite at the host's vector width and run on 1 thread, then on every
core at once. A VM's clock and its neighbours decide the figure; a data sheet's peak does
not. Run: python bench/peak.py
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable

import llvmlite.binding as llvm

from fgrad.lower.llvm import target

CHAINS = 12           # independent accumulators: covers 2 ports x 4-5 cycles of latency
FMAS_PER_THREAD = 40_000_000


def probe_ir(lanes: int) -> str:
    """The probe's LLVM IR: `float fma_loop(i64 n, float seed)`, n trips of CHAINS
    independent FMAs on `lanes`-wide float vectors."""
    vec = f"<{lanes} x float>"
    phis = "\n".join(f"  %a{i} = phi {vec} [{_start(lanes, i)}, %entry], [%n{i}, %loop]"
                     for i in range(CHAINS))
    fmas = "\n".join(f"  %n{i} = call {vec} @llvm.fma.v{lanes}f32({vec} %x, {vec} %y, "
                     f"{vec} %a{i})" for i in range(CHAINS))
    sums = "\n".join(f"  %s{i} = fadd {vec} %s{i - 1}, %n{i}" for i in range(1, CHAINS))
    return f"""
declare {vec} @llvm.fma.v{lanes}f32({vec}, {vec}, {vec})
define float @fma_loop(i64 %n, float %seed) {{
entry:
  %x0 = insertelement {vec} undef, float %seed, i32 0
  %x = shufflevector {vec} %x0, {vec} undef, <{lanes} x i32> zeroinitializer
  %y = fmul {vec} %x, %x
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i2, %loop]
{phis}
{fmas}
  %i2 = add i64 %i, 1
  %more = icmp slt i64 %i2, %n
  br i1 %more, label %loop, label %done
done:
  %s0 = fadd {vec} zeroinitializer, %n0
{sums}
  %r = extractelement {vec} %s{CHAINS - 1}, i32 {lanes - 1}
  ret float %r
}}"""


def _start(lanes: int, i: int) -> str:
    """A distinct start vector per chain (equal chains would be merged by the optimizer)."""
    return "<" + ", ".join(f"float {float(i if j == 0 else 0)}" for j in range(lanes)) + ">"


def measure(repeats: int = 5) -> dict[int, float]:
    """Best GFLOP/s over `repeats` runs, keyed by thread count (1 and every core)."""
    lanes = target.vector_bits() // 32
    module = llvm.parse_assembly(probe_ir(lanes))
    engine = llvm.create_mcjit_compiler(module, target.new_machine())
    engine.finalize_object()
    fn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64, ctypes.c_float)(
        engine.get_function_address("fma_loop"))    # ctypes drops the GIL during the call
    trips = FMAS_PER_THREAD // CHAINS
    flops = trips * CHAINS * lanes * 2
    found = {}
    for threads in sorted({1, os.cpu_count() or 1}):
        best = min(seconds_on_threads(fn, trips, threads) for _ in range(repeats))
        found[threads] = flops * threads / best / 1e9
    return found


def seconds_on_threads(fma_loop: Callable[[int, float], float], trips: int,
                       threads: int) -> float:
    """Wall time of `fma_loop(trips, seed)` run on `threads` threads at once."""
    workers = [threading.Thread(target=fma_loop, args=(trips, 0.999)) for _ in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - start


def describe(found: dict[int, float]) -> str:
    """One line: 'measured FMA peak (256-bit): 94 GFLOP/s on 1 thread, 187 on 2'."""
    parts = [f"{rate:.0f} GFLOP/s on 1 thread" if n == 1 else f"{rate:.0f} on {n}"
             for n, rate in sorted(found.items())]
    return f"measured FMA peak ({target.vector_bits()}-bit): " + ", ".join(parts)


def changed(before: dict[int, float], after: dict[int, float], tolerance: float = 0.15
            ) -> str:
    """'' when the all-core peak held within `tolerance` over a bench run, else a sentence
    saying the machine's capacity moved (another load on the host: the run's ratios mix
    two machines)."""
    cores = max(before)
    ratio = after[cores] / before[cores]
    if abs(ratio - 1) <= tolerance:
        return ""
    return (f"the {cores}-thread FMA peak moved from {before[cores]:.0f} to "
            f"{after[cores]:.0f} GFLOP/s during the run: something else shared the cores")


if __name__ == "__main__":
    print(describe(measure()))
