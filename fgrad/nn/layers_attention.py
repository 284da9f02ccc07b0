"""MultiHeadAttention: multi-head scaled dot-product attention with input/output projections.

Parameters are laid out as in torch.nn.MultiheadAttention (in_proj_weight holds the q, k, v
projections stacked; out_proj is a Linear), so torch weights load unchanged. Inputs are
batch-first: (..., L, E).
"""
from __future__ import annotations

from fgrad.core.tensor import Tensor, as_tensor
from fgrad.nn.layers import Linear, split_key
from fgrad.nn.module import Module

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(Module):
    """`y = mha(query, key, value)` with `num_heads` heads of size embed_dim // num_heads.

    Initialisation as PyTorch: in_proj_weight (3E, E) Glorot-uniform, in_proj_bias and
    out_proj.bias zero, out_proj.weight uniform ±1/sqrt(E).
    """

    in_proj_weight: Tensor
    in_proj_bias: Tensor | None
    out_proj: Linear

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0,
                 bias: bool = True, *, key: Tensor) -> None:
        if embed_dim % num_heads:
            raise ValueError(f"MultiHeadAttention: embed_dim ({embed_dim}) must be divisible "
                             f"by num_heads ({num_heads})")
        k_in, k_out = split_key(key, 2)
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.in_proj_weight = Tensor.glorot_uniform(3 * embed_dim, embed_dim, key=k_in)
        self.in_proj_bias = Tensor.zeros(3 * embed_dim) if bias else None
        out_proj = Linear(embed_dim, embed_dim, bias, key=k_out)
        self.out_proj = out_proj.replace(bias=Tensor.zeros(embed_dim)) if bias else out_proj

    def _heads(self, x: Tensor, index: int) -> Tensor:
        """Project `x` (..., S, E) with slice `index` of in_proj, split into (..., H, S, D)."""
        e = self.embed_dim
        w = self.in_proj_weight[index * e:(index + 1) * e]
        b = None if self.in_proj_bias is None else self.in_proj_bias[index * e:(index + 1) * e]
        y = x.linear(w.T, b)
        y = y.reshape(y.shape[:-1] + (self.num_heads, e // self.num_heads))
        return y.transpose(-3, -2)

    def __call__(self, query: Tensor, key: Tensor | None = None, value: Tensor | None = None,
                 *, attn_mask: Tensor | None = None, is_causal: bool = False,
                 training: bool | None = None, dropout_key: Tensor | None = None) -> Tensor:
        """Attend from `query` (..., L, E) to `key`/`value` (..., S, E); self-attention when
        they are omitted. attn_mask broadcasts to (..., H, L, S): bool (True = may attend,
        as `scaled_dot_product_attention`; the opposite of torch's MHA) or additive float.
        With dropout > 0 pass `training=`; training needs `dropout_key=`. Returns (..., L, E).
        """
        query = as_tensor(query)
        key = query if key is None else as_tensor(key)
        value = key if value is None else as_tensor(value)
        if query.shape[-1] != self.embed_dim:
            raise ValueError(f"MultiHeadAttention: query has {query.shape[-1]} features, "
                             f"expected embed_dim={self.embed_dim}")
        dropout_p = self._dropout_p(training, dropout_key)
        q, k, v = self._heads(query, 0), self._heads(key, 1), self._heads(value, 2)
        out = q.scaled_dot_product_attention(k, v, attn_mask, dropout_p, is_causal,
                                             key_=dropout_key)
        out = out.transpose(-3, -2)
        return self.out_proj(out.reshape(out.shape[:-2] + (self.embed_dim,)))

    def _dropout_p(self, training: bool | None, dropout_key: Tensor | None) -> float:
        if self.dropout == 0:
            return 0.0
        if training is None:
            raise ValueError("MultiHeadAttention: dropout > 0, so pass training=True or "
                             "training=False")
        if training and dropout_key is None:
            raise ValueError("MultiHeadAttention: training with dropout needs dropout_key=")
        return self.dropout if training else 0.0

    @property
    def head_dim(self) -> int:
        """embed_dim // num_heads."""
        return self.embed_dim // self.num_heads

