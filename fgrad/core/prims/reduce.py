"""Reduction primitives: reduce_sum/max/min/prod over axes, argmax/argmin, cumsum.

Half-precision inputs accumulate in float32 inside the implementation and the kernels.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from fgrad.core.dtypes import DType, dtypes
from fgrad.core.errors import ArgumentError
from fgrad.core.ir import ShapedArray
from fgrad.core.primitive import Primitive
from fgrad.core.prims._util import fmt_shape, move_bdim


def _reduced_shape(op: str, x: ShapedArray, axes: tuple[int, ...]) -> tuple[int, ...]:
    if any(not 0 <= a < x.ndim for a in axes) or len(set(axes)) != len(axes):
        raise ArgumentError(f"{op}: axes {axes} are invalid for shape {fmt_shape(x.shape)}")
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def _accumulating(np_fn: Callable[..., Any]) -> Callable[..., Any]:
    def impl(x: np.ndarray, *, axes: tuple[int, ...]) -> np.ndarray:
        if x.dtype in (np.float16, dtypes.bfloat16.np):
            return np_fn(x.astype(np.float32), axis=axes).astype(x.dtype)
        with np.errstate(all="ignore"):
            return np.asarray(np_fn(x, axis=axes)).astype(x.dtype)
    return impl


def _keep_dims_shape(shape: Sequence[int], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _expand_back(y: Any, in_shape: Sequence[int], axes: tuple[int, ...]) -> Any:
    from fgrad.core.prims.movement import broadcast_in_dim
    kept = tuple(i for i in range(len(in_shape)) if i not in axes)
    return broadcast_in_dim(y, tuple(in_shape), kept)


def _batch_axes(args: list[Any], dims: list[Any], axes: tuple[int, ...]) -> tuple[Any, tuple]:
    x = move_bdim(args[0], dims[0], 0, args[0].shape[dims[0]])
    return x, tuple(a + 1 for a in axes)


def reduction(name: str, np_fn: Callable[..., Any], jvp: Callable[..., Any],
              linear: bool = False) -> Primitive:
    """Define a reduction; `jvp(x, y, x_dot, axes)` gets input, output and tangent."""
    p = Primitive(name, linear=linear)

    def abstract_eval(x: ShapedArray, *, axes: tuple[int, ...]) -> ShapedArray:
        if x.size == 0 and name in ("reduce_max", "reduce_min") and any(
                x.shape[a] == 0 for a in axes):
            raise ArgumentError(f"{name}: cannot reduce an empty axis of shape "
                                f"{fmt_shape(x.shape)} (no identity for max/min)")
        return ShapedArray(_reduced_shape(name, x, axes), x.dtype)

    def jvp_rule(primals: list[Any], tangents: list[Any], *, axes: tuple[int, ...]) -> Any:
        (x,), (x_dot,) = primals, tangents
        y = p.bind(x, axes=axes)
        return y, None if x_dot is None else jvp(x, y, x_dot, axes)

    def batch(args: list[Any], dims: list[Any], *, axes: tuple[int, ...]) -> Any:
        x, new_axes = _batch_axes(args, dims, axes)
        return p.bind(x, axes=new_axes), 0

    p.abstract_eval = abstract_eval
    p.impl = _accumulating(np_fn)
    p.jvp = jvp_rule
    p.batch = batch
    return p


def _max_min_jvp(x: Any, y: Any, x_dot: Any, axes: tuple[int, ...]) -> Any:
    """Share the tangent equally between tied extrema (as JAX does)."""
    hit = (x == _expand_back(y, x.shape, axes)).cast(x_dot.dtype)
    count = reduce_sum(hit, axes)
    return reduce_sum(x_dot * hit, axes) / count


def _prod_jvp(x: Any, y: Any, x_dot: Any, axes: tuple[int, ...]) -> Any:
    """d prod = sum_i x_dot_i * prod_{j != i} x_j, exact even when some x_j are zero."""
    from fgrad.core.prims.movement import reshape, transpose
    kept = tuple(i for i in range(x.ndim) if i not in axes)
    moved = transpose(x, kept + axes)
    moved_dot = transpose(x_dot, kept + axes)
    n = int(np.prod([x.shape[a] for a in axes]))
    flat = reshape(moved, tuple(x.shape[i] for i in kept) + (n,))
    flat_dot = reshape(moved_dot, flat.shape)
    out_shape = flat.shape[:-1]
    if n == 0:
        return reduce_sum(flat_dot, (len(out_shape),))
    others = _exclusive_products(flat)
    return reduce_sum(flat_dot * others, (len(out_shape),))


def _exclusive_products(flat: Any) -> Any:
    """For each i along the last axis, the product of all other entries."""
    last = flat.ndim - 1
    before = cumprod_exclusive(flat, last, reverse=False)
    after = cumprod_exclusive(flat, last, reverse=True)
    return before * after


def cumprod_exclusive(x: Any, axis: int, reverse: bool) -> Any:
    from fgrad.core.prims.movement import concatenate, slice_
    n = x.shape[axis]
    if n == 0:
        return x
    from fgrad.core.prims._util import zeros
    ones = zeros(tuple(1 if i == axis else d for i, d in enumerate(x.shape)), x.dtype) + 1
    inc = cumulative(x, axis, reverse, "cumprod")
    if reverse:
        start = tuple(1 if i == axis else 0 for i in range(x.ndim))
        shifted = slice_(inc, start, x.shape)
        return concatenate([shifted, ones], axis) if n > 1 else ones
    limit = tuple(n - 1 if i == axis else d for i, d in enumerate(x.shape))
    shifted = slice_(inc, (0,) * x.ndim, limit)
    return concatenate([ones, shifted], axis) if n > 1 else ones


reduce_sum_p = reduction("reduce_sum", np.sum,
                         lambda x, y, t, axes: reduce_sum(t, axes), linear=True)
reduce_sum_p.transpose = lambda ct, x, *, axes: [_expand_back(ct, x.aval.shape, axes)]
reduce_max_p = reduction("reduce_max", np.max, _max_min_jvp)
reduce_min_p = reduction("reduce_min", np.min, _max_min_jvp)
reduce_prod_p = reduction("reduce_prod", np.prod, _prod_jvp)


# ---------------------------------------------------------------------------- argmax/argmin

def _arg_reduction(name: str, np_fn: Callable[..., Any]) -> Primitive:
    p = Primitive(name)

    def abstract_eval(x: ShapedArray, *, axis: int, index_dtype: DType) -> ShapedArray:
        if not 0 <= axis < x.ndim or x.shape[axis] == 0:
            raise ArgumentError(f"{name}: axis {axis} is invalid or empty for shape "
                                f"{fmt_shape(x.shape)}")
        return ShapedArray(_reduced_shape(name, x, (axis,)), index_dtype)

    def impl(x: np.ndarray, *, axis: int, index_dtype: DType) -> np.ndarray:
        if x.dtype == dtypes.bfloat16.np:
            x = x.astype(np.float32)
        return np_fn(x, axis=axis).astype(index_dtype.np)

    p.abstract_eval = abstract_eval
    p.impl = impl
    p.jvp = lambda primals, tangents, **params: (p.bind(primals[0], **params), None)
    p.batch = lambda args, dims, *, axis, index_dtype: (p.bind(
        move_bdim(args[0], dims[0], 0, args[0].shape[dims[0]]), axis=axis + 1,
        index_dtype=index_dtype), 0)
    return p


argmax_p = _arg_reduction("argmax", np.argmax)
argmin_p = _arg_reduction("argmin", np.argmin)


# ---------------------------------------------------------------------------- cumulative

def _cumulative_prim(name: str, np_fn: Callable[..., Any], linear: bool) -> Primitive:
    p = Primitive(name, linear=linear)

    def abstract_eval(x: ShapedArray, *, axis: int, reverse: bool) -> ShapedArray:
        if not 0 <= axis < x.ndim:
            raise ArgumentError(f"{name}: axis {axis} is out of range for shape "
                                f"{fmt_shape(x.shape)}")
        return x

    def impl(x: np.ndarray, *, axis: int, reverse: bool) -> np.ndarray:
        src = np.flip(x, axis) if reverse else x
        wide = src.astype(np.float32) if src.dtype in (np.float16,
                                                       dtypes.bfloat16.np) else src
        with np.errstate(all="ignore"):
            out = np_fn(wide, axis=axis).astype(x.dtype)
        return np.flip(out, axis) if reverse else out

    p.abstract_eval = abstract_eval
    p.impl = impl
    p.batch = lambda args, dims, *, axis, reverse: (p.bind(
        move_bdim(args[0], dims[0], 0, args[0].shape[dims[0]]), axis=axis + 1,
        reverse=reverse), 0)
    return p


cumsum_p = _cumulative_prim("cumsum", np.cumsum, linear=True)
cumsum_p.jvp = lambda primals, tangents, *, axis, reverse: (
    cumulative(primals[0], axis, reverse, "cumsum"),
    None if tangents[0] is None else cumulative(tangents[0], axis, reverse, "cumsum"))
cumsum_p.transpose = lambda ct, x, *, axis, reverse: [
    cumulative(ct, axis, not reverse, "cumsum")]
cumprod_p = _cumulative_prim("cumprod", np.cumprod, linear=False)
cummax_p = _cumulative_prim("cummax", np.maximum.accumulate, linear=False)
cummin_p = _cumulative_prim("cummin", np.minimum.accumulate, linear=False)


def _cumprod_jvp(primals: list[Any], tangents: list[Any], *, axis: int, reverse: bool) -> Any:
    (x,), (t,) = primals, tangents
    y = cumulative(x, axis, reverse, "cumprod")
    if t is None:
        return y, None
    # d y_k = sum_{i<=k} t_i * prod_{j<=k, j!=i} x_j, written with a safe ratio-free form:
    # y_k * sum_{i<=k} t_i / x_i where x != 0; zeros are rare in practice, so fall back to
    # masking (the term for x_i == 0 uses the exclusive product).
    excl = cumprod_exclusive(x, axis, reverse)
    from fgrad.core.prims.elementwise import select
    safe_x = select(x == 0, x * 0 + 1, x)
    ratio_part = y * cumulative(t / safe_x * (x != 0).cast(t.dtype), axis, reverse, "cumsum")
    zero_part = _zero_terms(x, t, excl, axis, reverse)
    return y, ratio_part + zero_part


def _zero_terms(x: Any, t: Any, excl: Any, axis: int, reverse: bool) -> Any:
    """Contribution of tangents at zero entries: t_i * excl_i * prod_{i<j<=k} x_j."""
    from fgrad.core.prims.elementwise import select
    is_zero = (x == 0)
    after_first_zero = cumulative(is_zero.cast(t.dtype), axis, reverse, "cumsum")
    only_first = (after_first_zero == 1) & is_zero
    first_term = select(only_first, t * excl, t * 0)
    spread = cumulative(first_term, axis, reverse, "cumsum")
    safe = select(is_zero, x * 0 + 1, x)
    tail = cumulative(select(after_first_zero >= 1, safe, x * 0 + 1), axis, reverse, "cumprod")
    nonzero_after = (after_first_zero <= 1).cast(t.dtype)
    return spread * tail * nonzero_after


def _cumext_jvp(primals: list[Any], tangents: list[Any], *, axis: int, reverse: bool,
                kind: str) -> Any:
    (x,), (t,) = primals, tangents
    y = cumulative(x, axis, reverse, kind)
    if t is None:
        return y, None
    from fgrad.core.prims.indexing import take_along
    idx = _cum_arg_index(x, y, axis, reverse)
    return y, take_along(t, idx, axis)


def _cum_arg_index(x: Any, y: Any, axis: int, reverse: bool) -> Any:
    """Index of the element each running extremum came from (the latest one on ties)."""
    from fgrad.core.prims.elementwise import select
    from fgrad.core.prims.misc import iota
    pos = iota(dtypes.int32 if x.shape[axis] < 2**31 - 1 else dtypes.int64, x.shape, axis)
    marker = select(x == y, pos, pos * 0 + (-1 if not reverse else x.shape[axis]))
    return cumulative(marker, axis, reverse, "cummax" if not reverse else "cummin")


cumprod_p.jvp = _cumprod_jvp
cummax_p.jvp = lambda p, t, **kw: _cumext_jvp(p, t, kind="cummax", **kw)
cummin_p.jvp = lambda p, t, **kw: _cumext_jvp(p, t, kind="cummin", **kw)
CUMULATIVE = {"cumsum": cumsum_p, "cumprod": cumprod_p, "cummax": cummax_p,
              "cummin": cummin_p}


# ---------------------------------------------------------------------------- wrappers

def reduce_sum(x: Any, axes: Sequence[int]) -> Any:
    """Sum over `axes`."""
    axes = tuple(sorted(int(a) for a in axes))
    return x if not axes else reduce_sum_p.bind(x, axes=axes)


def reduce_max(x: Any, axes: Sequence[int]) -> Any:
    """Maximum over `axes`."""
    axes = tuple(sorted(int(a) for a in axes))
    return x if not axes else reduce_max_p.bind(x, axes=axes)


def reduce_min(x: Any, axes: Sequence[int]) -> Any:
    """Minimum over `axes`."""
    axes = tuple(sorted(int(a) for a in axes))
    return x if not axes else reduce_min_p.bind(x, axes=axes)


def reduce_prod(x: Any, axes: Sequence[int]) -> Any:
    """Product over `axes`."""
    axes = tuple(sorted(int(a) for a in axes))
    return x if not axes else reduce_prod_p.bind(x, axes=axes)


def cumulative(x: Any, axis: int, reverse: bool, kind: str) -> Any:
    """Running sum/prod/max/min along `axis` ('cumsum', 'cumprod', 'cummax', 'cummin')."""
    return CUMULATIVE[kind].bind(x, axis=int(axis), reverse=bool(reverse))
