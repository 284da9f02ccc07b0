"""What a kernel expression's sign is known to be, from its form alone.

A renderer asks `nonpositive(e)` before it emits `exp(e)`: an argument that is never above
zero needs no overflow clamp and can scale its result in one step (`exp(-x * x)`,
`exp(-|x|)`). "Nonnegative" and "nonpositive" both admit NaN: a NaN argument only ever
yields a NaN, whichever form of the function runs. `max_shifted(e)` finds a softmax's
shift, x - (m if m is finite else 0) with m the maximum of x over the row: nonpositive
whenever m is finite, which the renderer tests once per row (`render.py`).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

from fgrad.lower.kernel.ir import (AccRead, AccUpdate, Const, Expr, Load, Loop, Op, Stmt,
                                   accumulators_written, expr_nodes)

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


def _equal(a: Expr, b: Expr, depth: int = _DEPTH) -> bool:
    """The same value by form: `_same`, or one op over arguments that are `_equal`."""
    if _same(a, b):
        return True
    if depth == 0:
        return False
    if isinstance(a, Const) and isinstance(b, Const):
        return a.dtype == b.dtype and a.value == b.value
    if isinstance(a, AccRead) and isinstance(b, AccRead):
        return a.acc == b.acc
    return (isinstance(a, Op) and isinstance(b, Op) and a.op == b.op and a.dtype == b.dtype
            and len(a.args) == len(b.args)
            and all(_equal(x, y, depth - 1) for x, y in zip(a.args, b.args)))


def _accumulator(m: Expr) -> int | None:
    """The accumulator m reads (directly or through stop_gradient), else None."""
    if isinstance(m, Op) and m.op == "stop_gradient":
        m = m.args[0]
    return m.acc if isinstance(m, AccRead) else None


def _disjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Op) and e.op == "or":
        return _disjuncts(e.args[0]) + _disjuncts(e.args[1])
    return [e]


def _tests_finite(test: Expr, m: Expr) -> bool:
    """Whether `test` is not(m == inf or m == -inf or is_nan(m)), in any order."""
    if not (isinstance(test, Op) and test.op == "not"):
        return False
    found = set()
    for d in _disjuncts(test.args[0]):
        if isinstance(d, Op) and d.op == "is_nan" and _equal(d.args[0], m):
            found.add("nan")
        elif isinstance(d, Op) and d.op == "eq" and _equal(d.args[0], m):
            value = _float_const(d.args[1])
            if value is not None and abs(value) == float("inf"):
                found.add("+inf" if value > 0 else "-inf")
            else:
                return False
        else:
            return False
    return found == {"nan", "+inf", "-inf"}


def max_shifted(e: Expr, maxima: Mapping[int, Expr]) -> Expr | None:
    """For e = x - select(finite(m), m, 0) where m reads an accumulator whose max reduction
    took x itself (`maxima`: accumulator -> the value it takes the max of): the test
    finite(m), under which e <= 0 (or NaN: x NaN) since x <= m; otherwise None."""
    if not (isinstance(e, Op) and e.op == "sub" and e.dtype.is_float):
        return None
    x, shift = e.args
    if not (isinstance(shift, Op) and shift.op == "select" and _float_const(shift.args[2]) == 0):
        return None
    test, m = shift.args[0], shift.args[1]
    acc = _accumulator(m)
    if acc is None or acc not in maxima or not _equal(maxima[acc], x):
        return None
    return test if _tests_finite(test, m) else None


def max_reductions(stmts: Sequence[Stmt]) -> dict[int, Expr]:
    """accumulator -> the value its max reduction takes, for accumulators updated once (by
    a max) in `stmts`."""
    updates: dict[int, list[AccUpdate]] = {}

    def walk(body: Sequence[Stmt]) -> None:
        for s in body:
            if isinstance(s, Loop):
                walk(s.body)
            elif isinstance(s, AccUpdate):
                updates.setdefault(s.acc, []).append(s)
    walk(stmts)
    return {acc: found[0].value for acc, found in updates.items()
            if len(found) == 1 and found[0].op == "max"}


def shift_test(loop: Loop, maxima: Mapping[int, Expr], assumed: Set[int]) -> Expr | None:
    """The finiteness test (`max_shifted`) of an exp in `loop`'s own statements (not its
    inner loops'), when its accumulator is final before the loop (nothing in the loop
    writes it) and the test is not already `assumed` (ids); None without one."""
    if not maxima:
        return None
    written = accumulators_written(loop.body)
    for e in expr_nodes([s for s in loop.body if not isinstance(s, Loop)]):
        if isinstance(e, Op) and e.op == "exp":
            test = max_shifted(e.args[0], maxima)
            if test is None or id(test) in assumed:
                continue
            if not _read_accumulators(test) & written:
                return test
    return None


def _read_accumulators(e: Expr, depth: int = _DEPTH) -> set[int]:
    if isinstance(e, AccRead):
        return {e.acc}
    if not isinstance(e, Op) or depth == 0:
        return set()
    return set().union(*(_read_accumulators(a, depth - 1) for a in e.args))
