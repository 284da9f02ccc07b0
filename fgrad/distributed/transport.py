"""Moving bytes between processes: the NumPy implementations of the collectives over MPI.

Each function takes the operands of one collective (NumPy arrays, several leaves of a pytree)
and makes ONE MPI call for all of them: operands are packed into a single contiguous buffer
(per reduction dtype for reductions, as raw bytes for gathers and broadcasts), so a gradient
pytree of many leaves costs one network latency, not one per leaf. In a 1-process job no MPI
call is made.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fgrad.distributed.runtime import communicator, process_count

# Reductions of half-precision data are carried out in float32 (MPI has no float16 sum).
_HALF = ("float16", "bfloat16")


def _reduce_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype.name in _HALF else dtype


def _mpi_op(op: str) -> Any:
    from mpi4py import MPI
    return {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op]


def allreduce(arrays: Sequence[np.ndarray], op: str, mean: bool = False) -> list[np.ndarray]:
    """Elementwise `op` ("sum", "max", "min") of each array over all processes, divided by
    the process count if `mean`; the result is the same on every process. Copies the data
    once (into the packed buffer) and reduces in place; results are views of that buffer."""
    size = process_count()
    if size == 1:
        return [np.asarray(a) for a in arrays]  # Tensors are immutable: no copy needed
    from mpi4py import MPI
    groups: dict[np.dtype, list[int]] = {}
    for i, a in enumerate(arrays):
        groups.setdefault(_reduce_dtype(a.dtype), []).append(i)
    out: list[Any] = [None] * len(arrays)
    for dtype, members in groups.items():
        buf = np.empty(sum(arrays[i].size for i in members), dtype)
        offset = 0
        for i in members:
            buf[offset:offset + arrays[i].size] = arrays[i].reshape(-1)
            offset += arrays[i].size
        communicator().Allreduce(MPI.IN_PLACE, buf, op=_mpi_op(op))
        if mean:
            buf /= np.asarray(size, dtype)
        offset = 0
        for i in members:
            part = buf[offset:offset + arrays[i].size].reshape(arrays[i].shape)
            out[i] = part.astype(arrays[i].dtype, copy=False)
            offset += arrays[i].size
    return out


def _pack_bytes(arrays: Sequence[np.ndarray]) -> np.ndarray:
    if not arrays:
        return np.zeros(0, np.uint8)
    return np.concatenate([np.ascontiguousarray(a).reshape(-1).view(np.uint8)
                           for a in arrays])


def _unpack_bytes(buf: np.ndarray, like: Sequence[np.ndarray],
                  lead: tuple[int, ...] = ()) -> list[np.ndarray]:
    """Split `buf` (shape lead + (total bytes,)) back into arrays shaped lead + a.shape."""
    out, offset = [], 0
    for a in like:
        nbytes = a.size * a.dtype.itemsize
        part = np.ascontiguousarray(buf[..., offset:offset + nbytes])
        out.append(part.view(a.dtype).reshape(lead + a.shape))
        offset += nbytes
    return out


def allgather(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Each array from every process, stacked along a new leading axis (process order)."""
    size = process_count()
    if size == 1:
        return [np.asarray(a)[None] for a in arrays]
    send = _pack_bytes(arrays)
    recv = np.empty((size, send.size), np.uint8)
    communicator().Allgather(send, recv)
    return _unpack_bytes(recv, arrays, (size,))


def bcast(arrays: Sequence[np.ndarray], root: int) -> list[np.ndarray]:
    """Process `root`'s arrays on every process."""
    if process_count() == 1:
        return [np.asarray(a) for a in arrays]
    buf = _pack_bytes(arrays)
    communicator().Bcast(buf, root=root)
    return _unpack_bytes(buf, arrays)
