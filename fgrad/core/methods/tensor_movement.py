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

    def reshape(self, *shape: Any, order: str = "C") -> "Tensor":
        """New shape with the same elements; one entry may be -1 (inferred), None keeps.
        order='F' reads and writes the elements in column-major order (NumPy's)."""
        if order != "C":
            from fgrad.core.methods.array_methods import reshape_order
            return reshape_order(cast("Tensor", self), shape, order)
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

    def transpose(self, dim0: Any = 1, dim1: int = 0, *axes: int) -> "Tensor":
        """Swap axes dim0 and dim1 (tinygrad's transpose; with no arguments the first two).
        NumPy's forms permute: a tuple or list of axes, `None` (reverse them) or three or more
        ints; a 0-d or 1-d Tensor's x.transpose() is itself."""
        if axes or dim0 is None or isinstance(dim0, (tuple, list)):
            from fgrad.core.methods.array_methods import permute_numpy
            return permute_numpy(cast("Tensor", self), dim0, dim1, axes)
        order = list(range(self.ndim))
        if len(order) < 2 and dim0 == 1 and dim1 == 0:
            return cast("Tensor", self)
        a, b = self._axis(dim0), self._axis(dim1)
        order[a], order[b] = order[b], order[a]
        return P.transpose(self, order)

    @property
    def T(self) -> "Tensor":  # noqa: N802
        """All axes reversed (the matrix transpose for 2-d)."""
        return P.transpose(self, tuple(reversed(range(self.ndim))))

    def flatten(self, start_dim: int = 0, end_dim: int = -1, *, order: str = "C") -> "Tensor":
        """Merge axes start_dim..end_dim into one; order='F' (NumPy's, all axes) reads the
        elements in column-major order."""
        if order != "C":
            if (start_dim, end_dim) != (0, -1):
                raise ArgumentError("Tensor.flatten: order= flattens all axes; drop start_dim "
                                    "and end_dim, or order")
            from fgrad.core.methods.array_methods import reshape_order
            return reshape_order(cast("Tensor", self), (-1,), order)
        if self.ndim == 0:
            return self.reshape(1)
        s, e = self._axis(start_dim), self._axis(end_dim)
        merged = int(np.prod(self.shape[s:e + 1]))
        return self.reshape(self.shape[:s] + (merged,) + self.shape[e + 1:])

    def unflatten(self, dim: int, sizes: Sequence[int]) -> "Tensor":
        """Split axis `dim` into `sizes`."""
        d = self._axis(dim)
        return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])

    def squeeze(self, dim: int | None = None, *,
                axis: int | Sequence[int] | None = None) -> "Tensor":
        """Drop size-1 axes (only `dim` if given; a non-1 `dim` is left alone). NumPy's
        axis= (an int or a tuple) requires every named axis to have length 1."""
        if axis is not None:
            from fgrad.core.methods.array_methods import numpy_squeeze
            return numpy_squeeze(cast("Tensor", self), dim, axis)
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
        """Functional updates: `x.at[idx].set(v)`, `.add(v)`, `.mul(v)`, `.max(v)`, `.min(v)`;
        `.get()`; all take JAX's `mode=` for out-of-range indices ("clip", "fill", "drop")."""
        return _IndexUpdateHelper(self)


class _IndexUpdateHelper:
    __slots__ = ("tensor",)

    def __init__(self, tensor: Any):
        self.tensor = tensor

    def __getitem__(self, index: Any) -> "_IndexUpdateRef":
        return _IndexUpdateRef(self.tensor, index)


_MODES = ("clip", "fill", "drop", "promise_in_bounds")


def _check_mode(mode: Any, op: str) -> str | None:
    if mode is None or mode in _MODES:
        return cast("str | None", mode)
    raise ArgumentError(f"x.at[...].{op}: unknown mode {mode!r}; use None (the default), "
                        f"'clip', 'fill', 'drop' or 'promise_in_bounds'")


def _fill_scalar(dtype: Any, fill_value: Any) -> Any:
    """The Python scalar that out-of-range reads give: `fill_value` cast to `dtype`, else
    JAX's default (NaN for floats, the minimum for signed ints, the maximum for unsigned,
    True for bool)."""
    if fill_value is None:
        if dtype.kind == "f":
            return float("nan")
        if dtype.kind == "b":
            return True
        info = np.iinfo(dtype.np)
        return int(info.min if dtype.kind == "i" else info.max)
    from fgrad.core.tensor import Tensor, Tracer
    if isinstance(fill_value, Tracer) or np.ndim(fill_value) != 0:
        raise ArgumentTypeError(f"x.at[...].get: fill_value must be a concrete scalar, got "
                                f"{type(fill_value).__name__} of shape {np.shape(fill_value)}")
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    with np.errstate(invalid="ignore", over="ignore"):
        return np.array(fill_value).astype(dtype.np).item()


def _bounded_index(x: Any, index: Any, mode: str) -> tuple[tuple[Any, ...], list[int]]:
    """`index` with every integer (array) index brought in range by `mode`: clamped into its
    axis ("clip"), else pointed one past the axis' end, at an element the caller pads in
    (returned: the axes to pad). Negative indices count from the end first, as in JAX."""
    from fgrad.core.methods.index_bounds import axis_index, position_dtype
    from fgrad.core.methods.indexing import _is_int, _normalize
    items: list[Any] = []
    pads: list[int] = []
    axis = 0
    for it in _normalize(x, index):
        if it is None or isinstance(it, slice):
            items.append(it)
            axis += it is not None
            continue
        n = x.shape[axis]
        if _is_int(it):
            i = int(it) + n if int(it) < 0 else int(it)
            if not 0 <= i < n:
                i = min(max(i, 0), max(n - 1, 0)) if mode == "clip" else n
            items.append(i)
        else:
            idx, ok = axis_index(it, n, position_dtype(n + 1), mode == "clip", mode != "clip")
            items.append(idx if ok is None else ok.where(idx, n))
        if mode != "clip":
            pads.append(axis)
        axis += 1
    if any(not isinstance(it, (int, slice, type(None))) for it in items):
        # Beside array indices an int is an advanced index too (NumPy's placement rule).
        items = [np.array(it, position_dtype(it + 1).np) if isinstance(it, int) else it
                 for it in items]
    return tuple(items), pads


def _pad_axes(x: Any, axes: list[int], value: Any) -> Any:
    """`x` with one element of `value` appended to each axis in `axes`."""
    return P.pad(x, [(0, 1 if a in axes else 0, 0) for a in range(x.ndim)], value) \
        if axes else x


class _IndexUpdateRef:
    """`x.at[index]`: get, or apply one of set/add/mul/max/min and get a new Tensor.

    `mode` handles out-of-range indices as in JAX: None (the default) is plain indexing (an
    error eagerly; under tracing reads clamp and updates are dropped), "clip" clamps each
    index into its axis, "fill" reads `fill_value` (NaN / the integer minimum / True by
    default), "drop" and "fill" drop updates; "promise_in_bounds" clamps reads and drops
    updates. `indices_are_sorted` and `unique_indices` are hints, accepted and ignored."""

    __slots__ = ("tensor", "index")

    def __init__(self, tensor: Any, index: Any):
        self.tensor, self.index = tensor, index

    def get(self, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: str | None = None, fill_value: Any = None,
            out_sharding: Any = None) -> "Tensor":
        """x[index]; with `mode`, out-of-range indices clip or read `fill_value`."""
        mode = _check_mode(mode, "get")
        if mode is None:
            return self.tensor[self.index]
        x = self.tensor
        read = "fill" if mode == "drop" else mode
        index, pads = _bounded_index(x, self.index, "clip" if read != "fill" else read)
        return _pad_axes(x, pads, _fill_scalar(x.dtype, fill_value))[index]

    def set(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: str | None = None) -> "Tensor":
        """A copy of x with x[index] replaced by values."""
        return self._apply(values, "set", mode)

    def add(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: str | None = None) -> "Tensor":
        """A copy with values added at index (repeated indices accumulate)."""
        return self._apply(values, "add", mode)

    def mul(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: str | None = None) -> "Tensor":
        """A copy with x[index] multiplied by values."""
        return self._apply(values, "mul", mode)

    multiply = mul

    def max(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: str | None = None) -> "Tensor":
        """A copy with x[index] = maximum(x[index], values)."""
        return self._apply(values, "max", mode)

    def min(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: str | None = None) -> "Tensor":
        """A copy with x[index] = minimum(x[index], values)."""
        return self._apply(values, "min", mode)

    def _apply(self, value: Any, op: str, mode: str | None) -> "Tensor":
        from fgrad.core.methods.indexing import index_update
        mode = _check_mode(mode, op)
        x = self.tensor
        if mode is None:
            return index_update(x, self.index, value, op)
        index, pads = _bounded_index(x, self.index, "clip" if mode == "clip" else "drop")
        out = index_update(_pad_axes(x, pads, 0), index, value, op)
        return P.slice_(out, (0,) * x.ndim, x.shape) if pads else out


__all__ = ["MovementMixin", "dtypes"]
