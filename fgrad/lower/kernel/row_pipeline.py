"""Row pipelining: a row kernel computes the next row's first phase inside this row's second.

A row kernel (softmax, layernorm, log_softmax, ...) runs phases over each row: the first a
reduction that reads the row from memory (the max, the sum), the later ones reading it
again from cache and doing the arithmetic (exp, the variance). Phase by phase, the memory
read never overlaps arithmetic: on a 4096x4096 softmax the max phase alone cost ~2.3 of
11.5 ms. Pipelined, the rows' loop runs the first row's first phase before it, and in each
row the next row's first phase rides in this row's second-phase loop (same extent), into
accumulators that become the next row's at the end of the row: the memory stream then
overlaps the exp. Measured on the softmax kernel (two threads, 4096 rows, in-process,
alternating the two builds): 0.85-0.92x the time (docs/performance.md).

In: a kernel. Out: `row_pipeline(kernel)`, the parts the llvm renderer needs, or None when
the kernel is not of that shape or too small for memory to matter (`MIN_INPUT_BYTES`).
The first phase qualifies when it only accumulates values of buffers the kernel never
writes (so reading the next row early sees the same data) and nothing later in the row
touches its accumulators but reads. The last row of a range "pipelines" itself (its
next row is clamped to it): no access outside the rows the kernel already reads.
"""
from __future__ import annotations

from dataclasses import dataclass

from fgrad.lower.kernel.ir import (AccInit, AccRead, AccUpdate, Kernel, Load, Loop, Stmt,
                                   accumulators_written, expr_nodes)

MIN_INPUT_BYTES = 1 << 20   # first-phase reads of at least this much in all (from memory)
MIN_ROW = 256               # elements per row at least: shorter rows stay in cache


@dataclass(frozen=True)
class RowPipeline:
    """A pipelinable row kernel's outer loop cut in its parts: the first phase (`inits`,
    then `first`), and the rest of the row body, whose loop `carrier` also runs the next
    row's first phase."""

    outer: Loop
    inits: tuple[AccInit, ...]
    first: Loop
    rest: tuple[Stmt, ...]
    carrier: Loop


def _innermost(s: Stmt) -> bool:
    return isinstance(s, Loop) and not any(isinstance(t, Loop) for t in s.body)


def row_pipeline(kernel: Kernel) -> RowPipeline | None:
    """The kernel's parts for pipelining its rows (module docstring), or None."""
    if len(kernel.body) != 1 or not isinstance(kernel.body[0], Loop):
        return None
    outer = kernel.body[0]
    n_inits = next((n for n, s in enumerate(outer.body) if not isinstance(s, AccInit)), 0)
    if n_inits == 0 or n_inits + 1 >= len(outer.body):
        return None
    inits = tuple(s for s in outer.body[:n_inits] if isinstance(s, AccInit))
    first, rest = outer.body[n_inits], outer.body[n_inits + 1:]
    accs = {s.acc for s in inits}
    if not isinstance(first, Loop) or not _innermost(first) or first.sym.extent < MIN_ROW \
            or not all(isinstance(s, AccUpdate) and s.acc in accs for s in first.body):
        return None
    nodes = expr_nodes(first.body, in_indices=True)
    loads = [e for e in nodes if isinstance(e, Load)]
    if any(isinstance(e, AccRead) for e in nodes) or not loads \
            or any(kernel.params[e.buf].written for e in loads) or accumulators_written(rest) & accs:
        return None
    if outer.sym.extent * first.sym.extent * max(e.dtype.itemsize for e in loads) \
            < MIN_INPUT_BYTES:
        return None
    carrier = next((s for s in rest if _innermost(s) and isinstance(s, Loop)
                    and s.sym.extent == first.sym.extent), None)
    if carrier is None:
        return None
    return RowPipeline(outer, inits, first, tuple(rest), carrier)
