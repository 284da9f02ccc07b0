"""fgrad.scipy.signal against scipy.signal: every mode of convolve/correlate/fftconvolve in
1 to 3 dimensions (either input the larger), every mode and boundary of convolve2d and
correlate2d, detrend; dtypes, errors, jit and gradients."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.signal as ss

import fgrad
import fgrad.scipy.signal as fsig
from fgrad import Tensor

RNG = np.random.default_rng(7)
MODES = ["full", "same", "valid"]
SHAPES_ND = [((9,), (4,)), ((4,), (9,)), ((7,), (7,)), ((1,), (1,)), ((5, 6), (2, 3)),
             ((2, 3), (5, 6)), ((5, 6), (3, 4)), ((4, 5, 3), (2, 2, 2))]
SHAPES_2D = [((5, 6), (2, 3)), ((5, 6), (3, 4)), ((2, 3), (5, 6)), ((4, 4), (4, 4)),
             ((7, 7), (3, 3)), ((3, 3), (6, 6)), ((6, 5), (1, 1)), ((5, 3), (2, 4))]


@pytest.mark.parametrize("fn", ["convolve", "correlate", "fftconvolve"])
@pytest.mark.parametrize("mode", MODES)
def test_nd_against_scipy(fn: str, mode: str) -> None:
    for s1, s2 in SHAPES_ND:
        a, b = RNG.normal(size=s1), RNG.normal(size=s2)
        got = getattr(fsig, fn)(a, b, mode)
        want = getattr(ss, fn)(a, b, mode)
        assert got.shape == want.shape, (s1, s2)
        np.testing.assert_allclose(got.numpy(), want, atol=1e-12, err_msg=f"{s1} {s2}")


@pytest.mark.parametrize("fn", ["convolve2d", "correlate2d"])
@pytest.mark.parametrize("boundary,fillvalue", [("fill", 0.0), ("fill", 1.5), ("wrap", 0.0),
                                                ("symm", 0.0)])
def test_2d_against_scipy(fn: str, boundary: str, fillvalue: float) -> None:
    for s1, s2 in SHAPES_2D:
        a, b = RNG.normal(size=s1), RNG.normal(size=s2)
        for mode in MODES:
            if mode == "valid" and (s1, s2) == ((5, 3), (2, 4)):
                with pytest.raises(ValueError, match="at least as large"):
                    getattr(fsig, fn)(a, b, mode, boundary, fillvalue)
                continue
            got = getattr(fsig, fn)(a, b, mode, boundary, fillvalue)
            want = getattr(ss, fn)(a, b, mode, boundary, fillvalue)
            assert got.shape == want.shape, (s1, s2, mode)
            np.testing.assert_allclose(got.numpy(), want, atol=1e-12,
                                       err_msg=f"{s1} {s2} {mode}")


def test_boundary_aliases() -> None:
    a, b = RNG.normal(size=(4, 5)), RNG.normal(size=(3, 2))
    for alias, name in (("circular", "wrap"), ("symmetric", "symm"), ("pad", "fill")):
        np.testing.assert_allclose(fsig.convolve2d(a, b, "same", alias).numpy(),
                                   ss.convolve2d(a, b, "same", name), atol=1e-12)


def test_fftconvolve_axes() -> None:
    a, b = RNG.normal(size=(3, 10)), RNG.normal(size=(3, 4))
    for mode in MODES:
        np.testing.assert_allclose(fsig.fftconvolve(a, b, mode, axes=1).numpy(),
                                   ss.fftconvolve(a, b, mode, axes=1), atol=1e-12)
    c, d = RNG.normal(size=(6, 2, 5)), RNG.normal(size=(3, 2, 2))
    np.testing.assert_allclose(fsig.fftconvolve(c, d, axes=(0, 2)).numpy(),
                               ss.fftconvolve(c, d, axes=(0, 2)), atol=1e-12)
    with pytest.raises(ValueError, match="mapped axes"):
        fsig.fftconvolve(a, b[:2], axes=1)


@pytest.mark.parametrize("kind,bp", [("linear", 0), ("constant", 0), ("linear", [5, 12]),
                                     ("linear", [19]), ("linear", np.array([3]))])
def test_detrend(kind: str, bp: Any) -> None:
    x = RNG.normal(size=(4, 20)) + np.arange(20) * 0.3
    np.testing.assert_allclose(fsig.detrend(x, type=kind, bp=bp).numpy(),
                               ss.detrend(x, type=kind, bp=bp), atol=1e-12)
    np.testing.assert_allclose(fsig.detrend(x.T, axis=0, type=kind, bp=bp).numpy(),
                               ss.detrend(x.T, axis=0, type=kind, bp=bp), atol=1e-12)


def test_dtypes_and_errors() -> None:
    ints = fsig.convolve(np.array([1, 2, 3]), np.array([0, 1]))
    assert ints.dtype == fgrad.dtypes.float32
    np.testing.assert_array_equal(ints.numpy(), [0.0, 1.0, 2.0, 3.0])
    f32 = fsig.convolve2d(np.ones((3, 3), np.float32), np.ones((2, 2), np.float32), "same",
                          "wrap")
    assert f32.dtype == fgrad.dtypes.float32
    with pytest.raises(ValueError, match="mode must be"):
        fsig.convolve([1.0, 2.0], [1.0], mode="bogus")
    with pytest.raises(ValueError, match="method must be"):
        fsig.convolve([1.0, 2.0], [1.0], method="bogus")
    with pytest.raises(ValueError, match="same number of dimensions"):
        fsig.convolve(np.ones((2, 2)), np.ones(2))
    with pytest.raises(ValueError, match="at least as large"):
        fsig.convolve(np.ones((2, 5)), np.ones((3, 2)), mode="valid")
    with pytest.raises(ValueError, match="boundary must be"):
        fsig.convolve2d(np.ones((3, 3)), np.ones((2, 2)), boundary="reflect")
    with pytest.raises(ValueError, match="must be 2-d"):
        fsig.correlate2d(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match="zero-size"):
        fsig.correlate(np.ones(0), np.ones(2))
    with pytest.raises(ValueError, match="type must be"):
        fsig.detrend(np.ones(4), type="quadratic")
    with pytest.raises(ValueError, match="breakpoints"):
        fsig.detrend(np.ones(4), bp=[7])


def test_jit_and_vmap() -> None:
    a, b = RNG.normal(size=(6, 7)), RNG.normal(size=(3, 2))
    jitted = fgrad.jit(lambda x, y: (fsig.convolve2d(x, y, "same", "symm"),
                                     fsig.correlate(x, y, "valid"), fsig.detrend(x)))
    c2, cv, dt = jitted(a, b)
    np.testing.assert_allclose(c2.numpy(), ss.convolve2d(a, b, "same", "symm"), atol=1e-12)
    np.testing.assert_allclose(cv.numpy(), ss.correlate(a, b, "valid"), atol=1e-12)
    np.testing.assert_allclose(dt.numpy(), ss.detrend(a), atol=1e-12)
    rows = fgrad.vmap(lambda r: fsig.convolve(r, b[:, 0], "same"))(Tensor(a))
    np.testing.assert_allclose(rows.numpy(), np.stack([ss.convolve(r, b[:, 0], "same")
                                                       for r in a]), atol=1e-12)


CASES_GRAD = [("convolve-full", lambda x, y: fsig.convolve(x, y), lambda x, y: ss.convolve(x, y)),
              ("correlate-same", lambda x, y: fsig.correlate(x, y, "same"),
               lambda x, y: ss.correlate(x, y, "same")),
              ("convolve2d-wrap", lambda x, y: fsig.convolve2d(x, y, "same", "wrap"),
               lambda x, y: ss.convolve2d(x, y, "same", "wrap")),
              ("correlate2d-symm", lambda x, y: fsig.correlate2d(x, y, "full", "symm"),
               lambda x, y: ss.correlate2d(x, y, "full", "symm"))]


@pytest.mark.parametrize("name,fn,ref", CASES_GRAD, ids=[c[0] for c in CASES_GRAD])
def test_gradients(name: str, fn: Any, ref: Any) -> None:
    a, b = RNG.normal(size=(5, 4)), RNG.normal(size=(2, 3))
    w = RNG.normal(size=ref(a, b).shape)
    ga, gb = fgrad.grad(lambda x, y: (fn(x, y) * Tensor(w)).sum(), argnums=(0, 1))(
        Tensor(a), Tensor(b))
    for k, (g, arg) in enumerate(((ga, a), (gb, b))):
        fd = np.zeros_like(arg)
        for idx in np.ndindex(arg.shape):
            hi, lo = arg.copy(), arg.copy()
            hi[idx] += 1e-6
            lo[idx] -= 1e-6
            args_hi = (hi, b) if k == 0 else (a, hi)
            args_lo = (lo, b) if k == 0 else (a, lo)
            fd[idx] = np.sum((ref(*args_hi) - ref(*args_lo)) * w) / 2e-6
        np.testing.assert_allclose(g.numpy(), fd, rtol=1e-6, atol=1e-7)
    x = RNG.normal(size=(3, 12))
    wd = RNG.normal(size=x.shape)
    gd = fgrad.grad(lambda t: (fsig.detrend(t, bp=[5]) * Tensor(wd)).sum())(Tensor(x))
    # detrend is linear and self-adjoint (an orthogonal projection): its gradient is detrend(w)
    np.testing.assert_allclose(gd.numpy(), ss.detrend(wd, bp=[5]), atol=1e-12)
