"""Math expansions: argmax/argmin, cumulative ops and sort written with native primitives.

In: fgrad values (tracers of a staging trace, see schedule/expand.py) and the equation's params.
Out: the primitive's outputs, computed only with elementwise, movement (broadcast_in_dim,
reshape, slice, rev, pad, iota) and reduction primitives, with the exact semantics of the
primitive's NumPy impl. Constants are broadcasts of Python scalars or iotas, so the staged
jaxpr has no constvars.

- argmax/argmin: the extremum m over the axis, then the smallest index where x == m (or x
  is NaN: NaN wins, as in NumPy), so ties give the first occurrence.
- cumsum/cumprod/cummax/cummin: a Hillis-Steele prefix scan, ceil(log2 n) passes
  y <- y op shift(y, 2^k), the shift padding with the op's identity.
- sort: a bitonic network over the last axis padded to a power of two. Each element carries
  its original position; the order is (is padding, key, position) lexicographically, with
  NaN the largest key, so the network's result is the stable sort of `_stable_argsort`.
- top_k: that sort (itself expanded where the backend has no native one), then the first k.
- conv_patches: pad, one strided slice per kernel tap, concatenated (conv_ops.windows);
  conv_patches_transpose: one pad per tap, summed, cropped.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fgrad.core import prims as P
from fgrad.core.dtypes import NARROW_FLOATS, DType, dtypes
from fgrad.core.tensor import Tensor

HALF = NARROW_FLOATS


def full(shape: tuple[int, ...], value: Any, dtype: DType) -> Any:
    """A broadcast scalar (its Literal stays inline in the staged jaxpr)."""
    return P.broadcast_in_dim(Tensor._wrap(np.asarray(value, dtype.np)), shape, ())


def _not(x: Any) -> Any:
    return P.not_p.bind(x)


def _and(x: Any, y: Any) -> Any:
    return P.and_p.bind(x, y)


def _or(x: Any, y: Any) -> Any:
    return P.or_p.bind(x, y)


def _eq(x: Any, y: Any) -> Any:
    return P.eq_p.bind(x, y)


def _lt(x: Any, y: Any) -> Any:
    return P.lt_p.bind(x, y)


# ---------------------------------------------------------------------------- argmax/argmin


def arg_extremum(kind: str) -> Callable[..., list[Any]]:
    """The expansion of argmax ('max') or argmin ('min')."""
    reduce = P.reduce_max if kind == "max" else P.reduce_min

    def expansion(x: Any, *, axis: int, index_dtype: DType) -> list[Any]:
        kept = tuple(i for i in range(x.ndim) if i != axis)
        m = P.broadcast_in_dim(reduce(x, (axis,)), x.shape, kept)
        hit = _eq(x, m)
        if x.dtype.is_float:
            hit = _or(hit, P.isnan_p.bind(x))
        n = x.shape[axis]
        index = P.select(hit, P.iota(index_dtype, x.shape, axis), full(x.shape, n, index_dtype))
        return [P.reduce_min(index, (axis,))]
    return expansion


# ---------------------------------------------------------------------------- cumulative

_COMBINE = {"cumsum": "add", "cumprod": "mul", "cummax": "max", "cummin": "min"}
_BOOL_COMBINE = {"add": "or", "mul": "and", "max": "or", "min": "and"}
_OPS = {"add": P.add_p, "mul": P.mul_p, "max": P.max_p, "min": P.min_p, "or": P.or_p,
        "and": P.and_p}


def scan_identity(op: str, dtype: DType) -> Any:
    """The identity of `op` in `dtype` (-0.0 for a float sum: -0.0 + -0.0 stays -0.0)."""
    if op in ("or", "and"):
        return op == "and"
    if op == "add":
        return -0.0 if dtype.is_float else 0
    if op == "mul":
        return 1
    if dtype.is_float:
        return -np.inf if op == "max" else np.inf
    info = np.iinfo(dtype.np)
    return int(info.min if op == "max" else info.max)


def _shifted(y: Any, axis: int, shift: int, fill: Any) -> Any:
    """y moved `shift` places up `axis`, the first `shift` entries `fill`."""
    config = [(0, 0, 0)] * y.ndim
    config[axis] = (shift, 0, 0)
    padded = P.pad(y, config, fill)
    return P.slice_(padded, (0,) * y.ndim, y.shape)


def prefix_scan(y: Any, axis: int, op: str) -> Any:
    """Inclusive scan of `op` along `axis` in ceil(log2 n) passes (Hillis-Steele).
    Each pass reads its input at two places, so the schedule stores it in a buffer; passes
    alternate between y's shape and (1, *shape), the last one in (1, *shape), so that no
    two consecutive passes (or the last one and its consumer) share a loop domain: the
    schedule would merge those into one kernel and recompute the stored pass inside it."""
    fill, prim, shape = scan_identity(op, y.dtype), _OPS[op], y.shape
    passes = max(shape[axis] - 1, 0).bit_length()
    for p in range(passes):
        lifted = (passes - p) % 2 == 1
        z = P.reshape(y, (1, *shape) if lifted else shape)
        y = prim.bind(z, _shifted(z, axis + lifted, 1 << p, fill))
    return P.reshape(y, shape)


def cumulative(kind: str) -> Callable[..., list[Any]]:
    """The expansion of cumsum/cumprod/cummax/cummin (half precision computes in float32,
    as the impl does)."""
    def expansion(x: Any, *, axis: int, reverse: bool) -> list[Any]:
        op = _COMBINE[kind]
        y = P.convert(x, dtypes.float32) if x.dtype in HALF else x
        if x.dtype == dtypes.bool:
            op = _BOOL_COMBINE[op]
        y = P.rev(y, (axis,)) if reverse else y
        y = prefix_scan(y, axis, op)
        y = P.rev(y, (axis,)) if reverse else y
        return [P.convert(y, x.dtype) if y.dtype != x.dtype else y]
    return expansion


# ---------------------------------------------------------------------------- sort


def _key_order(a: Any, b: Any, descending: bool) -> tuple[Any, Any]:
    """(a strictly before b by key, a ties b); NaN is the largest key, equal NaNs tie."""
    first, second = (b, a) if descending else (a, b)
    before, tie = _lt(first, second), _eq(a, b)
    if a.dtype.is_float:
        nan_a, nan_b = P.isnan_p.bind(a), P.isnan_p.bind(b)
        nan_first, nan_second = (nan_a, nan_b) if descending else (nan_b, nan_a)
        before = _or(before, _and(nan_first, _not(nan_second)))
        tie = _or(tie, _and(nan_a, nan_b))
    return before, tie


def _before(a: Any, pa: Any, b: Any, pb: Any, n: int, padded: bool,
            descending: bool) -> Any:
    """Whether element (a, position pa) sorts before (b, pb): padding (position >= n) last,
    then by key, then by position (stability)."""
    strict, tie = _key_order(a, b, descending)
    before = _or(strict, _and(tie, _lt(pa, pb)))
    if not padded:
        return before
    bound = full(pa.shape, n, dtypes.int32)
    pad_a, pad_b = _not(_lt(pa, bound)), _not(_lt(pb, bound))
    return P.select(_eq(pad_a, pad_b), before, pad_b)


def _bit_clear(index: Any, bit: int) -> Any:
    """Whether `bit` is 0 in the int32 `index`."""
    zero = full(index.shape, 0, dtypes.int32)
    return _eq(_and(index, full(index.shape, bit, dtypes.int32)), zero)


def _bitonic_stage(key: Any, pos: Any, n: int, k: int, j: int, descending: bool
                   ) -> tuple[Any, Any]:
    """One stage (block k, distance j) on rows of a power-of-two length holding n real
    elements: position i pairs with i ^ j (a rev of the axis of 2 in the view
    (..., size / 2j, 2, j)); the pair's lower element takes the earlier of the two when
    its k-block sorts upward ((i & k) == 0), else the later one. The stage reads its input
    at i and i ^ j, so the schedule stores it: one kernel per stage (consecutive stages
    have different views, so their kernels never merge)."""
    lead, size = key.shape[:-1], key.shape[-1]
    view = (*lead, size // (2 * j), 2, j)
    v, p = P.reshape(key, view), P.reshape(pos, view)
    v_partner, p_partner = P.rev(v, (len(view) - 2,)), P.rev(p, (len(view) - 2,))
    lower = _bit_clear(P.iota(dtypes.int32, view, len(lead) + 1), 1)
    upward = _bit_clear(P.iota(dtypes.int32, view, len(lead)), k // (2 * j))
    before = _before(v, p, v_partner, p_partner, n, size != n, descending)
    keep = _eq(before, _eq(lower, upward))
    return (P.reshape(P.select(keep, v, v_partner), key.shape),
            P.reshape(P.select(keep, p, p_partner), key.shape))


def bitonic_stages(size: int) -> list[tuple[int, int]]:
    """The (block k, distance j) stages of a bitonic network on `size` elements."""
    return [(1 << a, 1 << b) for a in range(1, size.bit_length())
            for b in range(a - 1, -1, -1)]


def bitonic_sort(x: Any, *, descending: bool) -> list[Any]:
    """The expansion of sort: [values, int32 indices] along the last axis."""
    n, last = x.shape[-1], x.ndim - 1
    if n <= 1:
        return [x, full(x.shape, 0, dtypes.int32)]
    size = 1 << (n - 1).bit_length()
    key = P.convert(x, dtypes.int32) if x.dtype == dtypes.bool else x
    config = [(0, 0, 0)] * x.ndim
    config[last] = (0, size - n, 0)
    key = P.pad(key, config, 0)
    pos = P.iota(dtypes.int32, key.shape, last)
    for k, j in bitonic_stages(size):
        key, pos = _bitonic_stage(key, pos, n, k, j, descending)
    limit = x.shape
    values = P.slice_(key, (0,) * x.ndim, limit)
    return [P.convert(values, x.dtype) if values.dtype != x.dtype else values,
            P.slice_(pos, (0,) * x.ndim, limit)]


def top_k_by_sort(x: Any, *, k: int, descending: bool) -> list[Any]:
    """The expansion of top_k: the first k entries of sort's values and indices."""
    values, indices = P.sort(x, descending)
    start, limit = (0,) * x.ndim, (*x.shape[:-1], k)
    return [P.slice_(values, start, limit), P.slice_(indices, start, limit)]


def patches_by_slices(x: Any, *, kernel: tuple[int, ...], stride: tuple[int, ...],
                      dilation: tuple[int, ...], padding: tuple[tuple[int, int], ...]
                      ) -> list[Any]:
    """conv_patches as pad, one strided slice per kernel tap and a concatenate."""
    from fgrad.core.methods.nn.conv_ops import pad_spatial, windows
    return [windows(pad_spatial(x, padding), kernel, stride, dilation, "conv2d")]


def col2im_by_pads(ct: Any, *, kernel: tuple[int, ...], stride: tuple[int, ...],
                   dilation: tuple[int, ...], padding: tuple[tuple[int, int], ...],
                   spatial: tuple[int, ...]) -> list[Any]:
    """conv_patches_transpose as pads with interior zeros, summed, then cropped."""
    from fgrad.core.prims.patches import col2im_by_pads as by_pads
    return [by_pads(ct, kernel, stride, dilation, padding, spatial)]
