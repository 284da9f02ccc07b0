"""Data-dependent shapes: unique, nonzero, argwhere, flatnonzero, isin.

Their result length depends on the values, so under a transformation they need JAX's
`size=` argument (results padded with `fill_value` or truncated to `size`); without it they
work eagerly and raise a clear error on traced values.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, asarray


def _traced(x: Tensor) -> bool:
    return type(x) is not Tensor


def _need_size(name: str) -> TypeError:
    return TypeError(f"fgrad.numpy.{name}: the result's shape depends on the values, so under "
                     f"jit/vmap/grad pass size=N (the result is padded with fill_value or "
                     f"truncated to N elements), or call it outside the transformation")


def nonzero(a: ArrayLike, *, size: int | None = None, fill_value: Any = None
            ) -> tuple[Tensor, ...]:
    """Per-axis int32 indices of the nonzero elements (row-major order)."""
    x = asarray(a)
    if x.ndim == 0:
        raise ValueError("fgrad.numpy.nonzero: 0-d arrays are not supported; use "
                         "fnp.atleast_1d first")
    if size is None:
        if _traced(x):
            raise _need_size("nonzero")
        return tuple(Tensor(i.astype(np.int32)) for i in np.nonzero(x.numpy()))
    flat = _flat_positions(x.reshape(-1) != 0, size)
    out, rest = [], flat
    for d in reversed(x.shape):
        out.append(rest % d if d else rest)
        rest = rest // d if d else rest
    if fill_value is not None:
        mask = _valid(x.reshape(-1) != 0, size)
        out = [mask.where(o, fill_value) for o in out]
    return tuple(reversed(out))


def _valid(mask: Tensor, size: int) -> Tensor:
    """Which of the `size` output slots hold a real position."""
    count = mask.cast(dtypes.int32).sum()
    return Tensor(np.arange(size, dtype=np.int32)) < count


def _flat_positions(mask: Tensor, size: int) -> Tensor:
    """The first `size` flat positions where mask is true (padded with 0, JAX's default)."""
    n = mask.shape[0]
    rank = mask.cast(dtypes.int32).cumsum(0) - 1
    slots = Tensor(np.arange(size, dtype=np.int32))
    hit = mask.reshape(1, n) & (rank.reshape(1, n) == slots.reshape(size, 1))
    pos = Tensor(np.arange(n, dtype=np.int32)).reshape(1, n)
    return (hit.where(pos, 0)).sum(-1).cast(dtypes.int32)


def flatnonzero(a: ArrayLike, *, size: int | None = None, fill_value: Any = None) -> Tensor:
    """Indices of the nonzero elements of the flattened array."""
    return nonzero(asarray(a).reshape(-1), size=size, fill_value=fill_value)[0]


def argwhere(a: ArrayLike, *, size: int | None = None, fill_value: Any = None) -> Tensor:
    """(count, ndim) indices of the nonzero elements."""
    from fgrad.numpy.shape import stack
    x = asarray(a)
    if x.ndim == 0:
        x = x.reshape(1)
        idx = nonzero(x, size=size, fill_value=fill_value)
        return stack(idx, -1)[:, :0]
    return stack(nonzero(x, size=size, fill_value=fill_value), -1)


def unique(ar: ArrayLike, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: int | None = None, *, size: int | None = None,
           fill_value: Any = None) -> Any:
    """The sorted unique elements of the flattened array (eager; or padded to `size`)."""
    x = asarray(ar)
    if axis is not None:
        raise NotImplementedError("fgrad.numpy.unique: axis= is not supported")
    if size is None:
        if _traced(x):
            raise _need_size("unique")
        res = np.unique(x.numpy(), return_index=return_index, return_inverse=return_inverse,
                        return_counts=return_counts)  # type: ignore[call-overload]
        if not isinstance(res, tuple):
            return Tensor(res)
        return (Tensor(res[0]),) + tuple(Tensor(r.astype(np.int32)) for r in res[1:])
    if return_index or return_inverse or return_counts:
        raise NotImplementedError("fgrad.numpy.unique: with size=, only the values are "
                                  "returned")
    s = x.reshape(-1).sort(0)[0]
    first = Tensor(np.arange(s.shape[0]) == 0) | (s != s.roll(1, 0))
    pos = _flat_positions(first, size)
    vals = s[pos]
    fill = s.min() if fill_value is None else fill_value
    return _valid(first, size).where(vals, fill)


def isin(element: ArrayLike, test_elements: ArrayLike, assume_unique: bool = False,
         invert: bool = False) -> Tensor:
    """Whether each element occurs in test_elements (works under jit)."""
    x, t = asarray(element), asarray(test_elements).reshape(-1)
    hit = (x.reshape(x.shape + (1,)) == t).any(-1)
    return hit.logical_not() if invert else hit


def in1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False,
         invert: bool = False) -> Tensor:
    """`isin` on the flattened ar1."""
    return isin(asarray(ar1).reshape(-1), ar2, assume_unique, invert)
