"""Row pipelining (kernel/row_pipeline.py): a large row kernel reads the next row's first
phase inside this row's second. Checked in the kernel's LLVM IR and against NumPy, over
thread chunks, odd row counts, masks and two inputs in the first phase."""
import dataclasses

import numpy as np
import pytest
from llvmlite import ir

import fgrad
from fgrad import Tensor
from fgrad.lower.kernel.row_pipeline import row_pipeline
from fgrad.lower.llvm.kernels.render import render_kernel
from fgrad.lower.llvm.runtime import plan
from fgrad.transforms.jit_prim import open_jaxpr


def _np_softmax(a):
    e = np.exp(a - a.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _np_log_softmax(a):
    m = a.max(-1, keepdims=True)
    return a - m - np.log(np.exp(a - m).sum(-1, keepdims=True))


def _np_layernorm(a):
    c = a - a.mean(-1, keepdims=True)
    return c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-5)


CASES = {
    "softmax": (lambda x: x.softmax(-1), _np_softmax),
    "log_softmax": (lambda x: x.log_softmax(-1), _np_log_softmax),
    "layernorm": (lambda x: x.layernorm(-1, eps=1e-5), _np_layernorm),
}


def _kernels(fn, *args):
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(*map(Tensor, args)))
    return plan(jaxpr).kernels


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("shape,dtype", [((1037, 300), np.float32), ((41, 8192), np.float32),
                                         ((515, 260), np.float64)])
def test_large_row_kernels_pipeline_and_match_numpy(name, shape, dtype):
    fn, ref = CASES[name]
    a = (np.random.default_rng(1).standard_normal(shape) * 4).astype(dtype)
    (kernel,) = _kernels(fn, a)
    assert row_pipeline(kernel) is not None
    text = str(render_kernel(ir.Module(), kernel))
    assert ".next\" = alloca" in text       # the next row's accumulator
    out = fgrad.jit(fn)(Tensor(a)).numpy()
    tol = 2e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, ref(a), rtol=tol, atol=tol)


def test_first_phase_with_two_inputs_and_a_mask():
    """max(pad(x) + b) per row: the next row's phase reads two buffers, under a predicate."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((777, 400)).astype(np.float32)
    b = rng.standard_normal(402).astype(np.float32)

    def fn(x, b):
        return (x.pad(((0, 0), (1, 1))) + b).softmax(-1)
    (kernel,) = _kernels(fn, x, b)
    assert row_pipeline(kernel) is not None
    out = fgrad.jit(fn)(Tensor(x), Tensor(b)).numpy()
    np.testing.assert_allclose(out, _np_softmax(np.pad(x, ((0, 0), (1, 1))) + b), rtol=2e-5,
                               atol=1e-7)


def test_small_or_short_rows_are_not_pipelined():
    for shape in [(64, 300), (4096, 64)]:   # 75 KiB in all; rows of 64 elements
        a = np.ones(shape, np.float32)
        (kernel,) = _kernels(CASES["softmax"][0], a)
        assert row_pipeline(kernel) is None
        assert ".next\" = alloca" not in str(render_kernel(ir.Module(), kernel))


def test_a_first_phase_reading_a_written_buffer_is_not_pipelined():
    a = np.ones((1037, 300), np.float32)
    (kernel,) = _kernels(CASES["softmax"][0], a)
    plan_ = row_pipeline(kernel)
    assert plan_ is not None
    read = {e.buf for e in _loads(plan_.first)}
    params = tuple(dataclasses.replace(p, written=True) if n in read else p
                   for n, p in enumerate(kernel.params))
    assert row_pipeline(dataclasses.replace(kernel, params=params)) is None


def _loads(loop):
    from fgrad.lower.kernel.ir import Load, expr_nodes
    return [e for e in expr_nodes(loop.body) if isinstance(e, Load)]


def test_gathered_masked_and_batched_rows_pipeline_and_match_numpy():
    """The next row's first phase reads through a gather's run-time index, a mask, and a
    leading batch axis; each kernel pipelines and matches NumPy."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((700, 600)) * 3).astype(np.float32)
    idx = rng.integers(0, 700, 900).astype(np.int32)
    mask = rng.random((700, 600)) > 0.3
    x3 = rng.standard_normal((6, 130, 600)).astype(np.float32)
    cases = [(lambda x, i: x[i].softmax(-1), (x, idx), _np_softmax(x[idx])),
             (lambda x, m: Tensor.where(m, x, -1e9).softmax(-1), (x, mask),
              _np_softmax(np.where(mask, x, -1e9))),
             (lambda x: x.softmax(-1), (x3,), _np_softmax(x3))]
    for fn, args, want in cases:
        assert any(row_pipeline(k) is not None for k in _kernels(fn, *args))
        got = fgrad.jit(fn)(*map(Tensor, args)).numpy()
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-7)
