"""Implicit-GEMM convolution on llvm: the GEMM reads conv_patches from the image.

schedule/fuse_patches.py rewrites a forward product (B = patches, taps x pixels) and a
weight-gradient product (B = patches transposed, pixels x taps) to read the image, and a
stride-1 input gradient (col2im of W^T dY) into a product reading dY's patches;
gemm/conv_pack.py packs B from it (masked loads for slivers of consecutive input pixels,
gathers otherwise). The geometry table reaches every path of the packing routine: slivers
inside one output row and across rows (OW below, above and not a multiple of the sliver
width), strides, dilations, asymmetric and negative padding, more than one k slice
(C*taps > 256, pixels > 256) and column block (pixels > 2048), products split over
threads. References: NumPy (strided slices and einsum), never fgrad itself.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.core import prims as P
from fgrad.lower.schedule.fuse_patches import MIN_GROUP_CHANNELS, MIN_INPUT_CHANNELS

RNG = np.random.default_rng(11)

# (x shape, w shape, stride, dilation, ((top, bottom), (left, right)))
GEOMETRIES = [
    ((2, 3, 8, 8), (4, 3, 3, 3), (1, 1), (1, 1), ((1, 1), (1, 1))),
    ((2, 3, 32, 32), (8, 3, 3, 3), (1, 1), (1, 1), ((1, 1), (1, 1))),
    ((1, 4, 5, 3), (3, 4, 3, 3), (1, 1), (1, 1), ((1, 1), (1, 1))),
    ((2, 3, 9, 7), (5, 3, 3, 2), (2, 2), (1, 1), ((1, 2), (0, 1))),
    ((3, 4, 11, 13), (6, 4, 3, 3), (1, 1), (2, 2), ((2, 2), (2, 2))),
    ((2, 5, 20, 37), (7, 5, 5, 5), (1, 2), (1, 1), ((1, 1), (1, 1))),
    ((1, 2, 6, 50), (3, 2, 1, 3), (1, 1), (1, 1), ((0, 0), (0, 0))),
    ((2, 3, 10, 12), (4, 3, 3, 3), (1, 1), (1, 1), ((-1, 2), (1, -1))),
    ((2, 40, 9, 9), (6, 40, 3, 3), (1, 1), (1, 1), ((1, 1), (1, 1))),
    ((1, 2, 48, 48), (3, 2, 3, 3), (1, 1), (1, 1), ((1, 1), (1, 1))),
    ((2, 32, 11, 13), (6, 32, 3, 3), (1, 1), (2, 2), ((2, 1), (0, 3))),
    ((1, 32, 10, 12), (4, 32, 3, 2), (1, 1), (1, 1), ((-1, 2), (1, -1))),
    ((2, 32, 8, 8), (4, 32, 3, 3), (1, 1), (1, 1), ((3, 3), (0, 2))),
    ((2, 32, 9, 9), (8, 32, 5, 5), (1, 1), (1, 1), ((0, 0), (0, 0))),
    ((4, 32, 32, 32), (32, 32, 3, 3), (1, 1), (1, 1), ((1, 1), (1, 1))),
]


def _taps(xp: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int],
          dilation: tuple[int, int], out: tuple[int, int]) -> list[tuple[Any, ...]]:
    """(i, j, index of the tap's strided slice of the padded input) per kernel tap."""
    found = []
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            rows = slice(i * dilation[0], i * dilation[0] + (out[0] - 1) * stride[0] + 1,
                         stride[0])
            cols = slice(j * dilation[1], j * dilation[1] + (out[1] - 1) * stride[1] + 1,
                         stride[1])
            found.append((i, j, (slice(None), slice(None), rows, cols)))
    return found


def _padded(x: np.ndarray, pads: Any) -> tuple[np.ndarray, Any]:
    grow = ((0, 0), (0, 0)) + tuple((max(lo, 0), max(hi, 0)) for lo, hi in pads)
    xp = np.pad(x, grow)
    crop = (slice(None), slice(None)) + tuple(
        slice(-min(lo, 0), xp.shape[2 + a] + min(hi, 0)) for a, (lo, hi) in enumerate(pads))
    return xp, crop


def reference(x: np.ndarray, w: np.ndarray, r: np.ndarray, stride: Any, dilation: Any,
              pads: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The convolution, and the gradients of sum(conv * r) for x and w, in float64."""
    x64, w64, r64 = (a.astype(np.float64) for a in (x, w, r))
    grown, crop = _padded(x64, pads)
    xp = grown[crop]
    out_shape = r.shape[2:]
    out = np.zeros(r.shape)
    gw = np.zeros(w.shape)
    gxp = np.zeros(xp.shape)
    for i, j, at in _taps(xp, w.shape[2:], stride, dilation, out_shape):
        out += np.einsum("nchw,oc->nohw", xp[at], w64[:, :, i, j])
        gw[:, :, i, j] = np.einsum("nohw,nchw->oc", r64, xp[at])
        gxp[at] += np.einsum("nohw,oc->nchw", r64, w64[:, :, i, j])
    gx_grown = np.zeros(grown.shape)
    gx_grown[crop] = gxp
    lo = [max(p[0], 0) for p in pads]
    gx = gx_grown[:, :, lo[0]:lo[0] + x.shape[2], lo[1]:lo[1] + x.shape[3]]
    return out, gx, gw


def _schedule(fn: Any, *args: Tensor) -> str:
    text = fgrad.jit(fn, backend="llvm").lower(*args).as_text()
    return text.split("# schedule")[1].split("# kernel IR")[0]


def _flat_padding(pads: Any) -> tuple[int, ...]:
    (top, bottom), (left, right) = pads
    return (left, right, top, bottom)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: f"{g[0]}x{g[1]}s{g[2]}d{g[3]}")
def test_forward_and_gradients_match_numpy(geometry: Any, dtype: Any) -> None:
    xs, ws, stride, dilation, pads = geometry
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal(ws).astype(dtype)
    padding = _flat_padding(pads)

    def conv(x: Tensor, w: Tensor) -> Tensor:
        return x.conv2d(w, stride=stride, dilation=dilation, padding=padding)

    out = fgrad.jit(conv, backend="llvm")(Tensor(x), Tensor(w)).numpy()
    r = RNG.standard_normal(out.shape).astype(dtype)
    want, want_gx, want_gw = reference(x, w, r, stride, dilation, pads)
    grad = fgrad.jit(fgrad.grad(lambda x, w: (conv(x, w) * Tensor(r)).sum(), argnums=(0, 1)),
                     backend="llvm")
    gx, gw = grad(Tensor(x), Tensor(w))
    tol = dict(rtol=2e-4, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(out / scale, want / scale, **tol)
    np.testing.assert_allclose(gx.numpy() / max(1.0, float(np.abs(want_gx).max())),
                               want_gx / max(1.0, float(np.abs(want_gx).max())), **tol)
    np.testing.assert_allclose(gw.numpy() / max(1.0, float(np.abs(want_gw).max())),
                               want_gw / max(1.0, float(np.abs(want_gw).max())), **tol)
    forward = _schedule(conv, Tensor(x), Tensor(w))
    assert "implicit GEMM" in forward and "concatenate" not in forward, forward
    backward = _schedule(fgrad.grad(lambda x, w: (conv(x, w) * Tensor(r)).sum(),
                                    argnums=(0, 1)), Tensor(x), Tensor(w))
    assert "transposed) of" in backward, backward      # the weight gradient's product
    if stride == (1, 1) and xs[1] >= MIN_INPUT_CHANNELS:   # dX reads the patches of dY
        assert backward.count("implicit GEMM") == 2 and "pad add" not in backward, backward
    else:                  # col2im of a stored product (pads with interior zeros)
        assert backward.count("implicit GEMM") == 1 and "pad add" in backward, backward


def test_the_patches_are_never_stored() -> None:
    x = Tensor(RNG.standard_normal((2, 8, 16, 16)).astype(np.float32))
    w = Tensor(RNG.standard_normal((4, 8, 3, 3)).astype(np.float32))
    text = _schedule(lambda x, w: x.conv2d(w, padding=1), x, w)
    kernels = [line for line in text.splitlines() if ": kernel " in line]
    assert not any(op in line for line in kernels
                   for op in ("conv_patches", "concatenate", "pad", "slice")), text
    assert "(implicit GEMM: rhs patches(kernel=(3, 3)" in text, text


def test_patches_used_elsewhere_are_stored_and_right() -> None:
    """A product whose patches are also returned reads the stored patches (expanded)."""
    x = RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = RNG.standard_normal((1, 4, 3, 9)).astype(np.float32)

    def fn(x: Tensor, w: Tensor) -> tuple[Tensor, Tensor]:
        p = P.conv_patches(x, (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1)))
        wb = P.broadcast_in_dim(w, (2, 4, 3, 9), (0, 1, 2, 3))
        return p, P.dot_general(wb, p, (((2, 3), (1, 2)), ((0,), (0,))))

    text = _schedule(fn, Tensor(x), Tensor(w))
    assert "implicit GEMM" not in text and "concatenate" in text, text
    patches, out = fgrad.jit(fn, backend="llvm")(Tensor(x), Tensor(w))
    want, _, _ = reference(x, w.reshape(4, 3, 3, 3), np.zeros((2, 4, 6, 6), np.float32),
                           (1, 1), (1, 1), ((1, 1), (1, 1)))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    for t, (_, _, at) in enumerate(_taps(xp, (3, 3), (1, 1), (1, 1), (6, 6))):
        np.testing.assert_array_equal(patches.numpy()[:, :, t], xp[at])


# (x shape, w shape, groups, stride, dilation, ((top, bottom), (left, right)))
GROUPED = [
    ((2, 4, 7, 7), (6, 2, 3, 3), 2, (1, 1), (1, 1), ((1, 1), (1, 1))),
    ((2, 8, 9, 11), (8, 2, 3, 3), 4, (2, 1), (1, 2), ((1, 0), (2, 2))),
    ((3, 12, 20, 19), (9, 4, 3, 2), 3, (1, 1), (1, 1), ((0, 2), (1, 1))),
    ((4, 64, 14, 14), (64, 8, 3, 3), 8, (1, 1), (1, 1), ((1, 1), (1, 1))),
    ((2, 32, 10, 9), (16, 16, 3, 3), 2, (1, 1), (2, 1), ((2, 0), (1, 1))),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("geometry", GROUPED, ids=lambda g: f"{g[0]}x{g[1]}g{g[2]}s{g[3]}")
def test_grouped_conv_reads_each_groups_image(geometry: Any, dtype: Any) -> None:
    """A grouped convolution's forward and weight-gradient products read the image in
    place (two batch axes: images and groups; no reshape copy of the input), and match a
    per-group NumPy reference with both gradients."""
    xs, ws, groups, stride, dilation, pads = geometry
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal(ws).astype(dtype)
    padding = _flat_padding(pads)

    def conv(x: Tensor, w: Tensor) -> Tensor:
        return x.conv2d(w, groups=groups, stride=stride, dilation=dilation, padding=padding)

    out = fgrad.jit(conv, backend="llvm")(Tensor(x), Tensor(w)).numpy()
    r = RNG.standard_normal(out.shape).astype(dtype)
    gx, gw = fgrad.jit(fgrad.grad(lambda x, w: (conv(x, w) * Tensor(r)).sum(),
                                  argnums=(0, 1)), backend="llvm")(Tensor(x), Tensor(w))
    c, o = xs[1] // groups, ws[0] // groups
    tol = dict(rtol=2e-4, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    for g in range(groups):
        ins, outs = slice(c * g, c * (g + 1)), slice(o * g, o * (g + 1))
        wants = reference(x[:, ins], w[outs], r[:, outs], stride, dilation, pads)
        for got, want in zip((out[:, outs], gx.numpy()[:, ins], gw.numpy()[outs]), wants):
            scale = max(1.0, float(np.abs(want).max()))
            np.testing.assert_allclose(got / scale, want / scale, **tol)
    forward = _schedule(conv, Tensor(x), Tensor(w))
    assert "implicit GEMM" in forward and "concatenate" not in forward, forward
    assert ": kernel " not in forward, forward   # no copy of the input, weight or output
    backward = _schedule(fgrad.grad(lambda x, w: (conv(x, w) * Tensor(r)).sum(),
                                    argnums=(0, 1)), Tensor(x), Tensor(w))
    assert "transposed) of" in backward, backward
    if stride == (1, 1) and c >= MIN_GROUP_CHANNELS:   # dX reads the patches of dY
        assert backward.count("implicit GEMM") == 2 and "pad add" not in backward, backward
    else:
        assert backward.count("implicit GEMM") == 1 and "pad add" in backward, backward


def test_large_products_split_over_threads() -> None:
    """The three implicit products of the largest geometry's step (forward, weight and
    input gradients) run in row chunks on the pool."""
    xs, ws = GEOMETRIES[-1][:2]
    x = Tensor(RNG.standard_normal(xs).astype(np.float32))
    w = Tensor(RNG.standard_normal(ws).astype(np.float32))
    grad = fgrad.grad(lambda x, w: x.conv2d(w, padding=1).square().sum(), argnums=(0, 1))
    text = fgrad.jit(grad, backend="llvm").lower(x, w).as_text()
    implicit = [line.split(":")[0].strip() for line in text.splitlines()
                if "implicit GEMM" in line]
    assert len(implicit) == 3, text
    for name in implicit:
        assert f"{name} over " in text, text


def test_only_programs_with_an_implicit_gemm_compile_its_packing_routine() -> None:
    """The routine is the slowest shared one to compile (~80 ms): a program without a
    convolution must not pay for it on a cold start."""
    from fgrad.lower.llvm.gemm.driver import routine_texts
    assert "pack_b_conv" not in [part for part, _ in routine_texts("float32")]
    assert "pack_b_conv" in [part for part, _ in routine_texts("float32", with_conv=True)]


def test_col2im_of_a_stored_product_reads_without_division() -> None:
    """A few-channel input gradient (W4's 3 channels: the stored product, then one pad per
    tap summed) reads each tap through a reshape of the padded index; the pad's index is
    clamped into its input, so the reshape folds to plain strides: no quotient or remainder
    per element (before: four divisions and moduli per tap)."""
    x = RNG.standard_normal((2, 3, 16, 16)).astype(np.float32)
    w = RNG.standard_normal((8, 3, 3, 3)).astype(np.float32)
    r = RNG.standard_normal((2, 8, 16, 16)).astype(np.float32)
    grad = fgrad.grad(lambda x, w: (x.conv2d(w, padding=1) * Tensor(r)).sum(), argnums=(0, 1))
    text = fgrad.jit(grad, backend="llvm").lower(Tensor(x), Tensor(w)).as_text()
    kernels = text.split("# kernel IR")[1].split("# gemm epilogues")[0]
    assert "pad add" in text and "in_bounds" in kernels, text
    assert "//" not in kernels and " % " not in kernels, kernels
    gx, gw = fgrad.jit(grad, backend="llvm")(Tensor(x), Tensor(w))
    _, want_gx, want_gw = reference(x, w, r, (1, 1), (1, 1), ((1, 1), (1, 1)))
    np.testing.assert_allclose(gx.numpy(), want_gx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gw.numpy(), want_gw, rtol=1e-4, atol=1e-4)


def test_an_image_reshaped_from_a_dense_output_is_read_in_place() -> None:
    """A generator's `(h @ W).reshape(N, C, H, W)` feeds the conv: the product reads the
    dense output in place, and the conv's output reshape is its own output: two GEMMs and
    no copy kernel, forward and gradients against NumPy."""
    h = RNG.standard_normal((6, 16)).astype(np.float32)
    wd = RNG.standard_normal((16, 2 * 8 * 8)).astype(np.float32)
    k = RNG.standard_normal((4, 2, 3, 3)).astype(np.float32)
    r = RNG.standard_normal((6, 4 * 8 * 8)).astype(np.float32)

    def gen(h: Tensor, wd: Tensor, k: Tensor) -> Tensor:
        return (h @ wd).reshape(6, 2, 8, 8).conv2d(k, padding=1).reshape(6, -1)

    text = _schedule(gen, Tensor(h), Tensor(wd), Tensor(k))
    assert ": kernel " not in text and text.count(": gemm ") == 2, text
    x = (h.astype(np.float64) @ wd).reshape(6, 2, 8, 8)
    want, gx, gk = reference(x, k, r.reshape(6, 4, 8, 8), (1, 1), (1, 1), ((1, 1), (1, 1)))
    out = fgrad.jit(gen, backend="llvm")(Tensor(h), Tensor(wd), Tensor(k)).numpy()
    np.testing.assert_allclose(out, want.reshape(6, -1), rtol=2e-4, atol=2e-4)
    grads = fgrad.jit(fgrad.grad(lambda h, wd, k: (gen(h, wd, k) * Tensor(r)).sum(),
                                 argnums=(0, 1, 2)), backend="llvm")(
        Tensor(h), Tensor(wd), Tensor(k))
    flat = gx.reshape(6, -1)
    for got, expected in zip(grads, (flat @ wd.T, h.T.astype(np.float64) @ flat, gk)):
        np.testing.assert_allclose(got.numpy(), expected, rtol=2e-4, atol=2e-4)
