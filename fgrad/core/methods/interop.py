"""Interop and convenience methods of Tensor: `astype`, `__format__`, `block_until_ready`,
DLPack export (`__dlpack__`, `__dlpack_device__`) and `from_dlpack`.

DLPack exchange is zero-copy for CPU data: `torch.from_dlpack(t)`, `np.from_dlpack(t)` and
`jax.dlpack.from_dlpack(t)` see the Tensor's memory, and `fgrad.from_dlpack(x)` sees `x`'s.
fgrad never writes into a Tensor's memory, so the exchange is safe as long as the other
library does not write into it either (modifying the source after `from_dlpack` changes the
Tensor too, as with JAX). JAX itself copies buffers that are not 64-byte aligned.
"""
from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from fgrad.core import tree_util

__all__ = ["InteropMixin", "block_until_ready", "from_dlpack"]

_KDLCPU = 1


class InteropMixin:
    """Methods mixed into Tensor (see the module docstring)."""

    __slots__ = ()

    def astype(self, dtype: Any) -> Any:
        """This Tensor cast to `dtype` (a DType, a name like "float32", a NumPy dtype)."""
        from fgrad.core.dtypes import to_dtype
        return self.cast(to_dtype(dtype))

    def __format__(self, spec: str) -> str:
        """`f"{t:.3f}"`: a one-element Tensor formats as its number; larger ones format each
        element with `spec` inside NumPy's array printing. Without a spec, a concrete 0-d
        Tensor formats as its Python number, as JAX's arrays do (`f"accuracy {acc}"` in a
        ported JAX program prints the number); other Tensors, and tracers, as `str`."""
        if not spec:
            from fgrad.core.tensor import Tracer
            if self.shape != () or isinstance(self, Tracer):
                return str(self)
        arr = np.asarray(self._concrete("format()"))
        if arr.dtype.kind == "V" or str(arr.dtype) == "bfloat16":
            arr = arr.astype(np.float32)
        if arr.size == 1:
            return format(arr.reshape(()).item(), spec)
        fmt: Any = {"all": lambda v: format(v.item(), spec)}
        return np.array2string(arr, separator=", ", formatter=fmt)

    def block_until_ready(self) -> Any:
        """Wait until this Tensor's value is computed (device queues finished); returns it."""
        wait = getattr(getattr(self, "_data", None), "block_until_ready", None)
        if wait is not None:  # device arrays (OpenCL) finish their queue; host data is ready
            wait()
        return self

    def __dlpack_device__(self) -> tuple[int, int]:
        """DLPack's (device type, device id): CPU for host data."""
        data = self._data
        if not isinstance(data, np.ndarray):
            where = getattr(self, "device", "a device")
            raise BufferError(f"DLPack export of a Tensor on {where!r} is not supported; "
                              f"move it to the CPU first with t.to('CPU')")
        return (_KDLCPU, 0)

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: Any = None, copy: bool | None = None) -> Any:
        """A DLPack capsule of this Tensor's memory (zero-copy; a copy when `copy=True`)."""
        self.__dlpack_device__()
        arr = self._data
        if copy:
            arr = np.array(arr)
        elif not arr.flags.writeable and (max_version is None or max_version[0] < 1):
            if copy is False and not arr.flags.c_contiguous:
                raise BufferError("__dlpack__(copy=False): this Tensor's memory cannot be "
                                  "exported without a copy")
            arr = _writable_alias(arr)   # old consumers cannot be told it is read-only
        kwargs: dict[str, Any] = {"stream": stream}
        if max_version is not None:
            kwargs["max_version"] = max_version
        return arr.__dlpack__(**kwargs)


def _writable_alias(arr: np.ndarray) -> np.ndarray:
    """A view flagged writable of read-only `arr`'s memory that keeps `arr` alive."""
    if arr.size == 0 or not arr.flags.c_contiguous:
        return np.array(arr)
    raw = (ctypes.c_byte * arr.nbytes).from_address(arr.ctypes.data)
    raw._fgrad_owner = arr
    return np.frombuffer(raw, dtype=arr.dtype).reshape(arr.shape)  # type: ignore[call-overload]


def from_dlpack(x: Any, copy: bool | None = None) -> Any:
    """A Tensor sharing the memory of `x`, any object with `__dlpack__` (a PyTorch tensor, a
    JAX or NumPy array) on the CPU; `copy=True` copies."""
    from fgrad.core.tensor import Tensor
    try:
        arr = np.from_dlpack(x, copy=copy)
    except (AttributeError, BufferError, TypeError, RuntimeError) as err:
        raise TypeError(f"from_dlpack: cannot import {type(x).__name__} ({err}); only CPU "
                        f"data can be imported") from None
    arr = arr.view()
    arr.flags.writeable = False
    return Tensor._wrap(arr)


def block_until_ready(tree: Any) -> Any:
    """Wait for every Tensor in `tree` (see `Tensor.block_until_ready`); returns `tree`.
    Device arrays wait for their device's whole queue, so each device is waited for once
    (a driver's queue finish costs ~10-30 us even when idle; a training step has dozens
    of leaves)."""
    waited: set[Any] = set()
    for leaf in tree_util.tree_leaves(tree):
        data = getattr(leaf, "_data", leaf)
        if isinstance(data, np.ndarray) or not hasattr(leaf, "block_until_ready"):
            continue
        device = getattr(data, "device", None)
        where = (type(data), device) if device is not None else id(leaf)
        if where not in waited:
            waited.add(where)
            leaf.block_until_ready()
    return tree
