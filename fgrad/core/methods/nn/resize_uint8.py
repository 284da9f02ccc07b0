"""Linear resizing of uint8 images with fixed-point weights, rounding after each axis.

PyTorch resizes uint8 images in integer arithmetic: per axis, the two linear weights of each
output entry are scaled by 2**p (p as large as fits int16 for the axis's largest weight) and
rounded, and the weighted sum is rounded back to uint8 before the next axis. Doing the same
gives its results exactly, instead of off-by-one values from float math and a final cast.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from fgrad.core import prims as P
from fgrad.core.dtypes import dtypes


def _source_positions(n: int, out: int, align_corners: bool) -> np.ndarray:
    dst = np.arange(out, dtype=np.float64)
    if align_corners:
        return dst * ((n - 1) / (out - 1) if out > 1 else 0.0)
    return np.maximum((dst + 0.5) * (n / out) - 0.5, 0.0)


def _fixed_point_weights(weights: np.ndarray) -> tuple[np.ndarray, int]:
    """Weights scaled by 2**p and rounded, with the largest p whose scaled maximum (times 2)
    stays below 2**15."""
    largest, p = float(weights.max()), 0
    while p < 15 and int(0.5 + largest * (1 << (p + 1))) < (1 << 15):
        p += 1
    return np.floor(weights * (1 << p) + 0.5).astype(np.int32), p


def linear_axis_uint8(x: Any, axis: int, out: int, align_corners: bool) -> Any:
    """Resize one axis of a uint8 Tensor to `out` entries by linear interpolation."""
    from fgrad.core.tensor import Tensor
    n = x.shape[axis]
    src = _source_positions(n, out, align_corners)
    low = np.minimum(np.floor(src).astype(np.int32), n - 1)
    high = np.minimum(low + 1, n - 1)
    frac = np.clip(src - low, 0.0, 1.0)
    w, p = _fixed_point_weights(np.stack([1.0 - frac, frac]))
    shape = tuple(out if i == axis else 1 for i in range(x.ndim))
    wide = x.cast(dtypes.int32)
    total = Tensor(1 << (p - 1), dtype=dtypes.int32)
    for idx, wi in ((low, w[0]), (high, w[1])):
        picked = _take(wide, axis, Tensor(idx))
        total = total + picked * Tensor(wi.reshape(shape))
    return (total >> p).clip(0, 255).cast(dtypes.uint8)


def _take(x: Any, axis: int, idx: Any) -> Any:
    perm = (axis,) + tuple(i for i in range(x.ndim) if i != axis)
    picked = P.gather(P.transpose(x, perm), idx)
    return P.transpose(picked, tuple(int(i) for i in np.argsort(perm)))


__all__ = ["linear_axis_uint8"]
