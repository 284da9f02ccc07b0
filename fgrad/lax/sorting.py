"""`fgrad.lax.sort`, `sort_key_val` and `top_k`: JAX's signatures on fgrad's stable `sort`
and `top_k` primitives.

`sort` orders along `dimension` (NaN last, -0.0 and 0.0 equal, ties in their original
order). Several operands are ordered lexicographically by the first `num_keys` of them and
the rest follow the same permutation: one stable sort per key, from the last key to the
first, composes into the lexicographic order.
"""
from __future__ import annotations

from typing import Any

from fgrad.core import prims as P
from fgrad.core.dtypes import dtypes
from fgrad.core.errors import ArgumentError
from fgrad.core.prims._util import fmt_shape
from fgrad.core.tensor import Tensor
from fgrad.lax._args import as_int, axis_arg, check_kind, to_tensor

__all__ = ["sort", "sort_key_val", "top_k"]


def _to_last(x: Tensor, axis: int) -> tuple[Tensor, tuple[int, ...]]:
    """`x` with `axis` moved last, and the permutation that moves it back."""
    perm = tuple(i for i in range(x.ndim) if i != axis) + (axis,)
    back = tuple(perm.index(i) for i in range(x.ndim))
    return P.transpose(x, perm), back


def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1
         ) -> Any:
    """`operand` sorted along `dimension` (ascending, NaN last, always stable). A tuple or
    list of operands of one shape is sorted by its first `num_keys` entries (compared
    lexicographically) and returned as a tuple."""
    many = isinstance(operand, (tuple, list))
    items = list(operand) if many else [operand]
    if not items:
        raise ArgumentError("lax.sort: needs at least one operand")
    names = [f"operand[{i}]" if many else "operand" for i in range(len(items))]
    ts = [to_tensor("sort", x, name) for x, name in zip(items, names)]
    for t, name in zip(ts, names):
        check_kind("sort", t, "biuf", name)
        if t.shape != ts[0].shape:
            listed = ", ".join(fmt_shape(u.shape) for u in ts)
            raise ArgumentError(f"lax.sort: the operands must have the same shape, got {listed}")
    keys = as_int("sort", num_keys, "num_keys")
    if not 1 <= keys <= len(ts):
        raise ArgumentError(f"lax.sort: num_keys={keys} must be between 1 and the number of "
                            f"operands ({len(ts)})")
    if ts[0].ndim == 0:
        hint = ("; a list or tuple is a sequence of operands (as in JAX): pass np.array(...) "
                "to sort one array" if many else "; reshape to (1,) first")
        raise ArgumentError(f"lax.sort: the operands must have at least one axis, got shape "
                            f"(){hint}")
    axis = axis_arg("sort", dimension, ts[0].shape, "dimension", negative=True)
    moved = [_to_last(t, axis)[0] for t in ts]
    back = _to_last(ts[0], axis)[1]
    last = ts[0].ndim - 1
    if len(ts) == 1:
        out = [P.sort(moved[0])[0]]
    else:
        order: Tensor | None = None
        for k in reversed(range(keys)):
            key = moved[k] if order is None else P.take_along(moved[k], order, last)
            if key.dtype == dtypes.bool:
                key = P.convert(key, dtypes.uint8)
            step = P.sort(key)[1]
            order = step if order is None else P.take_along(order, step, last)
        out = [P.take_along(m, order, last) for m in moved]
    out = [P.transpose(o, back) for o in out]
    return tuple(out) if many else out[0]


def sort_key_val(keys: Any, values: Any, dimension: int = -1, is_stable: bool = True
                 ) -> tuple[Tensor, Tensor]:
    """(sorted keys, values in the keys' order) along `dimension`."""
    k, v = sort((keys, values), dimension, is_stable, 1)
    return k, v


def top_k(operand: Any, k: int, *, axis: int = -1) -> tuple[Tensor, Tensor]:
    """(values, indices) of the `k` largest entries along `axis` (default: the last),
    largest first; equal entries keep their original order and NaN counts as the largest, as
    in `Tensor.topk` (native selection on the llvm backend). Indices are int32."""
    x = to_tensor("top_k", operand)
    if x.ndim == 0:
        values, indices = P.top_k(x, k, True)   # the primitive's error names the fix
        return values, indices
    ax = axis_arg("top_k", axis, x.shape, negative=True)
    if ax == x.ndim - 1:
        values, indices = P.top_k(x, k, True)
        return values, indices
    moved, back = _to_last(x, ax)
    values, indices = P.top_k(moved, k, True)
    return P.transpose(values, back), P.transpose(indices, back)
