"""Products (dot, vdot, inner, outer, matmul, tensordot, einsum, kron, cross) and sorting
(sort, argsort, searchsorted, lexsort) with NumPy semantics."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fgrad.core import dtypes as _dt
from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, asarray, axis_of, refuse_out, to_dtype


def _promoted(a: ArrayLike, b: ArrayLike) -> tuple[Tensor, Tensor]:
    x, y = asarray(a), asarray(b)
    dt = _dt.promote(x.dtype, y.dtype)
    return x.cast(dt) if x.dtype != dt else x, y.cast(dt) if y.dtype != dt else y


def matmul(a: ArrayLike, b: ArrayLike, *, precision: Any = None,
           preferred_element_type: Any = None) -> Tensor:
    """Matrix product with NumPy's rules for 1-d operands and broadcast batch axes."""
    x, y = _promoted(a, b)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError("fgrad.numpy.matmul: operands must not be scalars; use fnp.multiply")
    out = x @ y
    want = to_dtype(preferred_element_type)
    return out if want is None else out.cast(want)


def tensordot(a: ArrayLike, b: ArrayLike, axes: Any = 2, *, precision: Any = None) -> Tensor:
    """Sum of products over the last `axes` axes of a and the first of b (an int), or over
    the paired axes (two sequences)."""
    x, y = _promoted(a, b)
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        ax_a, ax_b = list(range(x.ndim - n, x.ndim)), list(range(n))
    else:
        ax_a, ax_b = ([axes[0]] if isinstance(axes[0], int) else list(axes[0]),
                      [axes[1]] if isinstance(axes[1], int) else list(axes[1]))
        ax_a = [axis_of(i, x.ndim, "tensordot") for i in ax_a]
        ax_b = [axis_of(i, y.ndim, "tensordot") for i in ax_b]
    for i, j in zip(ax_a, ax_b):
        if x.shape[i] != y.shape[j]:
            raise ValueError(f"fgrad.numpy.tensordot: contracted axes differ in length: "
                             f"{x.shape} axis {i} vs {y.shape} axis {j}")
    free_a = [i for i in range(x.ndim) if i not in ax_a]
    free_b = [j for j in range(y.ndim) if j not in ax_b]
    k = int(np.prod([x.shape[i] for i in ax_a], dtype=np.int64))
    xm = x.permute(free_a + ax_a) if x.ndim > 1 else x
    ym = y.permute(ax_b + free_b) if y.ndim > 1 else y
    xm = xm.reshape(-1, k)
    ym = ym.reshape(k, -1)
    out = xm @ ym
    return out.reshape(tuple(x.shape[i] for i in free_a) + tuple(y.shape[j] for j in free_b))


def dot(a: ArrayLike, b: ArrayLike, *, precision: Any = None,
        preferred_element_type: Any = None) -> Tensor:
    """NumPy's dot: scalars multiply, 1-d/2-d as matmul, N-d sums over a's last axis and
    b's second-to-last."""
    x, y = _promoted(a, b)
    if x.ndim == 0 or y.ndim == 0:
        return x * y
    if y.ndim <= 2:
        return matmul(x, y)
    return tensordot(x, y, ([x.ndim - 1], [y.ndim - 2]))


def vdot(a: ArrayLike, b: ArrayLike, *, precision: Any = None) -> Tensor:
    """The dot product of the flattened arrays."""
    x, y = _promoted(a, b)
    return (x.reshape(-1) * y.reshape(-1)).sum()


def inner(a: ArrayLike, b: ArrayLike, *, precision: Any = None) -> Tensor:
    """Sum of products over the last axes of a and b."""
    x, y = _promoted(a, b)
    if x.ndim == 0 or y.ndim == 0:
        return x * y
    return tensordot(x, y, ([x.ndim - 1], [y.ndim - 1]))


def outer(a: ArrayLike, b: ArrayLike, out: Any = None) -> Tensor:
    """out[i, j] = a.ravel()[i] * b.ravel()[j]."""
    refuse_out("outer", out)
    x, y = _promoted(a, b)
    return x.reshape(-1, 1) * y.reshape(1, -1)


def einsum(subscripts: str, *operands: ArrayLike, optimize: Any = None,
           precision: Any = None, preferred_element_type: Any = None) -> Tensor:
    """Einstein summation over the operands (explicit '->' or implicit output)."""
    xs = [asarray(o) for o in operands]
    dt = xs[0].dtype
    for x in xs[1:]:
        dt = _dt.promote(dt, x.dtype)
    out = Tensor.einsum(subscripts, *[x.cast(dt) if x.dtype != dt else x for x in xs])
    want = to_dtype(preferred_element_type)
    return out if want is None else out.cast(want)


def kron(a: ArrayLike, b: ArrayLike) -> Tensor:
    """The Kronecker product."""
    x, y = _promoted(a, b)
    nd = max(x.ndim, y.ndim)
    x = x.reshape((1,) * (nd - x.ndim) + x.shape)
    y = y.reshape((1,) * (nd - y.ndim) + y.shape)
    xs = [d for s in x.shape for d in (s, 1)]
    ys = [d for s in y.shape for d in (1, s)]
    prod = x.reshape(xs) * y.reshape(ys)
    return prod.reshape(tuple(p * q for p, q in zip(x.shape, y.shape)))


def cross(a: ArrayLike, b: ArrayLike, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: int | None = None) -> Tensor:
    """Cross product of 3-vectors (2-vectors have z = 0) along the given axes."""
    from fgrad.numpy.shape import broadcast_arrays, moveaxis, stack
    if axis is not None:
        axisa = axisb = axisc = axis
    x, y = _promoted(a, b)
    x, y = moveaxis(x, axisa, -1), moveaxis(y, axisb, -1)
    if x.shape[-1] not in (2, 3) or y.shape[-1] not in (2, 3):
        raise ValueError(f"fgrad.numpy.cross: vectors must have length 2 or 3, got shapes "
                         f"{x.shape} and {y.shape}")
    x0, x1 = x[..., 0], x[..., 1]
    y0, y1 = y[..., 0], y[..., 1]
    x2 = x[..., 2] if x.shape[-1] == 3 else None
    y2 = y[..., 2] if y.shape[-1] == 3 else None
    z = x0 * y1 - x1 * y0
    if x2 is None and y2 is None:
        return z
    x2 = x2 if x2 is not None else x0 * 0
    y2 = y2 if y2 is not None else y0 * 0
    comps = broadcast_arrays(x1 * y2 - x2 * y1, x2 * y0 - x0 * y2, z)
    return moveaxis(stack(comps, -1), -1, axisc)


# ---------------------------------------------------------------------------- sorting

def sort(a: ArrayLike, axis: int | None = -1, kind: Any = None, order: Any = None, *,
         stable: bool = True, descending: bool = False) -> Tensor:
    """a sorted along `axis` (None: flattened); NaNs last."""
    x = asarray(a)
    if axis is None:
        x, axis = x.reshape(-1), 0
    if x.ndim == 0:
        return x
    return x.sort(axis_of(axis, x.ndim, "sort"), descending=descending)[0]


def argsort(a: ArrayLike, axis: int | None = -1, kind: Any = None, order: Any = None, *,
            stable: bool = True, descending: bool = False) -> Tensor:
    """Indices that sort a along `axis` (stable: ties keep their order)."""
    x = asarray(a)
    if axis is None:
        x, axis = x.reshape(-1), 0
    return x.argsort(axis_of(axis, x.ndim, "argsort"), descending=descending)


def searchsorted(a: ArrayLike, v: ArrayLike, side: str = "left", sorter: Any = None,
                 *, method: str = "compare_all") -> Tensor:
    """Insertion indices of v into the sorted 1-d a (side "left": first such position)."""
    x = asarray(a)
    if x.ndim != 1:
        raise ValueError(f"fgrad.numpy.searchsorted: a must be 1-d, got shape {x.shape}")
    if sorter is not None:
        x = x[asarray(sorter)]
    vals = asarray(v)
    if side not in ("left", "right"):
        raise ValueError(f"fgrad.numpy.searchsorted: side must be 'left' or 'right', got "
                         f"{side!r}")
    flat = vals.reshape(-1, 1)
    below = (x.reshape(1, -1) < flat) if side == "left" else (x.reshape(1, -1) <= flat)
    return below.cast(dtypes.int32).sum(-1).reshape(vals.shape)


def lexsort(keys: Sequence[ArrayLike], axis: int = -1) -> Tensor:
    """Indices sorting by the last key first, then the previous ones (stable sorts)."""
    ks = [asarray(k) for k in keys]
    idx = ks[0].argsort(axis)
    from fgrad.numpy.shape import take_along_axis
    for k in ks[1:]:
        order = take_along_axis(k, idx, axis).argsort(axis)
        idx = take_along_axis(idx, order, axis)
    return idx


def einsum_path(subscripts: str, /, *operands: ArrayLike, optimize: Any = "auto"
                ) -> tuple[list[tuple[int, ...]], str]:
    """(contraction path, report) for einsum, computed by numpy.einsum_path from the
    operands' shapes only (traced operands are fine). optimize: 'auto'/True/'greedy',
    'optimal', False (left to right, pairwise) or an explicit list of index tuples; the
    greedy path may differ from JAX's (which uses opt_einsum)."""
    stand_ins = [np.broadcast_to(np.zeros((), _stand_in_dtype(o)), np.shape(o))
                 if not isinstance(o, Tensor) else
                 np.broadcast_to(np.zeros((), o.dtype.np), o.shape) for o in operands]
    if optimize in ("auto", True, "greedy"):
        how: Any = "greedy"
    elif optimize == "optimal":
        how = "optimal"
    elif optimize is False or optimize is None:
        how = ["einsum_path"] + [(0, 1)] * max(len(operands) - 1, 0) if len(operands) > 1 \
            else ["einsum_path", (0,)]
    elif isinstance(optimize, (list, tuple)):
        how = ["einsum_path"] + [tuple(int(i) for i in step) for step in optimize]
    else:
        raise ValueError(f"fgrad.numpy.einsum_path: optimize must be 'auto', 'greedy', "
                         f"'optimal', a bool or a list of index tuples, got {optimize!r}")
    try:
        path, report = np.einsum_path(subscripts, *stand_ins, optimize=how)
    except ValueError as err:
        raise ValueError(f"fgrad.numpy.einsum_path: {err} (operand shapes "
                         f"{[s.shape for s in stand_ins]})") from None
    return [tuple(int(i) for i in step) for step in path[1:]], report


def _stand_in_dtype(o: Any) -> Any:
    arr = np.asarray(o)
    return arr.dtype if arr.dtype.kind in "biuf" else np.float32
