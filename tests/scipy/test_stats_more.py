"""fgrad.scipy.stats' distributions beyond norm/t/uniform against scipy.stats: values on
grids that cross the support's edges (float64 and float32), jax.scipy.stats' own edge
conventions, jit, vmap, and gradients (in x and in the parameters) against central
differences of SciPy."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import scipy.special as ss
import scipy.stats as st

import fgrad
import fgrad.scipy.stats as fs
from fgrad import Tensor
from fgrad.scipy import _stats_math

X = np.concatenate([np.linspace(-3, 12, 31), [0.0, 1.0, 1e-8, 2.5]])
Q = np.array([0.0, 1e-6, 0.01, 0.3, 0.5, 0.9, 1 - 1e-6, 1.0])
K = np.arange(-2.0, 16.0)
CIRCLE = np.linspace(-np.pi, np.pi, 21)
DISCRETE = {"poisson", "binom", "geom", "nbinom", "betabinom", "bernoulli"}

# name, parameter sets (shape parameters, then loc and scale), the x grid
CASES: list[tuple[str, list[tuple[float, ...]], np.ndarray]] = [
    ("expon", [(), (1.5, 2.0)], X),
    ("laplace", [(), (0.5, 2.0)], X),
    ("cauchy", [(), (0.5, 2.0)], X),
    ("logistic", [(), (0.5, 2.0)], X),
    ("gumbel_l", [(), (0.5, 2.0)], X),
    ("gumbel_r", [(), (0.5, 2.0)], X),
    ("pareto", [(2.5,), (0.7, 0.5, 2.0)], X),
    ("truncnorm", [(-1.0, 2.0), (0.5, 3.0, 1.0, 2.0), (-5.0, -3.0), (3.0, 9.0)], X),
    ("gamma", [(0.5,), (3.0, 1.0, 2.0), (40.0,)], X),
    ("chi2", [(1.0,), (2.0,), (5.5, 0.5, 2.0)], X),
    ("beta", [(0.5, 0.5), (2.0, 5.0, -1.0, 4.0), (30.0, 3.0, 0.0, 10.0)], X),
    ("gennorm", [(0.5,), (1.0,), (2.0,), (5.0,)], X),
    ("vonmises", [(0.5,), (4.0,), (80.0,)], CIRCLE),
    ("wrapcauchy", [(0.3,), (0.9,)], np.concatenate([CIRCLE, CIRCLE + np.pi])),
    ("poisson", [(0.5,), (4.0,), (30.0, 1.0)], np.concatenate([K, [2.5]])),
    ("binom", [(10.0, 0.3), (12.0, 0.7, 2.0), (5.0, 0.0), (5.0, 1.0)], K),
    ("geom", [(0.3,), (1.0,), (0.5, 2.0)], K),
    ("nbinom", [(3.0, 0.4), (0.5, 0.9, 1.0)], K),
    ("betabinom", [(10.0, 2.0, 3.0), (6.0, 0.5, 0.5, 1.0)], K),
    ("norm", [(), (1.0, 2.0)], X),
    ("uniform", [(), (1.0, 3.0)], X),
    ("bernoulli", [(0.3,)], K),
]
# where JAX's convention differs from SciPy's, fgrad follows JAX (tested in test_jax_edges)
SKIP_Q = {("cauchy", 0.0), ("cauchy", 1.0), ("gumbel_l", 0.0), ("gumbel_l", 1.0),
          ("gumbel_r", 0.0), ("gumbel_r", 1.0), ("bernoulli", 0.0)}


def _functions(name: str) -> list[str]:
    return sorted(k for k in vars(getattr(fs, name)) if not k.startswith("_"))


def _grid(name: str, fn: str, grid: np.ndarray) -> np.ndarray:
    if fn in ("ppf", "isf"):
        return np.array([q for q in Q if (name, q) not in SKIP_Q])
    return grid


PARAMS = [(name, fn, params, grid) for name, plist, grid in CASES for fn in _functions(name)
          for params in plist if fn != "entropy"]


@pytest.mark.parametrize("name,fn,params,grid", PARAMS,
                         ids=[f"{p[0]}.{p[1]}{p[2]}" for p in PARAMS])
def test_values_float64(name: str, fn: str, params: tuple, grid: np.ndarray) -> None:
    g = _grid(name, fn, grid)
    got = getattr(getattr(fs, name), fn)(g, *params)
    want = getattr(getattr(st, name), fn)(g, *params)
    rtol = 1e-6 if (name, fn) in {("cauchy", "ppf"), ("cauchy", "isf")} else 1e-8
    np.testing.assert_allclose(got.numpy(), want, rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_values_float32(name: str) -> None:
    """float32 in, float32 out, no float64 promotion warning, close to SciPy."""
    _, plist, grid = next(c for c in CASES if c[0] == name)
    params = plist[-1] if name not in ("binom", "geom") else plist[0]
    for fn in _functions(name):
        if fn == "entropy":
            continue
        g = _grid(name, fn, grid).astype(np.float32)
        if fn in ("ppf", "isf"):   # float32 quantiles near 0 and 1 are ill-conditioned
            g = np.array([0.01, 0.3, 0.5, 0.9], np.float32)
        if name == "wrapcauchy":   # float32(2 pi) > 2 pi: inside in float32, outside in SciPy
            g = g[:-1]
        with warnings.catch_warnings():
            warnings.simplefilter("error", fgrad.Float64PromotionWarning)
            out = getattr(getattr(fs, name), fn)(g, *[np.float32(p) for p in params])
            if fn in ("logpdf", "logpmf"):   # Python-float parameters are weakly typed
                weak = getattr(getattr(fs, name), fn)(g, *params)
                assert weak.dtype == fgrad.dtypes.float32, fn
        assert out.dtype == fgrad.dtypes.float32, fn
        want = getattr(getattr(st, name), fn)(g.astype(np.float64), *params)
        finite = np.isfinite(want) & (np.abs(want) < 80)   # log-values float32 can hold
        np.testing.assert_allclose(out.numpy()[finite], want[finite], rtol=2e-4, atol=2e-5,
                                   err_msg=f"{name}.{fn}")


def test_poisson_entropy() -> None:
    mu = np.array([[0.0, 0.3, 5.0], [50.0, 150.0, 900.0]])
    np.testing.assert_allclose(fs.poisson.entropy(mu).numpy(), st.poisson.entropy(mu),
                               rtol=1e-8)
    assert fs.poisson.entropy(mu, np.zeros((4, 1, 1))).shape == (4, 2, 3)


def test_dirichlet_and_multinomial() -> None:
    rng = np.random.default_rng(3)
    alpha = np.array([0.5, 2.0, 3.0])
    x = rng.dirichlet(alpha, size=5).T
    for xs in (x, x[:2], x[:, 0]):
        np.testing.assert_allclose(fs.dirichlet.logpdf(xs, alpha).numpy(),
                                   st.dirichlet.logpdf(xs, alpha), rtol=1e-10)
    np.testing.assert_allclose(fs.dirichlet.pdf(x, alpha).numpy(), st.dirichlet.pdf(x, alpha),
                               rtol=1e-10)
    off = fs.dirichlet.logpdf(np.array([[0.2, 0.0], [0.2, 0.5], [0.7, 0.5]]), alpha).numpy()
    assert off[0] == -np.inf and off[1] == -np.inf   # sums to 1.1; a zero component
    with pytest.raises(ValueError, match="x must have 3 or 2"):
        fs.dirichlet.logpdf(np.ones((4, 2)) / 4, alpha)
    p = np.array([0.2, 0.5, 0.3])
    counts = np.array([[1, 2, 3], [0, 0, 6], [1, 1, 1]])
    got = fs.multinomial.logpmf(counts, 6, p).numpy()
    want = st.multinomial.logpmf(counts, 6, p)
    np.testing.assert_allclose(got[:2], want[:2], rtol=1e-12)
    assert got[2] == -np.inf
    np.testing.assert_allclose(fs.multinomial.pmf(counts[0], 6, p).numpy(),
                               st.multinomial.pmf(counts[0], 6, p), rtol=1e-12)
    with pytest.raises(ValueError, match="integer"):
        fs.multinomial.logpmf(counts.astype(np.float64), 6, p)


def test_jax_edges() -> None:
    """JAX's conventions where they differ from SciPy's, and invalid parameters."""
    nan, inf = np.nan, np.inf
    cases: list[tuple[Any, Any]] = [
        (fs.gamma.logpdf(np.array([-1.0, 0.0]), 2.0), [-inf, -inf]),
        (fs.beta.logpdf(0.5, np.array([0.0, 1.0, 1.0]), np.array([1.0, -1.0, 1.0]),
                        0.0, np.array([1.0, 1.0, -1.0])), [nan, nan, nan]),
        (fs.beta.logpdf(np.array([-0.1, 1.1]), 2.0, 2.0), [-inf, -inf]),
        (fs.vonmises.logpdf(0.3, np.array([0.0, -1.0])), [nan, nan]),
        (fs.wrapcauchy.logpdf(np.array([1.0, 1.0, -0.1, 7.0]), np.array([0.0, 1.0, 0.5, 0.5])),
         [nan, nan, -inf, -inf]),
        (fs.gumbel_r.logpdf(0.3, 0.0, -1.0), nan),
        (fs.gumbel_l.ppf(np.array([0.0, 1.0, 0.5]), 0.0, 1.0)[:2], [nan, nan]),
        (fs.expon.ppf(np.array([-0.1, 1.1, nan])), [nan, nan, nan]),
        (fs.pareto.ppf(np.array([-0.1, 1.1]), 2.0), [nan, nan]),
        (fs.truncnorm.logpdf(0.5, 2.0, 1.0), nan),
        (fs.truncnorm.logpdf(np.array([-2.0, 3.0]), -1.0, 2.0), [-inf, -inf]),
        (fs.truncnorm.logcdf(np.array([-2.0, 3.0]), -1.0, 2.0), [-inf, 0.0]),
        (fs.betabinom.logpmf(1.0, np.array([-1.0, 3.0]), np.array([1.0, 0.0]), 1.0),
         [nan, nan]),
        (fs.bernoulli.ppf(np.array([0.0, 0.7, 0.71, 1.2]), 0.3), [0.0, 0.0, 1.0, nan]),
        (fs.bernoulli.cdf(np.array([-1.0, 0.5, 1.0]), 0.3), [0.0, 0.7, 1.0]),
        (fs.poisson.logpmf(np.array([-1.0, 2.5]), 3.0), [-inf, -inf]),
        (fs.binom.logpmf(np.array([-1.0, 11.0]), 10.0, 0.3), [-inf, -inf]),
        (fs.geom.logpmf(0.0, 0.3), -inf),
    ]
    for got, want in cases:
        np.testing.assert_array_equal(got.numpy(), np.asarray(want, np.float64))


def test_incomplete_functions() -> None:
    """The regularized incomplete gamma and beta functions over a wide range of shapes."""
    rng = np.random.default_rng(0)
    a = rng.uniform(0.01, 500.0, 400)
    x = a * rng.uniform(0.2, 2.0, 400)
    np.testing.assert_allclose(_stats_math.gammainc(a, x).numpy(), ss.gammainc(a, x),
                               rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(_stats_math.gammaincc(a, x).numpy(), ss.gammaincc(a, x),
                               rtol=1e-10, atol=1e-14)
    b = rng.uniform(0.01, 500.0, 400)
    y = rng.uniform(0.0, 1.0, 400)
    np.testing.assert_allclose(_stats_math.betainc(a, b, y).numpy(), ss.betainc(a, b, y),
                               rtol=1e-9, atol=1e-14)
    edges_a = np.array([0.0, -1.0, 0.5, 0.5, 0.5, 2.0, 0.0])
    edges_x = np.array([1.0, 1.0, 0.0, -1.0, np.inf, 1e6, 0.0])
    np.testing.assert_array_equal(_stats_math.gammainc(edges_a, edges_x).numpy(),
                                  ss.gammainc(edges_a, edges_x))
    ba, bb = np.array([0.0, 1.0, -1.0, 2.0, 2.0, 2.0, 0.0]), np.array([1.0, 0, 1, 3, 3, 3, 0])
    bx = np.array([0.5, 0.5, 0.5, 0.0, 1.0, 1.1, 0.5])
    np.testing.assert_array_equal(_stats_math.betainc(ba, bb, bx).numpy(),
                                  ss.betainc(ba, bb, bx))
    z = np.concatenate([np.linspace(-30, 30, 61), [700.0]])
    np.testing.assert_allclose(_stats_math.i0e(z).numpy(), ss.i0e(z), rtol=1e-14)


JIT = [("gamma", (2.0, 0.5, 1.5)), ("beta", (2.0, 3.0)), ("truncnorm", (-1.0, 2.0)),
       ("gumbel_r", (0.5,)), ("poisson", (3.0,)), ("betabinom", (10.0, 2.0, 3.0))]


@pytest.mark.parametrize("name,params", JIT, ids=[j[0] for j in JIT])
def test_jit_matches_eager(name: str, params: tuple) -> None:
    ns = getattr(fs, name)
    fns = [k for k in _functions(name) if k != "entropy"]
    x = np.array([0.0, 1.0, 2.0, 3.0]) + (0.0 if name in DISCRETE else 0.25)
    q = np.array([0.1, 0.5, 0.9])
    jitted = fgrad.jit(lambda t, u: [getattr(ns, k)(u if k in ("ppf", "isf") else t, *params)
                                     for k in fns])
    for k, out in zip(fns, jitted(x, q)):
        want = getattr(ns, k)(q if k in ("ppf", "isf") else x, *params).numpy()
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-12, atol=1e-300, err_msg=k)


def test_vmap() -> None:
    a = np.array([0.5, 2.0, 7.0])
    got = fgrad.vmap(lambda s: fs.gamma.cdf(np.array([0.5, 3.0]), s))(Tensor(a)).numpy()
    np.testing.assert_allclose(got, st.gamma.cdf(np.array([0.5, 3.0]), a[:, None]), rtol=1e-10)


# name.fn, the scipy function, arguments (each differentiated)
GRADS: list[tuple[str, Any, Any, tuple[np.ndarray, ...]]] = [
    ("gamma.logpdf", fs.gamma.logpdf, st.gamma.logpdf,
     (np.array([0.5, 2.0, 6.0]), np.array([0.7, 2.5, 9.0]), np.array([0.0, 0.2, -1.0]),
      np.array([1.0, 2.0, 0.5]))),
    ("gamma.cdf", fs.gamma.cdf, st.gamma.cdf, (np.array([0.5, 2.0, 30.0]),
                                               np.array([0.7, 2.5, 25.0]))),
    ("chi2.sf", fs.chi2.sf, st.chi2.sf, (np.array([0.5, 2.0, 9.0]), np.array([1.0, 3.5, 6.0]))),
    ("beta.logpdf", fs.beta.logpdf, st.beta.logpdf,
     (np.array([0.2, 0.5, 0.9]), np.array([0.7, 2.5, 9.0]), np.array([1.5, 0.8, 3.0]))),
    ("beta.cdf", fs.beta.cdf, st.beta.cdf,
     (np.array([0.2, 0.5, 0.9]), np.array([0.7, 2.5, 9.0]), np.array([1.5, 0.8, 3.0]))),
    ("truncnorm.logpdf", fs.truncnorm.logpdf, st.truncnorm.logpdf,
     (np.array([0.1, 1.0, 3.5]), np.array([-1.0, 0.5, 3.0]), np.array([2.0, 3.0, 4.0]))),
    ("truncnorm.logcdf", fs.truncnorm.logcdf, st.truncnorm.logcdf,
     (np.array([0.1, 1.0, 3.5]), np.array([-1.0, 0.5, 3.0]), np.array([2.0, 3.0, 4.0]))),
    ("vonmises.logpdf", fs.vonmises.logpdf, st.vonmises.logpdf,
     (np.array([0.3, -2.0, 1.0]), np.array([0.5, 4.0, 30.0]))),
    ("gennorm.cdf", fs.gennorm.cdf, st.gennorm.cdf,
     (np.array([-0.7, 0.4, 1.5]), np.array([0.8, 2.0, 4.0]))),
    ("cauchy.logpdf", fs.cauchy.logpdf, st.cauchy.logpdf,
     (np.array([-0.7, 0.4, 3.0]), np.array([0.1, 0.0, 1.0]), np.array([1.0, 0.5, 2.0]))),
    ("logistic.logpdf", fs.logistic.logpdf, st.logistic.logpdf,
     (np.array([-0.7, 0.4, 3.0]), np.array([0.1, 0.0, 1.0]), np.array([1.0, 0.5, 2.0]))),
    ("gumbel_l.logsf", fs.gumbel_l.logsf, st.gumbel_l.logsf,
     (np.array([-0.7, 0.4, 3.0]), np.array([0.1, 0.0, 1.0]), np.array([1.0, 0.5, 2.0]))),
    ("pareto.logpdf", fs.pareto.logpdf, st.pareto.logpdf,
     (np.array([1.5, 3.0, 9.0]), np.array([0.7, 2.5, 1.0]))),
    ("poisson.logpmf", lambda mu: fs.poisson.logpmf(np.array([0.0, 3.0, 7.0]), mu),
     lambda mu: st.poisson.logpmf(np.array([0.0, 3.0, 7.0]), mu), (np.array([0.5, 2.0, 9.0]),)),
    ("binom.logpmf", lambda n, p: fs.binom.logpmf(np.array([0.0, 3.0, 7.0]), n, p),
     lambda n, p: ss.gammaln(n + 1) - ss.gammaln(np.array([1.0, 4.0, 8.0])) -
     ss.gammaln(n - np.array([0.0, 3.0, 7.0]) + 1) + np.array([0.0, 3.0, 7.0]) * np.log(p) +
     (n - np.array([0.0, 3.0, 7.0])) * np.log1p(-p),
     (np.array([4.0, 5.5, 10.0]), np.array([0.2, 0.5, 0.7]))),
    ("nbinom.logpmf", lambda n, p: fs.nbinom.logpmf(np.array([0.0, 3.0, 7.0]), n, p),
     lambda n, p: st.nbinom.logpmf(np.array([0.0, 3.0, 7.0]), n, p),
     (np.array([0.5, 2.5, 10.0]), np.array([0.2, 0.5, 0.7]))),
    ("betabinom.logpmf", lambda a, b: fs.betabinom.logpmf(np.array([0.0, 3.0, 7.0]), 8.0, a, b),
     lambda a, b: st.betabinom.logpmf(np.array([0.0, 3.0, 7.0]), 8.0, a, b),
     (np.array([0.5, 2.5, 10.0]), np.array([0.7, 1.5, 4.0]))),
]


def _central(ref: Any, args: tuple[np.ndarray, ...], k: int) -> np.ndarray:
    """d/d args[k] of sum(ref(*args)), elementwise (each argument's entries are separate)."""
    out = np.zeros_like(args[k])
    for i in range(args[k].size):
        h = 1e-6 * max(1.0, abs(args[k][i]))
        hi, lo = [a.copy() for a in args], [a.copy() for a in args]
        hi[k][i] += h
        lo[k][i] -= h
        out[i] = (np.sum(ref(*hi)) - np.sum(ref(*lo))) / (2 * h)
    return out


@pytest.mark.parametrize("name,fn,ref,args", GRADS, ids=[g[0] for g in GRADS])
def test_gradients(name: str, fn: Any, ref: Any, args: tuple[np.ndarray, ...]) -> None:
    grads = fgrad.grad(lambda *t: fn(*t).sum(), argnums=tuple(range(len(args))))(
        *[Tensor(a) for a in args])
    for k, g in enumerate(grads):
        np.testing.assert_allclose(g.numpy(), _central(ref, args, k), rtol=2e-6, atol=2e-7,
                                   err_msg=f"{name}: argument {k}")


def test_gradients_stay_finite_outside_the_support() -> None:
    x = Tensor(np.array([-1.0, 0.0, 0.5, 2.0]))
    for fn in (lambda t: fs.gamma.logpdf(t, 2.0), lambda t: fs.gamma.cdf(t, 2.0),
               lambda t: fs.beta.cdf(t, 2.0, 3.0), lambda t: fs.expon.cdf(t),
               lambda t: fs.pareto.logpdf(t + 0.6, 2.0), lambda t: fs.laplace.cdf(t * 400),
               lambda t: fs.truncnorm.logcdf(t, -0.5, 1.0),
               lambda t: fs.poisson.logpmf(np.array([0.0, 1.0, 2.0, 3.0]), t + 1.0)):
        def finite_part(t: Tensor, fn: Any = fn) -> Tensor:
            y = fn(t)
            return y.isfinite().where(y, 0.0).sum()
        g = fgrad.grad(finite_part)(x)
        assert np.isfinite(g.numpy()).all(), g


def test_distributions_import_as_modules_like_jax() -> None:
    """`import jax.scipy.stats.norm as norm` (JAX's examples do) ports as is."""
    import importlib

    import scipy.stats as st

    import fgrad.scipy.stats.norm as norm_module
    gamma_module = importlib.import_module("fgrad.scipy.stats.gamma")
    np.testing.assert_allclose(norm_module.logpdf(np.array([0.5])).numpy(),
                               st.norm.logpdf(0.5), rtol=1e-6)
    np.testing.assert_allclose(gamma_module.logpdf(np.array([1.5]), 2.0).numpy(),
                               st.gamma.logpdf(1.5, 2.0), rtol=1e-6)
