"""Jacobians and Hessians: jacfwd (vmapped jvp), jacrev (vmapped vjp), hessian."""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from fgrad.core import tree_util
from fgrad.core.api_util import fn_name
from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.transforms.autodiff import _argnums_tuple, _check_float_args, _primal_values, vjp
from fgrad.transforms.batching import vmap
from fgrad.transforms.jvp import jvp

ArgNums = int | Sequence[int]


def _basis(leaves: Sequence[Tensor]) -> list[Tensor]:
    """One-hot directions for every element of `leaves`: leaf j gets (N,) + its shape, where
    N counts all elements and row i of the stack is the i-th unit vector."""
    sizes = [x.numel() for x in leaves]
    eye = Tensor.eye(sum(sizes), dtype=dtypes.float64)
    out, offset = [], 0
    for x, n in zip(leaves, sizes, strict=True):
        block = eye[:, offset:offset + n] if len(leaves) > 1 else eye
        out.append(block.reshape((block.shape[0],) + tuple(x.shape)).cast(x.dtype))
        offset += n
    return out


def _rows(x: Tensor, leaves: Sequence[Tensor], j: int) -> Tensor:
    """The rows of `x` (leading axis N) that belong to leaf j of `leaves`."""
    if len(leaves) == 1:
        return x
    offset = sum(leaf.numel() for leaf in leaves[:j])
    return x[offset:offset + leaves[j].numel()]


def _select_args(args: tuple, nums: tuple[int, ...], diff: Sequence[Any]) -> list[Any]:
    full = list(args)
    for n, a in zip(nums, diff, strict=True):
        full[n] = a
    return full


def _pick(jac: tuple, argnums: ArgNums) -> Any:
    return jac[0] if isinstance(argnums, int) else jac


def jacfwd(fn: Callable[..., Any], argnums: ArgNums = 0, has_aux: bool = False
           ) -> Callable[..., Any]:
    """The Jacobian by forward mode: for each output leaf, a pytree like the inputs whose
    leaves have shape out.shape + in.shape (a tuple over argnums when it is a tuple).
    `has_aux`: `fn` returns `(output, aux)` and the result is `(jacobian, aux)`."""

    @functools.wraps(fn)
    def jac_fn(*args: Any) -> Any:
        nums = _argnums_tuple(argnums, len(args), fn)
        _check_float_args(fn, args, nums, "jacfwd")
        diff = tree_util.tree_map(as_tensor, tuple(args[n] for n in nums))
        in_leaves, in_tree = tree_util.tree_flatten(diff)

        def push(*t_leaves: Tensor) -> Any:
            tangents = tree_util.tree_unflatten(in_tree, list(t_leaves))
            box: list[Any] = []
            tan = jvp(_aux_split(fn, args, nums, has_aux, box), diff, tangents)[1]
            return (tan, box[0]) if has_aux else tan

        out = vmap(push, out_axes=(0, None) if has_aux else 0)(*_basis(in_leaves))
        out, aux = out if has_aux else (out, None)
        out_leaves, out_tree = tree_util.tree_flatten(out)
        jacs = [_pick(tree_util.tree_unflatten(in_tree, [
            _move_first_to_end(_rows(o, in_leaves, j), x.shape)
            for j, x in enumerate(in_leaves)]), argnums) for o in out_leaves]
        jac = tree_util.tree_unflatten(out_tree, jacs)
        return (jac, aux) if has_aux else jac

    return jac_fn


def _aux_split(fn: Callable[..., Any], args: tuple, nums: tuple[int, ...], has_aux: bool,
               box: list[Any]) -> Callable[..., Any]:
    """`fn` on the differentiated arguments `d`; with `has_aux`, its aux (as primal values)
    goes to `box` and only the output is returned."""
    def call(*d: Any) -> Any:
        out = fn(*_select_args(args, nums, d))
        if not has_aux:
            return out
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError(f"{fn_name(fn)} was transformed with has_aux=True, so it must "
                            f"return a pair (output, aux); got {type(out).__name__}")
        box.append(_primal_values(out[1]))
        return out[0]
    return call


def _move_first_to_end(o: Tensor, in_shape: tuple[int, ...]) -> Tensor:
    out_shape = o.shape[1:]
    perm = tuple(range(1, o.ndim)) + (0,)
    return o.permute(perm).reshape(out_shape + tuple(in_shape))


def jacrev(fn: Callable[..., Any], argnums: ArgNums = 0, has_aux: bool = False
           ) -> Callable[..., Any]:
    """The Jacobian by reverse mode, laid out as `jacfwd`'s (`has_aux` as in `jacfwd`)."""

    @functools.wraps(fn)
    def jac_fn(*args: Any) -> Any:
        nums = _argnums_tuple(argnums, len(args), fn)
        _check_float_args(fn, args, nums, "jacrev")

        def partial_fn(*diff: Any) -> Any:
            return fn(*_select_args(args, nums, diff))

        partial_fn.__name__ = fn_name(fn)  # errors name the user's function
        out, vjp_fn, *aux = vjp(partial_fn, *[args[n] for n in nums], has_aux=has_aux)
        out_leaves, out_tree = tree_util.tree_flatten(out)

        def pull(*ct_leaves: Tensor) -> Any:
            return vjp_fn(tree_util.tree_unflatten(out_tree, list(ct_leaves)))

        cts = vmap(pull)(*_basis(out_leaves))  # tuple over argnums, leaves (N_out,) + in.shape
        ct_leaves, ct_tree = tree_util.tree_flatten(cts)
        jacs = [_pick(tree_util.tree_unflatten(ct_tree, [
            _rows(c, out_leaves, k).reshape(tuple(o.shape) + tuple(c.shape[1:]))
            for c in ct_leaves]), argnums) for k, o in enumerate(out_leaves)]
        jac = tree_util.tree_unflatten(out_tree, jacs)
        return (jac, aux[0]) if has_aux else jac

    return jac_fn


def hessian(fn: Callable[..., Any], argnums: ArgNums = 0) -> Callable[..., Any]:
    """The Hessian of a scalar function: jacfwd(jacrev(fn))."""
    return jacfwd(jacrev(fn, argnums), argnums)


__all__ = ["jacfwd", "jacrev", "hessian", "np"]
