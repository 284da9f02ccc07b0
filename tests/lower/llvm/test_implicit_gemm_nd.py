"""Implicit GEMM for 1-d and 3-d convolutions: the GEMM reads the patches of a (N, C, L) or
(N, C, D, H, W) input from the input itself, read as a 3-d image with unit leading axes
(fuse_patches.PatchRead.as_3d; gemm/conv_pack.py tests depth, row and column bounds):
forward, weight gradient and (stride 1, >= MIN_INPUT_CHANNELS channels a group) input
gradient; the patches are never stored. Reference: a NumPy loop over the taps, float64.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.schedule.fuse_patches import MIN_GROUP_CHANNELS, MIN_INPUT_CHANNELS

RNG = np.random.default_rng(23)

# (x shape, w shape, groups, stride, dilation, ((lo, hi) per spatial axis))
GEOMETRIES = [
    ((2, 3, 50), (4, 3, 3), 1, (1,), (1,), ((1, 1),)),          # runs, masked edges
    ((3, 40, 37), (6, 40, 5), 1, (1,), (2,), ((4, 4),)),        # dilation; dX fused
    ((2, 5, 33), (7, 5, 4), 1, (2,), (1,), ((1, 2),)),          # stride 2: gathers
    ((1, 32, 300), (8, 32, 3), 1, (1,), (1,), ((-1, 2),)),      # a cropping pad
    ((2, 64, 20), (16, 64, 7), 1, (1,), (1,), ((3, 3),)),       # C * taps = 448
    ((2, 16, 40), (8, 4, 3), 4, (1,), (1,), ((1, 1),)),         # grouped
    ((2, 32, 29), (16, 8, 3), 4, (1,), (3,), ((3, 2),)),        # grouped, dX fused
    ((2, 3, 5, 6, 20), (4, 3, 3, 3, 3), 1, (1, 1, 1), (1, 1, 1), ((1, 1),) * 3),
    ((1, 4, 6, 7, 9), (5, 4, 2, 3, 3), 1, (2, 1, 2), (1, 2, 1), ((0, 1), (2, 2), (1, 0))),
    ((2, 32, 4, 5, 17), (6, 32, 3, 1, 3), 1, (1, 1, 1), (2, 1, 1), ((2, 2), (0, 0), (1, 1))),
    ((1, 16, 3, 4, 18), (8, 2, 3, 3, 3), 8, (1, 1, 1), (1, 1, 1), ((1, 1), (1, 1), (-1, 2))),
    ((2, 8, 5, 5, 5), (4, 8, 5, 3, 3), 1, (1, 1, 1), (1, 1, 1), ((3, 3), (1, 1), (1, 1))),
]


def _cropped(x: np.ndarray, pads: Any) -> tuple[np.ndarray, np.ndarray, Any]:
    """(x padded by the positive pads, then cropped by the negative ones; the padded
    array; the crop's index into it)."""
    grown = np.pad(x, ((0, 0), (0, 0)) + tuple((max(lo, 0), max(hi, 0)) for lo, hi in pads))
    crop = (slice(None), slice(None)) + tuple(
        slice(-min(lo, 0), grown.shape[2 + a] + min(hi, 0)) for a, (lo, hi) in enumerate(pads))
    return grown[crop], grown, crop


def reference(x: np.ndarray, w: np.ndarray, r: np.ndarray, groups: int, stride: Any,
              dilation: Any, pads: Any) -> tuple[np.ndarray, ...]:
    """conv(x, w), and the gradients of sum(conv * r) for x and w."""
    x64, w64, r64 = (a.astype(np.float64) for a in (x, w, r))
    xp, grown, crop = _cropped(x64, pads)
    out_shape = r.shape[2:]
    c, o = x.shape[1] // groups, w.shape[0] // groups
    out, gw, gxp = np.zeros(r.shape), np.zeros(w.shape), np.zeros(xp.shape)
    for g in range(groups):
        ins, outs = slice(c * g, c * (g + 1)), slice(o * g, o * (g + 1))
        for tap in itertools.product(*(range(k) for k in w.shape[2:])):
            at = (slice(None), ins) + tuple(
                slice(t * d, t * d + (n - 1) * s + 1, s)
                for t, d, n, s in zip(tap, dilation, out_shape, stride))
            wt = w64[(outs, slice(None)) + tap]
            out[:, outs] += np.einsum("nc...,oc->no...", xp[at], wt)
            flat_r, flat_x = (a.reshape(a.shape[0], a.shape[1], -1) for a in (r64[:, outs], xp[at]))
            gw[(outs, slice(None)) + tap] = np.einsum("nol,ncl->oc", flat_r, flat_x)
            gxp[at] += np.einsum("no...,oc->nc...", r64[:, outs], wt)
    gx_grown = np.zeros(grown.shape)
    gx_grown[crop] = gxp
    keep = (slice(None), slice(None)) + tuple(
        slice(max(lo, 0), max(lo, 0) + n) for (lo, _), n in zip(pads, x.shape[2:]))
    return out, gx_grown[keep], gw


def _schedule(fn: Any, *args: Tensor) -> str:
    text = fgrad.jit(fn, backend="llvm").lower(*args).as_text()
    return text.split("# schedule")[1].split("# kernel IR")[0]


def _flat_padding(pads: Any) -> tuple[int, ...]:
    """The Tensor API's padding: (lo, hi) of the last axis first."""
    return tuple(v for pair in reversed(pads) for v in pair)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: f"{g[0]}x{g[1]}g{g[2]}s{g[3]}")
def test_conv_reads_its_input_and_matches_numpy(geometry: Any, dtype: Any) -> None:
    xs, ws, groups, stride, dilation, pads = geometry
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal(ws).astype(dtype)

    def conv(x: Tensor, w: Tensor) -> Tensor:
        return x.conv2d(w, groups=groups, stride=stride, dilation=dilation,
                        padding=_flat_padding(pads))

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
    if all(s == 1 for s in stride) and xs[1] // groups >= least:   # dX reads dY's patches
        assert backward.count("implicit GEMM") == 2 and "pad add" not in backward, backward
    else:                                             # col2im of a stored product
        assert backward.count("implicit GEMM") == 1, backward
    assert "concatenate" not in backward and " 0 host steps" in backward, backward
