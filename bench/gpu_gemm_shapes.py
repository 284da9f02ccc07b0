"""Times the OpenCL matmul's GPU form at a few tile shapes (work-group side, outputs per
work-item, k slab) on the default OpenCL device, checked against NumPy: the data behind
the shape `gemm.gpu_shape` picks (docs/opencl_gpu.md).

    python bench/gpu_gemm_shapes.py            # n = 1024 and 2048, float32
    python bench/gpu_gemm_shapes.py 128        # other sizes (a smoke run on a CPU device)
"""
from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import fgrad
from fgrad import Tensor
from fgrad.lower.opencl import device as opencl_device
from fgrad.lower.opencl import gemm
from fgrad.lower.opencl.device import CLArray
from fgrad.lower.opencl.runtime import OpenCLExecutable, plan
from fgrad.transforms.jit_prim import open_jaxpr

SHAPES = [(16, 4, 16), (16, 8, 16), (16, 8, 8), (8, 8, 16), (16, 4, 32)]


def time_shape(shape: gemm.GpuShape, n: int, repeats: int = 20) -> tuple[float, float]:
    """(median ms per product, max relative error against NumPy) with `shape` forced."""
    original = gemm.gpu_shape
    gemm.gpu_shape = lambda *args: shape
    try:
        rng = np.random.default_rng(n)
        a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
        jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda x, y: x @ y)(Tensor(a), Tensor(b)))
        exe = OpenCLExecutable(plan(jaxpr), gemm_variant="gpu")
    finally:
        gemm.gpu_shape = original
    dev = opencl_device.get_device()
    xs = [CLArray.from_numpy(a, dev.name), CLArray.from_numpy(b, dev.name)]
    (out,) = exe(*xs)
    want = a.astype(np.float64) @ b
    err = float(np.abs(out.numpy() - want).max() / np.abs(want).max())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        exe(*xs)[0].block_until_ready()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), err


def main() -> None:
    """Print one line per (shape, n): ms, GFLOP/s and the error."""
    sizes = [int(a) for a in sys.argv[1:]] or [1024, 2048]
    print("device:", opencl_device.get_device().describe())
    for side, work, tk in SHAPES:
        shape = gemm.GpuShape(side, work, tk)
        for n in sizes:
            ms, err = time_shape(shape, n, 20 if n >= 1024 else 3)
            print(f"side {side:2d} work {work} tk {tk:2d}  n={n}: {ms:8.3f} ms "
                  f"{2 * n**3 / ms / 1e6:9.1f} GFLOP/s  rel.err {err:.1e}")


if __name__ == "__main__":
    main()
