"""Functional programming helpers with jax.numpy's semantics: select, piecewise, vectorize,
apply_along_axis, apply_over_axes, fromfunction.

`vectorize`, `apply_along_axis` and `piecewise` map Python functions with fgrad.vmap (as JAX
does), so the functions see traced slices and everything works under jit, grad and vmap.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Callable, Collection, Sequence

import numpy as np

from fgrad.core import tree_util
from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, asarray, axis_of, result_type, to_dtype
from fgrad.numpy.shape import broadcast_shapes, broadcast_to, expand_dims


def _vmap(fn: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0) -> Callable[..., Any]:
    from fgrad.transforms import vmap
    return vmap(fn, in_axes=in_axes, out_axes=out_axes)


def _as_bool(c: ArrayLike) -> Tensor:
    t = asarray(c)
    return t if t.dtype == dtypes.bool else t != 0


def select(condlist: Sequence[ArrayLike], choicelist: Sequence[ArrayLike],
           default: ArrayLike = 0) -> Tensor:
    """Elementwise, the choice for the first true condition, else `default` (conditions,
    choices and default broadcast; a Python scalar default is weak)."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"fgrad.numpy.select: condlist and choicelist must have the same "
                         f"length, got {len(condlist)} and {len(choicelist)}")
    if len(condlist) == 0:
        raise ValueError("fgrad.numpy.select: condlist must not be empty")
    conds = [_as_bool(c) for c in condlist]
    dt = result_type(default, *choicelist)
    choices = [asarray(c, dt) for c in choicelist]
    shape = broadcast_shapes(*[t.shape for t in conds + choices], asarray(default).shape)
    out = broadcast_to(asarray(default, dt), shape)
    for cond, choice in zip(reversed(conds), reversed(choices)):
        out = cond.where(choice, out)
    return broadcast_to(out, shape)


def piecewise(x: ArrayLike, condlist: Any, funclist: Sequence[Any], *args: Any,
              **kw: Any) -> Tensor:
    """funclist[i] where condlist[i] holds (later conditions win), an extra last function or
    value where none holds (else 0). Functions get each element (mapped with vmap) and
    `*args, **kw`; values are constants. The result has x's dtype."""
    xt = asarray(x)
    if isinstance(condlist, (Tensor, np.ndarray)) and xt.ndim and condlist.shape == xt.shape:
        condlist = [condlist]
    conds = [broadcast_to(_as_bool(c), xt.shape) for c in condlist]
    nc, nf = len(conds), len(funclist)
    if nf == nc + 1:
        funcs = [funclist[-1]] + list(funclist[:-1])
    elif nf == nc:
        funcs = [0] + list(funclist)
    else:
        raise ValueError(f"fgrad.numpy.piecewise: with {nc} condition(s), give {nc} or "
                         f"{nc + 1} functions/values, got {nf}")
    flat = xt.reshape(-1)

    def branch(f: Any) -> Tensor:
        if not callable(f):
            return broadcast_to(asarray(f, xt.dtype), xt.shape)
        mapped = _vmap(lambda s: asarray(f(s, *args, **kw)).cast(xt.dtype))(flat)
        return mapped.reshape(xt.shape)
    out = branch(funcs[0])
    for cond, f in zip(conds, funcs[1:]):
        out = cond.where(branch(f), out)
    return out


# ---------------------------------------------------------------------------- vectorize

_NAME = r"\w+"
_CORE = rf"(?:{_NAME}(?:,{_NAME})*)?"
_ARG = rf"\({_CORE}\)"
_ARGS = rf"{_ARG}(?:,{_ARG})*"
_SIGNATURE = rf"^{_ARGS}->{_ARGS}$"


def _parse_signature(signature: str) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    sig = signature.replace(" ", "")
    if not re.match(_SIGNATURE, sig):
        raise ValueError(f"fgrad.numpy.vectorize: not a valid gufunc signature: {signature!r} "
                         f"(e.g. '(n),(n)->()')")
    ins, outs = ([tuple(re.findall(_NAME, a)) for a in re.findall(_ARG, part)]
                 for part in sig.split("->"))
    return ins, outs


def _core_sizes(shapes: list[tuple[int, ...]], cores: list[tuple[str, ...]],
                sizes: dict[str, int], what: str) -> None:
    for shape, core in zip(shapes, cores):
        if len(shape) < len(core):
            raise ValueError(f"fgrad.numpy.vectorize: {what} of shape {shape} has fewer "
                             f"dimensions than its core dimensions {core}")
        for name, n in zip(core, shape[len(shape) - len(core):]):
            if sizes.setdefault(name, n) != n:
                raise ValueError(f"fgrad.numpy.vectorize: core dimension {name!r} is "
                                 f"{sizes[name]} in one place and {n} in another "
                                 f"({what} of shape {shape})")


def vectorize(pyfunc: Callable[..., Any], *, excluded: Collection[int | str] = frozenset(),
              signature: str | None = None) -> Callable[..., Any]:
    """`pyfunc` mapped over the leading (broadcast) axes of its positional arguments with
    vmap. `signature` ('(n),(n)->()') names core axes that pyfunc sees whole; `excluded`
    positions or keyword names are passed through unmapped, as are other keywords."""
    bad = [e for e in excluded if not isinstance(e, (int, str))]
    if bad or any(isinstance(e, int) and e < 0 for e in excluded):
        raise TypeError(f"fgrad.numpy.vectorize: excluded must hold non-negative positions "
                        f"or keyword names, got {sorted(map(repr, excluded))}")

    @functools.wraps(pyfunc)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        static = {i: a for i, a in enumerate(args) if i in excluded}
        dynamic = [asarray(a) for i, a in enumerate(args) if i not in excluded]

        def call(*dyn: Any) -> Any:
            it = iter(dyn)
            full = [static[i] if i in static else next(it) for i in range(len(args))]
            return pyfunc(*full, **kwargs)
        if signature is None:
            in_cores: list[tuple[str, ...]] = [()] * len(dynamic)
            out_cores: list[tuple[str, ...]] | None = None
        else:
            in_cores, out_cores = _parse_signature(signature)
            if len(in_cores) != len(dynamic):
                raise TypeError(f"fgrad.numpy.vectorize: signature {signature!r} has "
                                f"{len(in_cores)} inputs, got {len(dynamic)} arrays")
        sizes: dict[str, int] = {}
        _core_sizes([t.shape for t in dynamic], in_cores, sizes, "an argument")
        loops = [t.shape[:t.ndim - len(c)] for t, c in zip(dynamic, in_cores)]
        batch = broadcast_shapes(*loops) if loops else ()
        fn = call if out_cores is None else _checked(call, sizes, out_cores)
        squeezed, filled = [], []
        for t, loop in zip(dynamic, loops):
            filled.append((1,) * (len(batch) - len(loop)) + loop)
            ones = tuple(i for i, n in enumerate(loop) if n == 1)
            squeezed.append(t.reshape(tuple(n for i, n in enumerate(t.shape) if i not in ones))
                            if ones else t)
        expand = []
        for k in range(len(batch) - 1, -1, -1):
            axes = tuple(None if f[k] == 1 else 0 for f in filled)
            if all(a is None for a in axes):
                expand.append(k)
            else:
                fn = _vmap(fn, axes)
        out = fn(*squeezed)
        if not expand:
            return out
        return tree_util.tree_map(lambda r: expand_dims(r, tuple(sorted(expand))), out)
    return wrapped


def _checked(fn: Callable[..., Any], sizes: dict[str, int],
             out_cores: list[tuple[str, ...]]) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        out = fn(*args)
        outs = list(out) if isinstance(out, tuple) else [out]
        if len(out_cores) > 1 and not isinstance(out, tuple):
            raise TypeError(f"fgrad.numpy.vectorize: the signature promises {len(out_cores)} "
                            f"outputs; the function must return a tuple")
        if len(outs) != len(out_cores):
            raise TypeError(f"fgrad.numpy.vectorize: expected {len(out_cores)} outputs, got "
                            f"{len(outs)}")
        _core_sizes([tuple(np.shape(o)) if not isinstance(o, Tensor) else o.shape
                     for o in outs], out_cores, dict(sizes), "an output")
        return out
    return run


# ---------------------------------------------------------------------------- axes

def apply_along_axis(func1d: Callable[..., Any], axis: int, arr: ArrayLike, *args: Any,
                     **kwargs: Any) -> Any:
    """func1d applied to every 1-d slice along `axis` (mapped with vmap); its result's axes
    take the place of `axis`."""
    x = asarray(arr)
    ax = axis_of(axis, x.ndim, "apply_along_axis")
    fn: Callable[..., Any] = lambda a: func1d(a, *args, **kwargs)  # noqa: E731
    for i in range(1, x.ndim - ax):
        fn = _vmap(fn, in_axes=i, out_axes=-1)
    for _ in range(ax):
        fn = _vmap(fn, in_axes=0, out_axes=0)
    return fn(x)


def apply_over_axes(func: Callable[[Tensor, int], Any], a: ArrayLike,
                    axes: int | Sequence[int]) -> Tensor:
    """func(a, axis) applied for each axis in turn; a result that lost the axis gets it back
    (length 1), so the number of dimensions stays."""
    x = asarray(a)
    for axis in ((axes,) if isinstance(axes, (int, np.integer)) else axes):
        b = asarray(func(x, axis))
        if b.ndim == x.ndim - 1:
            b = expand_dims(b, axis)
        elif b.ndim != x.ndim:
            raise ValueError(f"fgrad.numpy.apply_over_axes: func returned {b.ndim} dimensions "
                             f"for an input of {x.ndim}; it must keep the axis or drop it")
        x = b
    return x


def fromfunction(function: Callable[..., Any], shape: Sequence[int], *, dtype: Any = float,
                 **kwargs: Any) -> Any:
    """function(i0, i1, ...) at every index of `shape` (float32 indices by default). As in
    JAX, function is mapped with vmap, so it sees scalars and must be elementwise."""
    dims = tuple(int(n) for n in ((shape,) if isinstance(shape, int) else shape))
    want = to_dtype(dtype)
    fn: Callable[..., Any] = functools.partial(function, **kwargs)
    for i in range(len(dims)):
        fn = _vmap(fn, tuple(0 if i == j else None for j in range(len(dims)))[::-1])
    return fn(*(Tensor(np.arange(n).astype((want or dtypes.default_float).np)) for n in dims))
