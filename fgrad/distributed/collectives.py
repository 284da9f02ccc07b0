"""Collectives over all processes of the job, as primitives with all their rules.

Each primitive takes any number of operands (the leaves of one pytree) and returns one result
per operand, so a whole gradient pytree is one equation and one MPI call (transport.py).

    psum, pmean, pmax, pmin   elementwise reduction over processes (same shape and dtype)
    all_gather                every process's operand, stacked on a new leading axis of
                              size process_count (tiled=True: concatenated along axis 0)
    process_broadcast         process `root`'s operand on every process

Rules: psum, pmean, all_gather and process_broadcast are linear (their JVP applies them to
the tangents; psum's transpose is psum, pmean's is pmean, all_gather's is this process's
block of the psum, process_broadcast's is the psum on the root and zero elsewhere). pmax/pmin
differentiate like reduce_max: the tangent of the processes holding the extreme, averaged
over ties. Under vmap, batched values reduce elementwise across processes. In `jit` the
native backends run them as host steps (see docs/distributed.md for why, and the cost).
All processes must call the same collectives in the same order: every rule keeps that,
since all processes trace the same program.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.ir import ShapedArray
from fgrad.core.primitive import Primitive
from fgrad.core.prims import convert, select, zeros
from fgrad.core.prims._util import check_kinds, is_undefined, move_bdim
from fgrad.core.prims.movement import reshape, slice_
from fgrad.distributed import transport
from fgrad.distributed.runtime import process_count, process_index

psum_p = Primitive("psum", multiple_results=True, linear=True)
pmean_p = Primitive("pmean", multiple_results=True, linear=True)
pmax_p = Primitive("pmax", multiple_results=True)
pmin_p = Primitive("pmin", multiple_results=True)
all_gather_p = Primitive("all_gather", multiple_results=True, linear=True)
broadcast_p = Primitive("process_broadcast", multiple_results=True, linear=True)
COLLECTIVES = (psum_p, pmean_p, pmax_p, pmin_p, all_gather_p, broadcast_p)


# ---------------------------------------------------------------------------- abstract eval

def _same_avals(op: str, kinds: str) -> Callable[..., list[ShapedArray]]:
    """Results shaped like the operands, whose dtype kinds must be among `kinds`."""
    def abstract_eval(*avals: ShapedArray) -> list[ShapedArray]:
        for aval in avals:
            check_kinds(op, aval, kinds)
        return list(avals)
    return abstract_eval


def _gather_abstract(*avals: ShapedArray, tiled: bool, axis_size: int) -> list[ShapedArray]:
    out = []
    for aval in avals:
        if tiled and aval.ndim == 0:
            raise ValueError("all_gather(tiled=True) concatenates along axis 0, so every leaf "
                             f"needs at least one axis; got a scalar {aval.dtype.name}. Use "
                             "tiled=False to stack scalars, or reshape the leaf to (1,)")
        shape = ((axis_size * aval.shape[0],) + aval.shape[1:] if tiled
                 else (axis_size,) + aval.shape)
        out.append(ShapedArray(shape, aval.dtype))
    return out


def _broadcast_abstract(*avals: ShapedArray, root: int, axis_size: int) -> list[ShapedArray]:
    if not 0 <= root < axis_size:
        raise ValueError(f"broadcast: root={root} is not a process of this job "
                         f"(process_count() = {axis_size}); pick root in 0..{axis_size - 1}")
    return list(avals)


psum_p.abstract_eval = _same_avals("psum", "iuf")
pmean_p.abstract_eval = _same_avals("pmean", "f")
pmax_p.abstract_eval = _same_avals("pmax", "iuf")
pmin_p.abstract_eval = _same_avals("pmin", "iuf")
all_gather_p.abstract_eval = _gather_abstract
broadcast_p.abstract_eval = _broadcast_abstract


# ---------------------------------------------------------------------------- eager impl

def _gather_impl(*xs: np.ndarray, tiled: bool, axis_size: int) -> list[np.ndarray]:
    _check_size("all_gather", axis_size)
    stacked = transport.allgather(xs)
    if tiled:
        return [s.reshape((-1,) + s.shape[2:]) for s in stacked]
    return stacked


def _broadcast_impl(*xs: np.ndarray, root: int, axis_size: int) -> list[np.ndarray]:
    _check_size("broadcast", axis_size)
    return transport.bcast(xs, root)


def _check_size(op: str, axis_size: int) -> None:
    if axis_size != process_count():
        raise RuntimeError(f"{op} was traced for {axis_size} processes but runs in a job of "
                           f"{process_count()}; trace it again in this job")


psum_p.impl = lambda *xs: transport.allreduce(xs, "sum")
pmean_p.impl = lambda *xs: transport.allreduce(xs, "sum", mean=True)
pmax_p.impl = lambda *xs: transport.allreduce(xs, "max")
pmin_p.impl = lambda *xs: transport.allreduce(xs, "min")
all_gather_p.impl = _gather_impl
broadcast_p.impl = _broadcast_impl


# ---------------------------------------------------------------------------- jvp

def _linear_jvp(prim: Primitive) -> Callable[..., Any]:
    """A linear collective applied to the primals and, once, to the non-zero tangents."""
    def jvp(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[list, list]:
        outs = prim.bind(*primals, **params)
        live = [i for i, t in enumerate(tangents) if t is not None]
        out_dots: list[Any] = [None] * len(primals)
        if live:
            for i, t in zip(live, prim.bind(*[tangents[i] for i in live], **params)):
                out_dots[i] = t
        return outs, out_dots
    return jvp


def _extreme_jvp(prim: Primitive) -> Callable[..., Any]:
    """pmax/pmin: the tangent of the processes whose value is the extreme (tie-averaged)."""
    def jvp(primals: list[Any], tangents: list[Any]) -> tuple[list, list]:
        outs = prim.bind(*primals)
        live = [i for i, (x, t) in enumerate(zip(primals, tangents))
                if t is not None and x.dtype.is_float]
        out_dots: list[Any] = [None] * len(primals)
        if not live:
            return outs, out_dots
        hits = [convert(primals[i] == outs[i], primals[i].dtype) for i in live]
        picked = [select(primals[i] == outs[i], tangents[i], zeros(primals[i].shape,
                                                                   primals[i].dtype))
                  for i in live]
        counts = psum_p.bind(*hits)  # apart from the tangents: it is not linear in them
        for i, num, count in zip(live, psum_p.bind(*picked), counts):
            out_dots[i] = num / count
        return outs, out_dots
    return jvp


for _prim in (psum_p, pmean_p, all_gather_p, broadcast_p):
    _prim.jvp = _linear_jvp(_prim)
pmax_p.jvp = _extreme_jvp(pmax_p)
pmin_p.jvp = _extreme_jvp(pmin_p)


# ---------------------------------------------------------------------------- transpose

def _transpose_with(prim: Primitive, finish: Callable[..., Any] | None = None
                    ) -> Callable[..., Any]:
    """Transpose rule: `prim` over the cotangents of the linear operands, then `finish`
    (if any) maps each reduced cotangent to its operand's cotangent."""
    def transpose(cts: Sequence[Any], *args: Any, **params: Any) -> list[Any]:
        live = [i for i, a in enumerate(args) if is_undefined(a)]
        in_cts: list[Any] = [None] * len(args)
        if not live:
            return in_cts
        reduced = prim.bind(*[cts[i] for i in live])
        for i, ct in zip(live, reduced):
            in_cts[i] = finish(ct, args[i].aval, **params) if finish else ct
        return in_cts
    return transpose


def _own_block(ct: Any, aval: ShapedArray, *, tiled: bool, axis_size: int) -> Any:
    """This process's block of a gathered cotangent (the operand it contributed)."""
    rank = process_index()
    if tiled:
        n = aval.shape[0]
        return slice_(ct, (rank * n,) + (0,) * (aval.ndim - 1), (rank * n + n,) + aval.shape[1:])
    block = slice_(ct, (rank,) + (0,) * aval.ndim, (rank + 1,) + aval.shape)
    return reshape(block, aval.shape)


def _root_only(ct: Any, aval: ShapedArray, *, root: int, axis_size: int) -> Any:
    """The summed cotangent on the root, zero elsewhere. Off the root the zero is still
    computed from `ct`, so that `jit` keeps the psum there too (dead code elimination of a
    collective on some processes only would leave the others waiting)."""
    if process_index() == root:
        return ct
    return select(zeros(aval.shape, dtypes.bool), ct, zeros(aval.shape, aval.dtype))


psum_p.transpose = _transpose_with(psum_p)
pmean_p.transpose = _transpose_with(pmean_p)
all_gather_p.transpose = _transpose_with(psum_p, _own_block)
broadcast_p.transpose = _transpose_with(psum_p, _root_only)


# ---------------------------------------------------------------------------- batching

def _elementwise_batch(prim: Primitive) -> Callable[..., Any]:
    """Batched values reduce (or broadcast) elementwise: batch axes stay where they are."""
    def batch(args: list[Any], dims: list[int | None], **params: Any) -> tuple[list, list]:
        return prim.bind(*args, **params), list(dims)
    return batch


def _gather_batch(args: list[Any], dims: list[int | None], *, tiled: bool,
                  axis_size: int) -> tuple[list, list]:
    """Untiled: the new leading process axis shifts the batch axis by one. Tiled: the batch
    axis moves last, so axis 0 is the operand's own first axis."""
    if tiled:
        args = [x if d is None else move_bdim(x, d, x.ndim - 1, x.shape[d])
                for x, d in zip(args, dims)]
        out_dims = [None if d is None else x.ndim - 1 for x, d in zip(args, dims)]
    else:
        out_dims = [None if d is None else d + 1 for d in dims]
    return all_gather_p.bind(*args, tiled=tiled, axis_size=axis_size), out_dims


for _prim in (psum_p, pmean_p, pmax_p, pmin_p, broadcast_p):
    _prim.batch = _elementwise_batch(_prim)
all_gather_p.batch = _gather_batch

