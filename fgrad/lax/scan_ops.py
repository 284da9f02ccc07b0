"""`lax.map` and `lax.associative_scan` (JAX's), built on scan, vmap and slicing.

    ys = fgrad.lax.map(f, xs)                        # f over xs' leading axis, in sequence
    prefix = fgrad.lax.associative_scan(fn, elems)   # [a, fn(a, b), fn(fn(a, b), c), ...]

`associative_scan` is the parallel prefix of Blelloch (1990) as JAX arranges it: combine
neighbouring pairs, scan the half-length result recursively, then fill in the other half;
`fn` is only ever called with an earlier block as its first argument, so it may be
non-commutative (matrix products, composition of affine maps), and it runs O(log n) calls on
whole arrays instead of n calls on slices.
"""
from __future__ import annotations

from typing import Any, Callable

from fgrad.core import prims as P
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.core.tree_util import tree_flatten, tree_map, tree_unflatten
from fgrad.transforms import vmap
from fgrad.transforms.control.scan import scan

__all__ = ["associative_scan", "map"]


def map(f: Callable[[Any], Any], xs: Any, *,  # noqa: A001  (JAX's name)
        batch_size: int | None = None) -> Any:
    """`f` applied to each slice of `xs` along the leading axis, one after another (a scan),
    results stacked: `stack([f(x) for x in xs])` for pytrees. With `batch_size`, `f` runs
    vmapped over `batch_size` slices at a time (a remainder batch last), trading memory for
    speed."""
    if not callable(f):
        raise TypeError(f"lax.map: f must be callable, got {type(f).__name__}")
    if batch_size is None:
        return scan(lambda _, x: ((), f(x)), (), xs)[1]
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 0:
        raise ValueError(f"lax.map: batch_size must be a non-negative int, got "
                         f"{batch_size!r}")
    leaves, treedef = tree_flatten(xs)
    if not leaves:
        return scan(lambda _, x: ((), f(x)), (), xs)[1]
    leaves = [as_tensor(x) for x in leaves]
    n = leaves[0].shape[0] if leaves[0].ndim else 0
    batches, rest = divmod(n, batch_size) if batch_size else (0, n)
    full = batches * batch_size
    ys = None
    if batches:
        scanned = tree_unflatten(treedef, [
            P.reshape(P.slice_(x, (0,) * x.ndim, (full,) + x.shape[1:]),
                      (batches, batch_size) + x.shape[1:]) for x in leaves])
        ys = scan(lambda _, x: ((), vmap(f)(x)), (), scanned)[1]
        ys = tree_map(lambda y: P.reshape(y, (full,) + y.shape[2:]), ys)
    if rest or not batches:
        tail = tree_unflatten(treedef, [
            P.slice_(x, (full,) + (0,) * (x.ndim - 1), x.shape) for x in leaves])
        tail_ys = vmap(f)(tail)
        ys = tail_ys if ys is None else tree_map(
            lambda a, b: P.concatenate([a, as_tensor(b)], 0), ys, tail_ys)
    return ys


def _slice_axis(x: Tensor, axis: int, start: int, stop: int, step: int = 1) -> Tensor:
    """x[..., start:stop:step, ...] on `axis` (start/stop within [0, len])."""
    starts = tuple(start if i == axis else 0 for i in range(x.ndim))
    limits = tuple(stop if i == axis else d for i, d in enumerate(x.shape))
    strides = tuple(step if i == axis else 1 for i in range(x.ndim))
    return P.slice_(x, starts, limits, strides)


def _interleave(a: Tensor, b: Tensor, axis: int) -> Tensor:
    """a[0], b[0], a[1], b[1], ... along `axis` (a is as long as b, or one longer)."""
    m = b.shape[axis]
    head = a if a.shape[axis] == m else _slice_axis(a, axis, 0, m)
    pair_shape = a.shape[:axis] + (m, 1) + a.shape[axis + 1:]
    pairs = P.concatenate([P.reshape(head, pair_shape), P.reshape(b, pair_shape)], axis + 1)
    out = P.reshape(pairs, a.shape[:axis] + (2 * m,) + a.shape[axis + 1:])
    if a.shape[axis] == m:
        return out
    return P.concatenate([out, _slice_axis(a, axis, m, m + 1)], axis)


def associative_scan(fn: Callable[[Any, Any], Any], elems: Any, reverse: bool = False,
                     axis: int = 0) -> Any:
    """The inclusive prefix combination of `elems` along `axis` under the associative `fn`:
    element k is fn(... fn(fn(e0, e1), e2) ..., ek). `elems` is a pytree of arrays of equal
    length along `axis`; `fn(a, b)` takes and returns such pytrees of blocks (it must work
    elementwise on a whole block, e.g. through vmap). With reverse=True the scan runs from
    the end: element k combines e_{n-1}, ..., e_k, the later elements as fn's first
    argument (JAX's order)."""
    if not callable(fn):
        raise TypeError(f"lax.associative_scan: fn must be callable, got {type(fn).__name__}")
    leaves, treedef = tree_flatten(elems)
    if not leaves:
        raise ValueError("lax.associative_scan: elems has no arrays; pass a pytree of arrays "
                         "that share the scanned axis")
    flat = [as_tensor(x) for x in leaves]
    ndim = flat[0].ndim
    if not -ndim <= axis < max(ndim, 1) or ndim == 0:
        raise ValueError(f"lax.associative_scan: axis={axis} is out of range for elems of "
                         f"shape {flat[0].shape}")
    axis %= ndim
    n = flat[0].shape[axis]
    if any(x.ndim <= axis or x.shape[axis] != n for x in flat):
        raise ValueError(f"lax.associative_scan: every array in elems needs the same length "
                         f"along axis {axis}; got shapes {[x.shape for x in flat]}")

    def combine(a: list[Tensor], b: list[Tensor]) -> list[Tensor]:
        out, out_tree = tree_flatten(fn(tree_unflatten(treedef, a), tree_unflatten(treedef, b)))
        if out_tree != treedef:
            raise TypeError(f"lax.associative_scan: fn returned a tree {out_tree}, but elems "
                            f"are {treedef}; fn must return the structure it is given")
        return [as_tensor(o) for o in out]

    def prefix(xs: list[Tensor]) -> list[Tensor]:
        size = xs[0].shape[axis]
        if size < 2:
            return xs
        reduced = combine([_slice_axis(x, axis, 0, size - 1, 2) for x in xs],
                          [_slice_axis(x, axis, 1, size, 2) for x in xs])
        odd = prefix(reduced)
        if size % 2 == 0:
            even = combine([_slice_axis(o, axis, 0, o.shape[axis] - 1) for o in odd],
                           [_slice_axis(x, axis, 2, size, 2) for x in xs])
        else:
            even = combine(odd, [_slice_axis(x, axis, 2, size, 2) for x in xs])
        even = [P.concatenate([_slice_axis(x, axis, 0, 1), e], axis) for x, e in zip(xs, even)]
        return [_interleave(e, o, axis) for e, o in zip(even, odd)]

    if reverse:
        flat = [P.rev(x, (axis,)) for x in flat]
    out = prefix(flat)
    if reverse:
        out = [P.rev(x, (axis,)) for x in out]
    return tree_unflatten(treedef, out)
