"""Helpers for the public transformations: flattening arguments, static args, make_jaxpr."""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from fgrad.core import tree_util
from fgrad.core.ir import ClosedJaxpr
from fgrad.core.staging import Origin, trace_to_jaxpr
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.core.trace import current_trace


def fn_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def to_tensor_leaf(x: Any, what: str) -> Tensor:
    """A pytree leaf as a Tensor, or a TypeError saying which argument was bad."""
    if isinstance(x, Tensor):
        return x
    try:
        return as_tensor(x)
    except (TypeError, ValueError) as err:
        dtype = getattr(x, "dtype", None)
        if isinstance(dtype, np.dtype):
            raise TypeError(f"{what} is a NumPy value of dtype {dtype}, which fgrad does not "
                            f"support ({err}); convert it first, e.g. x.astype(np.float32) "
                            f"(complex values: pass real and imaginary parts separately)"
                            ) from err
        raise TypeError(f"{what} is a {type(x).__name__}, which is not a Tensor or array-like "
                        f"value; mark it static (static_argnums) or pass Tensors") from err


def split_static(args: Sequence[Any], static_argnums: Sequence[int]
                 ) -> tuple[list[Any], dict[int, Any]]:
    """Separate positional arguments into dynamic ones and {position: static value}."""
    n = len(args)
    static = {i % n if n else i: args[i] for i in static_argnums if -n <= i < n}
    dynamic = [a for i, a in enumerate(args) if i not in static]
    return dynamic, static


def merge_static(dynamic: Sequence[Any], static: dict[int, Any]) -> list[Any]:
    out, it = [], iter(dynamic)
    for i in range(len(dynamic) + len(static)):
        out.append(static[i] if i in static else next(it))
    return out


def flatten_args(args: Sequence[Any], fn: Callable[..., Any]
                 ) -> tuple[list[Tensor], Any, list[Origin]]:
    """Flatten a tuple of argument pytrees into Tensor leaves with their origins."""
    pairs, treedef = tree_util.tree_flatten_with_path(tuple(args))
    name = fn_name(fn)
    leaves, origins = [], []
    for path, leaf in pairs:
        desc = _arg_desc(path)
        leaves.append(to_tensor_leaf(leaf, f"argument {desc} of {name}"))
        origins.append(Origin(name, desc))
    return leaves, treedef, origins


def _arg_desc(path: Sequence[Any]) -> str:
    if not path:
        return "?"
    first = getattr(path[0], "idx", getattr(path[0], "key", path[0]))
    return f"#{first}" + tree_util.keystr(tuple(path[1:]))


def make_jaxpr(fn: Callable[..., Any], static_argnums: int | Sequence[int] = ()
               ) -> Callable[..., ClosedJaxpr]:
    """`make_jaxpr(f)(*args)`: the ClosedJaxpr that `f` stages for these argument shapes."""
    static_argnums = (static_argnums,) if isinstance(static_argnums, int) else static_argnums

    @functools.wraps(fn)
    def staged(*args: Any, **kwargs: Any) -> ClosedJaxpr:
        dynamic, static = split_static(args, static_argnums)
        leaves, treedef, origins = flatten_args(dynamic, fn)

        def flat_fn(*tracers: Any) -> tuple[list[Any], Any]:
            rebuilt = tree_util.tree_unflatten(treedef, list(tracers))
            out = fn(*merge_static(list(rebuilt), static), **kwargs)
            out_leaves, out_tree = tree_util.tree_flatten(out)
            return [to_tensor_leaf(o, "an output") for o in out_leaves], out_tree

        closed, out_tree = trace_to_jaxpr(flat_fn, [x.aval for x in leaves], current_trace(),
                                          "make_jaxpr", origins)
        closed.out_tree = out_tree  # type: ignore[attr-defined]  # extra, for callers
        return closed
    return staged
