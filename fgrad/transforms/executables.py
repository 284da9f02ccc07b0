"""Executables for a jitted Jaxpr, per backend, kept on the Jaxpr itself.

"numpy" is the reference interpreter (eval_jaxpr with NumPy). Native backends register a
compiler in `COMPILERS` (`fgrad.lower` does this for "llvm" and "opencl" when available).
This module never imports a backend: the package that assembles fgrad adds a loader to
`BACKEND_LOADERS`, called once when a backend is first asked for.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Protocol, cast

import numpy as np

from fgrad.core.ir import Jaxpr
from fgrad.core.staging import eval_jaxpr
from fgrad.core.tensor import Tensor

Executable = Callable[..., list[np.ndarray]]
COMPILERS: dict[str, Callable[[Jaxpr], Executable]] = {}
BACKEND_LOADERS: list[Callable[[], None]] = []
compile_seconds = [0.0]
_lock = threading.Lock()  # guards creating a jaxpr's compile lock and importing backends
_ATTR = "_fgrad_executables"  # a jaxpr's {backend: executable}, living as long as it does


class DonatingExecutable(Protocol):
    """An executable that can write outputs into donated input arrays (`call_donated`)."""

    def __call__(self, *arrays: Any) -> list[np.ndarray]: ...
    def call_donated(self, arrays: list[Any], reusable: list[bool]) -> list[np.ndarray]: ...
    def exclusively_owned(self, arr: Any, holders: int) -> bool: ...


def numpy_executable(jaxpr: Jaxpr) -> Executable:
    """Run the jaxpr equation by equation with each primitive's NumPy impl."""
    def run(*arrays: np.ndarray) -> list[np.ndarray]:
        outs = eval_jaxpr(jaxpr, [], [Tensor._wrap(np.asarray(a)) for a in arrays])
        return [o._data for o in outs]
    return run


COMPILERS["numpy"] = numpy_executable


def compiler_for(backend: str) -> Callable[[Jaxpr], Executable] | None:
    """The registered compiler of `backend`, running the backend loaders once if needed."""
    while backend not in COMPILERS and BACKEND_LOADERS:
        BACKEND_LOADERS.pop(0)()
    return COMPILERS.get(backend)


def executable_for(jaxpr: Jaxpr, backend: str) -> Executable:
    """The compiled executable of `jaxpr` for `backend` (compiled on first use).

    Thread-safe: concurrent first calls compile once, under the jaxpr's lock. The
    executable lives as long as the jaxpr (it is kept on it), so dropping a jitted
    function or clearing its cache frees its compiled programs."""
    found = jaxpr.__dict__.get(_ATTR)
    if found is not None and backend in found[1]:
        return found[1][backend]
    with _lock:
        compiler_for(backend)
        lock, per_backend = jaxpr.__dict__.setdefault(_ATTR, (threading.RLock(), {}))
    with lock:
        if backend in per_backend:
            return per_backend[backend]
        if backend not in COMPILERS:
            available = ", ".join(sorted(COMPILERS))
            raise ValueError(f"jit backend {backend!r} is not available here; available: "
                             f"{available}. Choose one with jit(..., backend=) or the "
                             f"FGRAD_BACKEND environment variable")
        start = time.perf_counter()
        per_backend[backend] = COMPILERS[backend](jaxpr)
        compile_seconds[0] += time.perf_counter() - start
        return per_backend[backend]


def forget_executables(jaxpr: Jaxpr) -> None:
    """Drop `jaxpr`'s compiled executables (a running call keeps its own reference)."""
    jaxpr.__dict__.pop(_ATTR, None)


# ---------------------------------------------------------------------------- donation


class DonatedBuffer:
    """The data of a Tensor donated to a jitted call (`donate_argnums`): every use raises."""

    __slots__ = ("fn_name",)

    def __init__(self, fn_name: str):
        self.fn_name = fn_name

    def _fail(self) -> Any:
        raise RuntimeError(f"this Tensor's buffer has been donated to jit({self.fn_name}) "
                           f"(donate_argnums), so its contents are invalid; use the "
                           f"function's outputs instead, or do not donate this argument")

    def __getattr__(self, name: str) -> Any:
        return self._fail()

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fail()

    def __repr__(self) -> str:
        return f"<buffer donated to jit({self.fn_name})>"


def call_donating(jaxpr: Jaxpr, backend: str, tensors: list[Tensor], donated: list[bool],
                  fn_name: str) -> list[Tensor]:
    """Run `jaxpr` eagerly on `tensors`, consuming the donated ones: an output may be
    written into the array of a donated Tensor that nothing else references (the backend
    decides which outputs can), and every donated Tensor is invalidated afterwards."""
    from fgrad.core.tensor import _conform, as_concrete_array
    exe = executable_for(jaxpr, backend)
    arrays = [as_concrete_array(t) for t in tensors]
    run_donated = getattr(exe, "call_donated", None)
    if run_donated is not None and any(donated):
        # the two known holders of each array: its Tensor and `arrays`
        owner = cast(DonatingExecutable, exe)
        reusable = [d and owner.exclusively_owned(arrays[i], 2) for i, d in enumerate(donated)]
        outs = run_donated(arrays, reusable) if any(reusable) else exe(*arrays)
    else:
        outs = exe(*arrays)
    del arrays
    for t, d in zip(tensors, donated, strict=True):
        if d:
            t._data = DonatedBuffer(fn_name)
    return [Tensor._wrap(_conform(o, v.aval)) for o, v in zip(outs, jaxpr.outvars, strict=True)]
