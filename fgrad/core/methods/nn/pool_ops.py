"""Pooling over the trailing spatial axes: avg_pool2d, max_pool2d (with indices), max_unpool2d.

Windows come from `conv_ops.windows` (one strided slice per kernel tap, stacked; averages add
the slices instead, `conv_ops.window_sums`); an int kernel_size means 2-d, a tuple of length
n pools the last n axes. ceil_mode adds high-side padding so the
last partial window is kept when it starts inside the input or its low padding (PyTorch's
rule); that extra padding never counts toward an average.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence, cast

import numpy as np

from fgrad.core import prims as P
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.errors import ArgumentError
from fgrad.core.prims._util import fmt_shape
from fgrad.core.methods.nn.conv_ops import (Pads, make_tuple, pad_spatial, resolve_padding,
                                            window_sums, windows)

if TYPE_CHECKING:
    from fgrad.core.tensor import Tensor


class PoolGeometry(NamedTuple):
    """Kernel, stride, dilation and padding of a pooling op (one entry per spatial axis)."""

    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    pads: Pads
    ceil_extra: tuple[int, ...]

    @property
    def total_pads(self) -> Pads:
        """The padding including the ceil_mode extension on the high side."""
        return tuple((lo, hi + e) for (lo, hi), e in zip(self.pads, self.ceil_extra))


def _ceil_extra(spatial: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                dilation: Sequence[int], pads: Pads) -> tuple[int, ...]:
    extra = []
    for s, k, st, d, (lo, hi) in zip(spatial, kernel, stride, dilation, pads, strict=True):
        reach, span = d * (k - 1) + 1, s + lo + hi
        count = -(-(span - reach) // st) + 1
        if (count - 1) * st >= s + lo:
            count -= 1
        extra.append(max(0, (count - 1) * st + reach - span))
    return tuple(extra)


def pool_geometry(x: "Tensor", kernel_size: int | Sequence[int], stride: Any, dilation: Any,
                  padding: Any, ceil_mode: bool, op: str) -> PoolGeometry:
    """Resolve the pooling arguments for input `x` (int kernel_size means 2-d)."""
    kernel = (int(kernel_size),) * 2 if isinstance(kernel_size, int) else tuple(kernel_size)
    n = len(kernel)
    if x.ndim < n:
        raise ArgumentError(f"{op}: a {n}-d kernel {kernel} needs an input with at least {n} "
                            f"dims, got shape {fmt_shape(x.shape)}")
    stride_t = make_tuple(kernel if stride is None else stride, n, op, "stride")
    dilation_t = make_tuple(dilation, n, op, "dilation")
    pads = resolve_padding(padding, n, op)
    extra = (_ceil_extra(x.shape[-n:], kernel, stride_t, dilation_t, pads) if ceil_mode
             else (0,) * n)
    return PoolGeometry(kernel, stride_t, dilation_t, pads, extra)


def _lowest(dtype: DType) -> Any:
    if dtype.is_float:
        return float("-inf")
    if dtype == dtypes.bool:
        return False
    return int(np.iinfo(dtype.np).min)


def _index_dtype(size: int) -> DType:
    return dtypes.int32 if size < 2**31 else dtypes.int64


def _window_counts(spatial: tuple[int, ...], geo: PoolGeometry, include_pad: bool,
                   dtype: DType, op: str) -> "Tensor":
    """How many elements each window averages over (shape: the output's spatial shape)."""
    from fgrad.core.tensor import Tensor
    plane = Tensor.ones(spatial, dtype=dtype)
    if include_pad:
        plane = pad_spatial(pad_spatial(plane, geo.pads, 1), tuple((0, e) for e in
                                                                   geo.ceil_extra))
    else:
        plane = pad_spatial(plane, geo.total_pads)
    return window_sums(plane, geo.kernel, geo.stride, geo.dilation, op)


def _flat_indices(spatial: tuple[int, ...], geo: PoolGeometry, op: str) -> "Tensor":
    """(taps, *out): the flat input position of every window tap (-1 in padding)."""
    size = math.prod(spatial)
    plane = P.reshape(P.iota(_index_dtype(size), (size,), 0), spatial)
    return windows(pad_spatial(plane, geo.total_pads, -1), geo.kernel, geo.stride,
                   geo.dilation, op)


class PoolOpsMixin:
    """Tensor methods: avg_pool2d, max_pool2d, max_unpool2d (any number of spatial dims)."""

    __slots__ = ()

    def avg_pool2d(self, kernel_size: int | Sequence[int] = (2, 2), stride: Any = None,
                   dilation: int | Sequence[int] = 1, padding: int | Sequence[int] = 0,
                   ceil_mode: bool = False, count_include_pad: bool = True) -> "Tensor":
        """Average over windows of the trailing len(kernel_size) axes (int kernel: 2-d).

        stride defaults to kernel_size; padding is an int, one int per axis, or the flat
        (left, right, top, bottom, ...) form. count_include_pad=False averages only over
        input elements. Integer inputs give float32.
        """
        op, x = "avg_pool2d", cast("Tensor", self)
        geo = pool_geometry(x, kernel_size, stride, dilation, padding, ceil_mode, op)
        x = x if x.dtype.is_float else x.cast(dtypes.default_float)
        n = len(geo.kernel)
        total = window_sums(pad_spatial(x, geo.total_pads), geo.kernel, geo.stride,
                            geo.dilation, op)
        if count_include_pad and not ceil_mode:
            return total / math.prod(geo.kernel)
        return total / _window_counts(x.shape[-n:], geo, count_include_pad, x.dtype, op)

    def max_pool2d(self, kernel_size: int | Sequence[int] = (2, 2), stride: Any = None,
                   dilation: int | Sequence[int] = 1, padding: int | Sequence[int] = 0,
                   ceil_mode: bool = False, return_indices: bool = False) -> Any:
        """Maximum over windows of the trailing len(kernel_size) axes (int kernel: 2-d).

        With return_indices=True also returns, per window, the flat index (int32) of its
        first maximum within the input's spatial plane, as PyTorch does.
        """
        op, x = "max_pool2d", cast("Tensor", self)
        geo = pool_geometry(x, kernel_size, stride, dilation, padding, ceil_mode, op)
        n = len(geo.kernel)
        padded = pad_spatial(x, geo.total_pads, _lowest(x.dtype))
        taps = windows(padded, geo.kernel, geo.stride, geo.dilation, op)
        axis = self.ndim - n
        values = taps.max(axis)
        if not return_indices:
            return values
        best = taps.argmax(axis).unsqueeze(axis)
        tap_ids = P.iota(best.dtype, (taps.shape[axis],) + (1,) * n, 0)
        positions = _flat_indices(self.shape[-n:], geo, op)
        return values, (best == tap_ids).where(positions, 0).sum(axis)

    def max_unpool2d(self, indices: "Tensor", kernel_size: int | Sequence[int] = (2, 2),
                     stride: Any = None, dilation: int | Sequence[int] = 1,
                     padding: int | Sequence[int] = 0,
                     output_size: Sequence[int] | None = None) -> "Tensor":
        """Partial inverse of max_pool2d: zeros with self's values written at `indices`.

        self and indices are (N, C, *spatial); the output spatial size is computed from the
        pooling arguments unless `output_size` (whose last entries are used) is given.
        """
        op = "max_unpool2d"
        if tuple(indices.shape) != tuple(self.shape) or self.ndim < 3:
            raise ArgumentError(f"{op}: input and indices must both be (N, C, *spatial) with the "
                                f"same shape, got {fmt_shape(self.shape)} and "
                                f"{fmt_shape(indices.shape)}")
        out_sp = _unpool_size(self.shape[2:], kernel_size, stride, dilation, padding,
                              output_size, op)
        rows, size = self.shape[0] * self.shape[1], math.prod(out_sp)
        idx_dtype = _index_dtype(rows * size)
        flat_idx = indices.cast(idx_dtype).reshape(rows, -1)
        flat_idx = flat_idx + P.iota(idx_dtype, flat_idx.shape, 0) * size
        from fgrad.core.tensor import Tensor
        base = Tensor.zeros(rows * size, dtype=self.dtype)
        out = P.scatter(base, flat_idx.reshape(-1), self.reshape(-1), "set")
        return out.reshape(self.shape[:2] + out_sp)


def _unpool_size(spatial: tuple[int, ...], kernel_size: Any, stride: Any, dilation: Any,
                 padding: Any, output_size: Sequence[int] | None, op: str) -> tuple[int, ...]:
    n = len(spatial)
    if output_size is not None:
        out = tuple(int(s) for s in output_size)[-n:]
        if len(out) != n:
            raise ArgumentError(f"{op}: output_size {tuple(output_size)} needs at least {n} "
                                f"entries for spatial shape {fmt_shape(spatial)}")
        return out
    kernel = make_tuple(kernel_size, n, op, "kernel_size")
    stride_t = make_tuple(kernel if stride is None else stride, n, op, "stride")
    dilation_t = make_tuple(dilation, n, op, "dilation")
    pads = resolve_padding(padding, n, op)
    return tuple((i - 1) * s - lo - hi + d * (k - 1) + 1 for i, k, s, d, (lo, hi)
                 in zip(spatial, kernel, stride_t, dilation_t, pads, strict=True))
