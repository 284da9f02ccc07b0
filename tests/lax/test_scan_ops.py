"""fgrad.lax.scan_ops: `map` against a Python loop, `associative_scan` against NumPy's
cumulative ops and against a sequential left fold for non-commutative operators."""
from __future__ import annotations

from functools import reduce
from typing import Any

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lax.scan_ops import associative_scan, map as lax_map

RNG = np.random.default_rng(0)


def sequential(fn: Any, xs: list[Any], reverse: bool = False) -> list[Any]:
    """Inclusive prefix fold: [x0, fn(x0, x1), ...]; reversed: from the end, the later
    elements as fn's first argument (JAX's documented order)."""
    items = xs[::-1] if reverse else xs
    out = [items[0]]
    for x in items[1:]:
        out.append(fn(out[-1], x))
    return out[::-1] if reverse else out


def test_map_is_a_loop_over_the_leading_axis() -> None:
    xs = RNG.standard_normal((5, 3, 2)).astype(np.float32)
    got = lax_map(lambda x: (x @ x.T).sum(-1), Tensor(xs)).numpy()
    want = np.stack([(x @ x.T).sum(-1) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_map_over_pytrees() -> None:
    xs = {"a": RNG.standard_normal((4, 2)).astype(np.float32),
          "b": np.arange(4, dtype=np.int32)}
    got = lax_map(lambda d: (d["a"].sum() * d["b"], {"c": d["a"] * 2}),
                  fgrad.tree.map(Tensor, xs))
    np.testing.assert_allclose(got[0].numpy(), xs["a"].sum(1) * xs["b"], rtol=1e-6)
    np.testing.assert_allclose(got[1]["c"].numpy(), xs["a"] * 2)


@pytest.mark.parametrize("batch_size", [0, 1, 3, 4, 7, 10])
def test_map_in_batches_gives_the_same_results(batch_size: int) -> None:
    xs = RNG.standard_normal((7, 3)).astype(np.float32)
    got = lax_map(lambda x: {"n": (x * x).sum(), "y": x[::-1]}, Tensor(xs),
                  batch_size=batch_size)
    np.testing.assert_allclose(got["n"].numpy(), (xs * xs).sum(1), rtol=1e-6)
    np.testing.assert_array_equal(got["y"].numpy(), xs[:, ::-1])


def test_map_under_jit_and_grad() -> None:
    xs = np.random.default_rng(5).standard_normal((6, 2)).astype(np.float32)

    def loss(w: Any, xs: Any) -> Any:
        return lax_map(lambda x: (w * x).sin().sum(), xs, batch_size=4).sum()

    w = Tensor(np.array([0.5, -1.0], np.float32))
    got = fgrad.jit(fgrad.grad(loss))(w, Tensor(xs)).numpy()
    want = (np.cos(xs * w.numpy()) * xs).sum(0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # a sum of six float32 terms


def test_map_errors() -> None:
    with pytest.raises(TypeError, match="f must be callable"):
        lax_map(3, Tensor(np.ones(2)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_size must be a non-negative int"):
        lax_map(lambda x: x, Tensor(np.ones(2)), batch_size=-1)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 13, 16])
def test_cumulative_sum_product_and_max(n: int) -> None:
    x = RNG.uniform(0.5, 1.5, (n, 3)).astype(np.float32)
    t = Tensor(x)
    np.testing.assert_allclose(associative_scan(lambda a, b: a + b, t).numpy(),
                               np.cumsum(x, 0), rtol=1e-5)
    np.testing.assert_allclose(associative_scan(lambda a, b: a * b, t).numpy(),
                               np.cumprod(x, 0), rtol=1e-5)
    np.testing.assert_array_equal(associative_scan(lambda a, b: a.maximum(b), t).numpy(),
                                  np.maximum.accumulate(x, 0))


@pytest.mark.parametrize("n", [1, 2, 5, 8, 11])
@pytest.mark.parametrize("reverse", [False, True])
def test_non_commutative_matrix_products(n: int, reverse: bool) -> None:
    m = RNG.standard_normal((n, 2, 2)).astype(np.float32)
    got = associative_scan(lambda a, b: a @ b, Tensor(m), reverse=reverse).numpy()
    want = np.stack(sequential(lambda a, b: a @ b, list(m.astype(np.float64)), reverse))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def compose(f: Any, g: Any) -> Any:
    """Affine maps x -> a x + b as pytrees {"a", "b"}: first f, then g."""
    return {"a": g["a"] * f["a"], "b": g["a"] * f["b"] + g["b"]}


@pytest.mark.parametrize("reverse", [False, True])
def test_affine_composition_over_a_pytree_along_axis_1(reverse: bool) -> None:
    a = RNG.uniform(-1.5, 1.5, (3, 9)).astype(np.float32)
    b = RNG.standard_normal((3, 9)).astype(np.float32)
    got = associative_scan(compose, {"a": Tensor(a), "b": Tensor(b)}, reverse=reverse, axis=1)
    items = [{"a": a[:, i].astype(np.float64), "b": b[:, i].astype(np.float64)}
             for i in range(9)]
    want = sequential(compose, items, reverse)
    for key in "ab":
        np.testing.assert_allclose(got[key].numpy(), np.stack([w[key] for w in want], 1),
                                   rtol=1e-4, atol=1e-5)


def test_reverse_and_negative_axis_on_cumsum() -> None:
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    got = associative_scan(lambda a, b: a + b, Tensor(x), reverse=True, axis=-1).numpy()
    np.testing.assert_allclose(got, np.cumsum(x[:, ::-1], 1)[:, ::-1], rtol=1e-5, atol=1e-6)


def test_associative_scan_under_jit_and_grad() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0, 0.5], np.float32)
    f = fgrad.jit(lambda t: associative_scan(lambda a, b: a * b, t))
    np.testing.assert_allclose(f(Tensor(x)).numpy(), np.cumprod(x), rtol=1e-6)
    g = fgrad.grad(lambda t: associative_scan(lambda a, b: a * b, t).sum())(Tensor(x)).numpy()
    want = [sum(np.prod(x[:k + 1]) / x[i] for k in range(i, 5)) for i in range(5)]
    np.testing.assert_allclose(g, want, rtol=1e-5)


def test_associative_scan_errors() -> None:
    with pytest.raises(ValueError, match="same length along axis 0"):
        associative_scan(lambda a, b: a, [Tensor(np.ones(3)), Tensor(np.ones(4))])
    with pytest.raises(ValueError, match="axis=2 is out of range"):
        associative_scan(lambda a, b: a, Tensor(np.ones((2, 2))), axis=2)
    with pytest.raises(ValueError, match="no arrays"):
        associative_scan(lambda a, b: a, [])
    with pytest.raises(TypeError, match="fn returned a tree"):
        associative_scan(lambda a, b: a[0], (Tensor(np.ones(3)), Tensor(np.ones(3))))
