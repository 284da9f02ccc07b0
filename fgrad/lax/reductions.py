"""Reductions, cumulative ops, arg-reductions and contractions of `jax.lax`.

Axes are non-negative and distinct, as XLA requires. Reducing an empty axis gives the
reduction's identity (0, 1, -inf/+inf or the integer limits, all-ones/zero bits). The bitwise
reductions on integers combine halves in a log-depth tree. `dot_general` computes in the
promoted dtype of its operands (or in `preferred_element_type` when that is wider) and
returns `preferred_element_type` when given; `precision` is accepted and ignored.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fgrad.core import dtypes as _dt
from fgrad.core import prims as P
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.errors import ArgumentError, ArgumentTypeError
from fgrad.core.prims._util import fmt_shape
from fgrad.core.tensor import Tensor, Tracer
from fgrad.core.tree_util import tree_flatten, tree_unflatten
from fgrad.lax import elementwise as E
from fgrad.lax._args import (axes_arg, axis_arg, check_kind, dtype_name, int_tuple,
                             to_dtype, to_tensor)
from fgrad.lax.scan_ops import associative_scan
from fgrad.transforms.extras.contexts import ensure_compile_time_eval

__all__ = ["argmax", "argmin", "batch_matmul", "cummax", "cummin", "cumprod", "cumsum", "dot",
           "dot_general", "reduce_and", "reduce_max", "reduce_min", "reduce_or", "reduce_prod",
           "reduce_sum", "reduce_xor", "reduce", "cumlogsumexp"]


def _identity(kind: str, dtype: DType) -> Any:
    lo, hi = _dt.dtype_limits(dtype)
    value = {"sum": 0, "prod": 1, "max": lo, "min": hi, "or": 0, "xor": 0, "and": -1}[kind]
    if dtype == dtypes.bool:
        return kind == "and" or (kind in ("prod", "min"))
    with np.errstate(all="ignore"):
        return np.array(value).astype(dtype.np).item()


def _reduce(op: str, operand: Any, axes: Sequence[int], kinds: str, kind: str
            ) -> tuple[Tensor | None, Tensor, tuple[int, ...]]:
    """(the result when an axis is empty, else None; the operand; its axes)."""
    x = to_tensor(op, operand)
    check_kind(op, x, kinds)
    dims = axes_arg(op, axes, x.ndim, x.shape)
    if any(x.shape[a] == 0 for a in dims):
        out_shape = tuple(n for i, n in enumerate(x.shape) if i not in dims)
        value = Tensor(np.array(_identity(kind, x.dtype), x.dtype.np))
        return P.broadcast_in_dim(value, out_shape, ()), x, dims
    return None, x, dims


def reduce_sum(operand: Any, axes: Sequence[int]) -> Tensor:
    """The sum over `axes` (numeric operands)."""
    empty, x, dims = _reduce("reduce_sum", operand, axes, "iuf", "sum")
    return empty if empty is not None else P.reduce_sum(x, dims)


def reduce_prod(operand: Any, axes: Sequence[int]) -> Tensor:
    """The product over `axes` (numeric operands)."""
    empty, x, dims = _reduce("reduce_prod", operand, axes, "iuf", "prod")
    return empty if empty is not None else P.reduce_prod(x, dims)


def reduce_max(operand: Any, axes: Sequence[int]) -> Tensor:
    """The maximum over `axes` (NaN if any is NaN; -inf or the integer minimum if empty)."""
    empty, x, dims = _reduce("reduce_max", operand, axes, "biuf", "max")
    return empty if empty is not None else P.reduce_max(x, dims)


def reduce_min(operand: Any, axes: Sequence[int]) -> Tensor:
    """The minimum over `axes` (NaN if any is NaN; +inf or the integer maximum if empty)."""
    empty, x, dims = _reduce("reduce_min", operand, axes, "biuf", "min")
    return empty if empty is not None else P.reduce_min(x, dims)


def _tree(x: Tensor, dims: tuple[int, ...], prim: Any, identity: Any) -> Tensor:
    """Combine the entries along `dims` pairwise with `prim` (log2(n) steps)."""
    keep = tuple(i for i in range(x.ndim) if i not in dims)
    lead = tuple(x.shape[i] for i in keep)
    n = int(np.prod([x.shape[i] for i in dims], dtype=np.int64))
    t = P.reshape(P.transpose(x, keep + dims), lead + (n,))
    zeros = (0,) * len(lead)
    while n > 1:
        if n % 2:
            t = P.pad(t, ((0, 0, 0),) * len(lead) + ((0, 1, 0),), identity)
            n += 1
        half = n // 2
        t = prim.bind(P.slice_(t, zeros + (0,), lead + (half,)),
                      P.slice_(t, zeros + (half,), lead + (n,)))
        n = half
    return P.reshape(t, lead)


def _bitwise_reduce(op: str, operand: Any, axes: Sequence[int], kind: str, prim: Any
                    ) -> Tensor:
    empty, x, dims = _reduce(op, operand, axes, "biu", kind)
    if empty is not None:
        return empty
    if not dims:
        return x
    if x.dtype == dtypes.bool and kind != "xor":
        return (P.reduce_min if kind == "and" else P.reduce_max)(x, dims)
    return _tree(x, dims, prim, _identity(kind, x.dtype))


def reduce_and(operand: Any, axes: Sequence[int]) -> Tensor:
    """Logical (bool) or bitwise (integer) AND over `axes`."""
    return _bitwise_reduce("reduce_and", operand, axes, "and", P.and_p)


def reduce_or(operand: Any, axes: Sequence[int]) -> Tensor:
    """Logical (bool) or bitwise (integer) OR over `axes`."""
    return _bitwise_reduce("reduce_or", operand, axes, "or", P.or_p)


def reduce_xor(operand: Any, axes: Sequence[int]) -> Tensor:
    """Logical (bool) or bitwise (integer) XOR over `axes`."""
    return _bitwise_reduce("reduce_xor", operand, axes, "xor", P.xor_p)


def _arg(op: str, prim: Any, operand: Any, axis: int, index_dtype: Any) -> Tensor:
    x = to_tensor(op, operand)
    check_kind(op, x, "biuf")
    ax = axis_arg(op, axis, x.shape)
    d = to_dtype(op, index_dtype, "index_dtype")
    if not d.is_int:
        raise ArgumentTypeError(f"lax.{op}: index_dtype must be an integer dtype, got "
                                f"{dtype_name(d)}")
    if x.shape[ax] == 0:
        raise ArgumentError(f"lax.{op}: axis {ax} of the operand of shape {fmt_shape(x.shape)} "
                            f"is empty, so it has no {op[3:]}imum")
    if x.dtype == dtypes.bool:
        x = P.convert(x, dtypes.uint8)
    return prim.bind(x, axis=ax, index_dtype=d)


def argmax(operand: Any, axis: int, index_dtype: Any) -> Tensor:
    """Index of the first maximum along `axis` (a NaN counts as the maximum)."""
    return _arg("argmax", P.argmax_p, operand, axis, index_dtype)


def argmin(operand: Any, axis: int, index_dtype: Any) -> Tensor:
    """Index of the first minimum along `axis` (a NaN counts as the minimum)."""
    return _arg("argmin", P.argmin_p, operand, axis, index_dtype)


def _cumulative(kind: str, operand: Any, axis: int, reverse: bool) -> Tensor:
    x = to_tensor(kind, operand)
    check_kind(kind, x, "iuf")
    return P.cumulative(x, axis_arg(kind, axis, x.shape), bool(reverse), kind)


def cumsum(operand: Any, axis: int = 0, reverse: bool = False) -> Tensor:
    """Running sum along `axis` (from the end when `reverse`)."""
    return _cumulative("cumsum", operand, axis, reverse)


def cumprod(operand: Any, axis: int = 0, reverse: bool = False) -> Tensor:
    """Running product along `axis`."""
    return _cumulative("cumprod", operand, axis, reverse)


def cummax(operand: Any, axis: int = 0, reverse: bool = False) -> Tensor:
    """Running maximum along `axis` (NaN propagates)."""
    return _cumulative("cummax", operand, axis, reverse)


def cummin(operand: Any, axis: int = 0, reverse: bool = False) -> Tensor:
    """Running minimum along `axis` (NaN propagates)."""
    return _cumulative("cummin", operand, axis, reverse)


# ---------------------------------------------------------------------------- contractions

def _dimension_numbers(dimension_numbers: Any, a: Tensor, b: Tensor
                       ) -> tuple[tuple[tuple[int, ...], tuple[int, ...]],
                                  tuple[tuple[int, ...], tuple[int, ...]]]:
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"lax.dot_general: dimension_numbers must be ((lhs_contracting, "
                                f"rhs_contracting), (lhs_batch, rhs_batch)), got "
                                f"{dimension_numbers!r}") from None
    lhs_c, rhs_c = (int_tuple("dot_general", v, "contracting dimensions") for v in (lc, rc))
    lhs_b, rhs_b = (int_tuple("dot_general", v, "batch dimensions") for v in (lb, rb))
    for x, side, used in ((a, "lhs", lhs_c + lhs_b), (b, "rhs", rhs_c + rhs_b)):
        axes_arg("dot_general", used, x.ndim, x.shape, f"the {side} contracting and batch "
                 f"dimensions")
    for what, xs, ys in (("contracting", lhs_c, rhs_c), ("batch", lhs_b, rhs_b)):
        if len(xs) != len(ys) or any(a.shape[i] != b.shape[j] for i, j in zip(xs, ys)):
            raise ArgumentError(f"lax.dot_general: the {what} dimensions {xs} of lhs "
                                f"{fmt_shape(a.shape)} and {ys} of rhs {fmt_shape(b.shape)} "
                                f"must pair up with equal sizes")
    return (lhs_c, rhs_c), (lhs_b, rhs_b)


def dot_general(lhs: Any, rhs: Any, dimension_numbers: Any, precision: Any = None,
                preferred_element_type: Any = None) -> Tensor:
    """Contract `lhs` and `rhs` over the paired contracting dimensions, sharing the paired
    batch dimensions; the result's axes are batch, lhs free, rhs free."""
    a, b = to_tensor("dot_general", lhs, "lhs"), to_tensor("dot_general", rhs, "rhs")
    check_kind("dot_general", a, "biuf", "lhs")
    check_kind("dot_general", b, "biuf", "rhs")
    dn = _dimension_numbers(dimension_numbers, a, b)
    common = _dt.promote(a.dtype, b.dtype)
    want = None if preferred_element_type is None else to_dtype(
        "dot_general", preferred_element_type, "preferred_element_type")
    if want is not None and common.is_float and not want.is_float:
        raise ArgumentTypeError(f"lax.dot_general: preferred_element_type "
                                f"{dtype_name(want)} is not a float dtype, but the operands "
                                f"are {dtype_name(a.dtype)} and {dtype_name(b.dtype)}")
    compute = common if want is None else _dt.promote(common, want)
    if compute == dtypes.bool:
        out = P.dot_general(P.convert(a, dtypes.int32), P.convert(b, dtypes.int32), dn)
        out = P.ne_p.bind(out, P.broadcast_in_dim(Tensor(np.int32(0)), out.shape, ()))
    else:
        out = P.dot_general(P.convert(a, compute), P.convert(b, compute), dn)
    return out if want is None else P.convert(out, want)


def dot(lhs: Any, rhs: Any, *, dimension_numbers: Any = None, precision: Any = None,
        preferred_element_type: Any = None) -> Tensor:
    """Vector/matrix products (1-d or 2-d operands; lhs's last axis with rhs's first), or
    `dot_general` when `dimension_numbers` is given."""
    a, b = to_tensor("dot", lhs, "lhs"), to_tensor("dot", rhs, "rhs")
    if dimension_numbers is None:
        if a.ndim not in (1, 2) or b.ndim not in (1, 2) or a.shape[-1] != b.shape[0]:
            raise ArgumentError(f"lax.dot: without dimension_numbers the operands must be 1-d "
                                f"or 2-d with lhs's last size equal to rhs's first, got lhs "
                                f"{fmt_shape(a.shape)} and rhs {fmt_shape(b.shape)}; use "
                                f"lax.dot_general for other contractions")
        dimension_numbers = (((a.ndim - 1,), (0,)), ((), ()))
    return dot_general(a, b, dimension_numbers, precision, preferred_element_type)


def batch_matmul(lhs: Any, rhs: Any, precision: Any = None) -> Tensor:
    """Matrix products over leading batch axes: (..., m, k) @ (..., k, n), equal ranks."""
    a, b = to_tensor("batch_matmul", lhs, "lhs"), to_tensor("batch_matmul", rhs, "rhs")
    if a.ndim < 2 or a.ndim != b.ndim:
        raise ArgumentError(f"lax.batch_matmul: the operands must have the same rank >= 2, got "
                            f"lhs {fmt_shape(a.shape)} and rhs {fmt_shape(b.shape)}")
    batch = tuple(range(a.ndim - 2))
    return dot_general(a, b, (((a.ndim - 1,), (b.ndim - 2,)), (batch, batch)), precision)


# ---------------------------------------------------------------------------- generic reduce

_PROBES = {"f": ([0.0, 1.0, -2.5, 3.0, 7.0, -0.5, 2.0], [1.5, -2.0, 2.0, 3.0, -4.0, 6.0, 0.25]),
           "i": ([0, 1, -3, 5, 6, 12, 7], [2, -3, 4, 5, -1, 10, 9]),
           "u": ([0, 1, 3, 5, 6, 12, 7], [2, 3, 4, 5, 1, 10, 9]),
           "b": ([False, False, True, True], [False, True, False, True])}


def _known_monoid(computation: Any, dtype: DType) -> str | None:
    """Which of sum/prod/max/min/and/or/xor `computation` computes on `dtype`, found by
    identity with the lax functions or by evaluating it on probe values; None if none."""
    named = {E.add: "sum", E.mul: "prod", E.max: "max", E.min: "min", E.bitwise_and: "and",
             E.bitwise_or: "or", E.bitwise_xor: "xor"}
    if computation in named:
        return named[computation]
    kind = dtype.kind
    lhs, rhs = (np.array(v).astype(dtype.np) for v in _PROBES[kind])
    refs = {"sum": lhs + rhs, "prod": lhs * rhs, "max": np.maximum(lhs, rhs),
            "min": np.minimum(lhs, rhs)} if kind != "b" else \
        {"and": lhs & rhs, "or": lhs | rhs, "xor": lhs ^ rhs}
    if kind in "iu":
        refs.update({"and": lhs & rhs, "or": lhs | rhs, "xor": lhs ^ rhs})
    try:
        with ensure_compile_time_eval(), np.errstate(all="ignore"):
            got = computation(Tensor(lhs), Tensor(rhs))
            value = got.numpy() if isinstance(got, Tensor) else None
    except Exception:  # noqa: BLE001  (a computation that rejects arrays: use the tree)
        return None
    if value is None or value.shape != lhs.shape or value.dtype != lhs.dtype:
        return None
    for name, ref in refs.items():
        if np.array_equal(value, ref.astype(dtype.np)):
            return name
    return None


_REDUCERS = {"sum": reduce_sum, "prod": reduce_prod, "max": reduce_max, "min": reduce_min,
             "and": reduce_and, "or": reduce_or, "xor": reduce_xor}


def _apply(op: str, computation: Any, a: Any, b: Any, treedef: Any, like: list[Tensor]
           ) -> list[Tensor]:
    out = computation(tree_unflatten(treedef, a), tree_unflatten(treedef, b))
    leaves, tree = tree_flatten(out)
    if tree != treedef:
        raise ArgumentError(f"lax.{op}: computation must return the structure of the "
                            f"operands ({treedef}), got {tree}")
    res = [to_tensor(op, v, "computation's result") for v in leaves]
    for r, t in zip(res, like):
        if r.shape != t.shape or r.dtype != t.dtype:
            raise ArgumentError(f"lax.{op}: computation must map arrays elementwise keeping "
                                f"shape and dtype; got {fmt_shape(r.shape)} "
                                f"{dtype_name(r.dtype)} for {fmt_shape(t.shape)} "
                                f"{dtype_name(t.dtype)}")
    return res


def reduce(operands: Any, init_values: Any, computation: Any, dimensions: Sequence[int]
           ) -> Any:
    """XLA's reduce: combine the entries of `operands` (an array or a pytree of arrays of
    one shape) over `dimensions` with `computation`, starting from `init_values` (same
    structure, scalars), which is applied once. A single operand with a computation that
    is (or computes, on probe values) lax.add/mul/max/min/bitwise_and/or/xor uses the
    matching reduction; any other computation must be associative (as XLA requires) and
    is applied pairwise to whole arrays in a log-depth tree that keeps the order of the
    entries."""
    op = "reduce"
    if not callable(computation):
        raise ArgumentTypeError(f"lax.reduce: computation must be callable, got "
                                f"{type(computation).__name__}")
    leaves, treedef = tree_flatten(operands)
    inits, init_tree = tree_flatten(init_values)
    if not leaves or init_tree != treedef:
        raise ArgumentError(f"lax.reduce: operands and init_values must be pytrees of one "
                            f"structure with at least one array, got {treedef} and "
                            f"{init_tree}")
    xs = [to_tensor(op, v, "operands") for v in leaves]
    ins = [to_tensor(op, v, "init_values", dtype=x.dtype) for v, x in zip(inits, xs)]
    for x, i in zip(xs, ins):
        if x.shape != xs[0].shape or i.shape != () or i.dtype != x.dtype:
            raise ArgumentError(f"lax.reduce: operands must share one shape and each init "
                                f"value must be a scalar of its operand's dtype; got "
                                f"{fmt_shape(x.shape)} {dtype_name(x.dtype)} with init "
                                f"{fmt_shape(i.shape)} {dtype_name(i.dtype)}")
    dims = axes_arg(op, dimensions, xs[0].ndim, xs[0].shape, "dimensions")
    keep = tuple(a for a in range(xs[0].ndim) if a not in dims)
    lead = tuple(xs[0].shape[a] for a in keep)
    if len(xs) == 1:
        monoid = _known_monoid(computation, xs[0].dtype)
        if monoid is not None:
            out = _REDUCERS[monoid](xs[0], dims)
            ident = _identity(monoid, xs[0].dtype)
            init = ins[0]
            if not isinstance(init, Tracer) and np.array_equal(init.numpy(), ident):
                return _unflatten_one(treedef, out)
            res = _apply(op, computation, [P.broadcast_in_dim(init, lead, ())], [out],
                         treedef, [out])
            return _unflatten_one(treedef, res[0])
    n = int(np.prod([xs[0].shape[a] for a in dims], dtype=np.int64))
    ts = [P.reshape(P.transpose(x, keep + dims), lead + (n,)) for x in xs]
    z = (0,) * len(lead)
    while n > 1:
        h = n // 2
        evens = [P.slice_(t, z + (0,), lead + (2 * h,), (1,) * len(lead) + (2,)) for t in ts]
        odds = [P.slice_(t, z + (1,), lead + (2 * h,), (1,) * len(lead) + (2,)) for t in ts]
        pairs = _apply(op, computation, evens, odds, treedef, evens)
        ts = [P.concatenate([p, P.slice_(t, z + (2 * h,), lead + (n,))], len(lead))
              if n % 2 else p for p, t in zip(pairs, ts)]
        n = h + n % 2
    starts = [P.broadcast_in_dim(i, lead, ()) for i in ins]
    if n == 0:
        res = starts
    else:
        res = _apply(op, computation, starts, [P.reshape(t, lead) for t in ts], treedef,
                     starts)
    return tree_unflatten(treedef, res)


def _unflatten_one(treedef: Any, value: Tensor) -> Any:
    """A single result in the operands' structure (a bare array or a 1-leaf pytree)."""
    return tree_unflatten(treedef, [value])


def cumlogsumexp(operand: Any, axis: int = 0, reverse: bool = False) -> Tensor:
    """Running log(sum(exp(x))) along `axis` (from the end when `reverse`), combined
    pairwise as max + log1p(exp(-|a - b|)), so it never overflows or underflows early;
    -inf entries contribute nothing."""
    x = to_tensor("cumlogsumexp", operand)
    check_kind("cumlogsumexp", x, "f")
    ax = axis_arg("cumlogsumexp", axis, x.shape)

    def logaddexp(a: Tensor, b: Tensor) -> Tensor:
        top = P.max_p.bind(a, b)
        gap = P.sub_p.bind(a, b)
        undefined = gap.isnan()   # equal infinities (or a NaN, which `top` carries)
        safe = P.select(undefined, _zero(gap), gap)
        rest = P.log1p_p.bind(P.exp_p.bind(P.neg_p.bind(P.abs_p.bind(safe))))
        return P.select(undefined, top, P.add_p.bind(top, rest))

    return associative_scan(logaddexp, x, reverse=bool(reverse), axis=ax)


def _zero(like: Tensor) -> Tensor:
    return P.broadcast_in_dim(Tensor(np.zeros((), like.dtype.np)), like.shape, ())
