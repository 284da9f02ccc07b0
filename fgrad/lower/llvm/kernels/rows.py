"""The rows' loop of a pipelined row kernel (kernel/row_pipeline.py), rendered to LLVM IR.

Each row's first phase runs one row early, inside the row before's `carrier` loop, into
accumulators that become the row's own at the end of the row before. In the streaming
twin of a kernel whose last phase streams its output row (softmax's exps / sum, layernorm's
normalized row), that phase also runs one row late, inside the next row's carrier, ahead of
the carrier's own body (which overwrites softmax's staged row), so the output's streaming
stores overlap the carrier's arithmetic instead of following it. LLVM's loop vectorizer
keeps no streaming store it cannot prove aligned, so there the carrier runs in blocks of
`BLOCK_BYTES` of output: the late phase writes its block to a stack block with plain
stores, and after each block an aligned vector copy streams it out, a line per store. The
blocks' partial sums add up in another order (results move by rounding only). A range's
first row has no row before it: its late phase writes the row itself from the unfilled
stage, and the next row rewrites it; after the loop the range's last row runs its last
phase as before. 4096 x 4096 float32, alternating processes: softmax 3.9-4.9 -> 3.4-3.8
ms, layernorm 3.3 -> 2.8-2.9, log_softmax 7.5-7.9 -> 3.5-3.7 (its output now streams: a
log of the sum alone no longer counts as per-element work, kernel/streaming.py).
"""
from __future__ import annotations

from typing import Any, Callable

from llvmlite import ir

from fgrad.lower.kernel.ir import AccInit, Load, Loop, Store
from fgrad.lower.kernel.row_pipeline import RowPipeline
from fgrad.lower.kernel.streaming import (LINE_BYTES, PREFETCH_BYTES, line_elements,
                                          prefetched_loads)
from fgrad.lower.llvm.kernels.ops import I64, acc_initial, acc_slots, mem_type

NSW = ("nsw",)
# output per block (`streamed_blocks`) of a carrier that writes the row before's output, or
# of a streamed elementwise loop with transcendentals (no better at 2048 or 8192 bytes): 8
# lines leave the write-combining buffers room to drain while the next block computes
# (softmax 4096^2 at 256 / 512 / 1024 / 4096 bytes: 0.88-0.91x / 0.78-0.88x / 0.82-0.95x /
# ~1x the time)
BLOCK_BYTES = 512


def _i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


class RowsRendering:
    """Mixed into the kernel renderer (kernels/render.py), whose state it uses."""

    b: ir.IRBuilder
    fn: ir.Function
    kernel: Any
    syms: dict
    accs: dict
    values: dict
    indices: dict
    chunk: tuple[ir.Value, ir.Value] | None
    streamed: tuple[int, ...]
    streamed_loop: Loop | None
    streamed_store: Store | None
    pipeline: RowPipeline | None
    rider: tuple[Loop, Callable[[], None]] | None
    late_rider: tuple[Loop, Callable[[], None]] | None
    late_block: tuple[ir.Value, ir.Value] | None   # (stack block, its first element)
    late_row: ir.Value | None                       # the row the late phase writes
    stmts: Callable[..., None]
    loop: Callable[..., None]
    loop_body: Callable[..., None]
    scoped: Callable[..., None]
    counted: Callable[..., None]
    pointer: Callable[..., ir.Value]
    compute_index: Callable[..., ir.Value]

    def late_phase(self) -> Loop | None:
        """The last phase that runs one row late (module docstring), or None."""
        plan, last = self.pipeline, self.streamed_loop
        # the last phase must ride in an earlier carrier: where it is the carrier itself
        # (x - max(x): a reduction, then the streamed row), it runs in its own row
        if plan is None or last is None or not plan.rest or plan.rest[-1] is not last \
                or plan.carrier is last \
                or last.sym.extent != plan.carrier.sym.extent \
                or last.sym.extent % line_elements(self.kernel, self.streamed):
            return None
        # nor where another phase runs between the carrier and the last one (a layernorm's
        # gradient starts an accumulator there): what it makes is not there in the carrier
        after = plan.rest[plan.rest.index(plan.carrier) + 1:]
        if any(isinstance(s, (AccInit, Loop)) for s in after[:-1]):
            return None
        return last

    def pipelined_rows(self, plan: RowPipeline) -> None:
        """The rows' loop of `plan` (module docstring); the range's first row's first
        phase before it."""
        b, s = self.b, plan.outer
        lo, hi = self.chunk if self.chunk else (_i64(0), _i64(s.sym.extent))
        with b.if_then(b.icmp_signed("<", lo, hi)):
            self.syms[s.sym] = lo
            self.scoped(lambda: self.stmts((*plan.inits, plan.first)))
        with b.goto_entry_block():
            b.position_at_start(self.fn.entry_basic_block)
            ahead = {key: b.alloca(ty, name=f"acc{key}.next") for t in plan.inits
                     for key, ty in acc_slots(t)}
        late = self.late_phase()
        done: dict[int, ir.AllocaInstr] = {}   # the accumulators of the row before

        def next_row_phase(row: ir.Value) -> None:
            kept = (self.values, self.indices, dict(self.accs), dict(self.syms))
            self.values, self.indices = {}, {}
            self.syms[s.sym], self.syms[plan.first.sym] = row, self.syms[plan.carrier.sym]
            self.accs.update(ahead)
            self.stmts(plan.first.body)
            self.values, self.indices, self.accs, self.syms = kept

        def last_phase(row: ir.Value, element: ir.Value | None) -> None:
            assert late is not None
            kept = (self.values, self.indices, dict(self.accs), dict(self.syms))
            self.values, self.indices = {}, {}
            self.syms[s.sym] = row
            with b.goto_entry_block():
                b.position_at_start(self.fn.entry_basic_block)
                for key, slot in self.accs.items():
                    if key not in done:
                        done[key] = b.alloca(slot.allocated_type, name=f"acc{key}.done")
            self.accs.update(done)
            if element is None:
                self.loop(late)
            else:
                self.syms[late.sym] = element
                self.stmts(late.body)
            self.values, self.indices, self.accs, self.syms = kept

        def row(i: ir.Value) -> None:
            self.syms[s.sym] = i
            after = b.add(i, _i64(1), flags=NSW)
            following = b.select(b.icmp_signed("<", after, hi), after, i)
            for init in plan.inits:
                for key, value in acc_initial(init):
                    b.store(value, ahead[key])
            self.rider = (plan.carrier, lambda: next_row_phase(following))
            if late is not None:   # ahead of the body, which overwrites the staged row
                before = b.select(b.icmp_signed(">", i, lo), b.sub(i, _i64(1)), i)
                self.late_rider = (plan.carrier,
                                   lambda: last_phase(before, self.syms[plan.carrier.sym]))
                self.late_row = before
            self.stmts(plan.rest if late is None else plan.rest[:-1])
            for key in done:
                b.store(b.load(self.accs[key]), done[key])
            for key in ahead:
                b.store(b.load(ahead[key]), self.accs[key])
            self.rider = self.late_rider = None
        self.scoped(lambda: self.counted(s.sym.name, lo, hi, s, row))
        if late is not None:
            with b.if_then(b.icmp_signed("<", lo, hi)):
                self.scoped(lambda: last_phase(b.sub(hi, _i64(1)), None))

    def blocked_carrier(self, s: Loop) -> bool:
        """Render carrier `s` in blocks (module docstring) when a late phase rides in it;
        False when it does not."""
        if self.late_rider is None or self.late_rider[0] is not s:
            return False
        self.streamed_blocks(s, _i64(0), _i64(s.sym.extent), "late_block", self.late_row)
        return True

    def streamed_blocks(self, s: Loop, first: ir.Value, last: ir.Value,
                        name: str = "stream_block", row: ir.Value | None = None) -> None:
        """Iterations [first, last) (whole lines) of loop `s` by blocks of `BLOCK_BYTES` of
        output: the vectorized loop writes a block's values to a stack block with plain
        stores (the late phase riding in a carrier, or a streamed elementwise loop with
        transcendentals, whose line of elements unrolled stayed scalar code: LLVM's SLP
        vectorizer does not pack the exp's selects and integer steps), then
        `stream_block` streams it out (into output row `row` of a pipelined kernel, the
        row before's for a late phase; else the current one)."""
        store = self.streamed_store
        assert store is not None
        b = self.b
        dtype = self.kernel.params[store.buf].dtype
        width = max(BLOCK_BYTES // dtype.itemsize, 1)
        with b.goto_entry_block():
            b.position_at_start(self.fn.entry_basic_block)
            block = b.alloca(mem_type(dtype), size=width, name=name)
            block.align = LINE_BYTES

        loads = prefetched_loads(s, pipelined=self.pipeline is not None)

        def one_block(start: ir.Value, stop: ir.Value) -> None:
            self.prefetch_ahead(loads, s, start, width)
            self.late_block = (block, start)
            self.counted(f"{s.sym.name}.in", start, stop, s, lambda i: self.loop_body(s, i))
            self.late_block = None
            self.stream_block(block, start, stop, store, row)
        self.by_blocks(s, first, last, width, one_block)

    def prefetched_blocks(self, s: Loop, first: ir.Value, last: ir.Value) -> None:
        """Iterations [first, last) of loop `s` by blocks of BLOCK_BYTES of its widest
        load, each after prefetches of the loads a block PREFETCH_BYTES ahead will make
        (kernel/streaming.py `prefetched_loads`)."""
        loads = prefetched_loads(s)
        width = max(BLOCK_BYTES // max(e.dtype.itemsize for e in loads), 1)

        def one_block(start: ir.Value, stop: ir.Value) -> None:
            self.prefetch_ahead(loads, s, start, width)
            self.counted(f"{s.sym.name}.in", start, stop, s, lambda i: self.loop_body(s, i))
        self.by_blocks(s, first, last, width, one_block)

    def by_blocks(self, s: Loop, first: ir.Value, last: ir.Value, width: int,
                  block: Callable[[ir.Value, ir.Value], None]) -> None:
        """block(start, stop) for each block of `width` iterations of [first, last) of
        loop `s` (the last one cut at `last`)."""
        b = self.b

        def one_block(q: ir.Value) -> None:
            start = b.add(first, b.mul(q, _i64(width), flags=NSW), flags=NSW)
            stop = b.add(start, _i64(width), flags=NSW)
            block(start, b.select(b.icmp_signed("<", stop, last), stop, last))
        blocks = b.udiv(b.add(b.sub(last, first), _i64(width - 1)), _i64(width))
        self.counted(f"{s.sym.name}.block", _i64(0), blocks, None, one_block)

    def prefetch_ahead(self, loads: list[Load], s: Loop, start: ir.Value, width: int
                       ) -> None:
        """Prefetch (into every cache level) the lines that `loads` read at iterations
        [start, start + width) of `s`, PREFETCH_BYTES further on; in a pipelined row's
        loop, PREFETCH_BYTES past the same place in the next row, whose first phase rides
        in this loop and reads it (a row ahead prefetched what the rider was reading then:
        4096^2 softmax on one core 7.7-7.8 -> 5.9-6.1 ms, two 3.2-3.6 -> 3.0-3.3). A
        prefetch never faults, so those past the end of a buffer cost nothing but the
        instruction."""
        if not loads:
            return
        b = self.b
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = self.fn.module.declare_intrinsic("llvm.prefetch", [i8p], ir.FunctionType(
            ir.VoidType(), [i8p, i32, i32, i32]))
        here = self.syms.get(s.sym)
        inner = self.pipeline is not None and s is not self.pipeline.outer
        for e in loads:
            ahead = PREFETCH_BYTES // e.dtype.itemsize
            ahead = s.sym.extent + ahead if inner else ahead
            for k in range(0, width, max(LINE_BYTES // e.dtype.itemsize, 1)):
                self.syms[s.sym] = b.add(start, _i64(ahead + k), flags=NSW)
                at = b.gep(self.fn.args[e.buf], [self.compute_index(e.index)])
                # read, keep in all levels (locality 3), data cache
                b.call(fn, [b.bitcast(at, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3),
                            ir.Constant(i32, 1)])
        if here is None:
            self.syms.pop(s.sym, None)
        else:
            self.syms[s.sym] = here

    def late_store_pointer(self, buf: int) -> ir.Value | None:
        """Where the late phase's store of `buf` goes inside a block: the stack block."""
        if self.late_block is None or buf not in self.streamed or self.streamed_loop is None:
            return None
        block, start = self.late_block
        at = self.b.sub(self.syms[self.streamed_loop.sym], start, flags=NSW)
        return self.b.gep(block, [at], inbounds=True)

    def stream_block(self, block: ir.Value, start: ir.Value, stop: ir.Value,
                     store: Store, row: ir.Value | None = None) -> None:
        """Copy the stack block [start, stop) of output row `row` (None: the current
        row, or no rows) into the output, a line per aligned vector load and streaming
        store."""
        b = self.b
        dtype = self.kernel.params[store.buf].dtype
        lanes = LINE_BYTES // dtype.itemsize
        line = ir.VectorType(mem_type(dtype), lanes)
        late = self.streamed_loop
        assert late is not None
        outer = self.pipeline.outer if self.pipeline is not None else None
        nontemporal = self.fn.module.add_metadata([ir.Constant(ir.IntType(32), 1)])

        def copy(q: ir.Value) -> None:
            first = b.mul(q, _i64(lanes), flags=NSW)
            source = b.bitcast(b.gep(block, [first], inbounds=True), line.as_pointer())
            kept = dict(self.syms), self.values, self.indices
            self.values, self.indices = {}, {}
            if outer is not None and row is not None:
                self.syms[outer.sym] = row
            self.syms[late.sym] = b.add(start, first, flags=NSW)
            target = b.bitcast(self.pointer(store.buf, store.index), line.as_pointer())
            self.syms, self.values, self.indices = kept
            moved = b.store(b.load(source, align=LINE_BYTES), target, align=LINE_BYTES)
            moved.set_metadata("nontemporal", nontemporal)
        lines = b.udiv(b.sub(stop, start), _i64(lanes))
        self.counted(f"{late.sym.name}.copy", _i64(0), lines, None, copy)
