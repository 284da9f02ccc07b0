"""Optimizers take params and grads whose leaves are NumPy arrays (as Optax's do), with the
same updates as for Tensors; one Adam step is also checked against NumPy arithmetic."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, optim

PARAMS = {"w": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
          "b": np.zeros(3, np.float32)}
GRADS = {"w": np.full((2, 3), 0.5, np.float32), "b": np.arange(3, dtype=np.float32)}

OPTIMIZERS: dict[str, Callable[[], optim.GradientTransformation]] = {
    "SGD": lambda: optim.SGD(1e-2, momentum=0.9),
    "Adam": lambda: optim.Adam(1e-2),
    "AdamW": lambda: optim.AdamW(1e-2),
    "RMSprop": lambda: optim.RMSprop(1e-2),
    "Adagrad": lambda: optim.Adagrad(1e-2),
    "LAMB": lambda: optim.LAMB(1e-2),
    "LARS": lambda: optim.LARS(1e-2),
    "Lion": lambda: optim.Lion(1e-2),
    "chain": lambda: optim.chain(optim.clip_by_global_norm(1.0), optim.scale_by_adam(),
                                 optim.scale(-1e-3)),
    "MultiSteps": lambda: optim.MultiSteps(optim.Adam(1e-2), 2),
    "inject_hyperparams": lambda: optim.inject_hyperparams(optim.Adam)(lr=1e-2),
    "masked": lambda: optim.masked(optim.Adam(1e-2), {"w": True, "b": False}),
    "multi_transform": lambda: optim.multi_transform(
        {"a": optim.Adam(1e-2), "s": optim.SGD(1e-2)}, {"w": "a", "b": "s"}),
}


def _tensors(tree: Any) -> Any:
    return fgrad.tree.map(Tensor, tree)


def _two_steps(opt: optim.GradientTransformation, params: Any, grads: Any) -> Any:
    state = opt.init(params)
    for _ in range(2):
        updates, state = opt.update(grads, state, params)
        params = optim.apply_updates(params, updates)
    return params


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_takes_numpy_leaves(name: str) -> None:
    opt = OPTIMIZERS[name]()
    expected = _two_steps(opt, _tensors(PARAMS), _tensors(GRADS))
    got = _two_steps(opt, PARAMS, GRADS)
    for key in PARAMS:
        assert isinstance(got[key], Tensor)
        np.testing.assert_array_equal(got[key].numpy(), expected[key].numpy())


def test_adam_step_on_numpy_leaves_matches_numpy() -> None:
    lr, b1, b2, eps = 1e-2, 0.9, 0.999, 1e-8
    opt = optim.Adam(lr, b1=b1, b2=b2, eps=eps)
    updates, _ = opt.update(GRADS, opt.init(PARAMS), PARAMS)
    for key, g in GRADS.items():
        m, v = (1 - b1) * g, (1 - b2) * g * g
        step = -lr * (m / (1 - b1)) / (np.sqrt(v / (1 - b2)) + eps)
        np.testing.assert_allclose(updates[key].numpy(), step, rtol=1e-5, atol=1e-7)


def test_global_norm_of_numpy_leaves() -> None:
    expected = np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in GRADS.values()))
    np.testing.assert_allclose(optim.global_norm(GRADS).numpy(), expected, rtol=1e-6)
