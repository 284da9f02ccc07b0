"""The `jit` primitive: a call of a staged Jaxpr, with rules so every transform composes.

Its `jaxpr` param has no constvars (constants travel as leading arguments, so outer traces
see them). jvp, transpose and batching build a transformed Jaxpr and bind `jit` again, so
`grad(jit(f))`, `vmap(jit(f))` and `jit(vmap(grad(f)))` all stay staged; `partial_eval` splits
the call into a known part (run now) and an unknown part (recorded) for linearize.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Sequence

from fgrad.core.ir import ClosedJaxpr, Jaxpr, Var
from fgrad.core.primitive import Primitive
from fgrad.core.prims import UndefinedPrimal, is_undefined, zeros
from fgrad.core.staging import StagingTrace, eval_jaxpr, trace_to_jaxpr
from fgrad.core.tensor import Tensor
from fgrad.core.trace import current_trace, own_tracer, set_current_trace

jit_p = Primitive("jit", multiple_results=True, linear=True)
_derived: "weakref.WeakKeyDictionary[Jaxpr, dict]" = weakref.WeakKeyDictionary()
_opened: "weakref.WeakKeyDictionary[ClosedJaxpr, Jaxpr]" = weakref.WeakKeyDictionary()


def open_jaxpr(closed: ClosedJaxpr) -> tuple[Jaxpr, list[Any]]:
    """Turn constvars into leading invars; returns the jaxpr and the const values.
    The opened Jaxpr is memoized per ClosedJaxpr: executables are cached by its identity."""
    if closed not in _opened:
        j = closed.jaxpr
        _opened[closed] = Jaxpr([], j.constvars + j.invars, j.eqns, j.outvars)
    return _opened[closed], list(closed.consts)


def _memo(jaxpr: Jaxpr, key: Any, build: Callable[[], Any]) -> Any:
    table = _derived.setdefault(jaxpr, {})
    if key not in table:
        table[key] = build()
    return table[key]


def call_jaxpr(jaxpr: Jaxpr, args: Sequence[Any], name: str, backend: str) -> list[Any]:
    """Bind `jit` on `jaxpr` (no constvars) with `args`."""
    return jit_p.bind(*args, jaxpr=jaxpr, name=name, backend=backend)


def call_closed(closed: ClosedJaxpr, args: Sequence[Any], name: str, backend: str) -> list[Any]:
    jaxpr, consts = open_jaxpr(closed)
    return call_jaxpr(jaxpr, consts + list(args), name, backend)


# ---------------------------------------------------------------------------- eval

def _jit_abstract(*avals: Any, jaxpr: Jaxpr, name: str, backend: str) -> list[Any]:
    if [a.shape for a in avals] != [v.aval.shape for v in jaxpr.invars] or \
            [a.dtype for a in avals] != [v.aval.dtype for v in jaxpr.invars]:
        raise TypeError(f"jit({name}): argument avals {[str(a) for a in avals]} do not match "
                        f"{[str(v.aval) for v in jaxpr.invars]}")
    return [v.aval for v in jaxpr.outvars]


def _jit_impl(*arrays: Any, jaxpr: Jaxpr, name: str, backend: str) -> list[Any]:
    from fgrad import profiler
    from fgrad.transforms.nan_check import check_jit_outputs, enabled
    from fgrad.transforms.executables import executable_for
    exe = executable_for(jaxpr, backend)
    prof = profiler.active()
    if prof is None:
        outs = exe(*arrays)
    else:
        getattr(exe, "prepare_profiling", lambda: None)()
        with prof.program(jaxpr, name, backend):
            outs = exe(*arrays)
    if enabled():
        check_jit_outputs(jaxpr, arrays, outs, name)
    return outs


# ---------------------------------------------------------------------------- jvp

def _jvp_jaxpr(jaxpr: Jaxpr, nonzero: tuple[bool, ...]) -> tuple[Jaxpr, list[Any]]:
    from fgrad.transforms.jvp import jvp_flat
    n = len(jaxpr.invars)
    t_avals = [v.aval for v, nz in zip(jaxpr.invars, nonzero, strict=True) if nz]

    def body(*xs: Any) -> tuple[list[Any], None]:
        primals, t_iter = list(xs[:n]), iter(xs[n:])
        tangents = [next(t_iter) if nz else None for nz in nonzero]
        outs, dots = jvp_flat(lambda *a: eval_jaxpr(jaxpr, [], a), primals, tangents)
        dots = [zeros(o.shape, o.dtype) if d is None else d for o, d in zip(outs, dots)]
        return outs + dots, None

    closed, _ = trace_to_jaxpr(body, jaxpr.in_avals + t_avals, current_trace(), "jit-jvp")
    return open_jaxpr(closed)


def _jit_jvp(primals: list[Any], tangents: list[Any], *, jaxpr: Jaxpr, name: str,
             backend: str) -> tuple[list[Any], list[Any]]:
    nonzero = tuple(t is not None for t in tangents)
    new, consts = _memo(jaxpr, ("jvp", nonzero), lambda: _jvp_jaxpr(jaxpr, nonzero))
    outs = call_jaxpr(new, consts + primals + [t for t in tangents if t is not None],
                      f"jvp({name})", backend)
    k = len(jaxpr.outvars)
    return outs[:k], outs[k:]


# ---------------------------------------------------------------------------- partial eval

def partial_eval_jaxpr(jaxpr: Jaxpr, unknowns: Sequence[bool]) -> tuple[Any, ...]:
    """Split `jaxpr` into known and unknown parts.

    Returns (known_jaxpr, known_consts, unknown_jaxpr, out_unknowns, num_residuals): the known
    jaxpr maps known inputs to known outputs + residuals; the unknown jaxpr maps residuals +
    unknown inputs to the unknown outputs.
    """
    parent = current_trace()
    known_trace = StagingTrace(parent, name="partial-eval")
    unknown_trace = StagingTrace(known_trace, partial=True, name="partial-eval")
    ins = [unknown_trace.new_arg(v.aval) if u else known_trace.new_arg(v.aval)
           for v, u in zip(jaxpr.invars, unknowns, strict=True)]
    with set_current_trace(unknown_trace):
        outs = eval_jaxpr(jaxpr, [], ins)
    out_unknowns = [own_tracer(unknown_trace, o) for o in outs]
    u_ins = [t for t, u in zip(ins, unknowns, strict=True) if u]
    u_jaxpr, residuals = unknown_trace.build(u_ins, [o for o, u in zip(outs, out_unknowns) if u])
    k_ins = [t for t, u in zip(ins, unknowns, strict=True) if not u]
    k_outs = [o for o, u in zip(outs, out_unknowns) if not u] + residuals
    k_jaxpr, k_consts = known_trace.build(k_ins, k_outs)
    k_open = Jaxpr([], k_jaxpr.constvars + k_jaxpr.invars, k_jaxpr.eqns, k_jaxpr.outvars)
    u_open = Jaxpr([], u_jaxpr.constvars + u_jaxpr.invars, u_jaxpr.eqns, u_jaxpr.outvars)
    return k_open, k_consts, u_open, out_unknowns, len(residuals)


def _jit_partial_eval(trace: StagingTrace, args: list[Any], own: list[bool],
                      params: dict) -> list[Any]:
    jaxpr, name, backend = params["jaxpr"], params["name"], params["backend"]
    k_jaxpr, k_consts, u_jaxpr, out_unknowns, n_res = _memo(
        jaxpr, ("pe", tuple(own)), lambda: partial_eval_jaxpr(jaxpr, own))
    known_args = [a for a, u in zip(args, own, strict=True) if not u]
    with set_current_trace(trace.parent):
        known_outs = call_jaxpr(k_jaxpr, list(k_consts) + known_args, name, backend)
    n_known = len(known_outs) - n_res
    residuals = known_outs[n_known:]
    unknown_args = [a for a, u in zip(args, own, strict=True) if u]
    unknown_outs = trace.stage(jit_p, residuals + unknown_args,
                               dict(jaxpr=u_jaxpr, name=name, backend=backend)) \
        if any(out_unknowns) else []
    k_iter, u_iter = iter(known_outs[:n_known]), iter(unknown_outs)
    return [next(u_iter) if u else next(k_iter) for u in out_unknowns]


# ---------------------------------------------------------------------------- transpose

def _transpose_jaxpr(jaxpr: Jaxpr, linear: tuple[bool, ...]) -> tuple[Jaxpr, list[Any]]:
    from fgrad.transforms.transpose import backward_pass
    known_vars = [v for v, lin in zip(jaxpr.invars, linear, strict=True) if not lin]
    lin_vars = [v for v, lin in zip(jaxpr.invars, linear, strict=True) if lin]
    view = Jaxpr(known_vars, lin_vars, jaxpr.eqns, jaxpr.outvars)
    n_known = len(known_vars)

    def body(*xs: Any) -> tuple[list[Any], None]:
        cts = backward_pass(view, list(xs[:n_known]), list(xs[n_known:]))
        return [zeros(v.aval.shape, v.aval.dtype) if c is None else c
                for v, c in zip(lin_vars, cts, strict=True)], None

    in_avals = [v.aval for v in known_vars] + jaxpr.out_avals
    closed, _ = trace_to_jaxpr(body, in_avals, current_trace(), "jit-transpose")
    return open_jaxpr(closed)


def _jit_transpose(cts: list[Any], *args: Any, jaxpr: Jaxpr, name: str,
                   backend: str) -> list[Any]:
    linear = tuple(is_undefined(a) for a in args)
    new, consts = _memo(jaxpr, ("transpose", linear), lambda: _transpose_jaxpr(jaxpr, linear))
    known = [a for a in args if not is_undefined(a)]
    outs = iter(call_jaxpr(new, consts + known + list(cts), f"transpose({name})", backend))
    return [next(outs) if lin else None for lin in linear]


# ---------------------------------------------------------------------------- batching

def _batch_jaxpr(jaxpr: Jaxpr, dims: tuple[Any, ...], size: int,
                 in_avals: list[Any]) -> tuple[Jaxpr, list[Any]]:
    from fgrad.transforms.batching import BatchTrace, BatchTracer, _finish, batching_axis_name
    axis_name = batching_axis_name()

    def body(*vals: Any) -> tuple[list[Any], None]:
        trace = BatchTrace(current_trace(), size, axis_name)
        ins = [v if d is None else BatchTracer(trace, v, d) for v, d in zip(vals, dims)]
        with set_current_trace(trace):
            outs = eval_jaxpr(jaxpr, [], ins)
        return [_finish(trace, o, 0, size) for o in outs], None

    closed, _ = trace_to_jaxpr(body, in_avals, current_trace(), "jit-vmap")
    return open_jaxpr(closed)


def _jit_batch(args: list[Any], dims: list[Any], *, jaxpr: Jaxpr, name: str,
               backend: str) -> tuple[list[Any], list[int]]:
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    from fgrad.transforms.batching import batching_axis_name
    key = ("vmap", tuple(dims), size, batching_axis_name())
    avals = [a.aval for a in args]
    new, consts = _memo(jaxpr, key, lambda: _batch_jaxpr(jaxpr, tuple(dims), size, avals))
    outs = call_jaxpr(new, consts + list(args), f"vmap({name})", backend)
    return outs, [0] * len(outs)


jit_p.abstract_eval = _jit_abstract
jit_p.impl = _jit_impl
jit_p.jvp = _jit_jvp
jit_p.partial_eval = _jit_partial_eval
jit_p.transpose = _jit_transpose
jit_p.batch = _jit_batch

__all__ = ["jit_p", "call_jaxpr", "call_closed", "open_jaxpr", "partial_eval_jaxpr",
           "Tensor", "UndefinedPrimal", "Var"]
