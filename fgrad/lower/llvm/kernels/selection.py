"""Native top_k for the llvm backend: the k best entries of each row by selection.

In: a library call whose equation is `top_k` (fgrad/core/prims/sort.py: the first k
entries of the stable sort along the last axis, NaN largest, -0 as +0; a dtype in
`NATIVE_SORT_DTYPES`). Out: an internal LLVM function `void name(T* values, i32* indices,
T* x)`, with `split` two more arguments, the rows [start, stop) it selects in
(`sequences.sort_chunking`), equal to the primitive's NumPy impl.

Keys are the sort's radix keys (`SortBuilder.order_key`: unsigned integers in sort order,
bits inverted when descending), so "better" is one unsigned compare for every dtype and
direction, and the order is (key, position) ascending. In a row that `selects`, the
first k positions are inserted one by one into a sorted buffer: the keys on the stack, the
positions in the row's own k output indices. Each later element enters only when its key
is strictly below the k-th one (an equal key at a later position sorts after it). An
insertion counts the buffered keys at or below the new one (a loop the vectorizer turns
into a few vector compares), moves the keys and positions above it up one slot (two
memmoves; the k-th drops out) and writes it; for k up to SHIFT_K, where the calls cost
more than the move, the entries above it move up one at a time instead. A block of
BLOCK_VECTORS vectors of keys is compared against the k-th key first and skipped when none
is below it; on random rows nearly every block is skipped once the buffer holds good
keys. Elements past the last whole block go one at a time. A row with SORT_INSERTIONS
times its expected insertions (k (1 + ln(n / k)) on random rows; a row sorted against the
direction has n) stops and sorts instead. Rows that do not select (k above MAX_SELECT_K,
or too large for n by the cost model in `selects`) and stopped rows sort as
llvm/sequences.py sorts, into two rows of int32 malloc'd per call (where malloc fails,
the function returns before any row and the call raises MemoryError), and keep their first k
positions. Finally the values are gathered through the indices.

512 x 32768 float32 on 2 cores: k=8 ~3 ms, k=200 ~20 ms (the sort and a slice 85 ms,
torch.topk 15.8 and 33.7 ms); 2048 x 2048, k=16: ~3.5 ms (sort 17, torch 5.8).
"""
from __future__ import annotations

import functools
import math

from llvmlite import ir

from fgrad.core.ir import Eqn
from fgrad.lower.llvm import target
from fgrad.lower.llvm.sequences import ELEMENT_TYPES, I32, I64, SortBuilder

MAX_SELECT_K = 512    # a larger k sorts its rows (the buffer of keys is on the stack)
# A row selects when its expected k (1 + ln(n / k)) insertions cost less than sorting its n
# elements, an insertion costing INSERTION + k * INSERTION_PER_K elements of a sort
# (measured on 2 cores: a sort 3.5-4 ns an element, an insertion about 12 + 0.045 k ns).
INSERTION = 3.5
INSERTION_PER_K = 1 / 80
SHIFT_K = 16          # up to this k an insertion moves entries one by one (no memmove)
BLOCK_VECTORS = 2     # vectors of keys checked against the k-th at once
# a row with more than this many times k (1 + ln(n / k)) insertions (random rows expect
# about k (1 + ln(n / k))) is sorted instead
SORT_INSERTIONS = 2


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def selects(n: int, k: int) -> bool:
    """Whether rows of length n find their top k by selection (else by a sort)."""
    if not 0 < k <= min(n, MAX_SELECT_K):
        return False
    return k * (1 + math.log(n / k)) * (INSERTION + k * INSERTION_PER_K) < n


class TopKBuilder(SortBuilder):
    """Emits the top_k function (module docstring)."""

    def __init__(self, module: ir.Module, name: str, eqn: Eqn, split: bool = False):
        super().__init__(module, name, eqn, split)
        self.k = int(eqn.params["k"])
        self.key_type = ir.IntType(8 * self.itemsize)
        self.lanes = max(2, target.vector_bits() // (8 * self.itemsize))

    def build(self) -> ir.Function:
        """The whole function: each row's top k selected (or sorted), then gathered."""
        if self.k and self.rows:
            self.every_row()
        self.b.ret_void()
        return self.fn

    def every_row(self) -> None:
        """Select, or sort, each row of the chunk and gather its values."""
        b, selecting = self.b, selects(self.n, self.k)
        memory = self.malloc(_c(8 * self.n))
        self.bail_if_null([memory], _c(8 * self.n))   # out of memory: before any row
        perm = b.bitcast(memory, I32.as_pointer())
        scratch = b.gep(perm, [_c(self.n)], inbounds=True)
        keys = None
        if selecting:
            with b.goto_entry_block():
                b.position_at_start(self.fn.entry_basic_block)
                keys = b.alloca(self.key_type, size=self.k, name="keys")

        def row_top(r: ir.Value) -> None:
            row, out = b.mul(r, _c(self.n)), b.mul(r, _c(self.k))
            if keys is None:
                self.sort_head(row, out, perm, scratch)
            else:
                with b.if_then(b.not_(self.select_row(row, out, keys))):
                    self.sort_head(row, out, perm, scratch)
            self.gather_head(row, out)
        start, stop = self.chunk or (_c(0), _c(self.rows))
        self.loop(start, stop, 1, row_top)
        self.free(memory)

    # ------------------------------------------------------------------ by sorting

    def sort_head(self, row: ir.Value, out: ir.Value, perm: ir.Value,
                  scratch: ir.Value) -> None:
        """indices[out:out+k] = the first k positions of the row's stable sort."""
        b = self.b
        self.sort_row(row, perm, scratch)
        indices = b.gep(self.indices, [out], inbounds=True)
        self.loop(_c(0), _c(self.k), 1, lambda p: b.store(
            b.load(b.gep(perm, [p], inbounds=True)), b.gep(indices, [p], inbounds=True)))

    def gather_head(self, row: ir.Value, out: ir.Value) -> None:
        """values[out:out+k] = x[row + indices[out:out+k]]."""
        b = self.b
        indices = b.gep(self.indices, [out], inbounds=True)
        values = b.gep(self.values, [out], inbounds=True)
        self.loop(_c(0), _c(self.k), 1, lambda p: b.store(
            self.key(row, b.load(b.gep(indices, [p], inbounds=True))),
            b.gep(values, [p], inbounds=True)))

    # ------------------------------------------------------------------ by selection

    def select_row(self, row: ir.Value, out: ir.Value, keys: ir.Value) -> ir.Value:
        """indices[out:out+k] = the row's top k by selection (module docstring); whether it
        finished (false: the row moved too many entries and must be sorted instead)."""
        b, k, n = self.b, self.k, self.n
        indices = b.gep(self.indices, [out], inbounds=True)
        self.loop(_c(0), _c(k), 1, lambda j: self.place(keys, indices, j, j, self.row_key(
            row, j)))
        insertions, j = self.var(_c(0)), self.var(_c(k))
        budget = int(SORT_INSERTIONS * k * (1 + math.log(n / k)))

        def alive() -> ir.Value:
            return b.icmp_signed("<=", b.load(insertions), _c(budget))
        block = self.lanes * BLOCK_VECTORS
        if n - k >= block:
            def one_block() -> None:
                at = b.load(j)
                with b.if_then(self.any_below(row, at, keys)):
                    self.loop(at, b.add(at, _c(block)), 1,
                              lambda i: self.consider(row, i, keys, indices, insertions))
                b.store(b.add(at, _c(block)), j)
            self.while_(lambda: b.and_(alive(), b.icmp_signed(
                "<=", b.load(j), _c(n - block))), one_block)

        def one() -> None:
            at = b.load(j)
            self.consider(row, at, keys, indices, insertions)
            b.store(b.add(at, _c(1)), j)
        self.while_(lambda: b.and_(alive(), b.icmp_signed("<", b.load(j), _c(n))), one)
        return alive()

    def row_key(self, row: ir.Value, i: ir.Value) -> ir.Value:
        """The radix key of x[row + i] (i an i64)."""
        value = self.b.load(self.b.gep(self.x, [self.b.add(row, i)], inbounds=True))
        key = self.order_key(value)
        return self.b.not_(key) if self.descending else key

    def consider(self, row: ir.Value, i: ir.Value, keys: ir.Value, indices: ir.Value,
                 insertions: ir.Value) -> None:
        """Put position i into the buffer when its key is strictly below the k-th; count
        the entries it moved past."""
        b, last = self.b, _c(self.k - 1)
        key = self.row_key(row, i)
        with b.if_then(b.icmp_unsigned("<", key, b.load(b.gep(keys, [last], inbounds=True)))):
            self.place(keys, indices, _c(self.k), i, key)
            b.store(b.add(b.load(insertions), _c(1)), insertions)

    def place(self, keys: ir.Value, indices: ir.Value, size: ir.Value, i: ir.Value,
              key: ir.Value) -> ir.Value:
        """Insert (key, position i) into the sorted buffer of `size` entries, after the keys
        at or below it (equal keys sit at earlier positions), the k-th dropping out when the
        buffer is full; the slot it lands in."""
        b = self.b
        if self.k <= SHIFT_K:
            return self.shift_in(keys, indices, size, i, key)
        count = self.var(_c(0))
        self.loop(_c(0), size, 1, lambda q: b.store(b.add(b.load(count), b.zext(
            b.icmp_unsigned("<=", b.load(b.gep(keys, [q], inbounds=True)), key), I64)), count))
        at = b.load(count)
        end = b.select(b.icmp_signed("<", size, _c(self.k - 1)), size, _c(self.k - 1))
        for array, size_of in ((keys, self.itemsize), (indices, 4)):
            self.move_up(b.gep(array, [at], inbounds=True), b.sub(end, at), size_of)
        b.store(key, b.gep(keys, [at], inbounds=True))
        b.store(b.trunc(i, I32), b.gep(indices, [at], inbounds=True))
        return at

    def shift_in(self, keys: ir.Value, indices: ir.Value, size: ir.Value, i: ir.Value,
                 key: ir.Value) -> ir.Value:
        """`place` for a small buffer: move entries up one at a time, from the last one,
        while their key is strictly above the new key."""
        b = self.b
        slot = self.var(b.select(b.icmp_signed("<", size, _c(self.k)), size, _c(self.k - 1)))

        def moves_left() -> ir.Value:
            at = b.load(slot)
            inside = b.icmp_signed(">", at, _c(0))
            left = b.select(inside, b.sub(at, _c(1)), _c(0))
            above = b.icmp_unsigned(">", b.load(b.gep(keys, [left], inbounds=True)), key)
            return b.and_(inside, above)

        def move() -> None:
            at = b.load(slot)
            left = b.sub(at, _c(1))
            for array in (keys, indices):
                b.store(b.load(b.gep(array, [left], inbounds=True)),
                        b.gep(array, [at], inbounds=True))
            b.store(left, slot)
        self.while_(moves_left, move)
        at = b.load(slot)
        b.store(key, b.gep(keys, [at], inbounds=True))
        b.store(b.trunc(i, I32), b.gep(indices, [at], inbounds=True))
        return at

    def move_up(self, start: ir.Value, count: ir.Value, size_of: int) -> None:
        """memmove(start + 1, start, count elements of `size_of` bytes)."""
        b, pointer = self.b, ir.IntType(8).as_pointer()
        memmove = b.module.declare_intrinsic("llvm.memmove", [pointer, pointer, I64])
        source = b.bitcast(start, pointer)
        target_ = b.bitcast(b.gep(start, [_c(1)], inbounds=True), pointer)
        b.call(memmove, [target_, source, b.mul(count, _c(size_of)),
                         ir.Constant(ir.IntType(1), 0)])

    def any_below(self, row: ir.Value, at: ir.Value, keys: ir.Value) -> ir.Value:
        """Whether any of the block of keys at x[row + at:][:lanes * BLOCK_VECTORS] is
        strictly below the k-th buffered key."""
        b, lanes = self.b, self.lanes
        vector = ir.VectorType(self.key_type, lanes)
        kth = b.load(b.gep(keys, [_c(self.k - 1)], inbounds=True))
        one = b.insert_element(ir.Constant(vector, ir.Undefined), kth, ir.Constant(I32, 0))
        threshold = b.shuffle_vector(one, ir.Constant(vector, ir.Undefined),
                                     ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))
        start = b.gep(self.x, [b.add(row, at)], inbounds=True)
        masks = []
        for v in range(BLOCK_VECTORS):
            where = b.bitcast(b.gep(start, [_c(v * lanes)], inbounds=True),
                              vector.as_pointer())
            key = self.order_key(b.load(where, align=self.itemsize))
            key = b.not_(key) if self.descending else key
            masks.append(b.icmp_unsigned("<", key, threshold))
        mask = b.bitcast(functools.reduce(b.or_, masks), ir.IntType(lanes))
        return b.icmp_unsigned("!=", mask, ir.Constant(ir.IntType(lanes), 0))


def render_top_k(module: ir.Module, name: str, eqn: Eqn, split: bool = False) -> ir.Function:
    """Add the function of a top_k equation (module docstring)."""
    dtype = eqn.inputs[0].aval.dtype
    if eqn.primitive.name != "top_k" or dtype not in ELEMENT_TYPES:
        raise ValueError(f"render_top_k: {name} ({eqn.primitive.name} on {dtype}) has no "
                         f"native lowering; a bug in the schedule")
    return TopKBuilder(module, name, eqn, split).build()
