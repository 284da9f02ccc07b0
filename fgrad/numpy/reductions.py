"""Reductions with NumPy's arguments (axis, keepdims, ddof, dtype) and jnp's dtypes: sums of
bools and small ints accumulate in int32, means of integers are float32, var/std divide by
n - ddof (ddof=0 by default, unlike Tensor.var)."""
from __future__ import annotations

import builtins
import math
from typing import Any, Callable

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, Axis, asarray, axes_of, axis_of, float_of, \
    refuse_out, to_dtype


def _sum_dtype(x: Tensor, dtype: Any) -> Any:
    want = to_dtype(dtype)
    if want is not None:
        return want
    if x.dtype == dtypes.bool or (x.dtype.is_int and x.dtype.itemsize < 4):
        wide = dtypes.default_int
        return (dtypes.uint64 if wide == dtypes.int64 else dtypes.uint32) \
            if x.dtype.is_unsigned else wide
    return x.dtype


def _reduce(name: str, x: Tensor, axis: Axis, keepdims: bool,
            fn: Callable[[Tensor, tuple[int, ...], bool], Tensor]) -> Tensor:
    axes = axes_of(axis, x.ndim, name)
    if not axes:
        return fn(x.reshape(x.shape + (1,)), (x.ndim,), False) if x.ndim == 0 or axis == () \
            else x
    return fn(x, axes, keepdims)


def sum(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None,  # noqa: A001
        keepdims: bool = False, initial: Any = None, where: ArrayLike = None) -> Tensor:
    """Sum over `axis` (ints and bools accumulate in at least int32)."""
    refuse_out("sum", out)
    x = asarray(a)
    x = x.cast(_sum_dtype(x, dtype))
    if where is not None:
        x = asarray(where).where(x, 0)
    res = _reduce("sum", x, axis, keepdims, lambda t, ax, k: t.sum(ax, keepdim=k))
    return res if initial is None else res + initial


def prod(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None,
         keepdims: bool = False, initial: Any = None, where: ArrayLike = None) -> Tensor:
    """Product over `axis`."""
    refuse_out("prod", out)
    x = asarray(a)
    x = x.cast(_sum_dtype(x, dtype))
    if where is not None:
        x = asarray(where).where(x, 1)
    res = _reduce("prod", x, axis, keepdims, lambda t, ax, k: t.prod(ax, keepdim=k))
    return res if initial is None else res * initial


def _count(x: Tensor, axis: Axis, name: str) -> int:
    return int(np.prod([x.shape[i] for i in axes_of(axis, x.ndim, name)], dtype=np.int64))


def mean(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None,
         keepdims: bool = False, where: ArrayLike = None) -> Tensor:
    """Arithmetic mean over `axis` (float32 for integer input)."""
    refuse_out("mean", out)
    x = float_of(asarray(a))
    want = to_dtype(dtype)
    x = x if want is None else x.cast(want)
    if where is not None:
        mask = broadcast_mask(where, x)
        return sum(x, axis, keepdims=keepdims, where=mask) / \
            sum(mask.cast(x.dtype), axis, keepdims=keepdims)
    return sum(x, axis, keepdims=keepdims) / _count(x, axis, "mean")


def broadcast_mask(where: ArrayLike, x: Tensor) -> Tensor:
    from fgrad.numpy.shape import broadcast_to
    return broadcast_to(asarray(where), x.shape)


def var(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None, ddof: int = 0,
        keepdims: bool = False, *, correction: int | None = None) -> Tensor:
    """Variance: sum((a - mean)^2) / (n - ddof) over `axis` (ddof=0 by default)."""
    refuse_out("var", out)
    ddof = ddof if correction is None else correction
    x = float_of(asarray(a))
    want = to_dtype(dtype)
    x = x if want is None else x.cast(want)
    centered = x - mean(x, axis, keepdims=True)
    n = _count(x, axis, "var")
    return sum(centered * centered, axis, keepdims=keepdims) / builtins.max(n - ddof, 0)


def std(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None, ddof: int = 0,
        keepdims: bool = False, *, correction: int | None = None) -> Tensor:
    """Standard deviation: sqrt(var(a, axis, ddof=ddof))."""
    return var(a, axis, dtype, out, ddof, keepdims, correction=correction).sqrt()


def _extremum(name: str, method: str) -> Callable[..., Tensor]:
    def fn(a: ArrayLike, axis: Axis = None, out: Any = None, keepdims: bool = False,
           initial: Any = None, where: ArrayLike = None) -> Tensor:
        refuse_out(name, out)
        x = asarray(a)
        if where is not None:
            if initial is None:
                raise ValueError(f"fgrad.numpy.{name}: where= needs an initial= value")
            x = broadcast_mask(where, x).where(x, initial)
        if 0 in x.shape:
            raise ValueError(f"fgrad.numpy.{name}: zero-size array has no {method}imum")
        res = _reduce(name, x, axis, keepdims, lambda t, ax, k: getattr(t, method)(ax, k))
        if initial is not None:
            res = res.maximum(initial) if method == "max" else res.minimum(initial)
        return res
    fn.__name__ = name
    fn.__doc__ = f"The {method}imum over `axis` (NaN propagates)."
    return fn


max = _extremum("max", "max")  # noqa: A001
min = _extremum("min", "min")  # noqa: A001
amax, amin = max, min


def _arg(name: str, method: str) -> Callable[..., Tensor]:
    def fn(a: ArrayLike, axis: int | None = None, out: Any = None,
           keepdims: bool = False) -> Tensor:
        refuse_out(name, out)
        x = asarray(a)
        if axis is None:
            res = getattr(x.reshape(-1), method)(0)
            return res.reshape((1,) * x.ndim) if keepdims else res
        return getattr(x, method)(axis_of(axis, x.ndim, name), keepdims)
    fn.__name__ = name
    fn.__doc__ = f"Index of the first {method[3:]}imum along `axis` (None: flattened)."
    return fn


argmax = _arg("argmax", "argmax")
argmin = _arg("argmin", "argmin")


def any(a: ArrayLike, axis: Axis = None, out: Any = None,  # noqa: A001
        keepdims: bool = False) -> Tensor:
    """Whether any element along `axis` is nonzero."""
    refuse_out("any", out)
    x = asarray(a)
    x = x if x.dtype == dtypes.bool else x != 0
    return _reduce("any", x, axis, keepdims, lambda t, ax, k: t.any(ax, k))


def all(a: ArrayLike, axis: Axis = None, out: Any = None,  # noqa: A001
        keepdims: bool = False) -> Tensor:
    """Whether every element along `axis` is nonzero."""
    refuse_out("all", out)
    x = asarray(a)
    x = x if x.dtype == dtypes.bool else x != 0
    return _reduce("all", x, axis, keepdims, lambda t, ax, k: t.all(ax, k))


def _cumulative(name: str, method: str) -> Callable[..., Tensor]:
    def fn(a: ArrayLike, axis: int | None = None, dtype: Any = None,
           out: Any = None) -> Tensor:
        refuse_out(name, out)
        x = asarray(a)
        if axis is None:
            x, axis = x.reshape(-1), 0
        x = x.cast(_sum_dtype(x, dtype))
        return getattr(x, method)(axis_of(axis, x.ndim, name))
    fn.__name__ = name
    fn.__doc__ = f"The cumulative {method[3:]} along `axis` (None: flattened)."
    return fn


cumsum = _cumulative("cumsum", "cumsum")
cumprod = _cumulative("cumprod", "cumprod")
cumulative_sum = cumsum
cumulative_prod = cumprod


def ptp(a: ArrayLike, axis: Axis = None, out: Any = None, keepdims: bool = False) -> Tensor:
    """max - min along `axis`."""
    refuse_out("ptp", out)
    return max(a, axis, keepdims=keepdims) - min(a, axis, keepdims=keepdims)


def count_nonzero(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """The number of nonzero elements along `axis` (int32)."""
    x = asarray(a)
    return sum((x != 0).cast(dtypes.int32), axis, keepdims=keepdims)


def average(a: ArrayLike, axis: Axis = None, weights: ArrayLike = None,
            returned: bool = False, keepdims: bool = False) -> Any:
    """The weighted mean sum(a * w) / sum(w) along `axis` (w broadcast to a, or 1-d along a
    single axis); with returned=True also the sum of the weights."""
    x = float_of(asarray(a))
    if weights is None:
        avg = mean(x, axis, keepdims=keepdims)
        total = Tensor.full(avg.shape, float(_count(x, axis, "average")), dtype=avg.dtype)
        return (avg, total) if returned else avg
    w = float_of(asarray(weights))
    if w.shape != x.shape:
        if axis is None or w.ndim != 1 or not isinstance(axis, int):
            raise ValueError(f"fgrad.numpy.average: weights of shape {w.shape} need axis= "
                             f"(one axis) for an array of shape {x.shape}")
        ax = axis_of(axis, x.ndim, "average")
        w = w.reshape(tuple(-1 if i == ax else 1 for i in range(x.ndim)))
    from fgrad.numpy.shape import broadcast_to
    w = broadcast_to(w, x.shape)
    total = sum(w, axis, keepdims=keepdims)
    avg = sum(x * w, axis, keepdims=keepdims) / total
    return (avg, total) if returned else avg


# ---------------------------------------------------------------------------- order statistics

def _sorted_along(x: Tensor, axis: Axis, name: str) -> tuple[Tensor, int]:
    """x sorted along `axis` (several axes are moved to the end and merged)."""
    from fgrad.numpy.shape import moveaxis
    axes = axes_of(axis, x.ndim, name)
    x = moveaxis(x, axes, tuple(range(x.ndim - len(axes), x.ndim)))
    x = x.reshape(x.shape[:x.ndim - len(axes)] + (-1,))
    return x.sort(-1)[0], x.shape[-1]


def quantile(a: ArrayLike, q: ArrayLike, axis: Axis = None, out: Any = None,
             overwrite_input: bool = False, method: str = "linear",
             keepdims: bool = False) -> Tensor:
    """The q-th quantiles (q in [0, 1]) along `axis`, interpolated linearly (NumPy's default
    method; also "lower", "higher", "nearest", "midpoint"). q's axes come first."""
    refuse_out("quantile", out)
    x = float_of(asarray(a))
    s, n = _sorted_along(x, axis, "quantile")
    qt = float_of(asarray(q)).cast(s.dtype)
    pos = qt * (n - 1)
    lo = pos.floor().clip(0, n - 1)
    hi = pos.ceil().clip(0, n - 1)
    lo, hi, frac = _interpolation(method, pos, lo, hi, pos.round().clip(0, n - 1), "quantile")
    res = _pick(s, lo, qt.ndim) * (1 - _bcast(frac, s)) + _pick(s, hi, qt.ndim) * _bcast(frac,
                                                                                         s)
    if keepdims:
        kept = [1 if i in axes_of(axis, x.ndim, "quantile") else d
                for i, d in enumerate(x.shape)]
        res = res.reshape(qt.shape + tuple(kept))
    return res


def _interpolation(method: str, pos: Tensor, lo: Tensor, hi: Tensor, nearest: Tensor,
                   who: str) -> tuple[Tensor, Tensor, Tensor]:
    """(lo, hi, frac) of a quantile at fractional position `pos` between the order
    statistics lo and hi: the result is s[lo] * (1 - frac) + s[hi] * frac."""
    frac = pos - lo
    if method == "lower":
        return lo, lo, frac * 0
    if method == "higher":
        return hi, hi, frac * 0
    if method == "nearest":
        return nearest, nearest, frac
    if method == "midpoint":
        return lo, hi, (hi > lo).where(0.5, 0.0)
    if method != "linear":
        raise ValueError(f"fgrad.numpy.{who}: unknown method {method!r}; use 'linear', "
                         f"'lower', 'higher', 'nearest' or 'midpoint'")
    return lo, hi, frac


def _bcast(v: Tensor, s: Tensor) -> Tensor:
    return v.reshape(v.shape + (1,) * (s.ndim - 1))


def _pick(s: Tensor, pos: Tensor, q_ndim: int) -> Tensor:
    """s[..., pos] with pos's axes in front."""
    idx = pos.cast(dtypes.int32).reshape(-1)
    taken = s[..., idx]
    from fgrad.numpy.shape import moveaxis
    taken = moveaxis(taken, -1, 0)
    return taken.reshape(pos.shape + s.shape[:-1])


def percentile(a: ArrayLike, q: ArrayLike, axis: Axis = None, out: Any = None,
               overwrite_input: bool = False, method: str = "linear",
               keepdims: bool = False) -> Tensor:
    """Like `quantile` with q in percent."""
    return quantile(a, float_of(asarray(q)) / 100.0, axis, out, overwrite_input, method,
                    keepdims)


def median(a: ArrayLike, axis: Axis = None, out: Any = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Tensor:
    """The median along `axis` (the mean of the two middle values for even lengths)."""
    return quantile(a, 0.5, axis, out, overwrite_input, keepdims=keepdims)


# ---------------------------------------------------------------------------- nan-ignoring

def _nan_fill(a: ArrayLike, value: float) -> tuple[Tensor, Tensor]:
    x = asarray(a)
    if not x.dtype.is_float:
        return x, Tensor.full(x.shape, False)
    nan = x.isnan()
    return nan.where(value, x), nan


def nansum(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None,
           keepdims: bool = False) -> Tensor:
    """Sum treating NaNs as zero."""
    return sum(_nan_fill(a, 0.0)[0], axis, dtype, out, keepdims)


def nanprod(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None,
            keepdims: bool = False) -> Tensor:
    """Product treating NaNs as one."""
    return prod(_nan_fill(a, 1.0)[0], axis, dtype, out, keepdims)


def nanmean(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None,
            keepdims: bool = False) -> Tensor:
    """Mean of the non-NaN elements."""
    x, nan = _nan_fill(float_of(asarray(a)), 0.0)
    count = sum(nan.logical_not().cast(x.dtype), axis, keepdims=keepdims)
    return sum(x, axis, dtype, out, keepdims) / count


def nanvar(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None,
           ddof: int = 0, keepdims: bool = False) -> Tensor:
    """Variance of the non-NaN elements."""
    x, nan = _nan_fill(float_of(asarray(a)), 0.0)
    keep = nan.logical_not().cast(x.dtype)
    count = sum(keep, axis, keepdims=True)
    centered = (x - sum(x, axis, keepdims=True) / count) * keep
    res = sum(centered * centered, axis, keepdims=True) / (count - ddof)
    return res if keepdims else res.reshape(sum(x, axis).shape)


def nanstd(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: Any = None,
           ddof: int = 0, keepdims: bool = False) -> Tensor:
    """Standard deviation of the non-NaN elements."""
    return nanvar(a, axis, dtype, out, ddof, keepdims).sqrt()


def nanmax(a: ArrayLike, axis: Axis = None, out: Any = None, keepdims: bool = False) -> Tensor:
    """Maximum ignoring NaNs (NaN where every element is NaN)."""
    x, nan = _nan_fill(a, -math.inf)
    res = max(x, axis, out, keepdims)
    return all(nan, axis, keepdims=keepdims).where(math.nan, res) if x.dtype.is_float else res


def nanmin(a: ArrayLike, axis: Axis = None, out: Any = None, keepdims: bool = False) -> Tensor:
    """Minimum ignoring NaNs (NaN where every element is NaN)."""
    x, nan = _nan_fill(a, math.inf)
    res = min(x, axis, out, keepdims)
    return all(nan, axis, keepdims=keepdims).where(math.nan, res) if x.dtype.is_float else res


def nanargmax(a: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """argmax ignoring NaNs."""
    return argmax(_nan_fill(a, -math.inf)[0], axis, keepdims=keepdims)


def nanargmin(a: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """argmin ignoring NaNs."""
    return argmin(_nan_fill(a, math.inf)[0], axis, keepdims=keepdims)


def nancumsum(a: ArrayLike, axis: int | None = None, dtype: Any = None) -> Tensor:
    """cumsum treating NaNs as zero."""
    return cumsum(_nan_fill(a, 0.0)[0], axis, dtype)


def nanmedian(a: ArrayLike, axis: Axis = None, out: Any = None, overwrite_input: bool = False,
              keepdims: bool = False) -> Tensor:
    """Median of the non-NaN elements (NaN where a slice is all NaN): `nanquantile` at 0.5,
    so it works under jit and grad."""
    refuse_out("nanmedian", out)
    return nanquantile(a, 0.5, axis=axis, keepdims=keepdims)


def nanquantile(a: ArrayLike, q: ArrayLike, axis: Axis = None, out: Any = None,
                overwrite_input: bool = False, method: str = "linear",
                keepdims: bool = False, *, weights: ArrayLike = None) -> Tensor:
    """`quantile` of the non-NaN elements (NaN where a slice is all NaN); works under jit
    and grad (each slice's count of NaNs is a value, not a shape)."""
    refuse_out("nanquantile", out)
    if weights is not None:
        raise NotImplementedError("fgrad.numpy.nanquantile: weights= is not supported")
    x = float_of(asarray(a))
    s, _ = _sorted_along(x, axis, "nanquantile")   # NaNs sort last
    count = s.isnan().logical_not().cast(s.dtype).sum(-1)
    qt = float_of(asarray(q)).cast(s.dtype)
    if qt.ndim > 1:
        raise ValueError(f"fgrad.numpy.nanquantile: q must be a scalar or 1-d, got shape "
                         f"{qt.shape}")
    if type(qt) is Tensor and not ((qt.numpy() >= 0) & (qt.numpy() <= 1)).all():
        raise ValueError("fgrad.numpy.nanquantile: q must be in [0, 1] (nanpercentile: in "
                         "[0, 100])")
    top = (count - 1).clip(0, None)
    pos = qt.reshape(qt.shape + (1,) * count.ndim) * top
    lo, hi = pos.floor().clip(0, None), pos.ceil()
    hi = (hi > top).where(top, hi)
    lo, hi, frac = _interpolation(method, pos, lo, hi, pos.round(), "nanquantile")
    res = _gather_rows(s, lo) * (1 - frac) + _gather_rows(s, hi) * frac
    res = (count == 0).where(math.nan, res)
    if keepdims:
        axes = axes_of(axis, x.ndim, "nanquantile")
        res = res.reshape(qt.shape + tuple(1 if i in axes else d for i, d in
                                           enumerate(x.shape)))
    return res


def _gather_rows(s: Tensor, pos: Tensor) -> Tensor:
    """s[..., pos[j, ...]] per row: pos has q's axes in front of s's leading axes."""
    from fgrad.numpy.shape import moveaxis
    q_nd = pos.ndim - (s.ndim - 1)
    idx = moveaxis(pos.cast(dtypes.int32).reshape((-1,) + s.shape[:-1]), 0, -1)
    got = s.gather(-1, idx) if s.ndim else s
    return moveaxis(got, -1, 0).reshape(pos.shape[:q_nd] + s.shape[:-1])


def nanpercentile(a: ArrayLike, q: ArrayLike, axis: Axis = None, out: Any = None,
                  overwrite_input: bool = False, method: str = "linear",
                  keepdims: bool = False, *, weights: ArrayLike = None) -> Tensor:
    """`nanquantile` with q in percent."""
    return nanquantile(a, float_of(asarray(q)) / 100.0, axis, out, overwrite_input, method,
                       keepdims, weights=weights)
