"""`pure_callback`: call a pure Python (NumPy, SciPy, ...) function from traced code.

    y = fgrad.pure_callback(scipy_fn, fgrad.ShapeDtypeStruct(x.shape, x.dtype), x)

It binds the primitive `pure_callback`, whose abstract rule returns the declared result
shapes and dtypes, so it stages under `jit` (every backend runs it as a host step at its
place among the kernels, like `fgrad.debug.callback`) and inside control-flow bodies. The
callback gets NumPy arrays (the argument pytrees rebuilt) and returns arrays matching
`result_shape_dtypes` (shapes must match exactly; dtypes are cast to the declared ones).

Being pure, it may be called fewer times than written (its unused results are dropped, two
identical calls merged) or more. Under `vmap` `vmap_method` decides how it runs, as in JAX:
"sequential" (and "sequential_unrolled") call it once per batch element; "expand_dims"
calls it once with a leading size-1 axis added to the unbatched arguments, "broadcast_all"
with them broadcast to the batch size, "legacy_vectorized" with them unchanged; the
callback must then return results with the batch axis leading. `vmap_method=None` (the
default) cannot be vmapped. Differentiating through it is an error: wrap it in
`fgrad.custom_jvp` / `fgrad.custom_vjp`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from fgrad.core import device as _device
from fgrad.core import dtypes as _dt
from fgrad.core import tree_util
from fgrad.core.api_util import fn_name, to_tensor_leaf
from fgrad.core.ir import ShapedArray
from fgrad.core.primitive import Primitive
from fgrad.core.prims import broadcast_in_dim
from fgrad.core.prims._util import move_bdim
from fgrad.core.tensor import Tensor

__all__ = ["pure_callback", "pure_callback_p"]

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                "legacy_vectorized", None)

pure_callback_p = Primitive("pure_callback", multiple_results=True)


@dataclasses.dataclass(frozen=True)
class FlatCallback:
    """The user's callback on flat NumPy arrays: rebuilds the (args, kwargs) pytrees, calls
    it, and returns its result leaves. Equal for the same function and argument structure,
    so identical calls can be merged."""

    fn: Callable[..., Any]
    in_tree: Any
    out_tree: Any

    def __call__(self, *arrays: np.ndarray) -> list[Any]:
        args, kwargs = tree_util.tree_unflatten(self.in_tree, list(arrays))
        result = self.fn(*args, **kwargs)
        leaves, tree = tree_util.tree_flatten(result)
        if len(leaves) != self.out_tree.num_leaves:
            raise TypeError(f"pure_callback: {fn_name(self.fn)} returned {tree}, but "
                            f"result_shape_dtypes declares {self.out_tree} "
                            f"({self.out_tree.num_leaves} arrays)")
        return leaves


@dataclasses.dataclass(frozen=True)
class _Sequential:
    """A callback over a batch, calling `inner` once per element of the batched arrays
    (batch axis 0) and stacking its results."""

    inner: Callable[..., list[Any]]
    batched: tuple[bool, ...]
    size: int
    result_avals: tuple[ShapedArray, ...]

    def __call__(self, *arrays: np.ndarray) -> list[Any]:
        rows = [_checked(self.inner(*[a[i] if b else a for a, b in
                                      zip(arrays, self.batched)]), self.result_avals, self)
                for i in range(self.size)]
        return [np.stack([r[k] for r in rows]) if rows else
                np.zeros((0,) + a.shape, a.dtype.np) for k, a in enumerate(self.result_avals)]


def _checked(results: Sequence[Any], avals: Sequence[ShapedArray], callback: Any
             ) -> list[np.ndarray]:
    """The callback's results as NumPy arrays of the declared dtypes; a shape mismatch
    raises (naming the callback and the fix)."""
    out = []
    for i, (r, a) in enumerate(zip(results, avals)):
        arr = r.numpy() if isinstance(r, Tensor) else np.asarray(r)
        if arr.shape != a.shape:
            name = fn_name(getattr(callback, "fn", callback))
            raise ValueError(f"pure_callback: {name} returned shape {arr.shape} for result "
                             f"{i}, but result_shape_dtypes declares {a}; return arrays of "
                             f"the declared shapes")
        out.append(arr if arr.dtype == a.dtype.np else arr.astype(a.dtype.np))
    return out


def _abstract(*avals: Any, callback: Any, result_avals: tuple[ShapedArray, ...],
              vmap_method: str | None) -> list[ShapedArray]:
    return list(result_avals)


def _impl(*arrays: Any, callback: Any, result_avals: tuple[ShapedArray, ...],
          vmap_method: str | None) -> list[np.ndarray]:
    results = callback(*[_device.to_host(a) for a in arrays])
    return _checked(results, result_avals, callback)


def _jvp(primals: list[Any], tangents: list[Any], **params: Any) -> Any:
    raise ValueError("Pure callbacks do not support JVP (fgrad.pure_callback cannot be "
                     "differentiated). Please use `fgrad.custom_jvp` or `fgrad.custom_vjp` "
                     "to use callbacks while taking gradients, or fgrad.stop_gradient on its "
                     "arguments if no derivative is needed.")


def _batch(args: list[Any], dims: list[int | None], *, callback: Any,
           result_avals: tuple[ShapedArray, ...], vmap_method: str | None
           ) -> tuple[list[Any], list[int]]:
    size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
    moved = [x if d is None else move_bdim(x, d, 0, size) for x, d in zip(args, dims)]
    batched_avals = tuple(ShapedArray((size,) + a.shape, a.dtype) for a in result_avals)
    if vmap_method in ("sequential", "sequential_unrolled"):
        call: Any = _Sequential(callback, tuple(d is not None for d in dims), size,
                                result_avals)
    elif vmap_method in ("expand_dims", "broadcast_all", "legacy_vectorized"):
        call = callback
        if vmap_method != "legacy_vectorized":
            n = size if vmap_method == "broadcast_all" else 1
            moved = [x if d is not None else broadcast_in_dim(
                x, (n,) + x.shape, tuple(range(1, x.ndim + 1))) for x, d in zip(moved, dims)]
    else:
        raise NotImplementedError(
            f"vmap is only supported for the pure_callback primitive when vmap_method is one "
            f"of 'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
            f"'legacy_vectorized'. Got vmap_method={vmap_method!r}: pass vmap_method= to "
            f"fgrad.pure_callback ('sequential' works for any callback)")
    outs = pure_callback_p.bind(*moved, callback=call, result_avals=batched_avals,
                                vmap_method=vmap_method)
    return outs, [0] * len(outs)


pure_callback_p.abstract_eval = _abstract
pure_callback_p.impl = _impl
pure_callback_p.jvp = _jvp
pure_callback_p.batch = _batch
for _backend in ("llvm", "opencl"):
    pure_callback_p.lowerings[_backend] = (
        "host callback: the program's step list calls the Python function at this point, "
        "between the kernels that produce its operands and those that use its results")


def _result_aval(x: Any) -> ShapedArray:
    if isinstance(x, ShapedArray):
        return x
    if not (hasattr(x, "shape") and hasattr(x, "dtype")):
        raise TypeError(f"pure_callback: every leaf of result_shape_dtypes needs a shape and a "
                        f"dtype (e.g. fgrad.ShapeDtypeStruct(shape, dtype)), got "
                        f"{type(x).__name__} {x!r}")
    try:
        dtype = _dt.to_dtype(x.dtype)
    except TypeError:
        raise TypeError(f"pure_callback: result dtype {x.dtype!r} is not a dtype fgrad "
                        f"supports") from None
    return ShapedArray(tuple(int(d) for d in x.shape), dtype)


def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any,
                  sharding: Any = None, vmap_method: str | None = None,
                  **kwargs: Any) -> Any:
    """Call `callback(*args, **kwargs)` on NumPy arrays (every leaf of `args` / `kwargs`
    arrives as an array, Python scalars as 0-d ones, as in JAX) and return its result as
    Tensors with the structure, shapes and dtypes of `result_shape_dtypes` (a pytree of
    ShapeDtypeStructs or anything with `shape` and `dtype`). Works eagerly and under jit /
    vmap; see the module docstring for `vmap_method`. `sharding` is accepted and ignored
    (one host)."""
    if vmap_method not in VMAP_METHODS:
        raise ValueError(f"pure_callback: vmap_method must be one of the allowed methods "
                         f"{list(VMAP_METHODS)}, but got: {vmap_method!r}")
    if not callable(callback):
        raise TypeError(f"pure_callback: callback must be callable, got "
                        f"{type(callback).__name__}")
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    operands = [to_tensor_leaf(x, f"pure_callback: argument leaf {i}")
                for i, x in enumerate(leaves)]
    avals, out_tree = tree_util.tree_flatten(result_shape_dtypes)
    result_avals = tuple(_result_aval(a) for a in avals)
    flat = FlatCallback(callback, in_tree, out_tree)
    outs = pure_callback_p.bind(*operands, callback=flat, result_avals=result_avals,
                                vmap_method=vmap_method)
    return tree_util.tree_unflatten(out_tree, outs)
