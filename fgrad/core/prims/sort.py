"""The sort primitive: a stable sort along the last axis, returning values and permutation.

`sort(x, descending)` gives `[values, indices]`, both of `x.shape`; `indices` (int32) is the
permutation with `values = take_along(x, indices, -1)`. Equal elements keep their original
order in both directions, and NaN sorts as the largest value (last ascending, first
descending), as in PyTorch. The derivative gathers the tangent by the permutation.

`top_k(x, k, descending)` gives the first `k` entries of `sort(x, descending)`'s outputs
(shape `x.shape[:-1] + (k,)`), exactly: the same stable order, NaN and signed zeros. On
llvm it is a selection per row (llvm/kernels/selection.py); backends without native
library calls expand it to the sort followed by a slice (schedule/expand.py).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.errors import ArgumentError
from fgrad.core.ir import ShapedArray
from fgrad.core.primitive import Primitive
from fgrad.core.prims._util import fmt_shape, move_bdim

sort_p = Primitive("sort", multiple_results=True)


def _sort_abstract(x: ShapedArray, *, descending: bool) -> list[ShapedArray]:
    if x.ndim == 0:
        raise ArgumentError(f"sort: the operand must have at least one axis, got shape "
                            f"{fmt_shape(x.shape)}; reshape a 0-d Tensor to (1,) first")
    if x.shape[-1] >= 2**31:
        raise ArgumentError(f"sort: axis of length {x.shape[-1]} is too long for int32 indices")
    return [x, ShapedArray(x.shape, dtypes.int32)]


def _stable_argsort(x: np.ndarray, descending: bool) -> np.ndarray:
    """NumPy's stable argsort (NaN last); descending reverses a sort of the reversed row so
    that ties still keep their original order and NaN comes first."""
    if not descending:
        return np.argsort(x, axis=-1, kind="stable")
    n = x.shape[-1]
    ascending_of_reversed = np.argsort(x[..., ::-1], axis=-1, kind="stable")
    return (n - 1 - ascending_of_reversed)[..., ::-1]


def _sort_impl(x: np.ndarray, *, descending: bool) -> list[np.ndarray]:
    key = x.astype(np.float32) if x.dtype == dtypes.bfloat16.np else x
    idx = _stable_argsort(key, descending)
    return [np.take_along_axis(x, idx, axis=-1), idx.astype(np.int32)]


def _sort_jvp(primals: list[Any], tangents: list[Any], *,
              descending: bool) -> tuple[list[Any], list[Any]]:
    from fgrad.core.prims.indexing import take_along
    (x,), (x_dot,) = primals, tangents
    values, indices = sort(x, descending)
    values_dot = None if x_dot is None else take_along(x_dot, indices, x.ndim - 1)
    return [values, indices], [values_dot, None]


def _sort_batch(args: list[Any], dims: list[Any], *,
                descending: bool) -> tuple[list[Any], list[int]]:
    (x,), (bdim,) = args, dims
    x = move_bdim(x, bdim, 0, x.shape[bdim])
    return sort(x, descending), [0, 0]


sort_p.abstract_eval = _sort_abstract
sort_p.impl = _sort_impl
sort_p.jvp = _sort_jvp
sort_p.batch = _sort_batch


def sort(x: Any, descending: bool = False) -> list[Any]:
    """`[values, indices]`: `x` stably sorted along its last axis (NaN largest)."""
    return sort_p.bind(x, descending=bool(descending))


# ---------------------------------------------------------------------------- top_k

top_k_p = Primitive("top_k", multiple_results=True)


def _top_k_abstract(x: ShapedArray, *, k: int, descending: bool) -> list[ShapedArray]:
    if x.ndim == 0:
        raise ArgumentError(f"top_k: the operand must have at least one axis, got shape "
                            f"{fmt_shape(x.shape)}; reshape a 0-d Tensor to (1,) first")
    n = x.shape[-1]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ArgumentError(f"top_k: k must be an int, got {type(k).__name__} {k!r}")
    if not 0 <= k <= n:
        raise ArgumentError(f"top_k: k={k} is out of range for an operand of shape "
                            f"{fmt_shape(x.shape)}, whose last axis has {n} entries; pass "
                            f"0 <= k <= {n} (or move the axis you select along to the end)")
    if n >= 2**31:
        raise ArgumentError(f"top_k: axis of length {n} is too long for int32 indices")
    shape = (*x.shape[:-1], int(k))
    return [ShapedArray(shape, x.dtype), ShapedArray(shape, dtypes.int32)]


def _top_k_impl(x: np.ndarray, *, k: int, descending: bool) -> list[np.ndarray]:
    values, indices = _sort_impl(x, descending=descending)
    return [np.ascontiguousarray(values[..., :k]), np.ascontiguousarray(indices[..., :k])]


def _top_k_jvp(primals: list[Any], tangents: list[Any], *, k: int,
               descending: bool) -> tuple[list[Any], list[Any]]:
    from fgrad.core.prims.indexing import take_along
    (x,), (x_dot,) = primals, tangents
    values, indices = top_k(x, k, descending)
    values_dot = None if x_dot is None else take_along(x_dot, indices, x.ndim - 1)
    return [values, indices], [values_dot, None]


def _top_k_batch(args: list[Any], dims: list[Any], *, k: int,
                 descending: bool) -> tuple[list[Any], list[int]]:
    (x,), (bdim,) = args, dims
    x = move_bdim(x, bdim, 0, x.shape[bdim])
    return top_k(x, k, descending), [0, 0]


top_k_p.abstract_eval = _top_k_abstract
top_k_p.impl = _top_k_impl
top_k_p.jvp = _top_k_jvp
top_k_p.batch = _top_k_batch


def top_k(x: Any, k: int, descending: bool = True) -> list[Any]:
    """`[values, indices]`: the first `k` entries of `sort(x, descending)` along the last
    axis (the k largest when `descending`, else the k smallest; ties in original order)."""
    exact = isinstance(k, (int, np.integer)) and not isinstance(k, bool)
    return top_k_p.bind(x, k=int(k) if exact else k, descending=bool(descending))
