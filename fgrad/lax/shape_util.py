"""Static shape rules of `jax.lax`: `broadcast_shapes` and `padtype_to_pads`.

Both take and return plain Python shapes (no arrays), so they work the same eagerly and
while tracing.
"""
from __future__ import annotations

from typing import Any, Sequence

from fgrad.core.methods.tensor_math import broadcast_shapes as _broadcast_shapes
from fgrad.core.errors import ArgumentError
from fgrad.lax._args import int_tuple

__all__ = ["broadcast_shapes", "padtype_to_pads"]


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """JAX's `lax.broadcast_shapes`: the shape NumPy broadcasting gives `shapes` (ranks are
    aligned on the right; size-1 axes stretch). Raises ValueError for incompatible
    shapes."""
    dims = [int_tuple("broadcast_shapes", s, "shape") for s in shapes]
    if not dims:
        return ()
    try:
        return _broadcast_shapes("lax.broadcast_shapes", *dims)
    except ArgumentError:
        raise ValueError(f"Incompatible shapes for broadcasting: shapes={dims} "
                         f"(lax.broadcast_shapes: each axis, aligned from the right, needs one "
                         f"size or size 1)") from None


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int],
                    window_strides: Sequence[int], padding: Any) -> list[tuple[int, int]]:
    """JAX's `lax.padtype_to_pads`: the (lo, hi) padding per axis that 'VALID' (none),
    'SAME' (output size ceil(in / stride), the extra element on the high side) or
    'SAME_LOWER' (the extra element on the low side) mean for these windows."""
    op = "padtype_to_pads"
    shape = int_tuple(op, in_shape, "in_shape")
    window = int_tuple(op, window_shape, "window_shape")
    strides = int_tuple(op, window_strides, "window_strides")
    if not len(shape) == len(window) == len(strides):
        raise ValueError(f"lax.padtype_to_pads: in_shape {shape}, window_shape {window} and "
                         f"window_strides {strides} must have the same length")
    mode = padding.upper() if isinstance(padding, str) else padding
    if mode not in ("VALID", "SAME", "SAME_LOWER"):
        raise RuntimeError(f"Unrecognized padding type: expected 'VALID', 'SAME', or "
                           f"'SAME_LOWER', got {padding}.")
    if mode == "VALID":
        return [(0, 0)] * len(shape)
    if any(s < 1 for s in strides):
        raise ValueError(f"lax.padtype_to_pads: window_strides must be positive, got "
                         f"{strides}")
    pads = []
    for n, k, s in zip(shape, window, strides):
        total = max((-(-n // s) - 1) * s + k - n, 0)
        small, big = total // 2, total - total // 2
        pads.append((small, big) if mode == "SAME" else (big, small))
    return pads
