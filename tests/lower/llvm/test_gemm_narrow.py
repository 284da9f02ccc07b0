"""Products narrower than the GEMM's tile are computed swapped (schedule/gemm_layout.py
`_narrow_swapped`): y^T x^T in whole tiles, then a transpose restores the layout. Checked
against NumPy in float64 over transposed, batched and float64 operands, and in the
printed schedule."""
import numpy as np
import pytest

import fgrad
from fgrad import Tensor



def _rand(*shape, dtype=np.float32):
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)


def _schedule(fn, *args) -> str:
    text = fgrad.jit(fn, backend="llvm").lower(*map(Tensor, args)).as_text()
    return text[text.index("# schedule"):text.index("# kernel IR")]


def test_classifier_logits_are_computed_swapped():
    x, w = _rand(256, 512), _rand(10, 512)
    text = _schedule(lambda x, w: x @ w.T, x, w)
    assert "m=10 n=256 k=512" in text and "transpose" in text


def test_wide_enough_products_keep_their_orientation():
    x, w = _rand(256, 512), _rand(512, 16)
    assert "m=256 n=16 k=512" in _schedule(lambda x, w: (x @ w).relu(), x, w)
    x, w = _rand(12, 512), _rand(512, 8)   # as narrow both ways: nothing to gain
    assert "m=12 n=8 k=512" in _schedule(lambda x, w: x @ w, x, w)


CASES = {
    "nn": (lambda x, w: x @ w, lambda x, w: x @ w, ((300, 64), (64, 3))),
    "nt": (lambda x, w: x @ w.T, lambda x, w: x @ w.T, ((257, 31), (7, 31))),
    "tn": (lambda x, w: x.T @ w, lambda x, w: x.T @ w, ((40, 1000), (40, 1))),
    "tt": (lambda x, w: x.T @ w.T, lambda x, w: x.T @ w.T, ((33, 129), (5, 33))),
    "batched": (lambda x, w: x @ w, lambda x, w: x @ w, ((3, 100, 20), (3, 20, 9))),
    "broadcast_batch": (lambda x, w: x @ w, lambda x, w: x @ w, ((4, 64, 20), (20, 2))),
    "then_consumed": (lambda x, w: (x @ w + 1).sum(-1) @ x,
                      lambda x, w: (x @ w + 1).sum(-1) @ x, ((128, 64), (64, 10))),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_narrow_products_match_numpy(name, dtype):
    fn, ref, shapes = CASES[name]
    args = [_rand(*s, dtype=dtype) for s in shapes]
    if dtype == np.float32:   # float64's 16-wide tile keeps some of them as they are
        assert "kernel elementwise" in _schedule(fn, *args)   # the restoring transpose
    got = fgrad.jit(fn, backend="llvm")(*map(Tensor, args)).numpy()
    want = ref(*(a.astype(np.float64) for a in args))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10)


def test_narrow_product_gradients_match_numpy():
    x, w = _rand(256, 64), _rand(64, 10)
    gx, gw = fgrad.jit(fgrad.grad(lambda x, w: ((x @ w) ** 2).sum(), argnums=(0, 1)))(
        Tensor(x), Tensor(w))
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    np.testing.assert_allclose(gx.numpy(), 2 * (x64 @ w64) @ w64.T, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(gw.numpy(), 2 * x64.T @ (x64 @ w64), rtol=1e-4, atol=1e-3)
