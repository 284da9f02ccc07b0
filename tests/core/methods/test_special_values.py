"""Special values give one answer on every backend (issue 18, items 7, 9, 10).

References: NumPy's maximum (NaN propagates, as in PyTorch and JAX), C99 pow through
Python's math.pow (what JAX and torch.pow(tensor, tensor) return), NumPy's concatenate.
"""
import math

import numpy as np
import pytest

import fgrad
from fgrad import Tensor

pytestmark = pytest.mark.backends

SPECIAL = np.array([-np.inf, -2.5, -0.0, 0.0, 1e-30, 3.0, np.inf, np.nan], np.float32)


def test_relu_keeps_nan(jit_backend):
    want = np.maximum(SPECIAL, np.float32(0))
    for got in (Tensor(SPECIAL).relu().numpy(), fgrad.jit(Tensor.relu)(Tensor(SPECIAL)).numpy()):
        np.testing.assert_array_equal(got, want)
    grad = fgrad.grad(lambda x: x.relu().sum())(Tensor(np.array([-1.0, 0.0, 2.0], np.float32)))
    np.testing.assert_array_equal(grad.numpy(), [0.0, 0.0, 1.0])


@pytest.mark.parametrize("exponent", [0.5, 1.5, -0.5, 2.0, 3.0])
def test_pow_special_values_follow_c_pow(jit_backend, exponent):
    with np.errstate(invalid="ignore"):
        want = np.array([_c_pow(float(v), exponent) for v in SPECIAL], np.float32)
    eager = (Tensor(SPECIAL) ** exponent).numpy()
    jitted = fgrad.jit(lambda x: x ** exponent)(Tensor(SPECIAL)).numpy()
    for got in (eager, jitted):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
        real = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[real]), np.signbit(want[real]))


def _c_pow(x: float, y: float) -> float:
    try:
        return math.pow(x, y)
    except ValueError:  # C99: pow(+-0, y < 0) is a pole, a negative base ** fraction is NaN
        if x != 0:
            return math.nan
        odd = float(y).is_integer() and y % 2 == 1
        return math.copysign(math.inf, x) if odd else math.inf


@pytest.mark.parametrize("parts", [((0, 3), (0, 3)), ((0, 3), (2, 3), (0, 3)),
                                   ((2, 3), (0, 3))])
def test_concatenate_of_empty_operands_compiles(jit_backend, parts):
    arrays = [np.arange(np.prod(s), dtype=np.float32).reshape(s) + i for i, s in
              enumerate(parts)]
    want = np.concatenate(arrays, axis=0)
    got = fgrad.jit(lambda *xs: xs[0].cat(*xs[1:]))(*map(Tensor, arrays)).numpy()
    np.testing.assert_array_equal(got, want)
    summed = fgrad.jit(lambda *xs: (xs[0] + 1).cat(*xs[1:]).sum(0))(*map(Tensor, arrays))
    np.testing.assert_allclose(summed.numpy(), np.concatenate(
        [arrays[0] + 1] + arrays[1:], axis=0).sum(0))
