"""JAX's config states at the top level: `enable_x64`, `log_compiles`, `default_device`,
`check_tracer_leaks` / `checking_leaks` and the `transfer_guard` family.

Each is a `ConfigState`, as in JAX: `state.value` reads it and `with state(new_value):` sets
it for the block (the previous value comes back after it). `enable_x64` and `log_compiles`
are views of fgrad's settings of those names (`fgrad.config`); `default_device` maps a device
onto fgrad's jit backend; the others are recorded only (what fgrad does about them is said in
each one's docstring).
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager, Iterator

from fgrad import flags
from fgrad.config import config
from fgrad.core.device import canonical_device

__all__ = ["ConfigState", "check_tracer_leaks", "checking_leaks", "default_device",
           "enable_x64", "log_compiles", "transfer_guard", "transfer_guard_device_to_device",
           "transfer_guard_device_to_host", "transfer_guard_host_to_device"]

_UNSET: Any = object()
TRANSFER_GUARD_LEVELS = (None, "allow", "log", "disallow", "log_explicit", "disallow_explicit")


class ConfigState:
    """A setting used as JAX's `jax.<name>` states are: `state.value` is its value, and
    `with state(new_value):` sets it inside the block only."""

    def __init__(self, name: str, read: Callable[[], Any],
                 enter: Callable[[Any], ContextManager[None]], check: Callable[[Any], Any],
                 default_value: Any = _UNSET) -> None:
        self.name = name
        self._read, self._enter, self._check = read, enter, check
        self._default = default_value

    @property
    def value(self) -> Any:
        """The current value."""
        return self._read()

    @contextlib.contextmanager
    def __call__(self, new_val: Any = _UNSET) -> Iterator[None]:
        if new_val is _UNSET:
            if self._default is _UNSET:
                raise TypeError(f"{self.name}() needs a value, e.g. `with fgrad.{self.name}"
                                f"(...):`")
            new_val = self._default
        with self._enter(self._check(new_val)):
            yield

    def __repr__(self) -> str:
        return f"<fgrad.{self.name}: {self.value!r}>"


def _check_bool(name: str) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        if not isinstance(value, (bool, int)):
            raise TypeError(f"fgrad.{name}: expected a bool, got {type(value).__name__} "
                            f"{value!r}")
        return bool(value)
    return check


def _setting_state(name: str) -> ConfigState:
    """A state that is fgrad's boolean setting `name` (set through `fgrad.config`)."""
    return ConfigState(name, lambda: bool(flags.setting(name)),
                       lambda v: config.override(**{name: v}), _check_bool(name), True)


enable_x64 = _setting_state("enable_x64")
enable_x64.__doc__ = ("`with fgrad.enable_x64(True):` Python numbers and dtype defaults are "
                      "64-bit in the block (fgrad's `enable_x64` setting, JAX's "
                      "jax_enable_x64); `fgrad.enable_x64.value` reads it.")
log_compiles = _setting_state("log_compiles")
log_compiles.__doc__ = ("`with fgrad.log_compiles(True):` every jit trace and compile in the "
                        "block is logged with its time (logger 'fgrad.jit', level INFO).")

_RECORDED: dict[str, Any] = {}


@contextlib.contextmanager
def _recording(name: str, value: Any) -> Iterator[None]:
    saved, _RECORDED[name] = _RECORDED[name], value
    try:
        yield
    finally:
        _RECORDED[name] = saved


def _recorded_state(name: str, check: Callable[[Any], Any], initial: Any,
                    default_value: Any = _UNSET) -> ConfigState:
    """A state fgrad only records: the block sees `state.value`, nothing else changes."""
    _RECORDED[name] = initial
    return ConfigState(name, lambda: _RECORDED[name], lambda v: _recording(name, v), check,
                       default_value)


check_tracer_leaks = _recorded_state("check_tracer_leaks", _check_bool("check_tracer_leaks"),
                                     False, True)
check_tracer_leaks.__doc__ = (
    "JAX's leak checker switch, accepted and recorded only. fgrad does not scan for tracers "
    "left behind when a transformation ends, as JAX's checker does; it always raises "
    "LeakedTracerError when an escaped tracer is used, with or without this switch.")


def checking_leaks() -> ContextManager[None]:
    """`check_tracer_leaks(True)` as a context manager (JAX's `checking_leaks`); see
    `check_tracer_leaks` for what fgrad checks."""
    return check_tracer_leaks(True)


def _check_level(name: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value not in TRANSFER_GUARD_LEVELS:
            raise ValueError(f"fgrad.{name}: the level must be one of "
                             f"{TRANSFER_GUARD_LEVELS}, got {value!r}")
        return value
    return check


_GUARD_DOC = ("JAX's transfer guard for {} transfers, accepted and recorded only: fgrad "
              "does not guard transfers. Its implicit transfers are few and documented (a CPU "
              "operand of an eager op on an OpenCL device is copied there; jit copies "
              "arguments to and from its backend's device).")
transfer_guard_host_to_device = _recorded_state(
    "transfer_guard_host_to_device", _check_level("transfer_guard_host_to_device"), None)
transfer_guard_host_to_device.__doc__ = _GUARD_DOC.format("host-to-device")
transfer_guard_device_to_host = _recorded_state(
    "transfer_guard_device_to_host", _check_level("transfer_guard_device_to_host"), None)
transfer_guard_device_to_host.__doc__ = _GUARD_DOC.format("device-to-host")
transfer_guard_device_to_device = _recorded_state(
    "transfer_guard_device_to_device", _check_level("transfer_guard_device_to_device"), None)
transfer_guard_device_to_device.__doc__ = _GUARD_DOC.format("device-to-device")


@contextlib.contextmanager
def transfer_guard(new_val: str) -> Iterator[None]:
    """All three transfer guards (`transfer_guard_host_to_device` and the others) at level
    `new_val` inside the block; like them, recorded only."""
    _check_level("transfer_guard")(new_val)
    with contextlib.ExitStack() as stack:
        for state in (transfer_guard_host_to_device, transfer_guard_device_to_device,
                      transfer_guard_device_to_host):
            stack.enter_context(state(new_val))
        yield


def _check_device(value: Any) -> str | None:
    return None if value is None else canonical_device(value)


@contextlib.contextmanager
def _enter_device(device: str | None) -> Iterator[None]:
    """Point jit at the device: an OpenCL device makes 'opencl' the backend (a numbered one
    also picks that device); 'CPU' makes it 'llvm' when it was 'opencl'."""
    settings: dict[str, Any] = {}
    if device is not None and device.startswith("CL"):
        settings["backend"] = "opencl"
        if ":" in device:
            settings["opencl_device"] = device
    elif device == "CPU" and flags.default_backend() == "opencl":
        settings["backend"] = "llvm"
    with _recording("default_device", device), config.override(**settings):
        yield


_RECORDED["default_device"] = None
default_device = ConfigState("default_device", lambda: _RECORDED["default_device"],
                             _enter_device, _check_device)
default_device.__doc__ = (
    "`with fgrad.default_device('CL:0'):` jitted functions in the block run on that device "
    "(the backend becomes 'opencl' for an OpenCL device; 'CPU' brings 'opencl' back to "
    "'llvm'); `fgrad.default_device.value` is the device set, or None. Unlike JAX, arrays "
    "made in the block (fgrad.numpy.zeros, Tensor(...)) are still created on the host.")
