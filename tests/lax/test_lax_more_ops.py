"""fgrad.lax's further operations (fgrad/lax/more_ops.py, special_fns.py and the additions to
reductions.py, shapes.py and convolution.py) against NumPy/SciPy, and against jax.lax's
results where NumPy has no counterpart (reduce_precision bit patterns and
conv_general_dilated_patches, in fixtures/lax_more_jax.npz)."""
from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
from scipy import special

import fgrad
from fgrad import lax
from fgrad.core.errors import ArgumentError, ArgumentTypeError

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "gen_lax_more_jax_ops", os.path.join(HERE, "fixtures", "gen_lax_more_jax.py"))
assert _spec is not None and _spec.loader is not None
GEN = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(GEN)
FIX = np.load(os.path.join(HERE, "fixtures", "lax_more_jax.npz"))
RNG = np.random.default_rng(3)


def _ulps(got, want, dtype):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(all="ignore"):
        gap = np.abs(got - want) / np.spacing(np.abs(want).astype(dtype)).astype(np.float64)
    return float(np.max(np.where(same, 0.0, gap)))


ELEMENTWISE = {
    "atan": (np.arctan, RNG.normal(size=300) * 5, [0.0, -0.0, np.inf, -np.inf, np.nan]),
    "asin": (np.arcsin, RNG.uniform(-1, 1, 300), [1, -1, -0.0, 1.5, 1e-30]),
    "acos": (np.arccos, RNG.uniform(-1, 1, 300), [1, -1, 0, 1.5, 0.9999999]),
    "acosh": (np.arccosh, 1 + np.abs(RNG.normal(size=300)) * 10, [1, 1 + 1e-6, 0.5, np.inf,
                                                                  1e30]),
    "asinh": (np.arcsinh, RNG.normal(size=300) * 10, [0, -0.0, 1e-30, np.inf, -1e30]),
    "atanh": (np.arctanh, RNG.uniform(-1, 1, 300), [1, -1, -0.0, 1e-30, 2]),
    "sinh": (np.sinh, RNG.normal(size=300) * 5, [-0.0, 1e-30, 88, -89, 700, 9.99, 10.01, 25]),
    "cosh": (np.cosh, RNG.normal(size=300) * 5, [0, 88, -89, 700, np.inf, 15, 25]),
    "cbrt": (np.cbrt, RNG.normal(size=300) * 100, [-0.0, 27, -8, 1e-40, 1e-310, np.inf,
                                                   np.nan, 3.4e38]),
    "exp2": (np.exp2, np.concatenate([RNG.normal(size=200) * 30, np.arange(-160, 140)]),
             [np.inf, -np.inf, np.nan, -1074, 1023, 1024, 0.5, -1022.5]),
}


@pytest.mark.parametrize("dtype, bound", [(np.float32, 3), (np.float64, 2)])
@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_elementwise_within_a_few_ulps_of_numpy(name, dtype, bound):
    ref, values, edges = ELEMENTWISE[name]
    with np.errstate(all="ignore"):
        x = np.concatenate([values, edges]).astype(dtype)
        want = ref(x)
    got = getattr(lax, name)(x)
    assert got.dtype.np == dtype and got.shape == x.shape
    assert _ulps(got.numpy(), want, dtype) <= bound
    assert np.array_equal(np.signbit(got.numpy()[x == 0]), np.signbit(want[x == 0])) or \
        name in ("acos", "cosh", "exp2")
    jitted = fgrad.jit(getattr(lax, name))(x).numpy()
    assert _ulps(jitted, want, dtype) <= bound


@pytest.mark.parametrize("name", ["asin", "acosh", "sinh", "cbrt", "exp2", "atanh"])
def test_half_precision_rounds_the_float32_result(name):
    ref, values, _ = ELEMENTWISE[name]
    x = values[:50].astype(np.float16)
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float32)).astype(np.float16)
    got = getattr(lax, name)(x).numpy()
    assert got.dtype == np.float16 and _ulps(got, want, np.float16) <= 1


@pytest.mark.parametrize("name, deriv, lo, hi", [
    ("asin", lambda x: 1 / np.sqrt(1 - x * x), -0.9, 0.9),
    ("acos", lambda x: -1 / np.sqrt(1 - x * x), -0.9, 0.9),
    ("atan", lambda x: 1 / (1 + x * x), -3, 3),
    ("acosh", lambda x: 1 / np.sqrt(x * x - 1), 1.5, 9),
    ("asinh", lambda x: 1 / np.sqrt(x * x + 1), -9, 9),
    ("atanh", lambda x: 1 / (1 - x * x), -0.9, 0.9),
    ("sinh", np.cosh, -30, 30), ("cosh", np.sinh, -30, 30),
    ("cbrt", lambda x: np.cbrt(x) / (3 * x), 0.1, 9),
    ("exp2", lambda x: np.exp2(x) * np.log(2), -9, 9)])
def test_elementwise_gradients(name, deriv, lo, hi):
    x = np.linspace(lo, hi, 23)
    g = fgrad.vmap(fgrad.grad(getattr(lax, name)))(x)
    np.testing.assert_allclose(g.numpy(), deriv(x), rtol=1e-9)


def test_nextafter_matches_numpy_bit_for_bit():
    for dtype in (np.float32, np.float64, np.float16):
        tiny = np.finfo(dtype).smallest_subnormal
        big = np.finfo(dtype).max
        x = np.concatenate([RNG.normal(size=60), [0, -0.0, np.inf, -np.inf, np.nan, tiny,
                                                   -tiny, big, 1, 1]]).astype(dtype)
        y = np.concatenate([RNG.normal(size=60), [1, -1, 0, 5, 1, 0, 0, np.inf, 1,
                                                   np.nan]]).astype(dtype)
        with np.errstate(all="ignore"):
            want = np.nextafter(x, y)
        got = lax.nextafter(x, y).numpy()
        assert got.dtype == dtype
        assert np.array_equal(got, want, equal_nan=True)
        assert np.array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32",
                                   "int64", "uint64"])
def test_population_count_and_clz(dtype):
    info = np.iinfo(dtype)
    x = np.concatenate([RNG.integers(info.min, info.max, 200, dtype=dtype, endpoint=True),
                        np.array([0, 1, info.max, info.min], dtype)])
    bits = np.dtype(dtype).itemsize * 8
    unsigned = [int(v) for v in x.view(f"u{bits // 8}")]
    pc, lz = lax.population_count(x), lax.clz(x)
    assert pc.dtype.np == x.dtype and lz.dtype.np == x.dtype
    np.testing.assert_array_equal(pc.numpy(), [bin(v).count("1") for v in unsigned])
    np.testing.assert_array_equal(lz.numpy(), [bits - v.bit_length() for v in unsigned])


@pytest.mark.parametrize("dtype", list(GEN.PRECISION))
def test_reduce_precision_matches_jax_bit_for_bit(dtype):
    x = GEN.precision_values(dtype)
    for e, m in GEN.PRECISION[dtype]:
        got = lax.reduce_precision(x, e, m).numpy()
        want = FIX[f"precision/{dtype}/{e}/{m}"].view(dtype)
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan)
        assert np.array_equal(got[~nan].view(f"u{got.dtype.itemsize}"),
                              want[~nan].view(f"u{got.dtype.itemsize}")), (e, m)


def test_reduce_precision_to_bfloat16_and_half_matches_numpy_rounding():
    x = RNG.normal(size=500).astype(np.float32) * 100
    half = lax.reduce_precision(x, 5, 10).numpy()
    np.testing.assert_array_equal(half, x.astype(np.float16).astype(np.float32))


def test_special_functions_match_scipy():
    s = np.array([2, 3, 1.5, 10, 40, 1.0001, 2, 3, 4.5, 1, 0.5, 2])
    q = np.array([1, 0.5, 2, 3, 1, 1, -0.5, -1.5, 1e5, 1, 1, 0])
    np.testing.assert_allclose(lax.zeta(s, q).numpy(), special.zeta(s, q), rtol=1e-13)
    m = np.array([0.0, 1, 2, 3, 4, 10, 1.5, -1])
    x = np.array([0.5, 2, 3, 1.5, 0.1, 7, 2, 2])
    want = np.where(m[:6] >= 0, special.polygamma(m[:6].astype(int), x[:6]), 0)
    got = lax.polygamma(m, x).numpy()
    np.testing.assert_allclose(got[:6], want, rtol=1e-12)
    assert np.isnan(got[6:]).all()
    v = np.concatenate([RNG.normal(size=100) * 20, [0, 30, 30.5, 700, -1e4, np.inf, np.nan]])
    np.testing.assert_allclose(lax.bessel_i1e(v).numpy(), special.i1e(v), rtol=1e-14,
                               atol=1e-300)
    np.testing.assert_allclose(lax.bessel_i0e(v).numpy(), special.i0e(v), rtol=1e-13)
    a, b = np.abs(RNG.normal(size=40)) * 5 + 0.1, np.abs(RNG.normal(size=40)) * 5 + 0.1
    p = RNG.uniform(size=40)
    np.testing.assert_allclose(lax.igamma(a, b).numpy(), special.gammainc(a, b), rtol=1e-10)
    np.testing.assert_allclose(lax.igammac(a, b).numpy(), special.gammaincc(a, b),
                               rtol=1e-9)
    np.testing.assert_allclose(lax.betainc(a, b, p).numpy(), special.betainc(a, b, p),
                               rtol=1e-10)
    f32 = lax.zeta(np.float32(2), np.float32(1))
    assert f32.dtype.np == np.float32 and abs(float(f32.numpy()) - np.pi ** 2 / 6) < 1e-6
    with pytest.raises(ArgumentTypeError, match="same dtypes"):
        lax.igamma(np.float32(1), np.float64(1))


def test_cumlogsumexp_is_stable_and_differentiable():
    x = np.array([[-1000.0, 0.0, 1.0, -np.inf, 800.0], [3.0, 2.0, 1.0, 0.0, -1.0]])
    for reverse in (False, True):
        for axis in (0, 1):
            src = np.flip(x, axis) if reverse else x
            want = np.logaddexp.accumulate(src, axis=axis)
            want = np.flip(want, axis) if reverse else want
            got = lax.cumlogsumexp(x, axis, reverse)
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-14)
    assert np.isneginf(lax.cumlogsumexp(np.array([-np.inf, -np.inf])).numpy()).all()
    y = RNG.normal(size=6)
    g = fgrad.grad(lambda v: lax.cumlogsumexp(v)[-1])(y)
    np.testing.assert_allclose(g.numpy(), np.exp(y) / np.exp(y).sum(), rtol=1e-12)


def test_reduce_detects_monoids_and_applies_init_once():
    x = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(lax.reduce(x, 0.0, lax.add, (1,)).numpy(), x.sum(1))
    np.testing.assert_array_equal(lax.reduce(x, 10.0, lambda a, b: a + b, (1,)).numpy(),
                                  x.sum(1) + 10)
    np.testing.assert_array_equal(lax.reduce(x, -np.inf, lax.max, (0, 1)).numpy(), 11.0)
    np.testing.assert_array_equal(
        lax.reduce(np.arange(1, 7), 1, lambda a, b: a * b, (0,)).numpy(), 720)
    ints = np.array([[5, 3], [6, 12]], np.int32)
    np.testing.assert_array_equal(lax.reduce(ints, 0, lax.bitwise_xor, (0,)).numpy(),
                                  [3, 15])
    f = fgrad.jit(lambda v: lax.reduce(v, 0.0, lambda a, b: a + b, (0,)))
    np.testing.assert_array_equal(f(x).numpy(), x.sum(0))
    g = fgrad.grad(lambda v: lax.reduce(v, -np.inf, lax.max, (0, 1)))(x)
    assert g.numpy()[2, 3] == 1 and g.numpy().sum() == 1
    np.testing.assert_array_equal(
        fgrad.vmap(lambda v: lax.reduce(v, 0.0, lax.add, (0,)))(x).numpy(), x.sum(1))


def test_reduce_with_a_general_computation_keeps_the_order():
    x = RNG.normal(size=(2, 7))
    idx = np.broadcast_to(np.arange(7), (2, 7)).astype(np.int32)

    def argmax(a, b):
        take_b = lax.gt(b[0], a[0])
        return lax.select(take_b, b[0], a[0]), lax.select(take_b, b[1], a[1])
    val, arg = lax.reduce((x, idx), (-np.inf, np.int32(-1)), argmax, (1,))
    np.testing.assert_array_equal(val.numpy(), x.max(1))
    np.testing.assert_array_equal(arg.numpy(), x.argmax(1))
    mats = RNG.normal(size=(5, 2, 2))
    ordered = np.linalg.multi_dot(list(mats))
    # a non-commutative associative combination: 2x2 matrix products stored as 4 arrays

    def matmul(a, b):
        return (a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3])
    parts = tuple(mats[:, i, j] for i in range(2) for j in range(2))
    out = lax.reduce(parts, (1.0, 0.0, 0.0, 1.0), matmul, (0,))
    np.testing.assert_allclose(np.array([o.numpy() for o in out]).reshape(2, 2), ordered,
                               rtol=1e-12)
    jitted = fgrad.jit(lambda p: lax.reduce(p, (1.0, 0.0, 0.0, 1.0), matmul, (0,)))(parts)
    np.testing.assert_allclose(np.array([o.numpy() for o in jitted]).reshape(2, 2), ordered,
                               rtol=1e-12)


def test_shape_helpers_match_numpy():
    x = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(lax.tile(x, (2, 3)).numpy(), np.tile(x, (2, 3)))
    np.testing.assert_array_equal(lax.stack([x, x + 1], axis=-1).numpy(),
                                  np.stack([x, x + 1], -1))
    assert [u.numpy().tolist() for u in lax.unstack(x, 1)] == [[0, 3], [1, 4], [2, 5]]
    parts = lax.split(x, (1, 2), axis=-1)
    np.testing.assert_array_equal(parts[1].numpy(), x[:, 1:])
    assert lax.broadcast_to_rank(np.ones(3), 3).shape == (1, 1, 3)
    assert lax.broadcast_to_rank(x, 1).shape == (2, 3)
    g = fgrad.grad(lambda v: (lax.tile(v, (2, 2)) * np.arange(24.0).reshape(4, 6)).sum())(
        x.astype(np.float64))
    want = np.arange(24.0).reshape(2, 2, 2, 3).sum((0, 2))
    np.testing.assert_array_equal(g.numpy(), want)
    with pytest.raises(ArgumentError, match="add up to"):
        lax.split(x, (1, 1), axis=1)
    with pytest.raises(ArgumentError, match="one entry per axis"):
        lax.tile(x, (2,))


@pytest.mark.parametrize("name", list(GEN.PATCHES))
def test_conv_general_dilated_patches_matches_jax(name):
    shape, filt, strides, pad, ldil, rdil, dn = GEN.PATCHES[name]
    x = GEN.operand(shape, "float32", 5)
    got = lax.conv_general_dilated_patches(x, filt, strides, pad, ldil, rdil, dn)
    want = FIX[f"patches/{name}"]
    assert got.shape == want.shape and got.dtype.np == want.dtype
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)


def test_precision_barrier_and_type_names():
    assert lax.Precision("highest") is lax.Precision.HIGHEST
    assert lax.Precision("bfloat16") is lax.Precision.DEFAULT
    a = RNG.normal(size=(3, 4)).astype(np.float32)
    b = RNG.normal(size=(4, 2)).astype(np.float32)
    out = lax.dot(a, b, precision=lax.Precision.HIGHEST)
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-5)
    lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                    precision=(lax.Precision.HIGH, lax.Precision.DEFAULT))
    lax.conv(np.ones((1, 1, 4, 4), np.float32), np.ones((1, 1, 2, 2), np.float32), (1, 1),
             "VALID", precision=lax.Precision.HIGHEST)
    tree = {"a": np.ones(2), "b": (1.0, np.arange(3))}
    out_tree = lax.optimization_barrier(tree)
    assert isinstance(out_tree["a"], fgrad.Tensor) and out_tree["b"][1].shape == (3,)
    assert lax.DotDimensionNumbers is not None
    assert lax.ConvGeneralDilatedDimensionNumbers is not None
