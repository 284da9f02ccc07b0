"""The OpenCL C rendering of every elementwise primitive: one table entry per primitive.

In: C expressions of the operands (temporaries, so repeating one is free) in register
types (bool is `bool`, float16 is computed in `float`). Out: one C expression with the
exact semantics of the primitive's NumPy impl, as llvm/kernels/ops.py documents them: integer
division and remainder never trap (x / 0 == 0, x % 0 == 0, INT_MIN / -1 wraps), signed
arithmetic wraps (it runs in unsigned types), shifts by out-of-range amounts give 0 (or
the sign fill), float->int casts saturate with NaN -> 0, and every float16 result is
rounded to half precision after each op (`fg_rh`), as NumPy rounds.

Helper functions (`fg_rh`, `fg_ipow_int`, ...) are defined by `helpers_for(source)` for
exactly the ones a kernel's source calls. Transcendentals are OpenCL builtins.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from fgrad.core.dtypes import DType, dtypes

_INT_NAMES = {(1, True): "char", (2, True): "short", (4, True): "int", (8, True): "long",
              (1, False): "uchar", (2, False): "ushort", (4, False): "uint",
              (8, False): "ulong"}


def reg_type(dtype: DType) -> str:
    """The C type a value is computed in (bool -> bool, float16 -> float)."""
    if dtype == dtypes.bool:
        return "bool"
    if dtype.is_float:
        return "double" if dtype.itemsize == 8 else "float"
    return _INT_NAMES[(dtype.itemsize, not dtype.is_unsigned)]


def mem_type(dtype: DType) -> str:
    """The C element type of a buffer (bool -> uchar, float16 -> half, bfloat16 -> ushort:
    the upper half of a float's bits)."""
    if dtype == dtypes.bool:
        return "uchar"
    if dtype == dtypes.float16:
        return "half"
    if dtype == dtypes.bfloat16:
        return "ushort"
    return reg_type(dtype)


def rounded(dtype: DType, text: str) -> str:
    """The expression `text` (a float) rounded to `dtype` when that is float16/bfloat16."""
    if dtype == dtypes.float16:
        return f"fg_rh({text})"
    return f"fg_rb({text})" if dtype == dtypes.bfloat16 else text


def _wrap_type(dtype: DType) -> str:
    """The unsigned type signed arithmetic wraps in (no overflow UB, no int promotion)."""
    return "ulong" if dtype.itemsize == 8 else "uint"


def const(dtype: DType, value: Any) -> str:
    """A C literal of `value` in the register type of `dtype`."""
    if dtype == dtypes.bool:
        return "true" if value else "false"
    if dtype.is_float:
        return _float_literal(float(value), dtype.itemsize == 8)
    bits = 8 * dtype.itemsize
    v = int(value) % (1 << bits)
    if not dtype.is_unsigned and v >= 1 << (bits - 1):
        v -= 1 << bits
    if -(2 ** 31) < v < 2 ** 31:
        return f"(({reg_type(dtype)}){v})"
    return f"(({reg_type(dtype)})0x{v % (1 << bits):x}UL)"


def _float_literal(x: float, double: bool) -> str:
    if math.isnan(x):
        text = "NAN"
    elif math.isinf(x):
        text = "INFINITY" if x > 0 else "-INFINITY"
    else:
        text = repr(x) + ("" if double else "f")
    return f"((double){text})" if double and not math.isfinite(x) else \
        (f"({text})" if text.startswith("-") else text)


def index_cast(dtype: DType, index: str) -> str:
    """An index (an integer expression) as a value of `dtype` (iota)."""
    if dtype == dtypes.bool:
        return f"({index} != 0)"
    return f"(({reg_type(dtype)}){index})"


# ---------------------------------------------------------------------------- rules

Rule = Callable[[list[str], DType, DType], str]


def _call(name: str) -> Rule:
    return lambda a, dt, od: f"{name}({', '.join(a)})"


def _neg(a: list[str], dt: DType, od: DType) -> str:
    if dt.is_float:
        return f"(-{a[0]})"
    return f"(({reg_type(dt)})(0 - ({_wrap_type(dt)}){a[0]}))"


def _abs(a: list[str], dt: DType, od: DType) -> str:
    if dt.is_float:
        return f"fabs({a[0]})"
    return a[0] if dt.is_unsigned else f"(({reg_type(dt)})abs({a[0]}))"


def _sign(a: list[str], dt: DType, od: DType) -> str:
    x, t = a[0], reg_type(dt)
    if dt.is_float:
        return f"({x} > 0 ? ({t})1 : ({x} < 0 ? ({t})-1 : {x}))"
    if dt.is_unsigned:
        return f"(({t})({x} != 0))"
    return f"(({t})(({x} > 0) - ({x} < 0)))"


def _logistic(a: list[str], dt: DType, od: DType) -> str:
    """1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below (one exp): no overflow, no
    cancellation."""
    x, one = a[0], "1.0" if dt == dtypes.float64 else "1.0f"
    e = f"exp(-fabs({x}))"
    return f"(({x} >= 0 ? {one} : {e}) / ({one} + {e}))"


def _tanh(a: list[str], dt: DType, od: DType) -> str:
    """The builtin, but exactly +-1 where the correctly rounded result is (the builtin may
    stop an ulp short there, which 1 + tanh(x) turns into a visible error)."""
    x = a[0]
    if dt == dtypes.float64:
        return f"(fabs({x}) > 19.1 ? copysign(1.0, {x}) : tanh({x}))"
    return f"(fabs({x}) > 9.011f ? copysign(1.0f, {x}) : tanh({x}))"


def _rsqrt(a: list[str], dt: DType, od: DType) -> str:
    """1 / sqrt(x), rounding in between for float16/bfloat16 as the NumPy impl does."""
    root = rounded(od, f"sqrt({a[0]})")
    return f"({'1.0' if dt == dtypes.float64 else '1.0f'} / {root})"


def _wrapping(op: str) -> Rule:
    def rule(a: list[str], dt: DType, od: DType) -> str:
        if dt.is_float:
            return f"({a[0]} {op} {a[1]})"
        if dt == dtypes.bool:
            return f"({a[0]} && {a[1]})"
        w = _wrap_type(dt)
        return f"(({reg_type(dt)})(({w}){a[0]} {op} ({w}){a[1]}))"
    return rule


def _div(a: list[str], dt: DType, od: DType) -> str:
    x, y, t = a[0], a[1], reg_type(dt)
    if dt.is_float:
        return f"({x} / {y})"
    if dt.is_unsigned:
        return f"({y} == 0 ? ({t})0 : ({t})({x} / {y}))"
    negated = f"({t})(0 - ({_wrap_type(dt)}){x})"
    return f"({y} == 0 ? ({t})0 : ({y} == -1 ? {negated} : ({t})({x} / {y})))"


def _rem(a: list[str], dt: DType, od: DType) -> str:
    x, y, t = a[0], a[1], reg_type(dt)
    if dt.is_float:
        return f"fmod({x}, {y})"
    bad = f"{y} == 0" if dt.is_unsigned else f"({y} == 0 || {y} == -1)"
    return f"({bad} ? ({t})0 : ({t})({x} % {y}))"


def _pow(a: list[str], dt: DType, od: DType) -> str:
    return f"pow({a[0]}, {a[1]})" if dt.is_float else f"fg_ipow_{reg_type(dt)}({a[0]}, {a[1]})"


def _extremum(which: str) -> Rule:
    def rule(a: list[str], dt: DType, od: DType) -> str:
        x, y = a
        if dt == dtypes.bool:
            return f"({x} {'||' if which == 'max' else '&&'} {y})"
        if dt.is_float:  # NaN wins, as in np.maximum
            return f"(isnan({x}) ? {x} : (isnan({y}) ? {y} : f{which}({x}, {y})))"
        return f"{which}({x}, {y})"
    return rule


def _bitwise(op: str, bool_op: str) -> Rule:
    def rule(a: list[str], dt: DType, od: DType) -> str:
        if dt == dtypes.bool:
            return f"({a[0]} {bool_op} {a[1]})"
        return f"(({reg_type(dt)})({a[0]} {op} {a[1]}))"
    return rule


def _not(a: list[str], dt: DType, od: DType) -> str:
    return f"(!{a[0]})" if dt == dtypes.bool else f"(({reg_type(dt)})~{a[0]})"


def _shift(left: bool) -> Rule:
    def rule(a: list[str], dt: DType, od: DType) -> str:
        x, y, t = a[0], a[1], reg_type(dt)
        ok = f"(ulong){y} < {8 * dt.itemsize}"
        if left:
            return f"({ok} ? ({t})(({_wrap_type(dt)}){x} << {y}) : ({t})0)"
        fill = f"({t})0" if dt.is_unsigned else f"({x} < 0 ? ({t})-1 : ({t})0)"
        return f"({ok} ? ({t})({x} >> {y}) : {fill})"
    return rule


def _compare(op: str) -> Rule:
    return lambda a, dt, od: f"({a[0]} {op} {a[1]})"


def _safe_mul(a: list[str], dt: DType, od: DType) -> str:
    t = reg_type(dt)
    return f"({a[0]} == 0 ? ({t})0 : {a[0]} * {a[1]})"


def convert(x: str, src: DType, dst: DType) -> str:
    """Cast a register value from `src` to `dst` with NumPy's semantics."""
    to = reg_type(dst)
    if dst == dtypes.float16 and src == dtypes.float64:
        return f"fg_odd({x})"   # rounded once more to float16 by render_op (llvm/kernels/ops.py)
    if dst == dtypes.bool:
        return x if src == dtypes.bool else f"({x} != 0)"
    if src.is_float and not dst.is_float:
        # the spec's NaN -> 0 written out: some drivers (pocl 3.0) give INT_MIN
        return f"(isnan({x}) ? ({to})0 : convert_{to}_sat({x}))"
    return x if to == reg_type(src) and src != dtypes.bool else f"(({to}){x})"


OPS: dict[str, Rule] = {
    "neg": _neg, "exp": _call("exp"), "log": _call("log"), "sin": _call("sin"),
    "cos": _call("cos"), "tan": _call("tan"), "tanh": _tanh, "logistic": _logistic,
    "sqrt": _call("sqrt"), "rsqrt": _rsqrt, "log1p": _call("log1p"), "expm1": _call("expm1"),
    "erf": _call("erf"), "abs": _abs, "sign": _sign, "floor": _call("floor"),
    "ceil": _call("ceil"), "round": _call("rint"), "not": _not,
    "is_nan": lambda a, dt, od: f"(isnan({a[0]}) != 0)",
    "stop_gradient": lambda a, dt, od: a[0],
    "add": _wrapping("+"), "sub": _wrapping("-"), "mul": _wrapping("*"), "div": _div,
    "rem": _rem, "pow": _pow, "max": _extremum("max"), "min": _extremum("min"),
    "atan2": _call("atan2"), "and": _bitwise("&", "&&"), "or": _bitwise("|", "||"),
    "xor": _bitwise("^", "!="), "shift_left": _shift(True), "shift_right": _shift(False),
    "eq": _compare("=="), "ne": _compare("!="), "lt": _compare("<"), "le": _compare("<="),
    "gt": _compare(">"), "ge": _compare(">="), "safe_mul": _safe_mul,
    "select": lambda a, dt, od: f"({a[0]} ? {a[1]} : {a[2]})",
    "convert_element_type": lambda a, dt, od: convert(a[0], dt, od),
    "bitcast_convert_type": lambda a, dt, od: f"as_{reg_type(od)}({a[0]})",
}


def render_op(op: str, args: list[str], arg_dtype: DType, dtype: DType) -> str:
    """The expression of primitive `op`; float16/bfloat16 results are rounded."""
    rule = OPS.get(op)
    if rule is None:
        raise NotImplementedError(f"opencl backend: no lowering for primitive '{op}'")
    return rounded(dtype, rule(args, arg_dtype, dtype))


# ---------------------------------------------------------------------------- helpers

_ROUND_HALF = """\
static float fg_rh(float x) {
  ushort h;
  vstore_half_rte(x, 0, (__private half*)&h);
  return vload_half(0, (__private half*)&h);
}"""

# bfloat16: the float's bits rounded to nearest even at bit 16; a NaN becomes the quiet NaN
# of its sign (as ml_dtypes converts). fg_bb gives the 16 stored bits.
_ROUND_BFLOAT = """\
static uint fg_bf_bits(float x) {
  uint u = as_uint(x);
  if (isnan(x)) return (u & 0x80000000u) | 0x7fc00000u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
}
static float fg_rb(float x) { return as_float(fg_bf_bits(x)); }
static ushort fg_bb(float x) { return (ushort)(fg_bf_bits(x) >> 16); }
static float fg_bl(ushort h) { return as_float((uint)h << 16); }"""


# A double as a float rounded to odd (toward zero, lowest bit set when inexact): rounding
# it again to float16 rounds the double once, as NumPy does (see `convert`).
_ROUND_ODD = """\
static float fg_odd(double x) {
  if (isnan(x)) return (float)x;
  const float z = convert_float_rtz(x);
  return (double)z == x ? z : as_float(as_uint(z) | 1u);
}"""


def _int_pow_helper(t: str) -> str:
    """x ** y by square-and-multiply (wrapping); y < 0 as NumPy: 1, -1 or 0."""
    signed = not t.startswith("u")
    w = "ulong" if t in ("long", "ulong") else "uint"
    neg = ("  if (y < 0) return x == 1 ? 1 : (x == -1 ? ((y & 1) ? -1 : 1) : 0);\n"
           if signed else "")
    return (f"static {t} fg_ipow_{t}({t} x, {t} y) {{\n{neg}"
            f"  {w} r = 1, b = ({w})x;\n"
            f"  for ({w} e = ({w})y; e != 0; e >>= 1) {{\n"
            f"    if (e & 1) r *= b;\n    b *= b;\n  }}\n"
            f"  return ({t})r;\n}}")


def helpers_for(source: str) -> str:
    """Definitions of the `fg_*` helper functions that `source` calls."""
    parts = [_ROUND_HALF] if "fg_rh(" in source else []
    if any(f"{name}(" in source for name in ("fg_rb", "fg_bb", "fg_bl")):
        parts.append(_ROUND_BFLOAT)
    if "fg_odd(" in source:
        parts.append(_ROUND_ODD)
    for t in sorted(set(re.findall(r"fg_ipow_(\w+)\(", source))):
        parts.append(_int_pow_helper(t))
    return "\n".join(parts)

