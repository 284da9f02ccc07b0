"""The LLVM lowering of every elementwise primitive: one table entry per primitive.

In: llvmlite values in register types (bool is i1, float16 and bfloat16 are computed in
float).
Out: the result value, with the exact semantics of the primitive's NumPy impl: integer
division and remainder never trap (x / 0 == 0, x % 0 == 0, INT_MIN / -1 wraps), shifts by
out-of-range amounts give 0 (or the sign fill), float->int casts saturate with NaN -> 0,
and every float16/bfloat16 result is rounded to its precision after each op, as NumPy (and
ml_dtypes) round. bfloat16 lives in memory as its 16 bits (an i16: the upper half of a
float), rounded to nearest even with integer ops that vectorize.
"""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from fgrad.core.dtypes import DType, dtypes
from fgrad.lower.kernel.build import identity
from fgrad.lower.kernel.ir import AccInit
from fgrad.lower.llvm.kernels import trig
from fgrad.lower.llvm.kernels import vmath as llvm_math
from fgrad.lower.llvm.kernels.remainders import fmod_float

I1, I8, I16, I32, I64 = (ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32),
                        ir.IntType(64))


def reg_type(dtype: DType) -> ir.Type:
    """The register type of a dtype (bool -> i1, float16 -> float)."""
    if dtype == dtypes.bool:
        return I1
    if dtype.is_float:
        return ir.DoubleType() if dtype.itemsize == 8 else ir.FloatType()
    return ir.IntType(8 * dtype.itemsize)


def mem_type(dtype: DType) -> ir.Type:
    """The in-memory element type of a dtype (bool -> i8, float16 -> half, bfloat16 ->
    i16)."""
    if dtype == dtypes.bool:
        return I8
    if dtype == dtypes.float16:
        return ir.HalfType()
    if dtype == dtypes.bfloat16:
        return I16
    return reg_type(dtype)


def const(dtype: DType, value: int | float) -> ir.Constant:
    """A register constant (unsigned values wrap to their two's-complement pattern)."""
    ty = reg_type(dtype)
    if dtype.is_float:
        return ir.Constant(ty, float(value))
    bits = ty.width
    v = int(value) % (1 << bits)
    return ir.Constant(ty, v - (1 << bits) if v >= 1 << (bits - 1) else v)


def _suffix(ty: ir.Type) -> str:
    if isinstance(ty, ir.FloatType):
        return "f32"
    if isinstance(ty, ir.DoubleType):
        return "f64"
    return f"i{ty.width}"


class Emitter:
    """Emits ALU ops at a builder's position in a module."""

    def __init__(self, builder: ir.IRBuilder):
        self.b = builder

    @property
    def module(self) -> ir.Module:
        """The module being built."""
        return self.b.module

    def function(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        """The module's function `name`, declared on first use."""
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(self.module, ir.FunctionType(ret, args), name=name)

    def intrinsic(self, name: str, args: list[ir.Value], ret: ir.Type | None = None
                  ) -> ir.Value:
        """Call an overloaded intrinsic such as llvm.exp (mangled by return, then arg type)."""
        ret = ret or args[0].type
        mangled = f"{name}.{_suffix(ret)}"
        if ret != args[0].type:
            mangled += f".{_suffix(args[0].type)}"
        return self.b.call(self.function(mangled, ret, [a.type for a in args]), args)

    def libm(self, name: str, args: list[ir.Value]) -> ir.Value:
        """Call the C math library (`tanhf` for float, `tanh` for double)."""
        ty = args[0].type
        full = name + ("f" if isinstance(ty, ir.FloatType) else "")
        return self.b.call(self.function(full, ty, [ty] * len(args)), args)

    def emit(self, op: str, args: list[ir.Value], arg_dtypes: list[DType], dtype: DType
             ) -> ir.Value:
        """The value of primitive `op` on `args`; float16/bfloat16 results rounded."""
        fn = OPS.get(op)
        if fn is None:
            raise NotImplementedError(f"llvm backend: no lowering for primitive '{op}'")
        out = fn(self, args, arg_dtypes[0] if arg_dtypes else dtype, dtype)
        return self.round_to(dtype, out)

    def round_to(self, dtype: DType, x: ir.Value) -> ir.Value:
        """A float register rounded to the nearest value of `dtype` (only float16 and
        bfloat16 round; every other dtype's registers hold its values exactly)."""
        if dtype == dtypes.float16:
            return self.b.fpext(self.b.fptrunc(x, ir.HalfType()), ir.FloatType())
        if dtype == dtypes.bfloat16:
            return self.b.bitcast(self._bfloat_bits(x), ir.FloatType())
        return x

    def _bfloat_bits(self, x: ir.Value) -> ir.Value:
        """The float bits of x rounded to bfloat16 (nearest, ties to even; a NaN becomes
        the quiet NaN of its sign, as ml_dtypes converts): the low 16 bits are zero."""
        b = self.b
        bits = b.bitcast(x, I32)
        odd = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
        rounded = b.add(bits, b.add(odd, ir.Constant(I32, 0x7FFF)))
        rounded = b.and_(rounded, ir.Constant(I32, 0xFFFF0000 - (1 << 32)))
        quiet = b.or_(b.and_(bits, ir.Constant(I32, -(1 << 31))), ir.Constant(I32, 0x7FC00000))
        return b.select(b.fcmp_unordered("uno", x, x), quiet, rounded)

    def to_memory(self, dtype: DType, x: ir.Value) -> ir.Value:
        """A register value as `dtype` stores it (bool as a byte, float16 as half,
        bfloat16 as its rounded upper 16 bits)."""
        if dtype == dtypes.bool:
            return self.b.zext(x, I8)
        if dtype == dtypes.float16:
            return self.b.fptrunc(x, ir.HalfType())
        if dtype == dtypes.bfloat16:
            return self.b.trunc(self.b.lshr(self._bfloat_bits(x), ir.Constant(I32, 16)), I16)
        return x

    def from_memory(self, dtype: DType, v: ir.Value) -> ir.Value:
        """A loaded element as a register value of `dtype` (exact)."""
        b = self.b
        if dtype == dtypes.bool:
            return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
        if dtype == dtypes.float16:
            return b.fpext(v, ir.FloatType())
        if dtype == dtypes.bfloat16:
            return b.bitcast(b.shl(b.zext(v, I32), ir.Constant(I32, 16)), ir.FloatType())
        return v


Rule = Callable[[Emitter, list[ir.Value], DType, DType], ir.Value]


def _intrinsic(name: str) -> Rule:
    return lambda em, a, dt, od: em.intrinsic(name, a)


def _sin_cos(cosine: bool) -> Rule:
    """float32 sin / cos as vectorizable IR (trig.sin_cos); double: LLVM's intrinsic."""
    def rule(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
        return trig.sin_cos(em, a[0], cosine) or \
            em.intrinsic("llvm.cos" if cosine else "llvm.sin", a)
    return rule


def _atan2(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    """float32 atan2 as vectorizable IR (trig.atan2); double: the C library's."""
    return trig.atan2(em, a[0], a[1]) or em.libm("atan2", a)


def _libm(name: str) -> Rule:
    return lambda em, a, dt, od: em.libm(name, a)


def _zero(em: Emitter, v: ir.Value) -> ir.Constant:
    return ir.Constant(v.type, 0.0 if not isinstance(v.type, ir.IntType) else 0)


# ---------------------------------------------------------------------------- unary


def _neg(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    return em.b.fneg(a[0]) if dt.is_float else em.b.sub(_zero(em, a[0]), a[0])


def _abs(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    x = a[0]
    if dt.is_float:
        return em.intrinsic("llvm.fabs", [x])
    if dt.is_unsigned:
        return x
    return em.b.select(em.b.icmp_signed("<", x, _zero(em, x)), em.b.sub(_zero(em, x), x), x)


def _sign(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    x, b = a[0], em.b
    one, minus = ir.Constant(x.type, 1 if not dt.is_float else 1.0), const(dt, -1)
    if dt.is_float:
        neg = b.select(b.fcmp_ordered("<", x, _zero(em, x)), minus, x)
        return b.select(b.fcmp_ordered(">", x, _zero(em, x)), one, neg)
    if dt.is_unsigned:
        return b.zext(b.icmp_unsigned("!=", x, _zero(em, x)), x.type)
    neg = b.select(b.icmp_signed("<", x, _zero(em, x)), minus, _zero(em, x))
    return b.select(b.icmp_signed(">", x, _zero(em, x)), one, neg)


def _logistic(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    """1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: no overflow, no cancellation."""
    numerator, denominator, _ = logistic_parts(em, a[0])
    return em.b.fdiv(numerator, denominator)  # one division: the vector divider is slow


def logistic_parts(em: Emitter, x: ir.Value, table: bool = False
                   ) -> tuple[ir.Value, ir.Value, ir.Value]:
    """The logistic of x as (numerator in [0, 1], denominator 1 + e in [1, 2], e)
    (`_logistic`); e = exp(-|x|), by `exp_nonpositive`'s table where `table`."""
    b = em.b
    e = llvm_math.exp_nonpositive(em, b.fneg(em.intrinsic("llvm.fabs", [x])), table)
    one = ir.Constant(x.type, 1.0)
    numerator = b.select(b.fcmp_ordered(">=", x, _zero(em, x)), one, e)
    return numerator, b.fadd(one, e), e


def _rsqrt(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    """1 / sqrt(x), rounding in between for float16/bfloat16 as the NumPy impl does."""
    root = em.round_to(od, em.intrinsic("llvm.sqrt", a))
    return em.b.fdiv(ir.Constant(a[0].type, 1.0), root)


def _not(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    return em.b.not_(a[0])


def _is_nan(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    return em.b.fcmp_unordered("uno", a[0], a[0])


# ---------------------------------------------------------------------------- binary


def _safe_divisor(em: Emitter, y: ir.Value, signed: bool) -> tuple[ir.Value, ir.Value]:
    """(divisor that cannot trap, y == 0); for signed ints also -1 -> 1 (INT_MIN / -1)."""
    b = em.b
    zero = b.icmp_unsigned("==", y, _zero(em, y))
    bad = b.or_(zero, b.icmp_signed("==", y, ir.Constant(y.type, -1))) if signed else zero
    return b.select(bad, ir.Constant(y.type, 1), y), zero


def _div(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    x, y = a
    b = em.b
    if dt.is_float:
        return b.fdiv(x, y)
    signed = not dt.is_unsigned
    safe, zero = _safe_divisor(em, y, signed)
    q = b.sdiv(x, safe) if signed else b.udiv(x, safe)
    if signed:
        minus_one = b.icmp_signed("==", y, ir.Constant(y.type, -1))
        q = b.select(minus_one, b.sub(_zero(em, x), x), q)
    return b.select(zero, _zero(em, x), q)


def _rem(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    x, y = a
    if dt.is_float:
        return fmod_float(em, x, y) or em.b.frem(x, y)
    safe, _ = _safe_divisor(em, y, not dt.is_unsigned)
    return em.b.urem(x, safe) if dt.is_unsigned else em.b.srem(x, safe)


def _int_pow(em: Emitter, x: ir.Value, y: ir.Value, dt: DType) -> ir.Value:
    """x ** y by square-and-multiply over every exponent bit (unrolled); y < 0 as NumPy."""
    b = em.b
    one = ir.Constant(x.type, 1)
    result, base = one, x
    for k in range(x.type.width):
        bit = b.trunc(b.lshr(y, ir.Constant(y.type, k)), I1)
        result = b.select(bit, b.mul(result, base), result)
        base = b.mul(base, base)
    if dt.is_unsigned:
        return result
    odd = b.trunc(y, I1)
    minus = b.select(odd, ir.Constant(x.type, -1), one)
    neg = b.select(b.icmp_signed("==", x, one), one,
                   b.select(b.icmp_signed("==", x, ir.Constant(x.type, -1)), minus,
                            _zero(em, x)))
    return b.select(b.icmp_signed("<", y, _zero(em, y)), neg, result)


def _pow(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    if not dt.is_float:
        return _int_pow(em, a[0], a[1], dt)
    x, y = a
    exponent = y.constant if isinstance(y, ir.Constant) else None
    if exponent in (3.0, 4.0):   # x ** 3 as jax.lax.integer_pow: products, within ~1 ulp
        square = em.b.fmul(x, x)   # (the C library's pow kept the loop scalar: 4.2 ns each)
        return em.b.fmul(square, x if exponent == 3.0 else square)
    return llvm_math.pow_float(em, x, y) or em.intrinsic("llvm.pow", a)


def _extremum(which: str) -> Rule:
    def rule(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
        x, y = a
        b = em.b
        if dt.is_float:
            return em.intrinsic("llvm.maximum" if which == "max" else "llvm.minimum", a)
        if dt == dtypes.bool:
            return b.or_(x, y) if which == "max" else b.and_(x, y)
        cmp = b.icmp_unsigned if dt.is_unsigned else b.icmp_signed
        return b.select(cmp(">" if which == "max" else "<", x, y), x, y)
    return rule


def _add(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    return em.b.fadd(*a) if dt.is_float else em.b.add(*a)


def _sub(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    return em.b.fsub(*a) if dt.is_float else em.b.sub(*a)


def _mul(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    if dt == dtypes.bool:
        return em.b.and_(*a)
    return em.b.fmul(*a) if dt.is_float else em.b.mul(*a)


def _shift(left: bool) -> Rule:
    def rule(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
        x, y = a
        b = em.b
        width = ir.Constant(y.type, x.type.width)
        ok = b.icmp_unsigned("<", y, width)
        amount = b.select(ok, y, _zero(em, y))
        if left:
            return b.select(ok, b.shl(x, amount), _zero(em, x))
        if dt.is_unsigned:
            return b.select(ok, b.lshr(x, amount), _zero(em, x))
        fill = b.ashr(x, ir.Constant(x.type, x.type.width - 1))
        return b.select(ok, b.ashr(x, amount), fill)
    return rule


def _compare(op: str) -> Rule:
    def rule(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
        if dt.is_float:
            if op == "!=":
                return em.b.fcmp_unordered("!=", *a)
            return em.b.fcmp_ordered(op, *a)
        if dt.is_unsigned or dt == dtypes.bool:
            return em.b.icmp_unsigned(op, *a)
        return em.b.icmp_signed(op, *a)
    return rule


def _safe_mul(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    x, y = a
    zero = _zero(em, x)
    return em.b.select(em.b.fcmp_ordered("==", x, zero), zero, em.b.fmul(x, y))


def _select(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    return em.b.select(*a)


# ---------------------------------------------------------------------------- casts


def convert(em: Emitter, x: ir.Value, src: DType, dst: DType) -> ir.Value:
    """Cast a register value from `src` to `dst` with NumPy's semantics."""
    b, to = em.b, reg_type(dst)
    if dst == dtypes.float16 and src == dtypes.float64:
        return _to_float_rounded_to_odd(em, x)   # `emit` rounds it to float16 once
    if x.type == to and (src.is_float == dst.is_float) and dst != dtypes.bool \
            and src != dtypes.bool:
        return x
    if dst == dtypes.bool:
        if src.is_float:
            return b.fcmp_unordered("!=", x, _zero(em, x))
        return x if src == dtypes.bool else b.icmp_unsigned("!=", x, _zero(em, x))
    if src == dtypes.bool:
        return b.uitofp(x, to) if dst.is_float else b.zext(x, to)
    if src.is_float and dst.is_float:
        if x.type == to:
            return x
        return b.fpext(x, to) if isinstance(to, ir.DoubleType) else b.fptrunc(x, to)
    if src.is_float:
        return _float_to_int(em, x, to, dst.is_unsigned)
    if dst.is_float:
        return b.uitofp(x, to) if src.is_unsigned else b.sitofp(x, to)
    if to.width < x.type.width:
        return b.trunc(x, to)
    if to.width == x.type.width:
        return x
    return b.zext(x, to) if src.is_unsigned else b.sext(x, to)


def _float_to_int(em: Emitter, x: ir.Value, to: ir.IntType, unsigned: bool) -> ir.Value:
    """x truncated toward zero into `to`, saturating at its limits, NaN to 0 (LLVM's
    fptosi.sat / fptoui.sat, whose vector form x86 code generation scalarizes: a compare,
    a conversion and two cmovs per element; f32 -> i32 of 4096^2 took 23 ms). Here the
    conversion only sees values in range, and selects give the limits and NaN's 0."""
    b = em.b
    low = 0.0 if unsigned else -2.0 ** (to.width - 1)
    high = 2.0 ** to.width if unsigned else 2.0 ** (to.width - 1)   # exact in every float
    above = b.fcmp_ordered(">=", x, _c_like(x, high))
    below = b.fcmp_ordered("<", x, _c_like(x, low))
    inside = b.select(b.or_(above, below), _c_like(x, 0.0), x)   # NaN: fptosi of NaN
    inside = b.select(b.fcmp_unordered("uno", x, x), _c_like(x, 0.0), inside)
    converted = b.fptoui(inside, to) if unsigned else b.fptosi(inside, to)
    top = ir.Constant(to, (1 << to.width) - 1 if unsigned else (1 << (to.width - 1)) - 1)
    bottom = ir.Constant(to, 0 if unsigned else -(1 << (to.width - 1)))
    return b.select(above, top, b.select(below, bottom, converted))


def _c_like(x: ir.Value, v: float) -> ir.Constant:
    return ir.Constant(x.type, v)


def _to_float_rounded_to_odd(em: Emitter, wide: ir.Value) -> ir.Value:
    """A double as a float32 rounded to odd: truncated toward zero, with the lowest bit
    set when that was inexact. Rounding this once more to float16 rounds the double once,
    as NumPy does; through a plain float32 it would round twice. (bfloat16 from float64 or
    from integers goes through a plain float32: ml_dtypes, the reference, rounds twice.)"""
    b, double = em.b, ir.DoubleType()
    near = b.fptrunc(wide, ir.FloatType())
    back = b.fpext(near, double)
    fabs = lambda v: em.intrinsic("llvm.fabs", [v])  # noqa: E731
    bits = b.bitcast(near, I32)
    toward_zero = b.select(b.fcmp_ordered(">", fabs(back), fabs(wide)),
                           b.sub(bits, ir.Constant(I32, 1)), bits)
    odd = b.select(b.fcmp_ordered("!=", back, wide),
                   b.or_(toward_zero, ir.Constant(I32, 1)), toward_zero)
    return b.select(b.fcmp_unordered("uno", wide, wide), near, b.bitcast(odd, ir.FloatType()))


def _convert(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    return convert(em, a[0], dt, od)


def _bitcast(em: Emitter, a: list[ir.Value], dt: DType, od: DType) -> ir.Value:
    return em.b.bitcast(a[0], reg_type(od))


OPS: dict[str, Rule] = {
    "neg": _neg, "exp": lambda em, a, dt, od: llvm_math.exp(em, a[0]),
    "expm1": lambda em, a, dt, od: llvm_math.expm1(em, a[0]),
    "tanh": lambda em, a, dt, od: llvm_math.tanh(em, a[0]), "logistic": _logistic,
    "log": lambda em, a, dt, od: llvm_math.log(em, a[0]), "sin": _sin_cos(False),
    "cos": _sin_cos(True),
    "tan": lambda em, a, dt, od: trig.tan(em, a[0]) or em.libm("tan", a),
    "log1p": lambda em, a, dt, od: llvm_math.log1p(em, a[0]),
    "erf": lambda em, a, dt, od: llvm_math.erf(em, a[0]) or em.libm("erf", a),
    "sqrt": _intrinsic("llvm.sqrt"), "rsqrt": _rsqrt, "abs": _abs,
    "sign": _sign, "floor": _intrinsic("llvm.floor"), "ceil": _intrinsic("llvm.ceil"),
    "round": _intrinsic("llvm.roundeven"), "not": _not, "is_nan": _is_nan,
    "stop_gradient": lambda em, a, dt, od: a[0],
    "add": _add, "sub": _sub, "mul": _mul, "div": _div, "rem": _rem, "pow": _pow,
    "max": _extremum("max"), "min": _extremum("min"), "atan2": _atan2,
    "and": lambda em, a, dt, od: em.b.and_(*a), "or": lambda em, a, dt, od: em.b.or_(*a),
    "xor": lambda em, a, dt, od: em.b.xor(*a),
    "shift_left": _shift(True), "shift_right": _shift(False),
    "eq": _compare("=="), "ne": _compare("!="), "lt": _compare("<"), "le": _compare("<="),
    "gt": _compare(">"), "ge": _compare(">="), "safe_mul": _safe_mul, "select": _select,
    "convert_element_type": _convert, "bitcast_convert_type": _bitcast,
}


# ------------------------------------------------------------------ accumulators


def nan_key(acc: int) -> int:
    """The slot key of the NaN flag of float max/min accumulator `acc` (acc keys are >= 0).
    Such an accumulator runs `maxnum`/`minnum` (one instruction, a reduction LLVM
    vectorizes) and a flag ORs in every NaN it meets; reading it gives NaN when the flag
    is set, so it propagates NaN as `llvm.maximum` did (6 instructions per vector)."""
    return -1 - acc


def acc_slots(init: AccInit) -> list[tuple[int, ir.Type]]:
    """(key, type) of the slots accumulator `init.acc` needs (`nan_key`)."""
    slots = [(init.acc, reg_type(init.dtype))]
    if init.op in ("max", "min") and init.dtype.is_float:
        slots.append((nan_key(init.acc), I1))
    return slots


def acc_initial(init: AccInit) -> list[tuple[int, ir.Value]]:
    """(key, starting value) of each of `acc_slots(init)`."""
    return [(key, ir.Constant(I1, 0) if key < 0 else const(init.dtype,
                                                          identity(init.op, init.dtype)))
            for key, _ in acc_slots(init)]
