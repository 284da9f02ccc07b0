"""The OpenCL matmul (opencl/gemm.py) against NumPy, in both forms (the CPU register-blocked
one and the GPU tiled one, forced on whatever device runs the tests): shapes with edges in
every direction, every transpose combination, batches (broadcast ones too), float32 and
float64, padded leading dimensions, a batch stride of 0, and no writes (or reads that
reach a result) outside the operands."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyopencl")

import pyopencl as cl

import fgrad
from fgrad import Tensor
from fgrad.lower.opencl import device as opencl_device
from fgrad.lower.opencl import runtime as opencl_runtime
from fgrad.lower.opencl.gemm import (GPU_PRIVATE_BYTES, GemmTarget, cpu_shape, gemm_target,
                                    gpu_shape, render_gemm)
from fgrad.lower.opencl.gemm_cpu import CpuShape
from fgrad.lower.opencl.render import program_source
from fgrad.lower.opencl.runtime import OpenCLExecutable, plan
from fgrad.lower.schedule.gemm_layout import GemmDims, MatrixView
from fgrad.transforms.jit_prim import open_jaxpr

pytestmark = pytest.mark.opencl  # skipped without a working device, an error in CI

VARIANTS = ["cpu", "gpu"]
DTYPES = [np.float32, np.float64]
# (m, n, k): each of 1, 7, 31, 64, 257, 1000 in each place, edges of every block size
SHAPES = [(1, 1, 1), (7, 31, 64), (31, 7, 257), (64, 257, 7), (257, 64, 31), (1000, 7, 31),
          (7, 1000, 64), (31, 64, 1000), (1, 257, 1000), (257, 1, 64), (64, 64, 64)]


def _tol(dtype: Any, k: int) -> dict[str, float]:
    eps = 1e-6 if dtype == np.float32 else 1e-14
    return {"rtol": 50 * eps * max(1, k) ** 0.5, "atol": 50 * eps * max(1, k) ** 0.5}


def _run(fn: Callable[..., Any], variant: str, *arrays: np.ndarray) -> list[np.ndarray]:
    """`fn` compiled for the opencl backend with the matmul form forced to `variant`."""
    jaxpr, consts = open_jaxpr(fgrad.make_jaxpr(fn)(*[Tensor(a) for a in arrays]))
    assert not consts
    program = plan(jaxpr)
    assert program.library_calls, "the matmul should be a library call"
    exe = OpenCLExecutable(program, gemm_variant=variant)
    return [o.numpy() for o in exe(*arrays)]


def _data(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_transpose_combination(variant: str, dtype: Any,
                                     shape: tuple[int, int, int]) -> None:
    m, n, k = shape
    rng = np.random.default_rng(m * 7919 + n * 31 + k)
    a, at = _data(rng, (m, k), dtype), _data(rng, (k, m), dtype)
    b, bt = _data(rng, (k, n), dtype), _data(rng, (n, k), dtype)
    got = _run(lambda p, pt, q, qt: (p @ q, pt.T @ q, p @ qt.T, pt.T @ qt.T), variant,
               a, at, b, bt)
    wants = (a @ b, at.T @ b, a @ bt.T, at.T @ bt.T)
    for g, want in zip(got, wants, strict=True):
        assert g.dtype == dtype and g.shape == (m, n)
        np.testing.assert_allclose(g, want, **_tol(dtype, k))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_and_broadcast_batches(variant: str, dtype: Any) -> None:
    rng = np.random.default_rng(3)
    x, y = _data(rng, (2, 3, 31, 9), dtype), _data(rng, (2, 3, 9, 20), dtype)
    yt = _data(rng, (2, 3, 20, 9), dtype)
    w, w1 = _data(rng, (9, 20), dtype), _data(rng, (1, 9, 20), dtype)
    flat = x.reshape(6, 31, 9)
    got = _run(lambda p, q, qt, r, r1, f: (p @ q, p @ qt.permute(0, 1, 3, 2), f @ r,
                                           f @ r1, f.permute(0, 2, 1).permute(0, 2, 1)
                                           @ r),
               variant, x, y, yt, w, w1, flat)
    wants = (x @ y, x @ yt.transpose(0, 1, 3, 2), flat @ w, flat @ w1, flat @ w)
    for g, want in zip(got, wants, strict=True):
        np.testing.assert_allclose(g, want, **_tol(dtype, 9))


@pytest.mark.parametrize("variant", VARIANTS)
def test_empty_contraction_and_empty_outputs(variant: str) -> None:
    a, b = np.ones((5, 0), np.float32), np.ones((0, 9), np.float32)
    got = _run(lambda p, q: (p @ q, p[:0] @ q), variant, a, b)
    np.testing.assert_array_equal(got[0], np.zeros((5, 9), np.float32))
    assert got[1].shape == (0, 9)


def _padded(dev: opencl_device.CLDevice, flat: np.ndarray, pad: int) -> Any:
    """A device buffer holding NaN, `flat`, NaN (`pad` NaNs each side), and the offset."""
    host = np.concatenate([np.full(pad, np.nan, flat.dtype), flat,
                           np.full(pad, np.nan, flat.dtype)])
    return cl.Buffer(dev.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                     hostbuf=host), host


def _operand(rng: np.random.Generator, batch: int, rows: int, cols: int, view: MatrixView,
             dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """Storage for `view` (leading dimension and batch stride as given) and its logical
    (batch, rows, cols) matrices."""
    store_rows, store_cols = (cols, rows) if view.trans else (rows, cols)
    stride = view.batch_strides[0]
    size = (batch - 1) * stride + (store_rows - 1) * view.ld + store_cols
    flat = np.full(size, np.nan, dtype)
    mats = _data(rng, (batch, rows, cols), dtype)
    if stride == 0:
        mats[:] = mats[0]
    for bi in range(batch):
        stored = mats[bi].T if view.trans else mats[bi]
        for r in range(store_rows):
            at = bi * stride + r * view.ld
            flat[at:at + store_cols] = stored[r]
    return flat, mats


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("trans", [(False, False), (True, False), (False, True), (True, True)])
def test_views_with_padding_and_stride_zero_stay_in_bounds(variant: str,
                                                           trans: tuple[bool, bool]) -> None:
    """Leading dimensions wider than the matrices (their gaps hold NaN), a broadcast batch
    (stride 0), NaN around every operand, and a sentinel around the output: a read outside
    the matrices would turn a result into NaN, a write outside would touch the sentinel."""
    dev = opencl_device.get_device()
    rng = np.random.default_rng(11)
    batch, m, n, k, dtype = 3, 13, 21, 19, np.float32
    lv = MatrixView(trans[0], (m if trans[0] else k) + 3, ((k + 3) * (m + 3),))
    rv = MatrixView(trans[1], (k if trans[1] else n) + 5, (0,))
    lflat, lm = _operand(rng, batch, m, k, lv, dtype)
    rflat, rm = _operand(rng, batch, k, n, rv, dtype)
    d = GemmDims((batch,), m, n, k, lv, rv)
    r = render_gemm("gtest", d, False, gemm_target(dev, variant))
    kernel = getattr(dev.program(program_source([r])), "gtest")
    pad = 64
    lbuf, _ = _padded(dev, lflat, pad)
    rbuf, _ = _padded(dev, rflat, pad)
    obuf, ohost = _padded(dev, np.full(batch * m * n, 7.0, dtype), pad)
    sub = {x: x.get_sub_region(pad * 4, x.size - 2 * pad * 4) for x in (lbuf, rbuf, obuf)}
    kernel(dev.queue, r.launch.global_size, r.launch.local_size, sub[obuf], sub[lbuf],
           sub[rbuf])
    cl.enqueue_copy(dev.queue, ohost, obuf, is_blocking=True)
    assert np.isnan(ohost[:pad]).all() and np.isnan(ohost[-pad:]).all()
    np.testing.assert_allclose(ohost[pad:-pad].reshape(batch, m, n), lm @ rm, rtol=1e-5,
                               atol=1e-5)


def test_forms_follow_the_device() -> None:
    dev = opencl_device.get_device()
    target = gemm_target(dev)
    assert target.cpu == dev.is_cpu
    d = GemmDims((), 40, 40, 40, MatrixView(False, 40, ()), MatrixView(True, 40, ()))
    cpu, gpu = render_gemm("g", d, False, gemm_target(dev, "cpu")), render_gemm(
        "g", d, False, gemm_target(dev, "gpu"))
    assert "__local" not in cpu.source and "barrier" not in cpu.source
    assert cpu.form == "gemm-cpu" and gpu.form == "gemm"
    assert "__local float" in gpu.source and "barrier(CLK_LOCAL_MEM_FENCE)" in gpu.source
    assert render_gemm("g", d, False).form == "gemm"  # no target: a generic GPU
    with pytest.raises(ValueError, match="variant"):
        gemm_target(dev, "tpu")


def test_gpu_sizes_fit_the_device_limits() -> None:
    assert gpu_shape(GemmTarget(), 4).block == 64
    small = gpu_shape(GemmTarget(max_group=64, local_mem=4096), 8)
    assert small.side == 8 and (small.block * (small.tk + 1) + small.tk * (small.block + 1)) \
        * 8 <= 4096
    assert gpu_shape(GemmTarget(max_group=1, local_mem=64), 4).side == 1


def test_cpu_form_sized_for_a_gpus_private_memory() -> None:
    for double, itemsize in ((False, 4), (True, 8)):
        target = GemmTarget(cpu=True, vector_width=(1, 1), private_limit=GPU_PRIVATE_BYTES)
        assert cpu_shape(target, double).private_bytes(itemsize) <= GPU_PRIVATE_BYTES
    assert cpu_shape(GemmTarget(cpu=True), False) == CpuShape(vec=8)  # a CPU: full slabs


@pytest.mark.parametrize("dtype", DTYPES)
def test_cpu_form_with_gpu_sized_slabs_matches_numpy(dtype: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def small_slabs(dev: Any, variant: str | None = None) -> GemmTarget:
        return dataclasses.replace(gemm_target(dev, variant), private_limit=GPU_PRIVATE_BYTES)
    monkeypatch.setattr(opencl_runtime, "gemm_target", small_slabs)
    rng = np.random.default_rng(11)
    a, at = _data(rng, (31, 1000), dtype), _data(rng, (1000, 31), dtype)
    b, bt = _data(rng, (1000, 64), dtype), _data(rng, (64, 1000), dtype)
    got = _run(lambda p, pt, q, qt: (p @ q, pt.T @ qt.T), "cpu", a, at, b, bt)
    for g, want in zip(got, (a @ b, at.T @ bt.T), strict=True):
        np.testing.assert_allclose(g, want, **_tol(dtype, 1000))


def test_gpu_tile_grows_only_while_every_compute_unit_has_a_group() -> None:
    h100 = GemmTarget(max_group=1024, local_mem=49152, compute_units=132)

    def square(n: int) -> GemmDims:
        return GemmDims((), n, n, n, MatrixView(False, n, ()), MatrixView(False, n, ()))
    assert gpu_shape(h100, 4, square(2048)).work == 8  # 256 groups of 128 x 128
    assert gpu_shape(h100, 4, square(1024)).work == 4  # 64 groups would idle 68 units
    assert gpu_shape(GemmTarget(), 4, square(4096)).work == 4  # units unknown
