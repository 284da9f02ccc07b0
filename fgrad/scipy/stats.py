"""fgrad.scipy.stats: log densities and distribution functions (jax.scipy.stats' names):
norm, multivariate_normal, bernoulli, uniform, t."""
from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

from fgrad.core.prims import log1p_p
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, asarray, float_of
from fgrad.numpy.elementwise import same_shape_float
from fgrad.scipy import special as _sp

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _std(x: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple[Tensor, Tensor]:
    z, s = same_shape_float(x, scale)
    z, m = same_shape_float(z, loc)
    s, _ = same_shape_float(s, m)
    return (z - m) / s, s


def _norm_logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log N(x; loc, scale^2)."""
    z, s = _std(x, loc, scale)
    return -0.5 * z * z - s.log() - _HALF_LOG_2PI


def _norm_pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """N(x; loc, scale^2)."""
    return _norm_logpdf(x, loc, scale).exp()


def _norm_cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X <= x)."""
    return _sp.ndtr(_std(x, loc, scale)[0])


def _norm_logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log P(X <= x), accurate in the left tail."""
    return _sp.log_ndtr(_std(x, loc, scale)[0])


def _norm_ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The quantile function."""
    p, s = same_shape_float(q, scale)
    return _sp.ndtri(p) * s + loc


def _norm_sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X > x)."""
    return _sp.ndtr(-_std(x, loc, scale)[0])


norm = SimpleNamespace(logpdf=_norm_logpdf, pdf=_norm_pdf, cdf=_norm_cdf,
                       logcdf=_norm_logcdf, ppf=_norm_ppf, sf=_norm_sf)


def _mvn_logpdf(x: ArrayLike, mean: ArrayLike, cov: ArrayLike,
                allow_singular: Any = None) -> Tensor:
    """log N(x; mean, cov) for x (..., d) via the Cholesky factor of cov (d, d)."""
    from fgrad.core.prims import linalg as _lp
    xs = float_of(asarray(x))
    mu = float_of(asarray(mean))
    c = float_of(asarray(cov))
    dt = (xs + mu).dtype
    xs, mu, c = xs.cast(dt), mu.cast(dt), c.cast(dt)
    if c.ndim == 0:
        c = c.reshape(1, 1)
    d = c.shape[-1]
    low = _lp.cholesky(c)
    diff = xs - mu
    batch = diff.shape[:-1]
    rhs = diff.reshape(-1, d).transpose(1, 0) if diff.ndim > 1 else diff.reshape(d, 1)
    y = _lp.triangular_solve(low, rhs, lower=True)
    maha = (y * y).sum(0).reshape(batch)
    logdet = (low * Tensor.eye(d, dtype=dt)).sum(-1).log().sum(-1)
    return -0.5 * maha - logdet - d * _HALF_LOG_2PI


multivariate_normal = SimpleNamespace(logpdf=_mvn_logpdf,
                                      pdf=lambda *a, **k: _mvn_logpdf(*a, **k).exp())


def _bernoulli_logpmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """log P(K = k) for K - loc ~ Bernoulli(p); -inf outside {0, 1}."""
    kk, pp = same_shape_float(k, p)
    kk = kk - loc
    value = _sp.xlogy(kk, pp) + _sp.xlog1py(1.0 - kk, -pp)
    return ((kk == 0) | (kk == 1)).where(value, -math.inf)


def _bernoulli_pmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """P(K = k)."""
    return _bernoulli_logpmf(k, p, loc).exp()


bernoulli = SimpleNamespace(logpmf=_bernoulli_logpmf, pmf=_bernoulli_pmf)


def _uniform_logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """-log(scale) on [loc, loc + scale], -inf elsewhere."""
    xs, s = same_shape_float(x, scale)
    xs, m = same_shape_float(xs, loc)
    s, _ = same_shape_float(s, m)
    inside = (xs >= m) & (xs <= m + s)
    return inside.where(-s.log(), -math.inf)


uniform = SimpleNamespace(logpdf=_uniform_logpdf,
                          pdf=lambda *a, **k: _uniform_logpdf(*a, **k).exp())


def _t_logpdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log density of Student's t with `df` degrees of freedom."""
    z, s = _std(x, loc, scale)
    nu, z = same_shape_float(df, z)
    half = 0.5 * (nu + 1.0)
    norm_const = _sp.gammaln(half) - _sp.gammaln(0.5 * nu) - 0.5 * (nu * math.pi).log()
    return norm_const - s.log() - half * log1p_p.bind(z * z / nu)


t = SimpleNamespace(logpdf=_t_logpdf, pdf=lambda *a, **k: _t_logpdf(*a, **k).exp())
