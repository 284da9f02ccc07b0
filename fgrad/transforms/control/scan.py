"""`lax.scan` and `lax.fori_loop` (static bounds): the `scan` primitive.

Operands: consts, initial carry, xs (stacked on axis 0). The body jaxpr maps
(consts, carry, x) -> (carry, y); outputs are the final carry and the stacked ys.
Reverse mode partially evaluates the body: a known scan saves residuals as extra ys, an
unknown (linear) scan consumes them, and its transpose runs the body backwards.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from fgrad.core import tree_util
from fgrad.core.api_util import flatten_args, fn_name
from fgrad.core.ir import Jaxpr, ShapedArray
from fgrad.core.primitive import Primitive
from fgrad.core.prims import concatenate, is_undefined, move_bdim_public as move_bdim
from fgrad.core.prims import reshape, rev, slice_, zeros
from fgrad.core.staging import StagingTrace
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.core.trace import set_current_trace
from fgrad.transforms.control import cf_util as U

scan_p = Primitive("scan", multiple_results=True, linear=True)


def _split(ops: list[Any], nc: int, nk: int) -> tuple[list, list, list]:
    return ops[:nc], ops[nc:nc + nk], ops[nc + nk:]


def _abstract(*avals: Any, body: Jaxpr, num_consts: int, num_carry: int, length: int,
              reverse: bool) -> list[Any]:
    carry = avals[num_consts:num_consts + num_carry]
    if [str(a) for a in carry] != [str(v.aval) for v in body.outvars[:num_carry]]:
        raise TypeError(f"scan: the body must return a carry with the same shapes/dtypes as "
                        f"init: got {[str(v.aval) for v in body.outvars[:num_carry]]} for "
                        f"init {[str(a) for a in carry]}")
    ys = [ShapedArray((length,) + v.aval.shape, v.aval.dtype) for v in body.outvars[num_carry:]]
    return list(carry) + ys


def _index(x: Any, i: int) -> Any:
    start = (i,) + (0,) * (x.ndim - 1)
    limit = (i + 1,) + tuple(x.shape[1:])
    return reshape(slice_(x, start, limit), x.shape[1:])


def _stack(ys: list[Any], aval: ShapedArray, length: int) -> Any:
    if not ys:
        return zeros((length,) + aval.shape, aval.dtype)
    return concatenate([reshape(y, (1,) + y.shape) for y in ys], 0)


def scan_loop(ops: list[Any], body: Jaxpr, num_consts: int, num_carry: int, length: int,
              reverse: bool) -> list[Any]:
    """The reference semantics: a Python loop binding the body on the current trace."""
    consts, carry, xs = _split(list(ops), num_consts, num_carry)
    ys_acc: list[list[Any]] = [[] for _ in body.outvars[num_carry:]]
    order = range(length - 1, -1, -1) if reverse else range(length)
    for i in order:
        outs = U.run(body, consts + carry + [_index(x, i) for x in xs])
        carry = outs[:num_carry]
        for acc, y in zip(ys_acc, outs[num_carry:], strict=True):
            acc.append(y)
    if reverse:
        ys_acc = [acc[::-1] for acc in ys_acc]
    avals = [v.aval for v in body.outvars[num_carry:]]
    return carry + [_stack(acc, a, length) for acc, a in zip(ys_acc, avals, strict=True)]


def _impl(*arrays: Any, **params: Any) -> list[Any]:
    outs = scan_loop([Tensor._wrap(a) for a in arrays], **params)
    return [o._data for o in outs]


def _jvp(primals: list[Any], tangents: list[Any], *, body: Jaxpr, num_consts: int,
         num_carry: int, length: int, reverse: bool) -> Any:
    nc, nk = num_consts, num_carry
    nz = [t is not None for t in tangents]
    carry_nz = _carry_fixpoint(body, nz, nc, nk)
    mask = nz[:nc] + carry_nz + nz[nc + nk:]
    new_body, y_nz = _jvp_body(body, mask, nc, nk)
    consts, carry, xs = _split(primals, nc, nk)
    dots = [t if t is not None else zeros(p.shape, p.dtype) for p, t in zip(primals, tangents)]
    c_dot, k_dot, x_dot = (_keep(d, m) for d, m in zip(_split(dots, nc, nk),
                                                       _split(mask, nc, nk)))
    jb, jconsts = new_body
    ops = jconsts + consts + c_dot + carry + k_dot + xs + x_dot
    outs = scan_p.bind(*ops, body=jb, num_consts=len(jconsts) + nc + len(c_dot),
                       num_carry=nk + len(k_dot), length=length, reverse=reverse)
    n_y = len(body.outvars) - nk
    carry_out, kd = outs[:nk], iter(outs[nk:nk + len(k_dot)])
    ys, yd = outs[nk + len(k_dot):nk + len(k_dot) + n_y], iter(outs[nk + len(k_dot) + n_y:])
    out_dots = [next(kd) if m else None for m in carry_nz] + [next(yd) if m else None
                                                               for m in y_nz]
    return carry_out + ys, out_dots


def _keep(xs: list[Any], mask: list[bool]) -> list[Any]:
    return [x for x, m in zip(xs, mask, strict=True) if m]


def _carry_fixpoint(body: Jaxpr, nz: list[bool], nc: int, nk: int) -> list[bool]:
    carry_nz = nz[nc:nc + nk]
    for _ in range(nk + 1):
        _, _, out_nz = U.jvp_jaxpr(body, nz[:nc] + carry_nz + nz[nc + nk:], False)
        new = [a or b for a, b in zip(carry_nz, out_nz[:nk], strict=True)]
        if new == carry_nz:
            break
        carry_nz = new
    return carry_nz


def _jvp_body(body: Jaxpr, mask: list[bool], nc: int, nk: int
              ) -> tuple[tuple[Jaxpr, list[Any]], list[bool]]:
    """Body in scan layout: (consts, c_dot, carry, k_dot, x, x_dot) -> (carry, k_dot, y, y_dot)."""
    from fgrad.transforms.jvp import jvp_flat
    avals = body.in_avals
    c_m, k_m, x_m = _split(mask, nc, nk)
    c_av, k_av, x_av = _split(avals, nc, nk)
    layout = c_av + _keep(c_av, c_m) + k_av + _keep(k_av, k_m) + x_av + _keep(x_av, x_m)
    box: list[list[bool]] = []

    def new_body(*vals: Any) -> list[Any]:
        it = iter(vals)
        groups = []
        for av, m in ((c_av, c_m), (k_av, k_m), (x_av, x_m)):
            prim = [next(it) for _ in av]
            dot_vals = [next(it) for _ in _keep(av, m)]
            d_it = iter(dot_vals)
            groups.append((prim, [next(d_it) if mm else None for mm in m]))
        primals = [p for g in groups for p in g[0]]
        tangents = [t for g in groups for t in g[1]]
        outs, dots = jvp_flat(lambda *a: U.run(body, a), primals, tangents)
        k_dots = [zeros(o.shape, o.dtype) if d is None else d
                  for o, d, m in zip(outs[:nk], dots[:nk], k_m, strict=True) if m]
        y_nz = [d is not None for d in dots[nk:]]
        box.append(y_nz)
        y_dots = [d for d in dots[nk:] if d is not None]
        return outs[:nk] + k_dots + outs[nk:] + y_dots

    return U.trace_flat(new_body, layout, "scan-jvp"), box[0]


def _partial_eval(trace: StagingTrace, args: list[Any], own: list[bool], params: dict) -> Any:
    body, nc, nk = params["body"], params["num_consts"], params["num_carry"]
    length, reverse = params["length"], params["reverse"]
    c_u, k_u, x_u = _split(list(own), nc, nk)
    for _ in range(nk + 1):
        out_u = U.partial_eval_flat(body, c_u + k_u + x_u)[3]
        new = [a or b for a, b in zip(k_u, out_u[:nk], strict=True)]
        if new == k_u:
            break
        k_u = new
    n_y = len(body.outvars) - nk
    k_body, k_consts, u_body, out_u, n_res = U.partial_eval_flat(
        body, c_u + k_u + x_u, k_u + [False] * n_y)
    consts, carry, xs = _split(args, nc, nk)
    known = [_keep(g, [not u for u in m]) for g, m in ((consts, c_u), (carry, k_u), (xs, x_u))]
    with set_current_trace(trace.parent):
        k_outs = scan_p.bind(*k_consts, *known[0], *known[1], *known[2], body=k_body,
                             num_consts=len(k_consts) + len(known[0]),
                             num_carry=len(known[1]), length=length, reverse=reverse)
    n_kc = len(known[1])
    y_known = [not u for u in out_u[nk:]]
    n_ky = sum(y_known)
    residuals = k_outs[n_kc + n_ky:]
    unknown = [_keep(g, m) for g, m in ((consts, c_u), (carry, k_u), (xs, x_u))]
    v = u_body.invars
    res_v, rest = v[:n_res], v[n_res:]
    n_uc, n_uk = len(unknown[0]), len(unknown[1])
    uc, uk, ux = rest[:n_uc], rest[n_uc:n_uc + n_uk], rest[n_uc + n_uk:]
    u_scan_body = Jaxpr([], uc + uk + res_v + ux, u_body.eqns, u_body.outvars)
    u_outs = trace.stage(scan_p, unknown[0] + unknown[1] + residuals + unknown[2],
                         dict(body=u_scan_body, num_consts=len(uc), num_carry=len(uk),
                              length=length, reverse=reverse))
    k_it, u_it = iter(k_outs[:n_kc + n_ky]), iter(u_outs)
    return [next(u_it) if u else next(k_it) for u in out_u]


def _transpose(cts: list[Any], *ops: Any, body: Jaxpr, num_consts: int, num_carry: int,
               length: int, reverse: bool) -> list[Any]:
    nc, nk = num_consts, num_carry
    linear = [is_undefined(o) for o in ops]
    c_l, k_l, x_l = _split(linear, nc, nk)
    linear = c_l + [True] * nk + x_l  # a known carry init (a zero tangent) is still linear
    consts, _, xs = _split(list(ops), nc, nk)
    ck = _keep(consts, [not m for m in c_l])
    xk = _keep(xs, [not m for m in x_l])
    ct_carry = [c if c is not None else zeros(v.aval.shape, v.aval.dtype)
                for c, v in zip(cts[:nk], body.outvars[:nk])]
    ct_ys = [c if c is not None else zeros((length,) + v.aval.shape, v.aval.dtype)
             for c, v in zip(cts[nk:], body.outvars[nk:])]
    tj, tconsts = U.transpose_jaxpr(body, linear)
    cl_avals = [o.aval for o, m in zip(consts, c_l) if m]
    acc0 = [zeros(a.shape, a.dtype) for a in cl_avals]
    t_body = _transposed_body(tj, tconsts, ck, xk, cl_avals, ct_carry, ct_ys, nk, body)
    outs = scan_p.bind(*tconsts, *ck, *acc0, *ct_carry, *xk, *ct_ys, body=t_body,
                       num_consts=len(tconsts) + len(ck), num_carry=len(acc0) + nk,
                       length=length, reverse=not reverse)
    n_acc = len(acc0)
    ct_cl, ct_init, ct_xl = outs[:n_acc], outs[n_acc:n_acc + nk], outs[n_acc + nk:]
    cl_it, xl_it = iter(ct_cl), iter(ct_xl)
    return ([next(cl_it) if m else None for m in c_l] + ct_init
            + [next(xl_it) if m else None for m in x_l])


def _transposed_body(tj: Jaxpr, tconsts: list[Any], ck: list[Any], xk: list[Any],
                     cl_avals: list[Any], ct_carry: list[Any], ct_ys: list[Any], nk: int,
                     body: Jaxpr) -> Jaxpr:
    """(tconsts, ck, acc, ct_carry, xk_i, ct_y_i) -> (acc + ct_cl_i, ct_carry_prev, ct_xl_i)."""
    n_tc, n_ck, n_acc = len(tconsts), len(ck), len(cl_avals)
    layout = ([t.aval for t in tconsts] + [c.aval for c in ck] + cl_avals
              + [c.aval for c in ct_carry] + [ShapedArray(x.shape[1:], x.dtype) for x in xk]
              + [v.aval for v in body.outvars[nk:]])

    def t_body(*vals: Any) -> list[Any]:
        tc = list(vals[:n_tc])
        known_c = list(vals[n_tc:n_tc + n_ck])
        acc = list(vals[n_tc + n_ck:n_tc + n_ck + n_acc])
        rest = list(vals[n_tc + n_ck + n_acc:])
        ct_k, x_i, ct_y = rest[:nk], rest[nk:nk + len(xk)], rest[nk + len(xk):]
        lin_cts = U.run(tj, tc + known_c + x_i + ct_k + ct_y)
        ct_cl = lin_cts[:n_acc]
        ct_k_prev, ct_xl = lin_cts[n_acc:n_acc + nk], lin_cts[n_acc + nk:]
        return [a + c for a, c in zip(acc, ct_cl)] + ct_k_prev + ct_xl

    jaxpr, consts = U.trace_flat(t_body, layout, "scan-transpose")
    assert not consts, "transposed scan body captured constants"
    return jaxpr


def _batch(args: list[Any], dims: list[Any], *, body: Jaxpr, num_consts: int,
           num_carry: int, length: int, reverse: bool) -> Any:
    nc, nk = num_consts, num_carry
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    consts, carry, xs = _split(args, nc, nk)
    c_d, _, x_d = _split(list(dims), nc, nk)
    carry = [move_bdim(c, d, 0, size) for c, d in zip(carry, dims[nc:nc + nk])]
    xs = [x if d is None else move_bdim(x, d, 1, size) for x, d in zip(xs, x_d)]
    body_dims = c_d + [0] * nk + [None if d is None else 0 for d in x_d]
    n_y = len(body.outvars) - nk
    bj, bconsts = U.batch_jaxpr(body, body_dims, size, [0] * (nk + n_y))
    outs = scan_p.bind(*bconsts, *consts, *carry, *xs, body=bj, num_consts=len(bconsts) + nc,
                       num_carry=nk, length=length, reverse=reverse)
    return outs, [0] * nk + [1] * n_y


scan_p.abstract_eval = _abstract
scan_p.impl = _impl
scan_p.jvp = _jvp
scan_p.partial_eval = _partial_eval
scan_p.transpose = _transpose
scan_p.batch = _batch


# ---------------------------------------------------------------------------- public API

def check_unroll(op: str, unroll: Any) -> None:
    """JAX's check of the `unroll` hint: a bool or a non-negative int. fgrad validates it
    and otherwise ignores it (the backends choose how a loop runs)."""
    if isinstance(unroll, (bool, np.bool_)):
        return
    if not isinstance(unroll, (int, np.integer)):
        raise TypeError(f"{op}: unroll must be a bool or a non-negative int, got "
                        f"{type(unroll).__name__} {unroll!r}")
    if unroll < 0:
        raise ValueError(f"{op}: `unroll` must be a `bool` or a non-negative `int`, got "
                         f"{unroll}")


def scan(f: Callable[..., Any], init: Any, xs: Any = None, length: int | None = None,
         reverse: bool = False, unroll: int | bool = 1,
         _split_transpose: bool = False) -> tuple[Any, Any]:
    """Loop `carry, y = f(carry, x)` over the leading axis of `xs`; returns (carry, stacked
    ys). Differentiable in both modes, batchable, and staged as one primitive under jit.
    `unroll` (a bool or a non-negative int) and `_split_transpose` are JAX's performance
    hints: validated, and otherwise without effect."""
    check_unroll("scan", unroll)
    init_leaves, init_tree, _ = flatten_args((init,), f)
    x_leaves, x_tree, _ = flatten_args((xs,), f)
    lengths = {x.shape[0] for x in x_leaves if x.ndim}
    if any(x.ndim == 0 for x in x_leaves):
        raise ValueError("scan: every leaf of xs needs a leading axis to scan over")
    if length is None:
        if len(lengths) != 1:
            raise ValueError(f"scan: xs leaves have leading sizes {sorted(lengths)}; they must "
                             f"agree (or pass length= when xs is None)")
        length = lengths.pop()
    elif lengths and lengths != {length}:
        raise ValueError(f"scan: length={length} but xs have leading sizes {sorted(lengths)}")
    out_box: list[Any] = []

    def flat_body(*vals: Any) -> list[Any]:
        carry = tree_util.tree_unflatten(init_tree, list(vals[:len(init_leaves)]))[0]
        x = tree_util.tree_unflatten(x_tree, list(vals[len(init_leaves):]))[0]
        res = f(carry, x)
        if not (isinstance(res, tuple) and len(res) == 2):
            raise TypeError(f"scan: {fn_name(f)} must return a pair (carry, y)")
        c_leaves, c_tree = tree_util.tree_flatten(res[0])
        y_leaves, y_tree = tree_util.tree_flatten(res[1])
        if c_tree != tree_util.tree_structure(init):
            raise TypeError(f"scan: {fn_name(f)} returned carry {c_tree}, but init is "
                            f"{tree_util.tree_structure(init)}")
        out_box.append(y_tree)
        return [as_tensor(c) for c in c_leaves] + [as_tensor(y) for y in y_leaves]

    avals = [x.aval for x in init_leaves] + [ShapedArray(x.shape[1:], x.dtype) for x in x_leaves]
    body, consts = U.trace_flat(flat_body, avals, f"scan body {fn_name(f)}")
    _check_carry(f, init_leaves, body)
    outs = scan_p.bind(*consts, *init_leaves, *x_leaves, body=body, num_consts=len(consts),
                       num_carry=len(init_leaves), length=int(length), reverse=bool(reverse))
    nk = len(init_leaves)
    carry = tree_util.tree_unflatten(init_tree, outs[:nk])[0]
    return carry, tree_util.tree_unflatten(out_box[0], outs[nk:])


def _check_carry(f: Callable[..., Any], init: list[Any], body: Jaxpr) -> None:
    for i, (x, v) in enumerate(zip(init, body.outvars)):
        if x.shape != v.aval.shape or x.dtype != v.aval.dtype:
            raise TypeError(f"scan: {fn_name(f)} changes carry leaf {i} from {x.aval} to "
                            f"{v.aval}; the carry must keep its shape and dtype (cast init)")


__all__ = ["scan", "scan_p", "scan_loop", "rev"]
