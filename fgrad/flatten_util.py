"""`fgrad.flatten_util`: `ravel_pytree`, one flat vector for a whole pytree (as
jax.flatten_util).

    flat, unravel = fgrad.flatten_util.ravel_pytree(params)
    params = unravel(flat - lr * grad_flat)

The vector's dtype is the promotion of the leaves' dtypes; `unravel` casts each piece back to
its leaf's dtype (when every leaf has the vector's dtype it casts nothing, so it also takes a
vector of another dtype). Both work under jit, grad and vmap.
"""
from __future__ import annotations

from typing import Any, Callable

from fgrad.core import dtypes as _dt
from fgrad.core import prims as P
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.core.tree_util import PyTreeDef, tree_flatten, tree_unflatten

__all__ = ["ravel_pytree"]


def _leaf_dtype(leaf: Any) -> DType:
    """A leaf's dtype: a Tensor's own, a NumPy array's, a Python scalar's default."""
    if isinstance(leaf, Tensor):
        return leaf.dtype
    if _dt.weak_type_of(leaf) is not None:
        return _dt.scalar_default_dtype(leaf)
    return as_tensor(leaf).dtype


class _Unravel:
    """The inverse of one `ravel_pytree` call: a flat vector back to the pytree (hashable,
    so it can be a static argument of jit)."""

    def __init__(self, treedef: PyTreeDef, shapes: tuple[tuple[int, ...], ...],
                 from_dtypes: tuple[DType, ...], to_dtype: DType | None):
        self.treedef, self.shapes = treedef, shapes
        self.from_dtypes, self.to_dtype = from_dtypes, to_dtype
        self.sizes = tuple(_size(s) for s in shapes)

    def _key(self) -> tuple[Any, ...]:
        return (self.treedef, self.shapes, self.from_dtypes, self.to_dtype)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Unravel) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"unravel_pytree({self.treedef})"

    def __call__(self, flat: Any) -> Any:
        """The pytree whose leaves are consecutive pieces of the 1-d `flat`."""
        vec = as_tensor(flat)
        total = sum(self.sizes)
        if vec.shape != (total,):
            raise ValueError(f"ravel_pytree's unravel: expected a 1-d vector of length "
                             f"{total}, got shape {vec.shape}; pass the flat vector (or one "
                             f"of the same length) that ravel_pytree returned")
        if self.to_dtype is not None and vec.dtype != self.to_dtype:
            raise TypeError(f"ravel_pytree's unravel: given a vector of dtype "
                            f"{vec.dtype.np.name}, but expected {self.to_dtype.np.name} (the "
                            f"leaves' promoted dtype); cast it with .cast(...) first")
        leaves, start = [], 0
        for shape, size, dtype in zip(self.shapes, self.sizes, self.from_dtypes):
            piece = P.reshape(P.slice_(vec, (start,), (start + size,)), shape)
            leaves.append(piece if self.to_dtype is None else P.convert(piece, dtype))
            start += size
        return tree_unflatten(self.treedef, leaves)


def _size(shape: tuple[int, ...]) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def ravel_pytree(pytree: Any) -> tuple[Tensor, Callable[[Any], Any]]:
    """`(flat, unravel)`: the leaves of `pytree` raveled and concatenated in tree order
    into one 1-d Tensor of their promoted dtype, and the function that maps such a vector
    back to a pytree of the same structure, shapes and dtypes. A tree without leaves gives
    an empty float32 vector."""
    leaves, treedef = tree_flatten(pytree)
    if not leaves:
        return Tensor.zeros(0, dtype=dtypes.float32), _Unravel(treedef, (), (), None)
    from_dtypes = tuple(_leaf_dtype(leaf) for leaf in leaves)
    to_dtype = from_dtypes[0]
    for dt in from_dtypes[1:]:
        to_dtype = _dt.promote(to_dtype, dt)
    tensors = [as_tensor(leaf, dt) for leaf, dt in zip(leaves, from_dtypes)]
    shapes = tuple(tuple(t.shape) for t in tensors)
    pieces = [P.convert(P.reshape(t, (_size(t.shape),)), to_dtype) for t in tensors]
    flat = P.concatenate(pieces, 0)
    single = all(dt == to_dtype for dt in from_dtypes)
    return flat, _Unravel(treedef, shapes, from_dtypes, None if single else to_dtype)
