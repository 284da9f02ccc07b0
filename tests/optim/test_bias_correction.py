"""Adam's bias correction `1 - b**t` against float64 (as PyTorch's Adam computes it)."""
import numpy as np
import pytest

import fgrad
from fgrad import Tensor, optim
from fgrad.optim.transforms import one_minus_power

pytestmark = pytest.mark.backends


@pytest.mark.parametrize("b", [0.9, 0.999, 0.99999, Tensor(np.float32(0.999))])
def test_one_minus_power_has_no_cancellation(b):
    t = Tensor(np.arange(1, 2001, dtype=np.float32))
    b64 = float(np.float32(b.numpy())) if isinstance(b, Tensor) else b
    want = 1 - b64 ** np.arange(1, 2001, dtype=np.float64)
    np.testing.assert_allclose(one_minus_power(b, t).numpy(), want, rtol=1e-6)


def test_one_minus_power_of_zero_is_one():
    np.testing.assert_array_equal(one_minus_power(0.0, Tensor(np.float32([1, 5]))).numpy(), 1)


def test_adam_direction_of_a_constant_gradient_is_its_sign_under_jit():
    """m_hat / sqrt(v_hat) = g / |g| exactly in real arithmetic; float32 leaves ~1e-7."""
    g = {"w": Tensor(np.float32([0.5, -2.0, 3e-3, -7e-5]))}
    tx = optim.scale_by_adam(eps=0.0)
    step = fgrad.jit(tx.update)
    state = tx.init(g)
    for _ in range(3):
        update, state = step(g, state)
        np.testing.assert_allclose(update["w"].numpy(), np.sign(g["w"].numpy()), rtol=1e-6)
