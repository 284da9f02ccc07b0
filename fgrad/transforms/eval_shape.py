"""`eval_shape`: the output shapes and dtypes of a function, found by tracing (no compute)."""
from __future__ import annotations

from typing import Any, Callable

from fgrad.core import tree_util
from fgrad.core.api_util import fn_name, to_tensor_leaf
from fgrad.core.dtypes import to_dtype
from fgrad.core.ir import ShapedArray
from fgrad.core.staging import trace_to_jaxpr
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.core.trace import current_trace

__all__ = ["eval_shape"]


def _aval(x: Any, where: str) -> ShapedArray:
    if isinstance(x, Tensor):
        return x.aval
    if isinstance(x, ShapedArray):
        return x
    if hasattr(x, "shape") and hasattr(x, "dtype"):   # NumPy arrays, jax.ShapeDtypeStruct
        return ShapedArray(tuple(int(d) for d in x.shape), to_dtype(str(x.dtype)))
    try:
        return as_tensor(x).aval
    except (TypeError, ValueError):
        raise TypeError(f"eval_shape: {where} is a {type(x).__name__}; pass Tensors, arrays, "
                        f"Python numbers or ShapedArray(shape, dtype) placeholders") from None


def eval_shape(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The pytree of `ShapedArray`s (shape, dtype) that `fn(*args, **kwargs)` would return.

    Arguments may be Tensors, NumPy arrays, numbers or abstract `ShapedArray(shape, dtype)`
    values (anything with `.shape` and `.dtype`); nothing is computed or allocated.
    """
    pairs, treedef = tree_util.tree_flatten_with_path((args, kwargs))
    name = fn_name(fn)
    avals = [_aval(x, f"argument {tree_util.keystr(p)} of {name}") for p, x in pairs]

    def flat_fn(*tracers: Any) -> tuple[list[Any], Any]:
        call_args, call_kwargs = tree_util.tree_unflatten(treedef, list(tracers))
        out = fn(*call_args, **call_kwargs)
        leaves, out_tree = tree_util.tree_flatten(out)
        return [to_tensor_leaf(o, f"an output of {name}") for o in leaves], out_tree

    closed, out_tree = trace_to_jaxpr(flat_fn, avals, current_trace(), f"eval_shape({name})")
    outs = [v.aval for v in closed.jaxpr.outvars]
    return tree_util.tree_unflatten(out_tree, outs)


