"""Threaded native segments of the llvm backend (llvm/threads.py).

Which kernels split (one loop whose iterations write disjoint memory; never a reduction into
one accumulator or into memory shared by rows), how segments cut into parts around gemm
calls, and results against NumPy with 1, 2 and 3 threads: elementwise, reductions over
several axes, row-fused softmax and layernorm, an MLP gradient (gemm + kernels), uneven
chunks, fewer rows than threads and empty arrays. Thresholds are lowered so small arrays take
the threaded path, and the tests check that they do.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from llvm_helpers import w1, w1_numpy

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm import threads as llvm_threads
from fgrad.lower.llvm.runtime import compile_llvm, describe, plan
from fgrad.lower.llvm.threads import POOL, segment_parts, split_extent
from fgrad.lower.kernel.program import Segment
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(7)


@pytest.fixture
def small_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Split kernels of a few dozen iterations, in chunks of a few iterations."""
    monkeypatch.setattr(llvm_threads, "MIN_PARALLEL_WORK", 64)
    monkeypatch.setattr(llvm_threads, "MIN_CHUNK_WORK", 8)


def jaxpr_of(fn: Callable[..., Any], *arrays: np.ndarray) -> Any:
    """The opened jaxpr of fn traced at `arrays`."""
    jaxpr, consts = open_jaxpr(fgrad.make_jaxpr(fn)(*[Tensor(a) for a in arrays]))
    assert not consts
    return jaxpr


def run_threads(fn: Callable[..., Any], arrays: list[np.ndarray], threads: int,
                monkeypatch: pytest.MonkeyPatch) -> list[np.ndarray]:
    """fn compiled by the llvm backend, run with FGRAD_NUM_THREADS=threads."""
    monkeypatch.setenv("FGRAD_NUM_THREADS", str(threads))
    exe = compile_llvm(jaxpr_of(fn, *arrays))
    return [np.array(o) for o in exe(*arrays)]


def check(fn: Callable[..., Any], want: Callable[..., Any], arrays: list[np.ndarray],
          monkeypatch: pytest.MonkeyPatch, rtol: float = 2e-6, threaded: bool | None = True
          ) -> None:
    """Results with 2 and 3 threads equal those with 1 (bit for bit) and match NumPy; the
    pool ran or not as `threaded` says (None: either)."""
    runs = POOL.runs
    single = run_threads(fn, arrays, 1, monkeypatch)
    assert POOL.runs == runs
    for threads in (2, 3):
        got = run_threads(fn, arrays, threads, monkeypatch)
        for g, s in zip(got, single, strict=True):
            np.testing.assert_array_equal(g, s)
    assert threaded is None or (POOL.runs > runs) == threaded
    wanted = want(*arrays)
    for g, w in zip(single, wanted if isinstance(wanted, list) else [wanted], strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6)


def floats(*shape: int) -> np.ndarray:
    """Standard normal float32 values."""
    return RNG.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------------------- planning


def kernels_of(fn: Callable[..., Any], *arrays: np.ndarray) -> list[Any]:
    """The kernels of fn's llvm program."""
    return plan(jaxpr_of(fn, *arrays)).kernels


def test_elementwise_and_row_reductions_split_on_their_outer_loop() -> None:
    (k,) = kernels_of(lambda x: (x * 2).exp(), floats(600, 500))
    assert split_extent(k) == 300000
    (k,) = kernels_of(lambda x: x.sum(1), floats(600, 500))
    assert split_extent(k) == 600
    (k,) = kernels_of(lambda x: x.softmax(-1), floats(600, 500))
    assert split_extent(k) == 600


def test_reductions_into_one_accumulator_or_shared_rows_do_not_split(small_work: None
                                                                     ) -> None:
    (k,) = kernels_of(lambda x: x.sum(), floats(30, 40))
    assert split_extent(k) == 0
    (k,) = kernels_of(lambda x: x.sum(0), floats(30, 40))
    assert split_extent(k) == 0
    (k,) = kernels_of(lambda x: x.softmax(0), floats(30, 40))
    assert split_extent(k) == 0
    (k,) = kernels_of(lambda x: x + x.sum(), floats(30, 40))
    assert split_extent(k) == 0


def test_small_kernels_do_not_split() -> None:
    (k,) = kernels_of(lambda x: x + 1, floats(100))
    assert split_extent(k) == 0


def test_a_bias_gradient_of_a_training_step_splits() -> None:
    """The relu mask and column sum of a 256 x 512 activation gradient (an MLP's bias
    gradient, W5) run on both threads: 2^17 elements split (threads.MIN_PARALLEL_WORK),
    the column sum in partial sums (schedule/split_reduce.py)."""
    gn, hn, bn = floats(256, 512), floats(256, 512), floats(512)
    g, h, b = Tensor(gn), Tensor(hn), Tensor(bn)

    def bias_grad(g: Tensor, h: Tensor, b: Tensor) -> Tensor:
        return ((h + b) > 0).where(g, 0).sum(0)

    text = fgrad.jit(bias_grad, backend="llvm").lower(g, h, b).as_text()
    assert "split k0 over 8" in text
    got = fgrad.jit(bias_grad, backend="llvm")(g, h, b).numpy()
    np.testing.assert_allclose(got, np.where(hn + bn > 0, gn, 0).sum(0), rtol=1e-5,
                               atol=1e-5)


def test_gemm_runs_in_a_serial_part_between_parallel_ones(small_work: None) -> None:
    x, w = floats(64, 32), floats(32, 48)
    program = plan(jaxpr_of(lambda x, w: ((x * 2) @ w).tanh(), x, w))
    (seg,) = [a for a in program.actions if isinstance(a, Segment)]
    parts = segment_parts(program, seg)
    gemm = [i for i, (name, _) in enumerate(seg.calls) if name in program.library_calls]
    assert [p.parallel for p in parts] == [True, False, True]
    assert parts[1].first <= gemm[0] < parts[1].stop


def test_describe_names_threads(small_work: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FGRAD_NUM_THREADS", "2")
    text = describe(jaxpr_of(lambda x: x.exp(), floats(1000)))
    assert "threads=2" in text and "k0 over 1000" in text
    assert '@"seg0_p0"' in text and "fgrad_wait" in text


def test_small_programs_keep_the_single_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FGRAD_NUM_THREADS", "2")
    text = describe(jaxpr_of(lambda x: x + 1, floats(1)))
    assert '@"seg0"(' in text and "fgrad_wait" not in text


# ---------------------------------------------------------------------------- results


@pytest.mark.parametrize("n", [1000, 1001, 67, 2])
def test_elementwise_uneven_chunks(n: int, small_work: None,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    check(w1, w1_numpy, [floats(n)], monkeypatch, threaded=n >= 64)


@pytest.mark.parametrize("axes", [0, 1, 2, (0, 2), (1, 2), None])
def test_reductions(axes: Any, small_work: None, monkeypatch: pytest.MonkeyPatch) -> None:
    x = floats(5, 13, 11)
    check(lambda a: (a * a).sum(axes) + 1, lambda a: (a * a).sum(axes) + np.float32(1),
          [x], monkeypatch, rtol=1e-5, threaded=True if axes in (2, (1, 2)) else None)


def test_softmax_and_layernorm_rows(small_work: None, monkeypatch: pytest.MonkeyPatch) -> None:
    x = floats(37, 29)

    def want(a: np.ndarray) -> list[np.ndarray]:
        e = np.exp(a - a.max(-1, keepdims=True))
        mu = a.mean(-1, keepdims=True)
        ln = (a - mu) / np.sqrt(((a - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
        return [e / e.sum(-1, keepdims=True), ln.astype(np.float32)]
    check(lambda a: [a.softmax(-1), a.layernorm(-1)], want, [x], monkeypatch, rtol=1e-5)


def test_fewer_rows_than_threads(small_work: None, monkeypatch: pytest.MonkeyPatch) -> None:
    x = floats(2, 50)
    for threads in (3, 8):
        (got,) = run_threads(lambda a: a.softmax(-1), [x], threads, monkeypatch)
        e = np.exp(x - x.max(-1, keepdims=True))
        np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=1e-6)


def test_empty_arrays(small_work: None, monkeypatch: pytest.MonkeyPatch) -> None:
    x = floats(0, 40)
    check(lambda a: [a.exp(), a.sum(1), a.softmax(-1)],
          lambda a: [np.exp(a), a.sum(1), a], [x], monkeypatch, threaded=False)


def mlp_loss(w0: Tensor, b0: Tensor, w1: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """Mean squared error of a one-hidden-layer ReLU network."""
    return (((x @ w0 + b0).relu() @ w1 - y) ** 2).mean()


def mlp_grads_numpy(w0: np.ndarray, b0: np.ndarray, w1: np.ndarray, x: np.ndarray,
                    y: np.ndarray) -> list[np.ndarray]:
    """The gradients of mlp_loss by hand."""
    pre = x @ w0 + b0
    h = np.maximum(pre, 0)
    g = 2 * (h @ w1 - y) / y.size
    gh = (g @ w1.T) * (pre > 0)
    return [x.T @ gh, gh.sum(0), h.T @ g]


def test_mlp_gradient_with_gemm(small_work: None, monkeypatch: pytest.MonkeyPatch) -> None:
    arrays = [floats(24, 40), floats(40), floats(40, 12), floats(33, 24), floats(33, 12)]
    grad = fgrad.grad(mlp_loss, argnums=(0, 1, 2))
    check(lambda *a: list(grad(*a)), mlp_grads_numpy, arrays, monkeypatch, rtol=1e-4)


def test_jit_uses_threads(small_work: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FGRAD_NUM_THREADS", "2")
    x = floats(3000)
    runs = POOL.runs
    got = fgrad.jit(lambda a: (a * 1.25).tanh(), backend="llvm")(Tensor(x))
    assert POOL.runs == runs + 1
    np.testing.assert_allclose(got.numpy(), np.tanh(x * np.float32(1.25)), rtol=2e-6)


def test_bad_thread_count_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FGRAD_NUM_THREADS", "two")
    with pytest.raises(ValueError, match="FGRAD_NUM_THREADS"):
        fgrad.flags.num_threads()


def test_concurrent_callers_and_many_runs(small_work: None,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FGRAD_NUM_THREADS", "2")
    x = floats(40, 33)
    exe = compile_llvm(jaxpr_of(lambda a: [a.softmax(-1), (a * 3).exp()], x))
    inputs = [floats(40, 33) for _ in range(4)]
    wants = [exe(a) for a in inputs]
    wants = [[np.array(w) for w in ws] for ws in wants]
    failures: list[int] = []

    def hammer(k: int) -> None:
        for _ in range(200):
            got = exe(inputs[k])
            if not all(np.array_equal(g, w) for g, w in zip(got, wants[k], strict=True)):
                failures.append(k)
    threads = [threading.Thread(target=hammer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    e = np.exp(inputs[0] - inputs[0].max(-1, keepdims=True))
    np.testing.assert_allclose(wants[0][0], e / e.sum(-1, keepdims=True), rtol=1e-6)
