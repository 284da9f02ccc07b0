"""`fgrad.debug`: print and call back into Python from eager code, `jit`, `vmap`, `grad` and
control-flow bodies, in program order.

    fgrad.debug.print("step {i}: loss {loss:.4f}", i=i, loss=loss)
    fgrad.debug.callback(lambda x: history.append(x), x)

Both bind the effectful primitive `debug_callback`: staging keeps it although it has no
outputs, jitted programs run it as a host callback at its place among the kernels (every
backend; inside scan/while/cond bodies too), `vmap` calls back once per batch element, and
differentiation calls back with the primal values only (the backward pass does not repeat
it). Values arrive as NumPy arrays.
"""
from __future__ import annotations

import builtins
from typing import Any, Callable

import numpy as np

from fgrad.core import tree_util
from fgrad.core.primitive import Primitive
from fgrad.core.prims._util import move_bdim
from fgrad.core.tensor import Tensor, as_tensor

__all__ = ["callback", "debug_callback_p", "print"]

debug_callback_p = Primitive("debug_callback", multiple_results=True)
# Effectful: dead-code removal keeps its equations although they have no outputs.
debug_callback_p.effectful = True  # type: ignore[attr-defined]


def _abstract(*avals: Any, callback: Callable[..., None]) -> list[Any]:
    return []


def _impl(*arrays: Any, callback: Callable[..., None]) -> list[Any]:
    callback(*[np.asarray(a) for a in arrays])
    return []


def _jvp(primals: list[Any], tangents: list[Any], *, callback: Callable[..., None]
         ) -> tuple[list[Any], list[Any]]:
    debug_callback_p.bind(*primals, callback=callback)
    return [], []


def _per_element(callback: Callable[..., None], batched: list[bool], size: int
                 ) -> Callable[..., None]:
    def call(*arrays: np.ndarray) -> None:
        for i in range(size):
            callback(*[a[i] if b else a for a, b in zip(arrays, batched)])
    return call


def _batch(args: list[Any], dims: list[int | None], *, callback: Callable[..., None]
           ) -> tuple[list[Any], list[Any]]:
    size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
    moved = [x if d is None else move_bdim(x, d, 0, size) for x, d in zip(args, dims)]
    batched = [d is not None for d in dims]
    debug_callback_p.bind(*moved, callback=_per_element(callback, batched, size))
    return [], []


debug_callback_p.abstract_eval = _abstract
debug_callback_p.impl = _impl
debug_callback_p.jvp = _jvp
debug_callback_p.batch = _batch
for _backend in ("llvm", "opencl"):
    debug_callback_p.lowerings[_backend] = (
        "host callback: the program's step list calls back into Python at this point, "
        "in order with the kernels")


def callback(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Call `fn(*args, **kwargs)` with concrete values (NumPy arrays in place of Tensors)
    wherever this line runs: eagerly, in a jitted program, per element under `vmap`."""
    leaves, treedef = tree_util.tree_flatten((args, kwargs))
    is_tensor = [isinstance(x, Tensor) or isinstance(x, np.ndarray) for x in leaves]
    operands = [as_tensor(x) for x, t in zip(leaves, is_tensor) if t]

    def call(*arrays: np.ndarray) -> None:
        values = iter(arrays)
        full = [next(values) if t else x for x, t in zip(leaves, is_tensor)]
        a, kw = tree_util.tree_unflatten(treedef, full)
        fn(*a, **kw)

    debug_callback_p.bind(*operands, callback=call)


def print(fmt: str, *args: Any, **kwargs: Any) -> None:  # noqa: A001
    """`print(fmt.format(*args, **kwargs))` with concrete values, like `jax.debug.print`.

    Format fields apply to the values, so `{x:.3f}` works for scalars; arrays print as
    NumPy prints them.
    """
    def show(*a: Any, **kw: Any) -> None:
        builtins.print(fmt.format(*[_printable(x) for x in a],
                                  **{k: _printable(v) for k, v in kw.items()}))
    callback(show, *args, **kwargs)


def _printable(x: Any) -> Any:
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return x.item() if x.dtype.kind in "biuf" else float(x)
    return x
