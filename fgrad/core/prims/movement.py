"""Movement primitives: reshape, broadcast_in_dim, transpose, pad, slice, rev, concatenate.

All are linear, so each carries a transpose rule; the jit backends turn them into index
arithmetic instead of copies.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fgrad.core.errors import ArgumentError
from fgrad.core.ir import ShapedArray
from fgrad.core.primitive import Primitive
from fgrad.core.prims._util import (batch_size, fmt_shape, instantiate, is_undefined,
                                     move_bdim)


def _linear_jvp(prim: Primitive) -> Any:
    def rule(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[Any, Any]:
        out = prim.bind(*primals, **params)
        if all(t is None for t in tangents):
            return out, None
        return out, prim.bind(*[instantiate(t, p.aval)
                                for t, p in zip(tangents, primals, strict=True)], **params)
    return rule


# ---------------------------------------------------------------------------- reshape

reshape_p = Primitive("reshape", linear=True)


def _reshape_abstract(x: ShapedArray, *, new_shape: tuple[int, ...]) -> ShapedArray:
    if any(d < 0 for d in new_shape) or int(np.prod(new_shape)) != x.size:
        raise ArgumentError(f"reshape: cannot reshape {fmt_shape(x.shape)} ({x.size} elements) "
                            f"into {fmt_shape(new_shape)}")
    return ShapedArray(tuple(new_shape), x.dtype)


def _reshape_batch(args: list[Any], dims: list[Any], *, new_shape: tuple[int, ...]) -> Any:
    x = move_bdim(args[0], dims[0], 0, args[0].shape[dims[0]])
    return reshape(x, (x.shape[0],) + tuple(new_shape)), 0


reshape_p.abstract_eval = _reshape_abstract
reshape_p.impl = lambda x, *, new_shape: x.reshape(new_shape)
reshape_p.jvp = _linear_jvp(reshape_p)
reshape_p.transpose = lambda ct, x, *, new_shape: [reshape(ct, x.aval.shape)]
reshape_p.batch = _reshape_batch


# ---------------------------------------------------------------------------- broadcast

broadcast_p = Primitive("broadcast_in_dim", linear=True)


def _broadcast_abstract(x: ShapedArray, *, shape: tuple[int, ...],
                        broadcast_dimensions: tuple[int, ...]) -> ShapedArray:
    ok = len(broadcast_dimensions) == x.ndim and all(
        0 <= d < len(shape) and x.shape[i] in (1, shape[d])
        for i, d in enumerate(broadcast_dimensions))
    if not ok or list(broadcast_dimensions) != sorted(set(broadcast_dimensions)):
        raise ArgumentError(f"cannot broadcast shape {fmt_shape(x.shape)} to "
                            f"{fmt_shape(shape)} (dims {broadcast_dimensions})")
    return ShapedArray(tuple(shape), x.dtype)


def _broadcast_impl(x: np.ndarray, *, shape: tuple[int, ...],
                    broadcast_dimensions: tuple[int, ...]) -> np.ndarray:
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded), shape)


def _broadcast_transpose(ct: Any, x: Any, *, shape: tuple[int, ...],
                         broadcast_dimensions: tuple[int, ...]) -> list[Any]:
    in_shape = x.aval.shape
    new_axes = tuple(d for d in range(len(shape)) if d not in broadcast_dimensions)
    stretched = tuple(d for i, d in enumerate(broadcast_dimensions)
                      if in_shape[i] == 1 and shape[d] != 1)
    from fgrad.core.prims.reduce import reduce_sum
    summed = reduce_sum(ct, tuple(sorted(new_axes + stretched))) if new_axes + stretched else ct
    return [reshape(summed, in_shape)]


def _broadcast_batch(args: list[Any], dims: list[Any], *, shape: tuple[int, ...],
                     broadcast_dimensions: tuple[int, ...]) -> Any:
    x = move_bdim(args[0], dims[0], 0, args[0].shape[dims[0]])
    new_dims = (0,) + tuple(d + 1 for d in broadcast_dimensions)
    return broadcast_in_dim(x, (x.shape[0],) + tuple(shape), new_dims), 0


broadcast_p.abstract_eval = _broadcast_abstract
broadcast_p.impl = _broadcast_impl
broadcast_p.jvp = _linear_jvp(broadcast_p)
broadcast_p.transpose = _broadcast_transpose
broadcast_p.batch = _broadcast_batch


# ---------------------------------------------------------------------------- transpose

transpose_p = Primitive("transpose", linear=True)


def _transpose_abstract(x: ShapedArray, *, permutation: tuple[int, ...]) -> ShapedArray:
    if sorted(permutation) != list(range(x.ndim)):
        raise ArgumentError(f"permute: {permutation} is not a permutation of the "
                            f"{x.ndim} axes of {fmt_shape(x.shape)}")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype)


def _transpose_batch(args: list[Any], dims: list[Any], *, permutation: tuple[int, ...]) -> Any:
    x = move_bdim(args[0], dims[0], 0, args[0].shape[dims[0]])
    return transpose(x, (0,) + tuple(p + 1 for p in permutation)), 0


transpose_p.abstract_eval = _transpose_abstract
transpose_p.impl = lambda x, *, permutation: np.transpose(x, permutation)
transpose_p.jvp = _linear_jvp(transpose_p)
transpose_p.transpose = lambda ct, x, *, permutation: [
    transpose(ct, tuple(int(i) for i in np.argsort(permutation)))]
transpose_p.batch = _transpose_batch


# ---------------------------------------------------------------------------- pad

pad_p = Primitive("pad", linear=True)
PadConfig = tuple[tuple[int, int, int], ...]


def _pad_abstract(x: ShapedArray, *, config: PadConfig, value: Any) -> ShapedArray:
    if len(config) != x.ndim:
        raise ArgumentError(f"pad: {len(config)} (lo, hi, interior) triples for a {x.ndim}-d "
                            f"operand of shape {fmt_shape(x.shape)}")
    shape = []
    for n, (lo, hi, interior) in zip(x.shape, config, strict=True):
        size = lo + hi + n + max(n - 1, 0) * interior
        if interior < 0 or size < 0:
            raise ArgumentError(f"pad: config {config} is invalid for shape {fmt_shape(x.shape)}")
        shape.append(size)
    return ShapedArray(tuple(shape), x.dtype)


def _pad_impl(x: np.ndarray, *, config: PadConfig, value: Any) -> np.ndarray:
    grown = []
    for n, (lo, hi, interior) in zip(x.shape, config, strict=True):
        grown.append(max(lo, 0) + max(hi, 0) + n + max(n - 1, 0) * interior)
    out = np.full(grown, value, dtype=x.dtype)
    where = tuple(slice(max(lo, 0), max(lo, 0) + max(n - 1, 0) * (i + 1) + min(n, 1), i + 1)
                  for n, (lo, hi, i) in zip(x.shape, config, strict=True))
    out[where] = x
    crop = tuple(slice(-min(lo, 0), g + min(hi, 0)) for g, (lo, hi, _) in
                 zip(grown, config, strict=True))
    return out[crop]


def _pad_transpose(ct: Any, x: Any, *, config: PadConfig, value: Any) -> list[Any]:
    unpadded = pad(ct, tuple((-lo, -hi, 0) for lo, hi, _ in config), 0)
    shape = unpadded.shape
    strides = tuple(i + 1 for _, _, i in config)
    return [slice_(unpadded, (0,) * len(shape), shape, strides)]


def _pad_batch(args: list[Any], dims: list[Any], *, config: PadConfig, value: Any) -> Any:
    x = move_bdim(args[0], dims[0], 0, args[0].shape[dims[0]])
    return pad(x, ((0, 0, 0),) + tuple(config), value), 0


pad_p.abstract_eval = _pad_abstract
pad_p.impl = _pad_impl
pad_p.jvp = lambda primals, tangents, *, config, value: (
    pad(primals[0], config, value),
    None if tangents[0] is None else pad(tangents[0], config, 0))
pad_p.transpose = _pad_transpose
pad_p.batch = _pad_batch


# ---------------------------------------------------------------------------- slice

slice_p = Primitive("slice", linear=True)


def _slice_abstract(x: ShapedArray, *, start: tuple[int, ...], limit: tuple[int, ...],
                    strides: tuple[int, ...]) -> ShapedArray:
    if not len(start) == len(limit) == len(strides) == x.ndim or any(
            not 0 <= s <= e <= n or st < 1
            for s, e, n, st in zip(start, limit, x.shape, strides, strict=True)):
        raise ArgumentError(f"slice: start {start}, limit {limit}, strides {strides} do not fit "
                            f"shape {fmt_shape(x.shape)}")
    shape = tuple(-(-(e - s) // st) for s, e, st in zip(start, limit, strides, strict=True))
    return ShapedArray(shape, x.dtype)


def _slice_transpose(ct: Any, x: Any, *, start: tuple[int, ...], limit: tuple[int, ...],
                     strides: tuple[int, ...]) -> list[Any]:
    config = []
    for s, n, st, m in zip(start, x.aval.shape, strides, ct.shape, strict=True):
        used = s + (m - 1) * st + 1 if m else s
        config.append((s, n - used, st - 1) if m else (s, n - s, 0))
    return [pad(ct, tuple(config), 0)]


def _slice_batch(args: list[Any], dims: list[Any], **params: Any) -> Any:
    x = move_bdim(args[0], dims[0], 0, args[0].shape[dims[0]])
    return slice_(x, (0,) + params["start"], (x.shape[0],) + params["limit"],
                  (1,) + params["strides"]), 0


slice_p.abstract_eval = _slice_abstract
slice_p.impl = lambda x, *, start, limit, strides: x[tuple(
    slice(s, e, st) for s, e, st in zip(start, limit, strides, strict=True))]
slice_p.jvp = _linear_jvp(slice_p)
slice_p.transpose = _slice_transpose
slice_p.batch = _slice_batch


# ---------------------------------------------------------------------------- rev

rev_p = Primitive("rev", linear=True)
rev_p.abstract_eval = lambda x, *, dimensions: x
rev_p.impl = lambda x, *, dimensions: np.flip(x, dimensions) if dimensions else x
rev_p.jvp = _linear_jvp(rev_p)
rev_p.transpose = lambda ct, x, *, dimensions: [rev(ct, dimensions)]
rev_p.batch = lambda args, dims, *, dimensions: (
    rev(args[0], tuple(d + (d >= dims[0]) for d in dimensions)), dims[0])


# ---------------------------------------------------------------------------- concatenate

concatenate_p = Primitive("concatenate", linear=True)


def _concat_abstract(*xs: ShapedArray, dimension: int) -> ShapedArray:
    first = xs[0]
    for x in xs[1:]:
        if x.dtype != first.dtype or x.ndim != first.ndim or any(
                a != b for i, (a, b) in enumerate(zip(x.shape, first.shape)) if i != dimension):
            raise ArgumentError(f"cat: shapes {', '.join(fmt_shape(y.shape) for y in xs)} "
                                f"(dtypes {', '.join(y.dtype.name for y in xs)}) do not match "
                                f"outside dimension {dimension}")
    shape = list(first.shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(tuple(shape), first.dtype)


def _concat_transpose(ct: Any, *xs: Any, dimension: int) -> list[Any]:
    outs, offset = [], 0
    for x in xs:
        n = x.aval.shape[dimension]
        if is_undefined(x):
            start = tuple(offset if i == dimension else 0 for i in range(ct.ndim))
            limit = tuple(offset + n if i == dimension else d for i, d in enumerate(ct.shape))
            outs.append(slice_(ct, start, limit, (1,) * ct.ndim))
        else:
            outs.append(None)
        offset += n
    return outs


def _concat_batch(args: list[Any], dims: list[Any], *, dimension: int) -> Any:
    size = batch_size(args, dims)
    moved = [move_bdim(x, d, 0, size) for x, d in zip(args, dims, strict=True)]
    return concatenate(moved, dimension + 1), 0


concatenate_p.abstract_eval = _concat_abstract
concatenate_p.impl = lambda *xs, dimension: np.concatenate(xs, axis=dimension)
concatenate_p.jvp = _linear_jvp(concatenate_p)
concatenate_p.transpose = _concat_transpose
concatenate_p.batch = _concat_batch


# ---------------------------------------------------------------------------- wrappers

def reshape(x: Any, new_shape: Sequence[int]) -> Any:
    """Reshape `x` (a no-op when the shape is unchanged)."""
    new_shape = tuple(int(d) for d in new_shape)
    return x if x.shape == new_shape else reshape_p.bind(x, new_shape=new_shape)


def broadcast_in_dim(x: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Any:
    """Broadcast `x` to `shape`; operand axis i becomes output axis broadcast_dimensions[i]."""
    shape, dims = tuple(int(d) for d in shape), tuple(broadcast_dimensions)
    if x.shape == shape and dims == tuple(range(len(shape))):
        return x
    return broadcast_p.bind(x, shape=shape, broadcast_dimensions=dims)


def transpose(x: Any, permutation: Sequence[int]) -> Any:
    """Permute the axes of `x`."""
    perm = tuple(int(p) for p in permutation)
    return x if perm == tuple(range(x.ndim)) else transpose_p.bind(x, permutation=perm)


def pad(x: Any, config: Sequence[Sequence[int]], value: Any = 0) -> Any:
    """Pad with (lo, hi, interior) per axis; negative lo/hi crop."""
    cfg = tuple((int(c[0]), int(c[1]), int(c[2]) if len(c) > 2 else 0) for c in config)
    if all(c == (0, 0, 0) for c in cfg):
        return x
    return pad_p.bind(x, config=cfg, value=value)


def slice_(x: Any, start: Sequence[int], limit: Sequence[int],
           strides: Sequence[int] | None = None) -> Any:
    """The strided box [start, limit) of `x`."""
    start, limit = tuple(int(s) for s in start), tuple(int(e) for e in limit)
    strides = tuple(int(s) for s in strides) if strides else (1,) * len(start)
    if start == (0,) * x.ndim and limit == tuple(x.shape) and strides == (1,) * x.ndim:
        return x
    return slice_p.bind(x, start=start, limit=limit, strides=strides)


def rev(x: Any, dimensions: Sequence[int]) -> Any:
    """Reverse `x` along `dimensions`."""
    dims = tuple(sorted(int(d) for d in dimensions))
    return x if not dims else rev_p.bind(x, dimensions=dims)


def concatenate(xs: Sequence[Any], dimension: int) -> Any:
    """Join Tensors of one dtype along `dimension`."""
    return xs[0] if len(xs) == 1 else concatenate_p.bind(*xs, dimension=int(dimension))
