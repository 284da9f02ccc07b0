"""Products of tanh and logistic values with one division (kernels/quotients.py).

References: NumPy in long double. The product keeps the accuracy of two separate quotients
(within 6 ulp; with two divisions up to 5.4 were measured), NaN/inf/signed zeros included, in float32
and float64; the kernel's IR has one division for the product; a factor used alone as well
is not computed twice; float16 keeps its per-op rounding.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from llvm_helpers import llvm

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm.runtime import optimized_ir, plan
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(5)


def _inputs(dtype: Any) -> np.ndarray:
    return np.concatenate([RNG.standard_normal(20000) * 6, np.linspace(-40, 40, 8001),
                           [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 100, -100,
                            9.1, -9.1, 19.2, -19.2, 700, -700]]).astype(dtype)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


CASES = {
    "sigmoid(x) * tanh(0.7x)": (lambda t: t.sigmoid() * (t * 0.7).tanh(),
                                lambda x: _sigmoid(x) * np.tanh(x * 0.7)),
    "tanh(x) * tanh(x + 1)": (lambda t: t.tanh() * (t + 1).tanh(),
                              lambda x: np.tanh(x) * np.tanh(x + 1)),
    "sigmoid(x) * sigmoid(-x)": (lambda t: t.sigmoid() * (-t).sigmoid(),
                                 lambda x: _sigmoid(x) * _sigmoid(-x)),
    "tanh(x) ** 2": (lambda t: t.tanh() * t.tanh(), lambda x: np.tanh(x) ** 2),
}


def _ulps(got: np.ndarray, want: np.ndarray, dtype: Any) -> float:
    rounded = want.astype(dtype)
    assert np.array_equal(np.isnan(got), np.isnan(rounded))
    finite = np.isfinite(rounded) & (np.abs(rounded) >= np.finfo(dtype).tiny)
    unit = np.spacing(np.abs(rounded[finite])).astype(np.longdouble)
    return float(np.max(np.abs(got[finite].astype(np.longdouble) - want[finite]) / unit))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", list(CASES))
def test_products_of_quotients_match_numpy(case: str, dtype: Any) -> None:
    fn, ref = CASES[case]
    x = _inputs(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        want = ref(x.astype(np.longdouble))
    got = llvm(fn, Tensor(x)).numpy()
    assert _ulps(got, want, dtype) <= 6.0   # two quotients apart: up to 5.4 measured
    exact = np.isin(x, [0.0]) & np.isfinite(want)   # signed zeros of odd products
    np.testing.assert_array_equal(got[exact], want[exact].astype(dtype))


def _divisions(fn: Any, x: np.ndarray) -> int:
    """Division instructions in the program's optimized IR (vector loop and remainder)."""
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(Tensor(x)))
    return optimized_ir(plan(jaxpr)).count(" = fdiv ")


def test_one_division_per_product() -> None:
    x = np.ones(1 << 12, np.float32)
    apart = _divisions(lambda t: t.sigmoid() + (t * 0.7).tanh(), x)
    assert apart > 0
    assert 2 * _divisions(lambda t: t.sigmoid() * (t * 0.7).tanh(), x) == apart
    w1 = _divisions(lambda t: (t * 1.5 + 0.5).tanh() * t.sigmoid() + (-(t * t)).exp(), x)
    assert 2 * w1 == apart
    # the tanh used alone too: its own division besides the product's
    assert _divisions(lambda t: t.tanh() * t.sigmoid() + t.tanh(), x) == apart


def test_float16_keeps_its_rounding() -> None:
    """float16 products are not merged: each factor rounds to float16 first, as the NumPy
    impl does; within one float16 ulp of that (each factor is a float32 approximation)."""
    x = _inputs(np.float16)[:20000]
    got = llvm(lambda t: t.sigmoid() * t.tanh(), Tensor(x)).numpy().astype(np.float64)
    wide = x.astype(np.float64)
    want = (_sigmoid(wide).astype(np.float16).astype(np.float64) *
            np.tanh(wide).astype(np.float16).astype(np.float64)).astype(np.float16)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    unit = np.spacing(np.abs(want[finite])).astype(np.float64)
    assert np.all(np.abs(got[finite] - want[finite]) <= unit)
