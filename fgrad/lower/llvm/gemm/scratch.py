"""How generated code reports a failed allocation: one process-wide failure record.

Native routines take their scratch memory from libc: the GEMM's packing buffers (driver.py,
prepack.py), a sort's or top_k's rows of int32 (llvm/sequences.py, kernels/selection.py),
LAPACK's copies and workspaces (llvm/lapack.py). Where libc returns NULL (a huge sort on a
machine without the memory, strict overcommit, `ulimit -v`), a routine must not write
through it: it frees what it already took, records the failure here and returns at once,
before any loop (`bail_if_null`). A routine whose threads wait on each other publishes a
stand-in instead, so that every thread agrees (prepack.py's NO_BLOCK, claimed.py's
NO_COUNTERS).

The record, `FAILURES`: four i64 of this process (a ctypes array; MCJIT resolves its
address as `SYMBOL`, registered when this module is imported, before any code that names
it is linked): [COUNT] failed allocations so far (never reset), [SITE] the code in `SITES`
of the latest (the primitive its routine computes), [BYTES] the bytes it asked for. The
Python side (llvm/dispatch.py) reads COUNT before and after each native call (a segment
entry returns how much it moved during the call: threads.render_entry); a change means a
routine returned early and the call raises MemoryError instead of returning its outputs.
One record for the process: a call that runs while another thread's call fails raises too
(never silently returns what a failed routine did not write).
"""
from __future__ import annotations

import ctypes
from collections.abc import Sequence

import llvmlite.binding as llvm
from llvmlite import ir

I64 = ir.IntType(64)
I8P = ir.IntType(8).as_pointer()
SYMBOL = "fgrad_failures"
COUNT, SITE, BYTES = 0, 1, 2
# the primitive whose routine failed (the message names it); the codes are stored by
# generated code, so a code never changes meaning
SITES = {"sort": 1, "top_k": 2, "dot_general": 3, "cholesky": 4, "triangular_solve": 5,
         "lu": 6, "qr": 7, "svd": 8}

FAILURES = (ctypes.c_int64 * 4)()
# the record as Python reads it on every native call: COUNT is VIEW[0] (~19 ns a read)
VIEW = memoryview(FAILURES).cast("B").cast("q")
llvm.add_symbol(SYMBOL, ctypes.addressof(FAILURES))


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def failures_global(module: ir.Module) -> ir.GlobalVariable:
    """The module's declaration of the failure record (`SYMBOL`, [4 x i64])."""
    found = module.globals.get(SYMBOL)
    if found is None:
        found = ir.GlobalVariable(module, ir.ArrayType(I64, 4), name=SYMBOL)
    return found


def failure_count(b: ir.IRBuilder) -> ir.Value:
    """Emit: the record's COUNT now (i64, acquire)."""
    record = failures_global(b.module)
    return b.load_atomic(b.gep(record, [_c(0), _c(COUNT)], inbounds=True), "acquire", 8)


def record_failure(b: ir.IRBuilder, site: str, nbytes: ir.Value) -> None:
    """Emit: the record's SITE and BYTES = `site`'s code and `nbytes` (i64), then COUNT += 1
    (release: a thread that sees the count sees the rest)."""
    record = failures_global(b.module)

    def at(i: int) -> ir.Value:
        return b.gep(record, [_c(0), _c(i)], inbounds=True)
    b.store_atomic(nbytes, at(BYTES), "monotonic", 8)
    b.store_atomic(_c(SITES[site]), at(SITE), "monotonic", 8)
    b.atomic_rmw("add", at(COUNT), _c(1), "release")


def is_null(b: ir.IRBuilder, pointer: ir.Value) -> ir.Value:
    """i1: `pointer` is NULL."""
    return b.icmp_unsigned("==", pointer, ir.Constant(pointer.type, None))


def bail_if_null(b: ir.IRBuilder, pointers: Sequence[ir.Value], free: ir.Function,
                 site: str, nbytes: ir.Value, taken: Sequence[ir.Value] = ()) -> None:
    """Emit: when any of `pointers` (from malloc-like calls) is NULL, free each of them and
    of `taken` (memory allocated before; free(NULL) does nothing), record the failure
    (`nbytes` requested) and return (a void function). The builder continues where all
    of them were allocated."""
    failed = is_null(b, pointers[0])
    for pointer in pointers[1:]:
        failed = b.or_(failed, is_null(b, pointer))
    with b.if_then(failed, likely=False):
        for pointer in [*taken, *pointers]:
            b.call(free, [b.bitcast(pointer, free.function_type.args[0])])
        record_failure(b, site, nbytes)
        b.ret_void()
