"""Smaller jax.numpy functions: array assembly and surgery (append, delete, block, unstack,
resize, choose, trim_zeros), axis helpers (rollaxis, permute_dims), partition, geomspace,
nancumprod, matrix-vector products (matvec, vecmat, vecdot), array_equiv, and the complex
helpers that are trivial on real arrays (real, imag, conj, angle, isreal, ...), the
functional insert/place/put, packbits/unpackbits and NumPy's print options."""
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


# ---------------------------------------------------------------------------- insert, place, put

def insert(arr: ArrayLike, obj: Any, values: ArrayLike, axis: int | None = None) -> Tensor:
    """`arr` with `values` inserted before the indices `obj` (an int, a 1-d int array, which
    may be traced, or a slice) along `axis` (None: of the flattened array). Out-of-range
    indices are clipped; values are cast to arr's dtype and broadcast as in NumPy."""
    x = asarray(arr)
    if axis is None:
        x, axis = x.reshape(-1), 0
    ax = axis_of(axis, x.ndim, "insert")
    n = x.shape[ax]
    idx = Tensor(np.arange(*obj.indices(n), dtype=np.int32)) if isinstance(obj, slice) \
        else asarray(obj)
    if idx.ndim > 1:
        raise ValueError(f"fgrad.numpy.insert: obj must be a slice, a scalar or a 1-d array "
                         f"of indices, got shape {idx.shape}")
    if not idx.dtype.is_int:
        if idx.numel() or isinstance(obj, Tensor):
            raise ValueError(f"fgrad.numpy.insert: the indices must be integers, got "
                             f"{idx.dtype.np}")
        idx = idx.cast(dtypes.int32)
    vals = asarray(values).cast(x.dtype)
    vals = vals.reshape((1,) * (x.ndim - vals.ndim) + vals.shape)
    if idx.numel() == 1:
        if idx.ndim == 0:
            vals = moveaxis(vals, 0, ax)
        idx = idx.reshape(1).expand(vals.shape[ax])
    k = idx.shape[0]
    if vals.shape[ax] not in (1, k):
        raise ValueError(f"fgrad.numpy.insert: {k} indices but values has {vals.shape[ax]} "
                         f"entries along axis {ax} (shape {vals.shape})")
    from fgrad.numpy.shape import broadcast_to
    vals = broadcast_to(vals, x.shape[:ax] + (k,) + x.shape[ax + 1:])
    idx = (idx < 0).where(idx + n, idx).clip(0, n).cast(dtypes.int32)
    # each value lands after the values inserted before it; each element after the values
    # inserted at or before its index
    j = Tensor(np.arange(k, dtype=np.int32))
    i_row, i_col = idx.reshape(1, k), idx.reshape(k, 1)
    earlier = (i_row < i_col) | ((i_row == i_col) & (j.reshape(1, k) < j.reshape(k, 1)))
    new_pos = idx + earlier.cast(dtypes.int32).sum(-1)
    m = Tensor(np.arange(n, dtype=np.int32))
    old_pos = m + (i_row <= m.reshape(n, 1)).cast(dtypes.int32).sum(-1)
    src = Tensor(np.zeros(n + k, np.int32)).at[old_pos].set(m).at[new_pos].set(j + n)
    return concatenate([x, vals], ax)[(slice(None),) * ax + (src,)]


def _refuse_inplace(name: str, inplace: bool) -> None:
    if inplace:
        raise ValueError(f"fgrad.numpy.{name} cannot modify arrays in place (Tensors are "
                         f"immutable); pass inplace=False and use the returned array")


def place(arr: ArrayLike, mask: ArrayLike, vals: ArrayLike, *, inplace: bool = True) -> Tensor:
    """A copy of arr whose elements where `mask` is nonzero take the values `vals` in order
    (repeated when too few). inplace=True, the default as in JAX, is refused."""
    _refuse_inplace("place", inplace)
    x, m, v = asarray(arr), asarray(mask), asarray(vals).reshape(-1)
    if m.numel() != x.numel():
        raise ValueError(f"fgrad.numpy.place: arr (shape {x.shape}) and mask (shape "
                         f"{m.shape}) must have the same size")
    if v.shape[0] == 0:
        raise ValueError("fgrad.numpy.place: vals is empty; pass at least one value")
    m = (m if m.dtype == dtypes.bool else m != 0).reshape(-1)
    rank = m.cast(dtypes.int32).cumsum(0) - 1
    picked = v[rank.clip(0, None) % v.shape[0]].cast(x.dtype)
    return m.where(picked, x.reshape(-1)).reshape(x.shape)


def put(a: ArrayLike, ind: ArrayLike, v: ArrayLike, mode: str | None = None, *,
        inplace: bool = True) -> Tensor:
    """A copy of `a` with the flat positions `ind` set to `v` (repeated when too few).
    mode None (JAX's default): negative indices count from the end, then out-of-range ones
    are clipped; "clip" clips (no wrapping); "wrap" wraps modulo the size. Repeated indices:
    the last value wins. inplace=True, the default as in JAX, is refused."""
    _refuse_inplace("put", inplace)
    if mode == "raise":
        raise NotImplementedError("fgrad.numpy.put: mode='raise' is not supported (it would "
                                  "need a value-dependent error); use 'clip' or 'wrap'")
    if mode not in (None, "clip", "wrap"):
        raise ValueError(f"fgrad.numpy.put: mode must be None, 'clip' or 'wrap', got {mode!r}")
    x = asarray(a)
    flat, i, vals = x.reshape(-1), asarray(ind).reshape(-1), asarray(v).reshape(-1)
    if not i.dtype.is_int:
        raise TypeError(f"fgrad.numpy.put: ind must hold integers, got {i.dtype.np}")
    n, k = flat.shape[0], i.shape[0]
    if k == 0 or vals.shape[0] == 0 or n == 0:
        return x
    vals = vals[Tensor(np.arange(k, dtype=np.int32) % vals.shape[0])].cast(x.dtype)
    if mode == "wrap":
        i = i % n
    elif mode == "clip":
        i = i.clip(0, n - 1)
    else:
        i = (i < 0).where(i + n, i).clip(0, n - 1)
    return flat.at[i].set(vals).reshape(x.shape)


# ---------------------------------------------------------------------------- bit packing

def _bit_weights(bitorder: str, name: str) -> np.ndarray:
    if bitorder not in ("big", "little"):
        raise ValueError(f"fgrad.numpy.{name}: bitorder must be 'big' or 'little', got "
                         f"{bitorder!r}")
    w = 1 << np.arange(8, dtype=np.int32)
    return w[::-1].copy() if bitorder == "big" else w


def packbits(a: ArrayLike, axis: int | None = None, bitorder: str = "big") -> Tensor:
    """uint8 bytes packing the truth of the elements (8 per byte along `axis`, zero-padded;
    None: of the flattened array) of an integer or bool array."""
    x = asarray(a)
    if not (x.dtype.is_int or x.dtype == dtypes.bool):
        raise TypeError(f"fgrad.numpy.packbits: a must be an integer or bool array, got "
                        f"{x.dtype.np}")
    w = _bit_weights(bitorder, "packbits")
    bits = (x != 0) if x.dtype != dtypes.bool else x
    if axis is None:
        bits, axis = bits.reshape(-1), 0
    ax = axis_of(axis, bits.ndim, "packbits")
    bits = moveaxis(bits, ax, -1)
    n = bits.shape[-1]
    pad = -n % 8
    if pad:
        bits = concatenate([bits, Tensor(np.zeros(bits.shape[:-1] + (pad,), bool))], -1)
    grouped = bits.reshape(bits.shape[:-1] + ((n + pad) // 8, 8)).cast(dtypes.int32)
    return moveaxis((grouped * Tensor(w)).sum(-1).cast(dtypes.uint8), -1, ax)


def unpackbits(a: ArrayLike, axis: int | None = None, count: int | None = None,
               bitorder: str = "big") -> Tensor:
    """The bits (uint8 0/1) of a uint8 array along `axis` (None: flattened); `count` keeps
    that many bits (zero-padded past the end; negative: drops bits from the end)."""
    x = asarray(a)
    if x.dtype != dtypes.uint8:
        raise TypeError(f"fgrad.numpy.unpackbits: a must be a uint8 array, got {x.dtype.np}")
    w = _bit_weights(bitorder, "unpackbits")
    if axis is None:
        x, axis = x.reshape(-1), 0
    ax = axis_of(axis, x.ndim, "unpackbits")
    x = moveaxis(x, ax, -1).cast(dtypes.int32)
    bits = ((x.reshape(x.shape + (1,)) // Tensor(w)) % 2).cast(dtypes.uint8)
    bits = bits.reshape(x.shape[:-1] + (x.shape[-1] * 8,))
    if count is not None:
        total = bits.shape[-1]
        c = operator.index(count)
        keep = min(c, total) if c >= 0 else max(total + c, 0)
        bits = bits[..., :keep]
        if c > total:
            extra = Tensor(np.zeros(bits.shape[:-1] + (c - total,), np.uint8))
            bits = concatenate([bits, extra], -1)
    return moveaxis(bits, -1, ax)


# ---------------------------------------------------------------------------- printing

def get_printoptions() -> dict[str, Any]:
    """NumPy's print options (fgrad prints arrays through NumPy)."""
    return dict(np.get_printoptions())


def set_printoptions(*args: Any, **kwargs: Any) -> None:
    """Set NumPy's print options (numpy.set_printoptions's arguments)."""
    np.set_printoptions(*args, **kwargs)


def printoptions(*args: Any, **kwargs: Any) -> Any:
    """A context manager setting NumPy's print options for its block."""
    return np.printoptions(*args, **kwargs)


def _host(a: ArrayLike, name: str) -> np.ndarray:
    x = asarray(a)
    if type(x) is not Tensor:
        raise TypeError(f"fgrad.numpy.{name}: cannot print a traced value (inside jit/grad); "
                        f"use fgrad.debug.print, or call it outside the transformation")
    return x.numpy()


def array_repr(arr: ArrayLike, max_line_width: int | None = None,
               precision: int | None = None, suppress_small: bool | None = None) -> str:
    """numpy.array_repr of the array's values."""
    return np.array_repr(_host(arr, "array_repr"), max_line_width, precision, suppress_small)


def array_str(a: ArrayLike, max_line_width: int | None = None, precision: int | None = None,
              suppress_small: bool | None = None) -> str:
    """numpy.array_str of the array's values."""
    return np.array_str(_host(a, "array_str"), max_line_width, precision, suppress_small)
