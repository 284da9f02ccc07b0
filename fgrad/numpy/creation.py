"""Array creation: zeros/ones/full(_like), arange, linspace, logspace, eye, meshgrid, tri*,
diag, diagflat (jax.numpy's names, arguments and default dtypes), and the host-side
frombuffer, fromstring, save, savez and load."""
from __future__ import annotations

from typing import Any

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, asarray, is_scalar, to_dtype


def _shape(shape: Any) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)


def full(shape: Any, fill_value: ArrayLike, dtype: Any = None) -> Tensor:
    """An array of `shape` filled with `fill_value` (broadcast if it is an array)."""
    want = to_dtype(dtype)
    if is_scalar(fill_value):
        return Tensor.full(_shape(shape), fill_value, dtype=want)
    return broadcast(asarray(fill_value, want), _shape(shape))


def broadcast(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    from fgrad.numpy.shape import broadcast_to
    return broadcast_to(x, shape)


def zeros(shape: Any, dtype: Any = None) -> Tensor:
    """An array of zeros (float32 by default; float64 with `enable_x64`)."""
    return Tensor.full(_shape(shape), 0.0, dtype=to_dtype(dtype) or dtypes.default_float)


def ones(shape: Any, dtype: Any = None) -> Tensor:
    """An array of ones (float32 by default; float64 with `enable_x64`)."""
    return Tensor.full(_shape(shape), 1.0, dtype=to_dtype(dtype) or dtypes.default_float)


def empty(shape: Any, dtype: Any = None) -> Tensor:
    """Like `zeros` (fgrad arrays are always initialized)."""
    return zeros(shape, dtype)


def _like(a: ArrayLike, dtype: Any, shape: Any) -> tuple[Any, tuple[int, ...]]:
    x = asarray(a)
    return to_dtype(dtype) or x.dtype, x.shape if shape is None else _shape(shape)


def zeros_like(a: ArrayLike, dtype: Any = None, shape: Any = None) -> Tensor:
    """Zeros with a's shape and dtype."""
    dt, sh = _like(a, dtype, shape)
    return Tensor.full(sh, 0, dtype=dt)


def ones_like(a: ArrayLike, dtype: Any = None, shape: Any = None) -> Tensor:
    """Ones with a's shape and dtype."""
    dt, sh = _like(a, dtype, shape)
    return Tensor.full(sh, 1, dtype=dt)


def empty_like(a: ArrayLike, dtype: Any = None, shape: Any = None) -> Tensor:
    """Like `zeros_like`."""
    return zeros_like(a, dtype, shape)


def full_like(a: ArrayLike, fill_value: ArrayLike, dtype: Any = None,
              shape: Any = None) -> Tensor:
    """`fill_value` with a's shape and dtype."""
    dt, sh = _like(a, dtype, shape)
    return full(sh, fill_value, dt)


def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None) -> Tensor:
    """Evenly spaced values in [start, stop): int32 for integer arguments, else float32
    (int64 / float64 with `enable_x64`)."""
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    args = (start, stop, step)
    if any(isinstance(a, Tensor) for a in args):
        raise TypeError("fgrad.numpy.arange: start/stop/step must be concrete Python numbers "
                        "(the length of the result must be known when tracing)")
    want = to_dtype(dtype)
    if want is None:
        want = dtypes.default_int if all(isinstance(a, (int, np.integer)) for a in args) \
            else dtypes.default_float
    return Tensor(np.arange(start, stop, step).astype(want.np))


def linspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
             retstep: bool = False, dtype: Any = None, axis: int = 0) -> Any:
    """`num` evenly spaced samples from start to stop (array endpoints broadcast)."""
    div = (num - 1) if endpoint else num
    frac = np.arange(num, dtype=np.float64) / div if div > 0 else np.zeros(num)
    default = dtypes.default_float
    a = asarray(start, default) if is_scalar(start) else asarray(start)
    b = asarray(stop, default) if is_scalar(stop) else asarray(stop)
    a, b = (a.cast(default) if not a.dtype.is_float else a,
            b.cast(default) if not b.dtype.is_float else b)
    shape = np.broadcast_shapes(a.shape, b.shape)
    t = Tensor(frac.astype(a.dtype.np)).reshape((num,) + (1,) * len(shape))
    out = a + (b - a) * t
    if endpoint and num > 1:
        last = Tensor(np.arange(num) == num - 1).reshape((num,) + (1,) * len(shape))
        out = last.where(b, out)
    from fgrad.numpy.shape import moveaxis
    out = moveaxis(out, 0, axis)
    want = to_dtype(dtype)
    out = out if want is None else out.cast(want)
    return (out, (b - a) / div) if retstep else out


def logspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
             base: float = 10.0, dtype: Any = None, axis: int = 0) -> Tensor:
    """base ** linspace(start, stop)."""
    out = asarray(base, dtypes.default_float) ** linspace(start, stop, num, endpoint, axis=axis)
    want = to_dtype(dtype)
    return out if want is None else out.cast(want)


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Tensor:  # noqa: N803
    """Ones on the k-th diagonal of an N x M matrix (float32 by default)."""
    m = N if M is None else M
    return Tensor(np.eye(N, m, k, dtype=(to_dtype(dtype) or dtypes.default_float).np))


def identity(n: int, dtype: Any = None) -> Tensor:
    """The n x n identity matrix."""
    return eye(n, dtype=dtype)


def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Tensor:  # noqa: N803
    """Ones at and below the k-th diagonal."""
    m = N if M is None else M
    return Tensor(np.tri(N, m, k, dtype=(to_dtype(dtype) or dtypes.default_float).np))


def _tri_mask(shape: tuple[int, ...], k: int, lower: bool) -> Tensor:
    rows = np.arange(shape[-2])[:, None]
    cols = np.arange(shape[-1])[None, :]
    return Tensor((cols - rows <= k) if lower else (cols - rows >= k))


def tril(m: ArrayLike, k: int = 0) -> Tensor:
    """The lower triangle (at and below diagonal k) of the last two axes; the rest zero."""
    x = asarray(m)
    _check_2d("tril", x)
    return _tri_mask(x.shape, k, True).where(x, 0)


def triu(m: ArrayLike, k: int = 0) -> Tensor:
    """The upper triangle (at and above diagonal k) of the last two axes; the rest zero."""
    x = asarray(m)
    _check_2d("triu", x)
    return _tri_mask(x.shape, k, False).where(x, 0)


def _check_2d(name: str, x: Tensor) -> None:
    if x.ndim < 2:
        raise ValueError(f"fgrad.numpy.{name}: expected an array of two or more dimensions, "
                         f"got shape {x.shape}")


def diag(v: ArrayLike, k: int = 0) -> Tensor:
    """A 1-d v: the square matrix with v on diagonal k. A 2-d v: its k-th diagonal."""
    x = asarray(v)
    if x.ndim == 2:
        from fgrad.numpy.shape import diagonal
        return diagonal(x, k)
    if x.ndim != 1:
        raise ValueError(f"fgrad.numpy.diag: expected a 1-d or 2-d array, got shape {x.shape}")
    n = x.shape[0] + abs(k)
    rows = np.arange(n)[:, None]
    cols = np.arange(n)[None, :]
    on = Tensor(cols - rows == k)
    src = np.clip(np.minimum(rows, cols), 0, max(x.shape[0] - 1, 0))
    if x.shape[0] == 0:
        return zeros((n, n), x.dtype)
    return on.where(x[Tensor(src.astype(np.int32))], 0)


def diagflat(v: ArrayLike, k: int = 0) -> Tensor:
    """The flattened v on diagonal k of a square matrix."""
    return diag(asarray(v).reshape(-1), k)


def meshgrid(*xi: ArrayLike, indexing: str = "xy", sparse: bool = False,
             copy: bool = True) -> list[Tensor]:
    """Coordinate grids from 1-d arrays; indexing "xy" (default, NumPy's) or "ij"."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"fgrad.numpy.meshgrid: indexing must be 'xy' or 'ij', got "
                         f"{indexing!r}")
    arrays = [asarray(x).reshape(-1) for x in xi]
    n = len(arrays)
    lengths = [a.shape[0] for a in arrays]
    if indexing == "xy" and n >= 2:
        lengths[0], lengths[1] = lengths[1], lengths[0]
    outs = []
    for i, a in enumerate(arrays):
        pos = i if indexing == "ij" or n < 2 else {0: 1, 1: 0}.get(i, i)
        shape = [1] * n
        shape[pos] = a.shape[0]
        g = a.reshape(shape)
        outs.append(g if sparse else g.expand(tuple(lengths)))
    return outs



# ---------------------------------------------------------------------------- host-side I/O

def frombuffer(buffer: Any, dtype: Any = float, count: int = -1, offset: int = 0) -> Tensor:
    """A 1-d array read from a bytes-like buffer (numpy.frombuffer on the host)."""
    want = to_dtype(dtype)
    assert want is not None
    return Tensor(np.frombuffer(buffer, want.np, count, offset).copy())


def fromstring(string: str, dtype: Any = float, count: int = -1, *, sep: str) -> Tensor:
    """A 1-d array parsed from text numbers separated by `sep` (required, as in JAX)."""
    want = to_dtype(dtype)
    assert want is not None
    return Tensor(np.fromstring(string, want.np, count, sep=sep))


def _impure(name: str) -> NotImplementedError:
    return NotImplementedError(f"fgrad.numpy.{name} is not provided (as in JAX): it consumes "
                               f"an iterator or file, which is not pure under jit; use "
                               f"fnp.asarray(np.{name}(...)) outside the transformation")


def fromiter(*args: Any, **kwargs: Any) -> Tensor:
    """Refused, as in JAX: use fnp.asarray(np.fromiter(...))."""
    raise _impure("fromiter")


def fromfile(*args: Any, **kwargs: Any) -> Tensor:
    """Refused, as in JAX: use fnp.asarray(np.fromfile(...))."""
    raise _impure("fromfile")


def _to_host(x: Any, name: str) -> Any:
    if isinstance(x, Tensor):
        if type(x) is not Tensor:
            raise TypeError(f"fgrad.numpy.{name}: cannot save a traced value (inside "
                            f"jit/grad); save the result outside the transformation")
        return x.numpy()
    return x


def save(file: Any, arr: ArrayLike, allow_pickle: bool = True) -> None:
    """numpy.save of the array's values (.npy)."""
    np.save(file, _to_host(arr, "save"), allow_pickle=allow_pickle)


def savez(file: Any, *args: ArrayLike, allow_pickle: bool = True, **kwds: ArrayLike) -> None:
    """numpy.savez of the arrays' values (.npz, uncompressed)."""
    np.savez(file, *[_to_host(a, "savez") for a in args], allow_pickle=allow_pickle,
             **{k: _to_host(v, "savez") for k, v in kwds.items()})


def load(file: Any, *args: Any, **kwargs: Any) -> Any:
    """numpy.load; a single array (.npy) becomes a Tensor (bfloat16 data saved by `save`,
    which NumPy stores as 2-byte void, is recovered); .npz archives and arrays of dtypes
    fgrad lacks are returned as NumPy gives them."""
    out = np.load(file, *args, **kwargs)
    if not isinstance(out, np.ndarray):
        return out
    if out.dtype == np.dtype("V2"):
        out = out.view(dtypes.bfloat16.np)
    try:
        return Tensor(out)
    except TypeError:
        return out
