"""Polynomials as 1-d coefficient arrays, highest power first (NumPy's poly* functions):
polyval, polyadd, polysub, polymul, polyder, polyint, polyfit, poly, vander.

Lengths are static; coefficients and points may be traced (jit, grad, vmap)."""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, asarray, result_type
from fgrad.numpy.numeric import convolve, inexact, static_int
from fgrad.numpy.shape import broadcast_to, concatenate


def _vector(name: str, p: Tensor) -> Tensor:
    if p.ndim != 1:
        raise ValueError(f"fgrad.numpy.{name}: coefficients must be a 1-d array, got shape "
                         f"{p.shape}")
    return p


def polyval(p: ArrayLike, x: ArrayLike, *, unroll: int = 16) -> Tensor:
    """p[0] * x**(n-1) + ... + p[n-1] by Horner's rule (p may have trailing batch axes that
    broadcast with x); integer inputs stay integer, as in JAX."""
    dt = result_type(p, x)
    pt, xt = asarray(p, dt), asarray(x, dt)
    if pt.ndim == 0:
        raise ValueError("fgrad.numpy.polyval: p must be an array of coefficients, got a "
                         "scalar")
    shape = tuple(np.broadcast_shapes(pt.shape[1:], xt.shape))
    y = broadcast_to(Tensor(np.zeros((), dt.np)), shape)
    for i in range(pt.shape[0]):
        y = y * xt + pt[i]
    return y


def polyadd(a1: ArrayLike, a2: ArrayLike) -> Tensor:
    """The sum of two polynomials (the shorter one is aligned to the constant term)."""
    dt = result_type(a1, a2)
    x, y = _vector("polyadd", asarray(a1, dt)), _vector("polyadd", asarray(a2, dt))
    if x.shape[0] < y.shape[0]:
        x, y = y, x
    return x + y.pad(((x.shape[0] - y.shape[0], 0),))


def polysub(a1: ArrayLike, a2: ArrayLike) -> Tensor:
    """The difference of two polynomials."""
    dt = result_type(a1, a2)
    return polyadd(asarray(a1, dt), -asarray(a2, dt))


def polymul(a1: ArrayLike, a2: ArrayLike, *, trim_leading_zeros: bool = False) -> Tensor:
    """The product of two polynomials (a full convolution; float32 for integer inputs, as
    in JAX)."""
    x, y = inexact(a1, a2)
    if trim_leading_zeros:
        x, y = _trim_front(x), _trim_front(y)
    x = x if x.shape[0] else Tensor(np.zeros(1, x.dtype.np))
    y = y if y.shape[0] else Tensor(np.zeros(1, y.dtype.np))
    return convolve(_vector("polymul", x), _vector("polymul", y))


def _trim_front(p: Tensor) -> Tensor:
    if type(p) is not Tensor:
        raise TypeError("fgrad.numpy.polymul: trim_leading_zeros=True needs concrete "
                        "coefficients (the length depends on their values); leave it False "
                        "under jit")
    vals = p.numpy()
    nz = np.flatnonzero(vals)
    return p[int(nz[0]):] if nz.size and len(vals) > 1 else p


def polyder(p: ArrayLike, m: int = 1) -> Tensor:
    """The m-th derivative's coefficients."""
    m = static_int(m, "polyder", "m")
    if m < 0:
        raise ValueError(f"fgrad.numpy.polyder: the order m must be non-negative, got {m}")
    (pt,) = inexact(p)
    pt = _vector("polyder", pt)
    if m == 0:
        return pt
    n = pt.shape[0]
    powers = np.arange(n - 1, -1, -1, dtype=np.float64)[:n - m]
    coeff = np.prod([powers - k for k in range(m)], axis=0)
    return pt[:n - m] * Tensor(coeff.astype(pt.dtype.np))


def polyint(p: ArrayLike, m: int = 1, k: ArrayLike = None) -> Tensor:
    """The m-th antiderivative's coefficients; `k` holds the integration constants (a
    scalar for all, or one per integration, the first for the innermost)."""
    m = static_int(m, "polyint", "m")
    if m < 0:
        raise ValueError(f"fgrad.numpy.polyint: the order m must be non-negative, got {m} "
                         f"(use fnp.polyder)")
    pt, kt = inexact(p, 0 if k is None else k)
    pt = _vector("polyint", pt)
    kt = kt.reshape(-1)
    if kt.shape[0] == 1:
        kt = broadcast_to(kt, (m,))
    if kt.shape != (m,):
        raise ValueError(f"fgrad.numpy.polyint: k must be a scalar or hold m={m} constants, "
                         f"got shape {kt.shape}")
    if m == 0:
        return pt
    n = pt.shape[0]
    grid = np.arange(n + m, dtype=np.float64)[None] - np.arange(m, dtype=np.float64)[:, None]
    coeff = np.maximum(1, grid).prod(0)[::-1]
    return concatenate([pt, kt]) / Tensor(coeff.astype(pt.dtype.np))


def vander(x: ArrayLike, N: int | None = None, increasing: bool = False) -> Tensor:  # noqa: N803
    """The Vandermonde matrix: columns x**(N-1), ..., x**0 (or increasing powers)."""
    xt = asarray(x)
    if xt.ndim != 1:
        raise ValueError(f"fgrad.numpy.vander: x must be 1-d, got shape {xt.shape}")
    n = xt.shape[0] if N is None else static_int(N, "vander", "N")
    if n < 0:
        raise ValueError(f"fgrad.numpy.vander: N must be non-negative, got {n}")
    powers = np.arange(n) if increasing else np.arange(n - 1, -1, -1)
    cols = [Tensor(np.ones(xt.shape, xt.dtype.np)) if e == 0 else xt ** int(e)
            for e in powers]
    if not cols:
        return Tensor(np.zeros((xt.shape[0], 0), xt.dtype.np))
    from fgrad.numpy.shape import stack
    return stack(cols, 1)


def polyfit(x: ArrayLike, y: ArrayLike, deg: int, rcond: float | None = None,
            full: bool = False, w: ArrayLike = None, cov: Any = False) -> Any:
    """Least-squares polynomial fit of degree `deg` (coefficients highest power first; y may
    be 2-d with one fit per column). full=True also returns residuals, rank, singular
    values and rcond; cov=True the coefficients' covariance."""
    from fgrad.numpy import linalg
    deg = static_int(deg, "polyfit", "deg")
    if deg < 0:
        raise ValueError(f"fgrad.numpy.polyfit: deg must be non-negative, got {deg}")
    xt, yt = inexact(x, y) if w is None else inexact(x, y, w)[:2]
    if xt.ndim != 1 or xt.shape[0] == 0:
        raise TypeError(f"fgrad.numpy.polyfit: x must be a non-empty 1-d array, got shape "
                        f"{xt.shape}")
    if yt.ndim not in (1, 2) or yt.shape[0] != xt.shape[0]:
        raise TypeError(f"fgrad.numpy.polyfit: y must be 1-d or 2-d with len(x)={xt.shape[0]} "
                        f"rows, got shape {yt.shape}")
    order = deg + 1
    rc = xt.shape[0] * float(ml_dtypes.finfo(xt.dtype.np).eps) if rcond is None else \
        float(rcond)
    lhs, rhs = vander(xt, order), yt
    if w is not None:
        wt = inexact(x, y, w)[2]
        if wt.ndim != 1 or wt.shape[0] != yt.shape[0]:
            raise TypeError("fgrad.numpy.polyfit: w must be 1-d with one weight per point")
        lhs = lhs * wt.reshape(-1, 1)
        rhs = rhs * (wt.reshape(-1, 1) if rhs.ndim == 2 else wt)
    scale = (lhs * lhs).sum(0).sqrt()
    lhs = lhs / scale.reshape(1, -1)
    c, resids, rank, s = linalg.lstsq(lhs, rhs, rc)
    c = (c / scale.reshape(-1, 1)) if c.ndim > 1 else c / scale
    if full:
        return c, resids, rank, s, asarray(rc)
    if cov:
        base = linalg.inv(lhs.permute(1, 0) @ lhs) / (scale.reshape(-1, 1) * scale.reshape(1,
                                                                                            -1))
        if cov == "unscaled":
            fac: Any = asarray(1.0, base.dtype)
        else:
            if xt.shape[0] <= order:
                raise ValueError("fgrad.numpy.polyfit: scaling the covariance needs more data "
                                 "points than deg + 1; use cov='unscaled'")
            fac = resids / (xt.shape[0] - order)
        fac = fac.reshape(-1)
        if yt.ndim == 1:
            return c, base * fac.reshape(1, 1)
        return c, base.reshape(base.shape + (1,)) * fac.reshape(1, 1, -1)
    return c


def poly(seq_of_zeros: ArrayLike) -> Tensor:
    """The coefficients of the monic polynomial with the given (real) roots."""
    (z,) = inexact(seq_of_zeros)
    z = z.reshape(1) if z.ndim == 0 else z
    if z.ndim != 1:
        raise NotImplementedError("fgrad.numpy.poly: only a 1-d array of roots is supported "
                                  "(the characteristic polynomial of a matrix needs complex "
                                  "eigenvalues)")
    a = Tensor(np.ones(1, z.dtype.np))
    for i in range(z.shape[0]):
        a = convolve(a, concatenate([Tensor(np.ones(1, z.dtype.np)), -z[i:i + 1]]))
    return a if z.shape[0] else Tensor(np.ones((), z.dtype.np))


def polydiv(u: ArrayLike, v: ArrayLike, *, trim_leading_zeros: bool = False
            ) -> tuple[Tensor, Tensor]:
    """(quotient, remainder) of the polynomial long division u / v (float32 for integer
    inputs). As in JAX the remainder keeps u's length (leading zeros included) unless
    trim_leading_zeros=True (concrete values only) drops leading |r| < sqrt(eps)."""
    num, den = inexact(u, v)
    num, den = _vector("polydiv", num), _vector("polydiv", den)
    if den.shape[0] == 0:
        raise ValueError("fgrad.numpy.polydiv: the divisor v is empty")
    m, n = num.shape[0] - 1, den.shape[0] - 1
    scale = 1.0 / den[0]
    quotient = []
    rem = num
    for k in range(m - n + 1):
        d = scale * rem[k]
        quotient.append(d.reshape(1))
        rem = rem.at[k:k + n + 1].add(-d * den)
    q = concatenate(quotient) if quotient else Tensor(np.zeros(1, num.dtype.np))
    if trim_leading_zeros:
        if type(rem) is not Tensor:
            raise TypeError("fgrad.numpy.polydiv: trim_leading_zeros=True needs concrete "
                            "coefficients (the length depends on their values); leave it "
                            "False under jit")
        vals = np.abs(rem.numpy().astype(np.float64))
        big = np.flatnonzero(vals >= np.sqrt(np.finfo(num.dtype.np).eps))
        rem = rem[int(big[0]):] if big.size else rem[:0]
    return q, rem
