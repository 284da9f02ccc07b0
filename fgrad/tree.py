"""`fgrad.tree`: short names for the pytree utilities (as `jax.tree`), plus class registration.

    fgrad.tree.map(lambda x: x * 2, params)
    leaves, treedef = fgrad.tree.flatten(params)

It also holds the `jax.tree_util` functions that fgrad/core/tree_util.py has no room for
(`TREE_UTIL_EXTRAS`); the package root attaches them to `fgrad.tree_util`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, TypeVar

from fgrad.core import tree_util
from fgrad.core.tree_util import PyTreeDef, register_dataclass

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path",
           "map", "map_with_path", "reduce", "reduce_associative", "register_dataclass",
           "register_pytree_node_class", "static", "structure", "transpose", "unflatten"]

T = TypeVar("T", bound=type)
IsLeaf = Callable[[Any], bool] | None
_NO_IDENTITY: Any = object()


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


def register_pytree_with_keys_class(cls: T) -> T:
    """Class decorator: register `cls` as a pytree node through its methods
    `tree_flatten_with_keys(self) -> ([(key, child), ...], aux)` and classmethod
    `tree_unflatten(aux, children)` (and `tree_flatten(self)`, used when present)."""
    for method in ("tree_flatten_with_keys", "tree_unflatten"):
        if not callable(getattr(cls, method, None)):
            raise TypeError(f"register_pytree_with_keys_class: {cls.__name__} needs a "
                            f"{method} method")
    plain = (lambda x: x.tree_flatten()) if callable(getattr(cls, "tree_flatten", None)) \
        else None
    tree_util.register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(),
                                        getattr(cls, "tree_unflatten"), plain)
    return cls


def register_static(cls: T) -> T:
    """Class decorator: instances of `cls` become pytrees without leaves, so the whole
    value is part of the structure (static under `jit`, like a `static_argnums` argument).
    `cls` must be hashable, and equal instances must hash equally."""
    if not isinstance(cls, type):
        raise TypeError(f"register_static expects a class, got {type(cls).__name__}")
    if getattr(cls, "__hash__", None) is None:
        raise TypeError(f"register_static: {cls.__name__} is not hashable; a static value "
                        f"is part of the tree structure, which jit hashes (define __hash__)")
    tree_util.register_pytree_with_keys(cls, lambda x: ((), x), lambda aux, _: aux)
    return cls


def static(**kwargs: Any) -> Any:
    """`dataclasses.field(**kwargs)` marked `metadata={"static": True}` (merged with any
    metadata given), so `register_dataclass` keeps the field in the structure."""
    metadata = {"static": True, **(kwargs.pop("metadata", None) or {})}
    return dataclasses.field(metadata=metadata, **kwargs)


# --------------------------------------------------------------------------- one level


def _handler(nodetype: Any) -> Any:
    return tree_util._get_handler(nodetype) if isinstance(nodetype, type) else None


def is_tree_node(typ: type) -> bool:
    """Whether the type `typ` is a pytree node type: a built-in container, None's type, a
    namedtuple class or a registered class (False for anything that is not a type)."""
    return _handler(typ) is not None


def flatten_one_level(tree: Any) -> tuple[Iterable[Any], Any]:
    """`(children, aux_data)` of the node `tree`, flattened one level only; a leaf is a
    ValueError."""
    handler = _handler(type(tree))
    if handler is None:
        raise ValueError(f"flatten_one_level: can't tree-flatten type {type(tree)}: it is a "
                         f"leaf, not a pytree node")
    return handler.flatten(tree)


def flatten_one_level_with_keys(tree: Any) -> tuple[Iterable[tuple[Any, Any]], Any]:
    """`([(key, child), ...], aux_data)` of the node `tree`; a leaf is a ValueError."""
    handler = _handler(type(tree))
    if handler is None:
        raise ValueError(f"flatten_one_level_with_keys: can't tree-flatten type "
                         f"{type(tree)}: it is a leaf, not a pytree node")
    return handler.flatten_with_keys(tree)


def all_leaves(iterable: Iterable[Any], is_leaf: IsLeaf = None) -> bool:
    """Whether every element of `iterable` is a leaf (None, a container or a registered
    node is not; with `is_leaf`, whatever it accepts is)."""
    items = list(iterable)
    if is_leaf is None:
        return not any(_handler(type(x)) is not None for x in items)
    found = tree_util.tree_leaves(items, is_leaf)
    return len(found) == len(items) and not any(a is not b for a, b in zip(found, items))


# --------------------------------------------------------------------------- treedefs


def _check_treedef(treedef: Any, who: str) -> PyTreeDef:
    if not isinstance(treedef, PyTreeDef):
        raise TypeError(f"{who} expects a PyTreeDef (from fgrad.tree.structure), got "
                        f"{type(treedef).__name__}")
    return treedef


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    """The structures of the root's children."""
    return _check_treedef(treedef, "treedef_children").children()


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """Whether `treedef` is a single node: a leaf, or a node without children (as JAX's,
    True for the structures of None and ())."""
    return _check_treedef(treedef, "treedef_is_leaf").num_nodes == 1


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    """The structure of a tuple whose elements have the structures `treedefs`."""
    kids = [_check_treedef(t, "treedef_tuple") for t in treedefs]
    return PyTreeDef(tuple, None, kids)


# --------------------------------------------------------------------------- whole trees


class TreeStructureError(TypeError, ValueError):
    """A tree's structure does not match the one asked for. It is both a TypeError (what
    JAX raises in `tree_transpose`) and a ValueError (what fgrad raised before)."""


def transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
              pytree_to_transpose: Any) -> Any:
    """Turn a tree of structure outer(inner) into one of structure inner(outer).

    `inner_treedef=None` takes the inner structure from the first outer subtree. A tree
    that is not `outer_treedef.compose(inner_treedef)` is a `TreeStructureError` (JAX
    checks only the number of leaves; fgrad checks the whole structure).
    """
    _check_treedef(outer_treedef, "tree.transpose")
    if inner_treedef is None:
        subtrees = outer_treedef.flatten_up_to(pytree_to_transpose)
        if not subtrees:
            raise ValueError("tree.transpose: inner_treedef=None needs a non-empty outer tree")
        inner_treedef = tree_util.tree_structure(subtrees[0])
    _check_treedef(inner_treedef, "tree.transpose")
    flat, treedef = tree_util.tree_flatten(pytree_to_transpose)
    expected = outer_treedef.compose(inner_treedef)
    if treedef != expected:
        raise TreeStructureError(
            f"tree.transpose: every outer subtree must have the inner structure "
            f"{inner_treedef}: the tree has structure\n{treedef}\n != \n{expected}")
    n_inner = inner_treedef.num_leaves  # flat holds the leaves outer-major: column i is i::n
    columns = [outer_treedef.unflatten(flat[i::n_inner]) for i in range(n_inner)]
    return inner_treedef.unflatten(columns)


def broadcast(prefix_tree: Any, full_tree: Any, is_leaf: IsLeaf = None) -> Any:
    """A tree of `full_tree`'s structure where each leaf of `prefix_tree` (a prefix of
    `full_tree`) fills every leaf of the matching subtree. `is_leaf` applies to
    `prefix_tree`. Example: `broadcast((1, 2), (0, {'a': 0, 'b': 0}))` is
    `(1, {'a': 2, 'b': 2})`."""
    values, prefix_def = tree_util.tree_flatten(prefix_tree, is_leaf)
    try:
        subtrees = prefix_def.flatten_up_to(full_tree)
    except ValueError as err:
        raise ValueError(f"tree.broadcast: prefix_tree must be a prefix of full_tree: "
                         f"{err}") from None
    out = [v for v, sub in zip(values, subtrees) for _ in range(len(tree_util.tree_leaves(sub)))]
    return tree_util.tree_structure(full_tree).unflatten(out)


def _halving_reduce(items: list[Any], operation: Callable[[Any, Any], Any]) -> Any:
    if len(items) == 1:
        return items[0]
    half = len(items) // 2
    return operation(_halving_reduce(items[:half], operation),
                     _halving_reduce(items[half:], operation))


def reduce_associative(operation: Callable[[Any, Any], Any], tree: Any, *,
                       identity: Any = _NO_IDENTITY, is_leaf: IsLeaf = None) -> Any:
    """Reduce the leaves of `tree` with the associative `operation`, as a balanced tree of
    calls (the left half, then the right half, then `operation` of both). `identity` is
    returned for a tree without leaves (needed then, ignored otherwise)."""
    items = tree_util.tree_leaves(tree, is_leaf)
    if items:
        return _halving_reduce(items, operation)
    if identity is _NO_IDENTITY:
        raise TypeError("tree.reduce_associative: the tree has no leaves; pass identity= "
                        "(the operation's identity element) to reduce an empty tree")
    return identity


# --------------------------------------------------------------------------- registry


class PyTreeRegistry:
    """JAX's `PyTreeRegistry` (as `jax.tree_util.default_registry`): a view of fgrad's one
    pytree registry. fgrad has no other registries; this one only forwards."""

    def flatten(self, tree: Any, leaf_predicate: IsLeaf = None) -> tuple[list[Any], PyTreeDef]:
        """`tree_flatten(tree, leaf_predicate)`."""
        return tree_util.tree_flatten(tree, leaf_predicate)

    def flatten_with_path(self, tree: Any, leaf_predicate: IsLeaf = None
                          ) -> tuple[list[Any], PyTreeDef]:
        """`tree_flatten_with_path(tree, leaf_predicate)`."""
        return tree_util.tree_flatten_with_path(tree, leaf_predicate)

    def flatten_one_level(self, tree: Any) -> tuple[Iterable[Any], Any] | None:
        """`(children, aux_data)` of a node, None for a leaf."""
        return flatten_one_level(tree) if _handler(type(tree)) is not None else None

    def flatten_one_level_with_keys(self, tree: Any
                                    ) -> tuple[Iterable[tuple[Any, Any]], Any] | None:
        """`([(key, child), ...], aux_data)` of a node, None for a leaf."""
        return flatten_one_level_with_keys(tree) if _handler(type(tree)) is not None else None

    def is_node(self, typ: type) -> bool:
        """`is_tree_node(typ)`."""
        return is_tree_node(typ)

    def register_node(self, nodetype: type, to_iterable: Callable[[Any], Any],
                      from_iterable: Callable[[Any, Any], Any],
                      to_iterable_with_keys: Callable[[Any], Any] | None = None) -> None:
        """`register_pytree_node(nodetype, to_iterable, from_iterable, ...with_keys)`."""
        tree_util.register_pytree_node(nodetype, to_iterable, from_iterable,
                                       to_iterable_with_keys)

    def register_dataclass_node(self, nodetype: type, data_fields: Iterable[str],
                                meta_fields: Iterable[str]) -> None:
        """`register_dataclass(nodetype, data_fields, meta_fields)`."""
        tree_util.register_dataclass(nodetype, data_fields, meta_fields)


default_registry = PyTreeRegistry()

# jax.tree_util's names for what lives here; fgrad/__init__.py puts them on fgrad.tree_util
TREE_UTIL_EXTRAS: dict[str, Any] = {
    "register_pytree_node_class": register_pytree_node_class,
    "register_pytree_with_keys_class": register_pytree_with_keys_class,
    "register_static": register_static, "all_leaves": all_leaves,
    "tree_transpose": transpose, "tree_broadcast": broadcast,
    "tree_reduce_associative": reduce_associative, "treedef_children": treedef_children,
    "treedef_is_leaf": treedef_is_leaf, "treedef_tuple": treedef_tuple,
    "flatten_one_level": flatten_one_level,
    "flatten_one_level_with_keys": flatten_one_level_with_keys, "is_tree_node": is_tree_node,
    "default_registry": default_registry, "PyTreeRegistry": PyTreeRegistry,
}
