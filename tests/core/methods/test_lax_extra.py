"""Tests for lax.dynamic_slice / dynamic_update_slice / dynamic_index_in_dim and
lax.conv_general_dilated against JAX fixtures (tests/core/methods/fixtures/gen_lax_fixtures.py)."""
import pathlib

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, lax

FIX = np.load(pathlib.Path(__file__).parent / "fixtures" / "lax.npz")
STARTS = [(0, 1), (2, 3), (-1, -2), (9, 9), (-20, 1)]   # as in the generator
CONV = ["nchw_valid", "nhwc_same", "nhwc_same_stride2", "nhwc_explicit_dilated",
        "nchw_groups", "nwc_1d"]
CONV_ARGS = {
    "nchw_valid": ((1, 1), "VALID", (1, 1), ("NCHW", "OIHW", "NCHW"), 1),
    "nhwc_same": ((1, 1), "SAME", (1, 1), ("NHWC", "HWIO", "NHWC"), 1),
    "nhwc_same_stride2": ((2, 2), "SAME", (1, 1), ("NHWC", "HWIO", "NHWC"), 1),
    "nhwc_explicit_dilated": ((1, 2), ((1, 2), (0, 1)), (2, 1), ("NHWC", "HWIO", "NHWC"), 1),
    "nchw_groups": ((1, 1), "SAME", (1, 1), ("NCHW", "OIHW", "NCHW"), 2),
    "nwc_1d": ((2,), "SAME", (1,), ("NWC", "WIO", "NWC"), 1),
}
X, UPD = FIX["dyn/x"], FIX["dyn/upd"]


@pytest.mark.parametrize("i", range(len(STARTS)))
def test_dynamic_slice_static_and_traced_starts(i):
    a, b = STARTS[i]
    np.testing.assert_array_equal(lax.dynamic_slice(Tensor(X), (a, b), (3, 4)).numpy(),
                                  FIX[f"dyn/slice{i}"])
    traced = fgrad.jit(lambda x, s, t: lax.dynamic_slice(x, (s, t), (3, 4)))
    np.testing.assert_array_equal(traced(Tensor(X), Tensor(a), Tensor(b)).numpy(),
                                  FIX[f"dyn/slice{i}"])


@pytest.mark.parametrize("i", range(len(STARTS)))
def test_dynamic_update_slice(i):
    a, b = STARTS[i]
    np.testing.assert_array_equal(
        lax.dynamic_update_slice(Tensor(X), Tensor(UPD), (a, b)).numpy(), FIX[f"dyn/update{i}"])
    traced = fgrad.jit(lambda x, u, s, t: lax.dynamic_update_slice(x, u, (s, t)))
    np.testing.assert_array_equal(traced(Tensor(X), Tensor(UPD), Tensor(a), Tensor(b)).numpy(),
                                  FIX[f"dyn/update{i}"])


@pytest.mark.parametrize("i", range(len(STARTS)))
def test_dynamic_index_in_dim(i):
    a = STARTS[i][0]
    got = fgrad.jit(lambda x, s: lax.dynamic_index_in_dim(x, s, 0, keepdims=False))(
        Tensor(X), Tensor(a))
    np.testing.assert_array_equal(got.numpy(), FIX[f"dyn/index{i}"])
    kept = lax.dynamic_index_in_dim(Tensor(X), a, 0)
    assert kept.shape == (1, 12)


def test_dynamic_slice_vmap_and_grad():
    starts = Tensor(np.array([0, 4, 9], np.int32))
    rows = fgrad.vmap(lambda s: lax.dynamic_slice_in_dim(Tensor(X), s, 2, axis=0))(starts)
    np.testing.assert_array_equal(rows.numpy(), np.stack([X[0:2], X[4:6], X[8:10]]))
    g = fgrad.grad(lambda x: (lax.dynamic_slice(x, (Tensor(2), Tensor(3)), (3, 4)) ** 2).sum())(
        Tensor(X))
    want = np.zeros_like(X)
    want[2:5, 3:7] = 2 * X[2:5, 3:7]
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-6)
    row = lax.dynamic_update_index_in_dim(Tensor(X), Tensor(np.zeros(12, np.float32)), -1, 0)
    np.testing.assert_array_equal(row.numpy()[-1], 0)
    np.testing.assert_array_equal(row.numpy()[:-1], X[:-1])


def test_dynamic_slice_errors():
    with pytest.raises(ValueError, match="needs 2 start indices"):
        lax.dynamic_slice(Tensor(X), (0,), (3,))
    with pytest.raises(ValueError, match="slice size 11"):
        lax.dynamic_slice(Tensor(X), (0, 0), (11, 1))
    with pytest.raises(TypeError, match="integers"):
        lax.dynamic_slice(Tensor(X), (Tensor(1.5), 0), (1, 1))


@pytest.mark.parametrize("name", CONV)
def test_conv_general_dilated_matches_jax(name):
    strides, pad, rdil, dn, groups = CONV_ARGS[name]
    lhs, rhs = FIX[f"conv/{name}/lhs"], FIX[f"conv/{name}/rhs"]

    def conv(a, b):
        return lax.conv_general_dilated(a, b, strides, pad, rhs_dilation=rdil,
                                        dimension_numbers=dn, feature_group_count=groups)

    want = FIX[f"conv/{name}/out"]
    np.testing.assert_allclose(conv(Tensor(lhs), Tensor(rhs)).numpy(), want, rtol=1e-4,
                               atol=1e-4)
    np.testing.assert_allclose(fgrad.jit(conv)(Tensor(lhs), Tensor(rhs)).numpy(), want,
                               rtol=1e-4, atol=1e-4)


def test_conv_lhs_dilation_is_a_transposed_convolution():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 1, 3)).astype(np.float32)
    k = rng.normal(size=(1, 1, 2)).astype(np.float32)
    out = lax.conv_general_dilated(Tensor(x), Tensor(k), (1,), ((1, 1),), lhs_dilation=(2,))
    dil = np.zeros(5, np.float32)
    dil[::2] = x[0, 0]
    padded = np.pad(dil, 1)
    want = np.array([padded[i] * k[0, 0, 0] + padded[i + 1] * k[0, 0, 1] for i in range(6)])
    np.testing.assert_allclose(out.numpy()[0, 0], want, rtol=1e-5, atol=1e-6)


def test_conv_general_dilated_errors():
    x, w = Tensor(np.zeros((1, 3, 5, 5), np.float32)), Tensor(np.zeros((2, 3, 3, 3), np.float32))
    with pytest.raises(ValueError, match="dimension_numbers"):
        lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NC"))
    with pytest.raises(ValueError, match="padding must be"):
        lax.conv_general_dilated(x, w, (1, 1), "FULL")
    with pytest.raises(ValueError, match="groups"):
        lax.conv_general_dilated(x, w, (1, 1), "SAME", feature_group_count=2)
