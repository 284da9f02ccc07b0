"""More of JAX's top-level functions: `custom_gradient`, `named_call`, `typeof`, the device
and process counts (`device_count`, `local_device_count`, `host_count`, `host_id`,
`host_ids`, `process_indices`) and `print_environment_info`.

The process counts come from `fgrad.distributed` (a layer above this one): the package root
puts its `process_index` and `process_count` into `PROCESS_QUERIES`.
"""
from __future__ import annotations

import functools
import platform
import sys
from typing import Any, Callable, TypeVar

import numpy as np

from fgrad import flags
from fgrad.core import tree_util
from fgrad.core.api_util import fn_name
from fgrad.core.ir import ShapedArray
from fgrad.core.staging import eval_jaxpr, trace_to_jaxpr
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.core.trace import current_trace
from fgrad.core.tree_partial import Partial
from fgrad.transforms.custom import custom_vjp
from fgrad.transforms.extras.devices import local_devices

__all__ = ["custom_gradient", "device_count", "host_count", "host_id", "host_ids",
           "local_device_count", "named_call", "pmap", "print_environment_info",
           "process_indices", "typeof"]

F = TypeVar("F", bound=Callable[..., Any])

# "index": this process's index in the job; "count": the number of processes
PROCESS_QUERIES: dict[str, Callable[[], int]] = {"index": lambda: 0, "count": lambda: 1}


# ---------------------------------------------------------------------------- devices


def local_device_count(backend: str | None = None) -> int:
    """The number of this process's devices of `backend` (default: the jit backend, as
    `fgrad.default_backend()` names it): 1 for the host backends, the OpenCL devices for
    'opencl'/'gpu'."""
    return len(local_devices(backend=backend or flags.default_backend()))


def host_count(backend: str | None = None) -> int:
    """The number of processes in the job (1 unless started by `mpiexec`; JAX's older name
    of `process_count`). `backend` is checked and otherwise ignored: every fgrad process
    has the same backends."""
    if backend is not None:
        local_devices(backend=backend)
    return PROCESS_QUERIES["count"]()


def device_count(backend: str | None = None) -> int:
    """The number of devices of `backend` in the whole job: `local_device_count(backend)`
    per process, times the processes."""
    return local_device_count(backend) * host_count()


def host_id(backend: str | None = None) -> int:
    """This process's index in the job (JAX's older name of `process_index`)."""
    if backend is not None:
        local_devices(backend=backend)
    return PROCESS_QUERIES["index"]()


def process_indices(backend: str | None = None) -> list[int]:
    """The indices of every process of the job: `[0, ..., process_count() - 1]`."""
    return list(range(host_count(backend)))


host_ids = process_indices


def print_environment_info(return_string: bool = False) -> str | None:
    """Print (or, with `return_string=True`, return) the versions of fgrad, NumPy and Python,
    the jit backend, the devices and the process count, for bug reports."""
    import importlib.metadata
    try:
        version = importlib.metadata.version("fgrad")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown (not installed)"
    devices = local_devices()
    text = "\n".join([
        f"fgrad:   {version}",
        f"numpy:   {np.__version__}",
        f"python:  {sys.version}",
        f"backend: {flags.default_backend()} (x64: {flags.x64_enabled()})",
        f"devices: {', '.join(devices)} ({len(devices)} local devices)",
        f"process_count: {PROCESS_QUERIES['count']()}",
        f"platform: {platform.uname()}",
    ]) + "\n"
    if return_string:
        return text
    print(text, end="")
    return None


# ---------------------------------------------------------------------------- values


def typeof(x: Any) -> ShapedArray:
    """The abstract value of `x` (JAX's `typeof`): its `ShapedArray`, shape and dtype, also
    for a traced value inside `jit`/`grad`/`vmap`. `x` is a Tensor, a NumPy array or a
    Python or NumPy scalar (Python numbers take fgrad's default dtypes)."""
    if isinstance(x, Tensor):
        return x.aval
    if isinstance(x, (bool, int, float, np.ndarray, np.generic)):
        try:
            return as_tensor(x).aval
        except (TypeError, ValueError) as err:
            raise TypeError(f"typeof: {type(x).__name__} of dtype "
                            f"{getattr(x, 'dtype', '?')} has no fgrad dtype: {err}") from None
    raise TypeError(f"typeof: argument of type {type(x).__name__} is not an array; pass a "
                    f"Tensor, a NumPy array or a Python number")


def named_call(fun: F, *, name: str | None = None) -> F:
    """`fun` under the name `name` (default: its own), as JAX's `named_call`. fgrad's jaxprs
    record no call names (each equation names its source line instead), so this renames
    the wrapper only; results are those of `fun`."""
    if not callable(fun):
        raise TypeError(f"named_call: fun must be callable, got {type(fun).__name__}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"named_call: name must be a string, got {type(name).__name__}")

    @functools.wraps(fun)
    def named(*args: Any, **kwargs: Any) -> Any:
        return fun(*args, **kwargs)

    if name is not None:
        named.__name__ = named.__qualname__ = name
    return named  # type: ignore[return-value]


# ---------------------------------------------------------------------------- custom_gradient


class _StagedVjp:
    """The vjp function of one `custom_gradient` call, staged to a jaxpr: the values it closes
    over are passed in (they travel as the residuals of a custom_vjp), the jaxpr and the
    trees are static."""

    def __init__(self, name: str, jaxpr: Any, ct_tree: Any, out_tree: Any, n_args: int):
        self.name, self.jaxpr, self.ct_tree, self.out_tree = name, jaxpr, ct_tree, out_tree
        self.n_args = n_args

    def __call__(self, *consts_and_ct: Any) -> tuple[Any, ...]:
        *consts, ct = consts_and_ct
        ct_leaves, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != self.ct_tree:
            raise TypeError(f"custom_gradient({self.name}): the output cotangent has structure "
                            f"{ct_tree}, but the output has {self.ct_tree}")
        outs = eval_jaxpr(self.jaxpr, consts, [as_tensor(c) for c in ct_leaves])
        cts = tree_util.tree_unflatten(self.out_tree, outs)
        if self.out_tree.num_nodes == 1:  # one value (or None): the cotangent of one argument
            cts = (cts,)
        if not isinstance(cts, tuple) or len(cts) != self.n_args:
            got = f"a tuple of {len(cts)}" if isinstance(cts, tuple) else type(cts).__name__
            raise TypeError(f"custom_gradient({self.name}): the vjp function must return one "
                            f"cotangent per argument ({self.n_args}), as a tuple (or a single "
                            f"value for one argument); got {got}")
        return cts


def _value_and_vjp(out: Any, name: str) -> tuple[Any, Callable[..., Any]]:
    if not (isinstance(out, tuple) and len(out) == 2 and callable(out[1])):
        raise TypeError(f"custom_gradient: {name} must return a pair (value, vjp_fn), where "
                        f"vjp_fn maps the cotangent of value to the arguments' cotangents; "
                        f"got {type(out).__name__}")
    return out[0], out[1]


def _stage_vjp(vjp_fn: Callable[..., Any], value: Any, name: str, n_args: int) -> Partial:
    """`vjp_fn` as Partial(staged jaxpr, *closed-over values): a pytree whose leaves are
    the values the rule closes over (traced ones included)."""
    ct_leaves, ct_tree = tree_util.tree_flatten(value)
    avals = [as_tensor(v).aval for v in ct_leaves]

    def flat(*cts: Any) -> tuple[list[Any], Any]:
        out = vjp_fn(tree_util.tree_unflatten(ct_tree, list(cts)))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        return [as_tensor(o) for o in out_leaves], out_tree

    closed, out_tree = trace_to_jaxpr(flat, avals, current_trace(), f"custom_gradient({name})")
    staged = _StagedVjp(name, closed.jaxpr, ct_tree, out_tree, n_args)
    return Partial(staged, *closed.consts)


def custom_gradient(fun: F) -> F:
    """JAX's `custom_gradient`: `fun(*args)` returns `(value, vjp_fn)`, and the derivative
    of the wrapped function is given by `vjp_fn(value_cotangent) -> argument cotangents` (a
    tuple, one per argument; a single value when there is one argument). Built on
    `custom_vjp`, so it works under grad, vjp, jit and vmap (forward mode is not possible).

        @fgrad.custom_gradient
        def clip_gradient(x):
            return x, lambda g: fgrad.numpy.clip(g, -1.0, 1.0)

    `fun` runs twice per differentiated call (once for the value, once for the rule), and
    its arguments must be positional or given by name for positional parameters."""
    name = fn_name(fun)

    def primal(*args: Any) -> Any:
        return _value_and_vjp(fun(*args), name)[0]

    def fwd(*args: Any) -> tuple[Any, Partial]:
        value, vjp_fn = _value_and_vjp(fun(*args), name)
        return value, _stage_vjp(vjp_fn, value, name, len(args))

    def bwd(rule: Partial, ct: Any) -> tuple[Any, ...]:
        return rule(ct)

    primal.__name__, fwd.__name__, bwd.__name__ = name, f"{name}_fwd", f"{name}_vjp"
    differentiable = custom_vjp(primal)
    differentiable.defvjp(fwd, bwd)

    @functools.wraps(fun)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            args = _positional(fun, args, kwargs)
        return differentiable(*args)

    return wrapped  # type: ignore[return-value]


def _positional(fun: Callable[..., Any], args: tuple, kwargs: dict) -> tuple:
    import inspect
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError) as err:
        raise TypeError(f"custom_gradient({fn_name(fun)}): {err}") from None
    if bound.kwargs:
        raise TypeError(f"custom_gradient({fn_name(fun)}): keyword-only arguments "
                        f"{sorted(bound.kwargs)} are not supported; make them positional")
    return tuple(bound.args)


# ---------------------------------------------------------------------------- pmap

_PLATFORM_BACKENDS = {"cpu": "llvm", "gpu": "opencl", "cuda": "opencl", "rocm": "opencl"}


def pmap(fun: Callable[..., Any], axis_name: Any = None, *, in_axes: Any = 0,
         out_axes: Any = 0, static_broadcasted_argnums: int | tuple[int, ...] = (),
         devices: Any = None, backend: str | None = None, axis_size: int | None = None,
         donate_argnums: int | tuple[int, ...] = ()) -> Callable[..., Any]:
    """`jax.pmap` on fgrad's single device: `fun` mapped over the axis `in_axes` by `vmap`
    named `axis_name` (so `lax.psum` / `pmean` / `all_gather` over it work), inside one
    `jit`; `static_broadcasted_argnums` are jit-static and unmapped. The mapped axis may
    be of any size (JAX requires at most `local_device_count()`); `devices` is accepted and
    ignored: there is no placement to choose. `backend` takes JAX's platform names ('cpu'
    runs on the llvm backend, 'gpu' on opencl) or fgrad's."""
    from fgrad.transforms.batching import vmap
    from fgrad.transforms.jit import jit
    static = (static_broadcasted_argnums,) if isinstance(static_broadcasted_argnums, int) \
        else tuple(static_broadcasted_argnums)

    def mapped(*args: Any) -> Any:
        n = len(args)
        fixed = {i % n for i in static if -n <= i < n}
        moving = [i for i in range(n) if i not in fixed]
        axes = tuple(in_axes[i] for i in moving) if isinstance(in_axes, (tuple, list)) \
            else in_axes

        def body(*values: Any) -> Any:
            full = list(args)
            for i, v in zip(moving, values):
                full[i] = v
            return fun(*full)
        return vmap(body, in_axes=axes, out_axes=out_axes, axis_size=axis_size,
                    axis_name=axis_name)(*[args[i] for i in moving])

    functools.update_wrapper(mapped, fun)
    chosen = _PLATFORM_BACKENDS.get(backend.lower(), backend) if backend else None
    return jit(mapped, static_argnums=static, donate_argnums=donate_argnums, backend=chosen)
