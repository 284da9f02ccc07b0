"""Data and state across processes: batch shards and checkpoints written by process 0."""
from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

from fgrad.core import tree_util
from fgrad.core.tensor import Tensor
from fgrad.distributed.runtime import barrier, process_count, process_index


def shard_batch(x: Any, axis: int = 0) -> Any:
    """This process's equal, contiguous shard of `x` along `axis`: process i of n gets
    block i of n. `x` is a Tensor, a NumPy array, or a pytree of them (every leaf is split
    the same way). Raises ValueError when the axis length is not divisible by n."""
    n, i = process_count(), process_index()

    def shard(leaf: Any) -> Any:
        shape = tuple(leaf.shape)
        if not -len(shape) <= axis < len(shape):
            raise ValueError(f"shard_batch: axis {axis} is out of range for a leaf of shape "
                             f"{shape}")
        length = shape[axis]
        if length % n:
            raise ValueError(
                f"shard_batch: axis {axis} of a leaf of shape {shape} has length {length}, "
                f"which {n} processes cannot split equally; use a batch size divisible by "
                f"{n} (e.g. {length - length % n or n})")
        index = [slice(None)] * len(shape)
        index[axis % len(shape)] = slice(i * length // n, (i + 1) * length // n)
        return leaf[tuple(index)]
    return tree_util.tree_map(shard, x)


def _to_numpy(leaf: Any) -> np.ndarray:
    return np.asarray(leaf.numpy() if isinstance(leaf, Tensor) else leaf)


def _flat_arrays(tree: Any) -> dict[str, Any]:
    leaves = tree_util.tree_leaves_with_path(tree)
    return {f"{k:05d}:{tree_util.keystr(path)}": _to_numpy(leaf)
            for k, (path, leaf) in enumerate(leaves)}


def save_checkpoint(path: str, tree: Any) -> None:
    """Write the pytree `tree` (Tensors or arrays) to `path` (.npz) from process 0 only,
    atomically: a temporary file in the same folder, flushed to disk, then renamed over
    `path`, so a crash never leaves a half-written checkpoint. All processes return once the
    file is complete (call it on every process, with identical trees)."""
    if process_index() == 0:
        arrays = _flat_arrays(tree)
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".ckpt-", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
    barrier()


def load_checkpoint(path: str, like: Any) -> Any:
    """Read a checkpoint written by `save_checkpoint` on every process, as a pytree with the
    structure of `like` (its leaves give the expected shapes and dtypes)."""
    leaves, treedef = tree_util.tree_flatten(like)
    with np.load(path) as data:
        names = sorted(data.files)
        if len(names) != len(leaves):
            raise ValueError(f"load_checkpoint: {path} holds {len(names)} arrays but the "
                             f"structure given has {len(leaves)} leaves")
        out = []
        for name, leaf in zip(names, leaves):
            arr, want = data[name], tuple(leaf.shape)
            if arr.shape != want:
                raise ValueError(f"load_checkpoint: {name.split(':', 1)[1] or 'the leaf'} has "
                                 f"shape {arr.shape} in {path}, but {want} is expected")
            out.append(Tensor(arr.astype(_to_numpy(leaf).dtype)))
    return tree_util.tree_unflatten(treedef, out)
