"""The `llvm` jit backend: compile a schedule into one LLVM module and run it.

In: a Jaxpr without constvars. Out: an executable `exe(*arrays) -> list[np.ndarray]`.

All kernels of a program go into ONE module, compiled in-process by llvmlite (host CPU
features, the O3 pipeline of the new pass manager, MCJIT). Host steps (see schedule.py: a
temporary NumPy fallback) split the program into native segments; each segment is one
native call `segN(buffers)` through ctypes. Intermediates live in NumPy buffers allocated
per call; a buffer whose value is dead is reused by a later kernel output of the same size.
"""
from __future__ import annotations

import ctypes
from typing import Any

import llvmlite.binding as llvm
import numpy as np

from fgrad.core.ir import Eqn, Jaxpr, Literal, Var
from fgrad.lower import program as program_lib
from fgrad.lower.llvm_render import render_module
from fgrad.lower.program import Program, Segment
from fgrad.lower.schedule import HostStep

_machine: list[Any] = []


def _new_target_machine() -> Any:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
        opt=3, jit=True)


def target_machine() -> Any:
    """The host's LLVM target machine for optimizing: native CPU and features, O3. (Each
    execution engine gets a machine of its own: the engine takes ownership of it.)"""
    if not _machine:
        _machine.append(_new_target_machine())
    return _machine[0]


def half_native() -> bool:
    """Whether this CPU converts float16 in hardware (F16C), so kernels may use it."""
    target_machine()
    return "+f16c" in llvm.get_host_cpu_features().flatten().split(",")


def module_ir(program: Program) -> Any:
    """The llvmlite `ir.Module` of a program (unoptimized)."""
    segments = [a.calls for a in program.actions if isinstance(a, Segment)]
    module = render_module(program.kernels, segments)
    tm = target_machine()
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    return module


# ---------------------------------------------------------------------------- running


def _optimize(module: Any) -> Any:
    """Parse and verify the module, then run LLVM's O3 pipeline (vectorizers on)."""
    text = str(module)
    try:
        parsed = llvm.parse_assembly(text)
        parsed.verify()
    except RuntimeError as err:
        raise RuntimeError(f"fgrad llvm backend produced invalid LLVM IR (a bug in "
                           f"fgrad.lower): {err}\n{text}") from None
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    builder = llvm.create_pass_builder(target_machine(), tuning)
    builder.getModulePassManager().run(parsed, builder)
    return parsed


def optimized_ir(program: Program) -> str:
    """The program's LLVM IR after the O3 pipeline (shows what was vectorized)."""
    return str(_optimize(module_ir(program)))


def _compile(module: Any) -> Any:
    """Optimize and JIT-compile a module; returns the execution engine (which owns it)."""
    engine = llvm.create_mcjit_compiler(_optimize(module), _new_target_machine())
    engine.finalize_object()
    return engine


_ENTRY = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p))


class LLVMExecutable:
    """A compiled program: call it with NumPy arrays, get the output arrays."""

    def __init__(self, program: Program):
        self.program = program
        self.module = module_ir(program)
        self.engine = _compile(self.module)
        n_seg = sum(isinstance(a, Segment) for a in program.actions)
        self.entries = [_ENTRY(self.engine.get_function_address(f"seg{i}"))
                        for i in range(n_seg)]

    def _buffers(self) -> list[np.ndarray]:
        return [np.empty(n, np.uint8) for n in self.program.buffer_bytes]

    def _new(self, var: Var, buffers: list[np.ndarray]) -> np.ndarray:
        b = self.program.buffer_of.get(id(var))
        if b is None:
            return np.empty(var.aval.shape, var.aval.dtype.np)
        nbytes = var.aval.size * var.aval.dtype.itemsize
        return buffers[b][:nbytes].view(var.aval.dtype.np).reshape(var.aval.shape)

    def __call__(self, *arrays: Any) -> list[np.ndarray]:
        jaxpr = self.program.jaxpr
        env: dict[int, np.ndarray] = {}
        for v, a in zip(jaxpr.invars, arrays, strict=True):
            env[id(v)] = _c_array(a, v)
        buffers = self._buffers()
        seg = 0
        for action in self.program.actions:
            if isinstance(action, HostStep):
                _run_host(action.eqn, env)
                continue
            for v in action.allocs:
                env[id(v)] = self._new(v, buffers)
            table = (ctypes.c_void_p * len(action.table))(
                *[env[id(v)].ctypes.data for v in action.table])
            self.entries[seg](table)
            seg += 1
        return [_read(a, env) for a in jaxpr.outvars]


def _c_array(a: Any, var: Var) -> np.ndarray:
    """`a` as a C-contiguous array of var's dtype (0-d stays 0-d; copies only if needed)."""
    arr = np.asarray(a, dtype=var.aval.dtype.np)
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def _read(a: Any, env: dict[int, np.ndarray]) -> np.ndarray:
    if isinstance(a, Literal):
        return np.asarray(a.val, dtype=a.aval.dtype.np)
    return env[id(a)]


def _run_host(eqn: Eqn, env: dict[int, np.ndarray]) -> None:
    """Evaluate one equation with its NumPy impl (the temporary fallback)."""
    args = [_read(a, env) for a in eqn.inputs]
    outs = eqn.primitive.impl_list(*args, **eqn.params)
    for v, o in zip(eqn.outvars, outs, strict=True):
        o = _c_array(o, v)
        if any(np.may_share_memory(o, a) for a in args):
            o = o.copy()  # an input's buffer may be reused by a later kernel
        if o.shape != v.aval.shape:
            raise RuntimeError(f"{eqn.primitive.name}: impl returned shape {o.shape}, "
                               f"expected {v.aval.shape}")
        env[id(v)] = o


def plan(jaxpr: Jaxpr) -> Program:
    """The program of `jaxpr` for this CPU (float16 kernels only with F16C)."""
    return program_lib.plan(jaxpr, half_native())


def compile_llvm(jaxpr: Jaxpr) -> LLVMExecutable:
    """The `llvm` backend compiler registered in fgrad.transforms.executables."""
    return LLVMExecutable(plan(jaxpr))


def describe(jaxpr: Jaxpr) -> str:
    """The schedule, the kernel IR and the generated LLVM IR of `jaxpr`."""
    program = plan(jaxpr)
    parts = ["# schedule (llvm backend; host steps run the NumPy impl as a temporary "
             "fallback until those primitives get native kernels)", str(program.schedule),
             "# kernel IR"]
    parts += [str(k) for k in program.kernels] or ["(no kernels)"]
    parts += ["# LLVM IR (before optimization)", str(module_ir(program))]
    return "\n".join(parts)


compile_llvm.describe = describe  # type: ignore[attr-defined]
