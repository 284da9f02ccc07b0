"""Shared helpers of the llvm backend tests: schedules, native runs, comparisons."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import fgrad
import fgrad.lower  # noqa: F401  (registers the llvm compiler)
from fgrad import Tensor
from fgrad.lower.llvm_runtime import half_native
from fgrad.lower.schedule import Schedule, schedule
from fgrad.transforms.jit_prim import open_jaxpr

HALF = half_native()  # float16 kernels need F16C; elsewhere float16 runs as host steps
needs_half = pytest.mark.skipif(not HALF, reason="this CPU has no F16C")


def sched_of(fn: Callable[..., Any], *args: Any) -> Schedule:
    """The llvm schedule of `fn` traced at `args`."""
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(*args))
    return schedule(jaxpr, HALF)


def llvm(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` jitted with the llvm backend."""
    return fgrad.jit(fn, backend="llvm")(*args)


def assert_native(fn: Callable[..., Any], *args: Any) -> Schedule:
    """The schedule of `fn`, asserting that it has no host steps."""
    s = sched_of(fn, *args)
    assert not s.hosts(), str(s)
    return s


def close(got: Any, want: np.ndarray, rtol: float = 1e-6, atol: float = 0.0) -> None:
    """Same dtype and shape, values within tolerance (NaNs in the same places)."""
    got = got.numpy() if isinstance(got, Tensor) else np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                               atol=atol, equal_nan=True)


def w1(x: Tensor) -> Tensor:
    """The W1 elementwise chain."""
    return (x * 1.5 + 0.5).tanh() * x.sigmoid() + (-x * x).exp()


def w1_numpy(x: np.ndarray) -> np.ndarray:
    """W1 in NumPy."""
    return np.tanh(x * 1.5 + 0.5) * (1 / (1 + np.exp(-x))) + np.exp(-x * x)
