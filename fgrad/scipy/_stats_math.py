"""Helpers for fgrad.scipy.stats' distributions: JAX's argument promotion, the regularized
incomplete gamma and beta functions (gammainc, gammaincc, betainc) and the scaled Bessel
function i0e, all composed from elementwise primitives, so they jit, vmap and differentiate
(in every argument) like any elementwise code.

Float32 inputs are evaluated in float64 and rounded once. gammainc/gammaincc use the power
series for x < a + 1 and Lentz's continued fraction above it; betainc uses the continued
fraction on whichever side of the mean converges fast. Both run a fixed number of steps
(`fori_loop`, so reverse mode works), which converges to float64 accuracy for shape
parameters up to about 1e3 (a and b); beyond that the error grows slowly. Edge values follow
JAX and SciPy: NaN for negative arguments, x outside the domain and P(0, 0), P(0, x) = 1,
I(0, b, x) = 1 and I(a, 0, x) = 0.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.prims import log1p_p
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, asarray, float_of, is_scalar, result_type
from fgrad.numpy.mathfuncs import scaled_i0_of_abs
from fgrad.scipy._special_math import lgamma
from fgrad.transforms.control.while_loop import fori_loop

_STEPS = 320
_TINY = 1e-300


def promote(*args: ArrayLike) -> list[Tensor]:
    """The arguments as Tensors of one float dtype and one broadcast shape (JAX's
    promote_args_inexact: Python scalars are weak, integers become the default float)."""
    dt = result_type(*[float(a) if isinstance(a, bool) else a for a in args])
    if not dt.is_float:
        dt = float_of(Tensor(np.zeros((), dt.np))).dtype
    ts = [asarray(float(a) if is_scalar(a) else a, dt) for a in args]
    shape = tuple(np.broadcast_shapes(*(t.shape for t in ts)))
    return [t if t.shape == shape else t.expand(shape) for t in ts]


def _wide(x: Tensor) -> Tensor:
    return x if x.dtype == dtypes.float64 else x.cast(dtypes.float64)


def _back(y: Tensor, like: Tensor) -> Tensor:
    return y if y.dtype == like.dtype else y.cast(like.dtype)


def _guard(v: Tensor) -> Tensor:
    return (v.abs() < _TINY).where(_TINY, v)


def _step(i: Tensor) -> Tensor:
    return i.cast(dtypes.float64)


# ---------------------------------------------------------------------------- incomplete gamma

def _gamma_series(a: Tensor, x: Tensor) -> Tensor:
    """P(a, x) by its power series x^a e^-x / Gamma(a + 1) sum_n x^n / ((a + 1)...(a + n))."""
    def body(i: Tensor, carry: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        term, total = carry
        term = term * x / (a + _step(i))
        return term, total + term
    one = x * 0.0 + 1.0
    _, total = fori_loop(1, _STEPS, body, (one, one))
    return (a * x.log() - x - lgamma(a + 1.0)).exp() * total


def _gamma_fraction(a: Tensor, x: Tensor) -> Tensor:
    """Q(a, x) by Legendre's continued fraction (modified Lentz), for x >= a + 1."""
    def body(i: Tensor, carry: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        b, c, d, h = carry
        n = _step(i)
        an = -n * (n - a)
        b = b + 2.0
        d = 1.0 / _guard(an * d + b)
        c = _guard(b + an / c)
        return b, c, d, h * d * c
    b0 = x + 1.0 - a
    d0 = 1.0 / _guard(b0)
    _, _, _, h = fori_loop(1, _STEPS, body, (b0, x * 0.0 + 1.0 / _TINY, d0, d0))
    return (a * x.log() - x - lgamma(a)).exp() * h


def _gammainc_pair(a_in: ArrayLike, x_in: ArrayLike) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(P, Q, nan-mask, like): both regularized incomplete gamma functions, computed once."""
    a0, x0 = promote(a_in, x_in)
    a, x = _wide(a0), _wide(x0)
    bad = (a < 0) | (x < 0) | a.isnan() | x.isnan() | (a == math.inf) | ((a == 0) & (x == 0))
    ok = ~bad & (a > 0) & (x > 0) & (x < math.inf)
    series = ok & (x < a + 1.0)
    frac = ok & ~series
    a_s = ok.where(a, 1.0)
    p_series = _gamma_series(a_s, series.where(x, 0.5))
    q_frac = _gamma_fraction(a_s, frac.where(x, a_s + 2.0))
    p = series.where(p_series, 1.0 - q_frac)
    q = series.where(1.0 - p_series, q_frac)
    zero_x = ~bad & (x == 0) & (a > 0)
    p = zero_x.where(0.0, ok.where(p, 1.0))   # a == 0 (x > 0) and x == inf give P = 1
    q = zero_x.where(1.0, ok.where(q, 0.0))
    return p, q, bad, a0


def gammainc(a: ArrayLike, x: ArrayLike) -> Tensor:
    """The regularized lower incomplete gamma function P(a, x)."""
    p, _, bad, like = _gammainc_pair(a, x)
    return _back(bad.where(math.nan, p), like)


def gammaincc(a: ArrayLike, x: ArrayLike) -> Tensor:
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    _, q, bad, like = _gammainc_pair(a, x)
    return _back(bad.where(math.nan, q), like)


# ---------------------------------------------------------------------------- incomplete beta

def _beta_fraction(a: Tensor, b: Tensor, x: Tensor) -> Tensor:
    """The continued fraction of I_x(a, b) (modified Lentz), fast for x < (a+1)/(a+b+2)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0

    def body(i: Tensor, carry: tuple[Tensor, Tensor, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        c, d, h = carry
        m = _step(i)
        m2 = 2.0 * m
        even = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 / _guard(1.0 + even * d)
        c = _guard(1.0 + even / c)
        h = h * d * c
        odd = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 / _guard(1.0 + odd * d)
        c = _guard(1.0 + odd / c)
        return c, d, h * d * c
    d0 = 1.0 / _guard(1.0 - qab * x / qap)
    _, _, h = fori_loop(1, _STEPS, body, (x * 0.0 + 1.0, d0, d0))
    return h


def betainc(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Tensor:
    """The regularized incomplete beta function I_x(a, b)."""
    a0, b0, x0 = promote(a, b, x)
    aw, bw, xw = _wide(a0), _wide(b0), _wide(x0)
    bad = (aw < 0) | (bw < 0) | (xw < 0) | (xw > 1) | ((aw == 0) & (bw == 0)) | \
        aw.isnan() | bw.isnan() | xw.isnan()
    ok = ~bad & (aw > 0) & (bw > 0) & (xw > 0) & (xw < 1)
    flip = xw > (aw + 1.0) / (aw + bw + 2.0)
    p = ok.where(flip.where(bw, aw), 1.0)
    q = ok.where(flip.where(aw, bw), 1.0)
    y = ok.where(flip.where(1.0 - xw, xw), 0.5)
    front = (p * y.log() + q * log1p_p.bind(-y) - lgamma(p) - lgamma(q) + lgamma(p + q)).exp()
    part = front * _beta_fraction(p, q, y) / p
    inner = flip.where(1.0 - part, part)
    edge = ((aw == 0) | (xw == 1)).cast(dtypes.float64)   # I(0, b, x) = I(a, b, 1) = 1
    return _back(bad.where(math.nan, ok.where(inner, edge)), a0)


# ---------------------------------------------------------------------------- Bessel i0e


def i0e(x: ArrayLike) -> Tensor:
    """exp(-|x|) I0(x), the exponentially scaled modified Bessel function of order 0."""
    (t,) = promote(x)
    return _back(scaled_i0_of_abs(_wide(t).abs()), t)
