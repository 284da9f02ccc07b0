"""Transposed reads of a tiled kernel, staged through registers.

A kernel that reads its last two axes transposed (`x.T + 1`, a permute feeding an
elementwise chain) is built over tiles (kernel/build.py `_transpose_tiles`): for i in
0..rows: for j in 0..columns: ... load a[base + i + S*j] ..., S the transposed axis's
stride. LLVM unrolled the inner loop and vectorized the outer one, with a scatter for each
store, 16 memory operations per 16 elements.

Here such a load is staged instead: before the tile's loops, its source rows (contiguous
along i) are read as vectors, transposed in registers (gemm/pack.py `transpose_rows`:
AVX-512's two-table permutes) and stored in a stack tile laid out as the loops read it,
tile[i][j]; inside the loops the load reads the tile, contiguous along j, and the inner
loop (kept a loop: `counted`'s metadata) vectorizes as plain loads and stores. The tile
reads exactly the source elements the loops read, so the staging stays in bounds.
float32 `x.T + 1` (2 cores): 2048^2 7.5 -> 1.1-1.3 ms (`x + 1`: 0.6), 4096^2 31 -> 8-14 ms
(NumPy 12, `x + 1` 2.5; the spread follows where the pages land).
"""
from __future__ import annotations

from typing import Any

from llvmlite import ir

from fgrad.lower.kernel.index import Ix, Sym
from fgrad.lower.kernel.ir import Load, Loop, expr_nodes
from fgrad.lower.kernel.streaming import LINE_BYTES
from fgrad.lower.llvm.kernels.ops import mem_type
from fgrad.lower.llvm.gemm.native import _loop as counted_loop
from fgrad.lower.llvm.gemm.pack import transpose_rows

I64 = ir.IntType(64)


MAX_LANES = 16   # 16-bit elements move as 16 (the 512-bit permutes take 32-bit lanes up)


def _lanes(itemsize: int) -> int:
    """Elements per vector of the staging: the host's vector width, at most MAX_LANES."""
    from fgrad.lower.llvm import target
    return min(MAX_LANES, target.vector_bits() // (8 * itemsize))


def transposed_loads(s: Loop) -> list[Load]:
    """The loads of the tile loop pair `s` (a loop holding only an innermost loop, both of
    a multiple of the vector's lanes) that read with step 1 along `s` and a stride of at
    least the inner loop's extent along it, both by plain loop variables; empty when `s`
    is no such pair."""
    if len(s.body) != 1 or not isinstance(s.body[0], Loop):
        return []
    inner = s.body[0]
    if any(isinstance(t, Loop) for t in inner.body):
        return []
    found = []
    for e in expr_nodes(inner.body):
        if not isinstance(e, Load) or e.dtype.itemsize not in (2, 4, 8):
            continue
        lanes = _lanes(e.dtype.itemsize)
        if lanes < 4 or s.sym.extent % lanes or inner.sym.extent % lanes or not all(
                isinstance(a, Sym) for a, _ in e.index.terms):
            continue
        terms = dict(e.index.terms)
        if terms.get(s.sym) == 1 and abs(terms.get(inner.sym, 0)) >= inner.sym.extent:
            found.append(e)
    return found


def without(index: Ix, *syms: Sym) -> Ix:
    """`index` with the terms of `syms` dropped (its value where they are 0)."""
    return Ix(tuple((a, c) for a, c in index.terms if a not in syms), index.const)


def stage_tile(b: ir.IRBuilder, tile: ir.Value, source: ir.Value, base: ir.Value,
               stride: int, rows: int, columns: int) -> ir.Instruction:
    """tile[i * columns + j] = source[base + i + stride * j] for i < rows, j < columns,
    by blocks of lanes x lanes in a loop: `lanes` vector loads along i, one register
    transpose, `lanes` vector stores along j. `tile` points to rows * columns elements of
    the source's type. Returns the loop's back edge, for metadata that keeps it a loop:
    unrolled, the 16 blocks of a float64 tile added 55 ms of LLVM to the kernel, and ran no
    faster (nor did loading a band of rows whole before its transposes)."""
    element = source.type.pointee
    if isinstance(element, ir.HalfType):   # moved as its bits
        element = ir.IntType(16)
        source, tile = (b.bitcast(p, element.as_pointer()) for p in (source, tile))
    align = 8 if isinstance(element, ir.DoubleType) or element == I64 else \
        2 if element == ir.IntType(16) else 4
    lanes = _lanes(align)
    vector = ir.VectorType(element, lanes)
    across = columns // lanes

    def block(k: ir.Value) -> None:
        i0 = b.mul(b.udiv(k, ir.Constant(I64, across)), ir.Constant(I64, lanes))
        j0 = b.mul(b.urem(k, ir.Constant(I64, across)), ir.Constant(I64, lanes))
        first = b.add(base, b.add(i0, b.mul(j0, ir.Constant(I64, stride))))
        loaded = []
        for j in range(lanes):
            at = b.gep(source, [b.add(first, ir.Constant(I64, stride * j))], inbounds=True)
            loaded.append(b.load(b.bitcast(at, vector.as_pointer()), align=align))
        corner = b.add(b.mul(i0, ir.Constant(I64, columns)), j0)
        for i, column in enumerate(transpose_rows(b, loaded)):
            at = b.gep(tile, [b.add(corner, ir.Constant(I64, i * columns))], inbounds=True)
            b.store(column, b.bitcast(at, vector.as_pointer()), align=align)
    return counted_loop(b, ir.Constant(I64, 0), ir.Constant(I64, rows // lanes * across), 1,
                        block, "tile")


def stage_loads(r: Any, s: Loop, loads: list[Load]) -> None:
    """Stage each of `loads` (`transposed_loads(s)`) in a stack tile of its own before the
    loops of `s` (kernel renderer `r`), and have `r` read them from there."""
    inner = s.body[0]
    assert isinstance(inner, Loop)
    b = r.b
    for e in loads:
        with b.goto_entry_block():
            b.position_at_start(r.fn.entry_basic_block)
            tile = b.alloca(mem_type(e.dtype), size=s.sym.extent * inner.sym.extent,
                            name="tile")
            tile.align = LINE_BYTES
        backedge = stage_tile(b, tile, r.fn.args[e.buf],
                              r.index(without(e.index, s.sym, inner.sym)),
                              dict(e.index.terms)[inner.sym], s.sym.extent, inner.sym.extent)
        backedge.set_metadata("llvm.loop", r.loop_id(backedge.operands[0].name, 0, True))
        r.tile_loads[id(e)] = (tile, s.sym, inner.sym)
