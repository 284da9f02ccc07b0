"""Staging: record the primitives a function applies into a Jaxpr (`make_jaxpr`, jit, ...).

`StagingTrace` turns every bind on its tracers into an equation. With `partial=True` it does
partial evaluation instead: equations whose inputs are all known (not its own tracers) run on
the parent trace right away, so only the work that depends on the staged inputs is recorded
(this is how linearize splits primal from tangent work).
"""
from __future__ import annotations

import inspect
import os
from typing import Any, Callable, Sequence

import numpy as np

from fgrad.core.ir import ClosedJaxpr, Eqn, Jaxpr, Literal, ShapedArray, SourceInfo, Var
from fgrad.core.tensor import ConcretizationError, Tensor, Tracer
from fgrad.core.trace import Trace, own_tracer, set_current_trace
from fgrad.core.traceback_util import annotate_tracing_error

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# primitive name -> called with each equation of it as it is staged: a backend starts work
# it will need while the rest of the function is still traced (lower/llvm/runtime.py
# compiles its GEMM routines from the first staged matmul on); a hook must not raise
STAGED_HOOKS: dict[str, Callable[[Eqn], None]] = {}


_IN_PACKAGE: dict[str, bool] = {}   # a code object's file name -> inside fgrad


def user_source() -> SourceInfo | None:
    """The innermost stack frame outside the fgrad package (the user's line)."""
    frame = inspect.currentframe()
    while frame is not None:
        fname = frame.f_code.co_filename
        inside = _IN_PACKAGE.get(fname)
        if inside is None:
            inside = _IN_PACKAGE[fname] = os.path.abspath(fname).startswith(_PKG_DIR)
        if not inside:
            return SourceInfo(fname, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return None


class Origin:
    """Where a staged value came from: the traced function and the argument path."""

    __slots__ = ("function", "argument")

    def __init__(self, function: str, argument: str):
        self.function, self.argument = function, argument


class StagingTracer(Tracer):
    """A value being recorded into a jaxpr: an aval and its Var."""

    __slots__ = ("_aval", "_var", "origin")

    def __init__(self, trace: "StagingTrace", aval: ShapedArray, origin: Origin | None = None):
        self._trace, self._aval, self._var, self.origin = trace, aval, Var(aval), origin

    @property
    def aval(self) -> ShapedArray:
        return self._aval

    def _concrete(self, why: str) -> np.ndarray:
        where = user_source()
        fn = self.origin.function if self.origin else "the traced function"
        arg = f" (it depends on argument {self.origin.argument})" if self.origin else ""
        at = f" at {where}" if where else ""
        raise ConcretizationError(
            f"{why} needs a concrete value, but inside `{fn}` this {self.aval} Tensor is "
            f"abstract while {self._trace.name} traces it{arg}{at}. Python `if`/`while`, "
            f"bool(), int(), float(), .item() and .numpy() cannot depend on traced values. "
            f"Fixes: use fgrad.lax.cond / fgrad.lax.switch / fgrad.lax.while_loop for control "
            f"flow, Tensor.where(cond, a, b) to select values, or pass the argument as static "
            f"(static_argnums=...) if it is a hyperparameter.")


class StagingTrace(Trace):
    """Records equations; see the module docstring for `partial`."""

    parent: Trace

    def __init__(self, parent: Trace, *, partial: bool = False, name: str = "make_jaxpr"):
        self.parent, self.partial, self.name = parent, partial, name
        self.eqns: list[Eqn] = []
        self.const_vars: dict[int, tuple[Var, Any]] = {}

    def new_arg(self, aval: ShapedArray, origin: Origin | None = None) -> StagingTracer:
        return StagingTracer(self, aval, origin)

    def atom(self, x: Any) -> Var | Literal:
        """The jaxpr atom for `x`: its Var, a Literal for scalars, else a new constvar."""
        if own_tracer(self, x):
            return x._var
        if not isinstance(x, Tracer) and x.ndim == 0:
            return Literal(x._concrete("a literal").reshape(()).item(), x.aval)
        key = id(x)
        if key not in self.const_vars:
            self.const_vars[key] = (Var(x.aval), x)
        return self.const_vars[key][0]

    def process_primitive(self, prim: Any, args: Sequence[Any], params: dict) -> list[Any]:
        own = [own_tracer(self, x) for x in args]
        if self.partial and not any(own):  # known inputs: run now (host callbacks too)
            with set_current_trace(self.parent):
                out = prim.bind(*args, **params)
            return list(out) if prim.multiple_results else [out]
        if self.partial and prim.partial_eval is not None:
            return prim.partial_eval(self, list(args), own, params)
        return self.stage(prim, args, params)

    def stage(self, prim: Any, args: Sequence[Any], params: dict) -> list[StagingTracer]:
        """Record one equation and return tracers for its outputs."""
        atoms = [self.atom(x) for x in args]
        out_avals = prim.abstract_eval_list(*[a.aval for a in atoms], **params)
        origin = next((x.origin for x in args if isinstance(x, StagingTracer)
                       and x._trace is self and x.origin), None)
        outs = [StagingTracer(self, aval, origin) for aval in out_avals]
        eqn = Eqn(prim, atoms, dict(params), [o._var for o in outs], user_source())
        self.eqns.append(eqn)
        hook = STAGED_HOOKS.get(prim.name)
        if hook is not None:
            hook(eqn)
        return outs

    def build(self, in_tracers: Sequence[StagingTracer], outs: Sequence[Any]
              ) -> tuple[Jaxpr, list[Any]]:
        """The recorded Jaxpr (dead code removed) and the values of its constvars."""
        out_atoms = [self.atom(as_staged_value(o)) for o in outs]
        eqns = _live_eqns(self.eqns, out_atoms)
        used = {id(a) for e in eqns for a in e.inputs} | {id(a) for a in out_atoms}
        consts = [(v, val) for v, val in self.const_vars.values() if id(v) in used]
        jaxpr = Jaxpr([v for v, _ in consts], [t._var for t in in_tracers], eqns, out_atoms)
        return jaxpr, [val for _, val in consts]


def prim_has_effects(prim: Any) -> bool:
    return getattr(prim, "effectful", False)


def as_staged_value(x: Any) -> Any:
    if isinstance(x, Tensor):
        return x
    return Tensor(x)


def _live_eqns(eqns: list[Eqn], outs: Sequence[Any]) -> list[Eqn]:
    live = {id(a) for a in outs if isinstance(a, Var)}
    kept = []
    for eqn in reversed(eqns):
        if any(id(v) in live for v in eqn.outvars) or prim_has_effects(eqn.primitive):
            kept.append(eqn)
            live.update(id(a) for a in eqn.inputs if isinstance(a, Var))
    return kept[::-1]


def eval_jaxpr(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any]) -> list[Any]:
    """Run a jaxpr by binding each equation on the current trace."""
    env: dict[int, Any] = {}

    def read(a: Any) -> Any:
        if isinstance(a, Literal):
            return Tensor._wrap(np.asarray(a.val, dtype=a.aval.dtype.np))
        return env[id(a)]

    for v, val in zip(jaxpr.constvars, consts, strict=True):
        env[id(v)] = val
    for v, val in zip(jaxpr.invars, args, strict=True):
        env[id(v)] = val
    for eqn in jaxpr.eqns:
        outs = eqn.primitive.bind(*[read(a) for a in eqn.inputs], **eqn.params)
        outs = outs if eqn.primitive.multiple_results else [outs]
        for v, val in zip(eqn.outvars, outs, strict=True):
            env[id(v)] = val
    return [read(a) for a in jaxpr.outvars]


def trace_to_jaxpr(fn: Callable[..., Sequence[Any]], in_avals: Sequence[ShapedArray],
                   parent: Trace, name: str = "make_jaxpr",
                   origins: Sequence[Origin | None] | None = None) -> tuple[ClosedJaxpr, Any]:
    """Stage `fn(*tracers) -> list of Tensors` into a ClosedJaxpr; returns (jaxpr, extra)
    where extra is whatever `fn` returned alongside (fn returns (outs, extra))."""
    trace = StagingTrace(parent, name=name)
    origins = origins or [None] * len(in_avals)
    tracers = [trace.new_arg(a, o) for a, o in zip(in_avals, origins, strict=True)]
    with set_current_trace(trace):
        try:
            outs, extra = fn(*tracers)
        except (TypeError, ValueError) as err:
            if not isinstance(err, ConcretizationError):  # that one names the line itself
                annotate_tracing_error(err, name)
            raise
    jaxpr, consts = trace.build(tracers, outs)
    return ClosedJaxpr(jaxpr, consts), extra
