"""Elementwise math, comparisons and logic with NumPy's names and broadcasting.

Floating functions of integer or bool input return float32 (jnp's rule); binary functions
promote like NumPy with weak Python scalars.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.prims import atan2_p, expm1_p, log1p_p
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, asarray, float_of, is_scalar, operands, refuse_out


def _unary(name: str, fn: Callable[[Tensor], Tensor], floating: bool = True
           ) -> Callable[..., Tensor]:
    def op(x: ArrayLike, out: Any = None) -> Tensor:
        refuse_out(name, out)
        t = asarray(x)
        return fn(float_of(t) if floating else t)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise {name} (NumPy semantics)."
    return op


def _binary(name: str, fn: Callable[[Any, Any], Tensor], floating: bool = False
            ) -> Callable[..., Tensor]:
    def op(x1: ArrayLike, x2: ArrayLike, out: Any = None) -> Tensor:
        refuse_out(name, out)
        a, b = operands(x1, x2)
        if floating:
            a = a if is_scalar(a) else float_of(a)
            b = b if is_scalar(b) else float_of(b)
            if is_scalar(a) and is_scalar(b):
                a = asarray(float(a))
        return fn(a, b)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise {name} of x1 and x2, broadcast (NumPy semantics)."
    return op


def same_shape_float(a: Any, b: Any) -> tuple[Tensor, Tensor]:
    """Two operands as float Tensors of one broadcast shape and one dtype."""
    ta = float_of(asarray(a)) if not is_scalar(a) else None
    tb = float_of(asarray(b)) if not is_scalar(b) else None
    dt = (ta + tb).dtype if ta is not None and tb is not None else \
        (ta if ta is not None else tb if tb is not None else asarray(0.0)).dtype
    ta = asarray(float(a), dt) if ta is None else ta.cast(dt)
    tb = asarray(float(b), dt) if tb is None else tb.cast(dt)
    shape = tuple(np.broadcast_shapes(ta.shape, tb.shape))
    return ta.expand(shape) if ta.shape != shape else ta, \
        tb.expand(shape) if tb.shape != shape else tb


# ---------------------------------------------------------------------------- unary

def _log1p(x: Tensor) -> Tensor:
    return log1p_p.bind(x)


def _expm1(x: Tensor) -> Tensor:
    return expm1_p.bind(x)


def _cbrt(x: Tensor) -> Tensor:
    return x.sign() * x.abs() ** (1.0 / 3.0)


def _sinc(x: Tensor) -> Tensor:
    zero = x == 0
    px = zero.where(1.0, x) * math.pi
    return zero.where(1.0, px.sin() / px)


def _round_half_even(x: Tensor) -> Tensor:
    return x.round()


def _signbit(x: Tensor) -> Tensor:
    if not x.dtype.is_float:
        return x < 0
    zero = x == 0
    return (x < 0) | (zero & (1.0 / zero.where(x, 1.0) < 0))


def _identity(x: Tensor) -> Tensor:
    return x


absolute = _unary("absolute", Tensor.abs, floating=False)
abs = _unary("abs", Tensor.abs, floating=False)  # noqa: A001
negative = _unary("negative", Tensor.neg, floating=False)
positive = _unary("positive", _identity, floating=False)
sign = _unary("sign", Tensor.sign, floating=False)
square = _unary("square", lambda x: x * x, floating=False)
sqrt = _unary("sqrt", Tensor.sqrt)
cbrt = _unary("cbrt", _cbrt)
reciprocal = _unary("reciprocal", lambda x: 1.0 / x)
exp = _unary("exp", Tensor.exp)
exp2 = _unary("exp2", Tensor.exp2)
expm1 = _unary("expm1", _expm1)
log = _unary("log", Tensor.log)
log1p = _unary("log1p", _log1p)
log2 = _unary("log2", lambda x: x.log() * (1 / math.log(2)))
log10 = _unary("log10", lambda x: x.log() * (1 / math.log(10)))
sin = _unary("sin", Tensor.sin)
cos = _unary("cos", Tensor.cos)
tan = _unary("tan", Tensor.tan)
arcsin = _unary("arcsin", Tensor.asin)
arccos = _unary("arccos", Tensor.acos)
arctan = _unary("arctan", Tensor.atan)
sinh = _unary("sinh", Tensor.sinh)
cosh = _unary("cosh", Tensor.cosh)
tanh = _unary("tanh", Tensor.tanh)
arcsinh = _unary("arcsinh", Tensor.asinh)
arccosh = _unary("arccosh", Tensor.acosh)
arctanh = _unary("arctanh", Tensor.atanh)
deg2rad = _unary("deg2rad", lambda x: x * (math.pi / 180))
rad2deg = _unary("rad2deg", lambda x: x * (180 / math.pi))
radians, degrees = deg2rad, rad2deg
floor = _unary("floor", lambda x: x.floor() if x.dtype.is_float else x, floating=False)
ceil = _unary("ceil", lambda x: x.ceil() if x.dtype.is_float else x, floating=False)
trunc = _unary("trunc", lambda x: x.trunc() if x.dtype.is_float else x, floating=False)
fix = trunc
rint = _unary("rint", lambda x: x.round() if x.dtype.is_float else x, floating=False)
sinc = _unary("sinc", _sinc)
signbit = _unary("signbit", _signbit, floating=False)
isnan = _unary("isnan", lambda x: x.isnan() if x.dtype.is_float else x != x, floating=False)
isinf = _unary("isinf", lambda x: x.isinf() if x.dtype.is_float else x != x, floating=False)
isfinite = _unary("isfinite", lambda x: x.isfinite() if x.dtype.is_float else x == x,
                  floating=False)
isposinf = _unary("isposinf", lambda x: x == math.inf, floating=False)
isneginf = _unary("isneginf", lambda x: x == -math.inf, floating=False)


def round(a: ArrayLike, decimals: int = 0, out: Any = None) -> Tensor:  # noqa: A001
    """Round half to even to `decimals` places (integers unchanged for decimals >= 0)."""
    refuse_out("round", out)
    x = asarray(a)
    if not x.dtype.is_float:
        if decimals >= 0:
            return x
        scale = 10 ** -decimals
        return (float_of(x) / scale).round().mul(scale).cast(x.dtype)
    if decimals == 0:
        return x.round()
    scale = 10.0 ** decimals
    return (x * scale).round() / scale


around = round


def nan_to_num(x: ArrayLike, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    """NaN -> `nan`, +inf -> `posinf` (default: the largest finite value), -inf -> `neginf`."""
    t = asarray(x)
    if not t.dtype.is_float:
        return t
    big = float(np.finfo(t.dtype.np if t.dtype != dtypes.bfloat16 else np.float32).max)
    hi = big if posinf is None else posinf
    lo = -big if neginf is None else neginf
    t = t.isnan().where(nan, t)
    return (t == math.inf).where(hi, (t == -math.inf).where(lo, t))


# ---------------------------------------------------------------------------- binary

def _true_divide(a: Any, b: Any) -> Tensor:
    return a / b


def _hypot(a: Any, b: Any) -> Tensor:
    x, y = same_shape_float(a, b)
    ax, ay = x.abs(), y.abs()
    hi, lo = ax.maximum(ay), ax.minimum(ay)
    safe = (hi == 0).where(1.0, hi)
    r = lo / safe
    return (hi == 0).where(0.0, hi * (1 + r * r).sqrt())


def _arctan2(a: Any, b: Any) -> Tensor:
    y, x = same_shape_float(a, b)
    return atan2_p.bind(y, x)


def _logaddexp(a: Any, b: Any) -> Tensor:
    x, y = same_shape_float(a, b)
    hi = x.maximum(y)
    delta = (x - y).abs()
    finite = delta.isnan().logical_not() & (delta != math.inf)
    tail = _log1p(finite.where(-delta, -1.0).exp())
    return finite.where(hi + tail, (x != x).where(x, (y != y).where(y, hi)))


def _logaddexp2(a: Any, b: Any) -> Tensor:
    x, y = same_shape_float(a, b)
    ln2 = math.log(2)
    return _logaddexp(x * ln2, y * ln2) / ln2


def _copysign(a: Any, b: Any) -> Tensor:
    x, y = same_shape_float(a, b)
    return _signbit(y).where(-x.abs(), x.abs())


def _heaviside(a: Any, b: Any) -> Tensor:
    x, h0 = same_shape_float(a, b)
    return (x < 0).where(0.0, (x > 0).where(1.0, h0))


def _fmax(a: Any, b: Any) -> Tensor:
    x, y = same_shape_float(a, b)
    return x.isnan().where(y, y.isnan().where(x, x.maximum(y)))


def _fmin(a: Any, b: Any) -> Tensor:
    x, y = same_shape_float(a, b)
    return x.isnan().where(y, y.isnan().where(x, x.minimum(y)))


def _fmod(a: Any, b: Any) -> Tensor:
    x = a if isinstance(a, Tensor) else asarray(a, asarray(b).dtype)
    return x.fmod(b)


def _pow(a: Any, b: Any) -> Tensor:
    return a ** b if not is_scalar(a) else asarray(b).pow(a, reverse=True)


def _maximum(a: Any, b: Any) -> Tensor:
    return a.maximum(b) if isinstance(a, Tensor) else b.maximum(a)


def _minimum(a: Any, b: Any) -> Tensor:
    return a.minimum(b) if isinstance(a, Tensor) else b.minimum(a)


add = _binary("add", lambda a, b: a + b)
subtract = _binary("subtract", lambda a, b: a - b)
multiply = _binary("multiply", lambda a, b: a * b)
divide = _binary("divide", _true_divide, floating=True)
true_divide = divide
floor_divide = _binary("floor_divide", lambda a, b: a // b)
mod = _binary("mod", lambda a, b: a % b)
remainder = mod
fmod = _binary("fmod", _fmod)
power = _binary("power", _pow)
float_power = _binary("float_power", _pow, floating=True)
maximum = _binary("maximum", _maximum)
minimum = _binary("minimum", _minimum)
fmax = _binary("fmax", _fmax, floating=True)
fmin = _binary("fmin", _fmin, floating=True)
hypot = _binary("hypot", _hypot, floating=True)
arctan2 = _binary("arctan2", _arctan2, floating=True)
logaddexp = _binary("logaddexp", _logaddexp, floating=True)
logaddexp2 = _binary("logaddexp2", _logaddexp2, floating=True)
copysign = _binary("copysign", _copysign, floating=True)
heaviside = _binary("heaviside", _heaviside, floating=True)
equal = _binary("equal", lambda a, b: a == b)
not_equal = _binary("not_equal", lambda a, b: a != b)
less = _binary("less", lambda a, b: a < b)
less_equal = _binary("less_equal", lambda a, b: a <= b)
greater = _binary("greater", lambda a, b: a > b)
greater_equal = _binary("greater_equal", lambda a, b: a >= b)


def divmod(x1: ArrayLike, x2: ArrayLike) -> tuple[Tensor, Tensor]:  # noqa: A001
    """(floor_divide(x1, x2), mod(x1, x2))."""
    return floor_divide(x1, x2), mod(x1, x2)


# ---------------------------------------------------------------------------- logic, bits

def _bool(x: Any) -> Tensor:
    t = asarray(x)
    return t if t.dtype == dtypes.bool else t != 0


logical_and = _binary("logical_and", lambda a, b: _bool(a) & _bool(b))
logical_or = _binary("logical_or", lambda a, b: _bool(a) | _bool(b))
logical_xor = _binary("logical_xor", lambda a, b: _bool(a) ^ _bool(b))
logical_not = _unary("logical_not", lambda x: _bool(x).logical_not(), floating=False)
bitwise_and = _binary("bitwise_and", lambda a, b: a & b if isinstance(a, Tensor) else b & a)
bitwise_or = _binary("bitwise_or", lambda a, b: a | b if isinstance(a, Tensor) else b | a)
bitwise_xor = _binary("bitwise_xor", lambda a, b: a ^ b if isinstance(a, Tensor) else b ^ a)
bitwise_not = _unary("bitwise_not", Tensor.bitwise_not, floating=False)
invert = bitwise_not
left_shift = _binary("left_shift", lambda a, b: a << b)
right_shift = _binary("right_shift", lambda a, b: a >> b)


def where(condition: ArrayLike, x: ArrayLike = None, y: ArrayLike = None, *,
          size: int | None = None, fill_value: Any = None) -> Any:
    """x where condition is true, else y (broadcast). With one argument: `nonzero`."""
    if x is None and y is None:
        from fgrad.numpy.sets import nonzero
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("fgrad.numpy.where: pass both x and y, or neither")
    cond = _bool(condition)
    if is_scalar(x) and is_scalar(y):
        x = asarray(x)
    return cond.where(x, y)


def clip(arr: ArrayLike, min: Any = None, max: Any = None, *,  # noqa: A002
         a_min: Any = None, a_max: Any = None, out: Any = None) -> Tensor:
    """Values limited to [min, max] (either may be None; arrays broadcast)."""
    refuse_out("clip", out)
    lo = a_min if min is None else min
    hi = a_max if max is None else max
    x = asarray(arr)
    if lo is not None:
        x = maximum(x, lo if is_scalar(lo) else asarray(lo))
    if hi is not None:
        x = minimum(x, hi if is_scalar(hi) else asarray(hi))
    return x


def isclose(a: ArrayLike, b: ArrayLike, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Tensor:
    """|a - b| <= atol + rtol * |b| elementwise (infinities equal only to themselves)."""
    x, y = same_shape_float(a, b)
    close = (x - y).abs() <= atol + rtol * y.abs()
    close = (x.isinf() | y.isinf()).where(x == y, close)
    return close | (x.isnan() & y.isnan()) if equal_nan else close


def allclose(a: ArrayLike, b: ArrayLike, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> Tensor:
    """Whether every element is close (a bool Tensor)."""
    return isclose(a, b, rtol, atol, equal_nan).all()


def array_equal(a1: ArrayLike, a2: ArrayLike, equal_nan: bool = False) -> Tensor:
    """Whether the shapes match and every element is equal."""
    x, y = asarray(a1), asarray(a2)
    if x.shape != y.shape:
        return asarray(False)
    eq = x == y
    if equal_nan and x.dtype.is_float:
        eq = eq | (x.isnan() & y.isnan())
    return eq.all()
