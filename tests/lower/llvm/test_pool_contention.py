"""The native pool sees contention and makes its workers spin short (fgrad/lower/llvm/pool.py):
beside as many busy processes as the machine has cores, a split product's threads are
preempted, the pool records a deadline, and results stay right."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm import pool
from fgrad.lower.llvm.threads import POOL

pytestmark = pytest.mark.skipif(not isinstance(POOL, pool.NativePool),
                                reason="the native pool runs on x86-64 Linux")


def test_busy_neighbours_set_the_contention_deadline() -> None:
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((256, 256)).astype(np.float32) for _ in range(2))
    f = fgrad.jit(lambda x, y: x @ y, backend="llvm")
    want = a.astype(np.float64) @ b
    f(Tensor(a), Tensor(b))
    before = POOL.contended_until()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(os.cpu_count() or 2)]
    try:
        deadline = time.monotonic() + 20
        while POOL.contended_until() == before and time.monotonic() < deadline:
            got = f(Tensor(a), Tensor(b)).numpy()
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    assert POOL.contended_until() > before
