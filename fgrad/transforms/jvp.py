"""Forward mode: the JVP trace. A JVPTracer carries a primal and a tangent (None = zero).

`process_primitive` looks up the primitive's `jvp` rule and runs it with the parent trace
current, so primal work happens beneath this transformation.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from fgrad.core import tree_util
from fgrad.core.api_util import flatten_args, fn_name
from fgrad.core.ir import ShapedArray
from fgrad.core.prims import zeros
from fgrad.core.tensor import Tensor, Tracer
from fgrad.core.trace import Trace, current_trace, own_tracer, set_current_trace


class JVPTracer(Tracer):
    """A primal value with its tangent (None means a symbolic zero)."""

    __slots__ = ("primal", "tangent")

    def __init__(self, trace: "JVPTrace", primal: Any, tangent: Any):
        self._trace, self.primal, self.tangent = trace, primal, tangent

    @property
    def aval(self) -> ShapedArray:
        return self.primal.aval

    def _concrete(self, why: str) -> Any:
        return self.primal._concrete(why)


class JVPTrace(Trace):
    """Pushes tangents forward through each primitive's jvp rule."""

    name = "jvp"

    def __init__(self, parent: Trace):
        self.parent = parent

    def split(self, x: Any) -> tuple[Any, Any]:
        if own_tracer(self, x):
            return x.primal, x.tangent
        return x, None

    def process_primitive(self, prim: Any, args: Sequence[Any], params: dict) -> list[Any]:
        pairs = [self.split(x) for x in args]
        primals = [p for p, _ in pairs]
        tangents = [t for _, t in pairs]
        assert self.parent is not None, "a JVPTrace is made under a current trace"
        with set_current_trace(self.parent):
            if all(t is None for t in tangents):
                out = prim.bind(*primals, **params)
                return list(out) if prim.multiple_results else [out]
            out, out_dot = prim.rule("jvp")(primals, tangents, **params)
        if not prim.multiple_results:
            out, out_dot = [out], [out_dot]
        return [self.wrap(p, t) for p, t in zip(out, out_dot, strict=True)]

    def wrap(self, primal: Any, tangent: Any) -> Any:
        if tangent is None or not primal.dtype.is_float:
            return primal
        return JVPTracer(self, primal, tangent)


def zeros_like(x: Any) -> Any:
    """Zeros with the shape and dtype of `x`."""
    return zeros(x.shape, x.dtype)


def jvp_flat(fn: Callable[..., list[Any]], primals: Sequence[Any],
             tangents: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """Run `fn(*tracers) -> list of Tensors` with tangents; returns (outs, out_tangents)."""
    trace = JVPTrace(current_trace())
    ins = [x if t is None else JVPTracer(trace, x, t)
           for x, t in zip(primals, tangents, strict=True)]
    with set_current_trace(trace):
        outs = fn(*ins)
    pairs = [trace.split(o) if isinstance(o, Tensor) else (o, None) for o in outs]
    return [p for p, _ in pairs], [t for _, t in pairs]


def _check_tangent(p: Tensor, t: Tensor, i: int) -> None:
    if p.shape != t.shape or p.dtype != t.dtype:
        raise ValueError(f"jvp: tangent {i} has shape/dtype {t.shape} {t.dtype.name}, but its "
                         f"primal has {p.shape} {p.dtype.name}; they must match")


def jvp(fn: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]
        ) -> tuple[Any, Any]:
    """Evaluate `fn(*primals)` and its directional derivative along `tangents` (pytrees)."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp: primals and tangents must be tuples or lists of arguments")
    p_leaves, p_tree, _ = flatten_args(primals, fn)
    t_leaves, t_tree, _ = flatten_args(tangents, fn)
    if p_tree != t_tree:
        raise ValueError(f"jvp: primals {p_tree} and tangents {t_tree} differ in structure")
    for i, (p, t) in enumerate(zip(p_leaves, t_leaves, strict=True)):
        _check_tangent(p, t, i)
    out_tree_box: list[Any] = []

    def flat_fn(*xs: Any) -> list[Any]:
        out = fn(*tree_util.tree_unflatten(p_tree, list(xs)))
        leaves, tree = tree_util.tree_flatten(out)
        out_tree_box.append(tree)
        return leaves

    t_in = [t if p.dtype.is_float else None for p, t in zip(p_leaves, t_leaves, strict=True)]
    outs, out_dots = jvp_flat(flat_fn, p_leaves, t_in)
    out_dots = [zeros_like(o) if t is None else t for o, t in zip(outs, out_dots, strict=True)]
    tree = out_tree_box[0]
    return tree_util.tree_unflatten(tree, outs), tree_util.tree_unflatten(tree, out_dots)


__all__ = ["JVPTrace", "JVPTracer", "jvp", "jvp_flat", "fn_name"]
