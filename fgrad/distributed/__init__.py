"""fgrad.distributed: data-parallel training over processes and machines, with MPI.

Start a job with `mpiexec -n 2 python train.py` (the optional extra
`pip install 'fgrad[distributed]'` brings mpi4py and MPICH); a script started alone is a
job of one process. The collectives take pytrees of Tensors and work eagerly and inside
`jit`, `grad`, `vmap` and `lax.scan` bodies:

    params = distributed.broadcast(params)              # identical start on every process
    x, y = distributed.shard_batch((x, y))               # this process's part of the batch
    grads = distributed.pmean(fgrad.grad(loss)(params, x, y))   # averaged gradients

An unhandled exception on any process ends the whole job (see `initialize`).
"""
from __future__ import annotations

from typing import Any

from fgrad.core import tree_util
from fgrad.core.primitive import Primitive
from fgrad.core.tensor import as_tensor
from fgrad.distributed.collectives import (COLLECTIVES, all_gather_p, broadcast_p, pmax_p,
                                           pmean_p, pmin_p, psum_p)
from fgrad.distributed.data import load_checkpoint, save_checkpoint, shard_batch
from fgrad.distributed.runtime import (barrier, communicator, initialize, process_count,
                                       process_index)


def _apply(prim: Primitive, tree: Any, **params: Any) -> Any:
    """Bind `prim` once over all leaves of `tree` (one MPI call) and rebuild the tree."""
    leaves, treedef = tree_util.tree_flatten(tree)
    if not leaves:
        return tree
    outs = prim.bind(*[as_tensor(leaf) for leaf in leaves], **params)
    return tree_util.tree_unflatten(treedef, outs)


def psum(tree: Any) -> Any:
    """The elementwise sum of each leaf over all processes (the same on every process)."""
    return _apply(psum_p, tree)


def pmean(tree: Any) -> Any:
    """The elementwise mean of each (floating-point) leaf over all processes."""
    return _apply(pmean_p, tree)


def pmax(tree: Any) -> Any:
    """The elementwise maximum of each leaf over all processes."""
    return _apply(pmax_p, tree)


def pmin(tree: Any) -> Any:
    """The elementwise minimum of each leaf over all processes."""
    return _apply(pmin_p, tree)


def all_gather(tree: Any, tiled: bool = False) -> Any:
    """Each leaf from every process, stacked along a new leading axis of size
    process_count() in process order; `tiled=True` concatenates along axis 0 instead."""
    return _apply(all_gather_p, tree, tiled=bool(tiled), axis_size=process_count())


def broadcast(tree: Any, root: int = 0) -> Any:
    """Process `root`'s value of each leaf, on every process (e.g. initial parameters)."""
    return _apply(broadcast_p, tree, root=int(root), axis_size=process_count())


__all__ = ["COLLECTIVES", "all_gather", "barrier", "broadcast", "communicator", "initialize",
           "load_checkpoint", "pmax", "pmean", "pmin", "process_count", "process_index",
           "psum", "save_checkpoint", "shard_batch"]
