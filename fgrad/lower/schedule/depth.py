"""Cuts that bound how deep one kernel's fused expression grows.

Fusion inlines every unrealized producer into the kernel that consumes it, so a long chain
of elementwise equations (`t = t * x / (x + n)` unrolled a few hundred times) becomes one
expression hundreds of levels deep. The passes that build, analyze and render a kernel walk
expressions recursively, and at ~300 levels Python's recursion limit ended the compile with
a RecursionError. `depth_cuts` realizes the inputs of any equation whose unrealized
producers reach `MAX_FUSED_DEPTH` levels, so each kernel's expression stays at most that
deep; a chain that long is split into kernels of `MAX_FUSED_DEPTH` levels, which costs one
buffer write and read per split and nothing for ordinary programs (their chains are far
shorter).
"""
from __future__ import annotations

from typing import Iterable

from fgrad.core.ir import Eqn, Var

MAX_FUSED_DEPTH = 96


def depth_cuts(eqns: Iterable[Eqn], realized: set[int]) -> set[int]:
    """The ids of values to realize besides `realized` so that no kernel fuses a chain of
    more than `MAX_FUSED_DEPTH` equations (`realized` values start a chain at depth 0)."""
    depth: dict[int, int] = {}
    cuts: set[int] = set()
    for e in eqns:
        open_inputs = [a for a in e.inputs
                       if isinstance(a, Var) and id(a) not in realized and id(a) not in cuts]
        level = 1 + max((depth.get(id(a), 0) for a in open_inputs), default=0)
        if level > MAX_FUSED_DEPTH:
            cuts.update(id(a) for a in open_inputs)
            level = 1
        for v in e.outvars:
            depth[id(v)] = 0 if id(v) in realized else level
    return cuts
