"""fgrad.example_libraries.optimizers against jax.example_libraries.optimizers'
trajectories (fixtures/gen_optimizers_jax.py wrote them with JAX)."""
from __future__ import annotations

import os
import pickle
from typing import Any

import numpy as np
import pytest

import fgrad
from fgrad.example_libraries import optimizers as fo

FIX = dict(np.load(os.path.join(os.path.dirname(__file__), "fixtures", "optimizers.npz")))
NAMES = ("w", "b", "s")
STEPS = FIX["grads/w"].shape[0]
CASES: dict[str, Any] = {
    "sgd": lambda: fo.sgd(0.1), "momentum": lambda: fo.momentum(0.1, 0.9),
    "nesterov": lambda: fo.nesterov(0.1, 0.8), "adagrad": lambda: fo.adagrad(0.2, momentum=0.7),
    "rmsprop": lambda: fo.rmsprop(0.05, gamma=0.8, eps=1e-6),
    "rmsprop_momentum": lambda: fo.rmsprop_momentum(0.05, momentum=0.5),
    "adam": lambda: fo.adam(0.1), "adamax": lambda: fo.adamax(0.1, b1=0.8),
    "sm3": lambda: fo.sm3(0.3),
    "adam_exponential_decay": lambda: fo.adam(fo.exponential_decay(0.1, 3, 0.5)),
    "sgd_inverse_time_decay": lambda: fo.sgd(fo.inverse_time_decay(0.1, 2, 0.5,
                                                                   staircase=True)),
    "momentum_polynomial_decay": lambda: fo.momentum(fo.polynomial_decay(0.1, 4, 0.01, 2.0),
                                                     0.9),
    "sgd_piecewise_constant": lambda: fo.sgd(fo.piecewise_constant([1, 3], [0.1, 0.05, 0.01])),
}


def _params0() -> dict[str, np.ndarray]:
    return {k: FIX[f"params0/{k}"] for k in NAMES}


def _grads(step: int) -> dict[str, np.ndarray]:
    return {k: FIX[f"grads/{k}"][step] for k in NAMES}


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_trajectory_matches_jax(case: str, jitted: bool) -> None:
    init, update, get_params = CASES[case]()
    step_fn = fgrad.jit(update) if jitted else update
    state = init(_params0())
    for step in range(STEPS):
        state = step_fn(step, _grads(step), state)
        for k, v in get_params(state).items():
            # a traced step takes b1 ** (i + 1) as a float power, JAX's eager one (the
            # fixture's) by repeated squaring: a few ulps apart
            np.testing.assert_allclose(v.numpy(), FIX[f"{case}/{k}"][step],
                                       rtol=2e-5 if jitted else 2e-6, atol=2e-6 if jitted else 2e-7,
                                       err_msg=f"{case} {k} step {step}")


def test_clip_grads_and_l2_norm_match_jax() -> None:
    grads = _grads(0)
    np.testing.assert_allclose(fo.clip_grads(grads, 1.5)["w"].numpy(), FIX["clip_grads/w"],
                               rtol=1e-6)
    np.testing.assert_allclose(fo.l2_norm(grads).numpy(), FIX["l2_norm"], rtol=1e-6)


def test_state_unpacks_for_pickling_and_packs_back() -> None:
    init, update, get_params = fo.adam(0.1)
    state = update(0, _grads(0), init(_params0()))
    plain = pickle.loads(pickle.dumps(fo.unpack_optimizer_state(state)))
    again = fo.pack_optimizer_state(plain)
    assert fgrad.tree.structure(again) == fgrad.tree.structure(state)
    for a, b in zip(fgrad.tree.leaves(again), fgrad.tree.leaves(state), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(get_params(again)["w"].numpy(), get_params(state)["w"].numpy())


def test_errors_name_the_problem() -> None:
    init, update, _ = fo.sgd(0.1)
    state = init(_params0())
    with pytest.raises(TypeError, match="does not match the parameter tree"):
        update(0, {"w": FIX["grads/w"][0]}, state)
    with pytest.raises(TypeError, match="number or a function of the step"):
        fo.sgd("fast")
    with pytest.raises(ValueError, match="one more value than boundaries"):
        fo.piecewise_constant([1, 2], [0.1])
