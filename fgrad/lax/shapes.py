"""Shape and creation operations of `jax.lax`: reshape, pad, slice, concatenate, transpose,
rev, broadcast_in_dim, expand_dims, squeeze, collapse, iota, full.

Sizes, axes and padding are static Python ints, checked here so that a mistake raises an
fgrad error naming the function, the argument and the operand's shape. As in JAX, axes of
the XLA-level ops (rev, broadcast_in_dim, concatenate, broadcasted_iota) are non-negative;
the convenience wrappers (expand_dims, squeeze, collapse, *_in_dim) also count from the end.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from fgrad.core import prims as P
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.errors import ArgumentError, ArgumentTypeError, IndexRangeError
from fgrad.core.prims._util import fmt_shape
from fgrad.core.tensor import Tensor, Tracer
from fgrad.lax._args import (as_int, axes_arg, axis_arg, dtype_name, int_tuple, is_weak,
                             same_dtype, shape_arg, to_dtype, to_tensor, weak_scalar)

__all__ = ["broadcast", "broadcast_in_dim", "broadcasted_iota", "collapse", "concatenate",
           "expand_dims", "full", "full_like", "index_in_dim", "iota", "pad", "reshape", "rev",
           "slice", "slice_in_dim", "squeeze", "transpose", "broadcast_to_rank", "tile",
           "stack", "unstack", "split"]

_builtin_slice = slice


def reshape(operand: Any, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None
            ) -> Tensor:
    """`operand` with shape `new_sizes` (same element count; no -1), read in the order of the
    axis permutation `dimensions` when given (a transpose first)."""
    x = to_tensor("reshape", operand)
    shape = shape_arg("reshape", new_sizes, "new_sizes")
    if dimensions is not None:
        x = transpose(x, dimensions)
    if math.prod(shape) != math.prod(x.shape):
        raise ArgumentError(f"lax.reshape: cannot reshape an operand of shape "
                            f"{fmt_shape(x.shape)} ({math.prod(x.shape)} elements) into "
                            f"new_sizes {fmt_shape(shape)} ({math.prod(shape)} elements)")
    return P.reshape(x, shape)


def _pad_config(x: Tensor, padding_config: Any) -> tuple[tuple[int, int, int], ...]:
    try:
        triples = [tuple(c) for c in padding_config]
    except TypeError:
        raise ArgumentTypeError(f"lax.pad: padding_config must be a sequence of (low, high, "
                                f"interior) triples, got {padding_config!r}") from None
    if len(triples) != x.ndim:
        raise ArgumentError(f"lax.pad: padding_config needs one (low, high, interior) triple per "
                            f"axis of the operand of shape {fmt_shape(x.shape)} ({x.ndim}), got "
                            f"{len(triples)}")
    config = []
    for axis, (n, c) in enumerate(zip(x.shape, triples)):
        if len(c) != 3:
            raise ArgumentError(f"lax.pad: padding_config entry {c} for axis {axis} must be a "
                                f"(low, high, interior) triple; write (low, high, 0) for no "
                                f"interior padding")
        lo, hi, interior = int_tuple("pad", c, "padding_config")
        if interior < 0:
            raise ArgumentError(f"lax.pad: interior padding must be >= 0, got {interior} for "
                                f"axis {axis} in {tuple(triples)}")
        if lo + hi + n + max(n - 1, 0) * interior < 0:
            raise ArgumentError(f"lax.pad: padding_config {c} leaves a negative size on axis "
                                f"{axis} of the operand of shape {fmt_shape(x.shape)}")
        config.append((lo, hi, interior))
    return tuple(config)


def pad(operand: Any, padding_value: Any, padding_config: Sequence[Sequence[int]]) -> Tensor:
    """`operand` padded by one (low, high, interior) triple per axis: `low`/`high` entries of
    `padding_value` before/after (negative values crop) and `interior` between elements.
    `padding_value` is a scalar of the operand's dtype (it may be traced)."""
    x = to_tensor("pad", operand)
    config = _pad_config(x, padding_config)
    if is_weak(padding_value):
        value = weak_scalar("pad", padding_value, x.dtype, "padding_value")
    else:
        value = to_tensor("pad", padding_value, "padding_value")
        if value.ndim:
            raise ArgumentError(f"lax.pad: padding_value must be a scalar, got shape "
                                f"{fmt_shape(value.shape)}")
        if value.dtype != x.dtype:
            raise ArgumentTypeError(f"lax.pad: operand and padding_value must have the same "
                                    f"dtype, got {dtype_name(x.dtype)} and "
                                    f"{dtype_name(value.dtype)}")
    if not isinstance(value, Tracer):
        return P.pad(x, config, value.item())
    padded = P.pad(x, config, 0)
    inside = P.pad(P.broadcast_in_dim(Tensor(True), x.shape, ()), config, False)
    return P.select(inside, padded, P.broadcast_in_dim(value, padded.shape, ()))


def slice(operand: Any, start_indices: Sequence[int], limit_indices: Sequence[int],  # noqa: A001
          strides: Sequence[int] | None = None) -> Tensor:
    """The box [start, limit) of `operand`, every `strides`-th element (static ints)."""
    x = to_tensor("slice", operand)
    start = int_tuple("slice", start_indices, "start_indices")
    limit = int_tuple("slice", limit_indices, "limit_indices")
    step = (1,) * x.ndim if strides is None else int_tuple("slice", strides, "strides")
    if not len(start) == len(limit) == len(step) == x.ndim:
        raise ArgumentError(f"lax.slice: an operand of shape {fmt_shape(x.shape)} needs "
                            f"{x.ndim} start indices, limit indices and strides, got "
                            f"{len(start)}, {len(limit)} and {len(step)}")
    for axis, (s, e, st, n) in enumerate(zip(start, limit, step, x.shape)):
        if not 0 <= s <= e <= n or st < 1:
            raise ArgumentError(f"lax.slice: axis {axis} of the operand of shape "
                                f"{fmt_shape(x.shape)} needs 0 <= start <= limit <= {n} and "
                                f"stride >= 1, got start {s}, limit {e}, stride {st} (lax "
                                f"does not wrap negative indices or clamp)")
    return P.slice_(x, start, limit, step)


def slice_in_dim(operand: Any, start_index: int | None, limit_index: int | None,
                 stride: int = 1, axis: int = 0) -> Tensor:
    """`slice` along one axis: None means the start/end; negative indices count from the
    end (once; no clamping)."""
    x = to_tensor("slice_in_dim", operand)
    ax = axis_arg("slice_in_dim", axis, x.shape, negative=True)
    n = x.shape[ax]
    lo = 0 if start_index is None else as_int("slice_in_dim", start_index, "start_index")
    hi = n if limit_index is None else as_int("slice_in_dim", limit_index, "limit_index")
    lo, hi = lo + n if lo < 0 else lo, hi + n if hi < 0 else hi
    start, limit, strides = [0] * x.ndim, list(x.shape), [1] * x.ndim
    start[ax], limit[ax], strides[ax] = lo, hi, as_int("slice_in_dim", stride, "stride")
    return slice(x, start, limit, strides)


def index_in_dim(operand: Any, index: int, axis: int = 0, keepdims: bool = True) -> Tensor:
    """Entry `index` (a static int, negative from the end) along `axis`; `keepdims=False`
    drops the axis. See lax.dynamic_index_in_dim for a traced index."""
    x = to_tensor("index_in_dim", operand)
    ax = axis_arg("index_in_dim", axis, x.shape, negative=True)
    i, n = as_int("index_in_dim", index, "index"), x.shape[ax]
    j = i + n if i < 0 else i
    if not 0 <= j < n:
        raise IndexRangeError(f"lax.index_in_dim: index {i} is out of bounds for axis {ax} "
                              f"with size {n} (operand shape {fmt_shape(x.shape)})")
    out = slice_in_dim(x, j, j + 1, 1, ax)
    return out if keepdims else P.reshape(out, x.shape[:ax] + x.shape[ax + 1:])


def concatenate(operands: Sequence[Any], dimension: int) -> Tensor:
    """Join operands of one dtype and rank along `dimension` (the other axes must match)."""
    items = list(operands)
    if not items:
        raise ArgumentError("lax.concatenate: needs at least one operand")
    names = tuple(f"operands[{i}]" for i in range(len(items)))
    ts = same_dtype("concatenate", items, names)
    first = ts[0]
    d = axis_arg("concatenate", dimension, first.shape, "dimension")
    for t, name in zip(ts, names):
        if t.ndim != first.ndim or any(a != b for i, (a, b) in
                                       enumerate(zip(t.shape, first.shape)) if i != d):
            listed = ", ".join(fmt_shape(u.shape) for u in ts)
            raise ArgumentError(f"lax.concatenate: shapes {listed} must match outside "
                                f"dimension {d} ({name} differs)")
    return P.concatenate(ts, d)


def transpose(operand: Any, permutation: Sequence[int]) -> Tensor:
    """`operand` with its axes in the order `permutation`."""
    x = to_tensor("transpose", operand)
    perm = int_tuple("transpose", permutation, "permutation")
    if sorted(perm) != list(range(x.ndim)):
        raise ArgumentError(f"lax.transpose: permutation {perm} is not a permutation of the "
                            f"{x.ndim} axes of the operand of shape {fmt_shape(x.shape)}")
    return P.transpose(x, perm)


def rev(operand: Any, dimensions: Sequence[int]) -> Tensor:
    """`operand` reversed along each of `dimensions`."""
    x = to_tensor("rev", operand)
    return P.rev(x, axes_arg("rev", dimensions, x.ndim, x.shape, "dimensions"))


def broadcast_in_dim(operand: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]
                     ) -> Tensor:
    """`operand` broadcast to `shape`; its axis i becomes axis broadcast_dimensions[i]
    (strictly increasing), whose size it must equal unless it is 1."""
    x = to_tensor("broadcast_in_dim", operand)
    out = shape_arg("broadcast_in_dim", shape)
    dims = int_tuple("broadcast_in_dim", broadcast_dimensions, "broadcast_dimensions")
    ok = len(dims) == x.ndim and all(0 <= d < len(out) for d in dims) and all(
        a < b for a, b in zip(dims, dims[1:])) and all(
        n in (1, out[d]) for n, d in zip(x.shape, dims))
    if not ok:
        raise ArgumentError(f"lax.broadcast_in_dim: cannot broadcast an operand of shape "
                            f"{fmt_shape(x.shape)} to {fmt_shape(out)} with "
                            f"broadcast_dimensions {dims}: give one strictly increasing "
                            f"output axis per operand axis, of equal size or size 1 in the "
                            f"operand")
    return P.broadcast_in_dim(x, out, dims)


def broadcast(operand: Any, sizes: Sequence[int]) -> Tensor:
    """`operand` with new leading axes of `sizes`."""
    x = to_tensor("broadcast", operand)
    lead = shape_arg("broadcast", sizes, "sizes")
    return P.broadcast_in_dim(x, lead + x.shape, tuple(range(len(lead), len(lead) + x.ndim)))


def expand_dims(array: Any, dimensions: Sequence[int]) -> Tensor:
    """`array` with size-1 axes inserted at `dimensions` (axes of the result)."""
    x = to_tensor("expand_dims", array)
    n = x.ndim + len(int_tuple("expand_dims", dimensions, "dimensions"))
    dims = axes_arg("expand_dims", dimensions, n, x.shape, f"dimensions (axes of the {n}-d "
                    f"result)", negative=True)
    shape = list(x.shape)
    for d in sorted(dims):
        shape.insert(d, 1)
    return P.reshape(x, shape)


def squeeze(array: Any, dimensions: Sequence[int]) -> Tensor:
    """`array` without the size-1 axes `dimensions` (negative count from the end)."""
    x = to_tensor("squeeze", array)
    dims = axes_arg("squeeze", dimensions, x.ndim, x.shape, "dimensions", negative=True)
    for d in dims:
        if x.shape[d] != 1:
            raise ArgumentError(f"lax.squeeze: axis {d} of the operand of shape "
                                f"{fmt_shape(x.shape)} has size {x.shape[d]}, not 1")
    return P.reshape(x, tuple(n for i, n in enumerate(x.shape) if i not in dims))


def collapse(operand: Any, start_dimension: int, stop_dimension: int | None = None) -> Tensor:
    """`operand` with axes [start_dimension, stop_dimension) merged into one (Python slice
    rules for the bounds)."""
    x = to_tensor("collapse", operand)
    start = as_int("collapse", start_dimension, "start_dimension")
    stop = None if stop_dimension is None else as_int("collapse", stop_dimension,
                                                      "stop_dimension")
    lo, hi, _ = _builtin_slice(start, stop).indices(x.ndim)
    if hi < lo:
        raise ArgumentError(f"lax.collapse: empty axis range [{start_dimension}:"
                            f"{stop_dimension}] for an operand of shape {fmt_shape(x.shape)}")
    return P.reshape(x, x.shape[:lo] + (math.prod(x.shape[lo:hi]),) + x.shape[hi:])


def broadcast_to_rank(x: Any, rank: int) -> Tensor:
    """`x` with leading size-1 axes up to `rank` axes (unchanged if it has that many)."""
    t = to_tensor("broadcast_to_rank", x, "x")
    r = as_int("broadcast_to_rank", rank, "rank")
    return P.reshape(t, (1,) * max(r - t.ndim, 0) + t.shape)


def tile(operand: Any, reps: Sequence[int]) -> Tensor:
    """`operand` repeated `reps[i]` times along axis i (one rep per axis)."""
    x = to_tensor("tile", operand)
    r = shape_arg("tile", reps, "reps")
    if len(r) != x.ndim:
        raise ArgumentError(f"lax.tile: reps {r} must have one entry per axis of the operand "
                            f"of shape {fmt_shape(x.shape)}")
    inter = tuple(d for pair in zip(r, x.shape) for d in pair)
    wide = P.broadcast_in_dim(x, inter, tuple(range(1, 2 * x.ndim, 2)))
    return P.reshape(wide, tuple(a * b for a, b in zip(r, x.shape)))


def stack(operands: Sequence[Any], axis: int = 0) -> Tensor:
    """Operands of one shape and dtype joined along a new `axis` (negative counts from the
    end of the result)."""
    items = list(operands)
    if not items:
        raise ArgumentError("lax.stack: needs at least one operand")
    ts = same_dtype("stack", items, tuple(f"operands[{i}]" for i in range(len(items))))
    ax = axis_arg("stack", axis, ts[0].shape + (1,), negative=True)
    if any(t.shape != ts[0].shape for t in ts):
        raise ArgumentError(f"lax.stack: all operands must have one shape, got "
                            f"{', '.join(fmt_shape(t.shape) for t in ts)}")
    shape = ts[0].shape[:ax] + (1,) + ts[0].shape[ax:]
    return P.concatenate([P.reshape(t, shape) for t in ts], ax)


def unstack(x: Any, axis: int = 0) -> tuple[Tensor, ...]:
    """The slices of `x` along `axis` (negative counts from the end), as a tuple."""
    t = to_tensor("unstack", x, "x")
    ax = axis_arg("unstack", axis, t.shape, negative=True)
    return tuple(index_in_dim(t, i, ax, keepdims=False) for i in range(t.shape[ax]))


def split(operand: Any, sizes: Sequence[int], axis: int = 0) -> list[Tensor]:
    """`operand` cut along `axis` into consecutive pieces of `sizes` (which must add up to
    the axis size)."""
    x = to_tensor("split", operand)
    ax = axis_arg("split", axis, x.shape, negative=True)
    parts = shape_arg("split", sizes, "sizes")
    if sum(parts) != x.shape[ax]:
        raise ArgumentError(f"lax.split: sizes {parts} add up to {sum(parts)}, but axis {ax} "
                            f"of the operand of shape {fmt_shape(x.shape)} has size "
                            f"{x.shape[ax]}")
    out, start = [], 0
    for n in parts:
        out.append(slice_in_dim(x, start, start + n, 1, ax))
        start += n
    return out


# ---------------------------------------------------------------------------- creation

def _numeric_dtype(op: str, dtype: Any) -> DType:
    d = to_dtype(op, dtype)
    if d == dtypes.bool:
        raise ArgumentTypeError(f"lax.{op}: dtype must be an integer or float dtype, got bool")
    return d


def iota(dtype: Any, size: int) -> Tensor:
    """[0, 1, ..., size - 1] as a 1-d array of `dtype`."""
    n = shape_arg("iota", (as_int("iota", size, "size"),), "size")
    return P.iota(_numeric_dtype("iota", dtype), n, 0)


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int) -> Tensor:
    """An array of `shape` counting 0, 1, ... along `dimension`."""
    dims = shape_arg("broadcasted_iota", shape)
    d = axis_arg("broadcasted_iota", dimension, dims, "dimension")
    return P.iota(_numeric_dtype("broadcasted_iota", dtype), dims, d)


def _fill(op: str, fill_value: Any, dtype: DType | None) -> Tensor:
    if is_weak(fill_value) and dtype is not None:
        with np.errstate(all="ignore"):
            return Tensor(np.array(fill_value).astype(dtype.np))
    value = to_tensor(op, fill_value, "fill_value")
    if value.ndim:
        raise ArgumentError(f"lax.{op}: fill_value must be a scalar, got shape "
                            f"{fmt_shape(value.shape)}")
    return value if dtype is None else P.convert(value, dtype)


def full(shape: Sequence[int], fill_value: Any, dtype: Any = None) -> Tensor:
    """An array of `shape` filled with the scalar `fill_value`, converted to `dtype` when
    given (else a Python int gives int32, a float float32)."""
    dims = shape_arg("full", shape)
    value = _fill("full", fill_value, None if dtype is None else to_dtype("full", dtype))
    return P.broadcast_in_dim(value, dims, ())


def full_like(x: Any, fill_value: Any, dtype: Any = None, shape: Sequence[int] | None = None
              ) -> Tensor:
    """An array like `x` (its shape and dtype unless `shape`/`dtype` are given) filled with
    `fill_value`."""
    like = x if isinstance(x, Tensor) else to_tensor("full_like", x, "x")
    d = like.dtype if dtype is None else to_dtype("full_like", dtype)
    dims = like.shape if shape is None else shape_arg("full_like", shape)
    return P.broadcast_in_dim(_fill("full_like", fill_value, d), dims, ())
