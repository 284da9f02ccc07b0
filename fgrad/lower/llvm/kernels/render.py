"""Render kernel IR to LLVM IR with llvmlite's IRBuilder (module -> function -> block).

In: `Kernel`s, library calls (dot_general equations, rendered by llvm/blas.py as BLAS gemm
calls; linalg equations, by llvm/lapack.py as LAPACK calls) and native segments (each an
ordered list of such calls on buffer slots).
Out: one `ir.Module`: an internal function per kernel taking one noalias pointer per buffer
(and, when threads split it, the [start, stop) of its outermost loop), and exported entries
per segment: `void segN(i8** buffers)` that calls its kernels in order, or, when some of its
kernels split (llvm/threads.py), one entry per part, `segN_pK(buffers, thread, state)`,
that every thread of the pool runs. Loops count up in i64 with the innermost loop
over the contiguous axis, so LLVM's loop vectorizer handles them; reduction accumulators
allow reassociation so they vectorize too. Elementwise arithmetic carries no fast-math
flags, so results match NumPy's IEEE ones. A large memory-bound kernel writes its output
with non-temporal stores, a cache line at a time (kernel/streaming.py).
"""
from __future__ import annotations

from typing import Callable, Sequence

from llvmlite import ir

from fgrad.core.dtypes import dtypes
from fgrad.core.ir import Eqn
from fgrad.lower.kernel.index import Clamp, Div, Dyn, Ix, Mod, Sym
from fgrad.lower.kernel.streaming import (LINE_BYTES, line_elements, prefetched_loop,
                                          scratch_row, streamed_outputs, streamed_store,
                                          streams_by_blocks)
from fgrad.lower.kernel.row_pipeline import row_pipeline
from fgrad.lower.kernel.loop_shape import inner_trips, latency_bound
from fgrad.lower.kernel.signs import max_reductions, max_shifted, nonpositive, shift_test
from fgrad.lower.kernel.pieces import (clamp_idle, decide, fixed_quotient, piece_ranges,
                                       plain_sym, range_in, tile_width)
from fgrad.lower.kernel.ir import (AccInit, AccRead, AccUpdate, Const, Expr, IndexPred,
                                   IndexValue, Kernel, Load, Loop, Op, Stmt, Store)
from fgrad.lower.llvm.gemm.native import _loop as counted_loop
from fgrad.lower.llvm.gemm.prepack import prepack_plan
from fgrad.lower.llvm.blas import library_chunking, render_library_call
from fgrad.lower.llvm.kernels import vmath as llvm_math
from fgrad.lower.llvm.kernels.quotients import quotient_value
from fgrad.lower.llvm.kernels.rows import RowsRendering
from fgrad.lower.llvm.kernels.tiles import stage_loads, transposed_loads
from fgrad.lower.llvm.kernels.ops import (I1, I64, OPS, Emitter, acc_initial, acc_slots, const,
                                  mem_type, nan_key, reg_type)
from fgrad.lower.llvm.threads import (Call, chunking, emit_calls, entry_names, plan_parts,
                                      render_entry, render_part, split_extent)

NSW = ("nsw",)
INTERLEAVE = 2            # vector iterations per trip of an innermost loop
INTERLEAVE_MIN_EXTENT = 64
UNROLL_MAX_EXTENT = 16     # loops at least this long are never unrolled (`loop_id`)


def _i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


class _KernelRenderer(RowsRendering):
    """Builds one kernel function; values and indices are memoized per loop scope."""

    def __init__(self, module: ir.Module, kernel: Kernel, split: bool,
                 streamed: tuple[int, ...] = (),
                 twin: tuple[ir.Function, tuple[int, ...]] | None = None):
        self.kernel = kernel
        # `streamed`: this is the twin that writes those outputs with streaming stores
        # (kernel/streaming.py); `twin`: (that function, its outputs), to call when they
        # are aligned
        name = f"{kernel.name}.stream" if streamed else kernel.name
        self.fn = ir.Function(module, _signature(kernel, split), name=name)
        self.fn.linkage = "internal"
        self.streamed, self.twin, self.streaming = streamed, twin, False
        # a streamed value with transcendentals: computed by blocks (kernels/rows.py)
        self.blocked_stream = bool(streamed) and streams_by_blocks(kernel)
        found = streamed_store(kernel) if streamed else None
        self.streamed_loop = found[0] if found else None
        self.streamed_store = found[1] if found else None
        self.staged = scratch_row(kernel) if found else None   # a row staged on the stack
        self.row: ir.AllocaInstr | None = None
        for n, (arg, p) in enumerate(zip(self.fn.args, kernel.params, strict=False)):
            arg.name = p.name
            arg.add_attribute("noalias")
            if n in streamed:
                arg.attributes.align = LINE_BYTES
        if streamed:   # inlined, its outputs' alignment would be forgotten
            self.fn.attributes.add("noinline")
        # a split kernel runs iterations [start, stop) of its (only) outermost loop
        self.chunk = tuple(self.fn.args[-2:]) if split else None
        if split:
            self.fn.args[-2].name, self.fn.args[-1].name = "start", "stop"
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.known: dict[Sym, tuple[int, int]] = {}  # loop variable -> its current piece
        self.tiles: dict[Sym, tuple[int, ir.Value, ir.Value]] = {}  # (d, i // d, i % d)
        self.em = Emitter(self.b)
        self.syms: dict[Sym, ir.Value] = {}
        self.values: dict[int, ir.Value] = {}
        self.indices: dict[Ix, ir.Value] = {}
        self.accs: dict[int, ir.AllocaInstr] = {}
        pipeline = row_pipeline(kernel)   # (an outer loop in pieces renders them instead)
        self.pipeline = pipeline if pipeline is not None and (
            split or len(piece_ranges(pipeline.outer)) < 2) else None
        self.rider: tuple[Loop, Callable[[], None]] | None = None  # a loop, more of its body
        self.late_rider: tuple[Loop, Callable[[], None]] | None = None  # ... ahead of it
        self.late_block: tuple[ir.Value, ir.Value] | None = None   # kernels/rows.py
        self.late_row: ir.Value | None = None
        self.maxima = max_reductions(kernel.body)
        self.assumed: set[int] = set()   # ids of tests known true here, of loops versioned
        self.versioning: set[int] = set()
        self.tile_loads: dict[int, tuple[ir.Value, Sym, Sym]] = {}   # kernels/tiles.py
        self.prefetched = prefetched_loop(kernel)   # by blocks, with prefetches

    def render(self) -> ir.Function:
        if self.twin is not None:
            self.call_twin_when_aligned()
        for s in self.kernel.body:
            self.stmt(s)
        self.b.ret_void()
        return self.fn

    def call_twin_when_aligned(self) -> None:
        """Run the streaming twin instead when every output it streams is line-aligned."""
        assert self.twin is not None
        b, (twin, streamed) = self.b, self.twin
        aligned: ir.Value = ir.Constant(I1, 1)
        for n in streamed:
            low = b.and_(b.ptrtoint(self.fn.args[n], I64), _i64(LINE_BYTES - 1))
            aligned = b.and_(aligned, b.icmp_unsigned("==", low, _i64(0)))
        stream, plain = self.fn.append_basic_block("stream"), self.fn.append_basic_block("plain")
        b.cbranch(aligned, stream, plain)
        b.position_at_end(stream)
        b.call(twin, list(self.fn.args))
        b.ret_void()
        b.position_at_end(plain)

    def stream_loop(self, s: Loop) -> None:
        """The kernel's loop (or each of its pieces, `pieced_loads`) as three: ordinary stores
        up to the first whole cache line, streaming stores line by line (a line's elements
        unrolled: LLVM stores each with aligned vector stores), ordinary ones after."""
        if self.chunk and s is self.kernel.body[0]:
            self.stream_range(s, *self.chunk)
            return
        pieces = piece_ranges(s)
        if len(pieces) < 2:
            self.stream_range(s, _i64(0), _i64(s.sym.extent))
            return
        for piece in pieces:
            self.known[s.sym] = piece
            self.scoped(lambda: self.stream_range(s, _i64(piece[0]), _i64(piece[1] + 1)))
        del self.known[s.sym]

    def stream_range(self, s: Loop, lo: ir.Value, hi: ir.Value) -> None:
        """`stream_loop` over one range [lo, hi) of `s`."""
        b, width = self.b, line_elements(self.kernel, self.streamed)
        first = b.and_(b.add(lo, _i64(width - 1)), _i64(-width))
        first = b.select(b.icmp_signed("<", first, hi), first, hi)
        lines = b.udiv(hi, _i64(width))
        last = b.mul(lines, _i64(width))
        last = b.select(b.icmp_signed("<", last, first), first, last)
        self.scoped(lambda: self.counted(s.sym.name, lo, first, s,
                                         lambda i: self.loop_body(s, i)))
        # blocks also where the next row's first phase rides here: in a line's unrolled
        # elements its sum stayed a chain of scalar adds (x - mean(x) of 4096^2: 9.6 ms)
        if self.blocked_stream or (self.rider is not None and self.rider[0] is s):
            self.scoped(lambda: self.streamed_blocks(s, first, last))
            self.scoped(lambda: self.counted(f"{s.sym.name}.tail", last, hi, s,
                                             lambda i: self.loop_body(s, i)))
            return

        def line(q: ir.Value) -> None:
            def element(r: ir.Value) -> None:
                self.loop_body(s, self.b.add(self.b.mul(q, _i64(width), flags=NSW), r,
                                             flags=NSW))
            self.streaming = True
            self.counted(f"{s.sym.name}.e", _i64(0), _i64(width), s, element, unroll=True)
            self.streaming = False
        self.scoped(lambda: self.counted(f"{s.sym.name}.line", b.udiv(first, _i64(width)),
                                         lines, None, line))
        self.scoped(lambda: self.counted(f"{s.sym.name}.tail", last, hi, s,
                                         lambda i: self.loop_body(s, i)))

    def scoped(self, render: Callable[[], None]) -> None:
        """Render with this scope's values, forgetting what `render` computes."""
        scope = (dict(self.values), dict(self.indices))
        render()
        self.values, self.indices = scope

    # ------------------------------------------------------------------ statements

    def stmts(self, stmts: Sequence[Stmt]) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Loop):
            self.loop(s)
        elif isinstance(s, Store) and self.staged and s is self.staged.first:
            value = self.em.to_memory(self.kernel.params[s.buf].dtype, self.value(s.value))
            self.b.store(value, self.staged_at(self.staged.first_loop))
        elif isinstance(s, Store):
            self.store(s.buf, s.index, self.value(s.value))
        elif isinstance(s, AccInit):
            self.acc_init(s)
        else:
            self.acc_update(s)

    def loop(self, s: Loop) -> None:
        loads = [e for e in transposed_loads(s) if id(e) not in self.tile_loads]
        if loads:
            stage_loads(self, s, loads)
            self.loop(s)
            for e in loads:
                del self.tile_loads[id(e)]
            return
        if s is self.streamed_loop:
            self.stream_loop(s)
            return
        if self.pipeline is not None and s is self.pipeline.outer:
            self.pipelined_rows(self.pipeline)
            return
        test = None if id(s) in self.versioning else shift_test(s, self.maxima, self.assumed)
        if test is not None:
            self.versioned_loop(s, test)
            return
        pieces = piece_ranges(s) if s is not self.kernel.body[0] or not self.chunk else []
        if len(pieces) < 2:
            self.loop_range(s, None)
            return
        for piece in pieces:  # one loop per piece: its conditions on s are constants there
            self.known[s.sym] = piece
            self.loop_range(s, piece)
        del self.known[s.sym]

    def versioned_loop(self, s: Loop, test: Expr) -> None:
        """Loop `s` twice, chosen by `test` (a row maximum is finite): where it holds, the
        row's shifted values are <= 0 and their exps scale in one step (`signs.py`)."""
        self.versioning.add(id(s))
        with self.b.if_else(self.value(test)) as (finite, other):
            with finite:
                self.assumed.add(id(test))
                self.scoped(lambda: self.loop(s))
                self.assumed.discard(id(test))
            with other:
                self.scoped(lambda: self.loop(s))
        self.versioning.discard(id(s))

    def loop_range(self, s: Loop, piece: tuple[int, int] | None) -> None:
        """`for s.sym in range` (the chunk, a piece (lo, hi), or the whole extent); an
        innermost loop read by quotient and remainder as two (`pieces.tile_width`)."""
        if piece is None and self.blocked_carrier(s):
            return
        scope = (dict(self.values), dict(self.indices))
        chunk = self.chunk if piece is None and s is self.kernel.body[0] else None
        lo, hi = piece if piece is not None else (0, s.sym.extent - 1)
        width = None if chunk else tile_width(s, (lo, hi))
        if s is self.prefetched and (chunk or width is None):
            self.prefetched_blocks(s, *(chunk or (_i64(lo), _i64(hi + 1))))
        elif chunk:
            self.counted(s.sym.name, chunk[0], chunk[1], s, lambda i: self.loop_body(s, i))
        elif width is None:
            self.counted(s.sym.name, _i64(lo), _i64(hi + 1), s, lambda i: self.loop_body(s, i))
        else:
            def tile(q: ir.Value) -> None:
                def element(r: ir.Value) -> None:
                    self.tiles[s.sym] = (width, q, r)
                    i = self.b.add(self.b.mul(q, _i64(width), flags=NSW), r, flags=NSW)
                    self.loop_body(s, i)
                self.counted(f"{s.sym.name}.r", _i64(0), _i64(width), s, element)
            self.counted(f"{s.sym.name}.q", _i64(lo // width), _i64((hi + 1) // width), None,
                         tile)
            del self.tiles[s.sym]
        self.values, self.indices = scope

    def loop_body(self, s: Loop, i: ir.Value) -> None:
        self.syms[s.sym] = i
        if self.late_rider is not None and self.late_rider[0] is s:
            self.late_rider[1]()
        for inner in s.body:
            self.stmt(inner)
        if self.rider is not None and self.rider[0] is s:
            self.rider[1]()

    def counted(self, name: str, start: ir.Value, stop: ir.Value, s: Loop | None,
                body: Callable[[ir.Value], None], unroll: bool = False) -> None:
        """for (i = start; i < stop; i++) body(i); `s` is the kernel loop it renders (None:
        the outer loop of a tiled one), for LLVM's unrolling and interleaving hints;
        `unroll`: ask LLVM to unroll it fully (a constant trip count)."""
        backedge = counted_loop(self.b, start, stop, 1, body, name, flags=("nuw", "nsw"))
        innermost = s is not None and not any(isinstance(t, Loop) for t in s.body)
        trips = (stop.constant - start.constant if isinstance(stop, ir.Constant)
                 and isinstance(start, ir.Constant) else INTERLEAVE_MIN_EXTENT)
        interleave = (0 if not innermost or trips < INTERLEAVE_MIN_EXTENT
                      else INTERLEAVE if s is not None and latency_bound(s.body) else 1)
        # (a staged tile's inner loop stays a loop: unrolled, LLVM vectorized the loop
        # around it, with gathers and scatters)
        no_unroll = (s is None or trips >= (INTERLEAVE_MIN_EXTENT if innermost else
                                            UNROLL_MAX_EXTENT)
                     or inner_trips(s) >= INTERLEAVE_MIN_EXTENT
                     or any(s.sym is t[2] for t in self.tile_loads.values()))
        if unroll:
            backedge.set_metadata("llvm.loop", self.loop_id(backedge.operands[0].name, 0,
                                                            False, full=True))
        elif interleave or no_unroll:
            backedge.set_metadata("llvm.loop", self.loop_id(backedge.operands[0].name,
                                                            interleave, no_unroll))

    def loop_id(self, name: str, interleave: int, no_unroll: bool, full: bool = False
                ) -> ir.MDValue:
        """Loop metadata: no unrolling (LLVM would fully unroll loops of constant trip count,
        vectorized ones too: 45% of W9's kernel compile time, for no measured gain at run
        time); `interleave` vector iterations per trip for the vectorizer (0: no hint).
        Loops of transcendental polynomials or reductions get INTERLEAVE: their long
        dependency chains need two independent ones to keep the FMA units busy (W1 on 2
        cores, docs/design.md). Other loops get 1: they are bound by memory, and LLVM's own
        choice (2-4) doubles their machine code and its compile time."""
        module = self.fn.module
        # `name` is the loop's unique block name: llvmlite shares metadata nodes of equal
        # content, and loops sharing one ID would all take the hints set last.
        loop_id = module.add_metadata([ir.MetaDataString(module, f"{self.fn.name}.{name}")])
        hints = [module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")])
                 ] if no_unroll else []
        if full:
            hints.append(module.add_metadata([ir.MetaDataString(module,
                                                                "llvm.loop.unroll.full")]))
        if interleave:
            hints.append(module.add_metadata([
                ir.MetaDataString(module, "llvm.loop.interleave.count"),
                ir.Constant(ir.IntType(32), interleave)]))
        loop_id.operands = (loop_id, *hints)  # a loop ID refers to itself (LLVM LangRef)
        return loop_id

    def pointer(self, buf: int, index: Ix) -> ir.Value:
        return self.b.gep(self.fn.args[buf], [self.index(index)], inbounds=True)

    def staged_at(self, loop: Loop) -> ir.Value:
        """The staged row's element at `loop`'s variable (kernel/streaming.py)."""
        assert self.staged is not None
        if self.row is None:
            with self.b.goto_entry_block():
                self.b.position_at_start(self.fn.entry_basic_block)
                dtype = self.kernel.params[self.staged.buf].dtype
                self.row = self.b.alloca(mem_type(dtype), size=loop.sym.extent, name="row")
                self.row.align = LINE_BYTES
        return self.b.gep(self.row, [self.syms[loop.sym]], inbounds=True)

    def store(self, buf: int, index: Ix, value: ir.Value) -> None:
        value = self.em.to_memory(self.kernel.params[buf].dtype, value)
        block = self.late_store_pointer(buf)
        store = self.b.store(value, self.pointer(buf, index) if block is None else block)
        if self.streaming and buf in self.streamed:
            module = self.fn.module
            store.set_metadata("nontemporal",
                               module.add_metadata([ir.Constant(ir.IntType(32), 1)]))

    def acc_init(self, s: AccInit) -> None:
        if s.acc not in self.accs:
            with self.b.goto_entry_block():
                self.b.position_at_start(self.fn.entry_basic_block)
                for key, ty in acc_slots(s):
                    self.accs[key] = self.b.alloca(ty, name=f"acc{key}")
        for key, value in acc_initial(s):
            self.b.store(value, self.accs[key])

    def acc_update(self, s: AccUpdate) -> None:
        x = self.value(s.value)
        slot = self.accs[s.acc]
        old = self.b.load(slot)
        if nan_key(s.acc) in self.accs:   # a float max/min: maxnum, NaNs counted apart
            seen = self.accs[nan_key(s.acc)]
            name = "llvm.maxnum" if s.op == "max" else "llvm.minnum"
            fn = self.fn.module.declare_intrinsic(name, [x.type],
                                                  ir.FunctionType(x.type, [x.type, x.type]))
            self.b.store(self.b.call(fn, [old, x], fastmath=("nnan", "nsz")), slot)
            self.b.store(self.b.or_(self.b.load(seen), self.b.fcmp_unordered("uno", x, x)),
                         seen)
            return
        if s.op in ("add", "mul") and s.value.dtype.is_float:
            fn = self.b.fadd if s.op == "add" else self.b.fmul
            new = fn(old, x, flags=("reassoc",))
        else:
            new = OPS[s.op](self.em, [old, x], s.value.dtype, s.value.dtype)
        self.b.store(new, slot)

    # ------------------------------------------------------------------ values

    def value(self, e: Expr) -> ir.Value:
        if isinstance(e, Const):
            return const(e.dtype, e.value)
        if isinstance(e, AccRead):
            held = self.b.load(self.accs[e.acc])
            if nan_key(e.acc) not in self.accs:
                return held
            nan = ir.Constant(held.type, float("nan"))
            return self.b.select(self.b.load(self.accs[nan_key(e.acc)]), nan, held)
        if id(e) not in self.values:
            self.values[id(e)] = self.compute(e)
        return self.values[id(e)]

    def compute(self, e: Expr) -> ir.Value:
        b = self.b
        if isinstance(e, Load) and id(e) in self.tile_loads:
            tile, row, column = self.tile_loads[id(e)]
            at = b.gep(tile, [b.add(b.mul(self.syms[row], _i64(column.extent), flags=NSW),
                                    self.syms[column], flags=NSW)], inbounds=True)
            return self.em.from_memory(e.dtype, b.load(at))
        if isinstance(e, Load):
            at = self.staged_at(self.staged.last_loop) if self.staged and id(
                e) in self.staged.loads else self.pointer(e.buf, e.index)
            return self.em.from_memory(e.dtype, b.load(at))
        if isinstance(e, IndexValue):
            return self.index_value(e)
        if isinstance(e, IndexPred):
            return self.predicate(e)
        assert isinstance(e, Op)
        if e.op == "select":
            which = self.value(e.args[0])
            if isinstance(which, ir.Constant):   # decided by a piece: the other side is dead
                return self.value(e.args[1] if which.constant else e.args[2])
        args = [self.value(a) for a in e.args]
        merged = quotient_value(self, e)
        if merged is not None:
            return merged
        if e.op == "exp" and (nonpositive(e.args[0]) or self.assumed and id(
                max_shifted(e.args[0], self.maxima)) in self.assumed):
            return self.em.round_to(e.dtype, llvm_math.exp_nonpositive(self.em, args[0]))
        return self.em.emit(e.op, args, [a.dtype for a in e.args], e.dtype)

    def index_value(self, e: IndexValue) -> ir.Value:
        i = self.index(e.index)
        if e.dtype == dtypes.bool:
            return self.b.icmp_signed("!=", i, _i64(0))
        if e.dtype.is_float:
            return self.em.round_to(e.dtype, self.b.sitofp(i, reg_type(e.dtype)))
        return self.b.trunc(i, reg_type(e.dtype)) if e.dtype.itemsize < 8 else i

    def predicate(self, e: IndexPred) -> ir.Value:
        b = self.b
        out: ir.Value | None = None
        for c in e.conds:
            known = decide(c, self.known)
            if known is not None:   # decided by the piece of a split loop
                if not known:
                    return ir.Constant(I1, 0)
                continue
            i = self.index(c.index)
            ok = b.and_(b.icmp_signed(">=", i, _i64(c.lo)), b.icmp_signed("<=", i, _i64(c.hi)))
            if c.step > 1:
                ok = b.and_(ok, b.icmp_signed("==", b.srem(i, _i64(c.step)), _i64(0)))
            out = ok if out is None else b.and_(out, ok)
        return ir.Constant(I1, 1) if out is None else out

    # ------------------------------------------------------------------ indices

    def index(self, e: Ix) -> ir.Value:
        if e not in self.indices:
            self.indices[e] = self.compute_index(e)
        return self.indices[e]

    def compute_index(self, e: Ix) -> ir.Value:
        b = self.b
        total: ir.Value | None = None
        for atom, coeff in e.terms:
            v = self.atom(atom)
            term = v if coeff == 1 else b.mul(v, _i64(coeff), flags=NSW)
            total = term if total is None else b.add(total, term, flags=NSW)
        if total is None:
            return _i64(e.const)
        return b.add(total, _i64(e.const), flags=NSW) if e.const else total

    def atom(self, a: Sym | Div | Mod | Clamp | Dyn) -> ir.Value:
        b = self.b
        if isinstance(a, Sym):
            return self.syms[a]
        if isinstance(a, Dyn):
            return self.run_time_index(a)
        x = self.index(a.arg)
        if isinstance(a, Clamp):
            if clamp_idle(a, self.known):
                return x
            x = b.select(b.icmp_signed("<", x, _i64(0)), _i64(0), x)
            return b.select(b.icmp_signed(">", x, _i64(a.hi)), _i64(a.hi), x)
        quotient = fixed_quotient(a, self.known)   # one value over the current pieces
        if quotient is not None:
            if isinstance(a, Div):
                return _i64(quotient)
            return x if quotient == 0 else b.sub(x, _i64(quotient * a.d))
        sym = plain_sym(a.arg)
        if sym is not None and sym in self.tiles:
            return self.tiled_atom(a, *self.tiles[sym])
        d = _i64(a.d)
        nonneg = range_in(a.arg, self.known)[0] >= 0
        if isinstance(a, Div):
            if nonneg:
                return b.udiv(x, d)
            r_neg = b.icmp_signed("<", b.srem(x, d), _i64(0))
            return b.sub(b.sdiv(x, d), b.zext(r_neg, I64))
        if nonneg:
            return b.urem(x, d)
        r = b.srem(x, d)
        return b.add(r, b.select(b.icmp_signed("<", r, _i64(0)), d, _i64(0)))

    def tiled_atom(self, a: Div | Mod, d: int, q: ir.Value, r: ir.Value) -> ir.Value:
        """`i // k` or `i % k` of a loop variable i = q*d + r rendered tiled (0 <= r < d),
        in terms of q and r where k and d divide one another."""
        b, k = self.b, a.d
        if k % d == 0:      # i // k = q // (k/d);  i % k = (q % (k/d))*d + r
            if isinstance(a, Div):
                return q if k == d else b.udiv(q, _i64(k // d))
            high = q if k == d else b.urem(q, _i64(k // d))
            return r if k == d else b.add(b.mul(high, _i64(d), flags=NSW), r, flags=NSW)
        if d % k == 0:      # i // k = q*(d/k) + r // k;  i % k = r % k
            if isinstance(a, Div):
                return b.add(b.mul(q, _i64(d // k), flags=NSW), b.udiv(r, _i64(k)), flags=NSW)
            return b.urem(r, _i64(k))
        i = self.syms[plain_sym(a.arg)]   # type: ignore[index]
        return b.udiv(i, _i64(k)) if isinstance(a, Div) else b.urem(i, _i64(k))

    def run_time_index(self, a: Dyn) -> ir.Value:
        """The integer value of `a` widened to i64 (by its signedness) and clamped into
        [0, a.hi]; unsigned values compare unsigned, so huge ones clamp to a.hi."""
        b = self.b
        v = self.value(a.value)
        unsigned = a.value.dtype.is_unsigned
        if v.type.width < 64:
            v = b.zext(v, I64) if unsigned else b.sext(v, I64)
        hi = _i64(a.hi)
        if unsigned:
            return b.select(b.icmp_unsigned(">", v, hi), hi, v)
        v = b.select(b.icmp_signed("<", v, _i64(0)), _i64(0), v)
        return b.select(b.icmp_signed(">", v, hi), hi, v)


def _signature(kernel: Kernel, split: bool) -> ir.FunctionType:
    args = [ir.PointerType(mem_type(p.dtype)) for p in kernel.params]
    return ir.FunctionType(ir.VoidType(), args + [I64, I64] * split)


def _splits(kernel: Kernel) -> bool:
    return split_extent(kernel) > 0 or kernel.row_range


def kernel_function_type(kernel: Kernel) -> ir.FunctionType:
    """The type of the function `render_kernel` makes of `kernel` (without rendering)."""
    return _signature(kernel, _splits(kernel))


def render_kernel(module: ir.Module, kernel: Kernel) -> ir.Function:
    """Add `kernel` to `module` as an internal function; a kernel that threads split
    (`llvm_threads.split_extent`) takes two more i64 arguments: its loop's [start, stop).
    A kernel that streams its output (kernel/streaming.py) gets a twin, `<name>.stream`,
    that it calls when the output is line-aligned."""
    split = _splits(kernel)
    streamed = streamed_outputs(kernel)
    if not streamed:
        return _KernelRenderer(module, kernel, split).render()
    twin = _KernelRenderer(module, kernel, split, streamed=streamed).render()
    return _KernelRenderer(module, kernel, split, twin=(twin, streamed)).render()


def _declare(module: ir.Module, symbol: str, ftype: ir.FunctionType) -> ir.Function:
    """The function `symbol` compiled elsewhere, declared once (twins share a symbol)."""
    found = module.globals.get(symbol)
    return found if isinstance(found, ir.Function) else ir.Function(module, ftype, name=symbol)


def render_module(kernels: Sequence[Kernel], segments: Sequence[Sequence[Call]],
                  library_calls: dict[str, Eqn] | None = None,
                  external: dict[str, tuple[str, ir.FunctionType]] | None = None,
                  epilogues: dict[str, str] | None = None,
                  private: frozenset[str] = frozenset()) -> ir.Module:
    """One module: every kernel and library call, plus the entries of each segment (see
    `entry_names`). A kernel named in `external` (name -> (symbol, function type)) is only
    declared: its code comes compiled on its own (kernel_cache.py); so is a library call
    named there. `epilogues`: gemm calls (by name) that run a kernel inside."""
    module = ir.Module(name="fgrad")
    external = external or {}
    functions = {k.name: _declare(module, *external[k.name]) if k.name in external
                 else render_kernel(module, k) for k in kernels}
    by_name = {k.name: k for k in kernels}
    library = library_chunking(library_calls or {})
    prepacks = frozenset(name for name, eqn in (library_calls or {}).items()
                         if name in library and prepack_plan(eqn) is not None)
    epilogues = epilogues or {}
    for name, eqn in (library_calls or {}).items():
        if name in external:
            functions[name] = _declare(module, *external[name])
            continue
        fused = epilogues.get(name)
        functions[name] = render_library_call(
            module, name, eqn, name in library, functions.get(fused) if fused else None,
            by_name.get(fused) if fused else None, name in private)
    for i, calls in enumerate(segments):
        parts = plan_parts(calls, by_name, library)
        names = entry_names(i, parts)
        if names == [f"seg{i}"]:
            render_entry(module, names[0], calls, functions, by_name, library)
            continue
        emit = emit_calls(calls, functions, by_name, library, prepacks)
        ordered = frozenset(n for n, (name, _) in enumerate(calls) if name in prepacks)
        chunks = [library.get(name) or chunking(by_name.get(name)) for name, _ in calls]
        for name, part in zip(names, parts, strict=True):
            render_part(module, name, part, chunks, emit, ordered)
    return module
