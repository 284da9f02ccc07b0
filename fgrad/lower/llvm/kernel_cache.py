"""Object code per kernel, content-addressed, so a program reuses kernels compiled for another.

In: a program's kernels. Out: for each, an exported symbol named by a hash of its LLVM IR
(`fgk_<hash>`), its function type, and its object code; the runtime declares the symbols in
the program's (small) entry module and loads the objects into the program's engine.

A kernel's key hashes its kernel IR (`kernel_fingerprint`: every field but the names and
the buffers' shapes, which reach the code only through loop extents and indices) with
the source of the lowering (the kernel and llvm rooms), its thread split and its level, so
a kernel found in a cache is never rendered to LLVM IR (on a warm start that rendering was
a third of the time); kernels with the same loop nest, in one program or two (W5's step has
three such pairs, W9's eleven), share one entry: in memory
(`_OBJECTS`, least recently used dropped past `KEPT`), and on disk (`disk_cache`, folder
"llvm_kernels"). Kernels found in neither are compiled on a thread pool, in parallel for real
(`llvm_target.run_pipeline`: each thread has its own LLVM context and target machine).
Library calls (gemm drivers with their fused epilogues, LAPACK calls) are compiled the same
way, so the program's entry module holds only calls and compiles at O0. A gemm call's unit
is glue (sizes, a loop over chunks, calls) and compiles at O0 too (`GLUE`): at O1 the 21 of
W9 took 12 ms each in LLVM's middle end, at O0 1 ms. LAPACK and sort units keep O2: they
hold the transposing copies and the merge loops.

The optimization level follows the kernel's size: a kernel of at most `LIGHT_WORK` innermost
iterations (biases, scalars, Adam's step counters) is not worth vectorizing and compiles
`LIGHT`ly (O1 without vectorizers, fast instruction selection: a third of the time); one of
at most `SHORT_LOOP_WORK` whose innermost loops are all shorter than two vectors (W5's loss
over 10 classes: its three kernels 49+38+11 ms of LLVM at O2) compiles at `SHORT`, the same
middle end with O2 instruction selection (39-46 -> 50-66 ms for the three, ~0.1 ms less per
W5 step); others at `KERNEL_SPEED_LEVEL` (O2). O3 took 12-17% more
LLVM time on W9's 48 kernels (2.67-2.96 vs 2.32-2.46 s of compile threads' CPU; first call
2098-2366 vs 1941-2267 ms, three alternating fresh processes) and ran W1, softmax,
layernorm and the W9 step no faster.
"""
from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import hashlib
import os
import pathlib
import threading
from collections.abc import Callable, Sequence
from typing import Union
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite import ir

from fgrad import flags
from fgrad.core.ir import Eqn
from fgrad.lower.kernel.ir import Kernel, innermost_extents, kernel_fingerprint
from fgrad.lower.kernel.streaming import streamed_outputs
from fgrad.lower.llvm import disk_cache, same_code
from fgrad.lower.llvm.disk_cache import signatures
from fgrad.lower.llvm import target as llvm_target
from fgrad.lower.llvm.blas import library_chunking
from fgrad.lower.llvm.lapack import register_library_symbols
from fgrad.lower.llvm.blas import render_library_call
from fgrad.lower.llvm.kernels.render import kernel_function_type, render_kernel
from fgrad.lower.llvm.kernels import vector_calls
from fgrad.lower.llvm.gemm.prerendered import shipped_object
from fgrad.lower.llvm.threads import kernel_work, split_extent

FOLDER = "llvm_kernels"
KEPT = 4096
KERNEL_SPEED_LEVEL = 2
LIGHT_WORK = 1024
# Kernels whose innermost loops are all shorter than two vectors (a loss over 10 classes)
# gain nothing from the vectorizers, which tripled their compile time: up to this much work
# they compile at the SHORT level (below).
SHORT_LOOP_WORK = 1 << 14
LIGHT = -1  # a speed level: O1 middle end without vectorizers, O0 code generation
# Short rows run their loops many times, so they keep LIGHT's middle end but get O2 code
# generation: fast instruction selection kept every value of W5's loss kernels on the stack
# (its loss and gradient over 256 x 10: ~230 -> ~160 us a call).
SHORT = -5
# A speed level for code vectorized and unrolled by hand (the GEMM packing routines): the O1
# middle end without loop unrolling or SLP vectorizer, O3 code generation.
BY_HAND = -2
# For code scheduled by hand whose loops the middle end cannot improve (the GEMM micro-kernel
# and driver): no middle end, O3 code generation. The micro-kernel's k loop comes out the
# same instructions as at BY_HAND, in 20 ms of LLVM instead of 88 (driver: 27 instead of 75).
SCHEDULED = -4
GLUE = -3   # library-call units (sizes, chunk loops, calls): O0 middle end and code generation
_NEUTRAL = "fgrad_kernel"
_OBJECTS: collections.OrderedDict[str, bytes] = collections.OrderedDict()
LIBRARY_TEXTS_KEPT = 256
_LIBRARY_TEXTS: collections.OrderedDict[str, tuple[str, ir.FunctionType]] = \
    collections.OrderedDict()
_lock = threading.Lock()
_per_thread = threading.local()  # each compiling thread's target machine
_INFLIGHT: dict[str, concurrent.futures.Future[bytes]] = {}  # prefetched, being compiled
_BACKGROUND: list[concurrent.futures.ThreadPoolExecutor] = []
_RENDERED: dict[str, str] = {}   # texts of prefetched kernels, for a compile that takes one back
# (kernel, key_of, key, level) by id(kernel): a prefetched kernel's key, for its program's
# compile (computing a key serializes the whole kernel)
_PREFETCHED_KEYS: dict[int, tuple[Kernel, Callable[[str], str], str, int | None]] = {}
stats: collections.Counter[str] = collections.Counter()  # memory_hits, disk_hits, builds


@dataclass(frozen=True)
class CompiledKernel:
    """A kernel's exported symbol, its LLVM function type, its object code and cache key."""

    symbol: str
    function_type: ir.FunctionType
    obj: bytes
    key: str = ""


def _kernel_text(kernel: Kernel) -> tuple[str, ir.FunctionType]:
    """The kernel alone as an LLVM module (its function named `_NEUTRAL`, exported, and
    its parameters by position, so kernels alike in all but names print the same text:
    same_code.py)."""
    module = ir.Module(name="fgrad_kernel")
    scalar = _speed_level(kernel) in (LIGHT, SHORT)   # never vectorized: no vector calls
    with vector_calls.scalar_code() if scalar else contextlib.nullcontext():
        fn = render_kernel(module, kernel)
    fn.linkage = ""
    module.triple, module.data_layout = llvm_target.triple_and_layout()
    for defined in (f for f in module.functions if not f.is_declaration):
        for i, arg in enumerate(defined.args):
            arg.name = f"arg.{i}"
    text = str(module).replace(f'@"{kernel.name}"', f'@"{_NEUTRAL}"')
    return text.replace(f'@"{kernel.name}.', f'@"{_NEUTRAL}.'), fn.function_type


def _machine(codegen_level: int) -> llvm.TargetMachine:
    """This thread's target machine generating code at `codegen_level`."""
    machines = getattr(_per_thread, "machines", None)
    if machines is None:
        machines = _per_thread.machines = {}
    if codegen_level not in machines:
        machines[codegen_level] = llvm_target.new_machine(opt=codegen_level)
    return machines[codegen_level]


def _object_code(text: str, speed_level: int | None = None) -> bytes:
    """Optimize and compile one kernel module to object code (safe on any thread); the
    optimization level is `KERNEL_SPEED_LEVEL` unless `speed_level` (or `LIGHT`) is given.
    A shared GEMM routine the package ships compiled for this CPU's ISA level is taken
    from there (gemm/prerendered.py `shipped_object`)."""
    shipped = shipped_object(text, speed_level)
    if shipped is not None:
        stats["shipped"] += 1
        return shipped
    return object_code_for(text, speed_level)


def object_code_for(text: str, speed_level: int | None,
                    machine: llvm.TargetMachine | None = None) -> bytes:
    """`text` compiled at `speed_level` for `machine` (default: this thread's for the
    host; gemm/prerendered.py builds the shipped routines of an ISA level with another)."""
    module, machine = _optimized(text, speed_level, machine)
    return llvm_target.emit_object(module, machine)


def assembly_of(text: str, speed_level: int | None = None) -> str:
    """The machine code `_object_code` makes of a module, as assembly text (for tests and
    for reading what a level does)."""
    module, machine = _optimized(text, speed_level)
    return str(machine.emit_assembly(module))


def codegen_level(speed_level: int | None) -> int:
    """The code generation level (0-3) a module compiled at `speed_level` gets."""
    if speed_level is None:
        speed_level = KERNEL_SPEED_LEVEL
    return 2 if speed_level == SHORT else 0 if speed_level in (LIGHT, GLUE) else 3


def _optimized(text: str, speed_level: int | None, machine: llvm.TargetMachine | None = None
               ) -> tuple[llvm.ModuleRef, llvm.TargetMachine]:
    context = llvm.create_context()
    module = llvm.parse_assembly(text, context=context)
    module.verify()
    if speed_level is None:
        speed_level = KERNEL_SPEED_LEVEL
    light = speed_level in (LIGHT, GLUE, SHORT)
    machine = machine or _machine(codegen_level(speed_level))
    tuning = llvm.create_pipeline_tuning_options(
        speed_level=0 if speed_level in (GLUE, SCHEDULED) else 1
        if speed_level in (LIGHT, BY_HAND, SHORT) else speed_level)
    tuning.loop_vectorization = not light and speed_level != SCHEDULED
    # The packing routines (BY_HAND) came out the same machine code without the SLP
    # vectorizer, 10 ms sooner for the plain B packing.
    tuning.slp_vectorization = tuning.loop_vectorization and speed_level != BY_HAND
    # No loop unrolling in code unrolled by hand: LLVM would fully unroll the packing
    # routines' MR/NR-wide loops, 2-3x their compile time for no measured gain at run time;
    # nor in LIGHT kernels (a loss over 10 classes: 23 -> 15 ms of LLVM).
    tuning.loop_unrolling = speed_level not in (BY_HAND, LIGHT, SHORT)
    llvm_target.run_pipeline(module, machine, tuning)
    if vector_calls.MARKER in text:
        vector_calls.inline_calls(module, machine, context)
    return module, machine


def glue_object(text: str) -> bytes:
    """Object code of a module of glue (a program's entry: sizes and calls), at O0."""
    return _object_code(text, GLUE)


def module_object(text: str, speed_level: int) -> bytes:
    """Object code of a whole module at `speed_level`, compiled now on this thread's own
    LLVM context (no cache: the caller keeps it)."""
    return _object_code(text, speed_level)


def _remember(key: str, obj: bytes) -> None:
    with _lock:
        _OBJECTS[key] = obj
        _OBJECTS.move_to_end(key)
        while len(_OBJECTS) > KEPT:
            _OBJECTS.popitem(last=False)


def cached_object(key: str) -> bytes | None:
    """The object code of cache key `key` (a kernel, library call or routine module), from
    memory or disk; None when neither has it."""
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


def prefetch(units: Sequence[tuple[str, int | None]], key_of: Callable[[str], str]) -> None:
    """Start compiling whole modules, (IR text, speed level) each (e.g. the shared GEMM
    routines of a program about to be planned), on a background thread, unless cached or
    already under way; a later `compile_kernels` that wants them takes the result instead
    of compiling them again."""
    for text, speed_level in units:
        key = key_of(f"O{speed_level}\n{text}")
        with _lock:
            if key in _OBJECTS or key in _INFLIGHT:
                continue
        on_disk = disk_cache.load(key, FOLDER)
        if on_disk is not None:
            _remember(key, on_disk)
            continue
        with _lock:
            if key not in _INFLIGHT:
                _INFLIGHT[key] = _background().submit(_build_one, key, text, speed_level)


def prefetch_kernel(kernel: Kernel, key_of: Callable[[str], str]) -> None:
    """Start compiling one kernel on the prefetch thread while the rest of its program is
    still planned (a cold start's second core is otherwise idle then), unless it is cached
    or under way (its program's compile reads a stored one and counts the hit). Its text is
    kept: a compile that takes the unit back renders it once."""
    key, level = _kernel_key(kernel, key_of)
    with _lock:
        if len(_PREFETCHED_KEYS) >= KEPT:   # programs whose compile never came
            _PREFETCHED_KEYS.clear()
        _PREFETCHED_KEYS[id(kernel)] = (kernel, key_of, key, level)
        if key in _OBJECTS or key in _INFLIGHT:
            return
    if disk_cache.has(key, FOLDER):
        return
    text = _kernel_text(kernel)[0]
    if same_code.claim(text, level, key) != key:   # its program's compile copies that one
        return
    with _lock:
        if key not in _INFLIGHT:
            _RENDERED[key] = text
            _INFLIGHT[key] = _background().submit(_build_one, key, text, level)


def _background() -> concurrent.futures.ThreadPoolExecutor:
    if not _BACKGROUND:
        _BACKGROUND.append(concurrent.futures.ThreadPoolExecutor(1, "fgrad-prefetch"))
    return _BACKGROUND[0]


def _build_one(key: str, text: str, speed_level: int | None) -> bytes:
    try:
        return _built_and_stored(key, _named(key, text), speed_level)
    finally:
        with _lock:
            _INFLIGHT.pop(key, None)
            _RENDERED.pop(key, None)


def _stored(key: str, obj: bytes) -> None:
    """Count a build and keep its object in memory and on disk (safe on any thread)."""
    with _lock:
        stats["builds"] += 1
    _remember(key, obj)
    disk_cache.store(key, obj, FOLDER)


def _workers(jobs: int) -> int:
    return max(1, min(jobs, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else os.cpu_count() or 1))


@functools.cache
def _lowering_source() -> str | None:
    """A hash of the source of everything between an equation or kernel IR and LLVM IR
    (fgrad/lower, the dtypes), or None when the source files are not there to read."""
    lower = pathlib.Path(__file__).resolve().parent.parent
    files = sorted(lower.glob("**/*.py"))
    files.append(lower.parent / "core" / "dtypes.py")
    digest = hashlib.sha256()
    try:
        for path in files:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    except OSError:
        return None
    return digest.hexdigest() if len(files) > 1 else None


def _speed_level(kernel: Kernel) -> int | None:
    """LIGHT for a kernel of little work, SHORT for one whose innermost loops are all
    shorter than two vectors (module docstring), else None: KERNEL_SPEED_LEVEL."""
    work = kernel_work(kernel.body)
    widest = max((p.dtype.itemsize for p in kernel.params), default=4)
    short = work <= SHORT_LOOP_WORK and max(innermost_extents(kernel.body)) < 2 * max(
        1, llvm_target.vector_bits() // (8 * widest))
    return LIGHT if work <= LIGHT_WORK else SHORT if short else None


def _kernel_key(kernel: Kernel, key_of: Callable[[str], str]) -> tuple[str, int | None]:
    """A kernel's cache key and speed level. The key hashes the kernel IR itself (with
    the lowering's source, the split and the level), so a kernel found in a cache is not
    even rendered to LLVM IR; without the source files, it hashes the LLVM text."""
    level = _speed_level(kernel)
    source = _lowering_source()
    if source is None:
        text, _ = _kernel_text(kernel)
        return key_of(text if level is None else f"O{level}\n{text}"), level
    described = (f"kernel-ir\n{source}\n{split_extent(kernel)}\n{level}\n"
                 f"{streamed_outputs(kernel)}\n")
    return key_of(described + kernel_fingerprint(kernel)), level


Unit = Union[str, Kernel, Callable[[], str]]  # LLVM IR text, or what renders it when needed
FType = Union[ir.FunctionType, Callable[[], ir.FunctionType]]   # or what finds it when asked


def _ftype(found: FType) -> ir.FunctionType:
    return found if isinstance(found, ir.FunctionType) else found()


def _text_of(item: Unit) -> str:
    """The LLVM IR text of a unit to compile (rendered only now when it was not)."""
    if isinstance(item, str):
        return item
    return _kernel_text(item)[0] if isinstance(item, Kernel) else item()


def _length(item: Unit) -> int:
    """A unit's text length when it is text already (0 for what is rendered later)."""
    return len(item) if isinstance(item, str) else 0


def _library_unit(eqn: Eqn, chunks: tuple[int, int, int] | None,
                  epilogue: tuple[CompiledKernel, Kernel] | None,
                  key_of: Callable[[str], str],
                  private: bool = False) -> tuple[str, Unit, FType]:
    """(key, unit, function type) of a library call. Keyed by the equation (primitive,
    params, avals), its split, its epilogue's symbol, the gemm setting and the lowering's
    source, so that with its signature remembered (`signatures`) it is rendered only
    when compiled (without: when compiled too, with the compile threads already busy, and
    its type read then); else keyed by its LLVM text."""
    register_library_symbols(eqn)   # its code may come from a cache, never rendered
    source = _lowering_source()
    render = functools.partial(_library_text, eqn, chunks is not None, epilogue, private)
    if source is None:
        text, ftype = render()
        return key_of(text), text, ftype
    params = sorted((k, repr(v)) for k, v in eqn.params.items())
    described = "\n".join(["library", source, flags.gemm_library(), repr(chunks), repr(private),
                            epilogue[0].symbol if epilogue else "-", eqn.primitive.name,
                            repr(params), repr([str(a.aval) for a in eqn.inputs]),
                            repr([str(v.aval) for v in eqn.outvars])])
    key = key_of(described)
    ftype = signatures.load(key)
    rendered = functools.partial(_rendered_once, key, render)
    if ftype is None:   # rendered once, when compiled or when its type is asked for
        @functools.cache
        def remembered() -> ir.FunctionType:
            signatures.store(key, rendered()[1])
            return rendered()[1]
        return key, lambda: rendered()[0], remembered
    return key, lambda: rendered()[0], ftype


def _rendered_once(key: str, render: Callable[[], tuple[str, ir.FunctionType]]
                   ) -> tuple[str, ir.FunctionType]:
    """A library call's (text, type), rendered once per key in this process: call sites
    with equal keys share it (W9: 41 call sites, 18 keys; each render ~4 ms)."""
    with _lock:
        found = _LIBRARY_TEXTS.get(key)
    if found is None:
        found = render()
        with _lock:
            _LIBRARY_TEXTS[key] = found
            while len(_LIBRARY_TEXTS) > LIBRARY_TEXTS_KEPT:
                _LIBRARY_TEXTS.popitem(last=False)
    return found


def _library_text(eqn: Eqn, split: bool, epilogue: tuple[CompiledKernel, Kernel] | None,
                  private: bool = False) -> tuple[str, ir.FunctionType]:
    """A library call's function alone as an LLVM module (named `_NEUTRAL`, exported), with
    its epilogue kernel, when it has one, declared by its compiled symbol."""
    module = ir.Module(name="fgrad_library_call")
    fused = None if epilogue is None else ir.Function(module, epilogue[0].function_type,
                                                      name=epilogue[0].symbol)
    fn = render_library_call(module, _NEUTRAL, eqn, split, fused,
                             None if epilogue is None else epilogue[1], private)
    fn.linkage = ""
    module.triple, module.data_layout = llvm_target.triple_and_layout()
    return str(module), fn.function_type


def compile_kernels(kernels: Sequence[Kernel], key_of: Callable[[str], str],
                    texts: Sequence[tuple[str, int | None]] = (),
                    library_calls: dict[str, Eqn] | None = None,
                    epilogues: dict[str, str] | None = None,
                    private: frozenset[str] = frozenset(),
                    meanwhile: Callable[[dict[str, tuple[str, ir.FunctionType]]], None]
                    | None = None
                    ) -> tuple[dict[str, CompiledKernel], dict[str, bytes]]:
    """The compiled form of each kernel and library call (gemm drivers with their
    epilogues, LAPACK calls), by name (empty object code for a kernel no step calls:
    `_register_only`), and the object code of each whole module in `texts`
    ((IR text, speed level) pairs, e.g. the shared GEMM routines) by cache key: from
    memory, disk, or compiled now, all missing ones in one parallel batch. `key_of(ir_text)`
    hashes the text with the toolchain and host. `private`: gemm calls whose product only
    their fused kernel reads (the program's `private_products`). `meanwhile(symbols)` runs on this
    thread once every missing unit is handed to the compile threads, before waiting for
    them; `symbols` gives each name's symbol and function type (what the program's entry
    module declares)."""
    found: dict[str, tuple[str, Unit, FType]] = {}
    levels: dict[str, int | None] = {}
    for kernel in kernels:
        with _lock:
            known = _PREFETCHED_KEYS.pop(id(kernel), None)
        if known is not None and known[0] is kernel and known[1] is key_of:
            key, level = known[2:]
        else:
            key, level = _kernel_key(kernel, key_of)
        found[kernel.name], levels[key] = (key, kernel, kernel_function_type(kernel)), level
    by_name = {k.name: k for k in kernels}
    split = library_chunking(library_calls or {})
    for name, eqn in (library_calls or {}).items():
        fused = (epilogues or {}).get(name)
        epilogue = None if fused is None else (
            CompiledKernel(_symbol(found[fused][0]), _ftype(found[fused][2]), b""),
            by_name[fused])
        found[name] = _library_unit(eqn, split.get(name), epilogue, key_of, name in private)
        if eqn.primitive.name == "dot_general":   # stores sizes, loops over chunks, calls
            levels[found[name][0]] = GLUE
    text_keys = [key_of(f"O{level}\n{text}") for text, level in texts]
    unused = _register_only(found, by_name, library_calls or {}, epilogues or {})
    wanted = {key: (text, levels.get(key)) for key, text, _ in found.values()
              if key not in unused}
    wanted.update({key: unit for key, unit in zip(text_keys, texts, strict=True)})
    inflight = _started_prefetches(wanted)
    objects = {key: obj for key in wanted
               if key not in inflight and (obj := cached_object(key)) is not None}

    def symbols() -> dict[str, tuple[str, ir.FunctionType]]:
        return {name: (_symbol(key), _ftype(ftype)) for name, (key, _, ftype) in found.items()}
    objects.update(_build_all({key: unit for key, unit in wanted.items()
                               if key not in objects and key not in inflight},
                              lambda: meanwhile(symbols()) if meanwhile else None))
    objects.update({key: future.result() for key, future in inflight.items()})
    compiled = {name: CompiledKernel(_symbol(key), _ftype(ftype), objects.get(key, b""), key)
                for name, (key, _, ftype) in found.items()}
    return compiled, {key: objects[key] for key in text_keys}


def _register_only(found: dict[str, tuple[str, Unit, FType]], kernels: dict[str, Kernel],
                   library_calls: dict[str, Eqn], epilogues: dict[str, str]) -> set[str]:
    """Keys of kernels that no step calls: fused epilogues that fgrad's GEMM computes in
    its registers (W5's two bias+relu kernels, ~18 ms of LLVM each on a cold start), unless
    a kernel that does run shares the key. They compile to nothing (empty object code)."""
    from fgrad.lower.llvm.gemm.epilogue import in_registers
    registered = {fused for gemm, fused in epilogues.items()
                  if in_registers(library_calls[gemm], kernels[fused])}
    return {found[n][0] for n in registered} - {
        found[n][0] for n in kernels if n not in registered}


def _started_prefetches(wanted: dict[str, tuple[Unit, int | None]]
                        ) -> dict[str, concurrent.futures.Future[bytes]]:
    """The prefetched units among `wanted` that the prefetch thread has begun; the ones
    still queued are taken back (cancelled) for this call's compile threads, so the
    prefetch thread's queue does not run alone after them."""
    with _lock:
        inflight = {key: _INFLIGHT[key] for key in wanted if key in _INFLIGHT}
        for key, future in list(inflight.items()):
            if future.cancel():
                del _INFLIGHT[key], inflight[key]
    return inflight


def _build_all(missing: dict[str, tuple[Unit, int | None]],
               meanwhile: Callable[[], None] = lambda: None) -> dict[str, bytes]:
    """Compile the missing units (key -> (unit, speed level or None for "by size")), on
    threads when there are several (see `llvm_target.run_pipeline`). Each unit is rendered
    on this thread (when it is not text yet) and handed to the pool at once, so rendering
    the next overlaps compiling the last. Texts go first, the longest first (the shared
    routines: a large module started last would run alone). `meanwhile` runs once all are
    handed out."""
    order = sorted(missing, key=lambda key: -_length(missing[key][0]))
    copies: dict[str, tuple[str, str, int | None]] = {}   # key -> (claimant, text, level)

    def job(key: str) -> tuple[str, int | None] | None:
        """The named text and level of unit `key` to compile, or None when its text is
        another unit's (`same_code`; it is copied after the batch)."""
        unit, level = missing[key]
        with _lock:
            text = _RENDERED.pop(key, None)
        text = _text_of(unit) if text is None else text
        claimant = same_code.claim(text, level, key)
        if claimant != key:
            copies[key] = (claimant, text, level)
            return None
        return _named(key, text), level
    workers = _workers(len(order) + 1) if order else 1   # `meanwhile` is work too
    built: dict[str, bytes] = {}
    if workers > 1:   # each compile thread also stores what it built (off this thread)
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            futures = {key: pool.submit(_built_and_stored, key, *named)
                       for key in order if (named := job(key)) is not None}
            meanwhile()
            built = {key: f.result() for key, f in futures.items()}
    else:
        built = {key: _built_and_stored(key, *named)
                 for key in order if (named := job(key)) is not None}
        meanwhile()
    for key, (claimant, text, level) in copies.items():
        built[key] = _copied(key, claimant, built) or _built_and_stored(
            key, _named(key, text), level)
    return {key: built[key] for key in order}


def _copied(key: str, claimant: str, built: dict[str, bytes]) -> bytes | None:
    """The claimant's object code renamed for `key` (kept like a build, counted as a
    copy), or None when it has none to give (its compile failed or was forgotten)."""
    obj = built.get(claimant)
    if obj is None:
        with _lock:
            obj, future = _OBJECTS.get(claimant), _INFLIGHT.get(claimant)
        if obj is None and future is not None:
            try:
                obj = future.result()
            except Exception:   # noqa: BLE001  (compiled here instead, which reports it)
                obj = None
        if obj is None:
            obj = disk_cache.load(claimant, FOLDER)
    try:
        obj = None if obj is None else same_code.renamed(obj, _symbol(claimant), _symbol(key))
    except ValueError:   # not the object it should be: compiled here instead
        obj = None
    if obj is None:
        return None
    with _lock:
        stats["same_code"] += 1
    _remember(key, obj)
    disk_cache.store(key, obj, FOLDER)
    return obj


def _built_and_stored(key: str, text: str, speed_level: int | None) -> bytes:
    obj = _object_code(text, speed_level)
    _stored(key, obj)
    return obj


def _symbol(key: str) -> str:
    return "fgk_" + hashlib.sha256(key.encode()).hexdigest()[:32]


def _named(key: str, text: str) -> str:
    return text.replace(f'@"{_NEUTRAL}"', f'@"{_symbol(key)}"')


def clear_memory() -> None:
    """Forget the kernel objects and library-call texts kept in memory (the disk cache
    stays)."""
    with _lock:
        _OBJECTS.clear()
        _LIBRARY_TEXTS.clear()
        signatures.clear()
    same_code.forget()
