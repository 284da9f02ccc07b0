"""Tests for non-trainable leaves and partial optimization: BatchNorm buffers under AdamW,
nn.Frozen, partition/combine, and masked / multi_transform / AdamW(mask=) against Optax
fixtures (tests/optim/fixtures/gen_masking_fixtures.py)."""
import pathlib

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, nn, optim
from fgrad.core import tree_util as tu

FIX = np.load(pathlib.Path(__file__).parent / "fixtures" / "masking.npz")
NAMES = ("w", "b", "s")
STEPS = 5


def _bn_model():
    bn = nn.BatchNorm(3).replace(running_var=Tensor(np.full(3, 0.97, np.float32)),
                                 running_mean=Tensor(np.array([0.1, -0.2, 0.3], np.float32)))
    return {"bn": bn, "lin": nn.Linear(3, 2, key=fgrad.random.PRNGKey(0))}


def _loss_eval(model, x):
    y, _ = model["bn"](x, training=False)   # eval mode: running stats get real gradients
    return model["lin"](y).square().mean()


@pytest.mark.parametrize("use_jit", [False, True])
def test_adamw_leaves_batchnorm_buffers_alone(use_jit):
    model = _bn_model()
    x = Tensor(np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32))
    opt = optim.AdamW(lr=0.1, weight_decay=0.5)
    state = opt.init(model)

    def step(model, state):
        grads = fgrad.grad(_loss_eval)(model, x)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, grads

    run = fgrad.jit(step) if use_jit else step
    new, state, grads = run(model, state)
    assert np.abs(grads["bn"].running_var.numpy()).max() > 0   # the test is not vacuous
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_array_equal(getattr(new["bn"], name).numpy(),
                                      getattr(model["bn"], name).numpy())
    assert not np.allclose(new["bn"].weight.numpy(), model["bn"].weight.numpy())
    assert not np.allclose(new["lin"].weight.numpy(), model["lin"].weight.numpy())


def test_zero_gradient_weight_decay_step_keeps_running_var():
    model = _bn_model()
    opt = optim.AdamW(lr=0.1, weight_decay=0.5)
    zeros = tu.tree_map(lambda t: t.zeros_like(), model)
    updates, _ = opt.update(zeros, opt.init(model), model)
    np.testing.assert_array_equal(updates["bn"].running_var.numpy(), np.zeros(3))
    # a plain chain gets no such protection in its updates, but apply_updates keeps buffers
    plain = optim.chain(optim.add_decayed_weights(0.5), optim.scale(-0.1))
    raw, _ = plain.update(zeros, plain.init(model), model)
    assert np.abs(raw["bn"].running_var.numpy()).max() > 0
    new = optim.apply_updates(model, raw)
    np.testing.assert_allclose(new["bn"].running_var.numpy(), 0.97)
    np.testing.assert_allclose(new["lin"].weight.numpy(), model["lin"].weight.numpy() * 0.95,
                               rtol=1e-6)


def test_training_mode_updates_running_stats_through_the_forward_pass():
    model = _bn_model()
    x = Tensor(np.random.default_rng(1).normal(2.0, 3.0, size=(16, 3)).astype(np.float32))
    _, bn = model["bn"](x, training=True)
    expected_mean = 0.9 * np.array([0.1, -0.2, 0.3]) + 0.1 * x.numpy().mean(0)
    np.testing.assert_allclose(bn.running_mean.numpy(), expected_mean, rtol=1e-5)


def test_trainable_mask_partition_combine():
    model = _bn_model()
    mask = nn.trainable_mask(model)
    assert mask["bn"].running_mean is False and mask["bn"].weight is True
    assert mask["lin"].weight is True
    params, buffers = nn.partition(model)
    assert params["bn"].running_var is None and buffers["bn"].running_var is not None
    assert buffers["lin"].weight is None
    back = nn.combine(params, buffers)
    for a, b in zip(tu.tree_leaves(back), tu.tree_leaves(model)):
        assert a is b
    big, small = nn.partition(model, lambda t: t.ndim > 1)
    assert small["lin"].weight is None and big["lin"].weight is not None
    with pytest.raises(ValueError, match="structure"):
        nn.partition(model, {"bn": True})


def test_frozen_submodule_gets_no_gradient_and_no_update():
    key = fgrad.random.PRNGKey(3)
    model = {"enc": nn.Frozen(nn.Linear(3, 3, key=key)), "head": nn.Linear(3, 1, key=key)}
    x = Tensor(np.ones((2, 3), np.float32))

    def loss(m):
        return m["head"](m["enc"](x)).sum()

    grads = fgrad.grad(loss)(model)
    np.testing.assert_array_equal(grads["enc"].module.weight.numpy(), 0)
    opt = optim.SGD(lr=0.1, weight_decay=0.1)
    updates, _ = opt.update(grads, opt.init(model), model)
    new = optim.apply_updates(model, updates)
    np.testing.assert_array_equal(new["enc"].module.weight.numpy(),
                                  model["enc"].module.weight.numpy())
    assert not np.allclose(new["head"].weight.numpy(), model["head"].weight.numpy())


def _params():
    return {k: Tensor(FIX[f"params0/{k}"]) for k in NAMES}


def _run(opt):
    params = _params()
    state = opt.init(params)
    trail = []
    for step in range(STEPS):
        grads = {k: Tensor(FIX[f"grads/{k}"][step]) for k in NAMES}
        updates, state = opt.update(grads, state, params)
        params = optim.apply_updates(params, updates)
        trail.append({k: v.numpy() for k, v in params.items()})
    return trail


OPTAX_CASES = {
    "adamw_mask": lambda: optim.AdamW(0.1, weight_decay=0.5,
                                      mask={"w": True, "b": False, "s": True}),
    "adamw_mask_fn": lambda: optim.AdamW(0.1, weight_decay=0.5,
                                         mask=lambda p: tu.tree_map(lambda x: x.ndim > 1, p)),
    "masked_adam": lambda: optim.masked(optim.Adam(0.1), {"w": True, "b": False, "s": True}),
    "multi": lambda: optim.multi_transform(
        {"adam": optim.Adam(0.05), "sgd": optim.SGD(0.1, momentum=0.9),
         "zero": optim.set_to_zero()},
        {"w": "adam", "b": "sgd", "s": "zero"}),
}


@pytest.mark.parametrize("name", sorted(OPTAX_CASES))
def test_matches_optax(name):
    trail = _run(OPTAX_CASES[name]())
    for step, params in enumerate(trail):
        for k in NAMES:
            np.testing.assert_allclose(params[k], FIX[f"{name}/{k}"][step], rtol=2e-5,
                                       atol=2e-6, err_msg=f"{name} step {step} leaf {k}")


def test_masked_state_holds_only_selected_leaves():
    opt = optim.masked(optim.Adam(0.1), {"w": True, "b": False, "s": False})
    state = opt.init(_params())
    shapes = sorted(t.shape for t in tu.tree_leaves(state) if t.ndim)
    assert shapes == [(3, 4), (3, 4)]   # mu and nu of w only


def test_multi_transform_unknown_label_is_reported():
    opt = optim.multi_transform({"adam": optim.Adam(0.1)}, {"w": "adam", "b": "sgd", "s": "adam"})
    with pytest.raises(ValueError, match="'sgd'"):
        opt.init(_params())


def test_masked_under_jit_matches_eager():
    opt = OPTAX_CASES["multi"]()
    params = _params()
    grads = {k: Tensor(FIX[f"grads/{k}"][0]) for k in NAMES}

    def step(p, s):
        u, s = opt.update(grads, s, p)
        return optim.apply_updates(p, u)

    eager = step(params, opt.init(params))
    jitted = fgrad.jit(step)(params, opt.init(params))
    for k in NAMES:
        np.testing.assert_allclose(jitted[k].numpy(), FIX[f"multi/{k}"][0], rtol=2e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(eager[k].numpy(), FIX[f"multi/{k}"][0], rtol=2e-5,
                                   atol=1e-6)


def test_frozen_batchnorm_in_sequential_keeps_its_protocol():
    seq = nn.Sequential(nn.Frozen(nn.BatchNorm(3)), nn.Linear(3, 2, key=fgrad.random.PRNGKey(1)))
    x = Tensor(np.random.default_rng(2).normal(size=(5, 3)).astype(np.float32))
    y, new_seq = seq(x, training=True)
    assert y.shape == (5, 2) and isinstance(new_seq.layers[0], nn.Frozen)
    np.testing.assert_allclose(new_seq.layers[0].module.running_mean.numpy(),
                               0.1 * x.numpy().mean(0), rtol=1e-5, atol=1e-7)
    assert nn.trainable_mask(new_seq).layers[0].module.weight is False
