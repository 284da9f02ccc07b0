"""OpenCL C for row-fused kernels (kernel_build_rows.py, registers form): one work-group
per row.

In: a `Kernel` whose body is a nest of kept loops around a row body of per-row stores,
accumulator inits and phase loops (each the same perfect nest over the row, holding stores
and accumulator updates; rows of length 1 have the updates in place of the loops), and an
`opencl_render._Writer` for it. Out: the kernel's lines
in the writer and its `Launch`; `as_rows` says whether a kernel has that shape.

The lanes of a work-group split each phase loop (lane k takes elements k, k + lanes, ...),
so neighbouring lanes read neighbouring elements; after a phase loop the lanes combine
each accumulator by a tree in __local memory and all read the result, which later phases
and per-row values use. Every lane computes the per-row values; lane 0 stores them. A lane
reads back only elements it stored itself, so phases need no barrier but the trees'.
"""
from __future__ import annotations

from dataclasses import dataclass

from fgrad.core.dtypes import dtypes
from fgrad.lower.indexing import Sym
from fgrad.lower.kernel_ir import AccInit, AccUpdate, Kernel, Loop, Stmt, Store
from fgrad.lower.opencl_ops import reg_type
from fgrad.lower.opencl_render import (
    Launch,
    _declare_accs,
    _extent,
    _perfect_nest,
    _pow2ceil,
    _Reduce,
    _tree,
    _Writer,
)


@dataclass(frozen=True)
class Rows:
    """A row-fused kernel's structure: kept loops, the row loops, and the row body."""

    kept: list[Sym]
    row: list[Sym]
    body: tuple[Stmt, ...]
    inits: tuple[AccInit, ...]


def as_rows(kernel: Kernel) -> Rows | None:
    """The row structure of `kernel`, or None if it has another shape."""
    kept, body = _perfect_nest(kernel.body)
    rows = [_perfect_nest((s,)) for s in body if isinstance(s, Loop)]
    inits = tuple(s for s in body if isinstance(s, AccInit))
    flat = (Store, AccInit) if rows else (Store, AccInit, AccUpdate)  # rows of length 1
    if not inits or any(not isinstance(s, (Loop,) + flat) for s in body):
        return None
    if any(syms != rows[0][0] or not all(isinstance(t, (Store, AccUpdate)) for t in inner)
           for syms, inner in rows):
        return None
    return Rows(kept, rows[0][0] if rows else [], body, inits)


def render_rows(w: _Writer, rows: Rows, group: int) -> Launch:
    """Emit `rows` as one work-group of up to `group` lanes per row; its launch."""
    total = _extent(rows.row)
    lanes = min(_pow2ceil(total), group)
    if lanes > 1:
        for s in rows.inits:
            local_ty = "uchar" if s.dtype == dtypes.bool else reg_type(s.dtype)
            w.line(f"__local {local_ty} l{s.acc}[{lanes}];")
    w.line("const int lid = get_local_id(0);")
    w.line("const int lane = lid;")
    w.line(f"const {w.ity} kk = ({w.ity})get_group_id(0);")
    w.bind_flat("kk", rows.kept)
    _declare_accs(w, list({s.acc: s for s in rows.inits}.values()))
    for s in rows.body:
        if isinstance(s, Loop):
            _phase(w, s, rows, lanes)
        elif isinstance(s, Store):
            w.value(s.value)  # every lane computes per-row values once; lane 0 stores
            with w.block("if (lane == 0)"):
                w.stmt(s)
        else:
            w.stmt(s)
    return Launch((_extent(rows.kept) * lanes,), (lanes,))


def _phase(w: _Writer, loop: Loop, rows: Rows, lanes: int) -> None:
    """One phase loop split over the lanes, then a tree per accumulator it updates."""
    _, inner = _perfect_nest((loop,))
    with w.block(f"for ({w.ity} rr = lane; rr < {_extent(rows.row)}; rr += {lanes})"):
        w.bind_flat("rr", rows.row)
        for s in inner:
            w.stmt(s)
    updated = {s.acc for s in inner if isinstance(s, AccUpdate)}
    inits = tuple({s.acc: s for s in rows.inits if s.acc in updated}.values())
    if lanes > 1 and inits:
        _tree(w, _Reduce([], inits, [], (), ()), lanes, 1)
        for s in inits:
            w.line(f"acc{s.acc} = l{s.acc}[0];")
