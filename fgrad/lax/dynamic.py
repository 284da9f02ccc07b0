"""`lax.dynamic_slice` and friends: slices whose start indices may be traced values.

As in JAX, a negative start index counts from the end, and every start is then clamped so
that the slice lies inside the operand (`dynamic_slice(arange(10), (9,), (3,))` reads 7..9).
Static (Python int) starts become plain slices; traced ones become one gather (read) or
scatter (update), so both work under jit, vmap and grad.
"""
from __future__ import annotations

from typing import Any, Sequence

from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor, as_tensor

__all__ = ["dynamic_index_in_dim", "dynamic_slice", "dynamic_slice_in_dim",
           "dynamic_update_index_in_dim", "dynamic_update_slice",
           "dynamic_update_slice_in_dim"]


def _check(op: str, shape: tuple[int, ...], starts: Sequence[Any], sizes: Sequence[int]
           ) -> None:
    if len(starts) != len(shape) or len(sizes) != len(shape):
        raise ValueError(f"{op}: operand of shape {shape} needs {len(shape)} start indices and "
                         f"sizes, got {len(starts)} and {len(sizes)}")
    for axis, (size, dim) in enumerate(zip(sizes, shape)):
        if not 0 <= size <= dim:
            raise ValueError(f"{op}: slice size {size} on axis {axis} must be in [0, {dim}] "
                             f"(operand shape {shape})")


def _static_start(start: Any, dim: int, size: int) -> int:
    start = start + dim if start < 0 else start
    return min(max(start, 0), dim - size)


def _traced_start(start: Any, dim: int, size: int) -> Tensor:
    s = as_tensor(start)
    if s.shape != ():
        raise TypeError(f"dynamic_slice: each start index must be a scalar, got shape {s.shape}")
    if not s.dtype.is_int:
        raise TypeError(f"dynamic_slice: start indices must be integers, got {s.dtype!r}")
    s = s.cast(dtypes.int32)
    s = (s < 0).where(s + dim, s)
    return s.maximum(0).minimum(dim - size)


def _index(op: str, shape: tuple[int, ...], starts: Sequence[Any], sizes: Sequence[int]
           ) -> tuple[Any, ...]:
    """Basic slices when every start is a Python int, else an open mesh of index arrays."""
    _check(op, shape, starts, sizes)
    if all(isinstance(s, int) for s in starts):
        return tuple(slice(b, b + n) for b, n in
                     ((_static_start(s, d, n), n) for s, d, n in zip(starts, shape, sizes)))
    mesh = []
    for axis, (s, dim, n) in enumerate(zip(starts, shape, sizes)):
        idx = Tensor.arange(n, dtype=dtypes.int32) + _traced_start(s, dim, n)
        mesh.append(idx.reshape(tuple(n if k == axis else 1 for k in range(len(shape)))))
    return tuple(mesh)


def dynamic_slice(operand: Any, start_indices: Sequence[Any], slice_sizes: Sequence[int]
                  ) -> Tensor:
    """`operand[start:start + size]` along every axis, starts possibly traced (see module)."""
    x = as_tensor(operand)
    return x[_index("dynamic_slice", x.shape, list(start_indices), list(slice_sizes))]


def dynamic_update_slice(operand: Any, update: Any, start_indices: Sequence[Any]) -> Tensor:
    """`operand` with `update` written at `start_indices` (clamped as in `dynamic_slice`)."""
    x, u = as_tensor(operand), as_tensor(update)
    if u.ndim != x.ndim:
        raise ValueError(f"dynamic_update_slice: update of shape {u.shape} must have the rank "
                         f"of the operand {x.shape}")
    idx = _index("dynamic_update_slice", x.shape, list(start_indices), list(u.shape))
    return x.at[idx].set(u.cast(x.dtype))


def _starts_in_dim(ndim: int, index: Any, axis: int) -> list[Any]:
    return [index if k == axis else 0 for k in range(ndim)]


def dynamic_slice_in_dim(operand: Any, start_index: Any, slice_size: int, axis: int = 0
                         ) -> Tensor:
    """`dynamic_slice` along one axis (the others whole)."""
    x = as_tensor(operand)
    axis = axis % x.ndim
    sizes = [slice_size if k == axis else d for k, d in enumerate(x.shape)]
    return dynamic_slice(x, _starts_in_dim(x.ndim, start_index, axis), sizes)


def dynamic_index_in_dim(operand: Any, index: Any, axis: int = 0, keepdims: bool = True
                         ) -> Tensor:
    """Entry `index` (possibly traced) along `axis`; `keepdims=False` drops that axis."""
    x = as_tensor(operand)
    axis = axis % x.ndim
    out = dynamic_slice_in_dim(x, index, 1, axis)
    return out if keepdims else out.squeeze(axis)


def dynamic_update_slice_in_dim(operand: Any, update: Any, start_index: Any, axis: int
                                ) -> Tensor:
    """`dynamic_update_slice` along one axis."""
    x = as_tensor(operand)
    axis = axis % x.ndim
    return dynamic_update_slice(x, update, _starts_in_dim(x.ndim, start_index, axis))


def dynamic_update_index_in_dim(operand: Any, update: Any, index: Any, axis: int) -> Tensor:
    """Write `update` (without or with a length-1 `axis`) at entry `index` along `axis`."""
    x, u = as_tensor(operand), as_tensor(update)
    axis = axis % x.ndim
    if u.ndim == x.ndim - 1:
        u = u.unsqueeze(axis)
    return dynamic_update_slice_in_dim(x, u, index, axis)
