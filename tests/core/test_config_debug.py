"""Tests for fgrad.config, disable_jit, debug_nans / debug_infs, compile logging and the
float64 policy (a warning when float64 data meets float32 parameters)."""
import logging
import warnings

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, nn


@pytest.fixture(autouse=True)
def _fresh_config():
    fgrad.config.reset()
    yield
    fgrad.config.reset()


def test_config_update_overrides_environment(monkeypatch):
    monkeypatch.setenv("FGRAD_BACKEND", "numpy")
    assert fgrad.config.backend == "numpy"
    fgrad.config.update("backend", "LLVM")
    assert fgrad.config.backend == "llvm"
    fgrad.config.reset("backend")
    assert fgrad.config.backend == "numpy"
    monkeypatch.setenv("FGRAD_DEBUG_NANS", "1")
    assert fgrad.config.debug_nans is True
    fgrad.config.update("jax_debug_nans", False)   # JAX's spelling is accepted
    assert fgrad.config.debug_nans is False


def test_config_rejects_unknown_names_and_bad_values():
    with pytest.raises(AttributeError, match="debug_nans"):
        fgrad.config.update("debug_nan", True)
    with pytest.raises(TypeError, match="expected int"):
        fgrad.config.update("num_threads", "4")
    with pytest.raises(ValueError, match="choose one of"):
        fgrad.config.update("backend", "tpu")


def test_config_override_restores():
    fgrad.config.update("log_compiles", True)
    with fgrad.config.override(log_compiles=False, debug_infs=True):
        assert not fgrad.config.log_compiles and fgrad.config.debug_infs
    assert fgrad.config.log_compiles and not fgrad.config.debug_infs


def test_jax_platform_names_select_the_matching_backend():
    """`jax.config.update("jax_platform_name", "cpu")` is common in JAX programs."""
    with fgrad.config.override(jax_platform_name="cpu"):
        assert fgrad.config.backend == "llvm"
    with fgrad.config.override(jax_default_device="CL:0"):
        assert fgrad.config.backend == "opencl"
    with fgrad.config.override(jax_platform_name="gpu"):
        assert fgrad.config.backend == "opencl"
    with pytest.raises(ValueError, match="choose one of"):
        fgrad.config.update("jax_platform_name", "tpu")


def test_disable_jit_runs_python():
    seen = []

    @fgrad.jit
    def f(x):
        seen.append(type(x).__name__)
        return x * 2

    x = Tensor(np.ones(3, np.float32))
    f(x)
    with fgrad.disable_jit():
        np.testing.assert_array_equal(f(x).numpy(), 2)
        np.testing.assert_array_equal(f(x).numpy(), 2)
    assert seen[1:] == ["Tensor", "Tensor"]       # concrete values each call, no tracing
    assert seen[0] != "Tensor"                     # the first call was traced


@pytest.mark.parametrize("backend", ["numpy", "llvm"])
def test_debug_nans_names_primitive_and_line(backend):
    @fgrad.jit
    def f(x):
        y = x * 2
        z = y.log()          # the NaN starts here
        return z.sum()

    x = Tensor(np.array([1.0, -1.0], np.float32))
    fgrad.config.update("backend", backend)
    assert np.isnan(f(x).numpy())                  # off: NaN goes through
    with fgrad.debug_nans():
        with pytest.raises(FloatingPointError, match=r"'log' produced NaN .*test_config_debug"):
            f(x)
        np.testing.assert_allclose(f(Tensor(np.array([1.0], np.float32))).numpy(), np.log(2))


def test_debug_infs_in_backward_pass():
    def h(x):
        return fgrad.jit(lambda x: (x - 1).sqrt())(x).sum()

    x = Tensor(np.array([1.0, 2.0], np.float32))
    assert np.isinf(fgrad.grad(h)(x).numpy()[0])
    with fgrad.debug_infs():
        with pytest.raises(FloatingPointError, match="'div' produced inf in jit\\(jvp"):
            fgrad.grad(h)(x)
    with fgrad.debug_nans():                       # infinities are not NaNs
        fgrad.grad(h)(x)


def test_compile_logging(caplog):
    f = fgrad.jit(lambda x: (x + 1).sum())
    fgrad.config.update("log_compiles", True)
    with caplog.at_level(logging.INFO, logger="fgrad.jit"):
        f(Tensor(np.ones(3, np.float32)))
        f(Tensor(np.ones(3, np.float32)))
        f(Tensor(np.ones(4, np.float32)))
    msgs = [r.getMessage() for r in caplog.records if r.name == "fgrad.jit"]
    assert len(msgs) == 2
    assert "first call" in msgs[0] and "float[3]" in msgs[0]
    assert "changed shape (3,) -> (4,)" in msgs[1]


def test_slow_compile_warns_without_the_setting(caplog, monkeypatch):
    from fgrad.transforms import jit_log
    monkeypatch.setattr(jit_log, "SLOW_COMPILE_S", -1.0)
    with caplog.at_level(logging.WARNING, logger="fgrad.jit"):
        fgrad.jit(lambda x: x * 3)(Tensor(np.ones(2, np.float32)))
    assert any(r.levelno == logging.WARNING and "compiled in" in r.getMessage()
               for r in caplog.records)


def test_float64_data_meeting_float32_weights_warns_at_the_user_line():
    lin = nn.Linear(3, 2, key=fgrad.random.PRNGKey(0))
    x64 = np.random.default_rng(0).random((4, 3))
    with pytest.warns(fgrad.Float64PromotionWarning, match="float32") as rec:
        y = lin(Tensor(x64))
    assert y.dtype == fgrad.dtypes.float64           # the policy keeps dtypes
    assert rec[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lin(Tensor(x64.astype(np.float32))).dtype == fgrad.dtypes.float32
        assert (Tensor(x64) * 2.0).dtype == fgrad.dtypes.float64    # float64 alone: silent
        fgrad.config.update("warn_float64", False)
        lin(Tensor(x64))


def test_jitted_calls_read_the_backend_once_and_see_config_at_once(monkeypatch):
    f = fgrad.jit(lambda x: x + 1)
    x = Tensor(np.ones(3, np.float32))
    monkeypatch.setenv("FGRAD_BACKEND", "llvm")
    fgrad.flags.refresh()
    f(x)
    assert f.lower(x).backend == "llvm"
    monkeypatch.setenv("FGRAD_BACKEND", "numpy")   # not read again on the call path ...
    f(x)
    assert f.lower(x).backend == "llvm"
    fgrad.flags.refresh()                          # ... until refreshed
    np.testing.assert_array_equal(f(x).numpy(), 2)
    assert f.lower(x).backend == "numpy"
    fgrad.config.update("backend", "llvm")         # a config change is seen at once
    assert f.lower(x).backend == "llvm"
