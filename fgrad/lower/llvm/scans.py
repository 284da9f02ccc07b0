"""Native cumulative ops (cumsum, cumprod, cummax, cummin) for the llvm backend.

In: a cumulative equation (any axis, `reverse`; a dtype of 32 or 64 bits:
`schedule/partition.py NATIVE_SEQUENCE_DTYPES`). Out: an internal LLVM function
`void name(T* out, T* x)`, or with `split` `void name(T* out, T* x, i64 start, i64 stop)`
computing the rows [start, stop) of the view (outer, n, inner) that the pool shares
(`scan_rows`), or its columns [start, stop) when it has one row (along the first axis:
`splits_columns`).

Every element combines the previous output with the next input along the axis' order
(backwards when `reverse`), as NumPy's accumulate does, so float sums round exactly as
NumPy's; cummax/cummin propagate NaN. Along a middle axis the inner loop over contiguous
memory vectorizes. Along the last axis (inner = 1) each row is one chain of dependent
operations, one element per add latency: `lanes` rows run side by side instead, a block
of lanes x lanes elements at a time, turned by a register transpose (gemm/pack.py
`transpose_rows`) so that each vector holds one column of the block, combined into a
running vector of the rows' totals in the axis' order and transposed back. A block's
running vector starts at the op's identity (-0.0 for a float sum: -0.0 + x is x for every
x), so the first element is the input's, bit for bit. The columns past the last whole block
and the rows past the last whole group of `lanes` go one element at a time.
"""
from __future__ import annotations

import math
import os

from llvmlite import ir

from fgrad.core.ir import Eqn
from fgrad.lower.llvm.sequences import ELEMENT_TYPES, LoopBuilder

I64 = ir.IntType(64)
MIN_SPLIT_ELEMENTS = 1 << 16   # a smaller cumulative op runs whole on one thread
MIN_CHUNK_ELEMENTS = 1 << 14   # ... and a split one in chunks of at least this many
CHUNKS_PER_THREAD = 4
MAX_LANES = 16                 # rows side by side at most (one register transpose)
LINE_ELEMENTS = 16             # columns per chunk a multiple of this (a line of float32)
MIN_COLUMN_BYTES = 4096        # ... and of at least this much of a row


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _view(eqn: Eqn) -> tuple[int, int, int]:
    """(outer, n, inner): the input as rows of the cumulative axis."""
    shape, axis = eqn.inputs[0].aval.shape, eqn.params["axis"]
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def scan_lanes(eqn: Eqn) -> int:
    """Rows of a last-axis cumulative op run side by side (0: one at a time), by the host's
    vector width (`target.vector_bits`)."""
    from fgrad.lower.llvm import target
    _, n, inner = _view(eqn)
    size = eqn.inputs[0].aval.dtype.itemsize
    lanes = min(MAX_LANES, target.vector_bits() // (8 * size))
    return lanes if inner == 1 and lanes >= 4 and n >= lanes else 0


def splits_columns(eqn: Eqn) -> bool:
    """Whether the pool shares a cumulative op's columns (the view's inner extent: one
    outer row, as along the first axis) rather than its rows."""
    outer, _, inner = _view(eqn)
    return outer == 1 and inner > 1


def scan_rows(eqn: Eqn) -> tuple[int, int, int]:
    """(chunk count, rows per chunk, rows) of a cumulative op whose rows (the view's outer
    extent) or, along the first axis, columns (`splits_columns`) the pool shares, a few
    chunks per thread, else (1, 0, 0)."""
    outer, n, inner = _view(eqn)
    if outer * n * inner < MIN_SPLIT_ELEMENTS:
        return 1, 0, 0
    columns = splits_columns(eqn)
    rows, row_size = (inner, n) if columns else (outer, n * inner)
    if rows < 2:
        return 1, 0, 0
    threads = max(2, os.cpu_count() or 1)  # the machine's, not FGRAD_NUM_THREADS: one plan
    size = max(-(-rows // (threads * CHUNKS_PER_THREAD)), -(-MIN_CHUNK_ELEMENTS // row_size))
    if columns:   # a row's piece of at least MIN_COLUMN_BYTES: 4096^2 cumsum(0), chunks of
        # 512 columns 5.1-5.3 ms, of 1024 3.9 (of 2048 4.0)
        size = max(size, MIN_COLUMN_BYTES // eqn.inputs[0].aval.dtype.itemsize)
    # whole groups of rows side by side, whole lines of columns
    group = LINE_ELEMENTS if columns else scan_lanes(eqn) or 1
    size = min(rows, -(-size // group) * group)
    count = -(-rows // size)
    return (count, size, rows) if count > 1 else (1, 0, 0)


class ScanBuilder(LoopBuilder):
    """Emits a cumulative op's function (module docstring)."""

    def __init__(self, module: ir.Module, name: str, eqn: Eqn, split: bool = False):
        tp = ELEMENT_TYPES[eqn.inputs[0].aval.dtype].as_pointer()
        super().__init__(module, name, eqn, [tp, tp, I64, I64] if split else [tp, tp])
        self.out, self.x = self.fn.args[:2]
        bounds = (self.fn.args[2], self.fn.args[3]) if split else None
        self.columns = bounds if split and splits_columns(eqn) else None
        self.bounds = None if self.columns else bounds
        self.op, self.reverse = eqn.primitive.name, bool(eqn.params["reverse"])
        self.outer, self.n, self.inner = _view(eqn)
        self.lanes = scan_lanes(eqn)

    # ------------------------------------------------------------------ the op

    def combine(self, acc: ir.Value, x: ir.Value) -> ir.Value:
        """acc op x, on scalars or vectors (max/min propagate NaN; integers wrap as NumPy's
        do)."""
        b = self.b
        if self.op in ("cumsum", "cumprod"):
            add = self.op == "cumsum"
            if self.float:
                return b.fadd(acc, x) if add else b.fmul(acc, x)
            return b.add(acc, x) if add else b.mul(acc, x)
        high = self.op == "cummax"
        if self.float:
            name = "llvm.maximum" if high else "llvm.minimum"
        else:
            name = f"llvm.{'u' if self.unsigned else 's'}{'max' if high else 'min'}"
        kind = {"float": "f32", "double": "f64", "i32": "i32", "i64": "i64"}[str(self.ty)]
        if isinstance(acc.type, ir.VectorType):
            kind = f"v{acc.type.count}{kind}"
        symbol = f"{name}.{kind}"
        fn = b.module.globals.get(symbol) or ir.Function(
            b.module, ir.FunctionType(acc.type, [acc.type, acc.type]), name=symbol)
        return b.call(fn, [acc, x])

    def identity(self) -> ir.Constant:
        """The value v with v op x == x for every x, bit for bit."""
        if self.float:
            value = {"cumsum": -0.0, "cumprod": 1.0, "cummax": -math.inf,
                     "cummin": math.inf}[self.op]
            return ir.Constant(self.ty, value)
        bits = self.ty.width
        value = {"cumsum": 0, "cumprod": 1,
                 "cummax": 0 if self.unsigned else -(1 << (bits - 1)),
                 "cummin": (1 << bits) - 1 if self.unsigned else (1 << (bits - 1)) - 1,
                 }[self.op]
        return ir.Constant(self.ty, value)

    def build(self) -> ir.Function:
        """out[o, k, i] = out[o, k -+ 1, i] op x[o, k, i] along the axis' order, for the
        rows o of this call."""
        b = self.b
        if not (self.outer and self.n and self.inner):
            b.ret_void()
            return self.fn
        start, stop = self.bounds or (_c(0), _c(self.outer))
        if self.lanes:
            groups = b.mul(b.sdiv(b.sub(stop, start), _c(self.lanes)), _c(self.lanes))
            middle = b.add(start, groups)
            self.loop(start, middle, self.lanes, self.row_group)
            start = middle
        self.loop(start, stop, 1, self.row)
        b.ret_void()
        return self.fn

    def at(self, o: ir.Value, k: ir.Value, i: ir.Value) -> ir.Value:
        """The element offset of x[o, k, i] in the (outer, n, inner) view."""
        b = self.b
        return b.add(b.mul(b.add(b.mul(o, _c(self.n)), k), _c(self.inner)), i)

    def position(self, t: ir.Value) -> ir.Value:
        """The axis index of the t-th element in the op's order."""
        return self.b.sub(_c(self.n - 1), t) if self.reverse else t

    def row(self, o: ir.Value) -> None:
        """Row o, element by element (vectorized along the inner axis), its columns
        [start, stop) where the pool shares them."""
        b = self.b
        first = _c(self.n - 1 if self.reverse else 0)
        lo, hi = self.columns or (_c(0), _c(self.inner))
        self.loop(lo, hi, 1, lambda i: b.store(
            b.load(b.gep(self.x, [self.at(o, first, i)], inbounds=True)),
            b.gep(self.out, [self.at(o, first, i)], inbounds=True)))

        def step(t: ir.Value) -> None:
            k = self.position(t)
            prev = b.add(k, _c(1)) if self.reverse else b.sub(k, _c(1))

            def element(i: ir.Value) -> None:
                acc = b.load(b.gep(self.out, [self.at(o, prev, i)], inbounds=True))
                x = b.load(b.gep(self.x, [self.at(o, k, i)], inbounds=True))
                b.store(self.combine(acc, x), b.gep(self.out, [self.at(o, k, i)],
                                                    inbounds=True))
            self.loop(lo, hi, 1, element)
        self.loop(_c(1), _c(self.n), 1, step)

    def row_group(self, o: ir.Value) -> None:
        """Rows o .. o + lanes - 1 of a last-axis op side by side (module docstring)."""
        from fgrad.lower.llvm.gemm.pack import transpose_rows
        b, lanes, n = self.b, self.lanes, self.n
        vt = ir.VectorType(self.ty, lanes)
        align = self.ty.width // 8 if isinstance(self.ty, ir.IntType) else \
            (8 if isinstance(self.ty, ir.DoubleType) else 4)
        totals = self.var(ir.Constant(vt, [self.identity()] * lanes))
        whole = n // lanes

        def block(q: ir.Value) -> None:
            # the block's first column in memory: in the op's order it holds the q-th
            # group of `lanes` elements (from the end when reverse)
            lo = b.sub(_c(n - lanes), b.mul(q, _c(lanes))) if self.reverse \
                else b.mul(q, _c(lanes))
            pointers = [b.bitcast(b.gep(ptr, [self.at(b.add(o, _c(r)), lo, _c(0))],
                                        inbounds=True), vt.as_pointer())
                        for ptr in (self.x, self.out) for r in range(lanes)]
            rows = [b.load(p, align=align) for p in pointers[:lanes]]
            columns = transpose_rows(b, rows)
            running = b.load(totals)
            for j in (range(lanes - 1, -1, -1) if self.reverse else range(lanes)):
                running = columns[j] = self.combine(running, columns[j])
            b.store(running, totals)
            for p, value in zip(pointers[lanes:], transpose_rows(b, columns), strict=True):
                b.store(value, p, align=align)
        self.loop(_c(0), _c(whole), 1, block)
        if n % lanes:
            self.row_tails(o, totals, whole * lanes)

    def row_tails(self, o: ir.Value, totals: ir.Value, done: int) -> None:
        """The last n - done elements (in the op's order) of rows o .. o + lanes - 1, one at
        a time from each row's total."""
        b = self.b
        lanes = self.lanes
        scalars = b.bitcast(totals, self.ty.as_pointer())

        def one_row(r: ir.Value) -> None:
            total = self.var(b.load(b.gep(scalars, [r], inbounds=True)))
            row = b.add(o, r)

            def element(t: ir.Value) -> None:
                at = self.at(row, self.position(t), _c(0))
                value = self.combine(b.load(total),
                                     b.load(b.gep(self.x, [at], inbounds=True)))
                b.store(value, total)
                b.store(value, b.gep(self.out, [at], inbounds=True))
            self.loop(_c(done), _c(self.n), 1, element)
        self.loop(_c(0), _c(lanes), 1, one_row)
