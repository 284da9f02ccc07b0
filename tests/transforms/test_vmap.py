"""vmap: in_axes/out_axes (ints, None, negative, pytree prefixes), axis_size, nesting, errors,
and per-example gradients, each against a Python loop over examples or NumPy."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, dtypes

pytestmark = pytest.mark.backends  # jit tests run per backend (conftest.py)

RNG = np.random.default_rng(0)


def T(a: Any) -> Tensor:
    return Tensor(np.asarray(a, np.float64))


def close(got: Any, want: Any, tol: float = 1e-12) -> None:
    got = got.numpy() if isinstance(got, Tensor) else got
    np.testing.assert_allclose(got, np.asarray(want, np.float64), rtol=tol, atol=tol)


A = RNG.normal(size=(3, 4))
B = RNG.normal(size=(4,))
C = RNG.normal(size=(2, 3, 4))


def loop(fn: Callable[..., Any], args: list[Any], axes: list[int | None], size: int,
         out_axis: int = 0) -> np.ndarray:
    """Reference: apply fn per example (NumPy slices) and stack along out_axis."""
    outs = []
    for i in range(size):
        ex = [T(np.take(a, i, axis=ax)) if ax is not None else T(a)
              for a, ax in zip(args, axes, strict=True)]
        outs.append(fn(*ex).numpy())
    return np.stack(outs, axis=out_axis)


# ---------------------------------------------------------------------------- in_axes

@pytest.mark.parametrize("in_axes", [(0, None), (1, 0), (-1, None), (-2, 0), (None, 0)])
def test_in_axes_ints_none_negative(in_axes: tuple) -> None:
    def f(x: Tensor, y: Tensor) -> Tensor:
        return (x * y.sum()).sin() + y.max()

    x = RNG.normal(size=(3, 3))
    y = RNG.normal(size=(3, 2)) if in_axes[1] is not None else RNG.normal(size=(2,))
    size = 3
    got = fgrad.vmap(f, in_axes=in_axes)(T(x), T(y))
    close(got, loop(f, [x, y], list(in_axes), size))


def test_in_axes_single_int_applies_to_all() -> None:
    got = fgrad.vmap(lambda x, y: x @ y, in_axes=1)(T(C), T(RNG.normal(size=(4, 3, 2))))
    assert got.shape == (3, 2, 2)


def test_in_axes_dict_prefix() -> None:
    def f(p: dict, x: Tensor) -> Tensor:
        return p["w"] @ x + p["b"]

    p = {"w": RNG.normal(size=(2, 4)), "b": RNG.normal(size=(5, 2))}
    x = RNG.normal(size=(4, 5))
    got = fgrad.vmap(f, in_axes=({"w": None, "b": 0}, 1))({"w": T(p["w"]), "b": T(p["b"])},
                                                          T(x))
    want = np.stack([p["w"] @ x[:, i] + p["b"][i] for i in range(5)])
    close(got, want)


def test_in_axes_nested_tuple_prefix_and_list() -> None:
    def f(pair: tuple, s: Tensor) -> Tensor:
        return pair[0] + pair[1] * s

    got = fgrad.vmap(f, in_axes=((0, 1), None))((T(A), T(A.T)), T(2.0))
    close(got, A + 2 * A)
    got = fgrad.vmap(f, in_axes=[(0, 1), None])((T(A), T(A.T)), T(2.0))
    close(got, 3 * A)


def test_in_axes_prefix_broadcasts_over_subtree() -> None:
    tree = {"a": T(A), "b": (T(A * 2), T(A * 3))}
    got = fgrad.vmap(lambda t: t["a"] + t["b"][0] - t["b"][1], in_axes=({"a": 1, "b": 1},))(tree)
    close(got, (A + 2 * A - 3 * A).T)


# ---------------------------------------------------------------------------- out_axes

@pytest.mark.parametrize("out_axes", [0, 1, 2, -1, -3])
def test_out_axes(out_axes: int) -> None:
    got = fgrad.vmap(lambda x: x.exp(), out_axes=out_axes)(T(C))
    close(got, np.moveaxis(np.exp(C), 0, out_axes))


def test_out_axes_pytree_and_none() -> None:
    def f(x: Tensor, w: Tensor) -> tuple:
        return {"sum": x.sum(), "rows": x * 2}, w * 3

    out, w3 = fgrad.vmap(f, in_axes=(0, None), out_axes=({"sum": 0, "rows": 1}, None))(
        T(A), T(B))
    close(out["sum"], A.sum(1))
    close(out["rows"], (2 * A).T)
    close(w3, 3 * B)


def test_unbatched_output_is_broadcast() -> None:
    got = fgrad.vmap(lambda x, y: y * 2, in_axes=(0, None))(T(A), T(B))
    close(got, np.broadcast_to(2 * B, (3, 4)))


def test_axis_size_with_no_mapped_input() -> None:
    got = fgrad.vmap(lambda y: y.sum(), in_axes=None, axis_size=5)(T(B))
    close(got, np.full(5, B.sum()))


def test_python_scalars_keep_eager_dtypes() -> None:
    x16 = Tensor(np.ones((2, 3), np.float16))
    got = fgrad.vmap(lambda x, s: x * s, in_axes=(0, None))(x16, 2.0)
    assert got.dtype == (x16[0] * 2.0).dtype == dtypes.float16


# ---------------------------------------------------------------------------- nesting

def test_nested_vmap_outer_product() -> None:
    outer = fgrad.vmap(fgrad.vmap(lambda a, b: a * b, in_axes=(None, 0)), in_axes=(0, None))
    close(outer(T(A[:, 0]), T(B)), np.outer(A[:, 0], B))


def test_nested_vmap_matches_double_loop() -> None:
    def f(x: Tensor, y: Tensor) -> Tensor:
        return (x.softmax() * y).sum()

    y = RNG.normal(size=(3, 4))
    got = fgrad.vmap(fgrad.vmap(f, in_axes=(1, 1)), in_axes=(0, None))(T(C), T(y))
    want = np.array([[f(T(C[i][:, j]), T(y[:, j])).numpy() for j in range(4)]
                     for i in range(2)])
    close(got, want)


@pytest.mark.parametrize("name,fn", [
    ("matmul", lambda x: x @ x.T),
    ("softmax", lambda x: x.softmax(-1)),
    ("index", lambda x: x[1:, ::2] * x[0, 1]),
    ("gather", lambda x: x.gather(1, Tensor([[0, 2], [1, 1], [3, 0]]))),
    ("where", lambda x: (x > 0).where(x, x * 0.1)),
    ("cumsum", lambda x: x.cumsum(1).flip(0)),
    ("pad-reshape", lambda x: x.pad(((1, 0), (0, 2))).reshape(-1)),
    ("sort", lambda x: x.sort(-1)[0]),
])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_composite_ops_match_loop(name: str, fn: Callable[..., Any], axis: int) -> None:
    x = RNG.normal(size=(3, 4))
    stacked = np.stack([x * (i + 1) for i in range(2)], axis=axis)
    close(fgrad.vmap(fn, in_axes=axis)(T(stacked)), loop(fn, [stacked], [axis], 2))


# ---------------------------------------------------------------------------- errors

def test_error_mismatched_sizes() -> None:
    with pytest.raises(ValueError, match="different sizes") as err:
        fgrad.vmap(lambda x, y: x + y)(T(A), T(B))
    assert "3" in str(err.value) and "4" in str(err.value)


def test_error_out_axes_none_with_batched_output() -> None:
    with pytest.raises(ValueError, match="out_axes=None"):
        fgrad.vmap(lambda x, y: x * y, in_axes=(0, None), out_axes=None)(T(A), T(B))


def test_error_in_axes_out_of_range() -> None:
    with pytest.raises(ValueError, match="in_axes 2 is out of range"):
        fgrad.vmap(lambda x: x, in_axes=2)(T(A))
    with pytest.raises(ValueError, match="out of range"):
        fgrad.vmap(lambda x: x, in_axes=-3)(T(A))
    with pytest.raises(ValueError, match="out of range"):
        fgrad.vmap(lambda x: x)(T(1.0))


def test_error_out_axes_out_of_range() -> None:
    with pytest.raises(ValueError, match="out_axes"):
        fgrad.vmap(lambda x: x, out_axes=2)(T(A))


def test_error_in_axes_length_and_structure() -> None:
    with pytest.raises(ValueError, match="2 entries"):
        fgrad.vmap(lambda x: x, in_axes=(0, 0))(T(A))
    with pytest.raises(ValueError, match="keys"):
        fgrad.vmap(lambda d: d["a"], in_axes=({"b": 0},))({"a": T(A)})


def test_error_nothing_mapped_without_axis_size() -> None:
    with pytest.raises(ValueError, match="axis_size"):
        fgrad.vmap(lambda x: x, in_axes=None)(T(A))


def test_error_python_control_flow_on_batched_value() -> None:
    with pytest.raises(fgrad.ConcretizationError, match="batch of 3") as err:
        fgrad.vmap(lambda x: x if x.sum() > 0 else -x)(T(A))
    assert "where" in str(err.value) and "cond" in str(err.value)


# ---------------------------------------------------------------------------- per-example

def _mlp_params() -> dict:
    return {"w1": T(RNG.normal(size=(3, 5)) * 0.5), "b1": T(RNG.normal(size=(5,))),
            "w2": T(RNG.normal(size=(5, 2)) * 0.5), "b2": T(RNG.normal(size=(2,)))}


def _loss(params: dict, example: tuple) -> Tensor:
    x, y = example
    hidden = (x @ params["w1"] + params["b1"]).tanh()
    out = hidden @ params["w2"] + params["b2"]
    return ((out - y) ** 2).mean()


@pytest.mark.parametrize("wrap", [lambda f: f, fgrad.jit], ids=["eager", "jit"])
def test_per_example_gradients_match_loop(wrap: Callable[..., Any]) -> None:
    params = _mlp_params()
    xs, ys = T(RNG.normal(size=(6, 3))), T(RNG.normal(size=(6, 2)))
    per_ex = wrap(fgrad.vmap(fgrad.grad(_loss), in_axes=(None, 0)))(params, (xs, ys))
    assert set(per_ex) == set(params)
    for i in range(6):
        g = fgrad.grad(_loss)(params, (xs[i], ys[i]))
        for k in params:
            assert per_ex[k].shape == (6,) + params[k].shape
            close(per_ex[k].numpy()[i], g[k], 1e-10)
    mean_grad = fgrad.grad(lambda p: fgrad.vmap(_loss, in_axes=(None, 0))(p, (xs, ys)).mean())(
        params)
    for k in params:
        close(per_ex[k].numpy().mean(0), mean_grad[k], 1e-10)
