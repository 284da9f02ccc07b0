"""conv_patches: every kernel window of the trailing spatial axes, side by side (im2col).

`conv_patches(x, kernel, stride, dilation, padding)` maps (..., *S) to (..., K, *out): for
kernel tap t (row-major over `kernel`, K = prod(kernel)) and output position o, the input at
o * stride + tap * dilation of x padded by `padding` ((lo, hi) per spatial axis, zeros;
negative entries crop). A convolution is a contraction of these patches with the weight
(methods/nn/conv_ops.py), so grad/vmap need no convolution rule: the primitive is linear,
its transpose is `conv_patches_transpose` (col2im: each window's entries added back where
they were read), whose transpose is conv_patches again.

Backends expand them into pad and strided slices, and pads summed (schedule/expand.py);
the llvm backend instead lets the GEMM that multiplies the patches read the image, and
computes a stride-1 col2im of a product as a product reading the other operand's patches,
so neither is stored (schedule/fuse_patches.py, gemm/conv_pack.py: implicit GEMM).
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

import numpy as np

from fgrad.core.errors import ArgumentError
from fgrad.core.ir import ShapedArray
from fgrad.core.primitive import Primitive
from fgrad.core.prims._util import fmt_shape, move_bdim
from fgrad.core.prims.movement import _linear_jvp

Ints = tuple[int, ...]
Pads = tuple[tuple[int, int], ...]

conv_patches_p = Primitive("conv_patches", linear=True)


def window_counts(padded: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                  dilation: Sequence[int]) -> Ints:
    """Windows per axis of an already padded input (floor division; < 1: none fits)."""
    return tuple((p - d * (k - 1) - 1) // st + 1
                 for p, k, st, d in zip(padded, kernel, stride, dilation, strict=True))


def _lead_batch(prim: Primitive) -> Any:
    """The batch rule of a primitive on trailing axes: the batch axis leads."""
    def rule(args: list[Any], dims: list[Any], **params: Any) -> tuple[Any, int]:
        x = move_bdim(args[0], dims[0], 0, args[0].shape[dims[0]])
        return prim.bind(x, **params), 0
    return rule


def patch_geometry(spatial: Sequence[int], kernel: Ints, stride: Ints, dilation: Ints,
                   padding: Pads) -> tuple[Ints, Ints]:
    """(padded spatial shape, output spatial shape) of conv_patches on `spatial`."""
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(spatial, padding, strict=True))
    return padded, window_counts(padded, kernel, stride, dilation)


def tap_offsets(kernel: Ints, dilation: Ints) -> list[Ints]:
    """The start of each kernel tap in the padded input, row-major over the taps."""
    return [tuple(o * d for o, d in zip(offset, dilation, strict=True))
            for offset in itertools.product(*(range(k) for k in kernel))]


def _abstract(x: ShapedArray, *, kernel: Ints, stride: Ints, dilation: Ints,
              padding: Pads) -> ShapedArray:
    n = len(kernel)
    if not (len(stride) == len(dilation) == len(padding) == n) or x.ndim < n:
        raise ArgumentError(f"conv_patches: kernel {kernel}, stride {stride}, dilation "
                            f"{dilation} and padding {padding} must name the same number of "
                            f"spatial axes, at most the operand's rank ({fmt_shape(x.shape)})")
    if any(v < 1 for v in (*kernel, *stride, *dilation)):
        raise ArgumentError(f"conv_patches: kernel {kernel}, stride {stride} and dilation "
                            f"{dilation} must be positive")
    padded, out = patch_geometry(x.shape[x.ndim - n:], kernel, stride, dilation, padding)
    if any(p < 0 for p in padded) or any(o < 1 for o in out):
        raise ArgumentError(f"conv_patches: kernel {kernel} with dilation {dilation} does not "
                            f"fit the input of spatial shape {fmt_shape(x.shape[x.ndim - n:])} "
                            f"padded by {padding}")
    return ShapedArray(x.shape[:x.ndim - n] + (math.prod(kernel),) + out, x.dtype)


def _impl(x: np.ndarray, *, kernel: Ints, stride: Ints, dilation: Ints,
          padding: Pads) -> np.ndarray:
    n = len(kernel)
    lead = x.ndim - n
    grow = [(0, 0)] * lead + [(max(lo, 0), max(hi, 0)) for lo, hi in padding]
    padded = np.pad(x, grow)
    crop = (slice(None),) * lead + tuple(
        slice(-min(lo, 0), padded.shape[lead + i] + min(hi, 0))
        for i, (lo, hi) in enumerate(padding))
    padded = padded[crop]
    _, out = patch_geometry(x.shape[lead:], kernel, stride, dilation, padding)
    taps = [padded[(Ellipsis,) + tuple(slice(s, s + (o - 1) * st + 1, st) for s, o, st
                                       in zip(start, out, stride, strict=True))]
            for start in tap_offsets(kernel, dilation)]
    return np.ascontiguousarray(np.stack(taps, axis=lead))


def _transpose(ct: Any, x: Any, *, kernel: Ints, stride: Ints, dilation: Ints,
               padding: Pads) -> list[Any]:
    spatial = x.aval.shape[x.aval.ndim - len(kernel):]
    return [conv_patches_transpose(ct, kernel, stride, dilation, padding, spatial)]


conv_patches_p.abstract_eval = _abstract
conv_patches_p.impl = _impl
conv_patches_p.jvp = _linear_jvp(conv_patches_p)
conv_patches_p.transpose = _transpose
conv_patches_p.batch = _lead_batch(conv_patches_p)

# ---------------------------------------------------------------------------- col2im

conv_patches_transpose_p = Primitive("conv_patches_transpose", linear=True)


def _t_abstract(ct: ShapedArray, *, kernel: Ints, stride: Ints, dilation: Ints,
                padding: Pads, spatial: Ints) -> ShapedArray:
    n = len(kernel)
    lead = ct.shape[:ct.ndim - n - 1]
    want = _abstract(ShapedArray(lead + tuple(spatial), ct.dtype), kernel=kernel,
                     stride=stride, dilation=dilation, padding=padding)
    if want.shape != ct.shape:
        raise ArgumentError(f"conv_patches_transpose: patches of shape {fmt_shape(ct.shape)} "
                            f"do not come from an input of spatial shape {tuple(spatial)} "
                            f"(they would be {fmt_shape(want.shape)})")
    return ShapedArray(lead + tuple(spatial), ct.dtype)


def _t_impl(ct: np.ndarray, *, kernel: Ints, stride: Ints, dilation: Ints, padding: Pads,
            spatial: Ints) -> np.ndarray:
    n = len(kernel)
    lead = ct.ndim - n - 1
    padded, out = patch_geometry(spatial, kernel, stride, dilation, padding)
    grown = [max(lo, 0) + s + max(hi, 0) for s, (lo, hi) in zip(spatial, padding, strict=True)]
    total = np.zeros(ct.shape[:lead] + tuple(grown), ct.dtype)
    shift = tuple(max(-lo, 0) for lo, _ in padding)   # a cropped side: padded starts inside
    for t, start in enumerate(tap_offsets(kernel, dilation)):
        at = tuple(slice(s + d, s + d + (o - 1) * st + 1, st)
                   for s, d, o, st in zip(start, shift, out, stride, strict=True))
        total[(Ellipsis,) + at] += ct[(slice(None),) * lead + (t,)]
    keep = tuple(slice(max(lo, 0), max(lo, 0) + s) for s, (lo, _) in zip(spatial, padding,
                                                                          strict=True))
    return np.ascontiguousarray(total[(Ellipsis,) + keep])


def _t_transpose(ct: Any, patches: Any, *, kernel: Ints, stride: Ints, dilation: Ints,
                 padding: Pads, spatial: Ints) -> list[Any]:
    return [conv_patches(ct, kernel, stride, dilation, padding)]


conv_patches_transpose_p.abstract_eval = _t_abstract
conv_patches_transpose_p.impl = _t_impl
conv_patches_transpose_p.jvp = _linear_jvp(conv_patches_transpose_p)
conv_patches_transpose_p.transpose = _t_transpose
conv_patches_transpose_p.batch = _lead_batch(conv_patches_transpose_p)


def col2im_by_pads(ct: Any, kernel: Ints, stride: Ints, dilation: Ints, padding: Pads,
                   spatial: Ints) -> Any:
    """conv_patches_transpose from movement primitives: each tap placed back at its strided
    positions by a pad with interior zeros, summed, then the padding cropped."""
    from fgrad.core.prims.movement import pad, reshape, slice_
    n = len(kernel)
    lead = ct.ndim - n - 1
    padded, out = patch_geometry(spatial, kernel, stride, dilation, padding)
    total = None
    for t, start in enumerate(tap_offsets(kernel, dilation)):
        tap = slice_(ct, (0,) * lead + (t,) + (0,) * n,
                     ct.shape[:lead] + (t + 1,) + ct.shape[lead + 1:])
        tap = reshape(tap, ct.shape[:lead] + out)
        config = ((0, 0, 0),) * lead + tuple(
            (s, p - (s + (o - 1) * st + 1), st - 1)
            for s, p, o, st in zip(start, padded, out, stride, strict=True))
        placed = pad(tap, config, 0)
        total = placed if total is None else total + placed
    assert total is not None
    return pad(total, ((0, 0, 0),) * lead + tuple((-lo, -hi, 0) for lo, hi in padding), 0)


def conv_patches_transpose(ct: Any, kernel: Sequence[int], stride: Sequence[int],
                           dilation: Sequence[int], padding: Sequence[tuple[int, int]],
                           spatial: Sequence[int]) -> Any:
    """col2im, the transpose of conv_patches: (..., K, *out) -> (..., *spatial), each
    window's entries added back where conv_patches read them."""
    return conv_patches_transpose_p.bind(
        ct, kernel=tuple(int(k) for k in kernel), stride=tuple(int(s) for s in stride),
        dilation=tuple(int(d) for d in dilation),
        padding=tuple((int(lo), int(hi)) for lo, hi in padding),
        spatial=tuple(int(s) for s in spatial))


def conv_patches(x: Any, kernel: Sequence[int], stride: Sequence[int],
                 dilation: Sequence[int], padding: Sequence[tuple[int, int]]) -> Any:
    """The kernel windows of x's trailing len(kernel) axes: (..., *S) -> (..., K, *out)."""
    return conv_patches_p.bind(x, kernel=tuple(int(k) for k in kernel),
                               stride=tuple(int(s) for s in stride),
                               dilation=tuple(int(d) for d in dilation),
                               padding=tuple((int(lo), int(hi)) for lo, hi in padding))
