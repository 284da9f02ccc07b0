"""Split gemms whose B operand all threads pack once before the rows (gemm/prepack.py),
and, where the tests ask for `split_mode`, those that claim row blocks (gemm/claimed.py).

References: NumPy matmul in float64. Shapes cover a B wider than one NC block (several jc
panels), a contraction deeper than KC with a short last slice, widths that are not a
multiple of the micro-kernel's NR, transposed operands, float64, a fused epilogue, and 1, 2
and 3 threads (the pool claims packing units and row chunks in any interleaving).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm import blas
from fgrad.lower.llvm.gemm.native import KC, NC, slice_depth
from fgrad.lower.llvm.gemm import prepack
from fgrad.lower.llvm.gemm.claimed import ClaimedPlan
from fgrad.lower.llvm.gemm.prepack import prepack_plan
from fgrad.lower.llvm.runtime import describe
from llvm_helpers import check_product, dot_eqn

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def shared_b(monkeypatch):
    """These tests cover the shared packed B (`prepack.ENABLED` True; the default claims
    row blocks: gemm/claimed.py)."""
    monkeypatch.setattr(prepack, "ENABLED", True)


@pytest.fixture(params=["shared", "claimed"])
def split_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The shared packed B, or claimed row blocks (gemm/claimed.py, the default)."""
    if request.param == "claimed":
        monkeypatch.setattr(prepack, "ENABLED", None)
    return request.param


SHAPES = [(256, 784, 512), (97, 300, NC + 37), (60, slice_depth(4) * 2 + 5, 200), (1000, 64, 257)]


@pytest.mark.parametrize("threads", ["1", "2", "3"])
@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("trans", [(False, False), (True, False), (False, True), (True, True)])
def test_prepacked_gemm_matches_numpy(monkeypatch: pytest.MonkeyPatch, split_mode: str,
                                      threads: str, m: int, k: int, n: int,
                                      trans: tuple[bool, bool]) -> None:
    monkeypatch.setenv("FGRAD_NUM_THREADS", threads)
    a = RNG.standard_normal((k, m) if trans[0] else (m, k)).astype(np.float32)
    b = RNG.standard_normal((n, k) if trans[1] else (k, n)).astype(np.float32)

    def mm(x: Tensor, y: Tensor) -> Tensor:
        return (x.T if trans[0] else x) @ (y.T if trans[1] else y)
    _, eqn = dot_eqn(mm, a, b)
    plan = prepack_plan(eqn)
    if split_mode == "shared":
        assert isinstance(plan, prepack.PrepackPlan) and plan.row_chunks >= 2
    else:
        assert isinstance(plan, ClaimedPlan) and plan.blocks >= 2
    want = (a.T if trans[0] else a).astype(np.float64) @ (b.T if trans[1] else b).astype(
        np.float64)
    check_product(fgrad.jit(mm, backend="llvm")(Tensor(a), Tensor(b)), want, k, np.float32)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_prepacked_float64_with_fused_epilogue(monkeypatch: pytest.MonkeyPatch,
                                               threads: str) -> None:
    monkeypatch.setenv("FGRAD_NUM_THREADS", threads)
    x = RNG.standard_normal((300, 513))
    w, bias = RNG.standard_normal((513, 130)), RNG.standard_normal(130)
    fn = fgrad.jit(lambda x, w, c: (x @ w + c).relu(), backend="llvm")
    text = fn.lower(Tensor(x), Tensor(w), Tensor(bias)).as_text()
    assert "B is packed once" in text and "one native call" in text
    want = np.maximum(x @ w + bias, 0.0)
    check_product(fn(Tensor(x), Tensor(w), Tensor(bias)), want, 513, np.float64)


def test_which_products_pack_b_once(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = np.ones((256, 784), np.float32), np.ones((784, 512), np.float32)
    closed, eqn = dot_eqn(lambda x, y: x @ y, a, b)
    plan = prepack_plan(eqn)
    assert plan is not None
    assert blas.gemm_chunking(eqn) == plan.chunking
    assert plan.units == -(-784 // slice_depth(4)) * -(-512 // 128)
    assert plan.rows_per * (plan.row_chunks - 1) < 256 <= plan.rows_per * plan.row_chunks
    assert "B is packed once in" in describe(closed.jaxpr)
    lhs, rhs = np.ones((4, 256, 784), np.float32), np.ones((4, 784, 512), np.float32)
    assert prepack_plan(dot_eqn(lambda x, y: x @ y, lhs, rhs)[1]) is None  # batched
    folded = prepack_plan(dot_eqn(lambda x, y: x @ y, lhs, b)[1])  # a shared B: 1024 rows
    assert folded is not None and folded.m == 1024
    small = np.ones((8, 8), np.float32)
    assert prepack_plan(dot_eqn(lambda x, y: x @ y, small, small)[1]) is None
    monkeypatch.setenv("FGRAD_GEMM", "openblas")
    assert prepack_plan(eqn) is None


def test_concurrent_calls_pack_their_own_b(split_mode: str) -> None:
    """Two Python threads calling the same program at once: each call has its own state
    line and packed block or counters (a shared block would mix the two B operands)."""
    import threading
    fn = fgrad.jit(lambda x, y: x @ y, backend="llvm")
    a = RNG.standard_normal((300, 200)).astype(np.float32)
    bs = [RNG.standard_normal((200, 400)).astype(np.float32) for _ in range(2)]
    fn(Tensor(a), Tensor(bs[0]))
    errors: list[float] = []

    def work(b: np.ndarray) -> None:
        for _ in range(20):
            got = fn(Tensor(a), Tensor(b)).numpy().astype(np.float64)
            want = a.astype(np.float64) @ b
            errors.append(float(np.abs(got - want).max()))
    threads = [threading.Thread(target=work, args=(b,)) for b in bs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 40 and max(errors) < 1e-3


def test_products_claim_row_blocks_by_default(monkeypatch):
    monkeypatch.setattr(prepack, "ENABLED", None)
    closed, eqn = dot_eqn(lambda a, b: a @ b, np.ones((256, 784), np.float32),
                           np.ones((784, 512), np.float32))
    assert isinstance(prepack_plan(eqn), ClaimedPlan)


@pytest.mark.parametrize("l1,l2,size,depth", [
    (48 << 10, 2 << 20, 4, KC),      # a Xeon's 48 KiB L1d holds the 32 KiB float32 sliver
    (32 << 10, 1 << 20, 4, 1024),    # Zen 4: the sliver streams from L2; 144 x 1024 x 4 fits
    (32 << 10, 1 << 20, 8, 512),     # float64: 144 x 1024 x 8 would not fit 3/4 of L2
    (32 << 10, 256 << 10, 4, KC),    # a small L2 keeps KC
    (None, None, 4, KC),             # unknown caches keep KC
])
def test_slice_depth_follows_the_caches(monkeypatch, l1, l2, size, depth):
    from fgrad.lower.kernel import streaming
    from fgrad.lower.llvm import target
    monkeypatch.setattr(target, "vector_bits", lambda: 512)
    monkeypatch.setattr(streaming, "cache_bytes", lambda level=None: {1: l1, 2: l2}[level])
    assert slice_depth.__wrapped__(size) == depth
    assert slice_depth.__wrapped__(size, image=True) == KC     # the conv pack's stack arrays
    assert slice_depth.__wrapped__(size, pairs=True) == KC



@pytest.mark.parametrize("m", [256, 1000, 1024, 2048, 37])
def test_row_chunks_share_the_tiles_evenly(m: int) -> None:
    """Chunks cover the rows in order, differ by at most one MR tile, the larger first, and
    come in a multiple of the threads, so chunks claimed in turn give each thread as many
    tiles as the others, within one."""
    a, b = np.ones((m, 784), np.float32), np.ones((784, 512), np.float32)
    plan = prepack_plan(dot_eqn(lambda x, y: x @ y, a, b)[1])
    if plan is None:
        return
    if not isinstance(plan, prepack.PrepackPlan):
        pytest.skip("this host claims row blocks per panel (gemm/claimed.py)")
    bounds = [plan.chunk_rows(c) for c in range(plan.row_chunks)]
    assert bounds[0][0] == 0 and bounds[-1][1] == m
    assert all(hi == lo for (_, hi), (lo, _) in zip(bounds, bounds[1:]))
    tiles = [-(-(hi - lo) // plan.tile_rows) for lo, hi in bounds]
    assert max(tiles) - min(tiles) <= 1 and tiles == sorted(tiles, reverse=True)
    assert max(hi - lo for lo, hi in bounds) <= plan.rows_per
    threads = max(2, os.cpu_count() or 1)
    if plan.row_chunks < -(-m // plan.tile_rows):
        assert plan.row_chunks % threads == 0
    turns = [sum(tiles[t::threads]) for t in range(threads)]
    assert max(turns) - min(turns) <= 1
