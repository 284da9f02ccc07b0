"""Control flow under jit on every backend: scan, while, fori_loop and cond run their
bodies as compiled programs (no NumPy host step), and on llvm a scan or while loop is one
native driver call. Checked against plain NumPy loops."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, lax
from fgrad.lower.llvm import loops as llvm_loops
from fgrad.lower.llvm import runtime as llvm_runtime

pytestmark = pytest.mark.backends

RNG = np.random.default_rng(7)


def f32(a: Any) -> Tensor:
    return Tensor(np.asarray(a, np.float32))


def rnn(h: Tensor, xs: Tensor, w: Tensor, reverse: bool = False) -> Any:
    def body(c: Tensor, x: Tensor) -> Any:
        c = (c @ w + x).tanh()
        return c, (c.sum(), c * 2.0)
    return lax.scan(body, h, xs, reverse=reverse)


def rnn_numpy(h: np.ndarray, xs: np.ndarray, w: np.ndarray, reverse: bool = False) -> Any:
    sums, doubled = [None] * len(xs), [None] * len(xs)
    order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    for i in order:
        h = np.tanh(h @ w + xs[i])
        sums[i], doubled[i] = h.sum(), h * 2
    return h, np.array(sums, np.float32).reshape(len(xs)), np.array(doubled).reshape(
        (len(xs),) + h.shape)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("length", [0, 1, 2, 5, 64])
def test_scan_matches_numpy_loop(jit_backend: str, length: int, reverse: bool) -> None:
    h = RNG.normal(size=8).astype(np.float32)
    w = (RNG.normal(size=(8, 8)) * 0.25).astype(np.float32)  # contractive: errors do not grow
    xs = RNG.normal(size=(length, 8)).astype(np.float32)
    final, (sums, doubled) = fgrad.jit(rnn, static_argnums=3)(f32(h), f32(xs), f32(w),
                                                                reverse)
    want = rnn_numpy(h, xs, w, reverse)
    for got, ref in zip((final, sums, doubled), want, strict=True):
        np.testing.assert_allclose(np.asarray(got.numpy()), ref, rtol=2e-5, atol=2e-5)


def newton_sqrt(a: Tensor) -> Any:
    def cond(c: Any) -> Any:
        x, n = c
        return ((x * x - a).abs() > 1e-5 * a).any() & (n < 100)

    def body(c: Any) -> Any:
        x, n = c
        return (x + a / x) * 0.5, n + 1
    return lax.while_loop(cond, body, (a, Tensor(0, dtype=fgrad.dtypes.int32)))


def test_while_matches_numpy(jit_backend: str) -> None:
    a = RNG.uniform(1, 100, size=16).astype(np.float32)
    x, n = fgrad.jit(newton_sqrt)(f32(a))
    np.testing.assert_allclose(np.asarray(x.numpy()), np.sqrt(a), rtol=1e-5)
    assert 3 <= int(n.numpy()) < 100


def test_while_zero_iterations_returns_init(jit_backend: str) -> None:
    out = fgrad.jit(lambda x: lax.while_loop(lambda v: v.sum() < 0, lambda v: v * 2, x))(
        f32([1.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(out.numpy()), [1.0, 2.0])


def test_fori_loop_with_traced_bounds(jit_backend: str) -> None:
    def power(x: Tensor, n: Tensor) -> Tensor:
        return lax.fori_loop(0, n, lambda i, v: v * x + i.cast(fgrad.dtypes.float32), x)
    x = np.float32(1.01)
    want = x
    for i in range(37):
        want = want * x + np.float32(i)
    got = fgrad.jit(power)(f32(x), Tensor(37, dtype=fgrad.dtypes.int32))
    np.testing.assert_allclose(float(got.numpy()), want, rtol=1e-5)


@pytest.mark.parametrize("branch", [0, 1, 2, 7, -3])
def test_switch_runs_the_chosen_branch(jit_backend: str, branch: int) -> None:
    fns = [lambda v: v.exp(), lambda v: v * 3.0, lambda v: v @ v.T]
    x = RNG.normal(size=(4, 4)).astype(np.float32)
    got = fgrad.jit(lambda i, v: lax.switch(i, fns, v))(Tensor(branch, dtype="int32"), f32(x))
    want = [np.exp(x), x * 3, x @ x.T][min(max(branch, 0), 2)]
    np.testing.assert_allclose(np.asarray(got.numpy()), want, rtol=1e-5, atol=1e-5)


def test_grad_through_scan_under_jit(jit_backend: str) -> None:
    h, w = RNG.normal(size=4).astype(np.float32), RNG.normal(size=(4, 4)).astype(np.float32)
    xs = RNG.normal(size=(6, 4)).astype(np.float32)

    def loss(w: Tensor) -> Tensor:
        return rnn(f32(h), f32(xs), w)[0].square().sum()
    got = np.asarray(fgrad.jit(fgrad.grad(loss))(f32(w)).numpy(), np.float64)
    eps, num = 1e-3, np.zeros_like(w, np.float64)
    for idx in np.ndindex(*w.shape):
        wp, wm = w.astype(np.float64), w.astype(np.float64)
        wp[idx] += eps
        wm[idx] -= eps
        num[idx] = (rnn_numpy(h, xs, wp)[0] ** 2).sum() - (rnn_numpy(h, xs, wm)[0] ** 2).sum()
    np.testing.assert_allclose(got, num / (2 * eps), rtol=2e-2, atol=2e-3)


# ---------------------------------------------------------------------------- llvm specifics


def _control_eqns(fn: Any, *args: Any) -> list[Any]:
    jaxpr = fgrad.make_jaxpr(fn)(*args).jaxpr
    return [e for e in jaxpr.eqns if e.primitive.name in ("scan", "while")]


@pytest.mark.parametrize("case", ["scan", "while", "fori"])
def test_llvm_loops_are_one_native_call(case: str) -> None:
    h, w = f32(np.zeros(8)), f32(np.eye(8) * 0.5)
    cases = {
        "scan": (lambda h, xs, w: rnn(h, xs, w), (h, f32(np.ones((5, 8))), w)),
        "while": (newton_sqrt, (f32([4.0, 9.0]),)),
        "fori": (lambda x, n: lax.fori_loop(0, n, lambda i, v: v * 2.0, x),
                 (f32([1.0]), Tensor(3, dtype="int32"))),
    }
    fn, args = cases[case]
    (eqn,) = _control_eqns(fn, *args)
    assert llvm_loops.native_loop(eqn) is not None
    program = llvm_runtime.plan(fgrad.make_jaxpr(fn)(*args).jaxpr)
    assert program.schedule.hosts() == [] and len(program.schedule.controls()) == 1


def test_llvm_nested_loops_drive_the_outer_loop_from_the_host() -> None:
    def inner(c: Tensor, x: Tensor) -> Any:
        return lax.scan(lambda a, b: (a * 0.5 + b, a.sum()), c, x)
    fn = lambda c, xs: lax.scan(inner, c, xs)
    c, xs = f32(np.ones(3)), f32(RNG.normal(size=(4, 5, 3)))
    (outer,) = _control_eqns(fn, c, xs)
    assert llvm_loops.native_loop(outer) is None  # its body holds a loop: host-driven
    got = fgrad.jit(fn, backend="llvm")(c, xs)
    carry, want_sums = np.ones(3, np.float32), np.zeros((4, 5), np.float32)
    for i in range(4):
        for j in range(5):
            want_sums[i, j] = carry.sum()
            carry = carry * 0.5 + xs.numpy()[i, j]
    np.testing.assert_allclose(got[0].numpy(), carry, rtol=1e-5)
    np.testing.assert_allclose(got[1].numpy(), want_sums, rtol=1e-5)


def test_outputs_written_adds_copies_for_passthrough_outputs() -> None:
    jaxpr = fgrad.make_jaxpr(lambda a, b: (a, b * 2.0, b * 2.0))(f32(1.0), f32(2.0)).jaxpr
    fixed = llvm_loops.outputs_written(jaxpr)
    produced = {id(v) for e in fixed.eqns for v in e.outvars}
    assert all(id(v) in produced for v in fixed.outvars)
    assert len({id(v) for v in fixed.outvars}) == 3
    assert llvm_loops.outputs_written(jaxpr) is fixed
