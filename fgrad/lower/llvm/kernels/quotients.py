"""Products of tanh and logistic values with one division (an LSTM cell's sigmoid(o) *
tanh(c), W1's tanh(...) * sigmoid(x)).

In: a kernel expression and the renderer computing it. Out: its value when it is a
float32/float64 tanh or logistic (as numerator / denominator) or a product of two of them,
(n1 * n2) / (d1 * d2): one vector division instead of two, the slowest instruction of such
a loop (3 uops and ~10 cycles of the divider per 16 lanes). Both denominators lie in [1, 2],
so their product cannot overflow, and the numerators' product is within a factor 4 of the
result (it underflows only where the result is subnormal); a logistic's denominator 1 + e
enters the product as one FMA, d1 * e + d1. The parts are kept beside the renderer's values
(keys -6 id and below, scoped with them), so a value that is also used alone costs
one more division, not a second exp.
"""
from __future__ import annotations

from typing import Any

from llvmlite import ir

from fgrad.core.dtypes import dtypes
from fgrad.lower.kernel.ir import Expr, Op
from fgrad.lower.llvm.kernels import vmath
from fgrad.lower.llvm.kernels.ops import logistic_parts

QUOTIENT_OPS = ("tanh", "logistic")
PLAIN_FLOATS = (dtypes.float32, dtypes.float64)


def _is_quotient(e: Expr, dtype: Any) -> bool:
    return isinstance(e, Op) and e.op in QUOTIENT_OPS and e.dtype == dtype


def parts(renderer: Any, e: Op, table: bool = False
          ) -> tuple[ir.Value, ir.Value, ir.Value | None]:
    """(numerator, denominator, e^-|x| for a logistic or None) of tanh or logistic
    expression `e`, computed once per scope of `renderer` (render.py's `_Renderer`:
    `values`, `value`, `em`); a logistic's exp by table where `table` (products only:
    their tolerance is 6 ulp; a logistic alone stays within 3)."""
    key = -6 * id(e) - 3 * table
    if key not in renderer.values:
        x = renderer.value(e.args[0])
        if e.op == "tanh":
            found: tuple[Any, ...] = (*vmath.tanh_parts(renderer.em, x), None)
        else:
            found = logistic_parts(renderer.em, x, table)
        for i, value in enumerate(found):
            renderer.values[key - i] = value
    return renderer.values[key], renderer.values[key - 1], renderer.values[key - 2]


def quotient_value(renderer: Any, e: Op) -> ir.Value | None:
    """The value of `e` when it is a quotient or a product of two (module docstring), else
    None (the renderer computes it as usual)."""
    if e.dtype not in PLAIN_FLOATS:
        return None
    b = renderer.b
    if e.op in QUOTIENT_OPS:
        numerator, denominator, _ = parts(renderer, e)
        return b.fdiv(numerator, denominator)
    factors = [a for a in e.args if isinstance(a, Op) and _is_quotient(a, e.dtype)]
    if e.op == "mul" and len(factors) == 2:
        (n1, d1, _), (n2, d2, e2) = sorted((parts(renderer, a, True) for a in factors),
                                           key=lambda p: p[2] is not None)
        # a logistic's 1 + e times d1 is one FMA, d1 * e + d1, rounded once
        denominator = (b.fmul(d1, d2) if e2 is None
                       else renderer.em.intrinsic("llvm.fmuladd", [d1, e2, d1]))
        return b.fdiv(b.fmul(n1, n2), denominator)
    return None
