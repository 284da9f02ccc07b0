"""Vectorizable transcendentals as plain LLVM IR: exp, expm1, tanh, log(1p), erf, pow
(sin, cos, tan and atan2: `trig`).

In: an `Emitter` (builder + intrinsic helper) and a float/double register value.
Out: the function value, built from adds, multiplies, selects and bit operations only, so
the loop vectorizer widens them (libm calls stay scalar).

exp/expm1 use Cody-Waite range reduction x = n*ln2 + r with |r| <= ln2/2 and a polynomial
for e^r - 1 = r + r^2 * P(r) (float: P of degree 4, a Chebyshev fit made with mpmath, error
under 1e-8 before rounding; double: Taylor to degree 13). n is rounded with the
add-a-shifter trick, not `roundeven` + `fptosi` (`_split`): no poison for a NaN, so no NaN
select at the end. The scale by 2^n: on AVX-512 one `vscalefps` from the float n
(`vector_calls`; denormal and infinite results round once), and float32 exp takes 2^(j/16)
from a 16-entry table in one `vpermps`, so its polynomial is three steps (`_exp_by_table`);
elsewhere integer steps, two exact multiplies where the result may be denormal. Where the
argument is known to be <= 0 (`kernel/signs.py`: exp(-x*x), the logistic's exp(-|x|)),
`exp_nonpositive` has no upper clamp. Below the range (e^x rounds to +0) no step underflows:
an x86 microcode assist per lane. tanh(x) = copysign(-t / (2 + t), x) with t = expm1(-2|x|)
for |x| clamped where tanh rounds to 1, so its expm1 needs no clamps. All within 3 ulp
(tests); NaN propagates, signed zeros are kept. W1's chain on 2^24 float32: 20.6-21.6 ->
15.1-16.3 ms (eighteenth session), 6.3-6.8 -> 4.6-4.7 ms with vscalefps and the table
(twenty-ninth; docs/performance.md).
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


def _exp_scaled(em: Any, x: ir.Value, table: bool = True) -> ir.Value:
    """e^x for x <= exp_hi (or NaN), scaled by one `vscalefps` (`vector_calls.available()`
    only): 2^n * (1 + r (1 + r P(r))), or for float `_exp_by_table`'s unless not `table`
    (its ~1 ulp instead of ~0.55 put a logistic's e / (1 + e) past 3 ulp). Below
    exp_lo (e^x rounds to +0, and so from any finite or infinite x) the result is selected
    +0, a select the scale takes as its zero mask: a `vscalefps` that underflows to zero is
    an x86 microcode assist (2^24 lanes: 33 ms instead of 2.7)."""
    f = _fmt(x)
    if f is F32 and table:
        n_f, p = _exp_by_table(em, x)
    else:
        _, n_f, r = _split(em, x)
        one = _c(x, 1.0)
        p = _muladd(em, r, _muladd(em, r, _poly(em, r), one), one)
    under = em.b.fcmp_ordered("<", x, _c(x, f.exp_lo))
    return em.b.select(under, _c(x, 0.0), vector_calls.scalef(em, p, n_f))


# t = x log2(e) + TABLE_SHIFTER rounds x log2(e) to a multiple of 1/16, m / 16, and leaves
# m mod 16 in t's low 4 bits (|x log2(e)| < 2^18)
TABLE_SHIFTER = 1.5 * 2.0 ** 19


def _exp_by_table(em: Any, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(y, p) with e^x = 2^floor(y) * p for a float32 x of exp's range: x = y ln2 + r,
    y = m / 16, |r| <= ln2/32, and p = 2^((m mod 16) / 16) * e^r from a 16-entry table in
    one `vpermps` (`vector_calls.exp2_sixteenth`) and e^r - 1 = r + r^2 (1/2 + r/6) (error
    below r^4/24 = 1e-8): three polynomial steps where `_poly`'s range takes six."""
    b = em.b
    shifter = _c(x, TABLE_SHIFTER)
    t = _muladd(em, x, _c(x, LOG2E), shifter)
    y = b.fsub(t, shifter)
    r = _muladd(em, y, _c(x, -F32.ln2_hi), x)    # exact: y and ln2_hi have few bits
    r = _muladd(em, y, _c(x, -F32.ln2_lo), r)
    q = _muladd(em, b.fmul(r, r), _muladd(em, r, _c(x, 1 / 6), _c(x, 0.5)), r)
    power = vector_calls.exp2_sixteenth(em, t)
    return y, _muladd(em, power, q, power)


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
    """e ** x (`_exp_scaled` where the CPU has `vscalefps`)."""
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


def exp_nonpositive(em: Any, x: ir.Value, table: bool = True) -> ir.Value:
    """e ** x for an x known to be <= 0 (or NaN): no upper clamp. With `vscalefps`
    `_exp_scaled` (by table for float32 where `table`); else only the low clamp and the
    scale by 2^n in one step plus a multiply by a constant: 2^(n + OFFSET) is normal for
    every n of the clamped range, and the exact product's multiply by 2^-OFFSET rounds a
    denormal result once, as the two-step scale of `exp` does."""
    f = _fmt(x)
    b = em.b
    if vector_calls.available():
        return _exp_scaled(em, x, table)
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
    n, _, em1 = _reduce(em, x)
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
