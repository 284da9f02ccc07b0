"""Elementwise `jax.lax` operations: unary math, binary arithmetic, comparisons, bitwise ops,
shifts, clamp, select and dtype conversion.

Operands follow `fgrad/lax/_args.py`: array-likes are converted, dtypes must match (no
promotion; a Python scalar takes the array's dtype when it is of the same kind) and shapes
broadcast only from 0-d or size-1 axes of equal rank. Integer `div` rounds toward zero and
`rem` takes the sign of the dividend; as on XLA, an integer division by zero gives -1 (all
bits set) and the remainder by zero gives the dividend.
"""
from __future__ import annotations

import enum
from typing import Any

import numpy as np

from fgrad.core import prims as P
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.errors import ArgumentError
from fgrad.core.prims._util import fmt_shape
from fgrad.core.tensor import Tensor
from fgrad.lax._args import (as_int, broadcast_shape, check_kind, dtype_name, expand, is_weak,
                             same_dtype, to_dtype, to_tensor, weak_scalar)

__all__ = ["RoundingMethod", "abs", "add", "atan2", "bitcast_convert_type", "bitwise_and",
           "bitwise_not", "bitwise_or", "bitwise_xor", "ceil", "clamp", "convert_element_type",
           "cos", "div", "eq", "erf", "exp", "expm1", "floor", "ge", "gt", "integer_pow",
           "is_finite", "le", "log", "log1p", "logistic", "lt", "max", "min", "mul", "ne", "neg",
           "pow", "reciprocal", "rem", "round", "rsqrt", "select", "select_n", "shift_left",
           "shift_right_arithmetic", "shift_right_logical", "sign", "sin", "sqrt", "square",
           "sub", "tan", "tanh"]

NUM, ANY, FLOAT, INTS, SIGNED = "iuf", "biuf", "f", "iu", "if"


def _unary(op: str, x: Any, kinds: str) -> Tensor:
    t = to_tensor(op, x, "x")
    check_kind(op, t, kinds, "x")
    return t


def _binary(op: str, x: Any, y: Any, kinds: str) -> tuple[Tensor, Tensor]:
    a, b = same_dtype(op, [x, y], ("x", "y"))
    check_kind(op, a, kinds, "x")
    shape = broadcast_shape(op, [a, b], ("x", "y"))
    return expand(a, shape), expand(b, shape)


def _const(value: Any, like: Tensor) -> Tensor:
    """`value` (wrapped into `like`'s dtype, so -1 is all bits set) broadcast like `like`."""
    with np.errstate(all="ignore"):
        scalar = Tensor(np.array(value).astype(like.dtype.np))
    return expand(scalar, like.shape)


# ---------------------------------------------------------------------------- unary

def neg(x: Any) -> Tensor:
    """-x (integers wrap; unsigned values negate modulo 2**bits)."""
    return P.neg_p.bind(_unary("neg", x, NUM))


def sign(x: Any) -> Tensor:
    """-1, 0 or 1 by the sign of x (NaN stays NaN, -0.0 stays -0.0)."""
    t = _unary("sign", x, NUM)
    if not t.dtype.is_float:
        return P.sign_p.bind(t)
    zero = _const(0, t)
    return P.select(P.eq_p.bind(t, zero), P.mul_p.bind(t, zero), P.sign_p.bind(t))


def abs(x: Any) -> Tensor:  # noqa: A001
    """|x| for signed integer and float x."""
    return P.abs_p.bind(_unary("abs", x, SIGNED))


def floor(x: Any) -> Tensor:
    """Round a float toward -inf."""
    return P.floor_p.bind(_unary("floor", x, FLOAT))


def ceil(x: Any) -> Tensor:
    """Round a float toward +inf."""
    return P.ceil_p.bind(_unary("ceil", x, FLOAT))


class RoundingMethod(enum.IntEnum):
    """How `round` breaks ties (JAX's `lax.RoundingMethod`)."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def round(x: Any, rounding_method: Any = RoundingMethod.AWAY_FROM_ZERO  # noqa: A001
          ) -> Tensor:
    """Round a float to the nearest integer; ties away from zero (the default) or to even."""
    t = _unary("round", x, FLOAT)
    try:
        method = RoundingMethod(rounding_method)
    except ValueError:
        raise ArgumentError(f"lax.round: rounding_method must be RoundingMethod.AWAY_FROM_ZERO "
                            f"(0) or TO_NEAREST_EVEN (1), got {rounding_method!r}") from None
    if method == RoundingMethod.TO_NEAREST_EVEN:
        return P.round_p.bind(t)
    trunc = P.select(P.lt_p.bind(t, _const(0, t)), P.ceil_p.bind(t), P.floor_p.bind(t))
    frac = P.abs_p.bind(P.sub_p.bind(t, trunc))   # exact: t minus its integer part
    away = P.ge_p.bind(frac, _const(0.5, t))
    return P.select(away, P.add_p.bind(trunc, P.sign_p.bind(t)), trunc)


def is_finite(x: Any) -> Tensor:
    """True where the float x is neither inf nor NaN."""
    return _unary("is_finite", x, FLOAT).isfinite()


def exp(x: Any) -> Tensor:
    """e ** x."""
    return P.exp_p.bind(_unary("exp", x, FLOAT))


def log(x: Any) -> Tensor:
    """Natural logarithm."""
    return P.log_p.bind(_unary("log", x, FLOAT))


def log1p(x: Any) -> Tensor:
    """log(1 + x), accurate near 0."""
    return P.log1p_p.bind(_unary("log1p", x, FLOAT))


def expm1(x: Any) -> Tensor:
    """exp(x) - 1, accurate near 0."""
    return P.expm1_p.bind(_unary("expm1", x, FLOAT))


def tanh(x: Any) -> Tensor:
    """Hyperbolic tangent."""
    return P.tanh_p.bind(_unary("tanh", x, FLOAT))


def logistic(x: Any) -> Tensor:
    """1 / (1 + exp(-x))."""
    return P.logistic_p.bind(_unary("logistic", x, FLOAT))


def sin(x: Any) -> Tensor:
    """Sine."""
    return P.sin_p.bind(_unary("sin", x, FLOAT))


def cos(x: Any) -> Tensor:
    """Cosine."""
    return P.cos_p.bind(_unary("cos", x, FLOAT))


def tan(x: Any) -> Tensor:
    """Tangent."""
    return P.tan_p.bind(_unary("tan", x, FLOAT))


def sqrt(x: Any) -> Tensor:
    """Square root (NaN for negative x)."""
    return P.sqrt_p.bind(_unary("sqrt", x, FLOAT))


def rsqrt(x: Any) -> Tensor:
    """1 / sqrt(x)."""
    return P.rsqrt_p.bind(_unary("rsqrt", x, FLOAT))


def erf(x: Any) -> Tensor:
    """The error function."""
    return P.erf_p.bind(_unary("erf", x, FLOAT))


def square(x: Any) -> Tensor:
    """x * x."""
    t = _unary("square", x, NUM)
    return P.mul_p.bind(t, t)


def reciprocal(x: Any) -> Tensor:
    """1 / x for float x (lax has no integer reciprocal)."""
    t = _unary("reciprocal", x, FLOAT)
    return P.div_p.bind(_const(1, t), t)


def integer_pow(x: Any, y: int) -> Tensor:
    """x ** y for a static Python int y, by repeated squaring (as XLA). Integer x needs
    y >= 0."""
    t = _unary("integer_pow", x, NUM)
    n = as_int("integer_pow", y, "y")
    if n < 0 and not t.dtype.is_float:
        raise ArgumentError(f"lax.integer_pow: integers cannot be raised to negative powers, "
                            f"got {dtype_name(t.dtype)} x and y={n}; convert x to a float "
                            f"dtype first")
    if n == 0:
        return _const(1, t)
    acc: Tensor | None = None
    base, k = t, -n if n < 0 else n
    while k:
        if k & 1:
            acc = base if acc is None else P.mul_p.bind(acc, base)
        k >>= 1
        if k:
            base = P.mul_p.bind(base, base)
    assert acc is not None
    return P.div_p.bind(_const(1, acc), acc) if n < 0 else acc


def bitwise_not(x: Any) -> Tensor:
    """~x: logical not for bool, bitwise complement for integers."""
    return P.not_p.bind(_unary("bitwise_not", x, "biu"))


# ---------------------------------------------------------------------------- binary

def add(x: Any, y: Any) -> Tensor:
    """x + y (same dtype; integers wrap)."""
    return P.add_p.bind(*_binary("add", x, y, NUM))


def sub(x: Any, y: Any) -> Tensor:
    """x - y."""
    return P.sub_p.bind(*_binary("sub", x, y, NUM))


def mul(x: Any, y: Any) -> Tensor:
    """x * y."""
    return P.mul_p.bind(*_binary("mul", x, y, NUM))


def div(x: Any, y: Any) -> Tensor:
    """x / y: true division for floats; integers round toward zero (x / 0 gives -1, all
    bits set, as on XLA)."""
    a, b = _binary("div", x, y, NUM)
    q = P.div_p.bind(a, b)
    if a.dtype.is_float:
        return q
    return P.select(P.eq_p.bind(b, _const(0, b)), _const(-1, a), q)


def rem(x: Any, y: Any) -> Tensor:
    """The remainder of x / y with the sign of x (C's fmod; x rem 0 is x for integers)."""
    a, b = _binary("rem", x, y, NUM)
    r = P.rem_p.bind(a, b)
    if a.dtype.is_float:
        return r
    return P.select(P.eq_p.bind(b, _const(0, b)), a, r)


def pow(x: Any, y: Any) -> Tensor:  # noqa: A001
    """x ** y for float x; y is a float of x's dtype or an integer array (any int dtype)."""
    if is_weak(x) and not is_weak(y):
        b = to_tensor("pow", y, "y")
        a = weak_scalar("pow", x, b.dtype if b.dtype.is_float else dtypes.float32, "x")
    else:
        a = to_tensor("pow", x, "x")
    check_kind("pow", a, FLOAT, "x")
    if not is_weak(x) or is_weak(y):
        # a Python int exponent is exact as a float of x's dtype
        b = to_tensor("pow", y, "y") if not is_weak(y) else weak_scalar(
            "pow", y if isinstance(y, bool) else float(y), a.dtype, "y")
    check_kind("pow", b, "iuf", "y")
    if b.dtype.is_float and b.dtype != a.dtype:
        raise ArgumentError(f"lax.pow: a float exponent must have the base's dtype, got x "
                            f"{dtype_name(a.dtype)} and y {dtype_name(b.dtype)}")
    shape = broadcast_shape("pow", [a, b], ("x", "y"))
    return P.pow_p.bind(expand(a, shape), expand(P.convert(b, a.dtype), shape))


def max(x: Any, y: Any) -> Tensor:  # noqa: A001
    """Elementwise maximum (NaN if either is NaN)."""
    return P.max_p.bind(*_binary("max", x, y, ANY))


def min(x: Any, y: Any) -> Tensor:  # noqa: A001
    """Elementwise minimum (NaN if either is NaN)."""
    return P.min_p.bind(*_binary("min", x, y, ANY))


def atan2(x: Any, y: Any) -> Tensor:
    """arctan(x / y) in the quadrant of the point (y, x) (NumPy's arctan2(x, y)), for
    floats."""
    return P.atan2_p.bind(*_binary("atan2", x, y, FLOAT))


def eq(x: Any, y: Any) -> Tensor:
    """x == y (bool)."""
    return P.eq_p.bind(*_binary("eq", x, y, ANY))


def ne(x: Any, y: Any) -> Tensor:
    """x != y (bool)."""
    return P.ne_p.bind(*_binary("ne", x, y, ANY))


def lt(x: Any, y: Any) -> Tensor:
    """x < y (bool)."""
    return P.lt_p.bind(*_binary("lt", x, y, ANY))


def le(x: Any, y: Any) -> Tensor:
    """x <= y (bool)."""
    return P.le_p.bind(*_binary("le", x, y, ANY))


def gt(x: Any, y: Any) -> Tensor:
    """x > y (bool)."""
    return P.gt_p.bind(*_binary("gt", x, y, ANY))


def ge(x: Any, y: Any) -> Tensor:
    """x >= y (bool)."""
    return P.ge_p.bind(*_binary("ge", x, y, ANY))


def bitwise_and(x: Any, y: Any) -> Tensor:
    """x & y for bool or integer operands."""
    return P.and_p.bind(*_binary("bitwise_and", x, y, "biu"))


def bitwise_or(x: Any, y: Any) -> Tensor:
    """x | y for bool or integer operands."""
    return P.or_p.bind(*_binary("bitwise_or", x, y, "biu"))


def bitwise_xor(x: Any, y: Any) -> Tensor:
    """x ^ y for bool or integer operands."""
    return P.xor_p.bind(*_binary("bitwise_xor", x, y, "biu"))


def _shift(op: str, x: Any, y: Any) -> tuple[Tensor, Tensor, Tensor]:
    """Integer operands, the amount with out-of-range entries set to 0, and the mask of
    amounts outside [0, bits) (which XLA treats as shifting every bit out)."""
    a, b = _binary(op, x, y, INTS)
    bits = a.dtype.itemsize * 8
    outside = P.ge_p.bind(b, _const(bits, b))
    if not a.dtype.is_unsigned:
        outside = P.or_p.bind(outside, P.lt_p.bind(b, _const(0, b)))
    return a, P.select(outside, _const(0, b), b), outside


def shift_left(x: Any, y: Any) -> Tensor:
    """x << y; amounts outside [0, bits) give 0."""
    a, b, outside = _shift("shift_left", x, y)
    return P.select(outside, _const(0, a), P.shift_left_p.bind(a, b))


def shift_right_arithmetic(x: Any, y: Any) -> Tensor:
    """x >> y copying the sign bit; amounts outside [0, bits) give 0 or -1 by x's sign."""
    a, b, outside = _shift("shift_right_arithmetic", x, y)
    if a.dtype.is_unsigned:   # the sign bit of an unsigned value is its top bit
        signed = _same_size(a.dtype, "i")
        return P.bitcast(shift_right_arithmetic(P.bitcast(a, signed), P.bitcast(b, signed)),
                         a.dtype)
    fill = P.select(P.lt_p.bind(a, _const(0, a)), _const(-1, a), _const(0, a))
    return P.select(outside, fill, P.shift_right_p.bind(a, b))


def shift_right_logical(x: Any, y: Any) -> Tensor:
    """x >> y filling with zero bits; amounts outside [0, bits) give 0."""
    a, b, outside = _shift("shift_right_logical", x, y)
    if a.dtype.is_unsigned:
        return P.select(outside, _const(0, a), P.shift_right_p.bind(a, b))
    unsigned = _same_size(a.dtype, "u")
    shifted = P.shift_right_p.bind(P.bitcast(a, unsigned), P.bitcast(b, unsigned))
    return P.select(outside, _const(0, a), P.bitcast(shifted, a.dtype))


def _same_size(dtype: DType, kind: str) -> DType:
    return {(n.itemsize, n.kind): n for n in (dtypes.int8, dtypes.int16, dtypes.int32,
                                             dtypes.int64, dtypes.uint8, dtypes.uint16,
                                             dtypes.uint32, dtypes.uint64)}[dtype.itemsize, kind]


# ---------------------------------------------------------------------------- clamp, select

def clamp(min: Any, x: Any, max: Any) -> Tensor:  # noqa: A002
    """x limited to [min, max] elementwise; min and max are 0-d or of x's shape (NaN x stays
    NaN; where min > max the result is max, as XLA)."""
    lo, t, hi = same_dtype("clamp", [min, x, max], ("min", "x", "max"))
    check_kind("clamp", t, ANY, "x")
    for bound, name in ((lo, "min"), (hi, "max")):
        if bound.ndim and bound.shape != t.shape:
            raise ArgumentError(f"lax.clamp: {name} must be 0-d or of x's shape "
                                f"{fmt_shape(t.shape)}, got {fmt_shape(bound.shape)}")
    lo, hi = expand(lo, t.shape), expand(hi, t.shape)
    low = P.select(P.lt_p.bind(t, lo), lo, t)
    return P.select(P.gt_p.bind(low, hi), hi, low)


def _cases(op: str, cases: Any, names: tuple[str, ...]) -> list[Tensor]:
    ts = same_dtype(op, list(cases), names)
    for t, name in zip(ts[1:], names[1:]):
        if t.shape != ts[0].shape:
            raise ArgumentError(f"lax.{op}: the cases must have the same shape, got "
                                f"{names[0]} {fmt_shape(ts[0].shape)} and {name} "
                                f"{fmt_shape(t.shape)}")
    return ts


def _which(op: str, which: Any, shape: tuple[int, ...], what: str) -> Tensor:
    w = to_tensor(op, which, what)
    check_kind(op, w, "biu", what)
    if w.ndim and w.shape != shape:
        raise ArgumentError(f"lax.{op}: {what} must be 0-d or of the cases' shape "
                            f"{fmt_shape(shape)}, got {fmt_shape(w.shape)}")
    return expand(w, shape)


def select(pred: Any, on_true: Any, on_false: Any) -> Tensor:
    """on_true where pred, else on_false; pred is bool, 0-d or of the cases' shape."""
    t, f = _cases("select", (on_true, on_false), ("on_true", "on_false"))
    p = _which("select", pred, t.shape, "pred")
    if p.dtype != dtypes.bool:
        p = P.ne_p.bind(p, _const(0, p))
    return P.select(p, t, f)


def select_n(which: Any, *cases: Any) -> Tensor:
    """cases[which] elementwise: `which` is bool (two cases) or an integer array (0-d or of
    the cases' shape); indices past the last case pick the last, negative ones the first."""
    if not cases:
        raise ArgumentError("lax.select_n: needs at least one case")
    ts = _cases("select_n", cases, tuple(f"cases[{i}]" for i in range(len(cases))))
    w = _which("select_n", which, ts[0].shape, "which")
    if w.dtype == dtypes.bool:
        if len(ts) > 2:
            raise ArgumentError(f"lax.select_n: a bool `which` selects between 2 cases, got "
                                f"{len(ts)}; pass an integer `which`")
        return ts[0] if len(ts) == 1 else P.select(w, ts[1], ts[0])
    out = ts[0]
    for k, case in enumerate(ts[1:], start=1):
        out = P.select(P.ge_p.bind(w, _const(k, w)), case, out)
    return out


# ---------------------------------------------------------------------------- conversions

def convert_element_type(operand: Any, new_dtype: Any) -> Tensor:
    """`operand` as `new_dtype` (a NumPy or fgrad dtype, a name, or float/int/bool). Floats
    to integers truncate toward zero and saturate, NaN gives 0; to bool means != 0."""
    t = to_tensor("convert_element_type", operand, "operand")
    return P.convert(t, to_dtype("convert_element_type", new_dtype, "new_dtype"))


def bitcast_convert_type(operand: Any, new_dtype: Any) -> Tensor:
    """The bits of `operand` reinterpreted as `new_dtype`, which must have the same item size
    (JAX's size-changing form is not provided)."""
    t = to_tensor("bitcast_convert_type", operand, "operand")
    d = to_dtype("bitcast_convert_type", new_dtype, "new_dtype")
    if d.itemsize != t.dtype.itemsize:
        raise ArgumentError(f"lax.bitcast_convert_type: {dtype_name(t.dtype)} to "
                            f"{dtype_name(d)} changes the item size ({t.dtype.itemsize} to "
                            f"{d.itemsize} bytes), which fgrad does not support; bitcast "
                            f"between dtypes of one size")
    return P.bitcast(t, d)
