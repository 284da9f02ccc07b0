"""Distributions built on the gamma sampler: gamma, loggamma, beta, dirichlet, chisquare, f, t,
generalized_normal and ball, with JAX's signatures, key splits and formulas.

The gamma draws follow JAX's algorithm and key use (see `gamma_sampler`), so samples agree
with JAX's up to the last bits of log/erfinv, and are exact in distribution either way.
`gamma` and `loggamma` are differentiable in `a` (implicit reparameterization, as in JAX).
"""
from __future__ import annotations

from typing import Any

from fgrad.core import random as R
from fgrad.core.dtypes import DType
from fgrad.core.tensor import Tensor
from fgrad.random import _util as U
from fgrad.random import gaussian as G
from fgrad.random.gamma_sampler import gamma_p, loggamma_p


def _gamma_draw(key: Tensor, a: Any, shape: Any, dtype: DType, log_space: bool,
                op: str) -> Tensor:
    a = U.param(a, dtype)
    shape = U.out_shape(op, shape, a)
    a = U.full(a, shape)
    return (loggamma_p if log_space else gamma_p)(key, a)


def gamma(key: Tensor, a: Any, shape: Any = None, dtype: Any = None) -> Tensor:
    """Gamma(a, 1) samples (density x^(a-1) e^-x / Gamma(a) on x > 0).

    `a` broadcasts against `shape` (default: a's shape). Differentiable in `a` by implicit
    reparameterization. a = 0 gives 0; a < 0 or NaN gives NaN. For small `a` most of the
    mass lies below float32's range: use `loggamma` there."""
    k = R._check_key(key, "gamma")
    return _gamma_draw(k, a, shape, U.float_dtype(dtype, "gamma"), False, "gamma")


def loggamma(key: Tensor, a: Any, shape: Any = None, dtype: Any = None) -> Tensor:
    """log of Gamma(a, 1) samples, computed in log space (accurate for small `a`, where the
    samples themselves underflow). Differentiable in `a`."""
    k = R._check_key(key, "loggamma")
    return _gamma_draw(k, a, shape, U.float_dtype(dtype, "loggamma"), True, "loggamma")


def beta(key: Tensor, a: Any, b: Any, shape: Any = None, dtype: Any = None) -> Tensor:
    """Beta(a, b) samples in [0, 1], as G_a / (G_a + G_b) of gamma samples drawn in log
    space (so small a and b do not give 0 / 0)."""
    k = R._check_key(key, "beta")
    dtype = U.float_dtype(dtype, "beta")
    a, b = U.param(a, dtype), U.param(b, dtype)
    shape = U.out_shape("beta", shape, a, b)
    keys = R.split(k)
    log_a = loggamma_p(keys[0], U.full(a, shape))
    log_b = loggamma_p(keys[1], U.full(b, shape))
    log_max = log_a.maximum(log_b)
    ga, gb = (log_a - log_max).exp(), (log_b - log_max).exp()
    return ga / (ga + gb)


def dirichlet(key: Tensor, alpha: Any, shape: Any = None, dtype: Any = None) -> Tensor:
    """Dirichlet(alpha) samples over the last axis of `alpha` (rows sum to 1); `shape` is the
    batch shape (default alpha.shape[:-1]), the result is shape + alpha.shape[-1:]."""
    k = R._check_key(key, "dirichlet")
    dtype = U.float_dtype(dtype, "dirichlet")
    alpha = U.param(alpha, dtype)
    if alpha.ndim < 1:
        raise ValueError(f"dirichlet: alpha must have at least one dimension, got shape "
                         f"{alpha.shape}")
    batch = alpha.shape[:-1] if shape is None else R._shape(shape, "dirichlet")
    U.check_shape("dirichlet", batch, alpha.shape[:-1])
    full = batch + alpha.shape[-1:]
    logs = loggamma_p(k, U.full(alpha, full))
    shifted = (logs - logs.max(-1, keepdim=True).detach()).exp()
    return shifted / shifted.sum(-1, keepdim=True)


def _chisquare(key: Tensor, df: Tensor, shape: tuple[int, ...]) -> Tensor:
    return loggamma_p(key, U.full(df / 2.0, shape)).exp() * 2.0


def chisquare(key: Tensor, df: Any, shape: Any = None, dtype: Any = None) -> Tensor:
    """Chi-square samples with `df` degrees of freedom: 2 G(df / 2)."""
    k = R._check_key(key, "chisquare")
    dtype = U.float_dtype(dtype, "chisquare")
    df = U.param(df, dtype)
    return _chisquare(k, df, U.out_shape("chisquare", shape, df))


def f(key: Tensor, dfnum: Any, dfden: Any, shape: Any = None, dtype: Any = None) -> Tensor:
    """F-distribution samples: (chi2(dfnum) / dfnum) / (chi2(dfden) / dfden)."""
    k = R._check_key(key, "f")
    dtype = U.float_dtype(dtype, "f")
    dfnum, dfden = U.param(dfnum, dtype), U.param(dfden, dtype)
    shape = U.out_shape("f", shape, dfnum, dfden)
    keys = R.split(k)
    num = _chisquare(keys[1], dfnum, shape) / dfnum
    den = _chisquare(keys[0], dfden, shape) / dfden
    return num / den


def t(key: Tensor, df: Any, shape: Any = None, dtype: Any = None) -> Tensor:
    """Student's t samples with `df` degrees of freedom: N sqrt((df / 2) / G(df / 2))."""
    k = R._check_key(key, "t")
    dtype = U.float_dtype(dtype, "t")
    df = U.param(df, dtype)
    shape = U.out_shape("t", shape, df)
    keys = R.split(k)
    n = G.normal(keys[0], shape, dtype)
    half = df / 2.0
    g = gamma_p(keys[1], U.full(half, shape))
    return n * (half / g).sqrt()


def _rademacher(key: Tensor, shape: tuple[int, ...], dtype: DType) -> Tensor:
    return R.bernoulli(key, 0.5, shape).cast(dtype) * 2 - 1


def generalized_normal(key: Tensor, p: float, shape: Any = (), dtype: Any = None) -> Tensor:
    """Generalized normal samples, density p / (2 Gamma(1/p)) exp(-|x|^p): a random sign
    times G(1/p)^(1/p). p = 2 is N(0, 1/2), p = 1 the Laplace distribution."""
    k = R._check_key(key, "generalized_normal")
    dtype = U.float_dtype(dtype, "generalized_normal")
    shape = R._shape(shape, "generalized_normal")
    return _generalized_normal(k, p, shape, dtype)


def _generalized_normal(key: Tensor, p: Any, shape: tuple[int, ...], dtype: DType) -> Tensor:
    keys = R.split(key)
    inv_p = 1.0 / U.param(p, dtype)
    g = gamma_p(keys[0], U.full(inv_p, shape))
    return _rademacher(keys[1], shape, dtype) * g ** inv_p


def ball(key: Tensor, d: int, p: float = 2, shape: Any = (), dtype: Any = None) -> Tensor:
    """Points uniform in the d-dimensional unit p-norm ball, shape + (d,) (Barthe et al.:
    generalized normals divided by (sum |g|^p + E)^(1/p) with E exponential)."""
    k = R._check_key(key, "ball")
    dtype = U.float_dtype(dtype, "ball")
    shape = R._shape(shape, "ball")
    if not isinstance(d, int) or isinstance(d, bool) or d < 0:
        raise TypeError(f"ball: d must be a non-negative Python int, got {d!r}")
    keys = R.split(k)
    g = _generalized_normal(keys[0], p, shape + (d,), dtype)
    e = U.exponential(keys[1], shape, dtype)
    power = U.param(p, dtype)
    norm = ((g.abs() ** power).sum(-1) + e) ** (1.0 / power)
    return g / norm.reshape(shape + (1,))


__all__ = ["ball", "beta", "chisquare", "dirichlet", "f", "gamma", "generalized_normal",
           "loggamma", "t"]
