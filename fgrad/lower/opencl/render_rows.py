"""OpenCL C for row-fused kernels (kernel/build_rows.py, registers form): one work-group
per row; and for scatter kernels (kernel/build_scatter.py): one work-item per column.

In: a `Kernel` whose body is a nest of kept loops around a row body of per-row stores,
accumulator inits and phase loops (each the same perfect nest over the row, holding stores
and accumulator updates; rows of length 1 have the updates in place of the loops), and an
`opencl/render.py`'s `_Writer` for it. Out: the kernel's lines
in the writer and its `Launch`; `as_rows` says whether a kernel has that shape.

The lanes of a work-group split each phase loop (lane k takes elements k, k + lanes, ...),
so neighbouring lanes read neighbouring elements; after a phase loop the lanes combine
each accumulator by a tree in __local memory and all read the result, which later phases
and per-row values use. Every lane computes the per-row values; lane 0 stores them. A lane
reads back only elements it stored itself, so phases need no barrier but the trees'.

A scatter kernel (a copy nest, then an update nest storing through a run-time row index)
runs one work-item per position j of a row (`as_columns` recognizes it): work-item j
copies column j of the operand, then walks the update rows in order for column j only.
Work-items touch disjoint elements, and each column sees its updates in NumPy's order.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from fgrad.core.dtypes import dtypes
from fgrad.lower.kernel.index import Dyn, Ix, Sym, dyn_atoms, used_syms
from fgrad.lower.kernel.ir import AccInit, AccUpdate, Kernel, Loop, Stmt, Store
from fgrad.lower.opencl.ops import reg_type
from fgrad.lower.opencl.render import (
    Launch,
    _declare_accs,
    _eval_ix,
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
    for stmt in rows.body:
        if isinstance(stmt, Loop):
            _phase(w, stmt, rows, lanes)
        elif isinstance(stmt, Store):
            w.value(stmt.value)  # every lane computes per-row values once; lane 0 stores
            with w.block("if (lane == 0)"):
                w.stmt(stmt)
        else:
            w.stmt(stmt)
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


# ---------------------------------------------------------------------------- scatter


@dataclass(frozen=True)
class Columns:
    """A scatter kernel's structure: the copy nest's loops and store, and the update
    nest's loops split into the update rows (`seq`, run in order) and one row's positions
    (`row`, one work-item each), and its store."""

    copy: list[Sym]
    copy_store: Store
    seq: list[Sym]
    row: list[Sym]
    update_store: Store


def _row_major(index: Ix, syms: list[Sym]) -> bool:
    """Whether `index` is the row-major flat position of the nest `syms` (no other terms)."""
    strides, stride = {}, 1
    for sym in reversed(syms):
        strides[sym] = stride
        stride *= sym.extent
    base = _eval_ix(index, {})
    return base == 0 and not dyn_atoms(index) and used_syms(index) <= set(syms) and all(
        _eval_ix(index, {sym: 1}) - base == st for sym, st in strides.items())


def _update_split(store: Store, loops: list[Sym], width: int) -> int | None:
    """Where the update nest's row loops start, when `store` writes
    width * dyn(...) + (row-major position in the row loops) and the run-time index
    depends on none of the row loops; else None."""
    dyn = [(a, c) for a, c in store.index.terms if isinstance(a, Dyn)]
    if len(dyn) != 1 or dyn[0][1] != width:
        return None
    rest = Ix(tuple(t for t in store.index.terms if t not in dyn), store.index.const)
    for split in range(len(loops), -1, -1):
        row = loops[split:]
        if _extent(row) == width and not dyn[0][0].syms & set(row) \
                and _row_major(rest, row):
            return split
    return None


def as_columns(kernel: Kernel) -> Columns | None:
    """The column structure of a scatter kernel, or None if `kernel` has another shape."""
    if len(kernel.body) != 2 or not kernel.params:
        return None
    (copy, copy_body), (update, update_body) = (_perfect_nest((s,)) for s in kernel.body)
    stores = copy_body + update_body
    if len(stores) != 2 or not all(isinstance(s, Store) and s.buf == 0 for s in stores):
        return None
    copy_store, update_store = stores
    assert isinstance(copy_store, Store) and isinstance(update_store, Store)
    width = math.prod(kernel.params[0].shape[1:])
    split = _update_split(update_store, update, width)
    if split is None or not _row_major(copy_store.index, copy):
        return None
    return Columns(copy, copy_store, update[:split], update[split:], update_store)


def render_columns(w: _Writer, cols: Columns, group: int) -> Launch:
    """Emit a scatter kernel as one work-item per position of a row; its launch. Rows
    narrower than a work-group run in one work-group, which copies the operand together
    and waits at a barrier before the row positions apply their updates (a one-element row
    otherwise left the whole copy to one work-item: 0.2-0.4 ms of a GPU training step)."""
    width = _extent(cols.row)
    total = _extent(cols.copy)
    narrow = width < group
    w.line(f"const {w.ity} jj = {'get_local_id(0)' if narrow else 'get_global_id(0)'};")
    guard = f"if (jj >= {width}) return;"
    if not narrow:
        w.line(guard)
    with w.block(f"for ({w.ity} ff = jj; ff < {total}; ff += {group if narrow else width})"):
        w.bind_flat("ff", cols.copy)
        w.stmt(cols.copy_store)
    if narrow:
        w.line("barrier(CLK_GLOBAL_MEM_FENCE);")
        w.line(guard)
    w.bind_flat("jj", cols.row)
    with w.block(f"for ({w.ity} qq = 0; qq < {_extent(cols.seq)}; ++qq)"):
        w.bind_flat("qq", cols.seq)
        w.stmt(cols.update_store)
    if narrow:
        return Launch((group,), (group,))
    return Launch((-(-width // group) * group,), (group,))
