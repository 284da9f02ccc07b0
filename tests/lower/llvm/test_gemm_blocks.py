"""The GEMM's packing blocks are kept between calls (fgrad/lower/llvm/gemm/scratch.py):
products of growing and shrinking sizes stay right, a warm call takes no page faults for
its packing buffers, concurrent calls never share a block, and `fgrad.clear_caches()` frees
the cached ones."""
from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm.gemm import scratch

RNG = np.random.default_rng(11)


def _product(m: int, k: int, n: int) -> tuple[Tensor, Tensor, np.ndarray]:
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    return Tensor(a), Tensor(b), a.astype(np.float64) @ b


def test_sizes_up_and_down_reuse_or_replace_blocks() -> None:
    f = fgrad.jit(lambda x, y: x @ y, backend="llvm")
    for m, k, n in [(64, 64, 64), (512, 300, 520), (7, 1000, 31), (1000, 257, 64),
                    (31, 7, 1), (512, 300, 520)]:
        a, b, want = _product(m, k, n)
        np.testing.assert_allclose(f(a, b).numpy(), want, rtol=1e-4, atol=1e-3)
    assert 1 <= scratch.cached_blocks() <= scratch.BLOCK_SLOTS


def test_clear_caches_frees_the_cached_blocks() -> None:
    a, b, want = _product(300, 300, 300)
    f = fgrad.jit(lambda x, y: x @ y, backend="llvm")
    f(a, b)
    assert scratch.cached_blocks() >= 1
    fgrad.clear_caches()
    assert scratch.cached_blocks() == 0
    np.testing.assert_allclose(f(a, b).numpy(), want, rtol=1e-4, atol=1e-3)
    assert scratch.cached_blocks() >= 1


FAULTS = """
import resource, numpy as np, fgrad
rng = np.random.default_rng(0)
a, b = (fgrad.Tensor(rng.standard_normal((512, 512)).astype(np.float32)) for _ in range(2))
f = fgrad.jit(lambda x, y: x @ y, backend="llvm")
for _ in range(2):
    out = f(a, b)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    out = f(a, b)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_minflt: Linux")
def test_a_warm_product_takes_no_page_faults_for_its_packing() -> None:
    """512^3 packs a 1 MiB B panel (256 pages) per thread: freed after each call, it was
    mapped again and faulted in on the next calls. Run in a fresh process: page faults
    are counted per process, and a test worker's background compiles take some."""
    import subprocess
    done = subprocess.run([sys.executable, "-c", FAULTS], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "FGRAD_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr
    faults = int(done.stdout.split()[-1])
    assert faults < 64, faults


def test_concurrent_products_never_share_a_block() -> None:
    f = fgrad.jit(lambda x, y: x @ y, backend="llvm")
    problems = [_product(m, k, n) for m, k, n in [(400, 300, 200), (200, 500, 300),
                                                  (333, 129, 257)]]
    errors: list[str] = []

    def work(case: tuple[Tensor, Tensor, np.ndarray]) -> None:
        a, b, want = case
        for _ in range(15):
            got = f(a, b).numpy()
            if not np.allclose(got, want, rtol=1e-4, atol=1e-3):
                errors.append(f"{a.shape} x {b.shape}")
    threads = [threading.Thread(target=work, args=(p,)) for p in problems]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
