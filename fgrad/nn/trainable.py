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

__all__ = ["Frozen", "combine", "filter_flags", "has_buffers", "is_buffer_field", "partition",
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


def filter_flags(tree: Any, filter_spec: Any, is_leaf: Callable[[Any], bool] | None = None,
                 who: str = "partition") -> list[bool]:
    """One bool per leaf of `tree` (flattened with `is_leaf`), from `filter_spec`: a pytree
    prefix of `tree` whose leaves are bools (for the whole subtree below) or predicates
    `leaf -> bool` (called on each leaf below), e.g. one predicate for the whole tree."""
    values, prefix_def = tree_util.tree_flatten(filter_spec)
    try:
        subtrees = prefix_def.flatten_up_to(tree)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{who}: filter_spec must be a bool/callable or a pytree with the "
                         f"structure of the tree it filters (or a prefix of it): {err}") from None
    flags: list[bool] = []
    for value, sub in zip(values, subtrees):
        leaves = tree_util.tree_leaves(sub, is_leaf)
        if callable(value):
            flags += [bool(value(x)) for x in leaves]
        elif isinstance(value, (bool, int)) or hasattr(value, "__bool__"):
            flags += [bool(value)] * len(leaves)
        else:
            raise ValueError(f"{who}: filter_spec leaves must be bools or callables "
                             f"`leaf -> bool`, got a {type(value).__name__}")
    return flags


def partition(tree: Any, filter_spec: Any = None, replace: Any = None,
              is_leaf: Callable[[Any], bool] | None = None) -> tuple[Any, Any]:
    """Split `tree` into `(selected, rest)`, each with `replace` (None) in place of the
    other's leaves (Equinox's `partition`).

    `filter_spec` is a pytree of bools and/or predicates `leaf -> bool` shaped like `tree`
    (or a prefix of it, e.g. one predicate such as `nn.is_inexact_array`), or None for
    `trainable_mask(tree)` (then `selected` holds the trainable parameters and `rest` the
    buffers). `combine(selected, rest)` rebuilds `tree`.
    """
    leaves, treedef = tree_util.tree_flatten(tree, is_leaf)
    spec = trainable_mask(tree) if filter_spec is None else filter_spec
    flags = filter_flags(tree, spec, is_leaf)
    left = [x if f else replace for x, f in zip(leaves, flags)]
    right = [replace if f else x for x, f in zip(leaves, flags)]
    return treedef.unflatten(left), treedef.unflatten(right)


def combine(*trees: Any, is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """Merge trees of equal structure (None marking holes): each leaf from the first tree
    that has it there (Equinox's `combine`)."""
    if not trees:
        raise TypeError("combine needs at least one tree")

    def first(*xs: Any) -> Any:
        return next((x for x in xs if x is not None), None)

    def is_hole(x: Any) -> bool:
        return x is None or (is_leaf is not None and bool(is_leaf(x)))

    return tree_util.tree_map(first, *trees, is_leaf=is_hole)


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
