"""More elementwise `jax.lax` operations: inverse trigonometric and hyperbolic functions,
cbrt, exp2, nextafter, bit counting and `reduce_precision`; plus `Precision` and the
`DotDimensionNumbers` type name.

All are composed from fgrad's elementwise primitives, so they jit, vmap and differentiate.
float16 and bfloat16 are evaluated in float32 and rounded once. Differences from XLA on CPU:
`exp2` and `nextafter` return subnormal results where XLA flushes them to zero, and
`nextafter` keeps the sign of a zero reached from below (-0.0), as NumPy does.
"""
from __future__ import annotations

import enum
import math
from typing import Any, Sequence, Tuple

import numpy as np

from fgrad.core import prims as P
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.errors import ArgumentError
from fgrad.core.tensor import Tensor
from fgrad.core.tree_util import tree_map
from fgrad.lax._args import as_int, to_tensor
from fgrad.lax.elementwise import _binary, _const, _same_size, _unary

__all__ = ["DotDimensionNumbers", "Precision", "acos", "acosh", "asin", "asinh", "atan",
           "atanh", "cbrt", "clz", "cosh", "exp2", "nextafter", "optimization_barrier",
           "population_count", "reduce_precision", "sinh"]

DotDimensionNumbers = Tuple[Tuple[Sequence[int], Sequence[int]],
                            Tuple[Sequence[int], Sequence[int]]]


class Precision(enum.Enum):
    """Matmul/convolution precision (JAX's `lax.Precision`). fgrad always computes in the
    operands' dtype (or `preferred_element_type`), so every level gives the same result;
    the enum exists so that `precision=` arguments port unchanged. Also made from the names
    'default'/'bfloat16'/'fastest', 'high'/'bfloat16_3x'/'tensorfloat32' and
    'highest'/'float32'."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value: object) -> "Precision | None":
        names = {"default": 0, "bfloat16": 0, "fastest": 0, "high": 1, "bfloat16_3x": 1,
                 "tensorfloat32": 1, "highest": 2, "float32": 2}
        if isinstance(value, str) and value.lower() in names:
            return cls(names[value.lower()])
        return None

    def __str__(self) -> str:
        return self.name


_HALF = (dtypes.float16, dtypes.bfloat16)


def _layout(dtype: DType) -> tuple[int, int]:
    """(mantissa bits, exponent bits) of a float dtype."""
    return {2: (10, 5) if dtype == dtypes.float16 else (7, 8), 4: (23, 8),
            8: (52, 11)}[dtype.itemsize]


def _float(op: str, x: Any) -> tuple[Tensor, DType]:
    """A float operand (float16/bfloat16 widened to float32) and the dtype to return."""
    t = _unary(op, x, "f")
    return (P.convert(t, dtypes.float32) if t.dtype in _HALF else t), t.dtype


def _back(y: Tensor, dtype: DType) -> Tensor:
    return y if y.dtype == dtype else P.convert(y, dtype)


def _c(value: float, like: Tensor) -> Tensor:
    return _const(value, like)


def _odd(t: Tensor, mag: Tensor) -> Tensor:
    """An odd function from its value at |t|: negated for negative t, and t itself at
    +-0 (so -0.0 maps to -0.0)."""
    signed = P.select(P.lt_p.bind(t, _c(0.0, t)), P.neg_p.bind(mag), mag)
    return P.select(P.eq_p.bind(t, _c(0.0, t)), t, signed)


def atan(x: Any) -> Tensor:
    """The inverse tangent, in (-pi/2, pi/2)."""
    t, dt = _float("atan", x)
    return _back(P.atan2_p.bind(t, _c(1.0, t)), dt)


def asin(x: Any) -> Tensor:
    """The inverse sine, in [-pi/2, pi/2] (NaN outside [-1, 1])."""
    t, dt = _float("asin", x)
    one = _c(1.0, t)
    root = (P.sub_p.bind(one, t) * P.add_p.bind(one, t)).sqrt()
    return _back(_c(2.0, t) * P.atan2_p.bind(t, one + root), dt)


def acos(x: Any) -> Tensor:
    """The inverse cosine, in [0, pi] (NaN outside [-1, 1])."""
    t, dt = _float("acos", x)
    one = _c(1.0, t)
    root = (P.sub_p.bind(one, t) * P.add_p.bind(one, t)).sqrt()
    minus_one = P.eq_p.bind(t, _c(-1.0, t))
    den = P.select(minus_one, one, one + t)
    out = P.select(minus_one, _c(math.pi, t), _c(2.0, t) * P.atan2_p.bind(root, den))
    return _back(out, dt)


def _big(t: Tensor) -> float:
    """Above this, x*x overflows: use log(x) + log(2) for acosh/asinh."""
    return float(np.sqrt(np.finfo(t.dtype.np).max)) / 2


def acosh(x: Any) -> Tensor:
    """The inverse hyperbolic cosine, >= 0 (NaN below 1)."""
    t, dt = _float("acosh", x)
    big = P.ge_p.bind(t, _c(_big(t), t))
    y = P.select(big, _c(1.0, t), t) - 1.0
    small = P.log1p_p.bind(y + (y * (y + 2.0)).sqrt())
    large = P.log_p.bind(P.select(big, t, _c(1.0, t))) + math.log(2.0)
    return _back(P.select(big, large, small), dt)


def asinh(x: Any) -> Tensor:
    """The inverse hyperbolic sine (odd; -0.0 stays -0.0)."""
    t, dt = _float("asinh", x)
    a = P.abs_p.bind(t)
    big = P.ge_p.bind(a, _c(_big(t), t))
    s = P.select(big, _c(1.0, t), a)
    small = P.log1p_p.bind(s + s * s / (((s * s) + 1.0).sqrt() + 1.0))
    large = P.log_p.bind(P.select(big, a, _c(1.0, t))) + math.log(2.0)
    return _back(_odd(t, P.select(big, large, small)), dt)


def atanh(x: Any) -> Tensor:
    """The inverse hyperbolic tangent (+-inf at +-1, NaN outside [-1, 1])."""
    t, dt = _float("atanh", x)
    a = P.abs_p.bind(t)
    mag = P.log1p_p.bind(_c(2.0, t) * a / (_c(1.0, t) - a)) * 0.5
    return _back(_odd(t, mag), dt)


def _exp_parts(t: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(|x|, whether exp(-|x|) is negligible beside exp(|x|), exp(|x|) / 2 for those)."""
    a = P.abs_p.bind(t)
    cut = 10.0 if t.dtype == dtypes.float32 else 20.0
    large = P.gt_p.bind(a, _c(cut, t))
    root = P.exp_p.bind(P.select(large, a, _c(cut, t)) * 0.5)
    return a, large, root * 0.5 * root


def sinh(x: Any) -> Tensor:
    """The hyperbolic sine, accurate near 0 and finite up to where it overflows."""
    t, dt = _float("sinh", x)
    a, large, half_exp = _exp_parts(t)
    e = P.expm1_p.bind(P.select(large, _c(0.0, t), a))
    mag = P.select(large, half_exp, (e + e / (e + 1.0)) * 0.5)
    return _back(_odd(t, mag), dt)


def cosh(x: Any) -> Tensor:
    """The hyperbolic cosine, finite up to where it overflows."""
    t, dt = _float("cosh", x)
    a, large, half_exp = _exp_parts(t)
    s = P.select(large, _c(0.0, t), a)
    small = (P.exp_p.bind(s) + P.exp_p.bind(P.neg_p.bind(s))) * 0.5
    return _back(P.select(large, half_exp, small), dt)


def cbrt(x: Any) -> Tensor:
    """The real cube root (odd; exact for perfect cubes that fit the dtype)."""
    t, dt = _float("cbrt", x)
    a = P.abs_p.bind(t)
    special = P.eq_p.bind(a, _c(0.0, t)) | P.eq_p.bind(a, _c(math.inf, t)) | a.isnan()
    safe = P.select(special, _c(1.0, t), a)
    r = P.pow_p.bind(safe, _c(1.0 / 3.0, t))
    r = (r * 2.0 + safe / (r * r)) / 3.0   # one Newton step fixes pow's last bit
    mag = P.select(special, a, r)
    return _back(_odd(t, mag), dt)


def _power_of_two(k: Tensor, like: Tensor) -> Tensor:
    """2**k exactly, for integer k (int32) inside the normal exponent range of `like`."""
    mant, ebits = _layout(like.dtype)
    bias = (1 << (ebits - 1)) - 1
    idt = _same_size(like.dtype, "i")
    biased = P.convert(k + bias, idt)
    return P.bitcast(P.shift_left_p.bind(biased, _const(mant, biased)), like.dtype)


def exp2(x: Any) -> Tensor:
    """2 ** x, exact at integers (including the subnormal range)."""
    t, dt = _float("exp2", x)
    limit = 3 * ((1 << (_layout(t.dtype)[1] - 1)) - 2)
    finite = t.isfinite()
    s = P.select(finite, t, _c(0.0, t))
    n = P.floor_p.bind(s + 0.5)
    r = P.exp_p.bind((s - n) * math.log(2.0))
    k = P.convert(P.select(P.gt_p.bind(n, _c(limit, t)), _c(limit, t),
                           P.select(P.lt_p.bind(n, _c(-limit, t)), _c(-limit, t), n)),
                  dtypes.int32)
    k1 = P.div_p.bind(k, _const(3, k))
    k2 = P.div_p.bind(k - k1, _const(2, k))
    out = r * _power_of_two(k1, t) * _power_of_two(k2, t) * _power_of_two(k - k1 - k2, t)
    inf_out = P.select(P.gt_p.bind(t, _c(0.0, t)), _c(math.inf, t), _c(0.0, t))
    return _back(P.select(finite, out, P.select(t.isnan(), t, inf_out)), dt)


def nextafter(x1: Any, x2: Any) -> Tensor:
    """The next representable float after `x1` in the direction of `x2` (NumPy's
    nextafter; subnormals included)."""
    a, b = _binary("nextafter", x1, x2, "f")
    idt = _same_size(a.dtype, "i")
    bits = P.bitcast(a, idt)
    away = P.eq_p.bind(P.gt_p.bind(b, a), P.gt_p.bind(a, _c(0.0, a)))
    step = P.select(away, _const(1, bits), _const(-1, bits))
    moved = P.bitcast(bits + step, a.dtype)
    tiny = P.bitcast(_const(1, bits), a.dtype)
    from_zero = P.select(P.lt_p.bind(b, _c(0.0, b)), P.neg_p.bind(tiny), tiny)
    out = P.select(P.eq_p.bind(a, _c(0.0, a)), from_zero, moved)
    out = P.select(P.eq_p.bind(a, b), b, out)
    return P.select(a.isnan() | b.isnan(), a + b, out)


def _unsigned(op: str, x: Any) -> tuple[Tensor, DType]:
    t = _unary(op, x, "iu")
    return (t if t.dtype.is_unsigned else P.bitcast(t, _same_size(t.dtype, "u"))), t.dtype


def _mask(pattern: int, like: Tensor) -> Tensor:
    bits = like.dtype.itemsize * 8
    return _const(int.from_bytes(bytes([pattern]) * (bits // 8), "little"), like)


def population_count(x: Any) -> Tensor:
    """The number of set bits of each integer (same dtype as x)."""
    v, dt = _unsigned("population_count", x)
    bits = dt.itemsize * 8

    def shr(y: Tensor, n: int) -> Tensor:
        return P.shift_right_p.bind(y, _const(n, y))

    v = v - P.and_p.bind(shr(v, 1), _mask(0x55, v))
    v = P.and_p.bind(v, _mask(0x33, v)) + P.and_p.bind(shr(v, 2), _mask(0x33, v))
    v = P.and_p.bind(v + shr(v, 4), _mask(0x0F, v))
    n = 8
    while n < bits:
        v = v + shr(v, n)
        n *= 2
    v = P.and_p.bind(v, _const(0x7F, v))
    return v if v.dtype == dt else P.bitcast(v, dt)


def clz(x: Any) -> Tensor:
    """The number of leading zero bits of each integer (its bit width for 0)."""
    v, dt = _unsigned("clz", x)
    bits = dt.itemsize * 8
    count = _const(0, v)
    s = bits // 2
    while s >= 1:
        zero_top = P.eq_p.bind(P.shift_right_p.bind(v, _const(bits - s, v)), _const(0, v))
        count = P.select(zero_top, count + s, count)
        v = P.select(zero_top, P.shift_left_p.bind(v, _const(s, v)), v)
        s //= 2
    count = count + P.convert(P.eq_p.bind(P.shift_right_p.bind(v, _const(bits - 1, v)),
                                          _const(0, v)), v.dtype)
    return count if count.dtype == dt else P.bitcast(count, dt)


def reduce_precision(operand: Any, exponent_bits: int, mantissa_bits: int) -> Tensor:
    """`operand` rounded (to nearest, ties to even) to a float format with `exponent_bits`
    and `mantissa_bits`, then stored back in its own dtype: values beyond the format's range
    become +-inf, values below its smallest normal become +-0 (the format has no
    subnormals), NaN stays NaN."""
    op = "reduce_precision"
    t = _unary(op, operand, "f")
    ebits, mbits = as_int(op, exponent_bits, "exponent_bits"), as_int(op, mantissa_bits,
                                                                          "mantissa_bits")
    if ebits < 1 or mbits < 0:
        raise ArgumentError(f"lax.reduce_precision: exponent_bits must be >= 1 and "
                            f"mantissa_bits >= 0, got {ebits} and {mbits}")
    src_m, src_e = _layout(t.dtype)
    width = t.dtype.itemsize * 8
    udt = _same_size(t.dtype, "u")
    v = P.bitcast(t, udt)
    if mbits < src_m:
        drop = src_m - mbits
        last = 1 << drop
        lsb = P.and_p.bind(P.shift_right_p.bind(v, _const(drop, v)), _const(1, v))
        v = v + lsb + _const((last >> 1) - 1, v)
        v = P.and_p.bind(v, _const(((1 << width) - 1) ^ (last - 1), v))
    if ebits < src_e:
        exp_mask = ((1 << src_e) - 1) << src_m
        bias, reduced = (1 << (src_e - 1)) - 1, (1 << (ebits - 1)) - 1
        e = P.and_p.bind(v, _const(exp_mask, v))
        sign = P.and_p.bind(v, _const(1 << (width - 1), v))
        over = P.gt_p.bind(e, _const((bias + reduced) << src_m, v))
        under = P.le_p.bind(e, _const((bias - reduced) << src_m, v))
        v = P.select(over, P.or_p.bind(sign, _const(exp_mask, v)), P.select(under, sign, v))
    out = P.bitcast(v, t.dtype)
    return P.select(t.isnan(), t, out)


def optimization_barrier(operand: Any, /) -> Any:
    """`operand` (any pytree of arrays) unchanged, its leaves as Tensors. fgrad does not
    model XLA's scheduling barrier: values, gradients and batching are those of the
    identity; only the ordering guarantee XLA gives is absent."""
    return tree_map(lambda v: to_tensor("optimization_barrier", v, "operand"), operand)
