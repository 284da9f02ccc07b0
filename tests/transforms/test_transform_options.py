"""Tests for transform options from JAX's API: jacfwd/jacrev(has_aux=), vjp_fn on Python
scalars, lax.stop_gradient on scalars and pytrees, eval_shape. References are closed forms
written with NumPy."""
import numpy as np
import pytest

import fgrad
from fgrad import Tensor, lax

X = np.array([0.3, -1.2, 2.0], np.float32)


def _f(x):
    return (x * x).sin(), {"total": x.sum(), "n": 3}


@pytest.mark.parametrize("jac", [fgrad.jacfwd, fgrad.jacrev])
def test_jacobian_has_aux(jac):
    j, aux = jac(_f, has_aux=True)(Tensor(X))
    np.testing.assert_allclose(j.numpy(), np.diag(2 * X * np.cos(X * X)), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(aux["total"].numpy(), X.sum(), rtol=1e-6)
    assert aux["n"] == 3
    with pytest.raises(TypeError, match="has_aux=True"):
        jac(lambda x: x.sin(), has_aux=True)(Tensor(X))


def test_jacobian_has_aux_under_jit():
    j, aux = fgrad.jit(fgrad.jacfwd(lambda x: (x.exp(), x.max()), has_aux=True))(Tensor(X))
    np.testing.assert_allclose(j.numpy(), np.diag(np.exp(X)), rtol=1e-5)
    np.testing.assert_allclose(aux.numpy(), X.max())


def test_vjp_fn_accepts_python_scalar_cotangent():
    _, vjp_fn = fgrad.vjp(lambda x: (x * x).sum(), Tensor(X))
    (g,) = vjp_fn(1.0)
    np.testing.assert_allclose(g.numpy(), 2 * X, rtol=1e-6)
    (g,) = vjp_fn(0.5)
    np.testing.assert_allclose(g.numpy(), X, rtol=1e-6)


def test_lax_stop_gradient_on_scalars_and_pytrees():
    assert lax.stop_gradient(3.0) == 3.0
    tree = lax.stop_gradient({"a": Tensor(X), "b": 2})
    assert tree["b"] == 2
    np.testing.assert_array_equal(tree["a"].numpy(), X)

    def f(x):
        held = lax.stop_gradient({"x": x, "k": 2.0})
        return (x * held["x"] * held["k"]).sum()

    np.testing.assert_allclose(fgrad.grad(f)(Tensor(X)).numpy(), 2 * X, rtol=1e-6)
