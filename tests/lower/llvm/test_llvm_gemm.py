"""Native matmul in the llvm backend: dot_general as BLAS gemm calls from generated code.

References are NumPy (`np.matmul`, `np.einsum`) and the "numpy" jit backend for gradients;
tests never assert on timing.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from llvm_helpers import HALF, assert_native, close, llvm, sched_of

import fgrad
from fgrad import Tensor
from fgrad.core import prims
from fgrad.lower.schedule.gemm_layout import MatrixView, matrix_view
from fgrad.lower.llvm.runtime import plan
from fgrad.lower.kernel.program import Segment
from fgrad.lower.schedule.expand import expand
from fgrad.lower.schedule.partition import GemmStep, schedule
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(0)
FLOATS = [np.float32, np.float64]
TOL = {np.float32: {"rtol": 2e-5, "atol": 2e-5}, np.float64: {"rtol": 1e-12, "atol": 1e-12}}


def rand(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Standard normal values of `dtype` (or small integers for integer dtypes)."""
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-5, 6, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def matmul_close(got: Tensor, x: np.ndarray, y: np.ndarray) -> None:
    """`got` is x @ y within the rounding bound of any summation order: |error| <= k * eps *
    (|x| @ |y|), against the product in float64 (a float32 reference is itself rounded, and
    differently with OpenBLAS's thread count)."""
    out = got.numpy()
    exact = np.matmul(x.astype(np.float64), y.astype(np.float64))
    assert out.dtype == x.dtype and out.shape == exact.shape
    scale = np.matmul(np.abs(x).astype(np.float64), np.abs(y).astype(np.float64))
    bound = x.shape[-1] * np.finfo(x.dtype).eps * scale + np.finfo(x.dtype).tiny
    err = np.abs(out.astype(np.float64) - exact)
    assert (err <= bound).all(), f"max error {err.max():.3g}, its bound {bound.flat[err.argmax()]:.3g}"


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """`a @ b`."""
    return a @ b


# ---------------------------------------------------------------------------- matmul shapes

SHAPES = [
    ((5, 7), (7, 3)),          # non-square
    ((1, 9), (9, 4)),          # 1xN row
    ((6, 9), (9, 1)),          # Nx1 column
    ((6, 1), (1, 4)),          # outer product (k = 1)
    ((1, 1), (1, 1)),
    ((0, 5), (5, 3)),          # empty m
    ((4, 5), (5, 0)),          # empty n
    ((4, 0), (0, 3)),          # empty contraction: zeros
    ((2, 0, 5), (2, 5, 3)),
    ((3, 4, 5), (3, 5, 6)),    # batched 3-D
    ((2, 3, 4, 5), (2, 3, 5, 2)),  # batched 4-D
    ((4, 3, 5), (5, 6)),       # 3-D @ 2-D (free axes merge)
    ((2, 1, 4, 5), (3, 5, 2)),  # broadcast batch
    ((7,), (7, 4)),            # vector @ matrix
    ((4, 7), (7,)),            # matrix @ vector
    ((7,), (7,)),              # dot product
    ((33, 65), (65, 17)),
    ((3, 130, 300), (300, 90)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("xs,ys", SHAPES)
def test_matmul_matches_numpy(xs: tuple[int, ...], ys: tuple[int, ...], dtype: Any) -> None:
    x, y = rand(xs, dtype), rand(ys, dtype)
    s = assert_native(matmul, Tensor(x), Tensor(y))
    assert len(s.gemms()) == 1
    matmul_close(llvm(matmul, Tensor(x), Tensor(y)), x, y)


@pytest.mark.parametrize("dtype", FLOATS)
def test_transposed_operands_use_blas_flags_without_copies(dtype: Any) -> None:
    a, b = rand((6, 4), dtype), rand((5, 6), dtype)
    cases = {
        "aT_b": (lambda a, b: a.T @ b.T, a.T @ b.T),
        "bT_aT": (lambda a, b: (b @ a).T, (b @ a).T),
        "a_aT": (lambda a, b: a @ a.T, a @ a.T),
        "aT_a": (lambda a, b: a.T @ a, a.T @ a),
    }
    for name, (fn, want) in cases.items():
        s = assert_native(fn, Tensor(a), Tensor(b))
        copies = [k for k in s.kernels() if k.outputs[0] is not s.jaxpr.outvars[0]]
        assert not copies, f"{name}: an operand transpose was copied\n{s}"
        close(llvm(fn, Tensor(a), Tensor(b)), want, **TOL[dtype])


def test_weight_gradient_is_computed_transposed_without_a_copy() -> None:
    x, w = rand((16, 6), np.float32), rand((6, 4), np.float32)

    def loss(w: Tensor, x: Tensor) -> Tensor:
        return (x @ w).square().sum()

    s = assert_native(fgrad.grad(loss), Tensor(w), Tensor(x))
    assert len(s.gemms()) == 2 and "transpose" not in str(s), str(s)
    close(llvm(fgrad.grad(loss), Tensor(w), Tensor(x)), 2 * x.T @ (x @ w), rtol=1e-5)


def test_transpose_used_elsewhere_still_computes() -> None:
    a, b = rand((6, 4), np.float64), rand((6, 3), np.float64)

    def f(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
        t = a.T
        return t @ b, (t * 2).exp()

    got = llvm(f, Tensor(a), Tensor(b))
    close(got[0], a.T @ b, **TOL[np.float64])
    close(got[1], np.exp(a.T * 2), rtol=1e-14)


def test_batched_transpose_reads_in_place() -> None:
    q, k = rand((2, 3, 8, 4), np.float32), rand((2, 3, 8, 4), np.float32)

    def scores(q: Tensor, k: Tensor) -> Tensor:
        return q @ k.transpose(-1, -2)

    s = assert_native(scores, Tensor(q), Tensor(k))
    (g,) = s.gemms()
    assert g.dims.batch == (2, 3) and g.dims.rhs.trans and not s.kernels()
    close(llvm(scores, Tensor(q), Tensor(k)), q @ np.swapaxes(k, -1, -2), **TOL[np.float32])


# ---------------------------------------------------------------------------- layouts

DIMNUMS = [  # (x shape, y shape, dimension numbers, einsum formula)
    ((3, 4, 5, 6), (4, 7, 6), (((1, 3), (0, 2)), ((), ())), "abcd,bed->ace"),
    ((4, 2, 5), (5, 2, 3), (((2,), (0,)), ((1,), (1,))), "abc,cbd->bad"),
    ((5, 2, 4), (2, 3, 5), (((0,), (2,)), ((1,), (0,))), "cba,bdc->bad"),
    ((3, 4, 5), (5, 4, 2), (((1, 2), (1, 0)), ((), ())), "abc,cbd->ad"),
    ((6, 3), (3, 6), (((0, 1), (1, 0)), ((), ())), "ab,ba->"),
    ((2, 3), (4,), (((), ()), ((), ())), "ab,c->abc"),
    ((2, 3, 4), (4, 3, 2), (((1,), (1,)), ((0, 2), (2, 0))), "abc,cba->ac"),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("xs,ys,dn,formula", DIMNUMS)
def test_einsum_like_layouts_match_numpy(xs: Any, ys: Any, dn: Any, formula: str,
                                         dtype: Any) -> None:
    x, y = rand(xs, dtype), rand(ys, dtype)

    def f(x: Tensor, y: Tensor) -> Tensor:
        return prims.dot_general(x, y, dn)

    s = assert_native(f, Tensor(x), Tensor(y))
    assert len(s.gemms()) == 1
    close(llvm(f, Tensor(x), Tensor(y)), np.einsum(formula, x, y), **TOL[dtype])


def test_unreadable_layout_is_packed_by_a_fused_transpose_kernel() -> None:
    x, y = rand((3, 4, 5, 6), np.float32), rand((4, 7, 6), np.float32)

    def f(x: Tensor, y: Tensor) -> Tensor:
        return prims.dot_general(x.exp(), y, (((1, 3), (0, 2)), ((), ())))

    s = assert_native(f, Tensor(x), Tensor(y))
    text = str(s)  # packed operands are named after the jaxpr's own values (d: the product)
    assert len(s.kernels()) == 2 and "(a) -> (e)  # exp transpose\n" in text
    assert "gemm f32 batch=() m=15 n=7 k=24 (e f) -> (d)" in text
    want = np.einsum("abcd,bed->ace", np.exp(x), y)
    close(llvm(f, Tensor(x), Tensor(y)), want, rtol=1e-5, atol=1e-5)


def test_matrix_view_leading_dimensions_are_legal() -> None:
    assert matrix_view((4, 5), (), (0,), (1,)) == MatrixView(False, 5, ())
    assert matrix_view((4, 5), (), (1,), (0,)) == MatrixView(True, 5, ())
    assert matrix_view((1, 5), (), (0,), (1,)).ld == 5
    assert matrix_view((5, 1), (), (0,), (1,)).ld == 1
    assert matrix_view((0, 5), (), (0,), (1,)).ld >= 1
    assert matrix_view((3, 4, 5), (1,), (0,), (2,)) == MatrixView(False, 20, (5,))
    assert matrix_view((3, 4, 5), (), (0, 2), (1,)) is None


# ---------------------------------------------------------------------------- programs


@pytest.mark.parametrize("dtype", FLOATS)
def test_elementwise_producers_and_epilogue_stay_in_kernels(dtype: Any) -> None:
    a, b, bias = rand((8, 6), dtype), rand((6, 5), dtype), rand((5,), dtype)

    def f(a: Tensor, b: Tensor, bias: Tensor) -> Tensor:
        return ((a * 2 + 1) @ b.tanh() + bias).relu()

    s = assert_native(f, Tensor(a), Tensor(b), Tensor(bias))
    assert len(s.gemms()) == 1 and len(s.kernels()) == 3
    want = np.maximum((a * 2 + 1) @ np.tanh(b) + bias, 0)
    close(llvm(f, Tensor(a), Tensor(b), Tensor(bias)), want.astype(dtype), **TOL[dtype])


def test_chained_matmuls_share_one_segment() -> None:
    a, b, c = (rand((16, 16), np.float32) for _ in range(3))

    def f(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
        return ((a @ b).relu() @ c).relu() @ a + a @ a

    program = plan(open_jaxpr(fgrad.make_jaxpr(f)(Tensor(a), Tensor(b), Tensor(c)))[0])
    assert all(isinstance(a, Segment) for a in program.actions)
    assert len(program.actions) == 1
    want = np.maximum(np.maximum(a @ b, 0) @ c, 0) @ a + a @ a
    close(llvm(f, Tensor(a), Tensor(b), Tensor(c)), want, rtol=1e-4, atol=1e-4)


def test_library_calls_name_the_dot_general_with_out_lhs_rhs_slots() -> None:
    a, b = rand((4, 8), np.float32), rand((8, 3), np.float32)
    program = plan(open_jaxpr(fgrad.make_jaxpr(matmul)(Tensor(a), Tensor(b)))[0])
    (segment,) = program.actions
    assert isinstance(segment, Segment)
    (name, slots), = segment.calls
    eqn = program.library_calls[name]
    assert eqn.primitive.name == "dot_general"
    assert [segment.table[i] for i in slots] == [eqn.outvars[0], *eqn.inputs]


def test_schedule_shows_native_gemm_and_int_host_fallback() -> None:
    a, b = rand((4, 8), np.float32), rand((8, 3), np.float32)
    text = str(sched_of(matmul, Tensor(a), Tensor(b)))
    assert "schedule: 0 kernels, 1 gemm, 0 host steps" in text
    assert "g0: gemm f32 batch=() m=4 n=3 k=8 (a b) -> (c)  # dot_general lhs N rhs N" in text
    ai, bi = rand((4, 8), np.int32), rand((8, 3), np.int32)   # fgrad's own GEMM, in int32
    assert "g0: gemm i32 batch=() m=4 n=3 k=8" in str(sched_of(matmul, Tensor(ai), Tensor(bi)))
    al, bl = rand((4, 8), np.int64), rand((8, 3), np.int64)
    s = sched_of(matmul, Tensor(al), Tensor(bl))
    assert not s.gemms() and len(s.hosts()) == 1
    assert "host dot_general" in str(s) and "covers float32/float64" in str(s)


@pytest.mark.parametrize("dtype", [np.int64, np.float16])
def test_other_dtypes_fall_back_to_the_host_and_stay_right(dtype: Any) -> None:
    x, y = rand((3, 5, 4), dtype), rand((3, 4, 2), dtype)
    s = sched_of(matmul, Tensor(x), Tensor(y))
    assert not s.gemms() and [h.eqn.primitive.name for h in s.hosts()] == ["dot_general"]
    got = llvm(matmul, Tensor(x), Tensor(y)).numpy()
    want = np.matmul(x.astype(np.float64), y.astype(np.float64))
    assert got.dtype == dtype
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-2)


def _mlp_loss(params: dict[str, Tensor], x: Tensor, y: Tensor) -> Tensor:
    h = (x @ params["w0"] + params["b0"]).relu()
    h = (h @ params["w1"] + params["b1"]).relu()
    return (h @ params["w2"] + params["b2"]).sparse_categorical_crossentropy(y)


def test_mlp_grad_under_jit_matches_the_numpy_backend() -> None:
    sizes = [20, 16, 12, 5]
    params = {}
    for i, (m, n) in enumerate(itertools.pairwise(sizes)):
        params[f"w{i}"] = Tensor(rand((m, n), np.float32) / np.sqrt(m))
        params[f"b{i}"] = Tensor(rand((n,), np.float32) * 0.1)
    x = Tensor(rand((32, 20), np.float32))
    y = Tensor(RNG.integers(0, 5, 32).astype(np.int32))
    vg = fgrad.value_and_grad(_mlp_loss)
    s = sched_of(vg, params, x, y)
    assert len(s.gemms()) >= 5 and not any(h.eqn.primitive.name == "dot_general"
                                           for h in s.hosts())
    loss, grads = fgrad.jit(vg, backend="llvm")(params, x, y)
    loss_ref, grads_ref = fgrad.jit(vg, backend="numpy")(params, x, y)
    close(loss, loss_ref.numpy(), rtol=1e-5)
    for k in params:
        close(grads[k], grads_ref[k].numpy(), rtol=1e-4, atol=1e-6)


def test_gemm_steps_record_blas_views() -> None:
    a, b = rand((6, 4), np.float64), rand((5, 6), np.float64)
    (g,) = sched_of(lambda a, b: a.T @ b.T, Tensor(a), Tensor(b)).gemms()
    assert isinstance(g, GemmStep)
    assert (g.dims.m, g.dims.n, g.dims.k) == (4, 5, 6)
    assert g.dims.lhs.trans and g.dims.rhs.trans


def _conv_numpy(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Cross-correlation with padding 1 (im2col by sliding windows, then a tensordot)."""
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", win, w)


def test_conv2d_is_one_weight_by_patches_gemm_per_image_writing_nchw() -> None:
    """conv2d: per image, weight (C_out x C_in*K) @ patches (C_in*K x pixels, pixels
    innermost): the gemm writes the (N, C_out, H, W) output itself, no transpose after."""
    x, w = rand((2, 3, 8, 8), np.float32), rand((4, 3, 3, 3), np.float32)

    def conv(w: Tensor, x: Tensor) -> Tensor:
        return x.conv2d(w, padding=1)

    # the stored-patches form (conv_patches expanded; llvm reads the image instead:
    # test_implicit_gemm.py)
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(conv)(Tensor(w), Tensor(x)))
    s = schedule(expand(jaxpr), HALF)
    assert not s.hosts(), str(s)
    (g,) = s.gemms()
    assert (g.dims.batch, g.dims.m, g.dims.n, g.dims.k) == ((2,), 4, 64, 27), str(s)
    assert not g.dims.lhs.trans and not g.dims.rhs.trans
    assert "kernel elementwise f32[2,3,9,8,8]" in str(s), str(s)
    assert s.steps[-1] is g                      # the gemm's result is the output
    close(llvm(conv, Tensor(w), Tensor(x)), _conv_numpy(x, w), rtol=1e-4, atol=1e-5)

    def loss(w: Tensor, x: Tensor) -> Tensor:
        return conv(w, x).relu().sum()

    grads = fgrad.jit(fgrad.grad(loss, argnums=(0, 1)), backend="llvm")(Tensor(w), Tensor(x))
    want = fgrad.jit(fgrad.grad(loss, argnums=(0, 1)), backend="numpy")(Tensor(w), Tensor(x))
    for got, ref in zip(grads, want, strict=True):
        close(got, ref.numpy(), rtol=1e-4, atol=1e-5)
