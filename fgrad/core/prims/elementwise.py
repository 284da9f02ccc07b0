"""Elementwise primitives: unary math, binary arithmetic/logic/comparison, select, casts.

Operands of an elementwise primitive share one shape and dtype; broadcasting and dtype
promotion happen in the Tensor layer. Each primitive's derivative sits next to its NumPy
implementation, one line per argument, like a calculus sheet.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from fgrad.core.dtypes import DType, dtypes
from fgrad.core.errors import ArgumentError, ArgumentTypeError
from fgrad.core.ir import ShapedArray
from fgrad.core.primitive import Primitive
from fgrad.core.prims._util import (batch_size, check_kinds, check_same, instantiate,
                                     is_undefined, move_bdim, zeros_like_aval)

FLOAT, INT, INT_BOOL, NUMERIC, ANY = "f", "iu", "biu", "iuf", "biuf"


def _expit(x: np.ndarray) -> np.ndarray:
    import scipy.special  # imported on first use: it costs a third of `import fgrad`
    return scipy.special.expit(x)


def _erf(x: np.ndarray) -> np.ndarray:
    import scipy.special
    return scipy.special.erf(x)


def _batch_elementwise(prim: Primitive) -> Callable[..., Any]:
    def rule(args: list[Any], dims: list[int | None], **params: Any) -> tuple[Any, int]:
        first = next(d for d in dims if d is not None)
        if all(d == first for d in dims) and all(x.ndim == args[0].ndim for x in args):
            return prim.bind(*args, **params), first
        size = batch_size(args, dims)
        moved = [move_bdim(x, d, 0, size) for x, d in zip(args, dims, strict=True)]
        return prim.bind(*moved, **params), 0
    return rule


def _ignore_np_warnings(fn: Callable[..., Any]) -> Callable[..., Any]:
    def impl(*args: Any, **params: Any) -> Any:
        with np.errstate(all="ignore"):
            return fn(*args, **params)
    return impl


# ---------------------------------------------------------------------------- unary

def unary(name: str, np_fn: Callable[..., Any], jvp: Callable[..., Any] | None,
          kinds: str = FLOAT, out_dtype: DType | None = None, linear: bool = False) -> Primitive:
    """Define a unary primitive; `jvp(x, y, x_dot)` gets the input, output and tangent."""
    p = Primitive(name, linear=linear)

    def abstract_eval(x: ShapedArray) -> ShapedArray:
        check_kinds(name, x, kinds)
        return ShapedArray(x.shape, out_dtype or x.dtype)

    def jvp_rule(primals: list[Any], tangents: list[Any]) -> tuple[Any, Any]:
        (x,), (x_dot,) = primals, tangents
        y = p.bind(x)
        if jvp is None or x_dot is None:
            return y, None
        return y, jvp(x, y, x_dot)

    p.abstract_eval = abstract_eval
    p.impl = _ignore_np_warnings(np_fn)
    p.jvp = jvp_rule
    p.batch = lambda args, dims: (p.bind(args[0]), dims[0])
    return p


def _round_half_even(x: np.ndarray) -> np.ndarray:
    return np.round(x)


neg_p = unary("neg", np.negative, lambda x, y, t: -t, NUMERIC, linear=True)
neg_p.transpose = lambda ct, x: [-ct]
exp_p = unary("exp", np.exp, lambda x, y, t: safe_mul(t, y))
log_p = unary("log", np.log, lambda x, y, t: safe_mul(t, 1 / x))
sin_p = unary("sin", np.sin, lambda x, y, t: t * cos(x))
cos_p = unary("cos", np.cos, lambda x, y, t: -t * sin(x))
tan_p = unary("tan", np.tan, lambda x, y, t: safe_mul(t, 1 + y * y))
tanh_p = unary("tanh", np.tanh, lambda x, y, t: t * (1 - y * y))
logistic_p = unary("logistic", _expit, lambda x, y, t: t * y * (1 - y))
sqrt_p = unary("sqrt", np.sqrt, lambda x, y, t: safe_mul(t, 0.5 / y))
rsqrt_p = unary("rsqrt", lambda x: 1 / np.sqrt(x), lambda x, y, t: safe_mul(t, -0.5 * y / x))
log1p_p = unary("log1p", np.log1p, lambda x, y, t: safe_mul(t, 1 / (1 + x)))
expm1_p = unary("expm1", np.expm1, lambda x, y, t: safe_mul(t, y + 1))
erf_p = unary("erf", _erf,
              lambda x, y, t: t * (2 / math.sqrt(math.pi)) * exp(-(x * x)))
abs_p = unary("abs", np.abs, lambda x, y, t: t * sign(x), NUMERIC)
sign_p = unary("sign", np.sign, None, NUMERIC)
floor_p = unary("floor", np.floor, None)
ceil_p = unary("ceil", np.ceil, None)
round_p = unary("round", _round_half_even, None)
not_p = unary("not", lambda x: np.logical_not(x) if x.dtype == np.bool_ else np.invert(x),
              None, INT_BOOL)
isnan_p = unary("is_nan", np.isnan, None, FLOAT, out_dtype=dtypes.bool)
stop_gradient_p = unary("stop_gradient", lambda x: x, None, ANY)


# ---------------------------------------------------------------------------- binary

def binary(name: str, np_fn: Callable[..., Any], jvp_x: Callable[..., Any] | None,
           jvp_y: Callable[..., Any] | None, kinds: str = NUMERIC,
           out_dtype: DType | None = None, linear: bool = False) -> Primitive:
    """Define a binary primitive; `jvp_x(x, y, out, x_dot)` and `jvp_y(x, y, out, y_dot)`."""
    p = Primitive(name, linear=linear)

    def abstract_eval(x: ShapedArray, y: ShapedArray) -> ShapedArray:
        check_same(name, [x, y])
        check_kinds(name, x, kinds)
        return ShapedArray(x.shape, out_dtype or x.dtype)

    def jvp_rule(primals: list[Any], tangents: list[Any]) -> tuple[Any, Any]:
        (x, y), (x_dot, y_dot) = primals, tangents
        out = p.bind(x, y)
        terms = []
        if x_dot is not None and jvp_x is not None:
            terms.append(jvp_x(x, y, out, x_dot))
        if y_dot is not None and jvp_y is not None:
            terms.append(jvp_y(x, y, out, y_dot))
        if not terms:
            return out, None
        return out, terms[0] if len(terms) == 1 else terms[0] + terms[1]

    p.abstract_eval = abstract_eval
    p.impl = _ignore_np_warnings(np_fn)
    p.jvp = jvp_rule
    p.batch = _batch_elementwise(p)
    return p


def _is_float_array(x: np.ndarray) -> bool:
    """True for NumPy float arrays, including bfloat16 (whose NumPy kind is 'V')."""
    return x.dtype.kind == "f" or x.dtype == dtypes.bfloat16.np


def _int_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C-style (truncating) division for ints; true division for floats."""
    if _is_float_array(x):
        return np.true_divide(x, y)
    safe_y = np.where(y == 0, 1, y)
    q = np.floor_divide(x, safe_y)
    adjust = (np.remainder(x, safe_y) != 0) & ((x < 0) != (safe_y < 0))
    return np.where(y == 0, 0, q + adjust).astype(x.dtype)


def _c_rem(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if _is_float_array(x):
        return np.fmod(x, y)
    safe_y = np.where(y == 0, 1, y)
    return np.where(y == 0, 0, np.fmod(x, safe_y)).astype(x.dtype)


def _float_pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C's pow (what the compiled backends and JAX compute): NumPy turns a scalar exponent
    of 0.5 into sqrt, which differs at -inf (nan, not inf) and -0.0 (-0.0, not 0.0)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.power(x, y)
    half = y == 0.5
    if np.any(half):
        out = np.where(half & (x == 0), np.zeros((), out.dtype), out)
        out = np.where(half & (x == -np.inf), np.array(np.inf, out.dtype), out)
    return out.astype(np.result_type(x, y), copy=False)


def _int_pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if _is_float_array(x):
        return _float_pow(x, y)
    pos = np.power(x, np.maximum(y, 0))
    odd = (np.abs(y) % 2) == 1
    neg = np.where(x == 1, 1, np.where(x == -1, np.where(odd, -1, 1), 0)) if x.dtype.kind == "i" \
        else np.where(x == 1, 1, 0)
    return np.where(y < 0, neg.astype(x.dtype), pos).astype(x.dtype)  # no float64 detour


def _shift_right(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    big = y >= bits
    out = np.right_shift(x, np.where(big, 0, y))
    fill = np.where(x < 0, -1, 0) if x.dtype.kind == "i" else 0
    return np.where(big, fill, out).astype(x.dtype)


def _shift_left(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    return np.where(y >= bits, 0, np.left_shift(x, np.where(y >= bits, 0, y))).astype(x.dtype)


def _pow_dx(x: Any, y: Any) -> Any:
    """d(x ** y)/dx with PyTorch's conventions: 0 where y == 0 (x ** 0 is constant 1)."""
    return select(y == 0, y * 0, y * pow(x, y - 1))


def _pow_dy(x: Any, y: Any, out: Any) -> Any:
    """d(x ** y)/dy = x ** y * log(x) with PyTorch's conventions: 0 where x == 0 and y >= 0,
    -inf for 0 ** y with y < 0, NaN for a negative base."""
    return select((x == 0) & (y >= 0), out * 0, out * log(x))


add_p = binary("add", np.add, lambda x, y, o, t: t, lambda x, y, o, t: t, linear=True)
add_p.transpose = lambda ct, x, y: [ct if is_undefined(x) else None,
                                    ct if is_undefined(y) else None]
sub_p = binary("sub", np.subtract, lambda x, y, o, t: t, lambda x, y, o, t: -t, linear=True)
sub_p.transpose = lambda ct, x, y: [ct if is_undefined(x) else None,
                                    -ct if is_undefined(y) else None]
mul_p = binary("mul", np.multiply, lambda x, y, o, t: t * y, lambda x, y, o, t: x * t,
               ANY, linear=True)
mul_p.transpose = lambda ct, x, y: [ct * y if is_undefined(x) else None,
                                    x * ct if is_undefined(y) else None]
div_p = binary("div", _int_div, lambda x, y, o, t: safe_mul(t, 1 / y),
               lambda x, y, o, t: safe_mul(t, -o / y), linear=True)
div_p.transpose = lambda ct, x, y: [ct / y if is_undefined(x) else None, None]
rem_p = binary("rem", _c_rem, lambda x, y, o, t: t,
               lambda x, y, o, t: -t * trunc_div_float(x, y))
pow_p = binary("pow", _int_pow, lambda x, y, o, t: safe_mul(t, _pow_dx(x, y)),
               lambda x, y, o, t: safe_mul(t, _pow_dy(x, y, o)))
max_p = binary("max", np.maximum, lambda x, y, o, t: t * _balanced(x > y, x == y, t),
               lambda x, y, o, t: t * _balanced(y > x, x == y, t), ANY)
min_p = binary("min", np.minimum, lambda x, y, o, t: t * _balanced(x < y, x == y, t),
               lambda x, y, o, t: t * _balanced(y < x, x == y, t), ANY)
atan2_p = binary("atan2", np.arctan2, lambda x, y, o, t: t * y / (x * x + y * y),
                 lambda x, y, o, t: -t * x / (x * x + y * y), FLOAT)
and_p = binary("and", lambda x, y: x & y, None, None, INT_BOOL)
or_p = binary("or", lambda x, y: x | y, None, None, INT_BOOL)
xor_p = binary("xor", lambda x, y: x ^ y, None, None, INT_BOOL)
shift_left_p = binary("shift_left", _shift_left, None, None, INT)
shift_right_p = binary("shift_right", _shift_right, None, None, INT)
eq_p = binary("eq", np.equal, None, None, ANY, out_dtype=dtypes.bool)
ne_p = binary("ne", np.not_equal, None, None, ANY, out_dtype=dtypes.bool)
lt_p = binary("lt", np.less, None, None, ANY, out_dtype=dtypes.bool)
le_p = binary("le", np.less_equal, None, None, ANY, out_dtype=dtypes.bool)
gt_p = binary("gt", np.greater, None, None, ANY, out_dtype=dtypes.bool)
ge_p = binary("ge", np.greater_equal, None, None, ANY, out_dtype=dtypes.bool)


safe_mul_p = binary("safe_mul", lambda x, y: np.where(x == 0, np.zeros_like(x), x * y),
                    lambda x, y, o, t: safe_mul(t, y), lambda x, y, o, t: safe_mul(x, t),
                    FLOAT, linear=True)
safe_mul_p.transpose = lambda ct, x, y: [safe_mul(ct, y) if is_undefined(x) else None,
                                         x * ct if is_undefined(y) else None]


def safe_mul(t: Any, d: Any) -> Any:
    """`t * d`, but exactly 0 where t == 0 even if d is inf/NaN. Derivative rules use it so
    an unselected `where` branch (cotangent 0) never turns a gradient into NaN."""
    if d.dtype != t.dtype:
        d = d.cast(t.dtype)
    if d.shape != t.shape:
        d = d.expand(t.shape)
    return safe_mul_p.bind(t, d)


def _balanced(strict: Any, tie: Any, like: Any) -> Any:
    """1 where this side wins, 0.5 on ties (the gradient is shared, as in PyTorch/JAX)."""
    return strict.cast(like.dtype) + tie.cast(like.dtype) * 0.5


def trunc_div_float(x: Any, y: Any) -> Any:
    q = x / y
    return select(q < 0, ceil(q), floor(q))


# ---------------------------------------------------------------------------- select

select_p = Primitive("select", linear=True)


def _select_abstract(pred: ShapedArray, x: ShapedArray, y: ShapedArray) -> ShapedArray:
    check_same("where", [x, y])
    if pred.dtype != dtypes.bool:
        raise ArgumentTypeError(f"where: the condition must be bool, got {pred.dtype.name}")
    if pred.shape != x.shape:
        raise ArgumentError(f"where: condition shape {pred.shape} differs from {x.shape}")
    return x


def _select_jvp(primals: list[Any], tangents: list[Any]) -> tuple[Any, Any]:
    pred, x, y = primals
    _, x_dot, y_dot = tangents
    out = select(pred, x, y)
    if x_dot is None and y_dot is None:
        return out, None
    return out, select(pred, instantiate(x_dot, x.aval), instantiate(y_dot, y.aval))


def _select_transpose(ct: Any, pred: Any, x: Any, y: Any) -> list[Any]:
    assert not is_undefined(pred)
    zero = zeros_like_aval(ct.aval)
    return [None, select(pred, ct, zero) if is_undefined(x) else None,
            select(pred, zero, ct) if is_undefined(y) else None]


select_p.abstract_eval = _select_abstract
select_p.impl = lambda pred, x, y: np.where(pred, x, y)
select_p.jvp = _select_jvp
select_p.transpose = _select_transpose
select_p.batch = _batch_elementwise(select_p)


# ---------------------------------------------------------------------------- casts

convert_p = Primitive("convert_element_type", linear=True)


def _convert_jvp(primals: list[Any], tangents: list[Any], *, new_dtype: DType) -> Any:
    (x,), (x_dot,) = primals, tangents
    out = convert(x, new_dtype)
    if x_dot is None or not (x.dtype.is_float and new_dtype.is_float):
        return out, None
    return out, convert(x_dot, new_dtype)


def _convert_impl(x: np.ndarray, *, new_dtype: DType) -> np.ndarray:
    if new_dtype.is_int and _is_float_array(x):
        info = np.iinfo(new_dtype.np)
        with np.errstate(all="ignore"):
            x = np.nan_to_num(np.trunc(x.astype(np.float64)), nan=0.0)
            out = np.clip(x, info.min, info.max).astype(new_dtype.np)
        # info.max may round up in float (2**63 - 1 -> 2**63): saturate explicitly
        return np.where(x >= info.max, np.array(info.max, new_dtype.np), out)
    with np.errstate(over="ignore", invalid="ignore"):   # to a narrower float: +-inf, silently
        return x.astype(new_dtype.np)


convert_p.abstract_eval = lambda x, *, new_dtype: ShapedArray(x.shape, new_dtype)
convert_p.impl = _convert_impl
convert_p.jvp = _convert_jvp
convert_p.transpose = lambda ct, x, *, new_dtype: [convert(ct, x.aval.dtype)]
convert_p.batch = lambda args, dims, *, new_dtype: (convert(args[0], new_dtype), dims[0])

bitcast_p = Primitive("bitcast_convert_type")


def _bitcast_abstract(x: ShapedArray, *, new_dtype: DType) -> ShapedArray:
    if x.dtype.itemsize != new_dtype.itemsize:
        raise ArgumentTypeError(f"bitcast from {x.dtype.name} to {new_dtype.name}: the item sizes "
                                f"differ ({x.dtype.itemsize} vs {new_dtype.itemsize} bytes)")
    return ShapedArray(x.shape, new_dtype)


bitcast_p.abstract_eval = _bitcast_abstract
bitcast_p.impl = lambda x, *, new_dtype: x.view(new_dtype.np)
bitcast_p.jvp = lambda primals, tangents, *, new_dtype: (bitcast(primals[0], new_dtype), None)
bitcast_p.batch = lambda args, dims, *, new_dtype: (bitcast(args[0], new_dtype), dims[0])


# ---------------------------------------------------------------------------- wrappers

def neg(x: Any) -> Any: return neg_p.bind(x)
def exp(x: Any) -> Any: return exp_p.bind(x)
def log(x: Any) -> Any: return log_p.bind(x)
def sin(x: Any) -> Any: return sin_p.bind(x)
def cos(x: Any) -> Any: return cos_p.bind(x)
def sign(x: Any) -> Any: return sign_p.bind(x)
def floor(x: Any) -> Any: return floor_p.bind(x)
def ceil(x: Any) -> Any: return ceil_p.bind(x)
def pow(x: Any, y: Any) -> Any: return pow_p.bind(x, y)  # noqa: A001
def select(pred: Any, x: Any, y: Any) -> Any: return select_p.bind(pred, x, y)
def stop_gradient(x: Any) -> Any: return stop_gradient_p.bind(x)


def convert(x: Any, new_dtype: DType) -> Any:
    """Cast `x` to `new_dtype` (a no-op when it already has it)."""
    return x if x.dtype == new_dtype else convert_p.bind(x, new_dtype=new_dtype)


def bitcast(x: Any, new_dtype: DType) -> Any:
    """Reinterpret the bits of `x` as `new_dtype` (same item size)."""
    return x if x.dtype == new_dtype else bitcast_p.bind(x, new_dtype=new_dtype)
