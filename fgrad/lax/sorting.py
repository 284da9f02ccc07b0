"""`fgrad.lax.top_k`: JAX's `lax.top_k` on fgrad's `top_k` primitive."""
from __future__ import annotations

from typing import Any

from fgrad.core import prims as P
from fgrad.core.tensor import Tensor

__all__ = ["top_k"]


def top_k(operand: Any, k: int) -> tuple[Tensor, Tensor]:
    """(values, indices) of the `k` largest entries along the last axis of `operand`, largest
    first; equal entries keep their original order and NaN counts as the largest, as in
    `Tensor.topk` (native selection on the llvm backend). Indices are int32."""
    x = operand if isinstance(operand, Tensor) else Tensor(operand)
    values, indices = P.top_k(x, k, True)
    return values, indices
