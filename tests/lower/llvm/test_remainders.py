"""Float remainders on the llvm backend (kernels/remainders.py): fmod and `%` bit for bit
against NumPy over random bit patterns, every pairing of special values, denormals and the
largest quotients; and the loop vectorized, without the C library's fmodf.
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from llvm_helpers import HALF, llvm

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm.runtime import optimized_ir, plan
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(7)
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.1, -7.0, 2 * np.pi]


def _operands(dtype: Any, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Pairs x, y: random bit patterns (every exponent gap, denormals, NaNs), ordinary
    numbers, extreme quotients (largest by smallest, smallest by largest) and every pairing
    of special values and the format's extremes."""
    info = ml_dtypes.finfo(dtype)
    width = np.dtype(dtype).itemsize * 8
    ints = {16: np.uint16, 32: np.uint32}[width]
    patterns = [RNG.integers(0, 2 ** width, count, dtype=np.uint64).astype(ints).view(dtype)
                for _ in range(2)]
    normal = [(RNG.standard_normal(count) * 10).astype(dtype),
              RNG.standard_normal(count).astype(dtype)]
    edges = [float(info.max), -float(info.max), float(info.smallest_subnormal),
             float(info.smallest_normal), 3 * float(info.smallest_subnormal)]
    grid_x, grid_y = np.meshgrid(np.array(SPECIAL + edges, dtype),
                                 np.array(SPECIAL + edges, dtype))
    x = np.concatenate([patterns[0], normal[0], grid_x.ravel()])
    y = np.concatenate([patterns[1], normal[1], grid_y.ravel()])
    return x, y


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    width = got.dtype.itemsize * 8
    as_int = {16: np.uint16, 32: np.uint32}[width]
    nan = np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))
    differ = (got.view(as_int) != want.view(as_int)) & ~nan
    assert not differ.any(), (got[differ][:5], want[differ][:5])


def _fmod_reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C's fmod; exact in float32 for the 16-bit formats too (the remainder of two values
    is a value of their format)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.fmod(x.astype(np.float32), y.astype(np.float32)).astype(x.dtype)


DTYPES = [np.float32, ml_dtypes.bfloat16,
          pytest.param(np.float16, marks=pytest.mark.skipif(not HALF, reason="no F16C"))]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "bf16", "f16"])
def test_fmod_is_exact(dtype: Any) -> None:
    """fmod equals C's fmod bit for bit: x's sign (and signed zeros), NaN for a zero
    divisor or an infinite dividend, x for an infinite divisor, quotients up to 2^277."""
    x, y = _operands(dtype, 1 << 16)
    got = llvm(lambda a, b: a.fmod(b), Tensor(x), Tensor(y)).numpy()
    _same_bits(got, _fmod_reference(x, y))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "bf16", "f16"])
def test_python_mod_matches_numpy(dtype: Any) -> None:
    """`x % y` (the divisor's sign) equals NumPy's remainder; zeros compared as numbers
    (NumPy gives a zero the divisor's sign, fgrad the dividend's, as C's fmod)."""
    x, y = _operands(dtype, 1 << 14)
    got = llvm(lambda a, b: a % b, Tensor(x), Tensor(y)).numpy().astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        want = np.remainder(x.astype(np.float32), y.astype(np.float32))
    np.testing.assert_array_equal(got, want.astype(dtype).astype(np.float32))


def test_fmod_of_a_scalar_divisor_and_a_large_array() -> None:
    """A broadcast divisor (angle wrapping) over 2^21 values, the kernel split on the pool."""
    x = (RNG.standard_normal(1 << 21) * 1e4).astype(np.float32)
    got = llvm(lambda a: a.fmod(2 * np.pi), Tensor(x)).numpy()
    _same_bits(got, np.fmod(x, np.float32(2 * np.pi)))


def test_fmod_loop_is_vectorized_without_the_c_library() -> None:
    """No call to fmodf: the loop vectorizes (the C library's call kept it scalar)."""
    x = Tensor(np.ones(4096, np.float32))
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda a, b: a % b)(x, x))
    text = optimized_ir(plan(jaxpr))
    assert "fmodf" not in text and "frem" not in text
    assert "x double>" in text
