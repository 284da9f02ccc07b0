"""User-defined derivative rules and rematerialization.

- `custom_jvp(f)` + `f.defjvp(rule)`: `rule(primals, tangents) -> (out, out_tangent)`.
- `custom_vjp(f)` + `f.defvjp(fwd, bwd)`: `fwd(*args) -> (out, residuals)`,
  `bwd(residuals, out_cotangent) -> tuple of input cotangents`.
- `checkpoint(f)`: gradients equal f's, but reverse mode saves only f's inputs and recomputes
  the rest of f during the backward pass (lower peak memory).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar, cast

from typing_extensions import ParamSpec

from fgrad.core import tree_util
from fgrad.core.api_util import flatten_args, fn_name
from fgrad.core.ir import Jaxpr
from fgrad.core.primitive import Primitive
from fgrad.core.prims import is_undefined, zeros
from fgrad.core.staging import StagingTrace, _live_eqns
from fgrad.core.tensor import ConcretizationError, as_tensor
from fgrad.core.trace import set_current_trace
from fgrad.transforms.control import cf_util as U
from fgrad.transforms.custom_checks import check_bwd_output, check_jvp_output

custom_jvp_call_p = Primitive("custom_jvp_call", multiple_results=True)
custom_vjp_call_p = Primitive("custom_vjp_call", multiple_results=True)
custom_lin_p = Primitive("custom_lin", multiple_results=True, linear=True)
remat_p = Primitive("checkpoint", multiple_results=True, linear=True)


def _trace_fun(fun: Callable[..., Any], args: tuple) -> tuple[Jaxpr, list[Any], list, Any, Any]:
    leaves, in_tree, _ = flatten_args(args, fun)
    box: list[Any] = []

    def flat(*xs: Any) -> list[Any]:
        out = fun(*tree_util.tree_unflatten(in_tree, list(xs)))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        box.append(out_tree)
        return [as_tensor(o) for o in out_leaves]

    jaxpr, consts = U.trace_flat(flat, [x.aval for x in leaves], fn_name(fun))
    return jaxpr, consts, leaves, in_tree, box[0]


def _run_impl(*arrays: Any, call: Jaxpr, **_: Any) -> list[Any]:
    from fgrad.transforms.executables import numpy_executable
    return numpy_executable(call)(*arrays)


def _abstract(*avals: Any, call: Jaxpr, **_: Any) -> list[Any]:
    return call.out_avals


# ---------------------------------------------------------------------------- custom_jvp

class custom_jvp:  # noqa: N801  (JAX's name)
    """Wrap `fun` so that its forward derivative is given by a rule set with `defjvp` (or one
    function per argument with `defjvps`). Arguments in `nondiff_argnums` are not
    differentiated and come first in the rule: `rule(*nondiff_args, primals, tangents)`.
    Called eagerly (no transformation active), `fun` runs as plain Python."""

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: tuple[int, ...] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.jvp_rule: Callable[..., Any] | None = None
        self.nondiff_argnums = tuple(nondiff_argnums)

    def defjvp(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        """Set `rule(primals, tangents) -> (primal_out, tangent_out)`."""
        self.jvp_rule = rule
        return rule

    def defjvps(self, *jvps: Callable[..., Any] | None) -> None:
        """One function per (differentiated) argument: `jvp_i(tangent_i, primal_out,
        *primals)` gives that argument's contribution to the output tangent (None: the
        output does not depend on it); the contributions are summed."""
        def rule(*all_args: Any) -> tuple[Any, Any]:
            *nondiff, primals, tangents = all_args
            if len(jvps) != len(primals):
                raise TypeError(f"custom_jvp {fn_name(self.fun)}: defjvps got {len(jvps)} "
                                f"functions for {len(primals)} differentiated arguments")
            out = _call_with_nondiff(self.fun, self.nondiff_argnums, nondiff, primals)
            total = None
            for jvp_i, t in zip(jvps, tangents):
                if jvp_i is None:
                    continue
                part = jvp_i(t, out, *primals)
                total = part if total is None else tree_util.tree_map(
                    lambda a, b: a + b, total, part)
            if total is None:
                total = tree_util.tree_map(lambda o: as_tensor(o).zeros_like(), out)
            return out, total
        self.jvp_rule = rule

    def __call__(self, *args: Any) -> Any:
        if self.jvp_rule is None:
            raise AttributeError(f"custom_jvp {fn_name(self.fun)} has no rule: call defjvp")
        if _is_eager(args):
            return self.fun(*args)
        fun, rule, args = _without_nondiff(self.fun, self.jvp_rule, self.nondiff_argnums,
                                           args)
        try:
            jaxpr, consts, leaves, in_tree, out_tree = _trace_fun(fun, args)
        except ConcretizationError:
            direct = _concrete_jvp(rule, args)   # Python control flow on concrete primals
            if direct is None:
                raise
            return direct

        def flat_rule(primals: list[Any], tangents: list[Any]) -> tuple[list, list]:
            p = tree_util.tree_unflatten(in_tree, primals)
            t = tree_util.tree_unflatten(in_tree, tangents)
            out, out_dot = rule(tuple(p), tuple(t))
            check_jvp_output(rule, out, out_dot, out_tree)
            return tree_util.tree_leaves(out), tree_util.tree_leaves(out_dot)

        flat_rule.__name__ = fn_name(self.jvp_rule)
        outs = custom_jvp_call_p.bind(*consts, *leaves, call=jaxpr, jvp=flat_rule,
                                      num_consts=len(consts))
        return tree_util.tree_unflatten(out_tree, outs)


def _concrete_jvp(rule: Callable[..., Any], args: tuple) -> Any:
    """Under a JVP trace whose primals are all concrete, the rule's `(out, out_tangent)` as
    JVP tracers (no tracing of the function, as JAX does); None when that does not apply."""
    from fgrad.core.tensor import Tensor, Tracer
    from fgrad.core.trace import current_trace
    from fgrad.transforms.jvp import JVPTrace
    trace = current_trace()
    if not isinstance(trace, JVPTrace):
        return None
    leaves, treedef = tree_util.tree_flatten(args)
    pairs = [trace.split(x) if isinstance(x, Tensor) else (x, None) for x in leaves]
    if any(isinstance(p, Tracer) for p, _ in pairs):
        return None
    primals = [as_tensor(p) for p, _ in pairs]
    tangents = [p.zeros_like() if t is None else t for p, (_, t) in zip(primals, pairs)]
    assert trace.parent is not None, "a JVP trace runs under a parent trace"
    with set_current_trace(trace.parent):
        out, out_dot = rule(tuple(treedef.unflatten(primals)),
                            tuple(treedef.unflatten(tangents)))
    return tree_util.tree_map(trace.wrap, out, out_dot)


def _is_eager(args: tuple) -> bool:
    """Whether no argument is traced by any transformation (so the custom rule can never be
    needed and the function may run as plain Python)."""
    from fgrad.core.tensor import Tracer
    return not any(isinstance(x, Tracer) for x in tree_util.tree_leaves(args))


def _call_with_nondiff(fun: Callable[..., Any], nums: tuple[int, ...], nondiff: Any,
                       diff: Any) -> Any:
    """`fun` called with the non-differentiated arguments put back at positions `nums`."""
    full, nd, d = [], iter(nondiff), iter(diff)
    for i in range(len(nums) + len(diff)):
        full.append(next(nd) if i in nums else next(d))
    return fun(*full)


def _without_nondiff(fun: Callable[..., Any], rule: Callable[..., Any],
                     nums: tuple[int, ...], args: tuple) -> tuple[Callable, Callable, tuple]:
    """`fun` and the jvp rule as functions of the differentiated arguments only."""
    if not nums:
        return fun, rule, args
    nums = tuple(n % len(args) for n in nums)
    nondiff = [args[n] for n in sorted(nums)]
    diff = tuple(a for i, a in enumerate(args) if i not in nums)

    def fun_d(*d: Any) -> Any:
        return _call_with_nondiff(fun, tuple(sorted(nums)), nondiff, d)

    def rule_d(primals: tuple, tangents: tuple) -> Any:
        return rule(*nondiff, primals, tangents)

    fun_d.__name__ = fn_name(fun)
    return fun_d, rule_d, diff


def _custom_jvp_jvp(primals: list[Any], tangents: list[Any], *, call: Jaxpr, jvp: Any,
                    num_consts: int) -> tuple[list, list]:
    args = primals[num_consts:]
    dots = [zeros(p.shape, p.dtype) if t is None else t
            for p, t in zip(args, tangents[num_consts:], strict=True)]
    out, out_dot = jvp(list(args), dots)
    return [as_tensor(o) for o in out], [as_tensor(d) for d in out_dot]


def _custom_jvp_batch(args: list[Any], dims: list[Any], *, call: Jaxpr, jvp: Any,
                      num_consts: int) -> tuple[list, list]:
    """Batch the primal jaxpr and vmap the user's rule, keeping the rule under vmap."""
    from fgrad.core.prims import move_bdim_public
    from fgrad.transforms.batching import vmap
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    moved = [move_bdim_public(a, d, 0, size) for a, d in zip(args, dims, strict=True)]
    new_call, batch_consts = U.batch_jaxpr(call, [0] * len(args), size,
                                           [0] * len(call.outvars))

    def batched_rule(primals: list[Any], tangents: list[Any]) -> tuple[list, list]:
        real_p, real_t = primals[len(batch_consts) + num_consts:], \
            tangents[len(batch_consts) + num_consts:]
        out, out_dot = vmap(lambda p, t: tuple(map(list, jvp(list(p), list(t)))))(real_p, real_t)
        return list(out), list(out_dot)

    batched_rule.__name__ = f"vmap({fn_name(jvp)})"
    outs = custom_jvp_call_p.bind(*batch_consts, *moved, call=new_call, jvp=batched_rule,
                                  num_consts=0)
    return outs, [0] * len(outs)


custom_jvp_call_p.abstract_eval = _abstract
custom_jvp_call_p.impl = _run_impl
custom_jvp_call_p.jvp = _custom_jvp_jvp
custom_jvp_call_p.batch = _custom_jvp_batch


# ---------------------------------------------------------------------------- custom_vjp

class custom_vjp:  # noqa: N801  (JAX's name)
    """Wrap `fun` so that its reverse derivative is given by `defvjp(fwd, bwd)`. With
    `nondiff_argnums`, `fwd` takes every argument, `bwd(*nondiff_args, residuals, ct)` and
    returns cotangents for the other arguments only."""

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: tuple[int, ...] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None
        self.nondiff_argnums = tuple(nondiff_argnums)

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any]) -> None:
        """`fwd(*args) -> (out, residuals)`; `bwd(residuals, ct) -> tuple of arg cotangents`."""
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args: Any) -> Any:
        if self.fwd is None or self.bwd is None:  # defvjp sets both
            raise AttributeError(f"custom_vjp {fn_name(self.fun)} has no rule: call defvjp")
        fun, fwd, bwd = self.fun, self.fwd, self.bwd
        if self.nondiff_argnums:
            fun, fwd, bwd, args = _vjp_without_nondiff(fun, fwd, bwd, self.nondiff_argnums,
                                                       args)
        jaxpr, consts, leaves, in_tree, out_tree = _trace_fun(fun, args)

        def flat_fwd(primals: list[Any]) -> tuple[list, list, Any]:
            out, res = fwd(*tree_util.tree_unflatten(in_tree, primals))
            res_leaves, res_tree = tree_util.tree_flatten(res)
            return tree_util.tree_leaves(out), res_leaves, res_tree

        def flat_bwd(res_leaves: list[Any], res_tree: Any, cts: list[Any]) -> list[Any]:
            res = tree_util.tree_unflatten(res_tree, res_leaves)
            in_cts = bwd(res, tree_util.tree_unflatten(out_tree, cts))
            if not isinstance(in_cts, tuple) or len(in_cts) != len(args):
                raise TypeError(f"custom_vjp bwd {fn_name(bwd)} must return a tuple with one "
                                f"cotangent per argument ({len(args)})")
            return _ct_leaves(check_bwd_output(bwd, in_cts, args), args)

        flat_fwd.__name__, flat_bwd.__name__ = fn_name(fwd), fn_name(bwd)
        outs = custom_vjp_call_p.bind(*consts, *leaves, call=jaxpr, fwd=flat_fwd, bwd=flat_bwd,
                                      num_consts=len(consts))
        return tree_util.tree_unflatten(out_tree, outs)


def _vjp_without_nondiff(fun: Callable[..., Any], fwd: Any, bwd: Any, nums: tuple[int, ...],
                        args: tuple) -> tuple[Callable, Callable, Callable, tuple]:
    """`fun`, `fwd` and `bwd` as functions of the differentiated arguments only."""
    nums = tuple(sorted(n % len(args) for n in nums))
    nondiff = [args[n] for n in nums]
    diff = tuple(a for i, a in enumerate(args) if i not in nums)

    def fun_d(*d: Any) -> Any:
        return _call_with_nondiff(fun, nums, nondiff, d)

    def fwd_d(*d: Any) -> Any:
        return _call_with_nondiff(fwd, nums, nondiff, d)

    def bwd_d(res: Any, ct: Any) -> Any:
        return bwd(*nondiff, res, ct)

    fun_d.__name__, fwd_d.__name__, bwd_d.__name__ = fn_name(fun), fn_name(fwd), fn_name(bwd)
    return fun_d, fwd_d, bwd_d, diff


def _ct_leaves(in_cts: tuple, args: tuple) -> list[Any]:
    out: list[Any] = []
    for ct, arg in zip(in_cts, args, strict=True):
        arg_leaves = tree_util.tree_leaves(arg)
        if ct is None:
            out += [None] * len(arg_leaves)
        else:
            out += [as_tensor(c) for c in tree_util.tree_leaves(ct)]
    return out


def _custom_vjp_jvp(primals: list[Any], tangents: list[Any], *, call: Jaxpr, fwd: Any,
                    bwd: Any, num_consts: int) -> tuple[list, list]:
    args = primals[num_consts:]
    out, res, res_tree = fwd(list(args))
    dots = [zeros(p.shape, p.dtype) if t is None else t
            for p, t in zip(args, tangents[num_consts:], strict=True)]
    out_avals = tuple(as_tensor(o).aval for o in out)
    out_dots = custom_lin_p.bind(*res, *dots, bwd=bwd, res_tree=res_tree,
                                 num_res=len(res), out_avals=out_avals)
    return [as_tensor(o) for o in out], out_dots


def _custom_lin_impl(*arrays: Any, **params: Any) -> list[Any]:
    raise TypeError("forward-mode differentiation (jvp/jacfwd) of a custom_vjp function is not "
                    "possible: only its reverse rule is known. Use grad/vjp/jacrev, or define "
                    "the function with custom_jvp instead.")


def _custom_lin_transpose(cts: list[Any], *args: Any, bwd: Any, res_tree: Any, num_res: int,
                          out_avals: tuple) -> list[Any]:
    res = list(args[:num_res])
    in_cts = bwd(res, res_tree, list(cts))
    return [None] * num_res + [c if is_undefined(a) else None
                               for c, a in zip(in_cts, args[num_res:], strict=True)]


def _custom_vjp_batch(args: list[Any], dims: list[Any], *, call: Jaxpr, fwd: Any, bwd: Any,
                      num_consts: int) -> Any:
    """Batch the primal jaxpr and vmap fwd/bwd, so the custom rule survives under vmap."""
    from fgrad.core.prims import move_bdim_public
    from fgrad.transforms.batching import vmap
    size = next(a.shape[d] for a, d in zip(args, dims, strict=True) if d is not None)
    moved = [move_bdim_public(a, d, 0, size) for a, d in zip(args, dims, strict=True)]
    n_out = len(call.outvars)
    new_call, batch_consts = U.batch_jaxpr(call, [0] * len(args), size, [0] * n_out)
    tree_box: list[Any] = []

    def batched_fwd(primals: list[Any]) -> tuple[list, list, Any]:
        def one(*xs: Any) -> tuple[list, list]:
            out, res, res_tree = fwd(list(xs))
            tree_box.append(res_tree)
            return list(out), list(res)
        out, res = vmap(one)(*primals)
        return list(out), list(res), tree_box[-1]

    def batched_bwd(res: list[Any], res_tree: Any, cts: list[Any]) -> list[Any]:
        return list(vmap(lambda r, c: bwd(list(r), res_tree, list(c)))(res, cts))

    batched_fwd.__name__ = f"vmap({fn_name(fwd)})"
    batched_bwd.__name__ = f"vmap({fn_name(bwd)})"
    outs = custom_vjp_call_p.bind(*batch_consts, *moved, call=new_call, fwd=batched_fwd,
                                  bwd=batched_bwd, num_consts=len(batch_consts) + num_consts)
    return outs, [0] * n_out


custom_vjp_call_p.abstract_eval = _abstract
custom_vjp_call_p.impl = _run_impl
custom_vjp_call_p.jvp = _custom_vjp_jvp
custom_vjp_call_p.batch = _custom_vjp_batch
custom_lin_p.abstract_eval = lambda *avals, out_avals, **_: list(out_avals)
custom_lin_p.impl = _custom_lin_impl
custom_lin_p.jvp = lambda primals, tangents, **params: (_custom_lin_impl(), None)
custom_lin_p.transpose = _custom_lin_transpose
custom_lin_p.batch = lambda args, dims, **params: (_custom_lin_impl(), None)


# ---------------------------------------------------------------------------- checkpoint

P = ParamSpec("P")
R = TypeVar("R")


def checkpoint(fun: Callable[P, R], prevent_cse: bool = True,
               policy: Callable[..., bool] | None = None) -> Callable[P, R]:
    """`fun` with rematerialization: reverse mode stores only its inputs, plus the values a
    `policy` (see `fgrad.checkpoint_policies`) allows to save."""

    @functools.wraps(fun)
    def remat_fun(*args: Any) -> Any:
        jaxpr, consts, leaves, _, out_tree = _trace_fun(fun, args)
        outs = remat_p.bind(*consts, *leaves, call=jaxpr, policy=policy)
        return tree_util.tree_unflatten(out_tree, outs)

    return cast(Callable[P, R], remat_fun)


def _remat_jvp(primals: list[Any], tangents: list[Any], *, call: Jaxpr, policy: Any = None
               ) -> tuple[list, list]:
    nonzero = [t is not None for t in tangents]
    jj, jc, _ = U.jvp_jaxpr(call, nonzero, True)
    outs = remat_p.bind(*jc, *primals, *[t for t in tangents if t is not None], call=jj,
                        policy=policy)
    n = len(call.outvars)
    return outs[:n], outs[n:]


def _remat_partial_eval(trace: StagingTrace, args: list[Any], own: list[bool],
                        params: dict) -> list[Any]:
    from fgrad.transforms.remat_policies import policy_split
    call, policy = params["call"], params.get("policy")
    _, _, _, out_unknowns, _ = U.partial_eval_flat(call, own)
    unknown_outs = [v for v, u in zip(call.outvars, out_unknowns, strict=True) if u]
    saved, u_eqns = policy_split(call, own, unknown_outs, policy)
    known_outs = [v for v, u in zip(call.outvars, out_unknowns, strict=True) if not u]
    k_all = known_outs + saved
    known_call = Jaxpr([], call.invars, _live_eqns(call.eqns, k_all), k_all)
    with set_current_trace(trace.parent):
        k_outs = remat_p.bind(*[_known(a, trace) for a in args], call=known_call,
                              policy=policy) if k_all else []
    k_outs, k_saved = k_outs[:len(known_outs)], k_outs[len(known_outs):]
    u_call = Jaxpr([], list(call.invars) + saved, u_eqns, unknown_outs)
    u_outs = trace.stage(remat_p, list(args) + list(k_saved), dict(call=u_call, policy=policy)) \
        if unknown_outs else []
    k_it, u_it = iter(k_outs), iter(u_outs)
    return [next(u_it) if u else next(k_it) for u in out_unknowns]


def _known(a: Any, trace: StagingTrace) -> Any:
    from fgrad.core.trace import own_tracer
    return zeros(a.shape, a.dtype) if own_tracer(trace, a) else a


def _remat_transpose(cts: list[Any], *args: Any, call: Jaxpr, policy: Any = None) -> list[Any]:
    """Recompute the primal part of `call` now (partial evaluation), then transpose only its
    linear part, so primitives mixing primal and tangent work (a jvp'd scan) transpose."""
    linear = [is_undefined(a) for a in args]
    k_jaxpr, k_consts, u_jaxpr, out_unknowns, n_res = U.partial_eval_flat(call, linear)
    known = [a for a in args if not is_undefined(a)]
    k_outs = U.run(k_jaxpr, k_consts + known)
    residuals = k_outs[len(k_outs) - n_res:]
    n_lin = len(u_jaxpr.invars) - n_res
    tj, tc = U.transpose_jaxpr(u_jaxpr, [False] * n_res + [True] * n_lin)
    u_cts = [zeros(v.aval.shape, v.aval.dtype) if c is None else c
             for c, v, u in zip(cts, call.outvars, out_unknowns, strict=True) if u]
    outs = iter(U.run(tj, tc + residuals + u_cts))
    return [next(outs) if lin else None for lin in linear]


def _remat_batch(args: list[Any], dims: list[Any], *, call: Jaxpr, policy: Any = None) -> Any:
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    bj, bc = U.batch_jaxpr(call, dims, size, [0] * len(call.outvars))
    return remat_p.bind(*bc, *args, call=bj, policy=policy), [0] * len(call.outvars)


remat_p.abstract_eval = _abstract
remat_p.impl = _run_impl
remat_p.jvp = _remat_jvp
remat_p.partial_eval = _remat_partial_eval
remat_p.transpose = _remat_transpose
remat_p.batch = _remat_batch

__all__ = ["checkpoint", "custom_jvp", "custom_vjp"]
