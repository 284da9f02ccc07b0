"""Common-subexpression elimination: an equation that repeats an earlier one is dropped.

In: a Jaxpr (after expansion, before scheduling). Out: an equivalent Jaxpr in which no two
equations apply the same primitive with equal parameters to the same inputs (`(x @ w,
x @ w + b)` computes one product, as XLA's CSE would); the later one's outputs are read
from the earlier one's. Effectful equations (a debug callback) are never merged. Parameters
compare by value (numbers by their bits, so 0.0 and -0.0 differ), nested jaxprs and other
unhashable objects by identity. Sub-jaxprs are left as they are. The input Jaxpr object
itself comes back when nothing repeats (executables are cached by its identity).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from fgrad.core.ir import Atom, Eqn, Jaxpr, Literal, Var
from fgrad.core.staging import prim_has_effects


def cse(jaxpr: Jaxpr) -> Jaxpr:
    """`jaxpr` with repeated equations removed (module docstring)."""
    renamed: dict[int, Var] = {}
    first: dict[Any, Eqn] = {}
    eqns: list[Eqn] = []
    dropped = 0
    for eqn in jaxpr.eqns:
        inputs = [_renamed(a, renamed) for a in eqn.inputs]
        if any(a is not b for a, b in zip(inputs, eqn.inputs, strict=True)):
            eqn = Eqn(eqn.primitive, inputs, eqn.params, eqn.outvars, eqn.source)
        key = None if prim_has_effects(eqn.primitive) else _key(eqn)
        earlier = first.get(key) if key is not None else None
        if earlier is not None:
            renamed.update(zip(map(id, eqn.outvars), earlier.outvars, strict=True))
            dropped += 1
            continue
        if key is not None:
            first[key] = eqn
        eqns.append(eqn)
    if not dropped:
        return jaxpr
    outs = [_renamed(a, renamed) for a in jaxpr.outvars]
    return Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, outs)


def _renamed(a: Atom, renamed: dict[int, Var]) -> Atom:
    return renamed.get(id(a), a) if isinstance(a, Var) else a


def _key(eqn: Eqn) -> Any:
    """What makes two equations compute the same values, or None if it cannot be told."""
    try:
        params = _frozen(eqn.params)
        hash(params)
    except TypeError:
        return None
    inputs = tuple(("v", id(a)) if isinstance(a, Var) else _literal(a) for a in eqn.inputs)
    return id(eqn.primitive), inputs, params


def _literal(a: Literal) -> Any:
    return "lit", a.aval.dtype, np.asarray(a.val, dtype=a.aval.dtype.np).tobytes()


def _frozen(v: Any) -> Any:
    """A hashable stand-in for a parameter value that is equal only for equal values."""
    if isinstance(v, dict):
        return ("dict",) + tuple(sorted((k, _frozen(x)) for k, x in v.items()))
    if isinstance(v, (tuple, list)):
        return (type(v).__name__,) + tuple(_frozen(x) for x in v)
    if isinstance(v, (float, complex, np.generic, np.ndarray)):
        arr = np.asarray(v)
        return "array", arr.dtype.str, arr.shape, arr.tobytes()
    if isinstance(v, (bool, int, str, bytes, type(None))):
        return type(v).__name__, v
    try:
        hash(v)
    except TypeError:
        return "object", id(v)
    return type(v), v
