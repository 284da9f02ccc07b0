"""Tests for fgrad.profiler: per-program totals on every backend, per-step rows mapped to the
user's lines on llvm and opencl (one row per kernel or gemm), and `jf.profile(*args)`."""
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


def _two_kernels(x, w):
    h = (x @ w + 1.0).tanh()                  # KERNEL-LINE-A
    return h.sum(0), (h * h).max(1)           # KERNEL-LINE-B


def test_llvm_rows_are_single_kernels_with_their_lines():
    jf = fgrad.jit(_two_kernels, backend="llvm")
    text = jf.lower(Tensor(X), Tensor(W)).as_text()
    jf(Tensor(X), Tensor(W))
    with fgrad.profiler.profile() as prof:
        s, m = jf(Tensor(X), Tensor(W))
    h = np.tanh(X @ W + 1.0)
    np.testing.assert_allclose(s.numpy(), h.sum(0), rtol=1e-4)
    np.testing.assert_allclose(m.numpy(), (h * h).max(1), rtol=1e-4)
    (stats,) = prof.programs.values()
    labels = [r.label for r in stats.rows.values()]
    assert len(labels) >= 2 and all("," not in lb.split()[1] for lb in labels), labels
    gemm = next(r for r in stats.rows.values() if "dot_general" in r.label)
    assert "[64, 32]x[32, 16]" in gemm.label
    name = __file__.rsplit("/", 1)[-1]
    assert f"{name}:{_two_kernels.__code__.co_firstlineno + 1}" in gemm.where
    kernels = [r for r in stats.rows.values() if "dot_general" not in r.label]
    assert any("tanh" in r.label for r in kernels)
    assert sum(r.count for r in stats.rows.values()) == len(labels)   # one call each
    assert "tanh" in text  # the normal build is unchanged by profiling


def test_profiling_build_splits_what_the_normal_build_groups():
    from fgrad.lower.llvm.runtime import plan
    closed = fgrad.make_jaxpr(_two_kernels)(Tensor(X), Tensor(W))
    normal = [a for a in plan(closed.jaxpr).actions if hasattr(a, "calls")]
    split = [a for a in plan(closed.jaxpr, call_per_segment=True).actions
             if hasattr(a, "calls")]
    assert any(len(seg.calls) > 1 for seg in normal)
    assert all(len(seg.calls) == 1 for seg in split)
    assert [c for seg in normal for c, _ in seg.calls] == [c for seg in split
                                                          for c, _ in seg.calls]


@pytest.mark.opencl
def test_opencl_rows_are_single_kernels():
    jf = fgrad.jit(_two_kernels, backend="opencl")
    prof = jf.profile(Tensor(X), Tensor(W))
    (stats,) = prof.programs.values()
    labels = [r.label for r in stats.rows.values()]
    assert any("dot_general [64, 32]x[32, 16]" in lb for lb in labels), labels
    assert any("tanh" in lb for lb in labels) and len(labels) >= 2
    assert sum(r.seconds for r in stats.rows.values()) <= stats.seconds
