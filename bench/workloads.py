"""Array workloads W1-W4, each written once per contender, and the generic row builder.

In: sizes and Settings. Out: harness.Rows whose measures build the contender's call
(jitting it where the contender jits) and time it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

import fgrad
from fgrad import Tensor
from harness import (Row, Settings, fgrad_backends, fgrad_place, fgrad_sync, interleaved,
                     optional, timed)

torch = optional("torch")
jax = optional("jax")
EPS = 1e-5
BF16 = np.dtype(ml_dtypes.bfloat16)


def torch_tensor(a: np.ndarray) -> Any:
    """`a` as a PyTorch tensor (bfloat16 through its bits: torch cannot read ml_dtypes')."""
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def array_row(label: str, arrays: list[np.ndarray], fns: dict[str, Callable[..., Any]],
              settings: Settings, flops: float | None = None) -> Row:
    """A Row timing fns["numpy"|"torch"|"jax"|"fgrad"] on `arrays` (contenders present)."""
    def numpy_call() -> Callable[[], Any]:
        return lambda: fns["numpy"](*arrays)

    def torch_call() -> Callable[[], Any]:
        ts = [torch_tensor(a) for a in arrays]
        return lambda: fns["torch"](*ts)

    def jax_call() -> Callable[[], Any]:
        jf, xs = jax.jit(fns["jax"]), [jax.numpy.asarray(a) for a in arrays]
        return lambda: jax.block_until_ready(jf(*xs))

    def fgrad_call(backend: str) -> Callable[[], Callable[[], Any]]:
        def build() -> Callable[[], Any]:
            jf = fgrad.jit(fns["fgrad"], backend=backend)
            xs = fgrad_place(backend, [Tensor(a) for a in arrays])
            return lambda: fgrad_sync(jf(*xs))
        return build

    factories = {"numpy": numpy_call, "torch": torch_call, "jax": jax_call}
    measures = {k: timed(f, settings) for k, f in factories.items()
                if k in fns and (k == "numpy" or optional(k) is not None)}
    for b in fgrad_backends():
        measures[f"fgrad-{b}"] = timed(fgrad_call(b), settings)
    return Row(label, measures, flops=flops)


# ----------------------------------------------------------------- W1 elementwise chain

def w1_numpy(x: np.ndarray) -> np.ndarray:
    """tanh(x*1.5+0.5) * sigmoid(x) + exp(-x*x) in NumPy."""
    return np.tanh(x * 1.5 + 0.5) / (1 + np.exp(-x)) + np.exp(-x * x)


def w1_torch(x: Any) -> Any:
    """The W1 chain in PyTorch (eager)."""
    return torch.tanh(x * 1.5 + 0.5) * torch.sigmoid(x) + torch.exp(-x * x)


def w1_jax(x: Any) -> Any:
    """The W1 chain in jax.numpy."""
    return jax.numpy.tanh(x * 1.5 + 0.5) * jax.nn.sigmoid(x) + jax.numpy.exp(-x * x)


def w1_fgrad(x: Tensor) -> Tensor:
    """The W1 chain on fgrad Tensors."""
    return (x * 1.5 + 0.5).tanh() * x.sigmoid() + (-(x * x)).exp()


def w1(log2n: int, settings: Settings) -> list[Row]:
    """W1: the elementwise chain on 2**log2n float32 values."""
    x = np.random.default_rng(0).standard_normal(2 ** log2n).astype(np.float32)
    fns = {"numpy": w1_numpy, "torch": w1_torch, "jax": w1_jax, "fgrad": w1_fgrad}
    return [array_row(f"W1 tanh(x*1.5+0.5)*sigmoid(x)+exp(-x*x), 2^{log2n} f32", [x], fns,
                      settings)]


# ----------------------------------------------------------------- W2 softmax, layernorm

def softmax_numpy(x: np.ndarray) -> np.ndarray:
    """Row softmax in NumPy."""
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def layernorm_numpy(x: np.ndarray) -> np.ndarray:
    """Row layer normalisation without affine parameters in NumPy."""
    xc = x - x.mean(-1, keepdims=True)
    return xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + EPS)


def layernorm_jax(x: Any) -> Any:
    """Row layer normalisation without affine parameters in jax.numpy."""
    xc = x - x.mean(-1, keepdims=True)
    return xc * jax.lax.rsqrt((xc * xc).mean(-1, keepdims=True) + EPS)


def w2(n: int, settings: Settings) -> list[Row]:
    """W2: row softmax, layernorm and a transposed elementwise op of an n x n float32
    matrix."""
    x = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    softmax = {"numpy": softmax_numpy, "torch": lambda x: torch.softmax(x, -1),
               "jax": lambda x: jax.nn.softmax(x, axis=-1), "fgrad": lambda x: x.softmax(-1)}
    layernorm = {"numpy": layernorm_numpy,
                 "torch": lambda x: torch.nn.functional.layer_norm(x, (n,), eps=EPS),
                 "jax": layernorm_jax, "fgrad": lambda x: x.layernorm(-1, eps=EPS)}
    # torch's x.T + 1 keeps the transposed strides (nothing moves): made contiguous here
    transposed = {"numpy": lambda x: x.T + 1, "torch": lambda x: (x.T + 1).contiguous(),
                  "jax": lambda x: x.T + 1, "fgrad": lambda x: x.T + 1}
    return [array_row(f"W2 row softmax {n}x{n} f32", [x], softmax, settings),
            array_row(f"W2 row layernorm {n}x{n} f32", [x], layernorm, settings),
            array_row(f"W2 transposed x.T + 1 {n}x{n} f32", [x], transposed, settings)]


# ----------------------------------------------------------------- W3 matmul

def w3(sizes: list[int], settings: Settings) -> list[Row]:
    """W3: float32 matmul of two n x n matrices, per n (GFLOP/s = 2 n^3 / time)."""
    rng = np.random.default_rng(0)
    fns = {"numpy": np.matmul, "torch": torch.matmul if torch else None,
           "jax": jax.numpy.matmul if jax else None, "fgrad": lambda a, b: a @ b}
    rows = []
    for n in sizes:
        a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
        rows.append(array_row(f"W3 matmul n={n} f32", [a, b], fns, settings, flops=2.0 * n**3))
    for n in sizes[1:2]:  # bfloat16 operands and result (NumPy: float32 between casts)
        a, b = (rng.standard_normal((n, n)).astype(BF16) for _ in range(2))
        rows.append(array_row(f"W3 matmul n={n} bf16", [a, b], BF16_MATMUL, settings,
                              flops=2.0 * n**3))
    for n in sizes[:2]:  # the epilogue goal: relu(x @ W + b) within 3% of x @ W alone
        a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
        c = rng.standard_normal(n).astype(np.float32)
        rows.append(array_row(f"W3 relu(a@b+c) n={n} f32", [a, b, c], EPILOGUE, settings,
                              flops=2.0 * n**3))
        if "llvm" in fgrad_backends():
            rows.append(epilogue_pair(n, [a, b, c], settings))
    return rows


def epilogue_pair(n: int, arrays: list[np.ndarray], settings: Settings) -> Row:
    """The epilogue goal as one row: fgrad-llvm's relu(a@b+c) and a@b on the same data,
    timed interleaved (harness.interleaved); its "vs NumPy" column is the fused call's time
    over the plain product's."""
    a, b, c = arrays

    def build(fn: Callable[..., Any], xs: list[np.ndarray]) -> Callable[[], Callable[[], Any]]:
        def call() -> Callable[[], Any]:
            jf, ts = fgrad.jit(fn), [Tensor(x) for x in xs]
            return lambda: fgrad_sync(jf(*ts))
        return call
    plain = "fgrad-llvm a@b"
    measures = interleaved({plain: build(lambda a, b: a @ b, [a, b]),
                            "fgrad-llvm": build(EPILOGUE["fgrad"], [a, b, c])}, settings)
    return Row(f"W3 relu(a@b+c) vs a@b n={n} f32, interleaved (vs NumPy: vs fgrad's a@b)",
               measures, flops=2.0 * n**3, reference=plain)


BF16_MATMUL = {"numpy": lambda a, b: (a.astype(np.float32) @ b.astype(np.float32)).astype(BF16),
               "torch": torch.matmul if torch else None,
               "jax": jax.numpy.matmul if jax else None, "fgrad": lambda a, b: a @ b}
EPILOGUE = {"numpy": lambda a, b, c: np.maximum(a @ b + c, 0),
            "torch": lambda a, b, c: torch.relu(a @ b + c),
            "jax": lambda a, b, c: jax.nn.relu(a @ b + c),
            "fgrad": lambda a, b, c: (a @ b + c).relu()}


# ----------------------------------------------------------------- W4 conv2d

def _patches(x: np.ndarray) -> np.ndarray:
    """(N, C, H, W) -> (N*H*W, C*9): the 3x3 neighbourhoods of x padded by 1."""
    n, c, h, w = x.shape
    win = sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))
    return win.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * w, c * 9)


def conv_numpy(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """3x3 cross-correlation with padding 1 (im2col and one matmul) in NumPy."""
    n, _, h, wd = x.shape
    out = _patches(x) @ w.reshape(w.shape[0], -1).T
    return out.reshape(n, h, wd, -1).transpose(0, 3, 1, 2)


def conv_grad_numpy(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, ...]:
    """sum(conv(x, w)) and its gradients with respect to x and w, by hand in NumPy."""
    n, c, h, wd = x.shape
    patches = _patches(x)
    w_mat = w.reshape(w.shape[0], -1)
    total = (patches @ w_mat.T).sum()
    g = np.ones((n * h * wd, w.shape[0]), np.float32)
    g_w = (g.T @ patches).reshape(w.shape)
    g_patches = (g @ w_mat).reshape(n, h, wd, c, 3, 3)
    g_pad = np.zeros((n, c, h + 2, wd + 2), np.float32)
    for i in range(3):
        for j in range(3):
            g_pad[:, :, i:i + h, j:j + wd] += g_patches[..., i, j].transpose(0, 3, 1, 2)
    return total, g_pad[:, :, 1:-1, 1:-1], g_w


def conv_grad_torch(x: Any, w: Any) -> Any:
    """sum(conv2d(x, w)) and its gradients through torch.autograd."""
    x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
    total = torch.nn.functional.conv2d(x, w, padding=1).sum()
    return total, torch.autograd.grad(total, (x, w))


def conv_jax(x: Any, w: Any) -> Any:
    """3x3 cross-correlation with padding 1 (NCHW, OIHW) in JAX."""
    return jax.lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)))


def w4(batch: int, settings: Settings) -> list[Row]:
    """W4: conv2d of (batch, 3, 32, 32) with 32 3x3 filters, pad 1; forward, forward+backward."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
    w = (rng.standard_normal((32, 3, 3, 3)) / 5).astype(np.float32)
    fwd = {"numpy": conv_numpy,
           "torch": lambda x, w: torch.nn.functional.conv2d(x, w, padding=1),
           "jax": conv_jax, "fgrad": lambda x, w: x.conv2d(w, padding=1)}
    bwd = {"numpy": conv_grad_numpy, "torch": conv_grad_torch,
           "jax": lambda x, w: jax.value_and_grad(lambda x, w: conv_jax(x, w).sum(),
                                                  argnums=(0, 1))(x, w),
           "fgrad": lambda x, w: fgrad.value_and_grad(lambda x, w: x.conv2d(w, padding=1).sum(),
                                                      argnums=(0, 1))(x, w)}
    shape = f"{batch}x3x32x32, 32 3x3 filters, pad 1"
    return [array_row(f"W4 conv2d forward, {shape}", [x, w], fwd, settings),
            array_row(f"W4 conv2d forward+backward, {shape}", [x, w], bwd, settings)]
