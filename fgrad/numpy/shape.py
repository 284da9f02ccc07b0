"""Shape manipulation with NumPy semantics: transpose reverses axes by default, split takes
a number of sections or split indices, repeat repeats elements, tile tiles."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, Axis, asarray, axes_of, axis_of


def shape(a: ArrayLike) -> tuple[int, ...]:
    """The shape of a."""
    return asarray(a).shape


def ndim(a: ArrayLike) -> int:
    """The number of dimensions of a."""
    return asarray(a).ndim


def size(a: ArrayLike, axis: int | None = None) -> int:
    """The number of elements (or the length of `axis`)."""
    x = asarray(a)
    return int(np.prod(x.shape)) if axis is None else x.shape[axis_of(axis, x.ndim, "size")]


def reshape(a: ArrayLike, shape: Any = None, order: str = "C", *, newshape: Any = None
            ) -> Tensor:
    """a with a new shape (one -1 is inferred); only C order."""
    if order != "C":
        raise NotImplementedError("fgrad.numpy.reshape: only order='C' is supported")
    shape = newshape if shape is None else shape
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return asarray(a).reshape(shape)


def ravel(a: ArrayLike, order: str = "C") -> Tensor:
    """a flattened to 1-d."""
    return reshape(a, (-1,), order)


def transpose(a: ArrayLike, axes: Sequence[int] | None = None) -> Tensor:
    """a with its axes permuted; by default reversed (NumPy's rule, unlike Tensor.transpose)."""
    x = asarray(a)
    order = tuple(reversed(range(x.ndim))) if axes is None else axes_of(axes, x.ndim,
                                                                       "transpose")
    if len(order) != x.ndim:
        raise ValueError(f"fgrad.numpy.transpose: axes {axes} do not match an array of "
                         f"dimension {x.ndim}")
    return x.permute(order) if x.ndim > 1 else x


def matrix_transpose(x: ArrayLike) -> Tensor:
    """Swap the last two axes."""
    return swapaxes(x, -1, -2)


def swapaxes(a: ArrayLike, axis1: int, axis2: int) -> Tensor:
    """a with axis1 and axis2 interchanged."""
    x = asarray(a)
    i, j = axis_of(axis1, x.ndim, "swapaxes"), axis_of(axis2, x.ndim, "swapaxes")
    order = list(range(x.ndim))
    order[i], order[j] = order[j], order[i]
    return x.permute(order) if x.ndim > 1 else x


def moveaxis(a: ArrayLike, source: Axis, destination: Axis) -> Tensor:
    """Axes `source` moved to positions `destination`; the others keep their order."""
    x = asarray(a)
    src = axes_of(source, x.ndim, "moveaxis")
    dst = axes_of(destination, x.ndim, "moveaxis")
    if len(src) != len(dst):
        raise ValueError("fgrad.numpy.moveaxis: source and destination need the same number "
                         "of axes")
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return x.permute(order) if x.ndim > 1 else x


def expand_dims(a: ArrayLike, axis: Axis) -> Tensor:
    """a with length-1 axes inserted at `axis` (positions in the result)."""
    x = asarray(a)
    if axis is None:
        raise TypeError("fgrad.numpy.expand_dims: axis must be an int or a tuple of ints")
    out_ndim = x.ndim + (1 if isinstance(axis, int) else len(tuple(axis)))
    new = axes_of(axis, out_ndim, "expand_dims")
    dims = iter(x.shape)
    return x.reshape(tuple(1 if i in new else next(dims) for i in range(out_ndim)))


def squeeze(a: ArrayLike, axis: Axis = None) -> Tensor:
    """a without its length-1 axes (or only those in `axis`, which must have length 1)."""
    x = asarray(a)
    axes = [i for i, d in enumerate(x.shape) if d == 1] if axis is None else \
        axes_of(axis, x.ndim, "squeeze")
    for i in axes:
        if x.shape[i] != 1:
            raise ValueError(f"fgrad.numpy.squeeze: cannot squeeze axis {i} of length "
                             f"{x.shape[i]} (shape {x.shape})")
    return x.reshape(tuple(d for i, d in enumerate(x.shape) if i not in axes))


def concatenate(arrays: Sequence[ArrayLike], axis: int | None = 0, dtype: Any = None
                ) -> Tensor:
    """Arrays joined along an existing axis (None: flattened first); dtypes promote."""
    xs = [asarray(a) for a in arrays]
    if not xs:
        raise ValueError("fgrad.numpy.concatenate: need at least one array")
    if axis is None:
        xs, axis = [x.reshape(-1) for x in xs], 0
    if any(x.ndim == 0 for x in xs):
        raise ValueError("fgrad.numpy.concatenate: zero-dimensional arrays cannot be "
                         "concatenated; use fnp.stack")
    ax = axis_of(axis, xs[0].ndim, "concatenate")
    dt = _common_dtype(xs)
    xs = [x.cast(dt) if x.dtype != dt else x for x in xs]
    out = xs[0].cat(*xs[1:], dim=ax) if len(xs) > 1 else xs[0]
    return out if dtype is None else out.cast(dtype)


def _common_dtype(xs: list[Tensor]) -> Any:
    from fgrad.core import dtypes as _dt
    dt = xs[0].dtype
    for x in xs[1:]:
        dt = _dt.promote(dt, x.dtype)
    return dt


def concat(arrays: Sequence[ArrayLike], axis: int | None = 0) -> Tensor:
    """The Array API name of `concatenate`."""
    return concatenate(arrays, axis)


def stack(arrays: Sequence[ArrayLike], axis: int = 0, dtype: Any = None) -> Tensor:
    """Arrays of one shape joined along a new axis."""
    xs = [asarray(a) for a in arrays]
    if not xs:
        raise ValueError("fgrad.numpy.stack: need at least one array")
    if len({x.shape for x in xs}) != 1:
        raise ValueError(f"fgrad.numpy.stack: all input arrays must have the same shape, got "
                         f"{[x.shape for x in xs]}")
    ax = axis_of(axis, xs[0].ndim + 1, "stack")
    return concatenate([expand_dims(x, ax) for x in xs], ax, dtype)


def vstack(tup: Sequence[ArrayLike]) -> Tensor:
    """Arrays stacked row-wise (1-d arrays become rows)."""
    return concatenate([atleast_2d(a) for a in tup], 0)


row_stack = vstack


def hstack(tup: Sequence[ArrayLike]) -> Tensor:
    """Arrays stacked column-wise (along axis 0 for 1-d arrays)."""
    xs = [atleast_1d(a) for a in tup]
    return concatenate(xs, 0 if xs[0].ndim == 1 else 1)


def dstack(tup: Sequence[ArrayLike]) -> Tensor:
    """Arrays stacked along the third axis."""
    return concatenate([atleast_3d(a) for a in tup], 2)


def column_stack(tup: Sequence[ArrayLike]) -> Tensor:
    """1-d arrays as columns of a 2-d array (2-d arrays are stacked as they are)."""
    xs = [asarray(a) for a in tup]
    return concatenate([x.reshape(-1, 1) if x.ndim < 2 else x for x in xs], 1)


def _split_points(n: int, sections: Any, name: str, even: bool) -> list[int]:
    if isinstance(sections, (int, np.integer)):
        k = int(sections)
        if k <= 0:
            raise ValueError(f"fgrad.numpy.{name}: number of sections must be positive")
        if even and n % k:
            raise ValueError(f"fgrad.numpy.{name}: an axis of length {n} does not split into "
                             f"{k} equal sections; use fnp.array_split")
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        return [int(v) for v in np.cumsum(sizes)[:-1]]
    return [int(i) for i in np.asarray(sections).reshape(-1)]


def split(ary: ArrayLike, indices_or_sections: Any, axis: int = 0) -> list[Tensor]:
    """`ary` split into N equal sections (an int) or at the given indices along `axis`."""
    return _split(ary, indices_or_sections, axis, "split", even=True)


def array_split(ary: ArrayLike, indices_or_sections: Any, axis: int = 0) -> list[Tensor]:
    """Like `split`, allowing sections of unequal length (the first ones one longer)."""
    return _split(ary, indices_or_sections, axis, "array_split", even=False)


def _split(ary: ArrayLike, sections: Any, axis: int, name: str, even: bool) -> list[Tensor]:
    x = asarray(ary)
    ax = axis_of(axis, x.ndim, name)
    n = x.shape[ax]
    points = [0] + [min(max(p + n if p < 0 else p, 0), n)
                    for p in _split_points(n, sections, name, even)] + [n]
    index = [slice(None)] * x.ndim
    out = []
    for lo, hi in zip(points[:-1], points[1:]):
        index[ax] = slice(lo, max(lo, hi))
        out.append(x[tuple(index)])
    return out


def _split_along(name: str, axis: int, min_ndim: int) -> Any:
    def fn(ary: ArrayLike, indices_or_sections: Any) -> list[Tensor]:
        x = asarray(ary)
        if x.ndim < min_ndim:
            raise ValueError(f"fgrad.numpy.{name} needs an array of at least {min_ndim} "
                             f"dimensions, got shape {x.shape}")
        return split(x, indices_or_sections, 0 if (axis == 1 and x.ndim == 1) else axis)
    fn.__name__ = name
    fn.__doc__ = f"`split` along axis {axis}."
    return fn


vsplit = _split_along("vsplit", 0, 2)
hsplit = _split_along("hsplit", 1, 1)
dsplit = _split_along("dsplit", 2, 3)


def tile(A: ArrayLike, reps: Any) -> Tensor:  # noqa: N803
    """A repeated `reps` times along each axis (whole copies, like np.tile)."""
    x = asarray(A)
    reps = (int(reps),) if isinstance(reps, (int, np.integer)) else tuple(int(r) for r in reps)
    nd = max(x.ndim, len(reps))
    x = x.reshape((1,) * (nd - x.ndim) + x.shape)
    reps = (1,) * (nd - len(reps)) + reps
    return x.repeat(*reps) if nd else x


def repeat(a: ArrayLike, repeats: Any, axis: int | None = None,
           total_repeat_length: int | None = None) -> Tensor:
    """Each element repeated `repeats` times along `axis` (None: flattened first)."""
    x = asarray(a)
    if axis is None:
        x, axis = x.reshape(-1), 0
    ax = axis_of(axis, x.ndim, "repeat")
    if isinstance(repeats, (int, np.integer)):
        r = int(repeats)
        grown = x.reshape(x.shape[:ax + 1] + (1,) + x.shape[ax + 1:])
        grown = grown.expand(x.shape[:ax + 1] + (r,) + x.shape[ax + 1:])
        return grown.reshape(x.shape[:ax] + (x.shape[ax] * r,) + x.shape[ax + 1:])
    if isinstance(repeats, Tensor) and type(repeats) is not Tensor:
        raise TypeError("fgrad.numpy.repeat: per-element repeats must be concrete under a "
                        "transformation (the result length depends on them)")
    counts = np.asarray(repeats).reshape(-1)
    index = np.repeat(np.arange(x.shape[ax]), np.broadcast_to(counts, (x.shape[ax],)))
    return take(x, Tensor(index.astype(np.int32)), axis=ax)


def flip(m: ArrayLike, axis: Axis = None) -> Tensor:
    """The order of elements reversed along `axis` (None: every axis)."""
    x = asarray(m)
    axes = axes_of(axis, x.ndim, "flip")
    return x.flip(*axes) if axes else x


def fliplr(m: ArrayLike) -> Tensor:
    """Reverse axis 1."""
    return flip(m, 1)


def flipud(m: ArrayLike) -> Tensor:
    """Reverse axis 0."""
    return flip(m, 0)


def roll(a: ArrayLike, shift: Any, axis: Axis = None) -> Tensor:
    """Elements shifted cyclically by `shift` along `axis` (None: on the flattened array)."""
    x = asarray(a)
    if axis is None:
        return roll(x.reshape(-1), shift, 0).reshape(x.shape)
    axes = axes_of(axis, x.ndim, "roll") if not isinstance(axis, int) else \
        (axis_of(axis, x.ndim, "roll"),)
    shifts = (shift,) * len(axes) if isinstance(shift, (int, np.integer)) else tuple(shift)
    for ax, s in zip(axes, shifts):
        n = x.shape[ax]
        if n:
            x = x.roll(int(s) % n, ax)
    return x


def rot90(m: ArrayLike, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Tensor:
    """m rotated by 90 degrees k times in the plane of `axes` (first towards second)."""
    x = asarray(m)
    a0, a1 = axis_of(axes[0], x.ndim, "rot90"), axis_of(axes[1], x.ndim, "rot90")
    k %= 4
    if k == 0:
        return x
    if k == 2:
        return flip(flip(x, a0), a1)
    if k == 1:
        return swapaxes(flip(x, a1), a0, a1)
    return flip(swapaxes(x, a0, a1), a1)


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The broadcast of the shapes (NumPy's rule)."""
    return tuple(np.broadcast_shapes(*[tuple(s) for s in shapes]))


def broadcast_to(array: ArrayLike, shape: Any) -> Tensor:
    """`array` broadcast to `shape`."""
    x = asarray(array)
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    try:
        target = np.broadcast_shapes(x.shape, shape)
    except ValueError:
        target = None
    if target != tuple(shape):
        raise ValueError(f"fgrad.numpy.broadcast_to: cannot broadcast shape {x.shape} to "
                         f"{tuple(shape)}")
    if x.shape == tuple(shape):
        return x
    return x.reshape((1,) * (len(shape) - x.ndim) + x.shape).expand(tuple(shape))


def broadcast_arrays(*args: ArrayLike) -> list[Tensor]:
    """The arguments broadcast to their common shape."""
    xs = [asarray(a) for a in args]
    target = broadcast_shapes(*[x.shape for x in xs])
    return [broadcast_to(x, target) for x in xs]


def _atleast_shape(n: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    if len(shape) >= n:
        return shape
    if n == 3 and len(shape) == 1:
        return (1,) + shape + (1,)
    if n == 3 and len(shape) == 2:
        return shape + (1,)
    return (1,) * (n - len(shape)) + shape


def _atleast(n: int, name: str) -> Any:
    def fn(*arys: ArrayLike) -> Any:
        outs = [asarray(a) for a in arys]
        outs = [x.reshape(_atleast_shape(n, x.shape)) if x.ndim < n else x for x in outs]
        return outs[0] if len(outs) == 1 else outs
    fn.__name__ = name
    fn.__doc__ = f"Inputs viewed with at least {n} dimensions (NumPy's placement)."
    return fn


atleast_1d = _atleast(1, "atleast_1d")
atleast_2d = _atleast(2, "atleast_2d")
atleast_3d = _atleast(3, "atleast_3d")

_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate",
              "wrap": "circular"}


def pad(array: ArrayLike, pad_width: Any, mode: str = "constant",
        constant_values: Any = 0) -> Tensor:
    """`array` padded: mode "constant", "reflect", "edge" or "wrap"; pad_width as in NumPy
    (an int, (before, after), or one pair per axis)."""
    x = asarray(array)
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"fgrad.numpy.pad: mode {mode!r} is not supported; use one "
                                  f"of {sorted(_PAD_MODES)}")
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (x.ndim, 2))
    if (widths < 0).any():
        raise ValueError("fgrad.numpy.pad: pad widths must be non-negative")
    padding = [(int(lo), int(hi)) for lo, hi in widths]
    if mode == "constant":
        value = constant_values
        if not isinstance(value, (int, float, bool)):
            value = float(np.asarray(value).reshape(-1)[0])
        return x.pad(padding, mode="constant", value=value)
    return x.pad(padding, mode=_PAD_MODES[mode])


def take(a: ArrayLike, indices: ArrayLike, axis: int | None = None, mode: str | None = None,
         fill_value: Any = None) -> Tensor:
    """Elements of `a` at `indices` along `axis` (None: of the flattened array). Negative
    indices count from the end; out-of-range ones are clamped (JAX's default under jit)."""
    x = asarray(a)
    if axis is None:
        x, axis = x.reshape(-1), 0
    ax = axis_of(axis, x.ndim, "take")
    idx = asarray(indices)
    n = x.shape[ax]
    idx = (idx < 0).where(idx + n, idx).clip(0, max(n - 1, 0))
    index = (slice(None),) * ax + (idx,)
    return x[index]


def take_along_axis(arr: ArrayLike, indices: ArrayLike, axis: int | None) -> Tensor:
    """out[..., i, ...] = arr[..., indices[..., i, ...], ...] along `axis` (shapes broadcast
    on the other axes)."""
    x = asarray(arr)
    idx = asarray(indices)
    if axis is None:
        x, axis = x.reshape(-1), 0
    ax = axis_of(axis, x.ndim, "take_along_axis")
    if idx.ndim != x.ndim:
        raise ValueError(f"fgrad.numpy.take_along_axis: indices (shape {idx.shape}) must have "
                         f"as many dimensions as arr (shape {x.shape})")
    n = x.shape[ax]
    idx = (idx < 0).where(idx + n, idx)
    shape = list(np.broadcast_shapes(tuple(d for i, d in enumerate(x.shape) if i != ax),
                                     tuple(d for i, d in enumerate(idx.shape) if i != ax)))
    x_shape = shape[:ax] + [x.shape[ax]] + shape[ax:]
    i_shape = shape[:ax] + [idx.shape[ax]] + shape[ax:]
    return broadcast_to(x, x_shape).gather(ax, broadcast_to(idx, i_shape))


def _along_axis_index(idx: Tensor, ax: int) -> tuple[Any, ...]:
    grids = []
    for i, d in enumerate(idx.shape):
        if i == ax:
            grids.append(idx)
        else:
            shape = [1] * idx.ndim
            shape[i] = d
            grids.append(broadcast_to(Tensor(np.arange(d, dtype=np.int32).reshape(shape)),
                                      idx.shape))
    return tuple(grids)


def put_along_axis(arr: ArrayLike, indices: ArrayLike, values: ArrayLike, axis: int | None,
                   inplace: bool = False, mode: str | None = None) -> Tensor:
    """A copy of `arr` with `values` written at `indices` along `axis` (via `.at[].set`;
    fgrad arrays are immutable, so inplace=True is refused)."""
    if inplace:
        raise ValueError("fgrad.numpy.put_along_axis: Tensors are immutable; pass "
                         "inplace=False and use the returned array")
    x = asarray(arr)
    if axis is None:
        return put_along_axis(x.reshape(-1), asarray(indices).reshape(-1),
                              asarray(values).reshape(-1), 0).reshape(x.shape)
    ax = axis_of(axis, x.ndim, "put_along_axis")
    idx = asarray(indices)
    idx = (idx < 0).where(idx + x.shape[ax], idx)
    vals = broadcast_to(asarray(values).cast(x.dtype), idx.shape)
    return x.at[_along_axis_index(idx, ax)].set(vals)


def diagonal(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """The `offset` diagonal of the (axis1, axis2) planes, as the last axis."""
    x = asarray(a)
    i, j = axis_of(axis1, x.ndim, "diagonal"), axis_of(axis2, x.ndim, "diagonal")
    x = moveaxis(x, (i, j), (-2, -1))
    n, m = x.shape[-2:]
    rows = np.arange(max(0, -offset), n)
    rows = rows[rows + offset < m]
    if rows.size == 0:
        return x.reshape(x.shape[:-2] + (n * m,))[..., :0]
    flat = x.reshape(x.shape[:-2] + (n * m,))
    return flat[..., Tensor((rows * m + rows + offset).astype(np.int32))]


def trace(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1,
          dtype: Any = None) -> Tensor:
    """The sum of the `offset` diagonal."""
    d = diagonal(a, offset, axis1, axis2)
    out = d.sum(-1)
    return out if dtype is None else out.cast(dtype)
