"""fgrad.nn.dot_product_attention against a NumPy reference of jax.nn's definition:
(B, T, N, H) layout, grouped kv heads, bias, bool mask, causal and window masks, sequence
lengths, masked logits set to -0.7 * float32 max (so a fully masked row is uniform)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fgrad
from fgrad.nn import dot_product_attention

RNG = np.random.default_rng(0)
BIG_NEG = -0.7 * float(np.finfo(np.float32).max)


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, bias: Any = None, mask: Any = None,
              scale: float | None = None, is_causal: bool = False, window: Any = None,
              q_len: Any = None, kv_len: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """(output, logsumexp) computed head by head in float64 with loops over heads."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    b, t, n, h = q.shape
    s, kh = k.shape[1], k.shape[2]
    scale = 1 / np.sqrt(h) if scale is None else scale
    out, lse = np.zeros((b, t, n, h)), np.zeros((b, t, n))
    qi, ki = np.arange(t)[:, None], np.arange(s)[None, :]
    for bi in range(b):
        for head in range(n):
            kv = head // (n // kh)
            logits = scale * q[bi, :, head] @ k[bi, :, kv].T
            if bias is not None:
                logits = logits + np.broadcast_to(bias, (b, n, t, s))[bi, head]
            keep = np.ones((t, s), bool)
            if mask is not None:
                keep &= np.broadcast_to(mask, (b, n, t, s))[bi, head]
            if is_causal:
                keep &= qi >= ki
            if window is not None:
                keep &= (qi <= ki + window[0]) & (qi >= ki - window[1])
            if q_len is not None:
                keep &= qi < q_len[bi]
            if kv_len is not None:
                keep &= ki < kv_len[bi]
            logits = np.where(keep, logits, BIG_NEG)
            m = logits.max(-1, keepdims=True)
            e = np.exp(logits - m)
            out[bi, :, head] = (e / e.sum(-1, keepdims=True)) @ v[bi, :, kv]
            lse[bi, :, head] = (m + np.log(e.sum(-1, keepdims=True)))[:, 0]
    if q_len is not None:
        out *= (np.arange(t)[None, :] < np.asarray(q_len)[:, None])[:, :, None, None]
    return out, lse


def qkv(b: int = 2, t: int = 5, s: int = 7, n: int = 4, kh: int = 4, h: int = 8,
        dtype: Any = np.float32) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (RNG.standard_normal((b, t, n, h)).astype(dtype),
            RNG.standard_normal((b, s, kh, h)).astype(dtype),
            RNG.standard_normal((b, s, kh, h)).astype(dtype))


def check(q: np.ndarray, k: np.ndarray, v: np.ndarray, tol: float = 2e-5, **kw: Any) -> None:
    window = kw.get("local_window_size")
    ref_kw = {"window": (window, window) if isinstance(window, int) else window,
              "q_len": kw.get("query_seq_lengths"), "kv_len": kw.get("key_value_seq_lengths")}
    ref_kw.update({key: kw[key] for key in ("bias", "mask", "scale", "is_causal") if key in kw})
    want, _ = reference(q, k, v, **ref_kw)
    got = dot_product_attention(q, k, v, **kw)
    assert got.shape == q.shape and got.dtype.np == q.dtype
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)


def test_plain_multi_head() -> None:
    check(*qkv())


def test_bias_mask_and_scale() -> None:
    q, k, v = qkv()
    bias = RNG.standard_normal((1, 4, 5, 7)).astype(np.float32)
    mask = RNG.random((2, 1, 5, 7)) > 0.3
    check(q, k, v, bias=bias)
    check(q, k, v, mask=mask)
    check(q, k, v, bias=bias, mask=mask, scale=0.3)
    check(q, k, v, bias=RNG.standard_normal((2, 4, 1, 7)).astype(np.float32))


def test_causal_and_window() -> None:
    q, k, v = qkv(t=6, s=6)
    check(q, k, v, is_causal=True)
    check(q, k, v, is_causal=True, mask=RNG.random((1, 1, 6, 6)) > 0.2)
    check(q, k, v, local_window_size=(2, 1))
    check(q, k, v, local_window_size=1, is_causal=True)


def test_grouped_and_multi_query_heads() -> None:
    check(*qkv(n=6, kh=2))  # GQA: query heads 0-2 share kv head 0, 3-5 kv head 1
    check(*qkv(n=6, kh=1), is_causal=True)  # MQA
    q, k, v = qkv(n=6, kh=3)
    check(q, k, v, bias=RNG.standard_normal((2, 6, 5, 7)).astype(np.float32),
          mask=RNG.random((2, 6, 5, 7)) > 0.3)


def test_fully_masked_row_attends_uniformly() -> None:
    q, k, v = qkv(b=1)
    mask = np.ones((1, 1, 5, 7), bool)
    mask[0, 0, 2] = False
    got = dot_product_attention(q, k, v, mask=mask).numpy()
    np.testing.assert_allclose(got[0, 2], np.broadcast_to(v[0].mean(0), (4, 8)), atol=1e-5)
    assert np.isfinite(got).all()


def test_sequence_lengths_and_residual() -> None:
    q, k, v = qkv()
    q_len, kv_len = np.array([3, 5], np.int32), np.array([7, 4], np.int32)
    check(q, k, v, query_seq_lengths=q_len, key_value_seq_lengths=kv_len)
    out, lse = dot_product_attention(q, k, v, is_causal=True, return_residual=True)
    want_out, want_lse = reference(q, k, v, is_causal=True)
    assert lse.shape == (2, 5, 4)
    np.testing.assert_allclose(out.numpy(), want_out, atol=2e-5)
    np.testing.assert_allclose(lse.numpy(), want_lse, atol=2e-5)


def test_unbatched_layout_and_dtypes() -> None:
    q, k, v = qkv(b=1)
    got = dot_product_attention(q[0], k[0], v[0], is_causal=True)
    assert got.shape == (5, 4, 8)
    np.testing.assert_allclose(got.numpy(), reference(q, k, v, is_causal=True)[0][0],
                               atol=2e-5)
    q16, k16, v16 = (a.astype(np.float16) for a in (q, k, v))
    got16 = dot_product_attention(q16, k16, v16)
    assert got16.dtype == fgrad.dtypes.float16
    np.testing.assert_allclose(got16.numpy().astype(np.float64),
                               reference(q16, k16, v16)[0], atol=5e-3)


def test_under_jit_and_vmap() -> None:
    q, k, v = qkv(n=4, kh=2)
    want = reference(q, k, v, is_causal=True)[0]
    f = fgrad.jit(lambda q, k, v: dot_product_attention(q, k, v, is_causal=True))
    np.testing.assert_allclose(f(q, k, v).numpy(), want, atol=2e-5)
    per_example = fgrad.vmap(lambda q, k, v: dot_product_attention(q, k, v, is_causal=True))
    np.testing.assert_allclose(per_example(q, k, v).numpy(), want, atol=2e-5)


def test_gradient_matches_finite_differences() -> None:
    q, k, v = qkv(b=1, t=3, s=4, n=4, kh=2, h=3)
    bias = RNG.standard_normal((1, 1, 3, 4)).astype(np.float32)
    mask = np.array([[True, True, False, True]] * 3)[None, None]
    ct = RNG.standard_normal(q.shape)

    def loss_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> float:
        return float((reference(q, k, v, bias=bias, mask=mask, is_causal=True)[0] * ct).sum())

    def loss(q: Any, k: Any, v: Any) -> Any:
        out = dot_product_attention(q, k, v, bias, mask, is_causal=True)
        return (out * fgrad.Tensor(ct.astype(np.float32))).sum()

    grads = fgrad.grad(loss, argnums=(0, 1, 2))(*(fgrad.Tensor(a) for a in (q, k, v)))
    args = [a.astype(np.float64) for a in (q, k, v)]
    eps = 1e-6
    for which, g in enumerate(grads):
        fd = np.zeros(args[which].shape)
        for pos in np.ndindex(*args[which].shape):
            up = [a.copy() for a in args]
            down = [a.copy() for a in args]
            up[which][pos] += eps
            down[which][pos] -= eps
            fd[pos] = (loss_ref(*up) - loss_ref(*down)) / (2 * eps)
        np.testing.assert_allclose(g.numpy(), fd, rtol=1e-4, atol=1e-4)


def test_clear_errors() -> None:
    q, k, v = qkv(n=6, kh=4)
    with pytest.raises(ValueError, match="N a multiple of key's 4 heads"):
        dot_product_attention(q, k, v)
    q, k, v = qkv()
    with pytest.raises(ValueError, match="mask must be bool"):
        dot_product_attention(q, k, v, mask=np.ones((1, 1, 5, 7), np.float32))
    with pytest.raises(ValueError, match="bias of shape .* does not broadcast"):
        dot_product_attention(q, k, v, bias=np.ones((1, 3, 5, 7), np.float32))
    with pytest.raises(ValueError, match="must match key"):
        dot_product_attention(q, k, v[:, :3])
    with pytest.raises(ValueError, match="implementation='cudnn'"):
        dot_product_attention(q, k, v, implementation="cudnn")
