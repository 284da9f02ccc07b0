"""Jacobians and Hessians: jacfwd (vmapped jvp), jacrev (vmapped vjp), hessian."""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from fgrad.core import tree_util
from fgrad.core.tensor import Tensor
from fgrad.transforms.autodiff import _argnums_tuple, _check_float_args, vjp
from fgrad.transforms.batching import vmap
from fgrad.transforms.jvp import jvp

ArgNums = int | Sequence[int]


def _basis(x: Tensor) -> Tensor:
    """Identity matrix reshaped to (numel,) + x.shape: one tangent per input element."""
    n = x.numel()
    return Tensor.eye(n, dtype=x.dtype).reshape((n,) + x.shape)


def _select_args(args: tuple, nums: tuple[int, ...], diff: Sequence[Any]) -> list[Any]:
    full = list(args)
    for n, a in zip(nums, diff, strict=True):
        full[n] = a
    return full


def jacfwd(fn: Callable[..., Any], argnums: ArgNums = 0) -> Callable[..., Any]:
    """The Jacobian by forward mode: output shape = out.shape + in.shape."""

    @functools.wraps(fn)
    def jac_fn(*args: Any) -> Any:
        nums = _argnums_tuple(argnums, len(args), fn)
        _check_float_args(fn, args, nums, "jacfwd")
        jacs = [_jacfwd_one(fn, args, nums, i) for i in range(len(nums))]
        return jacs[0] if isinstance(argnums, int) else tuple(jacs)

    return jac_fn


def _jacfwd_one(fn: Callable[..., Any], args: tuple, nums: tuple[int, ...], which: int) -> Any:
    x = args[nums[which]]

    def push(t: Tensor) -> Any:
        def f_of_x(xx: Any) -> Any:
            full = list(args)
            full[nums[which]] = xx
            return fn(*full)
        return jvp(f_of_x, (x,), (t,))[1]

    out = vmap(push)(_basis(x))  # leading axis = input element
    return tree_util.tree_map(lambda o: _move_first_to_end(o, x.shape), out)


def _move_first_to_end(o: Tensor, in_shape: tuple[int, ...]) -> Tensor:
    out_shape = o.shape[1:]
    perm = tuple(range(1, o.ndim)) + (0,)
    return o.permute(perm).reshape(out_shape + tuple(in_shape))


def jacrev(fn: Callable[..., Any], argnums: ArgNums = 0) -> Callable[..., Any]:
    """The Jacobian by reverse mode: output shape = out.shape + in.shape."""

    @functools.wraps(fn)
    def jac_fn(*args: Any) -> Any:
        nums = _argnums_tuple(argnums, len(args), fn)
        _check_float_args(fn, args, nums, "jacrev")

        def partial_fn(*diff: Any) -> Any:
            return fn(*_select_args(args, nums, diff))

        out, vjp_fn = vjp(partial_fn, *[args[n] for n in nums])
        if not isinstance(out, Tensor):
            raise TypeError("jacrev: the function must return a single Tensor")
        basis = _basis(out)
        cts = vmap(vjp_fn)(basis)  # tuple over argnums, each (numel_out,) + in.shape
        jacs = [c.reshape(out.shape + c.shape[1:]) for c in cts]
        return jacs[0] if isinstance(argnums, int) else tuple(jacs)

    return jac_fn


def hessian(fn: Callable[..., Any], argnums: ArgNums = 0) -> Callable[..., Any]:
    """The Hessian of a scalar function: jacfwd(jacrev(fn))."""
    return jacfwd(jacrev(fn, argnums), argnums)


__all__ = ["jacfwd", "jacrev", "hessian", "np"]
