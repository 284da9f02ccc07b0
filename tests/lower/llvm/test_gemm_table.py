"""The jitted matmul against NumPy over issue 15's table: m, n, k from {1, 7, 31, 64, 257,
1000}, every transpose combination, batched and broadcast-batch operands, float32/64,
float16, bfloat16 and int32, on the whole and the split (chunked over the pool) paths.

The reference is NumPy in float64 (exact integers for int32, which wraps like NumPy)."""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.core import prims
from fgrad.lower.llvm.blas import gemm_chunking

RNG = np.random.default_rng(15)
SHAPES = [(1, 1, 1), (7, 31, 64), (31, 7, 257), (64, 257, 7), (257, 64, 31), (1000, 7, 64),
          (7, 1000, 31), (64, 31, 1000), (257, 257, 257), (1000, 1000, 64), (1, 1000, 257),
          (257, 1, 1000)]
DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
          "bfloat16": ml_dtypes.bfloat16, "int32": np.int32}
SLOW_DTYPE_LIMIT = 300_000_000   # multiply-adds of the half dtypes (NumPy reference cost)


def _tolerance(name: str, k: int) -> dict[str, float]:
    eps = {"float32": 2e-6, "float64": 1e-14, "float16": 1e-3, "bfloat16": 8e-3}[name]
    return {"rtol": 0, "atol": 4 * eps * np.sqrt(k) * 3}


def _operand(shape: tuple[int, ...], name: str) -> np.ndarray:
    if name == "int32":
        return RNG.integers(-7, 8, shape).astype(np.int32)
    return RNG.uniform(-1, 1, shape).astype(DTYPES[name])


def _check(out: Tensor, want: np.ndarray, name: str, k: int) -> None:
    got = out.numpy()
    assert got.dtype == np.dtype(DTYPES[name]) and got.shape == want.shape
    if name == "int32":
        np.testing.assert_array_equal(got, want.astype(np.int32))
    else:
        np.testing.assert_allclose(got.astype(np.float64), want, **_tolerance(name, k))


def _cases() -> list[Any]:
    out = []
    for name in DTYPES:
        for m, n, k in SHAPES:
            if name not in ("float32", "float64", "int32") and m * n * k > SLOW_DTYPE_LIMIT:
                continue
            out.append(pytest.param(name, m, n, k, id=f"{name}-{m}x{n}x{k}"))
    return out


def _dot(ta: bool, tb: bool) -> Any:
    """lhs (k, m) when ta else (m, k); rhs (n, k) when tb else (k, n)."""
    dims = (((0 if ta else 1,), (1 if tb else 0,)), ((), ()))
    return lambda a, b: prims.dot_general(a, b, dims)


@pytest.mark.parametrize("name,m,n,k", _cases())
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_every_transpose_matches_numpy(name: str, m: int, n: int, k: int, ta: bool,
                                       tb: bool) -> None:
    a = _operand((k, m) if ta else (m, k), name)
    b = _operand((n, k) if tb else (k, n), name)
    want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    out = fgrad.jit(_dot(ta, tb), backend="llvm")(Tensor(a), Tensor(b))
    _check(out, want, name, k)


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("m,n,k", [(7, 31, 64), (64, 257, 31), (257, 64, 257)])
def test_batched_and_broadcast_batch(name: str, m: int, n: int, k: int) -> None:
    a = _operand((3, m, k), name)
    b = _operand((3, k, n), name)
    shared = _operand((1, k, n), name)
    mm = fgrad.jit(lambda x, y: x @ y, backend="llvm")
    _check(mm(Tensor(a), Tensor(b)), a.astype(np.float64) @ b.astype(np.float64), name, k)
    _check(mm(Tensor(a), Tensor(shared)), a.astype(np.float64) @ shared.astype(np.float64),
           name, k)
    bt = fgrad.jit(lambda x, y: x @ y.permute(0, 2, 1), backend="llvm")
    bn = np.ascontiguousarray(b.transpose(0, 2, 1))
    _check(bt(Tensor(a), Tensor(bn)), a.astype(np.float64) @ b.astype(np.float64), name, k)


@pytest.mark.parametrize("name", ["float32", "float64", "int32"])
@pytest.mark.parametrize("m,n,k", [(1000, 257, 64), (257, 1000, 31), (1000, 64, 257)])
def test_split_path_matches_numpy(name: str, m: int, n: int, k: int) -> None:
    a, b = _operand((m, k), name), _operand((k, n), name)
    closed = fgrad.make_jaxpr(lambda x, y: x @ y)(Tensor(a), Tensor(b))
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "dot_general"]
    assert gemm_chunking(eqn)[0] > 1        # this shape takes the chunked path
    out = fgrad.jit(lambda x, y: x @ y, backend="llvm")(Tensor(a), Tensor(b))
    _check(out, a.astype(np.float64) @ b.astype(np.float64), name, k)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_half_precision_is_a_float32_gemm_rounded_once(name: str):
    a, b = _operand((257, 64), name), _operand((64, 31), name)
    fn = fgrad.jit(lambda x, y: x @ y, backend="llvm")
    text = fn.lower(Tensor(a), Tensor(b)).as_text()
    assert "gemm f32 batch=() m=257 n=31 k=64" in text
    out = fn(Tensor(a), Tensor(b))
    assert out.dtype == getattr(fgrad.dtypes, name)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32).astype(DTYPES[name])
    # float32 sums of exact products, rounded once: within one rounding of the exact result
    got = out.numpy().astype(np.float64)
    ulp = np.abs(want.astype(np.float64)) * {"float16": 2**-10, "bfloat16": 2**-7}[name]
    assert np.all(np.abs(got - want.astype(np.float64)) <= ulp + 1e-6)


def test_int32_is_a_native_gemm_that_wraps_like_numpy() -> None:
    """int32 runs on fgrad's own GEMM (integer multiply-adds in the micro-kernel), and
    its products and sums wrap around as NumPy's int32 matmul does."""
    a = np.full((40, 300), 2 ** 20, np.int32)
    b = np.full((300, 50), 2 ** 20 + 3, np.int32)
    fn = fgrad.jit(lambda x, y: x @ y, backend="llvm")
    assert "gemm i32 batch=() m=40 n=50 k=300" in fn.lower(Tensor(a), Tensor(b)).as_text()
    np.testing.assert_array_equal(fn(Tensor(a), Tensor(b)).numpy(), a @ b)
    empty = fn(Tensor(np.ones((0, 300), np.int32)), Tensor(b)).numpy()
    assert empty.shape == (0, 50) and empty.dtype == np.int32
