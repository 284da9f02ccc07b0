"""What a kernel expression's sign is known to be, from its form alone.

A renderer asks `nonpositive(e)` before it emits `exp(e)`: an argument that is never above
zero needs no overflow clamp and can scale its result in one step (`exp(-x * x)`,
`exp(-|x|)`). "Nonnegative" and "nonpositive" both admit NaN: a NaN argument only ever
yields a NaN, whichever form of the function runs.
"""
from __future__ import annotations

from fgrad.lower.kernel.ir import Const, Expr, Load, Op

_DEPTH = 8   # deeper forms are not worth the walk (and a shared DAG could make it long)
_ALWAYS_NONNEGATIVE = frozenset({"abs", "exp", "sqrt", "logistic"})


def _same(a: Expr, b: Expr) -> bool:
    """The same value: one node, or two loads of one buffer element."""
    if a is b:
        return True
    return (isinstance(a, Load) and isinstance(b, Load) and a.buf == b.buf
            and a.index == b.index)


def _negated(a: Expr, b: Expr) -> bool:
    """Whether a is -b (so a * b = -(b * b))."""
    return isinstance(a, Op) and a.op == "neg" and _same(a.args[0], b)


def _float_const(e: Expr) -> float | None:
    if isinstance(e, Const) and e.dtype.is_float:
        return float(e.value)
    return None


def nonnegative(e: Expr, depth: int = _DEPTH) -> bool:
    """Whether e is >= 0 (or NaN) for every input."""
    value = _float_const(e)
    if value is not None:
        return value >= 0
    if depth == 0 or not isinstance(e, Op) or not e.dtype.is_float:
        return False
    d, args = depth - 1, e.args
    if e.op in _ALWAYS_NONNEGATIVE:
        return True
    if e.op == "neg":
        return nonpositive(args[0], d)
    if e.op == "mul":
        return _same(*args) or _alike_signs(args, d)
    if e.op in ("add", "min"):
        return nonnegative(args[0], d) and nonnegative(args[1], d)
    if e.op == "max":
        return nonnegative(args[0], d) or nonnegative(args[1], d)
    if e.op == "select":
        return nonnegative(args[1], d) and nonnegative(args[2], d)
    return False


def nonpositive(e: Expr, depth: int = _DEPTH) -> bool:
    """Whether e is <= 0 (or NaN) for every input."""
    value = _float_const(e)
    if value is not None:
        return value <= 0
    if depth == 0 or not isinstance(e, Op) or not e.dtype.is_float:
        return False
    d, args = depth - 1, e.args
    if e.op == "neg":
        return nonnegative(args[0], d)
    if e.op == "mul":
        return (_negated(args[0], args[1]) or _negated(args[1], args[0])
                or (nonnegative(args[0], d) and nonpositive(args[1], d))
                or (nonpositive(args[0], d) and nonnegative(args[1], d)))
    if e.op in ("add", "max"):
        return nonpositive(args[0], d) and nonpositive(args[1], d)
    if e.op == "sub":
        return nonpositive(args[0], d) and nonnegative(args[1], d)
    if e.op == "min":
        return nonpositive(args[0], d) or nonpositive(args[1], d)
    if e.op == "select":
        return nonpositive(args[1], d) and nonpositive(args[2], d)
    return False


def _alike_signs(args: tuple[Expr, ...], depth: int) -> bool:
    return ((nonnegative(args[0], depth) and nonnegative(args[1], depth))
            or (nonpositive(args[0], depth) and nonpositive(args[1], depth)))
