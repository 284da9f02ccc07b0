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
from fgrad.core.tensor import Tensor
from fgrad.lax._args import (axes_arg, axis_arg, check_kind, dtype_name, int_tuple,
                             to_dtype, to_tensor)

__all__ = ["argmax", "argmin", "batch_matmul", "cummax", "cummin", "cumprod", "cumsum", "dot",
           "dot_general", "reduce_and", "reduce_max", "reduce_min", "reduce_or", "reduce_prod",
           "reduce_sum", "reduce_xor"]


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
