"""`Module`: an immutable record of Tensors and sub-modules that is also a pytree.

A subclass declares its fields as class annotations (an `__init__` is generated, as with a
dataclass) or assigns them in its own `__init__` (as in Equinox). When `__init__` returns, the
fields are sorted by value: Tensors, Modules and lists/tuples/dicts holding any are children
(pytree leaves and sub-trees, in assignment order, keyed by field name); everything else is
static metadata, kept in the tree structure and therefore required to be hashable. After that
the module is frozen: `module.replace(**fields)` and `tree_at(where, tree, replace=...)` return
updated copies. `field(static=True)` (Equinox's `eqx.field`) keeps a field out of the pytree
whatever it holds; `field(converter=...)`, `default_factory=`, `__post_init__` and
`__check_init__` work as in Equinox.
"""
from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, ClassVar

from typing_extensions import Self

from fgrad.core import tree_util
from fgrad.core.tensor import Tensor

__all__ = ["FrozenModuleError", "Module", "field", "tree_at"]

_CHILD: Any = type("_Child", (), {"__repr__": lambda self: "<child>"})()
_NO_DEFAULT: Any = inspect.Parameter.empty


class FrozenModuleError(AttributeError):
    """Raised when a field of a finished module is set or deleted."""


class _FieldSpec:
    """What `field(...)` returns: read (and removed) when the Module subclass is created."""

    def __init__(self, static: bool, default: Any, default_factory: Callable[[], Any] | None,
                 converter: Callable[[Any], Any] | None) -> None:
        self.static, self.default = static, default
        self.default_factory, self.converter = default_factory, converter


class _Factory:
    """The signature default of a field with a `default_factory` (called per instance)."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory

    def __repr__(self) -> str:
        return f"<factory {getattr(self.factory, '__name__', self.factory)!r}>"


def field(*, static: bool = False, default: Any = _NO_DEFAULT,
          default_factory: Callable[[], Any] | None = None,
          converter: Callable[[Any], Any] | None = None, **kwargs: Any) -> Any:
    """Declare a Module field with options, as Equinox's `eqx.field`::

        class Net(nn.Module):
            layers: tuple
            depth: int = nn.field(static=True)
            scale: Tensor = nn.field(converter=Tensor, default=1.0)

    `static=True` keeps the value in the tree structure (never a leaf, so never traced or
    differentiated; it must be hashable). Fields holding no Tensor or Module are static
    anyway; the flag matters for a field that holds one. `converter` is applied to the
    value when `__init__` finishes (not by `replace`/`tree_at`). Other keywords of
    `dataclasses.field` (`repr=`, `metadata=`, ...) are accepted and ignored.
    """
    if default is not _NO_DEFAULT and default_factory is not None:
        raise TypeError("field: pass at most one of `default=` and `default_factory=`")
    return _FieldSpec(static, default, default_factory, converter)


# --------------------------------------------------------------------------- fields


def _is_child(value: Any) -> bool:
    """Whether `value` is (or contains) a Tensor or Module, so belongs in the pytree."""
    if isinstance(value, (Tensor, Module)):
        return True
    if isinstance(value, (list, tuple)):
        return any(_is_child(v) for v in value)
    if isinstance(value, dict):
        return any(_is_child(v) for v in value.values())
    return False


def _as_static(cls_name: str, name: str, value: Any) -> Any:
    """`value` as hashable metadata: lists become tuples; other unhashables raise."""
    if isinstance(value, list):
        value = tuple(_as_static(cls_name, name, v) for v in value)
    try:
        hash(value)
    except TypeError:
        raise TypeError(
            f"{cls_name}.{name}: a field that holds no Tensor or Module is static metadata "
            f"and must be hashable, got an unhashable {type(value).__name__}. Use a tuple "
            f"instead of a list, or wrap array data in a Tensor so it becomes a child."
        ) from None
    return value


def _freeze(module: Module, keep_children: tuple[str, ...] = ()) -> None:
    """Sort the fields of `module` into children and static values, then freeze it."""
    fields = vars(module)
    static = type(module)._fgrad_static
    children = []
    for name, value in fields.items():
        if name not in static and (name in keep_children or _is_child(value)):
            children.append(name)
        else:
            fields[name] = _as_static(type(module).__name__, name, value)
    object.__setattr__(module, "_fgrad_children", tuple(children))


# --------------------------------------------------------------------------- pytree rules


def _flatten_with_keys(module: Module) -> tuple[list[tuple[Any, Any]], tuple]:
    children = module._fgrad_children
    fields = vars(module)
    keyed = [(tree_util.GetAttrKey(n), fields[n]) for n in children]
    aux = tuple((n, _CHILD if n in children else v) for n, v in fields.items())
    return keyed, aux


def _flatten(module: Module) -> tuple[list[Any], tuple]:
    children = module._fgrad_children
    fields = vars(module)
    aux = tuple((n, _CHILD if n in children else v) for n, v in fields.items())
    return [fields[n] for n in children], aux


def _unflatten(cls: type[Module], aux: tuple, children: tuple) -> Module:
    """Rebuild a module without calling `__init__`."""
    module = object.__new__(cls)
    kids = iter(children)
    for name, value in aux:
        object.__setattr__(module, name, next(kids) if value is _CHILD else value)
    names = tuple(name for name, value in aux if value is _CHILD)
    object.__setattr__(module, "_fgrad_children", names)
    return module


# --------------------------------------------------------------------------- __init__


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    return annotation is ClassVar or typing.get_origin(annotation) is ClassVar


def _annotated_fields(cls: type) -> list[inspect.Parameter]:
    """Annotated fields of `cls` and its bases (base first), with class-level defaults."""
    names: dict[str, None] = {}
    for base in reversed(cls.__mro__):
        for name, annotation in vars(base).get("__annotations__", {}).items():
            if not _is_classvar(annotation) and not name.startswith("_"):
                names[name] = None
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    factories: dict[str, Callable[[], Any]] = getattr(cls, "_fgrad_factories", {})
    return [inspect.Parameter(n, kind, default=_Factory(factories[n]) if n in factories
                              else getattr(cls, n, _NO_DEFAULT)) for n in names]


def _generated_init(cls: type) -> Callable[..., None]:
    """An `__init__` that assigns the annotated fields in order, like a dataclass's."""
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    try:
        signature = inspect.Signature([self_param] + _annotated_fields(cls))
    except ValueError as err:
        raise TypeError(f"{cls.__name__}: {err} (give every field after one with a default "
                        f"a default too, or write an __init__)") from None

    def __init__(self: Module, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        for name, value in list(bound.arguments.items())[1:]:
            setattr(self, name, value.factory() if isinstance(value, _Factory) else value)
        post_init = getattr(self, "__post_init__", None)
        if post_init is not None:  # as a dataclass: only a generated __init__ calls it
            post_init()

    __init__.__signature__ = signature  # type: ignore[attr-defined]  # read by inspect
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


def _freezing_init(init: Callable[..., None]) -> Callable[..., None]:
    """Wrap `init` so that the outermost `__init__` of a construction freezes the module."""

    @functools.wraps(init)
    def __init__(self: Module, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if type(self).__init__ is __init__:  # not a super().__init__() from a subclass
            _convert(self)
            _freeze(self)
            for kls in reversed(type(self).__mro__):
                check = vars(kls).get("__check_init__")
                if check is not None:
                    check(self)

    return __init__


def _convert(module: Module) -> None:
    """Apply the `field(converter=...)` of each field that `__init__` set."""
    fields = vars(module)
    for name, convert in type(module)._fgrad_converters.items():
        if name in fields:
            fields[name] = convert(fields[name])


def _read_field_specs(cls: type[Module]) -> None:
    """Replace the `field(...)` values of `cls`'s own annotated fields by their defaults
    and record the static names, converters and factories (inherited ones included)."""
    static = set(getattr(cls, "_fgrad_static", ()))
    converters = dict(getattr(cls, "_fgrad_converters", {}))
    factories = dict(getattr(cls, "_fgrad_factories", {}))
    for name in vars(cls).get("__annotations__", {}):
        spec = vars(cls).get(name)
        if not isinstance(spec, _FieldSpec):
            continue
        if spec.static:
            static.add(name)
        if spec.converter is not None:
            converters[name] = spec.converter
        if spec.default_factory is not None:
            factories[name] = spec.default_factory
        if spec.default is _NO_DEFAULT:
            delattr(cls, name)
        else:
            setattr(cls, name, spec.default)
    cls._fgrad_static = frozenset(static)
    cls._fgrad_converters = converters
    cls._fgrad_factories = factories


# --------------------------------------------------------------------------- Module


class Module:
    """Base class of layers and models: a frozen record of fields that is a pytree.

    Example (either style)::

        class MLP(nn.Module):
            def __init__(self, key):
                k1, k2 = fgrad.random.split(key)
                self.l1, self.l2 = nn.Linear(4, 8, key=k1), nn.Linear(8, 2, key=k2)
            def __call__(self, x):
                return self.l2(self.l1(x).relu())

        class Scale(nn.Module):
            weight: Tensor
            eps: float = 1e-6
    """

    __slots__ = ("__dict__", "__weakref__", "_fgrad_children")
    _fgrad_children: tuple[str, ...]  # names of the pytree children; set when frozen
    # True for layers whose `__call__(x, *, training)` returns `(y, new_module)` (BatchNorm).
    stateful: ClassVar[bool] = False
    # True for layers whose `__call__` takes `training=` and a PRNG `key=` (Dropout).
    needs_key: ClassVar[bool] = False
    # Names of non-trainable fields (optimizers leave them alone; see fgrad/nn/trainable.py).
    buffers: ClassVar[tuple[str, ...]] = ()
    # Read from `field(...)` declarations: always-static names, converters, default factories.
    _fgrad_static: ClassVar[frozenset[str]] = frozenset()
    _fgrad_converters: ClassVar[dict[str, Callable[[Any], Any]]] = {}
    _fgrad_factories: ClassVar[dict[str, Callable[[], Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _read_field_specs(cls)
        own_fields = [n for n, a in vars(cls).get("__annotations__", {}).items()
                      if not _is_classvar(a)]
        if "__init__" not in vars(cls) and own_fields:
            setattr(cls, "__init__", _generated_init(cls))
        if "__init__" in vars(cls):
            setattr(cls, "__init__", _freezing_init(vars(cls)["__init__"]))
        tree_util.register_pytree_with_keys(
            cls, _flatten_with_keys, functools.partial(_unflatten, cls), _flatten)

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, "_fgrad_children"):
            raise FrozenModuleError(
                f"{type(self).__name__} is immutable: cannot set field {name!r} after "
                f"__init__. Use `module.replace({name}=...)` or `nn.tree_at(...)` to get an "
                f"updated copy.")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise FrozenModuleError(f"{type(self).__name__} is immutable: cannot delete field "
                                f"{name!r}; use `module.replace(...)` to get an updated copy.")

    def replace(self, **fields: Any) -> Self:
        """A copy of this module with the given fields set to new values (no `__init__` run)."""
        unknown = sorted(fields.keys() - vars(self).keys())
        if unknown:
            raise TypeError(f"{type(self).__name__}.replace: no field(s) {unknown}; the fields "
                            f"are {tuple(vars(self))}")
        new = object.__new__(type(self))
        for name, value in {**vars(self), **fields}.items():
            object.__setattr__(new, name, value)
        _freeze(new, keep_children=self._fgrad_children)
        return new

    def __repr__(self) -> str:
        items = ", ".join(f"{n}={_short_repr(v)}" for n, v in vars(self).items())
        return f"{type(self).__name__}({items})"


def _short_repr(value: Any) -> str:
    if isinstance(value, Tensor):
        return f"Tensor(shape={tuple(value.shape)}, dtype={value.dtype.name})"
    if isinstance(value, (list, tuple)) and _is_child(value):
        inner = ", ".join(_short_repr(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    return repr(value)


# --------------------------------------------------------------------------- tree_at


class _Marker:
    """Stands in for leaf number `index` while `where` is probed."""

    def __init__(self, index: int) -> None:
        self.index = index


def _one_level(node: Any) -> tuple[list[Any], tree_util.PyTreeDef]:
    """The immediate children of `node` and the structure that rebuilds it from them."""
    return tree_util.tree_flatten(node, is_leaf=lambda x: x is not node)


def _node_paths(node: Any, path: tuple[int, ...], out: dict[int, tuple[int, ...]]) -> None:
    """Map id(sub-node) -> path of child positions, for every node of the probe tree."""
    out.setdefault(id(node), path)
    if isinstance(node, _Marker):
        return
    children, treedef = _one_level(node)
    if treedef.is_leaf():
        return
    for i, child in enumerate(children):
        _node_paths(child, path + (i,), out)


def _selected_paths(where: Callable[[Any], Any], tree: Any,
                    is_leaf: Any) -> tuple[list[tuple[int, ...]], bool]:
    """Paths of the nodes `where` picks (found by identity in a probe copy of `tree`), and
    whether it picked a sequence of nodes rather than one."""
    leaves, treedef = tree_util.tree_flatten(tree, is_leaf)
    probe = treedef.unflatten(_Marker(i) for i in range(len(leaves)))
    paths: dict[int, tuple[int, ...]] = {}
    _node_paths(probe, (), paths)
    picked = where(probe)
    many = id(picked) not in paths and isinstance(picked, (list, tuple))
    nodes = list(picked) if many else [picked]
    for node in nodes:
        if id(node) not in paths or node is None:
            raise ValueError(
                f"tree_at: `where` selected a {type(node).__name__}, which is not a node or "
                f"leaf of the pytree. Static module fields (ints, floats, strings, None) are "
                f"not in the tree: change them with `module.replace(name=...)`.")
    return [paths[id(n)] for n in nodes], many


def _rebuild(node: Any, path: tuple[int, ...], new: dict[tuple, Callable[[Any], Any]]) -> Any:
    if path in new:
        return new[path](node)
    if not any(p[:len(path)] == path for p in new):
        return node
    children, treedef = _one_level(node)
    kids = [_rebuild(c, path + (i,), new) for i, c in enumerate(children)]
    return treedef.unflatten(kids)


def _constant(value: Any) -> Callable[[Any], Any]:
    return lambda _: value


def tree_at(where: Callable[[Any], Any], tree: Any, replace: Any = _NO_DEFAULT,
            replace_fn: Callable[[Any], Any] | None = None, is_leaf: Any = None) -> Any:
    """A copy of `tree` with the node(s) chosen by `where` replaced (Equinox's `tree_at`).

    `where(tree)` returns one node (e.g. `lambda m: m.l1.weight`) or a tuple/list of nodes;
    `replace` gives the new value(s) (a matching sequence when several are selected), or
    `replace_fn(old)` computes each. Nothing is mutated.
    """
    if (replace is _NO_DEFAULT) == (replace_fn is None):
        raise TypeError("tree_at: pass exactly one of `replace=` or `replace_fn=`")
    paths, many = _selected_paths(where, tree, is_leaf)
    new: dict[tuple, Callable[[Any], Any]]
    if replace_fn is not None:
        new = {p: replace_fn for p in paths}
    elif many:
        values = list(replace)
        if len(values) != len(paths):
            raise ValueError(f"tree_at: `where` selected {len(paths)} nodes but `replace` has "
                             f"{len(values)} values")
        new = {p: _constant(v) for p, v in zip(paths, values)}
    else:
        new = {paths[0]: lambda _: replace}
    return _rebuild(tree, (), new)
