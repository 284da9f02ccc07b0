"""More elementwise math with jax.numpy's semantics: Array API aliases (acos, atan2, pow,
bitwise_invert, ...), floating-point decomposition (frexp, ldexp, modf, nextafter,
spacing), integer gcd/lcm, the Bessel function i0 and the window functions (hanning,
hamming, bartlett, blackman, kaiser).

All are compositions of Tensor ops, so they work under jit, grad and vmap."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from fgrad.core.dtypes import DType, dtypes
from fgrad.core.tensor import Tensor
from fgrad.numpy import elementwise as _ew
from fgrad.numpy._base import ArrayLike, asarray, float_of, operands, result_type
from fgrad.numpy.numeric import inexact, static_int

acos, acosh, asin, asinh = _ew.arccos, _ew.arccosh, _ew.arcsin, _ew.arcsinh
atan, atanh, atan2 = _ew.arctan, _ew.arctanh, _ew.arctan2
pow = _ew.power  # noqa: A001
bitwise_invert = _ew.invert
bitwise_left_shift, bitwise_right_shift = _ew.left_shift, _ew.right_shift


def fabs(x: ArrayLike) -> Tensor:
    """|x| as a float (integer input gives float32)."""
    return float_of(asarray(x)).abs()


def modf(x: ArrayLike) -> tuple[Tensor, Tensor]:
    """(fractional part, integral part), both with the sign of x."""
    t = float_of(asarray(x))
    whole = t.trunc()
    return _ew.copysign(t.isinf().where(0.0, t - whole), t), whole


# ---------------------------------------------------------------------------- float bits

# (integer type of the same width, exponent bits, mantissa bits) per float dtype
_LAYOUT: dict[DType, tuple[DType, int, int]] = {
    dtypes.float16: (dtypes.int16, 5, 10), dtypes.bfloat16: (dtypes.int16, 8, 7),
    dtypes.float32: (dtypes.int32, 8, 23), dtypes.float64: (dtypes.int64, 11, 52),
}


def frexp(x: ArrayLike) -> tuple[Tensor, Tensor]:
    """(mantissa, exponent) with x = mantissa * 2**exponent, 0.5 <= |mantissa| < 1 (int32
    exponents; 0, inf and NaN give (x, 0)). Exact: it reads the float's bits."""
    (t,) = inexact(x)
    itype, ebits, mbits = _LAYOUT[t.dtype]
    bias = (1 << (ebits - 1)) - 2
    tiny = t.abs() < float(2.0 ** (2 - (1 << (ebits - 1))))
    scaled = tiny.where(t * float(2.0 ** (mbits + 2)), t)
    bits = scaled.bitcast(itype)
    field = (bits >> mbits) & ((1 << ebits) - 1)
    exp_mask = ((1 << ebits) - 1) << mbits
    mant = ((bits & ~exp_mask) | (bias << mbits)).bitcast(t.dtype)
    e = field.cast(dtypes.int32) - bias - tiny.where(mbits + 2, 0)
    special = (t == 0) | t.isinf() | t.isnan()
    return special.where(t, mant), special.where(0, e).cast(dtypes.int32)


def _pow2(e: Tensor, dt: DType) -> Tensor:
    """2.0**e exactly, for integer e in the normal exponent range of dt."""
    itype, ebits, mbits = _LAYOUT[dt]
    bias = (1 << (ebits - 1)) - 1
    return ((e.cast(itype) + bias) << mbits).bitcast(dt)


def ldexp(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """x1 * 2**x2 for integer x2 (float32 for integer x1)."""
    (x,) = inexact(x1)
    n = asarray(x2)
    if not (n.dtype.is_int or n.dtype == dtypes.bool):
        raise TypeError(f"fgrad.numpy.ldexp: the exponent x2 must be an integer array, got "
                        f"{n.dtype.np}")
    _, ebits, _ = _LAYOUT[x.dtype]
    top = (1 << (ebits - 1)) - 2
    n = n.cast(dtypes.int32).clip(-3 * top, 3 * top)
    n1 = n // 3
    n2 = (n - n1) // 2
    return x * _pow2(n1, x.dtype) * _pow2(n2, x.dtype) * _pow2(n - n1 - n2, x.dtype)


def nextafter(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The next representable float after x1 in the direction of x2."""
    x, y = inexact(x1, x2)
    shape = tuple(np.broadcast_shapes(x.shape, y.shape))
    x, y = x.expand(shape) if x.shape != shape else x, y.expand(shape) if y.shape != shape \
        else y
    itype, ebits, mbits = _LAYOUT[x.dtype]
    bits = x.bitcast(itype)
    away = (y > x) == (x > 0)
    stepped = away.where(bits + 1, bits - 1)
    sign_bit = -(1 << (ebits + mbits))
    from_zero = (y > 0).where(Tensor(np.array(1, itype.np)),
                              Tensor(np.array(sign_bit + 1, itype.np)))
    out = (x == 0).where(from_zero, stepped).cast(itype).bitcast(x.dtype)
    out = (x == y).where(y, out)
    return (x.isnan() | y.isnan()).where(math.nan, out)


def spacing(x: ArrayLike) -> Tensor:
    """The distance from x to the next float away from zero (ulp(x), signed)."""
    (t,) = inexact(x)
    inf = (t < 0).where(-math.inf, math.inf)
    return nextafter(t, inf) - t


def _euclid(a: Tensor, b: Tensor) -> Tensor:
    for _ in range(int(a.dtype.itemsize * 8 * 1.45) + 2):
        zero = b == 0
        a, b = zero.where(a, b), zero.where(0, a % zero.where(1, b))
    return a


def _int_pair(name: str, x1: ArrayLike, x2: ArrayLike) -> tuple[Tensor, Tensor]:
    a, b = operands(x1, x2)
    dt = result_type(a, b)
    if not dt.is_int:
        raise TypeError(f"fgrad.numpy.{name}: arguments must be integers, got {dt.np}")
    a, b = asarray(a, dt), asarray(b, dt)
    shape = tuple(np.broadcast_shapes(a.shape, b.shape))
    return a.abs().expand(shape) if a.shape != shape else a.abs(), \
        b.abs().expand(shape) if b.shape != shape else b.abs()


def gcd(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The greatest common divisor of |x1| and |x2| (integers)."""
    return _euclid(*_int_pair("gcd", x1, x2))


def lcm(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The least common multiple of |x1| and |x2| (0 if either is 0)."""
    a, b = _int_pair("lcm", x1, x2)
    d = _euclid(a, b)
    return (d == 0).where(0, a * (b // (d == 0).where(1, d)))


# ---------------------------------------------------------------------------- Bessel i0

# Chebyshev coefficients of exp(-x) i0(x) on [0, 8] and of exp(-x) sqrt(x) i0(x) on
# (8, inf) (Cephes, as NumPy's i0 uses them).
_I0A = (-4.4153416464793395e-18, 3.3307945188222384e-17, -2.431279846547955e-16,
        1.715391285555133e-15, -1.1685332877993451e-14, 7.676185498604936e-14,
        -4.856446783111929e-13, 2.95505266312964e-12, -1.726826291441556e-11,
        9.675809035373237e-11, -5.189795601635263e-10, 2.6598237246823866e-09,
        -1.300025009986248e-08, 6.046995022541919e-08, -2.670793853940612e-07,
        1.1173875391201037e-06, -4.4167383584587505e-06, 1.6448448070728896e-05,
        -5.754195010082104e-05, 0.00018850288509584165, -0.0005763755745385824,
        0.0016394756169413357, -0.004324309995050576, 0.010546460394594998,
        -0.02373741480589947, 0.04930528423967071, -0.09490109704804764,
        0.17162090152220877, -0.3046826723431984, 0.6767952744094761)
_I0B = (-7.233180487874754e-18, -4.830504485944182e-18, 4.46562142029676e-17,
        3.461222867697461e-17, -2.8276239805165836e-16, -3.425485619677219e-16,
        1.7725601330565263e-15, 3.8116806693526224e-15, -9.554846698828307e-15,
        -4.150569347287222e-14, 1.54008621752141e-14, 3.8527783827421426e-13,
        7.180124451383666e-13, -1.7941785315068062e-12, -1.3215811840447713e-11,
        -3.1499165279632416e-11, 1.1889147107846439e-11, 4.94060238822497e-10,
        3.3962320257083865e-09, 2.266668990498178e-08, 2.0489185894690638e-07,
        2.8913705208347567e-06, 6.889758346916825e-05, 0.0033691164782556943,
        0.8044904110141088)


def _chebyshev(x: Tensor, coeffs: tuple[float, ...]) -> Tensor:
    b0: Any = x * 0 + coeffs[0]
    b1: Any = x * 0
    b2: Any = b1
    for c in coeffs[1:]:
        b2, b1 = b1, b0
        b0 = x * b1 - b2 + c
    return 0.5 * (b0 - b2)


def scaled_i0_of_abs(a: Tensor) -> Tensor:
    """exp(-a) I0(a) for a = |x| >= 0 (Cephes' Chebyshev series on [0, 8] and beyond)."""
    near = _chebyshev(a.minimum(8.0) / 2.0 - 2.0, _I0A)
    large = a.maximum(8.0)
    far = _chebyshev(32.0 / large - 2.0, _I0B) / large.sqrt()
    return (a <= 8.0).where(near, far)


def i0(x: ArrayLike) -> Tensor:
    """The modified Bessel function of the first kind, order 0 (float32 for integers)."""
    (t,) = inexact(x)
    a = t.abs()
    return a.exp() * scaled_i0_of_abs(a)


# ---------------------------------------------------------------------------- windows

def _window(name: str, doc: str, fn: Callable[[Tensor, int], Tensor]) -> Callable[[int], Tensor]:
    def window(M: int) -> Tensor:  # noqa: N803
        m = static_int(M, name, "M")
        if m <= 1:
            return Tensor(np.ones(max(m, 0), np.float32))
        return fn(Tensor(np.arange(m, dtype=np.float32)), m)
    window.__name__ = window.__qualname__ = name
    window.__doc__ = f"The {doc} window of M points (float32), as NumPy defines it."
    return window


def _cos(n: Tensor, m: int, k: int) -> Tensor:
    return (2 * k * math.pi * n / (m - 1)).cos()


hanning = _window("hanning", "Hann", lambda n, m: 0.5 - 0.5 * _cos(n, m, 1))
hamming = _window("hamming", "Hamming", lambda n, m: 0.54 - 0.46 * _cos(n, m, 1))
bartlett = _window("bartlett", "Bartlett (triangular)",
                   lambda n, m: 1 - (2 * n + 1 - m).abs() / (m - 1))
blackman = _window("blackman", "Blackman",
                   lambda n, m: 0.42 - 0.5 * _cos(n, m, 1) + 0.08 * _cos(n, m, 2))


def kaiser(M: int, beta: ArrayLike) -> Tensor:  # noqa: N803
    """The Kaiser window of M points with shape parameter beta (which may be traced)."""
    m = static_int(M, "kaiser", "M")
    if m <= 1:
        return Tensor(np.ones(max(m, 0), np.float32))
    n = Tensor(np.arange(m, dtype=np.float32))
    alpha = 0.5 * (m - 1)
    b = asarray(beta, dtypes.float32) if not isinstance(beta, Tensor) else beta
    ratio = (n - alpha) / alpha
    return i0(b * (1 - ratio * ratio).maximum(0.0).sqrt()) / i0(b)


# ---------------------------------------------------------------------------- bit counting

_UNSIGNED = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}


def bitwise_count(x: ArrayLike, /) -> Tensor:
    """The number of 1 bits in |x| (uint8), for integer and bool arrays."""
    t = asarray(x)
    if t.dtype == dtypes.bool:
        return t.cast(dtypes.uint8)
    if not t.dtype.is_int:
        raise TypeError(f"fgrad.numpy.bitwise_count: x must be an integer or bool array, got "
                        f"{t.dtype.np}")
    u = t if t.dtype.is_unsigned else t.abs().cast(_UNSIGNED[t.dtype.itemsize])
    total = (u & 1).cast(dtypes.uint8)
    for b in range(1, 8 * t.dtype.itemsize):
        total = total + (_ew.right_shift(u, b) & 1).cast(dtypes.uint8)
    return total
