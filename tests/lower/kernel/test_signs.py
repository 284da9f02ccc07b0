"""Signs known from an expression's form (fgrad/lower/kernel/signs.py), checked against the
values NumPy computes for the same forms at many inputs."""
import itertools

import numpy as np
import pytest

from fgrad.core.dtypes import dtypes
from fgrad.lower.kernel.index import Sym, ix_sym
from fgrad.lower.kernel.ir import AccRead, Const, Load, Op
from fgrad.lower.kernel.signs import max_shifted, nonnegative, nonpositive

F32 = dtypes.float32
I = Sym("i", 8)
X, X2, Y = Load(0, ix_sym(I), F32), Load(0, ix_sym(I), F32), Load(1, ix_sym(I), F32)


def op(name, *args):
    return Op(name, tuple(args), F32)


def const(v):
    return Const(v, F32)


NUMPY = {"neg": np.negative, "abs": np.abs, "exp": np.exp, "sqrt": np.sqrt,
         "logistic": lambda a: 1 / (1 + np.exp(-a)), "mul": np.multiply, "add": np.add,
         "sub": np.subtract, "max": np.maximum, "min": np.minimum,
         "select": lambda c, a, b: np.where(c > 0, a, b)}
SAMPLES = np.array([-np.inf, -3.0, -1.0, -0.0, 0.0, 0.5, 2.0, np.inf, np.nan])


def evaluate(e, x, y):
    if e is X or e is X2:
        return x
    if e is Y:
        return y
    if isinstance(e, Const):
        return np.full_like(x, e.value)
    return NUMPY[e.op](*(evaluate(a, x, y) for a in e.args))


FORMS = [
    op("neg", op("mul", X, X2)), op("mul", op("neg", X), X2), op("mul", X, op("neg", X)),
    op("neg", op("abs", X)), op("sub", op("neg", op("exp", Y)), op("abs", X)),
    op("mul", op("abs", X), op("neg", op("sqrt", Y))), op("min", X, const(-1.0)),
    op("max", op("neg", op("abs", X)), op("neg", op("logistic", Y))),
    op("select", X, op("neg", op("abs", Y)), const(0.0)),
    op("add", op("neg", op("mul", X, X)), op("neg", op("abs", Y))),
    op("mul", op("abs", X), op("abs", Y)),
    op("mul", op("neg", op("abs", X)), op("neg", op("exp", Y))),
]
UNKNOWN = [op("mul", X, Y), op("sub", X, Y), op("neg", X), op("add", X, op("abs", Y)),
           op("max", X, const(-1.0)), op("mul", op("neg", X), Y), const(2.0), X]


@pytest.mark.parametrize("form", FORMS + UNKNOWN, ids=range(len(FORMS + UNKNOWN)))
def test_a_claimed_sign_holds_at_every_input(form):
    xs, ys = zip(*itertools.product(SAMPLES, repeat=2))
    with np.errstate(invalid="ignore", over="ignore"):
        values = evaluate(form, np.array(xs), np.array(ys))
    values = values[~np.isnan(values)]
    if nonpositive(form):
        assert np.all(values <= 0)
    if nonnegative(form):
        assert np.all(values >= 0)


def test_the_forms_renderers_rely_on_are_recognized():
    assert all(nonpositive(f) for f in FORMS[:10])
    assert all(nonnegative(f) for f in (op("mul", X, X2), op("abs", X), FORMS[10]))
    assert nonnegative(FORMS[11]) and not nonnegative(op("mul", X, op("min", Y, X)))
    assert not any(nonpositive(f) or nonnegative(f) for f in UNKNOWN[:6])


def _softmax_shift(m, x=X, test_arg=None):
    """x - select(finite(m), m, 0), the finiteness test written as jax.nn.softmax's."""
    t = test_arg if test_arg is not None else m
    inf = Op("eq", (t, const(np.inf)), dtypes.bool)
    minus_inf = Op("eq", (t, const(-np.inf)), dtypes.bool)
    nan = Op("is_nan", (t,), dtypes.bool)
    bad = Op("or", (Op("or", (inf, minus_inf), dtypes.bool), nan), dtypes.bool)
    finite = Op("not", (bad,), dtypes.bool)
    return op("sub", x, op("select", finite, m, const(0.0))), finite


def test_a_softmax_shift_is_found_only_against_the_max_of_the_same_values():
    m = op("stop_gradient", AccRead(0, F32))
    shifted, finite = _softmax_shift(m)
    assert max_shifted(shifted, {0: X2}) is finite   # the max of the same loads
    assert max_shifted(shifted, {0: op("add", X, const(1.0))}) is None   # of other values
    assert max_shifted(shifted, {0: Y}) is None
    assert max_shifted(shifted, {1: X}) is None   # the accumulator is no max
    other, _ = _softmax_shift(m, x=op("add", X, Y))
    assert max_shifted(other, {0: op("add", X2, Y)}) is not None   # equal by form
    half, _ = _softmax_shift(m, test_arg=op("stop_gradient", AccRead(1, F32)))
    assert max_shifted(half, {0: X}) is None   # the test reads another accumulator
