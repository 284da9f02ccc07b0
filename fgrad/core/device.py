"""Devices: where a Tensor's data lives, and eager evaluation on a device.

A concrete Tensor holds either a read-only NumPy array (device "CPU") or a device array
(an object with `shape`, `dtype`, `device` and `numpy()`, e.g. the OpenCL backend's
`CLArray`). Eager primitives on device data run on that device, one cached single-equation
program per (primitive, parameters, input types). A CPU operand of such a primitive is
copied to the device (the documented transfer, as JAX moves uncommitted arrays); operands
on two different devices are an error. `jit(backend="llvm"/"numpy")` copies device
arguments back to the host; `jit(backend="opencl")` copies host arguments in and keeps
its outputs on the device.

Device names: "CPU", and "CL" or "CL:<n>" (OpenCL device n of `devices()`; "CL" is the one
FGRAD_OPENCL_DEVICE selects). "GPU" and "OPENCL" are accepted as aliases of "CL".
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

CL_ALIASES = ("CL", "OPENCL", "GPU")


def is_device_array(x: Any) -> bool:
    """Whether `x` is a device array (not a NumPy array)."""
    return type(x) is not np.ndarray and not isinstance(x, np.ndarray) \
        and hasattr(x, "device") and hasattr(x, "numpy")


def to_host(x: Any) -> np.ndarray:
    """The NumPy value of a NumPy or device array (device arrays are copied back)."""
    return x.numpy() if is_device_array(x) else x


def device_of(x: Any) -> str:
    """The device name of a NumPy array ("CPU") or a device array."""
    return str(x.device) if is_device_array(x) else "CPU"


def canonical_device(device: Any) -> str:
    """'CPU', 'CL' (the default OpenCL device) or 'CL:<n>'; a clear error for anything else."""
    name = str(device).upper()
    if name == "CPU":
        return "CPU"
    base, _, index = name.partition(":")
    available = devices()
    if base not in CL_ALIASES:
        raise ValueError(f"unknown device {device!r}; available: {available}")
    if len(available) == 1:
        raise ValueError(f"device {device!r}: no OpenCL device is available here (install "
                         f"pyopencl with a driver: pip install 'fgrad[opencl]'); available: "
                         f"{available}")
    if index and f"CL:{index}" not in available:
        raise ValueError(f"no OpenCL device {device!r}; available: {available}")
    return f"CL:{index}" if index else "CL"


def put(arr: np.ndarray, device: str) -> Any:
    """`arr` placed on `device` (a NumPy array for 'CPU', else a device array)."""
    device = canonical_device(device)
    if device == "CPU":
        return to_host(arr)
    if is_device_array(arr) and (device == "CL" or device_of(arr) == device):
        return arr
    from fgrad.lower.opencl_runtime import CLArray
    target = None if device == "CL" else device
    return CLArray.from_numpy(np.ascontiguousarray(to_host(arr)), target)


def devices() -> list[str]:
    """Every device fgrad can place data on: 'CPU', then one 'CL:<n>' per OpenCL device
    (empty when pyopencl or a driver is missing; `pip install 'fgrad[opencl]'`)."""
    found = ["CPU"]
    try:
        from fgrad.lower import opencl_runtime
    except ImportError:
        return found
    try:
        return found + [f"CL:{i}" for i in range(len(opencl_runtime.device_list()))]
    except Exception:  # no OpenCL platform/driver: the CPU is still there
        return found


# ---------------------------------------------------------------------------- eager dispatch


def common_device(prim_name: str, arrays: Sequence[Any]) -> str:
    """The device an eager primitive runs on: the device of its device operands. CPU
    operands join them by a copy (as JAX moves uncommitted arrays); operands on two
    different devices are an error."""
    on_device = {device_of(a) for a in arrays if is_device_array(a)}
    if not on_device:
        return "CPU"
    if len(on_device) > 1:
        raise ValueError(f"{prim_name}: operands live on different devices {sorted(on_device)};"
                         f" move them to one device with .to(device) first")
    return on_device.pop()


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
    from fgrad.core.staging import trace_to_jaxpr
    from fgrad.core.trace import current_trace
    from fgrad.transforms.executables import executable_for
    from fgrad.transforms.jit_prim import open_jaxpr
    key = _program_key(prim, avals, params, device)
    entry = _programs.get(key) if key is not None else None
    if entry is None:
        def one_eqn(*xs: Any) -> tuple[list[Any], None]:
            return _as_list(prim.bind(*xs, **params)), None
        closed, _ = trace_to_jaxpr(one_eqn, list(avals), current_trace(), prim.name)
        jaxpr, consts = open_jaxpr(closed)
        entry = (jaxpr, [put(c._data, device) for c in consts])
        if key is not None:
            if len(_programs) >= _PROGRAMS_KEPT:
                _programs.pop(next(iter(_programs)), None)
            _programs[key] = entry
    jaxpr, consts = entry
    return list(executable_for(jaxpr, "opencl")(*consts, *arrays))


def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (list, tuple)) else [out]


def device_put(tree: Any, device: str = "CPU") -> Any:
    """Every array leaf of a pytree (Tensors, NumPy arrays, Python numbers) as a Tensor on
    `device` ('CPU', 'CL', 'CL:<n>'); leaves already there are returned unchanged."""
    from fgrad.core import tree_util
    from fgrad.core.tensor import Tensor

    def move(leaf: Any) -> Any:
        return (leaf if isinstance(leaf, Tensor) else Tensor(leaf)).to(device)
    return tree_util.tree_map(move, tree)
