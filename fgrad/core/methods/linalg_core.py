"""matmul on top of dot_general: NumPy's rules for 1-d operands and batch broadcasting."""
from __future__ import annotations

from typing import Any

from fgrad.core import prims as P
from fgrad.core.precision import promote_checked
from fgrad.core.methods.tensor_math import broadcast_shapes, broadcast_to
from fgrad.core.errors import ArgumentError


def matmul(x: Any, y: Any) -> Any:
    """`x @ y` (dtypes promoted; 1-d operands are treated as row/column vectors)."""
    if x.ndim == 0 or y.ndim == 0:
        raise ArgumentError(f"matmul: both operands need at least 1 dimension, got shapes "
                            f"{x.shape} and {y.shape}; use * for scalars")
    dtype = promote_checked(x.dtype, y.dtype, "matmul")
    x, y = x.cast(dtype), y.cast(dtype)
    x2 = x.reshape(1, -1) if x.ndim == 1 else x
    y2 = y.reshape(-1, 1) if y.ndim == 1 else y
    if x2.shape[-1] != y2.shape[-2]:
        raise ArgumentError(f"matmul: inner dimensions differ: {x.shape} @ {y.shape} "
                            f"({x2.shape[-1]} != {y2.shape[-2]})")
    batch = broadcast_shapes("matmul", x2.shape[:-2], y2.shape[:-2])
    nb = len(batch)
    if x2.ndim == 2 and nb == 0:
        out = P.dot_general(x2, y2, (((1,), (0,)), ((), ())))
    elif y2.ndim == 2 and x2.ndim > 2:
        out = P.dot_general(x2, y2, (((x2.ndim - 1,), (0,)), ((), ())))
    else:
        x3 = broadcast_to(x2, batch + x2.shape[-2:])
        y3 = broadcast_to(y2, batch + y2.shape[-2:])
        b = tuple(range(nb))
        out = P.dot_general(x3, y3, (((nb + 1,), (nb,)), (b, b)))
    if x.ndim == 1:
        out = out.reshape(out.shape[:-2] + out.shape[-1:])
    if y.ndim == 1:
        out = out.reshape(out.shape[:-1])
    return out
