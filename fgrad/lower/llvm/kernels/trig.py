"""Vectorizable float32 trigonometry as plain LLVM IR: sin, cos, tan, atan2.

In: an `Emitter` (builder + intrinsic helper) and float32 registers. Out: the function value
(None for double, which keeps LLVM's intrinsics or the C library), built from adds,
multiplies, selects, bit operations and small constant tables, so the loop vectorizer
widens them; within 3 ulp (tests). The helpers of one float format are `vmath`'s.
"""
from __future__ import annotations

from math import factorial
from typing import Any

from llvmlite import ir

from fgrad.lower.llvm.kernels.vmath import I32, _c, _muladd, _polynomial


# float32 sin / cos with an exact reduction for every argument (Payne-Hanek in integers):
# |x| = M 2^(E-23) with M < 2^24, so x (2/pi) mod 4 = M ((2^(E-23) 2/pi) mod 4) mod 4; the
# second factor, to 94 bits after the point, is a table row per exponent (three 32-bit
# limbs), and the product's 62 bits after the point give the quadrant and r = f pi/2
SIN_TERMS = 4    # sin r = r + r^3 (-1/3! + r^2/5! - ...) through r^9 / 9! (|r| <= pi/4: 2e-9)
COS_TERMS = 5    # cos r = 1 + r^2 (-1/2! + r^2/4! - ...) through r^10 / 10! (1e-10)
_FRACTION_BITS = 94


def _atan_inverse(n: int, scale: int) -> int:
    """atan(1/n) * 2^scale, truncated (its Taylor series in integers)."""
    total, power, k = 0, (1 << scale) // n, 0
    while power:
        term = power // (2 * k + 1)
        total += -term if k % 2 else term
        power //= n * n
        k += 1
    return total


def _two_over_pi_rows() -> list[tuple[int, int, int]]:
    """Per exponent E = -1..127 of a float32 (row E + 1): the limbs, high first, of
    floor(2^(E - 23 + 94) * 2/pi) mod 2^96 (pi by Machin's formula, 420 bits)."""
    bits = 420
    pi = 16 * _atan_inverse(5, bits + 8) - 4 * _atan_inverse(239, bits + 8)   # pi * 2^(bits+8)
    rows = []
    for exponent in range(-1, 128):
        shift = exponent - 23 + _FRACTION_BITS + 1 + bits + 8
        value = ((1 << shift) // pi) % (1 << 96)
        rows.append((value >> 64, (value >> 32) & 0xFFFFFFFF, value & 0xFFFFFFFF))
    return rows


_TWO_OVER_PI = _two_over_pi_rows()


def _table(em: Any, name: str, values: list[int]) -> ir.GlobalVariable:
    """A module-level constant i64 array (made once per module)."""
    module = em.b.module
    found = module.globals.get(name)
    if found is not None:
        return found
    kind = ir.ArrayType(ir.IntType(64), len(values))
    table = ir.GlobalVariable(module, kind, name)
    table.initializer = ir.Constant(kind, values)
    table.global_constant = True
    table.linkage = "internal"
    return table


def _reduce_quadrants(em: Any, a: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(quadrant as i32, r as double) with |x| = a = (4k + quadrant) pi/2 + r, |r| <= pi/4,
    for a finite float32 a >= pi/4 (anything otherwise)."""
    b = em.b
    i64 = ir.IntType(64)
    bits = b.bitcast(a, I32)
    exponent = b.sub(b.lshr(bits, ir.Constant(I32, 23)), ir.Constant(I32, 127))
    row = b.add(exponent, ir.Constant(I32, 1))
    row = b.select(b.icmp_signed("<", row, ir.Constant(I32, 0)), ir.Constant(I32, 0), row)
    last = len(_TWO_OVER_PI) - 1
    row = b.select(b.icmp_signed(">", row, ir.Constant(I32, last)), ir.Constant(I32, last), row)
    row = b.zext(row, i64)
    mantissa = b.zext(b.or_(b.and_(bits, ir.Constant(I32, 0x7FFFFF)),
                            ir.Constant(I32, 0x800000)), i64)
    low32 = ir.Constant(i64, 0xFFFFFFFF)
    thirty_two = ir.Constant(i64, 32)
    products = []
    for limb in range(3):
        table = _table(em, f"fgrad_two_over_pi_{limb}", [r[limb] for r in _TWO_OVER_PI])
        word = b.load(b.gep(table, [ir.Constant(i64, 0), row], inbounds=True))
        products.append(b.mul(mantissa, word))            # < 2^56
    high, middle, low = products
    middle = b.add(middle, b.lshr(low, thirty_two))
    high = b.add(high, b.lshr(middle, thirty_two))
    top = b.or_(b.shl(b.and_(high, low32), thirty_two), b.and_(middle, low32))  # y * 2^62
    rounded = b.add(top, ir.Constant(i64, 1 << 61))
    quadrant = b.trunc(b.lshr(rounded, ir.Constant(i64, 62)), I32)
    fraction = b.sub(b.and_(rounded, ir.Constant(i64, (1 << 62) - 1)), ir.Constant(i64, 1 << 61))
    r = b.fmul(b.sitofp(fraction, ir.DoubleType()),
               ir.Constant(ir.DoubleType(), 1.5707963267948966 / 2.0 ** 62))
    return quadrant, r


def _sin_cos_of_r(em: Any, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """(|x|, quadrant, sin r, cos r) of a float32 x (`_reduce_quadrants`; below pi/4, r is
    |x| itself), by Taylor polynomials of r in double (then within 0.53 ulp once rounded
    to float; 1.45 in float, at the same speed)."""
    b = em.b
    a = em.intrinsic("llvm.fabs", [x])
    small = b.fcmp_ordered("<", a, _c(x, 0.7853981633974483))
    quadrant, r = _reduce_quadrants(em, a)
    quadrant = b.select(small, ir.Constant(I32, 0), quadrant)
    r = b.select(small, b.fpext(a, r.type), r)
    z = b.fmul(r, r)
    sin_r = _muladd(em, b.fmul(r, z), _series(em, z, 3, SIN_TERMS), r)
    cos_r = _muladd(em, z, _series(em, z, 2, COS_TERMS), _c(r, 1.0))
    return a, quadrant, sin_r, cos_r


def _odd_result(em: Any, x: ir.Value, a: ir.Value, value: ir.Value) -> ir.Value:
    """`value` (f(|x|) of an odd f) with x's sign, -0 kept, NaN for infinite or NaN x."""
    b = em.b
    value = b.select(b.fcmp_ordered("<", x, _c(x, 0.0)), b.fneg(value), value)
    value = b.select(b.fcmp_ordered("==", x, _c(x, 0.0)), x, value)
    finite = b.fcmp_ordered("<=", a, _c(x, 3.4028234663852886e38))
    return b.select(finite, value, _c(x, float("nan")))


def tan(em: Any, x: ir.Value) -> ir.Value | None:
    """tan of a float32: sin r / cos r, or -cos r / sin r in odd quadrants, in double (in
    float the quotient came to 2.8 ulp); None for double, which keeps the C library's."""
    if not isinstance(x.type, ir.FloatType):
        return None
    b = em.b
    a, quadrant, sin_r, cos_r = _sin_cos_of_r(em, x)
    odd = b.icmp_unsigned("!=", b.and_(quadrant, ir.Constant(I32, 1)), ir.Constant(I32, 0))
    value = b.fdiv(b.select(odd, b.fneg(cos_r), sin_r), b.select(odd, sin_r, cos_r))
    return _odd_result(em, x, a, b.fptrunc(value, x.type))


def sin_cos(em: Any, x: ir.Value, cosine: bool) -> ir.Value | None:
    """sin(x) or cos(x) of a float32 (`_reduce_quadrants`, then Taylor polynomials of r);
    None for double, which keeps the C library's."""
    if not isinstance(x.type, ir.FloatType):
        return None
    b = em.b
    a, quadrant, sin_r, cos_r = _sin_cos_of_r(em, x)
    if cosine:
        quadrant = b.add(quadrant, ir.Constant(I32, 1))
    odd = b.icmp_unsigned("!=", b.and_(quadrant, ir.Constant(I32, 1)), ir.Constant(I32, 0))
    flip = b.icmp_unsigned("!=", b.and_(quadrant, ir.Constant(I32, 2)), ir.Constant(I32, 0))
    value = b.fptrunc(b.select(odd, cos_r, sin_r), x.type)
    value = b.select(flip, b.fneg(value), value)
    if not cosine:
        return _odd_result(em, x, a, value)
    finite = b.fcmp_ordered("<=", a, _c(x, 3.4028234663852886e38))
    return b.select(finite, value, _c(x, float("nan")))


def _series(em: Any, z: ir.Value, first: int, count: int) -> ir.Value:
    """sum_{j < count} (-1)^(j+1) z^j / (first + 2j)!: sin(r) / r - 1 over r^2 (first 3),
    (cos(r) - 1) / r^2 (first 2), in z = r^2."""
    return _polynomial(em, tuple((-1.0) ** (j + 1) / factorial(first + 2 * j)
                                 for j in range(count)), z)


ATAN_TERMS = 11   # atan(t) = t (1 - t^2/3 + ...) through t^22 / 23 (|t| <= tan(pi/8): 2e-10)


def atan2(em: Any, y: ir.Value, x: ir.Value) -> ir.Value | None:
    """atan2(y, x) of float32s, in double: t = min(|x|,|y|) / max(|x|,|y|) in [0, 1], past
    tan(pi/8) moved to (t - 1) / (t + 1) around pi/4, the Taylor series of atan, then the
    octant's pi/2 - and pi - and y's sign; both zero or both infinite as C99 (0 or pi, pi/4
    or 3 pi/4). None for double, which keeps the C library's."""
    if not isinstance(x.type, ir.FloatType):
        return None
    b = em.b
    d = ir.DoubleType()
    ax, ay = (b.fpext(em.intrinsic("llvm.fabs", [v]), d) for v in (x, y))
    swap = b.fcmp_ordered(">", ay, ax)
    ratio = b.fdiv(b.select(swap, ax, ay), b.select(swap, ay, ax))
    both_zero = b.and_(b.fcmp_ordered("==", ax, _c(ax, 0.0)), b.fcmp_ordered("==", ay, _c(ay, 0.0)))
    t = b.select(b.fcmp_ordered("==", ax, ay), _c(ax, 1.0), ratio)
    t = b.select(both_zero, _c(ax, 0.0), t)
    past = b.fcmp_ordered(">", t, _c(t, 0.41421356237309503))
    t = b.select(past, b.fdiv(b.fsub(t, _c(t, 1.0)), b.fadd(t, _c(t, 1.0))), t)
    z = b.fmul(t, t)
    series = _polynomial(em, tuple((-1.0) ** k / (2 * k + 1) for k in range(1, ATAN_TERMS + 1)),
                         z)
    angle = _muladd(em, b.fmul(t, z), series, t)
    angle = b.select(past, b.fadd(angle, _c(angle, 0.7853981633974483)), angle)
    angle = b.select(swap, b.fsub(_c(angle, 1.5707963267948966), angle), angle)
    x_negative = b.icmp_signed("<", b.bitcast(x, I32), ir.Constant(I32, 0))   # -0 too
    angle = b.select(x_negative, b.fsub(_c(angle, 3.141592653589793), angle), angle)
    angle = em.intrinsic("llvm.copysign", [b.fptrunc(angle, x.type), y])
    unordered = b.fcmp_unordered("uno", x, y)
    return b.select(unordered, _c(x, float("nan")), angle)
