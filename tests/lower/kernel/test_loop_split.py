"""A loop whose variable a reshape reads as (i // d, i % d) (heads merged after a transpose)
runs as two loops, so the innermost index stays affine (it vectorizes, and LLVM does not
spend its time on division chains); checked in the kernel IR and against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.kernel.index import Div, Mod
from fgrad.lower.kernel.ir import Loop, kernel_indices
from fgrad.lower.llvm.runtime import plan
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(5)


def _kernel(fn, x):
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(Tensor(x)))
    (kernel,) = plan(jaxpr).kernels
    return kernel


def _loops(kernel):
    out, body = [], kernel.body
    while body and isinstance(body[0], Loop):
        out.append(body[0].sym)
        body = body[0].body
    return out


def _nonlinear(kernel) -> bool:
    return any(isinstance(a, (Div, Mod)) for ix in kernel_indices(kernel) for a, _ in ix.terms)


def merge_heads(t: Tensor) -> Tensor:
    return t.permute(0, 2, 1, 3).reshape(8, 64, 128) * 2.0


def split_heads(t: Tensor) -> Tensor:
    return t.reshape(8, 64, 4, 32).permute(0, 2, 1, 3) + 1.0


@pytest.mark.parametrize("backend", ["llvm", "opencl", "numpy"])
def test_merged_heads_loop_is_split_and_right(backend: str) -> None:
    x = RNG.standard_normal((8, 4, 64, 32)).astype(np.float32)
    kernel = _kernel(merge_heads, x)
    assert [s.extent for s in _loops(kernel)] == [8, 64, 4, 32]
    assert not _nonlinear(kernel)
    got = fgrad.jit(merge_heads, backend=backend)(Tensor(x)).numpy()
    np.testing.assert_array_equal(got, x.transpose(0, 2, 1, 3).reshape(8, 64, 128) * 2)


def test_split_heads_needs_no_split_and_stays_right() -> None:
    x = RNG.standard_normal((8, 64, 128)).astype(np.float32)
    kernel = _kernel(split_heads, x)
    assert not _nonlinear(kernel)
    got = fgrad.jit(split_heads, backend="llvm")(Tensor(x)).numpy()
    np.testing.assert_array_equal(got, x.reshape(8, 64, 4, 32).transpose(0, 2, 1, 3) + 1)


def test_small_transposed_flattens_split_and_stay_exact() -> None:
    """A transposed (a, b) flattened: the innermost i reads x[i % a, i // a], split in
    two loops (b, a); odd sizes, results exact."""
    for shape in ((6, 5), (3, 7)):
        x = RNG.standard_normal((4, *shape)).astype(np.float32)
        fn = lambda t: t.permute(0, 2, 1).reshape(4, -1) - 3.0   # noqa: E731
        assert not _nonlinear(_kernel(fn, x))
        got = fgrad.jit(fn, backend="llvm")(Tensor(x)).numpy()
        np.testing.assert_array_equal(got, x.transpose(0, 2, 1).reshape(4, -1) - 3)
