"""The `opencl` jit backend: render a Program's kernels to OpenCL C and run them.

In: a Jaxpr without constvars. Out: `OpenCLExecutable`: `exe(*arrays) -> list[CLArray]`
taking NumPy arrays, Python scalars or `CLArray`s; the outputs stay on the device.

The Program is the llvm backend's (kernel/program.py); only rendering differs. Each kernel is
its own OpenCL program, built once per device and cached by source text. A call copies
host inputs in, enqueues every kernel on the device's in-order queue, and runs each host
step (a temporary NumPy fallback; see schedule/partition.py) by copying its operands to the host
and its results back. Control flow (scan/while/cond) runs its sub-programs compiled for the
same device, slicing and stacking rows on the device (schedule/control_flow.py). Intermediates use
the Program's buffer plan, in pooled buffers. Library calls (float matmuls) run as an
OpenCL matmul sized for the device (opencl/gemm.py); linalg stays a host step (no LAPACK on OpenCL).
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyopencl as cl

from fgrad import profiler
from fgrad.core.ir import Eqn, Jaxpr, Literal, ShapedArray, Var
from fgrad.lower.kernel import build as kernel_build
from fgrad.lower.kernel import program as program_lib
from fgrad.lower.schedule.control_flow import CONTROL_FLOW, run_control
from fgrad.lower.kernel.build_rows import build_rows
from fgrad.lower.kernel.ir import Kernel, check_kernel
from fgrad.lower.opencl.device import CLArray, CLDevice, device_list, get_device
from fgrad.lower.opencl.gemm import gemm_target, lower_gemm
from fgrad.lower.opencl.render import Launch, RenderedKernel, lower_kernel, program_source
from fgrad.lower.kernel.program import Program, Segment
from fgrad.lower.schedule.partition import HostStep, KernelStep
from fgrad.lower.schedule.split_reduce import reduce_untransposed

__all__ = ["CLArray", "OpenCLExecutable", "compile_opencl", "describe", "device_list"]


# ---------------------------------------------------------------------------- kernels


def _register_form(program: Program, step: KernelStep, names: Any) -> Kernel | None:
    """A memory-form reduction (kernel_build accumulates into the output when the last
    axis is kept) rebuilt as a register reduction over two loops, kept then reduced, so
    it runs in parallel over the kept outputs. None if it cannot be."""
    kept = kernel_build._kept(step)
    plan = kernel_build.trailing_plans(kept)[0] + kernel_build.trailing_plans(step.axes)[0]
    kernel, _, _ = kernel_build._register_reduce(program.schedule, step, names, plan)
    check_kernel(kernel)
    return kernel


def opencl_kernels(program: Program) -> list[Kernel]:
    """The kernels to render: the program's, with memory-form reductions and row-fused
    kernels in register form (same parameters, so the segments' slot tables still apply)."""
    names = program.schedule.names  # the names the program's kernels were built with
    steps = {s.name: s for s in program.schedule.steps if isinstance(s, KernelStep)}
    out = []
    for kernel in program.kernels:
        step = steps.get(kernel.name)
        rebuilt = None
        if step is not None and step.is_reduce and kernel_build._use_memory_form(step):
            rebuilt = _register_form(program, step, names)
        elif step is not None and step.is_rows:  # rows in registers: a work-group per row
            rebuilt = build_rows(program.schedule, step, names, registers=True)[0]
        if rebuilt is not None and rebuilt.params == kernel.params:
            kernel = rebuilt
        out.append(kernel)
    return out


def _group(dev: CLDevice | None) -> int:
    """Work-group size: 256 (within the device's limit)."""
    return 256 if dev is None else min(256, dev.max_group)


# ---------------------------------------------------------------------------- executable


class OpenCLExecutable:
    """A program for OpenCL devices: call it with arrays, get device arrays back. It runs on
    the device of its CLArray inputs (the default device if there are none)."""

    def __init__(self, program: Program, device: str | None = None,
                 gemm_variant: str | None = None):
        self.program = program
        self.gemm_variant = gemm_variant  # "cpu"/"gpu" forces the matmul form (tests)
        self.kernels = opencl_kernels(program)
        self.library_calls: dict[str, Eqn] = dict(getattr(program, "library_calls", {}))
        self.default = device
        self._built: dict[str, dict[str, tuple[Any, Launch]]] = {}
        self._plan: list[tuple[Any, list[Any], list[Any]]] | None = None
        self.compiled(get_device(device))  # build eagerly: errors show at compile time

    def rendered(self, dev: CLDevice | None = None) -> list[RenderedKernel]:
        """Every kernel and library call of the program as OpenCL C with its launch."""
        out = [lower_kernel(k, _group(dev)) for k in self.kernels]
        target = gemm_target(dev, self.gemm_variant)
        out += [lower_gemm(name, eqn, target) for name, eqn in self.library_calls.items()]
        return out

    def compiled(self, dev: CLDevice) -> dict[str, tuple[Any, Launch]]:
        """name -> (cl.Kernel, launch), built on first use on `dev` (one OpenCL program for
        all kernels: a build costs tens of milliseconds, mostly per program)."""
        if dev.name not in self._built:
            rendered = self.rendered(dev)
            built = {}
            if rendered:
                source = program_source(rendered)
                built = {r.name: (dev.kernel(source, r.name), r.launch) for r in rendered}
            self._built[dev.name] = built
        return self._built[dev.name]

    def _device(self, arrays: tuple[Any, ...]) -> CLDevice:
        names = {a.device for a in arrays if isinstance(a, CLArray)}
        if len(names) > 1:
            raise ValueError(f"opencl executable: inputs live on different devices "
                             f"{sorted(names)}; move them to one with Tensor.to(device)")
        return get_device(names.pop() if names else self.default)

    def __call__(self, *arrays: Any) -> list[CLArray]:
        dev = self._device(arrays)
        built = self.compiled(dev)
        jaxpr = self.program.jaxpr
        env: dict[int, CLArray] = {}
        for v, a in zip(jaxpr.invars, arrays, strict=True):
            env[id(v)] = _on_device(a, v, dev)
        buffers = [dev.alloc(n) for n in self.program.buffer_bytes]
        clock = _StepClock(self.program, dev)
        queue, dummy, where = dev.queue, dev.dummy, dev.name
        for action, allocs, calls in self._launch_plan():
            if isinstance(action, HostStep):
                _run_host(action.eqn, env, dev)
                clock.lap(action)
                continue
            for key, shape, dtype, slot, nbytes in allocs:
                buffer = buffers[slot] if slot is not None else dev.alloc(nbytes)
                env[key] = CLArray.wrap(shape, dtype, where, buffer)
            for name, keys, view in calls:
                kernel, launch = built[name]
                if not launch.empty:
                    args = [dummy if env[k].buffer is None else env[k].buffer for k in keys]
                    kernel(queue, launch.global_size, launch.local_size, *args)
                if clock.prof is not None:
                    clock.lap(view)
        return [_read(a, env, dev) for a in jaxpr.outvars]

    def _launch_plan(self) -> list[tuple[Any, list[Any], list[Any]]]:
        """Per action, what a call does, resolved once: (action, allocations as (value id,
        shape, dtype, buffer index or None, bytes), launches as (kernel name, the value ids
        of its arguments, its profiler row))."""
        if self._plan is None:
            plan: list[tuple[Any, list[Any], list[Any]]] = []
            for action in self.program.actions:
                if isinstance(action, HostStep):
                    plan.append((action, [], []))
                    continue
                allocs = []
                for v in action.allocs:
                    shape, dtype = tuple(int(d) for d in v.aval.shape), v.aval.dtype.np
                    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                    allocs.append((id(v), shape, dtype, self.program.buffer_of.get(id(v)),
                                   nbytes))
                calls = [(name, [id(action.table[s]) for s in slots],
                          Segment([(name, slots)], action.table, []))
                         for name, slots in action.calls]
                plan.append((action, allocs, calls))
            self._plan = plan
        return self._plan


class _StepClock:
    """Per-kernel times for the profiler: when a profile is active, each lap waits for the
    device queue and records the time since the previous lap (kernels then run one at a
    time, as the profiler's table assumes); otherwise every lap is a no-op."""

    def __init__(self, program: Program, dev: CLDevice):
        self.program, self.dev, self.prof = program, dev, profiler.active()
        if self.prof is not None:
            dev.queue.finish()
            self.start = time.perf_counter()

    def lap(self, action: Any) -> None:
        if self.prof is None:
            return
        self.dev.queue.finish()
        now = time.perf_counter()
        self.prof.step(self.program, action, now - self.start)
        self.start = now


def _on_device(a: Any, var: Var, dev: CLDevice) -> CLArray:
    """An input as a CLArray of var's shape and dtype on `dev` (host data is copied in)."""
    aval = var.aval
    if isinstance(a, CLArray):
        if a.shape != aval.shape or a.dtype != aval.dtype.np:
            raise TypeError(f"opencl executable: got a CLArray of shape {a.shape} and dtype "
                            f"{a.dtype}, expected {aval.shape} {aval.dtype.name}")
        return a
    host = np.asarray(a, dtype=aval.dtype.np)
    if host.shape != aval.shape:
        raise TypeError(f"opencl executable: got an array of shape {host.shape}, expected "
                        f"{aval.shape}")
    return CLArray.from_numpy(host, dev.name)


def _read(a: Any, env: dict[int, CLArray], dev: CLDevice) -> CLArray:
    if isinstance(a, Literal):
        return CLArray.from_numpy(np.asarray(a.val, dtype=a.aval.dtype.np), dev.name)
    return env[id(a)]


class DeviceRows:
    """`RowOps` for CLArrays: rows are copied device-to-device, only scalars to the host."""

    def __init__(self, dev: CLDevice):
        self.dev = dev

    def row(self, xs: CLArray, i: int) -> CLArray:
        """A device copy of xs[i]."""
        out = CLArray.empty(xs.shape[1:], xs.dtype, self.dev)
        if out.nbytes:
            cl.enqueue_copy(self.dev.queue, out.buffer, xs.buffer, byte_count=out.nbytes,
                            src_offset=i * out.nbytes)
        return out

    def stacked(self, aval: ShapedArray) -> CLArray:
        """An uninitialized device array of `aval`."""
        return CLArray.empty(aval.shape, aval.dtype.np, self.dev)

    def set_row(self, ys: CLArray, i: int, y: CLArray) -> None:
        """ys[i] = y, on the device."""
        nbytes = ys.nbytes // ys.shape[0]
        if nbytes:
            cl.enqueue_copy(self.dev.queue, ys.buffer, y.buffer, byte_count=nbytes,
                            dst_offset=i * nbytes)

    def scalar(self, x: CLArray) -> Any:
        """The element of a 0-d device array (copied to the host)."""
        return x.numpy().reshape(())[()]


def _compile_sub(jaxpr: Jaxpr) -> Any:
    """The opencl executable of a control-flow sub-jaxpr (compiled once, cached)."""
    from fgrad.transforms.executables import executable_for
    return executable_for(jaxpr, "opencl")


def _run_control(eqn: Eqn, env: dict[int, CLArray], dev: CLDevice) -> None:
    """Run a scan/while/cond whose sub-programs are compiled for this device."""
    args = [_read(a, env, dev) for a in eqn.inputs]
    outs = run_control(eqn, args, _compile_sub, DeviceRows(dev))
    for v, o in zip(eqn.outvars, outs, strict=True):
        env[id(v)] = _copy(o, dev) if any(o is a for a in args) else o


def _copy(a: CLArray, dev: CLDevice) -> CLArray:
    """A device copy of `a` (an input's buffer may be reused by a later kernel)."""
    out = CLArray.empty(a.shape, a.dtype, dev)
    if out.nbytes:
        cl.enqueue_copy(dev.queue, out.buffer, a.buffer, byte_count=out.nbytes)
    return out


def _run_host(eqn: Eqn, env: dict[int, CLArray], dev: CLDevice) -> None:
    """Evaluate one equation with its NumPy impl on host copies (the temporary fallback)."""
    if eqn.primitive.name in CONTROL_FLOW:
        _run_control(eqn, env, dev)
        return
    args = [np.asarray(a.val, dtype=a.aval.dtype.np) if isinstance(a, Literal)
            else env[id(a)].numpy() for a in eqn.inputs]
    outs = eqn.primitive.impl_list(*args, **eqn.params)
    for v, o in zip(eqn.outvars, outs, strict=True):
        o = np.asarray(o, dtype=v.aval.dtype.np)
        if o.shape != v.aval.shape:
            raise RuntimeError(f"{eqn.primitive.name}: impl returned shape {o.shape}, "
                               f"expected {v.aval.shape}")
        env[id(v)] = CLArray.from_numpy(o, dev.name)


# ---------------------------------------------------------------------------- entry points


def plan(jaxpr: Jaxpr) -> Program:
    """The program of `jaxpr` (float16 is computed in kernels: stored as half)."""
    return program_lib.plan(reduce_untransposed(jaxpr), half_native=True,
                            native_linalg=False)


def compile_opencl(jaxpr: Jaxpr) -> OpenCLExecutable:
    """The `opencl` backend compiler registered in fgrad.transforms.executables."""
    return OpenCLExecutable(plan(jaxpr))


def describe(jaxpr: Jaxpr) -> str:
    """The schedule, the kernel IR and the generated OpenCL C of `jaxpr`."""
    program = plan(jaxpr)
    dev = get_device()
    header = (f"# schedule (opencl backend on {dev.describe()}; host steps run the NumPy "
              f"impl as a temporary fallback until those primitives get native kernels)")
    parts = [header, str(program.schedule), "# kernel IR"]
    kernels = opencl_kernels(program)
    parts += [str(k) for k in kernels] or ["(no kernels)"]
    rendered = [lower_kernel(k, _group(dev)) for k in kernels]
    target = gemm_target(dev)
    calls = getattr(program, "library_calls", {})
    rendered += [lower_gemm(n, e, target) for n, e in calls.items()]
    parts.append("# OpenCL C (one program; launches: global size / local size)")
    parts += [f"// {r.name}: {r.form}, {r.launch.global_size} / {r.launch.local_size}"
              for r in rendered]
    parts.append(program_source(rendered) if rendered else "(no kernels)")
    return "\n".join(parts)


compile_opencl.describe = describe  # type: ignore[attr-defined]  # jit getattr()s it
