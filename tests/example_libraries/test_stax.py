"""fgrad.example_libraries.stax against jax.example_libraries.stax (fixtures/gen_stax_jax.py
wrote JAX's output shapes, parameters and outputs for stax_cases.py, and a training run)."""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from stax_cases import CASES

import fgrad
from fgrad.example_libraries import optimizers, stax

FIX = dict(np.load(os.path.join(os.path.dirname(__file__), "fixtures", "stax.npz")))


def _inputs(shape: tuple) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(
        [2 if d < 0 else d for d in shape]).astype(np.float32)


@pytest.mark.parametrize("name", sorted(CASES))
def test_layer_matches_jax(name: str) -> None:
    make, shape, needs_rng = CASES[name]
    init, apply = make(stax)
    key = fgrad.random.PRNGKey(3)
    out_shape, params = init(key, shape)
    assert list(fgrad.tree.leaves(out_shape)) == FIX[f"{name}/out_shape"].tolist()
    leaves = fgrad.tree.leaves(params)
    assert len(leaves) == len([k for k in FIX if k.startswith(f"{name}/param")])
    for i, leaf in enumerate(leaves):
        np.testing.assert_allclose(leaf.numpy(), FIX[f"{name}/param{i}"], rtol=1e-6, atol=1e-7)
    kwargs: dict[str, Any] = {"rng": key} if needs_rng else {}
    out = fgrad.tree.leaves(apply(params, _inputs(shape), **kwargs))
    jitted = fgrad.tree.leaves(fgrad.jit(lambda p, x: apply(p, x, **kwargs))(params,
                                                                             _inputs(shape)))
    for i, (eager, traced) in enumerate(zip(out, jitted, strict=True)):
        np.testing.assert_allclose(eager.numpy(), FIX[f"{name}/out{i}"], rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(traced.numpy(), FIX[f"{name}/out{i}"], rtol=2e-5,
                                   atol=2e-6)


def test_training_a_stax_cnn_with_adam_matches_jax() -> None:
    init, apply = stax.serial(stax.Conv(4, (3, 3), padding="SAME"), stax.Relu,
                              stax.AvgPool((2, 2), (2, 2)), stax.Flatten, stax.Dense(3),
                              stax.LogSoftmax)
    x, y = FIX["train/x"], FIX["train/y"]
    _, params = init(fgrad.random.PRNGKey(0), (-1, 6, 6, 1))
    opt_init, opt_update, get_params = optimizers.adam(0.01)

    def loss(p: Any) -> Any:
        return -(apply(p, x) * y).sum(1).mean()

    @fgrad.jit
    def step(i: Any, state: Any) -> Any:
        value, grads = fgrad.value_and_grad(loss)(get_params(state))
        return value, opt_update(i, grads, state)
    state, losses = opt_init(params), []
    for i in range(len(FIX["train/losses"])):
        value, state = step(i, state)
        losses.append(float(value))
    np.testing.assert_allclose(losses, FIX["train/losses"], rtol=1e-4)


def test_errors_name_the_problem() -> None:
    init, apply = stax.Dropout(0.5)
    with pytest.raises(ValueError, match="needs a PRNG key"):
        apply((), np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match="padding must be"):
        stax.MaxPool((2, 2), padding="FULL")[1]((), np.ones((1, 4, 4, 1), np.float32))
    with pytest.raises(ValueError, match="padding must be 'SAME' or 'VALID'"):
        stax.ConvTranspose(2, (3, 3), padding="FULL")[0](fgrad.random.PRNGKey(0), (1, 4, 4, 1))


def test_stax_reexports_jax_nn_activations():
    """JAX's stax module re-exports jax.nn's functions (its DP-SGD example calls
    `stax.logsoftmax`)."""
    x = np.array([[1.0, -2.0, 3.0]], np.float32)
    got = stax.logsoftmax(x).numpy()
    np.testing.assert_allclose(got, x - np.log(np.exp(x).sum(-1, keepdims=True)), rtol=1e-6)
    for name in ("elu", "gelu", "leaky_relu", "relu", "selu", "sigmoid", "softmax", "softplus",
                 "standardize", "log_softmax"):
        assert callable(getattr(stax, name)), name
