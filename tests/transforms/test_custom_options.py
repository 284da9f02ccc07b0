"""Tests for custom_jvp.defjvps, nondiff_argnums on custom_jvp / custom_vjp, and the eager
Python `if` inside a custom_jvp function (JAX's API; references are closed forms)."""
import functools

import numpy as np
import pytest

import fgrad
from fgrad import Tensor

X = np.array([0.5, -1.5, 2.0], np.float32)


def test_defjvps_sums_per_argument_rules():
    @fgrad.custom_jvp
    def f(x, y):
        return x.sin() * y

    f.defjvps(lambda t, out, x, y: x.cos() * t * y * 10,    # deliberately not the true rule
              lambda t, out, x, y: x.sin() * t)
    x, y = Tensor(X), Tensor(X[::-1].copy())
    gx, gy = fgrad.grad(lambda a, b: f(a, b).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx.numpy(), 10 * np.cos(X) * X[::-1], rtol=1e-5)
    np.testing.assert_allclose(gy.numpy(), np.sin(X), rtol=1e-5)
    _, tan = fgrad.jvp(f, (x, y), (Tensor(np.ones(3, np.float32)),
                                   Tensor(np.zeros(3, np.float32))))
    np.testing.assert_allclose(tan.numpy(), 10 * np.cos(X) * X[::-1], rtol=1e-5)


def test_defjvps_none_means_no_dependence():
    @fgrad.custom_jvp
    def f(x, y):
        return x * 2 + y * 0

    f.defjvps(lambda t, out, x, y: t * 2, None)
    gy = fgrad.grad(lambda a, b: f(a, b).sum(), argnums=1)(Tensor(X), Tensor(X))
    np.testing.assert_array_equal(gy.numpy(), 0)


def test_custom_jvp_nondiff_argnums():
    @functools.partial(fgrad.custom_jvp, nondiff_argnums=(0,))
    def apply(fn, x):
        return fn(x)

    @apply.defjvp
    def apply_jvp(fn, primals, tangents):
        (x,), (t,) = primals, tangents
        return fn(x), t * 7.0          # a marker rule: derivative 7 everywhere

    g = fgrad.grad(lambda x: apply(lambda v: v * v, x).sum())(Tensor(X))
    np.testing.assert_allclose(g.numpy(), 7.0)
    out = fgrad.jit(lambda x: apply(lambda v: v + 1, x))(Tensor(X))
    np.testing.assert_allclose(out.numpy(), X + 1)


def test_custom_vjp_nondiff_argnums():
    @functools.partial(fgrad.custom_vjp, nondiff_argnums=(1,))
    def clip_grad(x, bound):
        return x * 1.0

    def fwd(x, bound):
        return x * 1.0, None

    def bwd(bound, res, g):
        return (g.clip(-bound, bound),)

    clip_grad.defvjp(fwd, bwd)
    g = fgrad.grad(lambda x: (clip_grad(x, 0.5) * Tensor([3.0, -0.1, -2.0])).sum())(Tensor(X))
    np.testing.assert_allclose(g.numpy(), [0.5, -0.1, -0.5])


def test_custom_jvp_python_if_runs_eagerly():
    @fgrad.custom_jvp
    def safe_log(x):
        if float(x.min()) <= 0:        # Python control flow on values
            return x.maximum(1e-6).log()
        return x.log()

    safe_log.defjvp(lambda p, t: (safe_log(p[0]), t[0] / p[0]))
    np.testing.assert_allclose(safe_log(Tensor(X)).numpy(),
                               np.log(np.maximum(X, 1e-6)), rtol=1e-6)
    np.testing.assert_allclose(safe_log(Tensor(np.abs(X))).numpy(), np.log(np.abs(X)),
                               rtol=1e-6)


def test_defjvps_wrong_count_is_reported():
    @fgrad.custom_jvp
    def f(x, y):
        return x * y

    f.defjvps(lambda t, out, x, y: t * y)
    with pytest.raises(TypeError, match="defjvps got 1 functions for 2"):
        fgrad.grad(lambda a: f(a, a).sum())(Tensor(X))


def test_custom_jvp_python_if_under_grad_and_jvp_with_concrete_primals():
    @fgrad.custom_jvp
    def clipped_log(x):
        if float(x.min()) <= 0:
            return x.maximum(1e-6).log()
        return x.log()

    clipped_log.defjvp(lambda p, t: (clipped_log(p[0]), t[0] / p[0].maximum(1e-6)))
    pos = np.abs(X) + 0.5
    g = fgrad.grad(lambda x: clipped_log(x).sum())(Tensor(pos))
    np.testing.assert_allclose(g.numpy(), 1 / pos, rtol=1e-6)
    _, tan = fgrad.jvp(clipped_log, (Tensor(pos),), (Tensor(np.ones(3, np.float32)),))
    np.testing.assert_allclose(tan.numpy(), 1 / pos, rtol=1e-6)
    with pytest.raises(fgrad.ConcretizationError):
        fgrad.jit(clipped_log)(Tensor(pos))      # abstract values: Python if cannot run
