"""fgrad.flatten_util.ravel_pytree (jax.flatten_util's): order, dtypes, round trips, and
use under jit, grad and vmap."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.flatten_util import ravel_pytree

D = fgrad.dtypes


def _np_tree(tree: Any) -> Any:
    return fgrad.tree.map(lambda x: x.numpy(), tree)


def test_round_trip_keeps_order_shapes_and_values() -> None:
    tree = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": [np.float32(-1.0),
            (np.ones((1, 2), np.float32),)], "s": Tensor(np.float32(7.0))}
    flat, unravel = ravel_pytree(tree)
    # dict keys in sorted order, then leaves depth first
    np.testing.assert_array_equal(flat.numpy(), [-1, 1, 1, 7, 0, 1, 2, 3, 4, 5])
    assert flat.dtype == D.float32 and flat.shape == (10,)
    back = unravel(flat)
    assert fgrad.tree.structure(back) == fgrad.tree.structure(tree)
    np.testing.assert_array_equal(back["w"].numpy(), tree["w"])
    assert back["b"][1][0].shape == (1, 2) and back["s"].shape == ()
    doubled = unravel(flat * 2)
    np.testing.assert_array_equal(doubled["w"].numpy(), 2 * tree["w"])


def test_mixed_dtypes_promote_and_cast_back() -> None:
    tree = {"h": np.ones(3, np.float16), "i": np.arange(2, dtype=np.int32),
            "m": np.array([True, False]), "p": 2.5}
    flat, unravel = ravel_pytree(tree)
    assert flat.dtype == D.float32  # float16 with int32, bool and a Python float
    np.testing.assert_array_equal(flat.numpy(), [1, 1, 1, 0, 1, 1, 0, 2.5])
    back = unravel(flat + 0.25)
    assert [back[k].dtype for k in "himp"] == [D.float16, D.int32, D.bool, D.float32]
    np.testing.assert_array_equal(back["i"].numpy(), [0, 1])  # 0.25, 1.25 cast back
    with pytest.raises(TypeError, match="expected float32"):
        unravel(flat.cast(D.float16))
    ints, unravel_ints = ravel_pytree([np.int8(3), np.arange(2, dtype=np.int16)])
    assert ints.dtype == D.int16
    assert unravel_ints(ints)[0].dtype == D.int8
    f16, unravel16 = ravel_pytree([np.ones(2, np.float16), np.zeros(1, np.int8)])
    assert f16.dtype == D.float16


def test_single_dtype_unravel_takes_any_dtype() -> None:
    flat, unravel = ravel_pytree({"a": np.ones(2, np.float32), "b": np.zeros((1, 1), np.float32)})
    back = unravel(flat.cast(D.float64))
    assert back["a"].dtype == D.float64 and back["b"].shape == (1, 1)


def test_empty_tree() -> None:
    for tree in ({}, [], (None,), {"a": []}):
        flat, unravel = ravel_pytree(tree)
        assert flat.shape == (0,) and flat.dtype == D.float32
        assert unravel(flat) == tree


def test_unravel_checks_the_length() -> None:
    flat, unravel = ravel_pytree([np.ones(3, np.float32)])
    with pytest.raises(ValueError, match="length 3, got shape \\(4,\\)"):
        unravel(np.ones(4, np.float32))


def test_under_jit_grad_and_vmap() -> None:
    params = {"w": Tensor(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)),
              "b": Tensor(np.array([0.5, -0.5], np.float32))}
    flat, unravel = ravel_pytree(params)

    def loss(vec: Any) -> Any:
        p = unravel(vec)
        return (p["w"] ** 2).sum() + 3 * p["b"].sum()

    np.testing.assert_allclose(fgrad.grad(loss)(flat).numpy(), [3, 3, 2, 4, 6, 8])
    np.testing.assert_allclose(fgrad.jit(loss)(flat).numpy(), 30.0)
    jitted = fgrad.jit(lambda tree: ravel_pytree(tree)[0])(params)
    np.testing.assert_array_equal(jitted.numpy(), flat.numpy())
    round_trip = fgrad.jit(lambda tree: ravel_pytree(tree)[1](ravel_pytree(tree)[0] + 1))
    np.testing.assert_array_equal(round_trip(params)["w"].numpy(), params["w"].numpy() + 1)
    batch = {"x": Tensor(np.arange(8, dtype=np.float32).reshape(4, 2)),
             "y": Tensor(np.ones((4, 3), np.int32))}
    rows = fgrad.vmap(lambda t: ravel_pytree(t)[0])(batch)
    want = np.concatenate([np.arange(8).reshape(4, 2), np.ones((4, 3))], 1)
    assert rows.shape == (4, 5) and rows.dtype == D.float32
    np.testing.assert_array_equal(rows.numpy(), want)
    # grad through ravel itself: d/dtree of sum(flat ** 2)
    g = fgrad.grad(lambda tree: (ravel_pytree(tree)[0] ** 2).sum())(params)
    np.testing.assert_allclose(_np_tree(g)["w"], 2 * params["w"].numpy())


def test_unravel_is_hashable_and_equal_for_equal_trees() -> None:
    tree = {"a": np.ones(2, np.float32)}
    assert ravel_pytree(tree)[1] == ravel_pytree(tree)[1]
    assert hash(ravel_pytree(tree)[1]) == hash(ravel_pytree(tree)[1])
    assert fgrad.flatten_util.ravel_pytree is ravel_pytree


def test_array_is_tensor() -> None:
    assert fgrad.Array is Tensor
    assert isinstance(ravel_pytree([1.0])[0], fgrad.Array)
