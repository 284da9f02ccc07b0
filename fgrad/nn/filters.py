"""Equinox's filtered API: transformations that split a pytree into arrays and the rest.

`filter_jit` traces the arrays (Tensors, NumPy arrays) of its arguments and treats every
other leaf (Python numbers, functions, strings, ...) as static, part of the cache key;
`filter_grad` / `filter_value_and_grad` differentiate the floating-point arrays of the first
argument (None in the gradient elsewhere); `filter_vmap` maps arrays over axis 0 and leaves
the rest alone. `filter`, `partition`, `combine`, `tree_at`, `apply_updates` and
`tree_equal` complete the toolkit, so that `import fgrad.nn as eqx` runs Equinox programs::

    @eqx.filter_jit
    def step(model, opt_state, x, y):
        loss, grads = eqx.filter_value_and_grad(loss_fn)(model, x, y)
        updates, opt_state = opt.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), opt_state, loss

One difference from Equinox: a Module field holding no Tensor or Module (an int, a
function) is static structure here, never a leaf, so it comes back unchanged (not None) in
gradients and `partition` results.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any, Callable, Literal

import numpy as np

from fgrad.core import tree_util
from fgrad.core.tensor import Tensor, Tracer
from fgrad.nn.module import Module
from fgrad.nn.trainable import combine, filter_flags, partition
from fgrad.transforms import jit, value_and_grad, vmap

__all__ = ["apply_updates", "filter", "filter_grad", "filter_jit", "filter_value_and_grad",
           "filter_vmap", "if_array", "is_array", "is_array_like", "is_inexact_array",
           "is_inexact_array_like", "tree_equal"]

_ARRAY_TYPES = (Tensor, np.ndarray, np.generic)
_NUMBER_TYPES = (bool, int, float, complex)

# --------------------------------------------------------------------------- predicates


def is_array(element: Any) -> bool:
    """Whether `element` is an array: a Tensor (traced ones too) or a NumPy array/scalar."""
    return isinstance(element, _ARRAY_TYPES)


def is_array_like(element: Any) -> bool:
    """Whether `element` is an array or a Python bool/int/float/complex."""
    return isinstance(element, _ARRAY_TYPES + _NUMBER_TYPES) or hasattr(element, "__jax_array__")


def _is_inexact_dtype(x: Any) -> bool:
    if isinstance(x, Tensor):
        return x.dtype.is_float
    return bool(np.issubdtype(x.dtype, np.inexact))


def is_inexact_array(element: Any) -> bool:
    """Whether `element` is a floating-point array (what `filter_grad` differentiates)."""
    return isinstance(element, _ARRAY_TYPES) and _is_inexact_dtype(element)


def is_inexact_array_like(element: Any) -> bool:
    """Whether `element` is a floating-point array or a Python float/complex."""
    return is_inexact_array(element) or isinstance(element, (float, complex))


@dataclasses.dataclass(frozen=True)
class if_array:  # noqa: N801  (Equinox's name)
    """An axis spec for `filter_vmap`: `axis` for array leaves, None (unmapped) otherwise."""

    axis: int

    def __call__(self, x: Any) -> int | None:
        return self.axis if is_array(x) else None


# --------------------------------------------------------------------------- tree helpers


def filter(pytree: Any, filter_spec: Any, inverse: bool = False,  # noqa: A001
           replace: Any = None, is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """`pytree` with the leaves that fail `filter_spec` (pass it, with `inverse`) replaced by
    `replace` (None: a hole that `combine` fills). `filter_spec` is a predicate such as
    `is_array`, or a pytree prefix of bools and predicates, as for `partition`."""
    leaves, treedef = tree_util.tree_flatten(pytree, is_leaf)
    flags = filter_flags(pytree, filter_spec, is_leaf, "filter")
    keep = bool(inverse)
    return treedef.unflatten([x if f != keep else replace for x, f in zip(leaves, flags)])


def apply_updates(model: Any, updates: Any) -> Any:
    """`model + updates` leafwise, keeping each parameter's dtype; a None update (a hole, as
    `filter_grad` leaves for non-float leaves) keeps the model's leaf as it is."""

    def add(update: Any, param: Any) -> Any:
        if update is None:
            return param
        out = param + update
        if isinstance(param, Tensor) and isinstance(out, Tensor) and out.dtype != param.dtype:
            out = out.cast(param.dtype)
        return out

    return tree_util.tree_map(add, updates, model, is_leaf=lambda x: x is None)


def _shape_dtype(x: Any) -> tuple[tuple[int, ...], Any]:
    return tuple(x.shape), (x.dtype.np if isinstance(x, Tensor) else x.dtype)


def _arrays_equal(a: Any, b: Any, rtol: float, atol: float) -> bool | Tensor:
    """Values equal (or close, with tolerances); a bool Tensor when either is traced."""
    close = (rtol or atol) and _is_inexact_dtype(a)
    if isinstance(a, Tracer) or isinstance(b, Tracer):
        ta, tb = (x if isinstance(x, Tensor) else Tensor(np.asarray(x)) for x in (a, b))
        if close:
            return ((ta - tb).abs() <= atol + rtol * tb.abs()).all()
        return (ta == tb).all()
    na, nb = (x.numpy() if isinstance(x, Tensor) else np.asarray(x) for x in (a, b))
    if close:
        return bool(np.allclose(na, nb, rtol=rtol, atol=atol))
    return bool(np.all(na == nb))


def tree_equal(*pytrees: Any, typematch: bool = False, rtol: float = 0.0,
               atol: float = 0.0) -> bool | Tensor:
    """Whether all pytrees have the same structure and equal leaves (Equinox's `tree_equal`).

    Arrays must agree in shape and dtype and in value (`allclose` when `rtol`/`atol` are
    given); other leaves are compared with `==`; `typematch` also requires equal types.
    Returns a Python bool, or a bool Tensor when traced arrays had to be compared.
    """
    flat, treedef = tree_util.tree_flatten(pytrees[0])
    traced: Any = True
    for other in pytrees[1:]:
        leaves, other_def = tree_util.tree_flatten(other)
        if other_def != treedef:
            return False
        for a, b in zip(flat, leaves):
            if typematch and type(a) is not type(b):
                return False
            if is_array(a) != is_array(b):
                return False
            if not is_array(a):
                if not a == b:
                    return False
                continue
            if _shape_dtype(a) != _shape_dtype(b):
                return False
            same = _arrays_equal(a, b, rtol, atol)
            if same is False:
                return False
            if same is not True:
                traced = same if traced is True else traced.logical_and(same)
    return traced


# --------------------------------------------------------------------------- filter_jit


class _Dynamic:
    """Marks where an array leaf was, among the static leaves of a call."""

    def __repr__(self) -> str:
        return "<array>"


_DYN = _Dynamic()


class _Static:
    """The non-array part of a pytree: its structure and non-array leaves (hashable)."""

    __slots__ = ("treedef", "leaves", "_key")

    def __init__(self, treedef: tree_util.PyTreeDef, leaves: tuple[Any, ...]) -> None:
        self.treedef, self.leaves = treedef, leaves
        self._key = (treedef, tuple((type(x), x) for x in leaves))

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Static) and self._key == other._key

    def merge(self, arrays: list[Any]) -> Any:
        """The pytree again, with `arrays` (in order) where the arrays were."""
        it = iter(arrays)
        return self.treedef.unflatten([next(it) if x is _DYN else x for x in self.leaves])


def _split(tree: Any, who: str, hashable: bool) -> tuple[list[Any], _Static]:
    """(the array leaves, the rest) of `tree`; with `hashable`, check the rest hashes."""
    leaves, treedef = tree_util.tree_flatten(tree)
    static = tuple(_DYN if is_array(x) else x for x in leaves)
    if hashable:
        for i, x in enumerate(static):
            try:
                hash(x)
            except TypeError:
                path = tree_util.keystr(tree_util.tree_flatten_with_path(tree)[0][i][0])
                raise TypeError(
                    f"{who}: the non-array leaf {path or '<root>'} is an unhashable "
                    f"{type(x).__name__}; non-array leaves are static (part of the cache key) "
                    f"and must be hashable. Make it a Tensor, or hashable (a tuple, a frozen "
                    f"dataclass)") from None
    return [x for x in leaves if is_array(x)], _Static(treedef, static)


class _Carry:
    """Non-array outputs of a jitted call, carried in the output's tree structure."""

    def __init__(self, value: _Static) -> None:
        self.value = value


tree_util.register_pytree_node(_Carry, lambda c: ((), c.value), lambda v, _: _Carry(v))

_DONATE: dict[str, tuple[int, ...]] = {"none": (), "all": (0, 1), "warn": (0, 1),
                                       "all-except-first": (1,), "warn-except-first": (1,)}


def _as_tree(fun: Callable[..., Any]) -> Any:
    """`fun` as a pytree: a method bound to a Module becomes a Partial holding the Module,
    so that its arrays are traced rather than baked in by identity."""
    if inspect.ismethod(fun) and isinstance(fun.__self__, Module):
        return tree_util.Partial(fun.__func__, fun.__self__)
    return fun


def _signature(fun: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):
        return None


class _FilterJit:
    """The callable `filter_jit` returns; `lower`, `cache_info` and `clear_cache` as jit's."""

    def __init__(self, fun: Callable[..., Any], donate: str) -> None:
        if donate not in _DONATE:
            raise ValueError(f"filter_jit: donate must be one of {sorted(_DONATE)}, got "
                             f"{donate!r}")
        self._fun, self._tree, self._sig = fun, _as_tree(fun), _signature(fun)

        def run(dyn_first: list[Any], dyn_rest: list[Any],
                static: tuple[_Static, _Static]) -> tuple[list[Any], _Carry]:
            (first,), (fn, rest, kwargs) = static[0].merge(dyn_first), static[1].merge(dyn_rest)
            out = fn(*first, *rest, **kwargs)
            arrays, out_static = _split(out, "filter_jit", hashable=False)
            return arrays, _Carry(out_static)

        run.__name__ = getattr(fun, "__name__", type(fun).__name__)
        run.__qualname__ = getattr(fun, "__qualname__", run.__name__)
        self._jitted = jit(run, static_argnums=(2,), donate_argnums=_DONATE[donate])
        functools.update_wrapper(self, fun, updated=())

    def _inputs(self, args: tuple, kwargs: dict) -> tuple[list, list, tuple[_Static, _Static]]:
        if self._sig is not None:
            bound = self._sig.bind(*args, **kwargs)
            args, kwargs = bound.args, bound.kwargs
        dyn_first, s_first = _split((args[:1],), "filter_jit", hashable=True)
        dyn_rest, s_rest = _split((self._tree, args[1:], kwargs), "filter_jit", hashable=True)
        return dyn_first, dyn_rest, (s_first, s_rest)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        arrays, carry = self._jitted(*self._inputs(args, kwargs))
        return carry.value.merge(arrays)

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """The staged program for these arguments (`.as_text()`), as `jit(...).lower`."""
        return self._jitted.lower(*self._inputs(args, kwargs))

    def cache_info(self) -> Any:
        """Trace-cache hits and misses (one miss per new static part or array signature)."""
        return self._jitted.cache_info()

    def clear_cache(self) -> None:
        """Forget every traced signature."""
        self._jitted.clear_cache()

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        """As a method decorator: the instance becomes the (traced) first argument."""
        return self if instance is None else tree_util.Partial(self, instance)


def filter_jit(fun: Callable[..., Any] | None = None, *,
               donate: Literal["none", "all", "all-except-first", "warn",
                               "warn-except-first"] = "none") -> Any:
    """Compile `fun` with its array arguments traced and everything else static (Equinox's
    `filter_jit`); usable as `@filter_jit` or `@filter_jit(donate="all")`.

    Arrays (Tensors, NumPy arrays) anywhere in the arguments, or in `fun` itself if it is a
    Module, are traced: a new shape or dtype retraces. Every other leaf (Python numbers,
    strings, functions, ...) is static: it must be hashable, and a new value retraces.
    Non-array outputs are returned as they were made. `donate="all"` lets the outputs reuse
    the arguments' arrays ("all-except-first" spares the first argument).
    """
    if fun is None:
        return functools.partial(filter_jit, donate=donate)
    return _FilterJit(fun, donate)


# --------------------------------------------------------------------------- filter_grad


def filter_value_and_grad(fun: Callable[..., Any] | None = None, *,
                          has_aux: bool = False) -> Any:
    """`fun(x, *args, **kwargs)` and its gradient with respect to the floating-point arrays
    of `x` (Equinox's `filter_value_and_grad`): `(value, grads)`, or `((value, aux), grads)`
    with `has_aux`. `grads` is shaped like `x`, with None at the other leaves."""
    if fun is None:
        return functools.partial(filter_value_and_grad, has_aux=has_aux)
    f: Callable[..., Any] = fun

    @functools.wraps(f)
    def value_and_grad_fn(x: Any, *args: Any, **kwargs: Any) -> Any:
        diff, rest = partition(x, is_inexact_array)

        def call(d: Any) -> Any:
            return f(combine(d, rest), *args, **kwargs)

        call.__name__ = getattr(f, "__name__", "fun")
        if has_aux:
            return value_and_grad(call, has_aux=True)(diff)
        return value_and_grad(call)(diff)

    return value_and_grad_fn


def filter_grad(fun: Callable[..., Any] | None = None, *, has_aux: bool = False) -> Any:
    """The gradient of `fun(x, *args, **kwargs)` with respect to the floating-point arrays
    of `x`, None at its other leaves (Equinox's `filter_grad`); `(grads, aux)` with
    `has_aux`."""
    if fun is None:
        return functools.partial(filter_grad, has_aux=has_aux)
    vg = filter_value_and_grad(fun, has_aux=has_aux)

    @functools.wraps(fun)
    def grad_fn(*args: Any, **kwargs: Any) -> Any:
        value, grads = vg(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    return grad_fn


# --------------------------------------------------------------------------- filter_vmap


def _axes(tree: Any, spec: Any, what: str) -> list[int | None]:
    """One axis (or None) per leaf of `tree` from a prefix of ints, None and callables."""
    values, spec_def = tree_util.tree_flatten(spec, is_leaf=lambda s: s is None)
    try:
        subtrees = spec_def.flatten_up_to(tree)
    except (ValueError, TypeError) as err:
        raise ValueError(f"filter_vmap: {what} must be a pytree prefix of the "
                         f"{'arguments' if what == 'in_axes' else 'output'}: {err}") from None
    axes: list[int | None] = []
    for value, sub in zip(values, subtrees):
        leaves = tree_util.tree_leaves(sub)
        if value is None or isinstance(value, int):
            axes += [value] * len(leaves)
        elif callable(value):
            axes += [value(x) for x in leaves]
        else:
            raise ValueError(f"filter_vmap: {what} must hold None, ints and callables, "
                             f"got {value!r}")
    for x, a in zip(tree_util.tree_leaves(tree), axes):
        if a is not None and not is_array(x):
            raise ValueError(f"filter_vmap: {what} asks to map a {type(x).__name__}; only "
                             f"arrays have an axis to map (use eqx.if_array(0) or None)")
    return axes


def _move_from_front(x: Tensor, axis: int) -> Tensor:
    """`x` with its axis 0 moved to `axis`."""
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"filter_vmap: out_axes {axis} is out of range for an output of "
                         f"{x.ndim} dimensions (batch axis included)")
    axis %= x.ndim
    if axis == 0:
        return x
    perm = list(range(1, x.ndim))
    perm.insert(axis, 0)
    return x.permute(*perm)


class _FilterVmap:
    """The callable `filter_vmap` returns."""

    def __init__(self, fun: Callable[..., Any], in_axes: Any, out_axes: Any,
                 axis_name: Any, axis_size: int | None) -> None:
        self._fun, self._in_axes, self._out_axes = fun, in_axes, out_axes
        self._axis_name, self._axis_size = axis_name, axis_size
        functools.update_wrapper(self, fun, updated=())

    def _named(self, args: tuple) -> Any:
        """A dict of in_axes keyed by parameter name, as a tuple per positional argument."""
        if not isinstance(self._in_axes, dict):
            return self._in_axes
        axes = dict(self._in_axes)
        params = list(inspect.signature(self._fun).parameters)[:len(args)]
        named = tuple(axes.pop(p, if_array(0)) for p in params)
        if axes:
            raise ValueError(f"filter_vmap: in_axes names no parameter: {tuple(axes)}")
        return named

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise RuntimeError("filter_vmap: keyword arguments are not supported (as in "
                               "Equinox); pass them positionally, or close over them")
        leaves, treedef = tree_util.tree_flatten(args)
        axes = _axes(args, self._named(args), "in_axes")
        mapped = [i for i, a in enumerate(axes) if a is not None]
        box: list[Any] = []

        def inner(mapped_leaves: list[Any]) -> tuple[list[Any], list[Any]]:
            full = list(leaves)
            for i, value in zip(mapped, mapped_leaves):
                full[i] = value
            out = self._fun(*treedef.unflatten(full))
            out_axes = _axes(out, self._out_axes, "out_axes")
            arrays, static = _split(out, "filter_vmap", hashable=False)
            box.append((static, out_axes))
            array_axes = [a for x, a in zip(tree_util.tree_leaves(out), out_axes) if is_array(x)]
            return ([x for x, a in zip(arrays, array_axes) if a is not None],
                    [x for x, a in zip(arrays, array_axes) if a is None])

        if not mapped and self._axis_size is None:
            batched, unbatched = inner([])
            if batched:
                raise ValueError("filter_vmap: no argument is mapped, so the batch size is "
                                 "unknown; pass axis_size= or make out_axes None")
        else:
            batched, unbatched = vmap(inner, in_axes=([axes[i] for i in mapped],),
                                      out_axes=(0, None), axis_size=self._axis_size,
                                      axis_name=self._axis_name)([leaves[i] for i in mapped])
        static, out_axes = box[-1]
        array_axes = [a for x, a in zip(static.leaves, out_axes) if x is _DYN]
        moved, kept = iter(batched), iter(unbatched)
        return static.merge([kept.__next__() if a is None else _move_from_front(next(moved), a)
                             for a in array_axes])

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        """As a method decorator: the instance becomes the first argument."""
        return self if instance is None else tree_util.Partial(self, instance)


def filter_vmap(fun: Callable[..., Any] | None = None, *, in_axes: Any = if_array(0),
                out_axes: Any = if_array(0), axis_name: Any = None,
                axis_size: int | None = None) -> Any:
    """Vectorize `fun` (Equinox's `filter_vmap`). `in_axes` is a pytree prefix of the tuple
    of positional arguments (or a dict keyed by parameter name) whose leaves are an int,
    None (unmapped) or a callable `leaf -> int | None` such as the default `if_array(0)`:
    arrays mapped over axis 0, everything else passed as is. `out_axes` likewise for the
    output: by default arrays are stacked on axis 0 and non-array outputs returned once."""
    if fun is None:
        return functools.partial(filter_vmap, in_axes=in_axes, out_axes=out_axes,
                                 axis_name=axis_name, axis_size=axis_size)
    return _FilterVmap(fun, in_axes, out_axes, axis_name, axis_size)
