"""`lax.while_loop` and `lax.fori_loop`: the `while` primitive.

Operands: cond consts, body consts, carry. Forward-mode differentiable; reverse mode raises
an error pointing at `scan`. Under vmap a batched predicate keeps looping until every element
is done, freezing the finished ones with a select.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from fgrad.core import tree_util
from fgrad.core.api_util import flatten_args, fn_name
from fgrad.core.dtypes import dtypes
from fgrad.core.ir import Jaxpr, ShapedArray
from fgrad.core.primitive import Primitive
from fgrad.core.prims import move_bdim_public as move_bdim
from fgrad.core.prims import reduce_max, select, zeros
from fgrad.core.staging import StagingTrace
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.transforms.control import cf_util as U

while_p = Primitive("while", multiple_results=True)


def _split(ops: list[Any], ncc: int, nbc: int) -> tuple[list, list, list]:
    return ops[:ncc], ops[ncc:ncc + nbc], ops[ncc + nbc:]


def _abstract(*avals: Any, cond: Jaxpr, body: Jaxpr, cond_nconsts: int,
              body_nconsts: int) -> list[Any]:
    return list(avals[cond_nconsts + body_nconsts:])


def while_loop_eval(ops: list[Any], cond: Jaxpr, body: Jaxpr, cond_nconsts: int,
                    body_nconsts: int) -> list[Any]:
    """The reference semantics, binding cond and body on the current trace."""
    cc, bc, carry = _split(list(ops), cond_nconsts, body_nconsts)
    while bool(U.run(cond, cc + carry)[0]):
        carry = U.run(body, bc + carry)
    return carry


def _impl(*arrays: Any, **params: Any) -> list[Any]:
    outs = while_loop_eval([Tensor._wrap(a) for a in arrays], **params)
    return [o._data for o in outs]


def _jvp(primals: list[Any], tangents: list[Any], *, cond: Jaxpr, body: Jaxpr,
         cond_nconsts: int, body_nconsts: int) -> Any:
    ncc, nbc = cond_nconsts, body_nconsts
    nz = [t is not None for t in tangents]
    carry_nz = nz[ncc + nbc:]
    for _ in range(len(carry_nz) + 1):
        _, _, out_nz = U.jvp_jaxpr(body, nz[ncc:ncc + nbc] + carry_nz, False)
        new = [a or b for a, b in zip(carry_nz, out_nz, strict=True)]
        if new == carry_nz:
            break
        carry_nz = new
    mask = nz[ncc:ncc + nbc] + carry_nz
    jb, jconsts, _ = U.jvp_jaxpr(body, mask, carry_nz)
    cc, bc, carry = _split(primals, ncc, nbc)
    dots = [t if t is not None else zeros(p.shape, p.dtype) for p, t in zip(primals, tangents)]
    bc_dot = [d for d, m in zip(dots[ncc:ncc + nbc], mask[:nbc]) if m]
    k_dot = [d for d, m in zip(dots[ncc + nbc:], carry_nz) if m]
    # jvp body: (jconsts, bc, carry, bc_dot, k_dot) -> (carry, k_dot); reorder for while.
    v = jb.invars
    nj, nb, nk = len(jconsts), nbc, len(carry)
    new_body = Jaxpr([], v[:nj] + v[nj:nj + nb] + v[nj + nb + nk:nj + nb + nk + len(bc_dot)]
                     + v[nj + nb:nj + nb + nk] + v[nj + nb + nk + len(bc_dot):], jb.eqns,
                     jb.outvars)
    from fgrad.core.ir import Var
    new_cond = Jaxpr([], cond.invars + [Var(d.aval) for d in k_dot], cond.eqns, cond.outvars)
    outs = while_p.bind(*cc, *jconsts, *bc, *bc_dot, *carry, *k_dot, cond=new_cond,
                        body=new_body, cond_nconsts=ncc,
                        body_nconsts=nj + nbc + len(bc_dot))
    kd = iter(outs[len(carry):])
    return outs[:len(carry)], [next(kd) if m else None for m in carry_nz]


def _partial_eval(trace: StagingTrace, args: list[Any], own: list[bool], params: dict) -> Any:
    raise TypeError("Reverse-mode differentiation (grad/vjp) does not support "
                    "fgrad.lax.while_loop, because the number of iterations is unknown "
                    "before it runs. Use fgrad.lax.scan with a fixed length, or "
                    "fgrad.lax.fori_loop with Python-int bounds (which lowers to scan); "
                    "forward mode (jvp/jacfwd) works with while_loop.")


def _batch(args: list[Any], dims: list[Any], *, cond: Jaxpr, body: Jaxpr,
           cond_nconsts: int, body_nconsts: int) -> Any:
    ncc, nbc = cond_nconsts, body_nconsts
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    cc, bc, carry = _split(args, ncc, nbc)
    cc_d, bc_d, _ = _split(list(dims), ncc, nbc)
    carry = [move_bdim(c, d, 0, size) for c, d in zip(carry, dims[ncc + nbc:])]
    nk = len(carry)
    bj, bjc = U.batch_jaxpr(body, bc_d + [0] * nk, size, [0] * nk)
    pred_batched = U.batched_outputs(cond, cc_d + [0] * nk, size)[0]
    if not pred_batched:
        cj, cjc = U.batch_jaxpr(cond, cc_d + [0] * nk, size, [None])
        outs = while_p.bind(*cjc, *cc, *bjc, *bc, *carry, cond=cj, body=bj,
                            cond_nconsts=len(cjc) + ncc, body_nconsts=len(bjc) + nbc)
        return outs, [0] * nk
    cj, cjc = U.batch_jaxpr(cond, cc_d + [0] * nk, size, [0])
    any_cond, any_consts = U.trace_flat(lambda *v: [reduce_max(U.run(cj, v)[0], (0,))],
                                        cj.in_avals, "while-any")
    masked, m_consts = _masked_body(cj, bj, len(cjc) + ncc, len(bjc) + nbc)
    n_c = len(any_consts) + len(cjc) + ncc
    outs = while_p.bind(*any_consts, *cjc, *cc, *m_consts, *cjc, *cc, *bjc, *bc, *carry,
                        cond=any_cond, body=masked, cond_nconsts=n_c,
                        body_nconsts=len(m_consts) + len(cjc) + ncc + len(bjc) + nbc)
    return outs, [0] * nk


def _masked_body(cj: Jaxpr, bj: Jaxpr, ncc: int, nbc: int) -> tuple[Jaxpr, list[Any]]:
    """Body that only advances the elements whose predicate is still true."""
    def step(*vals: Any) -> list[Any]:
        cc, bc, carry = list(vals[:ncc]), list(vals[ncc:ncc + nbc]), list(vals[ncc + nbc:])
        pred = U.run(cj, cc + carry)[0]
        new = U.run(bj, bc + carry)
        out = []
        for old, nw in zip(carry, new, strict=True):
            mask = pred.reshape(pred.shape + (1,) * (nw.ndim - 1)).expand(nw.shape)
            out.append(select(mask, nw, old))
        return out
    avals = cj.in_avals[:ncc] + bj.in_avals[:nbc] + bj.in_avals[nbc:]
    return U.trace_flat(step, avals, "while-masked")


while_p.abstract_eval = _abstract
while_p.impl = _impl
while_p.jvp = _jvp
while_p.partial_eval = _partial_eval
while_p.batch = _batch


# ---------------------------------------------------------------------------- public API

def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any],
               init_val: Any) -> Any:
    """Repeat `val = body_fun(val)` while `cond_fun(val)`; traceable under jit and vmap."""
    leaves, tree, _ = flatten_args((init_val,), body_fun)
    avals = [x.aval for x in leaves]

    def flat_cond(*vals: Any) -> list[Any]:
        pred = as_tensor(cond_fun(tree_util.tree_unflatten(tree, list(vals))[0]))
        if pred.shape != ():
            raise TypeError(f"while_loop: {fn_name(cond_fun)} must return a scalar bool, got "
                            f"shape {pred.shape}")
        return [pred.cast(dtypes.bool)]

    def flat_body(*vals: Any) -> list[Any]:
        out = body_fun(tree_util.tree_unflatten(tree, list(vals))[0])
        out_leaves, out_tree = tree_util.tree_flatten(out)
        if out_tree != tree_util.tree_structure(init_val):
            raise TypeError(f"while_loop: {fn_name(body_fun)} returned {out_tree}, but the "
                            f"loop value is {tree_util.tree_structure(init_val)}")
        return [as_tensor(o) for o in out_leaves]

    cj, cc = U.trace_flat(flat_cond, avals, f"while cond {fn_name(cond_fun)}")
    bj, bc = U.trace_flat(flat_body, avals, f"while body {fn_name(body_fun)}")
    for i, (a, v) in enumerate(zip(avals, bj.outvars)):
        if a != v.aval:
            raise TypeError(f"while_loop: {fn_name(body_fun)} changes leaf {i} from {a} to "
                            f"{v.aval}; the loop value must keep its shape and dtype")
    outs = while_p.bind(*cc, *bc, *leaves, cond=cj, body=bj, cond_nconsts=len(cc),
                        body_nconsts=len(bc))
    return tree_util.tree_unflatten(tree, outs)[0]


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any], init_val: Any,
              *, unroll: int | bool | None = None) -> Any:
    """`for i in range(lower, upper): val = body_fun(i, val)`. With Python-int bounds it is
    a scan (reverse-differentiable); with traced bounds a while_loop. `unroll` is JAX's
    performance hint (validated, without effect); as in JAX it needs static bounds."""
    from fgrad.transforms.control.scan import check_unroll, scan
    if unroll is not None:
        check_unroll("fori_loop", unroll)
    for what, bound in (("lower", lower), ("upper", upper)):
        if isinstance(bound, bool) or not (isinstance(bound, (int, np.integer)) or (
                isinstance(bound, Tensor) and bound.dtype.is_int and bound.ndim == 0)):
            raise TypeError(f"fori_loop: {what} must be an int or a 0-d integer Tensor, got "
                            f"{bound!r}; the loop index is an integer (use int(...) or "
                            f"round the bound yourself)")
    lower = int(lower) if isinstance(lower, np.integer) else lower
    upper = int(upper) if isinstance(upper, np.integer) else upper
    if isinstance(lower, int) and isinstance(upper, int):
        def step(carry: Any, _: Any) -> tuple[Any, None]:
            i, val = carry
            return (i + 1, body_fun(i, val)), None
        n = max(upper - lower, 0)
        (_, val), _ = scan(step, (Tensor(lower, dtype=dtypes.int32), init_val), None, length=n)
        return val
    if unroll is not None:
        raise ValueError("fori_loop: can only use `unroll` if the loop bounds are statically "
                         "known (Python ints); drop unroll= for traced bounds")
    lo, hi = as_tensor(lower).cast(dtypes.int32), as_tensor(upper).cast(dtypes.int32)
    _, _, val = while_loop(lambda c: c[0] < c[1],
                           lambda c: (c[0] + 1, c[1], body_fun(c[0], c[2])), (lo, hi, init_val))
    return val


__all__ = ["fori_loop", "while_loop", "while_p", "ShapedArray"]
