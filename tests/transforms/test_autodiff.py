"""grad / value_and_grad / jvp / vjp / linearize / jacfwd / jacrev / hessian, custom rules,
checkpoint, stop_gradient and NaN-safe derivatives, against closed forms and finite
differences (check_grads)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fgrad
from check_grads import check_grads
from fgrad import Tensor, dtypes
from fgrad.core.primitive import REGISTRY, MissingRuleError, Primitive
from fgrad.core.tensor import Tracer
from fgrad.core.trace import LeakedTracerError

pytestmark = pytest.mark.backends  # jit tests run per backend (conftest.py)

RNG = np.random.default_rng(0)


def T(a: Any) -> Tensor:
    return Tensor(np.asarray(a, np.float64))


def close(got: Any, want: Any, tol: float = 1e-10) -> None:
    got = got.numpy() if isinstance(got, Tensor) else got
    np.testing.assert_allclose(got, np.asarray(want, np.float64), rtol=tol, atol=tol)


X = np.array([0.5, -1.25, 2.0])
Y = np.array([1.5, 0.25, -0.75])


# ---------------------------------------------------------------------------- grad family

def test_grad_closed_form() -> None:
    g = fgrad.grad(lambda x: (x.sin() * x).sum())(T(X))
    close(g, np.sin(X) + X * np.cos(X))
    assert g.dtype == dtypes.float64


def test_grad_keeps_float32() -> None:
    g = fgrad.grad(lambda x: (x * x).sum())(Tensor(X.astype(np.float32)))
    assert g.dtype == dtypes.float32
    close(g, 2 * X, 1e-6)


def test_grad_pytree_argument() -> None:
    def f(p: dict) -> Tensor:
        a, (b, c) = p["a"], p["bc"]
        return (a * b).sum() + (c.exp() * a[0]).sum()

    g = fgrad.grad(f)({"a": T(X), "bc": (T(Y), T(X))})
    assert set(g) == {"a", "bc"} and isinstance(g["bc"], tuple)
    want_a = Y.copy()
    want_a[0] += np.exp(X).sum()
    close(g["a"], want_a)
    close(g["bc"][0], X)
    close(g["bc"][1], np.exp(X) * X[0])


@pytest.mark.parametrize("argnums,want", [
    (0, lambda x, y: y * np.cos(x * y)), (1, lambda x, y: x * np.cos(x * y)),
    (-1, lambda x, y: x * np.cos(x * y)),
    ((1, 0), lambda x, y: (x * np.cos(x * y), y * np.cos(x * y)))])
def test_grad_argnums(argnums: Any, want: Any) -> None:
    g = fgrad.grad(lambda x, y: (x * y).sin().sum(), argnums=argnums)(T(X), T(Y))
    expected = want(X, Y)
    if isinstance(argnums, tuple):
        assert isinstance(g, tuple) and len(g) == 2
        for gi, ei in zip(g, expected, strict=True):
            close(gi, ei)
    else:
        close(g, expected)


def test_grad_argnums_out_of_range() -> None:
    with pytest.raises(ValueError, match="argnums"):
        fgrad.grad(lambda x: x.sum(), argnums=1)(T(X))


def test_value_and_grad_with_aux() -> None:
    def f(x: Tensor, y: Tensor) -> tuple:
        loss = (x * x * y).sum()
        return loss, {"mean": x.mean(), "pair": (y.max(), x * 2)}

    (value, aux), g = fgrad.value_and_grad(f, argnums=(0, 1), has_aux=True)(T(X), T(Y))
    close(value, (X * X * Y).sum())
    close(g[0], 2 * X * Y)
    close(g[1], X * X)
    close(aux["mean"], X.mean())
    close(aux["pair"][0], Y.max())
    close(aux["pair"][1], 2 * X)
    for leaf in fgrad.tree_util.tree_leaves(aux):
        assert not isinstance(leaf, Tracer), "aux must be concrete, not a leaked tracer"


def test_grad_has_aux_returns_grad_and_aux() -> None:
    g, aux = fgrad.grad(lambda x: ((x ** 3).sum(), x.sum()), has_aux=True)(T(X))
    close(g, 3 * X ** 2)
    assert not isinstance(aux, Tracer)
    close(aux, X.sum())


def test_has_aux_requires_a_pair() -> None:
    with pytest.raises(TypeError, match="has_aux"):
        fgrad.grad(lambda x: x.sum(), has_aux=True)(T(X))


def test_has_aux_under_jit_and_vmap() -> None:
    f = fgrad.grad(lambda x: ((x * x).sum(), x.sum()), has_aux=True)
    g, aux = fgrad.jit(f)(T(X))
    close(g, 2 * X)
    close(aux, X.sum())
    gb, auxb = fgrad.vmap(f)(T(np.stack([X, Y])))
    close(gb, 2 * np.stack([X, Y]))
    close(auxb, [X.sum(), Y.sum()])


def test_jvp_pytrees() -> None:
    def f(p: dict) -> tuple:
        return p["a"] * p["b"], (p["a"].sin().sum(), {"c": p["b"] * 3})

    primals = {"a": T(X), "b": T(Y)}
    tangents = {"a": T(Y), "b": T(X)}
    out, out_dot = fgrad.jvp(f, (primals,), (tangents,))
    close(out[0], X * Y)
    close(out_dot[0], Y * Y + X * X)
    close(out_dot[1][0], (np.cos(X) * Y).sum())
    close(out_dot[1][1]["c"], 3 * X)


def test_jvp_errors() -> None:
    with pytest.raises(ValueError, match="tangent"):
        fgrad.jvp(lambda x: x, (T(X),), (T(X[:2]),))
    with pytest.raises(TypeError, match="tuple"):
        fgrad.jvp(lambda x: x, T(X), T(X))


def test_vjp_pytree_outputs_and_aux() -> None:
    def f(a: Tensor, b: Tensor) -> tuple:
        return {"s": (a * b).sum(), "v": a.exp()}, b.max()

    out, vjp_fn, aux = fgrad.vjp(f, T(X), T(Y), has_aux=True)
    close(out["s"], (X * Y).sum())
    assert not isinstance(aux, Tracer)
    close(aux, Y.max())
    ga, gb = vjp_fn({"s": T(2.0), "v": T(Y)})
    close(ga, 2 * Y + Y * np.exp(X))
    close(gb, 2 * X)
    with pytest.raises(ValueError, match="structure"):
        vjp_fn((T(1.0), T(Y)))


def test_vjp_takes_numpy_cotangents() -> None:
    """Cotangents may be NumPy arrays and Python scalars, as in JAX."""
    _, vjp_fn = fgrad.vjp(lambda a, b: {"s": (a * b).sum(), "v": a.exp()}, T(X), T(Y))
    ga, gb = vjp_fn({"s": 2.0, "v": np.asarray(Y)})
    close(ga, 2 * Y + Y * np.exp(X))
    close(gb, 2 * X)
    with pytest.raises(ValueError, match="cotangent shape"):
        vjp_fn({"s": 2.0, "v": np.asarray(Y[:1])})


def test_linearize_matches_jvp_and_is_reusable() -> None:
    def f(a: Tensor, b: Tensor) -> Tensor:
        return a.sin() * b + a * a

    out, f_jvp = fgrad.linearize(f, T(X), T(Y))
    close(out, np.sin(X) * Y + X * X)
    for ta, tb in [(Y, X), (X, X), (np.ones(3), np.zeros(3))]:
        close(f_jvp(T(ta), T(tb)), fgrad.jvp(f, (T(X), T(Y)), (T(ta), T(tb)))[1].numpy())
    assert "mul" in str(f_jvp.jaxpr)


# ---------------------------------------------------------------------------- jacobians

def _jac_closed(x: np.ndarray) -> np.ndarray:
    """J of f(x) = sin(x) * x[0]."""
    j = np.diag(np.cos(x) * x[0])
    j[:, 0] += np.sin(x)
    return j


@pytest.mark.parametrize("jac", [fgrad.jacfwd, fgrad.jacrev])
def test_jacobian_closed_form(jac: Any) -> None:
    close(jac(lambda x: x.sin() * x[0])(T(X)), _jac_closed(X))


@pytest.mark.parametrize("jac", [fgrad.jacfwd, fgrad.jacrev])
def test_jacobian_pytrees(jac: Any) -> None:
    def f(p: dict) -> dict:
        return {"prod": p["a"] * p["b"].sum(), "sq": (p["a"] * p["a"]).sum()}

    j = jac(f)({"a": T(X), "b": T(Y[:2])})
    assert j["prod"]["a"].shape == (3, 3) and j["prod"]["b"].shape == (3, 2)
    assert j["sq"]["a"].shape == (3,) and j["sq"]["b"].shape == (2,)
    close(j["prod"]["a"], np.eye(3) * Y[:2].sum())
    close(j["prod"]["b"], np.repeat(X[:, None], 2, axis=1))
    close(j["sq"]["a"], 2 * X)
    close(j["sq"]["b"], np.zeros(2))


@pytest.mark.parametrize("jac", [fgrad.jacfwd, fgrad.jacrev])
def test_jacobian_argnums_tuple(jac: Any) -> None:
    ja, jb = jac(lambda a, b: a * b.sum(), argnums=(0, 1))(T(X), T(Y[:2]))
    close(ja, np.eye(3) * Y[:2].sum())
    close(jb, np.repeat(X[:, None], 2, axis=1))


def _hess_closed(x: np.ndarray) -> np.ndarray:
    """Hessian of f(x) = sum(x^3) + x0 * x1 * sin(x2)."""
    h = np.diag(6 * x)
    h[0, 1] = h[1, 0] = np.sin(x[2])
    h[0, 2] = h[2, 0] = x[1] * np.cos(x[2])
    h[1, 2] = h[2, 1] = x[0] * np.cos(x[2])
    h[2, 2] += -x[0] * x[1] * np.sin(x[2])
    return h


def _cubic(x: Tensor) -> Tensor:
    return (x ** 3).sum() + x[0] * x[1] * x[2].sin()


@pytest.mark.parametrize("make", [
    fgrad.hessian, lambda f: fgrad.jacfwd(fgrad.jacrev(f)),
    lambda f: fgrad.jacrev(fgrad.jacfwd(f)), lambda f: fgrad.jacfwd(fgrad.jacfwd(f)),
    lambda f: fgrad.jacrev(fgrad.grad(f))], ids=["hessian", "fwd-rev", "rev-fwd", "fwd-fwd",
                                                  "rev-grad"])
def test_hessian_closed_form(make: Any) -> None:
    close(make(_cubic)(T(X)), _hess_closed(X))


def test_hessian_pytree() -> None:
    h = fgrad.hessian(lambda p: (p["a"] * p["a"]).sum() * p["b"])({"a": T(X[:2]), "b": T(2.0)})
    close(h["a"]["a"], 4 * np.eye(2))
    close(h["a"]["b"], 2 * X[:2])
    close(h["b"]["a"], 2 * X[:2])
    close(h["b"]["b"], 0.0)


def test_third_order_closed_form() -> None:
    d3 = fgrad.grad(fgrad.grad(fgrad.grad(lambda s: s.sin() * s * s)))
    for s in (0.3, -1.7, 2.5):
        want = -s * s * np.cos(s) - 6 * s * np.sin(s) + 6 * np.cos(s)
        close(d3(T(s)), want)
    d3log = fgrad.grad(fgrad.grad(fgrad.grad(lambda s: s.log())))
    close(d3log(T(1.5)), 2 / 1.5 ** 3)
    mixed = fgrad.grad(lambda s: fgrad.jvp(fgrad.grad(lambda u: u.exp() * u), (s,),
                                           (T(1.0),))[1])
    close(mixed(T(0.7)), np.exp(0.7) * (0.7 + 3))


@pytest.mark.parametrize("f", [
    lambda x: (x.sin() * x).sum(),
    lambda x: x.exp() / x.exp().sum(),
    lambda x: (x.reshape(3, 1) @ x.reshape(1, 3)).tanh(),
    lambda x: x.cumsum(0) * x.flip(0),
    lambda x: (x * x + 1).sqrt().log().max(),
    lambda x: x[[2, 0, 0]] * x.pad(((1, 0),))[:3],
    lambda x, y: {"a": (x / (y * y + 1)), "b": (x * y).sigmoid().sum()},
], ids=["sin", "softmax", "outer-tanh", "cumsum-flip", "max-log", "gather-pad", "pytree"])
def test_check_grads_second_order(f: Any) -> None:
    nargs = f.__code__.co_argcount
    check_grads(f, (X, Y)[:nargs], order=2)


def test_check_grads_detects_a_wrong_rule() -> None:
    """The helper must fail on a broken derivative (it is not vacuous)."""
    @fgrad.custom_jvp
    def bad_sin(x: Tensor) -> Tensor:
        return x.sin()

    bad_sin.defjvp(lambda p, t: (bad_sin(p[0]), t[0] * p[0].cos() * 1.01))
    with pytest.raises(AssertionError):
        check_grads(bad_sin, (X,), order=1, modes=("fwd",))
    with pytest.raises(AssertionError):
        check_grads(bad_sin, (X,), order=1, modes=("rev",))


# ---------------------------------------------------------------------------- errors

def test_grad_of_non_scalar_output() -> None:
    with pytest.raises(TypeError, match="scalar") as err:
        fgrad.grad(lambda x: x * 2)(T(X))
    assert "jacrev" in str(err.value) and "sum" in str(err.value)


def test_non_tensor_output_error_names_the_function() -> None:
    def my_loss(x: Tensor) -> float:
        return 1.0

    for transform in (fgrad.grad, fgrad.jacrev):
        with pytest.raises(TypeError, match="my_loss returned a float"):
            transform(my_loss)(T(X))


def test_grad_of_integer_input() -> None:
    with pytest.raises(TypeError, match="floating-point") as err:
        fgrad.grad(lambda x: (x * 2).sum())(Tensor([1, 2, 3]))
    assert "cast" in str(err.value)


def test_missing_jvp_rule_names_the_primitive() -> None:
    prim = Primitive("test_only_no_jvp")
    prim.abstract_eval = lambda x: x
    prim.impl = lambda x: x * 2
    try:
        close(prim.bind(T(X)), 2 * X)
        with pytest.raises(MissingRuleError, match="test_only_no_jvp") as err:
            fgrad.grad(lambda x: prim.bind(x).sum())(T(X))
        assert "jvp" in str(err.value)
        with pytest.raises(MissingRuleError, match="test_only_no_jvp.*batch"):
            fgrad.vmap(prim.bind)(T(X))
    finally:
        del REGISTRY["test_only_no_jvp"]
    assert "test_only_no_jvp" not in REGISTRY


def test_leaked_tracer_is_reported() -> None:
    leaked = []

    def f(x: Tensor) -> Tensor:
        leaked.append(x)
        return (x * x).sum()

    fgrad.grad(f)(T(X))
    with pytest.raises(LeakedTracerError, match="escaped"):
        leaked[0] + 1


# ---------------------------------------------------------------------------- eager control

def test_grad_through_python_control_flow() -> None:
    def f(x: Tensor) -> Tensor:
        if x.sum() > 0:
            return (x * x).sum()
        return x.sin().sum()

    close(fgrad.grad(f)(T(np.abs(X))), 2 * np.abs(X))
    close(fgrad.grad(f)(T(-np.abs(X))), np.cos(-np.abs(X)))

    def loop(x: Tensor) -> Tensor:
        acc = x[0] * 0
        for i in range(3):
            if float(x[i]) > 0:
                acc = acc + x[i] ** (i + 1)
        return acc

    close(fgrad.grad(loop)(T([0.5, 1.5, 2.0])), [1.0, 3.0, 12.0])
    close(fgrad.grad(loop)(T([0.5, -1.5, 2.0])), [1.0, 0.0, 12.0])


# ---------------------------------------------------------------------------- stop_gradient

def test_stop_gradient_and_detach() -> None:
    close(fgrad.grad(lambda x: (fgrad.stop_gradient(x) * x).sum())(T(X)), X)
    close(fgrad.grad(lambda x: (x.detach() * x).sum())(T(X)), X)
    close(fgrad.grad(lambda x: (fgrad.lax.stop_gradient(x) * x).sum())(T(X)), X)
    close(fgrad.grad(lambda x: fgrad.stop_gradient(x * x).sum())(T(X)), np.zeros(3))
    tree = fgrad.stop_gradient({"a": T(X), "n": Tensor([1, 2])})
    assert tree["n"].dtype == dtypes.int32
    g = fgrad.grad(lambda p: (fgrad.stop_gradient(p)["a"] * p["b"]).sum())(
        {"a": T(X), "b": T(Y)})
    close(g["a"], np.zeros(3))
    close(g["b"], X)
    _, t = fgrad.jvp(lambda x: x.detach() * x, (T(X),), (T(Y),))
    close(t, X * Y)


# ---------------------------------------------------------------------------- custom rules

@fgrad.custom_jvp
def scaled_sin(x: Tensor) -> Tensor:
    return x.sin()


@scaled_sin.defjvp
def _scaled_sin_jvp(primals: tuple, tangents: tuple) -> tuple:
    (x,), (t,) = primals, tangents
    return scaled_sin(x), t * x.cos() * 10.0   # deliberately not sin's derivative


CUSTOM_JVP_CASES = {
    "grad": lambda x: fgrad.grad(lambda a: scaled_sin(a).sum())(x),
    "jit-grad": lambda x: fgrad.jit(fgrad.grad(lambda a: scaled_sin(a).sum()))(x),
    "grad-jit": lambda x: fgrad.grad(fgrad.jit(lambda a: scaled_sin(a).sum()))(x),
    "vmap-grad": lambda x: fgrad.vmap(fgrad.grad(lambda a: scaled_sin(a)))(x),
    "grad-vmap": lambda x: fgrad.grad(lambda a: fgrad.vmap(scaled_sin)(a).sum())(x),
    "jvp": lambda x: fgrad.jvp(scaled_sin, (x,), (x * 0 + 1,))[1],
}


@pytest.mark.parametrize("name", sorted(CUSTOM_JVP_CASES))
def test_custom_jvp_rule_is_used(name: str) -> None:
    close(CUSTOM_JVP_CASES[name](T(X)), 10 * np.cos(X))
    close(fgrad.vmap(scaled_sin)(T(X)), np.sin(X))


def test_custom_jvp_second_order() -> None:
    @fgrad.custom_jvp
    def softplus(x: Tensor) -> Tensor:
        return (x.exp() + 1).log()

    softplus.defjvp(lambda p, t: (softplus(p[0]), t[0] * p[0].sigmoid()))
    check_grads(softplus, (X,), order=2)


@fgrad.custom_vjp
def clipped_mul(a: Tensor, b: Tensor) -> Tensor:
    return a * b


def _clipped_mul_fwd(a: Tensor, b: Tensor) -> tuple:
    return a * b, (a, b)


def _clipped_mul_bwd(res: tuple, ct: Tensor) -> tuple:
    a, b = res
    return (ct * b * 2.0).clip(-1.0, 1.0), None   # deliberately custom; b gets no gradient


clipped_mul.defvjp(_clipped_mul_fwd, _clipped_mul_bwd)
VJP_WANT = np.clip(2 * Y, -1, 1)

CUSTOM_VJP_CASES = {
    "grad": lambda a, b: fgrad.grad(lambda u, v: clipped_mul(u, v).sum(), (0, 1))(a, b),
    "jit-grad": lambda a, b: fgrad.jit(fgrad.grad(lambda u, v: clipped_mul(u, v).sum(),
                                                  (0, 1)))(a, b),
    "grad-jit": lambda a, b: fgrad.grad(fgrad.jit(lambda u, v: clipped_mul(u, v).sum()),
                                        (0, 1))(a, b),
    "vmap-grad": lambda a, b: fgrad.vmap(fgrad.grad(lambda u, v: clipped_mul(u, v),
                                                    (0, 1)))(a, b),
    "grad-vmap": lambda a, b: fgrad.grad(lambda u, v: fgrad.vmap(clipped_mul)(u, v).sum(),
                                         (0, 1))(a, b),
}


@pytest.mark.parametrize("name", sorted(CUSTOM_VJP_CASES))
def test_custom_vjp_rule_is_used(name: str) -> None:
    ga, gb = CUSTOM_VJP_CASES[name](T(X), T(Y))
    close(ga, VJP_WANT)
    close(gb, np.zeros(3))


def test_custom_vjp_values_under_transforms() -> None:
    for f in (clipped_mul, fgrad.jit(clipped_mul), fgrad.vmap(clipped_mul)):
        close(f(T(X), T(Y)), X * Y)


def test_custom_vjp_forward_mode_error() -> None:
    with pytest.raises(TypeError, match="custom_jvp"):
        fgrad.jvp(clipped_mul, (T(X), T(Y)), (T(Y), T(X)))


# ---------------------------------------------------------------------------- checkpoint

def _deep(x: Tensor) -> Tensor:
    return (x.sin().exp() * x.cos()).tanh() * x


def test_checkpoint_same_gradients() -> None:
    plain = fgrad.grad(lambda x: _deep(x).sum())(T(X))
    ck = fgrad.checkpoint(_deep)
    close(fgrad.grad(lambda x: ck(x).sum())(T(X)), plain.numpy())
    close(fgrad.jit(fgrad.grad(lambda x: ck(x).sum()))(T(X)), plain.numpy())
    close(fgrad.vmap(fgrad.grad(lambda x: ck(x)))(T(X)), plain.numpy())
    close(fgrad.remat(_deep)(T(X)), _deep(T(X)).numpy())
    check_grads(ck, (X,), order=2)


CHECKPOINTED_CONTROL_FLOW = {
    "scan": lambda x: fgrad.lax.scan(lambda c, v: (c * v.sin() + 0.5, c * v), T(0.3), x),
    "cond": lambda x: fgrad.lax.cond(x.sum() > 0, lambda a: a.sin() * a, lambda a: a, x),
    "jit": lambda x: fgrad.jit(lambda a: (a.exp() * a).sum())(x),
    "nested": lambda x: fgrad.checkpoint(lambda a: fgrad.lax.scan(
        lambda c, v: (c * v.cos(), c), T(1.0), a))(x.tanh()),
}


@pytest.mark.parametrize("name", sorted(CHECKPOINTED_CONTROL_FLOW))
def test_checkpoint_of_control_flow(name: str) -> None:
    """Reverse mode through checkpoint(f) where f's JVP mixes primal and tangent work."""
    f = CHECKPOINTED_CONTROL_FLOW[name]
    check_grads(fgrad.checkpoint(f), (X,), order=2)
    loss = lambda x: sum(o.sum() for o in fgrad.tree_util.tree_leaves(f(x)))  # noqa: E731
    ck_loss = lambda x: sum(o.sum() for o in fgrad.tree_util.tree_leaves(  # noqa: E731
        fgrad.checkpoint(f)(x)))
    close(fgrad.jit(fgrad.grad(ck_loss))(T(X)), fgrad.grad(loss)(T(X)).numpy())


def test_checkpoint_saves_fewer_residuals() -> None:
    _, lin_plain = fgrad.linearize(lambda x: _deep(x).sum(), T(X))
    _, lin_ck = fgrad.linearize(lambda x: fgrad.checkpoint(_deep)(x).sum(), T(X))
    n_plain = len(lin_plain.jaxpr.constvars)
    n_ck = len(lin_ck.jaxpr.constvars)
    assert n_ck == 1, str(lin_ck.jaxpr)   # only the input x is saved
    assert n_plain >= 4 > n_ck, str(lin_plain.jaxpr)
    assert "checkpoint" in str(lin_ck.jaxpr)
    # the backward pass recomputes sin/cos/exp inside the checkpointed call
    text = str(fgrad.make_jaxpr(fgrad.grad(lambda x: fgrad.checkpoint(_deep)(x).sum()))(T(X)))
    assert text.count("exp") >= 1 and text.count("sin") >= 2


# ---------------------------------------------------------------------------- NaN safety

NAN_SAFE = {
    "where-log": (lambda x: (x > 0).where(x.log(), 0.0).sum(), [-1.0, 0.0, 2.0],
                  [0.0, 0.0, 0.5]),
    "where-sqrt": (lambda x: (x > 0).where(x.sqrt(), 0.0).sum(), [-1.0, 0.0, 2.0],
                   [0.0, 0.0, 0.5 / np.sqrt(2)]),
    "where-exp-overflow": (lambda x: (x < 100).where(x.exp(), 0.0).sum(), [1.0, 1000.0],
                           [np.e, 0.0]),
    "where-reciprocal": (lambda x: (x != 0).where(1 / x, 0.0).sum(), [-2.0, 0.0, 4.0],
                         [-0.25, 0.0, -1 / 16]),
    "where-pow": (lambda x: (x > 0).where(x ** 0.5, 0.0).sum(), [-1.0, 0.0, 4.0],
                  [0.0, 0.0, 0.25]),
}


@pytest.mark.parametrize("name", sorted(NAN_SAFE))
def test_nan_safe_where(name: str) -> None:
    f, x, want = NAN_SAFE[name]
    g = fgrad.grad(f)(T(x))
    assert np.all(np.isfinite(g.numpy())), g
    close(g, want)
    gj = fgrad.jit(fgrad.grad(f))(T(x))
    close(gj, want)


def test_nan_safe_where_second_order() -> None:
    f = lambda x: (x > 0).where(x.log(), 0.0).sum()   # noqa: E731
    h = fgrad.hessian(f)(T([-1.0, 0.0, 2.0]))
    assert np.all(np.isfinite(h.numpy()))
    close(h, np.diag([0.0, 0.0, -0.25]))
