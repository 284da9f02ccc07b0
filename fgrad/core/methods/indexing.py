"""NumPy-style `__getitem__` and `x.at[index]` updates, built from slice/rev/reshape/gather.

Basic indices (ints, slices with any step, None, ...) become views; integer arrays become one
gather on the flattened indexed axes (NumPy's advanced indexing, including its rule that
separated advanced indices move to the front). Bool masks work eagerly only.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from fgrad.core import prims as P
from fgrad.core.dtypes import dtypes
from fgrad.core.methods.index_bounds import (axis_index, combine_valid, position_dtype,
                                     scatter_dropping)
from fgrad.core.errors import IndexRangeError


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _normalize(tensor: Any, index: Any) -> list[Any]:
    from fgrad.core.tensor import Tensor
    items = list(index) if isinstance(index, tuple) else [index]
    out: list[Any] = []
    for it in items:
        if isinstance(it, (list, tuple, np.ndarray)) or (
                isinstance(it, Tensor) and (it.ndim > 0 or not it.dtype.is_int)):
            it = it if isinstance(it, Tensor) else Tensor(_index_array(it))
            if it.dtype == dtypes.bool:
                out.append(_Mask(it))
                continue
            if not it.dtype.is_int:
                raise IndexRangeError(f"tensors used as indices must be integer or bool, "
                                      f"got {it.dtype.name}")
        elif isinstance(it, Tensor):
            it = it if not _concrete_ok(it) else int(it.item())
        elif isinstance(it, (bool, np.bool_)):
            raise IndexRangeError("a Python bool is not a valid index; use a bool Tensor mask")
        elif isinstance(it, slice):
            it = _plain_slice(it)
        elif not (_is_int(it) or it is None or it is Ellipsis):
            raise IndexRangeError(f"invalid index {it!r} of type {type(it).__name__}")
        out.append(it)
    if sum(it is Ellipsis for it in out) > 1:
        raise IndexRangeError("an index can only have a single ellipsis ('...')")
    used = sum(it.ndim if isinstance(it, _Mask) else 1
               for it in out if it is not None and it is not Ellipsis)
    if used > tensor.ndim:
        raise IndexRangeError(f"too many indices for a Tensor of shape {tensor.shape}: "
                              f"{used} given")
    if Ellipsis in [it if it is Ellipsis else None for it in out]:
        pos = next(i for i, it in enumerate(out) if it is Ellipsis)
        out[pos:pos + 1] = [slice(None)] * (tensor.ndim - used)
    else:
        out += [slice(None)] * (tensor.ndim - used)
    return _expand_masks(tensor, out)


class _Mask:
    """A bool-mask index, kept whole until its axes are known."""

    def __init__(self, mask: Any):
        self.mask, self.ndim = mask, mask.ndim


def _expand_masks(tensor: Any, items: list[Any]) -> list[Any]:
    """Replace each bool mask by the integer indices of its True entries, after checking
    that its shape equals the shape of the axes it covers (as PyTorch and NumPy do)."""
    out, axis = [], 0
    for it in items:
        if isinstance(it, _Mask):
            covered = tuple(tensor.shape[axis:axis + it.ndim])
            if tuple(it.mask.shape) != covered:
                raise IndexRangeError(f"the bool mask of shape {tuple(it.mask.shape)} does not "
                                      f"match the shape {covered} of the indexed axes "
                                      f"{axis}..{axis + it.ndim - 1} of a Tensor of shape "
                                      f"{tuple(tensor.shape)}")
            out.extend(_mask_to_indices(it.mask))
            axis += it.ndim
            continue
        axis += it is not None
        out.append(it)
    return out


def _plain_slice(s: slice) -> slice:
    """A slice whose bounds are Python ints or None (0-d integer Tensors are converted)."""
    from fgrad.core.errors import ArgumentTypeError
    from fgrad.core.tensor import Tensor
    bounds = []
    for b in (s.start, s.stop, s.step):
        if isinstance(b, Tensor):
            if b.ndim or not b.dtype.is_int:
                raise ArgumentTypeError(f"slice bounds must be ints or 0-d integer Tensors, "
                                        f"got a Tensor of shape {b.shape} and dtype "
                                        f"{b.dtype.name}")
            b = int(b.item())
        bounds.append(b)
    return slice(*bounds)


def _index_array(it: Any) -> np.ndarray:
    arr = np.asarray(it)
    return arr.astype(np.int32) if arr.size == 0 and arr.dtype.kind == "f" else arr


def _concrete_ok(t: Any) -> bool:
    from fgrad.core.tensor import Tracer
    return not isinstance(t, Tracer)


def _mask_to_indices(mask: Any) -> list[Any]:
    from fgrad.core.tensor import Tensor, Tracer
    if isinstance(mask, Tracer):
        raise IndexRangeError("boolean mask indexing has a data-dependent shape and cannot be "
                              "traced; use Tensor.where(mask, x, 0) or masked_select(..., size=)")
    return [Tensor(i.astype(np.int32)) for i in np.nonzero(mask.numpy())]


def getitem(x: Any, index: Any, valid: list[Any] | None = None) -> Any:
    """`x[index]` with NumPy semantics. With `valid` (a list), traced integer-array indices
    also append a bool mask of the result's shape: which entries were in range."""
    items = _normalize(x, index)
    y, advanced, axis = x, [], 0
    src_axis = 0  # the axis of `x` that the current item indexes (for error messages)
    for it in items:
        src_axis += it is not None
        if it is None:
            y = P.reshape(y, y.shape[:axis] + (1,) + y.shape[axis:])
            axis += 1
        elif isinstance(it, slice):
            y = _slice_axis(y, axis, it)
            axis += 1
        elif _is_int(it):
            n = y.shape[axis]
            if not -n <= it < n:
                raise IndexRangeError(f"index {it} is out of bounds for axis {src_axis - 1} with "
                                      f"size {n}")
            y = P.slice_(y, _at(y, axis, 0, it % n), _at(y, axis, y.shape[axis], it % n + 1))
            y = P.reshape(y, y.shape[:axis] + y.shape[axis + 1:])
        else:
            _check_bounds(it, y.shape[axis], src_axis - 1)
            advanced.append((axis, it))
            axis += 1
    return _advanced(y, advanced, valid) if advanced else y


def _at(y: Any, axis: int, default: int, value: int) -> tuple[int, ...]:
    """Per-axis bounds: `value` at `axis`, 0 (start) or the full size (limit) elsewhere."""
    if default == 0:
        return tuple(value if i == axis else 0 for i in range(y.ndim))
    return tuple(value if i == axis else d for i, d in enumerate(y.shape))


def _slice_axis(y: Any, axis: int, s: slice) -> Any:
    n = y.shape[axis]
    start, stop, step = s.indices(n)
    if step > 0:
        stop = max(stop, start)
        start_t = tuple(start if i == axis else 0 for i in range(y.ndim))
        limit_t = tuple(stop if i == axis else d for i, d in enumerate(y.shape))
        strides = tuple(step if i == axis else 1 for i in range(y.ndim))
        return P.slice_(y, start_t, limit_t, strides)
    count = len(range(start, stop, step))
    if count == 0:
        return P.slice_(y, (0,) * y.ndim, tuple(0 if i == axis else d
                                                 for i, d in enumerate(y.shape)))
    flipped = P.rev(y, (axis,))
    first = n - 1 - start
    return _slice_axis(flipped, axis, slice(first, first + (count - 1) * (-step) + 1, -step))


def _check_bounds(idx: Any, n: int, axis: int) -> None:
    """Raise IndexError if a concrete integer-array index has an entry outside [-n, n)."""
    from fgrad.core.tensor import Tracer
    if not isinstance(idx, Tracer):
        arr = idx.numpy()
        if arr.size and (arr.min() < -n or arr.max() >= n):
            bad = arr[(arr < -n) | (arr >= n)].reshape(-1)[0]
            raise IndexRangeError(f"index {bad} is out of bounds for axis {axis} with size {n}")


def _wrap_negative(idx: Any, n: int) -> Any:
    return (idx >= 0).where(idx, idx + n) if not idx.dtype.is_unsigned else idx


def _advanced(y: Any, advanced: list[tuple[int, Any]], valid: list[Any] | None = None) -> Any:
    """Gather for integer-array indices on axes `advanced` (NumPy placement rules); each
    index is clamped into its own axis before they are combined (see index_bounds)."""
    from fgrad.core.tensor import Tracer
    from fgrad.core.methods.tensor_math import broadcast_shapes, broadcast_to
    axes = [a for a, _ in advanced]
    idx_shape = broadcast_shapes("index", *[i.shape for _, i in advanced])
    others = [i for i in range(y.ndim) if i not in axes]
    moved = P.transpose(y, tuple(axes) + tuple(others))
    sizes = [y.shape[a] for a in axes]
    flat = P.reshape(moved, (int(np.prod(sizes)),) + tuple(y.shape[i] for i in others))
    linear, ok = None, None
    itype = position_dtype(flat.shape[0])
    for (a, idx), stride_pos in zip(advanced, range(len(advanced))):
        stride = int(np.prod(sizes[stride_pos + 1:], dtype=object))
        traced = isinstance(idx, Tracer)  # (a lone index is clamped by gather itself)
        part, part_ok = axis_index(idx, y.shape[a], itype, traced and len(advanced) > 1,
                                   traced and valid is not None)
        part = broadcast_to(part, idx_shape)
        ok = combine_valid(ok, part_ok)
        part = part * stride if stride != 1 else part
        linear = part if linear is None else linear + part
    out = P.gather(flat, linear)
    placed = _array_axes(advanced)
    if valid is not None and ok is not None:
        mask = P.reshape(broadcast_to(ok, idx_shape), idx_shape + (1,) * len(others))
        valid.append(_place(broadcast_to(mask, out.shape), placed, len(idx_shape)))
    return _place(out, placed, len(idx_shape))


def _array_axes(advanced: list[tuple[int, Any]]) -> list[int]:
    """The axes of the index arrays with dimensions, counted as if each 0-d index (a traced
    or array scalar) had already removed its axis: such an index acts as an int does, first
    (PyTorch's and tinygrad's rule, so `x[i, :, [1, 2]]` is `x[i][:, [1, 2]]` whether `i` is
    an int or a traced scalar)."""
    scalars = [a for a, idx in advanced if idx.ndim == 0]
    return [a - sum(s < a for s in scalars) for a, idx in advanced if idx.ndim > 0]


def _place(out: Any, axes: list[int], k: int) -> Any:
    """Move the gathered index dimensions to where NumPy puts them (`axes`: those of the
    index arrays, `_array_axes`)."""
    if not axes:
        return out
    adjacent = axes == list(range(axes[0], axes[0] + len(axes)))
    if not adjacent or axes[0] == 0:
        return out
    rest = list(range(k, out.ndim))
    order = rest[:axes[0]] + list(range(k)) + rest[axes[0]:]
    return P.transpose(out, tuple(order))


def index_update(x: Any, index: Any, value: Any, mode: str) -> Any:
    """`x.at[index].<mode>(value)`: scatter into the flat positions that `x[index]` reads."""
    from fgrad.core.tensor import Tensor, as_tensor
    from fgrad.core.methods.tensor_math import broadcast_to
    valid: list[Any] = []
    positions = getitem(_flat_positions(x), index, valid)
    value = as_tensor(value) if isinstance(value, Tensor) else Tensor(value, dtype=x.dtype)
    value = broadcast_to(value.cast(x.dtype), positions.shape)
    flat = P.reshape(x, (x.numel(),))
    ok = P.reshape(valid[0], (positions.numel(),)) if valid else None
    updated = scatter_dropping(flat, P.reshape(positions, (positions.numel(),)),
                               P.reshape(value, (value.numel(),)), mode, ok)
    return P.reshape(updated, x.shape)


def _flat_positions(x: Any) -> Any:
    """An int32 (int64 past 2**31 elements) Tensor of each element's row-major position."""
    total = None
    stride = 1
    itype = position_dtype(x.numel())
    for axis in reversed(range(x.ndim)):
        part = P.iota(itype, x.shape, axis) * stride if x.shape else None
        total = part if total is None else total + part
        stride *= x.shape[axis]
    return total if total is not None else P.iota(itype, (1,), 0).reshape(())
