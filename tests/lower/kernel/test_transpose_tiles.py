"""Transposing elementwise kernels loop over tiles (kernel/build.py `_transpose_tiles`):
which kernels are tiled, and their results against NumPy on every backend."""
from __future__ import annotations

from typing import Any, Callable

import ml_dtypes
import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.kernel.ir import Loop
from fgrad.lower.llvm import runtime as llvm_runtime
from fgrad.transforms.jit_prim import open_jaxpr

pytestmark = pytest.mark.backends
RNG = np.random.default_rng(8)
BF16 = np.dtype(ml_dtypes.bfloat16)


def loop_depths(fn: Callable[..., Any], *args: Tensor) -> list[int]:
    """The loop nest depth of each kernel of the llvm plan of `fn`."""
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(*args))

    def depth(body: Any) -> int:
        loops = [s for s in body if isinstance(s, Loop)]
        return 1 + max(depth(s.body) for s in loops) if loops else 0
    return [depth(k.body) for k in llvm_runtime.plan(jaxpr).kernels]


def test_large_transposes_are_tiled_and_others_are_not() -> None:
    big = Tensor(np.zeros((1024, 512), np.float32))
    assert loop_depths(lambda a: a.T + 1, big) == [6]        # blocks of tiles, then tiles
    assert loop_depths(lambda a: a + 1, big) == [1]                  # contiguous: one loop
    narrow = Tensor(np.zeros((1024, 384), np.float32))
    assert loop_depths(lambda a: a.T + 1, narrow) == [4]     # 384 % 256: two tile loops
    small = Tensor(np.zeros((64, 64), np.float32))
    assert loop_depths(lambda a: a.T + 1, small) == [2]             # fits in cache
    odd = Tensor(np.zeros((1000, 520), np.float32))
    assert loop_depths(lambda a: a.T + 1, odd) == [2]               # 1000 % 16 != 0
    batched = Tensor(np.zeros((3, 512, 512), np.float32))
    assert loop_depths(lambda a: a.permute(0, 2, 1) * 2, batched) == [7]
    rows16 = Tensor(np.zeros((3, 512, 528), np.float32))    # 528 rows: 16-row tiles
    assert loop_depths(lambda a: a.permute(0, 2, 1) * 2, rows16) == [5]


def tile_extents(fn: Callable[..., Any], *args: Tensor) -> list[int]:
    """The extents of the innermost two loops of the llvm plan's only kernel."""
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(*args))
    (kernel,) = llvm_runtime.plan(jaxpr).kernels
    body, extents = kernel.body, []
    while body and isinstance(body[0], Loop):
        extents.append(body[0].sym.extent)
        body = body[0].body
    return extents[-2:]


def test_tiles_are_64_rows_where_they_divide() -> None:
    assert tile_extents(lambda a: a.T + 1, Tensor(np.zeros((1024, 512), np.float32))) \
        == [64, 16]
    assert tile_extents(lambda a: a.permute(0, 2, 1) * 2,
                        Tensor(np.zeros((3, 512, 528), np.float32))) == [16, 16]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.float16, BF16])
def test_llvm_stages_transposed_reads_without_gathers(dtype: Any) -> None:
    """The tile's transposed load becomes vector loads, a register transpose and a stack
    tile (llvm/kernels/tiles.py): no gathers or scatters are left in the kernel."""
    x = Tensor(np.zeros((512, 1024), dtype))
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda a: a.T + 1)(x))
    text = llvm_runtime.optimized_ir(llvm_runtime.plan(jaxpr))
    assert "masked.gather" not in text and "masked.scatter" not in text
    assert '%"tile" = alloca' in str(llvm_runtime.module_ir(llvm_runtime.plan(jaxpr)))


@pytest.mark.parametrize("case", ["2d", "batched", "mixed", "float64", "int32", "odd",
                                  "blocks", "two", "negative", "float16", "bfloat16"])
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
    elif case == "blocks":  # superblocks of tiles, 64-row tiles, float64
        x = RNG.standard_normal((768, 1024))
        fn, ref = (lambda a: a.T * a.T - a.T), (lambda a: a.T * a.T - a.T)
    elif case == "two":     # two operands read transposed, one 16-row tiles
        x = RNG.standard_normal((2, 528, 512)).astype(np.float32)
        fn, ref = (lambda a: a[0].T - a[1].T * 3), (lambda a: a[0].T - a[1].T * 3)
    elif case == "negative":   # read transposed and reversed: a negative stride
        x = RNG.standard_normal((512, 1024)).astype(np.float32)
        fn, ref = (lambda a: a.flip(0).T + 1), (lambda a: a[::-1].T + 1)
    elif case in ("float16", "bfloat16"):  # staged as 16-bit integers
        x = RNG.standard_normal((512, 1024)).astype(np.float16 if case == "float16" else BF16)
        fn, ref = (lambda a: a.T * 2), (lambda a: a.T * 2)
    else:                   # not a multiple of the tile: the untiled loops
        x = RNG.standard_normal((1000, 520)).astype(np.float32)
        fn, ref = (lambda a: a.T + 1), (lambda a: a.T + 1)
    got = fgrad.jit(fn, backend=jit_backend)(Tensor(x)).numpy()
    np.testing.assert_array_equal(got, ref(x))
