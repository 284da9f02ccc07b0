"""The convolution path through the whole llvm pipeline (expansion, then the schedule).

A conv's dot_general reads an im2col operand whose layout BLAS cannot stride through; the
pipeline must pack that operand and run one gemm, never expand the product into a fused
multiply-and-reduce kernel with the patch gather in its loads. References: NumPy, finite
differences, and PyTorch fixtures (fixtures/gen_conv.py writes fixtures/conv.npz).
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import fgrad
from fgrad import Tensor

RNG = np.random.default_rng(3)


def _conv_numpy(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    """Cross-correlation with zero padding, by sliding windows and einsum."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", win, w)


def _schedule_text(fn: object, *args: Tensor) -> str:
    """The schedule section of `jit(fn).lower(*args).as_text()` on the llvm backend."""
    text = fgrad.jit(fn, backend="llvm").lower(*args).as_text()
    return text.split("# schedule")[1].split("# kernel IR")[0]


def test_conv2d_forward_is_a_gemm_not_a_fused_reduction() -> None:
    x = RNG.standard_normal((4, 3, 10, 10)).astype(np.float32)
    w = RNG.standard_normal((8, 3, 3, 3)).astype(np.float32)

    def conv(x: Tensor, w: Tensor) -> Tensor:
        return x.conv2d(w, padding=1)

    text = _schedule_text(conv, Tensor(x), Tensor(w))
    assert "1 gemm" in text and "reduce_sum" not in text, text
    got = fgrad.jit(conv, backend="llvm")(Tensor(x), Tensor(w)).numpy()
    np.testing.assert_allclose(got, _conv_numpy(x, w, 1), rtol=1e-4, atol=1e-4)


def test_conv2d_backward_products_are_gemms() -> None:
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float64)
    w = RNG.standard_normal((5, 3, 3, 3)).astype(np.float64)

    def loss(x: Tensor, w: Tensor) -> Tensor:
        return (x.conv2d(w, padding=1) * x.conv2d(w, padding=1).tanh()).sum()

    grad = fgrad.grad(loss, argnums=(0, 1))
    text = _schedule_text(grad, Tensor(x), Tensor(w))
    assert "gemm" in text and " dot_general" not in text.replace("# dot_general", ""), text
    for line in text.splitlines():
        assert not ("kernel reduce" in line and "mul reduce_sum" in line
                    and "concatenate" in line), line
    gx, gw = fgrad.jit(grad, backend="llvm")(Tensor(x), Tensor(w))
    eps, base = 1e-6, x.copy()
    f = lambda xx, ww: float(np.sum(_conv_numpy(xx, ww, 1) * np.tanh(_conv_numpy(xx, ww, 1))))
    idx = (1, 2, 3, 4)
    up, dn = base.copy(), base.copy()
    up[idx] += eps
    dn[idx] -= eps
    np.testing.assert_allclose(gx.numpy()[idx], (f(up, w) - f(dn, w)) / (2 * eps), rtol=1e-5)
    widx = (4, 1, 0, 2)
    wu, wd = w.copy(), w.copy()
    wu[widx] += eps
    wd[widx] -= eps
    np.testing.assert_allclose(gw.numpy()[widx], (f(x, wu) - f(x, wd)) / (2 * eps), rtol=1e-5)


# ------------------------------------------------------------ PyTorch fixtures (gen_conv.py)

FIXTURES = np.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures",
                                "conv.npz"))
CASES = sorted({key.split(".")[0] for key in FIXTURES.files})


def _fixture_problem(case: str, dtype: Any) -> tuple[Any, Any, tuple[Tensor, ...]]:
    """(conv, loss, (x, w, b, dy)) of fixture `case` in `dtype`; loss is sum(conv * dy)."""
    get = lambda k: FIXTURES[f"{case}.{k}"]  # noqa: E731
    groups, stride, dilation, padding = (int(v) for v in get("args"))

    def conv(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
        return x.conv2d(w, b, groups=groups, stride=stride, dilation=dilation,
                        padding=padding)

    def loss(x: Tensor, w: Tensor, b: Tensor, dy: Tensor) -> Tensor:
        return (conv(x, w, b) * dy).sum()
    return conv, loss, tuple(Tensor(get(k).astype(dtype)) for k in ("x", "w", "b", "dy"))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", CASES)
def test_conv2d_forward_and_backward_match_pytorch(case: str, dtype: Any) -> None:
    conv, loss, (x, w, b, dy) = _fixture_problem(case, dtype)
    grad = fgrad.grad(loss, argnums=(0, 1, 2))
    forward = _schedule_text(conv, x, w, b)
    for text in (forward, _schedule_text(grad, x, w, b, dy)):
        assert ("gemm" in text) != case.startswith("depthwise"), text
        assert not any("concatenate" in line and "mul reduce_sum" in line
                       for line in text.splitlines()), text
    if case.startswith(("depthwise", "pointwise")):   # no patches are gathered
        assert "concatenate" not in forward, forward
    _check_fixture(case, dtype, "llvm")


def _check_fixture(case: str, dtype: Any, backend: str) -> None:
    """conv2d of fixture `case` and its gradients on `backend` against PyTorch's."""
    conv, loss, (x, w, b, dy) = _fixture_problem(case, dtype)
    get = lambda k: FIXTURES[f"{case}.{k}"]  # noqa: E731
    tol = {"rtol": 1e-10, "atol": 1e-10} if dtype == np.float64 else {"rtol": 2e-4,
                                                                      "atol": 2e-4}
    got = fgrad.jit(conv, backend=backend)(x, w, b).numpy()
    np.testing.assert_allclose(got, get("y"), **tol)
    grads = fgrad.jit(fgrad.grad(loss, argnums=(0, 1, 2)), backend=backend)(x, w, b, dy)
    for g, key in zip(grads, ("gx", "gw", "gb"), strict=True):
        np.testing.assert_allclose(g.numpy(), get(key), **tol, err_msg=key)


@pytest.mark.parametrize("case", [c for c in CASES if c.startswith(("depthwise", "pointwise"))])
def test_conv_fast_paths_match_pytorch(case: str, jit_backend: str) -> None:
    """The 1x1 (a gemm on the pixels in place) and depthwise (a sum over taps) paths."""
    _check_fixture(case, np.float32, jit_backend)
