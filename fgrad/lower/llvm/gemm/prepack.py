"""A split GEMM whose B operand is packed once, by all threads, before any row is computed.

In: an unbatched float or int32 dot_general large enough to split over the pool. Out: its
`PrepackPlan` (how many packing units and row chunks its call has), the shared routine
`<prefix>_prepack(i64* dims, T* dest, T* rhs, i64 unit)` that packs one unit, and the body
of the call site that runs units (`emit_units`).

Why: when each row chunk packs its own copy of B (the driver's plain mode), two threads do
B's packing twice and a chunk must be large to pay for it, so one thread that the OS delays
holds the whole call back. Here the call's chunks are the packing units first (column groups
of PACK_COLS x one KC-deep slice each), then row chunks of at most MC rows. The pool's
threads claim chunks in that order (threads.render_part), so every packing unit is claimed
before any row chunk; a row chunk waits until the call's `done` counter reaches the number
of units (the first time it does, only units can be done) and then reads the packed B
through the driver's `packed_b` argument. Row chunks are small, so a delayed thread takes
fewer of them.

The packed B lives in one malloc'd block of k x round_up(n, NR) elements laid out as the
driver reads it: per NC-wide column block jc, per KC-deep slice pc, the panel of that
slice (NR-wide slivers, kc deep) at element jc*k + pc*round_up(nc_jc, NR). The thread that
claims unit 0 allocates it and publishes its address in the call's state line (slot 6,
release); the others wait for it there. Slot 7 counts finished row chunks; the thread that
finishes the last one frees the block. Where the block cannot be allocated, unit 0 records
the failure (gemm/scratch.py) and publishes NO_BLOCK: every chunk still runs and counts
itself done, skipping its packing or its rows, so no thread waits for ever.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from fgrad.core.ir import Eqn
from fgrad.lower.llvm.gemm import claimed
from fgrad.lower.llvm.gemm.claimed import ClaimedPlan, claimed_plan, split_rows
from fgrad.lower.llvm.gemm.pairs import pair_sizes
from fgrad.lower.llvm.gemm.scratch import is_null, record_failure
from fgrad.lower.llvm.gemm.native import (I64, NC, _c, _libc, _loop, _smin,
                                          aligned_alloc, slice_depth, routine_prefix, tile_shape,
                                          uses_native_gemm)
from fgrad.lower.schedule.gemm_layout import PAIRS_PARAM, gemm_dims

PACK_COLS = 128          # columns of B per packing unit (divides NC, a multiple of NR)
MAX_PACKED_BYTES = 1 << 28     # a larger B keeps the driver's own per-chunk packing
# measurement switch (bench/A-B): None (default) lets each thread pack its own B panels and
# claim row blocks (gemm/claimed.py, unless that is switched off); True shares one packed B
# (this module); False keeps the plain split. Own panels measured faster on both hosts since
# the claimed split exists: a 2-core Xeon (2 MiB L2 per core; medians of 15 rounds, shared vs
# own: 256x784x512 0.797 vs 0.642 ms, 1024^3 6.16 vs 5.88, 2048^3 51.8 vs 48.2, 128^3 0.047
# vs 0.032) and a 2-core Zen 4 (1 MiB L2; in one process against JAX: 24x784x512 448 vs 188
# us, 256^3 0.261 vs 0.190 ms, 1024^3 10.66 vs 10.39, 2048^3 83.9 vs 84.5, W5's step 5.74 vs
# 5.51). The shared B was built for an earlier EPYC VM against the plain split (design.md).
ENABLED: bool | None = None
SCRATCH_SLOT, FINISHED_SLOT, DONE_SLOT = 6, 7, 8   # state line slots (0-5: claim counters)
NO_BLOCK = 1   # the scratch slot's value when the packed B could not be allocated


@dataclass(frozen=True)
class PrepackPlan:
    """The chunks of a prepacked gemm call: `units` packing units, then `row_chunks` chunks
    of the `m` output rows, at most `rows_per` each; `packed_elems` elements of packed B.
    The row chunks share the MR-row tiles (`tile_rows`) evenly, the larger ones first
    (`chunk_rows`), and their count is a multiple of the threads: with chunks of one size
    (the last one short) claimed in turn, one thread took a chunk more than the other
    (256 rows at MR = 12: 12 tiles against 10)."""

    units: int
    row_chunks: int
    rows_per: int
    m: int
    packed_elems: int
    tile_rows: int

    @property
    def chunking(self) -> tuple[int, int, int]:
        """The call's (chunk count, size, extent) for threads.render_part: one unit each."""
        count = self.units + self.row_chunks
        return count, 1, count

    def chunk_rows(self, chunk: int) -> tuple[int, int]:
        """Rows [lo, hi) of row chunk `chunk` (as the call site computes them)."""
        tiles = -(-self.m // self.tile_rows)
        q, r = divmod(tiles, self.row_chunks)
        lo = chunk * q + min(chunk, r)
        return lo * self.tile_rows, min((lo + q + (chunk < r)) * self.tile_rows, self.m)

    def describe(self, name: str) -> str:
        """One line for `threads.describe_threads`."""
        return (f"{name} over {self.m} rows ({self.row_chunks} chunks, after B is packed once "
                f"in {self.units} units)")


def prepack_plan(eqn: Eqn) -> PrepackPlan | ClaimedPlan | None:
    """How the call of `eqn` splits: by default with row blocks claimed per B panel, each
    thread packing its own (gemm/claimed.py; also an unbatched implicit GEMM's and a
    bfloat16 pairs product's), or with B packed once (`ENABLED` True);
    None: not fgrad's own GEMM, a batched product, too little work to split
    (blas.MIN_SPLIT_FLOPS; a row chunk holds at least blas.MIN_CHUNK_FLOPS), or, for a
    shared B, a B too large to copy, read from an image or in bfloat16 pairs: the plain
    split."""
    from fgrad.lower.llvm import blas
    if ENABLED is False or eqn.primitive.name != "dot_general" or not uses_native_gemm(eqn):
        return None
    dims = gemm_dims(eqn)
    if dims is None or dims.batch:
        return None
    pairs = bool(eqn.params.get(PAIRS_PARAM))
    size = eqn.outvars[0].aval.dtype.itemsize
    mr, nr, _ = tile_shape(size, pairs=pairs)
    row_flops = 2 * dims.n * dims.k
    packed = dims.k * -(-dims.n // nr) * nr
    if dims.m * row_flops < blas.MIN_SPLIT_FLOPS:
        return None
    kc = slice_depth(size, image="rhs_patches" in eqn.params, pairs=pairs)
    if ENABLED is None:
        depth = pair_sizes(dims)[0] if pairs else dims.k   # the driver's k
        return claimed_plan(dims.m, dims.n, depth, mr, row_flops, blas.MIN_CHUNK_FLOPS,
                            kc) if claimed.ENABLED else None
    # a shared B is packed from a stored B (not an image), each bfloat16 pairs B per thread
    if "rhs_patches" in eqn.params or pairs or packed * size > MAX_PACKED_BYTES:
        return None
    threads, rows = split_rows(dims.m, mr, row_flops, blas.MIN_CHUNK_FLOPS)
    tiles = -(-dims.m // mr)
    chunks = -(-tiles // (rows // mr))
    if chunks < 2:
        return None
    chunks = min(tiles, -(-chunks // threads) * threads)
    units = -(-dims.k // min(kc, dims.k)) * -(-dims.n // PACK_COLS)
    return PrepackPlan(units, chunks, -(-tiles // chunks) * mr, dims.m, packed, mr)


def render_prepack(module: ir.Module, ft: ir.Type, size: int, dims_names: tuple[str, ...]
                   ) -> ir.Function:
    """Define `<prefix>_prepack(i64* dims, T* dest, T* rhs, i64 unit)`: pack unit `unit`
    (slice unit // groups, column group unit % groups) of B into `dest` (module docstring);
    `dims` is the driver's array, whose fixed fields are named by `dims_names`."""
    fp = ft.as_pointer()
    prefix = routine_prefix(ft, size)
    _, nr, _ = tile_shape(size)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64.as_pointer(), fp, fp, I64]),
                     name=f"{prefix}_prepack")
    dims, dest, rhs, unit = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    d = {name: b.load(b.gep(dims, [_c(dims_names.index(name))], inbounds=True))
         for name in ("n", "k", "kc", "nc", "rhs_ld", "rhs_trans")}
    groups = b.sdiv(b.add(d["n"], _c(PACK_COLS - 1)), _c(PACK_COLS))
    pc = b.mul(b.sdiv(unit, groups), d["kc"])
    j0 = b.mul(b.srem(unit, groups), _c(PACK_COLS))
    j1 = _smin(b, b.add(j0, _c(PACK_COLS)), d["n"])
    jc = b.mul(b.sdiv(j0, d["nc"]), d["nc"])
    width = _smin(b, d["nc"], b.sub(d["n"], jc))
    padded = b.mul(b.sdiv(b.add(width, _c(nr - 1)), _c(nr)), _c(nr))
    kc = _smin(b, d["kc"], b.sub(d["k"], pc))
    at = b.add(b.add(b.mul(jc, d["k"]), b.mul(pc, padded)), b.mul(b.sub(j0, jc), kc))
    args = [fp, fp, I64, I64, I64, I64, I64]
    plain = _libc(module, f"{prefix}_pack_b_n", ir.VoidType(), args)
    transposed = _libc(module, f"{prefix}_pack_b_t", ir.VoidType(), args)
    pack = b.select(b.icmp_signed("!=", d["rhs_trans"], _c(0)), transposed, plain)
    b.call(pack, [b.gep(dest, [at], inbounds=True), rhs, d["rhs_ld"], j0, j1, pc, kc])
    b.ret_void()
    return fn


def emit_units(b: ir.IRBuilder, plan: PrepackPlan, ft: ir.Type, size: int,
               call: tuple[ir.Value, ...], start: ir.Value, stop: ir.Value,
               line: ir.Value) -> None:
    """Run chunks [start, stop) of a prepacked call (module docstring). `call` is
    (driver, dims, out, lhs, rhs, thunk, ctx): the shared driver and its arguments but the
    rows; `line` the call's i64 state line."""
    from fgrad.lower.llvm.threads import render_wait
    module = b.module
    driver, dims, out, lhs, rhs, thunk, ctx = call
    fp = ft.as_pointer()
    prefix = routine_prefix(ft, size)
    prepack = _libc(module, f"{prefix}_prepack", ir.VoidType(), [I64.as_pointer(), fp, fp, I64])
    free = _libc(module, "free", ir.VoidType(), [ir.IntType(8).as_pointer()])
    wait = render_wait(module)
    scratch_at = b.gep(line, [_c(SCRATCH_SLOT)], inbounds=True)

    def packed_b() -> ir.Value:
        return b.inttoptr(b.load_atomic(scratch_at, "acquire", 8), fp)

    def packed(block: ir.Value) -> ir.Value:
        return b.icmp_unsigned("!=", b.ptrtoint(block, I64), _c(NO_BLOCK))

    def unit(u: ir.Value) -> None:
        with b.if_else(b.icmp_signed("<", u, _c(plan.units))) as (packing, rows):
            with packing:
                with b.if_else(b.icmp_signed("==", u, _c(0))) as (first, other):
                    with first:
                        nbytes = _c(plan.packed_elems * size)
                        block = aligned_alloc(b, nbytes)
                        # out of memory: NO_BLOCK, so that every chunk skips its work
                        with b.if_then(is_null(b, block), likely=False):
                            record_failure(b, "dot_general", nbytes)
                        address = b.select(is_null(b, block), _c(NO_BLOCK),
                                           b.ptrtoint(block, I64))
                        b.store_atomic(address, scratch_at, "release", 8)
                    with other:
                        b.call(wait, [scratch_at, _c(1)])
                with b.if_then(packed(packed_b())):
                    b.call(prepack, [dims, packed_b(), rhs, u])
            with rows:
                b.call(wait, [b.gep(line, [_c(DONE_SLOT)], inbounds=True), _c(plan.units)])
                block = packed_b()
                lo, hi = _chunk_rows(b, plan, b.sub(u, _c(plan.units)))
                with b.if_then(packed(block)):
                    b.call(driver, [dims, out, lhs, rhs, lo, hi, thunk, ctx, block])
                finished = b.gep(line, [_c(FINISHED_SLOT)], inbounds=True)
                before = b.atomic_rmw("add", finished, _c(1), "acq_rel")
                last = b.icmp_signed("==", before, _c(plan.row_chunks - 1))
                with b.if_then(b.and_(last, packed(block))):
                    b.call(free, [b.bitcast(block, ir.IntType(8).as_pointer())])
    _loop(b, start, stop, 1, unit, "unit")


def _chunk_rows(b: ir.IRBuilder, plan: PrepackPlan, chunk: ir.Value
                ) -> tuple[ir.Value, ir.Value]:
    """`plan.chunk_rows(chunk)` computed at run time."""
    q, r = divmod(-(-plan.m // plan.tile_rows), plan.row_chunks)
    below = b.icmp_signed("<", chunk, _c(r))
    lo = b.add(b.mul(chunk, _c(q)), _smin(b, chunk, _c(r)))
    hi = b.add(b.add(lo, _c(q)), b.zext(below, I64))
    return (b.mul(lo, _c(plan.tile_rows)),
            _smin(b, b.mul(hi, _c(plan.tile_rows)), _c(plan.m)))
