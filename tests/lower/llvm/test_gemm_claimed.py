"""Split gemms whose threads claim row blocks per B panel (gemm/claimed.py), and the pool's
pinned workers.

References: NumPy matmul in float64. Shapes cover several jc column blocks, a contraction
deeper than KC with a short last slice, widths that are not a multiple of NR, transposed
operands, float64, fused epilogues, bfloat16 pairs (AMX), 1-3 threads, and six threads on
this machine's CPUs (preempted threads hold blocks, so others defer the blocks whose slice
before is not stored yet).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import ml_dtypes
import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm import blas
from fgrad.lower.llvm.gemm import claimed, prepack
from fgrad.lower.llvm.gemm.claimed import ClaimedPlan, claimed_plan
from fgrad.lower.llvm.gemm.native import KC, NC
from fgrad.lower.llvm.gemm.pairs import host_has_pairs
from fgrad.lower.llvm.gemm.prepack import prepack_plan
from fgrad.lower.llvm.runtime import describe

RNG = np.random.default_rng(17)
TOL = {np.float32: 3e-5, np.float64: 1e-12}


@pytest.fixture(autouse=True)
def claimed_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests cover claimed blocks, whichever way this host decides."""
    monkeypatch.setattr(prepack, "ENABLED", None)
    monkeypatch.setattr(prepack, "shared_b_pays", lambda: False)


def _dot_eqn(fn, *arrays):
    closed = fgrad.make_jaxpr(fn)(*[Tensor(a) for a in arrays])
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "dot_general"]
    return closed, eqn


def _check(got: Tensor, want: np.ndarray, k: int, dtype: type) -> None:
    err = np.abs(got.numpy().astype(np.float64) - want).max() / max(np.abs(want).max(), 1.0)
    assert err < TOL[dtype] * max(1.0, k / 64), err


SHAPES = [(256, 784, 512), (97, 300, NC + 37), (60, KC * 2 + 5, 200), (1000, 64, 257)]


@pytest.mark.parametrize("threads", ["1", "2", "3"])
@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("trans", [(False, False), (True, True)])
def test_claimed_gemm_matches_numpy(monkeypatch: pytest.MonkeyPatch, threads: str, m: int,
                                    k: int, n: int, trans: tuple[bool, bool]) -> None:
    monkeypatch.setenv("FGRAD_NUM_THREADS", threads)
    a = RNG.standard_normal((k, m) if trans[0] else (m, k)).astype(np.float32)
    b = RNG.standard_normal((n, k) if trans[1] else (k, n)).astype(np.float32)

    def mm(x: Tensor, y: Tensor) -> Tensor:
        return (x.T if trans[0] else x) @ (y.T if trans[1] else y)
    _, eqn = _dot_eqn(mm, a, b)
    plan = prepack_plan(eqn)
    assert isinstance(plan, ClaimedPlan) and plan.blocks >= 2
    want = (a.T if trans[0] else a).astype(np.float64) @ (b.T if trans[1] else b).astype(
        np.float64)
    _check(fgrad.jit(mm, backend="llvm")(Tensor(a), Tensor(b)), want, k, np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_oversubscribed_threads_defer_blocks(monkeypatch: pytest.MonkeyPatch,
                                             dtype: type) -> None:
    """Six parts on this machine's CPUs: threads are preempted inside blocks, so the others
    meet blocks whose previous slice is not stored yet (they defer them, or wait)."""
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    monkeypatch.setenv("FGRAD_NUM_THREADS", "6")
    x = RNG.standard_normal((600, KC * 3 + 7)).astype(dtype)
    w = RNG.standard_normal((KC * 3 + 7, 300)).astype(dtype)
    bias = RNG.standard_normal(300).astype(dtype)
    relu = fgrad.jit(lambda x, w, c: (x @ w + c).relu(), backend="llvm")
    tanh = fgrad.jit(lambda x, w: (x @ w).tanh() * 2.0, backend="llvm")
    plan = prepack_plan(_dot_eqn(lambda x, y: x @ y, x, w)[1])
    assert isinstance(plan, ClaimedPlan) and plan.threads == 6 and plan.panels == 4
    product = x.astype(np.float64) @ w
    for _ in range(10):
        _check(relu(Tensor(x), Tensor(w), Tensor(bias)), np.maximum(product + bias, 0),
               x.shape[1], dtype)
        _check(tanh(Tensor(x), Tensor(w)), np.tanh(product) * 2.0, x.shape[1], dtype)


@pytest.mark.skipif(not host_has_pairs(), reason="no AMX-BF16 on this CPU")
@pytest.mark.parametrize("threads", ["2", "6"])
def test_claimed_bfloat16_pairs(monkeypatch: pytest.MonkeyPatch, threads: str) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: int(threads))
    monkeypatch.setenv("FGRAD_NUM_THREADS", threads)
    bf16 = ml_dtypes.bfloat16
    a = RNG.standard_normal((700, 1030)).astype(bf16)
    b = RNG.standard_normal((1030, 300)).astype(bf16)
    fn = fgrad.jit(lambda x, y: x.float() @ y.float(), backend="llvm")
    assert "claimed per B panel" in fn.lower(Tensor(a), Tensor(b)).as_text()
    want = a.astype(np.float64) @ b.astype(np.float64)
    for _ in range(3):
        got = fn(Tensor(a), Tensor(b)).numpy().astype(np.float64)
        assert np.abs(got - want).max() < 4e-7 * np.abs(want).max() * np.sqrt(a.size)


def test_claimed_plans() -> None:
    a, b = np.ones((256, 784), np.float32), np.ones((784, 512), np.float32)
    closed, eqn = _dot_eqn(lambda x, y: x @ y, a, b)
    plan = prepack_plan(eqn)
    assert isinstance(plan, ClaimedPlan)
    assert blas.gemm_chunking(eqn) == plan.chunking == (plan.threads, 1, plan.threads)
    assert plan.rows_per % 12 == 0 or plan.rows_per % 6 == 0     # whole MR tiles
    assert plan.rows_per * (plan.blocks - 1) < 256 <= plan.rows_per * plan.blocks
    assert plan.panels == -(-784 // KC) and plan.scratch_elems == plan.panels * 8 + plan.blocks
    assert "claimed per B panel" in describe(closed.jaxpr)
    lhs, rhs = np.ones((4, 256, 784), np.float32), np.ones((4, 784, 512), np.float32)
    assert prepack_plan(_dot_eqn(lambda x, y: x @ y, lhs, rhs)[1]) is None  # batched
    small = np.ones((8, 8), np.float32)
    assert prepack_plan(_dot_eqn(lambda x, y: x @ y, small, small)[1]) is None
    wide = claimed_plan(2048, 2 * NC + 1, 3 * KC, 12, 2 * (2 * NC + 1) * 3 * KC, 1 << 21)
    assert wide is not None and wide.panels == 3 * 3 and wide.rows_per <= 144


def test_switched_off_keeps_the_plain_split(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(claimed, "ENABLED", False)
    eqn = _dot_eqn(lambda x, y: x @ y, np.ones((256, 784), np.float32),
                   np.ones((784, 512), np.float32))[1]
    assert prepack_plan(eqn) is None and blas.gemm_chunking(eqn)[0] >= 2


def test_concurrent_calls_claim_their_own_blocks() -> None:
    """Two Python threads calling the same program at once: each call has its own state
    line and counters."""
    fn = fgrad.jit(lambda x, y: x @ y, backend="llvm")
    a = RNG.standard_normal((300, 600)).astype(np.float32)
    bs = [RNG.standard_normal((600, 400)).astype(np.float32) for _ in range(2)]
    fn(Tensor(a), Tensor(bs[0]))
    errors: list[float] = []

    def work(b: np.ndarray) -> None:
        for _ in range(20):
            got = fn(Tensor(a), Tensor(b)).numpy().astype(np.float64)
            errors.append(float(np.abs(got - a.astype(np.float64) @ b).max()))
    workers = [threading.Thread(target=work, args=(b,)) for b in bs]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert len(errors) == 40 and max(errors) < 1e-3


PINNED = """
import json, os, threading, numpy as np, fgrad
f = fgrad.jit(lambda x: (x * 2.0 + 1.0).exp(), backend="llvm")
f(fgrad.Tensor(np.ones(1 << 22, np.float32))).numpy()
found = {t.name: sorted(os.sched_getaffinity(t.native_id)) for t in threading.enumerate()
         if t.name.startswith("fgrad-llvm-")}
print(json.dumps([sorted(found.items()), sorted(os.sched_getaffinity(0))]))
"""


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="pinning needs Linux and two CPUs")
@pytest.mark.parametrize("pin", ["1", "0"])
def test_pool_workers_are_pinned(pin: str) -> None:
    env = {**os.environ, "FGRAD_PIN_THREADS": pin, "FGRAD_NUM_THREADS": "2",
           "FGRAD_CACHE_DIR": ""}
    out = subprocess.run([sys.executable, "-c", PINNED], env=env, capture_output=True,
                         text=True, check=True).stdout
    workers, caller = json.loads(out)
    cpus = sorted(os.sched_getaffinity(0))
    assert caller == cpus          # the calling thread is never pinned
    assert [name for name, _ in workers] == ["fgrad-llvm-1"]
    assert workers[0][1] == ([cpus[1]] if pin == "1" else cpus)
