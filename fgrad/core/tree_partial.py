"""`Partial`: JAX's `jax.tree_util.Partial`, a `functools.partial` that is a pytree.

Its leaves are the bound positional and keyword arguments; the function is static (part of
the tree structure), so a `Partial` can be passed to `jit`-ted functions, returned from them,
and mapped over with `tree_map`. fgrad/core/tree_util.py registers it as a pytree node (this
module imports nothing from there): use it as `fgrad.tree_util.Partial`.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

__all__ = ["Partial", "partial_flatten", "partial_unflatten"]


class _HashableCallableShim:
    """Wraps a `functools.partial` given as the function of a `Partial`, so that it stays
    one static function (functools.partial would merge its arguments into the new one's)."""

    def __init__(self, fun: Callable[..., Any]) -> None:
        self.fun = fun

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fun(*args, **kwargs)

    def __hash__(self) -> int:
        return hash(self.fun)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _HashableCallableShim):
            return bool(self.fun == other.fun)
        return bool(self.fun == other)


class Partial(functools.partial):
    """A `functools.partial` whose bound arguments are pytree leaves (JAX's
    `jax.tree_util.Partial`): `Partial(f, x)(y) == f(x, y)`, and `tree_leaves(Partial(f, x,
    k=z)) == [x, z]` with `f` kept in the structure.

    Example: `jit(lambda g, v: g(v))(Partial(operator.mul, Tensor(2.0)), Tensor(3.0))`.
    """

    def __new__(cls, func: Callable[..., Any], *args: Any, **kwargs: Any) -> "Partial":
        if not isinstance(func, functools.partial):
            return super().__new__(cls, func, *args, **kwargs)
        shim = _HashableCallableShim(func)
        out = super().__new__(cls, shim, *args, **kwargs)
        shim.func = func.func  # type: ignore[attr-defined]  # read like a partial's
        shim.args = func.args  # type: ignore[attr-defined]
        shim.keywords = func.keywords  # type: ignore[attr-defined]
        return out


def partial_flatten(p: Partial) -> tuple[tuple[tuple[Any, ...], dict[str, Any]], Any]:
    """((args, keywords), func): the children and the static function of a Partial."""
    return (p.args, p.keywords), p.func


def partial_unflatten(func: Any, children: Any) -> Partial:
    """The Partial of `func` with the (args, keywords) children."""
    args, keywords = children
    return Partial(func, *args, **keywords)
