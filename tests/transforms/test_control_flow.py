"""fgrad.lax control flow (cond, switch, scan, while_loop, fori_loop): eager, under jit and
vmap, nested in each other, and differentiated, against Python loops, closed forms and
finite differences (check_grads)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fgrad
from check_grads import check_grads
from fgrad import Tensor, dtypes, lax

pytestmark = pytest.mark.backends  # jit tests run per backend (conftest.py)

RNG = np.random.default_rng(0)
X = np.array([0.5, 1.0, 2.0])


def T(a: Any) -> Tensor:
    return Tensor(np.asarray(a, np.float64))


def I(a: Any) -> Tensor:  # noqa: E743
    return Tensor(np.asarray(a, np.int32))


def close(got: Any, want: Any, tol: float = 1e-10) -> None:
    got = got.numpy() if isinstance(got, Tensor) else got
    np.testing.assert_allclose(got, np.asarray(want, np.float64), rtol=tol, atol=tol)


# ---------------------------------------------------------------------------- cond / switch

def branchy(p: Any, x: Tensor) -> Tensor:
    return lax.cond(p, lambda a: a.sin() * a, lambda a: a * a * 3.0, x)


def test_cond_eager_and_jit() -> None:
    close(branchy(True, T(X)), np.sin(X) * X)
    close(branchy(False, T(X)), 3 * X * X)
    jb = fgrad.jit(branchy)
    close(jb(Tensor(True), T(X)), np.sin(X) * X)
    close(jb(Tensor(False), T(X)), 3 * X * X)
    assert jb.cache_info().misses == 1, "the predicate is traced, not baked into the trace"
    assert "cond" in str(fgrad.make_jaxpr(branchy)(Tensor(True), T(X)))


def test_cond_vmap_batched_predicate_selects() -> None:
    pred = Tensor([True, False, True])
    xs = T(np.stack([X, X + 1, X - 1]))
    want = [np.sin(X) * X, 3 * (X + 1) ** 2, np.sin(X - 1) * (X - 1)]
    close(fgrad.vmap(branchy)(pred, xs), want)
    close(fgrad.jit(fgrad.vmap(branchy))(pred, xs), want)
    close(fgrad.vmap(branchy, in_axes=(None, 0))(Tensor(False), xs),
          [3 * (X + k) ** 2 for k in (0, 1, -1)])


def test_cond_jvp_and_grad_closed_form() -> None:
    _, t = fgrad.jvp(lambda x: branchy(True, x), (T(X),), (T(np.ones(3)),))
    close(t, np.cos(X) * X + np.sin(X))
    g = fgrad.grad(lambda x, p: branchy(p, x).sum())
    close(g(T(X), Tensor(True)), np.cos(X) * X + np.sin(X))
    close(g(T(X), Tensor(False)), 6 * X)
    close(fgrad.jit(g)(T(X), Tensor(False)), 6 * X)
    close(fgrad.vmap(g, in_axes=(None, 0))(T(X), Tensor([True, False])),
          [np.cos(X) * X + np.sin(X), 6 * X])


def test_batched_cond_gradients_stay_finite() -> None:
    """A batched predicate runs both branches; the unselected one (log of a negative,
    exp overflow) must not poison the gradient."""
    f = lambda x: lax.cond(x > 0, lambda a: a.log(), lambda a: a * 0, x)  # noqa: E731
    g = lambda x: lax.cond(x < 100, lambda a: a.exp(), lambda a: a * 0, x)  # noqa: E731
    for wrap in (lambda h: h, fgrad.jit):
        close(wrap(fgrad.vmap(fgrad.grad(f)))(T([-1.0, 2.0, 0.0])), [0.0, 0.5, 0.0])
        close(wrap(fgrad.grad(lambda x: fgrad.vmap(f)(x).sum()))(T([-1.0, 2.0])), [0.0, 0.5])
        close(wrap(fgrad.vmap(fgrad.grad(g)))(T([1.0, 1000.0])), [np.e, 0.0])


@pytest.mark.parametrize("pred", [True, False])
def test_cond_check_grads(pred: bool) -> None:
    def f(x: Tensor, y: Tensor) -> tuple:
        return lax.cond(pred, lambda a, b: (a * b.exp(), b.sum()),
                        lambda a, b: (a.sin() + b, (a * b).sum()), x, y)
    check_grads(f, (X, X[::-1]), order=2)


def test_cond_operand_pytrees_and_closures() -> None:
    w = T(2.0)

    def f(p: Any, d: dict) -> dict:
        return lax.cond(p, lambda t: {"o": t["a"] * w}, lambda t: {"o": t["b"] - w}, d)

    d = {"a": T(X), "b": T(X * 2)}
    close(f(True, d)["o"], 2 * X)
    close(f(False, d)["o"], 2 * X - 2)
    close(fgrad.grad(lambda w_: lax.cond(True, lambda a: (a * w_).sum(), lambda a: a.sum(),
                                         T(X)))(T(3.0)), X.sum())


def switchy(i: Any, x: Tensor) -> Tensor:
    return lax.switch(i, [lambda a: a + 1.0, lambda a: a * a, lambda a: -a.exp()], x)


def test_switch_eager_clamps_and_jit() -> None:
    close(switchy(0, T(X)), X + 1)
    close(switchy(1, T(X)), X * X)
    close(switchy(2, T(X)), -np.exp(X))
    close(switchy(7, T(X)), -np.exp(X))
    close(switchy(-3, T(X)), X + 1)
    close(fgrad.jit(switchy)(I(1), T(X)), X * X)


def test_switch_vmap_and_grad() -> None:
    idx = I([0, 1, 2, 5, -1])
    xs = np.stack([X * k for k in range(1, 6)])
    want = [xs[0] + 1, xs[1] ** 2, -np.exp(xs[2]), -np.exp(xs[3]), xs[4] + 1]
    close(fgrad.vmap(switchy)(idx, T(xs)), want)
    g = fgrad.vmap(fgrad.grad(lambda i, x: switchy(i, x).sum(), argnums=1))(idx, T(xs))
    close(g, [np.ones(3), 2 * xs[1], -np.exp(xs[2]), -np.exp(xs[3]), np.ones(3)])


def test_cond_errors() -> None:
    with pytest.raises(TypeError, match="same structure, shapes and dtypes"):
        lax.cond(True, lambda a: a, lambda a: a.sum(), T(X))
    with pytest.raises(TypeError, match="f32"):
        lax.cond(True, lambda a: a, lambda a: a.cast(dtypes.float32), T(X))
    with pytest.raises(TypeError, match="same structure"):
        lax.cond(True, lambda a: (a, a), lambda a: a, T(X))
    with pytest.raises(TypeError, match="Tensor.where"):
        lax.cond(T(X) > 0, lambda a: a, lambda a: a, T(X))
    with pytest.raises(TypeError, match="index"):
        lax.switch(T(1.0), [lambda a: a], T(X))


# ---------------------------------------------------------------------------- scan

def scan_ref(f: Any, init: np.ndarray, xs: np.ndarray, reverse: bool = False) -> tuple:
    carry, ys = init, []
    order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    for i in order:
        carry, y = f(carry, xs[i])
        ys.append(y)
    return carry, np.stack(ys[::-1] if reverse else ys)


def body(c: Any, x: Any) -> tuple:
    return c * 0.9 + x.sin() if isinstance(x, Tensor) else c * 0.9 + np.sin(x), c * x


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_matches_python_loop(reverse: bool) -> None:
    xs = RNG.normal(size=(5, 2))
    init = RNG.normal(size=(2,))
    carry, ys = lax.scan(body, T(init), T(xs), reverse=reverse)
    want_c, want_y = scan_ref(body, init, xs, reverse)
    close(carry, want_c)
    close(ys, want_y)
    jc, jy = fgrad.jit(lambda c, x: lax.scan(body, c, x, reverse=reverse))(T(init), T(xs))
    close(jc, want_c)
    close(jy, want_y)


def test_scan_pytrees_and_length_without_xs() -> None:
    def step(c: dict, x: dict) -> tuple:
        return {"a": c["a"] * x["u"], "b": c["b"] + x["v"]}, (c["a"], c["b"] * 2)

    c0 = {"a": T(1.5), "b": T([0.0, 1.0])}
    xs = {"u": T([1.0, 2.0, 3.0]), "v": T(np.ones((3, 2)))}
    carry, (ya, yb) = lax.scan(step, c0, xs)
    close(carry["a"], 9.0)
    close(carry["b"], [3.0, 4.0])
    close(ya, [1.5, 1.5, 3.0])
    close(yb, [[0, 2], [2, 4], [4, 6]])
    c, ys = lax.scan(lambda c, _: (c * 2, c), T(1.0), None, length=4)
    close(c, 16.0)
    close(ys, [1, 2, 4, 8])


def test_scan_grad_closed_form() -> None:
    def f(c: Tensor, xs: Tensor) -> Tensor:
        return lax.scan(lambda k, x: (k + x * x, k * x), c, xs)[1].sum()

    gc, gx = fgrad.grad(f, argnums=(0, 1))(T(0.5), T([1.0, 2.0, 3.0]))
    close(gc, 6.0)
    close(gx, [10.5, 13.5, 5.5])
    rev = lambda c, xs: lax.scan(lambda k, x: (k * x, k), c, xs, reverse=True)[0]  # noqa: E731
    gc, gx = fgrad.grad(rev, argnums=(0, 1))(T(0.5), T([1.0, 2.0, 3.0]))
    close(gc, 6.0)
    close(gx, [3.0, 1.5, 1.0])


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_check_grads(reverse: bool) -> None:
    def f(c: Tensor, xs: Tensor, w: Tensor) -> tuple:
        def step(k: tuple, x: Tensor) -> tuple:
            h, s = k
            h = (h * w + x).tanh()
            return (h, s + (h * h).sum()), h.sin()
        return lax.scan(step, (c, T(0.0)), xs, reverse=reverse)

    check_grads(f, (RNG.normal(size=2), RNG.normal(size=(3, 2)), RNG.normal(size=2)), order=2)


def test_scan_vmap() -> None:
    xs = RNG.normal(size=(4, 5, 2))
    init = RNG.normal(size=(4, 2))
    got_c, got_y = fgrad.vmap(lambda c, x: lax.scan(body, c, x))(T(init), T(xs))
    for i in range(4):
        wc, wy = scan_ref(body, init[i], xs[i])
        close(got_c.numpy()[i], wc)
        close(got_y.numpy()[i], wy)
    ws = T([0.5, 1.0, 2.0])
    got = fgrad.vmap(lambda w: lax.scan(lambda c, x: (c * w + x, c), T(0.0), T(X))[0])(ws)
    close(got, [((0 * w + X[0]) * w + X[1]) * w + X[2] for w in (0.5, 1.0, 2.0)])
    got = fgrad.vmap(lambda x: lax.scan(body, T([0.0, 0.0]), x)[1], in_axes=1)(T(xs))
    close(got[2], scan_ref(body, np.zeros(2), xs[:, 2])[1])


def test_scan_errors() -> None:
    with pytest.raises(TypeError, match="carry leaf 0 from f64\\[\\] to f32\\[\\]"):
        lax.scan(lambda c, x: (c.cast(dtypes.float32), x), T(1.0), T(X))
    with pytest.raises(TypeError, match="i32"):
        lax.scan(lambda c, x: (c + x, x), Tensor(1), T(X))
    with pytest.raises(ValueError, match="leading sizes"):
        lax.scan(lambda c, x: (c, x), T(1.0), (T(X), T([1.0, 2.0])))
    with pytest.raises(TypeError, match="pair"):
        lax.scan(lambda c, x: c, T(1.0), T(X))


# ---------------------------------------------------------------------------- while / fori

def doubling(n: Any, v: Tensor) -> tuple:
    return lax.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * 1.5), (I(0), v))


def test_while_eager_and_jit() -> None:
    i, v = doubling(5, T(1.0))
    assert int(i) == 5
    close(v, 1.5 ** 5)
    jd = fgrad.jit(doubling)
    for n in (0, 3, 4):
        i, v = jd(I(n), T(2.0))
        assert int(i) == n
        close(v, 2 * 1.5 ** n)
    assert jd.cache_info().misses == 1


def test_while_vmap_runs_until_all_done() -> None:
    i, v = fgrad.vmap(doubling)(I([1, 3, 0, 6]), T([1.0, 1.0, 2.0, 1.0]))
    np.testing.assert_array_equal(i.numpy(), [1, 3, 0, 6])
    close(v, [1.5, 1.5 ** 3, 2.0, 1.5 ** 6])

    def until_big(x: Tensor) -> tuple:
        return lax.while_loop(lambda s: s[1] < 10.0, lambda s: (s[0] + 1, s[1] * 2.0),
                              (I(0), x))
    n, v = fgrad.jit(fgrad.vmap(until_big))(T([0.5, 3.0, 11.0, 9.0]))
    np.testing.assert_array_equal(n.numpy(), [5, 2, 0, 1])
    close(v, [16.0, 12.0, 11.0, 18.0])


def test_while_forward_mode() -> None:
    def f(v: Tensor) -> Tensor:
        return lax.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * s[1]),
                              (I(0), v))[1]
    _, t = fgrad.jvp(f, (T(1.1),), (T(1.0),))
    close(t, 8 * 1.1 ** 7)
    close(fgrad.jacfwd(f)(T(0.9)), 8 * 0.9 ** 7)
    check_grads(f, (0.9,), order=2, modes=("fwd",))


def test_while_reverse_mode_error_mentions_scan() -> None:
    def f(v: Tensor) -> Tensor:
        return lax.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * 2.0),
                              (I(0), v))[1]
    with pytest.raises(TypeError, match="scan") as err:
        fgrad.grad(f)(T(1.0))
    assert "while_loop" in str(err.value) and "fori_loop" in str(err.value)


def test_while_errors() -> None:
    with pytest.raises(TypeError, match="keep its shape and dtype"):
        lax.while_loop(lambda s: s < 3, lambda s: s + 0.5, I(0))
    with pytest.raises(TypeError, match="scalar"):
        lax.while_loop(lambda s: s < 3, lambda s: s + 1, T(X))


def test_fori_loop_static_bounds_is_reverse_differentiable() -> None:
    f = lambda v: lax.fori_loop(0, 3, lambda i, u: u * u + i, v)  # noqa: E731
    close(f(T(0.5)), ((0.5 ** 2) ** 2 + 1) ** 2 + 2)
    close(fgrad.grad(f)(T(0.5)), 2 * (0.5 ** 4 + 1) * 4 * 0.5 ** 3)
    close(fgrad.jit(fgrad.grad(f))(T(0.5)), 2 * (0.5 ** 4 + 1) * 4 * 0.5 ** 3)
    check_grads(f, (0.7,), order=2)
    close(lax.fori_loop(2, 2, lambda i, u: u * 0, T(3.0)), 3.0)


def test_fori_loop_traced_bounds() -> None:
    f = lambda n, v: lax.fori_loop(I(0), n, lambda i, u: u * 2 + i, v)  # noqa: E731
    close(f(I(4), T(1.0)), 27.0)
    close(fgrad.jit(f)(I(4), T(1.0)), 27.0)
    close(fgrad.vmap(f)(I([0, 1, 4]), T([1.0, 1.0, 1.0])), [1.0, 2.0, 27.0])


# ---------------------------------------------------------------------------- nesting

def scan_in_cond(p: Any, xs: Tensor) -> Tensor:
    prod = lambda v: lax.scan(lambda c, x: (c * x, c), T(1.0), v)[0]  # noqa: E731
    return lax.cond(p, prod, lambda v: v.sum(), xs)


def test_scan_inside_cond() -> None:
    xs = T(X)
    close(scan_in_cond(True, xs), X.prod())
    close(fgrad.jit(scan_in_cond)(Tensor(False), xs), X.sum())
    close(fgrad.vmap(scan_in_cond, in_axes=(0, None))(Tensor([True, False]), xs),
          [X.prod(), X.sum()])
    g = fgrad.grad(scan_in_cond, argnums=1)
    close(g(Tensor(True), xs), [X[1] * X[2], X[0] * X[2], X[0] * X[1]])
    close(fgrad.vmap(g, in_axes=(0, None))(Tensor([True, False]), xs),
          [[X[1] * X[2], X[0] * X[2], X[0] * X[1]], np.ones(3)])


def cond_in_scan(xs: Tensor) -> tuple:
    def step(c: Tensor, x: Tensor) -> tuple:
        return lax.cond(x > 0.8, lambda a: a * x, lambda a: a + x, c), c
    return lax.scan(step, T(1.0), xs)


def test_cond_inside_scan() -> None:
    c, ys = cond_in_scan(T(X))
    close(c, 3.0)
    close(ys, [1.0, 1.5, 1.5])
    close(fgrad.jit(cond_in_scan)(T(X))[0], 3.0)
    close(fgrad.grad(lambda xs: cond_in_scan(xs)[0])(T(X)), [2.0, 3.0, 1.5])
    close(fgrad.vmap(lambda xs: cond_in_scan(xs)[0])(T([[0.5, 1.0, 2.0], [1.0, 0.1, 0.2]])),
          [3.0, 1.3])
    check_grads(lambda xs: cond_in_scan(xs)[0], (X,), order=2)


def while_in_scan(xs: Tensor) -> tuple:
    def step(c: Tensor, x: Tensor) -> tuple:
        n, v = lax.while_loop(lambda s: s[1] < 10.0, lambda s: (s[0] + 1, s[1] * 2.0),
                              (I(0), x))
        return c + n, v
    return lax.scan(step, I(0), xs)


def test_while_inside_scan() -> None:
    n, v = while_in_scan(T(X))
    assert int(n) == 12
    close(v, [16.0, 16.0, 16.0])
    jn, jv = fgrad.jit(while_in_scan)(T(X))
    assert int(jn) == 12
    bn, bv = fgrad.vmap(while_in_scan)(T([[0.5, 1.0, 2.0], [3.0, 4.0, 9.0]]))
    np.testing.assert_array_equal(bn.numpy(), [12, 5])
    close(bv, [[16, 16, 16], [12, 16, 18]])
    _, t = fgrad.jvp(lambda xs: while_in_scan(xs)[1], (T(X),), (T(np.ones(3)),))
    close(t, [32.0, 16.0, 8.0])


def test_per_example_rnn_gradients() -> None:
    """vmap(grad) of a scan-based RNN loss (pytree params) against a loop of grads."""
    params = {"wx": T(RNG.normal(size=(2, 3)) * 0.5), "wh": T(RNG.normal(size=(3, 3)) * 0.5),
              "b": T(RNG.normal(size=3))}

    def rnn_loss(p: dict, xs: Tensor) -> Tensor:
        def cell(h: Tensor, x: Tensor) -> tuple:
            h = (x @ p["wx"] + h @ p["wh"] + p["b"]).tanh()
            return h, h
        h, hs = lax.scan(cell, T(np.zeros(3)), xs)
        return (hs ** 2).sum() + h.sum()

    xs = T(RNG.normal(size=(4, 5, 2)))
    per_ex = fgrad.jit(fgrad.vmap(fgrad.grad(rnn_loss), in_axes=(None, 0)))(params, xs)
    for i in range(4):
        g = fgrad.grad(rnn_loss)(params, xs[i])
        for k in params:
            close(per_ex[k].numpy()[i], g[k])
    check_grads(lambda wx, wh, x: rnn_loss({"wx": wx, "wh": wh, "b": params["b"]}, x),
                (params["wx"], params["wh"], xs[0]), order=2)
