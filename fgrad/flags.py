"""Every environment variable fgrad reads, in one place.

FGRAD_BACKEND       default jit backend: "llvm" (default), "opencl", "numpy" (reference interpreter)
FGRAD_LOG_RETRACE   "1": log (logger "fgrad.jit", level WARNING) why a jitted function retraced
FGRAD_CACHE_DIR     on-disk compile cache directory (default: the user cache dir; "" or "0": off)
FGRAD_OPENCL_DEVICE OpenCL device: "P:D" (platform:device indices), "CL:n" or a part of its name
FGRAD_NUM_THREADS   threads of the llvm backend's large kernels (default: the usable CPUs; 1: off)
FGRAD_JIT_CACHE_SIZE signatures kept per jitted function, and LLVM engines kept (default 64)
FGRAD_TRACEBACK_FILTERING "off": keep fgrad's own frames in tracebacks of transformed code
"""
from __future__ import annotations

import os


def default_backend() -> str:
    """The jit backend used when `backend=None`."""
    return os.environ.get("FGRAD_BACKEND", "llvm").lower()


def log_retrace() -> bool:
    """Whether to log the reason for every retrace."""
    return os.environ.get("FGRAD_LOG_RETRACE", "0") not in ("", "0", "false", "False")


def cache_dir() -> str:
    """Directory of the on-disk compile cache."""
    default = os.path.join(os.path.expanduser("~"), ".cache", "fgrad")
    return os.environ.get("FGRAD_CACHE_DIR", default)


def opencl_device() -> str | None:
    """The OpenCL device the user picked (None: first GPU, else first device)."""
    return os.environ.get("FGRAD_OPENCL_DEVICE") or None


def num_threads() -> int:
    """Threads the llvm backend splits large kernels over (at least 1)."""
    value = os.environ.get("FGRAD_NUM_THREADS", "")
    if value.strip():
        try:
            return max(1, int(value))
        except ValueError:
            raise ValueError(f"FGRAD_NUM_THREADS must be an integer, got {value!r}") from None
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def jit_cache_size() -> int:
    """Signatures each jitted function keeps traced and compiled (least recently used ones
    are dropped beyond this), and compiled LLVM engines kept for reuse across functions."""
    value = os.environ.get("FGRAD_JIT_CACHE_SIZE", "")
    if not value.strip():
        return 64
    try:
        return max(1, int(value))
    except ValueError:
        raise ValueError(f"FGRAD_JIT_CACHE_SIZE must be an integer, got {value!r}") from None


def traceback_filtering() -> bool:
    """Whether errors raised under a transformation hide fgrad's internal frames."""
    return os.environ.get("FGRAD_TRACEBACK_FILTERING", "on").lower() not in (
        "off", "0", "false", "no")
