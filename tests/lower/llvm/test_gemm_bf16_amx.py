"""bfloat16 products on AMX (llvm/gemm/pairs.py): which products take the path, and their
results against NumPy (float64 sums of the same bfloat16 values) on every transpose, batch
and edge, through the epilogue and the gradient. The results run where the CPU has
AMX-BF16 and the kernel grants this process its tiles; elsewhere they are skipped (the
product then runs as a float32 GEMM between conversions, tested with the other dtypes)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm.gemm.pairs import host_has_pairs, pairs_fit
from fgrad.lower.schedule.gemm_layout import GemmDims, MatrixView

BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(11)
needs_amx = pytest.mark.skipif(not host_has_pairs(),
                               reason="no AMX-BF16 or fast AVX512_BF16 on this CPU")
AMX_NOTE = "pairs of k steps"


def _dims(k: int, lhs: MatrixView, rhs: MatrixView) -> GemmDims:
    return GemmDims((), 8, 8, k, lhs, rhs)


def test_pairs_need_an_even_k_and_word_aligned_pairs():
    plain = MatrixView(False, 64, ())
    assert pairs_fit(_dims(64, plain, plain))
    assert pairs_fit(_dims(48, plain, plain))      # 24 pairs: a tile step, then 8 by vector
    assert not pairs_fit(_dims(47, plain, plain))                     # a pair past k
    assert not pairs_fit(_dims(64, MatrixView(False, 65, ()), plain))  # A's pairs straddle
    assert pairs_fit(_dims(64, MatrixView(True, 65, ()), plain))       # A interleaved: any ld
    assert not pairs_fit(_dims(64, plain, MatrixView(True, 67, ())))   # B^T's pairs straddle
    assert not pairs_fit(_dims(64, MatrixView(False, 64, (33,)), plain))  # odd batch stride


def _bf16(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(BF16)


def _exact(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64)


def _check_f32(fn, *arrays: np.ndarray, expect_amx: bool = True) -> np.ndarray:
    """fn's jitted result against its float64 evaluation on the same bfloat16 values;
    whether the program multiplied on AMX is as expected."""
    jitted = fgrad.jit(fn)
    args = [Tensor(a) for a in arrays]
    got = jitted(*args).numpy()
    want = fn(*[_exact(a) for a in arrays])
    scale = max(float(np.abs(want).max()), 1.0)
    np.testing.assert_allclose(got, want, rtol=0, atol=4e-7 * scale * np.sqrt(arrays[0].size))
    assert (AMX_NOTE in jitted.lower(*args).as_text()) == expect_amx
    return got


SHAPES = [(1, 32, 1), (7, 2, 31), (7, 32, 31), (64, 40, 64), (64, 64, 64), (257, 96, 33),
          (33, 544, 65), (256, 784, 70), (300, 1024, 100), (40, 1030, 50)]


@needs_amx
@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
def test_products_match_numpy_for_every_transpose(m, k, n, ta, tb):
    a = _bf16(k, m) if ta else _bf16(m, k)
    b = _bf16(n, k) if tb else _bf16(k, n)

    def product(x, y):
        x, y = (x.T if ta else x), (y.T if tb else y)
        return (x.float() if isinstance(x, Tensor) else x) @ \
            (y.float() if isinstance(y, Tensor) else y)
    _check_f32(product, a, b)


@needs_amx
def test_a_bfloat16_result_is_the_rounded_float32_sums():
    a, b = _bf16(130, 256), _bf16(256, 70)
    f = fgrad.jit(lambda x, y: x @ y)
    got = f(Tensor(a), Tensor(b)).numpy()
    assert got.dtype == BF16
    want = (_exact(a) @ _exact(b)).astype(np.float32)
    # one rounding to bfloat16 of sums that differ from the exact ones by float32 ulps
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2 ** -8, atol=1e-6)


@needs_amx
def test_batched_products_read_each_entry():
    a, b = _bf16(3, 40, 64), _bf16(3, 64, 24)
    _check_f32(lambda x, y: (x.float() if isinstance(x, Tensor) else x) @
               (y.float() if isinstance(y, Tensor) else y), a, b)


@needs_amx
def test_odd_contractions_keep_the_float32_gemm():
    a, b = _bf16(16, 41), _bf16(41, 16)      # k = 41: the last pair would reach past k
    _check_f32(lambda x, y: (x.float() if isinstance(x, Tensor) else x) @
               (y.float() if isinstance(y, Tensor) else y), a, b, expect_amx=False)


@needs_amx
def test_bias_and_relu_run_in_the_products_epilogue():
    x, w, bias = _bf16(100, 128), _bf16(128, 48), _bf16(48)

    def layer(x, w, bias):
        if isinstance(x, Tensor):
            return (x.float() @ w.float() + bias.float()).relu()
        return np.maximum(x @ w + bias, 0)
    _check_f32(layer, x, w, bias)


@needs_amx
def test_special_values_propagate():
    a, b = _bf16(32, 64), _bf16(64, 32)
    a[3, 5], a[7, 0], b[2, 9] = np.inf, np.nan, -np.inf
    got = fgrad.jit(lambda x, y: x.float() @ y.float())(Tensor(a), Tensor(b)).numpy()
    with np.errstate(invalid="ignore"):
        want = _exact(a) @ _exact(b)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-4)


@needs_amx
def test_gradients_of_a_bfloat16_layer_match_numpy():
    x, w = _bf16(64, 96), _bf16(96, 32)

    def loss(w, x):
        return (x.float() @ w.float()).relu().sum()
    gw = fgrad.jit(fgrad.grad(loss))(Tensor(w), Tensor(x)).numpy()
    mask = (_exact(x) @ _exact(w)) > 0
    want = _exact(x).T @ mask.astype(np.float64)
    np.testing.assert_allclose(gw.astype(np.float64), want, rtol=2 ** -7, atol=1e-2)


def test_the_amx_setting_keeps_the_float32_gemm():
    a, b = _bf16(64, 64), _bf16(64, 48)
    with fgrad.config.override(amx=False):
        _check_f32(lambda x, y: (x.float() if isinstance(x, Tensor) else x) @
                   (y.float() if isinstance(y, Tensor) else y), a, b, expect_amx=False)
