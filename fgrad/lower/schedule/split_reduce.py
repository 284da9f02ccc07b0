"""Split large reductions over leading axes in two, so that threads can share them.

In: a Jaxpr. Out: an equivalent Jaxpr in which a large `reduce_sum`/`reduce_max`/
`reduce_min` over the leading axes of its operand (a full reduction to a scalar, or a
column reduction such as `x.sum(axis=0)`) becomes

    r = reshape(x, (P, L // P) + rest)   # L: the product of the reduced axes
    y = reduce(r, axes=(1,))             # P partial results: one loop over P, split
    out = reduce(y, axes=(0,))           # the small final combine

The first reduction is a kernel whose outermost loop runs over the P parts, each writing
its own slice of `y` (kernel/build.py), which threads.py splits across the thread pool;
the reshape is index arithmetic fused into it. Sums are then added in another order
(partial sums of L/P terms each): the result differs from a sequential sum by rounding
only. The input Jaxpr itself comes back when nothing applies (executables are cached by
its identity).
"""
from __future__ import annotations

import math

from fgrad.core.ir import Eqn, Jaxpr, ShapedArray, Var
from fgrad.core.prims.movement import reshape_p

REDUCTIONS = ("reduce_sum", "reduce_max", "reduce_min")
MIN_ELEMENTS = 1 << 20  # operands smaller than this stay one reduction
PARTS = (64, 32, 16, 8, 4)  # the first that divides the reduced extent is chosen


def _parts(eqn: Eqn) -> int:
    """P for `eqn`, or 0 when it stays as it is."""
    if eqn.primitive.name not in REDUCTIONS or not isinstance(eqn.inputs[0], Var):
        return 0
    aval = eqn.inputs[0].aval
    axes = tuple(sorted(eqn.params["axes"]))
    if not axes or axes != tuple(range(len(axes))) or aval.size < MIN_ELEMENTS:
        return 0
    lead = math.prod(aval.shape[:len(axes)])
    return next((p for p in PARTS if lead % p == 0 and lead // p >= 2 * p), 0)


def _split(eqn: Eqn, parts: int) -> list[Eqn]:
    x = eqn.inputs[0]
    assert isinstance(x, Var)
    k = len(eqn.params["axes"])
    rest = x.aval.shape[k:]
    shape = (parts, math.prod(x.aval.shape[:k]) // parts) + rest
    r = Var(ShapedArray(shape, x.aval.dtype))
    y = Var(ShapedArray((parts,) + rest, x.aval.dtype))
    return [Eqn(reshape_p, [x], {"new_shape": shape}, [r], eqn.source),
            Eqn(eqn.primitive, [r], {"axes": (1,)}, [y], eqn.source),
            Eqn(eqn.primitive, [y], {"axes": (0,)}, list(eqn.outvars), eqn.source)]


def split_reductions(jaxpr: Jaxpr) -> Jaxpr:
    """`jaxpr` with each large leading-axes reduction split in two (module docstring)."""
    plans = [_parts(e) for e in jaxpr.eqns]
    if not any(plans):
        return jaxpr
    eqns: list[Eqn] = []
    for eqn, parts in zip(jaxpr.eqns, plans, strict=True):
        eqns += _split(eqn, parts) if parts else [eqn]
    return Jaxpr(list(jaxpr.constvars), list(jaxpr.invars), eqns, list(jaxpr.outvars))
