"""Native sort and cumulative ops for the llvm backend: one generated function per equation,
where the portable expansions (schedule/expand_math.py) need a bitonic network of ~55
kernels (sort of 1024) or ceil(log2 n) prefix-scan passes.

In: a library call whose equation is `sort` (fgrad/core/prims/sort.py: a stable sort along
the last axis, NaN largest, `[values, int32 indices]`; a dtype in `NATIVE_SORT_DTYPES`, 8
to 64 bits, float16/bfloat16 included) or cumsum/cumprod/cummax/cummin (any axis,
`reverse`; a dtype in `NATIVE_SEQUENCE_DTYPES`, 32 or 64 bits).
Out: an internal LLVM function `void name(T* values, i32* indices, T* x)` (sort) or
`void name(T* out, T* x)` (cumulative) with the results of the primitive's NumPy impl.

Cumulative ops: `scans.py` (in NumPy's order; rows of the last axis side by side). top_k:
`kernels/selection.py` (a selection per row; rows it does not select sort as below).

Sort: each row sorts a permutation, not the keys. Rows of RADIX_MIN and more: LSD radix
passes of 8 bits over the keys mapped to unsigned integers in sort order (floats: -0 as +0,
NaN largest; all bits inverted when descending, so ties keep their order and NaN comes
first, as in PyTorch); one read counts every pass's digits, a pass whose digit is the same
for the whole row is skipped, and the pool shares the rows of a large sort
(`sort_chunking`). 2048 x 2048 float32 on 2 cores: 197 -> 24 ms (PyTorch 94, JAX 526,
NumPy's unstable sort without indices 8.6); one row of 2^20: 110 -> 18 ms. Shorter rows:
insertion sort on runs of `RUN` positions, then bottom-up merges of runs. Both ping-pong
between the row of `indices` and a scratch row of int32: the row of `values` where its
elements have 4 bytes or more, else one row allocated per call (where malloc fails, the
function records it and returns before any row: the call raises MemoryError). (The 8- and 16-bit
dtypes were a bitonic network of kernels: 2048 x 2048 float16 1.7-2.2 s to compile and
110-130 ms a call, now 5-13 ms.) A merge takes from the right run
only when its key is strictly before the left one's, which keeps equal keys in their
original order; descending order is "strictly after", so ties stay in order there too and
NaN comes first. Finally the values are gathered through the permutation. Compiling it
costs one small function, where the bitonic network of a 1024-long axis was 55 kernels.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable

from llvmlite import ir

from fgrad.core.dtypes import dtypes
from fgrad.core.ir import Eqn
from fgrad.lower.llvm.gemm.native import _libc
from fgrad.lower.llvm.gemm.scratch import bail_if_null
from fgrad.lower.schedule.partition import NATIVE_SORT_DTYPES

I8, I16, I32, I64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
RUN = 16  # positions sorted by insertion before the first merge pass
RADIX_MIN = 64  # rows at least this long sort by radix passes (`radix_sort`)
MIN_SPLIT_ELEMENTS = 1 << 14   # a smaller sort runs whole on one thread
MIN_CHUNK_ELEMENTS = 1 << 13   # ... and a split one in chunks of at least this many
CHUNKS_PER_THREAD = 4
ELEMENT_TYPES = {dtypes.float32: ir.FloatType(), dtypes.float64: ir.DoubleType(),
                 dtypes.int32: I32, dtypes.int64: I64, dtypes.uint32: I32, dtypes.uint64: I64,
                 dtypes.float16: I16, dtypes.bfloat16: I16,   # their bits: no half arithmetic
                 dtypes.int8: I8, dtypes.uint8: I8, dtypes.int16: I16, dtypes.uint16: I16}
assert set(ELEMENT_TYPES) == set(NATIVE_SORT_DTYPES)   # cumulative ops: the first six
SORTS = ("sort", "top_k")


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


class LoopBuilder:
    """One internal function with stack-slot loop variables (mem2reg makes registers); the
    sort's and the cumulative ops' (scans.py) builders."""

    def __init__(self, module: ir.Module, name: str, eqn: Eqn, args: list[ir.Type]):
        dtype = eqn.inputs[0].aval.dtype
        self.ty, self.float = ELEMENT_TYPES[dtype], dtype.is_float
        self.half = dtype in (dtypes.float16, dtypes.bfloat16)
        self.exponent_all_ones = {dtypes.float16: 0x7C00, dtypes.bfloat16: 0x7F80,
                                  dtypes.float32: 0x7F800000,
                                  dtypes.float64: 0x7FF0000000000000}.get(dtype, 0)
        self.unsigned = dtype in (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)
        self.fn = ir.Function(module, ir.FunctionType(ir.VoidType(), args), name=name)
        self.fn.linkage = "internal"
        for arg in self.fn.args:
            if isinstance(arg.type, ir.PointerType):
                arg.add_attribute("noalias")
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))

    # ------------------------------------------------------------------ control flow

    def var(self, init: ir.Value) -> ir.Value:
        """A stack slot holding `init` (mem2reg turns it into registers)."""
        here = self.b.block
        self.b.position_at_start(self.fn.entry_basic_block)
        slot = self.b.alloca(init.type)
        self.b.position_at_end(here)
        self.b.store(init, slot)
        return slot

    def loop(self, lo: ir.Value, hi: ir.Value, step: int | ir.Value,
             body: Callable[[ir.Value], None]) -> None:
        """for (i = lo; i < hi; i += step) body(i)."""
        i = self.var(lo)
        stride = step if isinstance(step, ir.Value) else _c(step)

        def iteration() -> None:
            body(self.b.load(i))
            self.b.store(self.b.add(self.b.load(i), stride), i)
        self.while_(lambda: self.b.icmp_signed("<", self.b.load(i), hi), iteration)

    def while_(self, cond: Callable[[], ir.Value], body: Callable[[], object]) -> None:
        """while (cond()) body()."""
        head, loop, done = (self.fn.append_basic_block(s) for s in ("w.head", "w.body",
                                                                     "w.done"))
        self.b.branch(head)
        self.b.position_at_end(head)
        self.b.cbranch(cond(), loop, done)
        self.b.position_at_end(loop)
        body()
        self.b.branch(head)
        self.b.position_at_end(done)



def sort_chunking(eqn: Eqn) -> tuple[int, int, int]:
    """(chunk count, rows per chunk, rows) of a sort or top_k whose rows the pool shares (a
    few chunks per thread, claimed one by one), else (1, 0, 0): it runs whole on one
    thread."""
    shape = eqn.inputs[0].aval.shape
    rows, n = math.prod(shape[:-1]), shape[-1] if shape else 1
    if eqn.primitive.name not in SORTS or rows < 2 or rows * n < MIN_SPLIT_ELEMENTS:
        return 1, 0, 0
    threads = max(2, os.cpu_count() or 1)  # the machine's, not FGRAD_NUM_THREADS: one plan
    size = max(-(-rows // (threads * CHUNKS_PER_THREAD)), -(-MIN_CHUNK_ELEMENTS // max(n, 1)))
    count = -(-rows // size)
    return (count, size, rows) if count > 1 else (1, 0, 0)


class SortBuilder(LoopBuilder):
    """Emits the sort function (module docstring); kernels/selection.py's top_k builds on
    it."""

    def __init__(self, module: ir.Module, name: str, eqn: Eqn, split: bool = False):
        tp = ELEMENT_TYPES[eqn.inputs[0].aval.dtype].as_pointer()
        super().__init__(module, name, eqn, [tp, I32.as_pointer(), tp] + [I64, I64] * split)
        self.values, self.indices, self.x = self.fn.args[:3]
        self.chunk = tuple(self.fn.args[3:]) if split else None
        self.descending = bool(eqn.params["descending"])
        shape = eqn.inputs[0].aval.shape
        self.n, self.rows = shape[-1], math.prod(shape[:-1])
        self.itemsize = eqn.inputs[0].aval.dtype.itemsize
        self.eqn_name = eqn.primitive.name   # "sort" or "top_k": a failure's site

    def key(self, row: ir.Value, position: ir.Value) -> ir.Value:
        """x[row, position] (position an i32 from a permutation)."""
        at = self.b.add(row, self.b.sext(position, I64))
        return self.b.load(self.b.gep(self.x, [at], inbounds=True))

    def before(self, a: ir.Value, b_: ir.Value) -> ir.Value:
        """Whether key `a` sorts strictly before key `b_` (NaN largest; descending flips
        the order, not the ties)."""
        b = self.b
        if self.descending:
            a, b_ = b_, a
        if not self.float:
            return b.icmp_unsigned("<", a, b_) if self.unsigned else b.icmp_signed("<", a, b_)
        if self.half:     # their bits, mapped to integers in sort order
            return b.icmp_unsigned("<", self.order_key(a), self.order_key(b_))
        # a < b, or b is NaN and a is not
        return b.or_(b.fcmp_ordered("<", a, b_),
                     b.and_(b.fcmp_unordered("uno", b_, b_), b.fcmp_ordered("ord", a, a)))

    # ------------------------------------------------------------------ passes

    def insertion_runs(self, row: ir.Value, perm: ir.Value) -> None:
        """Sort perm[lo:lo+RUN] by key, for every run of the row (stable: an element moves
        left only past elements it sorts strictly before)."""
        b, n = self.b, _c(self.n)

        def run(lo: ir.Value) -> None:
            end = b.add(lo, _c(RUN))
            hi = b.select(b.icmp_signed("<", end, n), end, n)

            def insert(i: ir.Value) -> None:
                moving = b.load(b.gep(perm, [i], inbounds=True))
                key = self.key(row, moving)
                j = self.var(i)
                moves = self.var(ir.Constant(ir.IntType(1), 0))

                def cond() -> ir.Value:
                    jj = b.load(j)
                    b.store(ir.Constant(ir.IntType(1), 0), moves)
                    with b.if_then(b.icmp_signed(">", jj, lo)):
                        left = b.load(b.gep(perm, [b.sub(jj, _c(1))], inbounds=True))
                        b.store(self.before(key, self.key(row, left)), moves)
                    return b.load(moves)

                def shift() -> None:
                    jj = b.load(j)
                    left = b.load(b.gep(perm, [b.sub(jj, _c(1))], inbounds=True))
                    b.store(left, b.gep(perm, [jj], inbounds=True))
                    b.store(b.sub(jj, _c(1)), j)
                self.while_(cond, shift)
                b.store(moving, b.gep(perm, [b.load(j)], inbounds=True))
            self.loop(b.add(lo, _c(1)), hi, 1, insert)
        self.loop(_c(0), n, RUN, run)

    def merge_pass(self, row: ir.Value, src: ir.Value, dst: ir.Value, width: ir.Value) -> None:
        """dst = src with each pair of sorted runs of `width` merged (stable)."""
        b, n = self.b, _c(self.n)

        def clamp(v: ir.Value) -> ir.Value:
            return b.select(b.icmp_signed("<", v, n), v, n)

        def merge(lo: ir.Value) -> None:
            mid = clamp(b.add(lo, width))
            hi = clamp(b.add(mid, width))
            i, j = self.var(lo), self.var(mid)

            def take(k: ir.Value) -> None:
                ii, jj = b.load(i), b.load(j)
                left_done = b.icmp_signed(">=", ii, mid)
                right_done = b.icmp_signed(">=", jj, hi)
                from_right = self.var(left_done)
                with b.if_then(b.and_(b.not_(left_done), b.not_(right_done))):
                    left = b.load(b.gep(src, [ii], inbounds=True))
                    right = b.load(b.gep(src, [jj], inbounds=True))
                    b.store(self.before(self.key(row, right), self.key(row, left)),
                            from_right)
                right_first = b.load(from_right)
                with b.if_else(right_first) as (then, otherwise):
                    with then:
                        b.store(b.load(b.gep(src, [jj], inbounds=True)),
                                b.gep(dst, [k], inbounds=True))
                        b.store(b.add(jj, _c(1)), j)
                    with otherwise:
                        b.store(b.load(b.gep(src, [ii], inbounds=True)),
                                b.gep(dst, [k], inbounds=True))
                        b.store(b.add(ii, _c(1)), i)
            self.loop(lo, hi, 1, take)
        self.loop(_c(0), n, b.mul(width, _c(2)), merge)

    # ------------------------------------------------------------------ radix passes

    def radix_key(self, row: ir.Value, position: ir.Value) -> ir.Value:
        """The key of x[row, position] as an unsigned integer in sort order (`order_key`),
        all bits inverted when descending."""
        key = self.order_key(self.key(row, position))
        return self.b.not_(key) if self.descending else key

    def order_key(self, x: ir.Value) -> ir.Value:
        """A value (or a vector of the values' bits) as an unsigned integer in ascending sort
        order: floats by their bits with the sign folded (-0 as +0, every NaN largest),
        signed integers with the sign bit flipped."""
        b = self.b
        width = 8 * self.itemsize
        it = ir.IntType(width)
        lanes = x.type.count if isinstance(x.type, ir.VectorType) else 0

        def c(v: int) -> ir.Constant:
            return ir.Constant(ir.VectorType(it, lanes), [v] * lanes) if lanes \
                else ir.Constant(it, v)
        sign = c(1 << (width - 1))
        if self.float:
            bits = x if self.half or lanes else b.bitcast(x, it)
            magnitude = b.and_(bits, c((1 << (width - 1)) - 1))
            bits = b.select(b.icmp_unsigned("==", magnitude, c(0)), c(0), bits)
            key = b.xor(bits, b.or_(b.ashr(bits, c(width - 1)), sign))
            nan = b.icmp_unsigned(">", magnitude, c(self.exponent_all_ones))
            return b.select(nan, c(-1), key)
        return x if self.unsigned else b.xor(x, sign)

    def radix_sort(self, row: ir.Value, perm: ir.Value, scratch: ir.Value) -> None:
        """perm = the row's stable order by LSD radix sort, 8 bits a pass: one read builds
        every pass's histogram, and a pass whose digit is the same for every element (the
        high bytes of keys in a narrow range) is skipped. Ping-pongs between perm and
        scratch; the result ends in perm."""
        b, n = self.b, _c(self.n)
        passes = self.itemsize
        with b.goto_entry_block():
            b.position_at_start(self.fn.entry_basic_block)
            counts = b.alloca(I32, size=passes * 256, name="counts")
        self.loop(_c(0), _c(passes * 256), 1, lambda d: b.store(
            ir.Constant(I32, 0), b.gep(counts, [d], inbounds=True)))

        def digit(key: ir.Value, p: int) -> ir.Value:
            shifted = b.lshr(key, ir.Constant(key.type, 8 * p)) if p else key
            low = b.and_(shifted, ir.Constant(key.type, 255))
            return b.add(b.zext(low, I64) if key.type.width < 64 else low, _c(256 * p))

        def count(k: ir.Value) -> None:
            key = self.radix_key(row, b.trunc(k, I32))
            for p in range(passes):
                at = b.gep(counts, [digit(key, p)], inbounds=True)
                b.store(b.add(b.load(at), ir.Constant(I32, 1)), at)
        self.loop(_c(0), n, 1, count)
        self.loop(_c(0), n, 1, lambda k: b.store(b.trunc(k, I32),
                                                 b.gep(perm, [k], inbounds=True)))
        src, dst = self.var(perm), self.var(scratch)
        first_key = self.radix_key(row, ir.Constant(I32, 0))
        for p in range(passes):
            whole = b.load(b.gep(counts, [digit(first_key, p)], inbounds=True))
            with b.if_then(b.icmp_unsigned("!=", whole, ir.Constant(I32, self.n))):
                self.radix_pass(row, counts, p, b.load(src), b.load(dst), digit)
                old = b.load(src)
                b.store(b.load(dst), src)
                b.store(old, dst)
        with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(b.load(src), I64),
                                       b.ptrtoint(perm, I64))):
            result = b.load(src)
            self.loop(_c(0), n, 1, lambda k: b.store(
                b.load(b.gep(result, [k], inbounds=True)), b.gep(perm, [k], inbounds=True)))

    def radix_pass(self, row: ir.Value, counts: ir.Value, p: int, src: ir.Value,
                   dst: ir.Value, digit: Callable[[ir.Value, int], ir.Value]) -> None:
        """dst = src stably ordered by digit p of the keys (counts turned into offsets)."""
        b = self.b
        total = self.var(ir.Constant(I32, 0))

        def offset(d: ir.Value) -> None:
            at = b.gep(counts, [b.add(d, _c(256 * p))], inbounds=True)
            here = b.load(at)
            b.store(b.load(total), at)
            b.store(b.add(b.load(total), here), total)
        self.loop(_c(0), _c(256), 1, offset)

        def place(k: ir.Value) -> None:
            position = b.load(b.gep(src, [k], inbounds=True))
            at = b.gep(counts, [digit(self.radix_key(row, position), p)], inbounds=True)
            slot = b.load(at)
            b.store(position, b.gep(dst, [b.zext(slot, I64)], inbounds=True))
            b.store(b.add(slot, ir.Constant(I32, 1)), at)
        self.loop(_c(0), _c(self.n), 1, place)

    def build(self) -> ir.Function:
        """The whole function: every row sorted, then gathered."""
        b, n = self.b, _c(self.n)
        scratch_of_row = self.b.bitcast(self.values, I32.as_pointer())
        # a values row narrower than int32 slots cannot be the scratch: one row's worth
        # is allocated per call instead
        narrow = self.malloc(_c(4 * max(self.n, 1))) if self.itemsize < 4 else None
        if narrow is not None:   # out of memory: return before any row (gemm/scratch.py)
            self.bail_if_null([narrow], _c(4 * max(self.n, 1)))

        def row_sort(r: ir.Value) -> None:
            row = b.mul(r, n)
            perm = b.gep(self.indices, [row], inbounds=True)
            scratch = b.bitcast(narrow, I32.as_pointer()) if narrow is not None else b.gep(
                scratch_of_row, [b.mul(row, _c(self.itemsize // 4))], inbounds=True)
            self.sort_row(row, perm, scratch)
            self.gather(row, perm)
        start, stop = self.chunk or (_c(0), _c(self.rows))
        self.loop(start, stop, 1, row_sort)
        if narrow is not None:
            self.free(narrow)
        b.ret_void()
        return self.fn

    def malloc(self, size: ir.Value) -> ir.Value:
        """libc malloc(size): an i8*."""
        return self.b.call(_libc(self.b.module, "malloc", I8.as_pointer(), [I64]), [size])

    def free(self, pointer: ir.Value) -> None:
        """libc free(pointer)."""
        self.b.call(self._free(), [pointer])

    def _free(self) -> ir.Function:
        return _libc(self.b.module, "free", ir.VoidType(), [I8.as_pointer()])

    def bail_if_null(self, pointers: list[ir.Value], nbytes: ir.Value) -> None:
        """Where a `malloc` returned NULL: free the others, record the failure and return
        (gemm/scratch.py's `bail_if_null`; the call then raises MemoryError)."""
        bail_if_null(self.b, pointers, self._free(), self.eqn_name, nbytes)

    def sort_row(self, row: ir.Value, perm: ir.Value, scratch: ir.Value) -> None:
        """perm[0:n] = the stable order of the row at offset `row` of x: radix passes for
        rows of RADIX_MIN and more, else insertion runs and merges (`scratch`: n int32)."""
        b, n = self.b, _c(self.n)
        if self.n >= RADIX_MIN:
            self.radix_sort(row, perm, scratch)
            return
        self.loop(_c(0), n, 1, lambda k: b.store(b.trunc(k, I32),
                                                 b.gep(perm, [k], inbounds=True)))
        self.insertion_runs(row, perm)
        width, in_perm = self.var(_c(RUN)), self.var(ir.Constant(ir.IntType(1), 1))

        def one_pass() -> None:
            w = b.load(width)
            with b.if_else(b.load(in_perm)) as (then, otherwise):
                with then:
                    self.merge_pass(row, perm, scratch, w)
                with otherwise:
                    self.merge_pass(row, scratch, perm, w)
            b.store(b.not_(b.load(in_perm)), in_perm)
            b.store(b.mul(w, _c(2)), width)
        self.while_(lambda: b.icmp_signed("<", b.load(width), n), one_pass)
        with b.if_then(b.not_(b.load(in_perm))):
            self.loop(_c(0), n, 1, lambda k: b.store(
                b.load(b.gep(scratch, [k], inbounds=True)), b.gep(perm, [k], inbounds=True)))

    def gather(self, row: ir.Value, perm: ir.Value) -> None:
        """values[row] = x[row] in the order of perm."""
        b = self.b
        values = b.gep(self.values, [row], inbounds=True)
        self.loop(_c(0), _c(self.n), 1, lambda k: b.store(
            self.key(row, b.load(b.gep(perm, [k], inbounds=True))),
            b.gep(values, [k], inbounds=True)))


CUMULATIVE = ("cumsum", "cumprod", "cummax", "cummin")


def render_sequence_op(module: ir.Module, name: str, eqn: Eqn, split: bool = False
                       ) -> ir.Function:
    """Add the function of a sort (`void name(T* values, i32* indices, T* x)`, along the
    last axis; with `split`, two more arguments, the rows [start, stop) it sorts:
    `sort_chunking`) or a cumulative op (`void name(T* out, T* x)`, with `split` the rows
    [start, stop) of `scans.scan_rows`); module docstring. (top_k: kernels/selection.py.)"""
    dtype, prim = eqn.inputs[0].aval.dtype, eqn.primitive.name
    if prim not in ("sort", *CUMULATIVE) or dtype not in ELEMENT_TYPES:
        raise ValueError(f"render_sequence_op: {name} ({prim} on {dtype}) has no native "
                         f"lowering; a bug in the schedule")
    if prim == "sort":
        return SortBuilder(module, name, eqn, split).build()
    from fgrad.lower.llvm.scans import ScanBuilder
    return ScanBuilder(module, name, eqn, split).build()
