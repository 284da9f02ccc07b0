"""Data-dependent shapes: unique (and the array API's unique_*), nonzero, argwhere,
flatnonzero, isin, the 1-d set operations (union1d, intersect1d, setdiff1d, setxor1d),
compress and extract.

Their result length depends on the values, so under a transformation they need JAX's
`size=` argument (results padded with `fill_value` or truncated to `size`); without it they
work eagerly and raise a clear error on traced values.
"""
from __future__ import annotations

from typing import Any, NamedTuple

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
           return_counts: bool = False, axis: int | None = None, *, equal_nan: bool = True,
           size: int | None = None, fill_value: Any = None, sorted: bool = True) -> Any:
    """The sorted unique elements of the flattened array (eager; or padded to `size`), with
    the first-occurrence indices, the inverse (shaped like `ar`) and the counts on request.

    NaNs count as one value unless equal_nan=False. With `size`, values are padded with
    `fill_value` (default: the smallest value), indices with the first index, counts with 0."""
    x = asarray(ar)
    if axis is not None:
        raise NotImplementedError("fgrad.numpy.unique: axis= is not supported")
    if size is None and _traced(x):
        raise _need_size("unique")
    parts = _unique_parts(x, size, fill_value, equal_nan, "unique")
    want = (True, return_index, return_inverse, return_counts)
    out = tuple(p for p, w in zip(parts, want) if w)
    return out[0] if len(out) == 1 else out


def _unique_parts(x: Tensor, size: int | None, fill_value: Any, equal_nan: bool, name: str
                  ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(values, first indices, inverse shaped like x, counts); indices are int32."""
    if size is None:
        v, i, inv, c = np.unique(x.numpy().reshape(-1), return_index=True,
                                 return_inverse=True, return_counts=True, equal_nan=equal_nan)
        ints = [Tensor(np.asarray(r, np.int32).reshape(sh)) for r, sh in
                ((i, i.shape), (inv, x.shape), (c, c.shape))]
        return Tensor(v), ints[0], ints[1], ints[2]
    size = _static_size(size, name)
    flat = x.reshape(-1)
    n = flat.shape[0]
    if n == 0:
        if fill_value is None and size:
            raise ValueError(f"fgrad.numpy.{name}: the input is empty, so with size={size} "
                             f"pass fill_value= for the padding")
        zeros = Tensor(np.zeros(size, np.int32))
        fill = 0 if fill_value is None else fill_value
        return (_filled(x, size, fill), zeros, Tensor(np.zeros(x.shape, np.int32)), zeros)
    s, perm, first = _sorted_first(flat, equal_nan)
    pos, valid = _flat_positions(first, size), _valid(first, size)
    values = s[pos]
    if fill_value is not None:
        values = valid.where(values, asarray(fill_value).cast(values.dtype))
    group = first.cast(dtypes.int32).cumsum(0) - 1
    inverse = Tensor(np.zeros(n, np.int32)).at[perm].set(group).reshape(x.shape)
    slots = Tensor(np.arange(size, dtype=np.int32)).reshape(size, 1)
    counts = (group.reshape(1, n) == slots).cast(dtypes.int32).sum(-1).cast(dtypes.int32)
    return values, perm[pos], inverse, counts


def _static_size(size: Any, name: str) -> int:
    from fgrad.numpy.numeric import static_int
    out = static_int(size, name, "size")
    if out < 0:
        raise ValueError(f"fgrad.numpy.{name}: size must be >= 0, got {out}")
    return out


def _filled(like: Tensor, size: int, fill: Any) -> Tensor:
    from fgrad.numpy.creation import full
    return full((size,), asarray(fill).cast(like.dtype))


def _sorted_first(flat: Tensor, equal_nan: bool) -> tuple[Tensor, Tensor, Tensor]:
    """(sorted values, the stable sorting permutation, where each run of equal values
    starts) of a non-empty 1-d Tensor."""
    s, perm = flat.sort(0)
    prev = s.roll(1, 0)
    new = s != prev
    if equal_nan and s.dtype.is_float:
        new = new & (s.isnan() & prev.isnan()).logical_not()
    first = Tensor(np.arange(s.shape[0]) == 0) | new
    return s, perm.cast(dtypes.int32), first


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


# ---------------------------------------------------------------------------- array API unique

class UniqueAllResult(NamedTuple):
    """unique_all's result: values, first indices, inverse indices (shaped like x), counts."""
    values: Tensor
    indices: Tensor
    inverse_indices: Tensor
    counts: Tensor


class UniqueCountsResult(NamedTuple):
    """unique_counts's result."""
    values: Tensor
    counts: Tensor


class UniqueInverseResult(NamedTuple):
    """unique_inverse's result (inverse_indices shaped like x)."""
    values: Tensor
    inverse_indices: Tensor


def _unique_api(x: ArrayLike, size: int | None, fill_value: Any, name: str
                ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    t = asarray(x)
    if size is None and _traced(t):
        raise _need_size(name)
    # 0-d inputs give 1-element values and a 0-d inverse, as in JAX
    return _unique_parts(t, size, fill_value, False, name)


def unique_all(x: ArrayLike, /, *, size: int | None = None, fill_value: Any = None
               ) -> UniqueAllResult:
    """Sorted unique values with first indices, inverse indices and counts (NaNs are not
    merged); `size`/`fill_value` as in `unique`."""
    return UniqueAllResult(*_unique_api(x, size, fill_value, "unique_all"))


def unique_counts(x: ArrayLike, /, *, size: int | None = None, fill_value: Any = None
                  ) -> UniqueCountsResult:
    """Sorted unique values and how often each occurs."""
    v, _, _, c = _unique_api(x, size, fill_value, "unique_counts")
    return UniqueCountsResult(v, c)


def unique_inverse(x: ArrayLike, /, *, size: int | None = None, fill_value: Any = None
                   ) -> UniqueInverseResult:
    """Sorted unique values and, for each element of x, the index of its value."""
    v, _, inv, _ = _unique_api(x, size, fill_value, "unique_inverse")
    return UniqueInverseResult(v, inv)


def unique_values(x: ArrayLike, /, *, size: int | None = None, fill_value: Any = None
                  ) -> Tensor:
    """The sorted unique values (NaNs are not merged)."""
    return _unique_api(x, size, fill_value, "unique_values")[0]


# ---------------------------------------------------------------------------- set operations

def _two(name: str, ar1: ArrayLike, ar2: ArrayLike, promote: bool, size: Any
         ) -> tuple[Tensor, Tensor]:
    from fgrad.numpy._base import result_type
    a, b = asarray(ar1), asarray(ar2)
    dt = result_type(a, b) if promote else None
    if size is None:
        if _traced(a) or _traced(b):
            raise _need_size(name)
        # concrete inputs stay concrete (also inside jit): convert on the host
        a, b = (Tensor(t.numpy().reshape(-1).astype((dt or t.dtype).np)) for t in (a, b))
        return a, b
    a, b = a.reshape(-1), b.reshape(-1)
    return (a.cast(dt), b.cast(dt)) if dt is not None else (a, b)


def _compact(values: Tensor, keep: Tensor, size: int, fill: Any) -> tuple[Tensor, Tensor]:
    """The first `size` kept values padded with `fill` (None: the smallest kept value, 0 when
    nothing is kept), and which slots are real."""
    pos, valid = _flat_positions(keep, size), _valid(keep, size)
    out = values[pos]
    if size == 0:
        return out, valid
    if fill is None:
        fill = keep.any().where(out[0], Tensor(np.zeros((), out.dtype.np)))
    return valid.where(out, asarray(fill).cast(out.dtype)), valid


def union1d(ar1: ArrayLike, ar2: ArrayLike, *, size: int | None = None,
            fill_value: Any = None) -> Tensor:
    """The sorted unique values found in either array (flattened)."""
    from fgrad.numpy.shape import concatenate
    a, b = _two("union1d", ar1, ar2, True, size)
    return unique(concatenate([a, b]), size=size, fill_value=fill_value)


def intersect1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False,
                return_indices: bool = False, *, size: int | None = None,
                fill_value: Any = None) -> Any:
    """The sorted unique values found in both arrays; with return_indices, also the first
    index of each in ar1 and ar2 (padded with len(ar1) / len(ar2) when `size` pads).
    assume_unique is a hint (accepted, not needed)."""
    a, b = _two("intersect1d", ar1, ar2, True, size)
    if size is None:
        res: Any = np.intersect1d(a.numpy(), b.numpy(), assume_unique,  # type: ignore
                                  return_indices)
        if not return_indices:
            return Tensor(res)
        return Tensor(res[0]), Tensor(res[1].astype(np.int32)), Tensor(res[2].astype(np.int32))
    size = _static_size(size, "intersect1d")
    n1, n2 = a.shape[0], b.shape[0]
    if n1 == 0 or n2 == 0:
        vals = _filled(a, size, 0 if fill_value is None else fill_value)
        i1, i2 = (Tensor(np.full(size, n, np.int32)) for n in (n1, n2))
        return (vals, i1, i2) if return_indices else vals
    s, perm, first = _sorted_first(a, True)
    keep = first & isin(s, b)
    vals, valid = _compact(s, keep, size, fill_value)
    if not return_indices:
        return vals
    i1 = valid.where(perm[_flat_positions(keep, size)], n1)
    hits = vals.reshape(size, 1) == b.reshape(1, n2)
    i2 = hits.where(Tensor(np.arange(n2, dtype=np.int32)), n2).min(-1)
    return vals, i1.cast(dtypes.int32), valid.where(i2, n2).cast(dtypes.int32)


def setdiff1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *,
              size: int | None = None, fill_value: Any = None) -> Tensor:
    """The unique values of ar1 that are not in ar2, sorted (in ar1's order when
    assume_unique=True), in ar1's dtype; `size` pads with fill_value (default 0)."""
    a, b = _two("setdiff1d", ar1, ar2, False, size)
    if size is None:
        return Tensor(np.setdiff1d(a.numpy(), b.numpy(), assume_unique).astype(a.dtype.np))
    size = _static_size(size, "setdiff1d")
    fill = 0 if fill_value is None else fill_value
    if a.shape[0] == 0:
        return _filled(a, size, fill)
    if assume_unique:
        return _compact(a, isin(a, b, invert=True), size, fill)[0]
    s, _, first = _sorted_first(a, True)
    return _compact(s, first & isin(s, b, invert=True), size, fill)[0]


def setxor1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *,
             size: int | None = None, fill_value: Any = None) -> Tensor:
    """The sorted unique values found in exactly one of the arrays. assume_unique is a
    hint (accepted, not needed)."""
    from fgrad.numpy.shape import concatenate
    a, b = _two("setxor1d", ar1, ar2, True, size)
    if size is None:
        return Tensor(np.setxor1d(a.numpy(), b.numpy(), assume_unique).astype(a.dtype.np))
    size = _static_size(size, "setxor1d")
    both = concatenate([a, b])
    if both.shape[0] == 0:
        return _filled(both, size, 0 if fill_value is None else fill_value)
    s, _, first = _sorted_first(both, True)
    return _compact(s, first & (isin(s, a) ^ isin(s, b)), size, fill_value)[0]


# ---------------------------------------------------------------------------- selection

def compress(condition: ArrayLike, a: ArrayLike, axis: int | None = None, *,
             size: int | None = None, fill_value: Any = 0, out: Any = None) -> Tensor:
    """The slices of `a` along `axis` (None: of the flattened array) where the 1-d
    condition is nonzero; a shorter condition ignores the rest of `a`. Under jit/grad with a
    traced condition pass `size` (padded with fill_value, or truncated)."""
    return _compress("compress", condition, a, axis, size, fill_value, out)


def _compress(name: str, condition: ArrayLike, a: ArrayLike, axis: int | None,
              size: int | None, fill_value: Any, out: Any) -> Tensor:
    from fgrad.numpy._base import axis_of, refuse_out
    refuse_out(name, out)
    c, x = asarray(condition), asarray(a)
    if c.ndim != 1:
        raise ValueError(f"fgrad.numpy.{name}: condition must be 1-d, got shape {c.shape}")
    if axis is None:
        x, axis = x.reshape(-1), 0
    ax = axis_of(axis, x.ndim, name)
    n = x.shape[ax]
    concrete = None if _traced(c) else c.numpy() != 0   # also inside jit: host-side
    if c.shape[0] > n:
        if concrete is None or concrete[n:].any():
            raise ValueError(f"fgrad.numpy.{name}: condition (length {c.shape[0]}) selects "
                             f"entries beyond axis {ax} of the array (length {n}); trim it "
                             f"to {n}")
        concrete = concrete[:n]
    if concrete is not None:
        c = Tensor(concrete)
    elif c.dtype != dtypes.bool:
        c = c != 0
    lead = (slice(None),) * ax
    if c.shape[0] < n:
        x = x[lead + (slice(0, c.shape[0]),)]
    if size is None:
        if concrete is None:
            raise _need_size(name)
        return x[lead + (Tensor(np.flatnonzero(concrete).astype(np.int32)),)]
    size = _static_size(size, name)
    if size > c.shape[0]:
        raise ValueError(f"fgrad.numpy.{name}: size={size} is larger than the selected "
                         f"axis (length {c.shape[0]})")
    taken = x[lead + (_flat_positions(c, size),)]
    valid = _valid(c, size).reshape((size,) + (1,) * (x.ndim - ax - 1))
    return valid.where(taken, asarray(fill_value).cast(x.dtype))


def extract(condition: ArrayLike, arr: ArrayLike, *, size: int | None = None,
            fill_value: Any = 0) -> Tensor:
    """The elements of the flattened arr where the flattened condition is nonzero."""
    c = asarray(condition)
    c = Tensor(c.numpy().reshape(-1)) if not _traced(c) else c.reshape(-1)
    return _compress("extract", c, asarray(arr).reshape(-1), None, size, fill_value, None)
