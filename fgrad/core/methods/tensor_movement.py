"""Tensor movement: reshape/permute/expand/pad/flip, NumPy-style indexing, and `x.at[...]`."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence, cast

import numpy as np

from fgrad.core import prims as P
from fgrad.core.dtypes import dtypes
from fgrad.core.errors import ArgumentError, ArgumentTypeError, IndexRangeError
from fgrad.core.prims._util import fmt_shape

if TYPE_CHECKING:
    from fgrad.core.tensor import Tensor


def _shape_args(shape: tuple[Any, ...]) -> tuple[Any, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return shape


class MovementMixin:
    """Shape-changing methods for Tensor."""

    __slots__ = ()

    def reshape(self, *shape: Any) -> "Tensor":
        """New shape with the same elements; one entry may be -1 (inferred), None keeps."""
        shape = _shape_args(shape)
        shape = tuple(self.shape[i] if s is None else int(s) for i, s in enumerate(shape))
        if shape.count(-1) > 1:
            raise ArgumentError(f"reshape: only one -1 allowed, got {shape}")
        if -1 in shape:
            known = int(np.prod([d for d in shape if d != -1]))
            if known == 0 or self.numel() % known:
                raise ArgumentError(f"reshape: cannot reshape {fmt_shape(self.shape)} into "
                                    f"{fmt_shape(shape)}")
            shape = tuple(self.numel() // known if d == -1 else d for d in shape)
        return P.reshape(self, shape)

    def view(self, *shape: Any) -> "Tensor":
        """Alias of reshape."""
        return self.reshape(*shape)

    def expand(self, *shape: Any) -> "Tensor":
        """Broadcast to `shape`; -1 keeps a dimension."""
        from fgrad.core.methods.tensor_math import broadcast_to
        shape = _shape_args(shape)
        lead = len(shape) - self.ndim
        full = tuple(self.shape[i - lead] if s == -1 else int(s) for i, s in enumerate(shape))
        return broadcast_to(cast("Tensor", self), full)

    def permute(self, *order: Any) -> "Tensor":
        """Reorder the axes."""
        order = tuple(self._axis(int(o)) for o in _shape_args(order))
        return P.transpose(self, order)

    def transpose(self, dim0: int = 1, dim1: int = 0) -> "Tensor":
        """Swap two axes."""
        order = list(range(self.ndim))
        a, b = self._axis(dim0), self._axis(dim1)
        order[a], order[b] = order[b], order[a]
        return P.transpose(self, order)

    @property
    def T(self) -> "Tensor":  # noqa: N802
        """All axes reversed (the matrix transpose for 2-d)."""
        return P.transpose(self, tuple(reversed(range(self.ndim))))

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
        """Merge axes start_dim..end_dim into one."""
        if self.ndim == 0:
            return self.reshape(1)
        s, e = self._axis(start_dim), self._axis(end_dim)
        merged = int(np.prod(self.shape[s:e + 1]))
        return self.reshape(self.shape[:s] + (merged,) + self.shape[e + 1:])

    def unflatten(self, dim: int, sizes: Sequence[int]) -> "Tensor":
        """Split axis `dim` into `sizes`."""
        d = self._axis(dim)
        return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])

    def squeeze(self, dim: int | None = None) -> "Tensor":
        """Drop size-1 axes (only `dim` if given; a non-1 `dim` is left alone)."""
        if dim is None:
            return self.reshape(tuple(d for d in self.shape if d != 1))
        d = self._axis(dim)  # 0-d: only 0 and -1 are valid
        if self.ndim == 0 or self.shape[d] != 1:
            return cast("Tensor", self)
        return self.reshape(self.shape[:d] + self.shape[d + 1:])

    def unsqueeze(self, dim: int) -> "Tensor":
        """Insert a size-1 axis at `dim` (negative counts from the end of the result)."""
        n = self.ndim + 1
        if not -n <= dim < n:
            raise IndexRangeError(f"unsqueeze: dim {dim} out of range for {self.ndim}-d Tensor")
        d = dim % n
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

    def shrink(self, arg: Sequence[tuple[int, int] | None]) -> "Tensor":
        """Keep [start, end) per axis (None keeps the whole axis)."""
        bounds = [(0, n) if a is None else a for a, n in zip(arg, self.shape, strict=True)]
        return P.slice_(self, [b[0] for b in bounds], [b[1] for b in bounds])

    def flip(self, *axis: Any) -> "Tensor":
        """Reverse along the given axes."""
        axes = tuple(self._axis(int(a)) for a in _shape_args(axis))
        if len(set(axes)) != len(axes):
            raise ArgumentError(f"flip: axis {tuple(_shape_args(axis))} names an axis twice "
                                f"(shape {self.shape})")
        return P.rev(self, axes)

    # ------------------------------------------------------------------ indexing
    def __getitem__(self, index: Any) -> "Tensor":
        from fgrad.core.methods.indexing import getitem
        return getitem(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        raise ArgumentTypeError("fgrad Tensors are immutable; use x = x.at[index].set(value)")

    @property
    def at(self) -> "_IndexUpdateHelper":
        """Functional updates: `x.at[idx].set(v)`, `.add(v)`, `.mul(v)`, `.max(v)`, `.min(v)`."""
        return _IndexUpdateHelper(self)


class _IndexUpdateHelper:
    __slots__ = ("tensor",)

    def __init__(self, tensor: Any):
        self.tensor = tensor

    def __getitem__(self, index: Any) -> "_IndexUpdateRef":
        return _IndexUpdateRef(self.tensor, index)


class _IndexUpdateRef:
    """`x.at[index]`: apply one of set/add/mul/max/min and get a new Tensor."""

    __slots__ = ("tensor", "index")

    def __init__(self, tensor: Any, index: Any):
        self.tensor, self.index = tensor, index

    def get(self) -> "Tensor":
        """Same as x[index]."""
        return self.tensor[self.index]

    def set(self, value: Any) -> "Tensor":
        """A copy of x with x[index] replaced by value."""
        return self._apply(value, "set")

    def add(self, value: Any) -> "Tensor":
        """A copy with value added at index (repeated indices accumulate)."""
        return self._apply(value, "add")

    def mul(self, value: Any) -> "Tensor":
        """A copy with x[index] multiplied by value."""
        return self._apply(value, "mul")

    def max(self, value: Any) -> "Tensor":
        """A copy with x[index] = maximum(x[index], value)."""
        return self._apply(value, "max")

    def min(self, value: Any) -> "Tensor":
        """A copy with x[index] = minimum(x[index], value)."""
        return self._apply(value, "min")

    def _apply(self, value: Any, mode: str) -> "Tensor":
        from fgrad.core.methods.indexing import index_update
        return index_update(self.tensor, self.index, value, mode)


__all__ = ["MovementMixin", "dtypes"]
