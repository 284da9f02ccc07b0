"""Tensor methods: convolution, pooling, normalization, attention, losses, dropout, einsum.

Convolutions live in conv_ops, pooling in pool_ops, losses in loss_ops and einsum in einsum;
NNOpsMixin gathers them with the layer-level helpers defined here. Randomness is explicit:
`dropout(p, key=k)` and `scaled_dot_product_attention(..., dropout_p, key_=k)` take a key
from `fgrad.random`; with no key they are the identity (evaluation mode), which replaces
tinygrad's global `Tensor.training` flag.
"""
from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

from fgrad.core import prims as P
from fgrad.core.dtypes import dtypes
from fgrad.core.errors import ArgumentError
from fgrad.core.prims._util import fmt_shape
from fgrad.core.methods import einsum as _einsum
from fgrad.core.methods.nn.conv_ops import ConvOpsMixin
from fgrad.core.methods.nn.loss_ops import LossOpsMixin
from fgrad.core.methods.nn.pool_ops import PoolOpsMixin

if TYPE_CHECKING:
    from fgrad.core.tensor import Tensor


def _axes(x: "Tensor", axis: int | Sequence[int]) -> tuple[int, ...]:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(x._axis(a) for a in axes)


def _repeat_heads(x: "Tensor", heads: int, op: str) -> "Tensor":
    """(..., H_kv, S, D) -> (..., heads, S, D), each kv head repeated heads // H_kv times."""
    if x.ndim < 3:
        raise ArgumentError(f"{op}: enable_gqa needs (..., heads, seq, dim) key/value, got "
                            f"{fmt_shape(x.shape)}")
    kv = x.shape[-3]
    if kv == 0 or heads % kv:
        raise ArgumentError(f"{op}: enable_gqa needs the query heads ({heads}) to be a multiple "
                            f"of the key/value heads ({kv})")
    lead, rest = x.shape[:-3], x.shape[-2:]
    grown = x.unsqueeze(-3).expand(lead + (kv, heads // kv) + rest)
    return grown.reshape(lead + (heads,) + rest)


def _causal_mask(q_len: int, k_len: int) -> "Tensor":
    rows = P.iota(dtypes.int32, (q_len, k_len), 0)
    cols = P.iota(dtypes.int32, (q_len, k_len), 1)
    return rows >= cols


class NNOpsMixin(ConvOpsMixin, PoolOpsMixin, LossOpsMixin):
    """Tensor methods: convolution, pooling, normalization, attention, losses, dropout, einsum."""

    __slots__ = ()

    @staticmethod
    def einsum(formula: str, *operands: Any, dtype: Any = None) -> "Tensor":
        """Einstein summation, as torch.einsum (e.g. Tensor.einsum('ij,jk->ik', a, b))."""
        return _einsum.einsum(formula, *operands, dtype=dtype)

    def linear(self, weight: "Tensor", bias: "Tensor | None" = None,
               dtype: Any = None) -> "Tensor":
        """self @ weight + bias, with weight (in, out); a 1-d weight scales elementwise."""
        if dtype is not None:
            x, weight = self.cast(dtype), weight.cast(dtype)
            bias = None if bias is None else bias.cast(dtype)
        else:
            x = self
        out = x * weight if weight.ndim == 1 else x.matmul(weight)
        return out if bias is None else out + bias

    def sequential(self, ll: Sequence[Callable[["Tensor"], "Tensor"]]) -> "Tensor":
        """Apply the callables in `ll` in order, each to the previous result."""
        return functools.reduce(lambda x, f: f(x), ll, cast("Tensor", self))

    def layernorm(self, axis: int | Sequence[int] = -1, eps: float = 1e-5) -> "Tensor":
        """Normalize to zero mean and unit (biased) variance over `axis`, no affine."""
        centered = self - self.mean(axis, keepdim=True)
        variance = (centered * centered).mean(axis, keepdim=True)
        return centered * (variance + eps).rsqrt()

    def batchnorm(self, weight: "Tensor | None", bias: "Tensor | None", mean: "Tensor",
                  invstd: "Tensor", axis: int | Sequence[int] = 1) -> "Tensor":
        """(self - mean) * weight * invstd + bias, the statistics laid along `axis`.

        mean, weight, bias and invstd have the shape of self's `axis` dims; an invstd of
        another rank is broadcast as is.
        """
        axes = _axes(cast("Tensor", self), axis)
        shape = tuple(d if i in axes else 1 for i, d in enumerate(self.shape))
        out = self - mean.reshape(shape)
        if weight is not None:
            out = out * weight.reshape(shape)
        out = out * (invstd.reshape(shape) if invstd.ndim == len(axes) else invstd)
        return out if bias is None else out + bias.reshape(shape)

    def dropout(self, p: float = 0.5, key: Any = None) -> "Tensor":
        """Zero each element with probability p and scale the rest by 1 / (1 - p).

        `key` (from fgrad.random) makes it a training-mode op; key=None is the identity
        (evaluation mode), as tinygrad with Tensor.training False.
        """
        if not 0 <= p <= 1:
            raise ArgumentError(f"dropout: p={p} is out of range [0, 1]")
        x = cast("Tensor", self)
        if key is None or p == 0:
            return x
        if p == 1:
            return x.zeros_like()
        from fgrad.core import random
        keep = random.bernoulli(key, 1.0 - p, x.shape)
        return keep.where(x * (1.0 / (1.0 - p)), 0)

    def scaled_dot_product_attention(self, key: "Tensor", value: "Tensor",
                                     attn_mask: "Tensor | None" = None, dropout_p: float = 0.0,
                                     is_causal: bool = False, enable_gqa: bool = False,
                                     key_: Any = None) -> "Tensor":
        """softmax(self @ key^T / sqrt(D) + mask) @ value; self is the query (..., L, D).

        attn_mask: bool (True keeps) or additive float, broadcast to (..., L, S). is_causal
        masks keys after each query position. enable_gqa repeats key/value heads (axis -3).
        Dropout on the weights needs a PRNG key as `key_`; without one it is skipped.
        """
        op = "scaled_dot_product_attention"
        q = self
        if enable_gqa and q.ndim < 3:
            raise ArgumentError(f"{op}: enable_gqa needs a (..., heads, seq, dim) query, got "
                                f"{fmt_shape(q.shape)}")
        if enable_gqa:
            key = _repeat_heads(key, q.shape[-3], op)
            value = _repeat_heads(value, q.shape[-3], op)
        if q.shape[-1] != key.shape[-1]:
            raise ArgumentError(f"{op}: query {fmt_shape(q.shape)} and key {fmt_shape(key.shape)} "
                                f"must share the last (feature) dimension")
        scores = q.matmul(key.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
        if is_causal:
            if attn_mask is not None:
                raise ArgumentError(f"{op}: pass either attn_mask or is_causal=True, not both")
            attn_mask = _causal_mask(scores.shape[-2], scores.shape[-1])
        if attn_mask is not None:
            bias = attn_mask.where(0.0, float("-inf")) if attn_mask.dtype == dtypes.bool \
                else attn_mask
            scores = scores + bias
        weights = scores.softmax(-1)
        weights = weights.dropout(dropout_p, key=key_) if dropout_p > 0 else weights
        return weights.matmul(value)
