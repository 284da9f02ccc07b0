"""Build the kernel IR of a scatter step: the operand copied into the result, then the update
rows combined into it one after another.

In: a `Schedule` and one of its scatter `KernelStep`s (`schedule.is_scatter_step`).
Out: a `Kernel` and the jaxpr Vars bound to its buffer parameters (the result first, then
inputs in first-use order), as `kernel_build.build_kernel` gives.

`out = scatter(x, idx, upd, mode)` with x of shape (n, j...) and idx of shape (i...) is two
loop nests, the operands' producers inlined as in any kernel:

    for r, j...: out[r, j...] = x[r, j...]
    for i...: for j...: out[dyn(idx[i...]), j...] = combine(out[...], upd[i..., j...])

where dyn clamps the index into [0, n - 1] at run time and combine is add/mul/max/min
(or/and on bool; 'set' stores upd). The update nest runs over idx row-major, so duplicate
indices combine in NumPy's order and the last 'set' wins. Its stores go through a run-time
index, so the llvm thread pool never splits the kernel across threads, and OpenCL runs it as one
work-item per trailing position j... (opencl/render.py).
"""
from __future__ import annotations

from typing import Any

from fgrad.core.dtypes import dtypes
from fgrad.core.ir import Var
from fgrad.lower.kernel.index import linearize
from fgrad.lower.kernel.build import (
    BOOL_COMBINE,
    Plan,
    _innermost_affine,
    _Nest,
    _params,
    _Values,
    run_time_index,
    trailing_plans,
)
from fgrad.lower.kernel.ir import Kernel, Load, Op, Stmt, Store, check_kernel
from fgrad.lower.schedule.partition import KernelStep, Schedule


def scatter_combine(mode: str, is_bool: bool) -> str | None:
    """The op that combines an old entry with an update (None for 'set': the update)."""
    if mode == "set":
        return None
    return BOOL_COMBINE[mode] if is_bool else mode


def _copy_nest(vals: _Values, x: Any, shape: tuple[int, ...], plan: Plan
               ) -> tuple[tuple[Stmt, ...], _Nest]:
    """for every point r of out: out[r] = x[r]."""
    nest = _Nest(shape, plan, "i")
    idx = tuple(nest.index[a] for a in range(len(shape)))
    return nest.wrap((Store(0, linearize(idx, shape), vals(x, idx)),)), nest


def _update_nest(vals: _Values, step: KernelStep, plan: Plan
                 ) -> tuple[tuple[Stmt, ...], _Nest]:
    """for every point (i..., j...) of upd: out[dyn(idx[i...]), j...] op= upd[i..., j...]."""
    out = step.outputs[0]
    eqn = vals.sched.producers[id(out)]
    _, ind, upd = eqn.inputs
    shape, dtype = out.aval.shape, out.aval.dtype
    nest = _Nest(upd.aval.shape, plan, "s")
    idx = tuple(nest.index[a] for a in range(len(upd.aval.shape)))
    k = ind.aval.ndim
    row = run_time_index(vals, ind, idx[:k], shape[0] - 1)
    at = linearize((row,) + idx[k:], shape)
    new = vals(upd, idx)
    op = scatter_combine(eqn.params["mode"], dtype == dtypes.bool)
    if op is not None:
        new = Op(op, (Load(0, at, dtype), new), dtype)
    return nest.wrap((Store(0, at, new),)), nest


def _build(sched: Schedule, step: KernelStep, names: Any, copy_plan: Plan,
           update_plan: Plan) -> tuple[Kernel, _Nest, _Nest, list[Var]]:
    out = step.outputs[0]
    eqn = sched.producers[id(out)]
    vals = _Values(sched, step)
    body, copy = _copy_nest(vals, eqn.inputs[0], out.aval.shape, copy_plan)
    update = _Nest((), (), "s")
    if out.aval.size and eqn.inputs[2].aval.size:
        more, update = _update_nest(vals, step, update_plan)
        body += more
    kernel = Kernel(step.name, _params(vals, names, 1), body)
    return kernel, copy, update, vals.params


def build_scatter(sched: Schedule, step: KernelStep, names: Any
                  ) -> tuple[Kernel, list[Var]]:
    """The kernel IR of scatter `step` and the Vars bound to its parameters. Each nest
    takes its most collapsed loops whose innermost variable stays affine."""
    out = step.outputs[0]
    _, ind, upd = sched.producers[id(out)].inputs
    k = ind.aval.ndim
    copy_plans = trailing_plans(tuple(range(out.aval.ndim)))
    rows = tuple(range(k, upd.aval.ndim))
    update_plans = [pi + pr for pi in trailing_plans(tuple(range(k)))[:1]
                    for pr in trailing_plans(rows)]
    copy_plan = copy_plans[-1]
    for plan in copy_plans:
        kernel, copy, _, _ = _build(sched, step, names, plan, update_plans[0])
        if _innermost_affine(kernel, copy):
            copy_plan = plan
            break
    for plan in update_plans:
        kernel, _, update, params = _build(sched, step, names, copy_plan, plan)
        if _innermost_affine(kernel, update):
            break
    check_kernel(kernel)
    return kernel, params
