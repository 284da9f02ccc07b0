"""fgrad.lax's jax.lax-style operations (fgrad/lax/elementwise.py, shapes.py, reductions.py,
sorting.py, unsupported.py) against NumPy references: eagerly and under `fgrad.jit` (the
default llvm backend), under `fgrad.grad` (against central finite differences) and
`fgrad.vmap`, with NumPy arrays, Python scalars and lists as inputs; and every error path
raises fgrad's error type with a message that names the op and the fix."""
from __future__ import annotations

import math

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, lax
from fgrad.core.errors import ArgumentError, ArgumentTypeError, AxisError, IndexRangeError

R = np.random.default_rng(7)
X = R.standard_normal((3, 4)).astype(np.float32)
Y = R.standard_normal((3, 4)).astype(np.float32)
A3 = R.standard_normal((2, 3, 4)).astype(np.float32)
B3 = R.standard_normal((2, 4, 5)).astype(np.float32)
IA = np.array([-7, 7, -7, 7, 5, -5, 0], np.int32)
IB = np.array([2, -2, -2, 2, 0, 0, 3], np.int32)
SH = np.array([1, 2, 40, -1, 0, 3, 31], np.int32)
SPECIAL = np.array([3., np.nan, 1., -0., 0., -np.inf, np.inf, -2.], np.float32)
HALVES = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -0.3, 7.0], np.float32)
I32 = np.iinfo(np.int32)


# ---------------------------------------------------------------------------- references

def np_pad(x, value, config):
    """lax.pad written with NumPy: interior first, then low/high (negative crops)."""
    out = np.asarray(x)
    for axis, (lo, hi, interior) in enumerate(config):
        n = out.shape[axis]
        size = n + max(n - 1, 0) * interior
        grown = np.full(out.shape[:axis] + (size,) + out.shape[axis + 1:], value, out.dtype)
        where = [slice(None)] * out.ndim
        where[axis] = slice(0, size, interior + 1)
        grown[tuple(where)] = out
        parts = [np.full(grown.shape[:axis] + (max(lo, 0),) + grown.shape[axis + 1:], value,
                         out.dtype), grown,
                 np.full(grown.shape[:axis] + (max(hi, 0),) + grown.shape[axis + 1:], value,
                         out.dtype)]
        out = np.concatenate(parts, axis)
        keep = [slice(None)] * out.ndim
        keep[axis] = slice(-min(lo, 0), out.shape[axis] + min(hi, 0))
        out = out[tuple(keep)]
    return out


def np_int_div(a, b):
    safe = np.where(b == 0, 1, b)
    return np.where(b == 0, -1, np.trunc(a / safe)).astype(a.dtype)


def np_int_rem(a, b):
    return np.where(b == 0, a, np.fmod(a, np.where(b == 0, 1, b))).astype(a.dtype)


def np_shift(kind, a, b):
    ok = (b >= 0) & (b < 32)
    s = np.where(ok, b, 0)
    if kind == "left":
        return np.where(ok, (a.astype(np.int64) << s).astype(np.int32), 0).astype(np.int32)
    if kind == "logical":
        return np.where(ok, (a.view(np.uint32) >> s.astype(np.uint32)).view(np.int32), 0)
    return np.where(ok, a >> s, np.where(a < 0, -1, 0)).astype(np.int32)


def np_f2i(x):
    t = np.nan_to_num(np.trunc(x.astype(np.float64)), nan=0.0)
    return np.clip(t, I32.min, I32.max).astype(np.int32)


def np_round_away(x):
    return np.copysign(np.floor(np.abs(x.astype(np.float64)) + 0.5), x).astype(x.dtype)


def np_cum(fn, x, axis, reverse):
    src = np.flip(x, axis) if reverse else x
    out = fn(src, axis=axis)
    return np.flip(out, axis) if reverse else out


def np_erf(x):
    return np.vectorize(math.erf)(x.astype(np.float64)).astype(x.dtype)


def np_multisort(k1, k2, v):
    order = np.lexsort((k2, k1))
    return k1[order], k2[order], v[order]


# ---------------------------------------------------------------------------- value cases
# (id, fgrad function of the arrays, the arrays, NumPy reference of the arrays)

CASES = [
    ("add", lambda a, b: lax.add(a, b), (X, Y), np.add),
    ("sub", lambda a, b: lax.sub(a, b), (X, Y), np.subtract),
    ("mul", lambda a, b: lax.mul(a, b), (X, Y), np.multiply),
    ("div_float", lambda a, b: lax.div(a, b), (X, Y), np.divide),
    ("div_int_trunc", lambda a, b: lax.div(a, b), (IA, IB), np_int_div),
    ("rem_int_c_style", lambda a, b: lax.rem(a, b), (IA, IB), np_int_rem),
    ("rem_float", lambda a, b: lax.rem(a, b), (X * 5, Y), np.fmod),
    ("div_uint_by_zero", lambda a, b: lax.div(a, b), (np.uint8([5, 7]), np.uint8([0, 2])),
     lambda a, b: np.uint8([255, 3])),
    ("pow", lambda a, b: lax.pow(a, b), (np.abs(X), Y), np.power),
    ("pow_int_exponent", lambda a, b: lax.pow(a, b), (X, np.int32([[2, 3, -1, 0]] * 3)),
     lambda a, b: np.power(a, b.astype(np.float32))),
    ("max", lambda a, b: lax.max(a, b), (SPECIAL, np.roll(SPECIAL, 3)), np.maximum),
    ("min", lambda a, b: lax.min(a, b), (SPECIAL, np.roll(SPECIAL, 3)), np.minimum),
    ("atan2", lambda a, b: lax.atan2(a, b), (X, Y), np.arctan2),
    ("eq", lambda a, b: lax.eq(a, b), (IA, IB), np.equal),
    ("ne", lambda a, b: lax.ne(a, b), (IA, IB), np.not_equal),
    ("lt", lambda a, b: lax.lt(a, b), (X, Y), np.less),
    ("le", lambda a, b: lax.le(a, b), (IA, IB), np.less_equal),
    ("gt", lambda a, b: lax.gt(a, b), (X, Y), np.greater),
    ("ge", lambda a, b: lax.ge(a, b), (IA, IB), np.greater_equal),
    ("bitwise_and", lambda a, b: lax.bitwise_and(a, b), (IA, IB), np.bitwise_and),
    ("bitwise_or", lambda a, b: lax.bitwise_or(a, b), (IA, IB), np.bitwise_or),
    ("bitwise_xor_bool", lambda a, b: lax.bitwise_xor(a, b), (X > 0, Y > 0), np.logical_xor),
    ("bitwise_not", lambda a: lax.bitwise_not(a), (IA,), np.invert),
    ("shift_left", lambda a, b: lax.shift_left(a, b), (IA, SH),
     lambda a, b: np_shift("left", a, b)),
    ("shift_right_logical", lambda a, b: lax.shift_right_logical(a, b), (IA, SH),
     lambda a, b: np_shift("logical", a, b)),
    ("shift_right_arithmetic", lambda a, b: lax.shift_right_arithmetic(a, b), (IA, SH),
     lambda a, b: np_shift("arithmetic", a, b)),
    ("neg", lambda a: lax.neg(a), (X,), np.negative),
    ("sign_keeps_signed_zero", lambda a: lax.sign(a), (SPECIAL,),
     lambda a: np.where(a == 0, a, np.sign(a))),
    ("abs_int", lambda a: lax.abs(a), (IA,), np.abs),
    ("floor", lambda a: lax.floor(a), (X * 3,), np.floor),
    ("ceil", lambda a: lax.ceil(a), (X * 3,), np.ceil),
    ("round_away_from_zero", lambda a: lax.round(a), (HALVES,), np_round_away),
    ("round_to_even", lambda a: lax.round(a, lax.RoundingMethod.TO_NEAREST_EVEN), (HALVES,),
     np.round),
    ("is_finite", lambda a: lax.is_finite(a), (SPECIAL,), np.isfinite),
    ("exp", lambda a: lax.exp(a), (X,), np.exp),
    ("log", lambda a: lax.log(a), (np.abs(X),), np.log),
    ("log1p", lambda a: lax.log1p(a), (np.abs(X),), np.log1p),
    ("expm1", lambda a: lax.expm1(a), (X,), np.expm1),
    ("tanh", lambda a: lax.tanh(a), (X,), np.tanh),
    ("logistic", lambda a: lax.logistic(a), (X,), lambda a: 1 / (1 + np.exp(-a))),
    ("sin", lambda a: lax.sin(a), (X,), np.sin),
    ("cos", lambda a: lax.cos(a), (X,), np.cos),
    ("tan", lambda a: lax.tan(a), (X,), np.tan),
    ("sqrt", lambda a: lax.sqrt(a), (np.abs(X),), np.sqrt),
    ("rsqrt", lambda a: lax.rsqrt(a), (np.abs(X) + 0.1,), lambda a: 1 / np.sqrt(a)),
    ("erf", lambda a: lax.erf(a), (X,), np_erf),
    ("square_int", lambda a: lax.square(a), (IA,), np.square),
    ("reciprocal", lambda a: lax.reciprocal(a), (X,), np.reciprocal),
    ("integer_pow_5", lambda a: lax.integer_pow(a, 5), (X,), lambda a: a.astype(float) ** 5),
    ("integer_pow_neg", lambda a: lax.integer_pow(a, -3), (X,), lambda a: a.astype(float) ** -3),
    ("integer_pow_0_int", lambda a: lax.integer_pow(a, 0), (IA,), lambda a: np.ones_like(a)),
    ("clamp", lambda lo, a, hi: lax.clamp(lo, a, hi), (np.float32(-0.5), X, np.float32(0.5)),
     lambda lo, a, hi: np.clip(a, lo, hi)),
    ("clamp_nan_arrays", lambda lo, a, hi: lax.clamp(lo, a, hi),
     (np.full(8, -1, np.float32), SPECIAL, np.full(8, 2, np.float32)),
     lambda lo, a, hi: np.where(np.isnan(a), a, np.clip(a, lo, hi))),
    ("select", lambda p, a, b: lax.select(p, a, b), (X > 0, X, Y), np.where),
    ("select_scalar_pred", lambda p, a, b: lax.select(p, a, b), (np.bool_(False), X, Y),
     lambda p, a, b: b),
    ("select_n", lambda w, a, b, c: lax.select_n(w, a, b, c),
     (np.int32([0, 1, 2, 1, 5]), np.full(5, 1, np.float32), np.full(5, 2, np.float32),
      np.full(5, 3, np.float32)), lambda w, a, b, c: np.choose(np.clip(w, 0, 2), [a, b, c])),
    ("convert_float_to_int", lambda a: lax.convert_element_type(a, np.int32),
     (np.float32([1.7, -1.7, np.nan, 1e10, -1e10, np.inf]),), np_f2i),
    ("convert_float_to_bool", lambda a: lax.convert_element_type(a, "bool"),
     (np.float32([0.5, 0., np.nan]),), lambda a: a != 0),
    ("convert_int_wraps", lambda a: lax.convert_element_type(a, fgrad.dtypes.int8),
     (np.int32([300, -200]),), lambda a: a.astype(np.int8)),
    ("bitcast", lambda a: lax.bitcast_convert_type(a, np.int32), (X,),
     lambda a: a.view(np.int32)),
    # shapes
    ("pad_interior", lambda a: lax.pad(a, 0.0, [(1, 2, 1)]), (np.arange(3, dtype=np.float32),),
     lambda a: np_pad(a, 0.0, [(1, 2, 1)])),
    ("pad_negative", lambda a: lax.pad(a, -1.0, [(-1, -2, 1)]),
     (np.arange(5, dtype=np.float32),), lambda a: np_pad(a, -1.0, [(-1, -2, 1)])),
    ("pad_2d_traced_value", lambda a, v: lax.pad(a, v, [(0, 1, 2), (-1, 2, 0)]),
     (X, np.float32(9)), lambda a, v: np_pad(a, v, [(0, 1, 2), (-1, 2, 0)])),
    ("slice", lambda a: lax.slice(a, (0, 1), (3, 4), (2, 2)), (X,), lambda a: a[0:3:2, 1:4:2]),
    ("slice_in_dim", lambda a: lax.slice_in_dim(a, -3, None, 2, axis=1), (X,),
     lambda a: a[:, 1::2]),
    ("index_in_dim", lambda a: lax.index_in_dim(a, -1, 1, keepdims=False), (X,),
     lambda a: a[:, -1]),
    ("reshape_dimensions", lambda a: lax.reshape(a, (2, 6), (1, 0)), (X,),
     lambda a: a.T.reshape(2, 6)),
    ("transpose", lambda a: lax.transpose(a, (2, 0, 1)), (A3,),
     lambda a: np.transpose(a, (2, 0, 1))),
    ("rev", lambda a: lax.rev(a, (0, 2)), (A3,), lambda a: a[::-1, :, ::-1]),
    ("concatenate", lambda a, b: lax.concatenate([a, b, a], 1), (X, Y),
     lambda a, b: np.concatenate([a, b, a], 1)),
    ("broadcast_in_dim", lambda a: lax.broadcast_in_dim(a, (2, 3, 4), (1, 2)), (X[:, :1],),
     lambda a: np.broadcast_to(a, (2, 3, 4))),
    ("broadcast", lambda a: lax.broadcast(a, (2,)), (X,), lambda a: np.stack([a, a])),
    ("expand_dims", lambda a: lax.expand_dims(a, (0, -1)), (X,), lambda a: a[None, :, :, None]),
    ("squeeze", lambda a: lax.squeeze(a, (-1, 0)), (X[None, :, :, None],), lambda a: a[0, ..., 0]),
    ("collapse", lambda a: lax.collapse(a, 1), (A3,), lambda a: a.reshape(2, 12)),
    # reductions
    ("reduce_sum", lambda a: lax.reduce_sum(a, (0,)), (X,), lambda a: a.sum(0)),
    ("reduce_prod", lambda a: lax.reduce_prod(a, (0, 2)), (A3,), lambda a: a.prod((0, 2))),
    ("reduce_max_nan", lambda a: lax.reduce_max(a, (0,)), (SPECIAL,), np.max),
    ("reduce_min", lambda a: lax.reduce_min(a, (1,)), (X,), lambda a: a.min(1)),
    ("reduce_max_empty", lambda a: lax.reduce_max(a, (0,)), (np.ones((0, 3), np.float32),),
     lambda a: np.full(3, -np.inf, np.float32)),
    ("reduce_min_int_empty", lambda a: lax.reduce_min(a, (1,)), (np.ones((2, 0), np.int32),),
     lambda a: np.full(2, I32.max, np.int32)),
    ("reduce_and_int", lambda a: lax.reduce_and(a, (1,)), (np.int32([[7, 5, 13], [6, 3, 1]]),),
     lambda a: np.bitwise_and.reduce(a, 1)),
    ("reduce_or_int", lambda a: lax.reduce_or(a, (0, 1)), (np.int32([[1, 2], [4, 8], [8, 1]]),),
     lambda a: np.bitwise_or.reduce(a.ravel())),
    ("reduce_xor_bool", lambda a: lax.reduce_xor(a, (1,)), (X > 0,),
     lambda a: np.logical_xor.reduce(a, 1)),
    ("reduce_and_bool", lambda a: lax.reduce_and(a, (0,)), (X > -1,), lambda a: a.all(0)),
    ("argmax_nan", lambda a: lax.argmax(a, 1, np.int32), (np.float32([[1, np.nan, 3], [5, 4, 5]]),),
     lambda a: np.argmax(a, 1).astype(np.int32)),
    ("argmin", lambda a: lax.argmin(a, 0, "int64"), (X,), lambda a: np.argmin(a, 0)),
    ("cumsum_reverse", lambda a: lax.cumsum(a, 1, reverse=True), (X,),
     lambda a: np_cum(np.cumsum, a, 1, True)),
    ("cumprod", lambda a: lax.cumprod(a, 0), (X,), lambda a: np.cumprod(a, 0)),
    ("cummax_nan", lambda a: lax.cummax(a), (SPECIAL,), np.maximum.accumulate),
    ("cummin_int_reverse", lambda a: lax.cummin(a, 0, True), (IA,),
     lambda a: np_cum(np.minimum.accumulate, a, 0, True)),
    ("dot_general_batch", lambda a, b: lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))),
     (A3, B3), lambda a, b: np.einsum("bik,bkj->bij", a, b)),
    ("dot_general_preferred", lambda a, b: lax.dot_general(
        a, b, (((1,), (0,)), ((), ())), preferred_element_type=np.int32),
     (np.int8([[100, 100]]), np.int8([[2], [2]])), lambda a, b: np.int32([[400]])),
    ("dot_bool", lambda a, b: lax.dot(a, b), (X > 0, Y.T > 0),
     lambda a, b: (a.astype(int) @ b.astype(int)) > 0),
    ("dot_matrix_vector", lambda a, b: lax.dot(a, b), (X, Y[0]), np.dot),
    ("batch_matmul", lambda a, b: lax.batch_matmul(a, b), (A3, B3), np.matmul),
    ("iota", lambda: lax.iota(np.int32, 5), (), lambda: np.arange(5, dtype=np.int32)),
    ("broadcasted_iota", lambda: lax.broadcasted_iota("float32", (2, 3), 1), (),
     lambda: np.tile(np.arange(3, dtype=np.float32), (2, 1))),
    ("full", lambda: lax.full((2, 2), 1.5), (), lambda: np.full((2, 2), 1.5, np.float32)),
    ("full_like_converts", lambda a: lax.full_like(a, 2.7), (IA,),
     lambda a: np.full_like(a, 2)),
    ("full_like_shape_dtype", lambda a: lax.full_like(a, 3, "float16", (2,)), (IA,),
     lambda a: np.full(2, 3, np.float16)),
    # sorting
    ("sort_nan_last", lambda a: lax.sort(a), (SPECIAL,), np.sort),
    ("sort_dimension_0", lambda a: lax.sort(a, dimension=0), (X,), lambda a: np.sort(a, 0)),
    ("sort_num_keys_2", lambda a, b, c: lax.sort((a, b, c), num_keys=2),
     (np.int32([1, 1, 0, 1, 0]), np.int32([5, 4, 3, 4, 9]), np.float32([0, 1, 2, 3, 4])),
     np_multisort),
    ("sort_key_val", lambda a, b: lax.sort_key_val(a, b),
     (np.int32([3, 1, 2, 1]), np.float32([0, 1, 2, 3])),
     lambda a, b: (np.sort(a, kind="stable"), b[np.argsort(a, kind="stable")])),
    ("top_k_axis", lambda a: lax.top_k(a, 2, axis=0), (X,),
     lambda a: (-np.sort(-a, 0)[:2], np.argsort(-a, 0, kind="stable")[:2].astype(np.int32))),
]


def check(got, want, rtol=2e-5, atol=2e-6):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            check(g, w, rtol, atol)
        return
    got = got.numpy()
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind == "f":
        assert got.dtype == want.dtype or want.dtype == np.float64, (got.dtype, want.dtype)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=atol, equal_nan=True)
        zero = want == 0
        np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))
    else:
        assert got.dtype == want.dtype or (got.dtype.kind == want.dtype.kind == "i"), \
            (got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fn, args, ref", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_matches_numpy_eager_and_under_jit(fn, args, ref):
    want = ref(*args)
    check(fn(*args), want)                                  # NumPy arrays in
    check(fgrad.jit(fn)(*[Tensor(a) for a in args]), want)  # traced Tensors in (llvm)


# ---------------------------------------------------------------------------- array-likes

def test_python_scalars_lists_and_numpy_scalars_are_accepted():
    check(lax.reduce_sum(np.ones((2, 3), np.float32), axes=(0,)), np.full(3, 2, np.float32))
    check(lax.add([[1.0, 2.0]], 0.5), np.float32([[1.5, 2.5]]))
    check(lax.add(1, 2), np.int32(3))
    check(lax.mul(np.float32(2), X), 2 * X)                 # a 0-d operand broadcasts
    check(lax.add(np.ones((3, 1), np.float32), np.ones((1, 4), np.float32)),
          np.full((3, 4), 2, np.float32))                   # size-1 axes of equal rank
    check(lax.add(np.int8([1, 2]), 3), np.int8([4, 5]))     # a weak int takes int8
    check(lax.max(np.array([True, False]), True), np.array([True, True]))
    check(lax.convert_element_type(2.7, int), np.int32(2))
    check(lax.sort([np.int32([3, 1, 2])])[0], np.int32([1, 2, 3]))
    check(lax.concatenate([[1.0], np.float32([2, 3])], 0), np.float32([1, 2, 3]))
    check(lax.exp([Tensor(0.0), Tensor(1.0)]), np.exp(np.float32([0, 1])))
    check(lax.pow(2.0, np.float32([1, 3])), np.float32([2, 8]))
    check(lax.pow(X, 2), X.astype(np.float64) ** 2)


def test_a_python_scalar_under_jit_and_a_traced_padding_value():
    f = fgrad.jit(lambda x, v: lax.pad(lax.add(x, 1.0), v, [(1, 1, 0), (0, 0, 1)]))
    check(f(Tensor(X), Tensor(np.float32(-3))), np_pad(X + 1, -3, [(1, 1, 0), (0, 0, 1)]))


# ---------------------------------------------------------------------------- grad

def fd_check(f, x, eps=1e-6, rtol=1e-5, atol=1e-6, jit=False):
    """fgrad.grad(f) (optionally jitted) against central differences in float64."""
    x = np.asarray(x, np.float64)
    g = fgrad.grad(f)
    got = (fgrad.jit(g) if jit else g)(Tensor(x)).numpy()
    want = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        want[i] = (float(f(Tensor(x + e))) - float(f(Tensor(x - e)))) / (2 * eps)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


X64, Y64 = X.astype(np.float64), Y.astype(np.float64)
KEYS = np.int32([[1, 0, 1, 0]] * 3)
GRADS = [
    ("pad", lambda x: lax.reduce_sum(lax.mul(lax.pad(x, 2.0, [(-1, 1, 1), (0, 2, 0)]),
                                             lax.pad(Y64, 0.0, [(-1, 1, 1), (0, 2, 0)])),
                                     (0, 1)), X64),
    ("pad_value", lambda v: lax.reduce_sum(lax.square(lax.pad(X64, v, [(1, 1, 1), (0, 2, 0)])),
                                           (0, 1)), np.float64(0.7)),
    ("sort", lambda x: lax.reduce_sum(lax.mul(lax.sort(x, 0), Y64), (0, 1)), X64),
    ("sort_carried", lambda x: lax.reduce_sum(lax.mul(lax.sort((KEYS, x))[1], Y64), (0, 1)),
     X64),
    ("clamp", lambda x: lax.reduce_sum(lax.mul(lax.clamp(-0.5, x, 0.5), Y64), (0, 1)), X64),
    ("integer_pow", lambda x: lax.reduce_sum(lax.integer_pow(x, -3), (0, 1)), X64 + 3),
    ("dot_general", lambda x: lax.reduce_sum(lax.dot_general(x, Y64, (((1,), (1,)), ((), ()))),
                                             (0, 1)), X64),
    ("reduce_max", lambda x: lax.reduce_sum(lax.reduce_max(x, (1,)), (0,)), X64),
    ("cumprod", lambda x: lax.reduce_sum(lax.cumprod(x, 1, reverse=True), (0, 1)), X64),
    ("pow_div_rem", lambda x: lax.reduce_sum(lax.add(lax.pow(lax.abs(x), Y64),
                                                     lax.add(lax.div(x, Y64), lax.rem(x, Y64))),
                                             (0, 1)), X64),
    ("transcendental", lambda x: lax.reduce_sum(lax.add(lax.mul(lax.logistic(x), lax.erf(x)),
                                                        lax.expm1(lax.tanh(x))), (0, 1)), X64),
    ("size1_broadcast", lambda x: lax.reduce_sum(lax.mul(lax.slice(x, (0, 0), (1, 4)), Y64),
                                                 (0, 1)), X64),
    ("shapes", lambda x: lax.reduce_sum(lax.mul(lax.slice(lax.concatenate(
        [lax.rev(x, (1,)), lax.reshape(lax.transpose(x, (1, 0)), (3, 4))], 0), (1, 0), (6, 4),
        (2, 1)), lax.broadcast_in_dim(Y64[0], (3, 4), (1,))), (0, 1)), X64),
]


@pytest.mark.parametrize("f, x", [g[1:] for g in GRADS], ids=[g[0] for g in GRADS])
def test_grad_matches_finite_differences(f, x):
    fd_check(f, x)


def test_grad_under_jit():
    fd_check(GRADS[0][1], GRADS[0][2], jit=True)
    fd_check(GRADS[3][1], GRADS[3][2], jit=True)


# ---------------------------------------------------------------------------- vmap

VMAPS = [
    ("sort", lambda x: lax.sort(x, dimension=0), lambda x: np.sort(x, 0)),
    ("pad_traced_value", lambda x: lax.pad(x, lax.reduce_max(x, (0, 1)), [(1, 0, 1), (0, 1, 0)]),
     lambda x: np_pad(x, x.max(), [(1, 0, 1), (0, 1, 0)])),
    ("dot_general", lambda x: lax.dot_general(x, Y, (((1,), (1,)), ((), ()))), lambda x: x @ Y.T),
    ("reduce_and_cumsum", lambda x: lax.cumsum(lax.convert_element_type(
        lax.reduce_and(lax.gt(x, -1.0), (0,)), np.int32), 0), lambda x: np.cumsum(
        (x > -1).all(0)).astype(np.int32)),
    ("clamp_select_n", lambda x: lax.select_n(lax.argmax(x, 0, np.int32), x[0], x[1], x[2]),
     lambda x: np.choose(np.argmax(x, 0), [x[0], x[1], x[2]])),
    ("sort_multi", lambda x: lax.sort((lax.round(x), x), num_keys=2)[1],
     lambda x: np.stack([r[np.lexsort((r, np_round_away(r)))] for r in x])),
]


@pytest.mark.parametrize("f, ref", [v[1:] for v in VMAPS], ids=[v[0] for v in VMAPS])
def test_vmap_matches_per_example_numpy(f, ref):
    batch = R.standard_normal((2, 3, 4)).astype(np.float32)
    want = np.stack([ref(b) for b in batch])
    check(fgrad.vmap(f)(Tensor(batch)), want)
    check(fgrad.jit(fgrad.vmap(f))(Tensor(batch)), want)


# ---------------------------------------------------------------------------- errors

ERRORS = [
    (lambda: lax.add(X, IA[:4]), ArgumentTypeError, "same dtypes.*float32.*int32"),
    (lambda: lax.add(IA, 1.5), ArgumentTypeError, "Python float 1.5.*fgrad.numpy"),
    (lambda: lax.mul(X, 2), ArgumentTypeError, "Python int 2"),
    (lambda: lax.add(np.int8([1]), 300), ArgumentTypeError, "does not fit int8"),
    (lambda: lax.add(X, np.float32([1, 2, 3, 4])), ArgumentError, "same number of dimensions"),
    (lambda: lax.add(X, Y[:2]), ArgumentError, "incompatible shapes"),
    (lambda: lax.exp(IA), ArgumentTypeError, "lax.exp does not accept dtype int32"),
    (lambda: lax.abs(np.uint8([1])), ArgumentTypeError, "signed integer or floating"),
    (lambda: lax.add(X > 0, X > 0), ArgumentTypeError, "lax.add does not accept dtype bool"),
    (lambda: lax.bitwise_and(X, Y), ArgumentTypeError, "bitwise_and"),
    (lambda: lax.floor(IA), ArgumentTypeError, "floor"),
    (lambda: lax.pow(IA, IA), ArgumentTypeError, "pow does not accept dtype int32"),
    (lambda: lax.pow(X, X.astype(np.float16)), ArgumentError, "base's dtype"),
    (lambda: lax.integer_pow(IA, -1), ArgumentError, "negative powers"),
    (lambda: lax.integer_pow(X, 2.0), ArgumentTypeError, "y must be an int"),
    (lambda: lax.round(X, 3), ArgumentError, "rounding_method"),
    (lambda: lax.clamp(np.zeros(2, np.float32), X, 1.0), ArgumentError, "min must be 0-d"),
    (lambda: lax.select(X > 0, X, 0.0), ArgumentError, "same shape"),
    (lambda: lax.select(X[0] > 0, X, Y), ArgumentError, "pred must be 0-d"),
    (lambda: lax.select(X, X, Y), ArgumentTypeError, "pred"),
    (lambda: lax.select_n(X > 0, X, Y, X), ArgumentError, "2 cases"),
    (lambda: lax.select_n(0), ArgumentError, "at least one case"),
    (lambda: lax.convert_element_type(X, "float7"), ArgumentTypeError, "not a dtype"),
    (lambda: lax.bitcast_convert_type(X, np.int8), ArgumentError, "item size"),
    (lambda: lax.exp(np.array([1 + 2j])), ArgumentTypeError, "complex128"),
    (lambda: lax.exp("x"), ArgumentTypeError, "got str"),
    (lambda: lax.exp([[1.0], [2.0, 3.0]]), ArgumentTypeError, "ragged"),
    (lambda: lax.pad(X, 0.0, [(1, 1, 0)]), ArgumentError, "one .low, high, interior. triple"),
    (lambda: lax.pad(X, 0.0, [(1, 1, -1), (0, 0, 0)]), ArgumentError, "interior padding"),
    (lambda: lax.pad(X, 0.0, [(-5, 0, 0), (0, 0, 0)]), ArgumentError, "negative size"),
    (lambda: lax.pad(X, 0.0, [(1, 1), (0, 0)]), ArgumentError, r"\(low, high, 0\)"),
    (lambda: lax.pad(IA, 0.0, [(1, 1, 0)]), ArgumentTypeError, "same dtypes"),
    (lambda: lax.pad(X, np.float64(0), [(0, 0, 0)] * 2), ArgumentTypeError, "same dtype"),
    (lambda: lax.pad(X, X[0], [(0, 0, 0)] * 2), ArgumentError, "must be a scalar"),
    (lambda: lax.slice(X, (0, 0), (4, 4)), ArgumentError, "axis 0.*limit 4"),
    (lambda: lax.slice(X, (0, -1), (3, 4)), ArgumentError, "does not wrap"),
    (lambda: lax.slice(X, (0,), (3,)), ArgumentError, "needs 2 start"),
    (lambda: lax.slice_in_dim(X, 0, 9, axis=1), ArgumentError, "limit 9"),
    (lambda: lax.index_in_dim(X, 4, 1), IndexRangeError, "index 4 is out of bounds"),
    (lambda: lax.reshape(X, (-1, 2)), ArgumentError, "negative size"),
    (lambda: lax.reshape(X, (5, 2)), ArgumentError, "cannot reshape"),
    (lambda: lax.reshape(X, (12,), (0, 0)), ArgumentError, "not a permutation"),
    (lambda: lax.transpose(X, (0,)), ArgumentError, "not a permutation"),
    (lambda: lax.rev(X, (2,)), AxisError, "axis 2"),
    (lambda: lax.rev(X, (-1,)), AxisError, "non-negative axes: use 1"),
    (lambda: lax.broadcast_in_dim(X, (3, 5), (0, 1)), ArgumentError, "cannot broadcast"),
    (lambda: lax.broadcast_in_dim(X, (4, 3), (1, 0)), ArgumentError, "strictly increasing"),
    (lambda: lax.concatenate([], 0), ArgumentError, "at least one"),
    (lambda: lax.concatenate([X, IA[:4].reshape(1, 4)], 0), ArgumentTypeError, "same dtypes"),
    (lambda: lax.concatenate([X, Y[:, :2]], 0), ArgumentError, "must match outside"),
    (lambda: lax.concatenate([X, Y], 2), AxisError, "dimension"),
    (lambda: lax.squeeze(X, (0,)), ArgumentError, "has size 3, not 1"),
    (lambda: lax.expand_dims(X, (0, 0)), ArgumentError, "repeats"),
    (lambda: lax.collapse(X, 2, 1), ArgumentError, "empty axis range"),
    (lambda: lax.iota(np.int32, -1), ArgumentError, "negative size"),
    (lambda: lax.iota(bool, 3), ArgumentTypeError, "got bool"),
    (lambda: lax.broadcasted_iota(np.int32, (2, 3), 2), AxisError, "axis 2"),
    (lambda: lax.full((-1,), 3), ArgumentError, "negative size"),
    (lambda: lax.full((2,), X), ArgumentError, "fill_value must be a scalar"),
    (lambda: lax.reduce_sum(X, (2,)), AxisError, "out of range"),
    (lambda: lax.reduce_sum(X, (0, 0)), ArgumentError, "repeats"),
    (lambda: lax.reduce_sum(X, 0), ArgumentTypeError, r"write \(0,\)"),
    (lambda: lax.reduce_sum(X > 0, (0,)), ArgumentTypeError, "bool"),
    (lambda: lax.reduce_and(X, (0,)), ArgumentTypeError, "reduce_and"),
    (lambda: lax.cumsum(X, -1), AxisError, "non-negative axes"),
    (lambda: lax.cumsum(np.float32(1)), AxisError, "out of range"),
    (lambda: lax.argmax(X, 0, np.float32), ArgumentTypeError, "index_dtype"),
    (lambda: lax.argmax(np.ones((0, 2), np.float32), 0, np.int32), ArgumentError, "empty"),
    (lambda: lax.dot_general(X, Y, (((1,), (0,)), ((), ()))), ArgumentError, "equal sizes"),
    (lambda: lax.dot_general(X, Y, ((1,), (1,))), ArgumentTypeError, "dimension_numbers"),
    (lambda: lax.dot_general(X, Y, (((5,), (1,)), ((), ()))), AxisError, "axis 5"),
    (lambda: lax.dot_general(X, Y.T, (((1,), (0,)), ((), ())), preferred_element_type=np.int32),
     ArgumentTypeError, "not a float dtype"),
    (lambda: lax.dot(A3, B3), ArgumentError, "dot_general"),
    (lambda: lax.batch_matmul(X[0], Y), ArgumentError, "same rank >= 2"),
    (lambda: lax.sort((IA, IB[:3])), ArgumentError, "same shape"),
    (lambda: lax.sort((IA, IB), num_keys=3), ArgumentError, "num_keys=3"),
    (lambda: lax.sort(np.float32(1)), ArgumentError, "at least one axis"),
    (lambda: lax.sort([3, 1, 2]), ArgumentError, "sequence of operands"),
    (lambda: lax.sort(X, dimension=2), AxisError, "dimension"),
    (lambda: lax.top_k(X, 5), ArgumentError, "k=5"),
    (lambda: lax.gather(X, IA[:, None], None, (1,)), ArgumentTypeError,
     "GatherDimensionNumbers"),
    (lambda: lax.scatter(X, IA[:, None], X, None), ArgumentTypeError,
     "ScatterDimensionNumbers"),
    (lambda: lax.rng_uniform, AttributeError, "fgrad.random.uniform"),
    (lambda: lax.slice_, AttributeError, "lax.slice"),
    (lambda: lax.convert, AttributeError, "convert_element_type"),
    (lambda: fgrad.jit(lambda a: lax.add(a, Tensor(IA)))(Tensor(IA[:3])), ArgumentError,
     "incompatible shapes"),
    (lambda: fgrad.jit(lambda a: lax.sin(a))(Tensor(IA)), ArgumentTypeError, "lax.sin"),
]


@pytest.mark.parametrize("call, kind, fragment", ERRORS, ids=range(len(ERRORS)))
def test_errors_name_the_op_and_the_fix(call, kind, fragment):
    with pytest.raises(kind, match=fragment) as info:
        call()
    if kind not in (AttributeError, IndexRangeError, AxisError):
        assert not isinstance(info.value, (AttributeError, IndexError))
