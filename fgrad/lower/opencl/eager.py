"""Eager primitives on OpenCL data, and the "CL" device kind registered in core.

Importing this module (it needs pyopencl) registers the OpenCL devices with
`fgrad.core.device`; `fgrad/__init__.py` does so on first use of a device.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fgrad.core import device as core_device
from fgrad.core.staging import trace_to_jaxpr
from fgrad.core.trace import current_trace
from fgrad.lower.opencl import runtime as opencl_runtime
from fgrad.transforms import caches
from fgrad.transforms.executables import executable_for
from fgrad.transforms.jit_prim import open_jaxpr

_programs: dict[Any, Any] = {}
_PROGRAMS_KEPT = 512


def clear_programs() -> None:
    """Forget the compiled single-primitive programs of eager device ops."""
    _programs.clear()


def _program_key(prim: Any, avals: Sequence[Any], params: dict, device: str) -> Any:
    try:
        key = (prim.name, tuple(avals), tuple(sorted(params.items())), device)
        hash(key)
        return key
    except TypeError:
        return None


def eval_on_device(prim: Any, arrays: Sequence[Any], avals: Sequence[Any], params: dict,
                   device: str) -> list[Any]:
    """Run one primitive on `device` as a compiled single-equation program (cached)."""
    key = _program_key(prim, avals, params, device)
    entry = _programs.get(key) if key is not None else None
    if entry is None:
        def one_eqn(*xs: Any) -> tuple[list[Any], None]:
            return _as_list(prim.bind(*xs, **params)), None
        closed, _ = trace_to_jaxpr(one_eqn, list(avals), current_trace(), prim.name)
        jaxpr, consts = open_jaxpr(closed)
        entry = (jaxpr, [core_device.put(c._data, device) for c in consts])
        if key is not None:
            if len(_programs) >= _PROGRAMS_KEPT:
                _programs.pop(next(iter(_programs)), None)
            _programs[key] = entry
    jaxpr, consts = entry
    return list(executable_for(jaxpr, "opencl")(*consts, *arrays))


def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _put(arr: np.ndarray, target: str | None) -> Any:
    return opencl_runtime.CLArray.from_numpy(arr, target)


def _count() -> int:
    return len(opencl_runtime.device_list())


core_device.DEVICE_KINDS["CL"] = core_device.DeviceKind(
    prefix="CL", count=_count, put=_put, run_primitive=eval_on_device)
caches.register_clearer(clear_programs)
