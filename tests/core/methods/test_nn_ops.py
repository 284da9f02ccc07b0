"""Tests for fgrad/core/methods/nn/nn_ops.py (+ conv_ops, pool_ops, loss_ops, einsum).

Forward values (and, once fgrad.grad exists, gradients of sum(out * cot)) are compared with
PyTorch references in fixtures/nn_ops.npz, written by fixtures/gen_nn_ops.py; each fixture
case has an fgrad twin in OPS below. einsum is also checked against np.einsum inline, and the
reference documentation's examples, dtype rules and error messages are checked directly.
"""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, dtypes

pytestmark = pytest.mark.backends  # jit tests run per backend (conftest.py)

FIXTURES = np.load(pathlib.Path(__file__).parent / "fixtures" / "nn_ops.npz")
CASES = json.loads(str(FIXTURES["__cases__"]))


def _invstd(v: Tensor) -> Tensor:
    return (v + 1e-5).rsqrt()


def _log_softmax(x: Tensor, axis: int) -> Tensor:
    return x - x.exp().sum(axis, keepdim=True).log()


OPS = {
    # convolution
    "conv2d_basic": lambda x, w, b: x.conv2d(w, b),
    "conv2d_stride_pad": lambda x, w: x.conv2d(w, stride=2, padding=1),
    "conv2d_tuple_args": lambda x, w: x.conv2d(w, stride=(2, 1), dilation=(1, 2),
                                               padding=(1, 2)),
    "conv2d_groups": lambda x, w, b: x.conv2d(w, b, groups=2, padding=1),
    "conv2d_depthwise": lambda x, w: x.conv2d(w, groups=3, stride=2),
    "conv2d_asym_pad": lambda x, w: x.conv2d(w, padding=(1, 2, 0, 3)),
    "conv2d_same": lambda x, w: x.conv2d(w, padding="same", dilation=2),
    "conv2d_valid": lambda x, w: x.conv2d(w, padding="valid"),
    "conv2d_1x1": lambda x, w: x.conv2d(w),
    "conv2d_unbatched": lambda x, w: x.conv2d(w, padding=1),
    "conv2d_empty_batch": lambda x, w: x.conv2d(w),
    "conv1d": lambda x, w, b: x.conv2d(w, b, stride=2, padding=1),
    "conv3d": lambda x, w: x.conv2d(w, stride=(1, 2, 1), padding=(1, 0, 1)),
    "conv_transpose2d_basic": lambda x, w, b: x.conv_transpose2d(w, b),
    "conv_transpose2d_stride": lambda x, w: x.conv_transpose2d(w, stride=2, padding=1,
                                                               output_padding=1),
    "conv_transpose2d_groups": lambda x, w: x.conv_transpose2d(
        w, groups=2, stride=(2, 3), dilation=2, padding=(0, 1), output_padding=(1, 0)),
    "conv_transpose1d": lambda x, w: x.conv_transpose2d(w, stride=3),
    # pooling
    "avg_pool2d_basic": lambda x: x.avg_pool2d(2),
    "avg_pool2d_pad": lambda x: x.avg_pool2d(3, 2, padding=1),
    "avg_pool2d_ceil": lambda x: x.avg_pool2d(3, 2, padding=1, ceil_mode=True),
    "avg_pool2d_ceil_exclude": lambda x: x.avg_pool2d(3, 2, padding=1, ceil_mode=True,
                                                      count_include_pad=False),
    "avg_pool2d_rect": lambda x: x.avg_pool2d((2, 3), (1, 2), padding=(1, 1)),
    "avg_pool1d": lambda x: x.avg_pool2d((3,), 2, padding=1, count_include_pad=False),
    "avg_pool3d": lambda x: x.avg_pool2d((2, 2, 2)),
    "max_pool2d_basic": lambda x: x.max_pool2d(2),
    "max_pool2d_overlap": lambda x: x.max_pool2d(3, 1, padding=1),
    "max_pool2d_dilation": lambda x: x.max_pool2d(2, 1, dilation=2),
    "max_pool2d_ceil": lambda x: x.max_pool2d(3, 2, ceil_mode=True),
    "max_pool2d_indices": lambda x: x.max_pool2d(3, 2, padding=1, return_indices=True),
    "max_pool2d_indices_dil_ceil": lambda x: x.max_pool2d(
        (2, 3), 2, dilation=(2, 1), ceil_mode=True, return_indices=True),
    "max_pool1d_indices": lambda x: x.max_pool2d((3,), 2, return_indices=True),
    "max_pool3d": lambda x: x.max_pool2d((2, 2, 2), return_indices=True),
    "max_unpool2d": lambda v, i: v.max_unpool2d(i, 2),
    "max_unpool2d_output_size": lambda v, i: v.max_unpool2d(i, 3, 2, padding=1,
                                                            output_size=(1, 2, 7, 7)),
    # einsum
    "einsum_matmul": lambda a, b: Tensor.einsum("ij,jk->ik", a, b),
    "einsum_implicit": lambda a, b: Tensor.einsum("ba,ac", a, b),
    "einsum_batch": lambda a, b: Tensor.einsum("bij,bjk->bik", a, b),
    "einsum_ellipsis_broadcast": lambda a, b: Tensor.einsum("...ij,...jk->...ik", a, b),
    "einsum_size1_broadcast": lambda a, b: Tensor.einsum("ij,ij->ij", a, b),
    "einsum_three": lambda a, b, c: Tensor.einsum("ij,jk,kl->il", [a, b, c]),
    "einsum_trace": lambda a: Tensor.einsum("ii", a),
    "einsum_diag_batch": lambda a: Tensor.einsum("bii->bi", a),
    "einsum_diag_contract": lambda a, b: Tensor.einsum("iij,jk->ik", a, b),
    "einsum_outer": lambda a, b: Tensor.einsum("i,j->ij", a, b),
    "einsum_sum_all": lambda a: Tensor.einsum("ijk->", a),
    "einsum_transpose": lambda a: Tensor.einsum("ijk->kji", a),
    "einsum_bilinear": lambda x, w, y: Tensor.einsum("bn,anm,bm->ba", x, w, y),
    # layers
    "linear": lambda x, w, b: x.linear(w, b),
    "linear_batched": lambda x, w: x.linear(w),
    "linear_1d_weight": lambda x, w, b: x.linear(w, b),
    "layernorm_last": lambda x: x.layernorm(),
    "layernorm_two_axes": lambda x: x.layernorm((-2, -1), eps=1e-3),
    "batchnorm": lambda x, w, b, m, v: x.batchnorm(w, b, m, _invstd(v)),
    "batchnorm_plain_2d": lambda x, m, v: x.batchnorm(None, None, m, _invstd(v)),
    # attention
    "sdpa_basic": lambda q, k, v: q.scaled_dot_product_attention(k, v),
    "sdpa_bool_mask": lambda q, k, v, m: q.scaled_dot_product_attention(k, v, attn_mask=m),
    "sdpa_float_mask": lambda q, k, v, m: q.scaled_dot_product_attention(k, v, m),
    "sdpa_causal": lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=True),
    "sdpa_causal_rect": lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=True),
    "sdpa_gqa": lambda q, k, v: q.scaled_dot_product_attention(k, v, enable_gqa=True),
    # losses
    **{f"bce_{r}": (lambda p, y, r=r: p.binary_crossentropy(y, r))
       for r in ("mean", "sum", "none")},
    **{f"bce_logits_{r}": (lambda x, y, r=r: x.binary_crossentropy_logits(y, r))
       for r in ("mean", "sum", "none")},
    "bce_saturated": lambda p, y: p.binary_crossentropy(y),
    "bce_logits_pos_weight": lambda x, y, w: x.binary_crossentropy_logits(y, pos_weight=w),
    "bce_logits_extreme": lambda x, y: x.binary_crossentropy_logits(y),
    **{f"sparse_cce_{r}": (lambda x, y, r=r: x.sparse_categorical_crossentropy(y, reduction=r))
       for r in ("mean", "sum", "none")},
    "sparse_cce_ignore_smooth": lambda x, y: x.sparse_categorical_crossentropy(
        y, ignore_index=2, label_smoothing=0.2),
    "sparse_cce_ignore_default": lambda x, y: x.sparse_categorical_crossentropy(y),
    "sparse_cce_3d": lambda x, y: x.sparse_categorical_crossentropy(
        y, label_smoothing=0.1, reduction="sum"),
    "ce_index": lambda x, y: x.cross_entropy(y),
    "ce_index_smooth_none": lambda x, y: x.cross_entropy(y, "none", label_smoothing=0.3),
    "ce_probs": lambda x, y: x.cross_entropy(y),
    "ce_probs_smooth_sum": lambda x, y: x.cross_entropy(y, "sum", 0.1),
    "ce_spatial": lambda x, y: x.cross_entropy(y),
    "ce_unbatched": lambda x, y: x.cross_entropy(y),
    "ce_large_logits": lambda x, y: x.cross_entropy(y),
    "nll_mean": lambda x, y: x.nll_loss(y),
    "nll_weight_ignore": lambda x, y, w: x.nll_loss(y, w, ignore_index=2),
    "nll_weight_sum": lambda x, y, w: x.nll_loss(y, w, reduction="sum"),
    "nll_none_spatial": lambda x, y: x.nll_loss(y, reduction="none"),
}


def _inputs(name: str) -> list[Tensor]:
    return [Tensor(FIXTURES[f"{name}:in{i}"]) for i in range(CASES[name]["n_in"])]


def _outputs(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def test_every_fixture_case_has_an_fgrad_twin():
    assert sorted(OPS) == sorted(CASES)


@pytest.mark.backends
@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_matches_torch(name, run_op):
    outs = _outputs(run_op(OPS[name], *_inputs(name)))
    assert len(outs) == CASES[name]["n_out"]
    for j, out in enumerate(outs):
        ref = FIXTURES[f"{name}:out{j}"]
        assert out.shape == ref.shape, f"{name} output {j}: {out.shape} vs {ref.shape}"
        if ref.dtype.kind in "iu":
            assert out.dtype.is_int
            np.testing.assert_array_equal(out.numpy(), ref)
        else:
            assert out.dtype == dtypes.float32
            np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-5, err_msg=name)


GRAD_CASES = sorted(n for n in CASES if CASES[n]["grads"])


@pytest.mark.skipif(not hasattr(fgrad, "grad"), reason="fgrad.grad is not available yet")
@pytest.mark.backends
@pytest.mark.parametrize("name", GRAD_CASES)
def test_gradients_match_torch(name, run_op):
    args = _inputs(name)
    wrt = CASES[name]["grads"]
    cots = {j: Tensor(FIXTURES[f"{name}:cot{j}"]) for j in range(CASES[name]["n_out"])
            if f"{name}:cot{j}" in FIXTURES}

    def objective(*diff):
        full = list(args)
        for i, d in zip(wrt, diff, strict=True):
            full[i] = d
        outs = _outputs(OPS[name](*full))
        return sum((outs[j] * c).sum() for j, c in cots.items())

    grad_fn = fgrad.grad(objective, argnums=tuple(range(len(wrt))))
    grads = run_op(grad_fn, *[args[i] for i in wrt])
    for i, g in zip(wrt, grads, strict=True):
        want = FIXTURES[f"{name}:grad{i}"]
        if name.startswith("max_unpool2d") and i == 0:
            want = want * ~_overwritten(args[1].numpy())
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-4,
                                   atol=1e-5, err_msg=f"{name}: gradient of input {i}")


def _overwritten(indices: np.ndarray) -> np.ndarray:
    """Where max_unpool2d's value is overwritten by a later one at the same output index
    (overlapping pools repeat an index). Such values do not reach the output, so fgrad's
    gradient there is 0, as a finite difference gives and as JAX's `.at[].set` does;
    PyTorch's backward gathers the output's gradient for every repeat (documented in
    docs/design.md)."""
    rows = indices.reshape(indices.shape[0] * indices.shape[1], -1)
    out = np.zeros(rows.shape, bool)
    for r, row in enumerate(rows):
        seen: set[int] = set()
        for j in range(len(row) - 1, -1, -1):
            out[r, j] = int(row[j]) in seen
            seen.add(int(row[j]))
    return out.reshape(indices.shape)


# ---------------------------------------------------------------- composition

@pytest.mark.parametrize("name", ["conv2d_groups", "conv_transpose2d_groups",
                                  "max_pool2d_indices", "einsum_diag_contract", "sdpa_causal",
                                  "nll_weight_ignore", "max_unpool2d"])
def test_jit_matches_eager(name):
    args = _inputs(name)
    eager = _outputs(OPS[name](*args))
    jitted = _outputs(fgrad.jit(OPS[name])(*args))
    for e, j in zip(eager, jitted, strict=True):
        assert e.dtype == j.dtype and e.shape == j.shape
        np.testing.assert_allclose(j.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)


def test_vmap_matches_a_loop():
    rng = np.random.default_rng(3)
    xs = Tensor(rng.standard_normal((3, 2, 3, 6, 5)).astype(np.float32))
    ws = Tensor(rng.standard_normal((3, 4, 3, 3, 3)).astype(np.float32))
    fns = [lambda x, w: x.conv2d(w, stride=2, padding=(1, 0, 2, 1)),
           lambda x, w: x.conv_transpose2d(w.transpose(0, 1), stride=2),
           lambda x, w: x.max_pool2d(3, 2, padding=1, return_indices=True)[1],
           lambda x, w: Tensor.einsum("nchw,ochw->no", x[:, :, :3, :3], w)]
    for fn in fns:
        batched = fgrad.vmap(fn)(xs, ws).numpy()
        looped = np.stack([fn(xs[i], ws[i]).numpy() for i in range(3)])
        np.testing.assert_allclose(batched, looped, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- reference doc examples

def test_doc_examples_conv_and_pool():
    t = Tensor.arange(9).reshape(1, 1, 3, 3)
    w = Tensor.ones(1, 1, 2, 2)
    np.testing.assert_array_equal(t.conv2d(w).numpy(), [[[[8, 12], [20, 24]]]])
    np.testing.assert_array_equal(t.conv_transpose2d(w).numpy()[0, 0],
                                  [[0, 1, 3, 2], [3, 8, 12, 7], [9, 20, 24, 13],
                                   [6, 13, 15, 8]])
    t = Tensor.arange(25).reshape(1, 1, 5, 5)
    np.testing.assert_allclose(t.avg_pool2d(ceil_mode=True).numpy()[0, 0],
                               [[3, 5, 6.5], [13, 15, 16.5], [20.5, 22.5, 24]])
    np.testing.assert_allclose(t.avg_pool2d(padding=1, count_include_pad=False).numpy()[0, 0],
                               [[0, 1.5, 3.5], [7.5, 9, 11], [17.5, 19, 21]])
    np.testing.assert_array_equal(t.max_pool2d(padding=1).numpy()[0, 0],
                                  [[0, 2, 4], [10, 12, 14], [20, 22, 24]])
    t = Tensor.arange(1, 17).reshape(1, 1, 4, 4)
    values, indices = t.max_pool2d(return_indices=True)
    np.testing.assert_array_equal(indices.numpy()[0, 0], [[5, 7], [13, 15]])
    np.testing.assert_array_equal(values.max_unpool2d(indices).numpy()[0, 0],
                                  [[0, 0, 0, 0], [0, 6, 0, 8], [0, 0, 0, 0], [0, 14, 0, 16]])


def test_doc_examples_layers_and_losses():
    x, y = Tensor([[1, 2], [3, 4]]), Tensor([[5, 6], [7, 8]])
    assert Tensor.einsum("ij,ij->", x, y).item() == 70
    np.testing.assert_array_equal(x.linear(x, Tensor([1, 2])).numpy(), [[8, 12], [16, 24]])
    seq = Tensor([1, 2, 3]).sequential([lambda v: v * 2, lambda v: v + 1])
    np.testing.assert_array_equal(seq.numpy(), [3, 5, 7])
    bce = Tensor([0.1, 0.9, 0.2]).binary_crossentropy(Tensor([0, 1, 0])).item()
    assert bce == pytest.approx(0.14462155103683472, rel=1e-6)
    bce_logits = Tensor([-1, 2, -3]).binary_crossentropy_logits(Tensor([0, 1, 0])).item()
    assert bce_logits == pytest.approx(0.16292566061019897, rel=1e-6)
    t, labels = Tensor([[-1, 2, -3], [1, -2, 3]]), Tensor([1, 2])
    assert t.sparse_categorical_crossentropy(labels).item() == pytest.approx(0.0939152464, 1e-6)
    np.testing.assert_allclose(t.cross_entropy(labels, reduction="none").numpy(),
                               [0.0549852, 0.1328453], rtol=1e-5)


# ---------------------------------------------------------------- einsum vs NumPy

EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("i,i->", [(5,), (5,)]),
    ("i,i", [(5,), (5,)]),
    ("ii->i", [(4, 4)]),
    ("iii->", [(3, 3, 3)]),
    ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]),
    ("ji", [(3, 4)]),
    ("...ii->...i", [(2, 3, 4, 4)]),
    ("...i,...i->...", [(2, 3, 4), (2, 3, 4)]),
    ("b...j,bj...->b...", [(2, 3, 4), (2, 4, 3)]),
    ("ijk,ikl->ijl", [(2, 3, 4), (2, 4, 5)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 2)]),
    ("Ab,bA->A", [(3, 4), (4, 3)]),
    ("ij,kl->ijkl", [(2, 3), (4, 1)]),
    ("ij,ij->i", [(0, 3), (0, 3)]),
    ("ij,jk->ik", [(3, 0), (0, 2)]),
]


@pytest.mark.parametrize("formula,shapes", EINSUM_CASES)
def test_einsum_matches_numpy(formula, shapes):
    rng = np.random.default_rng(len(formula))
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    out = Tensor.einsum(formula, *[Tensor(a) for a in arrays])
    ref = np.einsum(formula, *[a.astype(np.float64) for a in arrays])
    assert out.shape == ref.shape
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_einsum_dtypes():
    a, b = Tensor([[1, 2], [3, 4]]), Tensor([[0.5, 1.0], [1.5, 2.0]])
    assert Tensor.einsum("ij,jk->ik", a, a).dtype == dtypes.int32
    assert Tensor.einsum("ij,jk->ik", a, b).dtype == dtypes.float32
    assert Tensor.einsum("ij->", a, dtype=dtypes.float64).dtype == dtypes.float64


@pytest.mark.parametrize("formula,shapes,message", [
    ("ij,jk->ik", [(2, 3)], "has 2 operands"),
    ("ij,jk->ik", [(2, 3), (4, 5)], "sizes 3 and 4"),
    ("ij->ik", [(2, 3)], "appear in the inputs"),
    ("ijk->i", [(2, 3)], "names 3 axes"),
    ("ii->i", [(2, 3)], "repeated on axes of sizes 2 and 3"),
    ("i1->i", [(2, 3)], "must be letters"),
])
def test_einsum_errors(formula, shapes, message):
    with pytest.raises(ValueError, match=message):
        Tensor.einsum(formula, *[Tensor.ones(*s) for s in shapes])


# ---------------------------------------------------------------- dtypes, shapes, dropout

def test_conv_dtypes_and_explicit_dtype():
    x, w = Tensor.arange(16).reshape(1, 1, 4, 4), Tensor.ones(1, 1, 2, 2, dtype=dtypes.int32)
    out = x.conv2d(w)
    assert out.dtype == dtypes.int32
    np.testing.assert_array_equal(out.numpy()[0, 0], [[10, 14, 18], [26, 30, 34],
                                                      [42, 46, 50]])
    assert x.conv2d(w, dtype=dtypes.float64).dtype == dtypes.float64
    assert x.conv2d(Tensor.ones(1, 1, 2, 2)).dtype == dtypes.float32


def test_pool_dtypes():
    x = Tensor.arange(16).reshape(1, 1, 4, 4)
    assert x.avg_pool2d().dtype == dtypes.float32
    assert x.max_pool2d().dtype == dtypes.int32
    neg = (-x).max_pool2d(padding=1)
    padded = np.pad(-np.arange(16).reshape(4, 4), 1, constant_values=-(2**31))
    np.testing.assert_array_equal(neg.numpy()[0, 0], padded.reshape(3, 2, 3, 2).max((1, 3)))
    _, idx = Tensor.ones(1, 1, 4, 4).max_pool2d(return_indices=True)
    np.testing.assert_array_equal(idx.numpy()[0, 0], [[0, 2], [8, 10]])


def test_pool_leading_dims_are_free():
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 6, 6)).astype(np.float32)
    out = Tensor(x).max_pool2d(2).numpy()
    ref = x.reshape(2, 3, 4, 3, 2, 3, 2).max(axis=(4, 6))
    np.testing.assert_array_equal(out, ref)
    out = Tensor(x[0, 0, 0]).avg_pool2d(3, 3).numpy()
    np.testing.assert_allclose(out, x[0, 0, 0].reshape(2, 3, 2, 3).mean(axis=(1, 3)), 1e-6)


def test_layernorm_and_batchnorm_numpy():
    x = np.random.default_rng(2).standard_normal((4, 3, 5)).astype(np.float32) * 3 + 2
    out = Tensor(x).layernorm(axis=1).numpy()
    ref = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    mean, invstd = Tensor(x.mean((0, 2))), Tensor(1 / np.sqrt(x.var((0, 2)) + 1e-5))
    out = Tensor(x).batchnorm(None, None, mean, invstd).numpy()
    np.testing.assert_allclose(out.mean((0, 2)), 0, atol=1e-5)
    np.testing.assert_allclose(out.std((0, 2)), 1, atol=1e-3)


def test_dropout_without_key_is_identity():
    x = Tensor.arange(6).float()
    assert x.dropout() is x
    assert x.dropout(0.9, key=None) is x
    with pytest.raises(ValueError, match="out of range"):
        x.dropout(1.5)


@pytest.mark.skipif(not hasattr(getattr(fgrad, "random", None), "bernoulli"),
                    reason="fgrad.random.bernoulli is not available yet")
def test_dropout_with_key():
    from fgrad import random
    x = Tensor.ones(200, 50)
    out = x.dropout(0.25, key=random.key(0)).numpy()
    kept = out != 0
    np.testing.assert_allclose(out[kept], 1 / 0.75, rtol=1e-6)
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_array_equal(x.dropout(0.25, key=random.key(0)).numpy(), out)
    assert not np.array_equal(x.dropout(0.25, key=random.key(1)).numpy(), out)
    np.testing.assert_array_equal(x.dropout(1.0, key=random.key(0)).numpy(), 0)


def test_attention_dropout_needs_a_key():
    rng = np.random.default_rng(4)
    q, k, v = (Tensor(rng.standard_normal((2, 3, 4)).astype(np.float32)) for _ in range(3))
    plain = q.scaled_dot_product_attention(k, v).numpy()
    np.testing.assert_array_equal(q.scaled_dot_product_attention(k, v, dropout_p=0.5).numpy(),
                                  plain)
    if hasattr(getattr(fgrad, "random", None), "bernoulli"):
        dropped = q.scaled_dot_product_attention(k, v, dropout_p=1.0, key_=fgrad.random.key(0))
        np.testing.assert_array_equal(dropped.numpy(), 0)
        half = q.scaled_dot_product_attention(k, v, dropout_p=0.5, key_=fgrad.random.key(0))
        assert not np.allclose(half.numpy(), plain)


def test_losses_accept_python_labels():
    logits = Tensor([[-1.0, 2.0, -3.0], [1.0, -2.0, 3.0]])
    expected = logits.cross_entropy(Tensor([1, 2])).item()
    assert logits.cross_entropy([1, 2]).item() == pytest.approx(expected)
    assert logits.sparse_categorical_crossentropy([1, 2]).item() == pytest.approx(expected)


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("fn,error,message", [
    (lambda: Tensor.ones(1, 3, 5, 5).conv2d(Tensor.ones(2, 2, 3, 3)), ValueError,
     r"input has 3 channels but weight expects .*\(1, 3, 5, 5\).*\(2, 2, 3, 3\)"),
    (lambda: Tensor.ones(1, 4, 5, 5).conv2d(Tensor.ones(3, 2, 3, 3), groups=2), ValueError,
     "out_channels 3 is not divisible by groups=2"),
    (lambda: Tensor.ones(1, 3, 5).conv2d(Tensor.ones(2, 3, 3, 3, 3)), ValueError,
     "3-d convolution needs a 5-d input"),
    (lambda: Tensor.ones(1, 3, 5, 5).conv2d(Tensor.ones(2, 3, 3, 3), Tensor.ones(3)),
     ValueError, r"bias must have shape \(2,\)"),
    (lambda: Tensor.ones(1, 1, 2, 2).conv2d(Tensor.ones(1, 1, 3, 3)), ValueError,
     "does not fit"),
    (lambda: Tensor.ones(1, 1, 5, 5).conv2d(Tensor.ones(1, 1, 3, 3), padding=(1, 2, 3)),
     ValueError, "padding must be an int, 2 ints"),
    (lambda: Tensor.ones(1, 1, 5, 5).conv2d(Tensor.ones(1, 1, 3, 3), stride=(1, 2, 3)),
     ValueError, "stride must be an int or a sequence of 2 ints"),
    (lambda: Tensor.ones(1, 1, 5, 5).conv2d(Tensor.ones(1, 1, 3, 3), stride=2,
                                            padding="same"), ValueError, "needs stride 1"),
    (lambda: Tensor.ones(1, 2, 5, 5).conv_transpose2d(Tensor.ones(3, 1, 3, 3)), ValueError,
     "input has 2 channels but weight expects 3"),
    (lambda: Tensor.ones(1, 1, 5, 5).conv_transpose2d(Tensor.ones(1, 1, 3, 3),
                                                      output_padding=1), ValueError,
     "output_padding"),
    (lambda: Tensor.ones(3).avg_pool2d(), ValueError, "needs an input with at least 2 dims"),
    (lambda: Tensor.ones(1, 1, 2, 2).max_unpool2d(Tensor.ones(1, 1, 2, 3).int()), ValueError,
     "same shape"),
    (lambda: Tensor.ones(2, 3).cross_entropy(Tensor([1, 2, 0])), ValueError,
     r"class-index targets must have shape \(2,\)"),
    (lambda: Tensor.ones(2, 3).cross_entropy(Tensor.ones(2, 4)), ValueError,
     "probability targets"),
    (lambda: Tensor.ones(2, 3).cross_entropy(Tensor([1, 2]), label_smoothing=2.0), ValueError,
     "label_smoothing"),
    (lambda: Tensor.ones(2, 3).sparse_categorical_crossentropy(Tensor([1.0, 2.0])), TypeError,
     "labels must be integers"),
    (lambda: Tensor.ones(2, 3).nll_loss(Tensor([1, 2]), reduction="avg"), ValueError,
     "reduction must be one of"),
    (lambda: Tensor.ones(2, 3).binary_crossentropy(Tensor.ones(2, 3), "avg"), ValueError,
     "reduction must be one of"),
    (lambda: Tensor.ones(1, 3, 4, 8).scaled_dot_product_attention(
        Tensor.ones(1, 2, 4, 8), Tensor.ones(1, 2, 4, 8), enable_gqa=True), ValueError,
     "multiple of the key/value heads"),
    (lambda: Tensor.ones(4, 8).scaled_dot_product_attention(
        Tensor.ones(4, 8), Tensor.ones(4, 8), Tensor.ones(4, 4), is_causal=True), ValueError,
     "not both"),
])
def test_errors_name_the_problem(fn, error, message):
    with pytest.raises(error, match=message):
        fn()
