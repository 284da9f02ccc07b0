"""jax.scipy.stats' distributions with shape parameters: gamma, chi2, beta, gennorm (their
distribution functions use the incomplete gamma and beta functions), the circular vonmises
and wrapcauchy, and dirichlet.

Each name is a namespace with JAX's functions and arguments. As in JAX: log densities are
-inf outside the support and NaN for invalid parameters where JAX checks them (beta's
a, b, scale <= 0; vonmises' kappa <= 0; wrapcauchy's c outside (0, 1)); CDFs clamp x to
the support first.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

from fgrad.core.dtypes import promote as promote_dtypes
from fgrad.core.prims import log1p_p
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike
from fgrad.scipy import special as _sp
from fgrad.scipy._stats_math import betainc, gammainc, gammaincc, i0e, promote

_LOG_2PI = math.log(2 * math.pi)


# ---------------------------------------------------------------------------- gamma

def _gamma_logpdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0,
                  scale: ArrayLike = 1) -> Tensor:
    """log density of the gamma distribution with shape a; -inf below loc."""
    x, a, loc, scale = promote(x, a, loc, scale)
    ok = x >= loc
    y = ok.where((x - loc) / scale, 1.0)
    return ok.where(_sp.xlogy(a - 1.0, y) - y - _sp.gammaln(a) - scale.log(), -math.inf)


def _gamma_pdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The density."""
    return _gamma_logpdf(x, a, loc, scale).exp()


def _gamma_cdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X <= x) = gammainc(a, (x - loc) / scale)."""
    x, a, loc, scale = promote(x, a, loc, scale)
    return gammainc(a, ((x - loc) / scale).maximum(0.0))


def _gamma_logcdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0,
                  scale: ArrayLike = 1) -> Tensor:
    """log P(X <= x)."""
    return _gamma_cdf(x, a, loc, scale).log()


def _gamma_sf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X > x) = gammaincc(a, (x - loc) / scale)."""
    x, a, loc, scale = promote(x, a, loc, scale)
    y = (x - loc) / scale
    return (y < 0).where(1.0, gammaincc(a, y.maximum(0.0)))


def _gamma_logsf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0,
                 scale: ArrayLike = 1) -> Tensor:
    """log P(X > x)."""
    return _gamma_sf(x, a, loc, scale).log()


gamma = SimpleNamespace(logpdf=_gamma_logpdf, pdf=_gamma_pdf, cdf=_gamma_cdf,
                        logcdf=_gamma_logcdf, sf=_gamma_sf, logsf=_gamma_logsf)


# ---------------------------------------------------------------------------- chi2

def _chi2_logpdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0,
                 scale: ArrayLike = 1) -> Tensor:
    """log density of the chi-squared distribution with df degrees of freedom."""
    x, df, loc, scale = promote(x, df, loc, scale)
    below = x < loc
    y = below.where(1.0, (x - loc) / scale)
    half = 0.5 * df
    value = _sp.xlogy(half - 1.0, y) - 0.5 * y - _sp.gammaln(half) - half * math.log(2.0)
    return below.where(-math.inf, value - scale.log())


def _chi2_pdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The density."""
    return _chi2_logpdf(x, df, loc, scale).exp()


def _chi2_cdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X <= x) = gammainc(df / 2, (x - loc) / (2 scale))."""
    x, df, loc, scale = promote(x, df, loc, scale)
    return gammainc(0.5 * df, ((x - loc) / (2.0 * scale)).maximum(0.0))


def _chi2_logcdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0,
                 scale: ArrayLike = 1) -> Tensor:
    """log P(X <= x)."""
    return _chi2_cdf(x, df, loc, scale).log()


def _chi2_sf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X > x)."""
    x, df, loc, scale = promote(x, df, loc, scale)
    return gammaincc(0.5 * df, ((x - loc) / (2.0 * scale)).maximum(0.0))


def _chi2_logsf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0,
                scale: ArrayLike = 1) -> Tensor:
    """log P(X > x)."""
    return _chi2_sf(x, df, loc, scale).log()


chi2 = SimpleNamespace(logpdf=_chi2_logpdf, pdf=_chi2_pdf, cdf=_chi2_cdf, logcdf=_chi2_logcdf,
                       sf=_chi2_sf, logsf=_chi2_logsf)


# ---------------------------------------------------------------------------- beta

def _beta_logpdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
                 scale: ArrayLike = 1) -> Tensor:
    """log density of the beta distribution on [loc, loc + scale]; NaN for a, b or
    scale <= 0."""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    outside = (x < loc) | (x > loc + scale)
    y = outside.where(0.5, (x - loc) / scale)
    value = _sp.xlogy(a - 1.0, y) + _sp.xlog1py(b - 1.0, -y) - _sp.betaln(a, b) - scale.log()
    out = outside.where(-math.inf, value)
    return ((a <= 0) | (b <= 0) | (scale <= 0)).where(math.nan, out)


def _beta_pdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
              scale: ArrayLike = 1) -> Tensor:
    """The density."""
    return _beta_logpdf(x, a, b, loc, scale).exp()


def _beta_cdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
              scale: ArrayLike = 1) -> Tensor:
    """P(X <= x) = betainc(a, b, y) with y clamped to [0, 1]."""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    return betainc(a, b, ((x - loc) / scale).maximum(0.0).minimum(1.0))


def _beta_logcdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
                 scale: ArrayLike = 1) -> Tensor:
    """log P(X <= x)."""
    return _beta_cdf(x, a, b, loc, scale).log()


def _beta_sf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
             scale: ArrayLike = 1) -> Tensor:
    """P(X > x) = betainc(b, a, 1 - y)."""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    return betainc(b, a, 1.0 - ((x - loc) / scale).maximum(0.0).minimum(1.0))


def _beta_logsf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
                scale: ArrayLike = 1) -> Tensor:
    """log P(X > x)."""
    return _beta_sf(x, a, b, loc, scale).log()


beta = SimpleNamespace(logpdf=_beta_logpdf, pdf=_beta_pdf, cdf=_beta_cdf, logcdf=_beta_logcdf,
                       sf=_beta_sf, logsf=_beta_logsf)


# ---------------------------------------------------------------------------- gennorm

def _gennorm_logpdf(x: ArrayLike, beta: ArrayLike) -> Tensor:
    """log density of the generalized normal distribution with shape beta."""
    x, b = promote(x, beta)
    return (0.5 * b).log() - _sp.gammaln(1.0 / b) - x.abs() ** b


def _gennorm_pdf(x: ArrayLike, beta: ArrayLike) -> Tensor:
    """The density."""
    return _gennorm_logpdf(x, beta).exp()


def _gennorm_cdf(x: ArrayLike, beta: ArrayLike) -> Tensor:
    """P(X <= x) = (1 + sign(x) gammainc(1/beta, |x|^beta)) / 2 (the left tail through
    gammaincc, without cancellation)."""
    x, b = promote(x, beta)
    y = x.abs() ** b
    return (x < 0).where(0.5 * gammaincc(1.0 / b, y), 0.5 + 0.5 * gammainc(1.0 / b, y))


gennorm = SimpleNamespace(logpdf=_gennorm_logpdf, pdf=_gennorm_pdf, cdf=_gennorm_cdf)


# ---------------------------------------------------------------------------- circular

def _vonmises_logpdf(x: ArrayLike, kappa: ArrayLike) -> Tensor:
    """log density of the von Mises distribution (centred at 0); NaN for kappa <= 0."""
    x, k = promote(x, kappa)
    ok = k > 0
    ks = ok.where(k, 1.0)
    return ok.where(ks * (x.cos() - 1.0) - _LOG_2PI - i0e(ks).log(), math.nan)


def _vonmises_pdf(x: ArrayLike, kappa: ArrayLike) -> Tensor:
    """The density."""
    return _vonmises_logpdf(x, kappa).exp()


vonmises = SimpleNamespace(logpdf=_vonmises_logpdf, pdf=_vonmises_pdf)


def _wrapcauchy_logpdf(x: ArrayLike, c: ArrayLike) -> Tensor:
    """log density of the wrapped Cauchy distribution on [0, 2 pi]; NaN unless 0 < c < 1."""
    x, c = promote(x, c)
    ok = (c > 0) & (c < 1)
    cs = ok.where(c, 0.5)
    value = log1p_p.bind(-cs * cs) - _LOG_2PI - (1.0 + cs * cs - 2.0 * cs * x.cos()).log()
    inside = (x >= 0) & (x <= 2 * math.pi)
    return ok.where(inside.where(value, -math.inf), math.nan)


def _wrapcauchy_pdf(x: ArrayLike, c: ArrayLike) -> Tensor:
    """The density."""
    return _wrapcauchy_logpdf(x, c).exp()


wrapcauchy = SimpleNamespace(logpdf=_wrapcauchy_logpdf, pdf=_wrapcauchy_pdf)


# ---------------------------------------------------------------------------- dirichlet

def _dirichlet_logpdf(x: ArrayLike, alpha: ArrayLike) -> Tensor:
    """log density of the Dirichlet distribution. alpha is (K,); x is (K, ...) or (K-1, ...)
    (the last component is then 1 - sum); -inf off the open simplex (sum within 1e-6)."""
    (xs,), (al,) = promote(x), promote(alpha)
    if al.ndim != 1:
        raise ValueError(f"fgrad.scipy.stats.dirichlet.logpdf: alpha must be 1-d, got shape "
                         f"{al.shape}")
    k = al.shape[0]
    if xs.ndim == 0 or xs.shape[0] not in (k, k - 1):
        raise ValueError(f"fgrad.scipy.stats.dirichlet.logpdf: x must have {k} or {k - 1} "
                         f"entries along its first axis (alpha has {k}), got shape {xs.shape}")
    dt = promote_dtypes(xs.dtype, al.dtype)
    xs, al = xs.cast(dt), al.cast(dt)
    if xs.shape[0] == k - 1:
        xs = xs.cat(1.0 - xs.sum(0, keepdim=True), dim=0)
    norm = _sp.gammaln(al).sum() - _sp.gammaln(al.sum())
    a = al.reshape((k,) + (1,) * (xs.ndim - 1))
    value = _sp.xlogy(a - 1.0, xs).sum(0) - norm
    simplex = (xs > 0).all(0) & ((xs.sum(0) - 1.0).abs() < 1e-6)
    return simplex.where(value, -math.inf)


def _dirichlet_pdf(x: ArrayLike, alpha: ArrayLike) -> Tensor:
    """The density."""
    return _dirichlet_logpdf(x, alpha).exp()


dirichlet = SimpleNamespace(logpdf=_dirichlet_logpdf, pdf=_dirichlet_pdf)
