"""Large gemms split by output rows over fgrad's pool, with SciPy's OpenBLAS on one thread.

References: NumPy matmul/einsum. Results with 1, 2 and 3 threads must agree with NumPy;
the chunk boundaries (rows per chunk, batch entries a chunk spans) are forced small so that
chunks cut through batch entries.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.kernel.program import Segment
from fgrad.lower.llvm import blas as gemm_split
from fgrad.lower.llvm.runtime import compile_llvm, describe, plan
from fgrad.lower.llvm.threads import POOL, segment_parts
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(7)
TOL = {np.float32: 3e-5, np.float64: 1e-12}


def jaxpr_of(fn: Any, *arrays: np.ndarray) -> Any:
    """The opened jaxpr of fn traced at `arrays`."""
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(*[Tensor(a) for a in arrays]))
    return jaxpr


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Split every gemm of at least 4096 flops, in chunks of 3 rows or more (not aligned)."""
    monkeypatch.setattr(gemm_split, "MIN_SPLIT_FLOPS", 4096)
    monkeypatch.setattr(gemm_split, "MIN_CHUNK_FLOPS", 1)
    monkeypatch.setattr(gemm_split, "ROW_ALIGN", 3)


CASES = [
    ("ab,bc->ac", (37, 19), (19, 23), lambda x, y: x @ y),
    ("ba,bc->ac", (19, 37), (19, 23), lambda x, y: x.T @ y),       # lhs read transposed
    ("ab,cb->ac", (37, 19), (23, 19), lambda x, y: x @ y.T),
    ("ba,cb->ac", (19, 37), (23, 19), lambda x, y: x.T @ y.T),
    ("zab,zbc->zac", (5, 7, 11), (5, 11, 13), lambda x, y: x @ y),  # chunks span entries
    ("zba,zbc->zac", (5, 11, 7), (5, 11, 13), lambda x, y: x.transpose(1, 2) @ y),
    ("uzab,zbc->uzac", (2, 1, 9, 8), (3, 8, 6), lambda x, y: x @ y),  # broadcast batch
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("formula,xs,ys,fn", CASES)
def test_split_gemm_matches_numpy_on_one_and_more_threads(
        formula: str, xs: tuple[int, ...], ys: tuple[int, ...], fn: Any, dtype: Any,
        small_chunks: None, monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = RNG.standard_normal(xs).astype(dtype), RNG.standard_normal(ys).astype(dtype)
    want = np.einsum(formula, x, y)
    if formula.startswith("uzab"):
        want = np.matmul(x, y)
    jaxpr = jaxpr_of(fn, x, y)
    assert gemm_split.library_chunking(plan(jaxpr).library_calls), "the gemm must split"
    for threads in (1, 2, 3):
        monkeypatch.setenv("FGRAD_NUM_THREADS", str(threads))
        runs = POOL.runs
        (got,) = compile_llvm(jaxpr)(x, y)
        assert (POOL.runs > runs) == (threads > 1)
        np.testing.assert_allclose(np.asarray(got), want, rtol=TOL[dtype], atol=TOL[dtype])


def test_large_gemm_shares_a_parallel_part_and_is_described(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FGRAD_NUM_THREADS", "2")
    x, w = RNG.standard_normal((256, 128)), RNG.standard_normal((128, 96))
    jaxpr = jaxpr_of(lambda x, w: (x @ w).tanh(), x, w)
    program = plan(jaxpr)
    (seg,) = [a for a in program.actions if isinstance(a, Segment)]
    assert any(p.parallel for p in segment_parts(program, seg))
    assert "over 256 rows" in describe(jaxpr)
    (got,) = compile_llvm(jaxpr)(x, w)
    np.testing.assert_allclose(np.asarray(got), np.tanh(x @ w), rtol=1e-12, atol=1e-12)


def test_small_gemm_stays_whole() -> None:
    x, w = RNG.standard_normal((8, 8)), RNG.standard_normal((8, 8))
    program = plan(jaxpr_of(lambda a, b: a @ b, x, w))
    assert program.library_calls and gemm_split.library_chunking(program.library_calls) == {}


def test_openblas_runs_on_one_thread_after_a_jitted_gemm() -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    fgrad.jit(lambda a: a @ a, backend="llvm")(Tensor(x)).numpy()
    assert gemm_split.single_threaded_blas()
    pools = [p for p in threadpoolctl.threadpool_info()
             if p.get("internal_api") == "openblas" and "scipy.libs" in p.get("filepath", "")]
    assert pools and all(p["num_threads"] == 1 for p in pools), pools
