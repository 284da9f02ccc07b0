"""`fgrad.config.update("jax_enable_x64", True)`: 64-bit defaults, as JAX's flag."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings
from typing import Iterator

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import Tensor, dtypes


@pytest.fixture
def x64() -> Iterator[None]:
    with fgrad.config.override(enable_x64=True):
        yield


def test_defaults_are_32_bit_without_the_flag() -> None:
    assert dtypes.default_float == dtypes.float32 and dtypes.default_int == dtypes.int32
    assert Tensor(1.5).dtype == dtypes.float32 and fnp.arange(3).dtype == dtypes.int32
    assert fgrad.random.normal(fgrad.random.PRNGKey(0), (2,)).dtype == dtypes.float32


def test_flag_makes_python_numbers_and_defaults_64_bit(x64: None) -> None:
    assert Tensor(1.5).dtype == dtypes.float64 and Tensor([1, 2]).dtype == dtypes.int64
    assert fnp.array(1.5).dtype == dtypes.float64 and fnp.arange(3).dtype == dtypes.int64
    assert fnp.zeros(2).dtype == fnp.ones(2).dtype == fnp.eye(2).dtype == dtypes.float64
    assert fnp.linspace(0, 1, 3).dtype == dtypes.float64
    assert fnp.mean(fnp.arange(4)).dtype == dtypes.float64
    assert fnp.sum(fnp.arange(3, dtype=fnp.int8)).dtype == dtypes.int64
    assert Tensor.zeros(2).dtype == dtypes.float64
    key = fgrad.random.PRNGKey(0)
    assert fgrad.random.normal(key, (2,)).dtype == dtypes.float64
    assert fgrad.random.uniform(key, (2,)).dtype == dtypes.float64
    assert fgrad.random.randint(key, (2,), 0, 5).dtype == dtypes.int64
    assert fgrad.nn.initializers.glorot_normal()(key, (2, 2)).dtype == dtypes.float64
    # explicit dtypes and weak scalars are unchanged
    assert Tensor(1.5, dtype=dtypes.float32).dtype == dtypes.float32
    assert (Tensor([1.0], dtype=dtypes.float32) * 2.0).dtype == dtypes.float32


def test_float64_computations_are_exact_and_do_not_warn(x64: None) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        third = fnp.array(1.0) / 3.0
        mixed = Tensor([1.0], dtype=dtypes.float32) + np.ones(1)
    assert float(third.numpy()) == 1.0 / 3.0
    assert mixed.dtype == dtypes.float64


def test_jitted_functions_retrace_when_the_flag_changes() -> None:
    f = fgrad.jit(lambda x: x * 0.1 + fnp.ones(()))
    assert f(np.arange(2)).dtype == dtypes.float32
    with fgrad.config.override(enable_x64=True):
        out = f(np.arange(2))
        assert out.dtype == dtypes.float64
        np.testing.assert_array_equal(out.numpy(), np.arange(2) * 0.1 + 1.0)
    assert f(np.arange(2)).dtype == dtypes.float32


def test_update_and_reset_by_jax_name() -> None:
    fgrad.config.update("jax_enable_x64", True)
    try:
        assert fgrad.config.jax_enable_x64 is True and Tensor(1.0).dtype == dtypes.float64
    finally:
        fgrad.config.reset("jax_enable_x64")
    assert Tensor(1.0).dtype == dtypes.float32
    with pytest.raises(TypeError, match="expected bool"):
        fgrad.config.update("jax_enable_x64", "yes")


@pytest.mark.parametrize("variable", ["JAX_ENABLE_X64", "FGRAD_ENABLE_X64"])
def test_environment_variable_turns_it_on(variable: str) -> None:
    code = "import fgrad; print(fgrad.Tensor(1.0).dtype.name, fgrad.numpy.arange(2).dtype.name)"
    env = dict(os.environ, **{variable: "1"})
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["double", "long"]
