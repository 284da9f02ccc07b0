"""Continuous distributions that are transforms of uniform or normal draws, with JAX's
signatures, key use and formulas (so the same key gives JAX's samples, up to the last bits of
transcendental functions): laplace, logistic, cauchy, rademacher, maxwell, double_sided_maxwell,
weibull_min, lognormal, pareto, rayleigh, wald, triangular, multivariate_normal, orthogonal.
"""
from __future__ import annotations

import math
from typing import Any

from fgrad.core import random as R
from fgrad.core.dtypes import dtypes
from fgrad.core.methods.linalg import _diagonal
from fgrad.core.prims import linalg as lp
from fgrad.core.prims.eigh import eigh
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.random import _util as U
from fgrad.random import gaussian as G


def laplace(key: Tensor, shape: Any = (), dtype: Any = None) -> Tensor:
    """Standard Laplace samples (density exp(-|x|) / 2): sign(u) log1p(-|u|), u in (-1, 1)."""
    k = R._check_key(key, "laplace")
    dtype = U.float_dtype(dtype, "laplace")
    lo = -1.0 + float(U.finfo(dtype).epsneg)
    u = G.uniform(k, R._shape(shape, "laplace"), dtype, lo, 1.0)
    return u.sign() * U.log1p(-u.abs())


def logistic(key: Tensor, shape: Any = (), dtype: Any = None) -> Tensor:
    """Standard logistic samples: log(u) - log1p(-u)."""
    k = R._check_key(key, "logistic")
    dtype = U.float_dtype(dtype, "logistic")
    u = G.uniform(k, R._shape(shape, "logistic"), dtype, float(U.finfo(dtype).tiny), 1.0)
    return u.log() - U.log1p(-u)


def cauchy(key: Tensor, shape: Any = (), dtype: Any = None) -> Tensor:
    """Standard Cauchy samples: tan(pi (u - 1/2))."""
    k = R._check_key(key, "cauchy")
    dtype = U.float_dtype(dtype, "cauchy")
    u = G.uniform(k, R._shape(shape, "cauchy"), dtype, float(U.finfo(dtype).eps), 1.0)
    return ((u - 0.5) * math.pi).tan()


def rademacher(key: Tensor, shape: Any = (), dtype: Any = None) -> Tensor:
    """-1 or +1 with probability 1/2 each (integers by default)."""
    k = R._check_key(key, "rademacher")
    from fgrad.core import dtypes as _dt
    dtype = dtypes.default_int if dtype is None else _dt.to_dtype(dtype)
    b = R.bernoulli(k, 0.5, R._shape(shape, "rademacher")).cast(dtype)
    return (b * 2 - 1).cast(dtype)


def _norm3(x: Tensor) -> Tensor:
    """The 2-norm over a last axis of length 3, summed left to right."""
    sq = x * x
    return (sq[..., 0] + sq[..., 1] + sq[..., 2]).sqrt()


def maxwell(key: Tensor, shape: Any = (), dtype: Any = None) -> Tensor:
    """Maxwell samples (the speed of a 3-d standard normal vector: its 2-norm)."""
    k = R._check_key(key, "maxwell")
    dtype = U.float_dtype(dtype, "maxwell")
    return _norm3(G.normal(k, R._shape(shape, "maxwell") + (3,), dtype))


def double_sided_maxwell(key: Tensor, loc: Any, scale: Any, shape: Any = (),
                         dtype: Any = None) -> Tensor:
    """A Maxwell sample times a random sign, times `scale`, plus `loc`. As in JAX, the result
    has shape `shape + broadcast(loc, scale).shape` (`shape` defaults to that shape too)."""
    k = R._check_key(key, "double_sided_maxwell")
    dtype = U.float_dtype(dtype, "double_sided_maxwell")
    loc, scale = U.param(loc, dtype), U.param(scale, dtype)
    params = U.broadcast_shapes(loc.shape, scale.shape)
    shape = R._shape(shape, "double_sided_maxwell") or params
    shape = shape + params
    keys = R.split(k)
    speed = _norm3(G.normal(keys[0], shape + (3,), dtype))
    sign = rademacher(keys[1], shape, dtype)
    return sign * speed * scale + loc


def weibull_min(key: Tensor, scale: Any, concentration: Any, shape: Any = (),
                dtype: Any = None) -> Tensor:
    """Weibull samples: scale * (-log1p(-u)) ** (1 / concentration). The result broadcasts
    `shape` against the parameters (as in JAX)."""
    k = R._check_key(key, "weibull_min")
    dtype = U.float_dtype(dtype, "weibull_min")
    scale, conc = U.param(scale, dtype), U.param(concentration, dtype)
    u = G.uniform(k, R._shape(shape, "weibull_min"), dtype)
    return (-U.log1p(-u)) ** (1.0 / conc) * scale


def lognormal(key: Tensor, sigma: Any = 1.0, shape: Any = None, dtype: Any = None) -> Tensor:
    """Log-normal samples: exp(sigma * N(0, 1))."""
    k = R._check_key(key, "lognormal")
    dtype = U.float_dtype(dtype, "lognormal")
    sigma = U.param(sigma, dtype)
    shape = U.out_shape("lognormal", shape, sigma)
    return (G.normal(k, shape, dtype) * sigma).exp()


def pareto(key: Tensor, b: Any, shape: Any = None, dtype: Any = None) -> Tensor:
    """Pareto samples with shape `b` (support x >= 1): exp(E / b), E standard exponential."""
    k = R._check_key(key, "pareto")
    dtype = U.float_dtype(dtype, "pareto")
    b = U.param(b, dtype)
    shape = U.out_shape("pareto", shape, b)
    return (U.exponential(k, shape, dtype) / b).exp()


def rayleigh(key: Tensor, scale: Any, shape: Any = None, dtype: Any = None) -> Tensor:
    """Rayleigh samples: scale * sqrt(-2 log u)."""
    k = R._check_key(key, "rayleigh")
    dtype = U.float_dtype(dtype, "rayleigh")
    scale = U.param(scale, dtype)
    shape = U.out_shape("rayleigh", shape, scale)
    u = G.uniform(k, shape, dtype)
    return U.full(scale, shape) * (u.log() * -2.0).sqrt()


def wald(key: Tensor, mean: Any, shape: Any = None, dtype: Any = None) -> Tensor:
    """Wald (inverse Gaussian) samples with mean `mean` and shape 1 (Michael, Schucany and
    Haas' transformation of a normal, with a uniform to pick between the two roots)."""
    k = R._check_key(key, "wald")
    dtype = U.float_dtype(dtype, "wald")
    mean = U.param(mean, dtype)
    shape = U.out_shape("wald", shape, mean)
    keys = R.split(k)
    mean = U.full(mean, shape)
    v = G.normal(keys[0], shape, dtype)
    z = G.uniform(keys[1], shape, dtype)
    y = v * v
    mean_sq = mean * mean
    root = (4.0 * mean * y + mean_sq * (y * y)).sqrt()
    x = mean + mean_sq * y / 2.0 - mean / 2.0 * root
    return (z <= mean / (mean + x)).where(x, mean_sq / x)


def triangular(key: Tensor, left: Any, mode: Any, right: Any, shape: Any = None,
               dtype: Any = None) -> Tensor:
    """Triangular samples on [left, right] with peak at `mode` (inverse CDF)."""
    k = R._check_key(key, "triangular")
    dtype = U.float_dtype(dtype, "triangular")
    left, mode, right = (U.param(p, dtype) for p in (left, mode, right))
    shape = U.out_shape("triangular", shape, left, mode, right)
    left, mode, right = U.full(left, shape), U.full(mode, shape), U.full(right, shape)
    fc = (mode - left) / (right - left)
    u = G.uniform(k, shape, dtype)
    low = left + (u * (right - left) * (mode - left)).sqrt()
    high = right - ((1.0 - u) * (right - left) * (right - mode)).sqrt()
    return (u < fc).where(low, high)


def _promote_float(x: Any) -> Tensor:
    x = as_tensor(x)
    return x if x.dtype.is_float else x.cast(dtypes.default_float)


def multivariate_normal(key: Tensor, mean: Any, cov: Any, shape: Any = None,
                        dtype: Any = None, method: str = "cholesky") -> Tensor:
    """Multivariate normal samples, shape + mean.shape[-1:]: mean + factor @ z with factor
    from `method` ('cholesky', 'svd' or 'eigh') of `cov` and z standard normal. `shape`
    defaults to the broadcast of mean.shape[:-1] and cov.shape[:-2]; dtype to mean's."""
    k = R._check_key(key, "multivariate_normal")
    if method not in ("svd", "eigh", "cholesky"):
        raise ValueError(f"multivariate_normal: method must be one of 'svd', 'eigh', "
                         f"'cholesky', got {method!r}")
    mean, cov = _promote_float(mean), _promote_float(cov)
    if mean.dtype != cov.dtype:  # the wider of the two, as JAX's promotion for floats
        wide = max((mean.dtype, cov.dtype), key=lambda d: d.itemsize)
        mean, cov = mean.cast(wide), cov.cast(wide)
    out_dtype = mean.dtype if dtype is None else U.float_dtype(dtype, "multivariate_normal")
    if mean.ndim < 1:
        raise ValueError(f"multivariate_normal: mean must have at least one dimension, got "
                         f"shape {mean.shape}")
    if cov.ndim < 2:
        raise ValueError(f"multivariate_normal: cov must have at least two dimensions, got "
                         f"shape {cov.shape}")
    n = mean.shape[-1]
    if cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal: cov must have shape (..., {n}, {n}) to match "
                         f"mean, got {cov.shape}")
    if shape is None:
        shape = U.broadcast_shapes(mean.shape[:-1], cov.shape[:-2])
    else:
        shape = R._shape(shape, "multivariate_normal")
        U.check_shape("multivariate_normal", shape, mean.shape[:-1], cov.shape[:-2])
    factor = _factor(cov, method)
    z = G.normal(k, shape + (n,), out_dtype)
    return mean + _matvec(factor, z)


def _factor(cov: Tensor, method: str) -> Tensor:
    """A matrix F with F F^T = cov."""
    if method == "svd":
        u, s, _ = lp.svd(cov, full_matrices=False)
        return u * s.sqrt().reshape(s.shape[:-1] + (1, s.shape[-1]))
    if method == "eigh":
        w, v = eigh(cov)
        return v * w.sqrt().reshape(w.shape[:-1] + (1, w.shape[-1]))
    return cov.cholesky()


def _matvec(m: Tensor, v: Tensor) -> Tensor:
    """(..., i, j) @ (..., j) -> (..., i), batch axes broadcast, summed over j in order."""
    prod = m * v.reshape(v.shape[:-1] + (1, v.shape[-1]))
    total = prod[..., 0]
    for j in range(1, prod.shape[-1]):
        total = total + prod[..., j]
    return total


def orthogonal(key: Tensor, n: int, shape: Any = (), dtype: Any = None,
               m: int | None = None) -> Tensor:
    """Random matrices with orthonormal columns (or rows), shape + (n, m), uniform (Haar) on
    the orthogonal group for m = n: the Q of a QR of a normal matrix, signs fixed by R."""
    k = R._check_key(key, "orthogonal")
    dtype = U.float_dtype(dtype, "orthogonal")
    shape = R._shape(shape, "orthogonal")
    m = n if m is None else m
    for name, v in (("n", n), ("m", m)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise TypeError(f"orthogonal: {name} must be a non-negative Python int, got {v!r}")
    z = G.normal(k, shape + (max(n, m), min(n, m)), dtype)
    q, r = lp.qr(z, full_matrices=False)
    diag = _diagonal(r)
    x = q * diag.sign().reshape(diag.shape[:-1] + (1, diag.shape[-1]))
    return x.transpose(-1, -2) if n < m else x


__all__ = ["cauchy", "double_sided_maxwell", "laplace", "logistic", "lognormal", "maxwell",
           "multivariate_normal", "orthogonal", "pareto", "rademacher", "rayleigh",
           "triangular", "wald", "weibull_min"]
