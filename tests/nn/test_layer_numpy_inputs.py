"""Every fgrad.nn layer takes NumPy arrays where it takes Tensors (as Equinox layers take
NumPy arrays through jax.numpy), with the same result, eagerly and under jit."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, nn

KEY = fgrad.random.key(0)
RNG = np.random.default_rng(0)
X2 = RNG.random((4, 3), dtype=np.float32)
X3 = RNG.random((2, 3, 8), dtype=np.float32)
X4 = RNG.random((2, 3, 8, 8), dtype=np.float32)

LAYERS: dict[str, tuple[Callable[[], Any], np.ndarray, dict[str, Any]]] = {
    "Linear": (lambda: nn.Linear(3, 2, key=KEY), X2, {}),
    "Conv2d": (lambda: nn.Conv2d(3, 4, 3, key=KEY), X4, {}),
    "Conv1d": (lambda: nn.Conv1d(3, 4, 3, key=KEY), X3, {}),
    "ConvTranspose2d": (lambda: nn.ConvTranspose2d(3, 4, 3, key=KEY), X4, {}),
    "BatchNorm": (lambda: nn.BatchNorm(3), X4, {"training": True}),
    "GroupNorm": (lambda: nn.GroupNorm(1, 3), X4, {}),
    "InstanceNorm": (lambda: nn.InstanceNorm(3), X4, {}),
    "LayerNorm": (lambda: nn.LayerNorm(3), X2, {}),
    "LayerNorm2d": (lambda: nn.LayerNorm2d(3), X4, {}),
    "RMSNorm": (lambda: nn.RMSNorm(3), X2, {}),
    "Embedding": (lambda: nn.Embedding(5, 3, key=KEY), np.array([0, 4, 2]), {}),
    "Dropout": (lambda: nn.Dropout(0.5), X2, {"training": True, "key": KEY}),
    "Lambda": (lambda: nn.Lambda(Tensor.relu), X2, {}),
    "Sequential": (lambda: nn.Sequential(nn.Linear(3, 2, key=KEY), Tensor.relu), X2, {}),
    "MultiHeadAttention": (lambda: nn.MultiHeadAttention(4, 2, key=KEY),
                           RNG.random((2, 5, 4), dtype=np.float32), {}),
    "LSTMCell": (lambda: nn.LSTMCell(3, 2, key=KEY), X2, {}),
    "GRUCell": (lambda: nn.GRUCell(3, 2, key=KEY), X2, {}),
}


def _first(out: Any) -> np.ndarray:
    return (out[0] if isinstance(out, tuple) else out).numpy()


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_takes_numpy_input(name: str) -> None:
    make, x, kwargs = LAYERS[name]
    layer = make()
    expected = _first(layer(Tensor(x), **kwargs))
    np.testing.assert_array_equal(_first(layer(x, **kwargs)), expected)
    jitted = fgrad.jit(lambda m, a: m(a, **kwargs))
    np.testing.assert_allclose(_first(jitted(layer, x)), expected, rtol=1e-5, atol=1e-6)


def test_recurrent_state_may_be_numpy() -> None:
    cell = nn.LSTMCell(3, 2, key=KEY)
    zeros = np.zeros((4, 2), np.float32)
    h, c = cell(X2, (zeros, zeros))
    h_ref, c_ref = cell(Tensor(X2))
    np.testing.assert_array_equal(h.numpy(), h_ref.numpy())
    np.testing.assert_array_equal(c.numpy(), c_ref.numpy())
    gru = nn.GRUCell(3, 2, key=KEY)
    np.testing.assert_array_equal(gru(X2, zeros).numpy(), gru(Tensor(X2)).numpy())
