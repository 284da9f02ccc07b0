"""Vectorizable transcendentals as plain LLVM IR: exp, expm1, tanh, log(1p), erf, sin, cos, tan.

In: an `Emitter` (builder + intrinsic helper) and a float/double register value.
Out: the function value, built from adds, multiplies, selects and bit operations only, so
the loop vectorizer widens them (libm calls stay scalar).

exp/expm1 use Cody-Waite range reduction x = n*ln2 + r with |r| <= ln2/2, a polynomial for
e^r - 1 = r + r^2 * P(r) (float: P of degree 4, a Chebyshev fit made with mpmath, error
under 1e-8 before rounding; double: Taylor to degree 13), and a two-step scale by 2^n so
results that underflow to denormals or overflow to inf round correctly (on AVX-512 one
`llvm.ldexp`, `vscalefps`, with the same bits: plain exp of 2^16 float32 25 -> 21 us). n is
rounded with the add-a-shifter trick, not `roundeven` + `fptosi` (`_reduce`): no poison for
a NaN, so no NaN select at the end. Where the argument is known to be <= 0
(`kernel/signs.py`: exp(-x*x), the logistic's exp(-|x|)), `exp_nonpositive` scales in one
step. Below the range (e^x rounds to +0) no product underflows: an x86 microcode assist
per lane (`exp_nonpositive`'s comment). tanh(x) =
copysign(-t / (2 + t), x) with t = expm1(-2|x|) for |x| clamped where tanh rounds to 1, so
its expm1 needs no clamps and no two-step scale. All within 3 ulp (tests); NaN propagates,
signed zeros are kept. W1's chain on 2^24 float32: 20.6-21.6 -> 15.1-16.3 ms (alternating
fresh processes; docs/performance.md, eighteenth session).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from math import factorial
from typing import Any

from llvmlite import ir

from fgrad.lower.llvm.kernels import vector_calls


@dataclass(frozen=True)
class _Format:
    """Constants of one float format."""

    int_type: ir.IntType
    mantissa_bits: int
    bias: int
    ln2_hi: float
    ln2_lo: float
    exp_lo: float       # exp(x) rounds to 0 below this
    exp_hi: float       # exp(x) is inf above this
    expm1_lo: float     # expm1(x) rounds to -1 below this
    poly: tuple[float, ...]  # e^r - 1 = r + r^2 * poly(r), highest degree first


LOG2E = 1.4426950408889634
I32 = ir.IntType(32)
F32 = _Format(ir.IntType(32), 23, 127, 0.693359375, -2.12194440e-4, -104.0, 89.0, -30.0,
              (1.3926175888627768e-3, 8.363173343241215e-3, 4.1666556149721146e-2,
               1.6666577756404877e-1, 0.5))
F64 = _Format(ir.IntType(64), 52, 1023, 6.93145751953125e-1, 1.42860682030941723212e-6,
              -746.0, 710.0, -40.0, tuple(1.0 / factorial(k) for k in range(13, 1, -1)))


# exp_nonpositive's scale: 2^(n + offset) stays normal for n down to exp_lo's (-150, -1075)
SCALE_OFFSET = {32: 32, 64: 64}
# |x| beyond which tanh(x) rounds to +-1 (2 e^(-2|x|) under half an ulp of 1); e^(-2|x|)
# there is far from denormal
TANH_ONE = {32: 9.1, 64: 19.1}


def _fmt(x: ir.Value) -> _Format:
    return F64 if isinstance(x.type, ir.DoubleType) else F32


def _c(x: ir.Value, v: float) -> ir.Constant:
    return ir.Constant(x.type, v)


def _clamp(em: Any, x: ir.Value, lo: float, hi: float) -> ir.Value:
    """x clamped into [lo, hi]; NaN stays NaN (an unordered compare is false), and the
    steps after carry it to the result: no integer they compute is poison (`_reduce`)."""
    b = em.b
    x = b.select(b.fcmp_ordered(">", x, _c(x, hi)), _c(x, hi), x)
    return b.select(b.fcmp_ordered("<", x, _c(x, lo)), _c(x, lo), x)


def _pow2(em: Any, k: ir.Value, like: ir.Value, offset: int = 0) -> ir.Value:
    """2^(k + offset) as a float for an integer k + offset in the normal exponent range."""
    f = _fmt(like)
    b = em.b
    biased = b.add(k, ir.Constant(f.int_type, f.bias + offset))
    return b.bitcast(b.shl(biased, ir.Constant(f.int_type, f.mantissa_bits)), like.type)


def _scale(em: Any, y: ir.Value, n: ir.Value, n_f: ir.Value) -> ir.Value:
    """y * 2^n (n as an int and as a float) rounded once, so denormal and overflowing
    results round correctly: one `vscalefps` where the CPU has it (`vector_calls`), else
    two exact steps."""
    if vector_calls.available():
        return vector_calls.scalef(em, y, n_f)
    b = em.b
    half = b.ashr(n, ir.Constant(n.type, 1))
    return b.fmul(b.fmul(y, _pow2(em, half, y)), _pow2(em, b.sub(n, half), y))


def _split(em: Any, x: ir.Value, scale: float = 1.0
           ) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(n as int, n as float, r) with scale*x = n*ln2 + scale*r, |scale*r| <= ln2/2, for a
    clamped x and a power of two `scale` (all scalings exact: the same bits as reducing
    scale*x, one multiply fewer).

    n comes from adding 1.5 * 2^mantissa_bits to x*log2(e): the sum's rounding leaves n in
    its low bits (t = shifter + n exactly, |n| < 2^22), so n = bits(t) - bits(shifter) and
    n as a float is t - shifter. Unlike `roundeven` + `fptosi`, nothing here is poison for
    a NaN x (it only travels to the result as a NaN), so exp needs no NaN select."""
    f = _fmt(x)
    b = em.b
    shift = 1.5 * 2.0 ** f.mantissa_bits
    shifter = _c(x, shift)
    t = _muladd(em, x, _c(x, scale * LOG2E), shifter)
    n_f = b.fsub(t, shifter)
    n = b.sub(b.bitcast(t, f.int_type), ir.Constant(f.int_type, _bits(shift, f)))
    r = _muladd(em, n_f, _c(x, -f.ln2_hi / scale), x)
    return n, n_f, _muladd(em, n_f, _c(x, -f.ln2_lo / scale), r)


def _poly(em: Any, r: ir.Value, scale: float = 1.0) -> ir.Value:
    """scale * P(scale * r) with e^r - 1 = r + r^2 P(r) (the format's `poly`), its
    coefficients scaled by powers of `scale` (the same bits as P's Horner steps, scaled)."""
    coefficients = _fmt(r).poly
    degree = len(coefficients) - 1
    p = _c(r, coefficients[0] * scale ** (degree + 1))
    for k, coeff in zip(range(degree - 1, -1, -1), coefficients[1:]):
        p = _muladd(em, p, r, _c(r, coeff * scale ** (k + 1)))
    return p


def _reduce(em: Any, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(n as int, n as float, e^r - 1) with x = n*ln2 + r (`_split`)."""
    n, n_f, r = _split(em, x)
    return n, n_f, _muladd(em, em.b.fmul(r, r), _poly(em, r), r)


def _exp_scaled(em: Any, x: ir.Value) -> ir.Value:
    """e^x = 2^n * (1 + r (1 + r P(r))) for x <= exp_hi (or NaN), scaled by one
    `vscalefps` (`vector_calls.available()` only). Below exp_lo (e^x rounds to +0, and so
    from any finite or infinite x) the result is selected +0, a select the scale takes as
    its zero mask: a `vscalefps` that underflows to zero is an x86 microcode assist (2^24
    lanes: 33 ms instead of 2.7)."""
    f = _fmt(x)
    _, n_f, r = _split(em, x)
    one = _c(x, 1.0)
    p = _muladd(em, r, _muladd(em, r, _poly(em, r), one), one)
    under = em.b.fcmp_ordered("<", x, _c(x, f.exp_lo))
    return em.b.select(under, _c(x, 0.0), vector_calls.scalef(em, p, n_f))


def _bits(value: float, f: _Format) -> int:
    """The IEEE bit pattern of `value` in format f, as an integer."""
    if f is F64:
        return struct.unpack("<q", struct.pack("<d", value))[0]
    return struct.unpack("<i", struct.pack("<f", value))[0]


def _muladd(em: Any, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
    """a * b + c, fused into one FMA where the CPU has it (one rounding, half the latency
    of the polynomial's chain), else a multiply and an add."""
    return em.intrinsic("llvm.fmuladd", [a, b, c])


def exp(em: Any, x: ir.Value) -> ir.Value:
    """e ** x."""
    f = _fmt(x)
    if vector_calls.available():
        high = _c(x, f.exp_hi)
        return _exp_scaled(em, em.b.select(em.b.fcmp_ordered(">", x, high), high, x))
    b = em.b
    under = b.fcmp_ordered("<", x, _c(x, f.exp_lo))
    high = b.select(b.fcmp_ordered(">", x, _c(x, f.exp_hi)), _c(x, f.exp_hi), x)
    # lanes below exp_lo (e^x rounds to +0) are computed from x = 0 and set to +0, so no
    # product underflows (see exp_nonpositive)
    n, n_f, em1 = _reduce(em, b.select(under, _c(x, 0.0), high))
    result = _scale(em, b.fadd(em1, _c(x, 1.0)), n, n_f)
    return b.select(under, _c(result, 0.0), result)


def expm1(em: Any, x: ir.Value) -> ir.Value:
    """e ** x - 1, accurate for small x: 2^n * (em1 + 1 - 2^-n)."""
    f = _fmt(x)
    b = em.b
    n, n_f, em1 = _reduce(em, _clamp(em, x, f.expm1_lo, f.exp_hi))
    minus_n = b.sub(ir.Constant(n.type, 0), n)
    floor = ir.Constant(n.type, -f.mantissa_bits - 8)  # 1 - 2^-n rounds to 1 beyond this
    minus_n = b.select(b.icmp_signed("<", minus_n, floor), floor, minus_n)
    shift = b.fsub(_c(x, 1.0), _pow2(em, minus_n, x))
    out = _scale(em, b.fadd(em1, shift), n, n_f)
    return b.select(b.fcmp_ordered("==", x, _c(x, 0.0)), x, out)  # keeps -0.0


def exp_nonpositive(em: Any, x: ir.Value) -> ir.Value:
    """e ** x for an x known to be <= 0 (or NaN): only the low clamp, and the scale by 2^n
    in one step plus a multiply by a constant. 2^(n + OFFSET) is normal for every n of the
    clamped range, and the exact product's multiply by 2^-OFFSET rounds a denormal result
    once, as the two-step scale of `exp` does."""
    f = _fmt(x)
    b = em.b
    if vector_calls.available():
        return _exp_scaled(em, x)
    offset = SCALE_OFFSET[f.int_type.width]
    # below exp_lo (e^x rounds to +0) x becomes the point whose 2^(n + offset) has a zero
    # exponent field: the scale is +0 and so is the result, with no product that underflows
    # (an x86 microcode assist: exp(-x*x) of x in (-80, 80) ran 3-6x slower, a causal
    # softmax's masked entries 3.4x)
    zero_scale = -(f.bias + offset) * 0.6931471805599453
    x = b.select(b.fcmp_ordered("<", x, _c(x, f.exp_lo)), _c(x, zero_scale), x)
    n, _, em1 = _reduce(em, x)
    scale = _pow2(em, n, x, offset)
    return b.fmul(_muladd(em, em1, scale, scale), _c(x, 2.0 ** -offset))


def _expm1_above(em: Any, x: ir.Value) -> ir.Value:
    """e ** x - 1 for x in [-2 * TANH_ONE, 0] (or NaN): 2^n is normal there, so the result
    is one FMA, 2^n * (e^r - 1) + (2^n - 1), exact at 0 (n = 0)."""
    n, n_f, em1 = _reduce(em, x)
    scale = _pow2(em, n, x)
    return _muladd(em, scale, em1, em.b.fsub(scale, _c(x, 1.0)))


def _expm1_minus_twice(em: Any, a: ir.Value) -> ir.Value:
    """e ** (-2a) - 1 for a in [0, TANH_ONE] (or NaN): `_expm1_above(-2a)`'s bits with
    `vscalefps` and no multiply by -2 (`_split`'s scale; with r = -2 rho, em1 = -2 h for
    h = rho + rho^2 (-2 P(r)), and 2^n * em1 = (-2 * 2^n) h)."""
    if not vector_calls.available():
        return _expm1_above(em, em.b.fmul(a, _c(a, -2.0)))
    _, n_f, rho = _split(em, a, -2.0)
    h = _muladd(em, em.b.fmul(rho, rho), _poly(em, rho, -2.0), rho)
    minus_twice = vector_calls.scalef(em, _c(a, -2.0), n_f)
    scale_less_one = _muladd(em, minus_twice, _c(a, -0.5), _c(a, -1.0))
    return _muladd(em, minus_twice, h, scale_less_one)


def tanh(em: Any, x: ir.Value) -> ir.Value:
    """tanh(x) = copysign(-t, x) / (2 + t) with t = expm1(-2|x|) and |x| clamped where tanh
    rounds to 1 (TANH_ONE), so expm1 needs neither its clamps nor a two-step scale."""
    numerator, denominator = tanh_parts(em, x)
    return em.b.fdiv(numerator, denominator)


def tanh_parts(em: Any, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """tanh(x) as (numerator, denominator in (1, 2]) (`tanh`); -t >= 0 takes x's sign
    before the division, which is exact, so the quotient is the same bits."""
    b = em.b
    one = _c(x, TANH_ONE[_fmt(x).int_type.width])
    a = em.intrinsic("llvm.fabs", [x])
    a = b.select(b.fcmp_ordered(">", a, one), one, a)   # a NaN stays a NaN
    t = _expm1_minus_twice(em, a)
    return em.intrinsic("llvm.copysign", [b.fneg(t), x]), b.fadd(t, _c(x, 2.0))


# log: 2 atanh(s) = 2s (1 + s^2/3 + s^4/5 + ...), s = (m - 1) / (m + 1), through the term
# where it falls below the format's rounding for |s| <= 3 - 2 sqrt(2) (m in [sqrt(1/2),
# sqrt(2)): s^2 <= 0.0295): s^8 / 9 for float (2e-9 left), s^22 / 23 for double (2e-20)
LOG_TERMS = {32: 4, 64: 11}
SQRT_HALF_BITS = {32: 0x3F3504F3, 64: 0x3FE6A09E667F3BCD}   # bits of sqrt(1/2), rounded
MIN_NORMAL = {32: 2.0 ** -126, 64: 2.0 ** -1022}


def log(em: Any, x: ir.Value) -> ir.Value:
    """The natural log: x = 2^k * m with m in [sqrt(1/2), sqrt(2)) (from x's bits; a
    denormal x scaled into the normal range first), log x = k ln2 + 2 atanh(s) with
    s = (m - 1) / (m + 1), ln2 in two parts (k ln2_hi is exact). 0 gives -inf, negative
    numbers NaN, +inf itself, NaN itself. Scalar libm calls it replaces ran 9x slower (2^24
    float32 on two threads: 26 ms)."""
    return _log_specials(em, x, x, _log_core(em, x))


def log1p(em: Any, x: ir.Value) -> ir.Value:
    """log(1 + x), accurate for small x: log(u) for u = 1 + x rounded, plus the rounding's
    first-order correction (x - (u - 1)) / u. -1 gives -inf, below it NaN. (softplus,
    mish and log-sigmoid, two log1p each, ran 20 ns per element on libm's scalar log1p.)"""
    b = em.b
    one = _c(x, 1.0)
    u = b.fadd(x, one)
    correction = b.fdiv(b.fsub(x, b.fsub(u, one)), u)
    out = b.fadd(_log_core(em, u), correction)
    out = b.select(b.fcmp_ordered("==", x, _c(x, 0.0)), x, out)   # keeps -0.0
    return _log_specials(em, x, u, out)


def _log_specials(em: Any, x: ir.Value, u: ir.Value, out: ir.Value) -> ir.Value:
    """`out` (the log of u) with log's special values: u = 0: -inf, u < 0: NaN, x NaN or
    +inf: x."""
    b = em.b
    out = b.select(b.fcmp_ordered("==", u, _c(x, 0.0)), _c(x, float("-inf")), out)
    out = b.select(b.fcmp_ordered("<", u, _c(x, 0.0)), _c(x, float("nan")), out)
    special = b.or_(b.fcmp_unordered("uno", x, x), b.fcmp_ordered("==", x, _c(x, float("inf"))))
    return b.select(special, x, out)


def _log_core(em: Any, x: ir.Value) -> ir.Value:
    """log x for a positive, finite x (`log`'s docstring); anything for other x."""
    f = _fmt(x)
    b = em.b
    width = f.int_type.width
    boost = f.mantissa_bits + 1                 # a denormal times 2^boost is normal
    tiny = b.fcmp_ordered("<", x, _c(x, MIN_NORMAL[width]))
    scaled = b.select(tiny, b.fmul(x, _c(x, 2.0 ** boost)), x)
    bits = b.bitcast(scaled, f.int_type)
    k = b.ashr(b.sub(bits, ir.Constant(f.int_type, SQRT_HALF_BITS[width])),
               ir.Constant(f.int_type, f.mantissa_bits))
    m = b.bitcast(b.sub(bits, b.shl(k, ir.Constant(f.int_type, f.mantissa_bits))), x.type)
    k_f = b.fsub(b.sitofp(k, x.type), b.select(tiny, _c(x, float(boost)), _c(x, 0.0)))
    s = b.fdiv(b.fsub(m, _c(x, 1.0)), b.fadd(m, _c(x, 1.0)))
    z = b.fmul(s, s)
    p = _polynomial(em, tuple(1.0 / (2 * n + 1) for n in range(1, LOG_TERMS[width] + 1)), z)
    two_s = b.fmul(s, _c(x, 2.0))
    log_m = _muladd(em, b.fmul(two_s, z), p, two_s)
    low = _muladd(em, k_f, _c(x, f.ln2_lo), log_m)
    return _muladd(em, k_f, _c(x, f.ln2_hi), low)


# float32 erf (docs/fit_erf.py makes these, lowest degree first): erf(x) = x + x q(x^2)
# below ERF_NEAR; beyond, 1 - exp(-x^2) R(w), w = 1 / (1 + |x| / 2), up to ERF_ONE, where
# float32 erf rounds to 1
ERF_NEAR, ERF_ONE = 0.875, 3.92
ERF_Q = (0.12837915726627142, -0.3761254905301069, 0.11282440986166527,
         -0.026790948579711933, 0.005031424419247766, -0.0006199344732683705)
ERF_R = (0.0006648105720863496, 0.272847367370564, 0.3350420898177308, 0.08916827356964846,
         0.42324784414453165, -0.07377438905762658, -0.04780249421044004)


def _polynomial(em: Any, coefficients: tuple[float, ...], t: ir.Value) -> ir.Value:
    """sum c_i t^i (lowest degree first), by Horner's rule with FMAs."""
    p = _c(t, coefficients[-1])
    for c in coefficients[-2::-1]:
        p = _muladd(em, p, t, _c(t, c))
    return p


def erf(em: Any, x: ir.Value) -> ir.Value | None:
    """The error function of a float (within 1 ulp in float32 arithmetic, per the fit's
    test; both forms computed and one selected, so the loop vectorizes): None for double,
    which keeps the C library's."""
    if isinstance(x.type, ir.DoubleType):
        return None
    b = em.b
    a = em.intrinsic("llvm.fabs", [x])
    u = b.fmul(x, x)
    near = _muladd(em, x, _polynomial(em, ERF_Q, u), x)
    w = b.fdiv(_c(x, 1.0), _muladd(em, a, _c(x, 0.5), _c(x, 1.0)))
    tail = b.fmul(exp_nonpositive(em, b.fneg(u)), _polynomial(em, ERF_R, w))
    far = b.fsub(_c(x, 1.0), tail)
    far = b.select(b.fcmp_ordered(">=", a, _c(x, ERF_ONE)), _c(x, 1.0), far)  # NaN: far
    far = em.intrinsic("llvm.copysign", [far, x])
    return b.select(b.fcmp_ordered("<", a, _c(x, ERF_NEAR)), near, far)


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


def pow_float(em: Any, x: ir.Value, y: ir.Value) -> ir.Value | None:
    """x ** y for float32 as exp(y log|x|) in double (the product's error stays far below a
    float's ulp unless the result overflows anyway), then C99's special values: y = 0 or x = 1
    give 1, (-1) ** +-inf is 1, a finite negative x gives NaN for a y that is no integer,
    and x's sign stays for an odd one. None for double, which keeps the C library's."""
    if not isinstance(x.type, ir.FloatType):
        return None
    b = em.b
    d = ir.DoubleType()
    a = em.intrinsic("llvm.fabs", [x])
    wide = exp(em, b.fmul(b.fpext(y, d), log(em, b.fpext(a, d))))
    value = b.fptrunc(wide, x.type)
    integral = b.fcmp_ordered("==", em.intrinsic("llvm.trunc", [y]), y)
    half = b.fmul(y, _c(y, 0.5))
    odd = b.and_(integral, b.fcmp_ordered("!=", em.intrinsic("llvm.trunc", [half]), half))
    sign = b.icmp_signed("<", b.bitcast(x, I32), ir.Constant(I32, 0))   # -0 and -inf too
    value = b.select(b.and_(sign, odd), b.fneg(value), value)
    negative = b.and_(b.fcmp_ordered("<", x, _c(x, 0.0)),
                      b.fcmp_ordered("!=", x, _c(x, float("-inf"))))   # (-inf) ** 0.5 = inf
    value = b.select(b.and_(negative, b.not_(integral)), _c(x, float("nan")), value)
    one = b.or_(b.fcmp_ordered("==", y, _c(y, 0.0)), b.fcmp_ordered("==", x, _c(x, 1.0)))
    unit = b.and_(b.fcmp_ordered("==", x, _c(x, -1.0)),
                  b.fcmp_ordered("==", em.intrinsic("llvm.fabs", [y]), _c(y, float("inf"))))
    return b.select(b.or_(one, unit), _c(x, 1.0), value)


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
