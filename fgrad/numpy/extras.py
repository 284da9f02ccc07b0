"""Smaller jax.numpy functions: array assembly and surgery (append, delete, block, unstack,
resize, choose, trim_zeros), axis helpers (rollaxis, permute_dims), partition, geomspace,
nancumprod, matrix-vector products (matvec, vecmat, vecdot), array_equiv, and the complex
helpers that are trivial on real arrays (real, imag, conj, angle, isreal, ...)."""
from __future__ import annotations

import math
import operator
from typing import Any, Sequence

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, asarray, axis_of, float_of, result_type, to_dtype
from fgrad.numpy.shape import broadcast_arrays, concatenate, moveaxis, ravel, transpose

def append(arr: ArrayLike, values: ArrayLike, axis: int | None = None) -> Tensor:
    """`values` joined after `arr` (both flattened when axis is None)."""
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis)


def delete(arr: ArrayLike, obj: Any, axis: int | None = None, *,
           assume_unique_indices: bool = False) -> Tensor:
    """`arr` without the entries `obj` (an int, a slice, or concrete int or bool indices)
    along `axis` (None: of the flattened array)."""
    x = asarray(arr)
    if axis is None:
        x, axis = x.reshape(-1), 0
    ax = axis_of(axis, x.ndim, "delete")
    n = x.shape[ax]
    if isinstance(obj, Tensor) and type(obj) is not Tensor:
        raise TypeError("fgrad.numpy.delete: the indices to delete fix the result's shape, so "
                        "they must be concrete (not traced)")
    if isinstance(obj, slice):
        keep = np.ones(n, bool)
        keep[obj] = False
    else:
        idx = np.asarray(obj.numpy() if isinstance(obj, Tensor) else obj)
        if idx.dtype == bool:
            if idx.shape != (n,):
                raise ValueError(f"fgrad.numpy.delete: a boolean obj must have shape ({n},), "
                                 f"got {idx.shape}")
            keep = ~idx
        elif idx.dtype.kind in "iu":
            if idx.size and (idx.min() < -n or idx.max() >= n):
                raise IndexError(f"fgrad.numpy.delete: index out of range for an axis of "
                                 f"length {n}")
            keep = np.ones(n, bool)
            keep[idx] = False
        else:
            raise TypeError(f"fgrad.numpy.delete: obj must be an int, a slice, or int/bool "
                            f"indices, got {idx.dtype}")
    return x[(slice(None),) * ax + (Tensor(np.flatnonzero(keep).astype(np.int32)),)]


def _block(xs: Any) -> tuple[Tensor, int]:
    if isinstance(xs, tuple):
        raise ValueError("fgrad.numpy.block: use nested lists, not tuples")
    if not isinstance(xs, list):
        return asarray(xs), 1
    if not xs:
        raise ValueError("fgrad.numpy.block: lists must not be empty")
    parts, depths = zip(*[_block(x) for x in xs])
    if len(set(depths)) != 1:
        raise ValueError(f"fgrad.numpy.block: list depths differ ({sorted(set(depths))}); "
                         f"nest every entry equally deep")
    rank = max(depths[0], max(p.ndim for p in parts))
    parts = tuple(p.reshape((1,) * (rank - p.ndim) + p.shape) for p in parts)
    return concatenate(list(parts), -depths[0]), depths[0] + 1


def block(arrays: Any) -> Tensor:
    """An array assembled from nested lists of blocks (the innermost lists join along the
    last axis, the next ones along the one before, ...)."""
    return _block(arrays)[0]


def unstack(x: ArrayLike, /, *, axis: int = 0) -> tuple[Tensor, ...]:
    """The slices of x along `axis`, as a tuple."""
    t = asarray(x)
    ax = axis_of(axis, t.ndim, "unstack")
    return tuple(t[(slice(None),) * ax + (i,)] for i in range(t.shape[ax]))


def rollaxis(a: ArrayLike, axis: int, start: int = 0) -> Tensor:
    """`axis` moved to position `start` (NumPy's older form of moveaxis)."""
    x = asarray(a)
    ax = axis_of(axis, x.ndim, "rollaxis")
    if not -x.ndim <= start <= x.ndim:
        raise ValueError(f"fgrad.numpy.rollaxis: start={start} must be in "
                         f"[{-x.ndim}, {x.ndim}]")
    start = start + x.ndim if start < 0 else start
    return moveaxis(x, ax, start - 1 if start > ax else start)


def permute_dims(a: ArrayLike, /, axes: Sequence[int]) -> Tensor:
    """The Array API name of `transpose` (axes required)."""
    return transpose(a, axes)


def resize(a: ArrayLike, new_shape: Any) -> Tensor:
    """The flattened `a` repeated (or cut) to fill `new_shape`."""
    shape = (int(new_shape),) if isinstance(new_shape, (int, np.integer)) else \
        tuple(int(d) for d in new_shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"fgrad.numpy.resize: new_shape must be non-negative, got {shape}")
    flat = ravel(a)
    size = math.prod(shape)
    if flat.shape[0] == 0 or size == 0:
        return Tensor(np.zeros(shape, flat.dtype.np))
    reps = -(-size // flat.shape[0])
    return (flat.repeat(reps) if reps > 1 else flat)[:size].reshape(shape)


def choose(a: ArrayLike, choices: Sequence[ArrayLike], out: Any = None,
           mode: str = "raise") -> Tensor:
    """Elementwise choices[a] (a, and every choice, broadcast); mode "raise" (concrete a),
    "wrap" or "clip" for out-of-range a."""
    if out is not None:
        raise TypeError("fgrad.numpy.choose: out= is not supported (Tensors are immutable)")
    idx = asarray(a)
    if not idx.dtype.is_int:
        raise TypeError(f"fgrad.numpy.choose: a must hold integers, got {idx.dtype.np}")
    n = len(choices)
    if mode == "raise":
        if type(idx) is not Tensor:
            raise TypeError("fgrad.numpy.choose: mode='raise' needs a concrete a; under "
                            "jit/vmap/grad use mode='wrap' or mode='clip'")
        vals = idx.numpy()
        if vals.size and (vals.min() < 0 or vals.max() >= n):
            raise ValueError(f"fgrad.numpy.choose: a holds values outside [0, {n}); use "
                             f"mode='wrap' or 'clip'")
    elif mode == "wrap":
        idx = idx % n
    elif mode == "clip":
        idx = idx.clip(0, n - 1)
    else:
        raise ValueError(f"fgrad.numpy.choose: mode must be 'raise', 'wrap' or 'clip', got "
                         f"{mode!r}")
    dt = result_type(*choices)
    parts = broadcast_arrays(idx, *[asarray(c, dt) for c in choices])
    out_t = parts[1]
    for k, c in enumerate(parts[2:], start=1):
        out_t = (parts[0] == k).where(c, out_t)
    return out_t


def partition(a: ArrayLike, kth: int, axis: int = -1) -> Tensor:
    """`a` rearranged along `axis` so the kth element is where sorting would put it, smaller
    ones before and larger after (here: fully sorted, one valid such arrangement)."""
    x = asarray(a)
    ax = axis_of(axis, x.ndim, "partition")
    _kth(kth, x.shape[ax])
    return x.sort(ax)[0]


def argpartition(a: ArrayLike, kth: int, axis: int = -1) -> Tensor:
    """Indices that partition `a` around its kth element along `axis` (here: the indices
    of a stable sort)."""
    x = asarray(a)
    ax = axis_of(axis, x.ndim, "argpartition")
    _kth(kth, x.shape[ax])
    return x.argsort(ax)


def _kth(kth: int, n: int) -> None:
    if not -n <= operator.index(kth) < n:
        raise ValueError(f"fgrad.numpy.partition: kth={kth} is out of range for an axis of "
                         f"length {n}")


def trim_zeros(filt: ArrayLike, trim: str = "fb", axis: Any = None) -> Tensor:
    """`filt` without its leading ("f") and/or trailing ("b") zeros (eager only: the length
    depends on the values)."""
    x = asarray(filt)
    if type(x) is not Tensor:
        raise TypeError("fgrad.numpy.trim_zeros: the result's length depends on the values, "
                        "so it works only outside jit/vmap/grad")
    if trim not in ("f", "b", "fb", "bf"):
        raise ValueError(f"fgrad.numpy.trim_zeros: trim must be 'f', 'b' or 'fb', got "
                         f"{trim!r}")
    mode: Any = trim
    return Tensor(np.trim_zeros(x.numpy(), mode, axis=axis))


def geomspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
              dtype: Any = None, axis: int = 0) -> Tensor:
    """`num` samples spaced evenly on a log scale from start to stop (same sign)."""
    from fgrad.numpy.creation import logspace
    dt = result_type(start, stop)
    dt = dt if dt.is_float else dtypes.default_float
    a, b = asarray(start, dt), asarray(stop, dt)
    sign = a.sign()
    res = sign * logspace((a / sign).log10(), (b / sign).log10(), num, endpoint, 10.0,
                          dtype=dt)
    res = moveaxis(res, 0, axis) if axis != 0 else res
    want = to_dtype(dtype)
    return res if want is None else res.cast(want)


def nancumprod(a: ArrayLike, axis: int | None = None, dtype: Any = None) -> Tensor:
    """cumprod treating NaNs as one."""
    from fgrad.numpy.reductions import cumprod
    x = asarray(a)
    return cumprod(x.isnan().where(1.0, x) if x.dtype.is_float else x, axis, dtype)


def array_equiv(a1: ArrayLike, a2: ArrayLike) -> Tensor:
    """Whether the arrays broadcast together and are equal everywhere."""
    x, y = asarray(a1), asarray(a2)
    try:
        np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        return asarray(False)
    return (x == y).all()


def matvec(x1: ArrayLike, x2: ArrayLike, /) -> Tensor:
    """Matrix-vector products over broadcast batch axes: (..., n, m) x (..., m)."""
    a, b = asarray(x1), asarray(x2)
    return (a @ b.reshape(b.shape + (1,)))[..., 0]


def vecmat(x1: ArrayLike, x2: ArrayLike, /) -> Tensor:
    """Vector-matrix products over broadcast batch axes: (..., n) x (..., n, m)."""
    a, b = asarray(x1), asarray(x2)
    return (a.reshape(a.shape[:-1] + (1, a.shape[-1])) @ b)[..., 0, :]


def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1, precision: Any = None,
           preferred_element_type: Any = None) -> Tensor:
    """Dot products of vectors along `axis` (other axes broadcast)."""
    a, b = asarray(x1), asarray(x2)
    if a.shape[axis] != b.shape[axis]:
        raise ValueError(f"fgrad.numpy.vecdot: the vectors' lengths differ: shapes {a.shape} "
                         f"and {b.shape} along axis {axis}")
    out = (a * b).sum(axis)
    want = to_dtype(preferred_element_type)
    return out if want is None else out.cast(want)


def copy(a: ArrayLike, order: Any = None) -> Tensor:
    """`a` as a Tensor (Tensors are immutable, so sharing is safe)."""
    return asarray(a)


# ---------------------------------------------------------------------------- complex helpers

def real(val: ArrayLike) -> Tensor:
    """The real part (fgrad arrays are real: the array itself)."""
    return asarray(val)


def imag(val: ArrayLike) -> Tensor:
    """The imaginary part (fgrad arrays are real: zeros)."""
    x = asarray(val)
    return x * 0 if x.dtype != dtypes.bool else x & False


def conj(x: ArrayLike) -> Tensor:
    """The complex conjugate (fgrad arrays are real: the array itself)."""
    return asarray(x)


conjugate = conj


def angle(z: ArrayLike, deg: bool = False) -> Tensor:
    """The argument of each (real) number: 0 for x >= 0, pi (180 with deg) for x < 0."""
    from fgrad.numpy.elementwise import arctan2, degrees
    x = float_of(asarray(z))
    out = arctan2(Tensor(np.zeros(x.shape, x.dtype.np)), x)
    return degrees(out) if deg else out


def iscomplexobj(x: Any) -> bool:
    """Whether x has a complex dtype (never, for fgrad arrays)."""
    return np.iscomplexobj(x) if not isinstance(x, Tensor) else False


def isrealobj(x: Any) -> bool:
    """Not iscomplexobj(x)."""
    return not iscomplexobj(x)


def iscomplex(x: ArrayLike) -> Tensor:
    """Elementwise whether the imaginary part is nonzero (all False for real arrays)."""
    return Tensor(np.zeros(asarray(x).shape, bool))


def isreal(x: ArrayLike) -> Tensor:
    """Elementwise whether the imaginary part is zero (all True for real arrays)."""
    return iscomplex(x).logical_not()


def isscalar(element: Any) -> bool:
    """Whether `element` is a scalar: a Python/NumPy scalar or a 0-d array."""
    if isinstance(element, (Tensor, np.ndarray)):
        return element.ndim == 0
    return bool(np.isscalar(element))


def iterable(y: Any) -> bool:
    """Whether iter(y) works."""
    try:
        iter(y)
    except TypeError:
        return False
    return True
