"""OpenCL devices: selection, a context and in-order queue each, a program cache keyed by
source text, a buffer pool, and `CLArray`, the device-resident array a Tensor wraps.

In: FGRAD_OPENCL_DEVICE (read through fgrad.flags): "P:D" (platform and device indices,
as `device_list()` prints them) or a case-insensitive part of a device name; unset, the
first GPU is used, else the first device (devices whose compiler cannot build a trivial
kernel are passed over). Out: `CLDevice`s named "CL:<n>" (n indexes `device_list()`),
and `CLArray`s that live on them.
"""
from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.tools as cl_tools

from fgrad import flags

_PROBE = "__kernel void fgrad_probe(__global int* x) { x[0] = 1; }"


@functools.lru_cache(maxsize=1)
def _found() -> tuple[tuple[int, int, Any], ...]:
    """(platform index, device index, cl.Device) of every device, in platform order."""
    out: list[tuple[int, int, Any]] = []
    try:
        platforms = cl.get_platforms()
    except cl.Error:  # no ICD/platform at all
        return ()
    for p, platform in enumerate(platforms):
        try:
            devices = platform.get_devices()
        except cl.Error:
            continue
        out.extend((p, d, dev) for d, dev in enumerate(devices))
    return tuple(out)


def _kind(dev: Any) -> str:
    return "GPU" if dev.type & cl.device_type.GPU else \
        "CPU" if dev.type & cl.device_type.CPU else "accelerator"


def device_list() -> list[str]:
    """One line per OpenCL device: 'CL:<n>  P:D  name (kind, platform, version)'."""
    return [f"CL:{n}  {p}:{d}  {dev.name.strip()} ({_kind(dev)}, {dev.platform.name.strip()}, "
            f"{dev.version.strip()})" for n, (p, d, dev) in enumerate(_found())]


def _listing() -> str:
    return "\n  ".join(device_list()) or "(none: install pyopencl with a driver, e.g. " \
        "pip install 'pyopencl[pocl]')"


def parse_device(spec: str) -> int:
    """The `device_list()` index that `spec` names: 'CL:<n>', 'P:D', or part of a name."""
    found = _found()
    text = spec.strip()
    m = re.fullmatch(r"(?:CL|OPENCL|GPU)(?::(\d+))?", text, re.IGNORECASE)
    if m:
        n = int(m.group(1)) if m.group(1) else default_index()
        if n < len(found):
            return n
        raise ValueError(f"no OpenCL device {spec!r}; the devices are:\n  {_listing()}")
    m = re.fullmatch(r"(\d+):(\d+)", text)
    if m:
        p, d = int(m.group(1)), int(m.group(2))
        for n, (fp, fd, _) in enumerate(found):
            if (fp, fd) == (p, d):
                return n
        raise ValueError(f"FGRAD_OPENCL_DEVICE={spec!r}: no device {d} on platform {p}; "
                         f"the devices are:\n  {_listing()}")
    for n, (_, _, dev) in enumerate(found):
        if text and text.lower() in dev.name.lower():
            return n
    raise ValueError(f"FGRAD_OPENCL_DEVICE={spec!r} names no OpenCL device (give 'P:D' "
                     f"indices or part of a name); the devices are:\n  {_listing()}")


def _builds(dev: Any) -> bool:
    try:
        cl.Program(cl.Context([dev]), _PROBE).build()
        return True
    except cl.Error:
        return False


@functools.lru_cache(maxsize=1)
def _auto_index() -> int:
    found = _found()
    order = sorted(range(len(found)), key=lambda n: _kind(found[n][2]) != "GPU")
    for n in order:
        if _builds(found[n][2]):
            return n
    if not found:
        raise RuntimeError(f"no OpenCL device is available: {_listing()}")
    raise RuntimeError(f"no OpenCL device can build a trivial kernel; the devices are:\n  "
                       f"{_listing()}\nCheck the driver (pocl needs an LLVM that knows this "
                       f"CPU) or pick one with FGRAD_OPENCL_DEVICE")


def default_index() -> int:
    """The index of the device FGRAD_OPENCL_DEVICE picks (else the first working GPU, then
    the first working device)."""
    spec = flags.opencl_device()
    return _auto_index() if spec is None else parse_device(spec)


class CLDevice:
    """One OpenCL device with its context, in-order queue, programs and buffer pool."""

    def __init__(self, index: int):
        _, _, dev = _found()[index]
        self.name = f"CL:{index}"
        self.cl_device = dev
        self.context = cl.Context([dev])
        self.queue = cl.CommandQueue(self.context)
        self.pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(self.queue))
        self.is_cpu = _kind(dev) == "CPU"
        self.max_group = int(dev.max_work_group_size)
        self.compute_units = int(dev.max_compute_units)
        self.fp64 = "cl_khr_fp64" in dev.extensions
        self.local_mem = int(dev.local_mem_size)  # bytes of __local memory per work-group
        self.vector_width = {"float": max(1, int(dev.preferred_vector_width_float)),
                             "double": max(1, int(dev.preferred_vector_width_double or 1))}
        exact = dev.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT
        self.options = ["-w"] + (["-cl-fp32-correctly-rounded-divide-sqrt"] if exact else [])
        self.programs: dict[str, Any] = {}
        self.kernels: dict[tuple[str, str], Any] = {}
        self.dummy = cl.Buffer(self.context, cl.mem_flags.READ_WRITE, 64)

    def describe(self) -> str:
        """'CL:0 (pthread-..., Portable Computing Language)'."""
        return f"{self.name} ({self.cl_device.name.strip()}, " \
               f"{self.cl_device.platform.name.strip()})"

    def program(self, source: str) -> Any:
        """The built program of `source` (built once per device)."""
        if source not in self.programs:
            if "cl_khr_fp64" in source and not self.fp64:
                raise RuntimeError(
                    f"OpenCL device {self.describe()} lacks the cl_khr_fp64 extension that "
                    f"float64 needs; compute in float32, or pick a device that has it with "
                    f"FGRAD_OPENCL_DEVICE (devices:\n  {_listing()})")
            try:
                self.programs[source] = cl.Program(self.context, source).build(self.options)
            except cl.Error as err:
                raise RuntimeError(f"OpenCL device {self.describe()} could not build the "
                                   f"generated kernel (a bug in fgrad.lower, or a broken "
                                   f"driver):\n{err}\n--- source ---\n{source}") from None
        return self.programs[source]

    def kernel(self, source: str, name: str) -> Any:
        """Kernel `name` of the program of `source` (one cl.Kernel per pair: kernels take
        all their arguments at each launch, so executables share them)."""
        key = (source, name)
        if key not in self.kernels:
            self.kernels[key] = cl.Kernel(self.program(source), name)
        return self.kernels[key]

    def alloc(self, nbytes: int) -> Any:
        """A pooled device buffer of at least `nbytes` (None for 0 bytes)."""
        return self.pool.allocate(nbytes) if nbytes else None

    def arg(self, buffer: Any) -> Any:
        """A kernel argument for `buffer` (a small dummy stands in for empty buffers)."""
        return self.dummy if buffer is None else buffer


@functools.cache
def _device(index: int) -> CLDevice:
    return CLDevice(index)


def get_device(name: str | None = None) -> CLDevice:
    """The device named 'CL:<n>' (or 'P:D', or part of a name); None: the default one."""
    return _device(default_index() if name is None else parse_device(name))


# ---------------------------------------------------------------------------- arrays


class CLArray:
    """A row-major array in an OpenCL device buffer. Immutable by convention: fgrad never
    writes into a buffer once a CLArray owns it."""

    __slots__ = ("__weakref__", "buffer", "device", "dtype", "shape")

    def __init__(self, shape: tuple[int, ...], dtype: Any, device: str, buffer: Any):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.device = device
        self.buffer = buffer

    @classmethod
    def wrap(cls, shape: tuple[int, ...], dtype: np.dtype, device: str, buffer: Any) -> CLArray:
        """A CLArray of a tuple of ints and a NumPy dtype as they are (no conversions: the
        per-launch path of an executable)."""
        out = cls.__new__(cls)
        out.shape, out.dtype, out.device, out.buffer = shape, dtype, device, buffer
        return out

    @property
    def size(self) -> int:
        """The number of elements."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def ndim(self) -> int:
        """The number of axes."""
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        """The size of the data in bytes."""
        return self.size * self.dtype.itemsize

    def block_until_ready(self) -> CLArray:
        """Wait until every kernel queued on this array's device has finished; returns it."""
        get_device(self.device).queue.finish()
        return self

    def numpy(self) -> np.ndarray:
        """A host copy (waits for every kernel that writes this array)."""
        out = np.empty(self.shape, self.dtype)
        if self.nbytes:
            queue = get_device(self.device).queue
            cl.enqueue_copy(queue, out.reshape(-1).view(np.uint8), self.buffer,
                            is_blocking=True)
        return out

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy is False:
            raise ValueError("a CLArray lives on an OpenCL device: NumPy can only get a copy "
                             "(call .numpy())")
        out = self.numpy()
        return out if dtype is None else out.astype(dtype)

    def __repr__(self) -> str:
        return f"CLArray(shape={self.shape}, dtype={self.dtype.name}, device={self.device!r})"

    @classmethod
    def from_numpy(cls, arr: Any, device: str | None = None) -> CLArray:
        """A device copy of `arr` on `device` ('CL:<n>'; None: the default device)."""
        dev = get_device(device)
        host = np.asarray(arr)
        if not host.flags.c_contiguous:
            host = host.copy(order="C")
        out = cls(host.shape, host.dtype, dev.name, dev.alloc(host.nbytes))
        if host.nbytes:
            cl.enqueue_copy(dev.queue, out.buffer, host.reshape(-1).view(np.uint8),
                            is_blocking=True)
        return out

    @classmethod
    def empty(cls, shape: tuple[int, ...], dtype: Any, device: CLDevice) -> CLArray:
        """An uninitialized array (for kernel outputs)."""
        out = cls(shape, dtype, device.name, None)
        out.buffer = device.alloc(out.nbytes)
        return out
