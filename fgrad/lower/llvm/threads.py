"""Multi-threaded native segments of the llvm backend: which kernels split, how segments
cut into parts, the parallel part's native entry, the thread pool.

In: a segment's calls (kernels and library calls). Out: `plan_parts` (the segment cut into
serial and parallel parts), `split_extent` (the outermost loop a kernel may split into
chunks), `render_part` (a part's entry) and `POOL` (persistent worker threads that run a
parallel part's entry alongside the calling thread).

A kernel splits when its body is one loop whose iterations touch disjoint parts of every
buffer the kernel writes (each access of a written buffer is `c*i + rest` with the same c for
all of them and a `rest` spanning fewer than |c| elements), and it does enough work to pay
for waking the workers. A store through a run-time index (a scatter's, whose rows may
repeat) is never of that form, so such kernels run on one thread. Threads claim chunks of
that loop from atomic counters, each its own contiguous range first (`_claim_home_first`),
so that a thread meets again in one kernel what it wrote in the last; any other kernel of
a parallel part (small ones: those that cannot split and are large run in serial parts,
e.g. full reductions to a scalar) is one chunk that a single thread claims. A call starts
once every chunk of the previous one is done. A large gemm splits too, by output rows
(blas.py: OpenBLAS runs on one thread, each chunk one BLAS call); other library calls
(small gemms, LAPACK) run in serial parts on the calling thread while the workers sleep.
"""
from __future__ import annotations

import ctypes
import functools
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import llvmlite.binding as llvm
from llvmlite import ir

from fgrad import flags
from fgrad.lower.kernel.index import Ix, Sym, ix_range
from fgrad.lower.kernel.ir import AccUpdate, Expr, Kernel, Load, Loop, Op, Stmt, Store
from fgrad.lower.kernel.program import Program, Segment
from fgrad.lower.llvm.pool import NativePool, native_pool_supported, pin_worker
from fgrad.lower.llvm.gemm.scratch import VIEW as FAILED, failure_count

# innermost iterations below which a kernel does not split: at 2^17 an MLP's bias gradient
# (relu mask and column sum of 256 x 512) moves ~1.5 MB, 80 us on one core here; split, W5
# ran 3-3.5% faster (2^18 before; docs/performance.md, thirty-third session)
MIN_PARALLEL_WORK = 1 << 17
I64 = ir.IntType(64)
MAX_CHUNKS = 64  # a split loop is cut into at most this many chunks...
MIN_CHUNK_WORK = 1 << 13  # ... of at least this many innermost iterations each
SPINS_BEFORE_YIELD = 200
HOME_RANGES = 6  # claim counters in slots 0-5 of a call's state line (6, 7: a gemm's)
Call = tuple[str, Sequence[int]]  # (kernel name, buffer slot of each parameter)

# ---------------------------------------------------------------------------- planning


def kernel_work(stmts: Sequence[Stmt]) -> int:
    """Innermost iterations of a loop nest (each leaf statement counts 1)."""
    return sum(s.sym.extent * kernel_work(s.body) if isinstance(s, Loop) else 1
               for s in stmts)


def _accesses(stmts: Sequence[Stmt], out: list[tuple[int, Ix]]) -> None:
    """Every (buffer, index) a statement list loads or stores."""
    seen: set[int] = set()

    def expr(e: Expr) -> None:
        if id(e) in seen:
            return
        seen.add(id(e))
        if isinstance(e, Load):
            out.append((e.buf, e.index))
        elif isinstance(e, Op):
            for a in e.args:
                expr(a)

    for s in stmts:
        if isinstance(s, Loop):
            _accesses(s.body, out)
        elif isinstance(s, Store):
            out.append((s.buf, s.index))
            expr(s.value)
        elif isinstance(s, AccUpdate):
            expr(s.value)


def _stride(index: Ix, sym: Sym) -> tuple[int, int, int] | None:
    """(c, lo, hi): index == c*sym + rest with rest in [lo, hi] independent of sym; None
    when sym occurs inside a division, modulo or clamp (or not at all)."""
    if sym in index.nonlinear_syms():
        return None
    c = sum(k for a, k in index.terms if a == sym)
    if c == 0:
        return None
    rest = Ix(tuple((a, k) for a, k in index.terms if a != sym), index.const)
    lo, hi = ix_range(rest)
    return c, lo, hi


def _disjoint_iterations(kernel: Kernel, loop: Loop) -> bool:
    """Whether distinct iterations of `loop` touch disjoint elements of every written
    buffer (so chunks of it may run on different threads)."""
    accesses: list[tuple[int, Ix]] = []
    _accesses(loop.body, accesses)
    spans: dict[int, tuple[int, int, int]] = {}
    for buf, index in accesses:
        if not kernel.params[buf].written:
            continue
        found = _stride(index, loop.sym)
        if found is None:
            return False
        c, lo, hi = found
        if buf in spans:
            c0, lo0, hi0 = spans[buf]
            if c0 != c:
                return False
            lo, hi = min(lo, lo0), max(hi, hi0)
        spans[buf] = (c, lo, hi)
    return all(hi - lo < abs(c) for c, lo, hi in spans.values())


def split_extent(kernel: Kernel) -> int:
    """The extent of the kernel's loop that threads may split into chunks, or 0 when the
    kernel runs whole on one thread (not one loop, overlapping iterations, too little
    work)."""
    if len(kernel.body) != 1 or not isinstance(kernel.body[0], Loop):
        return 0
    loop = kernel.body[0]
    if loop.sym.extent < 2 or kernel_work(kernel.body) < MIN_PARALLEL_WORK:
        return 0
    return loop.sym.extent if _disjoint_iterations(kernel, loop) else 0


@dataclass(frozen=True)
class Part:
    """Calls [first, stop) of a segment; `parallel`: run by every thread of the pool."""

    first: int
    stop: int
    parallel: bool


def _kind(kernel: Kernel | None, library_chunks: int = 1) -> str:
    if kernel is None:  # a library call: a large gemm splits by rows (blas.gemm_chunking)
        return "split" if library_chunks > 1 else "serial"
    if split_extent(kernel):
        return "split"
    return "small" if kernel_work(kernel.body) < MIN_PARALLEL_WORK else "serial"


def plan_parts(calls: Sequence[tuple[str, Sequence[int]]], kernels: dict[str, Kernel],
               library: dict[str, tuple[int, int, int]] | None = None) -> list[Part]:
    """Cut a segment's calls into parts: a parallel part is a run of kernels holding at least
    one split kernel (or split gemm: `library`, chunking by call name) and otherwise only
    small ones; other library calls and large kernels that cannot split run in serial
    parts. One serial part when nothing splits."""
    library = library or {}
    kinds = [_kind(kernels.get(name), library.get(name, (1,))[0]) for name, _ in calls]
    parts: list[Part] = []
    i = 0
    while i < len(kinds):
        j = i + 1
        if kinds[i] == "serial":
            parallel = False
        else:
            while j < len(kinds) and kinds[j] != "serial":
                j += 1
            parallel = "split" in kinds[i:j]
        if parts and not parallel and not parts[-1].parallel:
            parts[-1] = Part(parts[-1].first, j, False)
        else:
            parts.append(Part(i, j, parallel))
        i = j
    return parts


def chunking(kernel: Kernel | None) -> tuple[int, int, int]:
    """(chunk count, iterations per chunk, loop extent) of a call in a parallel part: a split
    kernel's loop in up to MAX_CHUNKS chunks of at least MIN_CHUNK_WORK innermost iterations
    (threads claim chunks one by one, so one that the OS delays takes fewer); anything else
    is 1 chunk (size and extent 0: the whole call)."""
    extent = split_extent(kernel) if kernel is not None else 0
    if kernel is None or not extent:
        return 1, 0, 0
    loop = kernel.body[0]
    assert isinstance(loop, Loop)
    per_iteration = max(1, kernel_work(loop.body))
    size = max(-(-extent // MAX_CHUNKS), -(-MIN_CHUNK_WORK // per_iteration))
    size = min(size, extent)
    return -(-extent // size), size, extent


def segment_parts(program: Program, seg: Segment) -> list[Part]:
    """`plan_parts` of one segment of a program."""
    from fgrad.lower.llvm.blas import library_chunking
    return plan_parts(seg.calls, {k.name: k for k in program.kernels},
                      library_chunking(program.library_calls))


def describe_threads(program: Program) -> str:
    """One line per parallel part: which kernels split, over how many threads."""
    from fgrad.lower.llvm.blas import library_chunking
    kernels = {k.name: k for k in program.kernels}
    gemms = library_chunking(program.library_calls)
    lines = []
    segments = [a for a in program.actions if isinstance(a, Segment)]
    for i, seg in enumerate(segments):
        for k, part in enumerate(segment_parts(program, seg)):
            if not part.parallel:
                continue
            split = [f"{name} over {split_extent(kernels[name])}"
                     for name, _ in seg.calls[part.first:part.stop]
                     if name in kernels and split_extent(kernels[name])]
            split += [_gemm_split(name, program.library_calls[name], gemms[name])
                      for name, _ in seg.calls[part.first:part.stop] if name in gemms]
            lines.append(f"seg{i}_p{k}: threads={flags.num_threads()}, split {', '.join(split)}")
    return "\n".join(lines) or "(every segment runs on one thread)"


def _gemm_split(name: str, eqn: Any, chunks: tuple[int, int, int]) -> str:
    from fgrad.lower.llvm.gemm.prepack import prepack_plan
    plan = prepack_plan(eqn)
    return f"{name} over {chunks[2]} rows" if plan is None else plan.describe(name)


# ---------------------------------------------------------------------------- rendering

_symbols: list[str] = []


def register_symbols() -> None:
    """Make `fgrad_sched_yield` (libc's sched_yield) resolvable by MCJIT; idempotent."""
    if _symbols:
        return
    libc = ctypes.CDLL(None)
    llvm.add_symbol("fgrad_sched_yield", ctypes.cast(libc.sched_yield, ctypes.c_void_p).value)
    _symbols.append("fgrad_sched_yield")


def _i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def render_wait(module: ir.Module) -> ir.Function:
    """`void fgrad_wait(i64* counter, i64 target)`: return once *counter >= target
    (acquire). Spins with `pause`, yielding the CPU every SPINS_BEFORE_YIELD looks."""
    if "fgrad_wait" in module.globals:
        return module.globals["fgrad_wait"]
    register_symbols()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64.as_pointer(), I64]),
                     name="fgrad_wait")
    fn.linkage = "internal"
    counter, target = fn.args
    entry, look, spin, yielding, done = (fn.append_basic_block(n)
                                         for n in ("entry", "look", "spin", "yield", "done"))
    b = ir.IRBuilder(entry)
    b.branch(look)
    b.position_at_end(look)
    spins = b.phi(I64, name="spins")
    now = b.load_atomic(counter, "acquire", 8)
    b.cbranch(b.icmp_signed(">=", now, target), done, spin)
    b.position_at_end(spin)
    _pause(module, b)
    more = b.add(spins, _i64(1))
    b.cbranch(b.icmp_signed("<", more, _i64(SPINS_BEFORE_YIELD)), look, yielding)
    b.position_at_end(yielding)
    sched_yield = ir.Function(module, ir.FunctionType(ir.IntType(32), []),
                              name="fgrad_sched_yield")
    b.call(sched_yield, [])
    b.branch(look)
    spins.add_incoming(_i64(0), entry)
    spins.add_incoming(more, spin)
    spins.add_incoming(_i64(0), yielding)
    b.position_at_end(done)
    b.ret_void()
    return fn


def _pause(module: ir.Module, b: ir.IRBuilder) -> None:
    """The x86 spin-wait hint (nothing on other CPUs)."""
    if llvm.get_process_triple().startswith(("x86_64", "i686", "i386")):
        pause = module.globals.get("llvm.x86.sse2.pause") or ir.Function(
            module, ir.FunctionType(ir.VoidType(), []), name="llvm.x86.sse2.pause")
        b.call(pause, [])


EmitCall = Callable[..., None]  # (builder, call n, chunk or None, line=state line or None)


def render_part(module: ir.Module, name: str, part: Part,
                chunks: Sequence[tuple[int, int, int]], emit_call: EmitCall,
                ordered: frozenset[int] = frozenset()) -> ir.Function:
    """`void name(i8** buffers, i64 thread, i64* state)` running calls [part.first,
    part.stop) of a segment; `emit_call(b, n, chunk, line=...)` emits call n (on iterations
    [lo, hi) of its loop when `chunk`; `line`: its counters, which a gemm with B packed
    once uses too). In a parallel part every thread runs it at once: call j's chunks are
    claimed through the counters of state line 16j (`_claim_home_first`; a call in
    `ordered` strictly in order from slot 0) and counted done in state[16j + 8] (own cache
    lines); the state's last word is the thread count (`new_state`). A thread starts on call
    j once every chunk of call j-1 is done, and thread 0 returns once the last call is
    done. A thread that comes late finds nothing left to claim. `chunks[n]` is call n's
    `chunking`."""
    i8pp = ir.IntType(8).as_pointer().as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8pp, I64, I64.as_pointer()]),
                     name=name)
    fn.args[0].name, fn.args[1].name, fn.args[2].name = "buffers", "thread", "state"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    if not part.parallel:
        for n in range(part.first, part.stop):
            emit_call(b, n, None)
        b.ret_void()
        return fn
    wait = render_wait(module)
    state, thread = fn.args[2], fn.args[1]
    calls = part.stop - part.first
    threads = b.load(b.gep(state, [_i64(16 * calls)]))
    for j, n in enumerate(range(part.first, part.stop)):
        if j:
            b.call(wait, [b.gep(state, [_i64(16 * j - 8)]), _i64(chunks[n - 1][0])])
        claim, done = b.gep(state, [_i64(16 * j)]), b.gep(state, [_i64(16 * j + 8)])
        body = functools.partial(emit_call, b, n, line=claim)
        if n in ordered:
            _claim_loop(b, claim, done, chunks[n], body)
        else:
            _claim_home_first(b, claim, done, chunks[n], body, thread, threads)
    with b.if_then(b.icmp_signed("==", thread, _i64(0))):
        b.call(wait, [b.gep(state, [_i64(16 * calls - 8)]), _i64(chunks[part.stop - 1][0])])
    b.ret_void()
    return fn


def _claim_loop(b: ir.IRBuilder, claim: ir.Value, done: ir.Value,
                chunks: tuple[int, int, int],
                body: Callable[[tuple[ir.Value, ir.Value] | None], None]) -> None:
    """while (c = claim++) < count: body(chunk c); done++ (release)."""
    fn = b.function
    head, work, out = (fn.append_basic_block(n) for n in ("claim", "chunk", "claimed"))
    b.branch(head)
    b.position_at_end(head)
    c = b.atomic_rmw("add", claim, _i64(1), "monotonic")
    b.cbranch(b.icmp_signed("<", c, _i64(chunks[0])), work, out)
    b.position_at_end(work)
    _run_chunk(b, c, done, chunks, body)
    b.branch(head)
    b.position_at_end(out)


def _claim_home_first(b: ir.IRBuilder, line: ir.Value, done: ir.Value,
                      chunks: tuple[int, int, int],
                      body: Callable[[tuple[ir.Value, ir.Value] | None], None],
                      thread: ir.Value, threads: ir.Value) -> None:
    """The chunks cut into R = min(threads, count, HOME_RANGES) contiguous home ranges, each
    with its own counter (slot r of `line`); thread t claims from range t % R first, then
    from the others in turn (t+1, t+2, ... mod R), so that an idle or delayed thread's
    range is taken by the others. When every thread keeps up, thread t runs the same part
    of every split loop: what it wrote in one call it reads in the next from its own
    caches (on a host whose two CPUs share no L3 the W4 step ran 2x slower with chunks
    claimed from one counter; docs/performance.md, thirty-seventh session)."""
    count = chunks[0]
    if count == 1:
        _claim_loop(b, line, done, chunks, body)
        return
    fn = b.function
    blocks = [fn.append_basic_block(n) for n in ("ranges", "range", "claim", "chunk",
                                                 "next_range", "claimed")]
    ranges_head, range_head, head, work, next_range, out = blocks
    ranges = b.select(b.icmp_signed("<", threads, _i64(1)), _i64(1), threads)
    for cap in (count, HOME_RANGES):
        ranges = b.select(b.icmp_signed(">", ranges, _i64(cap)), _i64(cap), ranges)
    start = b.urem(thread, ranges)
    entry = b.block
    b.branch(ranges_head)
    b.position_at_end(ranges_head)
    visited = b.phi(I64, name="visited")
    visited.add_incoming(_i64(0), entry)
    b.cbranch(b.icmp_signed("<", visited, ranges), range_head, out)
    b.position_at_end(range_head)
    r = b.urem(b.add(start, visited), ranges)
    lo = b.udiv(b.mul(r, _i64(count)), ranges)
    hi = b.udiv(b.mul(b.add(r, _i64(1)), _i64(count)), ranges)
    counter = b.gep(line, [r])
    b.branch(head)
    b.position_at_end(head)
    c = b.add(lo, b.atomic_rmw("add", counter, _i64(1), "monotonic"))
    b.cbranch(b.icmp_signed("<", c, hi), work, next_range)
    b.position_at_end(work)
    _run_chunk(b, c, done, chunks, body)
    b.branch(head)
    b.position_at_end(next_range)
    visited.add_incoming(b.add(visited, _i64(1)), next_range)
    b.branch(ranges_head)
    b.position_at_end(out)


def _run_chunk(b: ir.IRBuilder, c: ir.Value, done: ir.Value, chunks: tuple[int, int, int],
               body: Callable[[tuple[ir.Value, ir.Value] | None], None]) -> None:
    """body(chunk c) (iterations [c*size, min((c+1)*size, extent)), or the whole call when
    size is 0); then done++ (release)."""
    _, size, extent = chunks
    if size:
        lo = b.mul(c, _i64(size))
        end = b.add(lo, _i64(size))
        body((lo, b.select(b.icmp_signed("<", end, _i64(extent)), end, _i64(extent))))
    else:
        body(None)
    b.atomic_rmw("add", done, _i64(1), "release")


# ---------------------------------------------------------------------------- running

PartEntry = Callable[[Any, int, Any], None]  # a part's ctypes entry(table, thread, state)
# ---------------------------------------------------------------------------- entries

def _call(b: ir.IRBuilder, buffers: ir.Value, target: ir.Function, slots: Sequence[int],
          chunk: Sequence[ir.Value] = ()) -> None:
    """Call `target` on its slots of `buffers` (plus a chunk's start and stop)."""
    args = []
    for slot, ty in zip(slots, target.function_type.args, strict=False):
        raw = b.load(b.gep(buffers, [_i64(slot)], inbounds=True))
        args.append(b.bitcast(raw, ty))
    b.call(target, args + list(chunk))


def _extents(calls: Sequence[Call], kernels: dict[str, Kernel],
             library: dict[str, tuple[int, int, int]] | None = None) -> list[int]:
    library = library or {}
    return [split_extent(kernels[name]) if name in kernels else library.get(name, (1, 0, 0))[2]
            for name, _ in calls]


def render_entry(module: ir.Module, name: str, calls: Sequence[Call],
                 functions: dict[str, ir.Function], kernels: dict[str, Kernel],
                 library: dict[str, tuple[int, int, int]] | None = None) -> ir.Function:
    """`i64 name(i8** buffers)`: call each kernel on its slots of `buffers`, in order; the
    number of failed scratch allocations meanwhile (gemm/scratch.py: 0 unless a routine
    ran out of memory), so that the lean call path checks a return value (`ENTRY_ABI`)."""
    i8p = ir.IntType(8).as_pointer()
    fn = ir.Function(module, ir.FunctionType(I64, [i8p.as_pointer()]), name=name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    before = failure_count(b)
    emit = emit_calls(calls, functions, kernels, library)
    for n in range(len(calls)):
        emit(b, n, None)
    b.ret(b.sub(failure_count(b), before))
    return fn


def emit_calls(calls: Sequence[Call], functions: dict[str, ir.Function],
                kernels: dict[str, Kernel],
                library: dict[str, tuple[int, int, int]] | None = None,
                prepacks: frozenset[str] = frozenset()) -> Any:
    """`emit(b, n, chunk)` for llvm_threads.render_part: call n of the segment, on its
    chunk of the split loop, or whole (a split kernel then gets its full range); `line`:
    the call's counters in a parallel part's state (threads.render_part)."""
    extents = _extents(calls, kernels, library)
    prepacked = prepacks

    def emit(b: ir.IRBuilder, n: int, chunk: tuple[ir.Value, ir.Value] | None,
             line: ir.Value | None = None) -> None:
        name, slots = calls[n]
        if chunk is None and extents[n]:
            chunk = (_i64(0), _i64(extents[n]))
        extra: list[ir.Value] = list(chunk or ())
        if name in prepacked:   # its chunks need the call's state line (gemm/prepack.py)
            if line is None:    # a split gemm always makes its part parallel (plan_parts)
                raise AssertionError(f"{name}: a prepacked gemm outside a parallel part")
            extra.append(line)
        _call(b, b.function.args[0], functions[name], slots, extra)
    return emit


def entry_names(segment: int, parts: Sequence[Part]) -> list[str]:
    """The exported entry of each part of segment number `segment`: `segN` when the
    segment is one serial part (`void segN(i8** buffers)`), else `segN_pK`
    (llvm_threads.render_part)."""
    if len(parts) == 1 and not parts[0].parallel:
        return [f"seg{segment}"]
    return [f"seg{segment}_p{k}" for k in range(len(parts))]



# what a serial segment's entry returns (`render_entry`); a program key holds it (tunables)
ENTRY_ABI = "i64 failed allocations"
PART_ENTRY = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64,
                              ctypes.POINTER(ctypes.c_int64))


def new_state(calls: int, nthreads: int) -> Any:
    """Zeroed counters for one run of a parallel part of `calls` calls on `nthreads`
    threads (its last word; render_part)."""
    state = (ctypes.c_int64 * (16 * calls + 1))()
    state[16 * calls] = nthreads
    return state


class _Job:
    """One posted parallel part. Workers enter it only while it is open; `run` closes it
    when thread 0 is done and waits until every worker that entered has left, so the
    caller's buffers and compiled code outlive every thread running them."""

    __slots__ = ("entry", "table", "state", "nthreads", "open", "inside")

    def __init__(self, entry: PartEntry, table: Any, state: Any, nthreads: int):
        self.entry, self.table, self.state, self.nthreads = entry, table, state, nthreads
        self.open, self.inside = True, 0


class ThreadPool:
    """Persistent worker threads that join parallel parts: `run` posts a part and runs it
    on the calling thread too. Correctness never waits on a worker to start (the caller
    alone claims every chunk if it must), so concurrent callers need no lock: workers take
    the newest posted part, and one that wakes after its part was closed skips it. `run`
    returns only once no worker is inside its part."""

    def __init__(self) -> None:
        lock = threading.Lock()
        self._wake = threading.Condition(lock)  # a part was posted
        self._left = threading.Condition(lock)  # a worker left a part
        self._job: _Job | None = None
        self._generation = 0
        self._workers: list[threading.Thread] = []
        self._pid = os.getpid()
        self.runs = 0  # parallel runs so far (tests check that threads were used)

    def run(self, entry: PartEntry, entry_address: int, table: Any, state: Any,
            nthreads: int) -> None:
        """entry(table, t, state) on threads t = 0 (this one) .. nthreads-1 (the entry's
        address is for the native pool, pool.py, which hosts that support it use)."""
        self._start_workers(nthreads - 1)
        job = _Job(entry, table, state, nthreads)
        with self._wake:
            self._job = job
            self._generation += 1
            self._wake.notify_all()
        try:
            entry(table, 0, state)
        finally:
            with self._wake:
                job.open = False
                if self._job is job:
                    self._job = None
                while job.inside:
                    self._left.wait()
        self.runs += 1

    def _start_workers(self, count: int) -> None:
        if self._pid != os.getpid():  # a forked child has none of its parent's threads
            self._workers, self._pid = [], os.getpid()
        while len(self._workers) < count:
            t = len(self._workers) + 1
            worker = threading.Thread(target=self._work, args=(t,), daemon=True,
                                      name=f"fgrad-llvm-{t}")
            worker.start()
            self._workers.append(worker)

    def _work(self, thread: int) -> None:
        pin_worker(thread)
        seen = 0
        while True:
            with self._wake:
                while self._generation == seen:
                    self._wake.wait()
                seen = self._generation
                job = self._job
                if job is None or not job.open or thread >= job.nthreads:
                    continue
                job.inside += 1
            try:
                job.entry(job.table, thread, job.state)
            finally:
                with self._wake:
                    job.inside -= 1
                    self._left.notify_all()


POOL: NativePool | ThreadPool = NativePool() if native_pool_supported() else ThreadPool()


def run_parts(parts: Sequence[tuple[PartEntry, int, int, bool]], table: Any) -> int:
    """Run a segment's parts in order, each (entry, its address, calls, parallel):
    parallel ones on `flags.num_threads()` threads (fresh counters each run), serial ones
    here; the number of failed scratch allocations meanwhile (as `render_entry`'s)."""
    failures = FAILED[0]
    nthreads = flags.num_threads()
    for entry, address, calls, parallel in parts:
        if not parallel:
            entry(table, 0, None)
        elif nthreads > 1:
            POOL.run(entry, address, table, new_state(calls, nthreads), nthreads)
        else:
            entry(table, 0, new_state(calls, 1))
    return FAILED[0] - failures
