"""The pool's rescue of a worker taken off its CPU inside a part (fgrad/lower/llvm/pool.py).

In: the pool's control block and its workers block (one cache line per worker thread:
its thread id, whether it is inside the current part, whether the caller moved it). Out:
`fgrad_pool_rescue(ctl)`, which the caller runs while it waits for workers to leave a part,
and the worker's side of it (`enter_part`, `leave_part`).

Why: beside a busy process, a worker shares its CPU with it, and when the scheduler takes
the worker off inside a part (holding a claimed chunk or row block) the caller, done with
everything else, spun until the worker got its CPU back, a time slice later (1-5 ms; the W5
step beside a spinning process: the worker preempted ~190 times a second, the caller's CPU
busy 97% of the time but the step 1.7x its quiet time), though its CPU was the idle one. So
the caller, once it has waited `RESCUE_AFTER_CYCLES`, reads each inside worker's CPU clock
every few microseconds (the kernel answers for another thread of the process:
`clock_gettime` on the thread's CPU-time clock id); a worker whose clock stood still
between two readings in one part is not running. The caller moves it onto its own CPU
(`sched_setaffinity` on the worker's thread id: a queued task moves at once) and sleeps on
`CALLER_ASLEEP` until the last worker leaves (a futex wait with a timeout: a lost wake
costs at most `SLEEP_NS`). The worker, once out of the part, wakes the caller and re-pins
itself to its own CPU. Only pinned workers are moved (their thread id is in the block); a
worker whose clock moves is left alone, so a quiet machine, whose workers are never off
their CPU for long, does not pay for it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

if TYPE_CHECKING:   # pool.py imports this module
    from fgrad.lower.llvm.pool import _Builder

I64 = ir.IntType(64)
# control block words (line 3)
WORKERS_AT, WORKER_SLOTS, CALLER_ASLEEP, RESCUES, RESCUE_AFTER = 25, 26, 27, 28, 29
WORKER_LINE = 8   # i64 per worker thread in the workers block
TID, IN_PART, MOVED, CLOCK, CLOCK_PART = range(5)   # a worker's line (CLOCK*: the caller's)
RESCUE_AFTER_CYCLES = 130_000   # the caller waits ~50 us for workers before it looks
SLEEP_NS = 2_000_000    # the longest the caller sleeps before it looks again
SYS_CLOCK_GETTIME = 228   # x86-64 Linux


def _c(value: int, ty: ir.IntType = I64) -> ir.Constant:
    return ir.Constant(ty, value)


def worker_line(p: "_Builder", b: ir.IRBuilder, ctl: ir.Value, thread: ir.Value) -> ir.Value:
    """Emit: the address of `thread`'s line in the workers block (line 0, thread 0's, which
    no worker uses, for a thread past the block: its id stays 0, so it is never moved)."""
    base = b.inttoptr(b.load_atomic(p._slot(b, ctl, WORKERS_AT), "acquire", 8),
                      I64.as_pointer())
    slots = b.load_atomic(p._slot(b, ctl, WORKER_SLOTS), "acquire", 8)
    index = b.select(b.icmp_signed("<", thread, slots), thread, _c(0))
    return b.gep(base, [b.mul(index, _c(WORKER_LINE))], inbounds=True)


def forget_move(b: ir.IRBuilder, line: ir.Value, pinned: ir.Value) -> None:
    """Emit (a worker that sees a part): if the caller moved it after it last left a part
    (it had already looked), forget where it was pinned, so that `_follow_caller` pins it
    again."""
    moved = b.gep(line, [_c(MOVED)], inbounds=True)
    with b.if_then(b.icmp_signed("!=", b.load_atomic(moved, "acquire", 8), _c(0)),
                   likely=False):
        b.store_atomic(_c(0), moved, "release", 8)
        b.store(_c(-1), pinned)


def enter_part(b: ir.IRBuilder, line: ir.Value) -> None:
    """Emit (a worker, before it counts itself INSIDE): mark it inside the part."""
    b.store_atomic(_c(1), b.gep(line, [_c(IN_PART)], inbounds=True), "seq_cst", 8)


def leave_part(p: "_Builder", b: ir.IRBuilder, ctl: ir.Value, line: ir.Value,
               pinned: ir.Value, mask: ir.Value) -> None:
    """Emit (a worker, after it left INSIDE): wake a sleeping caller (the futex word
    cleared first: a caller between its look at INSIDE and its wait then does not sleep);
    if the caller moved this worker, pin it back to the CPU in `pinned`."""
    asleep = p._slot(b, ctl, CALLER_ASLEEP)
    with b.if_then(b.icmp_signed("!=", b.load_atomic(asleep, "seq_cst", 8), _c(0)),
                   likely=False):
        b.store_atomic(_c(0), asleep, "seq_cst", 8)
        b.call(p.futex, [_c(p.SYS_FUTEX), b.ptrtoint(asleep, I64),
                         _c(p.FUTEX_WAKE_PRIVATE), _c(1)])
    moved = b.gep(line, [_c(MOVED)], inbounds=True)
    with b.if_then(b.icmp_signed("!=", b.load_atomic(moved, "acquire", 8), _c(0)),
                   likely=False):
        b.store_atomic(_c(0), moved, "release", 8)
        home = b.load(pinned)
        with b.if_then(b.icmp_signed(">=", home, _c(0))):
            p.pin_to(b, _c(0), home, mask)


def mark_out(b: ir.IRBuilder, line: ir.Value) -> None:
    """Emit (a worker, before it leaves INSIDE): no longer inside the part."""
    b.store_atomic(_c(0), b.gep(line, [_c(IN_PART)], inbounds=True), "seq_cst", 8)


def rescue_function(p: "_Builder") -> ir.Function:
    """Define `i64 fgrad_pool_rescue(i64* ctl)` (module docstring): read the CPU clock of
    every worker inside the part and not moved yet; move each whose clock has not moved
    since the previous call for this part onto this thread's CPU (none where that CPU is
    past the affinity mask's room); return how many moved."""
    fn = ir.Function(p.module, ir.FunctionType(I64, [I64.as_pointer()]),
                     name="fgrad_pool_rescue")
    (ctl,) = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    stamp = b.alloca(I64, 2, name="stamp")
    mask = b.alloca(ir.ArrayType(I64, p.MASK_WORDS), name="mask")
    moved = b.alloca(I64, name="moved")
    b.store(_c(0), moved)
    part = b.zext(b.load_atomic(p._generation(b, ctl), "acquire", 4), I64)
    here = b.sext(b.call(p.getcpu, []), I64)
    known = b.and_(b.icmp_signed(">=", here, _c(0)),
                   b.icmp_signed("<", here, _c(64 * p.MASK_WORDS)))
    threads = b.select(known, b.load_atomic(p._slot(b, ctl, p.THREADS), "acquire", 8), _c(0))

    def one(t: ir.Value) -> None:
        line = worker_line(p, b, ctl, t)
        tid = b.load_atomic(line, "acquire", 8)
        inside = b.load_atomic(b.gep(line, [_c(IN_PART)], inbounds=True), "seq_cst", 8)
        moved_already = b.load_atomic(b.gep(line, [_c(MOVED)], inbounds=True), "acquire", 8)
        wanted = b.and_(b.icmp_signed("!=", tid, _c(0)), b.icmp_signed("!=", inside, _c(0)))
        with b.if_then(b.and_(wanted, b.icmp_signed("==", moved_already, _c(0)))):
            now = _cpu_clock(p, b, tid, stamp)
            seen, seen_part = (b.gep(line, [_c(i)], inbounds=True) for i in (CLOCK, CLOCK_PART))
            still = b.and_(b.icmp_signed("==", b.load(seen_part), part),
                           b.icmp_signed("==", b.load(seen), now))
            with b.if_else(still, likely=False) as (stood, ran):
                with stood:
                    b.store_atomic(_c(1), b.gep(line, [_c(MOVED)], inbounds=True),
                                   "seq_cst", 8)
                    p.pin_to(b, tid, here, mask)
                    b.store(b.add(b.load(moved), _c(1)), moved)
                with ran:
                    b.store(now, seen)
                    b.store(part, seen_part)
    from fgrad.lower.llvm.gemm.native import _loop   # the GEMM's loop emitter
    _loop(b, _c(1), threads, 1, one, "rescue")
    count = b.load(moved)
    b.atomic_rmw("add", p._slot(b, ctl, RESCUES), count, "monotonic")
    b.ret(count)
    return fn


def _cpu_clock(p: "_Builder", b: ir.IRBuilder, tid: ir.Value, stamp: ir.Value) -> ir.Value:
    """Emit: thread `tid`'s CPU time in nanoseconds, read through its CPU-time clock id;
    where the kernel refuses, the time-stamp counter (never the same twice: not still)."""
    clock_id = b.or_(b.shl(b.xor(tid, _c(-1)), _c(3)), _c(6))
    failed = b.call(p.futex, [_c(SYS_CLOCK_GETTIME), clock_id, b.ptrtoint(stamp, I64)])
    seconds, nanos = (b.load(b.gep(stamp, [_c(i)], inbounds=True)) for i in (0, 1))
    read = b.add(b.mul(seconds, _c(1_000_000_000)), nanos)
    return b.select(b.icmp_signed("==", failed, _c(0)), read, b.call(p.clock, []))


def sleep_until_left(p: "_Builder", b: ir.IRBuilder, ctl: ir.Value,
                     timeout: ir.Value) -> None:
    """Emit (the caller, after a rescue): sleep on CALLER_ASLEEP while workers are inside
    (`timeout`: a {seconds, nanoseconds} pair of SLEEP_NS)."""
    asleep = p._slot(b, ctl, CALLER_ASLEEP)
    b.store_atomic(_c(1), asleep, "seq_cst", 8)
    left = b.load_atomic(p._slot(b, ctl, p.INSIDE), "seq_cst", 8)
    with b.if_then(b.icmp_signed("!=", left, _c(0))):
        b.call(p.futex, [_c(p.SYS_FUTEX), b.ptrtoint(asleep, I64), _c(p.FUTEX_WAIT_PRIVATE),
                         _c(1), b.ptrtoint(timeout, I64), _c(0), _c(0)])
    b.store_atomic(_c(0), asleep, "seq_cst", 8)
