"""How long one CPU takes to see a cache line another CPU wrote: the machine's state for
every 2-thread row of the bench.

Two threads, pinned to the first two CPUs this process may use, pass a counter back and
forth (each waits for the other's value, then writes the next). On this project's 2-core
VM the one-way time reads ~40 ns when the host runs both vCPUs on cores that share an L3,
and ~170-200 ns for stretches of seconds to minutes when it puts them on different L3s;
there the W4 forward+backward step ran 1.4-2x slower (data written by one thread and read
by the other crosses between the caches). Run: python bench/handoff.py
"""
from __future__ import annotations

import ctypes
import functools
import os
import statistics
import threading
import time
from collections.abc import Callable

import llvmlite.binding as llvm

from fgrad.lower.llvm import target

SPLIT_NS = 150   # slower one-way handoffs: most likely CPUs on different L3s (a 16-core
# Xeon's mesh read 84-122 ns within its one L3)
ROUNDS = 50_000

PROBE_IR = """
define void @pass_counter(i64* %word, i64 %rounds, i64 %me) {
entry:
  br label %next
next:
  %i = phi i64 [0, %entry], [%i2, %wrote]
  %more = icmp slt i64 %i, %rounds
  br i1 %more, label %wait, label %done
wait:
  %twice = shl i64 %i, 1
  %want = add i64 %twice, %me
  %seen = load atomic i64, i64* %word acquire, align 8
  %mine = icmp eq i64 %seen, %want
  br i1 %mine, label %wrote_it, label %wait
wrote_it:
  %value = add i64 %want, 1
  store atomic i64 %value, i64* %word release, align 8
  br label %wrote
wrote:
  %i2 = add i64 %i, 1
  br label %next
done:
  ret void
}
"""
_ENGINE: list[object] = []   # keeps the probe's code alive


@functools.cache
def _probe() -> Callable[[int, int, int], None]:
    """The compiled probe, built once per process (the bench measures before every row)."""
    module = llvm.parse_assembly(PROBE_IR)
    engine = llvm.create_mcjit_compiler(module, target.new_machine())
    engine.finalize_object()
    _ENGINE.append(engine)
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(
        engine.get_function_address("pass_counter"))   # ctypes drops the GIL


def measure(repeats: int = 3) -> float | None:
    """Median one-way handoff in ns between the first two usable CPUs (None on one CPU)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    run = _probe()
    words = (ctypes.c_int64 * 16)()
    word = ctypes.addressof(words) + 64   # a cache line of its own
    mine = os.sched_getaffinity(0)
    times = []
    try:
        os.sched_setaffinity(0, {cpus[0]})
        for _ in range(repeats):
            words[8] = 0

            def other() -> None:
                os.sched_setaffinity(0, {cpus[1]})
                run(word, ROUNDS, 1)

            partner = threading.Thread(target=other)
            partner.start()
            start = time.perf_counter()
            run(word, ROUNDS, 0)
            partner.join()
            times.append((time.perf_counter() - start) / (2 * ROUNDS) * 1e9)
    finally:
        os.sched_setaffinity(0, mine)
    return statistics.median(times)


def describe(ns: float | None) -> str:
    """One line for the bench's header."""
    if ns is None:
        return "cache-line handoff: one CPU"
    where = (" (likely different L3s: 2-thread rows of memory-heavy steps run slower)"
             if ns > SPLIT_NS else "")
    return f"cache-line handoff between CPUs: {ns:.0f} ns one way{where}"


def split_note(before: float | None, after: float | None) -> str:
    """A workload row's note when the CPUs looked split before or after it ('' if not)."""
    seen = [ns for ns in (before, after) if ns is not None]
    if not seen or max(seen) <= SPLIT_NS:
        return ""
    return f"CPUs likely on different L3s: handoff {before:.0f} / {after:.0f} ns"


if __name__ == "__main__":
    print(describe(measure()))
