"""Tests for fgrad.profiler: per-program totals on every backend, per-step rows mapped to the
user's lines on llvm, and `jf.profile(*args)`."""
import numpy as np
import pytest

import fgrad
from fgrad import Tensor

X = np.random.default_rng(0).random((64, 32)).astype(np.float32)
W = np.random.default_rng(1).random((32, 16)).astype(np.float32)


def _step(x, w):
    h = (x @ w).relu()                        # PROFILE-LINE-A
    fgrad.debug.callback(lambda a: None, h.sum())
    return h.exp().sum()                      # PROFILE-LINE-B


def _line_of(marker):
    import inspect
    src, start = inspect.getsourcelines(_step)
    return start + next(i for i, s in enumerate(src) if marker in s)


def test_llvm_steps_map_to_user_lines():
    jf = fgrad.jit(_step, backend="llvm")
    jf(Tensor(X), Tensor(W))
    with fgrad.profiler.profile() as prof:
        for _ in range(3):
            out = jf(Tensor(X), Tensor(W))
    np.testing.assert_allclose(out.numpy(), np.exp(np.maximum(X @ W, 0)).sum(), rtol=1e-4)
    (stats,) = prof.programs.values()
    assert stats.calls == 3 and stats.seconds > 0
    rows = list(stats.rows.values())
    assert all(r.count == 3 for r in rows)
    assert sum(r.seconds for r in rows) <= stats.seconds
    table = str(prof)
    assert "jit(_step) on llvm: 3 call(s)" in table
    assert "host" in table and "debug_callback" in table
    name = __file__.rsplit("/", 1)[-1]
    assert f"{name}:{_line_of('PROFILE-LINE-A')}" in table
    assert f"{name}:{_line_of('PROFILE-LINE-B')}" in table


@pytest.mark.backends
def test_program_totals_every_backend(jit_backend):
    jf = fgrad.jit(_step)
    with fgrad.profiler.profile() as prof:
        jf(Tensor(X), Tensor(W))
        jf(Tensor(X), Tensor(W))
    (stats,) = prof.programs.values()
    assert stats.calls == 2 and stats.backend == jit_backend


def test_jitted_profile_prints_table(capsys):
    prof = fgrad.jit(_step, backend="llvm").profile(Tensor(X), Tensor(W))
    out = capsys.readouterr().out
    assert "jit(_step) on llvm: 1 call(s)" in out and str(prof) in out


def test_no_profile_no_table():
    with fgrad.profiler.profile() as prof:
        pass
    assert str(prof) == "(no jitted program ran)"
    assert fgrad.profiler.active() is None
