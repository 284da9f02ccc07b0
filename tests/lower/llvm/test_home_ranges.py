"""How a parallel part's threads claim chunks (threads.render_part): each thread from its
own contiguous home range first, then the others' in turn; every chunk exactly once, also
when threads are missing, late, or more than the ranges; `ordered` calls strictly in order."""
from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

from fgrad.lower.llvm import target
from fgrad.lower.llvm.threads import (HOME_RANGES, PART_ENTRY, POOL, Part, new_state,
                                      render_part)

I64 = ir.IntType(64)
_KEEP: list[object] = []   # engines whose code the entries run


def _logging_part(chunks: list[tuple[int, int, int]], ordered: frozenset[int] = frozenset()):
    """A parallel part of len(chunks) calls; each chunk appends (call, first iteration,
    thread) to the log in buffers[0], at the position counted in buffers[1]."""
    module = ir.Module(name="home_ranges")
    module.triple, module.data_layout = target.triple_and_layout()

    def emit(b: ir.IRBuilder, n: int, chunk, line=None) -> None:
        buffers, thread = b.function.args[0], b.function.args[1]
        log = b.bitcast(b.load(b.gep(buffers, [ir.Constant(I64, 0)])), I64.as_pointer())
        count = b.bitcast(b.load(b.gep(buffers, [ir.Constant(I64, 1)])), I64.as_pointer())
        at = b.mul(b.atomic_rmw("add", count, ir.Constant(I64, 1), "monotonic"),
                   ir.Constant(I64, 3))
        first = chunk[0] if chunk is not None else ir.Constant(I64, -1)
        for k, value in enumerate((ir.Constant(I64, n), first, thread)):
            b.store(value, b.gep(log, [b.add(at, ir.Constant(I64, k))]))

    render_part(module, "part", Part(0, len(chunks), True), chunks, emit, ordered)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)),
                                        target.new_machine())
    engine.finalize_object()
    _KEEP.append(engine)
    address = engine.get_function_address("part")
    return PART_ENTRY(address), address


def _run_alone(entry, calls: int, thread: int, threads: int) -> np.ndarray:
    """The part run by one thread numbered `thread` of `threads`; the log's rows."""
    log = np.full((4096, 3), -7, np.int64)
    count = np.zeros(1, np.int64)
    table = (ctypes.c_void_p * 2)(log.ctypes.data, count.ctypes.data)
    entry(table, thread, new_state(calls, threads))
    return log[:count[0]]


def test_a_thread_claims_its_home_range_first_then_the_others_in_turn() -> None:
    entry, _ = _logging_part([(10, 1, 10)])
    starts = _run_alone(entry, 1, thread=1, threads=2)[:, 1].tolist()
    assert starts == [5, 6, 7, 8, 9, 0, 1, 2, 3, 4]
    starts = _run_alone(entry, 1, thread=0, threads=3)[:, 1].tolist()
    assert starts == list(range(10))   # ranges [0, 3), [3, 6), [6, 10) from range 0 on
    starts = _run_alone(entry, 1, thread=2, threads=3)[:, 1].tolist()
    assert starts == [6, 7, 8, 9, 0, 1, 2, 3, 4, 5]


def test_more_threads_than_ranges_or_chunks_still_claim_each_chunk_once() -> None:
    entry, _ = _logging_part([(3, 4, 11), (40, 1, 40)])
    for thread, threads in ((0, 1), (5, 2), (7, 8), (13, 64), (2, 0)):
        rows = _run_alone(entry, 2, thread, threads)
        assert sorted(rows[rows[:, 0] == 0, 1].tolist()) == [0, 4, 8]
        assert sorted(rows[rows[:, 0] == 1, 1].tolist()) == list(range(40))
    rows = _run_alone(entry, 2, thread=7, threads=8)
    home = 7 % min(8, HOME_RANGES)   # thread 7 of 8 starts at range 1 of six
    assert rows[rows[:, 0] == 1, 1][0] == home * 40 // HOME_RANGES


def test_an_ordered_call_claims_in_order_whatever_the_thread() -> None:
    entry, _ = _logging_part([(10, 1, 10), (6, 1, 6)], ordered=frozenset({1}))
    rows = _run_alone(entry, 2, thread=1, threads=2)
    assert rows[rows[:, 0] == 0, 1].tolist() == [5, 6, 7, 8, 9, 0, 1, 2, 3, 4]
    assert rows[rows[:, 0] == 1, 1].tolist() == list(range(6))


@pytest.mark.parametrize("threads", [2, 3, 4])
def test_threads_of_the_pool_split_every_call_exactly(threads: int) -> None:
    """Run on the pool's threads many times: each chunk of each call runs once, and
    chunks of call j start only after every chunk of call j - 1 (the log's order)."""
    chunks = [(64, 16, 1000), (7, 1, 7), (1, 0, 0), (33, 3, 99)]
    entry, address = _logging_part(chunks)
    for _ in range(200):
        log = np.full((4096, 3), -7, np.int64)
        count = np.zeros(1, np.int64)
        table = (ctypes.c_void_p * 2)(log.ctypes.data, count.ctypes.data)
        POOL.run(entry, address, table, new_state(len(chunks), threads), threads)
        rows = log[:count[0]]
        assert rows[:, 0].tolist() == sorted(rows[:, 0].tolist())
        for n, (chunk_count, size, _) in enumerate(chunks):
            starts = sorted(rows[rows[:, 0] == n, 1].tolist())
            assert starts == ([c * size for c in range(chunk_count)] if size else [-1])
