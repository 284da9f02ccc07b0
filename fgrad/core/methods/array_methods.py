"""jax.Array's methods on Tensor: the NumPy spellings that tinygrad's API lacks.

`ArrayMethodsMixin` adds the methods tinygrad has no name for (ravel, swapaxes, take, trace,
searchsorted, ptp, copy, conj, real, imag, itemsize, mT). The helpers below serve the NumPy
keywords that tinygrad's methods accept besides their own (keepdims=, where=, initial=,
ddof=, axis=, order=, decimals=): those methods call them only when such a keyword is
given, so the tinygrad call forms keep their cost and their results.

Where both APIs name the same thing differently, tinygrad's meaning stays: `size()` is the
shape, `nbytes()` a method, `repeat(2)` tiles, `std()`/`var()` divide by n - 1, `sort()`
returns (values, indices), `transpose(0, 2)` swaps two axes, `nonzero()` gives a (k, ndim)
Tensor, `cumsum()` runs along axis 0 and `dot` of N-d operands is matmul.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence, cast

import numpy as np

from fgrad.core import prims as P
from fgrad.core.dtypes import dtypes
from fgrad.core.errors import ArgumentError, ArgumentTypeError
from fgrad.core.prims._util import fmt_shape
from fgrad.core.methods.tensor_math import broadcast_to

if TYPE_CHECKING:
    from fgrad.core.tensor import Tensor

Axis = int | Sequence[int] | None


class _Unset:
    """The default of a keyword whose None has a meaning of its own (NumPy's axis=None)."""

    def __repr__(self) -> str:
        return "<not given>"


UNSET: Any = _Unset()


def _tensor(x: Any) -> "Tensor":
    from fgrad.core.tensor import as_tensor
    return as_tensor(x)


def _traced(x: Any) -> bool:
    from fgrad.core.tensor import Tracer
    return isinstance(x, Tracer)


# ------------------------------------------------------------------------ keyword resolution
def keep_flag(method: str, keepdim: Any, keepdims: Any) -> bool:
    """keepdim (tinygrad) or keepdims (NumPy), refusing both."""
    if keepdims is None:
        return bool(keepdim)
    if keepdim:
        raise ArgumentTypeError(f"Tensor.{method}: got both keepdim={keepdim!r} and "
                                f"keepdims={keepdims!r}; pass one of them (keepdims is "
                                f"NumPy's spelling of keepdim)")
    return bool(keepdims)


def alias(method: str, name: str, value: Any, default: Any, numpy_name: str,
          given: Any) -> Any:
    """`given` (NumPy's keyword `numpy_name`) in place of tinygrad's `name` (whose default
    is `default`), refusing both."""
    if given is None:
        return value
    if value is not default and (default is None or value != default):
        raise ArgumentTypeError(f"Tensor.{method}: got both {name}={value!r} and "
                                f"{numpy_name}={given!r}; pass one of them ({numpy_name} is "
                                f"NumPy's spelling of {name})")
    return given


def _mask(method: str, where: Any, x: "Tensor") -> "Tensor":
    """The where= mask as a bool Tensor of x's shape."""
    mask = _tensor(where)
    if mask.dtype != dtypes.bool:
        mask = mask != 0
    try:
        return broadcast_to(mask, x.shape)
    except ArgumentError:
        raise ArgumentError(f"Tensor.{method}: where= mask of shape {fmt_shape(mask.shape)} "
                            f"does not broadcast to the Tensor's shape "
                            f"{fmt_shape(x.shape)}") from None


def _reduced_shape(x: "Tensor", axis: Axis, keep: bool) -> tuple[int, ...]:
    from fgrad.core.methods.tensor_reduce import _axes
    axes = _axes(x, axis)
    if keep:
        return tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def _empty_axis(x: "Tensor", axis: Axis) -> bool:
    from fgrad.core.methods.tensor_reduce import _axes
    return any(x.shape[a] == 0 for a in _axes(x, axis))


# ------------------------------------------------------------------------ reductions
def numpy_sum(x: "Tensor", method: str, axis: Axis, keepdim: Any, dtype: Any, keepdims: Any,
              initial: Any, where: Any) -> "Tensor":
    """sum/prod with NumPy's keepdims=, initial= (combined into the result) and where=."""
    from fgrad.core.methods.tensor_reduce import sum_dtype
    keep = keep_flag(method, keepdim, keepdims)
    x = x.cast(dtype) if dtype is not None else x.cast(sum_dtype(x.dtype))
    identity = 0 if method == "sum" else 1
    if where is not None:
        x = _mask(method, where, x).where(x, identity)
    out = x.sum(axis, keep) if method == "sum" else x.prod(axis, keep)
    if initial is None:
        return out
    start = _tensor(initial).cast(out.dtype)
    return out + start if method == "sum" else out * start


def numpy_extremum(x: "Tensor", method: str, axis: Axis, keepdim: Any, keepdims: Any,
                   initial: Any, where: Any) -> "Tensor":
    """max/min with NumPy's keepdims=, initial= (a bound on the result) and where= (which
    needs initial=, as in JAX: max and min have no identity)."""
    keep = keep_flag(method, keepdim, keepdims)
    if where is not None:
        if initial is None:
            raise ArgumentError(f"Tensor.{method}: where= needs initial= (the value of rows "
                                f"whose entries are all masked out), e.g. "
                                f"x.{method}(axis, where=mask, initial=0.0)")
    if initial is None:
        return x.max(axis, keep) if method == "max" else x.min(axis, keep)
    start = _tensor(initial).cast(x.dtype)
    if where is not None:
        x = _mask(method, where, x).where(x, start)
    if _empty_axis(x, axis):
        return broadcast_to(start, _reduced_shape(x, axis, keep))
    out = x.max(axis, keep) if method == "max" else x.min(axis, keep)
    return out.maximum(start) if method == "max" else out.minimum(start)


def numpy_mean(x: "Tensor", axis: Axis, keepdim: Any, keepdims: Any, dtype: Any,
               where: Any) -> "Tensor":
    """mean with NumPy's keepdims=, dtype= and where= (the mean of the selected entries)."""
    keep = keep_flag("mean", keepdim, keepdims)
    if dtype is not None:
        x = x.cast(dtype)
    if not x.dtype.is_float:
        x = x.cast(dtypes.default_float)
    if where is None:
        out = x.mean(axis, keep)
    else:
        mask = _mask("mean", where, x)
        out = mask.where(x, 0).sum(axis, keep) / mask.cast(x.dtype).sum(axis, keep)
    return out if dtype is None else out.cast(dtype)


def numpy_any_all(x: "Tensor", method: str, axis: Axis, keepdim: Any, keepdims: Any,
                  where: Any) -> "Tensor":
    """any/all with NumPy's keepdims= and where= (masked entries count as False / True)."""
    keep = keep_flag(method, keepdim, keepdims)
    b = x.cast(dtypes.bool)
    if where is not None:
        b = _mask(method, where, b).where(b, method == "all")
    return b.any(axis, keep) if method == "any" else b.all(axis, keep)


def numpy_var(x: "Tensor", method: str, axis: Axis, keepdim: Any, correction: Any,
              keepdims: Any, ddof: Any, where: Any, dtype: Any) -> "Tensor":
    """var/std with NumPy's keepdims=, ddof= (tinygrad's correction=), dtype= and where=."""
    keep = keep_flag(method, keepdim, keepdims)
    correction = alias(method, "correction", correction, 1, "ddof", ddof)
    if dtype is not None:
        x = x.cast(dtype)
    if where is None:
        return x.var(axis, keep, correction) if method == "var" else \
            x.std(axis, keep, correction)
    from fgrad.core.methods.math_ops import _widened
    from fgrad.core.methods.tensor_reduce import _axes
    wide, out_dtype = _widened(x)
    mask = _mask(method, where, wide)
    axes = _axes(wide, axis)
    count = mask.cast(wide.dtype).sum(axes, keepdim=True)
    mean = mask.where(wide, 0).sum(axes, keepdim=True) / count
    squares = mask.where((wide - mean).square(), 0).sum(axes, keep)
    dof = (count if keep else count.reshape(squares.shape)) - correction
    out = squares / dof.maximum(0)
    return (out if method == "var" else out.sqrt()).cast(out_dtype)


# ------------------------------------------------------------------------ movement
def permute_numpy(x: "Tensor", first: Any, second: Any, rest: tuple[Any, ...]) -> "Tensor":
    """transpose's NumPy forms: one tuple/list of axes, None (reverse) or 3+ ints."""
    if first is None:
        if rest or second != 0:
            raise ArgumentTypeError("Tensor.transpose: None (reverse the axes) takes no "
                                    "further arguments")
        order: tuple[Any, ...] = tuple(reversed(range(x.ndim)))
    elif isinstance(first, (tuple, list)):
        if rest or second != 0:
            raise ArgumentTypeError("Tensor.transpose: pass the axes as one tuple, "
                                    "x.transpose((2, 0, 1)), or as ints, x.transpose(2, 0, 1)")
        order = tuple(first)
    else:
        order = (first, second) + rest
    axes = [x._axis(int(a)) for a in order]
    if sorted(axes) != list(range(x.ndim)):
        raise ArgumentError(f"Tensor.transpose: axes {order} are not a permutation of the "
                            f"{x.ndim} axes of a Tensor of shape {fmt_shape(x.shape)}; two "
                            f"ints swap two axes (tinygrad), more permute")
    return P.transpose(x, tuple(axes)) if x.ndim > 1 else x


def _order(method: str, order: str) -> str:
    if order not in ("C", "F"):
        raise ArgumentError(f"Tensor.{method}: order={order!r} is not supported; use 'C' "
                            f"(row-major) or 'F' (column-major)")
    return order


def reshape_order(x: "Tensor", shape: tuple[Any, ...], order: str) -> "Tensor":
    """x reshaped in `order` ('F': column-major, as NumPy)."""
    if _order("reshape", order) == "C":
        return x.reshape(*shape)
    reverse = tuple(reversed(range(x.ndim)))
    flipped = P.transpose(x, reverse) if x.ndim > 1 else x
    from fgrad.core.methods.tensor_movement import _shape_args
    out = flipped.reshape(tuple(reversed(_shape_args(shape))))
    return P.transpose(out, tuple(reversed(range(out.ndim)))) if out.ndim > 1 else out


def numpy_squeeze(x: "Tensor", dim: Any, axis: Axis) -> "Tensor":
    """squeeze(axis=...): NumPy's rule, every named axis must have length 1."""
    if dim is not None:
        raise ArgumentTypeError(f"Tensor.squeeze: got both dim={dim!r} and axis={axis!r}; "
                                f"pass one of them")
    from fgrad.core.methods.tensor_reduce import _axes
    axes = _axes(x, axis)
    bad = [a for a in axes if x.shape[a] != 1]
    if bad:
        raise ArgumentError(f"Tensor.squeeze: axis {bad[0]} has length {x.shape[bad[0]]}, not "
                            f"1 (shape {fmt_shape(x.shape)}); with axis= every named axis "
                            f"must have length 1 (dim= leaves such an axis alone)")
    return x.reshape(tuple(d for i, d in enumerate(x.shape) if i not in axes))


def element_repeat(x: "Tensor", repeats: Any, axis: Any, total: int | None) -> "Tensor":
    """NumPy's repeat: each entry `repeats` times along `axis` (None: of the flattened x);
    with total_repeat_length, exactly that many (cut, or padded with the last entry)."""
    from fgrad.core.methods.index_ops import as_int
    if axis is None:
        x, ax = x.reshape(-1), 0
    else:
        ax = x._axis(as_int("repeat", axis))
    n = x.shape[ax]
    if isinstance(repeats, (int, np.integer)) and total is None:
        if int(repeats) < 0:
            raise ArgumentError(f"Tensor.repeat: repeats must be >= 0, got {repeats}")
        return x.repeat_interleave(int(repeats), dim=ax)
    if _traced(repeats):
        if total is None:
            raise ArgumentTypeError("Tensor.repeat: traced per-entry repeats need "
                                    "total_repeat_length= (the result's length must be known)")
        ends = _tensor(repeats).cast(dtypes.int32).reshape(-1).expand(n).cumsum(0)
        slots = P.iota(dtypes.int32, (total,), 0)
        index = (ends.reshape(1, n) <= slots.reshape(total, 1)).cast(dtypes.int32).sum(1)
        return x.take(index.minimum(max(n - 1, 0)), axis=ax, mode="clip")
    counts = np.broadcast_to(np.asarray(_np_value(repeats)).reshape(-1), (n,))
    if (counts < 0).any():
        raise ArgumentError(f"Tensor.repeat: repeats must be >= 0, got {counts.tolist()}")
    picks = np.repeat(np.arange(n), counts)
    if total is not None:
        last = picks[-1:] if picks.size else np.array([max(n - 1, 0)])
        picks = np.concatenate([picks[:total], np.repeat(last, max(total - picks.size, 0))])
    return x.take(_tensor(picks.astype(np.int32)), axis=ax, mode="clip")


def _np_value(value: Any) -> Any:
    from fgrad.core.tensor import Tensor
    return value.numpy() if isinstance(value, Tensor) else value


# ------------------------------------------------------------------------ elementwise
def round_decimals(x: "Tensor", decimals: Any) -> "Tensor":
    """NumPy's round to `decimals` places (half to even); integers round exactly."""
    from fgrad.core.methods.index_ops import as_int
    decimals = as_int("round", decimals)
    if not x.dtype.is_float:
        if decimals >= 0 or x.dtype == dtypes.bool:
            return x
        scale = 10 ** -decimals
        q, r = x.div(scale, rounding_mode="floor"), x.mod(scale)
        up = (r * 2 > scale) | ((r * 2 == scale) & (q.mod(2) != 0))
        return (q + up.cast(x.dtype)) * scale
    if decimals >= 0:
        scale = 10.0 ** decimals
        return (x * scale).round() / scale
    scale = 10.0 ** -decimals
    return (x / scale).round() * scale


class ArrayMethodsMixin:
    """jax.Array's methods that tinygrad's Tensor lacks (see the module docstring)."""

    __slots__ = ()

    # ------------------------------------------------------------------ properties
    @property
    def itemsize(self) -> int:
        """Bytes per element (jax.Array.itemsize; tinygrad's `element_size()`)."""
        return int(self.dtype.itemsize)

    @property
    def real(self) -> "Tensor":
        """The real part: fgrad's dtypes are real, so the Tensor itself."""
        return cast("Tensor", self)

    @property
    def imag(self) -> "Tensor":
        """The imaginary part: zeros of the Tensor's shape and dtype (its dtypes are real)."""
        return self.zeros_like()

    @property
    def mT(self) -> "Tensor":  # noqa: N802
        """The last two axes swapped (the matrix transpose of a batch)."""
        if self.ndim < 2:
            raise ArgumentError(f"Tensor.mT: needs at least 2 dims, got shape "
                                f"{fmt_shape(self.shape)}; use .T for 1-d")
        return self.transpose(-1, -2)

    # ------------------------------------------------------------------ methods
    def copy(self) -> "Tensor":
        """A copy of the values (Tensors are immutable, so it is equal to `clone()`)."""
        return self.clone()

    def conj(self) -> "Tensor":
        """The complex conjugate: the Tensor itself, as its dtypes are real."""
        return cast("Tensor", self)

    def conjugate(self) -> "Tensor":
        """Alias of conj."""
        return cast("Tensor", self)

    def ravel(self, order: str = "C") -> "Tensor":
        """The entries as a 1-d Tensor, in row-major ('C') or column-major ('F') order."""
        return reshape_order(cast("Tensor", self), (-1,), order) if order != "C" else \
            self.reshape(-1)

    def swapaxes(self, axis1: int, axis2: int) -> "Tensor":
        """Axes axis1 and axis2 interchanged (tinygrad's transpose(axis1, axis2))."""
        if self.ndim < 2:
            for a in (axis1, axis2):
                self._axis(a)  # only 0 and -1 exist
            return cast("Tensor", self)
        return self.transpose(axis1, axis2)

    def take(self, indices: Any, axis: int | None = None, mode: str | None = None,
             fill_value: Any = None, *, unique_indices: bool = False,
             indices_are_sorted: bool = False) -> "Tensor":
        """Entries at integer `indices` along `axis` (None: of the flattened Tensor); the
        result has indices' axes in place of `axis`. Modes as jax.Array.take: "fill" (the
        default) gives `fill_value` (NaN, or the dtype's extreme for ints, True for bools)
        for indices outside [-n, n) and counts negative ones from the end; "clip" clamps
        into [0, n - 1]; "wrap" takes them modulo n."""
        x: Any = self.reshape(-1) if axis is None else self
        ax = 0 if axis is None else x._axis(axis)
        idx = _tensor(indices)
        if not idx.dtype.is_int:
            raise ArgumentTypeError(f"Tensor.take: indices must be integers, got "
                                    f"{idx.dtype.name}; cast them with .cast(dtypes.int32)")
        idx = idx.cast(dtypes.int64 if idx.dtype.itemsize > 4 else dtypes.int32)
        mode = "fill" if mode is None else mode
        n = x.shape[ax]
        if mode not in ("fill", "clip", "wrap"):
            raise ArgumentError(f"Tensor.take: mode={mode!r} is not supported; use 'fill' "
                                f"(the default), 'clip' or 'wrap' (JAX has no 'raise')")
        out_shape = x.shape[:ax] + idx.shape + x.shape[ax + 1:]
        fill = _fill_value(x.dtype, fill_value)
        if n == 0:
            if mode != "fill" and idx.numel():
                raise ArgumentError(f"Tensor.take: cannot take from an empty axis {ax} "
                                    f"with mode={mode!r}")
            return broadcast_to(_tensor(fill).cast(x.dtype).reshape(()), out_shape)
        valid = None
        if mode == "wrap":
            idx = idx.mod(n)
        elif mode == "clip":
            idx = idx.maximum(0).minimum(n - 1)
        else:
            valid = (idx >= -n) & (idx < n)
            idx = (idx < 0).where(idx + n, idx).maximum(0).minimum(n - 1)
        out = x[(slice(None),) * ax + (idx,)]
        if valid is None:
            return out
        valid = valid.reshape((1,) * ax + idx.shape + (1,) * (x.ndim - ax - 1))
        return valid.where(out, _tensor(fill).cast(x.dtype))

    def trace(self, offset: int = 0, axis1: int = 0, axis2: int = 1,
              dtype: Any = None) -> "Tensor":
        """The sum of the `offset` diagonal of the (axis1, axis2) planes."""
        return self.diagonal(offset, axis1, axis2).sum(-1, dtype=dtype)

    def ptp(self, axis: Axis = None, keepdims: bool = False) -> "Tensor":
        """Peak to peak: max - min over `axis`."""
        return self.max(axis, keepdims) - self.min(axis, keepdims)

    def searchsorted(self, v: Any, side: str = "left", sorter: Any = None, *,
                     method: str = "scan") -> "Tensor":
        """Where `v`'s entries would go in this sorted 1-d Tensor (int32, v's shape): the
        first such position for side="left", the last for "right"; NaNs sort last, as in
        NumPy. Every entry is compared with every value of v (`method` is accepted for
        JAX's signature; all methods give the same result)."""
        if self.ndim != 1:
            raise ArgumentError(f"Tensor.searchsorted: the sorted Tensor must be 1-d, got "
                                f"shape {fmt_shape(self.shape)}")
        if side not in ("left", "right"):
            raise ArgumentError(f"Tensor.searchsorted: side must be 'left' or 'right', got "
                                f"{side!r}")
        a: Any = self if sorter is None else self.take(sorter, mode="clip")
        vals = _tensor(v)
        flat = vals.reshape(-1, 1)
        row = a.reshape(1, -1)
        before = _less(row, flat) if side == "left" else _less(flat, row).logical_not()
        return before.cast(dtypes.int32).sum(-1).reshape(vals.shape)


def _less(a: "Tensor", b: "Tensor") -> "Tensor":
    """a < b in NumPy's sort order (NaN after everything)."""
    lt = a < b
    if a.dtype.is_float or b.dtype.is_float:
        lt = lt | (b.isnan() & a.isnan().logical_not())
    return lt


def _fill_value(dtype: Any, fill_value: Any) -> Any:
    """take's fill for out-of-range indices: NaN, the signed minimum or unsigned maximum,
    True for bools (JAX's defaults)."""
    if fill_value is not None:
        return fill_value
    if dtype == dtypes.bool:
        return True
    if dtype.is_float:
        return math.nan
    info = np.iinfo(dtype.np)
    return int(info.max if dtype.is_unsigned else info.min)


__all__ = ["ArrayMethodsMixin", "UNSET", "element_repeat", "keep_flag", "numpy_any_all",
           "numpy_extremum", "numpy_mean", "numpy_squeeze", "numpy_sum", "numpy_var",
           "permute_numpy", "reshape_order", "round_decimals"]
