"""jax.scipy.stats' discrete distributions: poisson, binom, geom, nbinom, betabinom and
multinomial.

Each name is a namespace with JAX's functions and arguments (`loc` shifts the support).
Probability mass functions are evaluated on float inputs as in JAX (a non-integer k gets
the analytic continuation, except in poisson which gives -inf); outside the support
logpmf is -inf, and the terms there are computed on safe values so gradients stay finite.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from fgrad.core.prims import log1p_p
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, asarray
from fgrad.scipy import special as _sp
from fgrad.scipy._stats_math import gammaincc, promote


# ---------------------------------------------------------------------------- poisson

def _poisson_logpmf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """log P(K = k) for K - loc ~ Poisson(mu); -inf below loc and for non-integer k."""
    k, mu, loc = promote(k, mu, loc)
    x = k - loc
    off = (x < 0) | (k.round() != k)
    xs = off.where(0.0, x)
    return off.where(-math.inf, _sp.xlogy(xs, mu) - _sp.gammaln(xs + 1.0) - mu)


def _poisson_pmf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """P(K = k)."""
    return _poisson_logpmf(k, mu, loc).exp()


def _poisson_cdf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """P(K <= k) = gammaincc(floor(k - loc) + 1, mu)."""
    k, mu, loc = promote(k, mu, loc)
    x = k - loc
    below = x < 0
    return below.where(0.0, gammaincc((1.0 + below.where(0.0, x)).floor(), mu))


def _poisson_entropy(mu: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """The entropy -sum_k p_k log p_k: summed over k < 35 for mu < 10 and k < 250 for
    mu < 100 (as JAX), the asymptotic series above (two more terms than JAX's, 1e-10)."""
    mu_t, loc_t = promote(mu, loc)
    m = mu_t.reshape(-1)

    def summed(terms: int, upper: Tensor) -> Tensor:
        ks = Tensor(np.arange(terms, dtype=m.dtype.np).reshape(terms, 1))
        probs = _poisson_pmf(ks, m.reshape(1, -1))
        kept = (ks < upper.reshape(1, -1).ceil()).where(probs, 0.0)
        return -_sp.xlogy(kept, kept).sum(0)
    small = summed(35, m + 20.0)
    medium = summed(250, m + 10.0 * m.maximum(0.0).sqrt() + 20.0)
    ms = (m > 0).where(m, 1.0)
    inv = 1.0 / ms
    series = inv * (1 / 12 + inv * (1 / 24 + inv * 19 / 360))
    large = 0.5 * (2 * math.pi * math.e * ms).log() - series
    out = (m == 0).where(0.0, (m < 10).where(small, (m < 100).where(medium, large)))
    return out.reshape(mu_t.shape) + loc_t * 0.0


poisson = SimpleNamespace(logpmf=_poisson_logpmf, pmf=_poisson_pmf, cdf=_poisson_cdf,
                          entropy=_poisson_entropy)


# ---------------------------------------------------------------------------- binom

def _binom_logpmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """log P(K = k) for K - loc ~ Binomial(n, p); -inf outside [loc, loc + n]."""
    k, n, p, loc = promote(k, n, p, loc)
    inside = (k >= loc) & (k < loc + n + 1.0)
    y = inside.where(k - loc, 0.0)
    ns = inside.where(n, 0.0)
    comb = _sp.gammaln(ns + 1.0) - (_sp.gammaln(y + 1.0) + _sp.gammaln(ns - y + 1.0))
    linear = _sp.xlogy(y, p) + _sp.xlog1py(ns - y, -p)
    exact = ((y == 0) & (ns == 0)) | (linear == 0)
    return inside.where(exact.where(0.0, comb + linear), -math.inf)


def _binom_pmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """P(K = k)."""
    return _binom_logpmf(k, n, p, loc).exp()


binom = SimpleNamespace(logpmf=_binom_logpmf, pmf=_binom_pmf)


# ---------------------------------------------------------------------------- geom

def _geom_logpmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """log P(K = k) = (k - 1) log(1 - p) + log p for k - loc >= 1; -inf below."""
    k, p, loc = promote(k, p, loc)
    x = k - loc
    off = x <= 0
    return off.where(-math.inf, _sp.xlog1py(off.where(1.0, x) - 1.0, -p) + p.log())


def _geom_pmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """P(K = k)."""
    return _geom_logpmf(k, p, loc).exp()


geom = SimpleNamespace(logpmf=_geom_logpmf, pmf=_geom_pmf)


# ---------------------------------------------------------------------------- nbinom

def _nbinom_logpmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """log P(K = k): k failures before the n-th success, success probability p."""
    k, n, p, loc = promote(k, n, p, loc)
    below = k < loc
    y = below.where(0.0, k - loc)
    comb = _sp.gammaln(y + n) - _sp.gammaln(n) - _sp.gammaln(y + 1.0)
    return below.where(-math.inf, comb + _sp.xlogy(n, p) + _sp.xlogy(y, 1.0 - p))


def _nbinom_pmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """P(K = k)."""
    return _nbinom_logpmf(k, n, p, loc).exp()


nbinom = SimpleNamespace(logpmf=_nbinom_logpmf, pmf=_nbinom_pmf)


# ---------------------------------------------------------------------------- betabinom

def _betabinom_logpmf(k: ArrayLike, n: ArrayLike, a: ArrayLike, b: ArrayLike,
                      loc: ArrayLike = 0) -> Tensor:
    """log P(K = k) for the beta-binomial distribution; -inf outside [loc, loc + n], NaN for
    n < 0 or a, b <= 0."""
    k, n, a, b, loc = promote(k, n, a, b, loc)
    y = k.floor() - loc
    off = (y < -loc) | (y > n) | (y + a <= 0)
    bad = (n < 0) | (a <= 0) | (b <= 0)
    skip = off | bad
    ys = skip.where(0.0, y)
    ns, as_, bs = skip.where(1.0, n), skip.where(1.0, a), skip.where(1.0, b)
    comb = -log1p_p.bind(ns) - _sp.betaln(ns - ys + 1.0, ys + 1.0)
    value = comb + _sp.betaln(ys + as_, ns - ys + bs) - _sp.betaln(as_, bs)
    value = ((ys == 0) & (ns == 0)).where(0.0, value)
    return bad.where(math.nan, off.where(-math.inf, value))


def _betabinom_pmf(k: ArrayLike, n: ArrayLike, a: ArrayLike, b: ArrayLike,
                   loc: ArrayLike = 0) -> Tensor:
    """P(K = k)."""
    return _betabinom_logpmf(k, n, a, b, loc).exp()


betabinom = SimpleNamespace(logpmf=_betabinom_logpmf, pmf=_betabinom_pmf)


# ---------------------------------------------------------------------------- multinomial

def _multinomial_logpmf(x: ArrayLike, n: ArrayLike, p: ArrayLike) -> Tensor:
    """log P(counts = x) for n trials with category probabilities p (last axis); x and n
    must be integers (as in JAX); -inf where the counts do not sum to n."""
    xi, ni = asarray(x), asarray(n)
    if not (xi.dtype.is_int and ni.dtype.is_int):
        raise ValueError(f"fgrad.scipy.stats.multinomial.logpmf: x and n must be of integer "
                         f"type; got x.dtype={xi.dtype.np.name}, n.dtype={ni.dtype.np.name}")
    (pp,) = promote(p)
    xf, nf = xi.cast(pp.dtype), ni.cast(pp.dtype)
    value = _sp.gammaln(nf + 1.0) + (_sp.xlogy(xf, pp) - _sp.gammaln(xf + 1.0)).sum(-1)
    return (xi.sum(-1) == ni).where(value, -math.inf)


def _multinomial_pmf(x: ArrayLike, n: ArrayLike, p: ArrayLike) -> Tensor:
    """P(counts = x)."""
    return _multinomial_logpmf(x, n, p).exp()


multinomial = SimpleNamespace(logpmf=_multinomial_logpmf, pmf=_multinomial_pmf)
