"""Tensor methods: padding modes, joining/splitting, repeat, roll, triu/tril, interpolate.

Everything here is slices, reversals, concatenations, broadcasts and gathers of the movement
primitives, so derivatives, batching and lowering come from those. Gather/scatter, masked
selection and sorting live in `index_ops` (a base of this mixin).
"""
from __future__ import annotations

import math
from functools import reduce
from typing import TYPE_CHECKING, Any, Sequence, cast

import numpy as np

from fgrad.core import dtypes as _dt
from fgrad.core import prims as P
from fgrad.core.dtypes import dtypes
from fgrad.core.errors import ArgumentError, ArgumentTypeError, AxisError, IndexRangeError
from fgrad.core.prims._util import fmt_shape
from fgrad.core.methods.array_methods import UNSET, element_repeat
from fgrad.core.methods.extra_ops import split_sequence
from fgrad.core.methods.index_ops import IndexOpsMixin, as_int, take_range
from fgrad.core.methods.nn.resize_uint8 import linear_axis_uint8

if TYPE_CHECKING:
    from fgrad.core.tensor import Tensor

PAD_MODES = ("constant", "reflect", "replicate", "circular")
INTERPOLATE_MODES = {"linear": 0, "bilinear": 2, "trilinear": 3, "nearest": 0,
                     "nearest-exact": 0}


def _pad_pairs(x: Any, padding: Sequence[Any]) -> list[tuple[int, int]]:
    """(before, after) per axis from a flat, last-axis-first sequence or per-axis pairs."""
    items = list(padding)
    if all(isinstance(p, (int, np.integer)) for p in items):
        if len(items) % 2 or len(items) > 2 * x.ndim:
            raise ArgumentError(f"pad: a flat padding (left, right, top, bottom, ...) needs an "
                                f"even number of entries, at most {2 * x.ndim} for shape "
                                f"{fmt_shape(x.shape)}; got {tuple(padding)}")
        pairs = [(0, 0)] * x.ndim
        for i in range(len(items) // 2):
            pairs[x.ndim - 1 - i] = (int(items[2 * i]), int(items[2 * i + 1]))
        return pairs
    if len(items) != x.ndim:
        raise ArgumentError(f"pad: per-axis padding needs one (before, after) pair or None for "
                            f"each of the {x.ndim} axes of {fmt_shape(x.shape)}; got "
                            f"{tuple(padding)}")
    pairs = []
    for p in items:
        if p is not None and (len(p) != 2 or not all(isinstance(v, (int, np.integer))
                                                     for v in p)):
            raise ArgumentError(f"pad: each per-axis entry must be (before, after) ints or None, "
                                f"got {p!r}")
        pairs.append((0, 0) if p is None else (int(p[0]), int(p[1])))
    return pairs


def _fill_scalar(op: str, dtype: _dt.DType, value: Any) -> Any:
    """`value` as a Python scalar of `dtype`'s kind (a hashable primitive parameter)."""
    from fgrad.core.tensor import Tensor
    if isinstance(value, Tensor):
        raise ArgumentTypeError(f"{op}: value must be a Python number, got a Tensor; for a Tensor "
                                f"fill use Tensor.where on a padded mask")
    if dtype == dtypes.bool:
        return bool(value)
    if dtype.is_float:
        return float(value)
    if not math.isfinite(float(value)):
        raise ArgumentError(f"{op}: value {value} cannot be stored in {dtype.name}")
    return int(value)


def _pad_edges(x: Any, axis: int, lo: int, hi: int, mode: str) -> Any:
    """Grow one axis by `lo`/`hi` (>= 0) entries taken by a non-constant mode."""
    n = x.shape[axis]
    if lo == hi == 0:
        return x
    if mode == "reflect" and max(lo, hi) >= n:
        raise ArgumentError(f"pad: reflect padding ({lo}, {hi}) must be smaller than the size "
                            f"{n} of axis {axis}")
    if mode == "circular" and max(lo, hi) > n:
        raise ArgumentError(f"pad: circular padding ({lo}, {hi}) must not exceed the size {n} "
                            f"of axis {axis}")
    if mode == "replicate" and n == 0:
        raise ArgumentError(f"pad: cannot replicate-pad the empty axis {axis}")
    if mode == "reflect":
        left = P.rev(take_range(x, axis, 1, lo + 1), (axis,))
        right = P.rev(take_range(x, axis, n - 1 - hi, n - 1), (axis,))
    elif mode == "circular":
        left, right = take_range(x, axis, n - lo, n), take_range(x, axis, 0, hi)
    else:
        left = _stretch(take_range(x, axis, 0, 1), axis, lo)
        right = _stretch(take_range(x, axis, n - 1, n), axis, hi)
    return P.concatenate([p for p in (left, x, right) if p.shape[axis] or p is x], axis)


def _stretch(edge: Any, axis: int, count: int) -> Any:
    shape = tuple(count if i == axis else d for i, d in enumerate(edge.shape))
    return P.broadcast_in_dim(edge, shape, tuple(range(edge.ndim)))


def _joined(tensors: Sequence[Any]) -> list[Any]:
    """Tensors promoted to one dtype, for cat/stack."""
    from fgrad.core.tensor import as_tensor
    ts = [as_tensor(t) for t in tensors]
    dtype = reduce(_dt.promote, [t.dtype for t in ts])
    return [t.cast(dtype) for t in ts]


def _gather_axis(x: Any, axis: int, idx: Any) -> Any:
    """Entries `idx` (1-d) of `x` along `axis`."""
    perm = (axis,) + tuple(i for i in range(x.ndim) if i != axis)
    picked = P.gather(P.transpose(x, perm), idx)
    return P.transpose(picked, tuple(int(i) for i in np.argsort(perm)))


def _resample_axis(x: Any, axis: int, out: int, mode: str, align_corners: bool) -> Any:
    """Resize one axis of a float Tensor to `out` (PyTorch's source-index formulas)."""
    n = x.shape[axis]
    if n == out and not mode.endswith("linear"):
        return x
    dst = P.iota(dtypes.float32, (out,), 0)
    if mode.endswith("linear"):
        return _linear_axis(x, axis, dst, n, align_corners)
    scale = n / out
    src = (dst + 0.5) * scale if mode == "nearest-exact" else dst * scale
    return _gather_axis(x, axis, src.floor().cast(dtypes.int32).minimum(n - 1))


def _linear_axis(x: Any, axis: int, dst: Any, n: int, align_corners: bool) -> Any:
    out = dst.shape[0]
    if align_corners:
        src = dst * ((n - 1) / (out - 1) if out > 1 else 0.0)
    else:
        src = ((dst + 0.5) * (n / out) - 0.5).maximum(0.0)
    low = src.floor().cast(dtypes.int32).minimum(n - 1)
    high = (low + 1).minimum(n - 1)
    w = (src - low.cast(dtypes.float32)).maximum(0.0).minimum(1.0).cast(x.dtype)
    w = P.reshape(w, tuple(out if i == axis else 1 for i in range(x.ndim)))
    return _gather_axis(x, axis, low) * (1 - w) + _gather_axis(x, axis, high) * w


class PadModeError(ArgumentError, NotImplementedError):
    """An unknown pad mode: a ValueError, and the NotImplementedError PyTorch raises."""


class MovementOpsMixin(IndexOpsMixin):
    """Tensor methods: padding modes, joining/splitting, repeat, roll, triu/tril, resizing."""

    __slots__ = ()

    def pad(self, padding: Sequence[Any], mode: str = "constant",
            value: float = 0.0) -> "Tensor":
        """Pad with `mode` (constant, reflect, replicate, circular). `padding` is either flat,
        last axis first (left, right, top, bottom, ...), or one (before, after) pair or None
        per axis. Negative amounts crop: reflect and replicate pad from the whole axis first
        and crop after (entry i reads the padded input at i - before), circular crops first
        (PyTorch's rules)."""
        if mode not in PAD_MODES:
            raise PadModeError(f"pad: mode must be one of {PAD_MODES}, got {mode!r}")
        pairs = _pad_pairs(self, padding)
        for axis, ((lo, hi), n) in enumerate(zip(pairs, self.shape, strict=True)):
            if min(lo, 0) + min(hi, 0) < -n:
                raise ArgumentError(f"pad: cannot crop {-min(lo, 0)} + {-min(hi, 0)} entries from "
                                    f"axis {axis} of size {n} (shape {fmt_shape(self.shape)})")
        if mode == "constant":
            fill = _fill_scalar("pad", self.dtype, value)
            return P.pad(self, [(lo, hi, 0) for lo, hi in pairs], fill)
        crop = [(min(lo, 0), min(hi, 0), 0) for lo, hi in pairs]
        x: Any = P.pad(self, crop, 0) if mode == "circular" else self
        for axis, (lo, hi) in enumerate(pairs):
            x = _pad_edges(x, axis, max(lo, 0), max(hi, 0), mode)
        return x if mode == "circular" else P.pad(x, crop, 0)

    def roll(self, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None
             ) -> "Tensor":
        """Rotate entries along `dims` by `shifts` (the flattened Tensor when dims is None)."""
        if dims is None:
            if not isinstance(shifts, (int, np.integer)):
                if len(shifts) != 1:
                    raise ArgumentError(f"roll: without dims, shifts must be one int (or a "
                                        f"1-tuple), got {shifts}")
                shifts = shifts[0]
            return self.flatten().roll(int(shifts), 0).reshape(self.shape)
        shifts_t = (shifts,) if isinstance(shifts, (int, np.integer)) else tuple(shifts)
        dims_t = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
        if len(shifts_t) != len(dims_t):
            raise ArgumentError(f"roll: shifts {shifts_t} and dims {dims_t} differ in length")
        x: Any = self
        for shift, dim in zip(shifts_t, dims_t, strict=True):
            axis = self._axis(int(dim))
            n = x.shape[axis] if x.ndim else 1
            s = int(shift) % n if n else 0
            if s:
                x = P.concatenate([take_range(x, axis, n - s, n), take_range(x, axis, 0, n - s)],
                                  axis)
        return x

    def repeat(self, repeats: int | Sequence[int], *args: int, axis: int | None = UNSET,
               total_repeat_length: int | None = None) -> "Tensor":
        """Tile the Tensor `repeats[i]` times along each axis (PyTorch's repeat; extra leading
        repeats add axes). With axis= or total_repeat_length= it is NumPy's repeat instead:
        each entry `repeats` times (an int, or one count per entry) along `axis` (None: of
        the flattened Tensor), cut or padded with the last entry to total_repeat_length."""
        if axis is not UNSET or total_repeat_length is not None:
            if args:
                raise ArgumentTypeError("Tensor.repeat: axis= repeats entries along one axis "
                                        "(NumPy's repeat) and takes one `repeats`; pass more "
                                        "counts without axis= to tile (tinygrad's repeat)")
            return element_repeat(cast("Tensor", self), repeats,
                                  None if axis is UNSET else axis, total_repeat_length)
        reps = tuple(as_int("repeat", r) for r in (
            repeats if isinstance(repeats, (tuple, list)) else (repeats,) + args))
        if len(reps) < self.ndim or any(r < 0 for r in reps):
            raise ArgumentError(f"repeat: need one non-negative repeat count per axis (at least "
                                f"{self.ndim} for shape {fmt_shape(self.shape)}), got {reps}")
        base = (1,) * (len(reps) - self.ndim) + tuple(self.shape)
        x = P.reshape(self, [d for n in base for d in (1, n)])
        x = P.broadcast_in_dim(x, [d for r, n in zip(reps, base) for d in (r, n)],
                               tuple(range(2 * len(base))))
        return P.reshape(x, [r * n for r, n in zip(reps, base, strict=True)])

    def repeat_interleave(self, repeats: int, dim: int | None = None) -> "Tensor":
        """Repeat each entry `repeats` times along `dim` (of the flattened Tensor if None)."""
        reps = as_int("repeat_interleave", repeats)
        if reps < 0:
            raise ArgumentError(f"repeat_interleave: repeats must be >= 0, got {reps}")
        x: Any = self.flatten() if dim is None else self
        d = 0 if dim is None else x._axis(dim)
        shape = tuple(x.shape)
        x = P.reshape(x, shape[:d + 1] + (1,) + shape[d + 1:])
        x = P.broadcast_in_dim(x, shape[:d + 1] + (reps,) + shape[d + 1:], tuple(range(x.ndim)))
        return P.reshape(x, shape[:d] + (shape[d] * reps,) + shape[d + 1:])

    def cat(self, *args: "Tensor", dim: int = 0) -> "Tensor":
        """Join self and `args` along `dim` (dtypes are promoted); also `Tensor.cat(a, b)`
        and `Tensor.cat([a, b])`."""
        if isinstance(self, (list, tuple)):
            first, rest = split_sequence("cat", self, args)
            return first.cat(*rest, dim=dim)
        ts = _joined((self,) + args)
        if any(t.ndim == 0 for t in ts):
            raise AxisError("cat: 0-d Tensors cannot be concatenated; use stack instead")
        d = self._axis(dim)
        for t in ts[1:]:
            if t.ndim != self.ndim or any(a != b for i, (a, b) in
                                          enumerate(zip(t.shape, self.shape)) if i != d):
                raise ArgumentError(f"cat: shapes {fmt_shape(self.shape)} and {fmt_shape(t.shape)}"
                                    f" must match in every dimension except dim {d}")
        return P.concatenate(ts, d)

    def stack(self, *args: "Tensor", dim: int = 0) -> "Tensor":
        """Join self and `args` (all of one shape) along a new axis `dim`; also
        `Tensor.stack([a, b])`."""
        if isinstance(self, (list, tuple)):
            first, rest = split_sequence("stack", self, args)
            return first.stack(*rest, dim=dim)
        ts = _joined((self,) + args)
        for t in ts[1:]:
            if t.shape != self.shape:
                raise ArgumentError(f"stack: all Tensors must have the same shape, got "
                                    f"{fmt_shape(self.shape)} and {fmt_shape(t.shape)}")
        n = self.ndim + 1
        if not -n <= dim < n:
            raise IndexRangeError(f"stack: dim {dim} is out of range for {n}-d results")
        return P.concatenate([t.unsqueeze(dim % n) for t in ts], dim % n)

    def split(self, sizes: int | Sequence[int], dim: int = 0) -> tuple["Tensor", ...]:
        """Pieces along `dim`: of `sizes` each (the last may be shorter), or of the listed sizes
        (which must add up to the axis length)."""
        d = self._axis(dim)
        n = self.shape[d]
        if isinstance(sizes, (int, np.integer)):
            if sizes <= 0:
                raise ArgumentError(f"split: the piece size must be positive, got {sizes}")
            lengths = [min(int(sizes), n - i) for i in range(0, n, int(sizes))] or [0]
        else:
            lengths = [as_int("split", s) for s in sizes]
            if sum(lengths) != n or any(s < 0 for s in lengths):
                raise ArgumentError(f"split: sizes {tuple(lengths)} must be non-negative and add "
                                    f"up to {n}, the length of dim {d} of {fmt_shape(self.shape)}")
        starts = np.cumsum([0] + lengths[:-1])
        return tuple(take_range(self, d, int(s), int(s) + k) for s, k in zip(starts, lengths))

    def chunk(self, chunks: int, dim: int = 0) -> tuple["Tensor", ...]:
        """Split into `chunks` pieces of ceil(n / chunks) along `dim` (fewer if they run out)."""
        if chunks <= 0:
            raise ArgumentError(f"chunk: chunks must be positive, got {chunks}")
        n = self.shape[self._axis(dim)]
        return self.split(-(-n // chunks) if n else [0] * chunks, dim)

    def meshgrid(self, *args: "Tensor", indexing: str = "ij") -> tuple["Tensor", ...]:
        """Coordinate grids from 1-d Tensors: 'ij' (matrix) or 'xy' (Cartesian) indexing."""
        if indexing not in ("ij", "xy"):
            raise ArgumentError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
        ts = (self,) + args
        if any(t.ndim > 1 for t in ts):
            raise ArgumentError(f"meshgrid: inputs must be 0-d or 1-d, got shapes "
                                f"{', '.join(fmt_shape(t.shape) for t in ts)}")
        axes = list(range(len(ts)))
        if indexing == "xy" and len(ts) > 1:
            axes[0], axes[1] = 1, 0
        shape = [0] * len(ts)
        for t, a in zip(ts, axes):
            shape[a] = t.numel()
        return tuple(P.broadcast_in_dim(t.reshape(-1), shape, (a,)) for t, a in zip(ts, axes))

    def triu(self, diagonal: int = 0) -> "Tensor":
        """Zero everything below diagonal `diagonal` of the last two axes."""
        return self._triangle("triu", diagonal)

    def tril(self, diagonal: int = 0) -> "Tensor":
        """Zero everything above diagonal `diagonal` of the last two axes."""
        return self._triangle("tril", diagonal)

    def _triangle(self, op: str, diagonal: int) -> "Tensor":
        if self.ndim < 2:
            raise ArgumentError(f"{op}: needs at least 2 dimensions, got shape "
                                f"{fmt_shape(self.shape)}")
        rows, cols = self.shape[-2:]
        offset = P.iota(dtypes.int32, (rows, cols), 1) - P.iota(dtypes.int32, (rows, cols), 0)
        keep = offset >= diagonal if op == "triu" else offset <= diagonal
        return keep.where(self, self.zeros_like())

    def interpolate(self, size: Sequence[int], mode: str = "linear",
                    align_corners: bool = False) -> "Tensor":
        """Resize the last len(size) axes to `size` (other axes are batch axes). Modes:
        'linear' (also 'bilinear'/'trilinear' for 2/3 axes), 'nearest', 'nearest-exact'.
        uint8 Tensors resize linearly in fixed point, rounding per axis (as PyTorch)."""
        if mode not in INTERPOLATE_MODES:
            raise ArgumentError(f"interpolate: mode must be one of {tuple(INTERPOLATE_MODES)}, "
                                f"got {mode!r}")
        size = tuple(as_int("interpolate", s) for s in size)
        want = INTERPOLATE_MODES[mode]
        if not 0 < len(size) <= self.ndim or any(s <= 0 for s in size) or (
                want and len(size) != want):
            raise ArgumentError(f"interpolate: size {size} must hold positive sizes for 1 to "
                                f"{self.ndim} trailing axes of {fmt_shape(self.shape)}"
                                + (f" (exactly {want} for mode {mode!r})" if want else ""))
        if align_corners and not mode.endswith("linear"):
            raise ArgumentError("interpolate: align_corners=True needs a linear mode")
        fixed_point = mode.endswith("linear") and self.dtype == dtypes.uint8
        x: Any = self if self.dtype.is_float or fixed_point else self.cast(dtypes.default_float)
        for i in range(1, len(size) + 1):
            if self.shape[-i] == 0:
                raise ArgumentError(f"interpolate: cannot resize the empty axis {self.ndim - i} of "
                                    f"{fmt_shape(self.shape)}")
            x = linear_axis_uint8(x, self.ndim - i, size[-i], align_corners) if fixed_point \
                else _resample_axis(x, self.ndim - i, size[-i], mode, align_corners)
        return x.cast(self.dtype)
