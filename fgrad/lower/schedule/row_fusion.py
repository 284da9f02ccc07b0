"""Row fusion: which consecutive steps a reduction kernel can take in, and in which phase.

In: a reduction `KernelStep` (its domain, reduced axes, outputs), the next equation the
schedule realizes, and the graph's producers. Out: `row_phase`: the phase of the row-fused
kernel that would compute the equation's result, or None when it must stay a kernel of its
own; `row_map`: how a row-fused kernel indexes a value of a given shape.

A row-fused kernel loops over the kept axes (one "row" per point) and, per row, runs its
phases in order: phase p loops over the row once, accumulating the reductions that need
only earlier phases and storing pointwise outputs; per-row values (shaped like the kept
axes) are computed before the phase loop that first needs them. An equation may join when
every per-row value of the kernel it reads (through elementwise ops, broadcasts, reshapes
that add or drop 1s, and transposes) is read at the current row, when a row stays in
cache between phases (`ROW_BYTES`), and, if it needs an earlier phase, when it reads a
buffer the kernel reads already, or none (re-reading from cache is the gain).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence

from fgrad.core.dtypes import NARROW_FLOATS
from fgrad.core.ir import Eqn, Var

if TYPE_CHECKING:
    from fgrad.lower.schedule.partition import KernelStep

ROW_BYTES = 256 * 1024  # the largest row a row-fused kernel reads more than once
OPAQUE_MOVES = frozenset({"slice", "rev", "pad", "concatenate", "iota"})

AxisMap = tuple[int, ...]  # per axis of a value: the domain axis it follows, or -1 (index 0)


class Graph(Protocol):
    """What row fusion needs to know about a jaxpr (schedule/partition.py's `_Graph`)."""

    producers: dict[int, Eqn]

    def is_reduce(self, eqn: Eqn) -> bool:
        """Whether `eqn` is a native reduction."""


def row_map(shape: tuple[int, ...], axes: tuple[int, ...], out: tuple[int, ...]
            ) -> AxisMap | None:
    """How a row-fused kernel over `shape` reducing `axes` computes a value of shape `out`:
    at every point (the identity map), or once per row (the kept axes, with or without
    the reduced ones as 1s); None if neither."""
    kept = tuple(a for a in range(len(shape)) if a not in axes)
    if out == shape:
        return tuple(range(len(shape)))
    if out == tuple(1 if a in axes else shape[a] for a in range(len(shape))):
        return tuple(-1 if a in axes else a for a in range(len(shape)))
    if out == tuple(shape[a] for a in kept):
        return kept
    return None


def _unit_reshape_map(src: tuple[int, ...], dst: tuple[int, ...], m: AxisMap
                      ) -> AxisMap | None:
    """The operand map of a reshape that only adds or drops 1s (else None)."""
    src_axes = [a for a, n in enumerate(src) if n != 1]
    dst_axes = [a for a, n in enumerate(dst) if n != 1]
    if [src[a] for a in src_axes] != [dst[a] for a in dst_axes]:
        return None
    out = [-1] * len(src)
    for a, b in zip(src_axes, dst_axes, strict=True):
        out[a] = m[b]
    return tuple(out)


def _operand_map(eqn: Eqn, x: Var, m: AxisMap | None) -> AxisMap | None:
    name, shape, out_shape = eqn.primitive.name, x.aval.shape, eqn.outvars[0].aval.shape
    if m is None or name in OPAQUE_MOVES:
        return None
    if name == "broadcast_in_dim":
        dims = eqn.params["broadcast_dimensions"]
        return tuple(-1 if n == 1 else m[d] for n, d in zip(shape, dims, strict=True))
    if name == "reshape":
        return _unit_reshape_map(shape, out_shape, m)
    if name == "transpose":
        perm = eqn.params["permutation"]
        return tuple(m[perm.index(a)] for a in range(len(perm)))
    return m if shape == out_shape else None  # elementwise


def operand_maps(eqn: Eqn, m: AxisMap | None) -> list[tuple[Var, AxisMap | None]]:
    """Each Var operand of an elementwise or movement `eqn` with the axis map it is read
    at, given the map of the result (None: unknown)."""
    return [(x, _operand_map(eqn, x, m)) for x in eqn.inputs if isinstance(x, Var)]


def row_values(step: KernelStep) -> tuple[dict[int, AxisMap], set[int]]:
    """The per-row values of a row kernel (reductions and kept-shape outputs) with their
    axis maps, and the ids of its pointwise outputs (recomputed where read)."""
    per_row: dict[int, AxisMap] = {}
    pointwise: set[int] = set()
    kept = tuple(a for a in range(len(step.shape)) if a not in step.axes)
    for v, r in zip(step.outputs, step.reduced, strict=True):
        m = kept if r else row_map(step.shape, step.axes, v.aval.shape)
        if m == tuple(range(len(step.shape))) and not r:
            pointwise.add(id(v))
        elif m is not None:
            per_row[id(v)] = m
    return per_row, pointwise


def _row_reads(g: Graph, start: Sequence[tuple[Var, AxisMap | None]], step: KernelStep,
               realized: set[int], check: bool = True) -> tuple[set[int], set[int]] | None:
    """The ids of the per-row values of `step` and of the buffers that values at `start`
    (with their axis maps) read; None if `check` and a per-row value is read anywhere but
    at the current row."""
    per_row, pointwise = row_values(step)
    stack = list(start)
    deps: set[int] = set()
    buffers: set[int] = set()
    seen: set[tuple[int, AxisMap | None]] = set()
    while stack:
        v, vm = stack.pop()
        if (id(v), vm) in seen:
            continue
        seen.add((id(v), vm))
        if id(v) in per_row:
            want = per_row[id(v)]
            if check and (vm is None or any(n != 1 and a != b for n, a, b in
                                            zip(v.aval.shape, vm, want, strict=True))):
                return None
            deps.add(id(v))
        elif id(v) not in realized or id(v) in pointwise:
            stack.extend(operand_maps(g.producers[id(v)], vm))
        else:
            buffers.add(id(v))
    return deps, buffers


def _step_buffers(g: Graph, step: KernelStep, realized: set[int]) -> set[int]:
    """The ids of the buffers `step` reads."""
    start = [(x, None) for v in step.outputs for x in g.producers[id(v)].inputs
             if isinstance(x, Var)]
    found = _row_reads(g, start, step, realized, check=False)
    assert found is not None
    return found[1]


def registers_hold_rows(shape: tuple[int, ...], axes: tuple[int, ...]) -> bool:
    """Whether every kept axis (of extent > 1) comes before every reduced one: then a row
    is contiguous and the accumulators live in registers."""
    big = [a for a, n in enumerate(shape) if n != 1]
    reduced = [a for a in big if a in axes]
    return not reduced or all(a in axes for a in big[big.index(reduced[0]):])


def _row_form_ok(step: KernelStep, var: Var, red: bool) -> bool:
    """Whether rows fit in cache and the loops can run over them: in registers, or with
    the accumulators in their output buffers when no reduction is float16/bfloat16 (they
    would round at every step there)."""
    reduced = [a for a, n in enumerate(step.shape) if n != 1 and a in step.axes]
    if not reduced:
        return True
    elems = 1
    for n in step.shape[reduced[0]:]:
        elems *= n
    itemsize = max(4, var.aval.dtype.itemsize, step.outputs[0].aval.dtype.itemsize)
    if elems * itemsize > ROW_BYTES:
        return False
    if registers_hold_rows(step.shape, step.axes):
        return True
    reductions = [v for v, r in zip(step.outputs, step.reduced, strict=True) if r]
    return all(v.aval.dtype not in NARROW_FLOATS for v in reductions + [var] * red)


def row_phase(g: Graph, step: KernelStep, eqn: Eqn, var: Var, realized: set[int]
              ) -> int | None:
    """The phase in which row-fused `step` would compute `var` (the result of `eqn`), or
    None if it cannot."""
    if not step.is_reduce:
        return None
    red = g.is_reduce(eqn)
    start: list[tuple[Var, AxisMap | None]]
    if red:
        x = eqn.inputs[0]
        if not isinstance(x, Var) or (x.aval.shape, eqn.params["axes"]) != (step.shape,
                                                                             step.axes):
            return None
        start = [(x, tuple(range(len(step.shape))))]
    else:
        m = row_map(step.shape, step.axes, var.aval.shape)
        if m is None:
            return None
        start = operand_maps(eqn, m)
    found = _row_reads(g, start, step, realized)
    if found is None or not _row_form_ok(step, var, red):
        return None
    deps, buffers = found
    if deps and buffers and not buffers & _step_buffers(g, step, realized):
        return None  # it reads nothing the kernel has in cache: fusing gains nothing
    phases = step.phases or (0,) * len(step.outputs)
    return max((p + r for v, r, p in zip(step.outputs, step.reduced, phases, strict=True)
                if id(v) in deps), default=0)
