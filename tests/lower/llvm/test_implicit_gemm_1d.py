"""Implicit GEMM for 1-d convolutions: the patches (N, C, K, OL) of a (N, C, L) signal are
read by the GEMM from the signal as those of a (N, C, 1, L) image (fuse_patches.PatchRead
.planar), forward, weight gradient and (stride 1, >= MIN_INPUT_CHANNELS channels) input
gradient; never stored. Reference: a NumPy loop over the taps, in float64.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.schedule.fuse_patches import MIN_GROUP_CHANNELS, MIN_INPUT_CHANNELS

RNG = np.random.default_rng(23)

# (x shape, w shape, groups, stride, dilation, (left, right))
GEOMETRIES = [
    ((2, 3, 50), (4, 3, 3), 1, 1, 1, (1, 1)),         # slivers inside one row, masked edges
    ((3, 40, 37), (6, 40, 5), 1, 1, 2, (4, 4)),       # dilation; dX reads dY's patches
    ((2, 5, 33), (7, 5, 4), 1, 2, 1, (1, 2)),         # stride 2: gathers; asymmetric pads
    ((1, 32, 300), (8, 32, 3), 1, 1, 1, (-1, 2)),     # a cropping pad; > 256 pixels
    ((2, 64, 20), (16, 64, 7), 1, 1, 1, (3, 3)),      # C * taps = 448: two k slices
    ((2, 16, 40), (8, 4, 3), 4, 1, 1, (1, 1)),        # grouped, 4 channels a group
    ((2, 32, 29), (16, 8, 3), 4, 1, 3, (3, 2)),       # grouped, dX fused (8 a group)
]


def reference(x: np.ndarray, w: np.ndarray, r: np.ndarray, groups: int, stride: int,
              dilation: int, pads: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """conv1d(x, w), and the gradients of sum(conv1d * r) for x and w."""
    x64, w64, r64 = (a.astype(np.float64) for a in (x, w, r))
    left, right = pads
    grown = np.pad(x64, ((0, 0), (0, 0), (max(left, 0), max(right, 0))))
    xp = grown[:, :, -min(left, 0):grown.shape[2] + min(right, 0)]
    out_len = r.shape[2]
    c, o = x.shape[1] // groups, w.shape[0] // groups
    out, gw, gxp = np.zeros(r.shape), np.zeros(w.shape), np.zeros(xp.shape)
    for g in range(groups):
        ins, outs = slice(c * g, c * (g + 1)), slice(o * g, o * (g + 1))
        for t in range(w.shape[2]):
            at = slice(t * dilation, t * dilation + (out_len - 1) * stride + 1, stride)
            out[:, outs] += np.einsum("ncl,oc->nol", xp[:, ins, at], w64[outs, :, t])
            gw[outs, :, t] = np.einsum("nol,ncl->oc", r64[:, outs], xp[:, ins, at])
            gxp[:, ins, at] += np.einsum("nol,oc->ncl", r64[:, outs], w64[outs, :, t])
    gx_grown = np.zeros(grown.shape)
    gx_grown[:, :, -min(left, 0):grown.shape[2] + min(right, 0)] = gxp
    start = max(left, 0)
    return out, gx_grown[:, :, start:start + x.shape[2]], gw


def _schedule(fn: Any, *args: Tensor) -> str:
    text = fgrad.jit(fn, backend="llvm").lower(*args).as_text()
    return text.split("# schedule")[1].split("# kernel IR")[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: f"{g[0]}x{g[1]}g{g[2]}s{g[3]}")
def test_conv1d_reads_the_signal_and_matches_numpy(geometry: Any, dtype: Any) -> None:
    xs, ws, groups, stride, dilation, pads = geometry
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal(ws).astype(dtype)

    def conv(x: Tensor, w: Tensor) -> Tensor:
        return x.conv2d(w, groups=groups, stride=stride, dilation=dilation, padding=pads)

    out = fgrad.jit(conv, backend="llvm")(Tensor(x), Tensor(w)).numpy()
    r = RNG.standard_normal(out.shape).astype(dtype)
    loss = fgrad.grad(lambda x, w: (conv(x, w) * Tensor(r)).sum(), argnums=(0, 1))
    gx, gw = fgrad.jit(loss, backend="llvm")(Tensor(x), Tensor(w))
    tol = dict(rtol=2e-4, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    for got, want in zip((out, gx.numpy(), gw.numpy()),
                         reference(x, w, r, groups, stride, dilation, pads), strict=True):
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(got / scale, want / scale, **tol)
    forward = _schedule(conv, Tensor(x), Tensor(w))
    assert "implicit GEMM: rhs patches(kernel=(" in forward, forward
    assert ": kernel " not in forward, forward       # no stored patches, no copy
    backward = _schedule(loss, Tensor(x), Tensor(w))
    assert "transposed) of" in backward, backward     # the weight gradient's product
    least = MIN_INPUT_CHANNELS if groups == 1 else MIN_GROUP_CHANNELS
    if stride == 1 and xs[1] // groups >= least:      # dX reads the patches of dY
        assert backward.count("implicit GEMM") == 2 and "pad add" not in backward, backward
    else:                                             # col2im of a stored product
        assert backward.count("implicit GEMM") == 1, backward
    assert "concatenate" not in backward, backward
