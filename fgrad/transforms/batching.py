"""vmap: the batching trace. A BatchTracer is a value with one extra axis, `bdim` (or None).

Each primitive's `batch` rule turns one op on a batch of values into one op on the stacked
values — there is no Python loop over the batch.
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Sequence, TypeVar, cast

from typing_extensions import ParamSpec

from fgrad.core import tree_util
from fgrad.core.api_util import flatten_args, fn_name
from fgrad.core.ir import ShapedArray
from fgrad.core.prims import move_bdim_public as move_bdim
from fgrad.core.tensor import ConcretizationError, Tensor, Tracer
from fgrad.core.trace import Trace, current_trace, own_tracer, set_current_trace


class BatchTracer(Tracer):
    """A value batched along axis `bdim` of `val` (None: the same for every element)."""

    __slots__ = ("val", "bdim")

    def __init__(self, trace: "BatchTrace", val: Any, bdim: int | None):
        self._trace, self.val, self.bdim = trace, val, bdim

    @property
    def aval(self) -> ShapedArray:
        shape = list(self.val.shape)
        if self.bdim is not None:
            del shape[self.bdim]
        return ShapedArray(tuple(shape), self.val.dtype)

    def _concrete(self, why: str) -> Any:
        assert isinstance(self._trace, BatchTrace)
        raise ConcretizationError(
            f"{why} needs one concrete value, but under vmap this Tensor holds a batch of "
            f"{self._trace.axis_size} values. Use Tensor.where or fgrad.lax.cond (which "
            f"batches) instead of Python control flow on it.")


_rule_axis = threading.local()


def batching_axis_name() -> Any:
    """The axis name of the vmap whose batch rule is running now (None outside one, or for an
    unnamed vmap). Rules that batch a sub-jaxpr under a new BatchTrace (jit, scan, cond,
    while, custom_vjp) give it this name, so a collective inside the sub-jaxpr reduces over
    the same named axis."""
    return getattr(_rule_axis, "name", None)


class BatchTrace(Trace):
    """Applies batch rules; `axis_size` is the length of the mapped axis."""

    name = "vmap"

    def __init__(self, parent: Trace, axis_size: int, axis_name: Any = None):
        self.parent, self.axis_size, self.axis_name = parent, axis_size, axis_name

    def split(self, x: Any) -> tuple[Any, int | None]:
        if own_tracer(self, x):
            return x.val, x.bdim
        return x, None

    def process_primitive(self, prim: Any, args: Sequence[Any], params: dict) -> list[Any]:
        pairs = [self.split(x) for x in args]
        vals = [v for v, _ in pairs]
        dims = [d for _, d in pairs]
        named = getattr(prim, "named_axis_rule", None)
        if named is not None and self.axis_name is not None \
                and params.get("axis_name") == self.axis_name:
            return [named(self, vals, dims, params)]   # a collective over this axis
        assert self.parent is not None, "a BatchTrace is made under a current trace"
        with set_current_trace(self.parent):
            if all(d is None for d in dims):
                out = prim.bind(*vals, **params)
                return list(out) if prim.multiple_results else [out]
            outer, _rule_axis.name = batching_axis_name(), self.axis_name
            try:
                out, out_dim = prim.rule("batch")(vals, dims, **params)
            finally:
                _rule_axis.name = outer
        if not prim.multiple_results:
            out, out_dim = [out], [out_dim]
        return [v if d is None else BatchTracer(self, v, d)
                for v, d in zip(out, out_dim, strict=True)]


def _broadcast_prefix(spec: Any, tree: Any, what: str) -> list[Any]:
    """Expand an in_axes/out_axes prefix tree to one entry per leaf of `tree`."""
    if spec is None or isinstance(spec, int):
        return [spec] * len(tree_util.tree_leaves(tree))
    if isinstance(tree, (list, tuple)) and isinstance(spec, (list, tuple)):
        if len(spec) != len(tree):
            raise ValueError(f"vmap {what} {spec!r} has {len(spec)} entries but there are "
                             f"{len(tree)} values")
        return [a for s, t in zip(spec, tree, strict=True)
                for a in _broadcast_prefix(s, t, what)]
    if isinstance(tree, dict) and isinstance(spec, dict):
        if sorted(spec) != sorted(tree):
            raise ValueError(f"vmap {what} keys {sorted(spec)} differ from {sorted(tree)}")
        return [a for k in sorted(tree) for a in _broadcast_prefix(spec[k], tree[k], what)]
    leaves, treedef = tree_util.tree_flatten(tree)
    spec_leaves, spec_def = tree_util.tree_flatten(spec, is_leaf=lambda x: x is None)
    if len(spec_leaves) == len(leaves):
        return spec_leaves
    raise ValueError(f"vmap {what} {spec!r} is not a prefix of the value structure {treedef}")


def _axis_size(fn: Callable[..., Any], leaves: list[Tensor], axes: list[int | None],
               axis_size: int | None) -> int:
    sizes = {}
    for i, (x, a) in enumerate(zip(leaves, axes, strict=True)):
        if a is None:
            continue
        if not -x.ndim <= a < max(x.ndim, 1) or x.ndim == 0:
            raise ValueError(f"vmap of {fn_name(fn)}: in_axes {a} is out of range for an "
                             f"argument of shape {x.shape}")
        sizes[i] = x.shape[a]
    distinct = set(sizes.values())
    if len(distinct) > 1:
        detail = ", ".join(f"leaf {i}: {s}" for i, s in sizes.items())
        raise ValueError(f"vmap of {fn_name(fn)}: mapped axes have different sizes ({detail})")
    if not distinct:
        if axis_size is None:
            raise ValueError(f"vmap of {fn_name(fn)}: no argument is mapped (all in_axes are "
                             f"None); pass axis_size=")
        return axis_size
    size = distinct.pop()
    if axis_size is not None and axis_size != size:
        raise ValueError(f"vmap: axis_size={axis_size} but the mapped axes have size {size}")
    return size


P = ParamSpec("P")
R = TypeVar("R")


def vmap(fn: Callable[P, R], in_axes: Any = 0, out_axes: Any = 0,
         axis_size: int | None = None, axis_name: Any = None) -> Callable[P, R]:
    """Vectorize `fn` over axis `in_axes` of its arguments (pytree prefixes, None = broadcast),
    stacking outputs along `out_axes`. `axis_name` names the mapped axis for the collectives
    `lax.psum/pmean/pmax/pmin/all_gather/axis_index` inside `fn`."""

    @functools.wraps(fn)
    def batched(*args: Any) -> Any:
        spec = tuple(in_axes) if isinstance(in_axes, list) else in_axes
        if isinstance(spec, tuple) and len(spec) != len(args):
            raise ValueError(f"vmap in_axes has {len(spec)} entries but {fn_name(fn)} got "
                             f"{len(args)} positional arguments")
        axes = _broadcast_prefix(spec, args, "in_axes")
        leaves, in_tree, _ = flatten_args(args, fn)
        size = _axis_size(fn, leaves, axes, axis_size)
        axes = [None if a is None else a % max(x.ndim, 1)
                for a, x in zip(axes, leaves, strict=True)]
        trace = BatchTrace(current_trace(), size, axis_name)
        raw = tree_util.tree_leaves(tuple(args))
        ins = [_unmapped(r, x) if a is None else BatchTracer(trace, x, a)
               for r, x, a in zip(raw, leaves, axes, strict=True)]
        with set_current_trace(trace):
            out = cast(Callable[..., Any], fn)(*tree_util.tree_unflatten(in_tree, ins))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        o_axes = _broadcast_prefix(out_axes, out, "out_axes")
        results = [_finish(trace, o, a, size) for o, a in zip(out_leaves, o_axes, strict=True)]
        return tree_util.tree_unflatten(out_tree, results)

    return cast(Callable[P, R], batched)


def _unmapped(raw: Any, leaf: Tensor) -> Any:
    """An unmapped argument: Python scalars stay weakly typed, as in eager code."""
    return raw if isinstance(raw, (bool, int, float)) else leaf


def _finish(trace: BatchTrace, out: Any, out_axis: int | None, size: int) -> Any:
    if not isinstance(out, Tensor):
        out = Tensor(out)
    val, bdim = trace.split(out)
    if out_axis is None:
        if bdim is not None:
            raise ValueError("vmap: out_axes=None but the output depends on the mapped axis")
        return val
    ndim = val.ndim + (1 if bdim is None else 0)
    if not -ndim <= out_axis < ndim:
        raise ValueError(f"vmap: out_axes {out_axis} is out of range for an output that has "
                         f"{ndim} dimensions once batched; use -{ndim} <= out_axes < {ndim}")
    return move_bdim(val, bdim, out_axis % ndim, size)
