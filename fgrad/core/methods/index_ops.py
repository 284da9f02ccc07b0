"""Tensor methods: gather/scatter along an axis, masks, nonzero, one_hot, sort and topk.

PyTorch's semantics, built from the gather, scatter and sort primitives: an axis-wise index
becomes flat row-major positions, as `x.at[...]` does. Data-dependent result sizes
(masked_select, nonzero, one_hot without num_classes) work eagerly; under a transformation
pass `size=` (or `num_classes=`) to get a fixed-size result.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np

from fgrad.core import prims as P
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.methods.array_methods import UNSET
from fgrad.core.methods.index_bounds import axis_index, position_dtype, scatter_dropping
from fgrad.core.errors import ArgumentError, ArgumentTypeError, IndexRangeError
from fgrad.core.prims._util import fmt_shape

if TYPE_CHECKING:
    from fgrad.core.tensor import Tensor

SCATTER_REDUCE = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min", "mean": "add"}


def as_int(op: str, value: Any) -> int:
    """A Python int from an int-like argument, or a TypeError naming the op."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ArgumentTypeError(f"{op}: expected an int, got {value!r} ({type(value).__name__})")
    return int(value)


def take_range(x: Any, axis: int, start: int, stop: int) -> Any:
    """Entries [start, stop) of `x` along `axis`."""
    lo = tuple(start if i == axis else 0 for i in range(x.ndim))
    hi = tuple(stop if i == axis else d for i, d in enumerate(x.shape))
    return P.slice_(x, lo, hi)


def is_traced(x: Any) -> bool:
    """True for a Tensor owned by a transformation (no concrete value available)."""
    from fgrad.core.tensor import Tracer
    return isinstance(x, Tracer)


def _extreme(dtype: DType, largest: bool) -> Any:
    """The identity of min (largest=True) or max (largest=False) for `dtype`."""
    if dtype == dtypes.bool:
        return largest
    if dtype.is_float:
        return float("inf") if largest else float("-inf")
    info = np.iinfo(dtype.np)
    return int(info.max if largest else info.min)


def _index_tensor(op: str, self: Any, index: Any, dim: int) -> tuple[Any, int]:
    """The index as an integer Tensor shaped like self (each size <= self's, except `dim`),
    bounds-checked when concrete, and `dim` normalized."""
    from fgrad.core.tensor import as_tensor
    index = as_tensor(index)
    if not index.dtype.is_int:
        raise ArgumentTypeError(f"{op}: index must be an integer Tensor, got {index.dtype.name}")
    d = self._axis(dim)
    if index.ndim != self.ndim or any(i > s for a, (i, s) in
                                      enumerate(zip(index.shape, self.shape)) if a != d):
        raise ArgumentError(f"{op}: index of shape {fmt_shape(index.shape)} must have the same "
                            f"number of dims as self {fmt_shape(self.shape)} and no larger sizes "
                            f"outside dim {d}")
    n = self.shape[d] if self.ndim else 1
    if not is_traced(index) and index.numel():
        arr = np.asarray(index.numpy())
        if arr.min() < 0 or arr.max() >= n:
            bad = arr[(arr < 0) | (arr >= n)].reshape(-1)[0]
            raise IndexRangeError(f"{op}: index {bad} is out of bounds for dim {d} with size {n}")
    return index, d


def _flat_positions(shape: tuple[int, ...], index: Any, dim: int) -> tuple[Any, Any]:
    """Row-major positions in a Tensor of `shape` addressed by `index` along `dim` (flat),
    and (for a traced index, else None) which of them were in range: out-of-range traced
    entries are clamped into `dim` first, and scatters drop them."""
    strides = [int(np.prod(shape[i + 1:], dtype=object)) for i in range(len(shape))] or [1]
    itype = position_dtype(int(np.prod(shape, dtype=object)))
    n = shape[dim] if shape else 1
    traced = is_traced(index)
    index, valid = axis_index(index, n, itype, traced, traced)
    pos = index * strides[dim] if strides[dim] != 1 else index
    for axis in range(index.ndim):
        if axis != dim:
            pos = pos + P.iota(itype, index.shape, axis) * strides[axis]
    flat_valid = None if valid is None else P.reshape(valid, (index.numel(),))
    return P.reshape(pos, (index.numel(),)), flat_valid


def _source(op: str, src: Any, index: Any, dtype: DType) -> Any:
    """`src` as `dtype` cut to index's shape (a Python number fills that shape). A Tensor
    src must already have `dtype` (PyTorch refuses mixed dtypes too)."""
    from fgrad.core.tensor import Tensor, as_tensor
    if not isinstance(src, (Tensor, np.ndarray, list, tuple)):
        return Tensor.full(index.shape, src, dtype=dtype)
    given, src = src, as_tensor(src)
    if src.ndim != index.ndim or any(s < i for s, i in zip(src.shape, index.shape)):
        raise ArgumentError(f"{op}: src of shape {fmt_shape(src.shape)} must have index's number "
                            f"of dims and sizes at least those of index {fmt_shape(index.shape)}")
    if isinstance(given, Tensor) and src.dtype != dtype:
        raise ArgumentTypeError(f"{op}: src has dtype {src.dtype.name} but self has "
                                f"{dtype.name}; cast one of them (e.g. src.cast(self.dtype))")
    src = src.cast(dtype)
    return P.slice_(src, (0,) * src.ndim, index.shape) if src.ndim else src


def _selected_positions(mask: Any, k: int) -> tuple[Any, Any]:
    """For a flat bool mask: the positions of its first `k` True entries (int32, shape (k,))
    and which of those k slots are real (the rest are padding)."""
    ones = mask.cast(dtypes.int32)
    rank = P.cumulative(ones, 0, False, "cumsum")
    per_rank = P.scatter(P.zeros((k + 1,), dtypes.int32), rank, ones.full_like(1), "add")
    positions = P.cumulative(take_range(per_rank, 0, 0, k), 0, False, "cumsum")
    valid = P.iota(dtypes.int32, (k,), 0) < ones.sum()
    return positions, valid


def _result_size(op: str, source: Any, shape: tuple[int, ...], size: int | None) -> int:
    """`size`, or the number of nonzero entries of the concrete `source` broadcast to
    `shape`."""
    if size is not None:
        size = as_int(op, size)
        if size < 0:
            raise ArgumentError(f"{op}: size must be >= 0, got {size}")
        return size
    if is_traced(source):
        raise ArgumentError(f"{op}: the result size depends on the data, which is traced here; "
                            f"pass size=N to get N entries (padded with fill_value)")
    return int(np.count_nonzero(np.broadcast_to(np.asarray(source.numpy()), shape)))


def _bool_mask(op: str, mask: Any) -> Any:
    from fgrad.core.tensor import as_tensor
    mask = as_tensor(mask)
    if mask.dtype != dtypes.bool:
        raise ArgumentTypeError(f"{op}: mask must be a bool Tensor, got {mask.dtype.name}")
    return mask


class IndexOpsMixin:
    """Tensor methods: gather/scatter, masked ops, nonzero, one_hot, sort/argsort/topk."""

    __slots__ = ()

    def gather(self, dim: int, index: "Tensor") -> "Tensor":
        """`out[i][j][k] = self[index[i][j][k]][j][k]` for dim 0 (likewise for other dims);
        index has self's number of dims and is no larger outside `dim`."""
        index, d = _index_tensor("gather", self, index, dim)
        if self.ndim == 0:
            return P.reshape(P.gather(P.reshape(self, (1,)), P.reshape(index, (1,))), ())
        x = P.slice_(self, (0,) * self.ndim, tuple(
            n if a == d else i for a, (i, n) in enumerate(zip(index.shape, self.shape))))
        return P.take_along(x, index, d)

    def scatter(self, dim: int, index: "Tensor", src: Any, reduce: str | None = None
                ) -> "Tensor":
        """Write `src` into self at `index` along `dim` (PyTorch's scatter); with reduce='add'
        or 'multiply' combine with the existing entries instead."""
        modes = {None: "set", "add": "add", "multiply": "mul"}
        if reduce not in modes:
            raise ArgumentError(f"scatter: reduce must be None, 'add' or 'multiply', got "
                                f"{reduce!r}; see scatter_reduce for more")
        index, d = _index_tensor("scatter", self, index, dim)
        values = _source("scatter", src, index, self.dtype)
        return self._scatter_flat(_flat_positions(self.shape, index, d), values, modes[reduce])

    def _scatter_flat(self, positions: tuple[Any, Any], values: Any, mode: str) -> "Tensor":
        flat = P.reshape(self, (self.numel(),))
        pos, valid = positions
        out = scatter_dropping(flat, pos, P.reshape(values, (pos.shape[0],)), mode, valid)
        return P.reshape(out, self.shape)

    def scatter_reduce(self, dim: int, index: "Tensor", src: "Tensor", reduce: str,
                       include_self: bool = True) -> "Tensor":
        """Combine `src` into self at `index` along `dim` by reduce: 'sum', 'prod', 'mean',
        'amax' or 'amin'; include_self=False leaves self's values out where written."""
        if reduce not in SCATTER_REDUCE:
            raise ArgumentError(f"scatter_reduce: reduce must be one of {tuple(SCATTER_REDUCE)}, "
                                f"got {reduce!r}")
        index, d = _index_tensor("scatter_reduce", self, index, dim)
        values = _source("scatter_reduce", src, index, self.dtype)
        positions = _flat_positions(self.shape, index, d)
        base: Any = self
        if not include_self:
            identity = {"sum": 0, "mean": 0, "prod": 1}.get(reduce)
            identity = _extreme(self.dtype, reduce == "amin") if identity is None else identity
            base = self._scatter_flat(positions, values.full_like(identity), "set")
        out = base._scatter_flat(positions, values, SCATTER_REDUCE[reduce])
        if reduce != "mean":
            return out
        count = self.ones_like() if include_self else base.full_like(1)._scatter_flat(
            positions, values.zeros_like(), "set")
        count = count._scatter_flat(positions, values.ones_like(), "add")
        return out / count if self.dtype.is_float else out // count

    def masked_fill(self, mask: "Tensor", value: Any) -> "Tensor":
        """Self with `value` wherever `mask` (broadcast to self's shape) is True."""
        from fgrad.core.tensor import Tensor, as_tensor
        from fgrad.core.methods.tensor_math import broadcast_to
        mask = _bool_mask("masked_fill", mask)
        try:
            mask = broadcast_to(mask, self.shape)
        except ValueError as err:
            raise ArgumentError(f"masked_fill: mask of shape {fmt_shape(mask.shape)} does not "
                                f"broadcast to self's shape {fmt_shape(self.shape)}") from err
        value = as_tensor(value).cast(self.dtype) if isinstance(value, Tensor) else Tensor(
            value, dtype=self.dtype)
        return mask.where(broadcast_to(value, self.shape), self)

    def masked_select(self, mask: "Tensor", size: int | None = None,
                      fill_value: Any = 0) -> "Tensor":
        """The entries where `mask` is True, flattened (self and mask broadcast together).
        With `size=N`, exactly N entries (padded with fill_value): usable under jit/vmap."""
        from fgrad.core.tensor import Tensor
        from fgrad.core.methods.tensor_math import broadcast_shapes, broadcast_to
        mask = _bool_mask("masked_select", mask)
        shape = broadcast_shapes("masked_select", self.shape, mask.shape)
        flat = broadcast_to(cast(Tensor, self), shape).reshape(-1)
        flat_mask = broadcast_to(mask, shape).reshape(-1)
        k = _result_size("masked_select", mask, shape, size)
        positions, valid = _selected_positions(flat_mask, k)
        picked = P.gather(flat, positions) if flat.shape[0] else flat.zeros_like().pad(
            [(0, k)])
        return valid.where(picked, Tensor(fill_value, dtype=self.dtype))

    def nonzero(self, size: int | None = None, fill_value: int = -1) -> "Tensor":
        """The (k, ndim) int32 indices of the nonzero entries, in row-major order. With
        `size=N`, exactly N rows (padded with fill_value, truncated to an int: the result
        stays int32): usable under jit/vmap."""
        k = _result_size("nonzero", self, self.shape, size)
        fill_value = int(fill_value)
        if self.ndim == 0 or self.numel() == 0:
            return P.zeros((k, self.ndim), dtypes.int32) + fill_value
        positions, valid = _selected_positions((cast("Tensor", self) != 0).reshape(-1), k)
        coords = []
        for axis in range(self.ndim):
            stride = int(np.prod(self.shape[axis + 1:]))
            coords.append(positions.div(stride, rounding_mode="trunc").fmod(self.shape[axis]))
        rows = coords[0].stack(*coords[1:], dim=-1)
        return valid.reshape(k, 1).where(rows, fill_value)

    def one_hot(self, num_classes: int = -1) -> "Tensor":
        """An int32 Tensor with a trailing axis of `num_classes`: 1 at each entry's class.
        num_classes=-1 uses max + 1 (eagerly only)."""
        if not self.dtype.is_int:
            raise ArgumentTypeError(f"one_hot: expects an integer Tensor, got {self.dtype.name}")
        num_classes = as_int("one_hot", num_classes)
        values = None if is_traced(self) else np.asarray(self.numpy())
        if num_classes == -1:
            if values is None:
                raise ArgumentError("one_hot: num_classes=-1 infers the count from the data, "
                                    "which is traced here; pass num_classes")
            if values.size == 0:
                raise ArgumentError("one_hot: cannot infer num_classes from an empty Tensor")
            num_classes = int(values.max()) + 1
        if num_classes < 0:
            raise ArgumentError(f"one_hot: num_classes must be >= 0 or -1, got {num_classes}")
        if values is not None and values.size and (values.min() < 0
                                                   or values.max() >= num_classes):
            raise ArgumentError(f"one_hot: class values must lie in [0, {num_classes}), got "
                             f"min {values.min()} and max {values.max()}")
        classes = P.iota(dtypes.int32, (num_classes,), 0)
        return (self.unsqueeze(-1) == classes).cast(dtypes.int32)

    def sort(self, dim: int = -1, descending: bool = False, *, axis: Any = UNSET
             ) -> tuple["Tensor", "Tensor"]:
        """(values, indices): a stable sort along `dim`; NaN counts as the largest value.
        (NumPy's x.sort(axis=...) returns the values only, so axis= is refused with the
        spelling to use.)"""
        if axis is not UNSET:
            fix = "x.flatten().sort()[0]" if axis is None else f"x.sort(dim={axis!r})[0]"
            raise ArgumentTypeError(f"Tensor.sort returns (values, indices) and takes dim=, "
                                    f"not axis=; use {fix} for the sorted values (or "
                                    f"jnp.sort(x, axis={axis!r}))")
        if self.ndim == 0:
            return cast("Tensor", self), P.zeros((), dtypes.int32)
        d = self._axis(dim)
        perm = tuple(i for i in range(self.ndim) if i != d) + (d,)
        values, indices = P.sort(P.transpose(self, perm), descending)
        back = tuple(int(i) for i in np.argsort(perm))
        return P.transpose(values, back), P.transpose(indices, back)

    def argsort(self, dim: int = -1, descending: bool = False, *, axis: int | None = UNSET,
                stable: bool = True) -> "Tensor":
        """The int32 indices that sort the Tensor along `dim` (stably). NumPy's axis= names
        dim (None: of the flattened Tensor); `stable` is accepted (the sort is stable)."""
        if axis is not UNSET:
            if dim != -1:
                raise ArgumentTypeError(f"Tensor.argsort: got both dim={dim!r} and "
                                        f"axis={axis!r}; pass one of them")
            if axis is None:
                return self.reshape(-1).sort(0, descending)[1]
            dim = axis
        return self.sort(dim, descending)[1]

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True
             ) -> tuple["Tensor", "Tensor"]:
        """(values, indices) of the k largest (or smallest) entries along `dim`, in sorted
        order (sorted_=False returns them sorted too); ties keep their original order."""
        k = as_int("topk", k)
        n = self.shape[self._axis(dim)] if self.ndim else 1
        if not 0 <= k <= n:
            raise ArgumentError(f"topk: k={k} is out of range for dim {dim} of size {n}")
        if self.ndim == 0:
            return self.sort(dim, descending=largest)
        d = self._axis(dim)
        perm = tuple(i for i in range(self.ndim) if i != d) + (d,)
        moved = P.transpose(self, perm) if d != self.ndim - 1 else self
        values, indices = P.top_k(moved, k, largest)
        if d == self.ndim - 1:
            return values, indices
        back = tuple(int(i) for i in np.argsort(perm))
        return P.transpose(values, back), P.transpose(indices, back)
