"""jax.scipy.stats' location-scale families with closed-form distribution functions: expon,
laplace, cauchy, logistic, gumbel_l, gumbel_r, pareto and truncnorm.

Each name is a namespace with JAX's functions and arguments (`loc`, `scale` after the shape
parameters). Values follow JAX: -inf log density outside the support, NaN quantiles for
q outside [0, 1]; branches are evaluated on safe inputs, so gradients stay finite at and
beyond the support's edges.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

from fgrad.core.prims import expm1_p, log1p_p
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike
from fgrad.scipy import special as _sp
from fgrad.scipy._stats_math import promote

_LOG_2PI = math.log(2 * math.pi)


def _log1mexp(d: Tensor) -> Tensor:
    """log(1 - exp(-d)) for d >= 0, accurate for small and large d (jax.nn.log1mexp)."""
    big = d > math.log(2.0)
    return big.where(log1p_p.bind(-(-big.where(d, 1.0)).exp()),
                     (-expm1_p.bind(-big.where(1.0, d))).log())


def _bad_q(q: Tensor) -> Tensor:
    return q.isnan() | (q < 0) | (q > 1)


# ---------------------------------------------------------------------------- expon

def _expon_logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log density of the exponential distribution; -inf below loc."""
    x, loc, scale = promote(x, loc, scale)
    return (x < loc).where(-math.inf, -((x - loc) / scale + scale.log()))


def _expon_pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The density."""
    return _expon_logpdf(x, loc, scale).exp()


def _expon_cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X <= x)."""
    x, loc, scale = promote(x, loc, scale)
    below = x < loc
    return below.where(0.0, -expm1_p.bind(below.where(0.0, (loc - x) / scale)))


def _expon_logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log P(X > x)."""
    x, loc, scale = promote(x, loc, scale)
    return (x < loc).where(0.0, (loc - x) / scale)


def _expon_sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X > x)."""
    return _expon_logsf(x, loc, scale).exp()


def _expon_logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log P(X <= x)."""
    return log1p_p.bind(-_expon_sf(x, loc, scale))


def _expon_ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The quantile function (NaN for q outside [0, 1])."""
    q, loc, scale = promote(q, loc, scale)
    bad = _bad_q(q)
    return bad.where(math.nan, loc - scale * log1p_p.bind(-bad.where(0.0, q)))


expon = SimpleNamespace(logpdf=_expon_logpdf, pdf=_expon_pdf, cdf=_expon_cdf,
                        logcdf=_expon_logcdf, sf=_expon_sf, logsf=_expon_logsf,
                        ppf=_expon_ppf)


# ---------------------------------------------------------------------------- laplace

def _laplace_logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log density of the Laplace distribution."""
    x, loc, scale = promote(x, loc, scale)
    return -((x - loc).abs() / scale + (2.0 * scale).log())


def _laplace_pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The density."""
    return _laplace_logpdf(x, loc, scale).exp()


def _laplace_cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X <= x)."""
    x, loc, scale = promote(x, loc, scale)
    z = (x - loc) / scale
    tail = 0.5 * (-z.abs()).exp()
    return (z <= 0).where(tail, 1.0 - tail)


laplace = SimpleNamespace(logpdf=_laplace_logpdf, pdf=_laplace_pdf, cdf=_laplace_cdf)


# ---------------------------------------------------------------------------- cauchy

def _cauchy_logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log density of the Cauchy distribution."""
    x, loc, scale = promote(x, loc, scale)
    z = (x - loc) / scale
    return -((math.pi * scale).log() + log1p_p.bind(z * z))


def _cauchy_pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The density."""
    return _cauchy_logpdf(x, loc, scale).exp()


def _cauchy_cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X <= x) = 1/2 + atan(z) / pi."""
    x, loc, scale = promote(x, loc, scale)
    return 0.5 + ((x - loc) / scale).atan() / math.pi


def _cauchy_logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log P(X <= x)."""
    return _cauchy_cdf(x, loc, scale).log()


def _cauchy_sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X > x)."""
    x, loc, scale = promote(x, loc, scale)
    return _cauchy_cdf(-x, -loc, scale)


def _cauchy_logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log P(X > x)."""
    return _cauchy_sf(x, loc, scale).log()


def _cauchy_ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The quantile function tan(pi (q - 1/2))."""
    q, loc, scale = promote(q, loc, scale)
    return (math.pi * (q - 0.5)).tan() * scale + loc


def _cauchy_isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The inverse survival function."""
    q, loc, scale = promote(q, loc, scale)
    return (math.pi * (0.5 - q)).tan() * scale + loc


cauchy = SimpleNamespace(logpdf=_cauchy_logpdf, pdf=_cauchy_pdf, cdf=_cauchy_cdf,
                         logcdf=_cauchy_logcdf, sf=_cauchy_sf, logsf=_cauchy_logsf,
                         ppf=_cauchy_ppf, isf=_cauchy_isf)


# ---------------------------------------------------------------------------- logistic

def _logistic_logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log density of the logistic distribution, stable in both tails."""
    x, loc, scale = promote(x, loc, scale)
    half = 0.5 * (x - loc) / scale
    return -2.0 * half.logaddexp(-half) - scale.log()


def _logistic_pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The density."""
    return _logistic_logpdf(x, loc, scale).exp()


def _logistic_cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X <= x) = expit(z)."""
    x, loc, scale = promote(x, loc, scale)
    return ((x - loc) / scale).sigmoid()


def _logistic_sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X > x) = expit(-z)."""
    x, loc, scale = promote(x, loc, scale)
    return ((loc - x) / scale).sigmoid()


def _logistic_ppf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The quantile function logit(q) (JAX names its argument x)."""
    q, loc, scale = promote(x, loc, scale)
    return _sp.logit(q) * scale + loc


def _logistic_isf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The inverse survival function -logit(q)."""
    q, loc, scale = promote(x, loc, scale)
    return -_sp.logit(q) * scale + loc


logistic = SimpleNamespace(logpdf=_logistic_logpdf, pdf=_logistic_pdf, cdf=_logistic_cdf,
                           sf=_logistic_sf, ppf=_logistic_ppf, isf=_logistic_isf)


# ---------------------------------------------------------------------------- gumbel

def _gumbel(name: str, sign: float) -> SimpleNamespace:
    """gumbel_r (sign 1, the maximum's law) or gumbel_l (sign -1); NaN where scale <= 0."""
    def standard(x: ArrayLike, loc: ArrayLike, scale: ArrayLike
                 ) -> tuple[Tensor, Tensor, Tensor]:
        x, loc, scale = promote(x, loc, scale)
        ok = scale > 0
        s = ok.where(scale, 1.0)
        return ok, sign * (x - loc) / s, s

    def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
        """log density."""
        ok, z, s = standard(x, loc, scale)
        return ok.where(-s.log() - z - (-z).exp(), math.nan)

    def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
        """The density."""
        return logpdf(x, loc, scale).exp()

    def log_lower(x: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> Tensor:
        """log P(sign X < sign x) = -exp(-z)."""
        ok, z, _ = standard(x, loc, scale)
        return ok.where(-(-z).exp(), math.nan)

    def log_upper(x: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> Tensor:
        """log P(sign X > sign x) = log(1 - exp(-exp(-z)))."""
        ok, z, _ = standard(x, loc, scale)
        return ok.where(_log1mexp((-z).exp()), math.nan)

    def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
        """log P(X <= x)."""
        return (log_lower if sign > 0 else log_upper)(x, loc, scale)

    def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
        """log P(X > x)."""
        return (log_upper if sign > 0 else log_lower)(x, loc, scale)

    def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
        """P(X <= x)."""
        return logcdf(x, loc, scale).exp()

    def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
        """P(X > x)."""
        return logsf(x, loc, scale).exp()

    def ppf(p: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
        """The quantile function (NaN outside (0, 1))."""
        p, loc, scale = promote(p, loc, scale)
        ok = (p > 0) & (p < 1)
        r = ok.where(p, 0.5)
        inner = -(r if sign > 0 else 1.0 - r).log()   # -log(p) or -log(1 - p)
        return ok.where(loc - sign * scale * inner.log(), math.nan)

    fns = dict(logpdf=logpdf, pdf=pdf, cdf=cdf, logcdf=logcdf, sf=sf, logsf=logsf, ppf=ppf)
    for key, fn in fns.items():
        fn.__name__ = fn.__qualname__ = key
        fn.__doc__ = f"{name}.{key}: {fn.__doc__}"
    return SimpleNamespace(**fns)


gumbel_r = _gumbel("gumbel_r", 1.0)
gumbel_l = _gumbel("gumbel_l", -1.0)


# ---------------------------------------------------------------------------- pareto

def _pareto_parts(x: ArrayLike, b: ArrayLike, loc: ArrayLike, scale: ArrayLike
                  ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    x, b, loc, scale = promote(x, b, loc, scale)
    below = x < loc + scale
    return below, below.where(1.0, (x - loc) / scale), b, scale


def _pareto_logpdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
                   scale: ArrayLike = 1) -> Tensor:
    """log density of the Pareto distribution; -inf below loc + scale."""
    below, z, b, scale = _pareto_parts(x, b, loc, scale)
    return below.where(-math.inf, -((scale / b).log() + (b + 1.0) * z.log()))


def _pareto_pdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The density."""
    return _pareto_logpdf(x, b, loc, scale).exp()


def _pareto_logsf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
                  scale: ArrayLike = 1) -> Tensor:
    """log P(X > x) = -b log(z)."""
    below, z, b, _ = _pareto_parts(x, b, loc, scale)
    return below.where(0.0, -b * z.log())


def _pareto_sf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X > x)."""
    return _pareto_logsf(x, b, loc, scale).exp()


def _pareto_cdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X <= x) = 1 - z^-b."""
    below, z, b, _ = _pareto_parts(x, b, loc, scale)
    return below.where(0.0, -expm1_p.bind(-b * z.log()))


def _pareto_logcdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
                   scale: ArrayLike = 1) -> Tensor:
    """log P(X <= x)."""
    below, z, b, _ = _pareto_parts(x, b, loc, scale)
    return below.where(-math.inf, log1p_p.bind(-(-b * z.log()).exp()))


def _pareto_ppf(q: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The quantile function loc + scale (1 - q)^(-1/b)."""
    q, b, loc, scale = promote(q, b, loc, scale)
    bad = _bad_q(q)
    return bad.where(math.nan, loc + scale * (-log1p_p.bind(-bad.where(0.0, q)) / b).exp())


pareto = SimpleNamespace(logpdf=_pareto_logpdf, pdf=_pareto_pdf, cdf=_pareto_cdf,
                         logcdf=_pareto_logcdf, sf=_pareto_sf, logsf=_pareto_logsf,
                         ppf=_pareto_ppf)


# ---------------------------------------------------------------------------- truncnorm

def _log_diff(hi: Tensor, lo: Tensor) -> Tensor:
    """log(exp(hi) - exp(lo)) for hi >= lo."""
    finite = hi > -math.inf
    h = finite.where(hi, 0.0)
    return finite.where(h + _log1mexp(h - finite.where(lo, -1.0)), -math.inf)


def _log_gauss_mass(a: Tensor, b: Tensor) -> Tensor:
    """log P(a < Z < b) for a standard normal Z, accurate in both tails."""
    right = a > 0
    central = ~((b <= 0) | right)
    lo, hi = right.where(-b, a), right.where(-a, b)
    tail = _log_diff(_sp.log_ndtr(hi), _sp.log_ndtr(lo))
    mass = log1p_p.bind(-_sp.ndtr(central.where(a, 0.0)) - _sp.ndtr(-central.where(b, 0.0)))
    return central.where(mass, tail)


def _truncnorm_logpdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
                      scale: ArrayLike = 1) -> Tensor:
    """log density of the normal truncated to [a, b] (standardized bounds)."""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    z = (x - loc) / scale
    val = -0.5 * z * z - scale.log() - 0.5 * _LOG_2PI - _log_gauss_mass(a, b)
    val = ((z < a) | (z > b)).where(-math.inf, val)
    return (a >= b).where(math.nan, val)


def _truncnorm_pdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
                   scale: ArrayLike = 1) -> Tensor:
    """The density."""
    return _truncnorm_logpdf(x, a, b, loc, scale).exp()


def _truncnorm_logcdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
                      scale: ArrayLike = 1) -> Tensor:
    """log P(X <= x), switching to log1p(-sf) near 1 as JAX does."""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    z = (x - loc) / scale
    zc = z.maximum(a).minimum(b)
    whole = _log_gauss_mass(a, b)
    low = _log_gauss_mass(a, zc) - whole
    high = _log_gauss_mass(zc, b) - whole
    out = (low > -0.1).where(_log1mexp(-high.minimum(0.0)), low)
    out = (z >= b).where(0.0, (z <= a).where(-math.inf, out))
    return (a >= b).where(math.nan, out)


def _truncnorm_cdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
                   scale: ArrayLike = 1) -> Tensor:
    """P(X <= x)."""
    return _truncnorm_logcdf(x, a, b, loc, scale).exp()


def _truncnorm_logsf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
                     scale: ArrayLike = 1) -> Tensor:
    """log P(X > x)."""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    return _truncnorm_logcdf(-x, -b, -a, -loc, scale)


def _truncnorm_sf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
                  scale: ArrayLike = 1) -> Tensor:
    """P(X > x)."""
    return _truncnorm_logsf(x, a, b, loc, scale).exp()


truncnorm = SimpleNamespace(logpdf=_truncnorm_logpdf, pdf=_truncnorm_pdf,
                            cdf=_truncnorm_cdf, logcdf=_truncnorm_logcdf, sf=_truncnorm_sf,
                            logsf=_truncnorm_logsf)
