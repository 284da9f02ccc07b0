"""Tests for fgrad.debug.print / callback: eager, jit on every backend, vmap, grad, scan
bodies, and their order relative to each other."""
import numpy as np
import pytest

import fgrad
from fgrad import Tensor, lax

X = np.array([1.0, 2.0, 3.0], np.float32)


def _f(x):
    fgrad.debug.print("A sum={s:.2f}", s=x.sum())
    y = x * 2
    fgrad.debug.print("B y={}", y)
    return y.sum()


def _lines(capsys):
    return capsys.readouterr().out.strip().splitlines()


def test_eager(capsys):
    _f(Tensor(X))
    assert _lines(capsys) == ["A sum=6.00", "B y=[2. 4. 6.]"]


@pytest.mark.backends
def test_jit_every_backend(capsys, jit_backend):
    out = fgrad.jit(_f)(Tensor(X))
    assert float(out) == 12.0
    assert _lines(capsys) == ["A sum=6.00", "B y=[2. 4. 6.]"]
    fgrad.jit(_f)(Tensor(X + 1))        # runs again on every call
    assert _lines(capsys) == ["A sum=9.00", "B y=[4. 6. 8.]"]


def test_printing_is_kept_in_the_jaxpr_without_outputs():
    text = str(fgrad.make_jaxpr(_f)(Tensor(X)))
    assert text.count("debug_callback") == 2


def test_vmap_calls_back_per_element(capsys):
    fgrad.vmap(_f)(Tensor(X))
    assert _lines(capsys) == ["A sum=1.00", "A sum=2.00", "A sum=3.00",
                              "B y=2.0", "B y=4.0", "B y=6.0"]


@pytest.mark.parametrize("wrap", ["grad", "grad_jit", "jit_grad"])
def test_grad_prints_primal_values_once(capsys, wrap):
    fn = {"grad": lambda: fgrad.grad(_f), "grad_jit": lambda: fgrad.grad(fgrad.jit(_f)),
          "jit_grad": lambda: fgrad.jit(fgrad.grad(_f))}[wrap]()
    g = fn(Tensor(X))
    np.testing.assert_array_equal(g.numpy(), [2, 2, 2])
    assert _lines(capsys) == ["A sum=6.00", "B y=[2. 4. 6.]"]


@pytest.mark.parametrize("jit", [False, True])
def test_scan_body_in_order(capsys, jit):
    def body(c, xi):
        fgrad.debug.print("c={c} xi={xi}", c=c, xi=xi)
        return c + xi, c

    run = lambda x: lax.scan(body, Tensor(0.0), x)  # noqa: E731
    (fgrad.jit(run) if jit else run)(Tensor(X))
    assert _lines(capsys) == ["c=0.0 xi=1.0", "c=1.0 xi=2.0", "c=3.0 xi=3.0"]


def test_callback_receives_numpy_and_static_values():
    seen = []
    fgrad.jit(lambda x: fgrad.debug.callback(
        lambda a, tag, scale: seen.append((a.copy(), tag, scale)), x * 3, "t", scale=2))(
        Tensor(X))
    (arr, tag, scale), = seen
    assert isinstance(arr, np.ndarray) and tag == "t" and scale == 2
    np.testing.assert_array_equal(arr, X * 3)


@pytest.mark.parametrize("jit", [False, True])
def test_grad_of_scan_prints_in_forward_order(capsys, jit):
    def body(c, xi):
        fgrad.debug.print("c={c}", c=c)
        return c * xi, c

    g = fgrad.grad(lambda x: lax.scan(body, Tensor(1.0), x)[0])
    out = (fgrad.jit(g) if jit else g)(Tensor(X))
    np.testing.assert_allclose(out.numpy(), [6.0, 3.0, 2.0])
    assert _lines(capsys) == ["c=1.0", "c=1.0", "c=2.0"]


def test_cond_and_while_bodies(capsys):
    def g(p, v):
        return lax.cond(p, lambda v: (fgrad.debug.print("true {}", v), v)[1],
                        lambda v: (fgrad.debug.print("false {}", v), v * 0)[1], v)

    fgrad.jit(g)(Tensor(True), Tensor(X))
    fgrad.jit(g)(Tensor(False), Tensor(X))
    fgrad.jit(lambda v: lax.while_loop(
        lambda c: c < 3, lambda c: (fgrad.debug.print("i={}", c), c + 1)[1], v))(Tensor(0))
    assert _lines(capsys) == ["true [1. 2. 3.]", "false [1. 2. 3.]", "i=0", "i=1", "i=2"]
