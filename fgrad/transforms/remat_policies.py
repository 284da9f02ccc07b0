"""Rematerialization policies for `checkpoint(f, policy=...)`, `checkpoint_name`, and
`print_saved_residuals` (JAX's names).

By default a checkpointed function saves only its inputs for the backward pass and recomputes
everything else. A policy `policy(prim, *in_avals, **params) -> bool` marks equations whose
outputs may be saved instead (when the backward pass needs them):

    fgrad.checkpoint(f, policy=fgrad.checkpoint_policies.dots_saveable)
    x = fgrad.checkpoint_name(x, "attn_out")        # inside f
    fgrad.checkpoint(f, policy=fgrad.checkpoint_policies.save_only_these_names("attn_out"))
"""
from __future__ import annotations

import types
from typing import Any, Callable

from fgrad.core import tree_util
from fgrad.core.api_util import flatten_args, fn_name
from fgrad.core.ir import Eqn, Jaxpr, Var
from fgrad.core.primitive import Primitive
from fgrad.core.staging import _live_eqns

__all__ = ["checkpoint_name", "checkpoint_policies", "policy_split", "print_saved_residuals"]

Policy = Callable[..., bool]

# ---------------------------------------------------------------------------- checkpoint_name

name_p = Primitive("checkpoint_name", linear=True)
name_p.abstract_eval = lambda aval, *, name: aval
name_p.impl = lambda x, *, name: x
name_p.jvp = lambda primals, tangents, *, name: (name_p.bind(primals[0], name=name),
                                                 tangents[0])
name_p.transpose = lambda ct, x, *, name: [ct]
name_p.batch = lambda args, dims, *, name: (name_p.bind(args[0], name=name), dims[0])
for _backend in ("llvm", "opencl"):
    name_p.lowerings[_backend] = "identity (expanded away before scheduling)"


def checkpoint_name(x: Any, name: str) -> Any:
    """`x` (a pytree) tagged with `name`, so name-based checkpoint policies can save it."""
    from fgrad.core.tensor import Tensor
    return tree_util.tree_map(lambda t: name_p.bind(t, name=name) if isinstance(t, Tensor)
                              else t, x)


# ---------------------------------------------------------------------------- policies

def everything_saveable(prim: Any, *avals: Any, **params: Any) -> bool:
    """Save every intermediate (no recomputation)."""
    return True


def nothing_saveable(prim: Any, *avals: Any, **params: Any) -> bool:
    """Save only the inputs (recompute everything): the default."""
    return False


def dots_saveable(prim: Any, *avals: Any, **params: Any) -> bool:
    """Save the results of matrix products (dot_general)."""
    return prim.name == "dot_general"


def dots_with_no_batch_dims_saveable(prim: Any, *avals: Any, **params: Any) -> bool:
    """Save the results of matrix products without batch dimensions."""
    if prim.name != "dot_general":
        return False
    (_, (lhs_batch, _)) = params["dimension_numbers"]
    return not lhs_batch


def save_only_these_names(*names: str) -> Policy:
    """Save the values tagged with `checkpoint_name(x, name)` for these names only."""
    def policy(prim: Any, *avals: Any, **params: Any) -> bool:
        return prim is name_p and params["name"] in names
    return policy


def save_any_names_but_these(*names: str) -> Policy:
    """Save every value tagged with `checkpoint_name` except these names."""
    def policy(prim: Any, *avals: Any, **params: Any) -> bool:
        return prim is name_p and params["name"] not in names
    return policy


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=everything_saveable, nothing_saveable=nothing_saveable,
    dots_saveable=dots_saveable, checkpoint_dots=dots_saveable,
    dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    save_only_these_names=save_only_these_names,
    save_any_names_but_these=save_any_names_but_these)


# ---------------------------------------------------------------------------- partial eval

def _known_eqns(call: Jaxpr, unknown_in: list[bool]) -> set[int]:
    unknown = {id(v) for v, u in zip(call.invars, unknown_in) if u}
    known: set[int] = set()
    for e in call.eqns:
        if any(isinstance(a, Var) and id(a) in unknown for a in e.inputs):
            unknown.update(id(v) for v in e.outvars)
        else:
            known.add(id(e))
    return known


def policy_split(call: Jaxpr, unknown_in: list[bool], unknown_outs: list[Var],
                 policy: Policy | None) -> tuple[list[Var], list[Eqn]]:
    """The known values to save for the unknown side (per `policy`) and the equations that
    side still runs (recomputing the rest from the inputs and the saved values)."""
    live = _live_eqns(call.eqns, unknown_outs)
    if policy is None:
        return [], live
    known = _known_eqns(call, unknown_in)
    saved: list[Var] = []
    for e in live:
        if id(e) in known and policy(e.primitive, *[a.aval for a in e.inputs], **e.params):
            saved.extend(e.outvars)
    cut = {id(v) for v in saved}
    rest = _live_eqns([e for e in call.eqns if not any(id(v) in cut for v in e.outvars)],
                      unknown_outs)
    used = {id(a) for e in rest for a in e.inputs} | {id(v) for v in unknown_outs}
    saved = [v for v in saved if id(v) in used]
    return saved, rest


# ---------------------------------------------------------------------------- inspection

def print_saved_residuals(fn: Callable[..., Any], *args: Any) -> list[str]:
    """Print (and return) one line per value that reverse mode saves for `fn(*args)`:
    its dtype and shape and where it comes from (an argument, or the first equation of the
    backward pass that reads it)."""
    from fgrad.transforms.transpose import linearize_flat
    leaves, in_tree, _ = flatten_args(args, fn)

    def flat(*xs: Any) -> list[Any]:
        out = fn(*tree_util.tree_unflatten(in_tree, list(xs)))
        return tree_util.tree_leaves(out)

    _, lin = linearize_flat(flat, leaves, [x.dtype.is_float for x in leaves])
    readers: dict[int, Eqn] = {}
    for e in lin.jaxpr.eqns:
        for a in e.inputs:
            readers.setdefault(id(a), e)
    lines = []
    for v, c in zip(lin.jaxpr.constvars, lin.consts):
        where = next((f"from argument {i} of {fn_name(fn)}" for i, x in enumerate(leaves)
                      if c is x), None)
        if where is None:
            reader = readers.get(id(v))
            src = f" ({reader.source})" if reader is not None and reader.source is not None \
                else ""
            where = f"read by {reader.primitive.name}{src}" if reader is not None else "output"
        lines.append(f"{c.dtype.short}{list(c.shape)} {where}")
    print("\n".join(lines))
    return lines
