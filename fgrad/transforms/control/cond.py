"""`lax.switch` / `lax.cond`: the `cond` primitive choosing one of several branch jaxprs.

Operands: the index (int32, clamped to the branches), then the operands every branch takes.
Under vmap a batched index turns the cond into a select over all branches' results.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from fgrad.core import tree_util
from fgrad.core.api_util import flatten_args, fn_name
from fgrad.core.dtypes import dtypes
from fgrad.core.ir import Jaxpr
from fgrad.core.primitive import Primitive
from fgrad.core.prims import is_undefined, move_bdim_public as move_bdim, select
from fgrad.core.staging import StagingTrace
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.core.trace import set_current_trace
from fgrad.transforms.control import cf_util as U

cond_p = Primitive("cond", multiple_results=True, linear=True)


def _abstract(index: Any, *ops: Any, branches: tuple[Jaxpr, ...]) -> list[Any]:
    if index.dtype != dtypes.int32 or index.shape != ():
        raise TypeError(f"cond/switch: the index must be an int32 scalar, got {index}")
    return branches[0].out_avals


def _impl(index: Any, *ops: Any, branches: tuple[Jaxpr, ...]) -> list[Any]:
    i = min(max(int(index), 0), len(branches) - 1)
    from fgrad.transforms.executables import numpy_executable
    return numpy_executable(branches[i])(*ops)


def _jvp(primals: list[Any], tangents: list[Any], *, branches: tuple[Jaxpr, ...]) -> Any:
    index, ops = primals[0], primals[1:]
    nonzero = [t is not None for t in tangents[1:]]
    built = [U.jvp_jaxpr(b, nonzero, True) for b in branches]
    jaxprs, consts = U.join_consts([j for j, _, _ in built], [c for _, c, _ in built])
    dots = [t for t in tangents[1:] if t is not None]
    outs = cond_p.bind(index, *consts, *ops, *dots, branches=tuple(jaxprs))
    k = len(branches[0].outvars)
    return outs[:k], outs[k:]


def _partial_eval(trace: StagingTrace, args: list[Any], own: list[bool], params: dict) -> Any:
    branches = params["branches"]
    if own[0]:
        return trace.stage(cond_p, args, params)
    unknowns = own[1:]
    first = [U.partial_eval_flat(b, unknowns) for b in branches]
    force = [any(f[3][i] for f in first) for i in range(len(branches[0].outvars))]
    split = [U.partial_eval_flat(b, unknowns, force) for b in branches]
    res_avals = [[v.aval for v in s[0].outvars[len(s[0].outvars) - s[4]:]] for s in split]
    known = [_pad_residuals(s[0], s[1], res_avals, i) for i, s in enumerate(split)]
    k_jaxprs, k_consts = U.join_consts([j for j, _ in known], [c for _, c in known])
    index, ops = args[0], args[1:]
    known_ops = [o for o, u in zip(ops, unknowns, strict=True) if not u]
    with set_current_trace(trace.parent):
        k_outs = cond_p.bind(index, *k_consts, *known_ops, branches=tuple(k_jaxprs))
    n_res = sum(len(r) for r in res_avals)
    n_known_out = len(k_outs) - n_res
    residuals = k_outs[n_known_out:]
    u_jaxprs = [_take_residuals(s[2], s[4], res_avals, i) for i, s in enumerate(split)]
    unknown_ops = [o for o, u in zip(ops, unknowns, strict=True) if u]
    u_outs = trace.stage(cond_p, [index] + residuals + unknown_ops,
                         dict(branches=tuple(u_jaxprs)))
    k_it, u_it = iter(k_outs[:n_known_out]), iter(u_outs)
    return [next(u_it) if f else next(k_it) for f in force]


def _pad_residuals(k_jaxpr: Jaxpr, consts: list[Any], res_avals: list[list[Any]],
                   i: int) -> tuple[Jaxpr, list[Any]]:
    """Known branch i outputs every branch's residual slots (zeros for the others)."""
    from fgrad.core.prims import zeros
    n_own = len(res_avals[i])
    n_out = len(k_jaxpr.outvars) - n_own

    def body(*xs: Any) -> list[Any]:
        outs = U.run(k_jaxpr, xs)
        padded = []
        for j, avals in enumerate(res_avals):
            if j == i:
                padded += outs[n_out:]
            else:
                padded += [zeros(a.shape, a.dtype) for a in avals]
        return outs[:n_out] + padded

    new, new_consts = U.trace_flat(body, k_jaxpr.in_avals, "cond-known")
    return new, new_consts + consts  # new's invars: new consts, k_jaxpr's consts, operands


def _take_residuals(u_jaxpr: Jaxpr, n_res: int, res_avals: list[list[Any]], i: int) -> Jaxpr:
    """Unknown branch i takes all branches' residuals and uses its own."""
    from fgrad.core.ir import Var
    before = [Var(a) for avals in res_avals[:i] for a in avals]
    after = [Var(a) for avals in res_avals[i + 1:] for a in avals]
    own, rest = u_jaxpr.invars[:n_res], u_jaxpr.invars[n_res:]
    return Jaxpr([], before + own + after + rest, u_jaxpr.eqns, u_jaxpr.outvars)


def _transpose(cts: list[Any], index: Any, *ops: Any, branches: tuple[Jaxpr, ...]) -> list:
    linear = [is_undefined(o) for o in ops]
    built = [U.transpose_jaxpr(b, linear) for b in branches]
    jaxprs, consts = U.join_consts([j for j, _ in built], [c for _, c in built])
    known = [o for o in ops if not is_undefined(o)]
    outs = iter(cond_p.bind(index, *consts, *known, *cts, branches=tuple(jaxprs)))
    return [None] + [next(outs) if lin else None for lin in linear]


def _batch(args: list[Any], dims: list[Any], *, branches: tuple[Jaxpr, ...]) -> Any:
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    index, ops = args[0], args[1:]
    if dims[0] is not None:
        return _batched_index_select(index, dims[0], ops, dims[1:], branches, size)
    n_out = len(branches[0].outvars)
    built = [U.batch_jaxpr(b, dims[1:], size, [0] * n_out) for b in branches]
    jaxprs, consts = U.join_consts([j for j, _ in built], [c for _, c in built])
    return cond_p.bind(index, *consts, *ops, branches=tuple(jaxprs)), [0] * n_out


def _batched_index_select(index: Any, idim: int, ops: list[Any], dims: list[Any],
                          branches: tuple[Jaxpr, ...], size: int) -> Any:
    """A batched index runs every branch and selects per element."""
    n_out = len(branches[0].outvars)
    results = []
    for b in branches:
        j, consts = U.batch_jaxpr(b, dims, size, [0] * n_out)
        results.append(U.run(j, consts + list(ops)))
    idx = move_bdim(index, idim, 0, size).maximum(0).minimum(len(branches) - 1)
    outs = []
    for k in range(n_out):
        acc = results[0][k]
        for i in range(1, len(branches)):
            r = results[i][k]
            mask = (idx == i).reshape((size,) + (1,) * (r.ndim - 1)).expand(r.shape)
            acc = select(mask, r, acc)
        outs.append(acc)
    return outs, [0] * n_out


cond_p.abstract_eval = _abstract
cond_p.impl = _impl
cond_p.jvp = _jvp
cond_p.partial_eval = _partial_eval
cond_p.transpose = _transpose
cond_p.batch = _batch


# ---------------------------------------------------------------------------- public API

def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """Apply `branches[index](*operands)`; index is clamped into range. All branches must
    return the same structure, shapes and dtypes."""
    if not branches:
        raise ValueError("switch needs at least one branch")
    leaves, in_tree, _ = flatten_args(operands, branches[0])
    index = as_tensor(index)
    if not (index.dtype.is_int or index.dtype == dtypes.bool) or index.shape != ():
        raise TypeError(f"switch/cond: the index/predicate must be a scalar int or bool, got "
                        f"{index.dtype.name} {index.shape}")
    traced, out_trees = [], []
    for br in branches:
        def flat(*xs: Any, br: Callable[..., Any] = br) -> list[Any]:
            out = br(*tree_util.tree_unflatten(in_tree, list(xs)))
            out_leaves, tree = tree_util.tree_flatten(out)
            out_trees.append(tree)
            return [as_tensor(o) for o in out_leaves]
        traced.append(U.trace_flat(flat, [x.aval for x in leaves], f"branch {fn_name(br)}"))
    _check_branches(branches, traced, out_trees)
    jaxprs, consts = U.join_consts([j for j, _ in traced], [c for _, c in traced])
    outs = cond_p.bind(index.cast(dtypes.int32), *consts, *leaves, branches=tuple(jaxprs))
    return tree_util.tree_unflatten(out_trees[0], outs)


def _check_branches(branches: Sequence[Any], traced: list[Any], trees: list[Any]) -> None:
    first = [str(a) for a in traced[0][0].out_avals]
    for br, (j, _), tree in zip(branches, traced, trees, strict=True):
        if tree != trees[0] or [str(a) for a in j.out_avals] != first:
            raise TypeError(f"cond/switch branches must return the same structure, shapes and "
                            f"dtypes: {fn_name(branches[0])} returns {trees[0]} {first} but "
                            f"{fn_name(br)} returns {tree} {[str(a) for a in j.out_avals]}")


def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any],
         *operands: Any) -> Any:
    """`true_fun(*operands)` if pred else `false_fun(*operands)`, traceable under jit/vmap."""
    pred = as_tensor(pred)
    if pred.shape != ():
        raise TypeError(f"cond: the predicate must be a scalar, got shape {pred.shape}; use "
                        f"Tensor.where for elementwise choices")
    return switch(pred.cast(dtypes.bool).cast(dtypes.int32), [false_fun, true_fun], *operands)


__all__ = ["cond", "cond_p", "switch", "Tensor"]
