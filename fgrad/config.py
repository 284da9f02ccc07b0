"""`fgrad.config`: every run-time setting in one object, like `jax.config`.

    fgrad.config.update("debug_nans", True)
    fgrad.config.backend            # "llvm"
    with fgrad.config.override(backend="numpy"): ...

Each setting starts from its environment variable (listed in `fgrad.flags`; the variables are
still honoured) and `update` overrides it for this process. `reset(name)` goes back to the
environment's value.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from fgrad import flags

__all__ = ["Config", "config"]

_KINDS: dict[str, type | tuple[type, ...]] = {
    "backend": str, "log_retrace": bool, "cache_dir": str, "opencl_device": (str, type(None)),
    "num_threads": int, "warn_float64": bool, "debug_nans": bool, "debug_infs": bool,
    "disable_jit": bool, "log_compiles": bool, "gemm": str, "amx": bool, "enable_x64": bool,
}
_ALIASES = {"jax_debug_nans": "debug_nans", "jax_debug_infs": "debug_infs",
            "jax_disable_jit": "disable_jit", "jax_log_compiles": "log_compiles",
            "jax_platform_name": "backend", "jax_default_device": "backend",
            "jax_enable_x64": "enable_x64"}
# JAX's platform names (jax_platform_name, jax_default_device) as fgrad's backends
_PLATFORMS = {"cpu": "llvm", "gpu": "opencl", "cuda": "opencl", "rocm": "opencl"}


def _check(name: str, value: Any) -> Any:
    name = _ALIASES.get(name, name)
    if name not in _KINDS:
        raise AttributeError(f"fgrad.config has no setting {name!r}; the settings are "
                             f"{sorted(_KINDS)}")
    kind = _KINDS[name]
    if kind is bool and isinstance(value, int) and not isinstance(value, bool):
        value = bool(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        want = kind.__name__ if isinstance(kind, type) else "a str or None"
        raise TypeError(f"fgrad.config.update({name!r}, ...): expected {want}, got "
                        f"{type(value).__name__} {value!r}")
    if name == "backend":
        value = _PLATFORMS.get(str(value).lower(), str(value))
        if value.lower().startswith("cl:"):   # an OpenCL device of fgrad.devices()
            value = "opencl"
        if value.lower() not in flags.BACKENDS:
            raise ValueError(f"fgrad.config.update('backend', {value!r}): choose one of "
                             f"{flags.BACKENDS}")
        value = value.lower()
    if name == "gemm" and value not in ("native", "openblas"):
        raise ValueError(f"fgrad.config.update('gemm', {value!r}): choose 'native' (fgrad's "
                         f"own GEMM) or 'openblas'")
    if name == "num_threads" and value < 1:
        raise ValueError(f"fgrad.config.update('num_threads', {value}): must be >= 1")
    return name, value


class Config:
    """The settings object (`fgrad.config`); read settings as attributes."""

    def update(self, name: str, value: Any) -> None:
        """Set setting `name` (e.g. "debug_nans", "backend") to `value` for this process."""
        name, value = _check(name, value)
        flags.OVERRIDES[name] = value

    def reset(self, name: str | None = None) -> None:
        """Forget the override of `name` (all overrides when None): back to the environment."""
        if name is None:
            flags.OVERRIDES.clear()
        else:
            flags.OVERRIDES.pop(_check(name, flags.setting(_ALIASES.get(name, name)))[0], None)

    @contextlib.contextmanager
    def override(self, **values: Any) -> Iterator[None]:
        """Set settings inside a `with` block and restore the previous state after it."""
        checked = dict(_check(k, v) for k, v in values.items())
        saved = {k: flags.OVERRIDES[k] for k in checked if k in flags.OVERRIDES}
        flags.OVERRIDES.update(checked)
        try:
            yield
        finally:
            for k in checked:
                flags.OVERRIDES.pop(k, None)
            flags.OVERRIDES.update(saved)

    def values(self) -> dict[str, Any]:
        """Every setting with its current value."""
        return {name: flags.setting(name) for name in sorted(_KINDS)}

    def __getattr__(self, name: str) -> Any:
        name = _ALIASES.get(name, name)
        if name not in _KINDS:
            raise AttributeError(f"fgrad.config has no setting {name!r}; the settings are "
                                 f"{sorted(_KINDS)}")
        return flags.setting(name)

    def __repr__(self) -> str:
        return "fgrad.config(" + ", ".join(f"{k}={v!r}" for k, v in self.values().items()) + ")"


config = Config()


@contextlib.contextmanager
def disable_jit(disable: bool = True) -> Iterator[None]:
    """Inside this block `jit`-wrapped functions run as plain Python, op by op (so `print`,
    breakpoints and NumPy conversions work), like `jax.disable_jit()`."""
    with config.override(disable_jit=disable):
        yield
