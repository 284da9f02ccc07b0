"""Split gemms whose threads claim row blocks per B panel (gemm/claimed.py), and the pool's
pinned workers (products over every shape and transpose, and concurrent calls: in
test_gemm_prepack.py's `split_mode` tests).

References: NumPy matmul in float64. Here: a contraction of four slices, float32 and
float64, fused epilogues (in registers and as a kernel on rows) with six threads on this
machine's CPUs (preempted threads hold blocks, so others set aside the blocks whose slice
before is not stored yet), bfloat16 pairs (AMX), the plans, and pinning.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm import blas
from fgrad.lower.llvm.gemm import claimed, prepack
from fgrad.lower.llvm.gemm.claimed import ClaimedPlan, claimed_plan
from fgrad.lower.llvm.gemm.native import KC, NC, slice_depth
from fgrad.lower.llvm.gemm.pairs import host_has_pairs
from fgrad.lower.llvm.gemm.prepack import prepack_plan
from fgrad.lower.llvm.runtime import describe
from llvm_helpers import check_product, dot_eqn

RNG = np.random.default_rng(17)


@pytest.fixture(autouse=True)
def claimed_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests cover claimed blocks (the default)."""
    monkeypatch.setattr(prepack, "ENABLED", None)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_oversubscribed_threads_defer_blocks(monkeypatch: pytest.MonkeyPatch,
                                             dtype: type) -> None:
    """Six parts on this machine's CPUs: threads are preempted inside blocks, so the others
    meet blocks whose previous slice is not stored yet (they defer them, or wait)."""
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    monkeypatch.setenv("FGRAD_NUM_THREADS", "6")
    depth = slice_depth(np.dtype(dtype).itemsize) * 3 + 7     # three slices and a short one
    x = RNG.standard_normal((600, depth)).astype(dtype)
    w = RNG.standard_normal((depth, 300)).astype(dtype)
    bias = RNG.standard_normal(300).astype(dtype)
    relu = fgrad.jit(lambda x, w, c: (x @ w + c).relu(), backend="llvm")
    tanh = fgrad.jit(lambda x, w: (x @ w).tanh() * 2.0, backend="llvm")
    plan = prepack_plan(dot_eqn(lambda x, y: x @ y, x, w)[1])
    assert isinstance(plan, ClaimedPlan) and plan.threads == 6 and plan.panels == 4
    product = x.astype(np.float64) @ w
    for _ in range(10):
        check_product(relu(Tensor(x), Tensor(w), Tensor(bias)), np.maximum(product + bias, 0),
               x.shape[1], dtype)
        check_product(tanh(Tensor(x), Tensor(w)), np.tanh(product) * 2.0, x.shape[1], dtype)


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
    closed, eqn = dot_eqn(lambda x, y: x @ y, a, b)
    plan = prepack_plan(eqn)
    assert isinstance(plan, ClaimedPlan)
    assert blas.gemm_chunking(eqn) == plan.chunking == (plan.threads, 1, plan.threads)
    assert plan.rows_per % 12 == 0 or plan.rows_per % 6 == 0     # whole MR tiles
    assert plan.rows_per * (plan.blocks - 1) < 256 <= plan.rows_per * plan.blocks
    assert plan.panels == -(-784 // slice_depth(4))
    assert plan.scratch_elems == plan.panels * 8 + plan.blocks
    assert "claimed per B panel" in describe(closed.jaxpr)
    lhs, rhs = np.ones((4, 256, 784), np.float32), np.ones((4, 784, 512), np.float32)
    assert prepack_plan(dot_eqn(lambda x, y: x @ y, lhs, rhs)[1]) is None  # batched
    small = np.ones((8, 8), np.float32)
    assert prepack_plan(dot_eqn(lambda x, y: x @ y, small, small)[1]) is None
    wide = claimed_plan(2048, 2 * NC + 1, 3 * KC, 12, 2 * (2 * NC + 1) * 3 * KC, 1 << 21)
    assert wide is not None and wide.panels == 3 * 3 and wide.rows_per <= 144


@pytest.mark.parametrize("m", [256, 1000, 1024, 2048, 100])
def test_block_counts_come_in_multiples_of_the_threads(m: int) -> None:
    """Blocks claimed in turn give each thread the same share of the MR tiles, within one
    (the driver shares the tiles evenly among the blocks, larger ones first:
    `claimed.block_rows`)."""
    plan = claimed_plan(m, 512, 784, 12, 2 * 512 * 784, 1 << 21)
    assert plan is not None
    tiles, threads = -(-m // 12), plan.threads
    assert plan.rows_per % 12 == 0 and plan.blocks == -(-m // plan.rows_per)
    assert -(-tiles // plan.blocks) * 12 == plan.rows_per     # the largest block
    q, r = divmod(tiles, plan.blocks)
    sizes = [q + (i < r) for i in range(plan.blocks)]
    turns = [sum(sizes[t::threads]) for t in range(threads)]
    assert max(turns) - min(turns) <= 1


def test_switched_off_keeps_the_plain_split(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(claimed, "ENABLED", False)
    eqn = dot_eqn(lambda x, y: x @ y, np.ones((256, 784), np.float32),
                   np.ones((784, 512), np.float32))[1]
    assert prepack_plan(eqn) is None and blas.gemm_chunking(eqn)[0] >= 2


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
    if pin == "1":   # its own CPU, or the caller's usual one while the caller is on its own
        assert workers[0][1] in ([cpus[1]], [cpus[0]])   # (pool._Builder._follow_caller)
    else:
        assert workers[0][1] == cpus
