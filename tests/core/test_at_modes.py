"""`x.at[idx].get/set/add/...(mode=...)`: JAX's out-of-range modes against element-by-element
NumPy loops. Negative indices count from the end; "fill" reads fill_value where an index is
outside [-n, n), "clip" clamps into the axis, "drop" (and "fill") skip such updates."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fgrad
from fgrad import Tensor

X = np.arange(5, dtype=np.float32) * 1.5 - 2
Y = np.arange(12, dtype=np.float32).reshape(3, 4)
OPS = {"set": lambda old, v: v, "add": lambda old, v: old + v, "mul": lambda old, v: old * v,
       "min": min, "max": max}


def _norm(i: int, n: int, mode: str) -> int | None:
    """Where index i lands on an axis of length n: None if dropped/filled."""
    i = i + n if i < 0 else i
    if mode == "clip":
        return min(max(i, 0), n - 1)
    return i if 0 <= i < n else None


def ref_get(x: np.ndarray, idx: list[tuple[int, ...]], mode: str, fill: Any) -> np.ndarray:
    """Gather of whole points (one index per axis) x[i, j, ...] in a loop."""
    out = []
    for point in idx:
        where = [_norm(i, n, mode) for i, n in zip(point, x.shape)]
        out.append(fill if None in where else x[tuple(where)])
    return np.array(out, x.dtype)


def ref_update(x: np.ndarray, idx: list[tuple[int, ...]], op: str, v: float,
               mode: str) -> np.ndarray:
    out = x.copy()
    for point in idx:
        where = [_norm(i, n, mode) for i, n in zip(point, x.shape)]
        if None not in where:
            out[tuple(where)] = OPS[op](out[tuple(where)], v)
    return out


IDX_1D = [10, -7, -1, 2, -5, 5, 0, 4]


@pytest.mark.parametrize("mode", ["fill", "clip", "drop", "promise_in_bounds"])
def test_get_1d(mode: str) -> None:
    read = {"drop": "fill", "promise_in_bounds": "clip"}.get(mode, mode)
    got = Tensor(X).at[np.array(IDX_1D)].get(mode=mode, fill_value=-100.0)
    want = ref_get(X, [(i,) for i in IDX_1D], read, -100.0 if read == "fill" else None)
    np.testing.assert_array_equal(got.numpy(), want)
    for i in (7, -6, -1, 3):  # scalar indices follow the same rules
        one = Tensor(X).at[i].get(mode=mode, fill_value=-100.0)
        assert one.shape == () and one.numpy() == ref_get(X, [(i,)], read, -100.0)[0]


@pytest.mark.parametrize("mode", ["fill", "clip"])
def test_get_2d_points_rows_and_slices(mode: str) -> None:
    i, j = [0, 3, -1, 2, -4], [4, 1, -5, -4, 0]
    got = Tensor(Y).at[np.array(i), np.array(j)].get(mode=mode, fill_value=0)
    np.testing.assert_array_equal(got.numpy(), ref_get(Y, list(zip(i, j)), mode, 0))
    rows = Tensor(Y).at[np.array([5, 1, -4])].get(mode=mode, fill_value=0).numpy()
    want = np.stack([ref_get(Y, [(r, c) for c in range(4)], mode, 0) for r in (5, 1, -4)])
    np.testing.assert_array_equal(rows, want)
    cols = Tensor(Y).at[1:, np.array([5, 1])].get(mode=mode, fill_value=0).numpy()
    want = np.stack([ref_get(Y, [(r, c) for c in (5, 1)], mode, 0) for r in (1, 2)])
    np.testing.assert_array_equal(cols, want)
    np.testing.assert_array_equal(Tensor(Y).at[..., np.array([7, 0])].get(
        mode=mode, fill_value=0).numpy(), np.stack(
        [ref_get(Y, [(r, c) for c in (7, 0)], mode, 0) for r in range(3)]))


def test_get_places_int_and_array_indices_as_plain_indexing_does() -> None:
    z = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got = Tensor(z).at[0, :, np.array([1, 2])].get(mode="fill")
    # the int applies first, as in plain indexing (PyTorch's rule): shape (3, 2)
    np.testing.assert_array_equal(got.numpy(), z[0][:, [1, 2]])
    np.testing.assert_array_equal(got.numpy(), Tensor(z)[0, :, [1, 2]].numpy())
    got = Tensor(z).at[np.array([[0], [5]]), None, np.array([1, 2])].get(mode="fill",
                                                                         fill_value=-1)
    # axes 0 and 1 indexed, apart (None between): the index dims go first, (2, 2, 1, 4)
    want = np.full((2, 2, 1, 4), -1, np.float32)
    want[0, :, 0] = z[0, [1, 2]]
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("dtype,fill", [(np.float32, np.nan), (np.float16, np.nan),
                                        (np.int32, -2 ** 31), (np.int8, -128),
                                        (np.uint8, 255), (np.bool_, True)])
def test_default_fill_values(dtype: Any, fill: Any) -> None:
    x = (np.arange(5) % 2).astype(dtype)
    got = Tensor(x).at[np.array([10, -1, -6])].get(mode="fill").numpy()
    np.testing.assert_array_equal(got, np.array([fill, x[-1], fill], dtype))


def test_fill_value_is_cast_to_the_dtype() -> None:
    got = Tensor(np.arange(5, dtype=np.int32)).at[np.array([10, 1])].get(mode="fill",
                                                                          fill_value=-1.5)
    np.testing.assert_array_equal(got.numpy(), [-1, 1])
    got = Tensor(np.arange(5, dtype=np.uint8)).at[np.array([10])].get(mode="fill",
                                                                       fill_value=-1)
    np.testing.assert_array_equal(got.numpy(), [255])


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("mode", ["drop", "clip", "fill", "promise_in_bounds"])
def test_updates(op: str, mode: str) -> None:
    write = "clip" if mode == "clip" else "drop"
    idx = [10, -7, -1, 7, 2, 2]
    got = getattr(Tensor(X).at[np.array(idx)], op)(3.0, mode=mode)
    np.testing.assert_array_equal(got.numpy(), ref_update(X, [(i,) for i in idx], op, 3.0,
                                                          write))
    for i in (7, -6, -2):
        got = getattr(Tensor(X).at[i], op)(3.0, mode=mode)
        np.testing.assert_array_equal(got.numpy(), ref_update(X, [(i,)], op, 3.0, write))
    i, j = [0, 3, -1, 1], [4, 1, -5, -1]
    got = getattr(Tensor(Y).at[np.array(i), np.array(j)], op)(-1.0, mode=mode)
    np.testing.assert_array_equal(got.numpy(), ref_update(Y, list(zip(i, j)), op, -1.0,
                                                          write))


def test_update_rows_with_array_values() -> None:
    got = Tensor(Y).at[np.array([5, 1])].set(np.array([[-1.0], [-2.0]], np.float32),
                                             mode="drop")
    want = Y.copy()
    want[1] = -2
    np.testing.assert_array_equal(got.numpy(), want)
    got = Tensor(Y).at[np.array([5, -9])].set(np.array([[-1.0], [-2.0]], np.float32),
                                              mode="clip")
    want = Y.copy()
    want[2], want[0] = -1, -2
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.backends
@pytest.mark.parametrize("mode", ["fill", "clip", "drop"])
def test_traced_indices_under_jit(mode: str, jit_backend: Any) -> None:
    read = "clip" if mode == "clip" else "fill"
    write = "clip" if mode == "clip" else "drop"
    i, j = np.array([5, 1, -1, -9]), np.array([0, 9, -9, 2])
    get = fgrad.jit(lambda a, i, j: a.at[i, j].get(mode=mode, fill_value=-3.0))
    np.testing.assert_array_equal(get(Tensor(Y), Tensor(i), Tensor(j)).numpy(),
                                  ref_get(Y, list(zip(i, j)), read, -3.0))
    add = fgrad.jit(lambda a, i, j: a.at[i, j].add(10.0, mode=mode))
    np.testing.assert_array_equal(add(Tensor(Y), Tensor(i), Tensor(j)).numpy(),
                                  ref_update(Y, list(zip(i, j)), "add", 10.0, write))
    one = fgrad.jit(lambda a, k: a.at[k].set(9.0, mode=mode))(Tensor(X), Tensor(np.int32(-6)))
    np.testing.assert_array_equal(one.numpy(), ref_update(X, [(-6,)], "set", 9.0, write))


def test_gradients_and_vmap() -> None:
    idx = np.array([1, 9, 1, -1])
    g = fgrad.grad(lambda a: (a.at[idx].get(mode="fill", fill_value=0.0) ** 2).sum())(
        Tensor(X)).numpy()
    want = np.zeros(5, np.float32)
    want[1], want[4] = 4 * X[1], 2 * X[4]
    np.testing.assert_allclose(g, want)
    g = fgrad.grad(lambda a: (a.at[idx].set(2.0, mode="drop") ** 2).sum())(Tensor(X)).numpy()
    np.testing.assert_allclose(g, np.where(np.isin(np.arange(5), [1, 4]), 0, 2 * X))
    g = fgrad.grad(lambda a: a.at[idx].get(mode="clip").sum())(Tensor(X)).numpy()
    np.testing.assert_array_equal(g, [0, 2, 0, 0, 2])
    rows = fgrad.vmap(lambda r, k: r.at[k].get(mode="fill", fill_value=-1.0))(
        Tensor(Y), Tensor(np.array([5, 1, -1])))
    np.testing.assert_array_equal(rows.numpy(), [-1, Y[1, 1], Y[2, 3]])


def test_hints_accepted_and_default_unchanged() -> None:
    got = Tensor(X).at[np.array([0, 2])].get(mode="fill", indices_are_sorted=True,
                                             unique_indices=True)
    np.testing.assert_array_equal(got.numpy(), X[[0, 2]])
    got = Tensor(X).at[np.array([3, 1])].add(1.0, indices_are_sorted=False,
                                             unique_indices=True, mode="drop")
    np.testing.assert_array_equal(got.numpy(), X + np.isin(np.arange(5), [1, 3]))
    with pytest.raises(IndexError, match="out of bounds"):
        Tensor(X).at[7].get()  # plain indexing keeps checking eagerly
    with pytest.raises(IndexError, match="out of bounds"):
        Tensor(X).at[np.array([7])].set(1.0)
    np.testing.assert_array_equal(Tensor(X).at[1].get(fill_value=5.0).numpy(), X[1])


def test_errors_name_the_fix() -> None:
    with pytest.raises(ValueError, match="unknown mode 'bogus'.*'clip', 'fill', 'drop'"):
        Tensor(X).at[1].get(mode="bogus")
    with pytest.raises(ValueError, match=r"x.at\[...\].add: unknown mode 'wrap'"):
        Tensor(X).at[1].add(1.0, mode="wrap")
    with pytest.raises(TypeError, match="fill_value must be a concrete scalar"):
        Tensor(X).at[1].get(mode="fill", fill_value=[1.0, 2.0])
