"""Transposing elementwise kernels loop over tiles (kernel/build.py `_transpose_tiles`):
which kernels are tiled, and their results against NumPy on every backend."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.kernel.ir import Loop
from fgrad.lower.llvm import runtime as llvm_runtime
from fgrad.transforms.jit_prim import open_jaxpr

pytestmark = pytest.mark.backends
RNG = np.random.default_rng(8)


def loop_depths(fn: Callable[..., Any], *args: Tensor) -> list[int]:
    """The loop nest depth of each kernel of the llvm plan of `fn`."""
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(*args))

    def depth(body: Any) -> int:
        loops = [s for s in body if isinstance(s, Loop)]
        return 1 + max(depth(s.body) for s in loops) if loops else 0
    return [depth(k.body) for k in llvm_runtime.plan(jaxpr).kernels]


def test_large_transposes_are_tiled_and_others_are_not() -> None:
    big = Tensor(np.zeros((1024, 512), np.float32))
    assert loop_depths(lambda a: a.T + 1, big) == [4]                # two tile loops
    assert loop_depths(lambda a: a + 1, big) == [1]                  # contiguous: one loop
    small = Tensor(np.zeros((64, 64), np.float32))
    assert loop_depths(lambda a: a.T + 1, small) == [2]             # fits in cache
    odd = Tensor(np.zeros((1000, 520), np.float32))
    assert loop_depths(lambda a: a.T + 1, odd) == [2]               # 1000 % 16 != 0
    batched = Tensor(np.zeros((3, 512, 512), np.float32))
    assert loop_depths(lambda a: a.permute(0, 2, 1) * 2, batched) == [5]


@pytest.mark.parametrize("case", ["2d", "batched", "mixed", "float64", "int32", "odd"])
def test_tiled_transposes_match_numpy(jit_backend: str, case: str) -> None:
    if case == "2d":
        x = RNG.standard_normal((1024, 512)).astype(np.float32)
        fn, ref = (lambda a: a.T * 2 + 1), (lambda a: a.T * 2 + 1)
    elif case == "batched":
        x = RNG.standard_normal((3, 512, 528)).astype(np.float32)
        fn, ref = (lambda a: a.permute(0, 2, 1) - 1), (lambda a: a.transpose(0, 2, 1) - 1)
    elif case == "mixed":   # one operand read transposed, one in order
        x = RNG.standard_normal((512, 512)).astype(np.float32)
        fn, ref = (lambda a: a.T + a), (lambda a: a.T + a)
    elif case == "float64":
        x = RNG.standard_normal((768, 512))
        fn, ref = (lambda a: a.T.relu()), (lambda a: np.maximum(a.T, 0))
    elif case == "int32":
        x = RNG.integers(-100, 100, (512, 1024)).astype(np.int32)
        fn, ref = (lambda a: a.T * 3), (lambda a: a.T * 3)
    else:                   # not a multiple of the tile: the untiled loops
        x = RNG.standard_normal((1000, 520)).astype(np.float32)
        fn, ref = (lambda a: a.T + 1), (lambda a: a.T + 1)
    got = fgrad.jit(fn, backend=jit_backend)(Tensor(x)).numpy()
    np.testing.assert_array_equal(got, ref(x))
