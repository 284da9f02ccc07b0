"""A split GEMM whose threads claim row blocks as they go, each over its own B panels.

In: an unbatched product that splits over the pool (each thread packing its own B panel
measured faster than sharing one on both hosts: `prepack.ENABLED`). Out: its plan
(`claimed_plan`: one chunk per thread, rows in blocks), the call site's body that runs a
thread's part (`emit_claimed`), and the driver's loop over the blocks of one panel
(`claimed_blocks`).

Why: the plain split gives each thread a fixed half of the rows, so a thread that shares
its core with another process sets the call's time (W3 under `bench/run.py --contended`:
2.0-2.4x slower, against JAX's 1.2-1.7x). Here the driver's loops keep their order (column
block jc, then slice pc, whose B panel a thread packs into its own L2 buffer only when it
has claimed a row block of it), but the row blocks of each panel are claimed from a counter,
so the thread that runs faster takes more of them. C's rows of a block accumulate slice
after slice, so block i of panel p waits until block i of panel p - 1 is stored (a counter
per block, release/acquire); blocks are claimed in order, so the wait is rare and short.

The counters live in one zeroed block of the call's (`scratch_elems` i64): one per panel,
each on its own cache line, then one per row block. The first thread to need it allocates
it and installs it in the call's state line (slot 6) by compare-and-swap (a thread that
loses frees its own; where calloc fails, `NO_COUNTERS`, and part 0 computes every row
alone); the thread that finishes the last part (slot 7) frees it. The driver
reads its address from its `dims` ("claims"; 0 for the plain split).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from llvmlite import ir

from fgrad.lower.llvm.gemm.native import I64, KC, MC_TARGET, NC, _c, _libc, _loop, _smin

ROW_BLOCKS_PER_THREAD = 4
# a 256^3 product on a 16-core Xeon: 0.121 ms in 4 parts, 0.136 in 8, 0.264 in 16 (each part
# packing all of B); PyTorch 0.053 (docs/performance.md, thirty-seventh session)
MIN_PART_ROWS = 64
LINE = 8                     # i64 per cache line: one panel counter each
SCRATCH_SLOT, FINISHED_SLOT = 6, 7   # state line slots (0-5: threads.HOME_RANGES counters)
NO_COUNTERS = 1   # the scratch slot's value when calloc failed
# measurement switch (bench/A-B): False keeps the plain split where B is not shared
ENABLED = True


@dataclass(frozen=True)
class ClaimedPlan:
    """A claimed split: `threads` parts (one chunk each of the pool's claim loop), the `m`
    rows in `blocks` blocks of `rows_per` (the driver's MC), `panels` B panels."""

    threads: int
    blocks: int
    rows_per: int
    m: int
    panels: int

    @property
    def chunking(self) -> tuple[int, int, int]:
        """The call's (chunk count, size, extent) for threads.render_part: a part each."""
        return self.threads, 1, self.threads

    @property
    def scratch_elems(self) -> int:
        """i64 counters the call needs: a cache line per panel, one per row block."""
        return self.panels * LINE + self.blocks

    def describe(self, name: str) -> str:
        """One line for `threads.describe_threads`."""
        return (f"{name} over {self.m} rows ({self.blocks} blocks of {self.rows_per} rows "
                f"claimed per B panel, {self.panels} panels)")


def split_rows(m: int, mr: int, row_flops: int, min_chunk_flops: int) -> tuple[int, int]:
    """(parts, rows per chunk) of a split product's m rows: a part per thread of the
    machine (not FGRAD_NUM_THREADS: one plan) but at least MIN_PART_ROWS rows each (each
    part packs the B panels it uses itself), about ROW_BLOCKS_PER_THREAD chunks per part,
    each of at least `min_chunk_flops`, whole MR tiles, at most the driver's MC
    (gemm/prepack.py's row chunks too)."""
    threads = max(2, min(os.cpu_count() or 1, m // MIN_PART_ROWS))
    rows = max(-(-m // (threads * ROW_BLOCKS_PER_THREAD)), -(-min_chunk_flops // row_flops))
    return threads, min(-(-rows // mr) * mr, max(mr, MC_TARGET // mr * mr))


def claimed_plan(m: int, n: int, k: int, mr: int, row_flops: int,
                 min_chunk_flops: int, kc: int = KC) -> ClaimedPlan | None:
    """The claimed split of an m x n x k product with MR-row tiles and `kc`-deep slices
    (the driver's), or None when it would have fewer than two row blocks."""
    threads, rows = split_rows(m, mr, row_flops, min_chunk_flops)
    tiles = -(-m // mr)
    blocks = -(-tiles // (rows // mr))
    blocks = min(tiles, -(-blocks // threads) * threads)   # claimed in turn: even shares
    rows = -(-tiles // blocks) * mr         # the largest block (the driver's `block_rows`)
    blocks = -(-m // rows)
    if blocks < 2 or k < 1:
        return None
    return ClaimedPlan(threads, blocks, rows, m, -(-n // NC) * -(-k // kc))



def emit_claimed(b: ir.IRBuilder, plan: ClaimedPlan, call: tuple[ir.Value, ...],
                 claims_at: ir.Value, start: ir.Value, stop: ir.Value,
                 line: ir.Value) -> None:
    """Run parts [start, stop) of a claimed call (module docstring): `call` is (driver,
    dims, out, lhs, rhs, thunk, ctx), `claims_at` the "claims" field of `dims`, `line` the
    call's i64 state line."""
    driver, dims, out, lhs, rhs, thunk, ctx = call
    module = b.module
    i8p = ir.IntType(8).as_pointer()
    free = _libc(module, "free", ir.VoidType(), [i8p])
    calloc = _libc(module, "calloc", i8p, [I64, I64])
    slot = b.gep(line, [_c(SCRATCH_SLOT)], inbounds=True)
    with b.if_then(b.icmp_signed("==", b.load_atomic(slot, "acquire", 8), _c(0))):
        fresh = b.call(calloc, [_c(plan.scratch_elems), _c(8)])
        # NO_COUNTERS where calloc failed, so that every part agrees
        value = b.select(b.icmp_unsigned("==", fresh, ir.Constant(i8p, None)),
                         _c(NO_COUNTERS), b.ptrtoint(fresh, I64))
        swap = b.cmpxchg(slot, _c(0), value, "acq_rel", "acquire")
        with b.if_then(b.not_(b.extract_value(swap, 1))):
            b.call(free, [fresh])
    scratch = b.load_atomic(slot, "acquire", 8)
    counted = b.icmp_signed("!=", scratch, _c(NO_COUNTERS))
    b.store(b.select(counted, scratch, _c(0)), claims_at)
    fp = out.type

    def part(u: ir.Value) -> None:
        # without counters part 0 computes every row as the plain driver, the others nothing
        with b.if_then(b.or_(counted, b.icmp_signed("==", u, _c(0)))):
            b.call(driver, [dims, out, lhs, rhs, _c(0), _c(plan.m), thunk, ctx,
                            ir.Constant(fp, None)])
    _loop(b, start, stop, 1, part, "part")
    finished = b.gep(line, [_c(FINISHED_SLOT)], inbounds=True)
    count = b.sub(stop, start)
    before = b.atomic_rmw("add", finished, count, "acq_rel")
    last = b.icmp_signed("==", b.add(before, count), _c(plan.threads))
    with b.if_then(b.and_(last, counted)):
        b.call(free, [b.inttoptr(scratch, i8p)])


def claimed_blocks(b: ir.IRBuilder, claims: ir.Value, d: dict[str, ir.Value],
                   jc: ir.Value, pc: ir.Value, rows: tuple[ir.Value, ir.Value],
                   local: ir.Value, pack_panel: Callable[[], ir.Value],
                   row_block: Callable[[ir.Value, ir.Value, ir.Value], None],
                   tile_rows: int) -> None:
    """The driver's loop over the row blocks of panel (jc, pc) in rows [lo, hi) that this
    thread claims (module docstring): `claims` the counters' address (i64), or 0 for the
    plain split, whose thread takes every block of its rows through the same loop (one copy
    of the block's code) with `local` (two i64 of its stack: a counter, and a mark that is
    never below the panel index); `pack_panel()` packs this panel and returns it,
    `row_block(ic, rows, panel)` computes rows [ic, ic + rows) of it. The blocks, at most
    mc rows, share the `tile_rows`-row tiles evenly, larger ones first (`block_rows`)."""
    counted = b.icmp_signed("!=", claims, _c(0))
    base = b.inttoptr(claims, I64.as_pointer())
    mc = d["mc"]
    lo, hi = rows
    slices = b.sdiv(b.add(d["k"], b.sub(d["kc"], _c(1))), d["kc"])
    columns = b.sdiv(b.add(d["n"], b.sub(d["nc"], _c(1))), d["nc"])
    panel_index = b.add(b.mul(b.sdiv(jc, d["nc"]), slices), b.sdiv(pc, d["kc"]))
    blocks = b.sdiv(b.add(b.sub(hi, lo), b.sub(mc, _c(1))), mc)
    own = b.gep(local, [_c(0)], inbounds=True)
    b.store(_c(0), own)
    counter = b.select(counted, b.gep(base, [b.mul(panel_index, _c(LINE))]), own)
    progress = b.select(counted, b.gep(base, [b.mul(b.mul(columns, slices), _c(LINE))]),
                        b.gep(local, [_c(1)], inbounds=True))
    first = b.atomic_rmw("add", counter, _c(1), "monotonic")
    with b.if_then(b.icmp_signed("<", first, blocks)):
        panel = pack_panel()

        def compute(block: ir.Value) -> None:
            start, stop = block_rows(b, block, blocks, rows, tile_rows)
            row_block(start, b.sub(stop, start), panel)
        _claim_loop(b, (first, blocks, counted), counter, progress, panel_index, compute)


def block_rows(b: ir.IRBuilder, block: ir.Value, blocks: ir.Value,
               rows: tuple[ir.Value, ir.Value], tile_rows: int) -> tuple[ir.Value, ir.Value]:
    """Rows [start, stop) of `block` of `blocks` in rows [lo, hi): the ceil((hi - lo) /
    tile_rows) tiles shared evenly, the first ones a tile larger. Blocks of mc rows with a
    short last one, claimed in turn, gave one thread a block more (256 rows, MR = 12, 36-row
    blocks: 12 tiles against 10)."""
    lo, hi = rows
    tiles = b.sdiv(b.add(b.sub(hi, lo), _c(tile_rows - 1)), _c(tile_rows))
    q, r = b.sdiv(tiles, blocks), b.srem(tiles, blocks)

    def first_tile(i: ir.Value) -> ir.Value:
        return b.add(b.mul(i, q), _smin(b, i, r))
    start = b.add(lo, b.mul(first_tile(block), _c(tile_rows)))
    stop = b.add(lo, b.mul(first_tile(b.add(block, _c(1))), _c(tile_rows)))
    return start, _smin(b, stop, hi)


def _claim_loop(b: ir.IRBuilder, claimed: tuple[ir.Value, ir.Value, ir.Value],
                counter: ir.Value, progress: ir.Value, panel_index: ir.Value,
                compute: Callable[[ir.Value], None]) -> None:
    """Blocks from `first` on, as claimed from `counter` (`claimed`: first, the block
    count, whether the counters are shared): one whose previous slice is not stored yet
    (progress < panel_index) is kept aside while the next is claimed, and done before
    another is kept (or, after the last claim, in one more trip with block -1). Without
    shared counters every block reads and marks progress[0]. `compute` is emitted once."""
    first, blocks, counted = claimed
    fn = b.function
    before = b.block
    body, done = fn.append_basic_block("claimed.block"), fn.append_basic_block("claimed.end")
    b.branch(body)
    b.position_at_end(body)
    block, held = b.phi(I64, name="block"), b.phi(I64, name="held")
    block.add_incoming(first, before)
    held.add_incoming(_c(-1), before)
    valid = b.icmp_signed(">=", block, _c(0))
    at = b.gep(progress, [b.select(b.and_(valid, counted), block, _c(0))])
    ready = b.and_(valid, b.icmp_signed(">=", b.load_atomic(at, "acquire", 8), panel_index))
    todo, keep = b.select(ready, block, held), b.select(ready, held, block)
    with b.if_then(b.icmp_signed(">=", todo, _c(0))):
        mark = b.gep(progress, [b.select(counted, todo, _c(0))])
        _wait_for(b, mark, panel_index)
        compute(todo)
        b.store_atomic(b.add(panel_index, _c(1)), mark, "release", 8)
    following = b.atomic_rmw("add", counter, _c(1), "monotonic")
    following = b.select(b.icmp_signed("<", following, blocks), following, _c(-1))
    more = b.or_(b.icmp_signed(">=", following, _c(0)), b.icmp_signed(">=", keep, _c(0)))
    block.add_incoming(following, b.block)
    held.add_incoming(keep, b.block)
    b.cbranch(b.and_(valid, more), body, done)
    b.position_at_end(done)


def _wait_for(b: ir.IRBuilder, mark: ir.Value, target: ir.Value) -> None:
    """Spin (with the x86 pause hint, yielding now and then) until *mark >= target."""
    from fgrad.lower.llvm.threads import _pause
    fn = b.function
    before = b.block
    look, spin, ready = (fn.append_basic_block(f"claimed.{s}") for s in ("look", "spin", "ok"))
    b.branch(look)
    b.position_at_end(look)
    spins = b.phi(I64, name="spins")
    spins.add_incoming(_c(0), before)
    now = b.load_atomic(mark, "acquire", 8)
    b.cbranch(b.icmp_signed(">=", now, target), ready, spin)
    b.position_at_end(spin)
    _pause(b.module, b)
    more = b.add(spins, _c(1))
    with b.if_then(b.icmp_signed("==", b.and_(more, _c(1023)), _c(0))):
        b.call(_libc(b.module, "sched_yield", ir.IntType(32), []), [])
    spins.add_incoming(more, b.block)
    b.branch(look)
    b.position_at_end(ready)
