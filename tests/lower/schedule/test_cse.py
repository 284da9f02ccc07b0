"""Common-subexpression elimination before scheduling (schedule/cse.py): repeated equations
are computed once, anything that differs (inputs, parameters, literal bits) or has effects
is kept, and results match NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.core.ir import Jaxpr
from fgrad.lower.llvm.runtime import plan
from fgrad.lower.schedule.cse import cse
from fgrad.transforms.jit_prim import open_jaxpr

pytestmark = pytest.mark.backends
RNG = np.random.default_rng(3)


def _jaxpr(fn, *arrays):
    return open_jaxpr(fgrad.make_jaxpr(fn)(*[Tensor(a) for a in arrays]))[0]


def test_a_repeated_matmul_is_computed_once(jit_backend: str) -> None:
    x, w = RNG.standard_normal((64, 32)).astype(np.float32), \
        RNG.standard_normal((32, 48)).astype(np.float32)
    b = RNG.standard_normal(48).astype(np.float32)

    def f(x, w, b):
        return x @ w, x @ w + b
    program = plan(_jaxpr(f, x, w, b))
    assert len(program.library_calls) == 1
    y, z = fgrad.jit(f)(Tensor(x), Tensor(w), Tensor(b))
    want = x.astype(np.float64) @ w
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(z.numpy(), want + b, rtol=1e-5, atol=1e-5)


def test_only_equal_equations_merge() -> None:
    x = RNG.standard_normal((5, 6)).astype(np.float32)
    jaxpr = _jaxpr(lambda t: (t + 1.0, t + 1.0, t + 2.0, t.sum(0), t.sum(1), t.sum(0)), x)
    merged = cse(jaxpr)
    assert [e.primitive.name for e in merged.eqns].count("add") == 2
    assert [e.primitive.name for e in merged.eqns].count("reduce_sum") == 2
    assert merged.outvars[0] is merged.outvars[1] and merged.outvars[3] is merged.outvars[5]
    assert merged.outvars[3] is not merged.outvars[4]


def test_parameters_compare_by_bits_and_nothing_repeated_keeps_the_jaxpr() -> None:
    x = RNG.standard_normal(4).astype(np.float32)
    jaxpr = _jaxpr(lambda t: (t.pad(((1, 1),), value=0.0), t.pad(((1, 1),), value=-0.0)), x)
    assert cse(jaxpr) is jaxpr
    out = fgrad.jit(lambda t: t.pad(((1, 1),), value=-0.0))(Tensor(x)).numpy()
    assert np.signbit(out[0]) and np.signbit(out[-1])


def test_effects_are_never_merged(jit_backend: str) -> None:
    seen: list[float] = []

    def record(v):
        seen.append(float(v))

    def f(t):
        fgrad.debug.callback(record, t.sum())  # twice the same equation: it runs twice
        fgrad.debug.callback(record, t.sum())
        return t * 2
    fgrad.jit(f)(Tensor(np.ones(3, np.float32)))
    assert seen == [3.0, 3.0]


def test_an_effectful_equation_repeated_verbatim_stays_twice() -> None:
    def f(t):
        fgrad.debug.callback(print, t.sum())
        return t * 2
    jaxpr = _jaxpr(f, np.ones(3, np.float32))
    callback = next(e for e in jaxpr.eqns if e.primitive.name == "debug_callback")
    twice = Jaxpr(jaxpr.constvars, jaxpr.invars, [*jaxpr.eqns, callback], jaxpr.outvars)
    names = [e.primitive.name for e in cse(twice).eqns]
    assert names.count("debug_callback") == 2


def test_the_schedule_names_values_as_the_printed_jaxpr_does() -> None:
    x = RNG.standard_normal((4, 5)).astype(np.float32)

    def f(x):
        a = x * 2.0
        b = x * 2.0          # dropped by CSE: later values must keep their printed names
        return a + 1.0, (b * 3.0).exp()
    text = fgrad.jit(f, backend="llvm").lower(Tensor(x)).as_text()
    printed_outs = text.split("\n  in (")[1].split(")")[0].split(", ")
    kernel_lines = [ln for ln in text.splitlines() if ln.lstrip().startswith("k") and "->" in ln]
    scheduled_outs = [n for ln in kernel_lines
                      for n in ln.split("-> (")[1].split(")")[0].split()]
    assert sorted(scheduled_outs) == sorted(printed_outs)
