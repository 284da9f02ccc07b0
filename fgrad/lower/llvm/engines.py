"""Execution engines of the llvm backend: a program's entry module compiled (or loaded from
the disk cache) and linked with the kernel objects it calls, kept in memory by cache key.

In: an llvmlite module (a program's entry, or a whole module such as a native loop driver)
and the object code of the kernels it declares. Out: an MCJIT engine and its cache key
(`compiled_engine`), or, for a program's entry, its object prepared while the kernels
compile (`_entry_object`) and then linked (`_linked_engine`). The key hashes the
unoptimized IR with llvmlite's version, the host CPU and its features (`cache_key`).
"""
from __future__ import annotations

import collections
import functools
import hashlib
import threading
from collections.abc import Sequence
from typing import Any

import llvmlite
import llvmlite.binding as llvm
from llvmlite import ir

from fgrad import flags
from fgrad.lower.llvm import disk_cache, kernel_cache
from fgrad.lower.llvm import target as llvm_target
from fgrad.lower.llvm.kernels import vector_calls
# registers the failure record's symbol (fgrad_failures) before any code naming it links
from fgrad.lower.llvm.gemm import scratch as _failure_record  # noqa: F401


# The entry module only calls kernels, gemm drivers and LAPACK calls compiled elsewhere
# (kernel_cache), so it is neither optimized nor given more than fast instruction selection:
# 40 ms instead of ~0.5 s for a training step's entry at O3.
ENTRY_SPEED_LEVEL = 0


ENTRY_CODEGEN_LEVEL = 0


_machine: list[Any] = []


def _new_target_machine() -> Any:
    return llvm_target.new_machine()


def target_machine() -> Any:
    """The host's LLVM target machine for optimizing: native CPU and features, O3. (Each
    execution engine gets a machine of its own: the engine takes ownership of it.)"""
    if not _machine:
        _machine.append(_new_target_machine())
    return _machine[0]


def _optimize(module: Any) -> Any:
    """Parse and verify the module, then run LLVM's O3 pipeline (vectorizers on)."""
    return _optimize_text(str(module))


def _optimize_text(text: str, speed_level: int = 3) -> Any:
    try:
        parsed = llvm.parse_assembly(text)
        parsed.verify()
    except RuntimeError as err:
        raise RuntimeError(f"fgrad llvm backend produced invalid LLVM IR (a bug in "
                           f"fgrad.lower): {err}\n{text}") from None
    tuning = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    builder = llvm.create_pass_builder(target_machine(), tuning)
    builder.getModulePassManager().run(parsed, builder)
    if vector_calls.MARKER in text:
        vector_calls.inline_calls(parsed, target_machine())
    return parsed


_ENGINES: collections.OrderedDict[str, Any] = collections.OrderedDict()


_engines_lock = threading.Lock()


_build_lock = threading.Lock()  # one LLVM compile at a time (shared target machine)


compile_stats: collections.Counter[str] = collections.Counter()  # memory/disk hits, builds


@functools.cache
def _toolchain_and_host() -> str:
    return "\0".join([llvmlite.__version__, llvm_target.cpu_name(), llvm_target.features(),
                      str(disk_cache.FORMAT_VERSION)])


def cache_key(ir_text: str) -> str:
    """What compiled code depends on, hashed: the unoptimized IR, llvmlite's (and so LLVM's)
    version, the host CPU and its features, and the cache format."""
    return hashlib.sha256(f"{ir_text}\0{_toolchain_and_host()}".encode()).hexdigest()


def _build(text: str, linked: Sequence[bytes] = (), calls_only: bool = False
           ) -> tuple[Any, bytes | None]:
    """Optimize and JIT-compile (with the `linked` kernel objects) at O3, or, for a module
    that only `calls_only` code compiled elsewhere, at the entry levels; returns the
    engine and the object code MCJIT produced for the module."""
    objects: list[bytes] = []
    speed, codegen = (ENTRY_SPEED_LEVEL, ENTRY_CODEGEN_LEVEL) if calls_only else (3, 3)
    engine = llvm.create_mcjit_compiler(_optimize_text(text, speed),
                                        llvm_target.new_machine(opt=codegen))
    for obj in linked:
        engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.set_object_cache(lambda _module, data: objects.append(data))
    engine.finalize_object()
    return engine, (objects.pop() if objects else None)


def _load(obj: bytes, linked: Sequence[bytes] = ()) -> Any:
    """An engine running cached object code (with the `linked` kernel objects): no
    optimizing, no code generation (None if LLVM reports an error; a damaged object can
    crash it, so only verified entries come here)."""
    empty = llvm.parse_assembly(f'target triple = "{target_machine().triple}"\n')
    engine = llvm.create_mcjit_compiler(empty, _new_target_machine())
    try:
        for one in (obj, *linked):
            engine.add_object_file(llvm.ObjectFileRef.from_data(one))
        engine.finalize_object()
    except RuntimeError:
        return None
    return engine


def compiled_engine(module: Any, linked: Sequence[bytes] = ()) -> tuple[Any, str]:
    """The execution engine of `module` (linked with the kernel objects `linked`, whose
    symbols its text names): from memory, from the disk cache, or built at O3 (and then
    cached in both). Also its cache key."""
    text = str(module)
    key = cache_key(text)
    engine = _remembered(key)
    if engine is not None:
        return engine, key
    with _build_lock:
        obj = disk_cache.load(key)
        engine = _load(obj, linked) if obj else None
        if engine is not None:
            compile_stats["disk_hits"] += 1
        else:
            engine, obj = _build(text, linked)
            compile_stats["builds"] += 1
            if obj:
                disk_cache.store(key, obj)
    _keep(key, engine)
    return engine, key


_EntryObject = tuple[str, bytes | None, bool]   # cache key, object code, built now


def _entry_object(module: ir.Module) -> _EntryObject:
    """The object code of a program's entry module (which only calls code compiled
    elsewhere): None when its engine is in memory, else from the disk cache or compiled
    now at O0 (kernel_cache.glue_object, on this thread's own LLVM context)."""
    text = str(module)
    key = cache_key(text)
    with _engines_lock:
        if key in _ENGINES:
            return key, None, False
    obj = disk_cache.load(key)
    return (key, obj, False) if obj else (key, kernel_cache.glue_object(text), True)


def _linked_engine(module: ir.Module, prepared: _EntryObject, linked: Sequence[bytes]
                   ) -> tuple[Any, str]:
    """The engine of an entry module prepared by `_entry_object`, linked with the kernel
    objects `linked` (built from the module's text if its object fails to load)."""
    key, obj, built = prepared
    engine = _remembered(key)
    if engine is not None:
        return engine, key
    with _build_lock:
        engine = _load(obj, linked) if obj else None
        if engine is None:
            engine, obj = _build(str(module), linked, calls_only=True)
            built = True
        compile_stats["builds" if built else "disk_hits"] += 1
        if built and obj:
            disk_cache.store(key, obj)
    _keep(key, engine)
    return engine, key


def _remembered(key: str) -> Any:
    """The engine kept in memory under `key` (counted as a memory hit), or None."""
    with _engines_lock:
        engine = _ENGINES.get(key)
        if engine is not None:
            _ENGINES.move_to_end(key)
            compile_stats["memory_hits"] += 1
        return engine


def _keep(key: str, engine: Any) -> None:
    """Remember an engine in memory (the least recently used dropped past the limit)."""
    with _engines_lock:
        _ENGINES[key] = engine
        while len(_ENGINES) > flags.jit_cache_size():
            _ENGINES.popitem(last=False)


def clear_memory_cache() -> None:
    """Forget compiled engines kept in memory (executables keep theirs); the disk cache
    stays. A later compile of the same program then reads the disk cache, as a new
    process would."""
    with _engines_lock:
        _ENGINES.clear()
    kernel_cache.clear_memory()
