"""Row fusion: a reduction kernel takes in the steps that read its results per row, so
softmax, log_softmax, layernorm and their gradients read their input once.

Checks the schedules (how many kernels, which phases), the kernel IR (one loop per phase,
reuse of values an earlier phase computed) and results against NumPy on the llvm backend
(and on OpenCL when a device works): last and middle axes, keepdim or not, NaN and inf
rows, rows of length 1, empty arrays and float16.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from llvm_helpers import assert_native, close, llvm, needs_half, sched_of

import fgrad
from fgrad import Tensor
from fgrad.lower.kernel.build import build_kernel
from fgrad.lower.kernel.ir import Loop
from fgrad.lower.schedule.row_fusion import ROW_BYTES
from fgrad.lower.schedule.partition import KernelStep, Schedule

RNG = np.random.default_rng(3)
EPS = 1e-5


def softmax_np(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax along `axis` in float64, cast back."""
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis, keepdims=True))
    return (e / e.sum(axis, keepdims=True)).astype(x.dtype)


def log_softmax_np(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """log_softmax along `axis` in float64, cast back."""
    x64 = x.astype(np.float64)
    s = x64 - x64.max(axis, keepdims=True)
    return (s - np.log(np.exp(s).sum(axis, keepdims=True))).astype(x.dtype)


def layernorm_np(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Layer normalization along `axis` (no scale or bias) in float64, cast back."""
    x64 = x.astype(np.float64)
    d = x64 - x64.mean(axis, keepdims=True)
    return (d / np.sqrt((d * d).mean(axis, keepdims=True) + EPS)).astype(x.dtype)


def rows_kernel(s: Schedule) -> KernelStep:
    """The schedule's only kernel, asserting that it is row-fused."""
    assert len(s.kernels()) == 1, str(s)
    step = s.kernels()[0]
    assert step.is_rows, str(s)
    return step


def row_loops(s: Schedule) -> int:
    """How many loops over a row the row-fused kernel of `s` runs."""
    kernel, _ = build_kernel(s, rows_kernel(s))
    outer = kernel.body
    while len(outer) == 1 and isinstance(outer[0], Loop):
        outer = outer[0].body
    return sum(isinstance(st, Loop) for st in outer)


# ---------------------------------------------------------------------------- schedules


def test_softmax_is_one_kernel_with_three_row_loops() -> None:
    x = RNG.standard_normal((16, 40)).astype(np.float32)
    s = assert_native(lambda t: t.softmax(-1), Tensor(x))
    step = rows_kernel(s)
    assert step.phases == (0, 1, 2) and step.reduced == (True, True, False)
    assert row_loops(s) == 3
    assert "kernel rows axes=(1,) phases=3 f32[16,40] (a) ->" in str(s)


def test_softmax_last_loop_loads_the_exponentials_instead_of_recomputing_them() -> None:
    x = RNG.standard_normal((8, 32)).astype(np.float32)
    s = sched_of(lambda t: t.softmax(-1), Tensor(x))
    text = str(build_kernel(s, rows_kernel(s))[0])
    assert text.count(" exp ") == 1
    kernel = build_kernel(s, rows_kernel(s))[0]
    out = next(p.name for p in kernel.params if p.written and p.shape == x.shape)
    last_loop = text.rsplit("for i1", 1)[1]
    # the stored exponentials times the row sum's reciprocal (one division per row)
    assert f"load {out}[" in last_loop and " mul " in last_loop


@pytest.mark.parametrize("fn", [lambda t: t.log_softmax(-1), lambda t: t.layernorm(),
                                lambda t: t - t.mean(-1, keepdim=True),
                                lambda t: t / t.sum(-1).reshape(12, 1)],
                         ids=["log_softmax", "layernorm", "center", "normalize"])
def test_row_programs_are_one_kernel(fn: Callable[[Tensor], Tensor]) -> None:
    x = RNG.standard_normal((12, 20)).astype(np.float32)
    rows_kernel(assert_native(fn, Tensor(x)))


@pytest.mark.parametrize("other", ["flip", "transpose"])
def test_reading_a_reduction_at_another_row_keeps_kernels_apart(other: str) -> None:
    x = RNG.standard_normal((6, 6)).astype(np.float32)

    def f(t: Tensor) -> Tensor:
        s = t.sum(-1)
        return t - (s.flip(0).reshape(6, 1) if other == "flip" else s.reshape(1, 6))

    s = assert_native(f, Tensor(x))
    assert len(s.kernels()) == 2 and not any(k.is_rows for k in s.kernels())
    sums = x.sum(-1)
    want = x - (sums[::-1].reshape(6, 1) if other == "flip" else sums.reshape(1, 6))
    close(llvm(f, Tensor(x)), want, rtol=1e-6, atol=1e-6)


def test_rows_too_long_for_cache_keep_separate_kernels() -> None:
    n = ROW_BYTES // 4 + 1
    x = np.ones((1, n), np.float32)
    s = sched_of(lambda t: t - t.max(-1, keepdim=True), Tensor(x))
    assert len(s.kernels()) == 2


def test_column_softmax_of_a_big_matrix_keeps_separate_kernels() -> None:
    s = sched_of(lambda t: t.softmax(0), Tensor(np.ones((1024, 512), np.float32)))
    assert len(s.kernels()) == 3


# ---------------------------------------------------------------------------- results


@pytest.mark.parametrize("shape,axis", [((7, 33), -1), ((3, 5, 17), -1), ((4, 9, 6), 1),
                                        ((2, 3, 4, 5), 2), ((5, 1), -1), ((1, 40), -1),
                                        ((40,), 0), ((6, 8, 1), 1)])
def test_softmax_family_matches_numpy(shape: tuple[int, ...], axis: int) -> None:
    x = RNG.standard_normal(shape).astype(np.float32) * 3

    def f(t: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return t.softmax(axis), t.log_softmax(axis), t.layernorm(axis, eps=EPS)

    s = assert_native(f, Tensor(x))
    assert len(s.kernels()) <= 2, str(s)
    got = llvm(f, Tensor(x))
    close(got[0], softmax_np(x, axis), rtol=2e-6, atol=1e-7)
    close(got[1], log_softmax_np(x, axis), rtol=2e-6, atol=2e-6)
    close(got[2], layernorm_np(x, axis), rtol=1e-5, atol=1e-5)


def test_middle_axis_rows_accumulate_in_memory_and_stay_one_kernel() -> None:
    x = RNG.standard_normal((3, 50, 7)).astype(np.float32)
    s = assert_native(lambda t: t.softmax(1), Tensor(x))
    rows_kernel(s)
    text = str(build_kernel(s, rows_kernel(s))[0])
    assert "acc" not in text  # accumulators live in the output buffers
    close(llvm(lambda t: t.softmax(1), Tensor(x)), softmax_np(x, 1), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("keepdim", [True, False])
def test_reductions_with_and_without_keepdim(keepdim: bool) -> None:
    x = RNG.standard_normal((9, 4, 11)).astype(np.float32)

    def f(t: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        m = t.max(-1, keepdim=keepdim)
        s = (t - m.reshape(9, 4, 1)).exp().sum(-1, keepdim=keepdim)
        return m, s.log(), t * 2 - m.reshape(9, 4, 1) / s.reshape(9, 4, 1)

    rows_kernel(assert_native(f, Tensor(x)))
    m = x.max(-1, keepdims=True)
    s = np.exp(x - m).sum(-1, keepdims=True)
    want = (m, np.log(s), x * 2 - m / s)
    if not keepdim:
        want = (m[..., 0], np.log(s)[..., 0], want[2])
    for g, w in zip(llvm(f, Tensor(x)), want, strict=True):
        close(g, w.astype(np.float32), rtol=2e-6, atol=1e-6)


def test_nan_and_inf_rows_follow_numpy() -> None:
    x = RNG.standard_normal((6, 10)).astype(np.float32)
    x[1, 3] = np.nan
    x[2, :] = -np.inf
    x[3, 4] = np.inf
    x[4, :] = np.inf
    x[5, 7] = -np.inf
    got = llvm(lambda t: (t.max(-1), t.softmax(-1), t.log_softmax(-1)), Tensor(x))
    with np.errstate(invalid="ignore", divide="ignore"):
        m = x.max(-1, keepdims=True)
        safe = np.where(np.isfinite(m), m, 0)
        e = np.exp(x - safe)
        want_sm = e / e.sum(-1, keepdims=True)
        want_ls = (x - safe) - np.log(e.sum(-1, keepdims=True))
    close(got[0], m[:, 0])
    close(got[1], want_sm, rtol=2e-6, atol=1e-7)
    close(got[2], want_ls, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0,), (0, 3, 4)])
def test_empty_arrays(shape: tuple[int, ...]) -> None:
    x = np.zeros(shape, np.float32)

    def f(t: Tensor) -> tuple[Tensor, Tensor]:
        return t - t.sum(-1, keepdim=True), (t.sum(-1) + 1).log()

    got = llvm(f, Tensor(x))
    close(got[0], x - x.sum(-1, keepdims=True))
    close(got[1], np.log(x.sum(-1) + 1))
    if shape[-1]:
        close(llvm(lambda t: t.softmax(-1), Tensor(x)), softmax_np(x))


@needs_half
def test_float16_rows_round_each_reduction_as_numpy_does() -> None:
    x = (RNG.standard_normal((10, 64)) * 3).astype(np.float16)

    def f(t: Tensor) -> tuple[Tensor, Tensor]:
        return t.softmax(-1), t - t.mean(-1, keepdim=True)

    rows_kernel(assert_native(f, Tensor(x)))
    got = llvm(f, Tensor(x))
    want = fgrad.jit(f, backend="numpy")(Tensor(x))
    close(got[0], want[0].numpy(), rtol=2e-3, atol=1e-4)
    close(got[1], want[1].numpy(), rtol=2e-3, atol=2e-3)
    close(got[1], (x - x.mean(-1, keepdims=True)).astype(np.float16), rtol=1e-2, atol=1e-2)


def test_softmax_cross_entropy_gradient_matches_numpy() -> None:
    logits = RNG.standard_normal((32, 10)).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[RNG.integers(0, 10, 32)]

    def loss(x: Tensor, y: Tensor) -> Tensor:
        return -(y * x.log_softmax(-1)).sum(-1).mean()

    s = assert_native(fgrad.grad(loss), Tensor(logits), Tensor(labels))
    assert len(s.kernels()) == 1, str(s)
    got = llvm(fgrad.grad(loss), Tensor(logits), Tensor(labels))
    want = (softmax_np(logits) * labels.sum(-1, keepdims=True) - labels) / 32
    close(got, want.astype(np.float32), rtol=1e-5, atol=1e-7)


def test_layernorm_gradient_matches_finite_differences() -> None:
    x = RNG.standard_normal((5, 16)).astype(np.float64)
    w = RNG.standard_normal((5, 16))

    def loss(t: Tensor) -> Tensor:
        return (t.layernorm() * Tensor(w)).sum()

    got = llvm(fgrad.grad(loss), Tensor(x)).numpy()
    h, want = 1e-6, np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        d = np.zeros_like(x)
        d[i] = h
        want[i] = ((layernorm_np(x + d) * w).sum() - (layernorm_np(x - d) * w).sum()) / (2 * h)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_integer_and_bool_rows() -> None:
    x = RNG.integers(-50, 50, (7, 13)).astype(np.int32)

    def f(t: Tensor) -> tuple[Tensor, Tensor]:
        return t - t.max(-1, keepdim=True), (t > 0).any(-1, keepdim=True).where(t, 0)

    rows_kernel(assert_native(f, Tensor(x)))
    got = llvm(f, Tensor(x))
    close(got[0], x - x.max(-1, keepdims=True))
    close(got[1], np.where((x > 0).any(-1, keepdims=True), x, 0).astype(np.int32))


# ---------------------------------------------------------------------------- opencl


def _opencl_exe(fn: Callable[..., Any], x: np.ndarray) -> Any:
    pytest.importorskip("pyopencl")
    from fgrad.lower.opencl import device as opencl_device
    from fgrad.lower.opencl.runtime import compile_opencl
    from fgrad.transforms.jit_prim import open_jaxpr
    try:
        opencl_device.default_index()
    except RuntimeError:
        pytest.skip("no working OpenCL device")
    return compile_opencl(open_jaxpr(fgrad.make_jaxpr(fn)(Tensor(x)))[0])


@pytest.mark.parametrize("shape,axis", [((9, 300), -1), ((3, 40, 5), 1), ((4, 1), -1),
                                        ((0, 7), -1)])
def test_opencl_runs_row_fused_kernels_a_work_group_per_row(shape: tuple[int, ...],
                                                            axis: int) -> None:
    x = RNG.standard_normal(shape).astype(np.float32)
    x.flat[::7] *= 30

    def f(t: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return t.softmax(axis), t.log_softmax(axis), t.layernorm(axis, eps=EPS)

    exe = _opencl_exe(f, x)
    assert "rows" in [r.form for r in exe.rendered()]
    got = [o.numpy() for o in exe(x)]
    close(got[0], softmax_np(x, axis), rtol=1e-5, atol=1e-7)
    close(got[1], log_softmax_np(x, axis), rtol=1e-5, atol=1e-5)
    close(got[2], layernorm_np(x, axis), rtol=1e-4, atol=1e-5)


def test_every_phase_loop_of_a_row_kernel_is_vectorized() -> None:
    from fgrad.lower.llvm.runtime import optimized_ir, plan
    from fgrad.transforms.jit_prim import open_jaxpr

    for fn in (lambda t: t.softmax(-1), lambda t: t.layernorm()):
        jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(Tensor(np.ones((8, 4096), np.float32))))
        text = optimized_ir(plan(jaxpr))
        assert text.count("\nvector.body") >= 3 and "call float @expf" not in text


def test_each_phase_loop_keeps_its_own_interleave_hint() -> None:
    """softmax's max and exp-sum loops carry reductions (2 vector iterations per trip), its
    scaling loop does not (1): a loop ID each (the exp-sum loop is rendered twice, for rows
    with a finite maximum and others), not one shared by all with the last hints."""
    import re

    from fgrad.lower.llvm.runtime import module_ir, plan
    from fgrad.transforms.jit_prim import open_jaxpr

    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda t: t.softmax(-1))(
        Tensor(np.ones((8, 4096), np.float32))))
    text = str(module_ir(plan(jaxpr)))
    nodes = dict(re.findall(r"^(!\d+) = (.*)$", text, re.M))
    ids = re.findall(r'br label %"i1\.head[.\d]*", !llvm.loop (!\d+)', text)

    def interleave(loop_id: str) -> int:
        hints = [nodes[h] for h in re.findall(r"!\d+", nodes[loop_id])[1:]]
        return next(int(h.split("i32 ")[1].rstrip(" }")) for h in hints if "interleave" in h)
    assert len(set(ids)) == 4 and [interleave(i) for i in ids] == [2, 2, 2, 1]


def test_a_partial_sum_is_never_reused_as_the_final_one() -> None:
    x = RNG.standard_normal((3, 20, 4)).astype(np.float32)

    def f(t: Tensor) -> Tensor:
        e = (t - t.max(1, keepdim=True)).exp()
        return (e.sum(1, keepdim=True) + e) * 2  # the update computes "partial + e" too

    rows_kernel(assert_native(f, Tensor(x)))
    e = np.exp(x - x.max(1, keepdims=True))
    close(llvm(f, Tensor(x)), (e.sum(1, keepdims=True) + e) * 2, rtol=2e-6, atol=1e-6)
