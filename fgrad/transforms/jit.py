"""`fgrad.jit`: stage a function per abstract signature, cache it, and call it as one `jit`
primitive (so it composes with grad and vmap).

The cache key is (pytree structure, each leaf's shape and dtype, static argument values).
Python scalars passed as arguments are traced as 0-d Tensors, so changing a learning rate
never recompiles. Every retrace records which argument changed (`last_retrace_reason`;
logged when FGRAD_LOG_RETRACE=1). Arguments in `donate_argnums` are consumed by an eager
call: an output may reuse their memory, and using them afterwards raises.
"""
from __future__ import annotations

import collections
import functools
import inspect
import logging
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Generic, Sequence, TypeVar, overload

from typing_extensions import ParamSpec

from fgrad import flags, profiler
from fgrad.core import tree_util
from fgrad.core.api_util import fn_name, merge_static, split_static, to_tensor_leaf
from fgrad.core.ir import ClosedJaxpr
from fgrad.core.staging import Origin, trace_to_jaxpr
from fgrad.core.tensor import EvalTrace, Tensor
from fgrad.core.trace import current_trace
from fgrad.core.traceback_util import api_boundary, filtered
from fgrad.transforms import executables
from fgrad.transforms.jit_log import log_compile
from fgrad.transforms.jit_prim import call_closed, open_jaxpr

P = ParamSpec("P")
R = TypeVar("R")
log = logging.getLogger("fgrad.jit")
BACKENDS = flags.BACKENDS
_MISS = object()
_LIVE: "weakref.WeakSet[JittedFunction]" = weakref.WeakSet()  # for fgrad.clear_caches()


@dataclass
class CacheInfo:
    """Trace-cache statistics of one jitted function."""

    hits: int = 0
    misses: int = 0
    trace_seconds: float = 0.0
    compile_seconds: float = 0.0

    @property
    def currsize(self) -> int:
        return self.misses


def _hashable_static(value: Any, where: str) -> Any:
    import numpy as np
    if isinstance(value, (Tensor, np.ndarray)):
        raise TypeError(f"static argument {where} is a {type(value).__name__}; static "
                        f"arguments are Python values baked into the trace (numbers, "
                        f"strings, tuples). Pass array data as a regular argument, or "
                        f"convert it (e.g. tuple(x.tolist())) if it must be static")
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"static argument {where} has unhashable type "
                        f"{type(value).__name__}; static arguments must be hashable (use a "
                        f"tuple instead of a list, or pass it as a Tensor)") from None
    return value


class Lowered:
    """The staged program of one signature; `as_text()` prints every stage."""

    def __init__(self, closed: ClosedJaxpr, backend: str, name: str):
        self.closed, self.backend, self.name = closed, backend, name

    def as_text(self) -> str:
        """The jaxpr, then whatever the backend adds (schedule, kernel IR, LLVM IR / OpenCL)."""
        parts = [f"# jaxpr of {self.name}", str(self.closed)]
        describe = getattr(executables.compiler_for(self.backend), "describe", None)
        if describe is not None:
            parts.append(describe(open_jaxpr(self.closed)[0]))
        else:
            parts.append(f"# backend {self.backend!r}: evaluated equation by equation")
        return "\n".join(parts)

    def compile(self) -> Callable[..., Any]:
        """The executable for this signature (flat NumPy arrays in and out)."""
        jaxpr, consts = open_jaxpr(self.closed)
        exe = executables.executable_for(jaxpr, self.backend)
        return functools.partial(exe, *[c._data for c in consts])


class JittedFunction(Generic[P, R]):
    """The callable returned by `jit`; also offers `lower`, `cache_info`, `clear_cache`.
    Type checkers see it as `fn` itself: same parameters, same return type."""

    def __init__(self, fn: Callable[P, R], static_argnums: tuple[int, ...],
                 static_argnames: tuple[str, ...], donate_argnums: tuple[int, ...],
                 backend: str | None):
        from fgrad.transforms.jit_checks import check_static, positions_of
        check_static(fn, static_argnums, static_argnames, donate_argnums)
        self.fn = fn
        self.static_argnums = tuple(dict.fromkeys(
            static_argnums + positions_of(fn, static_argnames)))
        self.static_argnames = static_argnames + _names_of(fn, self.static_argnums)
        self.donate_argnums = donate_argnums
        self.backend = backend
        self._cache: collections.OrderedDict[Any, tuple[ClosedJaxpr, Any]] = \
            collections.OrderedDict()
        self._fast: collections.OrderedDict[Any, tuple[Callable[..., Any], Any, bool, bool]] = \
            collections.OrderedDict()
        self._last: Any = None  # (arrays, backend, _fast entry) of the last fast call
        self._signatures: list[tuple[Any, list[str]]] = []  # the last traced signature
        self._lock = threading.RLock()  # one trace per signature, even from many threads
        self.info = CacheInfo()
        _LIVE.add(self)
        self.last_retrace_reason: str | None = None
        functools.update_wrapper(self, fn, updated=())  # never merge fn.__dict__ into self

    def _backend(self) -> str:
        backend = (self.backend or flags.jit_call_flags()[2]).lower()
        if backend not in BACKENDS:
            raise ValueError(f"jit: unknown backend {backend!r}; choose one of {BACKENDS}")
        return backend

    def _signature(self, args: tuple, kwargs: dict) -> tuple[Any, ...]:
        dynamic, static = split_static(args, self.static_argnums)
        static = {i: _hashable_static(v, f"#{i}") for i, v in static.items()}
        s_kw = {k: _hashable_static(v, k) for k, v in kwargs.items() if k in self.static_argnames}
        d_kw = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        pairs, treedef = tree_util.tree_flatten_with_path((tuple(dynamic), d_kw))
        name = fn_name(self.fn)
        positions = [i for i in range(len(args)) if i not in static]
        descs = [_describe(self.fn, positions, p) for p, _ in pairs]
        leaves = [to_tensor_leaf(x, f"argument {d} of {name}")
                  for d, (_, x) in zip(descs, pairs, strict=True)]
        key = (treedef, tuple((x.shape, x.dtype) for x in leaves),
               tuple(sorted(static.items())), tuple(sorted(s_kw.items())))
        return key, leaves, descs, static, s_kw, treedef

    def _trace(self, leaves: list[Any], descs: list[str], static: dict, s_kw: dict,
               treedef: Any) -> tuple[ClosedJaxpr, Any]:
        name = fn_name(self.fn)

        def flat_fn(*tracers: Any) -> tuple[list[Any], Any]:
            dyn, d_kw = tree_util.tree_unflatten(treedef, list(tracers))
            out = self.fn(*merge_static(list(dyn), static), **d_kw, **s_kw)
            out_leaves, out_tree = tree_util.tree_flatten(out)
            return [to_tensor_leaf(o, f"an output of {name}") for o in out_leaves], out_tree

        origins = [Origin(name, d) for d in descs]
        start = time.perf_counter()
        closed, out_tree = trace_to_jaxpr(flat_fn, [x.aval for x in leaves], current_trace(),
                                          f"jit({name})", origins)
        self.info.trace_seconds += time.perf_counter() - start
        return closed, out_tree

    def _lookup(self, args: tuple, kwargs: dict) -> tuple[ClosedJaxpr, Any, list[Any]]:
        key, leaves, descs, static, s_kw, treedef = self._signature(args, kwargs)
        entry = self._cache.get(key)
        if entry is None:
            with self._lock:
                entry = self._cache.get(key)
                if entry is None:
                    self.info.misses += 1
                    self._explain_retrace(key, descs)
                    entry = self._trace(leaves, descs, static, s_kw, treedef)
                    _bounded_put(self._cache, key, entry)
                    self._signatures[:] = [(key, descs)]
                    return entry[0], entry[1], leaves
        self.info.hits += 1
        _touch(self._cache, key)
        return entry[0], entry[1], leaves

    def _explain_retrace(self, key: tuple, descs: list[str]) -> None:
        if not self._signatures:
            return
        prev, prev_descs = self._signatures[-1]
        self.last_retrace_reason = explain_difference(prev, prev_descs, key, descs)
        if flags.log_retrace():
            log.warning("retracing %s: %s", fn_name(self.fn), self.last_retrace_reason)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        disable, checks, default_backend = flags.jit_call_flags()
        if disable:
            return self.fn(*args, **kwargs)
        try:  # (not a decorator: this is the hot path of every jitted call)
            if not kwargs and not checks and profiler.active() is None:
                fast = self._fast_call(args, self.backend or default_backend)
                if fast is not _MISS:
                    return fast
            return self._general_call(args, kwargs)
        except Exception as err:
            raise filtered(err)

    def _general_call(self, args: tuple, kwargs: dict) -> Any:
        misses, traced = self.info.misses, self.info.trace_seconds
        closed, out_tree, leaves = self._lookup(args, kwargs)
        before = executables.compile_seconds[0]
        if self.donate_argnums and isinstance(current_trace(), EvalTrace):
            outs = self._call_donating(closed, leaves, args)
        else:
            outs = call_closed(closed, leaves, fn_name(self.fn), self._backend())
        compiled = executables.compile_seconds[0] - before
        self.info.compile_seconds += compiled
        if compiled or self.info.misses != misses:
            log_compile(self, leaves, self.info.misses != misses,
                        self.info.trace_seconds - traced, compiled)
        if isinstance(current_trace(), EvalTrace):
            self._remember_fast(args, kwargs, closed, out_tree)
        return tree_util.tree_unflatten(out_tree, outs)

    def profile(self, *args: Any, **kwargs: Any) -> Any:
        """Run once to compile, then once under `fgrad.profiler.profile()`; print and return
        the Profile (its table maps the program's steps to the user's lines)."""
        from fgrad import profiler
        from fgrad.core.methods.interop import block_until_ready
        block_until_ready(self(*args, **kwargs))  # the compile's device work is not timed
        with profiler.profile() as prof:
            self(*args, **kwargs)
        print(prof.table())
        return prof

    def _fast_call(self, args: tuple, backend_name: str) -> Any:
        """The eager call of an already compiled signature, without binding `jit`: the
        arrays of the last call again (`is`), else a lookup of (structure, shapes,
        dtypes); then the executable. `_MISS` when anything needs the general path
        (static or donated arguments, Python scalars, tracers, a first call).
        `backend_name` is the backend as given (checked by `_backend` on a lookup)."""
        last = self._last
        if last is not None and last[1] == backend_name and _same_arrays(args, last[0]):
            datas, (run, out_tree, single, frozen) = last[0], last[2]
        else:
            if not self._fast:
                return _MISS
            found = _fast_key(args, self._backend())
            entry = self._fast.get(found[0]) if found is not None else None
            if found is None or entry is None:
                return _MISS
            run, out_tree, single, frozen = entry
            datas = tuple(found[1])
            small = all(d.nbytes <= _MEMO_BYTES for d in datas)
            self._last = (datas, backend_name, entry) if small else None
        if not isinstance(current_trace(), EvalTrace):
            return _MISS
        self.info.hits += 1
        if frozen:
            outs, wrap = run(datas), _frozen_tensor
        else:
            outs, wrap = run(*datas), Tensor._wrap
        if single:
            return wrap(outs[0])
        return tree_util.tree_unflatten(out_tree, [wrap(o) for o in outs])

    def _remember_fast(self, args: tuple, kwargs: dict, closed: ClosedJaxpr,
                       out_tree: Any) -> None:
        """After a general eager call, let later calls of this signature take the fast path."""
        if kwargs or self.static_argnums or self.donate_argnums:
            return
        backend = self._backend()
        found = _fast_key(args, backend)
        if found is None:
            return
        jaxpr, consts = open_jaxpr(closed)
        exe = executables.executable_for(jaxpr, backend)
        # an executable's `fast_call` (if any) takes the tuple of arrays and returns
        # read-only arrays, so its outputs need no check before they become Tensors
        fast = None if consts else getattr(exe, "fast_call", None)
        run = fast or (functools.partial(exe, *[c._data for c in consts]) if consts else exe)
        single = out_tree == tree_util.tree_structure(0)
        with self._lock:
            _bounded_put(self._fast, found[0], (run, out_tree, single, fast is not None))

    def _call_donating(self, closed: ClosedJaxpr, leaves: list[Any], args: tuple) -> list[Any]:
        """An eager call that consumes the donated arguments (under a transformation,
        donation is ignored: there is no buffer to give away)."""
        jaxpr, consts = open_jaxpr(closed)
        mask = [False] * len(consts) + _donated_leaves(args, len(leaves), self.static_argnums,
                                                       self.donate_argnums)
        return executables.call_donating(jaxpr, self._backend(), consts + leaves, mask,
                                         fn_name(self.fn))

    @api_boundary
    def lower(self, *args: P.args, **kwargs: P.kwargs) -> Lowered:
        """Stage for these arguments' signature; `.as_text()` / `.compile()` on the result."""
        closed, _, _ = self._lookup(args, kwargs)
        return Lowered(closed, self._backend(), fn_name(self.fn))

    def cache_info(self) -> CacheInfo:
        """Hits, misses, and seconds spent tracing and compiling."""
        return self.info

    def clear_cache(self) -> None:
        """Forget every traced signature (and so free their compiled programs)."""
        with self._lock:
            self._cache.clear()
            self._fast.clear()
            self._last = None
            self._signatures.clear()


def _bounded_put(cache: collections.OrderedDict, key: Any, value: Any) -> None:
    """Insert as most recent; drop the least recently used beyond `flags.jit_cache_size()`."""
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > flags.jit_cache_size():
        cache.popitem(last=False)


def _touch(cache: collections.OrderedDict, key: Any) -> None:
    try:
        cache.move_to_end(key)
    except KeyError:  # evicted by another thread meanwhile
        pass


_MEMO_BYTES = 4096  # the arrays of a call up to this size each are remembered for the next


def _same_arrays(args: tuple, datas: tuple) -> bool:
    """Whether `args` are Tensors of exactly (`is`) the arrays `datas` (one argument, the
    common case, without a loop: 0.2 against 0.7 us)."""
    if len(args) != len(datas):
        return False
    if len(args) == 1:
        a = args[0]
        return type(a) is Tensor and a._data is datas[0]
    for a, d in zip(args, datas):
        if type(a) is not Tensor or a._data is not d:
            return False
    return True


def _frozen_tensor(arr: Any) -> Tensor:
    """A Tensor of an executable's read-only `fast_call` output (no flag check)."""
    t = _new_tensor(Tensor)
    t._data = arr
    return t


_new_tensor = object.__new__


def _fast_key(args: tuple, backend: str) -> tuple[Any, list[Any]] | None:
    """(cache key, leaf arrays) of arguments that are all concrete Tensors, else None."""
    datas = []
    for a in args:
        if type(a) is not Tensor:
            break
        datas.append(a._data)
    else:
        return (len(args), tuple([(d.shape, d.dtype) for d in datas]), backend), datas
    leaves: list[Any] = []
    parts: list[Any] = []
    _signature(args, leaves, parts)
    if not all(type(x) is Tensor for x in leaves):
        return None
    datas = [x._data for x in leaves]
    structure: Any = tuple(parts)
    try:
        hash(structure)
    except TypeError:   # a node's data is unhashable: its PyTreeDef compares it instead
        structure = tree_util.tree_structure(args)
    return (structure, tuple((d.shape, d.dtype) for d in datas), backend), datas


def _signature(tree: Any, leaves: list[Any], parts: list[Any]) -> None:
    """Append `tree`'s structure to `parts` in preorder, (node type, node data, number of
    children) per node and None per leaf, and its leaves to `leaves`. Two signatures are
    equal exactly when the PyTreeDefs are, and a flat tuple hashes and compares in C: on
    a training step's arguments (a model and an optimizer state) 2-3x sooner than
    building, hashing and comparing a PyTreeDef."""
    handler = tree_util._handler_of(type(tree))
    if handler is None:
        leaves.append(tree)
        parts.append(None)
        return
    children, data = handler.flatten(tree)
    children = tuple(children)
    parts += (type(tree), data, len(children))
    for child in children:
        _signature(child, leaves, parts)


def _donated_leaves(args: tuple, n_leaves: int, static_argnums: tuple[int, ...],
                    donate_argnums: tuple[int, ...]) -> list[bool]:
    """For each flattened argument leaf: whether its positional argument is donated
    (keyword arguments are never donated)."""
    n = len(args)
    static = {i % n for i in static_argnums if -n <= i < n}
    donate = {i % n for i in donate_argnums if -n <= i < n}
    mask: list[bool] = []
    for i, arg in enumerate(args):
        if i not in static:
            mask += [i in donate] * len(tree_util.tree_leaves(arg))
    return mask + [False] * (n_leaves - len(mask))


def _names_of(fn: Callable[..., Any], argnums: tuple[int, ...]) -> tuple[str, ...]:
    """Parameter names of the static positions, so passing them by keyword stays static."""
    import inspect
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return ()
    return tuple(params[i].name for i in argnums if -len(params) <= i < len(params)
                 and params[i].kind in (params[i].POSITIONAL_OR_KEYWORD, params[i].KEYWORD_ONLY))


def _describe(fn: Callable[..., Any], positions: list[int], path: tuple) -> str:
    """A readable name for a flattened argument leaf: `params['w']`, `x`, `lr=`."""
    group = getattr(path[0], "idx", None) if path else None
    if group == 1 and len(path) > 1:
        return f"{getattr(path[1], 'key', '?')}=" + tree_util.keystr(tuple(path[2:]))
    if len(path) < 2:
        return tree_util.keystr(tuple(path))
    pos = positions[getattr(path[1], "idx", 0)]
    try:
        import inspect
        names = [p.name for p in inspect.signature(fn).parameters.values()]
        name = names[pos] if pos < len(names) else f"#{pos}"
    except (TypeError, ValueError):
        name = f"#{pos}"
    return name + tree_util.keystr(tuple(path[2:]))


def explain_difference(prev: tuple, prev_descs: list[str], new: tuple,
                       new_descs: list[str]) -> str:
    """Say which argument's structure, shape, dtype or static value changed."""
    if prev[0] != new[0]:
        return f"the argument structure changed: {prev[0]} -> {new[0]}"
    for desc, (s0, d0), (s1, d1) in zip(new_descs, prev[1], new[1], strict=True):
        if s0 != s1:
            return f"argument {desc} changed shape {s0} -> {s1}"
        if d0 != d1:
            return f"argument {desc} changed dtype {d0.name} -> {d1.name}"
    if prev[2] != new[2]:
        return f"static positional arguments changed: {dict(prev[2])} -> {dict(new[2])}"
    return f"static keyword arguments changed: {dict(prev[3])} -> {dict(new[3])}"


@overload
def jit(fn: Callable[P, R], *, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (), donate_argnums: int | Sequence[int] = (),
        backend: str | None = None, donate_argnames: str | Sequence[str] = (),
        keep_unused: bool = False, inline: bool = False, in_shardings: Any = None,
        out_shardings: Any = None) -> JittedFunction[P, R]: ...


@overload
def jit(fn: None = None, *, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (), donate_argnums: int | Sequence[int] = (),
        backend: str | None = None, donate_argnames: str | Sequence[str] = (),
        keep_unused: bool = False, inline: bool = False, in_shardings: Any = None,
        out_shardings: Any = None) -> Callable[[Callable[P, R]], JittedFunction[P, R]]: ...


def jit(fn: Callable[P, R] | None = None, *, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (), donate_argnums: int | Sequence[int] = (),
        backend: str | None = None, donate_argnames: str | Sequence[str] = (),
        keep_unused: bool = False, inline: bool = False, in_shardings: Any = None,
        out_shardings: Any = None) -> Any:
    """Compile `fn` per abstract signature; usable as `@jit` or `jit(fn, ...)`.

    `donate_argnums`: positional arguments whose Tensors the call consumes (like JAX's
    donation): an output of the same shape and dtype may be written into a donated array
    that nothing else references, and any later use of a donated Tensor raises. Donation
    applies to eager calls; under grad/vmap/jit it is ignored. `donate_argnames` names them
    instead. `keep_unused` and `inline` are JAX's compilation hints, accepted and ignored
    (an unused argument costs nothing here; a jitted call inside jit is traced inline).
    `in_shardings` / `out_shardings` (pytrees of NamedSharding / PartitionSpec / None) are
    validated, not applied: fgrad has one device, so the whole arrays stay on it."""
    if in_shardings is not None or out_shardings is not None:
        from fgrad.transforms.extras.sharding import check_shardings
        check_shardings(in_shardings, "jit in_shardings")
        check_shardings(out_shardings, "jit out_shardings")

    def as_tuple(x: Any) -> tuple:
        if isinstance(x, (int, str)):
            return (x,)
        try:
            return tuple(x)
        except TypeError:
            raise TypeError(f"jit: argument numbers and names must be an int / str or a "
                            f"sequence of them, got {x!r}") from None

    both = set(as_tuple(static_argnums)) & set(as_tuple(donate_argnums))
    if both:
        raise ValueError(f"jit: arguments {sorted(both)} are both static and donated; a static "
                         f"argument has no buffer to donate, remove it from donate_argnums")

    if fn is not None and not callable(fn):
        raise TypeError(f"jit expects a function, got {type(fn).__name__} {fn!r}; use "
                        f"jit(f) or @jit on a def")

    def wrap(f: Callable[P, R]) -> JittedFunction[P, R]:
        donated = as_tuple(donate_argnums) + _positions(f, as_tuple(donate_argnames))
        return JittedFunction(f, as_tuple(static_argnums), as_tuple(static_argnames),
                              tuple(sorted(set(donated))), backend)

    return wrap if fn is None else wrap(fn)


def _positions(fn: Callable[..., Any], names: tuple) -> tuple[int, ...]:
    """The positional indices of the parameters `names` of `fn` (for donate_argnames)."""
    if not names:
        return ()
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    missing = [n for n in names if n not in params]
    if missing:
        raise ValueError(f"jit: donate_argnames {missing} are not parameters of "
                         f"{getattr(fn, '__name__', fn)!r} (its parameters: {params})")
    return tuple(params.index(n) for n in names)
