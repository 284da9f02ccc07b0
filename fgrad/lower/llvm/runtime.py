"""The `llvm` jit backend: compile a schedule into one LLVM module and run it.

In: a Jaxpr without constvars. Out: an executable `exe(*arrays) -> list[np.ndarray]`.

All kernels of a program go into ONE module, compiled in-process by llvmlite (host CPU
features, the O3 pipeline of the new pass manager, MCJIT). Host steps (see schedule/partition.py: a
temporary NumPy fallback) split the program into native segments; each segment is one
native call `segN(buffers)` through ctypes (a segment whose large kernels split runs as
parts instead, parallel ones on every thread of `llvm/threads.py's POOL`: FGRAD_NUM_THREADS).
Intermediates and outputs live in blocks of `buffer_pool.POOL`, kept mapped between calls;
a buffer whose value is dead is reused by a later kernel output of the same size. Compiled
code is cached by a hash of the unoptimized IR (and llvmlite's version, the host CPU and its
features): in memory, so identical programs compile once, and on disk (`disk_cache`), so a
fresh process skips optimizing and codegen.
"""
from __future__ import annotations

import collections
import ctypes
import functools
import logging
import sys
import time
import weakref
from typing import Any, cast

from llvmlite import ir
import numpy as np

from fgrad import flags, profiler
from fgrad.core import staging
from fgrad.core.dtypes import dtypes
from fgrad.core.ir import Eqn, Jaxpr
from fgrad.transforms import caches
from fgrad.lower.llvm import disk_cache, kernel_cache, pool
from fgrad.lower.llvm import target as llvm_target
from fgrad.lower.llvm.engines import (_ENGINES, _build_lock, _engines_lock, _EntryObject,
                                      _entry_object, _keep, _linked_engine, _load, _optimize,
                                      _toolchain_and_host, cache_key, clear_memory_cache,
                                      compile_stats, target_machine)
from fgrad.lower.kernel import program as program_lib
from fgrad.lower.llvm.dispatch import (FAILED, ArenaCall, LeanCall, address_of, as_c,
                                       new_output, out_of_memory)
from fgrad.lower.llvm.gemm.driver import routine_parts, routine_text, routine_texts
from fgrad.lower.llvm.gemm.epilogue import in_registers, register_note
from fgrad.lower.llvm.gemm.native import (epilogue_fits, routine_dtypes, tile_shape,
                                          uses_native_gemm)
from fgrad.lower.llvm.gemm.pairs import host_has_pairs, pairs_product
from fgrad.lower.llvm.gemm.scratch import release_blocks
from fgrad.lower.llvm.buffer_pool import POOL, exclusively_owned
from fgrad.lower.schedule.control_flow import CONTROL_FLOW, HostRows, run_control
from fgrad.lower.llvm.lapack import library_symbols, register_named_symbols
from fgrad.lower.llvm.kernels.render import render_module
from fgrad.lower.llvm.threads import (PART_ENTRY, describe_threads, entry_names, run_parts,
                                      segment_parts,
                                      register_symbols as register_thread_symbols)
from fgrad.lower.kernel import call_plan
from fgrad.lower.kernel.call_plan import (CONSTANT, FRESH, CallPlan, HostCall, NativeStep,
                                          Objects)
from fgrad.lower.kernel.program_key import program_key, tunables
from fgrad.lower.kernel.memory import memory_report
from fgrad.lower.kernel.program import Program, Segment
from fgrad.lower.kernel.ir import Kernel
from fgrad.lower.schedule.split_reduce import reduce_untransposed, split_reductions

log = logging.getLogger("fgrad.compile")


def half_native() -> bool:
    """Whether the CPU fgrad compiles for converts float16 in hardware (F16C), so kernels
    may use it (the features of `target.features`: narrowed in tests, as on such a CPU)."""
    return "+f16c" in llvm_target.features().split(",")


def module_ir(program: Program, external: dict[str, Any] | None = None) -> Any:
    """The llvmlite `ir.Module` of a program (unoptimized); kernels named in `external`
    (name -> (symbol, function type)) are declared only (compiled by kernel_cache)."""
    segments = [a.calls for a in program.actions if isinstance(a, Segment)]
    module = render_module(program.kernels, segments, program.library_calls, external,
                           program.epilogues, program.private_products)
    tm = target_machine()
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    return module


# ---------------------------------------------------------------------------- running


def optimized_ir(program: Program) -> str:
    """The program's LLVM IR after the O3 pipeline (shows what was vectorized)."""
    return str(_optimize(module_ir(program)))


# ---------------------------------------------------------------------------- compiling


_ENTRY = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p))
PROGRAMS = "llvm_programs"  # disk cache folder of whole-program records


def build(program: Program, source: Jaxpr | None = None) -> tuple["LLVMExecutable", Objects]:
    """Compile `program` (kernels and library calls from the kernel cache, the entry module
    here) into an executable; also the keys of everything it linked."""
    start, before = time.perf_counter(), dict(kernel_cache.stats)
    conv = any("rhs_patches" in e.params for e in program.library_calls.values())
    shared = [u for name in routine_dtypes(program.library_calls)
              for u in _routine_units(name, conv)]
    entry: list[tuple[ir.Module, _EntryObject]] = []

    def prepare_entry(symbols: dict[str, tuple[str, ir.FunctionType]]) -> None:
        module = module_ir(program, symbols)   # while the kernels compile on other threads
        entry.append((module, _entry_object(module)))
    kernels, routines = kernel_cache.compile_kernels(
        program.kernels, cache_key, shared, program.library_calls,
        program.epilogues, program.private_products, prepare_entry)
    ((module, prepared),) = entry
    by_symbol = {k.symbol: k for k in kernels.values()}
    linked = {**routines, **{k.key: k.obj for k in by_symbol.values() if k.obj}}
    engine, entry_key = _linked_engine(module, prepared, list(linked.values()))
    _log_compile(program, kernel_cache.stats - collections.Counter(before),
                 time.perf_counter() - start)
    symbols = sorted({s for eqn in program.library_calls.values() for s in library_symbols(eqn)})
    plan = call_plan.from_program(program, lambda i, seg: _entries(program, i, seg))
    exe = LLVMExecutable(plan, engine, source, program)
    exe.module = module
    return exe, Objects(entry_key, tuple(linked), tuple(symbols))


def _entries(program: Program, i: int, seg: Segment) -> tuple[call_plan.Entry, ...]:
    """The exported entries of segment i: `segN` alone, or (`segN_pK`, calls, parallel)
    per part (llvm/threads.py)."""
    parts = segment_parts(program, seg)
    names = entry_names(i, parts)
    if names == [f"seg{i}"]:
        return ((names[0], len(seg.calls), False),)
    return tuple((name, part.stop - part.first, part.parallel)
                 for name, part in zip(names, parts, strict=True))


class LLVMExecutable:
    """A compiled program: call it with NumPy arrays, get the output arrays (read-only views
    of pooled memory, returned to the pool when dropped). It runs a `CallPlan`
    (kernel/call_plan.py) on `engine`; `source` is the jaxpr it was compiled from (for the
    profiler), `program` its Program when it was scheduled in this process (an executable
    loaded whole from the disk cache has none until something asks)."""

    def __init__(self, plan: CallPlan, engine: Any, source: Jaxpr | None,
                 program: Program | None = None):
        self.plan, self.engine, self.source, self._program = plan, engine, source, program
        self.module: Any = None
        self._profiling: LLVMExecutable | None = None
        self.runners = [self._runner(step) for step in plan.steps
                        if isinstance(step, NativeStep)]
        self._in_dtypes = [plan.values[i].dtype.np for i in range(plan.n_inputs)]
        self._constants: list[Any] = [
            np.frombuffer(v.constant, v.dtype.np).reshape(v.shape).copy() if v.kind == CONSTANT
            else None for v in plan.values]
        self._direct = self._direct_plan()
        self._lean = None
        if self._direct is not None:
            entry = cast(NativeStep, plan.steps[0]).entries[0][0]
            runner = self.engine.get_function_address(entry) \
                if isinstance(self.runners[0], _ENTRY) else self.runners[0]
            self._lean = LeanCall(runner, self._direct, self._call_general, address_of,
                                  new_output, _failure_of(self))
        self._arena = None
        if self._lean is None and ArenaCall.applies(plan):
            self._arena = ArenaCall(plan, self.runners, self._in_dtypes, self._constants,
                                    functools.partial(self._run, given={}), _failure_of(self))
        # for jit's fast path, which has already checked that no profiler is on: the tuple
        # of arrays in, read-only arrays out (None when this program has neither call)
        self.fast_call = self._lean or self._arena

    @property
    def program(self) -> Program:
        """The scheduled program (planned again from `source` for a loaded executable)."""
        if self._program is None:
            assert self.source is not None
            self._program = plan(self.source)
        return self._program

    def _runner(self, step: NativeStep) -> Any:
        """What runs a native step on a buffer table: its `segN` entry when it is one serial
        part, else the parts in order, parallel ones on the thread pool."""
        if len(step.entries) == 1 and "_p" not in step.entries[0][0]:
            return _ENTRY(self.engine.get_function_address(step.entries[0][0]))
        addresses = [self.engine.get_function_address(name) for name, _, _ in step.entries]
        entries = [(PART_ENTRY(address), address, calls, parallel)
                   for address, (_, calls, parallel) in zip(addresses, step.entries)]
        return functools.partial(run_parts, entries)

    def _new(self, value: call_plan.Value, blocks: list[np.ndarray]) -> tuple[np.ndarray, int]:
        """A written value's array and its address: a fresh output, or a view at the start
        of its block (the blocks' addresses are remembered: the pool hands them out
        again)."""
        if value.kind == FRESH:
            out, address = new_output(value.shape, value.dtype.np)
            out.flags.writeable = False
            return out, address
        block = blocks[value.index]
        view = block[:value.nbytes].view(value.dtype.np).reshape(value.shape)
        return view, address_of(block)

    def __call__(self, *arrays: Any) -> list[np.ndarray]:
        if self._lean is not None and not profiler.active():
            return self._lean(arrays)
        return self._call_general(arrays)

    def _call_general(self, arrays: Any) -> list[np.ndarray]:
        if profiler.active() and self.source is not None:
            return self._profiling_build()._run(arrays, {})
        if self._direct is not None and len(arrays) == len(self._direct[0]) \
                and not profiler.active():
            return self._run_direct(arrays)
        if self._arena is not None and not profiler.active():
            return self._arena(arrays)
        return self._run(arrays, {})

    def prepare_profiling(self) -> None:
        """Build the profiling twin now (the jit path calls this before it starts the
        clock)."""
        if self.source is not None:
            self._profiling_build()

    def _profiling_build(self) -> "LLVMExecutable":
        """The same program with one native call per kernel or library call, so the
        profiler times each (built on the first profiled call; kernels come from the
        kernel cache, so only the glue module compiles again)."""
        if self._profiling is None:
            assert self.source is not None
            self._profiling = build(plan(self.source, call_per_segment=True))[0]
        return self._profiling

    def _direct_plan(self) -> Any:
        """For a plan that is one native step writing each output directly (no host steps,
        no intermediates): (input dtypes, output shapes and dtypes, table order, table
        type), else None."""
        form = call_plan.direct_form(self.plan)
        if form is None:
            return None
        outs, order = form
        values = self.plan.values
        return (self._in_dtypes, [(values[o].shape, values[o].dtype.np) for o in outs],
                order, ctypes.c_void_p * len(order))

    def _run_direct(self, arrays: Any) -> list[np.ndarray]:
        """The lean call path of `_direct_plan` programs (what a small jitted call costs)."""
        in_dtypes, out_specs, order, table_type = self._direct
        ins = [as_c(a, dt) for a, dt in zip(arrays, in_dtypes)]
        pointers = [address_of(a) for a in ins]
        outs = []
        for shape, dt in out_specs:
            out, address = new_output(shape, dt)
            outs.append(out)
            pointers.append(address)
        failures = FAILED[0]
        self.runners[0](table_type(*[pointers[i] for i in order]))
        if FAILED[0] != failures:
            raise out_of_memory(self.source)
        for out in outs:
            out.setflags(write=False)
        return outs

    exclusively_owned = staticmethod(exclusively_owned)

    def call_donated(self, arrays: list[Any], reusable: list[bool]) -> list[np.ndarray]:
        """Call with `arrays`, where `reusable[i]` says that nothing but this call sees
        `arrays[i]`: an output may then be written into that array and returned as it."""
        given: dict[int, np.ndarray] = {}
        free = [i for i, ok in enumerate(reusable) if ok]
        for out, candidates in self.plan.donations:
            i = next((i for i in candidates if i in free), None)
            if i is not None:
                free.remove(i)
                given[out] = arrays[i]
        return self._run(arrays, given)

    def _run(self, arrays: Any, given: dict[int, np.ndarray]) -> list[np.ndarray]:
        plan = self.plan
        if len(arrays) != plan.n_inputs:
            raise TypeError(f"this executable takes {plan.n_inputs} arrays, got "
                            f"{len(arrays)}")
        env = list(self._constants)
        for i, a in enumerate(arrays):
            env[i] = as_c(a, self._in_dtypes[i])
        blocks = [POOL.take(n) for n in plan.block_bytes]
        addresses: dict[int, int] = {}
        prof = profiler.active()
        try:
            native = 0
            for k, step in enumerate(plan.steps):
                start = time.perf_counter() if prof else 0.0
                if isinstance(step, HostCall):
                    _run_host(step, env)
                else:
                    for w in step.writes:
                        if w in given:
                            env[w] = given[w]
                        else:
                            env[w], addresses[w] = self._new(plan.values[w], blocks)
                    table = (ctypes.c_void_p * len(step.table))(
                        *[addresses[t] if t in addresses else address_of(env[t])
                          for t in step.table])
                    failures = FAILED[0]
                    self.runners[native](table)
                    if FAILED[0] != failures:   # before a host step reads its outputs
                        raise out_of_memory(self.source)
                    native += 1
                if prof:
                    prof.step(self.program, self.program.actions[k], time.perf_counter() - start)
            return [env[o].copy() if plan.values[o].kind == CONSTANT else env[o]
                    for o in plan.outputs]
        finally:
            env.clear()  # drop every view of the blocks before they go back
            for block in blocks:
                POOL.give(block)


def _failure_of(exe: LLVMExecutable) -> Any:
    """`failure()` for the fast call paths: `out_of_memory` naming `exe`'s equations
    (through a weak reference: the executable holds its paths)."""
    ref = weakref.ref(exe)

    def failure() -> MemoryError:
        live = ref()
        return out_of_memory(live.source if live is not None else None)
    return failure


def _log_compile(program: Program, kernels: collections.Counter[str], seconds: float) -> None:
    """One INFO line per compiled program on the `fgrad.compile` logger."""
    if log.isEnabledFor(logging.INFO):
        log.info("llvm: %d kernels (%d compiled, %d copied, %d from memory, %d from disk) "
                 "and %d equations ready in %.1f ms", len(program.kernels), kernels["builds"],
                 kernels["same_code"], kernels["memory_hits"], kernels["disk_hits"],
                 len(program.jaxpr.eqns), seconds * 1e3)


def _run_host(step: HostCall, env: list[Any]) -> None:
    """Evaluate one equation: a control-flow step with natively compiled sub-programs, any
    other with its NumPy impl (the temporary fallback)."""
    eqn = step.eqn
    args = [env[r] for r in step.reads]
    if eqn.primitive.name in CONTROL_FLOW:
        loop = _native_loop(eqn)
        outs = loop(args) if loop is not None else \
            run_control(eqn, args, _compile_sub, HostRows())
    else:
        outs = eqn.primitive.impl_list(*args, **eqn.params)
    for w, v, o in zip(step.writes, eqn.outvars, outs, strict=True):
        o = as_c(o, v.aval.dtype.np)
        if any(np.may_share_memory(o, a) for a in args):
            o = o.copy()  # an input's buffer may be reused by a later kernel
        if o.shape != v.aval.shape:
            raise RuntimeError(f"{eqn.primitive.name}: impl returned shape {o.shape}, "
                               f"expected {v.aval.shape}")
        env[w] = o


_LOOPS: weakref.WeakKeyDictionary[Eqn, Any] = weakref.WeakKeyDictionary()


def _native_loop(eqn: Eqn) -> Any:
    """The one-call native driver of a scan/while (llvm/loops.py), or None when its body
    needs the host loop; built once per equation."""
    if eqn not in _LOOPS:
        from fgrad.lower.llvm.loops import native_loop
        _LOOPS[eqn] = native_loop(eqn)
    return _LOOPS[eqn]


def _compile_sub(jaxpr: Jaxpr) -> Any:
    """The llvm executable of a control-flow sub-jaxpr (compiled once, cached)."""
    from fgrad.transforms.executables import executable_for
    return executable_for(jaxpr, "llvm")


def plan(jaxpr: Jaxpr, call_per_segment: bool = False, prefetch: bool = False) -> Program:
    """The program of `jaxpr` for this CPU (float16 kernels only with F16C; large
    leading-axes reductions split so that threads share them); `call_per_segment`: the
    profiling build (one native call per kernel); `prefetch`: each kernel that planning
    will not change starts compiling as soon as it is built."""
    native = flags.gemm_library() == "native"
    return program_lib.plan(reduce_untransposed(jaxpr), half_native(),
                            call_per_segment=call_per_segment,
                            epilogue_ok=epilogue_fits if native else None,
                            in_registers=in_registers if native else None,
                            implicit_gemm=uses_native_gemm if native else None,
                            pair_products=pairs_product if native and _amx_for(jaxpr)
                            else None,
                            gemm_tile=_tile_rows_cols if native else None,
                            on_final_kernel=_prefetch_kernel if prefetch else lambda k: None,
                            rewrite=split_reductions)


def _tile_rows_cols(dtype_bytes: int) -> tuple[int, int]:
    """The native GEMM's (MR, NR) tile for elements of `dtype_bytes`."""
    return tile_shape(dtype_bytes)[:2]


def _prefetch_kernel(kernel: Kernel) -> None:
    kernel_cache.prefetch_kernel(kernel, cache_key)


def compile_llvm(jaxpr: Jaxpr) -> LLVMExecutable:
    """The `llvm` backend compiler registered in fgrad.transforms.executables: the program
    loaded whole from the disk cache when a previous process stored it (no scheduling, no
    kernel building: `_load_program`), else planned and built, then stored."""
    key = program_key(jaxpr, _toolchain_and_host(),
                      f"{flags.gemm_library()} amx={flags.amx()}", tunables(_PLANNING_MODULES))
    pool.prefetch()
    _amx_for(jaxpr)   # AMX needs this process's permission, also for a stored program
    exe = _load_program(key, jaxpr) if key is not None else None
    if exe is None:
        with llvm_target.quick_thread_switches():
            _prefetch_routines(jaxpr)
            exe, objects = build(plan(jaxpr, prefetch=True), jaxpr)
        if key is not None and exe.plan.native_only:
            disk_cache.store(key, call_plan.dump_record(exe.plan, objects), PROGRAMS)
    return exe


def _amx_for(jaxpr: Jaxpr) -> bool:
    """Whether `jaxpr`'s bfloat16 products may run on AMX: it holds bfloat16 values, the
    `amx` setting is on and the host grants the tiles (asked here, once per process, only
    for such a program)."""
    bf16 = any(v.aval.dtype == dtypes.bfloat16 for e in jaxpr.eqns for v in e.outvars) \
        or any(v.aval.dtype == dtypes.bfloat16 for v in jaxpr.invars)
    return bf16 and flags.amx() and host_has_pairs()


def _prefetch_routines(jaxpr: Jaxpr) -> None:
    """Start compiling the shared GEMM routines the program's matmuls will call while it
    is planned (on a cold start they are ~0.2 s of LLVM's time; later, cached): each part
    is handed to the compile thread as soon as its text exists, the slowest first."""
    dots = {str(i): e for i, e in enumerate(jaxpr.eqns) if e.primitive.name == "dot_general"}
    conv = any(e.primitive.name == "conv_patches" for e in jaxpr.eqns)
    for name in routine_dtypes(dots):
        for part in routine_parts(conv):
            kernel_cache.prefetch([routine_unit(part, routine_text(name, part))], cache_key)


_STAGED_PREFETCHED: set[str] = set()


def _prefetch_staged_product(eqn: Eqn) -> None:
    """A staging hook (core/staging.py `STAGED_HOOKS`): the first float matmul a traced
    function stages under the llvm backend starts the compile of the shared GEMM routines
    (and of the thread pool's code) while the rest is still traced. W5's first dot_general
    is staged 1 ms into its trace; `compile_llvm`'s own prefetch comes 17 ms in."""
    try:
        if flags.default_backend() != "llvm":
            return
        names = [n for n in routine_dtypes({"0": eqn}) if n not in _STAGED_PREFETCHED]
        if not names:
            return
        _STAGED_PREFETCHED.update(names)
        pool.prefetch()
        for name in names:
            for part in routine_parts(False):
                kernel_cache.prefetch([routine_unit(part, routine_text(name, part))],
                                      cache_key)
    except Exception:  # noqa: BLE001  (the program's own compile builds and reports)
        pass


staging.STAGED_HOOKS["dot_general"] = _prefetch_staged_product


def _routine_units(dtype_name: str, with_conv: bool) -> list[tuple[str, int]]:
    """(IR text, speed level) of each shared GEMM routine (`routine_unit`)."""
    return [routine_unit(part, text) for part, text in routine_texts(dtype_name, with_conv)]


def routine_unit(part: str, text: str) -> tuple[str, int]:
    """(IR text, speed level) of a shared GEMM routine: the micro-kernel with its tile
    loops and the packing routines are vectorized and scheduled by hand (`SCHEDULED`:
    their machine code is the same without a middle end, 12 instead of 27-34 ms of LLVM
    for a packing routine); the driver's block loops run once per block, as `GLUE` (10
    instead of ~50 ms); the conv pack keeps LLVM's O1 middle end (`BY_HAND`: 1.13-1.16x
    the time without it, packing a 64-channel image)."""
    if part == "driver":
        return text, kernel_cache.GLUE
    return text, (kernel_cache.SCHEDULED if part in _SCHEDULED_ROUTINES
                  else kernel_cache.BY_HAND)


_SCHEDULED_ROUTINES = ("micro", "pack_a", "pack_a_t", "pack_b", "pack_b_t")


def _load_program(key: str, jaxpr: Jaxpr) -> LLVMExecutable | None:
    """The executable of a stored program record, linking its cached object code; None
    on any miss (no record, a damaged one, an object evicted)."""
    payload = disk_cache.load(key, PROGRAMS)
    if payload is None:
        return None
    start = time.perf_counter()
    try:
        found, objects = call_plan.parse_record(payload, jaxpr)
        register_named_symbols(list(objects.symbols))
    except ValueError:
        return None
    register_thread_symbols()
    with _engines_lock:
        engine = _ENGINES.get(objects.entry)
    if engine is None:
        linked = [kernel_cache.cached_object(k) for k in objects.linked]
        entry = disk_cache.load(objects.entry)
        if entry is None or any(obj is None for obj in linked):
            return None
        with _build_lock:
            engine = _load(entry, cast(list[bytes], linked))
        if engine is None:
            return None
        _keep(objects.entry, engine)
    compile_stats["program_hits"] += 1
    if log.isEnabledFor(logging.INFO):
        log.info("llvm: program of %d equations loaded whole from the disk cache in %.1f ms",
                 len(jaxpr.eqns), (time.perf_counter() - start) * 1e3)
    return LLVMExecutable(found, engine, jaxpr)


def describe(jaxpr: Jaxpr) -> str:
    """The schedule, the kernel IR and the generated LLVM IR of `jaxpr`."""
    program = plan(jaxpr)
    parts = ["# schedule (llvm backend; host steps run the NumPy impl as a temporary "
             "fallback until those primitives get native kernels)", str(program.schedule),
             "# kernel IR"]
    parts += [str(k) for k in program.kernels] or ["(no kernels)"]
    parts += ["# gemm epilogues (the kernel runs inside the gemm's call, on each block of "
              "rows once it is final, or in the micro-kernel's registers)"]
    kernels = {k.name: k for k in program.kernels}
    parts += [f"{g} + {k}: one native call"
              f"{register_note(program.library_calls[g], kernels[k])}"
              for g, k in program.epilogues.items()] or ["(none)"]
    parts += ["# threads", describe_threads(program)]
    parts += ["# " + str(memory_report(program))]
    parts += ["# LLVM IR (before optimization)", str(module_ir(program))]
    for step in program.schedule.controls():
        parts += [_describe_control(step.name, step.eqn)]
    return "\n".join(parts)


def _describe_control(name: str, eqn: Eqn) -> str:
    """How a control-flow step runs, and the schedule of each of its sub-programs."""
    from fgrad.lower.llvm.loops import native_loop
    how = "host loop over native calls"
    if eqn.primitive.name == "cond":
        how = "the host picks the branch; only that branch's program runs"
    elif native_loop(eqn) is not None:
        how = "one native driver call (llvm/loops.py)"
    subs = [(k, v) for k, v in eqn.params.items() if isinstance(v, Jaxpr)]
    subs += [(f"branch {i}", b) for i, b in enumerate(eqn.params.get("branches", ()))]
    lines = [f"# control-flow step {name}: {eqn.primitive.name}, {how}"]
    for label, sub in subs:
        lines += [f"## {name} {label}", str(plan(sub).schedule)]
    return "\n".join(lines)


compile_llvm.describe = describe  # type: ignore[attr-defined]  # jit getattr()s it


# whose tunable constants enter a program's key: the lowering modules loaded with this one
_PLANNING_MODULES = tuple(module for name, module in sorted(sys.modules.items())
                          if name.split(".")[:3] in (["fgrad", "lower", "llvm"],
                                                     ["fgrad", "lower", "kernel"],
                                                     ["fgrad", "lower", "schedule"]))


caches.register_clearer(clear_memory_cache)
caches.register_clearer(POOL.clear, after_collect=True)
caches.register_clearer(release_blocks)
