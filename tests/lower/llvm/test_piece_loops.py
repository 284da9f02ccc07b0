"""A concatenate along an outer axis renders one loop per piece (each element computes only
its own piece), checked in the generated IR and against NumPy."""
import re

import numpy as np
from llvmlite import ir

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm.render import render_kernel
from fgrad.lower.llvm.runtime import module_ir, plan
from fgrad.transforms.jit_prim import open_jaxpr


def _concat(a, b, c):
    return Tensor.cat(a.exp(), b * 2, c.sqrt(), dim=1) + 1


def test_outer_concatenate_is_one_loop_per_piece():
    rng = np.random.default_rng(0)
    args = [rng.random((4, n, 64)).astype(np.float32) for n in (3, 1, 5)]
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(_concat)(*map(Tensor, args)))
    (kernel,) = plan(jaxpr).kernels
    module = ir.Module()
    text = str(render_kernel(module, kernel))
    axis = kernel.body[0].body[0].sym.name          # the concatenated axis' loop
    assert len(re.findall(rf'%"{axis}(\.\d+)?" = phi', text)) == 3   # three loops
    out = fgrad.jit(_concat)(*map(Tensor, args)).numpy()
    want = np.concatenate([np.exp(args[0]), args[1] * 2, np.sqrt(args[2])], axis=1) + 1
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_innermost_concatenate_keeps_its_selects():
    a, b = Tensor(np.ones((8, 3), np.float32)), Tensor(np.zeros((8, 5), np.float32))
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda a, b: Tensor.cat(a, b, dim=1) * 3)(a, b))
    text = str(module_ir(plan(jaxpr)))
    assert "select" in text
    out = fgrad.jit(lambda a, b: Tensor.cat(a, b, dim=1) * 3)(a, b).numpy()
    np.testing.assert_array_equal(out, np.concatenate([np.ones((8, 3)), np.zeros((8, 5))], 1) * 3)
