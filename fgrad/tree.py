"""`fgrad.tree`: short names for the pytree utilities (as `jax.tree`), plus class registration.

    fgrad.tree.map(lambda x: x * 2, params)
    leaves, treedef = fgrad.tree.flatten(params)
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

from fgrad.core import tree_util
from fgrad.core.tree_util import PyTreeDef, register_dataclass

__all__ = ["all", "flatten", "flatten_with_path", "leaves", "leaves_with_path", "map",
           "map_with_path", "reduce", "register_dataclass", "register_pytree_node_class",
           "structure", "transpose", "unflatten"]

T = TypeVar("T", bound=type)
IsLeaf = Callable[[Any], bool] | None


def map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeaf = None) -> Any:  # noqa: A001
    """`f` applied leafwise over `tree` and the matching leaves of `rest`."""
    return tree_util.tree_map(f, tree, *rest, is_leaf=is_leaf)


def leaves(tree: Any, is_leaf: IsLeaf = None) -> list[Any]:
    """The leaves of `tree` in order."""
    return tree_util.tree_leaves(tree, is_leaf)


def structure(tree: Any, is_leaf: IsLeaf = None) -> PyTreeDef:
    """The PyTreeDef of `tree`."""
    return tree_util.tree_structure(tree, is_leaf)


def flatten(tree: Any, is_leaf: IsLeaf = None) -> tuple[list[Any], PyTreeDef]:
    """`(leaves, treedef)` of `tree`."""
    return tree_util.tree_flatten(tree, is_leaf)


def unflatten(treedef: PyTreeDef, leaves: Any) -> Any:
    """The tree of structure `treedef` holding `leaves`."""
    return tree_util.tree_unflatten(treedef, leaves)


def reduce(function: Callable[[Any, Any], Any], tree: Any, *initializer: Any,
           is_leaf: IsLeaf = None) -> Any:
    """Fold `function` over the leaves of `tree` (with an optional initial value)."""
    if len(initializer) > 1:
        raise TypeError(f"tree.reduce takes at most one initializer, got {len(initializer)}")
    if initializer:
        return tree_util.tree_reduce(function, tree, initializer[0], is_leaf=is_leaf)
    return tree_util.tree_reduce(function, tree, is_leaf=is_leaf)


def all(tree: Any, is_leaf: IsLeaf = None) -> bool:  # noqa: A001
    """Whether every leaf of `tree` is truthy."""
    return tree_util.tree_all(tree, is_leaf)


def flatten_with_path(tree: Any, is_leaf: IsLeaf = None) -> tuple[list[Any], PyTreeDef]:
    """`([(key_path, leaf), ...], treedef)` of `tree`."""
    return tree_util.tree_flatten_with_path(tree, is_leaf)


def leaves_with_path(tree: Any, is_leaf: IsLeaf = None) -> list[Any]:
    """`[(key_path, leaf), ...]` of `tree`."""
    return tree_util.tree_leaves_with_path(tree, is_leaf)


def map_with_path(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeaf = None) -> Any:
    """`f(key_path, leaf, *other_leaves)` applied leafwise."""
    return tree_util.tree_map_with_path(f, tree, *rest, is_leaf=is_leaf)


def transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None, tree: Any) -> Any:
    """Turn a tree of structure outer(inner) into one of structure inner(outer).

    `inner_treedef=None` takes the inner structure from the first outer subtree.
    """
    outer_subtrees = outer_treedef.flatten_up_to(tree)
    if inner_treedef is None:
        if not outer_subtrees:
            raise ValueError("tree.transpose: inner_treedef=None needs a non-empty outer tree")
        inner_treedef = tree_util.tree_structure(outer_subtrees[0])
    n_inner = inner_treedef.num_leaves
    try:
        rows = [inner_treedef.flatten_up_to(sub) for sub in outer_subtrees]
    except (ValueError, TypeError) as err:
        raise ValueError(f"tree.transpose: every outer subtree must have the inner structure "
                         f"{inner_treedef}: {err}") from None
    columns = [outer_treedef.unflatten([row[i] for row in rows]) for i in range(n_inner)]
    return inner_treedef.unflatten(columns)


def register_pytree_node_class(cls: T) -> T:
    """Class decorator: register `cls` as a pytree node through its methods
    `tree_flatten(self) -> (children, aux)` and classmethod `tree_unflatten(aux, children)`."""
    for method in ("tree_flatten", "tree_unflatten"):
        if not callable(getattr(cls, method, None)):
            raise TypeError(f"register_pytree_node_class: {cls.__name__} needs a "
                            f"{method} method")
    tree_util.register_pytree_node(cls, lambda x: x.tree_flatten(),
                                   getattr(cls, "tree_unflatten"))
    return cls
