"""Acceptance tests of `Tensor.__getitem__` and `x.at[index]` updates against NumPy."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fgrad
from fgrad import Tensor, dtypes

A = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5) - 50


def to_numpy_index(index):
    """The same index with fgrad Tensors replaced by NumPy arrays (for the reference)."""
    if isinstance(index, tuple):
        return tuple(to_numpy_index(i) for i in index)
    return index.numpy() if isinstance(index, Tensor) else index


def check_getitem(x, index):
    ref = x[to_numpy_index(index)]
    out = Tensor(x)[index]
    assert out.shape == ref.shape and out.dtype.np == ref.dtype
    np.testing.assert_array_equal(out.numpy(), ref)


BASIC = [
    0, -1, 1, (1, 2), (-2, -1, 3), (slice(None), 1), (Ellipsis, 2), (0, Ellipsis, -1),
    slice(None, None, -1), (slice(None), slice(None, None, -2)), (slice(3, 0, -1),),
    (slice(None), slice(2, -5, -1)), (slice(5, 1),), (slice(None), slice(10, 20)),
    (slice(-100, 100),), (slice(None, None, 3),), (1, slice(1, None, 2), slice(None, None, -3), 3),
    (None, 0), (0, None, slice(1, 3)), (Ellipsis, None), (None, Ellipsis, None, 0),
    (1, Ellipsis, slice(None, None, 3)), (np.int64(1), np.int32(2)), (Ellipsis,), (),
    (slice(1, 2), slice(0, 0), 0), (None, None, 1, None), (slice(-1, -4, -2), None, 2),
]


@pytest.mark.parametrize("index", BASIC, ids=repr)
def test_basic_indexing(index):
    check_getitem(A, index)


ADVANCED = [
    ([0, 1],), ([1, 0, 1], [2, 0, 1]), (slice(None), [2, 0]), (slice(None), [0, 2], [1, 3]),
    (slice(None), [0, 2], slice(None), [1, 3]), ([0, 1], slice(None), [1, 2]),
    (np.array([[0, 1], [1, 0]]),), (slice(None), np.array([[0, 1], [2, 2]]), 0),
    (0, [0, 2], [1, 3]), ([-1, -2],), (Ellipsis, [0, 4]), (Ellipsis, [-1, 0], slice(1, 3)),
    (None, [0, 1], None), ([[0]], None, [1]), (Tensor([1, 0]),),
    (slice(None), Tensor([[1], [2]]), Tensor([0, 3])), (slice(None), Tensor([2, 0], dtype="int8")),
    (np.array([1, 0], np.uint8), slice(None, None, -1)), ([], ), (slice(None), np.array([], int)),
    ([1, 0], Ellipsis, [0, 2]), (slice(None), [[0], [2]], [[1, 3]], slice(1, 2)),
    (np.array([0, 1], np.int64), np.array(2), slice(None), np.array([[4], [0]])),
]


@pytest.mark.parametrize("index", ADVANCED, ids=repr)
def test_integer_array_indexing(index):
    check_getitem(A, index)


def test_int_with_separated_array_index_follows_pytorch():
    # NumPy counts an int as an advanced index when an array index is present, so
    # A[0, :, [1, 2]] has shape (2, 3, 5) there. fgrad applies the int first (as PyTorch and
    # tinygrad do): A[0][:, [1, 2]], shape (3, 2, 5).
    out = Tensor(A)[0, :, [1, 2]]
    np.testing.assert_array_equal(out.numpy(), A[0][:, [1, 2]])
    # a traced scalar index acts as the int does (it once took NumPy's placement under jit)
    traced = fgrad.jit(lambda t, i: t[i, :, [1, 2]])(Tensor(A), 0)
    np.testing.assert_array_equal(traced.numpy(), A[0][:, [1, 2]])
    traced = fgrad.jit(lambda t, i: t[[0, 1], i, :, [2, 0]])(Tensor(A), 1)
    np.testing.assert_array_equal(traced.numpy(), A[:, 1][[0, 1], :, [2, 0]])
    updated = fgrad.jit(lambda t, i: t.at[i, :, [1, 2]].set(0))(Tensor(A), 1)
    expected = A.copy()
    expected[1][:, [1, 2]] = 0
    np.testing.assert_array_equal(updated.numpy(), expected)


@pytest.mark.parametrize("mask", [
    A[:, 0, 0, 0] > -50, A[..., 0] > -20, A[:, :, 0, 0] > -20, A > 0, np.zeros(2, bool),
])
def test_bool_mask_indexing(mask):
    check_getitem(A, (mask,))
    check_getitem(A, (Tensor(mask),))


def test_bool_mask_combined_with_other_indices():
    check_getitem(A, (slice(None), np.array([True, False, True])))
    check_getitem(A, (slice(1, None), Ellipsis, np.array([True, False, False, True, True])))
    check_getitem(A, (None, np.array([False, True]), 1))


def test_bool_mask_cannot_be_traced():
    mask = Tensor(A[:, 0, 0, 0] > -50)
    with pytest.raises(IndexError, match="where"):
        fgrad.make_jaxpr(lambda x, m: x[m])(Tensor(A), mask)


@pytest.mark.parametrize("index, message", [
    (2, "index 2 is out of bounds for axis 0 with size 2"),
    (-3, "index -3 is out of bounds for axis 0 with size 2"),
    ((0, 3), "index 3 is out of bounds for axis 1 with size 3"),
    ((0, 0, 0, -6), "index -6 is out of bounds for axis 3 with size 5"),
    ((None, 1, 5), "index 5 is out of bounds for axis 1 with size 3"),
    (([0, 2],), "index 2 is out of bounds for axis 0 with size 2"),
    ((slice(None), [3]), "index 3 is out of bounds for axis 1 with size 3"),
    ((0, Tensor([0, -5])), "index -5 is out of bounds for axis 1 with size 3"),
    ((0, 0, 0, 0, 0), "too many indices"), ((0.5,), "invalid index"),
    ((Ellipsis, Ellipsis), "single ellipsis"), (True, "bool"),
    ((Tensor([1.0]),), "integer or bool"),
])
def test_bad_index_raises_index_error(index, message):
    with pytest.raises(IndexError, match=message.replace("(", r"\(")):
        Tensor(A)[index]


def test_indexing_0d_tensors():
    s = np.float32(3.5)
    for index in [(), None, Ellipsis, (None, Ellipsis, None)]:
        check_getitem(np.asarray(s), index)
    with pytest.raises(IndexError):
        Tensor(3.5)[0]
    t = Tensor([4, 5, 6])
    assert t[Tensor(2)].item() == 6  # a 0-d int Tensor acts as an int index
    assert t[Tensor(-1)].shape == ()


@st.composite
def array_and_basic_index(draw):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    index = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    return shape, index


@settings(max_examples=150, deadline=None)
@given(array_and_basic_index())
def test_random_basic_indices_match_numpy(shape_and_index):
    shape, index = shape_and_index
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    check_getitem(x, index)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_integer_array_indices_match_numpy(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    idx_shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
    index = []
    for n in shape:
        kind = data.draw(st.sampled_from(["array", "slice", "int"]))
        if kind == "array":
            elements = st.integers(-n, n - 1)
            index.append(data.draw(hnp.arrays(np.int32, idx_shape, elements=elements)))
        elif kind == "slice":
            index.append(slice(None, None, data.draw(st.sampled_from([1, -1, 2]))))
        else:
            index.append(data.draw(st.integers(-n, n - 1)))
    arrays = [i for i, it in enumerate(index) if isinstance(it, np.ndarray)]
    ints = [i for i, it in enumerate(index) if isinstance(it, int)]
    both = sorted(arrays + ints)
    if arrays and ints and both[-1] - both[0] + 1 != len(both):  # see the PyTorch test above
        index = [it if not isinstance(it, int) else slice(it % n, it % n + 1)
                 for it, n in zip(index, shape)]
    check_getitem(x, tuple(index))


# ---------------------------------------------------------------------------- x.at[...]

B = np.arange(12, dtype=np.float32).reshape(3, 4) - 4
UFUNC = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}

AT_CASES = [
    (1, 7.0), ((slice(None), slice(None, None, 2)), -1.0), ((slice(None, None, -1), 1),
                                                             [10.0, 20.0, 30.0]),
    ((Ellipsis, -1), 2.5), ((None, 1, None), 4.0), ((slice(2, 1),), 99.0), ([2, 0], 3.0),
    (([0, 1, 2], [3, 2, 1]), [1.0, 2.0, 3.0]), ((slice(None), [0, 3]), [[5.0, 6.0]]),
    ((Tensor([1, 2]), slice(1, 3)), 8.0), (B > 2, 0.5), ((1, [-1, -4]), -2.0),
]


@pytest.mark.parametrize("index, value", AT_CASES, ids=repr)
@pytest.mark.parametrize("mode", ["set", "add", "mul", "max", "min"])
def test_at_updates_match_numpy(index, value, mode):
    np_index = to_numpy_index(index)
    ref = B.copy()
    if mode == "set":
        ref[np_index] = value
    else:
        ref[np_index] = UFUNC[mode](ref[np_index], np.asarray(value, np.float32))
    val = Tensor(np.asarray(value, np.float32)) if isinstance(value, list) else value
    out = getattr(Tensor(B).at[index], mode)(val)
    assert out.dtype == dtypes.float32
    np.testing.assert_array_equal(out.numpy(), ref)


@pytest.mark.parametrize("mode", ["add", "mul", "max", "min"])
def test_at_repeated_indices_accumulate(mode):
    rows, cols = [0, 0, 2, 0], [1, 1, 3, 1]
    vals = np.array([2.0, -3.0, 4.0, 5.0], np.float32)
    ref = B.copy()
    UFUNC[mode].at(ref, (rows, cols), vals)
    out = getattr(Tensor(B).at[rows, cols], mode)(Tensor(vals))
    np.testing.assert_array_equal(out.numpy(), ref)
    ref_rows = B.copy()
    UFUNC[mode].at(ref_rows, ([1, 1, 0],), np.float32(2.0))
    np.testing.assert_array_equal(getattr(Tensor(B).at[[1, 1, 0]], mode)(2.0).numpy(), ref_rows)


def test_at_keeps_dtype_and_leaves_original_unchanged():
    t = Tensor([[1, 2], [3, 4]], dtype=dtypes.int16)
    before = t.numpy()
    out = t.at[0, 1].set(3.7)
    assert out.dtype == dtypes.int16 and out.tolist() == [[1, 3], [3, 4]]
    assert t.at[:, 0].add(10).tolist() == [[11, 2], [13, 4]]
    np.testing.assert_array_equal(t.numpy(), before)
    assert t.at[1].get().tolist() == [3, 4]


def test_at_on_0d_tensor():
    assert Tensor(3.0).at[()].set(5.0).item() == 5.0
    assert Tensor(3.0).at[...].add(2.0).item() == 5.0


def test_at_errors():
    with pytest.raises(IndexError, match="out of bounds"):
        Tensor(B).at[5].set(1.0)
    with pytest.raises(IndexError, match="out of bounds"):
        Tensor(B).at[[0, 3]].add(1.0)
    with pytest.raises(ValueError):
        Tensor(B).at[0].set(Tensor([1.0, 2.0]))  # (2,) does not broadcast to (4,)


def test_setitem_raises_pointing_to_at():
    t = Tensor([1, 2, 3])
    with pytest.raises(TypeError, match=r"\.at"):
        t[0] = 1
    with pytest.raises(TypeError, match=r"\.at"):
        t[1:] = Tensor([5, 6])
    assert t.tolist() == [1, 2, 3]


# ---------------------------------------------------------------------------- gradients

def test_grad_of_integer_array_indexing_scatters_counts():
    rows, cols = [0, 0, 2, 1, 0], [1, 1, 3, 0, 2]
    weights = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
    g = fgrad.grad(lambda x: (x[rows, cols] * Tensor(weights)).sum())(Tensor(B))
    ref = np.zeros_like(B)
    np.add.at(ref, (rows, cols), weights)
    np.testing.assert_array_equal(g.numpy(), ref)


def test_grad_of_basic_indexing_and_at_set():
    g = fgrad.grad(lambda x: x[::-1, 1:3].sum() + x[None, 2, -1].sum() * 3)(Tensor(B))
    ref = np.zeros_like(B)
    ref[:, 1:3] += 1
    ref[2, -1] += 3
    np.testing.assert_array_equal(g.numpy(), ref)
    g = fgrad.grad(lambda x: (x.at[:, 1].set(0.0) * 2).sum())(Tensor(B))
    ref = np.full_like(B, 2.0)
    ref[:, 1] = 0
    np.testing.assert_array_equal(g.numpy(), ref)


@pytest.mark.parametrize("backend", [None, "llvm", "numpy"])
def test_grad_of_set_with_repeated_indices_reaches_only_the_last_write(backend):
    """`x.at[idx].set(v)` keeps the last of repeated rows, so only that update has a
    gradient (checked against central differences of the same function in NumPy)."""
    idx = np.array([[1, 3], [1, 0], [3, 1]])
    weights = np.arange(12.0).reshape(4, 3)

    def ref(v):
        out = np.zeros((4, 3))
        for i, row in zip(idx.reshape(-1), v.reshape(-1, 3)):
            out[i] = row
        return float((out * weights).sum())

    def f(v):
        return (Tensor.zeros((4, 3)).at[Tensor(idx)].set(v) * Tensor(weights.astype(np.float32))
                ).sum()

    v0 = np.random.default_rng(0).standard_normal((3, 2, 3))
    fd = np.zeros_like(v0)
    for k in np.ndindex(v0.shape):
        e = np.zeros_like(v0)
        e[k] = 0.5
        fd[k] = (ref(v0 + e) - ref(v0 - e)) / 1.0
    g = fgrad.grad(f) if backend is None else fgrad.jit(fgrad.grad(f), backend=backend)
    np.testing.assert_allclose(g(Tensor(v0.astype(np.float32))).numpy(), fd, atol=1e-5)
    assert not fd[0, 0].any() and fd[2, 1].any()   # the first write to row 1 is overwritten
