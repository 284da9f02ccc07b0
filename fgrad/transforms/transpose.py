"""Reverse mode: linearize (JVP under partial evaluation) and transposition of linear jaxprs.

`linearize_flat` runs the JVP trace on top of a partial-evaluating staging trace: primal work
runs on the parent trace right away (so Python control flow on values still works) and only
tangent work is recorded, giving a linear jaxpr whose constvars are the residuals.
`backward_pass` walks that jaxpr backwards applying each primitive's transpose rule.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from fgrad.core.ir import Jaxpr, Literal, Var
from fgrad.core.prims import UndefinedPrimal, zeros
from fgrad.core.staging import StagingTrace
from fgrad.core.tensor import Tensor
from fgrad.core.trace import current_trace, set_current_trace
from fgrad.transforms.jvp import JVPTrace, JVPTracer


class LinearFunction:
    """The linear map produced by linearize: a jaxpr plus its residual constants."""

    def __init__(self, jaxpr: Jaxpr, consts: list[Any], in_avals: list[Any]):
        self.jaxpr, self.consts, self.in_avals = jaxpr, consts, in_avals

    def __call__(self, *tangents: Any) -> list[Any]:
        from fgrad.core.staging import eval_jaxpr
        return eval_jaxpr(self.jaxpr, self.consts, list(tangents))

    def transpose(self, cts: Sequence[Any]) -> list[Any]:
        return backward_pass(self.jaxpr, self.consts, cts)

    def __str__(self) -> str:
        return str(self.jaxpr)


# the name of the staging trace that records tangents for transposition (reverse mode);
# rules that act differently there (lax.custom_linear_solve) test for it
LINEARIZE_TRACE = "linearize"


def linearize_flat(fn: Callable[..., list[Any]], primals: Sequence[Any],
                   differentiable: Sequence[bool]) -> tuple[list[Any], LinearFunction]:
    """Primal outputs of `fn` and its linearization w.r.t. the `differentiable` inputs."""
    parent = current_trace()
    staging = StagingTrace(parent, partial=True, name=LINEARIZE_TRACE)
    jvp_trace = JVPTrace(staging)
    tangent_in = [staging.new_arg(p.aval) for p, d in zip(primals, differentiable, strict=True)
                  if d]
    it = iter(tangent_in)
    ins = [JVPTracer(jvp_trace, p, next(it)) if d else p
           for p, d in zip(primals, differentiable, strict=True)]
    with set_current_trace(jvp_trace):
        outs = fn(*ins)
    pairs = [jvp_trace.split(o) for o in outs]
    primal_outs = [p for p, _ in pairs]
    tangent_outs = [zeros(p.shape, p.dtype) if t is None else t for p, t in pairs]
    jaxpr, consts = staging.build(tangent_in, tangent_outs)
    return primal_outs, LinearFunction(jaxpr, consts, [t.aval for t in tangent_in])


def _add_ct(env: dict[int, Any], v: Var, ct: Any) -> None:
    key = id(v)
    env[key] = ct if key not in env else env[key] + ct


def backward_pass(jaxpr: Jaxpr, consts: Sequence[Any], cts_out: Sequence[Any]) -> list[Any]:
    """Cotangents of a linear jaxpr's inputs given its output cotangents (None = zero)."""
    known: dict[int, Any] = {id(v): c for v, c in zip(jaxpr.constvars, consts, strict=True)}
    linear = {id(v) for v in jaxpr.invars}
    linear_eqns = _forward_nonlinear(jaxpr, known, linear)
    ct_env: dict[int, Any] = {}
    for v, ct in zip(jaxpr.outvars, cts_out, strict=True):
        if isinstance(v, Var) and id(v) in linear and ct is not None:
            _add_ct(ct_env, v, ct)
    for eqn in reversed(linear_eqns):
        cts = [ct_env.pop(id(v), None) for v in eqn.outvars]
        if all(c is None for c in cts):
            continue
        args = [_transpose_arg(a, known, linear) for a in eqn.inputs]
        prim = eqn.primitive
        if prim.multiple_results:
            ct_arg: Any = [zeros(v.aval.shape, v.aval.dtype) if c is None else c
                           for v, c in zip(eqn.outvars, cts, strict=True)]
        else:
            ct_arg = cts[0]
        in_cts = prim.rule("transpose")(ct_arg, *args, **eqn.params)
        for a, c in zip(eqn.inputs, in_cts, strict=True):
            if c is not None and isinstance(a, Var) and id(a) in linear:
                _add_ct(ct_env, a, c)
    return [ct_env.get(id(v)) for v in jaxpr.invars]


def _transpose_arg(a: Any, known: dict[int, Any], linear: set[int]) -> Any:
    if isinstance(a, Literal):
        import numpy as np
        return Tensor._wrap(np.asarray(a.val, dtype=a.aval.dtype.np))
    if id(a) in linear:
        return UndefinedPrimal(a.aval)
    return known[id(a)]


def _forward_nonlinear(jaxpr: Jaxpr, known: dict[int, Any], linear: set[int]) -> list[Any]:
    """Evaluate equations that do not depend on the linear inputs; return the others."""
    linear_eqns = []
    for eqn in jaxpr.eqns:
        if any(isinstance(a, Var) and id(a) in linear for a in eqn.inputs):
            linear.update(id(v) for v in eqn.outvars)
            linear_eqns.append(eqn)
            continue
        args = [_transpose_arg(a, known, linear) for a in eqn.inputs]
        outs = eqn.primitive.bind(*args, **eqn.params)
        outs = outs if eqn.primitive.multiple_results else [outs]
        for v, o in zip(eqn.outvars, outs, strict=True):
            known[id(v)] = o
    return linear_eqns
