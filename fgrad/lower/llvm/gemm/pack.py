"""The GEMM's packing routines: an operand's KC-deep slice copied into the micro-kernel's
slivers (gemm/native.py's module docstring has the layout).

In: the element type, the sliver width (MR for A, NR for B) and how the operand is stored.
Out: `pack_<side>_<n|t>(T* dest, T* base, i64 ld, i64 first, i64 limit, i64 k0, i64 kc)`
filling dest[t][p][w] = operand(first + t*width + w, k0 + p) for the slivers t covering
[first, limit); beyond limit (the last sliver's padding) zeros, or, where k runs along
memory, copies of the last row: padding meets only the products' rows and columns that the
micro-kernel never stores.

Two shapes of copy, both vectorized here rather than by LLVM's vectorizers (which took
30-36 ms of LLVM's time per routine on every cold start, against ~12 for code that needs
no middle end):
- the `width` elements of one k step lie side by side in memory (A transposed, B plain):
  a whole sliver's step is one vector load and store, for `SLIVER_GROUP` slivers at once;
- k runs along memory (A plain, B transposed): `lanes` k steps of each of the sliver's
  rows are one vector load each, and a lanes x lanes register transpose turns them into
  the steps' rows of the sliver.
"""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from fgrad.lower.llvm.gemm.native import I64, _c as c64, _libc, _loop as loop

I32 = ir.IntType(32)
Read = Callable[[ir.Value, ir.Value], ir.Value]   # (row or column, k step) -> its address
# slivers packed side by side, step after step, where a step is one vector: the slivers of
# a 1024-column B are 32 KB apart, and one row written to all 32 of them at once hit one
# L1 set (four panels 0.28 ms; in groups of four 0.13, of two 0.16, of eight 0.18)
SLIVER_GROUP = 4


def transpose_rows(b: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
    """The transpose of `len(rows)` vectors of as many lanes (a power of two). Eight: the
    unpack sequence (interleave pairs of elements, then of pairs, then swap 128-bit halves:
    one instruction each on AVX2). Others: rounds of two-vector shuffles, round s
    exchanging the blocks of s lanes off the diagonal between rows i and i + s (for four
    lanes, the same unpack and half-swap instructions)."""
    lanes = len(rows)
    permute = _opaque_permute(b, rows[0].type)

    def shuffle(x: ir.Value, y: ir.Value, order: list[int]) -> ir.Value:
        if permute is not None:
            return permute(x, y, order)
        return b.shuffle_vector(x, y, ir.Constant(ir.VectorType(I32, lanes), order))
    if lanes == 8 and permute is None:
        pairs = [shuffle(rows[k], rows[k + 1], order) for k in range(0, 8, 2)
                 for order in ([0, 8, 1, 9, 4, 12, 5, 13], [2, 10, 3, 11, 6, 14, 7, 15])]
        quads = [shuffle(pairs[a], pairs[a + 2], order) for a in (0, 1, 4, 5)
                 for order in ([0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15])]
        halves = ([0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15])
        return [shuffle(quads[i % 4], quads[i % 4 + 4], halves[i // 4]) for i in range(8)]
    rows = list(rows)
    s = 1
    while s < lanes:
        low = [j if not j & s else lanes + j - s for j in range(lanes)]
        high = [j + s if not j & s else lanes + j for j in range(lanes)]
        for i in (i for i in range(lanes) if not i & s):
            rows[i], rows[i + s] = shuffle(rows[i], rows[i + s], low), shuffle(
                rows[i], rows[i + s], high)
        s *= 2
    return rows


# AVX-512's two-table permutes (vpermt2ps/pd/d/q) by element type: (suffix, index bits)
_PERMUTES = {"float": ("ps", 32), "double": ("pd", 64), "i32": ("d", 32), "i64": ("q", 64)}


def _opaque_permute(b: ir.IRBuilder, vector: ir.VectorType
                    ) -> Callable[[ir.Value, ir.Value, list[int]], ir.Value] | None:
    """On AVX-512, for 512-bit vectors: (x, y, order) -> the two-table permute of x and y
    by `order`, its index vector given by an empty inline asm that LLVM cannot see
    through. With constant orders, code generation searches every shuffle for a cheaper
    instruction sequence, most of the transposed packings' compile time (8 transposes of
    16 x 16 float32: 70 ms, against 23 ms as permutes), and ends at as many shuffle
    instructions (512 for those 8). None elsewhere."""
    from fgrad.lower.llvm import target
    element = str(vector.element)
    if target.vector_bits() != 512 or element not in _PERMUTES:
        return None
    suffix, bits = _PERMUTES[element]
    if vector.count * bits != 512:
        return None
    index_type = ir.VectorType(ir.IntType(bits), vector.count)
    function = _libc(b.module, f"llvm.x86.avx512.vpermi2var.{suffix}.512", vector,
                     [vector, index_type, vector])
    opaque = ir.InlineAsm(ir.FunctionType(index_type, [index_type]), "", "=v,0")
    indices: dict[tuple[int, ...], ir.Value] = {}

    def permute(x: ir.Value, y: ir.Value, order: list[int]) -> ir.Value:
        key = tuple(order)
        if key not in indices:
            indices[key] = b.call(opaque, [ir.Constant(index_type, order)])
        return b.call(function, [x, indices[key], y])
    return permute


class _Pack:
    """Emits one packing routine into `module`."""

    def __init__(self, module: ir.Module, ft: ir.Type, size: int, lanes: int, width: int):
        self.module, self.ft, self.size, self.lanes, self.width = module, ft, size, lanes, width
        self.zero = ir.Constant(ft, 0 if isinstance(ft, ir.IntType) else 0.0)

    def function(self, name: str, side: str, trans: bool) -> ir.Function:
        """Define the routine (module docstring) for operand `side` ("a" or "b")."""
        fp = self.ft.as_pointer()
        fty = ir.FunctionType(ir.VoidType(), [fp, fp, I64, I64, I64, I64, I64])
        fn = ir.Function(self.module, fty, name=name)
        dest, base, ld, first, limit, k0, kc = fn.args
        dest.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        # the row addresses of a sliver (`_transposed_blocks`), in the entry block
        self.row_slots = b.alloca(fp, size=self.width, name="rows")

        def read(outer: ir.Value, p: ir.Value) -> ir.Value:
            kk = b.add(k0, p)
            r, col = (outer, kk) if side == "a" else (kk, outer)
            major, minor = (col, r) if trans else (r, col)
            return b.gep(base, [b.add(b.mul(major, ld), minor)], inbounds=True)
        along_k = (side == "a") != trans
        count = b.sdiv(b.add(b.sub(limit, first), c64(self.width - 1)), c64(self.width))

        def at(t: ir.Value) -> tuple[ir.Value, ir.Value]:
            """Sliver t's first column (or row) and its place in `dest`."""
            return (b.add(first, b.mul(t, c64(self.width))),
                    b.gep(dest, [b.mul(t, b.mul(kc, c64(self.width)))], inbounds=True))

        def sliver(t: ir.Value) -> None:   # k innermost in storage: whole blocks of steps,
            start, out = at(t)                # then the rest one by one
            done = self._transposed_blocks(b, out, read, start, ld, kc, b.sub(limit, start))
            loop(b, done, kc, 1, lambda p: self._step_scalars(b, out, read, start, limit, p),
                 "pt")
        if along_k:
            loop(b, c64(0), count, 1, sliver, "ps")
            b.ret_void()
            return fn
        whole = b.sdiv(b.sub(limit, first), c64(self.width))
        groups = b.sdiv(whole, c64(SLIVER_GROUP))

        def group(g: ir.Value) -> None:   # SLIVER_GROUP slivers, all their steps
            slivers = [at(b.add(b.mul(g, c64(SLIVER_GROUP)), c64(j)))
                       for j in range(SLIVER_GROUP)]

            def steps(p: ir.Value) -> None:
                for start, out in slivers:
                    self._step_vector(b, out, read, start, p)
            loop(b, c64(0), kc, 1, steps, "pg")
        loop(b, c64(0), groups, 1, group, "pw")

        def alone(t: ir.Value) -> None:   # the whole slivers after the groups
            start, out = at(t)
            loop(b, c64(0), kc, 1, lambda p: self._step_vector(b, out, read, start, p), "pk")
        loop(b, b.mul(groups, c64(SLIVER_GROUP)), whole, 1, alone, "pa")
        with b.if_then(b.icmp_signed("<", whole, count)):   # the last sliver, zero-padded
            start, out = at(whole)
            loop(b, c64(0), kc, 1, lambda p: self._step_masked(b, out, read, start,
                                                               b.sub(limit, start), p), "pm")
        b.ret_void()
        return fn

    def _vector_at(self, b: ir.IRBuilder, at: ir.Value, count: int) -> ir.Value:
        return b.bitcast(at, ir.VectorType(self.ft, count).as_pointer())

    def _step_vector(self, b: ir.IRBuilder, out: ir.Value, read: Read, start: ir.Value,
                     p: ir.Value) -> None:
        """A whole sliver's step p whose elements lie side by side: one load, one store."""
        row = b.load(self._vector_at(b, read(start, p), self.width), align=self.size)
        at = b.gep(out, [b.mul(p, c64(self.width))], inbounds=True)
        b.store(row, self._vector_at(b, at, self.width), align=self.size)

    def _step_masked(self, b: ir.IRBuilder, out: ir.Value, read: Read, start: ir.Value,
                     valid: ir.Value, p: ir.Value) -> None:
        """Step p of the last sliver, whose first `valid` elements lie side by side: one
        masked load (zeros past them; lanes past them are not read) and one store."""
        width = self.width
        vec = ir.VectorType(self.ft, width)
        masks = ir.VectorType(ir.IntType(1), width)
        kind = "i32" if isinstance(self.ft, ir.IntType) else "f64" if self.size == 8 else "f32"
        load = _libc(self.module, f"llvm.masked.load.v{width}{kind}.p0", vec,
                     [vec.as_pointer(), I32, masks, vec])
        lane = ir.Constant(ir.VectorType(I64, width), list(range(width)))
        splat = b.insert_element(ir.Constant(lane.type, ir.Undefined), valid, c64(0))
        splat = b.shuffle_vector(splat, ir.Constant(lane.type, ir.Undefined),
                                 ir.Constant(ir.VectorType(I32, width), [0] * width))
        row = b.call(load, [self._vector_at(b, read(start, p), width), ir.Constant(I32, self.size),
                            b.icmp_signed("<", lane, splat), ir.Constant(vec, [self.zero] * width)])
        at = b.gep(out, [b.mul(p, c64(width))], inbounds=True)
        b.store(row, self._vector_at(b, at, width), align=self.size)

    def _step_scalars(self, b: ir.IRBuilder, out: ir.Value, read: Read, start: ir.Value,
                      limit: ir.Value, p: ir.Value) -> None:
        """Step p of a sliver element by element, zeros past `limit` (the last sliver's
        steps, and a whole sliver's steps after its blocks)."""
        def lane(w: ir.Value) -> None:
            o = b.add(start, w)
            inside = b.icmp_signed("<", o, limit)
            val = b.select(inside, b.load(read(b.select(inside, o, start), p)), self.zero)
            b.store(val, b.gep(out, [b.add(b.mul(p, c64(self.width)), w)], inbounds=True))
        loop(b, c64(0), c64(self.width), 1, lane, "pw")

    def _transposed_blocks(self, b: ir.IRBuilder, out: ir.Value, read: Read, start: ir.Value,
                           ld: ir.Value, kc: ir.Value, valid: ir.Value) -> ir.Value:
        """The whole blocks of `lanes` steps of a sliver of an operand stored with k
        innermost (row w + 1 lies `ld` past row w), through register transposes (rows in
        groups of `lanes`, the last group padded with undefined rows whose lanes are never
        stored); returns the first step they leave. The last sliver's rows from `valid` on
        repeat its last row: they meet only products' rows or columns that are never
        stored (the micro-kernel masks them), and the clamped row offsets are loop
        invariants. Element by element, the last sliver of a 16-column B took longer than
        the micro-kernel's whole pass over it (256 x 512 x 16: 86 against 66 us for 32
        columns). The rows' addresses are computed before the loop and read from the stack
        in it: the routines compile without LLVM's middle end, and code generation sinks
        address arithmetic into the loop (a compare, a select and a multiply per row and
        block, and 1.3x the compile time for the transposed B)."""
        lanes, width = self.lanes, self.width
        blocks = b.mul(b.sdiv(kc, c64(lanes)), c64(lanes))
        undefined = ir.Constant(ir.VectorType(self.ft, lanes), ir.Undefined)
        first_row = read(start, c64(0))
        slots = [b.gep(self.row_slots, [c64(w)]) for w in range(width)]
        for w, slot in enumerate(slots):
            b.store(self._row_start(b, first_row, ld, w, valid), slot)

        def block(p: ir.Value) -> None:
            steps_out = b.gep(out, [b.mul(p, c64(width))], inbounds=True)
            for g in range(0, width, lanes):
                rows = [self._row(b, b.load(slots[w]), p) if w < width else undefined
                        for w in range(g, g + lanes)]
                used = min(lanes, width - g)
                for q, column in enumerate(transpose_rows(b, rows)):
                    if used < lanes:
                        column = b.shuffle_vector(column, undefined,
                                                  ir.Constant(ir.VectorType(I32, used),
                                                              list(range(used))))
                    at = b.gep(steps_out, [c64(q * width + g)], inbounds=True)
                    b.store(column, self._vector_at(b, at, used), align=self.size)
        loop(b, c64(0), blocks, lanes, block, "pb")
        return blocks

    @staticmethod
    def _row_start(b: ir.IRBuilder, first_row: ir.Value, ld: ir.Value, w: int,
                   valid: ir.Value) -> ir.Value:
        """The address of the sliver's row w at step 0 (its last valid row's from `valid`
        on)."""
        row = b.select(b.icmp_signed("<", c64(w), valid), c64(w), b.sub(valid, c64(1)))
        return b.gep(first_row, [b.mul(row, ld)])

    def _row(self, b: ir.IRBuilder, row_start: ir.Value, p: ir.Value) -> ir.Value:
        """`lanes` steps of a sliver's row from step p."""
        at = b.gep(row_start, [p])
        return b.load(self._vector_at(b, at, self.lanes), align=self.size)


def render_pack(module: ir.Module, name: str, ft: ir.Type, size: int, lanes: int,
                side: str, width: int, trans: bool) -> ir.Function:
    """Define packing routine `name` (module docstring) for operand `side` ("a": A(row, k)
    slivers of `width` rows; "b": B(k, col) slivers of `width` columns), stored plainly or
    transposed (`trans`), element type `ft` of `size` bytes at `lanes` per vector."""
    return _Pack(module, ft, size, lanes, width).function(name, side, trans)
