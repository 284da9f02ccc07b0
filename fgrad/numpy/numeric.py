"""Numerical routines with jax.numpy's semantics: differences (diff, ediff1d, gradient,
unwrap), interpolation and binning (interp, digitize, bincount, histogram,
histogram2d, histogramdd), 1-d convolution
(convolve, correlate), integration (trapezoid) and statistics (cov, corrcoef).

They work under jit, grad and vmap where JAX's do: shapes depend only on static arguments
(bincount needs `length=` under a transformation; histogram's range may be traced). Integer
inputs give float32 results where JAX's do (interp, histogram, convolve, cov, ...).
"""
from __future__ import annotations

import builtins
import math
import operator
from typing import Any, Sequence

import ml_dtypes
import numpy as np

from fgrad.core.dtypes import DType, dtypes
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, asarray, axis_of, is_scalar, result_type, to_dtype
from fgrad.numpy.shape import broadcast_to, concatenate, moveaxis


def inexact(*xs: Any) -> list[Tensor]:
    """The arguments as Tensors of their common float dtype (float32 for ints and bools;
    Python scalars are weak)."""
    dt = result_type(*xs)
    dt = dt if dt.is_float else dtypes.default_float
    return [asarray(x, dt) for x in xs]


def static_int(value: Any, name: str, arg: str) -> int:
    """A concrete Python int for an argument that fixes a shape (TypeError otherwise)."""
    if isinstance(value, Tensor):
        if type(value) is not Tensor:
            raise TypeError(f"fgrad.numpy.{name}: {arg} fixes the result's shape, so it must "
                            f"be a concrete Python int, not a traced value; pass it as a "
                            f"static value (e.g. close over it instead of passing it to jit)")
        value = value.numpy()
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"fgrad.numpy.{name}: {arg} must be an int, got "
                        f"{type(value).__name__} {value!r}") from None


def _traced(x: Tensor) -> bool:
    return type(x) is not Tensor


def _slice(x: Tensor, axis: int, start: int | None, stop: int | None) -> Tensor:
    return x[(slice(None),) * axis + (slice(start, stop),)]


# ---------------------------------------------------------------------------- differences

def _edge(v: ArrayLike, x: Tensor, axis: int) -> Tensor:
    t = asarray(v)
    if t.ndim == 0:
        shape = list(x.shape)
        shape[axis] = 1
        t = broadcast_to(t, tuple(shape))
    return t


def diff(a: ArrayLike, n: int = 1, axis: int = -1, prepend: ArrayLike = None,
         append: ArrayLike = None) -> Tensor:
    """The n-th discrete difference along `axis` (bools: `!=`); `prepend`/`append` values
    (scalars broadcast) are joined to `a` first."""
    x = asarray(a)
    n = static_int(n, "diff", "n")
    if n < 0:
        raise ValueError(f"fgrad.numpy.diff: order n must be non-negative, got {n}")
    if n == 0:
        return x
    if x.ndim == 0:
        raise ValueError("fgrad.numpy.diff: needs an array of at least one dimension; use "
                         "fnp.atleast_1d first")
    ax = axis_of(axis, x.ndim, "diff")
    parts = ([_edge(prepend, x, ax)] if prepend is not None else []) + [x] + \
        ([_edge(append, x, ax)] if append is not None else [])
    if len(parts) > 1:
        x = concatenate(parts, ax)
    for _ in range(n):
        hi, lo = _slice(x, ax, 1, None), _slice(x, ax, None, -1)
        x = hi != lo if x.dtype == dtypes.bool else hi - lo
    return x


def ediff1d(ary: ArrayLike, to_end: ArrayLike = None, to_begin: ArrayLike = None) -> Tensor:
    """Differences of consecutive elements of the flattened array, with optional values
    before and after (cast to the array's dtype)."""
    x = asarray(ary).reshape(-1)
    out = x[1:] - x[:-1]
    if to_begin is not None:
        out = concatenate([asarray(to_begin).reshape(-1).cast(x.dtype), out])
    if to_end is not None:
        out = concatenate([out, asarray(to_end).reshape(-1).cast(x.dtype)])
    return out


def gradient(f: ArrayLike, *varargs: ArrayLike, axis: int | Sequence[int] | None = None,
             edge_order: int | None = None) -> Any:
    """The gradient by central differences inside and one-sided differences at the edges
    (NumPy's edge_order=1). Spacing: none (1), one scalar or 1-d coordinate array for every
    axis, or one per axis. One axis gives an array, several give a list."""
    if edge_order not in (None, 1):
        raise NotImplementedError("fgrad.numpy.gradient: only edge_order=1 is supported "
                                  "(as in jax.numpy)")
    x, *spacing = inexact(f, *varargs)
    seq = range(x.ndim) if axis is None else (axis,) if isinstance(axis, (int, np.integer)) \
        else axis
    axes = tuple(axis_of(a, x.ndim, "gradient") for a in seq)
    if not axes:
        return []
    if min(x.shape[a] for a in axes) < 2:
        raise ValueError(f"fgrad.numpy.gradient: every differentiated axis needs at least 2 "
                         f"elements, got shape {x.shape}")
    if len(spacing) > 1 and len(spacing) != len(axes):
        raise TypeError(f"fgrad.numpy.gradient: got {len(spacing)} spacing arguments for "
                        f"{len(axes)} axes; pass none, one, or one per axis")
    steps = list(spacing) if len(spacing) > 1 else \
        [spacing[0] if spacing else asarray(1.0, x.dtype)] * len(axes)
    out = [_gradient_along(x, h, ax) for ax, h in zip(axes, steps)]
    return out[0] if len(axes) == 1 else out


def _gradient_along(x: Tensor, h: Tensor, ax: int) -> Tensor:
    def sl(t: Tensor, start: int | None, stop: int | None) -> Tensor:
        return _slice(t, ax, start, stop)
    upper = sl(x, 1, 2) - sl(x, 0, 1)
    lower = sl(x, -1, None) - sl(x, -2, -1)
    if h.ndim == 0:
        inner = (sl(x, 2, None) - sl(x, None, -2)) * 0.5 / h
        upper, lower = upper / h, lower / h
    elif h.ndim == 1:
        if h.shape[0] != x.shape[ax]:
            raise ValueError(f"fgrad.numpy.gradient: a coordinate array must have the length "
                             f"of its axis ({x.shape[ax]}), got {h.shape[0]}")
        h = h.reshape(tuple(-1 if i == ax else 1 for i in range(x.ndim)))
        upper = upper / (sl(h, 1, 2) - sl(h, 0, 1))
        lower = lower / (sl(h, -1, None) - sl(h, -2, -1))
        d1, d2 = sl(h, 1, -1) - sl(h, 0, -2), sl(h, 2, None) - sl(h, 1, -1)
        inner = (-d2 / (d1 * (d1 + d2))) * sl(x, 0, -2) + ((d2 - d1) / (d1 * d2)) * \
            sl(x, 1, -1) + (d1 / (d2 * (d1 + d2))) * sl(x, 2, None)
    else:
        raise ValueError("fgrad.numpy.gradient: spacing must be a scalar or a 1-d array")
    return concatenate([upper, inner, lower], ax)


def unwrap(p: ArrayLike, discont: ArrayLike = None, axis: int = -1,
           period: ArrayLike = 2 * math.pi) -> Tensor:
    """Phase unwrapping: jumps larger than `discont` (default period/2) between neighbours
    along `axis` are replaced by their complement modulo `period`."""
    x = asarray(p)
    dt = result_type(x, period)
    x, per = x.cast(dt), asarray(period, dt)
    ax = axis_of(axis, x.ndim, "unwrap")
    if x.shape[ax] == 0:
        return x
    disc = per / 2 if discont is None else discont
    interval = per // 2 if dt.is_int else per / 2
    dd = diff(x, axis=ax)
    ddmod = (dd + interval) % per - interval
    ddmod = ((ddmod == -interval) & (dd > 0)).where(interval, ddmod)
    correct = (dd.abs() < disc).where(0, ddmod - dd)
    return concatenate([_slice(x, ax, 0, 1), _slice(x, ax, 1, None) + correct.cumsum(ax)], ax)


# ---------------------------------------------------------------------------- interpolation

def _spacing_of_eps(dt: DType) -> float:
    eps = ml_dtypes.finfo(dt.np).eps
    return float(np.spacing(np.asarray(eps, dt.np)))


def interp(x: ArrayLike, xp: ArrayLike, fp: ArrayLike, left: Any = None, right: Any = None,
           period: ArrayLike = None) -> Tensor:
    """Piecewise-linear interpolation of the points (xp, fp) at x (xp increasing). Outside
    [xp[0], xp[-1]]: `left`/`right` (default fp[0]/fp[-1], or "extrapolate"); `period`
    makes xp periodic. NaN in x gives NaN. Float32 for integer inputs."""
    xt, xpt = inexact(x, xp)
    (fpt,) = inexact(fp)
    if xpt.ndim != 1 or xpt.shape != fpt.shape:
        raise ValueError(f"fgrad.numpy.interp: xp and fp must be 1-d arrays of one length, got "
                         f"shapes {xpt.shape} and {fpt.shape}")
    if xpt.shape[0] == 0:
        raise ValueError("fgrad.numpy.interp: xp and fp must not be empty")
    for name, side in (("left", left), ("right", right)):
        if isinstance(side, str) and side != "extrapolate":
            raise ValueError(f"fgrad.numpy.interp: the only string {name}= accepts is "
                             f"'extrapolate', got {side!r}")
    if period is not None:
        per = asarray(period, xt.dtype).abs()
        if per.ndim != 0:
            raise ValueError("fgrad.numpy.interp: period must be a scalar")
        xt, xpt = xt % per, xpt % per
        order = xpt.argsort(0)
        xpt, fpt = xpt[order], fpt[order]
        xpt = concatenate([xpt[-1:] - per, xpt, xpt[:1] + per])
        fpt = concatenate([fpt[-1:], fpt, fpt[:1]])
    from fgrad.numpy.products import searchsorted
    n = xpt.shape[0]
    if n == 1:
        f = broadcast_to(fpt[0], xt.shape) + xt * 0
    else:
        i = searchsorted(xpt, xt, side="right").clip(1, n - 1)
        x0, f0 = xpt[i - 1], fpt[i - 1]
        dx, df = xpt[i] - x0, fpt[i] - f0
        flat = dx.abs() <= _spacing_of_eps(xpt.dtype)
        f = flat.where(f0, f0 + (xt - x0) / flat.where(1.0, dx) * df)
    if period is None:
        if not isinstance(left, str):
            f = (xt < xpt[0]).where(fpt[0] if left is None else left, f)
        if not isinstance(right, str):
            f = (xt > xpt[-1]).where(fpt[-1] if right is None else right, f)
    return f


def digitize(x: ArrayLike, bins: ArrayLike, right: bool = False, *,
             method: str | None = None) -> Tensor:
    """The index of the bin of each x (int32): bins increasing or decreasing; right=False
    means bins[i-1] <= x < bins[i] for increasing bins."""
    from fgrad.numpy.products import searchsorted
    xt, b = asarray(x), asarray(bins)
    if b.ndim != 1:
        raise ValueError(f"fgrad.numpy.digitize: bins must be 1-d, got shape {b.shape}")
    if b.shape[0] == 0:
        return Tensor(np.zeros(xt.shape, np.int32))
    side = "left" if right else "right"
    up = searchsorted(b, xt, side=side)
    down = b.shape[0] - searchsorted(b.flip(0), xt, side=side)
    return (b[-1] >= b[0]).where(up, down).cast(dtypes.int32)


# ---------------------------------------------------------------------------- counting

def bincount(x: ArrayLike, weights: ArrayLike = None, minlength: int = 0, *,
             length: int | None = None) -> Tensor:
    """Occurrences (or summed weights) of each value 0..length-1 of the non-negative ints x
    (int32 counts; the weights' dtype with weights). As in JAX, negative values count in
    bin 0 and values >= length are dropped. Under jit/vmap/grad pass a static `length`."""
    xt = asarray(x)
    if xt.dtype == dtypes.bool:
        xt = xt.cast(dtypes.int32)
    if not xt.dtype.is_int:
        raise TypeError(f"fgrad.numpy.bincount: x must hold integers, got {xt.dtype.np}; "
                        f"cast it first, e.g. fnp.astype(x, fnp.int32)")
    if xt.ndim != 1:
        raise ValueError(f"fgrad.numpy.bincount: x must be 1-d, got shape {xt.shape}")
    wide = xt.dtype.itemsize == 8 or xt.dtype == dtypes.uint32
    xt = xt.cast(dtypes.int64 if wide else dtypes.int32)
    minlength = static_int(minlength, "bincount", "minlength")
    if length is None:
        if _traced(xt):
            raise TypeError("fgrad.numpy.bincount: the result's length depends on the values "
                            "of x, so under jit/vmap/grad pass length=N (a static int); "
                            "values >= N are dropped")
        top = max(0, int(xt.numpy().max())) + 1 if xt.shape[0] else 0
        length = max(minlength, top)
    length = static_int(length, "bincount", "length")
    if weights is None:
        w = Tensor(np.ones(xt.shape, np.int32))
    else:
        w = asarray(weights)
        if w.shape != xt.shape:
            raise ValueError(f"fgrad.numpy.bincount: weights must have the shape of x "
                             f"{xt.shape}, got {w.shape}")
    return scatter_add(xt, w, length)


def scatter_add(idx: Tensor, w: Tensor, length: int) -> Tensor:
    """zeros(length).at[max(idx, 0)].add(w), dropping idx >= length."""
    out = Tensor(np.zeros(length, w.dtype.np))
    if length == 0 or idx.shape[0] == 0:
        return out
    keep = idx < length
    return out.at[idx.clip(0, length - 1)].add(keep.where(w, 0).cast(w.dtype))


def histogram_bin_edges(a: ArrayLike, bins: ArrayLike = 10, range: Any = None,  # noqa: A002
                        weights: ArrayLike = None) -> Tensor:
    """The bin edges `histogram` uses: `bins` edges as given, or an int number of equal
    bins spanning `range` (default: the data's min and max, which may be traced)."""
    if isinstance(bins, str):
        raise NotImplementedError("fgrad.numpy.histogram_bin_edges: string bins (bin "
                                  "estimators) are not supported; pass a number of bins or "
                                  "the edges")
    (x,) = inexact(a)
    if isinstance(bins, Tensor) and bins.ndim == 1 or \
            not isinstance(bins, Tensor) and np.ndim(bins) == 1:
        return asarray(bins, x.dtype)
    n = static_int(bins, "histogram", "bins")
    if n < 1:
        raise ValueError(f"fgrad.numpy.histogram: bins must be positive, got {n}")
    if range is None:
        lo, hi = (x.min(), x.max()) if x.numel() else (asarray(0.0, x.dtype),
                                                       asarray(1.0, x.dtype))
    else:
        r = asarray(range, x.dtype) if not isinstance(range, (list, tuple)) else \
            concatenate([asarray(v, x.dtype).reshape(1) for v in range])
        if r.shape != (2,):
            raise ValueError(f"fgrad.numpy.histogram: range must be a pair (lo, hi), got "
                             f"{range!r}")
        lo, hi = r[0], r[1]
    same = hi == lo
    lo, hi = same.where(lo - 0.5, lo), same.where(hi + 0.5, hi)
    from fgrad.numpy.creation import linspace
    return linspace(lo, hi, n + 1).cast(x.dtype)


def histogram(a: ArrayLike, bins: ArrayLike = 10, range: Any = None,  # noqa: A002
              weights: ArrayLike = None, density: bool | None = None
              ) -> tuple[Tensor, Tensor]:
    """(counts, bin_edges) of the flattened data: float counts (float32 for integer data,
    as in JAX); the last bin includes its right edge; values outside the range and NaNs are
    not counted; density=True divides by the bin widths and the total."""
    x = asarray(a)
    if weights is None:
        (x,) = inexact(x)
        w = Tensor(np.ones(x.shape, x.dtype.np))
    else:
        wt = asarray(weights)
        if wt.shape != x.shape:
            raise ValueError(f"fgrad.numpy.histogram: weights must have the shape of a "
                             f"{x.shape}, got {wt.shape}")
        x, w = inexact(x, wt)
    edges = histogram_bin_edges(x, bins, range)
    from fgrad.numpy.products import searchsorted
    x, w = x.reshape(-1), w.reshape(-1)
    m = edges.shape[0]
    idx = searchsorted(edges, x, side="right")
    idx = (x == edges[-1]).where(m - 1, idx)
    counts = scatter_add(idx, w, m + 1)[1:-1]
    if density:
        counts = counts / diff(edges) / counts.sum()
    return counts, edges


# ---------------------------------------------------------------------------- convolution

def _conv(name: str, a: ArrayLike, v: ArrayLike, mode: str, preferred: Any) -> Tensor:
    x, y = asarray(a), asarray(v)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(f"fgrad.numpy.{name}: a and v must be 1-d, got shapes {x.shape} and "
                         f"{y.shape}")
    if x.shape[0] == 0 or y.shape[0] == 0:
        raise ValueError(f"fgrad.numpy.{name}: a and v must not be empty, got shapes "
                         f"{x.shape} and {y.shape}")
    want = to_dtype(preferred)
    if want is None:
        x, y = inexact(x, y)
    else:
        dt = result_type(x, y)
        x, y = x.cast(dt), y.cast(dt)
    reverse = False
    if name == "correlate":
        if x.shape[0] < y.shape[0]:
            x, y, reverse = y, x, True
    else:
        if x.shape[0] < y.shape[0]:
            x, y = y, x
        y = y.flip(0)
    m = y.shape[0]
    pads = {"valid": (0, 0), "same": (m // 2, m - m // 2 - 1), "full": (m - 1, m - 1)}
    if mode not in pads:
        raise ValueError(f"fgrad.numpy.{name}: mode must be 'full', 'same' or 'valid', got "
                         f"{mode!r}")
    lo, hi = pads[mode]
    xp = x.pad(((lo, hi),)) if lo or hi else x
    count = xp.shape[0] - m + 1
    windows = xp[Tensor(np.arange(count, dtype=np.int32)[:, None] + np.arange(m,
                                                                                dtype=np.int32))]
    out = windows @ y
    out = out.flip(0) if reverse else out
    return out if want is None else out.cast(want)


def convolve(a: ArrayLike, v: ArrayLike, mode: str = "full", *, precision: Any = None,
             preferred_element_type: Any = None) -> Tensor:
    """Discrete linear convolution of two 1-d arrays (mode "full", "same" or "valid");
    float32 for integer inputs, as in JAX."""
    return _conv("convolve", a, v, mode, preferred_element_type)


def correlate(a: ArrayLike, v: ArrayLike, mode: str = "valid", *, precision: Any = None,
              preferred_element_type: Any = None) -> Tensor:
    """Cross-correlation of two 1-d arrays: c[k] = sum_n a[n + k] * v[n] (mode "valid",
    "same" or "full"); float32 for integer inputs, as in JAX."""
    return _conv("correlate", a, v, mode, preferred_element_type)


# ---------------------------------------------------------------------------- integration

def trapezoid(y: ArrayLike, x: ArrayLike = None, dx: ArrayLike = 1.0,
              axis: int = -1) -> Tensor:
    """The integral of y along `axis` by the trapezoidal rule, at sample points x (1-d, or
    shaped like y) or with spacing dx."""
    d: Any
    if x is None:
        (yt,) = inexact(y)
        d = dx if is_scalar(dx) else asarray(dx)
        if not is_scalar(d) and d.ndim > 0:
            d = moveaxis(d.reshape((1,) * (yt.ndim - d.ndim) + d.shape), axis, -1)
    else:
        yt, xt = inexact(y, x)
        d = diff(xt) if xt.ndim == 1 else moveaxis(diff(xt, axis=axis), axis, -1)
    yt = moveaxis(yt, axis_of(axis, yt.ndim, "trapezoid"), -1)
    if is_scalar(d) or d.ndim == 0 or d.shape[-1] == 1:
        step = d if is_scalar(d) or d.ndim == 0 else d[..., 0]
        return step * (yt.sum(-1) - 0.5 * (yt[..., 0] + yt[..., -1]))
    return (0.5 * d * (yt[..., 1:] + yt[..., :-1])).sum(-1)


# ---------------------------------------------------------------------------- statistics

def cov(m: ArrayLike, y: ArrayLike = None, rowvar: bool = True, bias: bool = False,
        ddof: int | None = None, fweights: ArrayLike = None, aweights: ArrayLike = None,
        dtype: Any = None) -> Tensor:
    """The covariance matrix of the variables in the rows of m (columns if rowvar=False),
    with y's variables appended; ddof defaults to 1 (0 with bias=True); integer frequency
    weights and float observation weights as in NumPy."""
    xs = inexact(m) if y is None else inexact(m, y)
    if any(t.ndim > 2 for t in xs):
        raise ValueError("fgrad.numpy.cov: m and y must have at most 2 dimensions")
    want = to_dtype(dtype)
    if want is not None and not want.is_float:
        raise ValueError(f"fgrad.numpy.cov: dtype must be a float dtype, got {dtype!r}")
    X = _rows(xs[0], rowvar)
    if X.shape[0] == 0:
        return Tensor(np.zeros((0, 0), X.dtype.np))
    if y is not None:
        X = concatenate([X, _rows(xs[1], rowvar)], 0)
    if X.shape[1] == 0:
        shape = () if X.shape[0] == 1 else (X.shape[0],) * 2
        return Tensor(np.full(shape, np.nan, X.dtype.np))
    ddof = (0 if bias else 1) if ddof is None else ddof
    w = _weights(fweights, "fweights", X.shape[1], integer=True)
    aw = _weights(aweights, "aweights", X.shape[1], integer=False)
    if aw is not None:
        w = aw if w is None else w * aw
    if want is not None:
        X = X.cast(want)
        w = None if w is None else w.cast(want)
        aw = None if aw is None else aw.cast(want)
    if w is None:
        avg = X.mean(1)
        fact: Any = X.shape[1] - ddof
    else:
        w = w.cast(X.dtype)
        w_sum = w.sum()
        avg = (X * w).sum(1) / w_sum
        fact = w_sum if ddof == 0 else w_sum - ddof if aw is None else \
            w_sum - ddof * (w * aw.cast(X.dtype)).sum() / w_sum
    X = X - avg.reshape(-1, 1)
    XT = (X if w is None else X * w).permute(1, 0)
    out = (X @ XT) / fact
    return out.reshape(()) if out.shape == (1, 1) else out


def _rows(t: Tensor, rowvar: bool) -> Tensor:
    X = t.reshape(1, -1) if t.ndim < 2 else t
    return X.permute(1, 0) if not rowvar and X.shape[0] != 1 else X


def _weights(w: ArrayLike, name: str, n: int, integer: bool) -> Tensor | None:
    if w is None:
        return None
    t = asarray(w)
    if t.ndim != 1 or t.shape[0] != n:
        raise ValueError(f"fgrad.numpy.cov: {name} must be 1-d with one weight per "
                         f"observation ({n}), got shape {t.shape}")
    if integer and not (t.dtype.is_int or t.dtype == dtypes.bool):
        raise TypeError(f"fgrad.numpy.cov: fweights must be integers, got {t.dtype.np}; use "
                        f"aweights for float weights")
    return t.abs()


def corrcoef(x: ArrayLike, y: ArrayLike = None, rowvar: bool = True,
             dtype: Any = None) -> Tensor:
    """Pearson correlation coefficients: cov(x, y) / (std_i std_j), clipped to [-1, 1]."""
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    from fgrad.numpy.shape import diagonal
    d = diagonal(c).sqrt()
    c = c / d.reshape(-1, 1) / d.reshape(1, -1)
    return c.clip(-1, 1)


def histogramdd(sample: ArrayLike, bins: Any = 10, range: Any = None,  # noqa: A002
                weights: ArrayLike = None, density: bool | None = None
                ) -> tuple[Tensor, list[Tensor]]:
    """(counts, per-dimension edges) of the rows of an (N, D) sample (a 1-d sample is
    (N, 1)): bins an int, or per dimension an int or edges; range None or per dimension a
    pair or None. int32 counts (float with weights or density), as in JAX."""
    s = asarray(sample)
    s = s.reshape(-1, 1) if s.ndim == 1 else s
    if s.ndim != 2:
        raise ValueError(f"fgrad.numpy.histogramdd: sample must be (N, D), got shape "
                         f"{s.shape}")
    n, d = s.shape
    per_dim = isinstance(bins, (list, tuple)) or (isinstance(bins, Tensor) and bins.ndim == 1) \
        or (isinstance(bins, np.ndarray) and bins.ndim == 1)
    bin_list = list(bins) if per_dim else [bins] * d
    ranges = [None] * d if range is None else list(range)
    if len(bin_list) != d or len(ranges) != d:
        raise ValueError(f"fgrad.numpy.histogramdd: bins and range need one entry per "
                         f"dimension ({d}), got {len(bin_list)} and {len(ranges)}")
    from fgrad.numpy.products import searchsorted
    (x,) = inexact(s)
    edges: list[Tensor] = []
    flat, sizes = Tensor(np.zeros(n, np.int32)), []
    for k in builtins.range(d):
        col = x[:, k]
        e = histogram_bin_edges(col, bin_list[k], ranges[k])
        m = e.shape[0]
        idx = searchsorted(e, col, side="right")
        idx = (col == e[-1]).where(m - 1, idx).cast(dtypes.int32)
        flat = flat * (m + 1) + idx
        sizes.append(m + 1)
        edges.append(e)
    if weights is None:
        w = Tensor(np.ones(n, (dtypes.default_float if density else dtypes.default_int).np))
    else:
        w = asarray(weights)
        if w.shape != (n,):
            raise ValueError(f"fgrad.numpy.histogramdd: weights must have shape ({n},), got "
                             f"{w.shape}")
        (w,) = inexact(w)
    counts = scatter_add(flat, w, math.prod(sizes)).reshape(sizes)
    counts = counts[tuple(slice(1, -1) for _ in sizes)]
    if density:
        counts = counts / counts.sum()
        for k, e in enumerate(edges):
            width = diff(e)
            counts = counts / width.reshape(tuple(-1 if i == k else 1 for i in
                                                  builtins.range(d)))
    return counts, edges


def histogram2d(x: ArrayLike, y: ArrayLike, bins: Any = 10, range: Any = None,  # noqa: A002
                weights: ArrayLike = None, density: bool | None = None
                ) -> tuple[Tensor, Tensor, Tensor]:
    """(counts, x edges, y edges) of the points (x[i], y[i]); bins an int, a pair of ints
    or edges, or one edges array for both axes."""
    xt, yt = asarray(x), asarray(y)
    if xt.ndim != 1 or xt.shape != yt.shape:
        raise ValueError(f"fgrad.numpy.histogram2d: x and y must be 1-d of the same length, "
                         f"got shapes {xt.shape} and {yt.shape}")
    try:
        pair = len(bins) == 2
    except TypeError:
        pair = False
    if not pair and not isinstance(bins, (int, np.integer)):
        edges = asarray(bins)
        bins = [edges, edges]
    from fgrad.numpy.shape import stack
    counts, (ex, ey) = histogramdd(stack(inexact(xt, yt), 1), bins, range, weights, density)
    return counts, ex, ey
