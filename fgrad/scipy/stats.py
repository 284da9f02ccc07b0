"""fgrad.scipy.stats: log densities and distribution functions (jax.scipy.stats' names).

Here: norm, multivariate_normal, bernoulli, uniform, t. The others live in rooms of their
own and are re-exported: stats_continuous (expon, laplace, cauchy, logistic, gumbel_l,
gumbel_r, pareto, truncnorm), stats_shape (gamma, chi2, beta, gennorm, vonmises,
wrapcauchy, dirichlet) and stats_discrete (poisson, binom, geom, nbinom, betabinom,
multinomial)."""
from __future__ import annotations

import math
import sys
from types import SimpleNamespace
from typing import Any

from fgrad.core.prims import log1p_p
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, asarray, float_of
from fgrad.numpy.elementwise import same_shape_float
from fgrad.scipy import special as _sp
from fgrad.scipy.stats_continuous import (cauchy, expon, gumbel_l, gumbel_r, laplace, logistic,
                                          pareto, truncnorm)
from fgrad.scipy.stats_discrete import betabinom, binom, geom, multinomial, nbinom, poisson
from fgrad.scipy.stats_shape import beta, chi2, dirichlet, gamma, gennorm, vonmises, wrapcauchy

__all__ = ["bernoulli", "beta", "betabinom", "binom", "cauchy", "chi2", "dirichlet", "expon",
           "gamma", "gennorm", "geom", "gumbel_l", "gumbel_r", "laplace", "logistic",
           "multinomial", "multivariate_normal", "nbinom", "norm", "pareto", "poisson", "t",
           "truncnorm", "uniform", "vonmises", "wrapcauchy"]

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


def _norm_logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log P(X > x), accurate in the right tail."""
    return _sp.log_ndtr(-_std(x, loc, scale)[0])


def _norm_isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The inverse survival function: ppf(1 - q)."""
    p, s = same_shape_float(q, scale)
    return _sp.ndtri(1.0 - p) * s + loc


norm = SimpleNamespace(logpdf=_norm_logpdf, pdf=_norm_pdf, cdf=_norm_cdf,
                       logcdf=_norm_logcdf, ppf=_norm_ppf, sf=_norm_sf, logsf=_norm_logsf,
                       isf=_norm_isf)


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


def _bernoulli_cdf(k: ArrayLike, p: ArrayLike) -> Tensor:
    """P(K <= k): 0 below 0, 1 - p on [0, 1), 1 from 1; NaN for p outside [0, 1]."""
    kk, pp = same_shape_float(k, p)
    bad = kk.isnan() | pp.isnan() | (pp < 0) | (pp > 1)
    return bad.where(math.nan, (kk < 0).where(0.0, (kk < 1).where(1.0 - pp, 1.0)))


def _bernoulli_ppf(q: ArrayLike, p: ArrayLike) -> Tensor:
    """The quantile function: 0 for q <= 1 - p, else 1; NaN for q or p outside [0, 1]."""
    qq, pp = same_shape_float(q, p)
    bad = qq.isnan() | pp.isnan() | (pp < 0) | (pp > 1) | (qq < 0) | (qq > 1)
    return bad.where(math.nan, (qq > 1.0 - pp).cast(qq.dtype))


bernoulli = SimpleNamespace(logpmf=_bernoulli_logpmf, pmf=_bernoulli_pmf, cdf=_bernoulli_cdf,
                            ppf=_bernoulli_ppf)


def _uniform_logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """-log(scale) on [loc, loc + scale], -inf elsewhere."""
    xs, s = same_shape_float(x, scale)
    xs, m = same_shape_float(xs, loc)
    s, _ = same_shape_float(s, m)
    inside = (xs >= m) & (xs <= m + s)
    return inside.where(-s.log(), -math.inf)


def _uniform_pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """1 / scale on [loc, loc + scale], 0 elsewhere."""
    return _uniform_logpdf(x, loc, scale).exp()


def _uniform_cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """(x - loc) / scale clipped to [0, 1]."""
    xs, s = same_shape_float(x, scale)
    xs, m = same_shape_float(xs, loc)
    s, _ = same_shape_float(s, m)
    return (xs < m).where(0.0, (xs > m + s).where(1.0, (xs - m) / s))


def _uniform_ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """loc + q * scale; NaN for q outside [0, 1]."""
    qq, s = same_shape_float(q, scale)
    bad = qq.isnan() | (qq < 0) | (qq > 1)
    return bad.where(math.nan, qq * s + loc)


uniform = SimpleNamespace(logpdf=_uniform_logpdf, pdf=_uniform_pdf, cdf=_uniform_cdf,
                          ppf=_uniform_ppf)


def _t_logpdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log density of Student's t with `df` degrees of freedom."""
    z, s = _std(x, loc, scale)
    nu, z = same_shape_float(df, z)
    half = 0.5 * (nu + 1.0)
    norm_const = _sp.gammaln(half) - _sp.gammaln(0.5 * nu) - 0.5 * (nu * math.pi).log()
    return norm_const - s.log() - half * log1p_p.bind(z * z / nu)


t = SimpleNamespace(logpdf=_t_logpdf, pdf=lambda *a, **k: _t_logpdf(*a, **k).exp())


# jax.scipy.stats' distributions are modules (`import jax.scipy.stats.norm as norm`): make
# each namespace importable under its dotted name too
for _name in __all__:
    sys.modules.setdefault(f"{__name__}.{_name}", globals()[_name])
