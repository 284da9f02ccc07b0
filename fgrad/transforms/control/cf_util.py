"""Jaxpr-to-jaxpr helpers shared by the control-flow primitives: tracing callables into
const-free jaxprs, and the jvp / partial-eval / transpose / vmap of a sub-jaxpr."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from fgrad.core.ir import Jaxpr, ShapedArray, Var
from fgrad.core.prims import zeros
from fgrad.core.staging import StagingTrace, eval_jaxpr, trace_to_jaxpr
from fgrad.core.trace import current_trace, own_tracer, set_current_trace
from fgrad.transforms.jit_prim import open_jaxpr


def trace_flat(fn: Callable[..., list[Any]], in_avals: Sequence[ShapedArray],
               name: str) -> tuple[Jaxpr, list[Any]]:
    """Stage `fn(*tracers) -> list` into a jaxpr whose constants are leading invars."""
    closed, _ = trace_to_jaxpr(lambda *xs: (fn(*xs), None), list(in_avals), current_trace(),
                               name)
    return open_jaxpr(closed)


def run(jaxpr: Jaxpr, args: Sequence[Any]) -> list[Any]:
    """Evaluate a const-free jaxpr on the current trace."""
    return eval_jaxpr(jaxpr, [], list(args))


def join_consts(jaxprs: Sequence[Jaxpr], consts: Sequence[list[Any]]
                ) -> tuple[list[Jaxpr], list[Any]]:
    """Give every jaxpr the same leading const inputs (the concatenation of all of them)."""
    all_consts = [c for cs in consts for c in cs]
    out = []
    for i, j in enumerate(jaxprs):
        n_own = len(consts[i])
        before = [Var(c.aval) for cs in consts[:i] for c in cs]
        after = [Var(c.aval) for cs in consts[i + 1:] for c in cs]
        own, rest = j.invars[:n_own], j.invars[n_own:]
        out.append(Jaxpr([], before + own + after + rest, j.eqns, j.outvars))
    return out, all_consts


def jvp_jaxpr(jaxpr: Jaxpr, nonzero: Sequence[bool], instantiate: Sequence[bool] | bool
              ) -> tuple[Jaxpr, list[Any], list[bool]]:
    """Jaxpr of (primals, nonzero tangents) -> (outs, out tangents that are nonzero or must
    be instantiated). Returns it (consts as leading invars), consts, and out-nonzero flags."""
    from fgrad.transforms.jvp import jvp_flat
    n = len(jaxpr.invars)
    t_avals = [v.aval for v, nz in zip(jaxpr.invars, nonzero, strict=True) if nz]
    box: list[list[bool]] = []
    inst = [instantiate] * len(jaxpr.outvars) if isinstance(instantiate, bool) else instantiate

    def body(*xs: Any) -> list[Any]:
        it = iter(xs[n:])
        tangents = [next(it) if nz else None for nz in nonzero]
        outs, dots = jvp_flat(lambda *a: run(jaxpr, a), list(xs[:n]), tangents)
        keep = [d is not None or i for d, i in zip(dots, inst, strict=True)]
        box.append(keep)
        dots = [zeros(o.shape, o.dtype) if d is None else d
                for o, d, k in zip(outs, dots, keep, strict=True) if k]
        return outs + dots

    new, consts = trace_flat(body, jaxpr.in_avals + t_avals, "jvp")
    return new, consts, box[0]


def partial_eval_flat(jaxpr: Jaxpr, unknowns: Sequence[bool],
                      force_unknown_outs: Sequence[bool] | None = None) -> tuple[Any, ...]:
    """Split `jaxpr` into (known_jaxpr, known_consts, unknown_jaxpr, out_unknowns, n_res).

    known: known inputs -> known outputs + residuals; unknown: residuals + unknown inputs ->
    unknown outputs. `force_unknown_outs` makes outputs unknown even if computable now.
    """
    known_trace = StagingTrace(current_trace(), name="partial-eval")
    unknown_trace = StagingTrace(known_trace, partial=True, name="partial-eval")
    ins = [unknown_trace.new_arg(v.aval) if u else known_trace.new_arg(v.aval)
           for v, u in zip(jaxpr.invars, unknowns, strict=True)]
    with set_current_trace(unknown_trace):
        outs = run(jaxpr, ins)
    force = force_unknown_outs or [False] * len(outs)
    out_unknowns = [own_tracer(unknown_trace, o) or f for o, f in zip(outs, force, strict=True)]
    u_ins = [t for t, u in zip(ins, unknowns, strict=True) if u]
    u_outs = [o for o, u in zip(outs, out_unknowns, strict=True) if u]
    u_jaxpr, residuals = unknown_trace.build(u_ins, u_outs)
    k_ins = [t for t, u in zip(ins, unknowns, strict=True) if not u]
    k_outs = [o for o, u in zip(outs, out_unknowns, strict=True) if not u] + residuals
    k_jaxpr, k_consts = known_trace.build(k_ins, k_outs)
    k_open = Jaxpr([], k_jaxpr.constvars + k_jaxpr.invars, k_jaxpr.eqns, k_jaxpr.outvars)
    u_open = Jaxpr([], u_jaxpr.constvars + u_jaxpr.invars, u_jaxpr.eqns, u_jaxpr.outvars)
    return k_open, list(k_consts), u_open, out_unknowns, len(residuals)


def transpose_jaxpr(jaxpr: Jaxpr, linear: Sequence[bool]) -> tuple[Jaxpr, list[Any]]:
    """Jaxpr of (known inputs, output cotangents) -> cotangents of the linear inputs."""
    from fgrad.transforms.transpose import backward_pass
    known_vars = [v for v, lin in zip(jaxpr.invars, linear, strict=True) if not lin]
    lin_vars = [v for v, lin in zip(jaxpr.invars, linear, strict=True) if lin]
    view = Jaxpr(known_vars, lin_vars, jaxpr.eqns, jaxpr.outvars)
    k = len(known_vars)

    def body(*xs: Any) -> list[Any]:
        cts = backward_pass(view, list(xs[:k]), list(xs[k:]))
        return [zeros(v.aval.shape, v.aval.dtype) if c is None else c
                for v, c in zip(lin_vars, cts, strict=True)]

    return trace_flat(body, [v.aval for v in known_vars] + jaxpr.out_avals, "transpose")


def _batched_avals(jaxpr: Jaxpr, dims: Sequence[int | None], size: int) -> list[ShapedArray]:
    """Input avals with the batch axis of length `size` inserted at `dims`."""
    avals = []
    for v, d in zip(jaxpr.invars, dims, strict=True):
        shape = list(v.aval.shape)
        if d is not None:
            shape.insert(d, size)
        avals.append(ShapedArray(tuple(shape), v.aval.dtype))
    return avals


def _run_batched(jaxpr: Jaxpr, vals: Sequence[Any], dims: Sequence[int | None],
                 size: int) -> tuple[Any, list[Any]]:
    """Evaluate `jaxpr` under a fresh BatchTrace; returns the trace and its raw outputs."""
    from fgrad.transforms.batching import BatchTrace, BatchTracer, batching_axis_name
    trace = BatchTrace(current_trace(), size, batching_axis_name())
    ins = [v if d is None else BatchTracer(trace, v, d) for v, d in zip(vals, dims)]
    with set_current_trace(trace):
        return trace, run(jaxpr, ins)


def batch_jaxpr(jaxpr: Jaxpr, dims: Sequence[int | None], size: int,
                out_dims: Sequence[int | None]) -> tuple[Jaxpr, list[Any]]:
    """vmap of a jaxpr: inputs batched at `dims`; outputs moved to `out_dims` (an int forces
    batching, None requires the output to be unbatched)."""
    from fgrad.transforms.batching import _finish

    def body(*vals: Any) -> list[Any]:
        trace, outs = _run_batched(jaxpr, vals, dims, size)
        return [_finish(trace, o, d, size) for o, d in zip(outs, out_dims, strict=True)]

    return trace_flat(body, _batched_avals(jaxpr, dims, size), "vmap")


def batched_outputs(jaxpr: Jaxpr, dims: Sequence[int | None], size: int) -> list[bool]:
    """Which outputs of `jaxpr` depend on the batched inputs."""
    box: list[list[bool]] = []

    def body(*vals: Any) -> list[Any]:
        trace, outs = _run_batched(jaxpr, vals, dims, size)
        box.append([trace.split(o)[1] is not None for o in outs])
        return [trace.split(o)[0] for o in outs]

    trace_flat(body, _batched_avals(jaxpr, dims, size), "vmap-probe")
    return box[0]
