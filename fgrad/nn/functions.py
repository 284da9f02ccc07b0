"""jax.nn's functions (activations, softmax family, one_hot, standardize) over Tensors.

They take arrays or Tensors (traced ones too) and follow jax.nn's arguments and numbers:
gelu is the tanh approximation by default (approximate=False: the erf form), softplus is
log(1 + exp(x)) computed without overflow, leaky_relu's slope defaults to 0.01. softmax and
log_softmax take JAX's `where=` mask: masked entries get probability 0 (log-probability
-inf) and take no part in the normalization; a fully masked slice gives all zeros (all
-inf), with zero gradients.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.prims import expm1_p, log1p_p
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import (ArrayLike, Axis, asarray, axes_of, float_of, is_scalar,
                               to_dtype)
from fgrad.numpy.shape import broadcast_to
from fgrad.scipy import special as _sp
from fgrad.scipy.special import logsumexp
from fgrad.transforms import stop_gradient

__all__ = ["celu", "dot_product_attention", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu",
           "hard_swish", "hard_tanh", "identity", "leaky_relu", "log1mexp", "log_sigmoid",
           "log_softmax", "logmeanexp", "logsumexp", "mish", "one_hot", "relu", "relu6", "selu",
           "sigmoid", "silu", "soft_sign", "softmax", "softplus", "sparse_plus",
           "sparse_sigmoid", "squareplus", "standardize", "swish", "tanh"]


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
    want = to_dtype(dtype) or dtypes.default_float
    return (expanded == classes).cast(want)


# ---------------------------------------------------------------------------- softmax
# family with where= masks and newer jax.nn activations

def _masked(x: Tensor, where: ArrayLike, axes: tuple[int, ...]) -> tuple[Tensor, Tensor,
                                                                         Tensor]:
    """(mask, x with masked entries at -inf, the masked max along axes (0 when empty))."""
    mask = asarray(where)
    if mask.dtype.is_float or mask.dtype.is_int:
        mask = mask != 0
    hidden = mask.where(x, -math.inf)
    peak = stop_gradient(hidden.max(axes, keepdim=True))
    return mask, hidden, peak.isfinite().where(peak, 0.0)


def softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Tensor:
    """exp(x) / sum(exp(x)) along `axis`; with `where`, over the entries where it is True
    only (the others get 0)."""
    if where is None:
        return _sp.softmax(x, axis)
    t = _f(x)
    axes = axes_of(axis, t.ndim, "softmax")
    mask, hidden, peak = _masked(t, where, axes)
    e = (hidden - peak).exp()
    total = e.sum(axes, keepdim=True)
    return mask.where(e / (total == 0).where(1.0, total), 0.0)


def log_softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Tensor:
    """x - logsumexp(x) along `axis`; with `where`, normalized over the entries where it is
    True (the others are -inf)."""
    if where is None:
        return _sp.log_softmax(x, axis)
    t = _f(x)
    axes = axes_of(axis, t.ndim, "log_softmax")
    mask, hidden, peak = _masked(t, where, axes)
    shifted = hidden - peak
    total = shifted.exp().sum(axes, keepdim=True)
    return mask.where(shifted - (total == 0).where(1.0, total).log(), -math.inf)


def identity(x: ArrayLike) -> Tensor:
    """x itself (as a Tensor)."""
    return asarray(x)


def tanh(x: ArrayLike) -> Tensor:
    """The hyperbolic tangent (jax.nn.tanh is jnp.tanh)."""
    return _f(x).tanh()


def mish(x: ArrayLike) -> Tensor:
    """x * tanh(softplus(x))."""
    t = _f(x)
    return t * softplus(t).tanh()


def squareplus(x: ArrayLike, b: ArrayLike = 4) -> Tensor:
    """(x + sqrt(x^2 + b)) / 2, a smooth relu."""
    t = _f(x)
    return (t + (t * t + b).sqrt()) / 2.0


def sparse_plus(x: ArrayLike) -> Tensor:
    """0 for x <= -1, x for x >= 1, (x + 1)^2 / 4 between."""
    t = _f(x)
    return (t <= -1.0).where(0.0, (t >= 1.0).where(t, (t + 1.0) * (t + 1.0) / 4.0))


def sparse_sigmoid(x: ArrayLike) -> Tensor:
    """clip(x + 1, 0, 2) / 2, the derivative of sparse_plus."""
    return 0.5 * (_f(x) + 1.0).maximum(0.0).minimum(2.0)


def log1mexp(x: ArrayLike) -> Tensor:
    """log(1 - exp(-x)) for x >= 0, accurate near 0 and for large x."""
    t = _f(x)
    small = t < math.log(2.0)
    near = (-expm1_p.bind(-small.where(t, 1.0))).log()
    far = log1p_p.bind(-(-small.where(1.0, t)).exp())
    return small.where(near, far)


def logmeanexp(x: ArrayLike, axis: Axis = None, where: ArrayLike | None = None,
               keepdims: bool = False) -> Tensor:
    """log(mean(exp(x))) along `axis` (over the entries where `where` is True)."""
    t = _f(x)
    axes = axes_of(axis, t.ndim, "logmeanexp")
    lse = _sp.logsumexp(t, axis=axes, keepdims=keepdims, where=where)
    if where is None:
        return lse - math.log(math.prod(t.shape[a] for a in axes))
    mask = broadcast_to(asarray(where) != 0, t.shape)
    return lse - mask.cast(t.dtype).sum(axes, keepdim=keepdims).log()


def standardize(x: ArrayLike, axis: Axis = -1, mean: ArrayLike | None = None,
                variance: ArrayLike | None = None, epsilon: ArrayLike = 1e-5,
                where: ArrayLike | None = None, *, algorithm: str = "fast") -> Tensor:
    """(x - mean) / sqrt(variance + epsilon) along `axis`; statistics computed over the
    entries where `where` is True when omitted, by E[x^2] - E[x]^2 clipped at 0 ('fast') or
    E[(x - mean)^2] ('stable')."""
    if algorithm not in ("fast", "stable"):
        raise ValueError(f"fgrad.nn.standardize: unknown algorithm {algorithm!r}; expected "
                         f"'fast' or 'stable'")
    t = _f(x)
    axes = axes_of(axis, t.ndim, "standardize")
    mask = None if where is None else broadcast_to(asarray(where) != 0, t.shape)

    def avg(v: Tensor) -> Tensor:
        if mask is None:
            return v.mean(axes, keepdim=True)
        total = mask.where(v, 0.0).sum(axes, keepdim=True)
        return total / mask.cast(v.dtype).sum(axes, keepdim=True)
    mu: Any = avg(t) if mean is None else mean if is_scalar(mean) else asarray(mean)
    if variance is None:
        if algorithm == "stable":
            variance = avg((t - mu) * (t - mu))
        else:
            variance = (avg(t * t) - mu * mu).maximum(0.0)
    if is_scalar(variance) and is_scalar(epsilon):   # Python numbers stay weakly typed
        return (t - mu) * (1.0 / math.sqrt(float(variance) + float(epsilon)))
    return (t - mu) * (asarray(variance) + epsilon).rsqrt()


def _attention_4d(x: ArrayLike, name: str) -> Tensor:
    t = asarray(x)
    if t.ndim > 4 or (t.ndim < 3 and name in ("query", "key", "value")):
        raise ValueError(f"fgrad.nn.dot_product_attention: {name} of shape {t.shape} must be "
                         f"4-d (B, T, N, H) or 3-d (T, N, H) for query/key/value and at most "
                         f"4-d for bias/mask")
    return t.reshape((1,) * (4 - t.ndim) + t.shape)


def _check_logit_operand(t: Tensor, name: str, want: tuple[int, ...]) -> None:
    """`t` (4-d) must broadcast to the logits' (B, N, T, S) without growing them."""
    if any(d not in (1, w) for d, w in zip(t.shape, want)):
        raise ValueError(f"fgrad.nn.dot_product_attention: {name} of shape {t.shape} does "
                         f"not broadcast to the logits' (B, N, T, S) = {want}; give each "
                         f"axis that size or 1")


def _attention_mask(mask: Tensor | None, is_causal: bool, t: int, s: int,
                    window: tuple[int, int] | None, q_len: Tensor | None,
                    kv_len: Tensor | None) -> Tensor | None:
    """The bool (..., T, S) mask of logits that take part (None: all), as JAX combines it."""
    parts = [] if mask is None else [mask]
    qpos = Tensor(np.arange(t, dtype=np.int32).reshape(t, 1))
    kpos = Tensor(np.arange(s, dtype=np.int32).reshape(1, s))
    if is_causal:
        parts.append(qpos >= kpos)
    if window is not None:
        parts.append((qpos <= kpos + window[0]) & (qpos >= kpos - window[1]))
    if q_len is not None:
        parts.append(qpos.reshape(1, 1, t, 1) < q_len.reshape(-1, 1, 1, 1))
    if kv_len is not None:
        parts.append(kpos.reshape(1, 1, 1, s) < kv_len.reshape(-1, 1, 1, 1))
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = out & p
    return out


def dot_product_attention(query: ArrayLike, key: ArrayLike, value: ArrayLike,
                          bias: ArrayLike | None = None, mask: ArrayLike | None = None, *,
                          scale: float | None = None, is_causal: bool = False,
                          query_seq_lengths: ArrayLike | None = None,
                          key_value_seq_lengths: ArrayLike | None = None,
                          local_window_size: int | tuple[int, int] | None = None,
                          implementation: str | None = None,
                          return_residual: bool = False) -> Any:
    """softmax(scale * Q K^T + bias, masked) V per head, in jax.nn's (B, T, N, H) layout.

    query (B, T, N, H) or (T, N, H); key and value (B, S, K, H) with N a multiple of K
    (grouped-query attention; K == 1 is multi-query). bias and the bool mask (True takes
    part) broadcast to (B, N, T, S); scale defaults to 1/sqrt(H); is_causal keeps key
    positions <= the query position. As in JAX, masked logits get a large negative value (a
    fully masked row attends uniformly), logits are float32 (or wider) and the softmax runs
    in float32. Returns an array shaped like query, and with return_residual also the
    logsumexp of the logits, (B, T, N)."""
    op = "fgrad.nn.dot_product_attention"
    if implementation not in (None, "xla"):
        raise ValueError(f"{op}: implementation={implementation!r} is not available in fgrad; "
                         f"pass None or 'xla'")
    out_shape = asarray(query).shape
    q, k, v = (_attention_4d(a, n) for a, n in ((query, "query"), (key, "key"),
                                                 (value, "value")))
    b_, s_, kh, h = k.shape
    if v.shape != k.shape or v.dtype != k.dtype or q.dtype != k.dtype:
        raise ValueError(f"{op}: value {v.shape} {v.dtype.np.name} must match key {k.shape} "
                         f"{k.dtype.np.name}, and query's dtype ({q.dtype.np.name}) too")
    if q.shape[0] != b_ or q.shape[3] != h or q.shape[2] % kh:
        raise ValueError(f"{op}: query {q.shape} must be (B, T, N, H) with key's B={b_} and "
                         f"H={h}, and N a multiple of key's {kh} heads")
    _, t_, n_, _ = q.shape
    g = n_ // kh
    logit_dtype = dtypes.float64 if q.dtype == dtypes.float64 else dtypes.float32
    qg = q.cast(logit_dtype).reshape(b_, t_, kh, g, h).permute(0, 2, 3, 1, 4)
    kt = k.cast(logit_dtype).permute(0, 2, 3, 1).reshape(b_, kh, 1, h, s_)
    logits = qg.matmul(kt).reshape(b_, n_, t_, s_)   # head n = kv head n // g, as in JAX
    logits = logits * Tensor(1.0 / math.sqrt(h) if scale is None else scale, logit_dtype)
    want = (b_, n_, t_, s_)
    if bias is not None:
        bias_t = _attention_4d(bias, "bias")
        _check_logit_operand(bias_t, "bias", want)
        logits = (logits + bias_t).cast(logit_dtype)
    mask_t = None
    if mask is not None:
        mask_t = _attention_4d(mask, "mask")
        if mask_t.dtype != dtypes.bool:
            raise ValueError(f"{op}: mask must be bool (True takes part), got "
                             f"{mask_t.dtype.np.name}; pass an additive mask as bias")
        _check_logit_operand(mask_t, "mask", want)
    window = (local_window_size, local_window_size) if isinstance(local_window_size, int) \
        else local_window_size
    q_len = None if query_seq_lengths is None else asarray(query_seq_lengths)
    kv_len = None if key_value_seq_lengths is None else asarray(key_value_seq_lengths)
    keep = _attention_mask(mask_t, is_causal, t_, s_, window, q_len, kv_len)
    if keep is not None:
        big = min(float(np.finfo(logit_dtype.np).max), float(np.finfo(np.float32).max))
        logits = keep.where(logits, Tensor(-0.7 * big, logit_dtype))
    logits32 = logits.cast(dtypes.float32)
    probs = softmax(logits32, axis=-1).cast(k.dtype).reshape(b_, kh, g, t_, s_)
    vg = v.permute(0, 2, 1, 3).reshape(b_, kh, 1, s_, h)
    out = probs.matmul(vg).permute(0, 3, 1, 2, 4).reshape(b_, t_, n_, h)
    if q_len is not None:
        rows = Tensor(np.arange(t_, dtype=np.int32).reshape(1, t_, 1, 1))
        out = out * (rows < q_len.reshape(-1, 1, 1, 1)).cast(out.dtype)
    out = out.reshape(out_shape)
    if not return_residual:
        return out
    lse = logsumexp(logits32, axis=-1).cast(k.dtype).permute(0, 2, 1).detach()
    return out, lse.reshape(out_shape[:-1])
