"""The shared GEMM routines' IR text, rendered ahead of time and shipped with the package.

Rendering the routines through llvmlite's object model is ~60 ms of Python on a cold
start's main thread (float32: micro-kernel ~28, packing ~18, driver ~8), before their
compile can begin. Their text depends only on the dtype, the vector width, the target's
triple and data layout, the llvmlite that prints it and the code of this folder, so it is
rendered once per (dtype, width) for x86-64 Linux and stored in `prerendered/`
(`REWRITE` rewrites the files). A bundle is used only
when every one of those inputs matches this process: a stale or foreign bundle is ignored
and the routines are rendered as before (`tests/lower/llvm/test_gemm_prerendered.py`
fails on a stale one, so the shipped files follow the code).

The routines also ship compiled, per ISA level (`LEVELS`: x86-64-v4 for 512-bit vectors,
x86-64-v3 for 256): library code, as XLA's CPU runtime links a prebuilt Eigen GEMM. A
host whose CPU has every feature of its width's level takes a routine's object code from
`objects-<bits>.json.gz` (`shipped_object`, by a digest of the text and its speed level)
instead of compiling it: W5's cold first call 195 -> ~165 ms (the micro-kernel alone is
~45 ms of code generation). The objects are the host's own code: built for x86-64-v4
with PRFCHW, the micro-kernel's and packings' assembly on this project's Xeon is the same
as for its own CPU name. Elsewhere, and for any text they were not built from, the
routines compile as before.
"""
from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import json
import os
from collections.abc import Callable
from typing import Any

import llvmlite

from fgrad.lower.llvm import target

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prerendered")
REWRITE = ('python -c "from fgrad.lower.llvm.gemm.prerendered import write_bundles; '
           'write_bundles()"')
SHIPPED = (("float32", 256), ("float64", 256), ("float32", 512), ("float64", 512))
_COMMON = ("+sse3,+ssse3,+sse4.1,+sse4.2,+popcnt,+cx16,+xsave,+avx,+avx2,+fma,+f16c,+bmi,"
           "+bmi2,+lzcnt,+movbe")
# vector bits -> (LLVM CPU, features) the shipped objects are built for
LEVELS = {512: ("x86-64-v4", f"{_COMMON},+prfchw,+avx512f,+avx512bw,+avx512cd,+avx512dq,"
                             "+avx512vl,-prefer-256-bit"),
          256: ("x86-64-v3", f"{_COMMON},+prfchw")}
MODULE_PREFIX = '; ModuleID = "fgrad_gemm_'   # the routines' modules (driver.py)


@functools.cache
def source_digest() -> str:
    """A digest of the code that renders the routines (this folder's modules) and of the
    llvmlite that prints them."""
    digest = hashlib.sha256(llvmlite.__version__.encode())
    folder = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), "rb") as f:
                digest.update(name.encode() + b"\0" + f.read())
    return digest.hexdigest()


def bundle_key(dtype_name: str, bits: int) -> dict[str, str | int]:
    """Everything a bundle's text depends on, as this process would render it."""
    triple, layout = target.triple_and_layout()
    return {"dtype": dtype_name, "vector_bits": bits, "triple": triple, "layout": layout,
            "source": source_digest()}


def bundle_path(dtype_name: str, bits: int) -> str:
    return os.path.join(FOLDER, f"{dtype_name}-{bits}.json.gz")


@functools.cache
def _bundle(dtype_name: str, bits: int) -> dict[str, str] | None:
    """The shipped texts of (dtype, width) when the bundle matches this process exactly."""
    try:
        with gzip.open(bundle_path(dtype_name, bits), "rt", encoding="utf-8") as f:
            stored = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("key") != bundle_key(dtype_name, bits):
        return None
    texts = stored.get("texts")
    return texts if isinstance(texts, dict) else None


def shipped_text(dtype_name: str, part: str) -> str | None:
    """The shipped text of one routine part for this host's vector width, or None."""
    texts = _bundle(dtype_name, target.vector_bits())
    found = None if texts is None else texts.get(part)
    return found if isinstance(found, str) else None


def render_bundle(dtype_name: str, bits: int,
                  render: Callable[[str, str], str]) -> dict[str, object]:
    """A bundle of every part of (dtype, width), rendered by `render(dtype, part)`."""
    from fgrad.lower.llvm.gemm.driver import ROUTINE_PARTS
    with target.rendering_for_width(bits):
        texts = {part: render(dtype_name, part) for part in ROUTINE_PARTS}
        return {"key": bundle_key(dtype_name, bits), "texts": texts}


def write_bundles() -> list[str]:
    """Render and store every shipped bundle, then compile and store the objects of each
    level; the paths written."""
    from fgrad.lower.llvm.gemm.driver import render_routine_text
    os.makedirs(FOLDER, exist_ok=True)
    written = []
    for dtype_name, bits in SHIPPED:
        path = bundle_path(dtype_name, bits)
        _write(path, render_bundle(dtype_name, bits, render_routine_text))
        written.append(path)
    for bits in LEVELS:
        _write(objects_path(bits), build_objects(bits))
        written.append(objects_path(bits))
    return written


def objects_path(bits: int) -> str:
    return os.path.join(FOLDER, f"objects-{bits}.json.gz")


def objects_key(bits: int) -> dict[str, str | int]:
    """Everything the shipped objects of a width depend on besides their texts."""
    triple, layout = target.triple_and_layout()
    cpu, features = LEVELS[bits]
    return {"vector_bits": bits, "triple": triple, "layout": layout, "cpu": cpu,
            "features": features, "llvmlite": llvmlite.__version__}


def object_digest(text: str, speed_level: int | None) -> str:
    """The name of a routine's object: a digest of its text and speed level."""
    return hashlib.sha256(f"O{speed_level}\n{text}".encode()).hexdigest()


def host_runs(bits: int) -> bool:
    """Whether this host's CPU has every feature of width `bits`' level."""
    host = {f for f in target.features().split(",") if f.startswith("+")}
    return all(f in host for f in LEVELS[bits][1].split(",") if f.startswith("+"))


@functools.cache
def _objects(bits: int) -> dict[str, str] | None:
    """The shipped objects of width `bits` (digest -> base64), when they match this process
    and its CPU runs them."""
    if bits not in LEVELS or not host_runs(bits):
        return None
    try:
        with gzip.open(objects_path(bits), "rt", encoding="utf-8") as f:
            stored = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("key") != objects_key(bits):
        return None
    found = stored.get("objects")
    return found if isinstance(found, dict) else None


def shipped_object(text: str, speed_level: int | None) -> bytes | None:
    """The shipped object code of a shared routine's module text at `speed_level`, or
    None (not a routine, another width or CPU, a text it was not built from)."""
    if not text.startswith(MODULE_PREFIX):
        return None
    objects = _objects(target.vector_bits())
    found = None if objects is None else objects.get(object_digest(text, speed_level))
    return base64.b64decode(found) if isinstance(found, str) else None


def build_objects(bits: int) -> dict[str, Any]:
    """Compile every shipped routine text of width `bits` for its level (module
    docstring): the objects file's content."""
    from fgrad.lower.llvm import kernel_cache
    from fgrad.lower.llvm.gemm.driver import render_routine_text
    from fgrad.lower.llvm.runtime import routine_unit
    cpu, features = LEVELS[bits]
    machines: dict[int, Any] = {}
    objects = {}
    for dtype_name, width in SHIPPED:
        if width != bits:
            continue
        texts = render_bundle(dtype_name, bits, render_routine_text)["texts"]
        assert isinstance(texts, dict)
        for part, text in texts.items():
            _, level = routine_unit(part, text)
            opt = kernel_cache.codegen_level(level)
            if opt not in machines:
                machines[opt] = target.machine_for(cpu, features, opt)
            obj = kernel_cache.object_code_for(text, level, machines[opt])
            objects[object_digest(text, level)] = base64.b64encode(obj).decode()
    return {"key": objects_key(bits), "objects": objects}


def _write(path: str, content: dict[str, Any]) -> None:
    payload = json.dumps(content, sort_keys=True).encode()
    with open(path, "wb") as f:   # mtime 0: the same code gives the same bytes
        f.write(gzip.compress(payload, compresslevel=9, mtime=0))
