"""Every environment variable fgrad reads, in one place.

FGRAD_BACKEND       default jit backend: "llvm" (default), "opencl", "numpy" (reference interpreter)
FGRAD_LOG_RETRACE   "1": log (logger "fgrad.jit", level WARNING) why a jitted function retraced
FGRAD_CACHE_DIR     on-disk compile cache directory (default: the user cache dir; "" or "0": off)
FGRAD_OPENCL_DEVICE OpenCL device: "P:D" (platform:device indices), "CL:n" or a part of its name
FGRAD_NUM_THREADS   threads of the llvm backend's large kernels (default: the usable CPUs; 1: off)
FGRAD_JIT_CACHE_SIZE signatures kept per jitted function, and LLVM engines kept (default 64)
FGRAD_TRACEBACK_FILTERING "off": keep fgrad's own frames in tracebacks of transformed code
FGRAD_WARN_FLOAT64  "0": no warning when float64 data promotes a float32 computation
FGRAD_DEBUG_NANS    "1": eager ops that produce a NaN raise; jitted calls that produce one rerun
                    op by op and raise where it began
FGRAD_DEBUG_INFS    "1": the same for infinities
FGRAD_GEMM          "native" (default): jitted float32/64 matmuls run fgrad's own GEMM;
                    "openblas": they call SciPy's OpenBLAS (single-threaded, split by fgrad)
FGRAD_DISABLE_JIT   "1": `jit` calls the Python function directly (for print/pdb debugging)
FGRAD_LOG_COMPILES  "1": log every trace and compile with its time (logger "fgrad.jit", INFO);
                    compiles slower than 5 s are logged at WARNING whatever the setting
FGRAD_ENABLE_X64    "1" (or JAX's JAX_ENABLE_X64): Python floats and ints, and dtype defaults
                    (zeros, arange, random, means of ints, ...), are float64 / int64, as
                    JAX's jax_enable_x64 (config name "enable_x64" or "jax_enable_x64")

`fgrad.config.update(name, value)` overrides any of them at run time (lower-case names without
the FGRAD_ prefix, e.g. "backend", "debug_nans"). For jitted calls, FGRAD_BACKEND,
FGRAD_DISABLE_JIT, FGRAD_DEBUG_NANS and FGRAD_DEBUG_INFS are read once, at the first call
(that path is kept short: reading the environment cost ~2 us of a ~4 us call); change them
later with `fgrad.config.update`, or call `fgrad.flags.refresh()` after editing os.environ.
"""
from __future__ import annotations

import functools
import os
from typing import Any, Callable

BACKENDS = ("numpy", "llvm", "opencl")  # the jit backends
_JIT_CALL_FLAGS: list[tuple[bool, bool, str]] = []  # cache of jit_call_flags()
_X64: list[bool] = []                                 # cache of x64_enabled()
ON_CHANGE: list[Callable[[str], None]] = []           # called with a setting's name on change


class _Overrides(dict):
    """Values set with fgrad.config.update; they win over the environment. Any change
    drops the cached flags of the jitted call path and tells the `ON_CHANGE` listeners."""

    def _changed(self, names: Any) -> None:
        _JIT_CALL_FLAGS.clear()
        _X64.clear()
        for name in list(names):
            for listener in ON_CHANGE:
                listener(name)

    def __setitem__(self, key: str, value: Any) -> None:
        old = self.get(key, _MISSING)
        super().__setitem__(key, value)
        self._changed([key] if old is _MISSING or old != value else [])

    def pop(self, *args: Any) -> Any:
        out = super().pop(*args)
        self._changed(args[:1])
        return out

    def clear(self) -> None:
        names = list(self)
        super().clear()
        self._changed(names)

    def update(self, *args: Any, **kwargs: Any) -> None:
        new = dict(*args, **kwargs)
        super().update(new)
        self._changed(new)


_MISSING = object()


OVERRIDES: dict[str, Any] = _Overrides()


def _overridable(name: str) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
    def wrap(read_env: Callable[[], Any]) -> Callable[[], Any]:
        @functools.wraps(read_env)
        def read() -> Any:
            return OVERRIDES[name] if name in OVERRIDES else read_env()
        ENV_READERS[name] = read_env
        return read
    return wrap


ENV_READERS: dict[str, Callable[[], Any]] = {}


def _env_flag(var: str, default: str = "0") -> bool:
    return os.environ.get(var, default).strip() not in ("", "0", "false", "False")


def setting(name: str) -> Any:
    """The current value of setting `name` (a config override, else the environment)."""
    return OVERRIDES[name] if name in OVERRIDES else ENV_READERS[name]()


ENV_READERS.update({
    "warn_float64": lambda: _env_flag("FGRAD_WARN_FLOAT64", "1"),
    "debug_nans": lambda: _env_flag("FGRAD_DEBUG_NANS"),
    "debug_infs": lambda: _env_flag("FGRAD_DEBUG_INFS"),
    "disable_jit": lambda: _env_flag("FGRAD_DISABLE_JIT"),
    "log_compiles": lambda: _env_flag("FGRAD_LOG_COMPILES"),
    "enable_x64": lambda: _env_flag("FGRAD_ENABLE_X64") or _env_flag("JAX_ENABLE_X64"),
})


def x64_enabled() -> bool:
    """Whether 64-bit defaults are on (`enable_x64`); cached until a setting changes or
    `refresh` is called, since dtype defaults are read on every Tensor construction."""
    if not _X64:
        _X64.append(bool(setting("enable_x64")))
    return _X64[0]


def jit_call_flags() -> tuple[bool, bool, str]:
    """(disable_jit, debug_nans or debug_infs, default backend) for the jitted call path,
    which reads them on every call: the environment is read once (`refresh` reads it
    again), config changes are seen at once."""
    if not _JIT_CALL_FLAGS:
        checks = bool(setting("debug_nans") or setting("debug_infs"))
        backend = str(setting("backend")).lower()
        _JIT_CALL_FLAGS.append((bool(setting("disable_jit")), checks, backend))
    return _JIT_CALL_FLAGS[0]


def refresh() -> None:
    """Read the environment again on the next jitted call (after changing FGRAD_BACKEND,
    FGRAD_DISABLE_JIT, FGRAD_DEBUG_NANS or FGRAD_DEBUG_INFS in `os.environ` at run time;
    `fgrad.config.update` needs no refresh)."""
    _JIT_CALL_FLAGS.clear()
    _X64.clear()


@_overridable("gemm")
def gemm_library() -> str:
    """Who computes jitted float matmuls on llvm: "native" (fgrad's GEMM) or "openblas"."""
    return os.environ.get("FGRAD_GEMM", "native").strip().lower()


@_overridable("amx")
def amx() -> bool:
    """Whether bfloat16 products may run in pairs of k steps where the CPU has AMX tiles,
    or AVX512_BF16 at full rate (AMD Zen 4; llvm; both treat subnormal bfloat16 values as
    zero). FGRAD_AMX=0 keeps the float32 GEMM between conversions."""
    return _env_flag("FGRAD_AMX", "1")


@_overridable("backend")
def default_backend() -> str:
    """The jit backend used when `backend=None`."""
    return os.environ.get("FGRAD_BACKEND", "llvm").lower()


@_overridable("log_retrace")
def log_retrace() -> bool:
    """Whether to log the reason for every retrace."""
    return os.environ.get("FGRAD_LOG_RETRACE", "0") not in ("", "0", "false", "False")


@_overridable("cache_dir")
def cache_dir() -> str:
    """Directory of the on-disk compile cache."""
    default = os.path.join(os.path.expanduser("~"), ".cache", "fgrad")
    return os.environ.get("FGRAD_CACHE_DIR", default)


@_overridable("opencl_device")
def opencl_device() -> str | None:
    """The OpenCL device the user picked (None: first GPU, else first device)."""
    return os.environ.get("FGRAD_OPENCL_DEVICE") or None


@_overridable("pin_threads")
def pin_threads() -> bool:
    """Whether each worker of the llvm backend's pool stays on one CPU (FGRAD_PIN_THREADS,
    on unless "0"); the calling thread is never pinned."""
    return os.environ.get("FGRAD_PIN_THREADS", "1").strip().lower() not in ("0", "false", "no")


@_overridable("num_threads")
def num_threads() -> int:
    """Threads the llvm backend splits large kernels over (at least 1)."""
    value = os.environ.get("FGRAD_NUM_THREADS", "")
    if value.strip():
        try:
            return max(1, int(value))
        except ValueError:
            raise ValueError(f"FGRAD_NUM_THREADS must be an integer, got {value!r}") from None
    return _usable_cpus()


@functools.cache
def _usable_cpus() -> int:
    """CPUs this process may run on (read once per process, forked children again: the
    affinity call costs microseconds, as much as a small jitted call)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_usable_cpus.cache_clear)


@_overridable("jit_cache_size")
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


@_overridable("traceback_filtering")
def traceback_filtering() -> bool:
    """Whether errors raised under a transformation hide fgrad's internal frames."""
    return os.environ.get("FGRAD_TRACEBACK_FILTERING", "on").lower() not in (
        "off", "0", "false", "no")
