"""Index arithmetic and index arrays: indices, unravel_index, ravel_multi_index,
tril/triu/diag indices, ix_, fill_diagonal, and the index tricks mgrid, ogrid, s_,
index_exp (jax.numpy's semantics; index arrays are int32).

Shapes and sizes are static; the index values themselves may be traced.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, asarray, to_dtype

s_ = np.s_
index_exp = np.index_exp


def _dims(shape: Any, name: str) -> tuple[int, ...]:
    seq = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    out = []
    for d in seq:
        if isinstance(d, Tensor) and type(d) is not Tensor:
            raise TypeError(f"fgrad.numpy.{name}: the shape must be concrete ints, not traced "
                            f"values")
        out.append(int(d))
    return tuple(out)


def _int_array(a: ArrayLike, name: str) -> Tensor:
    t = asarray(a)
    if not t.dtype.is_int:
        raise TypeError(f"fgrad.numpy.{name}: indices must be integers, got {t.dtype.np}; "
                        f"cast them first, e.g. fnp.astype(i, fnp.int32)")
    return t


def indices(dimensions: Sequence[int], dtype: Any = None, sparse: bool = False) -> Any:
    """The index grid of `dimensions`: an array of shape (len(dimensions), *dimensions), or
    with sparse=True a tuple of broadcastable index arrays (int32 by default)."""
    dims = _dims(dimensions, "indices")
    dt = (to_dtype(dtype) or dtypes.default_int).np
    if sparse:
        return tuple(Tensor(g) for g in np.indices(dims, dtype=dt, sparse=True))
    return Tensor(np.indices(dims, dtype=dt))


def unravel_index(indices: ArrayLike, shape: Sequence[int]) -> tuple[Tensor, ...]:
    """Flat indices as a tuple of coordinate arrays into `shape`. As in JAX, out-of-range
    flat indices are clamped (negative ones from -size count from the end)."""
    idx = _int_array(indices, "unravel_index")
    dims = _dims(shape, "unravel_index")
    out: list[Tensor] = []
    rest = idx
    for d in reversed(dims):
        out.append(rest % d if d else rest * 0)
        rest = rest // d if d else rest
    out.reverse()
    above = rest > 0
    below = rest < -1 if not idx.dtype.is_unsigned else rest != rest
    return tuple(above.where(d - 1, below.where(0, o)).cast(idx.dtype)
                 for d, o in zip(dims, out))


def ravel_multi_index(multi_index: Sequence[ArrayLike], dims: Sequence[int],
                      mode: str = "raise", order: str = "C", *, dtype: Any = None) -> Tensor:
    """Coordinate arrays into `dims` as flat indices. mode: "raise" (concrete indices
    only), "wrap", "clip" or "ignore"; order "C" or "F"."""
    shape = _dims(dims, "ravel_multi_index")
    if len(multi_index) != len(shape):
        raise ValueError(f"fgrad.numpy.ravel_multi_index: got {len(multi_index)} index arrays "
                         f"for {len(shape)} dimensions")
    idx = [_int_array(i, "ravel_multi_index") for i in multi_index]
    want = to_dtype(dtype) or dtypes.default_int
    if math.prod(shape) - 1 > np.iinfo(want.np).max:
        raise ValueError(f"fgrad.numpy.ravel_multi_index: {want.np} cannot hold the flat "
                         f"indices of {shape}; pass a wider dtype=")
    if mode == "raise":
        if any(type(i) is not Tensor for i in idx):
            raise TypeError("fgrad.numpy.ravel_multi_index: mode='raise' needs concrete "
                            "indices; under jit/vmap/grad use mode='wrap' or mode='clip'")
        for i, d in zip(idx, shape):
            vals = i.numpy()
            if vals.size and (vals.min() < 0 or vals.max() >= d):
                raise ValueError(f"fgrad.numpy.ravel_multi_index: an index is out of range "
                                 f"for dimension of size {d}; use mode='wrap' or 'clip'")
    elif mode == "clip":
        idx = [i.clip(0, d - 1) for i, d in zip(idx, shape)]
    elif mode == "wrap":
        idx = [i % d for i, d in zip(idx, shape)]
    elif mode != "ignore":
        raise ValueError(f"fgrad.numpy.ravel_multi_index: mode must be 'raise', 'wrap', "
                         f"'clip' or 'ignore', got {mode!r}")
    if order not in ("C", "F"):
        raise ValueError(f"fgrad.numpy.ravel_multi_index: order must be 'C' or 'F', got "
                         f"{order!r}")
    sizes = shape if order == "F" else shape[::-1]
    strides = np.cumprod((1,) + sizes[:-1])
    strides = strides if order == "F" else strides[::-1]
    out: Any = Tensor(np.zeros((), want.np))
    for i, s in zip(idx, strides):
        out = out + i.cast(want) * int(s)
    return out


def _pair(rows: np.ndarray, cols: np.ndarray) -> tuple[Tensor, Tensor]:
    return Tensor(rows.astype(np.int32)), Tensor(cols.astype(np.int32))


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Tensor, Tensor]:
    """Row and column indices of the lower triangle (at and below diagonal k)."""
    return _pair(*np.tril_indices(int(n), int(k), None if m is None else int(m)))


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Tensor, Tensor]:
    """Row and column indices of the upper triangle (at and above diagonal k)."""
    return _pair(*np.triu_indices(int(n), int(k), None if m is None else int(m)))


def _matrix_shape(arr: ArrayLike, name: str) -> tuple[int, ...]:
    shape = asarray(arr).shape
    if len(shape) != 2:
        raise ValueError(f"fgrad.numpy.{name}: needs a 2-d array, got shape {shape}")
    return shape


def tril_indices_from(arr: ArrayLike, k: int = 0) -> tuple[Tensor, Tensor]:
    """tril_indices for the shape of the 2-d `arr`."""
    n, m = _matrix_shape(arr, "tril_indices_from")
    return tril_indices(n, k, m)


def triu_indices_from(arr: ArrayLike, k: int = 0) -> tuple[Tensor, Tensor]:
    """triu_indices for the shape of the 2-d `arr`."""
    n, m = _matrix_shape(arr, "triu_indices_from")
    return triu_indices(n, k, m)


def diag_indices(n: int, ndim: int = 2) -> tuple[Tensor, ...]:
    """`ndim` copies of arange(n): the indices of the main diagonal."""
    return tuple(Tensor(np.arange(int(n), dtype=np.int32)) for _ in range(int(ndim)))


def diag_indices_from(arr: ArrayLike) -> tuple[Tensor, ...]:
    """diag_indices for `arr`, whose axes must all have one length."""
    shape = asarray(arr).shape
    if len(shape) < 2 or len(set(shape)) != 1:
        raise ValueError(f"fgrad.numpy.diag_indices_from: needs an array of at least 2 "
                         f"dimensions, all of one length; got shape {shape}")
    return diag_indices(shape[0], len(shape))


def ix_(*args: ArrayLike) -> tuple[Tensor, ...]:
    """An open mesh from 1-d index arrays: arg i reshaped to length-1 axes except axis i."""
    out = []
    for i, a in enumerate(args):
        t = asarray(a)
        if t.ndim != 1:
            raise ValueError(f"fgrad.numpy.ix_: arguments must be 1-d, argument {i} has shape "
                             f"{t.shape}")
        if t.dtype == dtypes.bool:
            raise NotImplementedError("fgrad.numpy.ix_: boolean arguments are not supported; "
                                      "use fnp.nonzero(mask)[0] (eagerly) instead")
        shape = [1] * len(args)
        shape[i] = t.shape[0]
        out.append(t.reshape(tuple(shape)) if t.shape[0] else
                   Tensor(np.zeros(shape, np.int32)))
    return tuple(out)


def fill_diagonal(a: ArrayLike, val: ArrayLike, wrap: bool = False, *,
                  inplace: bool = True) -> Tensor:
    """A copy of `a` with `val` on its main diagonal (values repeat to fill it). Arrays are
    immutable, so, as in JAX, pass inplace=False."""
    if inplace:
        raise NotImplementedError("fgrad.numpy.fill_diagonal: fgrad arrays are immutable; "
                                  "pass inplace=False and use the returned array")
    if wrap:
        raise NotImplementedError("fgrad.numpy.fill_diagonal: wrap=True is not supported")
    x = asarray(a)
    if x.ndim < 2 or (x.ndim > 2 and len(set(x.shape)) != 1):
        raise ValueError(f"fgrad.numpy.fill_diagonal: needs a 2-d array, or one whose axes "
                         f"all have one length; got shape {x.shape}")
    n = min(x.shape)
    v = asarray(val).cast(x.dtype)
    if v.ndim:
        flat = v.reshape(-1)
        reps = -(-n // max(flat.shape[0], 1))
        v = flat.repeat(reps)[:n] if reps > 1 else flat[:n]
    return x.at[diag_indices(n, x.ndim)].set(v)


class _Grid:
    """mgrid / ogrid: dense or open grids from slices (a complex step is a number of
    points, endpoint included)."""

    def __init__(self, sparse: bool, name: str):
        self.sparse, self.name = sparse, name

    def __getitem__(self, key: Any) -> Any:
        keys = key if isinstance(key, tuple) else (key,)
        axes = [self._axis(k) for k in keys]
        floating = any(a.dtype.kind == "f" for a in axes)
        dt = (dtypes.default_float if floating else dtypes.default_int).np
        axes = [a.astype(dt) for a in axes]
        if not isinstance(key, tuple):
            return Tensor(axes[0])
        grids = np.meshgrid(*axes, indexing="ij", sparse=self.sparse)
        return [Tensor(g) for g in grids] if self.sparse else Tensor(np.stack(grids))

    def _axis(self, k: Any) -> np.ndarray:
        if not isinstance(k, slice):
            raise TypeError(f"fgrad.numpy.{self.name}: index with slices such as [0:5, 0:1:5j], "
                            f"got {k!r}")
        start = 0 if k.start is None else k.start
        step = 1 if k.step is None else k.step
        if isinstance(step, complex):
            return np.linspace(start, k.stop, int(abs(step)))
        return np.arange(start, k.stop, step)


mgrid = _Grid(sparse=False, name="mgrid")
ogrid = _Grid(sparse=True, name="ogrid")


def mask_indices(n: int, mask_func: Any, k: int = 0, *, size: int | None = None
                 ) -> tuple[Tensor, Tensor]:
    """(rows, cols) where mask_func(ones((n, n)), k) is nonzero, e.g. fnp.triu; `size` pads
    with 0 or truncates."""
    from fgrad.numpy.sets import nonzero
    mask = mask_func(Tensor(np.ones((n, n), np.int32)), k)
    rows, cols = nonzero(asarray(mask), size=size)
    return rows, cols


class _AxisConcat:
    """r_ / c_: concatenate slices (arange, or linspace for a complex step such as 5j),
    scalars and arrays; a leading string sets 'axis[,ndmin[,trans1d]]', or 'r' / 'c' make a
    1-d result a row / column."""

    def __init__(self, axis: int, ndmin: int, trans1d: int, name: str):
        self.params, self.name = (axis, ndmin, trans1d), name

    def __getitem__(self, key: Any) -> Tensor:
        from fgrad.numpy._base import is_scalar, result_type
        from fgrad.numpy.shape import concatenate, expand_dims, transpose
        items = list(key) if isinstance(key, tuple) else [key]
        axis, ndmin, trans1d = self.params
        matrix = -1
        if items and isinstance(items[0], str):
            directive = items.pop(0)
            if directive in ("r", "c"):
                matrix = 0 if directive == "r" else 1
            else:
                try:
                    vec = [int(v) for v in directive.split(",")[:3]]
                except ValueError:
                    raise ValueError(f"fgrad.numpy.{self.name}: could not understand the "
                                     f"directive {directive!r}; use 'r', 'c' or "
                                     f"'axis[,ndmin[,trans1d]]'") from None
                axis, ndmin, trans1d = (vec + [ndmin, trans1d][len(vec) - 1:])[:3]
        if not items:
            raise ValueError(f"fgrad.numpy.{self.name}: nothing to concatenate")
        pieces: list[Any] = []
        for item in items:
            if isinstance(item, str):
                raise ValueError(f"fgrad.numpy.{self.name}: a string directive must come "
                                 f"first")
            pieces.append(self._range(item) if isinstance(item, slice) else item)
        scalars = [p for p in pieces if is_scalar(p)]
        dt = asarray(scalars).dtype if len(scalars) == len(pieces) else result_type(*pieces)
        out = []
        for item, piece in zip(items, pieces):
            arr = asarray(piece).cast(dt)
            item_ndim = 0 if isinstance(item, slice) else arr.ndim
            arr = arr.reshape((1,) * (ndmin - arr.ndim) + arr.shape)
            if trans1d != -1 and ndmin - item_ndim > 0:
                shift = ndmin - abs(ndmin + trans1d + 1) % ndmin
                order = list(range(ndmin))
                arr = transpose(arr, order[shift:] + order[:shift])
            out.append(arr)
        res = concatenate(out, axis)
        return expand_dims(res, matrix) if matrix != -1 and res.ndim == 1 else res

    def __len__(self) -> int:
        return 0

    def _range(self, k: slice) -> Tensor:
        from fgrad.numpy.creation import arange, linspace
        start = k.start or 0
        step = k.step or 1
        if k.stop is None:
            raise ValueError(f"fgrad.numpy.{self.name}: a slice needs a stop, got {k!r}")
        if isinstance(step, complex):
            return linspace(start, k.stop, int(abs(step)))
        return arange(start, k.stop, step)


r_ = _AxisConcat(0, 1, -1, "r_")
c_ = _AxisConcat(-1, 2, 0, "c_")
