"""fgrad.lax.custom_root and custom_linear_solve: values against NumPy, derivatives against
the analytic implicit derivative and central finite differences (float64 NumPy references)."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax


def newton(f, x0):
    x = x0
    for _ in range(25):
        x = x - f(x) / fgrad.grad(f)(x)
    return x


def scalar_tangent_solve(g, y):
    return y / g(1.0)


def my_sqrt(a):
    return lax.custom_root(lambda x: x ** 2 - a, fnp.asarray(1.0), newton, scalar_tangent_solve)


def fd(fn, x, eps=1e-3):
    """Central finite differences of a scalar fn at a float64 array x."""
    x = np.asarray(x, np.float64)
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        out[i] = (fn(x + d) - fn(x - d)) / (2 * eps)
    return out


def test_scalar_root_value_and_grad():
    for a in (2.0, 9.0, 0.5):
        assert abs(float(my_sqrt(fnp.asarray(a))) - np.sqrt(a)) < 1e-6
        g = float(fgrad.grad(my_sqrt)(fnp.asarray(a)))
        assert abs(g - 0.5 / np.sqrt(a)) < 1e-5
        assert abs(g - fd(lambda v: float(my_sqrt(fnp.asarray(v, dtype="float32"))), a,
                          1e-2)) < 1e-3
    _, t = fgrad.jvp(my_sqrt, (fnp.asarray(4.0),), (fnp.asarray(2.0),))
    assert abs(float(t) - 0.5) < 1e-6


def test_scalar_root_jit_vmap():
    a = np.array([2.0, 4.0, 7.0], np.float32)
    np.testing.assert_allclose(np.asarray(fgrad.vmap(my_sqrt)(fnp.asarray(a))), np.sqrt(a),
                               rtol=1e-6)
    want = 0.5 / np.sqrt(a)
    np.testing.assert_allclose(np.asarray(fgrad.vmap(fgrad.grad(my_sqrt))(fnp.asarray(a))),
                               want, rtol=1e-5)
    np.testing.assert_allclose(float(fgrad.jit(fgrad.grad(my_sqrt))(fnp.asarray(2.0))),
                               want[0], rtol=1e-5)
    np.testing.assert_allclose(float(fgrad.jit(my_sqrt)(fnp.asarray(2.0))), np.sqrt(2.0),
                               rtol=1e-6)


def test_initial_guess_gets_no_gradient():
    g = fgrad.grad(lambda x0: lax.custom_root(lambda x: x ** 2 - 2.0, x0, newton,
                                              scalar_tangent_solve))(fnp.asarray(1.0))
    assert float(g) == 0.0


A0 = np.array([[3.0, 0.5, 0.2], [0.1, 2.0, 0.3], [0.4, 0.2, 4.0]])


def vec_newton(f, x0):
    x = x0
    for _ in range(20):
        x = x - fnp.linalg.solve(fgrad.jacfwd(f)(x), f(x))
    return x


def vec_tangent_solve(g, y):
    return fnp.linalg.solve(fgrad.jacfwd(g)(y), y)


def vec_root(c, s):
    def f(x):
        return fnp.asarray(A0, dtype="float32") @ x + s * x ** 3 - c
    return lax.custom_root(f, fnp.zeros(3), vec_newton, vec_tangent_solve)


def test_vector_root_grads():
    c = np.array([1.0, -2.0, 0.5])
    s = 0.3
    x = np.asarray(vec_root(fnp.asarray(c, dtype="float32"), fnp.asarray(s)), np.float64)
    np.testing.assert_allclose(A0 @ x + s * x ** 3 - c, 0, atol=1e-5)
    w = np.array([1.0, 2.0, -1.0])
    J = A0 + np.diag(3 * s * x ** 2)
    lam = np.linalg.solve(J.T, w)        # d(w.x)/dc = J^-T w ; d/ds = -lam . x^3
    loss = lambda c_, s_: (vec_root(c_, s_) * fnp.asarray(w, dtype="float32")).sum()
    gc, gs = fgrad.grad(loss, argnums=(0, 1))(fnp.asarray(c, dtype="float32"), fnp.asarray(s))
    np.testing.assert_allclose(np.asarray(gc), lam, atol=1e-5)
    np.testing.assert_allclose(float(gs), -lam @ x ** 3, atol=1e-5)
    f32 = lambda v: float(loss(fnp.asarray(v, dtype="float32"), fnp.asarray(s)))
    np.testing.assert_allclose(np.asarray(gc), fd(f32, c, 1e-2), atol=2e-3)
    gj = fgrad.jit(fgrad.grad(loss))(fnp.asarray(c, dtype="float32"), fnp.asarray(s))
    np.testing.assert_allclose(np.asarray(gj), lam, atol=1e-5)
    _, t = fgrad.jvp(lambda c_: vec_root(c_, fnp.asarray(s)),
                     (fnp.asarray(c, dtype="float32"),), (fnp.asarray(w, dtype="float32"),))
    np.testing.assert_allclose(np.asarray(t), np.linalg.solve(J, w), atol=1e-5)


def test_root_has_aux():
    def solve(f, x0):
        return newton(f, x0), fnp.asarray(25.0)
    r, aux = lax.custom_root(lambda x: x ** 2 - 3.0, fnp.asarray(1.0), solve,
                             scalar_tangent_solve, has_aux=True)
    assert abs(float(r) - np.sqrt(3.0)) < 1e-6 and float(aux) == 25.0
    g = fgrad.grad(lambda a: lax.custom_root(lambda x: x ** 2 - a, fnp.asarray(1.0), solve,
                                             scalar_tangent_solve, has_aux=True)[0])
    assert abs(float(g(fnp.asarray(3.0))) - 0.5 / np.sqrt(3.0)) < 1e-5


M = np.array([[4.0, 1.0, 0.5], [2.0, 3.0, 0.1], [0.3, 0.7, 5.0]])
B = np.array([1.0, 2.0, -1.0])
SPD = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 5.0]])


def lin(A, b, mode="transpose"):
    matvec = lambda x: A @ x
    if mode == "transpose":
        return lax.custom_linear_solve(matvec, b, lambda mv, r: fnp.linalg.solve(A, r),
                                       lambda vm, r: fnp.linalg.solve(A.T, r))
    return lax.custom_linear_solve(matvec, b, lambda mv, r: fnp.linalg.solve(A, r),
                                   symmetric=True)


@pytest.mark.parametrize("mode", ["transpose", "symmetric"])
def test_linear_solve_value_and_grads(mode):
    A = SPD if mode == "symmetric" else M
    Af, bf = fnp.asarray(A, dtype="float32"), fnp.asarray(B, dtype="float32")
    np.testing.assert_allclose(np.asarray(lin(Af, bf, mode)), np.linalg.solve(A, B), atol=1e-6)
    w = np.array([0.5, -1.0, 2.0])
    loss = lambda A_, b_: (lin(A_, b_, mode) * fnp.asarray(w, dtype="float32")).sum()
    gA, gb = fgrad.grad(loss, argnums=(0, 1))(Af, bf)
    lam = np.linalg.solve(A.T, w)
    x = np.linalg.solve(A, B)
    np.testing.assert_allclose(np.asarray(gb), lam, atol=1e-6)
    np.testing.assert_allclose(np.asarray(gA), -np.outer(lam, x), atol=1e-6)
    f64 = lambda A_: float(np.linalg.solve(A_, B) @ w) if mode == "transpose" else None
    if mode == "transpose":
        np.testing.assert_allclose(np.asarray(gA), fd(f64, A, 1e-5), atol=1e-5)
        f32b = lambda b_: float(loss(Af, fnp.asarray(b_, dtype="float32")))
        np.testing.assert_allclose(np.asarray(gb), fd(f32b, B, 1e-2), atol=1e-3)
    gj = fgrad.jit(fgrad.grad(loss, argnums=(0, 1)))(Af, bf)
    np.testing.assert_allclose(np.asarray(gj[0]), -np.outer(lam, x), atol=1e-6)
    _, t = fgrad.jvp(lambda A_: lin(A_, bf, mode), (Af,), (fnp.asarray(np.eye(3), "float32"),))
    np.testing.assert_allclose(np.asarray(t), -np.linalg.solve(A, x), atol=1e-6)


def test_linear_solve_vmap():
    bs = np.array([[1.0, 2.0, -1.0], [0.0, 1.0, 3.0]])
    Af = fnp.asarray(M, dtype="float32")
    out = fgrad.vmap(lambda b_: lin(Af, b_))(fnp.asarray(bs, dtype="float32"))
    np.testing.assert_allclose(np.asarray(out), np.linalg.solve(M, bs.T).T, atol=1e-6)
    g = fgrad.vmap(fgrad.grad(lambda b_: lin(Af, b_).sum()))(fnp.asarray(bs, dtype="float32"))
    np.testing.assert_allclose(np.asarray(g), np.tile(np.linalg.solve(M.T, np.ones(3)), (2, 1)),
                               atol=1e-6)


def test_linear_solve_has_aux_and_errors():
    Af, bf = fnp.asarray(M, dtype="float32"), fnp.asarray(B, dtype="float32")

    def solve(mv, r):
        return fnp.linalg.solve(Af, r), fnp.asarray(1.0)

    def tsolve(vm, r):
        return fnp.linalg.solve(Af.T, r), fnp.asarray(2.0)

    x, aux = lax.custom_linear_solve(lambda v: Af @ v, bf, solve, tsolve, has_aux=True)
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(M, B), atol=1e-6)
    assert float(aux) == 1.0
    g = fgrad.grad(lambda b_: lax.custom_linear_solve(lambda v: Af @ v, b_, solve, tsolve,
                                                      has_aux=True)[0].sum())(bf)
    np.testing.assert_allclose(np.asarray(g), np.linalg.solve(M.T, np.ones(3)), atol=1e-6)
    no_t = lambda b_: lax.custom_linear_solve(lambda v: Af @ v, b_,
                                              lambda mv, r: fnp.linalg.solve(Af, r)).sum()
    np.testing.assert_allclose(float(no_t(bf)), np.linalg.solve(M, B).sum(), rtol=1e-6)
    with pytest.raises(TypeError, match="transpose_solve"):
        fgrad.grad(no_t)(bf)
    with pytest.raises(TypeError, match="floating-point"):
        lax.custom_linear_solve(lambda v: v, fnp.asarray([1, 2]), lambda mv, r: r)
    with pytest.raises(TypeError, match="must be a function"):
        lax.custom_root(lambda x: x, fnp.asarray(1.0), 3, scalar_tangent_solve)


def test_reverse_mode_uses_transpose_solve_not_the_solver_itself():
    """The solver may be non-differentiable (an iterative method; here its result is
    stop_gradient-ed): reverse mode must go through transpose_solve, so grad w.r.t. b is
    A^-T w (the solve-through fallback would give zeros)."""
    A = fnp.asarray(M, dtype="float32")
    w = np.array([0.5, -1.0, 2.0])

    def loss(b_):
        x = lax.custom_linear_solve(lambda v: A @ v, b_,
                                    lambda mv, r: lax.stop_gradient(fnp.linalg.solve(A, r)),
                                    lambda vm, r: lax.stop_gradient(fnp.linalg.solve(A.T, r)))
        return (x * fnp.asarray(w, dtype="float32")).sum()

    g = fgrad.grad(loss)(fnp.asarray(B, dtype="float32"))
    np.testing.assert_allclose(np.asarray(g), np.linalg.solve(M.T, w), atol=1e-5)
