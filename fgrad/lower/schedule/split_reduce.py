"""Reductions rewritten for the loops they become: split in two so that threads can share
them, and read through a transpose in the operand's own layout (`reduce_untransposed`).

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
from fgrad.core.prims.movement import reshape_p, transpose_p

REDUCTIONS = ("reduce_sum", "reduce_max", "reduce_min")
MIN_ELEMENTS = 1 << 17  # operands smaller than this stay one reduction (threads.py's split size)
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


# ---------------------------------------------------------------------------- layout

REORDERABLE = REDUCTIONS + ("reduce_prod", "argmax", "argmin")


def _reduced_axes(eqn: Eqn) -> tuple[int, ...]:
    if eqn.primitive.name in ("argmax", "argmin"):
        return (eqn.params["axis"],)
    return tuple(eqn.params["axes"])


def _untransposed(eqn: Eqn, transpose: Eqn) -> list[Eqn]:
    """`eqn` (a reduction of transpose's output) as the same reduction of transpose's input,
    its result transposed where the kept axes come out in another order."""
    perm = transpose.params["permutation"]
    x = transpose.inputs[0]
    axes = _reduced_axes(eqn)
    source_axes = tuple(sorted(perm[a] for a in axes))
    kept = [perm[a] for a in range(len(perm)) if a not in axes]  # x's axes, output order
    order = sorted(kept)
    params = dict(eqn.params)
    if eqn.primitive.name in ("argmax", "argmin"):
        params["axis"] = source_axes[0]
    else:
        params["axes"] = source_axes
    out = eqn.outvars[0]
    back = tuple(order.index(k) for k in kept)
    if back == tuple(range(len(back))):
        return [Eqn(eqn.primitive, [x], params, [out], eqn.source)]
    y = Var(ShapedArray(tuple(x.aval.shape[k] for k in order), out.aval.dtype))
    return [Eqn(eqn.primitive, [x], params, [y], eqn.source),
            Eqn(transpose_p, [y], {"permutation": back}, [out], eqn.source)]


def reduce_untransposed(jaxpr: Jaxpr) -> Jaxpr:
    """`jaxpr` with each reduction of a transpose's output reading the transpose's input
    instead (and the transpose dropped when nothing else reads it): `x.T.sum(-1)` becomes
    `x.sum(0)`, a loop along rows with a vector of sums, where the reduction along the
    transposed axis read one element per cache line (2048 x 2048 float32: 9.6 -> 0.5 ms).
    Sums are added in another order: the result differs by rounding only."""
    producers = {id(v): e for e in jaxpr.eqns if e.primitive is transpose_p for v in e.outvars}
    rewritten: dict[int, list[Eqn]] = {}
    for eqn in jaxpr.eqns:
        source = eqn.inputs[0] if eqn.inputs else None
        if eqn.primitive.name in REORDERABLE and isinstance(source, Var) and \
                id(source) in producers:
            rewritten[id(eqn)] = _untransposed(eqn, producers[id(source)])
    if not rewritten:
        return jaxpr
    eqns = [new for e in jaxpr.eqns for new in rewritten.get(id(e), [e])]
    used = {id(a) for e in eqns for a in e.inputs} | {id(v) for v in jaxpr.outvars}
    eqns = [e for e in eqns if e.primitive is not transpose_p
            or any(id(v) in used for v in e.outvars)]
    return Jaxpr(list(jaxpr.constvars), list(jaxpr.invars), eqns, list(jaxpr.outvars))
