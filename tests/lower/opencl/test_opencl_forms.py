"""Which OpenCL form a program's kernels take: a reduction that keeps the contiguous axis
(a bias gradient: column sums) runs in parallel over the kept columns, even when it also
writes an elementwise output, never as the one-work-item serial loop (on a GPU that loop
took 6 ms of a 13 ms training step)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyopencl")

import fgrad
from fgrad import Tensor
from fgrad.lower.opencl import device as opencl_device
from fgrad.lower.opencl.runtime import OpenCLExecutable, plan
from fgrad.transforms.jit_prim import open_jaxpr

pytestmark = pytest.mark.opencl


def _relu_backward(a: Tensor, b: Tensor, x: Tensor, w: Tensor) -> tuple[Tensor, Tensor]:
    g = (a + b <= 0).where(0.0, (w @ x).T)  # the product is computed swapped: the schedule
    # rewrites the program, so its values are named apart from how the jaxpr prints them
    return g, g.sum(0)


def test_column_sums_with_a_side_output_run_in_parallel() -> None:
    rng = np.random.default_rng(5)
    a = rng.standard_normal((256, 512)).astype(np.float32)
    b = rng.standard_normal(512).astype(np.float32)
    w, x = (rng.standard_normal(s).astype(np.float32) for s in ((512, 64), (64, 256)))
    args = (a, b, x, w)
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(_relu_backward)(*map(Tensor, args)))
    exe = OpenCLExecutable(plan(jaxpr))
    forms = [r.form for r in exe.rendered(opencl_device.get_device())]
    assert forms[0] == "reduce" and len(forms) == 2  # the kernel, then the matmul
    g, s = (o.numpy() for o in exe(*args))
    want = np.where(a + b <= 0, 0, (w.astype(np.float64) @ x).T)
    np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(s, want.sum(0), rtol=1e-4, atol=1e-3)


def test_a_scatter_of_single_elements_copies_with_a_whole_work_group() -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal(2560).astype(np.float32)
    idx = rng.integers(0, 2560, 256).astype(np.int32)
    idx[:8] = 7  # repeated positions: the updates must apply in order, each one
    wts = rng.standard_normal(256).astype(np.float32)

    def grad_of_gather(x: Tensor, i: Tensor, w: Tensor) -> Tensor:
        return fgrad.grad(lambda t: (t[i] * w).sum())(x)
    args = (x, idx, wts)
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(grad_of_gather)(*map(Tensor, args)))
    exe = OpenCLExecutable(plan(jaxpr))
    rendered = exe.rendered(opencl_device.get_device())
    scatter = next(r for r in rendered if r.form == "columns")
    assert scatter.launch.local_size[0] > 1 and "barrier(CLK_GLOBAL_MEM_FENCE)" in scatter.source
    (got,) = (o.numpy() for o in exe(*args))
    want = np.zeros(2560, np.float64)
    np.add.at(want, idx, wts)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
