"""Executables for a jitted Jaxpr, per backend, cached by Jaxpr identity.

"numpy" is the reference interpreter (eval_jaxpr with NumPy). Native backends register a
compiler in `COMPILERS` (`fgrad.lower` does this for "llvm" and "opencl" when available).
"""
from __future__ import annotations

import time
import weakref
from typing import Any, Callable

import numpy as np

from fgrad.core.ir import Jaxpr
from fgrad.core.staging import eval_jaxpr
from fgrad.core.tensor import Tensor

Executable = Callable[..., list[np.ndarray]]
COMPILERS: dict[str, Callable[[Jaxpr], Executable]] = {}
_cache: "weakref.WeakKeyDictionary[Jaxpr, dict[str, Executable]]" = weakref.WeakKeyDictionary()
compile_seconds = [0.0]


def numpy_executable(jaxpr: Jaxpr) -> Executable:
    """Run the jaxpr equation by equation with each primitive's NumPy impl."""
    def run(*arrays: np.ndarray) -> list[np.ndarray]:
        outs = eval_jaxpr(jaxpr, [], [Tensor._wrap(np.asarray(a)) for a in arrays])
        return [o._data for o in outs]
    return run


COMPILERS["numpy"] = numpy_executable


def executable_for(jaxpr: Jaxpr, backend: str) -> Executable:
    """The compiled executable of `jaxpr` for `backend` (compiled on first use)."""
    per_backend = _cache.setdefault(jaxpr, {})
    if backend not in per_backend:
        if backend not in COMPILERS and backend != "numpy":
            import fgrad.lower  # noqa: F401  (registers the native compilers)
        if backend not in COMPILERS:
            available = ", ".join(sorted(COMPILERS))
            raise ValueError(f"jit backend {backend!r} is not available here; available: "
                             f"{available}. Choose one with jit(..., backend=) or the "
                             f"FGRAD_BACKEND environment variable")
        start = time.perf_counter()
        per_backend[backend] = COMPILERS[backend](jaxpr)
        compile_seconds[0] += time.perf_counter() - start
    return per_backend[backend]
