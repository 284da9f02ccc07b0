"""The host as LLVM sees it: CPU name, features, and the vector width kernels are built for.

LLVM's X86 tuning for several AVX-512 CPUs (Skylake-X, Ice Lake, Sapphire Rapids, the
generic x86-64-v4) carries `prefer-256-bit`: the vectorizers then stop at 256-bit vectors
although 512-bit registers exist. fgrad's kernels are long streaming loops where the wider
vectors pay, so on a CPU with AVX-512F that tuning is switched off and the loop vectorizer
uses the full 512 bits (AMD's Zen 4/5 tuning already prefers 512).
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import sys
import threading
from collections.abc import Iterator
from typing import Any

import llvmlite.binding as llvm
from llvmlite import ir


def _fill_llvmlite_tables() -> None:
    """Fill llvmlite's lazily built string-escape table now, on the importing thread.

    llvmlite fills it on the first metadata string or byte-array constant it prints, and a
    second thread that prints one meanwhile sees a half-filled table (KeyError). fgrad
    prints modules on background threads (the pool's code, prefetched kernels) while the
    caller prints its own; every module that starts such a thread imports this one first.
    """
    ir.MetaDataString(ir.Module(), "fgrad").get_reference()


_fill_llvmlite_tables()


@functools.cache
def _initialized() -> bool:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return True


@functools.cache
def cpu_name() -> str:
    """The host CPU's name in LLVM's terms (e.g. "znver4")."""
    _initialized()
    return llvm.get_host_cpu_name()


def features_for(host_features: str) -> str:
    """The feature string fgrad compiles with, from the host's (comma-separated "+f,-g"):
    the host's own, with `-prefer-256-bit` added where AVX-512F is present."""
    flags = [f for f in host_features.split(",") if f]
    if "+avx512f" in flags:
        flags = [f for f in flags if f.lstrip("+-") != "prefer-256-bit"] + ["-prefer-256-bit"]
    return ",".join(flags)


@functools.cache
def features() -> str:
    """The feature string of the host's target machines (see `features_for`)."""
    _initialized()
    return features_for(llvm.get_host_cpu_features().flatten())


def vector_bits(feature_string: str | None = None) -> int:
    """The widest float vector fgrad's kernels are built for on a CPU with these features
    (default: the host, or the width `rendering_for_width` set on this thread): 512 with
    AVX-512F, 256 with AVX, else 128 (SSE/NEON)."""
    if feature_string is None and getattr(_rendering, "bits", None):
        return int(_rendering.bits)
    flags = set((features() if feature_string is None else feature_string).split(","))
    if "+avx512f" in flags:
        return 512
    return 256 if "+avx" in flags else 128


_rendering = threading.local()


@contextlib.contextmanager
def rendering_with(**settings: Any) -> Iterator[None]:
    """Code rendered on this thread inside the block sees these settings
    (`rendering_setting`); other threads, and the machines that compile, do not."""
    saved = {name: getattr(_rendering, name, None) for name in settings}
    for name, value in settings.items():
        setattr(_rendering, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(_rendering, name, value)


def rendering_setting(name: str) -> Any:
    """A setting of `rendering_with` on this thread (None outside one)."""
    return getattr(_rendering, name, None)


def rendering_for_width(bits: int) -> contextlib.AbstractContextManager[None]:
    """Code rendered on this thread inside the block is built for `bits`-wide vectors, as
    on a CPU that has them (the GEMM routines rendered ahead of time for another CPU)."""
    return rendering_with(bits=bits)


@functools.cache
def _host_target() -> llvm.Target:
    _initialized()
    return llvm.Target.from_default_triple()


def new_machine(opt: int = 3, jit: bool = True) -> llvm.TargetMachine:
    """A fresh target machine for the host: native CPU, `features()`, optimization `opt`."""
    return _host_target().create_target_machine(cpu=cpu_name(), features=features(), opt=opt,
                                        jit=jit)


def machine_for(cpu: str, features: str, opt: int) -> llvm.TargetMachine:
    """A target machine of the host's triple for another CPU (the shipped GEMM objects of
    an ISA level: gemm/prerendered.py), as `new_machine` makes them."""
    return _host_target().create_target_machine(cpu=cpu, features=features, opt=opt, jit=True)


@functools.cache
def triple_and_layout() -> tuple[str, str]:
    """The host's target triple and data layout string (for modules built by hand)."""
    machine = new_machine()
    return machine.triple, str(machine.target_data)


# ---------------------------------------------------------------- calls on several threads
#
# llvmlite serializes every call into LLVM behind one process-wide lock, so kernels
# "compiled on a thread pool" would run one at a time. LLVM itself compiles modules of
# different contexts on different threads safely (that is how its own parallel JIT works),
# so the two long calls of a kernel's compile, the optimization pipeline and code
# generation, go to LLVM directly on modules that live in a thread's own context. Where
# llvmlite's internals differ from what this expects, the locked calls are used.


def _raw(name: str) -> Any | None:
    """The ctypes function behind llvmlite's locked wrapper of `name`, if it has one."""
    try:
        return getattr(llvm.ffi.lib, name)._cfn
    except AttributeError:
        return None


def run_pipeline(module: llvm.ModuleRef, machine: llvm.TargetMachine,
                 tuning: llvm.PipelineTuningOptions) -> None:
    """Run LLVM's default module pipeline for `tuning` on `module` (which must be in a
    context of its own when called from several threads)."""
    builder = llvm.create_pass_builder(machine, tuning)
    manager = builder.getModulePassManager()
    run = _raw("LLVMPY_RunNewModulePassManager")
    if run is None:
        manager.run(module, builder)
    else:
        run(manager, module, builder)


def emit_object(module: llvm.ModuleRef, machine: llvm.TargetMachine) -> bytes:
    """Object code of `module` for `machine` (see `run_pipeline` on threads)."""
    emit = _raw("LLVMPY_TargetMachineEmitToMemory")
    if emit is None:
        return machine.emit_object(module)
    ffi = llvm.ffi
    with ffi.OutputString() as error:
        buffer = emit(machine, module, 1, error)
        if not buffer:
            raise RuntimeError(f"LLVM code generation failed: {error}")
    try:
        return ctypes.string_at(ffi.lib.LLVMPY_GetBufferStart(buffer),
                                ffi.lib.LLVMPY_GetBufferSize(buffer))
    finally:
        ffi.lib.LLVMPY_DisposeMemoryBuffer(buffer)


# A compile thread's Python steps between LLVM calls wait for the interpreter's lock, which
# the main thread (planning, rendering kernels) gives up only every `sys.getswitchinterval()`
# (5 ms by default). W9's prefetched kernels took 2-3x their CPU time in wall time that way
# during planning; at 0.5 ms, 1.1-1.3x.
COMPILE_SWITCH_INTERVAL = 0.0005
_switch_lock = threading.Lock()
_switch_state: list[float] = []   # the interval before the outermost compile, while one runs
_switch_depth = [0]


@contextlib.contextmanager
def quick_thread_switches() -> Iterator[None]:
    """The interpreter switches threads every `COMPILE_SWITCH_INTERVAL` inside the block
    (nested and concurrent blocks share one change); the user's interval comes back after."""
    with _switch_lock:
        if _switch_depth[0] == 0:
            _switch_state[:] = [sys.getswitchinterval()]
            sys.setswitchinterval(min(COMPILE_SWITCH_INTERVAL, _switch_state[0]))
        _switch_depth[0] += 1
    try:
        yield
    finally:
        with _switch_lock:
            _switch_depth[0] -= 1
            if _switch_depth[0] == 0:
                sys.setswitchinterval(_switch_state.pop())

