"""Jaxpr-level function transforms: `linear_transpose` and `closure_convert`.

`linear_transpose(f, *primals)` stages `f` at the primals' shapes and dtypes and walks the
jaxpr backwards with each primitive's transpose rule (the machinery reverse mode uses,
fgrad/transforms/transpose.py), so `f` must be linear in its inputs: a composition of
linear primitives and of multiplications by values that do not depend on the inputs.

`closure_convert(f, *example_args)` stages `f` and hoists the traced values it closes over
(those of an enclosing grad, jvp, vmap or jit: JAX's rule; concrete arrays stay closed over)
into explicit arguments, so `f` can go where a closure may not carry them, e.g. into a
`custom_vjp` rule.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from fgrad.core import dtypes as _dt
from fgrad.core import tree_util
from fgrad.core.api_util import fn_name
from fgrad.core.ir import ClosedJaxpr, Jaxpr, ShapedArray, Var
from fgrad.core.prims import zeros
from fgrad.core.staging import eval_jaxpr, trace_to_jaxpr
from fgrad.core.tensor import Tensor, Tracer, as_tensor
from fgrad.core.trace import current_trace
from fgrad.transforms.transpose import backward_pass

__all__ = ["closure_convert", "linear_transpose"]


def _aval(x: Any, what: str) -> ShapedArray:
    """The shape and dtype of a Tensor, a ShapeDtypeStruct, an array or a Python scalar."""
    if isinstance(x, Tensor):
        return x.aval
    if isinstance(x, ShapedArray):
        return x
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return ShapedArray(tuple(int(d) for d in x.shape), _dt.to_dtype(x.dtype))
    try:
        return as_tensor(x).aval
    except (TypeError, ValueError) as err:
        raise TypeError(f"{what} must be an array, a Tensor, a Python scalar or a "
                        f"ShapeDtypeStruct, got {type(x).__name__}") from err


def _stage(fun: Callable[..., Any], args: Sequence[Any], who: str
           ) -> tuple[ClosedJaxpr, Any, Any, list[ShapedArray]]:
    """(closed jaxpr, input tree, output tree, input avals) of `fun` at these arguments."""
    leaves, in_tree = tree_util.tree_flatten(tuple(args))
    avals = [_aval(x, f"{who}: argument leaf {i} of {fn_name(fun)}")
             for i, x in enumerate(leaves)]

    def flat_fn(*tracers: Any) -> tuple[list[Any], Any]:
        out = fun(*tree_util.tree_unflatten(in_tree, list(tracers)))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        return [as_tensor(o) for o in out_leaves], out_tree

    closed, out_tree = trace_to_jaxpr(flat_fn, avals, current_trace(), who)
    return closed, in_tree, out_tree, avals


_BILINEAR = ("mul", "dot_general")  # linear in each operand, not in both at once


def _check_linear(jaxpr: Jaxpr, name: str) -> None:
    """Raise TypeError at the first equation that is not linear in the function's inputs
    (a primitive without a transpose rule applied to them, or a product of two of them)."""
    linear = {id(v) for v in jaxpr.invars}
    for eqn in jaxpr.eqns:
        flags = [isinstance(a, Var) and id(a) in linear for a in eqn.inputs]
        if not any(flags):
            continue
        prim = eqn.primitive
        if prim.transpose is None or (prim.name in _BILINEAR and sum(flags) > 1) or (
                prim.name == "div" and flags[1]):
            at = f" at {eqn.source}" if eqn.source else ""
            raise TypeError(f"linear_transpose: {name} is not linear in its inputs: "
                            f"`{prim.name}`{at} is applied to values that depend on them in a "
                            f"non-linear way. Only linear functions can be transposed; use "
                            f"fgrad.vjp for the others")
        linear.update(id(v) for v in eqn.outvars)


def linear_transpose(fun: Callable[..., Any], *primals: Any, reduce_axes: Any = ()
                     ) -> Callable[[Any], tuple[Any, ...]]:
    """JAX's `linear_transpose`: the transpose of the linear function `fun`, evaluated at
    the shapes and dtypes of `primals` (their values are not used; ShapeDtypeStructs do).

    The result maps an output cotangent (a pytree like `fun`'s output) to a tuple of input
    cotangents like `primals`. Only floating-point inputs and outputs are supported; a
    `fun` that is not linear is a TypeError naming the first non-linear operation."""
    closed, in_tree, out_tree, in_avals = _stage(fun, primals, "linear_transpose")
    for a in in_avals + [v.aval for v in closed.jaxpr.outvars]:
        if not a.dtype.is_float:
            raise TypeError(f"linear_transpose only supports float -> float functions, but "
                            f"{fn_name(fun)} has a {a} input or output")
    _check_linear(closed.jaxpr, fn_name(fun))
    out_avals = [v.aval for v in closed.jaxpr.outvars]

    def transposed_fun(out_cotangent: Any) -> tuple[Any, ...]:
        ct_leaves, ct_tree = tree_util.tree_flatten(out_cotangent)
        if ct_tree != out_tree:
            raise TypeError(f"linear_transpose: the cotangent's tree {ct_tree} does not match "
                            f"the output of {fn_name(fun)}, {out_tree}")
        cts = []
        for c, a in zip(ct_leaves, out_avals):
            t = c if isinstance(c, Tensor) else as_tensor(c, a.dtype)
            if t.shape != a.shape or t.dtype != a.dtype:
                raise TypeError(f"linear_transpose: cotangent type does not match the output "
                                f"of {fn_name(fun)}: expected {a}, got {t.aval}")
            cts.append(t)
        in_cts = backward_pass(closed.jaxpr, closed.consts, cts)
        full = [zeros(a.shape, a.dtype) if c is None else c for c, a in zip(in_cts, in_avals)]
        return tuple(tree_util.tree_unflatten(in_tree, full))

    return transposed_fun


def _maybe_perturbed(x: Any) -> bool:
    """Whether a closed-over value may carry a derivative (JAX's rule: a traced floating
    value); those are hoisted, everything else stays closed over."""
    return isinstance(x, Tracer) and x.dtype.is_float


def closure_convert(fun: Callable[..., Any], *example_args: Any
                    ) -> tuple[Callable[..., Any], list[Any]]:
    """JAX's `closure_convert`: `(converted_fun, hoisted_consts)` where
    `converted_fun(*args, *hoisted_consts) == fun(*args)` for arguments shaped like
    `example_args`. The hoisted constants are the traced floating values `fun` closes
    over; `fun` is staged once, so its Python control flow is fixed at these shapes."""
    closed, in_tree, out_tree, _ = _stage(fun, example_args, "closure_convert")
    consts = list(closed.consts)
    hoist = [_maybe_perturbed(c) for c in consts]
    kept = [c for c, h in zip(consts, hoist) if not h]
    hoisted = [c for c, h in zip(consts, hoist) if h]

    def converted_fun(*args_and_consts: Any) -> Any:
        n_args = len(args_and_consts) - len(hoisted)
        if n_args < 0:
            raise TypeError(f"closure_convert({fn_name(fun)}): the converted function takes "
                            f"the arguments followed by {len(hoisted)} hoisted constants, got "
                            f"{len(args_and_consts)} values")
        args, given = args_and_consts[:n_args], iter(args_and_consts[n_args:])
        own = iter(kept)
        merged = [next(given) if h else next(own) for h in hoist]
        leaves, tree = tree_util.tree_flatten(tuple(args))
        if tree != in_tree:
            raise TypeError(f"closure_convert({fn_name(fun)}): the arguments' tree {tree} "
                            f"differs from the example arguments' {in_tree}")
        outs = eval_jaxpr(closed.jaxpr, merged, [as_tensor(x) for x in leaves])
        return tree_util.tree_unflatten(out_tree, outs)

    converted_fun.__name__ = f"closure_converted_{fn_name(fun)}"
    return converted_fun, hoisted
