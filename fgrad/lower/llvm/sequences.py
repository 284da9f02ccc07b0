"""Native sort and cumulative ops for the llvm backend: one generated function per equation,
where the portable expansions (schedule/expand_math.py) need a bitonic network of ~55
kernels (sort of 1024) or ceil(log2 n) prefix-scan passes.

In: a library call whose equation is `sort` (fgrad/core/prims/sort.py: a stable sort along
the last axis, NaN largest, `[values, int32 indices]`) or cumsum/cumprod/cummax/cummin
(any axis, `reverse`), of a dtype in `NATIVE_SEQUENCE_DTYPES`.
Out: an internal LLVM function `void name(T* values, i32* indices, T* x)` (sort) or
`void name(T* out, T* x)` (cumulative) with the results of the primitive's NumPy impl.

Cumulative ops run in the axis' order (backwards when `reverse`), each step combining the
previous output with the next input, as NumPy's accumulate does, so float sums round
exactly as NumPy's; the axis is a middle one of the view (outer, n, inner), and the inner
loop over contiguous memory vectorizes. cummax/cummin propagate NaN.

Sort: each row sorts a permutation, not the keys: insertion sort on runs of `RUN` positions, then
bottom-up merges of runs, ping-ponging between the row of `indices` and the row of `values`
used as int32 scratch (every dtype here is at least 4 bytes wide), so no memory is
allocated. A merge takes from the right run only when its key is strictly before the left
one's, which keeps equal keys in their original order; descending order is "strictly
after", so ties stay in order there too and NaN comes first, as in PyTorch. Finally the
values are gathered through the permutation. Compiling it costs one small function, where
the bitonic network of a 1024-long axis was 55 kernels.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from llvmlite import ir

from fgrad.core.dtypes import dtypes
from fgrad.core.ir import Eqn
from fgrad.lower.schedule.partition import NATIVE_SEQUENCE_DTYPES

I32, I64 = ir.IntType(32), ir.IntType(64)
RUN = 16  # positions sorted by insertion before the first merge pass
_TYPES = {dtypes.float32: ir.FloatType(), dtypes.float64: ir.DoubleType(),
          dtypes.int32: I32, dtypes.int64: I64, dtypes.uint32: I32, dtypes.uint64: I64}
assert set(_TYPES) == set(NATIVE_SEQUENCE_DTYPES)


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


class _Builder:
    """One internal function with stack-slot loop variables (mem2reg makes registers)."""

    def __init__(self, module: ir.Module, name: str, eqn: Eqn, args: list[ir.Type]):
        dtype = eqn.inputs[0].aval.dtype
        self.ty, self.float = _TYPES[dtype], dtype in (dtypes.float32, dtypes.float64)
        self.unsigned = dtype in (dtypes.uint32, dtypes.uint64)
        self.fn = ir.Function(module, ir.FunctionType(ir.VoidType(), args), name=name)
        self.fn.linkage = "internal"
        for arg in self.fn.args:
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



class _SortBuilder(_Builder):
    """Emits the sort function (module docstring)."""

    def __init__(self, module: ir.Module, name: str, eqn: Eqn):
        tp = _TYPES[eqn.inputs[0].aval.dtype].as_pointer()
        super().__init__(module, name, eqn, [tp, I32.as_pointer(), tp])
        self.values, self.indices, self.x = self.fn.args
        self.descending = bool(eqn.params["descending"])
        shape = eqn.inputs[0].aval.shape
        self.n, self.rows = shape[-1], math.prod(shape[:-1])
        self.slots_per_value = eqn.inputs[0].aval.dtype.itemsize // 4  # int32 scratch slots

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

    def build(self) -> ir.Function:
        """The whole function: every row sorted, then gathered."""
        b, n = self.b, _c(self.n)
        scratch_of_row = self.b.bitcast(self.values, I32.as_pointer())

        def row_sort(r: ir.Value) -> None:
            row = b.mul(r, n)
            perm = b.gep(self.indices, [row], inbounds=True)
            scratch = b.gep(scratch_of_row, [b.mul(row, _c(self.slots_per_value))],
                            inbounds=True)
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
            values = b.gep(self.values, [row], inbounds=True)
            self.loop(_c(0), n, 1, lambda k: b.store(
                self.key(row, b.load(b.gep(perm, [k], inbounds=True))),
                b.gep(values, [k], inbounds=True)))
        self.loop(_c(0), _c(self.rows), 1, row_sort)
        b.ret_void()
        return self.fn


class _ScanBuilder(_Builder):
    """Emits a cumulative op's function (module docstring)."""

    def __init__(self, module: ir.Module, name: str, eqn: Eqn):
        tp = _TYPES[eqn.inputs[0].aval.dtype].as_pointer()
        super().__init__(module, name, eqn, [tp, tp])
        self.out, self.x = self.fn.args
        self.op, self.reverse = eqn.primitive.name, bool(eqn.params["reverse"])
        shape, axis = eqn.inputs[0].aval.shape, eqn.params["axis"]
        self.outer, self.n = math.prod(shape[:axis]), shape[axis]
        self.inner = math.prod(shape[axis + 1:])

    def combine(self, acc: ir.Value, x: ir.Value) -> ir.Value:
        """acc op x (max/min propagate NaN; integers wrap as NumPy's do)."""
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
        suffix = {ir.FloatType(): "f32", ir.DoubleType(): "f64", I32: "i32", I64: "i64"}
        symbol = f"{name}.{suffix[self.ty]}"
        fn = b.module.globals.get(symbol) or ir.Function(
            b.module, ir.FunctionType(self.ty, [self.ty, self.ty]), name=symbol)
        return b.call(fn, [acc, x])

    def build(self) -> ir.Function:
        """out[o, k, i] = out[o, k -+ 1, i] op x[o, k, i] along the axis' order."""
        b, n, inner = self.b, self.n, _c(self.inner)
        if not (self.outer and n and self.inner):
            b.ret_void()
            return self.fn

        def at(o: ir.Value, k: ir.Value, i: ir.Value) -> ir.Value:
            return b.add(b.mul(b.add(b.mul(o, _c(n)), k), inner), i)

        def step_of(o: ir.Value) -> None:
            first = _c(n - 1 if self.reverse else 0)
            self.loop(_c(0), inner, 1, lambda i: b.store(
                b.load(b.gep(self.x, [at(o, first, i)], inbounds=True)),
                b.gep(self.out, [at(o, first, i)], inbounds=True)))

            def row(t: ir.Value) -> None:
                k = b.sub(_c(n - 1), t) if self.reverse else t
                prev = b.add(k, _c(1)) if self.reverse else b.sub(k, _c(1))

                def element(i: ir.Value) -> None:
                    acc = b.load(b.gep(self.out, [at(o, prev, i)], inbounds=True))
                    x = b.load(b.gep(self.x, [at(o, k, i)], inbounds=True))
                    b.store(self.combine(acc, x), b.gep(self.out, [at(o, k, i)],
                                                        inbounds=True))
                self.loop(_c(0), inner, 1, element)
            self.loop(_c(1), _c(n), 1, row)
        self.loop(_c(0), _c(self.outer), 1, step_of)
        b.ret_void()
        return self.fn


CUMULATIVE = ("cumsum", "cumprod", "cummax", "cummin")


def render_sequence_op(module: ir.Module, name: str, eqn: Eqn) -> ir.Function:
    """Add the function of a sort (`void name(T* values, i32* indices, T* x)`, along the
    last axis) or a cumulative op (`void name(T* out, T* x)`); module docstring."""
    dtype, prim = eqn.inputs[0].aval.dtype, eqn.primitive.name
    if prim not in ("sort", *CUMULATIVE) or dtype not in _TYPES:
        raise ValueError(f"render_sequence_op: {name} ({prim} on {dtype}) has no native "
                         f"lowering; a bug in the schedule")
    if prim == "sort":
        return _SortBuilder(module, name, eqn).build()
    return _ScanBuilder(module, name, eqn).build()
