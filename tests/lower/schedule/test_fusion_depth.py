"""Long elementwise chains (schedule/depth.py): a chain deeper than MAX_FUSED_DEPTH is cut
into several kernels instead of one expression deep enough to exhaust Python's recursion
while compiling; shorter chains stay one kernel; results match NumPy on every backend."""
from __future__ import annotations

import numpy as np
import pytest

import fgrad
from fgrad.lower.schedule.depth import MAX_FUSED_DEPTH
from fgrad.lower.schedule.partition import schedule
from fgrad.transforms.jit_prim import open_jaxpr

pytestmark = pytest.mark.backends
X = np.linspace(0.1, 1.0, 333).astype(np.float32)


def _series(x, steps):
    term, total = x, x
    for n in range(steps):
        term = term * x / (x + n)
        total = total + term
    return total


def _cut_values(steps: int) -> int:
    """How many values besides the input and output the schedule keeps in buffers."""
    jaxpr = open_jaxpr(fgrad.make_jaxpr(lambda x: _series(x, steps))(X))[0]
    return len(schedule(jaxpr).realized) - 2


def test_short_chain_keeps_no_intermediate() -> None:
    assert _cut_values(20) == 0


def test_long_chain_is_cut_every_max_fused_depth_levels() -> None:
    steps = 3 * MAX_FUSED_DEPTH   # about 6 * MAX_FUSED_DEPTH levels deep
    assert 5 <= _cut_values(steps) <= 6 * 5   # a few values per cut


def test_long_chain_compiles_and_matches_numpy() -> None:
    got = fgrad.jit(lambda x: _series(x, 700))(X).numpy()
    np.testing.assert_allclose(got, _series(X, 700), rtol=2e-6)
    grad = fgrad.jit(fgrad.grad(lambda x: _series(x, 250).sum()))(X).numpy()
    term, want = np.ones_like(X), np.ones_like(X)   # d/dx of the series, term by term
    value = X.astype(np.float64)
    for n in range(250):
        term = term * X / (X + n) + value * (1 / (X + n) - X / (X + n) ** 2)
        value = value * X / (X + n)
        want = want + term
    np.testing.assert_allclose(grad, want, rtol=1e-4)


def test_shared_subexpressions_compile_once_each() -> None:
    """`y = (y * y + y) / 2` repeated: every step reads the last one twice, so the fused
    epilogue of the product has 2^24 paths but 24 distinct nodes; a walk of every path
    (the gemm epilogue check, the streaming analysis) once hung the compile."""
    a = np.linspace(0.0, 0.02, 64 * 64, dtype=np.float32).reshape(64, 64)

    def f(x, w):
        y = x @ w
        for _ in range(24):
            y = (y * y + y) * 0.5
        return y
    y = a @ a
    for _ in range(24):
        y = (y * y + y) * np.float32(0.5)
    np.testing.assert_allclose(fgrad.jit(f)(a, a).numpy(), y, rtol=1e-5, atol=1e-30)
