"""jax.nn's functions in fgrad.nn against NumPy/SciPy formulas (values, float32 dtype, axes)
and their gradients against central differences of the same formulas."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
import scipy.special as ss

import fgrad
from fgrad import Tensor, nn

X = np.concatenate([np.linspace(-8, 8, 33), [-50.0, 50.0, 0.0]]).reshape(4, 9)
SELU_ALPHA, SELU_SCALE = 1.6732632423543772, 1.0507009873554805


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


REFS: list[tuple[str, Callable[..., Any], Callable[..., Any]]] = [
    ("relu", nn.relu, lambda x: np.maximum(x, 0)),
    ("relu6", nn.relu6, lambda x: np.clip(x, 0, 6)),
    ("sigmoid", nn.sigmoid, ss.expit),
    ("softplus", nn.softplus, lambda x: np.logaddexp(x, 0)),
    ("log_sigmoid", nn.log_sigmoid, lambda x: -np.logaddexp(-x, 0)),
    ("silu", nn.silu, lambda x: x * ss.expit(x)),
    ("swish", nn.swish, lambda x: x * ss.expit(x)),
    ("gelu", nn.gelu, _gelu_tanh),
    ("gelu-exact", lambda x: nn.gelu(x, approximate=False),
     lambda x: 0.5 * x * (1 + ss.erf(x / np.sqrt(2)))),
    ("elu", nn.elu, lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0)))),
    ("elu-alpha", lambda x: nn.elu(x, 0.5),
     lambda x: np.where(x > 0, x, 0.5 * np.expm1(np.minimum(x, 0)))),
    ("celu", lambda x: nn.celu(x, 2.0),
     lambda x: np.maximum(x, 0) + np.minimum(2.0 * np.expm1(x / 2.0), 0)),
    ("selu", nn.selu,
     lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(np.minimum(x, 0)))),
    ("leaky_relu", nn.leaky_relu, lambda x: np.where(x >= 0, x, 0.01 * x)),
    ("leaky_relu-slope", lambda x: nn.leaky_relu(x, negative_slope=0.2),
     lambda x: np.where(x >= 0, x, 0.2 * x)),
    ("hard_tanh", nn.hard_tanh, lambda x: np.clip(x, -1, 1)),
    ("hard_sigmoid", nn.hard_sigmoid, lambda x: np.clip(x + 3, 0, 6) / 6),
    ("hard_silu", nn.hard_silu, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    ("hard_swish", nn.hard_swish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    ("soft_sign", nn.soft_sign, lambda x: x / (np.abs(x) + 1)),
    ("softmax", nn.softmax, lambda x: ss.softmax(x, axis=-1)),
    ("softmax-axis0", lambda x: nn.softmax(x, axis=0), lambda x: ss.softmax(x, axis=0)),
    ("log_softmax", nn.log_softmax, lambda x: ss.log_softmax(x, axis=-1)),
    ("log_softmax-axes", lambda x: nn.log_softmax(x, axis=(0, 1)),
     lambda x: ss.log_softmax(x, axis=(0, 1))),
    ("logsumexp", lambda x: nn.logsumexp(x, axis=-2), lambda x: ss.logsumexp(x, axis=-2)),
    ("standardize", nn.standardize,
     lambda x: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)),
    ("standardize-axis0", lambda x: nn.standardize(x, axis=0, epsilon=1e-3),
     lambda x: (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-3)),
    ("glu", nn.glu, lambda x: x[:, :4] * ss.expit(x[:, 4:8])),
]
KINKED = {"relu", "relu6", "leaky_relu", "leaky_relu-slope", "hard_tanh", "hard_sigmoid",
          "hard_silu", "hard_swish", "elu", "elu-alpha", "celu", "selu"}


@pytest.mark.parametrize("name,fn,ref", REFS, ids=[r[0] for r in REFS])
def test_values(name: str, fn: Any, ref: Any) -> None:
    x = X[:, :8] if name == "glu" else X
    np.testing.assert_allclose(fn(x).numpy(), ref(x), rtol=1e-12, atol=1e-12)
    small = fn(x.astype(np.float32))
    assert small.dtype == fgrad.dtypes.float32
    np.testing.assert_allclose(small.numpy(), ref(x.astype(np.float32).astype(np.float64)),
                               rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("name,fn,ref", REFS, ids=[r[0] for r in REFS])
def test_gradients(name: str, fn: Any, ref: Any) -> None:
    x = X[:, :8].copy() if name == "glu" else X.copy()
    if name in KINKED:  # stay away from the kinks, where finite differences straddle them
        x = np.where(np.isin(np.round(x, 6), [0.0, -3.0, 3.0, 6.0, 1.0, -1.0]), x + 0.25, x)
    w = np.random.default_rng(0).normal(size=ref(x).shape)
    grad = fgrad.grad(lambda t: (fn(t) * Tensor(w)).sum())(Tensor(x)).numpy()
    fd = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        for sgn in (1, -1):
            moved = x.copy()
            moved[idx] += sgn * 1e-6
            fd[idx] += sgn * np.sum(ref(moved) * w) / 2e-6
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-5)


def test_one_hot() -> None:
    labels = np.array([[0, 2], [3, -1]])
    got = nn.one_hot(labels, 3)
    want = (labels[..., None] == np.arange(3)).astype(np.float32)
    assert got.dtype == fgrad.dtypes.float32
    np.testing.assert_array_equal(got.numpy(), want)
    first = nn.one_hot(labels, 3, axis=0, dtype=fgrad.dtypes.int32)
    np.testing.assert_array_equal(first.numpy(), np.moveaxis(want, -1, 0).astype(np.int32))


def test_relu_gradient_at_zero_is_zero() -> None:
    g = fgrad.grad(lambda t: nn.relu(t).sum())(Tensor(np.zeros(3)))
    np.testing.assert_array_equal(g.numpy(), np.zeros(3))


def test_functions_sit_beside_the_layers() -> None:
    assert nn.Linear is not None and "softplus" in nn.__all__ and "Module" in nn.__all__
