"""Acceptance tests of Tensor operators against NumPy: arithmetic, comparison and bitwise
operators for every dtype class, reflected operators with weak Python scalars, broadcasting,
integer semantics (floor division, wrap-around), matmul, transpose and reductions."""
import operator

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrad import Tensor, dtypes

BF16 = np.dtype(ml_dtypes.bfloat16)
SIGNED = ["int8", "int16", "int32", "int64"]
UNSIGNED = ["uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]
ALL = ["bool"] + SIGNED + UNSIGNED + FLOATS


def np_dtype(name):
    return BF16 if name == "bfloat16" else np.dtype(name)


def operands(name):
    """Two (2, 3) NumPy operands of dtype `name`; `b` has no zeros (safe divisor)."""
    if name == "bool":
        a = [[True, False, True], [False, True, False]]
        b = [[True, True, False], [False, False, True]]
    elif name in UNSIGNED:
        a, b = [[7, 5, 3], [0, 1, 200]], [[2, 3, 1], [4, 5, 7]]
    elif name in SIGNED:
        a, b = [[-7, 5, 3], [0, -1, 6]], [[2, -3, 1], [4, 5, -2]]
    else:
        a, b = [[-1.5, 2.0, 0.0], [3.25, -0.5, 7.0]], [[0.5, -2.0, 1.0], [4.0, 0.25, -2.0]]
    return np.array(a).astype(np_dtype(name)), np.array(b).astype(np_dtype(name))


def assert_same(t, ref):
    ref = np.asarray(ref)
    got = t.numpy()
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    assert got.shape == ref.shape
    if got.dtype == BF16:
        got, ref = got.astype(np.float32), ref.astype(np.float32)
    np.testing.assert_array_equal(got, ref)


def _true_div(a, b):
    out = np_dtype("float32") if a.dtype.kind in "biu" else a.dtype
    return a.astype(out) / b.astype(out)


# name, fgrad op, NumPy reference, dtype classes where the op is defined
BINARY = [
    ("add", operator.add, lambda a, b: np.logical_or(a, b) if a.dtype == bool else a + b, ALL),
    ("sub", operator.sub, np.subtract, ALL[1:]),
    ("mul", operator.mul, lambda a, b: np.logical_and(a, b) if a.dtype == bool else a * b, ALL),
    ("truediv", operator.truediv, _true_div, ALL),
    ("floordiv", operator.floordiv, np.floor_divide, ALL[1:]),
    ("mod", operator.mod, np.remainder, ALL[1:]),
    ("lt", operator.lt, np.less, ALL), ("le", operator.le, np.less_equal, ALL),
    ("gt", operator.gt, np.greater, ALL), ("ge", operator.ge, np.greater_equal, ALL),
    ("eq", operator.eq, np.equal, ALL), ("ne", operator.ne, np.not_equal, ALL),
    ("and", operator.and_, np.bitwise_and, ALL[:9]), ("or", operator.or_, np.bitwise_or, ALL[:9]),
    ("xor", operator.xor, np.bitwise_xor, ALL[:9]),
]
CASES = [(op, fn, ref, dt) for op, fn, ref, kinds in BINARY for dt in ALL if dt in kinds]


@pytest.mark.parametrize("op, fn, ref, dt", CASES, ids=[f"{c[0]}-{c[3]}" for c in CASES])
def test_binary_operator_matches_numpy(op, fn, ref, dt):
    a, b = operands(dt)
    with np.errstate(all="ignore"):
        expected = ref(a, b)
    assert_same(fn(Tensor(a), Tensor(b)), expected)


UNDEFINED = [("sub", operator.sub, ["bool"]), ("floordiv", operator.floordiv, ["bool"]),
             ("and", operator.and_, FLOATS), ("xor", operator.xor, FLOATS),
             ("lshift", operator.lshift, FLOATS + ["bool"]),
             ("rshift", operator.rshift, FLOATS)]


@pytest.mark.parametrize("op, fn, dt", [(o, f, d) for o, f, ds in UNDEFINED for d in ds])
def test_undefined_operator_raises_type_error(op, fn, dt):
    a, b = operands(dt)
    with pytest.raises(TypeError, match=Tensor(a).dtype.name):
        fn(Tensor(a), Tensor(b))


@pytest.mark.parametrize("dt", [d for d in ALL if d != "bool"])
def test_pow_matches_numpy(dt):
    a, b = operands(dt)
    exp = (np.abs(b.astype(np.float64)) % 4).astype(b.dtype) if dt not in FLOATS else b
    with np.errstate(all="ignore"):
        expected = np.power(a, exp)
    assert_same(Tensor(a) ** Tensor(exp), expected)


@pytest.mark.parametrize("dt", SIGNED + UNSIGNED)
@pytest.mark.parametrize("fn, ref", [(operator.lshift, np.left_shift),
                                     (operator.rshift, np.right_shift)])
def test_shifts_match_numpy(dt, fn, ref):
    a, _ = operands(dt)
    amount = np.array([[1, 2, 0], [3, 1, 4]]).astype(dt)
    assert_same(fn(Tensor(a), Tensor(amount)), ref(a, amount))
    assert_same(fn(Tensor(a), 2), ref(a, np.asarray(2, dtype=dt)))


@pytest.mark.parametrize("dt", ALL)
def test_unary_operators(dt):
    a, _ = operands(dt)
    t = Tensor(a)
    with np.errstate(all="ignore"):
        assert_same(-t, np.logical_not(a) if dt == "bool" else np.negative(a))
        assert_same(abs(t), a if dt == "bool" else np.abs(a))
        assert_same(t.abs(), a if dt == "bool" else np.abs(a))
    assert +t is t
    if dt in FLOATS:
        with pytest.raises(TypeError):
            _ = ~t
    else:
        assert_same(~t, np.logical_not(a) if dt == "bool" else np.invert(a))


# scalar, Tensor dtype, result dtype: Python scalars are weak
REFLECTED_DTYPES = [(2, "int32", "int32"), (3, "int8", "int8"), (2, "uint8", "uint8"),
                    (2.5, "int32", "float32"), (2, "float16", "float16"),
                    (2.5, "float32", "float32"), (0.5, "bfloat16", "bfloat16")]
REFLECTED_OPS = [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                 ("floordiv", operator.floordiv), ("mod", operator.mod), ("pow", operator.pow),
                 ("lt", operator.lt), ("ge", operator.ge), ("eq", operator.eq)]


@pytest.mark.parametrize("scalar, dt, out", REFLECTED_DTYPES)
@pytest.mark.parametrize("name, fn", REFLECTED_OPS, ids=[n for n, _ in REFLECTED_OPS])
def test_reflected_operators_with_python_scalars(scalar, dt, out, name, fn):
    a = np.array([[1, 2, 3], [4, 5, 7]]).astype(np_dtype(dt))  # positive: safe divisor/exponent
    s_arr = np.asarray(scalar).astype(np_dtype(out))
    a_out = a.astype(np_dtype(out))
    with np.errstate(all="ignore"):
        assert_same(fn(scalar, Tensor(a)), fn(s_arr, a_out))
        assert_same(fn(Tensor(a), scalar), fn(a_out, s_arr))


@pytest.mark.parametrize("dt", ["int32", "int8", "uint8", "float32", "float16"])
def test_reflected_true_division(dt):
    a = np.array([1, 2, 4, 8]).astype(dt)
    out = np.float32 if dt in ("int32", "int8", "uint8") else np.dtype(dt)
    assert_same(2 / Tensor(a), np.asarray(2, out) / a.astype(out))
    assert_same(Tensor(a) / 2, a.astype(out) / np.asarray(2, out))


@pytest.mark.parametrize("dt", ["int32", "int16", "uint8", "bool"])
def test_reflected_bitwise(dt):
    a, _ = operands(dt)
    s = True if dt == "bool" else 6
    s_arr = np.asarray(s, dtype=dt)
    assert_same(s & Tensor(a), s_arr & a)
    assert_same(s | Tensor(a), s_arr | a)
    assert_same(s ^ Tensor(a), s_arr ^ a)
    if dt != "bool":
        shift = np.array([[0, 1, 2], [3, 0, 1]], dtype=dt)
        assert_same(1 << Tensor(shift), np.left_shift(np.asarray(1, dt), shift))
        assert_same(64 >> Tensor(shift), np.right_shift(np.asarray(64, dt), shift))


def test_operands_other_than_tensors():
    t = Tensor([1, 2, 3])
    assert_same(t + [1, 1, 1], np.array([2, 3, 4], np.int32))
    assert_same([3, 2, 1] - t, np.array([2, 0, -2], np.int32))
    assert_same(t * np.array([2, 2, 2], np.int64), np.array([2, 4, 6], np.int64))
    assert_same(np.array([1.5, 1.5, 1.5], np.float32) + t, np.array([2.5, 3.5, 4.5], np.float32))
    assert_same(t == [1, 0, 3], np.array([True, False, True]))


# ---------------------------------------------------------------------------- broadcasting

SHAPE_PAIRS = [((3, 1), (1, 4)), ((), (2, 3)), ((2, 3), ()), ((0, 3), (1, 3)), ((4, 1, 3), (2, 1)),
               ((1,), (5,)), ((2, 1, 1), (1, 3, 1)), ((0,), ()), ((3, 0), (3, 1)), ((), ())]


@pytest.mark.parametrize("sx, sy", SHAPE_PAIRS)
@pytest.mark.parametrize("fn", [operator.add, operator.mul, operator.lt, operator.truediv])
def test_broadcasting_matches_numpy(sx, sy, fn):
    rng = np.random.default_rng(0)
    x = rng.integers(1, 9, size=sx).astype(np.float32)
    y = rng.integers(1, 9, size=sy).astype(np.float32)
    assert_same(fn(Tensor(x), Tensor(y)), fn(x, y))
    assert_same(fn(Tensor(y), Tensor(x)), fn(y, x))


def test_broadcast_error_names_op_and_shapes():
    with pytest.raises(ValueError, match=r"add.*\(2, 3\).*\(4, 5\)"):
        Tensor.ones(2, 3) + Tensor.ones(4, 5)
    with pytest.raises(ValueError, match=r"mul.*\(3,\).*\(4,\)"):
        Tensor.ones(3) * Tensor.ones(4)


# ---------------------------------------------------------------------------- integer semantics

@pytest.mark.parametrize("dt", SIGNED)
def test_floor_division_and_modulo_follow_python(dt):
    pairs = [(a, b) for a in (-7, -6, -1, 0, 1, 6, 7) for b in (-3, -2, -1, 1, 2, 3)]
    a = Tensor([p[0] for p in pairs], dtype=dt)
    b = Tensor([p[1] for p in pairs], dtype=dt)
    assert (a // b).tolist() == [x // y for x, y in pairs]
    assert (a % b).tolist() == [x % y for x, y in pairs]
    assert (a.div(b, rounding_mode="trunc")).tolist() == [int(x / y) for x, y in pairs]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-2**20, 2**20), st.integers(-50, 50).filter(bool)),
                min_size=1, max_size=20))
def test_floor_division_property(pairs):
    a = Tensor([p[0] for p in pairs])
    b = Tensor([p[1] for p in pairs])
    q, r = a // b, a % b
    assert q.tolist() == [x // y for x, y in pairs]
    assert r.tolist() == [x % y for x, y in pairs]
    assert (q * b + r).tolist() == [p[0] for p in pairs]


def test_true_division_of_ints_gives_float32():
    for dt in ("int8", "int32", "int64", "uint8", "bool"):
        a, b = operands(dt)
        out = Tensor(a) / Tensor(b)
        assert out.dtype == dtypes.float32
        with np.errstate(all="ignore"):
            expected = a.astype(np.float64) / b
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize("dt, x, y, fn, expected", [
    ("int8", 127, 1, operator.add, -128), ("int8", -128, 1, operator.sub, 127),
    ("uint8", 0, 1, operator.sub, 255), ("uint8", 255, 1, operator.add, 0),
    ("int32", 2**31 - 1, 1, operator.add, -2**31), ("int16", 300, 300, operator.mul, 24464),
    ("uint32", 0, 1, operator.sub, 2**32 - 1), ("int64", 2**63 - 1, 1, operator.add, -2**63),
])
def test_integer_overflow_wraps(dt, x, y, fn, expected):
    assert fn(Tensor([x], dtype=dt), Tensor([y], dtype=dt)).tolist() == [expected]


@pytest.mark.parametrize("dt", ["int8", "int32", "uint8", "int64"])
def test_integer_division_by_zero_does_not_crash(dt):
    a = Tensor([5, 6, 0], dtype=dt)
    b = Tensor([0, 3, 0], dtype=dt)
    for out in (a // b, a % b, a.div(b, rounding_mode="trunc")):
        assert out.dtype.name == Tensor([1], dtype=dt).dtype.name and out.shape == (3,)
    assert (a // b).tolist()[1] == 2 and (a % b).tolist()[1] == 0
    with np.errstate(all="ignore"):
        expected = np.array([5, 6, 0], np.float32) / np.array([0, 3, 0], np.float32)
    assert_same(a / b, expected)


def test_float_division_by_zero_follows_ieee():
    a = Tensor([1.0, -1.0, 0.0])
    with np.errstate(all="ignore"):
        assert_same(a / 0.0, np.array([1.0, -1.0, 0.0], np.float32) / np.float32(0))
        assert_same(a % 0.0, np.remainder(np.array([1.0, -1.0, 0.0], np.float32), np.float32(0)))


# ---------------------------------------------------------------------------- matmul, T

MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                 ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)),
                 ((1, 2, 3), (4, 3, 2)), ((2, 1, 2, 3), (3, 3, 1)), ((0, 3), (3, 2))]


@pytest.mark.parametrize("sx, sy", MATMUL_SHAPES)
@pytest.mark.parametrize("dt", ["float32", "int32", "float64"])
def test_matmul_matches_numpy(sx, sy, dt):
    rng = np.random.default_rng(1)
    x = rng.integers(-4, 5, size=sx).astype(dt)
    y = rng.integers(-4, 5, size=sy).astype(dt)
    assert_same(Tensor(x) @ Tensor(y), x @ y)
    assert_same(Tensor(x).matmul(Tensor(y)), x @ y)
    assert_same(Tensor(x).dot(Tensor(y)), x @ y)


def test_matmul_promotes_and_accepts_arrays():
    x = np.array([[1, 2], [3, 4]], np.int32)
    y = np.array([[0.5, 1.0], [1.5, 2.0]], np.float32)
    assert_same(Tensor(x) @ Tensor(y), x.astype(np.float32) @ y)
    assert_same(x.tolist() @ Tensor(y), x.astype(np.float32) @ y)
    assert_same(Tensor(y) @ y.tolist(), y @ y)


def test_matmul_errors():
    with pytest.raises(ValueError, match="matmul"):
        Tensor.ones(2, 3) @ Tensor.ones(4, 2)
    with pytest.raises(ValueError, match="matmul"):
        Tensor(2.0) @ Tensor.ones(2)


@pytest.mark.parametrize("shape", [(), (4,), (2, 3), (2, 3, 4), (0, 2)])
def test_transpose_property(shape):
    x = np.arange(int(np.prod(shape)), dtype=np.int16).reshape(shape)
    assert_same(Tensor(x).T, x.T)


# ---------------------------------------------------------------------------- reductions

RED_AXES = [None, 0, 1, -1, (0, 2), (-1, 0), (0, 1, 2), ()]
RED_SRC = np.array([[[3, -1, 4, 1], [5, -9, 2, 6], [5, 3, -5, 8]],
                    [[9, 7, -9, 3], [2, 3, 8, 4], [-6, 2, 6, 4]]])


def _np_keep(fn, x, axis, keepdim, **kw):
    axis = tuple(range(x.ndim)) if axis is None else axis
    return fn(x, axis=axis, keepdims=keepdim, **kw)


@pytest.mark.parametrize("axis", RED_AXES, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dt", ["float32", "int32", "int64", "float64"])
def test_sum_prod_max_min_mean(axis, keepdim, dt):
    x = RED_SRC.astype(dt)
    t = Tensor(x)
    assert_same(t.sum(axis, keepdim=keepdim), _np_keep(np.sum, x, axis, keepdim, dtype=dt))
    assert_same(t.prod(axis, keepdim=keepdim), _np_keep(np.prod, x, axis, keepdim, dtype=dt))
    assert_same(t.max(axis, keepdim=keepdim), _np_keep(np.max, x, axis, keepdim))
    assert_same(t.min(axis=axis, keepdim=keepdim), _np_keep(np.min, x, axis, keepdim))
    mean = t.mean(axis, keepdim=keepdim)
    ref = _np_keep(np.mean, x.astype(np.float64), axis, keepdim)
    assert mean.dtype == (dtypes.float64 if dt == "float64" else dtypes.float32)
    assert mean.shape == ref.shape
    np.testing.assert_allclose(mean.numpy(), ref, rtol=1e-6)


@pytest.mark.parametrize("axis", RED_AXES, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_any_all(axis, keepdim):
    for x in (RED_SRC > 2, RED_SRC, RED_SRC.astype(np.float32) * 0):
        assert_same(Tensor(x).any(axis, keepdim=keepdim), _np_keep(np.any, x, axis, keepdim))
        assert_same(Tensor(x).all(axis, keepdim=keepdim), _np_keep(np.all, x, axis, keepdim))


@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, -3])
@pytest.mark.parametrize("dt", ["float32", "int8", "uint8", "bfloat16"])
def test_argmax_argmin_pick_the_first_extremum(axis, dt):
    x = (RED_SRC % 5).astype(np_dtype(dt))  # many ties
    ref_x = x.astype(np.float32)
    for name in ("argmax", "argmin"):
        out = getattr(Tensor(x), name)(axis)
        ref = getattr(np, name)(ref_x, axis=axis).astype(np.int32)
        assert_same(out, ref)
        kept = getattr(Tensor(x), name)(axis, keepdim=True)
        assert_same(kept, ref.reshape((1,) * 3) if axis is None else np.expand_dims(ref, axis))


@pytest.mark.parametrize("dt, out", [("int8", "int32"), ("int16", "int32"), ("bool", "int32"),
                                     ("uint8", "uint32"), ("int32", "int32"), ("int64", "int64"),
                                     ("float16", "float16"), ("float32", "float32")])
def test_sum_dtype_of_small_ints_is_widened(dt, out):
    x = np.full((4, 50), 100 if dt != "bool" else True).astype(dt)
    assert_same(Tensor(x).sum(), np.asarray(x.astype(out).sum(dtype=out)))
    assert_same(Tensor(x).sum(1), x.astype(out).sum(1, dtype=out))
    assert Tensor(x).sum(dtype=dtypes.float64).dtype == dtypes.float64


def test_reductions_of_0d_and_empty():
    assert_same(Tensor(5).sum(), np.asarray(5, np.int32))
    assert_same(Tensor(-2.5).max(), np.asarray(-2.5, np.float32))
    assert_same(Tensor(3.0).mean(), np.asarray(3.0, np.float32))
    assert_same(Tensor(7).argmax(), np.asarray(0, np.int32))
    empty = np.zeros((0, 3), np.float32)
    assert_same(Tensor(empty).sum(), np.asarray(0, np.float32))
    assert_same(Tensor(empty).sum(0), np.zeros(3, np.float32))
    assert_same(Tensor(empty).sum(1), np.zeros(0, np.float32))
    assert_same(Tensor(empty).prod(0), np.ones(3, np.float32))
    assert_same(Tensor(empty).max(1), np.zeros(0, np.float32))
    assert_same(Tensor([]).sum(), np.asarray(0, np.float32))
    assert_same(Tensor(empty).any(), np.asarray(False))
    assert_same(Tensor(empty).all(), np.asarray(True))
    assert np.isnan(Tensor([]).mean().item())
    with pytest.raises(ValueError, match="empty"):
        Tensor(empty).max(0)


def test_reduction_axis_errors():
    with pytest.raises(IndexError, match="out of range"):
        Tensor.ones(2, 3).sum(2)
    with pytest.raises(IndexError):
        Tensor.ones(2, 3).max(-3)
