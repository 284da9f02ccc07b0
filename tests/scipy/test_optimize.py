"""fgrad.scipy.optimize.minimize (BFGS) against SciPy's minimizer and closed forms."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize as so

import fgrad
from fgrad import Tensor
from fgrad.scipy.optimize import minimize


def rosen(x: Tensor) -> Tensor:
    return (100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def _start(n: int) -> np.ndarray:
    x0 = np.full(n, -1.2)
    x0[1::2] = 1.0
    return x0


@pytest.mark.parametrize("n", [2, 3, 5, 10])
def test_rosenbrock_reaches_scipys_minimum(n: int) -> None:
    x0 = _start(n)
    got = minimize(rosen, x0, method="BFGS")
    ref = so.minimize(so.rosen, x0, jac=so.rosen_der, method="BFGS")
    assert bool(got.success) and int(got.status) == 0
    np.testing.assert_allclose(got.x.numpy(), ref.x, atol=2e-5)
    np.testing.assert_allclose(got.fun.numpy(), so.rosen(got.x.numpy()), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.jac.numpy(), so.rosen_der(got.x.numpy()), atol=1e-9)
    assert np.abs(got.jac.numpy()).max() < 1e-5
    assert 0 < int(got.nit) < 3 * ref.nit and int(got.nfev) == int(got.njev) >= int(got.nit)


def test_quadratic_with_args_solves_the_linear_system() -> None:
    rng = np.random.default_rng(0)
    m = rng.standard_normal((6, 6))
    a, b = m @ m.T + 6 * np.eye(6), rng.standard_normal(6)
    got = minimize(lambda x, a, b: 0.5 * x @ (a @ x) - b @ x, np.zeros(6), (Tensor(a), Tensor(b)),
                   method="BFGS", tol=1e-10)
    np.testing.assert_allclose(got.x.numpy(), np.linalg.solve(a, b), rtol=1e-8, atol=1e-10)
    # the inverse-Hessian estimate approaches inv(a) on a quadratic
    np.testing.assert_allclose(got.hess_inv.numpy(), np.linalg.inv(a), atol=0.05)


def test_float32_under_jit_and_vmap() -> None:
    x0 = np.array([-1.2, 1.0], np.float32)
    eager = minimize(rosen, x0, method="BFGS")
    jitted = fgrad.jit(lambda x: minimize(rosen, x, method="BFGS"))(x0)
    assert eager.x.dtype == jitted.x.dtype == fgrad.dtypes.float32
    np.testing.assert_allclose(jitted.x.numpy(), [1.0, 1.0], atol=1e-3)
    np.testing.assert_allclose(eager.x.numpy(), [1.0, 1.0], atol=1e-3)
    starts = np.array([[-1.2, 1.0], [2.0, 2.0], [0.0, 0.0]])
    batched = fgrad.vmap(lambda x: minimize(rosen, x, method="BFGS").x)(starts)
    np.testing.assert_allclose(batched.numpy(), np.ones((3, 2)), atol=1e-5)


def test_iteration_limit_sets_status_1() -> None:
    got = minimize(rosen, _start(4), method="BFGS", options={"maxiter": 3})
    assert int(got.status) == 1 and not bool(got.success) and int(got.nit) == 3
    assert float(got.fun) < so.rosen(_start(4))


def test_already_converged_start_does_no_iteration() -> None:
    got = minimize(rosen, np.ones(3), method="BFGS")
    assert bool(got.success) and int(got.nit) == 0 and int(got.nfev) == 1


def test_unbounded_below_stops_without_nan() -> None:
    got = minimize(lambda x: -(x * x).sum(), np.array([0.5, -0.25]), method="BFGS",
                   options={"maxiter": 50})
    assert not bool(got.success) and int(got.status) in (1, 3)
    assert np.isfinite(got.x.numpy()).all()


def test_nan_objective_fails_the_line_search() -> None:
    got = minimize(lambda x: (x * x).sum() * np.nan, np.array([2.0, 3.0]), method="BFGS")
    assert not bool(got.success) and int(got.status) == 3


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="method 'Nelder-Mead' is not supported"):
        minimize(rosen, np.zeros(2), method="Nelder-Mead")
    with pytest.raises(TypeError, match="args must be a tuple"):
        minimize(lambda x, a: (x * a).sum(), np.zeros(2), args=1.0, method="BFGS")
    with pytest.raises(ValueError, match="x0 must be 1-d"):
        minimize(rosen, np.zeros((2, 2)), method="BFGS")
    with pytest.raises(ValueError, match="unknown options"):
        minimize(rosen, np.zeros(2), method="BFGS", options={"disp": True})
    with pytest.raises(TypeError, match="must return a scalar"):
        minimize(lambda x: x * 2, np.zeros(2), method="BFGS")
