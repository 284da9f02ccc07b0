"""The llvm backend's thread pool: native workers that join a parallel part with no Python.

In: a parallel part's native entry (threads.render_part: `entry(table, thread, state)`),
its buffer table and fresh counters. Out: `POOL.run`, which runs the entry on the calling
thread and on every worker at once, and returns once no worker is inside it.

Why native: a worker that sleeps on a Python `Condition` needs the GIL to wake, to enter
the part and to leave it, and the caller sleeps on another `Condition` until it has left.
On the 2-core VM this project is measured on, that cost 30-70 us per parallel part: a
256K-element `x * 2 + 1` ran 150-180 us on two threads against 90-130 us on one. Here
each worker runs `fgrad_pool_worker`, one native loop entered once through ctypes (so it
holds no GIL), and the caller posts and joins a part in one native call, `fgrad_pool_run`.

The control block is an i64 array, one cache line per writer: line 0 the posted part
(`GENERATION`, a 32-bit futex word bumped per part, then entry, table, state, thread count
and `OPEN`); line 1 `INSIDE`, the workers inside the current part; line 2 `SLEEPERS`, the
workers asleep in the futex; line 3 `CALLER_CPU`, the CPU the caller ran on when it posted
the part (`_Builder._follow_caller` re-pins a worker off it). A worker spins on the
generation for `SPIN_CYCLES` of the time-stamp counter after its last part (parts of one
call follow each other closely), then sleeps in `futex(FUTEX_WAIT)`; the caller wakes
sleepers only when there are any. A worker enters a part by incrementing `INSIDE` and then
reading `OPEN`; the caller closes a part by clearing `OPEN` and then waits for `INSIDE` to
reach 0 (both sequentially consistent: each sees the other's write), so no worker touches a
part's table or counters after `run` returns. Correctness never waits on a worker (thread 0
claims every chunk if it must), so a second caller that finds the pool busy runs its part
alone.

Under contention a worker spins only `SHORT_SPIN_CYCLES`. One that spins between calls is,
to the scheduler, as busy as another process's thread on its core, so it is preempted inside
parts while the caller waits for it (a 256^3 product beside a busy process: 1.6-2.1x its
quiet time, against 1.1-1.4x with short spins); one that sleeps wakes with the scheduler's
credit and runs its part at once. But waking a halted virtual CPU is slow, so on a quiet
machine the long spin pays (the W5 step: 5.4 against 6.8 ms with short spins). Contention
is seen as a gap of `PREEMPTED_CYCLES` in the time-stamp counter between two reads of a spin
loop: a worker's between parts, or the caller's while it waits for workers to leave a part
(not the wait's length: a worker may be finishing a block of a large product). Either
writes `CONTENDED_UNTIL` (line 0's last word), a deadline `CONTENDED_HOLD_CYCLES` ahead;
until then, workers spin short. A quiet machine's own gaps (a virtual CPU's stolen time)
are rare: this VM showed one over 0.5 ms in 5 s of spinning, against ~90 per second beside
two busy processes, where a preempted thread waits 2-8 ms.

Lifetime: the compiled module and every control block are never freed, and `atexit` (or
dropping a pool) sets `SHUTDOWN` and joins the workers, so no worker runs freed code or
reads a freed block while the interpreter shuts down; a worker that starts after its pool
closed leaves at once. Other hosts (not x86-64 Linux) keep threads.py's Python pool.
"""
from __future__ import annotations

import atexit
import concurrent.futures
import ctypes
import os
import sys
import threading
import weakref
from typing import Any

import llvmlite.binding as llvm
from llvmlite import ir

from fgrad import flags
from fgrad.lower.llvm import disk_cache, target
from fgrad.lower.llvm import pool_rescue as rescue

I32, I64 = ir.IntType(32), ir.IntType(64)
I8PP = ir.IntType(8).as_pointer().as_pointer()
ENTRY_TYPE = ir.FunctionType(ir.VoidType(), [I8PP, I64, I64.as_pointer()])
GENERATION, ENTRY, TABLE, STATE, THREADS, OPEN, SHUTDOWN, CONTENDED_UNTIL = range(8)
INSIDE, SLEEPERS, CALLER_CPU = 8, 16, 24
CONTROL_WORDS = 32
SPIN_CYCLES = 200_000   # time-stamp counter ticks a worker spins before it sleeps (~80 us)
SHORT_SPIN_CYCLES = 10_000            # the same under contention (~4 us)
PREEMPTED_CYCLES = 2_600_000          # a gap that means a thread was preempted (~1 ms)
CONTENDED_HOLD_CYCLES = 2_600_000_000   # how long one such gap keeps spins short (~1 s)
SYS_FUTEX, FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 202, 128, 129   # x86-64 Linux
SYS_SCHED_YIELD, SYS_SCHED_SETAFFINITY = 24, 203
MASK_WORDS = 16   # the CPU mask a worker re-pins itself with: CPUs 0-1023
YIELD_EVERY = 256   # pauses between yields while the caller waits for workers to leave
WORKER_SLOTS = 64   # the least worker lines the workers block has room for


def native_pool_supported() -> bool:
    """Whether this host can run the native workers (x86-64 Linux: the futex call)."""
    return llvm.get_process_triple().startswith("x86_64") and sys.platform.startswith("linux")


def _c(v: int, ty: ir.IntType = I64) -> ir.Constant:
    return ir.Constant(ty, v)


class _Builder:
    """Emits the pool's functions into one module."""

    SYS_FUTEX, FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = (SYS_FUTEX, FUTEX_WAIT_PRIVATE,
                                                         FUTEX_WAKE_PRIVATE)
    MASK_WORDS, THREADS, INSIDE = MASK_WORDS, THREADS, INSIDE

    def __init__(self) -> None:
        self.module = ir.Module(name="fgrad_pool")
        self.module.triple, self.module.data_layout = target.triple_and_layout()
        declare = self._declare
        self.futex = declare("fgrad_syscall", ir.FunctionType(I64, [I64], var_arg=True))
        self.pause = declare("llvm.x86.sse2.pause", ir.FunctionType(ir.VoidType(), []))
        self.clock = declare("llvm.readcyclecounter", ir.FunctionType(I64, []))
        self.getcpu = declare("fgrad_sched_getcpu", ir.FunctionType(I32, []))

    def _declare(self, name: str, fty: ir.FunctionType) -> ir.Function:
        return ir.Function(self.module, fty, name=name)

    @staticmethod
    def _slot(b: ir.IRBuilder, ctl: ir.Value, i: int) -> ir.Value:
        return b.gep(ctl, [_c(i)], inbounds=True)

    def pin_to(self, b: ir.IRBuilder, tid: ir.Value, cpu: ir.Value, mask: ir.Value) -> None:
        """Emit: restrict thread `tid` (0: this one) to CPU `cpu` (`mask`: room for the
        affinity mask)."""
        b.store(ir.Constant(mask.type.pointee, None), mask)
        word = b.gep(mask, [_c(0), b.lshr(cpu, _c(6))], inbounds=True)
        b.store(b.shl(_c(1), b.and_(cpu, _c(63))), word)
        b.call(self.futex, [_c(SYS_SCHED_SETAFFINITY), tid, _c(8 * MASK_WORDS),
                            b.ptrtoint(mask, I64)])

    def _generation(self, b: ir.IRBuilder, ctl: ir.Value) -> ir.Value:
        return b.bitcast(self._slot(b, ctl, GENERATION), I32.as_pointer())

    def worker(self) -> None:
        """`void fgrad_pool_worker(i64* ctl, i64 thread, i64 home, i64 away)`: serve parts
        until SHUTDOWN (`home`, `away`: the CPUs of `_follow_caller`)."""
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(),
                                                      [I64.as_pointer()] + [I64] * 3),
                         name="fgrad_pool_worker")
        ctl, thread, home, away = fn.args
        blocks = {n: fn.append_basic_block(n) for n in
                  ("entry", "wait", "look", "spin", "sleep", "doze", "woken", "posted",
                   "enter", "run", "leave", "done")}
        b = ir.IRBuilder(blocks["entry"])
        pinned = b.alloca(I64, name="pinned")
        b.store(home, pinned)
        mask = b.alloca(ir.ArrayType(I64, MASK_WORDS), name="mask")
        gen = self._generation(b, ctl)
        start_seen = b.load_atomic(gen, "acquire", 4)
        # a worker that starts after its pool was closed must not wait for a later part
        closed = b.load_atomic(self._slot(b, ctl, SHUTDOWN), "acquire", 8)
        b.cbranch(b.icmp_signed("!=", closed, _c(0)), blocks["done"], blocks["wait"])
        # wait: a part newer than `seen`, spinning first, then asleep in the futex
        b.position_at_end(blocks["wait"])
        seen = b.phi(I32, name="seen")
        seen.add_incoming(start_seen, blocks["entry"])
        began = b.call(self.clock, [])
        until = b.load_atomic(self._slot(b, ctl, CONTENDED_UNTIL), "monotonic", 8)
        limit = b.select(b.icmp_signed("<", began, until), _c(SHORT_SPIN_CYCLES),
                         _c(SPIN_CYCLES))
        b.branch(blocks["look"])
        b.position_at_end(blocks["look"])
        last = b.phi(I64, name="last")
        last.add_incoming(began, blocks["wait"])
        now = b.load_atomic(gen, "acquire", 4)
        b.cbranch(b.icmp_unsigned("!=", now, seen), blocks["posted"], blocks["spin"])
        b.position_at_end(blocks["spin"])
        b.call(self.pause, [])
        tick = b.call(self.clock, [])
        self._note_gap(b, ctl, last, tick)
        last.add_incoming(tick, b.block)
        spun = b.sub(tick, began)
        b.cbranch(b.icmp_unsigned("<", spun, limit), blocks["look"], blocks["sleep"])
        b.position_at_end(blocks["sleep"])
        sleepers = self._slot(b, ctl, SLEEPERS)
        b.atomic_rmw("add", sleepers, _c(1), "seq_cst")
        again = b.load_atomic(gen, "seq_cst", 4)
        b.cbranch(b.icmp_unsigned("==", again, seen), blocks["doze"], blocks["woken"])
        b.position_at_end(blocks["doze"])
        b.call(self.futex, [_c(SYS_FUTEX), b.ptrtoint(gen, I64), _c(FUTEX_WAIT_PRIVATE),
                            b.zext(seen, I64), _c(0), _c(0), _c(0)])
        b.branch(blocks["woken"])
        b.position_at_end(blocks["woken"])
        b.atomic_rmw("sub", sleepers, _c(1), "seq_cst")
        last.add_incoming(b.call(self.clock, []), blocks["woken"])
        b.branch(blocks["look"])
        # posted: a new part (or the shutdown)
        b.position_at_end(blocks["posted"])
        stop = b.load_atomic(self._slot(b, ctl, SHUTDOWN), "acquire", 8)
        b.cbranch(b.icmp_signed("!=", stop, _c(0)), blocks["done"], blocks["enter"])
        b.position_at_end(blocks["enter"])
        # before OPEN: a worker that shares the caller's CPU often finds its part closed
        line = rescue.worker_line(self, b, ctl, thread)
        rescue.forget_move(b, line, pinned)
        self._follow_caller(b, ctl, (home, away), pinned, mask)
        rescue.enter_part(b, line)
        inside = self._slot(b, ctl, INSIDE)
        b.atomic_rmw("add", inside, _c(1), "seq_cst")
        is_open = b.load_atomic(self._slot(b, ctl, OPEN), "seq_cst", 8)
        threads = b.load_atomic(self._slot(b, ctl, THREADS), "acquire", 8)
        wanted = b.and_(b.icmp_signed("!=", is_open, _c(0)), b.icmp_signed("<", thread, threads))
        b.cbranch(wanted, blocks["run"], blocks["leave"])
        b.position_at_end(blocks["run"])
        entry, table, state = (b.load_atomic(self._slot(b, ctl, i), "acquire", 8)
                               for i in (ENTRY, TABLE, STATE))
        b.call(b.inttoptr(entry, ENTRY_TYPE.as_pointer()),
               [b.inttoptr(table, I8PP), thread, b.inttoptr(state, I64.as_pointer())])
        b.branch(blocks["leave"])
        b.position_at_end(blocks["leave"])
        rescue.mark_out(b, line)
        b.atomic_rmw("sub", inside, _c(1), "seq_cst")
        rescue.leave_part(self, b, ctl, line, pinned, mask)
        seen.add_incoming(now, b.block)
        b.branch(blocks["wait"])
        b.position_at_end(blocks["done"])
        b.ret_void()

    def runner(self) -> None:
        """`void fgrad_pool_run(i64* ctl, i64 entry, i64 table, i64 state, i64 threads)`:
        post the part, wake sleepers, run it as thread 0, close it, wait for INSIDE = 0."""
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(),
                                                      [I64.as_pointer()] + [I64] * 4),
                         name="fgrad_pool_run")
        ctl, entry, table, state, threads = fn.args
        blocks = {n: fn.append_basic_block(n) for n in ("entry", "wake", "work", "look",
                                                        "spin", "done")}
        b = ir.IRBuilder(blocks["entry"])
        timeout = b.alloca(I64, 2, name="timeout")
        b.store(_c(0), timeout)
        b.store(_c(rescue.SLEEP_NS), b.gep(timeout, [_c(1)], inbounds=True))
        self._tell_caller_cpu(b, ctl)
        for i, value in ((ENTRY, entry), (TABLE, table), (STATE, state), (THREADS, threads)):
            b.store_atomic(value, self._slot(b, ctl, i), "release", 8)
        b.store_atomic(_c(1), self._slot(b, ctl, OPEN), "seq_cst", 8)
        b.atomic_rmw("add", self._generation(b, ctl), _c(1, I32), "seq_cst")
        sleeping = b.load_atomic(self._slot(b, ctl, SLEEPERS), "seq_cst", 8)
        b.cbranch(b.icmp_signed(">", sleeping, _c(0)), blocks["wake"], blocks["work"])
        b.position_at_end(blocks["wake"])
        b.call(self.futex, [_c(SYS_FUTEX), b.ptrtoint(self._generation(b, ctl), I64),
                            _c(FUTEX_WAKE_PRIVATE), _c(2**31 - 1)])
        b.branch(blocks["work"])
        b.position_at_end(blocks["work"])
        b.call(b.inttoptr(entry, ENTRY_TYPE.as_pointer()),
               [b.inttoptr(table, I8PP), _c(0), b.inttoptr(state, I64.as_pointer())])
        b.store_atomic(_c(0), self._slot(b, ctl, OPEN), "seq_cst", 8)
        closed_at = b.call(self.clock, [])
        b.branch(blocks["look"])
        # wait for the workers inside to leave (they only finish a claim loop that finds
        # nothing left); yield the CPU now and then in case one was preempted there
        b.position_at_end(blocks["look"])
        spins, last = b.phi(I64, name="spins"), b.phi(I64, name="last")
        spins.add_incoming(_c(0), blocks["work"])
        last.add_incoming(closed_at, blocks["work"])
        left = b.load_atomic(self._slot(b, ctl, INSIDE), "seq_cst", 8)
        b.cbranch(b.icmp_signed("==", left, _c(0)), blocks["done"], blocks["spin"])
        b.position_at_end(blocks["spin"])
        b.call(self.pause, [])
        more = b.add(spins, _c(1))
        with b.if_then(b.icmp_unsigned("==", b.and_(more, _c(YIELD_EVERY - 1)), _c(0))):
            self._yield_or_rescue(b, ctl, closed_at, timeout)
        tick = b.call(self.clock, [])
        self._note_gap(b, ctl, last, tick)   # this thread was preempted while it waited
        spins.add_incoming(more, b.block)
        last.add_incoming(tick, b.block)
        b.branch(blocks["look"])
        b.position_at_end(blocks["done"])
        b.ret_void()

    def _yield_or_rescue(self, b: ir.IRBuilder, ctl: ir.Value, closed_at: ir.Value,
                         timeout: ir.Value) -> None:
        """Emit (the caller, waiting for workers to leave): once it has waited RESCUE_AFTER
        ticks (a control word, rescue.RESCUE_AFTER_CYCLES), move workers taken off their
        CPUs onto this one and sleep until they leave (pool_rescue.py); else yield."""
        waited = b.sub(b.call(self.clock, []), closed_at)
        after = b.load_atomic(self._slot(b, ctl, rescue.RESCUE_AFTER), "monotonic", 8)
        with b.if_else(b.icmp_unsigned(">", waited, after)) as (
                late, early):
            with late:
                count = b.call(self.module.get_global("fgrad_pool_rescue"), [ctl])
                with b.if_else(b.icmp_signed(">", count, _c(0))) as (some, none):
                    with some:
                        rescue.sleep_until_left(self, b, ctl, timeout)
                    with none:
                        b.call(self.futex, [_c(SYS_SCHED_YIELD)])
            with early:
                b.call(self.futex, [_c(SYS_SCHED_YIELD)])

    def _tell_caller_cpu(self, b: ir.IRBuilder, ctl: ir.Value) -> None:
        """Emit (the caller, before it posts a part): write the CPU this thread runs on to
        CALLER_CPU (libc's `sched_getcpu`, no system call where the vDSO answers; -1 if
        the kernel does not say)."""
        b.store_atomic(b.sext(b.call(self.getcpu, []), I64), self._slot(b, ctl, CALLER_CPU),
                       "monotonic", 8)

    def _follow_caller(self, b: ir.IRBuilder, ctl: ir.Value, cpus: tuple[ir.Value, ir.Value],
                       pinned: ir.Value, mask: ir.Value) -> None:
        """Emit (a worker that sees a part): when the caller runs on this worker's `home`
        CPU, re-pin to `away` (the caller's usual CPU), and back home once it has left.
        Why: with a busy process on one core of two, the caller and a pinned worker sharing
        the other is a placement the scheduler's balancing keeps (two tasks against one
        either way), and the call runs at one thread's speed (1024^3: 20.5 ms against 14.9
        with the two apart); the pool's contention deadline is not set then, as neither
        thread waits long in a spin. `home == away`: the worker was not pinned. `pinned`
        holds the CPU it is on, `mask` is room for the affinity mask (both on the worker's
        stack)."""
        home, away = cpus
        with b.if_then(b.icmp_signed("!=", home, away)):
            caller = b.load_atomic(self._slot(b, ctl, CALLER_CPU), "monotonic", 8)
            wanted = b.select(b.icmp_signed("==", caller, home), away, home)
            with b.if_then(b.icmp_signed("!=", wanted, b.load(pinned)), likely=False):
                self.pin_to(b, _c(0), wanted, mask)
                b.store(wanted, pinned)

    def _note_gap(self, b: ir.IRBuilder, ctl: ir.Value, before: ir.Value,
                  after: ir.Value) -> None:
        """Emit: when `after - before` (time-stamp ticks) says a thread was preempted
        between them, keep spins short until `after + CONTENDED_HOLD_CYCLES`."""
        gap = b.sub(after, before)
        with b.if_then(b.icmp_signed(">", gap, _c(PREEMPTED_CYCLES)), likely=False):
            b.store_atomic(b.add(after, _c(CONTENDED_HOLD_CYCLES)),
                           self._slot(b, ctl, CONTENDED_UNTIL), "monotonic", 8)

    def closer(self) -> None:
        """`void fgrad_pool_close(i64* ctl)`: set SHUTDOWN, post it, wake every sleeper."""
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [I64.as_pointer()]),
                         name="fgrad_pool_close")
        (ctl,) = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        b.store_atomic(_c(1), self._slot(b, ctl, SHUTDOWN), "seq_cst", 8)
        b.atomic_rmw("add", self._generation(b, ctl), _c(1, I32), "seq_cst")
        b.call(self.futex, [_c(SYS_FUTEX), b.ptrtoint(self._generation(b, ctl), I64),
                            _c(FUTEX_WAKE_PRIVATE), _c(2**31 - 1)])
        b.ret_void()


def pool_module_text() -> str:
    """The LLVM IR of the pool's native functions (module docstring)."""
    builder = _Builder()
    rescue.rescue_function(builder)
    builder.worker()
    builder.runner()
    builder.closer()
    return str(builder.module)


def _engine() -> Any:
    """The pool's compiled module: object code from the disk cache, else compiled as glue
    (no middle end, O0 code generation: control code around atomics and calls, 5-8 instead
    of 15-28 ms of LLVM per cold start) on this thread's own LLVM context, so a background
    build (`prefetch`) never holds up a program's compile. Never counted in the kernel
    compile statistics: it is the backend's, not a program's."""
    from fgrad.lower.llvm import engines, kernel_cache
    libc = ctypes.CDLL(None)
    llvm.add_symbol("fgrad_syscall", ctypes.cast(libc.syscall, ctypes.c_void_p).value)
    llvm.add_symbol("fgrad_sched_getcpu",
                    ctypes.cast(libc.sched_getcpu, ctypes.c_void_p).value)
    text = pool_module_text()
    key = engines.cache_key(f"pool\nO{kernel_cache.GLUE}\n{text}")
    obj = disk_cache.load(key, kernel_cache.FOLDER)
    if obj is None:
        obj = kernel_cache.module_object(text, kernel_cache.GLUE)
        disk_cache.store(key, obj, kernel_cache.FOLDER)
    with engines._build_lock:
        engine = engines._load(obj)
    if engine is None:
        raise RuntimeError("fgrad: the llvm thread pool's object code did not load (a damaged "
                           "cache entry?); run with FGRAD_NUM_THREADS=1 or clear the cache")
    return engine


_WORKER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                           ctypes.c_int64)
_RUN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                        ctypes.c_void_p, ctypes.c_int64)
_CLOSE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _never_freed(obj: Any) -> Any:
    """`obj` with one reference that is never dropped: workers may run the pool's code and
    read their control block until the process ends (interpreter shutdown frees module
    globals, and a dropped pool's workers still read theirs while they leave)."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
    return obj


_BUILT: list[tuple[Any, Any, Any]] = []
_BUILD_LOCK = threading.Lock()


def _functions() -> tuple[Any, Any, Any]:
    """The worker loop, the run and the close function of the pool's compiled module."""
    if not _BUILT:
        with _BUILD_LOCK:
            if not _BUILT:
                engine = _never_freed(_engine())
                address = engine.get_function_address
                _BUILT.append((_WORKER(address("fgrad_pool_worker")),
                               _RUN(address("fgrad_pool_run")),
                               _CLOSE(address("fgrad_pool_close"))))
    return _BUILT[0]


_PREFETCH: list[concurrent.futures.ThreadPoolExecutor] = []


def prefetch() -> None:
    """Build the pool's code on a background thread if nothing has yet (called when a
    program starts compiling: its first parallel part will want the pool). The thread is
    an executor's, which the interpreter joins at exit: LLVM is never torn down under it."""
    if _BUILT or _PREFETCH or not native_pool_supported():
        return
    with _BUILD_LOCK:
        if not _PREFETCH:
            _PREFETCH.append(concurrent.futures.ThreadPoolExecutor(1, "fgrad-pool-build"))
            _PREFETCH[0].submit(_quietly_build)


def _quietly_build() -> None:
    try:
        _functions()
    except Exception:  # noqa: BLE001  (the first parallel part builds it again and reports)
        pass


def pin_worker(thread: int) -> tuple[int, int]:
    """Keep the calling pool worker (thread 1, 2, ...) on one CPU, the thread-th of those
    this process may use (flags.pin_threads); return (that CPU, the first one), the worker's
    `home` and `away` of `_Builder._follow_caller`, or (-1, -1) when it was not pinned.
    Why: when another process keeps a core busy, Linux wakes a worker onto its waker's CPU,
    so the caller and the worker shared one core for stretches of ~10 calls while the busy
    process had the other (W3 n=1024 calls of 15 ms, one thread's time being 13.5); a pinned
    worker is not pulled to the caller (docs/performance.md, twenty-sixth session), and it
    moves away when the caller comes to it."""
    if not flags.pin_threads() or not hasattr(os, "sched_setaffinity"):
        return -1, -1
    try:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) > 1:
            home = cpus[thread % len(cpus)]
            os.sched_setaffinity(0, {home})
            if max(cpus) < 64 * MASK_WORDS:
                return home, cpus[0]
    except OSError:   # a cpuset that refuses it: the worker runs unpinned
        pass
    return -1, -1


def _pinned_worker(loop: Any, control: int, thread: int) -> None:
    """A native worker's thread: pinned (`pin_worker`), its thread id in the workers block
    if so (the caller may move it, pool_rescue.py), then the native loop."""
    home, away = pin_worker(thread)
    words = ctypes.c_int64 * CONTROL_WORDS
    ctl = words.from_address(control)
    if home != away and thread < ctl[rescue.WORKER_SLOTS]:
        line = ctl[rescue.WORKERS_AT] + 8 * rescue.WORKER_LINE * thread
        ctypes.c_int64.from_address(line + 8 * rescue.TID).value = threading.get_native_id()
    loop(control, thread, home, away)


class NativePool:
    """Native worker threads (module docstring) for one process: `run` posts a part."""

    def __init__(self) -> None:
        self._lock = threading.Lock()   # one part posted at a time
        self._start_lock = threading.Lock()
        self._pid = -1
        self._workers: list[threading.Thread] = []
        self._control_address = 0
        self.runs = 0  # parallel runs so far (tests check that threads were used)
        _POOLS.add(self)

    def run(self, entry: Any, entry_address: int, table: Any, state: Any,
            nthreads: int) -> None:
        """entry(table, t, state) on threads t = 0 (this one) .. nthreads-1; alone on this
        thread when another caller holds the pool."""
        if not self._lock.acquire(blocking=False):
            entry(table, 0, state)
            return
        try:
            self._start_workers(nthreads - 1)
            _functions()[1](self._control_address, entry_address, ctypes.addressof(table),
                            ctypes.addressof(state), nthreads)
        finally:
            self._lock.release()
        self.runs += 1

    def contended_until(self) -> int:
        """The time-stamp counter's deadline until which workers spin short (module
        docstring); 0 before any contention was seen."""
        if not self._control_address:
            return 0
        return ctypes.c_int64.from_address(self._control_address + 8 * CONTENDED_UNTIL).value

    def rescues(self) -> int:
        """How many times a caller moved a worker that was off its CPU inside a part onto
        its own (pool_rescue.py)."""
        if not self._control_address:
            return 0
        return ctypes.c_int64.from_address(self._control_address + 8 * rescue.RESCUES).value

    def close(self) -> None:
        """Stop this process's workers (they leave their loop, then their threads end)."""
        with self._start_lock:
            if self._pid != os.getpid() or not self._workers:
                return
            _functions()[2](self._control_address)
            for worker in self._workers:
                worker.join(timeout=1.0)
            self._workers, self._pid = [], -1

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown: nothing left to stop)
            pass

    def _start_workers(self, count: int) -> None:
        if self._pid == os.getpid() and len(self._workers) >= count:
            return
        with self._start_lock:
            if self._pid != os.getpid():   # first use, or a forked child: no workers yet
                control = _never_freed((ctypes.c_int64 * CONTROL_WORDS)())
                slots = max(count + 1, os.cpu_count() or 1, WORKER_SLOTS)
                workers = _never_freed((ctypes.c_int64 * (rescue.WORKER_LINE * slots))())
                control[rescue.WORKERS_AT] = ctypes.addressof(workers)
                control[rescue.WORKER_SLOTS] = slots
                control[rescue.RESCUE_AFTER] = rescue.RESCUE_AFTER_CYCLES
                self._control_address = ctypes.addressof(control)
                self._workers, self._pid = [], os.getpid()
            worker_loop = _functions()[0]
            while len(self._workers) < count:
                t = len(self._workers) + 1
                worker = threading.Thread(target=_pinned_worker,
                                          args=(worker_loop, self._control_address, t),
                                          daemon=True, name=f"fgrad-llvm-{t}")
                worker.start()
                self._workers.append(worker)


_POOLS: weakref.WeakSet[NativePool] = weakref.WeakSet()


@atexit.register
def _close_pools() -> None:
    """Let every worker leave the pool's code before the interpreter shuts down."""
    for pool in list(_POOLS):
        pool.close()
