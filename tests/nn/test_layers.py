"""fgrad.nn layers against PyTorch (fixtures from fixtures/gen_layers.py)."""
from __future__ import annotations

import functools
import math
import os

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, nn
from fgrad.core import tree_util

pytestmark = pytest.mark.backends  # jit tests run per backend (conftest.py)

FIX = dict(np.load(os.path.join(os.path.dirname(__file__), "fixtures", "layers.npz")))
KEY = fgrad.random.key(0)


def params(case: str) -> dict[str, np.ndarray]:
    prefix = f"{case}/param."
    return {k[len(prefix):]: v for k, v in FIX.items() if k.startswith(prefix)}


def _get(module: nn.Module, dotted: str) -> Tensor:
    return functools.reduce(getattr, dotted.split("."), module)


def load(module: nn.Module, case: str) -> nn.Module:
    """`module` with every torch parameter of `case` put in place by tree_at."""
    for name, value in params(case).items():
        old = _get(module, name)
        assert old.shape == value.shape, f"{case}.{name}: {old.shape} vs torch {value.shape}"
        module = nn.tree_at(lambda m, n=name: _get(m, n), module, replace=Tensor(value))
    return module


def close(actual: Tensor, expected: np.ndarray, tol: float = 1e-5) -> None:
    np.testing.assert_allclose(actual.numpy(), expected, rtol=tol, atol=tol)


CASES = {
    "linear": lambda: nn.Linear(4, 3, key=KEY),
    "linear_nobias": lambda: nn.Linear(4, 3, bias=False, key=KEY),
    "conv2d": lambda: nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2, key=KEY),
    "conv2d_same": lambda: nn.Conv2d(3, 2, (3, 2), padding="same", dilation=2, key=KEY),
    "conv1d": lambda: nn.Conv1d(2, 4, 3, stride=2, padding=2, dilation=2, key=KEY),
    "convt2d": lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1,
                                          groups=2, key=KEY),
    "convt1d": lambda: nn.ConvTranspose1d(3, 2, 4, stride=3, padding=1, dilation=2, key=KEY),
    "groupnorm": lambda: nn.GroupNorm(3, 6),
    "instancenorm": lambda: nn.InstanceNorm(6),
    "layernorm": lambda: nn.LayerNorm((3, 4)),
    "layernorm2d": lambda: nn.LayerNorm2d(6),
    "rmsnorm": lambda: nn.RMSNorm(4),
    "embedding": lambda: nn.Embedding(7, 3, key=KEY),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_forward_matches_torch(case):
    layer = load(CASES[case](), case)
    close(layer(Tensor(FIX[f"{case}/x"])), FIX[f"{case}/y"], 2e-5)


@pytest.mark.parametrize("case", ["linear", "conv2d", "convt2d", "layernorm"])
def test_gradients_match_torch(case):
    layer = load(CASES[case](), case)
    x, ct = Tensor(FIX[f"{case}/x"]), Tensor(FIX[f"{case}/ct"])
    g_layer, g_x = fgrad.grad(lambda m, x: (m(x) * ct).sum(), argnums=(0, 1))(layer, x)
    close(g_x, FIX[f"{case}/grad_x"], 1e-4)
    for name in params(case):
        close(_get(g_layer, name), FIX[f"{case}/grad.{name}"], 1e-4)


@pytest.mark.parametrize("case", sorted(CASES))
def test_default_init_shapes_match_torch_and_are_deterministic(case):
    layer = CASES[case]()
    for name, value in params(case).items():
        assert _get(layer, name).shape == value.shape
    again = CASES[case]()
    for a, b in zip(tree_util.tree_leaves(layer), tree_util.tree_leaves(again), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_init_distributions_follow_reference():
    lin = nn.Linear(16, 300, key=KEY)
    w = lin.weight.numpy()
    assert np.abs(w).max() <= 1 / 4 and np.abs(w).max() > 0.24 and abs(w.mean()) < 0.01
    assert not np.allclose(w, nn.Linear(16, 300, key=fgrad.random.key(1)).weight.numpy())
    conv = nn.Conv2d(2, 50, 3, key=KEY)
    assert np.abs(conv.weight.numpy()).max() <= 1 / math.sqrt(18)
    convt = nn.ConvTranspose2d(4, 6, 2, groups=2, key=KEY)
    assert convt.weight.shape == (4, 3, 2, 2)
    lstm = nn.LSTMCell(3, 4, key=KEY)
    assert np.all(lstm.bias_ih.numpy() == 0) and np.abs(lstm.weight_hh.numpy()).max() <= 0.5
    mha = nn.MultiHeadAttention(8, 2, key=KEY)
    assert np.all(mha.in_proj_bias.numpy() == 0) and np.all(mha.out_proj.bias.numpy() == 0)
    assert np.abs(mha.in_proj_weight.numpy()).max() <= math.sqrt(6 / 32)


# --------------------------------------------------------------------------- BatchNorm


@pytest.mark.parametrize("case,shape", [("bn2d", (4, 3, 5, 2)), ("bn1d", (6, 3))])
def test_batchnorm_train_and_eval_match_torch(case, shape):
    bn = load(nn.BatchNorm(3, momentum=0.2), case)
    x, ct = Tensor(FIX[f"{case}/x"]), Tensor(FIX[f"{case}/ct"])
    y, new_bn = bn(x, training=True)
    close(y, FIX[f"{case}/y"], 1e-4)
    close(new_bn.running_mean, FIX[f"{case}/running_mean"])
    close(new_bn.running_var, FIX[f"{case}/running_var"])
    assert new_bn.num_batches_tracked.item() == 1 and bn.num_batches_tracked.item() == 0
    y_eval, same = new_bn(Tensor(FIX[f"{case}/x_eval"]), training=False)
    assert same is new_bn
    close(y_eval, FIX[f"{case}/y_eval"], 1e-4)

    def loss(m, x):
        out, _ = m(x, training=True)
        return (out * ct).sum()

    g_bn, g_x = fgrad.grad(loss, argnums=(0, 1))(bn, x)
    close(g_x, FIX[f"{case}/grad_x"], 1e-4)
    close(g_bn.weight, FIX[f"{case}/grad.weight"], 1e-4)
    close(g_bn.bias, FIX[f"{case}/grad.bias"], 1e-4)
    np.testing.assert_array_equal(g_bn.running_mean.numpy(), 0)


def test_batchnorm_aliases_and_no_running_stats():
    assert nn.BatchNorm2d is nn.BatchNorm and nn.BatchNorm1d is nn.BatchNorm
    bn = nn.BatchNorm(3, affine=False, track_running_stats=False)
    assert tree_util.tree_leaves(bn) == [bn.num_batches_tracked]
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    y, same = bn(Tensor(x), training=False)  # no running stats: batch statistics
    assert same is bn
    close(y, (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), 1e-5)
    with pytest.raises(ValueError, match="3 channels"):
        nn.BatchNorm(3)(Tensor.ones(2, 4), training=True)


def test_batchnorm_inside_jitted_training_step():
    model = nn.Sequential(nn.Linear(3, 4, key=KEY), nn.BatchNorm1d(4), Tensor.relu,
                          nn.Linear(4, 1, key=fgrad.random.key(1)))
    x = Tensor(np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32))

    def loss_fn(m, x):
        y, new_m = m(x, training=True)
        return (y * y).mean(), new_m

    @fgrad.jit
    def step(m, x):
        (loss, new_m), grads = fgrad.value_and_grad(loss_fn, has_aux=True)(m, x)
        return loss, tree_util.tree_map(lambda p, g: p - 0.1 * g, new_m, grads)

    loss1, model1 = step(model, x)
    loss2, model2 = step(model1, x)
    assert loss2.item() < loss1.item()
    assert step.cache_info().misses == 1
    bn0, bn1, bn2 = model.layers[1], model1.layers[1], model2.layers[1]
    assert (bn1.num_batches_tracked.item(), bn2.num_batches_tracked.item()) == (1, 2)
    h = model.layers[0](x).numpy()
    np.testing.assert_allclose(bn1.running_mean.numpy(), 0.1 * h.mean(0), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(bn1.running_var.numpy(), 0.9 + 0.1 * h.var(0, ddof=1),
                               rtol=1e-4)
    assert bn0.running_mean.numpy().sum() == 0  # the input model is unchanged
    y_eval, same = model2(x, training=False)
    assert same.layers[1] is bn2 and y_eval.shape == (8, 1)


# --------------------------------------------------------------------------- recurrent


def test_lstm_cell_matches_torch_forward_and_grads():
    cell = load(nn.LSTMCell(3, 4, key=KEY), "lstm")
    x, h, c = (Tensor(FIX[f"rnn/{n}"]) for n in "xhc")
    new_h, new_c = cell(x, (h, c))
    close(new_h, FIX["lstm/y_h"])
    close(new_c, FIX["lstm/y_c"])
    zh, zc = cell(x)
    close(zh, FIX["lstm/y_zero_state"][0])
    close(zc, FIX["lstm/y_zero_state"][1])
    ct_h, ct_c = Tensor(FIX["lstm/ct_h"]), Tensor(FIX["lstm/ct_c"])

    def loss(m, x):
        hh, cc = m(x, (h, c))
        return (hh * ct_h).sum() + (cc * ct_c).sum()

    g_cell, g_x = fgrad.grad(loss, argnums=(0, 1))(cell, x)
    close(g_x, FIX["lstm/grad_x"], 1e-4)
    for name in params("lstm"):
        close(_get(g_cell, name), FIX[f"lstm/grad.{name}"], 1e-4)


def test_gru_cell_matches_torch():
    cell = load(nn.GRUCell(3, 4, key=KEY), "gru")
    x, h = Tensor(FIX["rnn/x"]), Tensor(FIX["rnn/h"])
    close(cell(x, h), FIX["gru/y"])
    close(cell(x), FIX["gru/y_zero_state"])
    close(cell(x[0], h[0]), FIX["gru/y"][0])  # unbatched


# --------------------------------------------------------------------------- attention


def test_multihead_attention_matches_torch():
    mha = load(nn.MultiHeadAttention(8, 2, key=KEY), "mha")
    q, kv = Tensor(FIX["mha/q"]), Tensor(FIX["mha/kv"])
    close(mha(q, kv, kv), FIX["mha/y"])
    allowed = Tensor(~FIX["mha/blocked"])  # torch's MHA mask marks the blocked pairs
    close(mha(q, kv, kv, attn_mask=allowed), FIX["mha/y_masked"])
    close(mha(q, is_causal=True), FIX["mha/y_causal"])
    with pytest.raises(ValueError, match="embed_dim"):
        nn.MultiHeadAttention(8, 3, key=KEY)


def test_multihead_attention_dropout_needs_mode_and_key():
    mha = nn.MultiHeadAttention(4, 2, dropout=0.5, key=KEY)
    x = Tensor.ones(1, 3, 4)
    with pytest.raises(ValueError, match="training"):
        mha(x)
    with pytest.raises(ValueError, match="dropout_key"):
        mha(x, training=True)
    close(mha(x, training=False), mha.replace(dropout=0.0)(x).numpy())
    assert mha(x, training=True, dropout_key=KEY).shape == (1, 3, 4)


# --------------------------------------------------------------------------- dropout etc.


def test_dropout_modes():
    drop = nn.Dropout(0.25)
    x = Tensor.ones(200, 50)
    assert drop(x, training=False) is x
    y = drop(x, training=True, key=KEY).numpy()
    kept = y != 0
    assert 0.7 < kept.mean() < 0.8
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    with pytest.raises(ValueError, match="key"):
        drop(x, training=True)
    with pytest.raises(ValueError, match="out of range"):
        nn.Dropout(1.5)


def test_sequential_threads_layers_and_keys():
    l1, l2 = nn.Linear(3, 5, key=KEY), nn.Linear(5, 2, key=fgrad.random.key(1))
    seq = nn.Sequential(l1, Tensor.relu, l2)
    x = Tensor(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    close(seq(x), l2(l1(x).relu()).numpy())
    assert len(seq) == 3 and seq[0] is l1 and not seq.stateful
    names = [tree_util.keystr(p) for p, _ in tree_util.tree_leaves_with_path(seq)]
    assert names == [".layers[0].weight", ".layers[0].bias", ".layers[2].weight",
                     ".layers[2].bias"]
    dropped = nn.Sequential(l1, nn.Dropout(0.5), nn.Dropout(0.5))
    with pytest.raises(ValueError, match="training"):
        dropped(x)
    close(dropped(x, training=False), l1(x).numpy())
    y = dropped(x, training=True, key=KEY).numpy()
    assert np.all((y == 0) | np.isclose(y, 4 * l1(x).numpy(), rtol=1e-5))
    with pytest.raises(TypeError, match="not callable"):
        nn.Sequential(l1, 3)


def test_nested_sequential_with_state_returns_new_module():
    inner = nn.Sequential(nn.BatchNorm(2), nn.Dropout(0.1))
    outer = nn.Sequential(inner, Tensor.tanh)
    assert outer.stateful and outer.needs_key
    x = Tensor(np.arange(8, dtype=np.float32).reshape(4, 2))
    y, new = outer(x, training=True, key=KEY)
    assert type(new) is nn.Sequential and y.shape == (4, 2)
    assert new.layers[0].layers[0].num_batches_tracked.item() == 1


def test_layer_argument_errors():
    with pytest.raises(ValueError, match="groups"):
        nn.Conv2d(3, 4, 3, groups=2, key=KEY)
    with pytest.raises(ValueError, match="'same'"):
        nn.Conv2d(3, 4, 3, padding="full", key=KEY)
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(3, 4, 3, stride=2, padding="same", key=KEY)
    with pytest.raises(ValueError, match="num_groups"):
        nn.GroupNorm(4, 6)
    with pytest.raises(ValueError, match="normalized_shape"):
        nn.LayerNorm(4)(Tensor.ones(2, 3))
    with pytest.raises(TypeError, match="integer"):
        nn.Embedding(4, 2, key=KEY)(Tensor([0.0, 1.0]))
