"""jax.nn's functions (activations, softmax family, one_hot, standardize) over Tensors.

They take arrays or Tensors (traced ones too) and follow jax.nn's arguments and numbers:
gelu is the tanh approximation by default (approximate=False: the erf form), softplus is
log(1 + exp(x)) computed without overflow, leaky_relu's slope defaults to 0.01.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.prims import log1p_p
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, Axis, asarray, axes_of, float_of, to_dtype
from fgrad.scipy.special import log_softmax, logsumexp, softmax

__all__ = ["celu", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish",
           "hard_tanh", "leaky_relu", "log_sigmoid", "log_softmax", "logsumexp", "one_hot",
           "relu", "relu6", "selu", "sigmoid", "silu", "soft_sign", "softmax", "softplus",
           "standardize", "swish"]


def _f(x: ArrayLike) -> Tensor:
    return float_of(asarray(x))


def relu(x: ArrayLike) -> Tensor:
    """max(x, 0) (gradient 0 at 0, as in JAX)."""
    t = asarray(x)
    return (t > 0).where(t, 0)


def relu6(x: ArrayLike) -> Tensor:
    """min(max(x, 0), 6)."""
    t = asarray(x)
    return (t > 0).where((t < 6).where(t, 6), 0)


def sigmoid(x: ArrayLike) -> Tensor:
    """1 / (1 + exp(-x))."""
    return _f(x).sigmoid()


def softplus(x: ArrayLike) -> Tensor:
    """log(1 + exp(x)), stable for large |x|."""
    t = _f(x)
    return t.maximum(0.0) + log1p_p.bind((-t.abs()).exp())


def log_sigmoid(x: ArrayLike) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x)."""
    return -softplus(-_f(x))


def silu(x: ArrayLike) -> Tensor:
    """x * sigmoid(x)."""
    t = _f(x)
    return t * t.sigmoid()


swish = silu


def gelu(x: ArrayLike, approximate: bool = True) -> Tensor:
    """x * Phi(x): the tanh approximation (default, as in JAX) or the exact erf form."""
    t = _f(x)
    if approximate:
        inner = math.sqrt(2 / math.pi) * (t + 0.044715 * t * t * t)
        return 0.5 * t * (1.0 + inner.tanh())
    return 0.5 * t * (1.0 + (t * (1 / math.sqrt(2))).erf())


def elu(x: ArrayLike, alpha: float = 1.0) -> Tensor:
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""
    from fgrad.core.prims import expm1_p
    t = _f(x)
    return (t > 0).where(t, alpha * expm1_p.bind((t > 0).where(0.0, t)))


def celu(x: ArrayLike, alpha: float = 1.0) -> Tensor:
    """max(x, 0) + alpha * min(exp(x / alpha) - 1, 0)."""
    from fgrad.core.prims import expm1_p
    t = _f(x)
    return (t > 0).where(t, alpha * expm1_p.bind((t > 0).where(0.0, t) / alpha))


def selu(x: ArrayLike) -> Tensor:
    """scale * elu(x, alpha) with the self-normalizing constants."""
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    return scale * elu(x, alpha)


def leaky_relu(x: ArrayLike, negative_slope: float = 0.01) -> Tensor:
    """x for x >= 0, negative_slope * x otherwise."""
    t = _f(x)
    return (t >= 0).where(t, negative_slope * t)


def hard_tanh(x: ArrayLike) -> Tensor:
    """x clipped to [-1, 1]."""
    t = _f(x)
    return (t > 1).where(1.0, (t < -1).where(-1.0, t))


def hard_sigmoid(x: ArrayLike) -> Tensor:
    """relu6(x + 3) / 6."""
    return relu6(_f(x) + 3.0) / 6.0


def hard_silu(x: ArrayLike) -> Tensor:
    """x * hard_sigmoid(x)."""
    t = _f(x)
    return t * hard_sigmoid(t)


hard_swish = hard_silu


def soft_sign(x: ArrayLike) -> Tensor:
    """x / (|x| + 1)."""
    t = _f(x)
    return t / (t.abs() + 1.0)


def glu(x: ArrayLike, axis: int = -1) -> Tensor:
    """a * sigmoid(b) for the two halves a, b of x along `axis`."""
    t = _f(x)
    ax = axes_of(axis, t.ndim, "glu")[0]
    n = t.shape[ax]
    if n % 2:
        raise ValueError(f"fgrad.nn.glu: axis {axis} has odd length {n}")
    a = t.shrink(tuple((0, n // 2) if i == ax else None for i in range(t.ndim)))
    b = t.shrink(tuple((n // 2, n) if i == ax else None for i in range(t.ndim)))
    return a * b.sigmoid()


def one_hot(x: ArrayLike, num_classes: int, *, dtype: Any = None, axis: int = -1) -> Tensor:
    """1.0 where the new axis's index equals x, else 0 (out-of-range values give all zeros)."""
    idx = asarray(x)
    out_ndim = idx.ndim + 1
    ax = axes_of(axis, out_ndim, "one_hot")[0]
    shape = [1] * out_ndim
    shape[ax] = num_classes
    classes = Tensor(np.arange(num_classes, dtype=np.int32).reshape(shape))
    expanded = idx.reshape(idx.shape[:ax] + (1,) + idx.shape[ax:])
    want = to_dtype(dtype) or dtypes.float32
    return (expanded == classes).cast(want)


def standardize(x: ArrayLike, axis: Axis = -1, mean: ArrayLike = None,
                variance: ArrayLike = None, epsilon: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(variance + epsilon) along `axis` (statistics computed if omitted)."""
    t = _f(x)
    axes = axes_of(axis, t.ndim, "standardize")
    mu = t.mean(axes, keepdim=True) if mean is None else asarray(mean)
    if variance is None:
        variance = (t * t).mean(axes, keepdim=True) - mu * mu
    return (t - mu) * (asarray(variance) + epsilon).rsqrt()
