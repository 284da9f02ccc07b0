"""Pytree utilities: split nested containers into a flat list of leaves plus a structure.

Behaviour follows ``jax.tree_util``: containers and registered classes are nodes, and
everything else (including ``fgrad.Tensor``) is a leaf.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
from typing import Any, Callable, Hashable, Iterable, Iterator, NamedTuple, cast

__all__ = ["Partial", "PyTreeDef", "SequenceKey", "DictKey", "GetAttrKey", "FlattenedIndexKey",
           "KeyEntry", "KeyPath", "tree_flatten", "tree_unflatten", "tree_leaves",
           "tree_structure", "tree_map", "tree_flatten_with_path", "tree_leaves_with_path",
           "tree_map_with_path", "keystr", "register_pytree_node", "register_pytree_with_keys",
           "register_dataclass", "tree_all", "tree_reduce"]

KeyEntry = Any  # SequenceKey, DictKey, GetAttrKey, FlattenedIndexKey or a user-defined key
KeyPath = tuple[Any, ...]
IsLeaf = Callable[[Any], bool] | None

_MISSING: Any = object()
_NoneType = type(None)


# --------------------------------------------------------------------------- key entries


@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """Key entry for a position in a tuple or list; prints as ``[0]``."""

    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True)
class DictKey:
    """Key entry for a mapping key; prints as ``['a']``."""

    key: Hashable

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """Key entry for a named attribute (namedtuple or dataclass field); prints as ``.name``."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    """Key entry for the i-th child of a node registered without keys."""

    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


def _simple_key(key: Any) -> str:
    if isinstance(key, SequenceKey):
        return str(key.idx)
    if isinstance(key, DictKey):
        return str(key.key)
    if isinstance(key, GetAttrKey):
        return key.name
    if isinstance(key, FlattenedIndexKey):
        return str(key.key)
    return str(key)


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """Render a key path, e.g. ``['layers'][0].weight`` (``simple`` drops the brackets)."""
    return separator.join(_simple_key(k) if simple else str(k) for k in keys)


# --------------------------------------------------------------------------- registry


class _NodeHandler(NamedTuple):
    flatten: Callable[[Any], tuple[Iterable[Any], Any]]
    unflatten: Callable[[Any, tuple[Any, ...]], Any]
    flatten_with_keys: Callable[[Any], tuple[Iterable[tuple[Any, Any]], Any]]


_REGISTRY: dict[type, _NodeHandler] = {}
# Every type met while flattening -> its handler (None: a leaf type). Flattening looks a type
# up once per node; a namedtuple's handler is made once. Cleared when a type is registered.
_HANDLER_OF: dict[type, _NodeHandler | None] = {}


def _register(nodetype: type, handler: _NodeHandler) -> None:
    if not isinstance(nodetype, type):
        raise TypeError(f"Expected a type to register as a pytree node, got {nodetype!r}.")
    if nodetype in _REGISTRY:
        raise ValueError(f"Duplicate pytree node registration for type {nodetype!r}.")
    _REGISTRY[nodetype] = handler
    _HANDLER_OF.clear()


def _index_keys(flatten_func: Callable[[Any], tuple[Iterable[Any], Any]]) -> Callable:
    def flatten_with_keys(x: Any) -> tuple[list[tuple[Any, Any]], Any]:
        children, aux = flatten_func(x)
        return [(FlattenedIndexKey(i), c) for i, c in enumerate(children)], aux

    return flatten_with_keys


def _drop_keys(flatten_with_keys: Callable[[Any], tuple[Iterable[tuple[Any, Any]], Any]]):
    def flatten(x: Any) -> tuple[list[Any], Any]:
        keyed, aux = flatten_with_keys(x)
        return [child for _, child in keyed], aux

    return flatten


def register_pytree_node(
    nodetype: type,
    flatten_func: Callable[[Any], tuple[Iterable[Any], Any]],
    unflatten_func: Callable[[Any, tuple[Any, ...]], Any],
    flatten_with_keys_func: Callable[[Any], tuple[Iterable[tuple[Any, Any]], Any]] | None = None,
) -> None:
    """Register ``nodetype`` as a pytree node; key paths default to ``FlattenedIndexKey``."""
    keys_func = flatten_with_keys_func or _index_keys(flatten_func)
    _register(nodetype, _NodeHandler(flatten_func, unflatten_func, keys_func))


def register_pytree_with_keys(
    nodetype: type,
    flatten_with_keys: Callable[[Any], tuple[Iterable[tuple[Any, Any]], Any]],
    unflatten_func: Callable[[Any, tuple[Any, ...]], Any],
    flatten_func: Callable[[Any], tuple[Iterable[Any], Any]] | None = None,
) -> None:
    """Register ``nodetype`` with a flatten function that returns ``(key, child)`` pairs."""
    flatten = flatten_func or _drop_keys(flatten_with_keys)
    _register(nodetype, _NodeHandler(flatten, unflatten_func, flatten_with_keys))


def _dataclass_fields(cls: type, data_fields: Any, meta_fields: Any) -> tuple[tuple, tuple]:
    if not dataclasses.is_dataclass(cls):
        if data_fields is None or meta_fields is None:
            raise TypeError(f"{cls!r} is not a dataclass; pass data_fields and meta_fields.")
        return tuple(data_fields), tuple(meta_fields)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    names = [f.name for f in fields]
    if data_fields is None and meta_fields is None:
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    if data_fields is None:
        data_fields = [n for n in names if n not in meta_fields]
    if meta_fields is None:
        meta_fields = [n for n in names if n not in data_fields]
    data, meta = tuple(data_fields), tuple(meta_fields)
    if sorted(data + meta) != sorted(names):
        raise ValueError(
            f"data_fields {data} and meta_fields {meta} must partition the init fields "
            f"{tuple(names)} of {cls.__name__}."
        )
    return data, meta


def register_dataclass(
    cls: type, data_fields: Iterable[str] | None = None, meta_fields: Iterable[str] | None = None
) -> type:
    """Register a dataclass as a pytree node (data fields are children); returns ``cls``."""
    data, meta = _dataclass_fields(cls, data_fields, meta_fields)

    def flatten_with_keys(x: Any) -> tuple[list[tuple[Any, Any]], tuple]:
        aux = tuple(getattr(x, n) for n in meta)
        return [(GetAttrKey(n), getattr(x, n)) for n in data], aux

    def flatten(x: Any) -> tuple[list[Any], tuple]:
        return [getattr(x, n) for n in data], tuple(getattr(x, n) for n in meta)

    def unflatten(aux: tuple, children: tuple) -> Any:
        return cls(**dict(zip(data, children)), **dict(zip(meta, aux)))

    register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)
    return cls


def _sorted_keys(mapping: dict) -> tuple:
    try:
        return tuple(sorted(mapping))
    except TypeError:  # incomparable keys: fall back to a deterministic order
        return tuple(sorted(mapping, key=lambda k: (type(k).__qualname__, repr(k))))


def _dict_with_keys(d: dict) -> tuple[list[tuple[Any, Any]], tuple]:
    keys = _sorted_keys(d)
    return [(DictKey(k), d[k]) for k in keys], keys


def _dict_flatten(d: dict) -> tuple[list[Any], tuple]:
    keys = _sorted_keys(d)
    return [d[k] for k in keys], keys


def _seq_with_keys(seq: Any) -> tuple[list[tuple[Any, Any]], None]:
    return [(SequenceKey(i), x) for i, x in enumerate(seq)], None


def _ordered_with_keys(d: collections.OrderedDict) -> tuple[list[tuple[Any, Any]], tuple]:
    return [(DictKey(k), v) for k, v in d.items()], tuple(d)


def _defaultdict_with_keys(d: collections.defaultdict) -> tuple[list[tuple[Any, Any]], tuple]:
    keyed, keys = _dict_with_keys(d)
    return keyed, (d.default_factory, keys)


def _defaultdict_unflatten(aux: tuple, children: tuple) -> collections.defaultdict:
    factory, keys = aux
    return collections.defaultdict(factory, zip(keys, children))


register_pytree_node(tuple, lambda t: (t, None), lambda _, c: tuple(c), _seq_with_keys)
register_pytree_node(list, lambda s: (s, None), lambda _, c: list(c), _seq_with_keys)
register_pytree_node(dict, _dict_flatten, lambda k, c: dict(zip(k, c)), _dict_with_keys)
register_pytree_node(_NoneType, lambda _: ((), None), lambda _, c: None, lambda _: ((), None))
register_pytree_with_keys(
    collections.OrderedDict, _ordered_with_keys, lambda k, c: collections.OrderedDict(zip(k, c))
)
register_pytree_with_keys(collections.defaultdict, _defaultdict_with_keys, _defaultdict_unflatten)


def _is_namedtuple_type(nodetype: type) -> bool:
    return issubclass(nodetype, tuple) and hasattr(nodetype, "_fields")


def _namedtuple_fields(nodetype: type) -> tuple[str, ...]:
    return cast(tuple[str, ...], cast(Any, nodetype)._fields)


@functools.lru_cache(maxsize=512)
def _namedtuple_handler(cls: type) -> _NodeHandler:
    def flatten_with_keys(x: Any) -> tuple[list[tuple[Any, Any]], None]:
        return [(GetAttrKey(f), v) for f, v in zip(_namedtuple_fields(cls), x)], None

    return _NodeHandler(lambda x: (x, None), lambda _, c: cls(*c), flatten_with_keys)


def _get_handler(nodetype: type) -> _NodeHandler | None:
    handler = _REGISTRY.get(nodetype)
    if handler is None and _is_namedtuple_type(nodetype):
        handler = _namedtuple_handler(nodetype)
    return handler


def _handler_of(nodetype: type) -> _NodeHandler | None:
    try:
        return _HANDLER_OF[nodetype]
    except KeyError:
        handler = _HANDLER_OF[nodetype] = _get_handler(nodetype)
        return handler


# --------------------------------------------------------------------------- PyTreeDef


class _Mismatch(Exception):
    def __init__(self, path: KeyPath, detail: str) -> None:
        super().__init__(detail)
        self.path, self.detail = path, detail


def _same_data(a: Any, b: Any) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:  # e.g. ambiguous truth value of array comparisons
        return False


class PyTreeDef:
    """Immutable, hashable description of a pytree's structure; leaves print as ``*``."""

    __slots__ = ("_node_type", "_node_data", "_children", "_num_leaves", "_num_nodes", "_hash")
    _node_type: type | None
    _node_data: Any
    _children: tuple[PyTreeDef, ...]
    _num_leaves: int
    _num_nodes: int
    _hash: int | None

    def __init__(self, node_type: type | None, node_data: Any,
                 children: Iterable[PyTreeDef]) -> None:
        init = object.__setattr__
        children = tuple(children)
        leaves, nodes = 0, 1
        for child in children:
            leaves += child._num_leaves
            nodes += child._num_nodes
        init(self, "_node_type", node_type)  # None marks a leaf
        init(self, "_node_data", node_data)
        init(self, "_children", children)
        init(self, "_num_leaves", 1 if node_type is None else leaves)
        init(self, "_num_nodes", nodes)
        init(self, "_hash", None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("PyTreeDef is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("PyTreeDef is immutable")

    @property
    def num_leaves(self) -> int:
        """Number of leaves in the structure."""
        return self._num_leaves

    @property
    def num_nodes(self) -> int:
        """Number of nodes (leaves included) in the structure."""
        return self._num_nodes

    @property
    def node_type(self) -> type | None:
        """Type of the root node, or ``None`` when the structure is a single leaf."""
        return self._node_type

    @property
    def node_data(self) -> Any:
        """Auxiliary data of the root node (e.g. the sorted keys of a dict)."""
        return self._node_data

    def children(self) -> list[PyTreeDef]:
        """Structures of the root node's children."""
        return list(self._children)

    def is_leaf(self) -> bool:
        """Whether this structure is a single leaf."""
        return self._node_type is None

    def compose(self, inner: PyTreeDef) -> PyTreeDef:
        """This structure with each of its leaves replaced by the structure ``inner``."""
        if self._node_type is None:
            return inner
        kids = [child.compose(inner) for child in self._children]
        return PyTreeDef(self._node_type, self._node_data, kids)

    def walk(self, f_node: Callable[[tuple, Any], Any], f_leaf: Callable[[Any], Any] | None,
             leaves: Iterable[Any]) -> Any:
        """Fold bottom-up over ``leaves`` in this structure: ``f_leaf(leaf)`` (or the leaf when
        None) at leaves, ``f_node(tuple of the children's results, node_data)`` at nodes."""
        leaves = list(leaves)
        if len(leaves) != self._num_leaves:
            raise ValueError(f"PyTreeDef.walk: want {self._num_leaves} leaves, got {len(leaves)}.")
        return self._walk(f_node, f_leaf, iter(leaves))

    def _walk(self, f_node: Callable, f_leaf: Callable | None, leaves: Iterator[Any]) -> Any:
        if self._node_type is None:
            leaf = next(leaves)
            return leaf if f_leaf is None else f_leaf(leaf)
        kids = tuple([child._walk(f_node, f_leaf, leaves) for child in self._children])
        return f_node(kids, self._node_data)

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        """Rebuild a pytree of this structure from ``leaves``."""
        leaves = list(leaves)
        if len(leaves) != self._num_leaves:
            raise ValueError(
                f"Wrong number of leaves for {self!r}: expected {self._num_leaves}, "
                f"got {len(leaves)}."
            )
        return self._build(iter(leaves))

    def _build(self, leaves: Iterator[Any]) -> Any:
        if self._node_type is None:
            return next(leaves)
        children = tuple([child._build(leaves) for child in self._children])
        handler = _handler_of(self._node_type)
        assert handler is not None, "a PyTreeDef node always has a registered handler"
        return handler.unflatten(self._node_data, children)

    def flatten_up_to(self, tree: Any) -> list[Any]:
        """Flatten ``tree`` only as deep as this structure; each leaf here yields a subtree."""
        out: list[Any] = []
        try:
            self._up_to(tree, (), out)
        except _Mismatch as err:
            where = keystr(err.path) or "<root>"
            raise ValueError(
                f"Tree structure mismatch at {where}: {err.detail}. Structure {self!r} is not "
                f"a prefix of {tree_structure(tree)!r}."
            ) from None
        return out

    def _up_to(self, tree: Any, path: KeyPath, out: list[Any]) -> None:
        if self._node_type is None:
            out.append(tree)
            return
        handler = _get_handler(type(tree))
        if type(tree) is not self._node_type or handler is None:
            got = type(tree).__name__ if handler else f"leaf of type {type(tree).__name__}"
            raise _Mismatch(path, f"expected {self._node_type.__name__}, got {got}")
        keyed, aux = handler.flatten_with_keys(tree)
        keyed = list(keyed)
        if not _same_data(aux, self._node_data):
            raise _Mismatch(path, f"node data {self._node_data!r} != {aux!r}")
        if len(keyed) != len(self._children):
            raise _Mismatch(path, f"expected {len(self._children)} children, got {len(keyed)}")
        for child, (key, sub) in zip(self._children, keyed):
            child._up_to(sub, path + (key,), out)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        if self is other:
            return True
        return (
            self._node_type is other._node_type
            and self._num_leaves == other._num_leaves
            and self._num_nodes == other._num_nodes
            and self._children == other._children
            and _same_data(self._node_data, other._node_data)
        )

    def __hash__(self) -> int:
        if self._hash is None:
            value = hash((self._node_type, self._node_data, self._children))
            object.__setattr__(self, "_hash", value)
            return value
        return self._hash

    def __repr__(self) -> str:
        return f"PyTreeDef({_format(self)})"


def _format_dict(keys: Iterable[Any], kids: list[str]) -> str:
    return "{" + ", ".join(f"{k!r}: {s}" for k, s in zip(keys, kids)) + "}"


def _format_tuple(kids: list[str]) -> str:
    return "(" + ", ".join(kids) + ("," if len(kids) == 1 else "") + ")"


_FORMATTERS: dict[type, Callable[[Any, list[str]], str]] = {
    _NoneType: lambda aux, kids: "None",
    tuple: lambda aux, kids: _format_tuple(kids),
    list: lambda aux, kids: "[" + ", ".join(kids) + "]",
    dict: _format_dict,
    collections.OrderedDict: lambda aux, kids: f"OrderedDict({_format_dict(aux, kids)})",
    collections.defaultdict: lambda aux, kids: (
        f"defaultdict({aux[0]!r}, {_format_dict(aux[1], kids)})"
    ),
}


def _format(treedef: PyTreeDef) -> str:
    node_type = treedef._node_type
    if node_type is None:
        return "*"
    kids = [_format(child) for child in treedef._children]
    if node_type in _FORMATTERS:
        return _FORMATTERS[node_type](treedef._node_data, kids)
    if node_type not in _REGISTRY and _is_namedtuple_type(node_type):
        fields = ", ".join(f"{f}={s}" for f, s in zip(_namedtuple_fields(node_type), kids))
        return f"{node_type.__name__}({fields})"
    return f"CustomNode({node_type.__name__}[{treedef._node_data!r}], [{', '.join(kids)}])"


_LEAF = PyTreeDef(None, None, ())


# --------------------------------------------------------------------------- flattening


def _node_handler(tree: Any, is_leaf: IsLeaf) -> _NodeHandler | None:
    if is_leaf is not None and is_leaf(tree):
        return None
    return _get_handler(type(tree))


def _flatten(tree: Any, is_leaf: IsLeaf, leaves: list[Any]) -> PyTreeDef:
    handler = _handler_of(type(tree))
    if handler is None or (is_leaf is not None and is_leaf(tree)):
        leaves.append(tree)
        return _LEAF
    children, aux = handler.flatten(tree)
    return PyTreeDef(type(tree), aux, [_flatten(child, is_leaf, leaves) for child in children])


def _flatten_keyed(tree: Any, is_leaf: IsLeaf, path: KeyPath, out: list) -> PyTreeDef:
    handler = _node_handler(tree, is_leaf)
    if handler is None:
        out.append((path, tree))
        return _LEAF
    keyed, aux = handler.flatten_with_keys(tree)
    child_defs = tuple(_flatten_keyed(c, is_leaf, path + (k,), out) for k, c in keyed)
    return PyTreeDef(type(tree), aux, child_defs)


def tree_flatten(tree: Any, is_leaf: IsLeaf = None) -> tuple[list[Any], PyTreeDef]:
    """Flatten ``tree`` into ``(leaves, treedef)``; ``is_leaf`` can stop the recursion early."""
    leaves: list[Any] = []
    treedef = _flatten(tree, is_leaf, leaves)
    return leaves, treedef


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """Rebuild a pytree with structure ``treedef`` from ``leaves``."""
    if not isinstance(treedef, PyTreeDef):
        raise TypeError(f"tree_unflatten expects a PyTreeDef, got {type(treedef).__name__}.")
    return treedef.unflatten(leaves)


def tree_leaves(tree: Any, is_leaf: IsLeaf = None) -> list[Any]:
    """Return the leaves of ``tree`` in flattening order."""
    leaves: list[Any] = []
    _collect(tree, is_leaf, leaves)
    return leaves


def _collect(tree: Any, is_leaf: IsLeaf, leaves: list[Any]) -> None:
    """`_flatten` without the PyTreeDef: only the leaves (a training step's model and
    optimizer state, ~50 nodes: 2.3x sooner, for `block_until_ready` and the like)."""
    handler = _handler_of(type(tree))
    if handler is None or (is_leaf is not None and is_leaf(tree)):
        leaves.append(tree)
        return
    for child in handler.flatten(tree)[0]:
        _collect(child, is_leaf, leaves)


def tree_structure(tree: Any, is_leaf: IsLeaf = None) -> PyTreeDef:
    """Return the ``PyTreeDef`` of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeaf = None) -> Any:
    """Apply ``f`` leafwise; ``tree``'s structure must be a prefix of every tree in ``rest``."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten(f(*xs) for xs in zip(leaves, *others))


def tree_flatten_with_path(
    tree: Any, is_leaf: IsLeaf = None
) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """Like ``tree_flatten`` but each leaf comes paired with its key path."""
    out: list[tuple[KeyPath, Any]] = []
    treedef = _flatten_keyed(tree, is_leaf, (), out)
    return out, treedef


def tree_leaves_with_path(tree: Any, is_leaf: IsLeaf = None) -> list[tuple[KeyPath, Any]]:
    """Return ``(key_path, leaf)`` pairs of ``tree``."""
    return tree_flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(
    f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeaf = None
) -> Any:
    """Like ``tree_map`` but calls ``f(key_path, leaf, *other_leaves)``."""
    keyed, treedef = tree_flatten_with_path(tree, is_leaf)
    others = [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten(f(p, x, *xs) for (p, x), *xs in zip(keyed, *others))


def tree_all(tree: Any, is_leaf: IsLeaf = None) -> bool:
    """Whether every leaf of ``tree`` is truthy."""
    return all(tree_leaves(tree, is_leaf))


def tree_reduce(
    function: Callable[[Any, Any], Any],
    tree: Any,
    initializer: Any = _MISSING,
    is_leaf: IsLeaf = None,
) -> Any:
    """Fold ``function`` over the leaves of ``tree`` (``functools.reduce`` semantics)."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _MISSING:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def prefix_leaves(prefix: Any, tree: Any, who: str) -> list[Any]:
    """One entry of the pytree `prefix` per leaf of `tree`: `prefix` has the structure of
    `tree` or of a prefix of it, and a value at an inner node applies to every leaf below."""
    values, prefix_def = tree_flatten(prefix)
    try:
        subtrees = prefix_def.flatten_up_to(tree)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{who}: the pytree must have the structure of the one it describes "
                         f"(or a prefix of it): {err}") from None
    return [value for value, sub in zip(values, subtrees) for _ in tree_leaves(sub)]


from fgrad.core.tree_partial import Partial, partial_flatten, partial_unflatten  # noqa: E402
register_pytree_node(Partial, partial_flatten, partial_unflatten)
