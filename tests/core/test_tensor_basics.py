"""Acceptance tests of the core Tensor: construction, dtypes and promotion, constructors,
properties and data access. NumPy is the reference throughout."""
import itertools

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrad import Tensor, dtypes
from fgrad.core.dtypes import ALL_DTYPES, promote

BF16 = np.dtype(ml_dtypes.bfloat16)
NAMES = [d.short for d in ALL_DTYPES]


def assert_tensor(t, ref, dtype=None):
    """`t` has the values, shape and dtype of the NumPy array `ref` (or `dtype` if given)."""
    ref = np.asarray(ref)
    assert isinstance(t, Tensor)
    assert t.shape == ref.shape
    assert t.numpy().dtype == np.dtype(dtype if dtype is not None else ref.dtype)
    np.testing.assert_array_equal(t.numpy().astype(np.float64) if t.numpy().dtype == BF16
                                  else t.numpy(), ref)


# ---------------------------------------------------------------------------- construction

@pytest.mark.parametrize("data, np_dtype", [
    (3, np.int32), (-7, np.int32), (2.5, np.float32), (True, np.bool_), (False, np.bool_),
    ([1, 2, 3], np.int32), ([[1.5, 2], [3, 4]], np.float32), ([True, False], np.bool_),
    ([True, 2], np.int32), ([1, 2.0], np.float32), ([[[1]], [[2]]], np.int32),
    ((1, 2), np.int32), ([], np.float32), ([[], []], np.float32),
])
def test_python_data_infers_dtype(data, np_dtype):
    assert_tensor(Tensor(data), np.array(data, dtype=np_dtype))


@pytest.mark.parametrize("name", NAMES)
def test_numpy_array_keeps_dtype(name):
    dt = next(d for d in ALL_DTYPES if d.short == name)
    arr = np.array([[0, 1, 2], [3, 4, 5]]).astype(dt.np)
    t = Tensor(arr)
    assert t.dtype == dt
    assert t.numpy().dtype == dt.np
    np.testing.assert_array_equal(t.numpy(), arr)
    assert Tensor(arr[0, 1]).dtype == dt  # a NumPy scalar keeps its dtype too
    assert Tensor(arr[0, 1]).shape == ()


def test_numpy_input_is_copied_and_left_writable():
    arr = np.arange(4)
    t = Tensor(arr)
    assert arr.flags.writeable
    arr[0] = 100
    assert t.tolist() == [0, 1, 2, 3]
    view = np.arange(6).reshape(2, 3)[:, 1]
    t = Tensor(view)
    view[0] = -1
    assert t.tolist() == [1, 4]


def test_tensor_from_tensor():
    src = Tensor([[1, 2], [3, 4]], dtype=dtypes.int16)
    assert_tensor(Tensor(src), np.array([[1, 2], [3, 4]], np.int16))
    assert_tensor(Tensor(src, dtype=dtypes.float32), np.array([[1, 2], [3, 4]], np.float32))


@pytest.mark.parametrize("spec, expected", [
    (dtypes.float16, dtypes.float16), (dtypes.half, dtypes.float16), ("float16", dtypes.float16),
    ("half", dtypes.float16), ("f16", dtypes.float16), (np.float16, dtypes.float16),
    (np.dtype("int16"), dtypes.int16), ("int64", dtypes.int64), ("long", dtypes.int64),
    (np.uint8, dtypes.uint8), ("bfloat16", dtypes.bfloat16), (BF16, dtypes.bfloat16),
    (float, dtypes.float32), (int, dtypes.int32), (bool, dtypes.bool), ("double", dtypes.float64),
])
def test_dtype_argument_forms(spec, expected):
    t = Tensor([1, 0, 2], dtype=spec)
    assert t.dtype == expected
    assert_tensor(t, np.array([1, 0, 2]).astype(expected.np))


def test_dtype_argument_converts_values():
    assert_tensor(Tensor([1.7, -2.5], dtype=dtypes.int32), np.array([1, -2], np.int32))
    assert_tensor(Tensor(np.array([1.5, 2.5]), dtype="float16"), np.array([1.5, 2.5], np.float16))
    assert_tensor(Tensor([0, 3], dtype=dtypes.bool), np.array([False, True]))


@pytest.mark.parametrize("bad", [[1, [2, 3]], [[1, 2], [3]], [[[1], [2]], [3]]])
def test_ragged_list_raises(bad):
    with pytest.raises(ValueError, match="ragged"):
        Tensor(bad)


@pytest.mark.parametrize("bad", ["abc", [1, None], np.array([1 + 2j]), np.array(["x"])])
def test_unsupported_data_raises(bad):
    with pytest.raises(TypeError):
        Tensor(bad)


@pytest.mark.parametrize("spec", ["nope", "complex64", np.complex64, object])
def test_unsupported_dtype_argument_raises(spec):
    with pytest.raises(TypeError, match="dtype"):
        Tensor([1, 2], dtype=spec)


def test_bfloat16_round_trip():
    vals = [1.5, -2.25, 0.0078125, 256.0, -0.0]
    arr = np.array(vals, dtype=BF16)
    for t in (Tensor(arr), Tensor(vals, dtype=dtypes.bfloat16), Tensor(vals, dtype="bf16")):
        assert t.dtype == dtypes.bfloat16
        assert t.numpy().dtype == BF16
        np.testing.assert_array_equal(t.numpy(), arr)
        assert t.tolist() == vals
        assert np.array_equal(np.frombuffer(t.data(), dtype=BF16), arr)
    assert Tensor([2.5], dtype=dtypes.bfloat16).item() == 2.5
    assert Tensor(np.array(3.0, BF16)).item() == 3.0


@pytest.mark.parametrize("data, dtype", [
    (2**31, None), (-2**31 - 1, None), ([1, 2**31], None), (2**40, dtypes.int32),
    (300, dtypes.uint8), (-1, dtypes.uint32), ([128], dtypes.int8), (2**70, None),
    ([1, 2**70], None), (2**64, dtypes.uint64),
])
def test_out_of_range_python_int_raises(data, dtype):
    with pytest.raises(OverflowError):
        Tensor(data, dtype=dtype)


def test_in_range_extremes_do_not_raise():
    assert Tensor(-2**31).item() == -2**31
    assert Tensor(2**31 - 1).item() == 2**31 - 1
    assert Tensor(2**40, dtype=dtypes.int64).item() == 2**40
    assert Tensor(2**64 - 1, dtype=dtypes.uint64).item() == 2**64 - 1
    assert Tensor([255], dtype=dtypes.uint8).tolist() == [255]


# ---------------------------------------------------------------------------- dtypes

@pytest.mark.parametrize("dt", ALL_DTYPES, ids=NAMES)
def test_every_dtype_has_its_itemsize(dt):
    expected = {"bool": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "u8": 1, "u16": 2, "u32": 4,
                "u64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8}[dt.short]
    assert dt.itemsize == expected == np.dtype(dt.np).itemsize
    assert Tensor.zeros(3, dtype=dt).element_size() == expected
    assert dtypes.is_float(dt) == (dt.short[0] in "fb" and dt.short != "bool")
    assert dtypes.is_int(dt) == (dt.short[0] in "iu")
    assert dtypes.is_unsigned(dt) == (dt.short[0] == "u")


def test_dtype_aliases():
    assert dtypes.float is dtypes.float32 and dtypes.half is dtypes.float16
    assert dtypes.double is dtypes.float64 and dtypes.int is dtypes.int32
    assert dtypes.long is dtypes.int64 and dtypes.uchar is dtypes.uint8
    assert dtypes.default_float is dtypes.float32 and dtypes.default_int is dtypes.int32
    assert repr(dtypes.float32) == "dtypes.float"


@pytest.mark.parametrize("a, b", list(itertools.product(ALL_DTYPES, repeat=2)),
                         ids=[f"{a}-{b}" for a, b in itertools.product(NAMES, repeat=2)])
def test_promotion_is_symmetric_and_widening(a, b):
    out = promote(a, b)
    assert out == promote(b, a) and out in ALL_DTYPES
    if a.kind == b.kind == "f" and out not in (dtypes.float16, dtypes.bfloat16):
        finfo = ml_dtypes.finfo
        assert finfo(out.np).max >= max(finfo(a.np).max, finfo(b.np).max)
    if a.is_int and b.is_int and dtypes.uint64 not in (a, b) or a == b == dtypes.uint64:
        lo, hi = np.iinfo(out.np).min, np.iinfo(out.np).max
        for d in (a, b):  # an integer result holds every value of both inputs
            assert lo <= np.iinfo(d.np).min and np.iinfo(d.np).max <= hi
    if (a.kind == "f") != (b.kind == "f"):  # a float beats any integer or bool
        assert out == (a if a.kind == "f" else b)
    if dtypes.bool in (a, b):
        assert out == (b if a == dtypes.bool else a)


def test_promotion_is_associative():
    for a, b, c in itertools.product(ALL_DTYPES, repeat=3):
        assert promote(promote(a, b), c) == promote(a, promote(b, c))


@pytest.mark.parametrize("a, b, expected", [
    (dtypes.int64, dtypes.float16, dtypes.float16), (dtypes.uint8, dtypes.int8, dtypes.int16),
    (dtypes.uint32, dtypes.int32, dtypes.int64), (dtypes.float16, dtypes.bfloat16, dtypes.float32),
    (dtypes.uint16, dtypes.int16, dtypes.int32), (dtypes.uint8, dtypes.int32, dtypes.int32),
    (dtypes.uint64, dtypes.int8, dtypes.int64), (dtypes.uint8, dtypes.uint32, dtypes.uint32),
    (dtypes.int8, dtypes.int64, dtypes.int64), (dtypes.float32, dtypes.float64, dtypes.float64),
    (dtypes.bfloat16, dtypes.float32, dtypes.float32), (dtypes.bool, dtypes.uint8, dtypes.uint8),
    (dtypes.int32, dtypes.bfloat16, dtypes.bfloat16), (dtypes.bool, dtypes.float16, dtypes.float16),
])
def test_promotion_table(a, b, expected):
    assert promote(a, b) == expected
    x, y = Tensor.ones(2, dtype=a), Tensor.ones(2, dtype=b)
    assert (x + y).dtype == expected and (x * y).dtype == expected
    assert (y * x).dtype == expected


@pytest.mark.parametrize("tdtype, scalar, expected", [
    (dtypes.int8, 3, dtypes.int8), (dtypes.uint8, 3, dtypes.uint8),
    (dtypes.int32, 1.5, dtypes.float32), (dtypes.int64, 1.5, dtypes.float32),
    (dtypes.bool, 1, dtypes.int32), (dtypes.bool, 1.5, dtypes.float32),
    (dtypes.bool, True, dtypes.bool), (dtypes.float16, 2.0, dtypes.float16),
    (dtypes.float16, 2, dtypes.float16), (dtypes.bfloat16, 2.0, dtypes.bfloat16),
    (dtypes.float64, 2, dtypes.float64), (dtypes.int16, True, dtypes.int16),
])
def test_python_scalars_are_weak(tdtype, scalar, expected):
    t = Tensor([1, 0, 1], dtype=tdtype)
    for out in (t * scalar, scalar * t, t - scalar if tdtype != dtypes.bool else t * scalar):
        assert out.dtype == expected
    ref = np.array([1, 0, 1]).astype(expected.np) * np.asarray(scalar).astype(expected.np)
    assert_tensor(t * scalar, ref)


# ---------------------------------------------------------------------------- constructors

@pytest.mark.parametrize("make, ref", [
    (lambda: Tensor.zeros(2, 3), np.zeros((2, 3), np.float32)),
    (lambda: Tensor.zeros((2, 3)), np.zeros((2, 3), np.float32)),
    (lambda: Tensor.zeros(0, 3, dtype=dtypes.int8), np.zeros((0, 3), np.int8)),
    (lambda: Tensor.zeros(), np.zeros((), np.float32)),
    (lambda: Tensor.ones(4, dtype="int64"), np.ones(4, np.int64)),
    (lambda: Tensor.ones(2, 1, dtype=dtypes.bool), np.ones((2, 1), np.bool_)),
    (lambda: Tensor.full((2, 2), 7), np.full((2, 2), 7, np.int32)),
    (lambda: Tensor.full((3,), 1.5), np.full(3, 1.5, np.float32)),
    (lambda: Tensor.full((2,), True), np.full(2, True)),
    (lambda: Tensor.full(3, -2, dtype=dtypes.float16), np.full(3, -2, np.float16)),
    (lambda: Tensor.full((), 4.0), np.full((), 4.0, np.float32)),
    (lambda: Tensor.arange(5), np.arange(5, dtype=np.int32)),
    (lambda: Tensor.arange(2, 8, 2), np.arange(2, 8, 2, dtype=np.int32)),
    (lambda: Tensor.arange(5, 0, -1), np.arange(5, 0, -1, dtype=np.int32)),
    (lambda: Tensor.arange(10, -10, -3), np.arange(10, -10, -3, dtype=np.int32)),
    (lambda: Tensor.arange(-3, 3), np.arange(-3, 3, dtype=np.int32)),
    (lambda: Tensor.arange(0), np.arange(0, dtype=np.int32)),
    (lambda: Tensor.arange(3, 1), np.arange(3, 1, dtype=np.int32)),
    (lambda: Tensor.arange(0, 1, 0.25), np.arange(0, 1, 0.25, dtype=np.float32)),
    (lambda: Tensor.arange(0.5, 3), np.arange(0.5, 3, dtype=np.float32)),
    (lambda: Tensor.arange(4, dtype=dtypes.float16), np.arange(4, dtype=np.float16)),
    (lambda: Tensor.arange(0, 10, 3, dtype="int64"), np.arange(0, 10, 3, dtype=np.int64)),
    (lambda: Tensor.linspace(0, 1, 5), np.linspace(0, 1, 5, dtype=np.float32)),
    (lambda: Tensor.linspace(-1, 1, 1), np.linspace(-1, 1, 1, dtype=np.float32)),
    (lambda: Tensor.linspace(0, 10, 0), np.linspace(0, 10, 0, dtype=np.float32)),
    (lambda: Tensor.linspace(0, 10, 3, dtype="int32"), np.linspace(0, 10, 3).astype(np.int32)),
    (lambda: Tensor.eye(3), np.eye(3, dtype=np.float32)),
    (lambda: Tensor.eye(2, 4), np.eye(2, 4, dtype=np.float32)),
    (lambda: Tensor.eye(3, 2, dtype=dtypes.int32), np.eye(3, 2, dtype=np.int32)),
    (lambda: Tensor.eye(0), np.eye(0, dtype=np.float32)),
])
def test_constructors(make, ref):
    assert_tensor(make(), ref)


@pytest.mark.parametrize("start, stop, steps", [(5, -5, 4), (0, 1, 7), (-2.5, 2.5, 11)])
def test_linspace_close_to_numpy(start, stop, steps):
    t = Tensor.linspace(start, stop, steps)
    assert t.dtype == dtypes.float32
    np.testing.assert_allclose(t.numpy(), np.linspace(start, stop, steps), rtol=1e-6, atol=1e-6)


def test_arange_float_step_matches_numpy_length():
    for start, stop, step in [(0, 1, 0.1), (1, -1, -0.3), (0.5, 0.75, 0.5)]:
        t = Tensor.arange(start, stop, step)
        ref = np.arange(start, stop, step)
        assert t.shape == ref.shape
        np.testing.assert_allclose(t.numpy(), ref, rtol=1e-6, atol=1e-6)


def test_empty_has_shape_and_dtype():
    t = Tensor.empty(2, 3, dtype=dtypes.int16)
    assert t.shape == (2, 3) and t.dtype == dtypes.int16


@pytest.mark.parametrize("dtype", [dtypes.int8, dtypes.float16, dtypes.bool, dtypes.float64])
def test_like_constructors(dtype):
    src = Tensor(np.arange(6).reshape(2, 3).astype(dtype.np))
    base = np.arange(6).reshape(2, 3).astype(dtype.np)
    assert_tensor(src.zeros_like(), np.zeros_like(base))
    assert_tensor(src.ones_like(), np.ones_like(base))
    assert_tensor(src.full_like(1), np.full_like(base, 1))
    assert_tensor(src.zeros_like(dtype=dtypes.float32), np.zeros((2, 3), np.float32))
    assert_tensor(src.full_like(3, dtype="int64"), np.full((2, 3), 3, np.int64))


def test_constructor_errors():
    with pytest.raises(ValueError, match="step"):
        Tensor.arange(0, 5, 0)
    with pytest.raises(ValueError):
        Tensor.zeros(-1, 2)


# ---------------------------------------------------------------------------- properties

@pytest.mark.parametrize("shape", [(), (0,), (4,), (2, 3), (2, 0, 5), (1, 2, 3, 4)])
@pytest.mark.parametrize("dt", [dtypes.int16, dtypes.float32, dtypes.bool, dtypes.float64])
def test_shape_properties(shape, dt):
    ref = np.arange(int(np.prod(shape))).reshape(shape).astype(dt.np)
    t = Tensor(ref)
    assert t.shape == ref.shape and t.ndim == ref.ndim and t.dtype == dt
    assert t.numel() == ref.size and t.element_size() == ref.itemsize
    assert t.nbytes() == ref.nbytes
    assert t.is_floating_point() == (ref.dtype.kind == "f")
    assert t.size() == ref.shape and t.device == "CPU"
    for d in range(-ref.ndim, ref.ndim):
        assert t.size(d) == t.size(dim=d) == ref.shape[d]
    with pytest.raises(IndexError):
        t.size(max(ref.ndim, 1))


def test_data_memoryview_round_trip():
    for ref in [np.array([1, 2, 3, 4], np.int32), np.arange(6.0).reshape(2, 3),
                np.array([True, False]), np.arange(6, dtype=np.int16).reshape(2, 3).T]:
        t = Tensor(ref)
        mv = t.data()
        assert isinstance(mv, memoryview) and mv.nbytes == ref.nbytes
        np.testing.assert_array_equal(np.frombuffer(mv, dtype=ref.dtype), ref.reshape(-1))


def test_item_and_tolist():
    assert Tensor(42).item() == 42 and isinstance(Tensor(42).item(), int)
    assert Tensor([[3.5]]).item() == 3.5 and isinstance(Tensor(3.5).item(), float)
    assert Tensor(True).item() is True
    with pytest.raises(ValueError, match="one element"):
        Tensor([1, 2]).item()
    assert Tensor([1, 2, 3, 4]).tolist() == [1, 2, 3, 4]
    assert Tensor([[1.5], [2.0]]).tolist() == [[1.5], [2.0]]
    assert Tensor(5).tolist() == 5 and isinstance(Tensor(5).tolist(), int)
    assert Tensor([]).tolist() == []


def test_numpy_is_a_writable_copy():
    t = Tensor([[1, 2], [3, 4]])
    arr = t.numpy()
    assert arr.dtype == np.int32 and arr.flags.writeable
    arr[0, 0] = 99
    assert t.tolist() == [[1, 2], [3, 4]]
    copied = np.array(t)
    copied[0, 0] = 98
    assert t.tolist() == [[1, 2], [3, 4]]


def test_array_protocol():
    t = Tensor([[1, 2], [3, 4]], dtype=dtypes.int16)
    arr = np.asarray(t)
    assert arr.dtype == np.int16 and arr.tolist() == [[1, 2], [3, 4]]
    with pytest.raises(ValueError):
        arr[0, 0] = 5  # a no-copy view of an immutable Tensor is read-only
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    np.testing.assert_array_equal(np.add(t, 1), np.array([[2, 3], [4, 5]]))


def test_repr_is_readable():
    r = repr(Tensor([[1, 2], [3, 4]], dtype=dtypes.int16))
    assert r.startswith("Tensor(") and "dtypes.short" in r
    assert all(str(v) in r for v in (1, 2, 3, 4))
    assert "3.5" in repr(Tensor(3.5)) and "dtypes.float" in repr(Tensor(3.5))
    assert "bfloat16" in repr(Tensor([1.5], dtype=dtypes.bfloat16))
    assert len(repr(Tensor.zeros(10000))) < 200  # large Tensors are summarized


def test_len_and_iteration():
    ref = np.arange(6).reshape(3, 2)
    t = Tensor(ref)
    assert len(t) == 3
    rows = list(t)
    assert len(rows) == 3 and all(isinstance(r, Tensor) for r in rows)
    for row, expected in zip(rows, ref, strict=True):
        np.testing.assert_array_equal(row.numpy(), expected)
    with pytest.raises(TypeError):
        len(Tensor(1))
    with pytest.raises(TypeError):
        iter(Tensor(1))


def test_python_conversions():
    assert bool(Tensor([1])) is True and bool(Tensor(0.0)) is False
    with pytest.raises(ValueError, match="ambiguous"):
        bool(Tensor([1, 2]))
    assert int(Tensor(3.7)) == 3 and float(Tensor([2])) == 2.0
    assert [10, 20, 30][Tensor(1)] == 20
    with pytest.raises(TypeError):
        [10, 20][Tensor(1.0)]


@pytest.mark.parametrize("src", [dtypes.float32, dtypes.float16, dtypes.bfloat16, dtypes.float64])
@pytest.mark.parametrize("dst", [dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.int64])
def test_float_to_int_cast_truncates_and_saturates(src, dst):
    vals = [1.75, -2.5, 0.0, 100.0, 1e30, -1e30, float("inf"), float("-inf"), float("nan")]
    info = np.iinfo(dst.np)
    expected = [1, -2, 0, 100, info.max, info.min, info.max, info.min, 0]
    expected = [min(max(v, info.min), info.max) for v in expected]
    assert Tensor(vals, dtype=src).cast(dst).tolist() == expected


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-2**31, 2**31 - 1), max_size=8),
       st.sampled_from(["int32", "int64", "float64", "float32"]))
def test_int_lists_round_trip(values, name):
    t = Tensor(values) if name == "int32" else Tensor(values, dtype=name)
    ref = np.array(values, dtype=name if values else (np.float32 if name == "int32" else name))
    assert_tensor(t, ref)
