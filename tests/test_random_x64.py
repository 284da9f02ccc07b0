"""fgrad.random's float64 samplers (jax_enable_x64 on) against JAX's float64 samples.

The fixture (fixtures/gen_random_x64_jax.py wrote it with jax 0.10.2) holds JAX's float64 samples
for fixed keys and XLA's float64 erf_inv and log1p on grids. fgrad draws the same uniforms and
applies the same formulas; its float64 erfinv is Giles' double-precision polynomial (as XLA's)
and its float64 log1p XLA's recipe, so samples agree to a few ulps. What remains: XLA fuses the
polynomials' multiply-adds into FMAs (fgrad rounds them twice, so about 8% of normal samples
move by 1-3 ulps), its log and erf round differently now and then, and cancellations
(wald, the mean added in multivariate_normal) turn an ulp of an addend into more of the result.

Tolerances are in ulps: |fgrad - JAX| <= ULPS * spacing(max(|JAX|, FLOOR)), per case below.
"""
from __future__ import annotations

import importlib.util
import math
import os
from fractions import Fraction
from typing import Iterator

import numpy as np
import pytest
from scipy import special

import fgrad
from fgrad import Tensor, dtypes, random
from fgrad.core import random as core_random
from fgrad.random import gaussian

pytestmark = pytest.mark.backends  # the test that mentions jit runs per backend (conftest.py)

HERE = os.path.dirname(__file__)
_spec = importlib.util.spec_from_file_location(
    "gen_random_x64_jax", os.path.join(HERE, "fixtures", "gen_random_x64_jax.py"))
assert _spec is not None and _spec.loader is not None
GEN = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(GEN)
FIX = dict(np.load(os.path.join(HERE, "fixtures", "random_x64_jax.npz")))

# name -> (ulps, floor). Bit for bit: the uniforms (the scale and shift round once, as XLA's
# FMA does). A few ulps: what goes through erfinv, log, exp, pow or tan.
TOLERANCE: dict[str, tuple[float, float]] = {
    "uniform": (0, 0.0), "uniform_bounds": (0, 0.0),
    "normal": (4, 0.0), "normal_2d": (4, 0.0),
    "truncated_normal": (4, 0.0), "truncated_normal_tail": (4, 0.0),
    # erf(0.5 / sqrt 2) is one ulp off XLA's: the slope of the quantile near 3 makes that ~30
    "truncated_normal_arrays": (48, 0.0),
    "exponential": (2, 0.0), "gumbel": (2, 0.0), "laplace": (2, 0.0), "logistic": (2, 1.0),
    "cauchy": (2, 0.0), "pareto": (4, 0.0), "rayleigh": (2, 0.0), "weibull_min": (2, 0.0),
    "lognormal": (8, 0.0), "maxwell": (4, 0.0), "double_sided_maxwell": (4, 1.0),
    "wald": (32, 1.0), "multivariate_normal": (4, 1.0),
    "gamma": (12, 1.0), "loggamma": (6, 1.0), "beta": (4, 1.0), "dirichlet": (4, 1.0),
    "chisquare": (8, 1.0), "f": (12, 1.0), "t": (8, 1.0), "generalized_normal": (4, 0.0),
    "ball": (4, 1.0),
}


@pytest.fixture
def x64() -> Iterator[None]:
    with fgrad.config.override(enable_x64=True):
        yield


def _np(x: Tensor) -> np.ndarray:
    return np.asarray(x.numpy())


def _ulps(got: np.ndarray, want: np.ndarray, floor: float = 0.0) -> np.ndarray:
    return np.abs(got - want) / np.spacing(np.maximum(np.abs(want), floor))


def test_every_case_has_a_tolerance() -> None:
    assert set(TOLERANCE) == set(GEN.CASES)
    assert sum(FIX[n].size for n in GEN.CASES) == 2000


@pytest.mark.parametrize("name", list(GEN.CASES))
def test_matches_jax_float64_samples(name: str, x64: None) -> None:
    fn, args, kwargs = GEN.CASES[name]
    index = list(GEN.CASES).index(name)
    got = _np(getattr(random, fn)(random.key(GEN.SEED + index), *args, **kwargs))
    want = FIX[name]
    assert got.dtype == want.dtype == np.float64 and got.shape == want.shape
    ulps, floor = TOLERANCE[name]
    err = _ulps(got, want, floor)
    assert err.max() <= ulps, f"{name}: {err.max()} ulps (allowed {ulps})"


def test_erfinv_matches_xla(x64: None) -> None:
    x = FIX["erfinv_x"]
    got = _np(gaussian.erfinv(Tensor(x)))
    assert _ulps(got, FIX["erfinv"]).max() <= 2
    # against SciPy's erfinv: float64-accurate for |x| < 0.998 (w = -log1p(-x^2) < 6.25);
    # beyond, XLA's (and so fgrad's) w inherits the rounding of x^2: relative 1e-10 at worst
    ref = special.erfinv(x)
    rel = np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300)
    central = np.abs(x) < 0.998
    assert rel[central].max() < 1e-14 and rel.max() < 2e-10
    ends = _np(gaussian.erfinv(Tensor(np.array([-1.0, 0.0, 1.0]))))
    np.testing.assert_array_equal(ends, [-np.inf, 0.0, np.inf])


def test_log1p_follows_xla_not_libm(x64: None) -> None:
    x = FIX["log1p_x"]
    got = _np(gaussian.log1p(Tensor(x)))
    assert _ulps(got, FIX["log1p"]).max() <= 1
    # XLA's rational strays on (-0.414, -0.293); fgrad's float64 samplers follow it there
    assert _ulps(np.log1p(x), FIX["log1p"]).max() > 50


def test_float32_and_narrower_paths_are_unchanged(x64: None) -> None:
    key = random.key(5)
    for dtype in (dtypes.float32, dtypes.float16, dtypes.bfloat16):
        for new, old, args in [(random.normal, core_random.normal, ((50,), dtype)),
                               (random.exponential, core_random.exponential, ((50,), dtype)),
                               (random.uniform, core_random.uniform, ((50,), dtype, -2, 3)),
                               (random.truncated_normal, core_random.truncated_normal,
                                (-1.0, 2.0, (50,), dtype))]:
            a, b = _np(new(key, *args)), _np(old(key, *args))
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), (new.__name__, dtype)


def test_fma_rounds_once() -> None:
    rng = np.random.default_rng(11)
    n = 400
    a = rng.uniform(-1, 1, n) * 2.0 ** rng.integers(-30, 30, n)
    b = rng.uniform(-1, 1, n) * 2.0 ** rng.integers(-30, 30, n)
    near = -(a * b) * (1 + rng.integers(-4, 5, n) * 2.0 ** -52)  # cancellation
    far = rng.uniform(-1, 1, n) * 2.0 ** rng.integers(-60, 30, n)
    c = np.where(np.arange(n) % 2 == 0, near, far)
    got = _np(gaussian.fma(Tensor(a), Tensor(b), Tensor(c)))
    want = [float(Fraction(x) * Fraction(y) + Fraction(z)) for x, y, z in zip(a, b, c)]
    np.testing.assert_array_equal(got, want)
    assert (a * b + c != np.array(want)).sum() > n // 10  # twice rounded would not do
    scalar = _np(gaussian.fma(Tensor(a), 3.7, -0.1))
    np.testing.assert_array_equal(scalar, [float(Fraction(x) * Fraction(3.7) + Fraction(-0.1))
                                           for x in a])
    big = _np(gaussian.fma(Tensor(np.array([1e300, np.inf])), 1e10, 1.0))  # twice rounded
    np.testing.assert_array_equal(big, [np.inf, np.inf])


def test_float64_uniform_bounds_keep_their_derivatives(x64: None) -> None:
    key = random.key(2)
    unit = _np(random.uniform(key, (200,), dtypes.float64))

    def total(lo: Tensor, hi: Tensor) -> Tensor:
        return random.uniform(key, (200,), dtypes.float64, lo, hi).sum()

    d_lo, d_hi = fgrad.grad(total, argnums=(0, 1))(Tensor(-1.25), Tensor(3.5))
    assert math.isclose(float(d_hi), unit.sum(), rel_tol=1e-12)
    assert math.isclose(float(d_lo), (1 - unit).sum(), rel_tol=1e-12)


def test_float64_normal_jit_and_vmap(x64: None, jit_backend: str | None) -> None:
    keys = random.split(random.key(9), 3)

    def sample(k: Tensor) -> Tensor:
        return random.truncated_normal(k, -1.5, 2.5, (40,), dtypes.float64) + random.normal(
            k, (40,), dtypes.float64)

    eager = np.stack([_np(sample(keys[i])) for i in range(3)])
    np.testing.assert_array_equal(_np(fgrad.vmap(sample)(keys)), eager)
    got = _np(fgrad.jit(sample)(keys[0]))  # compiled log/sqrt may round the last bit otherwise
    assert _ulps(got, eager[0], 1.0).max() <= 8

    def bounded(k: Tensor) -> Tensor:  # the emulated FMA: exact operations only, so exact
        return random.uniform(k, (4000,), dtypes.float64, -1.5, 2.25)

    np.testing.assert_array_equal(_np(fgrad.jit(bounded)(keys[1])), _np(bounded(keys[1])))


def test_float64_normal_moments(x64: None) -> None:
    z = _np(random.normal(random.key(4), (20000,), dtypes.float64))
    assert abs(z.mean()) < 0.03 and abs(z.var() - 1) < 0.04
    tn = _np(random.truncated_normal(random.key(4), 3.0, 8.0, (5000,), dtypes.float64))
    assert tn.min() > 3.0 and tn.max() < 8.0
    # E[Z | Z > 3] = pdf(3) / sf(3)
    want = math.exp(-4.5) / math.sqrt(2 * math.pi) / (0.5 * math.erfc(3 / math.sqrt(2)))
    assert abs(tn.mean() - want) < 0.02


def _normal_uniforms(key: Tensor, n: int) -> np.ndarray:
    """The uniforms on (-1, 1) that normal(key, (n,), float64) maps, rebuilt in NumPy from
    Tensor.rand's [0, 1) draws of the same key: u = 2 * unit + lo, clipped to [lo, 1)."""
    unit = _np(Tensor.rand(n, key=key, dtype=dtypes.float64))
    lo = np.nextafter(-1.0, 0.0)
    return np.minimum(np.maximum(unit * 2.0 + lo, lo), np.nextafter(1.0, 0.0))


def test_tensor_randn_float64_is_float64_accurate() -> None:
    # Tensor.randn / Tensor.normal go through fgrad.core.random: float64 to float64 accuracy
    # (the single-precision erfinv erred by ~1e-7 relative), without enable_x64 too
    n = 4000
    for seed in (0, 7, 123):
        key = random.key(seed)
        u = _normal_uniforms(key, n)
        ref = math.sqrt(2.0) * special.erfinv(u)
        got = _np(Tensor.randn(n, key=key, dtype=dtypes.float64))
        assert got.dtype == np.float64
        err, central = _ulps(got, ref), np.abs(u) < 0.998
        rel = np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300)
        # a few ulps, but up to 30 for |u| in [0.5, 0.66), where w = -log1p(-u^2) follows
        # XLA's log1p off its fitted interval (as JAX's samples do): relative 4e-15 at most
        stray = (np.abs(u) >= 0.5) & (np.abs(u) < 0.66)
        assert err[central & ~stray].max() <= 10 and np.median(err) <= 1
        assert rel[central].max() < 4e-15 and rel.max() < 2e-10
        # the same quantiles as SciPy's ndtri of (1 + u) / 2 (computed in float64)
        np.testing.assert_allclose(got[central], special.ndtri((1.0 + u[central]) / 2.0),
                                   rtol=1e-13, atol=1e-15)
        shifted = _np(Tensor.normal(n, mean=1.5, std=0.25, key=key, dtype=dtypes.float64))
        np.testing.assert_array_equal(shifted, got * 0.25 + 1.5)


def test_tensor_randn_float64_tails_and_core_agree(x64: None) -> None:
    # extreme uniforms (|u| -> 1 - 2^-53) stay finite and near SciPy's quantiles; the core
    # normal and fgrad.random.normal are one implementation, so they agree bit for bit
    u = np.array([np.nextafter(-1.0, 0.0), -0.9999999, -0.5, 0.0, 1e-300, 0.75, 0.999999,
                  np.nextafter(1.0, 0.0)])
    got = _np(core_random._inverse_cdf(Tensor(u), dtypes.float64))
    ref = math.sqrt(2.0) * special.erfinv(u)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ref, rtol=2e-10, atol=0)
    key = random.key(31)
    a = _np(Tensor.randn(3, 50, key=key, dtype=dtypes.float64))
    b = _np(random.normal(key, (3, 50), dtypes.float64))
    assert a.tobytes() == b.tobytes()
    c = _np(core_random.truncated_normal(key, -0.5, 3.0, (50,), dtypes.float64))
    d = _np(random.truncated_normal(key, -0.5, 3.0, (50,), dtypes.float64))
    assert _ulps(c, d, 1.0).max() <= 64  # only the uniform's scale and shift round differently


def test_float32_randn_is_still_single_precision_erfinv() -> None:
    # float32 draws are untouched: Giles' single-precision erfinv applied in float32
    key = random.key(3)
    got = _np(Tensor.randn(500, key=key, dtype=dtypes.float32))
    u = _np(core_random.uniform(key, (500,), dtypes.float32, np.nextafter(np.float32(-1), 0),
                                1.0))
    np.testing.assert_array_equal(got, _np(core_random._erfinv(Tensor(u)) * math.sqrt(2.0)))
    rel = np.abs(got - math.sqrt(2.0) * special.erfinv(u.astype(np.float64)))
    assert rel.max() > 1e-9  # float32 accurate, not float64: a float64 path would be ~1e-16
