"""W1 micro benchmark: tanh(x*1.5+0.5)*sigmoid(x)+exp(-x*x) on 2**24 float32 values.

Prints the median of 5 runs for fgrad's llvm jit backend and for NumPy, and their ratio.
Run: python bench/bench_llvm_w1.py [log2 size]
"""
from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

import fgrad
from fgrad import Tensor


def w1(x: Tensor) -> Tensor:
    """The W1 elementwise chain (one fused kernel under the llvm backend)."""
    return (x * 1.5 + 0.5).tanh() * x.sigmoid() + (-x * x).exp()


def w1_numpy(x: np.ndarray) -> np.ndarray:
    """The same chain in NumPy."""
    return np.tanh(x * 1.5 + 0.5) * (1 / (1 + np.exp(-x))) + np.exp(-x * x)


def median_seconds(fn: Callable[[], object], repeats: int = 5) -> float:
    """Median wall time of `repeats` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    """Measure and print."""
    n = 1 << int(sys.argv[1] if len(sys.argv) > 1 else 24)
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    jitted = fgrad.jit(w1, backend="llvm")
    xt = Tensor(x)
    start = time.perf_counter()
    out = jitted(xt).numpy()
    first = time.perf_counter() - start
    err = float(np.max(np.abs(out - w1_numpy(x))))
    t_llvm = median_seconds(lambda: jitted(xt))
    t_numpy = median_seconds(lambda: w1_numpy(x))
    print(f"W1, {n} float32 values (max abs diff vs NumPy {err:.2e})")
    print(f"  first call (trace + compile + run): {first * 1e3:8.1f} ms")
    print(f"  fgrad llvm : {t_llvm * 1e3:8.2f} ms")
    print(f"  numpy      : {t_numpy * 1e3:8.2f} ms")
    print(f"  speedup vs numpy: {t_numpy / t_llvm:.2f}x")


if __name__ == "__main__":
    main()
