"""Device queries of JAX's top level: `device_get`, `local_devices`, `default_backend`.

fgrad names devices by strings ("CPU", "CL:<n>" for OpenCL devices; `fgrad.devices()`)
and backends by the jit backend names ("llvm", "opencl", "numpy").
"""
from __future__ import annotations

from typing import Any

from fgrad import flags
from fgrad.core import tree_util
from fgrad.core.device import devices
from fgrad.core.tensor import Tensor

__all__ = ["default_backend", "device_get", "local_devices"]

_HOST_BACKENDS = ("cpu", "llvm", "numpy")
_CL_BACKENDS = ("opencl", "cl", "gpu")


def device_get(x: Any) -> Any:
    """JAX's `device_get`: `x` (a pytree) with every Tensor leaf copied to a NumPy array on
    the host; other leaves (NumPy arrays, Python values) are returned unchanged. A traced
    value has no data to get: ConcretizationError."""
    def get(leaf: Any) -> Any:
        return leaf.numpy() if isinstance(leaf, Tensor) else leaf
    return tree_util.tree_map(get, x)


def local_devices(process_index: int | None = None, backend: str | None = None,
                  host_id: int | None = None) -> list[str]:
    """JAX's `local_devices`: the devices of this process, as `fgrad.devices()` names them
    ('CPU', then 'CL:<n>' per OpenCL device). `backend` narrows them: 'cpu' / 'llvm' /
    'numpy' the host, 'opencl' / 'gpu' the OpenCL devices."""
    if (process_index or 0) != 0 or (host_id or 0) != 0:
        raise ValueError(f"local_devices: fgrad runs one process (index 0) here, got "
                         f"process_index={process_index}")
    found = devices()
    if backend is None:
        return found
    name = str(backend).lower()
    if name in _HOST_BACKENDS:
        return [d for d in found if d == "CPU"]
    if name in _CL_BACKENDS:
        cl = [d for d in found if d != "CPU"]
        if not cl:
            raise RuntimeError(f"local_devices: no OpenCL device for backend {backend!r} "
                               f"(install pyopencl with a driver: pip install "
                               f"'fgrad[opencl]'); available: {found}")
        return cl
    raise ValueError(f"local_devices: unknown backend {backend!r}; choose one of "
                     f"{_HOST_BACKENDS + _CL_BACKENDS}")


def default_backend() -> str:
    """The backend `jit` uses when none is given: 'llvm' (the default), 'opencl' or
    'numpy' (set with FGRAD_BACKEND or `fgrad.config.update('backend', ...)`). Unlike JAX's,
    which names a platform ('cpu', 'gpu'), this names the compiler."""
    return flags.default_backend()

