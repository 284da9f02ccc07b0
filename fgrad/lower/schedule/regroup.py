"""Schedule: merge elementwise kernels over the same domain that program order keeps apart.

In: the steps `partition.build_steps` made (consecutive compatible kernels already merged).
Out: the same steps, where an elementwise kernel step has been merged into an earlier
elementwise kernel step of the same shape whenever the merged kernel can run at one of the
two positions:
- at the earlier one (tried first): every buffer the later kernel reads exists by then;
- at the later one: no step in between reads the earlier kernel's outputs, and the earlier
  kernel is not a gemm's possible epilogue (it stays right after its gemm).

An optimizer's update is the case this is for: Adam's `tree_map`s compute the first moments
of every parameter, then the second moments, then the new parameters, so each parameter got
three kernels that each stream its gradient or moments from memory. Merged, each parameter
is one kernel that reads p, g, m, v once and writes p, m, v (and the biases of equal shape
share one kernel). Reductions, row-fused kernels and scatters are left where they are.

Then `adjoin_epilogues` brings an elementwise kernel that reads a gemm's product next to
that gemm, where the llvm backend can run it inside the gemm's call (gemm/native.py
`epilogue_fits`): Adam's update of a weight reads its gradient, the product of the gemm
`d.T @ x`, but also the step count's bias corrections, a scalar kernel that program order
puts after that gemm. Moved ahead of the gemm (it reads nothing the gemm or the steps after
it write), it lets the update run on each block of the gradient's rows while they are still
in L2, instead of streaming the gradient back from memory in a kernel of its own.
"""
from __future__ import annotations

import dataclasses

from fgrad.core.ir import Var
from fgrad.lower.schedule.partition import (MAX_KERNEL_BUFFERS, GemmStep, HostStep, KernelStep,
                                            Step, _Graph, _is_scatter, kernel_buffers,
                                            leaves)

WINDOW = 64  # how many steps back a kernel looks for a partner


def _plain(g: _Graph, step: Step) -> KernelStep | None:
    """`step` if it is an elementwise kernel step (no reduction, row phases or scatter)."""
    if not isinstance(step, KernelStep) or step.is_reduce or step.is_rows:
        return None
    return None if _is_scatter(g.producers.get(id(step.outputs[0]))) else step


class _Reads:
    """Ids of the buffers a step reads, computed once per step."""

    def __init__(self, g: _Graph, realized: set[int]):
        self.g, self.realized = g, realized
        self.known: dict[int, tuple[Step, set[int]]] = {}

    def __call__(self, step: Step) -> set[int]:
        hit = self.known.get(id(step))
        if hit is not None and hit[0] is step:
            return hit[1]
        if isinstance(step, KernelStep):
            own = {id(v) for v in step.outputs}
            found: set[int] = set()
            for v in step.outputs:
                found |= leaves(self.g, v, self.realized, own)
        else:
            found = {id(a) for a in step.eqn.inputs if isinstance(a, Var)}
        self.known[id(step)] = (step, found)
        return found


def _writes(step: Step) -> set[int]:
    outputs = step.eqn.outvars if isinstance(step, HostStep) else step.outputs
    return {id(v) for v in outputs}


def _epilogue(steps: list[Step], j: int, reads: _Reads) -> bool:
    """Whether step j reads the product of the gemm right before it: it may run inside that
    gemm's call as its epilogue (llvm), so it stays where it is."""
    before = steps[j - 1] if j else None
    return isinstance(before, GemmStep) and id(before.outputs[0]) in reads(steps[j])


def _fits(g: _Graph, earlier: KernelStep, later: KernelStep, realized: set[int]) -> bool:
    """Whether the merged kernel keeps to MAX_KERNEL_BUFFERS buffers."""
    return kernel_buffers(g, earlier.outputs + later.outputs, realized) <= MAX_KERNEL_BUFFERS


def _partner(g: _Graph, steps: list[Step], i: int, reads: _Reads) -> tuple[int, int] | None:
    """(j, position) to merge step i with an earlier step j, the merged step going to
    `position` (i or j), or None."""
    later = _plain(g, steps[i])
    assert later is not None
    later_reads = reads(later)
    written_since: set[int] = set()
    read_since: set[int] = set()
    for j in range(i - 1, max(i - 1 - WINDOW, -1), -1):
        earlier = steps[j]
        plain = _plain(g, earlier)
        if plain is not None and plain.shape == later.shape \
                and _fits(g, plain, later, reads.realized):
            if not later_reads & written_since:
                return j, j
            if not _writes(earlier) & read_since and not _epilogue(steps, j, reads):
                return j, i
        written_since |= _writes(earlier)
        read_since |= reads(earlier)
    return None


def regroup(g: _Graph, steps: list[Step], realized: set[int]) -> list[Step]:
    """`steps` with same-shape elementwise kernels merged across other steps (module
    docstring)."""
    before, steps = steps, list(steps)
    reads = _Reads(g, realized)
    i = 0
    while i < len(steps):
        later = steps[i]
        found = _partner(g, steps, i, reads) if _plain(g, later) else None
        if found is None:
            i += 1
            continue
        j, position = found
        earlier = steps[j]
        assert isinstance(earlier, KernelStep) and isinstance(later, KernelStep)
        steps[position] = KernelStep(earlier.name, earlier.shape, (),
                                     earlier.outputs + later.outputs,
                                     earlier.reduced + later.reduced)
        del steps[i if position == j else j]  # either way, the next step is now at i
    return _renumbered(steps) if len(steps) < len(before) else steps


def arrange(g: _Graph, steps: list[Step], realized: set[int]) -> list[Step]:
    """`regroup`, then `adjoin_epilogues` (module docstring)."""
    return adjoin_epilogues(g, regroup(g, steps, realized), realized)


def adjoin_epilogues(g: _Graph, steps: list[Step], realized: set[int]) -> list[Step]:
    """`steps` where each gemm's first elementwise reader that is not right after it has been
    moved there, with the steps it needs ahead of the gemm, where that keeps every step's
    inputs written before it runs (module docstring)."""
    steps, reads, moved = list(steps), _Reads(g, realized), False
    for i in range(len(steps)):
        gemm = steps[i]
        if not isinstance(gemm, GemmStep) or i + 1 == len(steps):
            continue
        product = id(gemm.outputs[0])
        if product in reads(steps[i + 1]):
            continue
        j = next((j for j in range(i + 2, len(steps)) if product in reads(steps[j])), None)
        if j is None or _plain(g, steps[j]) is None:
            continue
        order = _adjoined(steps, i, j, reads)
        if order is not None:
            steps, moved = order, True
    return _renumbered(steps) if moved else steps


def _adjoined(steps: list[Step], i: int, j: int, reads: _Reads) -> list[Step] | None:
    """The order with step j right after the gemm at i, the steps between them that write
    what j reads first (each a kernel that reads nothing written from the gemm on), or
    None."""
    wanted = reads(steps[j])
    needed: list[Step] = []
    written: set[int] = set()
    for s in steps[i:j]:
        if s is not steps[i] and _writes(s) & wanted:
            if not isinstance(s, KernelStep) or reads(s) & written:
                return None   # only pure kernels move (a host step may have effects)
            needed.append(s)
        else:
            written |= _writes(s)
    rest = [s for s in steps[i + 1:j] if all(s is not n for n in needed)]
    return steps[:i] + needed + [steps[i], steps[j]] + rest + steps[j + 1:]


def _renumbered(steps: list[Step]) -> list[Step]:
    """The steps named by their final positions again (k0, g1, k2, ...), so printouts and
    profiles list them in order."""
    return [dataclasses.replace(s, name=f"{s.name[0]}{n}") for n, s in enumerate(steps)]
