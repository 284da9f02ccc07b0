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

The GEMM driver's packing buffers are kept between calls (`take_block` / `give_block`):
freed, a block of a few MiB went back to the system and the next call took a page fault per
4 KiB of it again (a 1024^3 product: 1024 faults and ~20% of its time on each of its first
calls after compiling, until glibc's thresholds adapted). `BLOCKS` (symbol `BLOCKS_SYMBOL`)
holds up to `BLOCK_SLOTS` free blocks, each an address or 0 beside the thread that gave it
(a hint: a thread takes its own blocks first, which are likely still in its core's caches;
taken crosswise, each call's packing wrote into lines the other core held); a block starts
with a 64-byte header holding its capacity. Taking exchanges a slot with 0 (a block too
small is freed); giving back compare-and-swaps it into an empty slot, else frees it; so two
calls never get the same block. A block of `HUGE` bytes or more is 2 MiB aligned and
advised as huge pages (`madvise`, where the kernel's transparent huge pages allow it): a
2048^3 product's 8 MiB B panels then take 4 TLB entries instead of 2048 (fastest of 12
calls, alternating processes: 79.5-80.3 against 79.8-81.9 ms; the W5 step ~1% faster).
`release_blocks` (registered with `fgrad.clear_caches`) frees the cached ones.
"""
from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Sequence

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

BLOCKS_SYMBOL = "fgrad_gemm_blocks"
BLOCK_SLOTS = 8
HEADER = 64
HUGE = 1 << 21          # blocks this large are 2 MiB aligned and asked for as huge pages
MADV_HUGEPAGE = 14

FAILURES = (ctypes.c_int64 * 4)()
# the record as Python reads it on every native call: COUNT is VIEW[0] (~19 ns a read)
VIEW = memoryview(FAILURES).cast("B").cast("q")
llvm.add_symbol(SYMBOL, ctypes.addressof(FAILURES))
BLOCKS = (ctypes.c_int64 * (2 * BLOCK_SLOTS))()   # per slot: the last giver, the block
llvm.add_symbol(BLOCKS_SYMBOL, ctypes.addressof(BLOCKS))


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def failures_global(module: ir.Module) -> ir.GlobalVariable:
    """The module's declaration of the failure record (`SYMBOL`, [4 x i64])."""
    return _global(module, SYMBOL, 4)


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


def _global(module: ir.Module, name: str, count: int) -> ir.GlobalVariable:
    """The module's declaration of the process-wide [count x i64] array `name`."""
    found = module.globals.get(name)
    if found is None:
        found = ir.GlobalVariable(module, ir.ArrayType(I64, count), name=name)
    return found


def declared(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    """The module's declaration of the external function `name` (libc's, or an LLVM
    intrinsic), added on first use."""
    found = module.globals.get(name)
    return found if found is not None else ir.Function(
        module, ir.FunctionType(ret, args), name=name)


def take_block(b: ir.IRBuilder, nbytes: ir.Value) -> ir.Value:
    """Emit: a 64-byte aligned i8* of at least `nbytes` (i64) bytes, a cached block or a
    new one (NULL when libc has no memory); return it with `give_block`."""
    return b.call(_block_function(b.module, "take"), [nbytes])


def give_block(b: ir.IRBuilder, block: ir.Value) -> None:
    """Emit: return `block` (from `take_block`, or NULL) to the cache, or free it."""
    b.call(_block_function(b.module, "give"), [block])


def _block_function(module: ir.Module, which: str) -> ir.Function:
    name = f"fgrad_{which}_block"
    found = module.globals.get(name)
    if found is not None:
        return found
    if which == "take":
        fn = ir.Function(module, ir.FunctionType(I8P, [I64]), name=name)
        _define_take(fn)
    else:
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I8P]), name=name)
        _define_give(fn)
    fn.linkage = "internal"
    return fn


def _slot(b: ir.IRBuilder, i: ir.Value, field: int = 1) -> ir.Value:
    """Slot i's block (field 1) or the thread that gave it last (field 0)."""
    table = _global(b.module, BLOCKS_SYMBOL, 2 * BLOCK_SLOTS)
    return b.gep(table, [_c(0), b.add(b.mul(i, _c(2)), _c(field))], inbounds=True)


def _over_slots(b: ir.IRBuilder, body: Callable[[ir.Value, ir.Value], None]) -> None:
    """Emit `body(slot, any_owner)` for every slot, first with any_owner false (the
    calling thread's own slots), then true."""
    fn = b.function
    for any_owner in (False, True):
        before, look = b.block, fn.append_basic_block("slot")
        after = fn.append_basic_block("slots.done")
        b.branch(look)
        b.position_at_end(look)
        i = b.phi(I64, name="slot")
        i.add_incoming(_c(0), before)
        body(i, ir.Constant(ir.IntType(1), any_owner))
        following = b.add(i, _c(1))
        i.add_incoming(following, b.block)
        b.cbranch(b.icmp_signed("<", following, _c(BLOCK_SLOTS)), look, after)
        b.position_at_end(after)


def _thread_id(b: ir.IRBuilder) -> ir.Value:
    return b.call(declared(b.module, "pthread_self", I64, []), [])


def _define_take(fn: ir.Function) -> None:
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    free = declared(b.module, "free", ir.VoidType(), [I8P])
    need = b.and_(b.add(fn.args[0], _c(HEADER - 1)), _c(-HEADER))
    me = _thread_id(b)

    def take(i: ir.Value, any_owner: ir.Value) -> None:
        mine = b.icmp_signed("==", b.load_atomic(_slot(b, i, 0), "monotonic", 8), me)
        with b.if_then(b.or_(any_owner, mine)):
            raw = b.atomic_rmw("xchg", _slot(b, i), _c(0), "acq_rel")
            with b.if_then(b.icmp_signed("!=", raw, _c(0))):
                big = b.icmp_signed(">=", b.load(b.inttoptr(raw, I64.as_pointer())), need)
                with b.if_then(big):
                    b.ret(b.inttoptr(b.add(raw, _c(HEADER)), I8P))
                b.call(free, [b.inttoptr(raw, I8P)])   # too small for this call: drop it
    _over_slots(b, take)
    aligned = declared(b.module, "aligned_alloc", I8P, [I64, I64])
    huge = b.icmp_signed(">=", need, _c(HUGE))
    size = b.add(need, _c(HEADER))
    size = b.select(huge, b.and_(b.add(size, _c(HUGE - 1)), _c(-HUGE)), size)
    fresh = b.call(aligned, [b.select(huge, _c(HUGE), _c(HEADER)), size])
    with b.if_then(is_null(b, fresh), likely=False):
        b.ret(fresh)
    with b.if_then(huge):
        advise = declared(b.module, "madvise", ir.IntType(32), [I8P, I64, ir.IntType(32)])
        b.call(advise, [fresh, size, ir.Constant(ir.IntType(32), MADV_HUGEPAGE)])
    b.store(need, b.bitcast(fresh, I64.as_pointer()))
    b.ret(b.gep(fresh, [_c(HEADER)], inbounds=True))


def _define_give(fn: ir.Function) -> None:
    """Into an empty slot this thread gave to last (the block is likely still in its
    core's caches when the same thread takes it next), else into any empty one."""
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    block = fn.args[0]
    with b.if_then(is_null(b, block), likely=False):
        b.ret_void()
    raw = b.sub(b.ptrtoint(block, I64), _c(HEADER))
    me = _thread_id(b)

    def give(i: ir.Value, any_owner: ir.Value) -> None:
        owner = _slot(b, i, 0)
        mine = b.icmp_signed("==", b.load_atomic(owner, "monotonic", 8), me)
        with b.if_then(b.or_(any_owner, mine)):
            swap = b.cmpxchg(_slot(b, i), _c(0), raw, "acq_rel", "monotonic")
            with b.if_then(b.extract_value(swap, 1)):
                b.store_atomic(me, owner, "monotonic", 8)
                b.ret_void()
    _over_slots(b, give)
    b.call(declared(b.module, "free", ir.VoidType(), [I8P]), [b.inttoptr(raw, I8P)])
    b.ret_void()


def release_blocks() -> None:
    """Free every cached block, each slot emptied by an atomic exchange in native code (a
    running call may take or give blocks meanwhile; blocks in use are never in a slot)."""
    if cached_blocks():
        _release_function()()


@functools.cache
def _release_function() -> Callable[[], None]:
    from fgrad.lower.llvm.engines import compiled_engine
    module = ir.Module(name="fgrad_release_blocks")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), []), name="fgrad_release_blocks")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    free = declared(module, "free", ir.VoidType(), [I8P])
    for i in range(BLOCK_SLOTS):
        raw = b.atomic_rmw("xchg", _slot(b, _c(i)), _c(0), "acq_rel")
        with b.if_then(b.icmp_signed("!=", raw, _c(0))):
            b.call(free, [b.inttoptr(raw, I8P)])
    b.ret_void()
    engine, _ = compiled_engine(module)
    address = engine.get_function_address("fgrad_release_blocks")
    call = ctypes.CFUNCTYPE(None)(address)
    return lambda: (engine, call())[1]   # the closure keeps the engine alive


def cached_blocks() -> int:
    """How many free blocks the cache holds now."""
    return sum(1 for i in range(BLOCK_SLOTS) if BLOCKS[2 * i + 1])
