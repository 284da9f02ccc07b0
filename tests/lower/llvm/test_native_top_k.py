"""The llvm backend's native top_k (fgrad/lower/llvm/kernels/selection.py) against NumPy:
the first k entries of a stable argsort (lexsort by rank, then position), NaN largest,
-0.0 equal to +0.0, for every dtype the native sort takes, through the selection path (small
k), the sort path (k a large part of n) and rows that stop selecting (sorted against the
direction), split over the pool or not."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fgrad
import fgrad.lower  # noqa: F401  (registers the llvm compiler)
from fgrad import Tensor
from fgrad.core import prims as P
from fgrad.lower.llvm import runtime as llvm_runtime
from fgrad.lower.llvm import target
from fgrad.lower.llvm.kernels.selection import BLOCK_VECTORS, selects
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(17)
BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint32, np.uint64, np.float16, BF16,
          np.int8, np.uint8, np.int16, np.uint16]
# (shape, k): empty k, empty rows, no rows, k == n, one-element rows, rows shorter than a
# vector, k == 1, a selection with whole blocks and a tail, several leading dims, k a
# large part of n
CASES = [((2, 33), 0), ((3, 0), 0), ((0, 5), 2), ((3, 5), 5), ((4, 1), 1), ((3, 20), 1),
         ((2, 17), 2), ((3, 1000), 8), ((2, 3, 257), 5), ((2, 300), 150)]


def _is_float(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "f" or np.dtype(dtype) == BF16


def reference(x: np.ndarray, k: int, descending: bool) -> tuple[np.ndarray, np.ndarray]:
    """NumPy's stable order along the last axis (ranks from np.unique: -0.0 == +0.0, NaNs
    one rank above every number), its first k positions and the values there."""
    key = x.astype(np.float64) if _is_float(x.dtype) else x
    rank = np.unique(key, return_inverse=True)[1].reshape(x.shape)
    position = np.broadcast_to(np.arange(x.shape[-1]), x.shape)
    order = np.lexsort((position, -rank if descending else rank), axis=-1)[..., :k]
    return np.take_along_axis(x, order, -1), order.astype(np.int32)


def sample(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Many ties; floats get NaNs, both zeros and infinities, integers their extremes."""
    flat_size = math.prod(shape)
    if _is_float(dtype):
        x = RNG.integers(-6, 6, flat_size).astype(np.float64)
        for value, share in ((np.nan, 0.1), (-0.0, 0.1), (0.0, 0.1), (np.inf, 0.02),
                             (-np.inf, 0.02)):
            x[RNG.random(flat_size) < share] = value
        return x.astype(dtype).reshape(shape)
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, flat_size, dtype=dtype, endpoint=True)
    x[RNG.random(flat_size) < 0.5] = RNG.integers(0, 4, flat_size)[:1]   # a repeated key
    x[RNG.random(flat_size) < 0.05] = info.min
    x[RNG.random(flat_size) < 0.05] = info.max
    return x.reshape(shape)


def check(x: np.ndarray, k: int, descending: bool) -> None:
    """top_k under jit on llvm equals `reference`: the indices, and the values bit for bit."""
    values, indices = fgrad.jit(lambda t: P.top_k(t, k, descending), backend="llvm")(
        Tensor(x))
    want_values, want_indices = reference(x, k, descending)
    np.testing.assert_array_equal(indices.numpy(), want_indices)
    bits = np.dtype(f"u{x.dtype.itemsize}")
    got = values.numpy()
    assert got.dtype == x.dtype and got.shape == want_values.shape
    np.testing.assert_array_equal(got.view(bits), want_values.view(bits))


@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize("dtype", DTYPES, ids=[np.dtype(d).name for d in DTYPES])
def test_top_k_matches_numpy(dtype: np.dtype, descending: bool) -> None:
    for shape, k in CASES:
        check(sample(shape, dtype), k, descending)


def test_cases_cover_both_paths() -> None:
    """The selection (with and without whole blocks) and the sort path are both exercised."""
    lanes = target.vector_bits() // 32
    assert selects(20, 1) and 20 < lanes * BLOCK_VECTORS
    assert selects(1000, 8) and selects(257, 5)
    assert not selects(300, 150) and not selects(5, 5) and not selects(33, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64, np.uint8])
@pytest.mark.parametrize("k", [1, 3, 40])
def test_sorted_rows_force_insertions(dtype: np.dtype, k: int) -> None:
    """Rows sorted against the direction make every element enter the buffer (and stop the
    selection: the row is sorted instead); along it, none after the first k."""
    assert selects(1000, k)
    row = np.sort(RNG.integers(0, 200, 1000)).astype(dtype)
    x = np.stack([row, row[::-1], np.roll(row, 500)])
    for descending in (True, False):
        check(x, k, descending)


def test_rows_split_over_the_pool() -> None:
    from fgrad.lower.llvm.threads import describe_threads
    x = RNG.standard_normal((64, 4096)).astype(np.float32)
    x[:, ::7] = x[:, :1]   # ties across each row
    jaxpr = open_jaxpr(fgrad.make_jaxpr(lambda t: P.top_k(t, 6))(Tensor(x)))[0]
    assert "split" in describe_threads(llvm_runtime.plan(jaxpr))
    check(x, 6, True)
    check(x, 600, False)   # the sort path, split too


def test_top_k_is_one_library_call() -> None:
    x = Tensor(RNG.standard_normal((8, 1024)).astype(np.float32))
    program = llvm_runtime.plan(open_jaxpr(fgrad.make_jaxpr(lambda t: P.top_k(t, 4))(x))[0])
    assert [e.primitive.name for e in program.library_calls.values()] == ["top_k"]
    assert not program.kernels
    flags = Tensor(RNG.random((4, 64)) < 0.5)   # bool: a sort network and a slice
    program = llvm_runtime.plan(open_jaxpr(fgrad.make_jaxpr(lambda t: P.top_k(t, 4))(
        flags))[0])
    assert not program.library_calls and program.kernels


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 3), n=st.integers(1, 80), k_share=st.floats(0, 1),
       descending=st.booleans(), data=st.data())
def test_top_k_property_matches_stable_argsort(rows: int, n: int, k_share: float,
                                               descending: bool, data: st.DataObject) -> None:
    """Any row of few distinct float32 values (NaN included), any k: NumPy's stable argsort
    of the negated (or plain) keys gives the same first k positions."""
    k = min(n, int(k_share * (n + 1)))
    choices = st.sampled_from([-2.0, -1.0, -0.0, 0.0, 1.0, 2.5, np.nan, np.inf])
    x = np.array(data.draw(st.lists(choices, min_size=rows * n, max_size=rows * n)),
                 np.float32).reshape(rows, n)
    values, indices = fgrad.jit(lambda t: P.top_k(t, k, descending), backend="llvm")(
        Tensor(x))
    wide = x.astype(np.float64) + 0.0   # -0.0 as +0.0
    key = np.where(np.isnan(wide), np.inf, np.where(np.isposinf(wide), 1e300, wide))
    order = np.argsort(-key if descending else key, axis=-1, kind="stable")[:, :k]
    np.testing.assert_array_equal(indices.numpy(), order)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, order, -1))
