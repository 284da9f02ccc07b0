"""Object code per kernel, content-addressed, so a program reuses kernels compiled for another.

In: a program's kernels. Out: for each, an exported symbol named by a hash of its LLVM IR
(`fgk_<hash>`), its function type, and its object code; the runtime declares the symbols in
the program's (small) entry module and loads the objects into the program's engine.

A kernel's IR is rendered alone (its name replaced by a fixed one before hashing), so two
programs that contain the same loop nest over the same shapes share one entry: in memory
(`_OBJECTS`, least recently used dropped past `KEPT`), and on disk (`disk_cache`, folder
"llvm_kernels"). Kernels found in neither are compiled on a thread pool (LLVM releases the
GIL; each thread has its own LLVM context and target machine). The optimization level
follows the kernel's size: O3, or O2 for IR longer than `O2_ABOVE_CHARS` (very large
kernels, e.g. unrolled networks, spend most of their compile time in O3-only passes).
"""
from __future__ import annotations

import collections
import concurrent.futures
import functools
import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite import ir

from fgrad.lower.kernel.ir import Kernel
from fgrad.lower.llvm import disk_cache
from fgrad.lower.llvm import target as llvm_target
from fgrad.lower.llvm.render import render_kernel

FOLDER = "llvm_kernels"
KEPT = 4096
O2_ABOVE_CHARS = 400_000
_NEUTRAL = "fgrad_kernel"
_OBJECTS: collections.OrderedDict[str, bytes] = collections.OrderedDict()
_lock = threading.Lock()
_per_thread = threading.local()  # each compiling thread's target machine
stats: collections.Counter[str] = collections.Counter()  # memory_hits, disk_hits, builds


@dataclass(frozen=True)
class CompiledKernel:
    """A kernel's exported symbol, its LLVM function type, and its object code."""

    symbol: str
    function_type: ir.FunctionType
    obj: bytes


def _kernel_text(kernel: Kernel) -> tuple[str, ir.FunctionType]:
    """The kernel alone as an LLVM module (its function named `_NEUTRAL`, exported)."""
    module = ir.Module(name="fgrad_kernel")
    fn = render_kernel(module, kernel)
    fn.linkage = ""
    module.triple, module.data_layout = llvm_target.triple_and_layout()
    text = str(module).replace(f'@"{kernel.name}"', f'@"{_NEUTRAL}"')
    return text, fn.function_type


def _object_code(text: str, speed_level: int | None = None) -> bytes:
    """Optimize and compile one kernel module to object code (safe on any thread); the
    optimization level follows the text's size unless `speed_level` is given."""
    context = llvm.create_context()
    module = llvm.parse_assembly(text, context=context)
    module.verify()
    machine = getattr(_per_thread, "machine", None)
    if machine is None:
        machine = _per_thread.machine = llvm_target.new_machine()
    if speed_level is None:
        speed_level = 3 if len(text) <= O2_ABOVE_CHARS else 2
    tuning = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(module, builder)
    return machine.emit_object(module)


def _remember(key: str, obj: bytes) -> None:
    with _lock:
        _OBJECTS[key] = obj
        _OBJECTS.move_to_end(key)
        while len(_OBJECTS) > KEPT:
            _OBJECTS.popitem(last=False)


def _cached(key: str) -> bytes | None:
    with _lock:
        obj = _OBJECTS.get(key)
        if obj is not None:
            _OBJECTS.move_to_end(key)
            stats["memory_hits"] += 1
            return obj
    obj = disk_cache.load(key, FOLDER)
    if obj is not None:
        stats["disk_hits"] += 1
        _remember(key, obj)
    return obj


def _workers(jobs: int) -> int:
    return max(1, min(jobs, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else os.cpu_count() or 1))


def compile_kernels(kernels: Sequence[Kernel], key_of: Callable[[str], str]
                    ) -> dict[str, CompiledKernel]:
    """Each kernel's compiled form, by kernel name: from memory, disk, or compiled now
    (in parallel). `key_of(ir_text)` hashes the text with the toolchain and host."""
    found: dict[str, tuple[str, str, ir.FunctionType]] = {}
    for kernel in kernels:
        text, ftype = _kernel_text(kernel)
        found[kernel.name] = (key_of(text), text, ftype)
    objects: dict[str, bytes] = {}
    missing: dict[str, str] = {}
    for key, text, _ in found.values():
        if key in objects or key in missing:
            continue
        obj = _cached(key)
        if obj is None:
            missing[key] = text
        else:
            objects[key] = obj
    objects.update(_build_all(missing))
    return {name: CompiledKernel(_symbol(key), ftype, objects[key])
            for name, (key, _, ftype) in found.items()}


def compile_texts(texts: Sequence[str], key_of: Callable[[str], str],
                  speed_level: int | None = None) -> list[bytes]:
    """Object code of whole LLVM modules given as text (e.g. the shared GEMM routines),
    from memory, disk, or compiled now (in parallel) at `speed_level` (default: by size);
    `key_of` as for kernels."""
    keys = [key_of(f"O{speed_level}\n{text}") for text in texts]
    objects = {key: obj for key in keys if (obj := _cached(key)) is not None}
    objects.update(_build_all({key: text for key, text in zip(keys, texts, strict=True)
                               if key not in objects}, speed_level))
    return [objects[key] for key in keys]


def _build_all(missing: dict[str, str], speed_level: int | None = None) -> dict[str, bytes]:
    """Compile the missing kernels (key -> IR text), on threads when there are several."""
    built: dict[str, bytes] = {}
    texts = {k: _named(k, t) for k, t in missing.items()}
    compile_one = functools.partial(_object_code, speed_level=speed_level)
    if len(missing) > 1 and _workers(len(missing)) > 1:
        with concurrent.futures.ThreadPoolExecutor(_workers(len(missing))) as pool:
            built = dict(zip(texts, pool.map(compile_one, texts.values()), strict=True))
    else:
        built = {k: compile_one(t) for k, t in texts.items()}
    for key, obj in built.items():
        stats["builds"] += 1
        _remember(key, obj)
        disk_cache.store(key, obj, FOLDER)
    return built


def _symbol(key: str) -> str:
    return "fgk_" + hashlib.sha256(key.encode()).hexdigest()[:32]


def _named(key: str, text: str) -> str:
    return text.replace(f'@"{_NEUTRAL}"', f'@"{_symbol(key)}"')


def clear_memory() -> None:
    """Forget the kernel objects kept in memory (the disk cache stays)."""
    with _lock:
        _OBJECTS.clear()
