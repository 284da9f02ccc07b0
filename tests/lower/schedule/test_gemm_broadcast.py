"""Broadcast batch operands read with stride 0 (schedule/gemm_layout.py `BatchBroadcast`): a
product whose operand is a broadcast adding only leading batch axes reads the broadcast's
input, and the broadcast is never stored. Results against NumPy in float64, on every
backend; the schedule shows which products share an operand and that no kernel
materializes it."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.core import prims
from fgrad.lower.llvm.runtime import plan
from fgrad.lower.schedule.gemm_layout import BatchBroadcast, gemm_dims
from fgrad.transforms.jit_prim import open_jaxpr

pytestmark = pytest.mark.backends
RNG = np.random.default_rng(16)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _gemms(fn: Callable[..., Any], *arrays: np.ndarray) -> tuple[list[Any], int]:
    """The llvm program's gemm calls and its kernel count."""
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(*[Tensor(a) for a in arrays]))
    program = plan(jaxpr)
    return list(program.library_calls.values()), len(program.kernels)


def _shared(eqn: Any) -> tuple[BatchBroadcast | None, BatchBroadcast | None]:
    return eqn.params.get("broadcast_operands", (None, None))


CASES = {
    # a 2-d weight on the left of a batch: a new leading axis
    "new axis, lhs": ((lambda w, x: w @ x), ((48, 40), (5, 40, 24)), "lhs"),
    # matmul broadcasting a size-1 batch axis on the right
    "size-1 axis, rhs": ((lambda a, b: a @ b), ((5, 24, 40), (1, 40, 16)), "rhs"),
    # two batch axes, both new
    "two new axes, lhs": ((lambda w, x: w @ x), ((12, 40), (2, 3, 40, 8)), "lhs"),
    # a new batch axis before one the operand has
    "new axis before a stored one": ((lambda a, b: a @ b), ((3, 24, 40), (2, 3, 40, 16)),
                                     "lhs"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_shared_operand_is_read_in_place(jit_backend: str, case: str) -> None:
    fn, shapes, side = CASES[case]
    arrays = [_f32(*s) for s in shapes]
    want = np.matmul(*[a.astype(np.float64) for a in arrays])
    got = fgrad.jit(fn)(*[Tensor(a) for a in arrays]).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    (eqn,), kernels = _gemms(fn, *arrays)
    lhs, rhs = _shared(eqn)
    read = lhs if side == "lhs" else rhs
    assert read is not None and (rhs if side == "lhs" else lhs) is None
    dims = gemm_dims(eqn)
    assert dims is not None
    strides = (dims.lhs if side == "lhs" else dims.rhs).batch_strides
    assert strides[:read.leading] == (0,) * read.leading and all(strides[read.leading:])
    assert kernels == 0          # no broadcast kernel


def test_schedule_says_which_operand_is_shared() -> None:
    w, x = _f32(48, 40), _f32(5, 40, 24)
    text = fgrad.jit(lambda w, x: w @ x, backend="llvm").lower(Tensor(w), Tensor(x)).as_text()
    assert "(lhs shared over 1 batch axes: stride 0)" in text
    assert "schedule: 0 kernels, 1 gemm" in text


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_other_gemm_dtypes(jit_backend: str, dtype: Any) -> None:
    w = RNG.integers(-5, 6, (9, 33)).astype(dtype)
    x = RNG.integers(-5, 6, (4, 33, 17)).astype(dtype)
    got = fgrad.jit(lambda w, x: w @ x)(Tensor(w), Tensor(x)).numpy()
    np.testing.assert_array_equal(got, np.matmul(w.astype(np.int64), x.astype(np.int64)))


def test_gradients_of_a_shared_weight(jit_backend: str) -> None:
    w, x = _f32(16, 24), _f32(6, 24, 10)
    gw, gx = fgrad.jit(fgrad.grad(lambda w, x: ((w @ x) ** 2).sum(), argnums=(0, 1)))(
        Tensor(w), Tensor(x))
    w64, x64 = w.astype(np.float64), x.astype(np.float64)
    dy = 2 * (w64 @ x64)
    np.testing.assert_allclose(gw.numpy(), np.einsum("bij,bkj->ik", dy, x64), rtol=1e-4,
                               atol=1e-3)
    np.testing.assert_allclose(gx.numpy(), np.einsum("ij,bik->bjk", w64, dy), rtol=1e-4,
                               atol=1e-3)


def test_broadcasts_that_are_not_leading_batch_axes_stay_stored(jit_backend: str) -> None:
    """Broadcast rows (not a batch axis), and a broadcast the jaxpr also returns."""
    a, b = _f32(3, 1, 20), _f32(3, 20, 7)

    def rows(a: Tensor, b: Tensor) -> Tensor:
        return a.expand(3, 5, 20) @ b
    want = np.broadcast_to(a, (3, 5, 20)).astype(np.float64) @ b
    np.testing.assert_allclose(fgrad.jit(rows)(Tensor(a), Tensor(b)).numpy(), want,
                               rtol=1e-5, atol=1e-4)
    (eqn,), _ = _gemms(rows, a, b)
    assert _shared(eqn) == (None, None)

    w, x = _f32(8, 20), _f32(3, 20, 7)

    def returned(w: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        big = w.expand(3, 8, 20)
        return big, big @ x
    big, out = fgrad.jit(returned)(Tensor(w), Tensor(x))
    np.testing.assert_array_equal(big.numpy(), np.broadcast_to(w, (3, 8, 20)))
    np.testing.assert_allclose(out.numpy(), w.astype(np.float64) @ x, rtol=1e-5, atol=1e-4)


def test_a_convolution_reads_its_weight_once_for_every_image() -> None:
    """The forward product's weight, broadcast over the images, is not stored (llvm: the
    product also reads the image's patches in place)."""
    x, w = _f32(4, 32, 12, 12), _f32(48, 32, 3, 3)
    (eqn,), _ = _gemms(lambda x, w: x.conv2d(w, padding=1), x, w)
    lhs, rhs = _shared(eqn)
    assert lhs is not None and lhs.leading == 1 and rhs is None
    assert "rhs_patches" in eqn.params


def test_explicit_dot_general_with_batch_dims_after_the_broadcast(jit_backend: str) -> None:
    """dot_general on an operand whose broadcast batch axis is the product's batch axis."""
    w, x = _f32(6, 11), _f32(4, 11, 5)
    dims = (((2,), (1,)), ((0,), (0,)))

    def fn(w: Tensor, x: Tensor) -> Tensor:
        return prims.dot_general(w.reshape(1, 6, 11).expand(4, 6, 11), x, dims)
    want = np.einsum("ij,bjk->bik", w.astype(np.float64), x)
    np.testing.assert_allclose(fgrad.jit(fn)(Tensor(w), Tensor(x)).numpy(), want,
                               rtol=1e-5, atol=1e-4)
