"""Index arithmetic that neither wraps nor leaks across axes.

Positions are computed in int32 while they fit and in int64 past 2**31 - 1. Under tracing
(where indices are not known) each axis' index is clamped into that axis before the
positions of several axes are combined, so an out-of-range index reads the nearest element
of its own axis (JAX's gather default) instead of an element of another row; scatters built
here drop out-of-range updates (JAX's `.at[]` default) instead of writing them into a
clamped element. Eagerly, out-of-range indices raise IndexError before any of this runs.
"""
from __future__ import annotations

from typing import Any

from fgrad.core import prims as P
from fgrad.core.dtypes import DType, dtypes

INT32_LIMIT = 2 ** 31


def position_dtype(count: int) -> DType:
    """The index dtype that can address `count` positions."""
    return dtypes.int32 if count < INT32_LIMIT else dtypes.int64


def axis_index(idx: Any, n: int, dtype: DType, clamp: bool, check: bool = False
               ) -> tuple[Any, Any]:
    """`idx` into an axis of length `n` as `dtype`, negative entries counted from the end;
    with `clamp`, clamped into [0, n); with `check`, also a bool mask of the entries that
    were in range (else None). Traced indices need both; known ones are checked eagerly."""
    if n >= INT32_LIMIT and idx.dtype.itemsize < 8:
        idx = idx.cast(dtypes.int64)  # idx + n must not overflow
    if not idx.dtype.is_unsigned:
        idx = (idx >= 0).where(idx, idx + n)
    valid = None
    if check:
        valid = (idx < n) if idx.dtype.is_unsigned else (idx >= 0) & (idx < n)
    if clamp:
        idx = idx.maximum(0).minimum(max(n - 1, 0))
    return idx.cast(dtype), valid


def combine_valid(a: Any, b: Any) -> Any:
    """The conjunction of two optional masks."""
    if a is None:
        return b
    return a if b is None else a & b


def scatter_dropping(flat: Any, positions: Any, values: Any, mode: str, valid: Any) -> Any:
    """`P.scatter(flat, positions, values, mode)` where updates with `valid` False (same shape
    as positions) are dropped: they go to one extra element that is cut off afterwards."""
    if valid is None:
        return P.scatter(flat, positions, values, mode)
    n = flat.shape[0]
    extended = P.pad(flat, [(0, 1, 0)] + [(0, 0, 0)] * (flat.ndim - 1))
    aimed = valid.where(positions, positions.full_like(n))
    out = P.scatter(extended, aimed, values, mode)
    return P.slice_(out, (0,) * out.ndim, (n,) + tuple(out.shape[1:]))
