"""debug_nans / debug_infs on the eager path, against JAX's behaviour on the same
computations (tests/transforms/fixtures/gen_eager_nan_fixtures.py writes eager_nans.json):
the same cases raise, naming the same primitive and the user's line."""
import json
import pathlib

import numpy as np
import pytest

import fgrad
from fgrad import Tensor

FIX = json.loads((pathlib.Path(__file__).parents[1] / "transforms" / "fixtures"
                  / "eager_nans.json").read_text())
X = np.array([1.0, -1.0, 0.0], np.float32)

CASES = {
    "log_negative": lambda x: x.log(),
    "sqrt_negative": lambda x: x.sqrt(),
    "zero_over_zero": lambda x: x[2:] / x[2:],
    "one_over_zero_nans": lambda x: 1.0 / x,
    "one_over_zero_infs": lambda x: 1.0 / x,
    "exp_overflow_infs": lambda x: (x * 1000.0).exp(),
    "finite_math": lambda x: x.tanh() * x.exp(),
    "grad_sqrt_square": fgrad.grad(lambda x: (x * x).sqrt().sum()),
    "grad_finite": fgrad.grad(lambda x: (x.sin() ** 2).sum()),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_check_matches_jax(name):
    want = FIX[name]
    check = fgrad.debug_nans if want["flag"] == "nans" else fgrad.debug_infs
    with check():
        if not want["raised"]:
            CASES[name](Tensor(X))
            return
        with pytest.raises(FloatingPointError) as info:
            CASES[name](Tensor(X))
    message = str(info.value)
    assert f"primitive '{want['primitive']}' produced" in message
    assert "eager evaluation" in message and __file__ in message  # the user's line
    assert f"fgrad.config.update('debug_{want['flag']}', False)" in message


def test_off_by_default_and_restored_after_the_block():
    assert np.isnan(Tensor(X).log().numpy()[1])
    with fgrad.debug_nans():
        with pytest.raises(FloatingPointError):
            Tensor(X).log()
    assert np.isnan(Tensor(X).log().numpy()[1])


def test_nan_arriving_through_an_input_is_reported_as_such():
    data = Tensor(np.array([np.nan, 1.0], np.float32))
    with fgrad.debug_nans(), pytest.raises(FloatingPointError, match="already non-finite"):
        data + 1


def test_integer_and_boolean_results_are_not_checked():
    with fgrad.debug_nans(), fgrad.debug_infs():
        out = (Tensor(np.array([1, 2], np.int32)) // 1) > 0
    assert out.numpy().tolist() == [True, True]


def test_checker_runs_only_when_a_flag_is_on():
    import fgrad.core.nonfinite as nonfinite
    calls = []
    original = nonfinite.check_eager
    nonfinite.check_eager = lambda *a: calls.append(a)
    try:
        Tensor(X).exp().sum()
        assert calls == []
        with fgrad.debug_nans():
            Tensor(X).exp()
        assert len(calls) == 1
    finally:
        nonfinite.check_eager = original
