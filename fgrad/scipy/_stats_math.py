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

# Chebyshev coefficients (Cephes) of exp(-x) i0(x) on [0, 8] and of exp(-x) sqrt(x) i0(x)
# on (8, inf).
_I0A = (-4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
        1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
        -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
        9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
        -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
        1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
        -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
        1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
        -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
        1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1)
_I0B = (-7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
        3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
        1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
        -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
        7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
        -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
        3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
        2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
        8.04490411014108831608e-1)


def _chebyshev(x: Tensor, coeffs: tuple[float, ...]) -> Tensor:
    b0: Any = x * 0.0 + coeffs[0]
    b1: Any = x * 0.0
    b2: Any = b1
    for c in coeffs[1:]:
        b2, b1 = b1, b0
        b0 = x * b1 - b2 + c
    return 0.5 * (b0 - b2)


def i0e(x: ArrayLike) -> Tensor:
    """exp(-|x|) I0(x), the exponentially scaled modified Bessel function of order 0."""
    (t,) = promote(x)
    a = _wide(t).abs()
    near = _chebyshev(a.minimum(8.0) / 2.0 - 2.0, _I0A)
    big = a.maximum(8.0)
    far = _chebyshev(32.0 / big - 2.0, _I0B) / big.sqrt()
    return _back((a <= 8.0).where(near, far), t)
