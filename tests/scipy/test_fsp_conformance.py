"""fgrad.scipy against SciPy: special functions (values over their domains in float64 and
float32, gradients against finite differences of SciPy), linalg and stats."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.special as ss
import scipy.stats as st

import fgrad
import fgrad.scipy as fsp
from fgrad import Tensor

RNG = np.random.default_rng(11)
GRID = np.concatenate([np.linspace(-9.7, -0.05, 40), np.linspace(0.02, 40, 120)])
POS = np.linspace(0.03, 40, 120)
UNIT = np.linspace(-0.999, 0.999, 101)
PROB = np.linspace(0.001, 0.999, 101)
WIDE = np.linspace(-35, 8, 120)

# name, fgrad fn, scipy fn, inputs, float64 rtol
SPECIAL: list[tuple[str, Callable[..., Any], Callable[..., Any], tuple, float]] = [
    ("gammaln", fsp.special.gammaln, ss.gammaln, (GRID,), 1e-12),
    ("digamma", fsp.special.digamma, ss.digamma, (GRID,), 1e-11),
    ("psi", fsp.special.psi, ss.psi, (POS,), 1e-12),
    ("polygamma1", lambda x: fsp.special.polygamma(1, x), lambda x: ss.polygamma(1, x),
     (GRID,), 1e-11),
    ("gamma", fsp.special.gamma, ss.gamma, (np.linspace(-4.3, 20, 50),), 1e-11),
    ("betaln", fsp.special.betaln, ss.betaln, (POS[:40], POS[40:80]), 1e-11),
    ("erf", fsp.special.erf, ss.erf, (WIDE / 5,), 1e-13),
    ("erfc", fsp.special.erfc, ss.erfc, (np.linspace(-3, 26, 100),), 1e-12),
    ("erfinv", fsp.special.erfinv, ss.erfinv, (UNIT,), 1e-12),
    ("expit", fsp.special.expit, ss.expit, (WIDE,), 1e-13),
    ("logit", fsp.special.logit, ss.logit, (PROB,), 1e-12),
    ("ndtr", fsp.special.ndtr, ss.ndtr, (WIDE,), 1e-12),
    ("ndtri", fsp.special.ndtri, ss.ndtri, (PROB,), 1e-13),
    ("log_ndtr", fsp.special.log_ndtr, ss.log_ndtr, (WIDE,), 1e-12),
    ("xlogy", fsp.special.xlogy, ss.xlogy, (np.array([0.0, 1.5, -2.0, 0.0]),
                                            np.array([0.0, 2.0, 3.0, 5.0])), 1e-14),
    ("xlog1py", fsp.special.xlog1py, ss.xlog1py, (np.array([0.0, 1.5, -2.0]),
                                                  np.array([-1.0, 2.0, 0.5])), 1e-14),
    ("entr", fsp.special.entr, ss.entr, (np.array([0.0, 0.5, 2.0, -1.0]),), 1e-14),
    ("softmax", lambda x: fsp.special.softmax(x, axis=0), lambda x: ss.softmax(x, axis=0),
     (RNG.normal(size=(4, 3)),), 1e-13),
    ("log_softmax", lambda x: fsp.special.log_softmax(x, axis=-1),
     lambda x: ss.log_softmax(x, axis=-1), (RNG.normal(size=(4, 3)) * 50,), 1e-13),
    ("logsumexp", lambda x: fsp.special.logsumexp(x, axis=(0, -1)),
     lambda x: ss.logsumexp(x, axis=(0, -1)), (RNG.normal(size=(2, 3, 4)) * 30,), 1e-13),
    ("logsumexp-keepdims", lambda x: fsp.special.logsumexp(x, axis=1, keepdims=True),
     lambda x: ss.logsumexp(x, axis=1, keepdims=True), (RNG.normal(size=(2, 3)),), 1e-13),
    ("logsumexp-b", lambda x, b: fsp.special.logsumexp(x, axis=-1, b=b),
     lambda x, b: ss.logsumexp(x, axis=-1, b=b), (RNG.normal(size=(3, 4)),
                                                  RNG.uniform(0, 2, size=(4,))), 1e-13),
    ("logsumexp-sign", lambda x, b: fsp.special.logsumexp(x, -1, b, return_sign=True),
     lambda x, b: ss.logsumexp(x, -1, b, return_sign=True),
     (RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))), 1e-12),
]


def _close(got: Any, want: Any, rtol: float) -> None:
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            _close(g, w, rtol)
        return
    np.testing.assert_allclose(got.numpy(), want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("name,fn,ref,args,rtol", SPECIAL, ids=[s[0] for s in SPECIAL])
def test_special_values(name: str, fn: Any, ref: Any, args: tuple, rtol: float) -> None:
    _close(fn(*args), ref(*args), rtol)
    small = [a.astype(np.float32) for a in args]
    out = fn(*small)
    outs = out if isinstance(out, tuple) else (out,)
    assert all(o.dtype == fgrad.dtypes.float32 for o in outs), f"{name}: float32 in, out"
    rounded = [a.astype(np.float64) for a in small]
    _close(out, ref(*rounded), 3e-5 if name not in ("erfc", "ndtri", "gamma") else 1e-4)


GRAD_SPECIAL = ["gammaln", "digamma", "polygamma1", "betaln", "erfinv", "erfc", "logit",
                "ndtr", "ndtri", "log_ndtr", "xlogy", "softmax", "log_softmax", "logsumexp",
                "logsumexp-b", "gamma"]


def _fd_grad(ref: Callable[..., Any], args: tuple, k: int, w: np.ndarray) -> np.ndarray:
    x = args[k]
    fd = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        for sgn in (1, -1):
            moved = list(args)
            moved[k] = x.copy()
            moved[k][idx] += sgn * 1e-6
            fd[idx] += sgn * np.sum(ref(*moved) * w) / 2e-6
    return fd


@pytest.mark.parametrize("name", GRAD_SPECIAL)
def test_special_gradients(name: str) -> None:
    _, fn, ref, args, _ = next(s for s in SPECIAL if s[0] == name)
    args = tuple(a[::7] if a.ndim == 1 and a.size > 30 else a for a in args)
    if name == "xlogy":
        args = (args[0], args[1] + 0.5)
    if name == "gamma":  # keep values O(1): finite differences of a sum with 1e17 terms fail
        args = (np.linspace(-4.3, 5.0, 9),)
    w = np.random.default_rng(0).normal(size=np.shape(ref(*args)))
    grads = fgrad.grad(lambda *t: (fn(*t) * Tensor(w)).sum(), argnums=tuple(range(len(args))))(
        *[Tensor(a) for a in args])
    for k, g in enumerate(grads):
        np.testing.assert_allclose(g.numpy(), _fd_grad(ref, args, k, w), rtol=2e-5, atol=2e-6)


def test_second_derivatives_of_gammaln_and_erfinv() -> None:
    x = np.array([0.3, 1.7, 6.0, -2.5])
    d2 = fgrad.grad(lambda t: fgrad.grad(lambda u: fsp.special.gammaln(u).sum())(t).sum())
    np.testing.assert_allclose(d2(Tensor(x)).numpy(), ss.polygamma(1, x), rtol=1e-10)
    y = np.array([-0.7, 0.1, 0.95])
    d2e = fgrad.grad(lambda t: fgrad.grad(lambda u: fsp.special.erfinv(u).sum())(t).sum())
    inv = ss.erfinv(y)
    want = (np.pi / 2) * inv * np.exp(2 * inv ** 2)  # d/dy sqrt(pi)/2 exp(erfinv(y)^2)
    np.testing.assert_allclose(d2e(Tensor(y)).numpy(), want, rtol=1e-9)


def test_erfinv_far_tails() -> None:
    q = np.logspace(-16, -1, 60)
    for y in (1 - q, q - 1):
        np.testing.assert_allclose(fsp.special.erfinv(y).numpy(), ss.erfinv(y), rtol=2e-15)
    tiny = np.logspace(-307, -1, 80)
    for p in (tiny, 1 - q):
        np.testing.assert_allclose(fsp.special.ndtri(p).numpy(), ss.ndtri(p), rtol=5e-15)
    edges = fsp.special.ndtri(np.array([0.0, 1.0, 1.5])).numpy()
    assert edges[0] == -np.inf and edges[1] == np.inf and np.isnan(edges[2])


def test_special_edges() -> None:
    edge = fsp.special.erfinv(np.array([-1.0, 1.0, 1.5])).numpy()
    assert edge[0] == -np.inf and edge[1] == np.inf and np.isnan(edge[2])
    assert fsp.special.gammaln(np.array([0.0, -2.0])).numpy().tolist() == [np.inf, np.inf]
    poles = fsp.special.gamma(np.array([0.0, -1.0, -3.0, 2.0])).numpy()
    np.testing.assert_array_equal(poles, ss.gamma(np.array([0.0, -1.0, -3.0, 2.0])))
    out = fsp.special.logsumexp(np.array([-np.inf, -np.inf])).numpy()
    assert out == -np.inf
    assert np.isnan(fsp.special.logsumexp(np.array([0.0, 1.0]), b=np.array([1.0, -1.0])).item())


# ---------------------------------------------------------------------------- linalg

A = RNG.normal(size=(4, 4)) + 4 * np.eye(4)
SPD = A @ A.T
B = RNG.normal(size=(4, 2))


def test_linalg_values() -> None:
    L = sla.cholesky(SPD, lower=True)
    np.testing.assert_allclose(fsp.linalg.cholesky(SPD).numpy(), sla.cholesky(SPD), atol=1e-12)
    np.testing.assert_allclose(fsp.linalg.cholesky(SPD, lower=True).numpy(), L, atol=1e-12)
    for lower in (True, False):
        got = fsp.linalg.cho_solve(fsp.linalg.cho_factor(SPD, lower=lower), B)
        np.testing.assert_allclose(got.numpy(), sla.cho_solve(sla.cho_factor(SPD, lower), B))
    for trans in (0, 1, "T"):
        for unit in (False, True):
            got = fsp.linalg.solve_triangular(L, B, trans=trans, lower=True,
                                              unit_diagonal=unit)
            want = sla.solve_triangular(L, B, trans=trans, lower=True, unit_diagonal=unit)
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)
    np.testing.assert_allclose(fsp.linalg.solve(A, B).numpy(), sla.solve(A, B), rtol=1e-10)
    np.testing.assert_allclose(fsp.linalg.solve(SPD, B, assume_a="pos").numpy(),
                               sla.solve(SPD, B, assume_a="pos"), rtol=1e-10)
    np.testing.assert_allclose(fsp.linalg.inv(A).numpy(), sla.inv(A), rtol=1e-10)
    np.testing.assert_allclose(fsp.linalg.det(A).numpy(), sla.det(A), rtol=1e-10)
    lu, piv = fsp.linalg.lu_factor(A)
    wlu, wpiv = sla.lu_factor(A)
    np.testing.assert_allclose(lu.numpy(), wlu, rtol=1e-12)
    np.testing.assert_array_equal(piv.numpy(), wpiv)
    for trans in (0, 1):
        np.testing.assert_allclose(fsp.linalg.lu_solve((lu, piv), B, trans=trans).numpy(),
                                   sla.lu_solve((wlu, wpiv), B, trans=trans), rtol=1e-10)
    w = fsp.linalg.eigh(SPD, eigvals_only=True)
    np.testing.assert_allclose(w.numpy(), sla.eigh(SPD, eigvals_only=True), rtol=1e-12)
    q, r = fsp.linalg.qr(A[:, :3], mode="economic")
    np.testing.assert_allclose((q @ r).numpy(), A[:, :3], atol=1e-12)
    assert fsp.linalg.qr(A[:, :3])[0].shape == (4, 4)
    s = fsp.linalg.svd(A, compute_uv=False)
    np.testing.assert_allclose(s.numpy(), sla.svd(A, compute_uv=False), rtol=1e-12)


@pytest.mark.parametrize("scale", [1e-3, 0.5, 3.0, 40.0])
def test_expm(scale: float) -> None:
    m = RNG.normal(size=(2, 5, 5)) * scale
    want = np.stack([sla.expm(a) for a in m])
    np.testing.assert_allclose(fsp.linalg.expm(m).numpy(), want, rtol=1e-9,
                               atol=1e-12 * np.abs(want).max())


def test_linalg_gradients() -> None:
    w = RNG.normal(size=(4, 4))
    cases = [(lambda a: sla.expm(a * 0.5), lambda a: fsp.linalg.expm(a * 0.5)),
             (lambda a: sla.cho_solve(sla.cho_factor(a @ a.T), B[:, 0]).sum() * w,
              lambda a: fsp.linalg.cho_solve(fsp.linalg.cho_factor(a @ a.T), B[:, 0]).sum() *
              Tensor(w)),
             (lambda a: sla.lu_solve(sla.lu_factor(a), w),
              lambda a: fsp.linalg.lu_solve(fsp.linalg.lu_factor(a), w))]
    for ref, fn in cases:
        weights = RNG.normal(size=(4, 4))
        g = fgrad.grad(lambda t: (fn(t) * Tensor(weights)).sum())(Tensor(A)).numpy()
        np.testing.assert_allclose(g, _fd_grad(ref, (A,), 0, weights), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------- stats

X = RNG.normal(size=(3, 4)) * 2


@pytest.mark.parametrize("name", ["logpdf", "pdf", "cdf", "logcdf", "sf"])
def test_norm(name: str) -> None:
    loc, scale = RNG.normal(size=4), RNG.uniform(0.5, 2, size=(3, 1))
    got = getattr(fsp.stats.norm, name)(X, loc, scale)
    np.testing.assert_allclose(got.numpy(), getattr(st.norm, name)(X, loc, scale), rtol=1e-12)
    np.testing.assert_allclose(getattr(fsp.stats.norm, name)(X).numpy(),
                               getattr(st.norm, name)(X), rtol=1e-12)


def test_other_distributions() -> None:
    q = np.linspace(0.01, 0.99, 9)
    np.testing.assert_allclose(fsp.stats.norm.ppf(q, 1.0, 2.0).numpy(),
                               st.norm.ppf(q, 1.0, 2.0), rtol=1e-10)
    cov = SPD / 4
    x = RNG.normal(size=(5, 4))
    np.testing.assert_allclose(fsp.stats.multivariate_normal.logpdf(x, np.ones(4), cov).numpy(),
                               st.multivariate_normal.logpdf(x, np.ones(4), cov), rtol=1e-12)
    np.testing.assert_allclose(fsp.stats.multivariate_normal.logpdf(x[0], np.ones(4),
                                                                    cov).numpy(),
                               st.multivariate_normal.logpdf(x[0], np.ones(4), cov), rtol=1e-12)
    k = np.array([0.0, 1.0, 1.0, 2.0])
    p = np.array([0.3, 0.3, 0.9, 0.5])
    np.testing.assert_allclose(fsp.stats.bernoulli.logpmf(k, p).numpy(),
                               st.bernoulli.logpmf(k, p), rtol=1e-12)
    u = np.array([-1.0, 0.5, 2.9, 3.5])
    np.testing.assert_allclose(fsp.stats.uniform.logpdf(u, 0.0, 3.0).numpy(),
                               st.uniform.logpdf(u, 0.0, 3.0), rtol=1e-12)
    np.testing.assert_allclose(fsp.stats.t.logpdf(X, 2.5, 0.3, 1.5).numpy(),
                               st.t.logpdf(X, 2.5, 0.3, 1.5), rtol=1e-11)


def test_stats_gradients() -> None:
    mu = RNG.normal(size=4)
    cov = SPD / 4
    x = RNG.normal(size=(3, 4))
    g = fgrad.grad(lambda m: fsp.stats.multivariate_normal.logpdf(x, m, cov).sum())(Tensor(mu))
    want = np.linalg.solve(cov, (x - mu).sum(0))
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-10)
    df = np.array([1.5, 4.0])
    gd = fgrad.grad(lambda d: fsp.stats.t.logpdf(0.7, d).sum())(Tensor(df)).numpy()
    fd = (st.t.logpdf(0.7, df + 1e-6) - st.t.logpdf(0.7, df - 1e-6)) / 2e-6
    np.testing.assert_allclose(gd, fd, rtol=1e-6)


def _special_functions() -> list[str]:
    import inspect

    import fgrad.scipy.special as fsp_special
    names = []
    for name, fn in vars(fsp_special).items():
        if name.startswith("_") or not inspect.isfunction(fn):
            continue
        if fn.__module__ == fsp_special.__name__:
            names.append(name)
    return sorted(names)


@pytest.mark.parametrize("name", _special_functions())
def test_special_function_of_float32_stays_float32_without_warnings(name: str) -> None:
    """No float64 intermediate leaks into a float32 call (ndtri's edge values once did)."""
    import inspect
    import warnings

    import fgrad.scipy.special as fsp_special
    fn = getattr(fsp_special, name)
    required = [p for p in inspect.signature(fn).parameters.values()
                if p.default is inspect.Parameter.empty and p.kind in (
                    inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    x = np.array([0.25, 0.5, 0.75], np.float32)
    args = [1 if p.name == "n" else x for p in required]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = fn(*args)
    outs = out if isinstance(out, tuple) else (out,)
    assert all(o.dtype == fgrad.dtypes.float32 for o in outs), [o.dtype for o in outs]


def test_incomplete_gamma_beta_and_i0e_are_in_special() -> None:
    a, x = np.array([0.5, 2.0, 9.0]), np.array([0.3, 2.5, 7.0])
    np.testing.assert_allclose(fsp.special.gammainc(a, x).numpy(), ss.gammainc(a, x), rtol=1e-10)
    np.testing.assert_allclose(fsp.special.gammaincc(a, x).numpy(), ss.gammaincc(a, x),
                               rtol=1e-10)
    np.testing.assert_allclose(fsp.special.betainc(a, 2.0, x / 10).numpy(),
                               ss.betainc(a, 2.0, x / 10), rtol=1e-10)
    np.testing.assert_allclose(fsp.special.i0e(x).numpy(), ss.i0e(x), rtol=1e-10)


def test_entr_of_float64_stays_float64_without_warnings() -> None:
    import warnings

    x = np.array([0.0, 0.5, 2.0, -1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = fsp.special.entr(x)
    assert got.dtype == fgrad.dtypes.float64
    np.testing.assert_array_equal(got.numpy(), ss.entr(x))
