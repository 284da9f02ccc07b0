"""Trainable and non-trainable leaves of a model: buffers, frozen sub-modules, partition/combine.

A Module class names its non-trainable fields in the class variable `buffers` (BatchNorm:
running_mean, running_var, num_batches_tracked). `nn.Frozen(sub_module)` marks a whole
sub-module non-trainable for one model instance. `fgrad.grad` still carries these leaves (they
are ordinary pytree leaves), but `trainable_mask(model)` says False for them, and every
fgrad.optim optimizer gives them zero updates.

    mask = nn.trainable_mask(model)                  # pytree of bools shaped like model
    params, rest = nn.partition(model, mask)         # None where the other side has a leaf
    model = nn.combine(params, rest)
"""
from __future__ import annotations

from typing import Any, Callable

from fgrad.core import tree_util
from fgrad.nn.module import Module

__all__ = ["Frozen", "combine", "has_buffers", "is_buffer_field", "partition",
           "trainable_mask"]


def is_buffer_field(module: Module, name: str) -> bool:
    """Whether field `name` of `module` is non-trainable (listed in its class's `buffers`)."""
    return name in getattr(type(module), "buffers", ())


def _all(value: Any, flag: bool) -> Any:
    return tree_util.tree_map(lambda _: flag, value)


def _mask(node: Any) -> Any:
    if isinstance(node, Module):
        fields = vars(node)
        kids = [_all(fields[n], False) if is_buffer_field(node, n) else _mask(fields[n])
                for n in getattr(node, "_fgrad_children")]
        return tree_util.tree_structure(node, is_leaf=lambda x: x is not node).unflatten(kids)
    children, treedef = tree_util.tree_flatten(node, is_leaf=lambda x: x is not node)
    if treedef.is_leaf():
        return True
    return treedef.unflatten([_mask(c) for c in children])


def trainable_mask(tree: Any) -> Any:
    """A pytree of bools shaped like `tree`: False for leaves an optimizer must leave alone.

    A leaf is non-trainable when it lies in a Module field named in that Module class's
    `buffers` (e.g. BatchNorm's running statistics) or inside an `nn.Frozen` wrapper.
    """
    return _mask(tree)


def has_buffers(tree: Any) -> bool:
    """Whether `tree` holds any non-trainable leaf (see `trainable_mask`)."""
    return not all(tree_util.tree_leaves(trainable_mask(tree)))


def _resolve(tree: Any, filter_spec: Any) -> list[bool]:
    """One bool per leaf of `tree` from a mask pytree, a predicate on leaves, or None."""
    if filter_spec is None:
        spec = trainable_mask(tree)
    elif callable(filter_spec):
        return [bool(filter_spec(x)) for x in tree_util.tree_leaves(tree)]
    else:
        spec = filter_spec
    return [bool(flag) for flag in tree_util.prefix_leaves(spec, tree, "partition filter")]


def partition(tree: Any, filter_spec: Any = None) -> tuple[Any, Any]:
    """Split `tree` into `(selected, rest)`, each with None in place of the other's leaves.

    `filter_spec` is a pytree of bools shaped like `tree` (or a prefix of it), a predicate
    `leaf -> bool`, or None for `trainable_mask(tree)` (then `selected` holds the trainable
    parameters and `rest` the buffers). `combine(selected, rest)` rebuilds `tree`.
    """
    leaves, treedef = tree_util.tree_flatten(tree)
    flags = _resolve(tree, filter_spec)
    left = [x if f else None for x, f in zip(leaves, flags)]
    right = [None if f else x for x, f in zip(leaves, flags)]
    return treedef.unflatten(left), treedef.unflatten(right)


def combine(*trees: Any) -> Any:
    """Merge trees of equal structure (None marking holes): each leaf from the first tree
    that has it there (Equinox's `combine`)."""
    if not trees:
        raise TypeError("combine needs at least one tree")

    def first(*xs: Any) -> Any:
        return next((x for x in xs if x is not None), None)

    is_none: Callable[[Any], bool] = lambda x: x is None  # noqa: E731
    return tree_util.tree_map(first, *trees, is_leaf=is_none)


class Frozen(Module):
    """A sub-module whose parameters are non-trainable in this model: optimizers leave them
    alone and `__call__` stops their gradients. `Frozen(m)(x)` calls `m(x)`.

        model = model.replace(encoder=nn.Frozen(model.encoder))
    """

    buffers = ("module",)
    module: Module

    @property
    def stateful(self) -> bool:  # type: ignore[override]
        """Whether the wrapped module returns `(y, new_module)` (then so does this one)."""
        return bool(getattr(self.module, "stateful", False))

    @property
    def needs_key(self) -> bool:  # type: ignore[override]
        """Whether the wrapped module takes `training=` and `key=`."""
        return bool(getattr(self.module, "needs_key", False))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped module with its parameters' gradients stopped."""
        from fgrad.transforms import stop_gradient
        out = stop_gradient(self.module)(*args, **kwargs)
        if self.stateful and isinstance(out, tuple):
            return out[0], Frozen(out[1])  # type: ignore[call-arg]
        return out
