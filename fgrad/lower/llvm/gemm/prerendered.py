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
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
from collections.abc import Callable

import llvmlite

from fgrad.lower.llvm import target

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prerendered")
REWRITE = ('python -c "from fgrad.lower.llvm.gemm.prerendered import write_bundles; '
           'write_bundles()"')
SHIPPED = (("float32", 256), ("float64", 256), ("float32", 512), ("float64", 512))


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
    """Render and store every shipped bundle; the paths written."""
    from fgrad.lower.llvm.gemm.driver import render_routine_text
    os.makedirs(FOLDER, exist_ok=True)
    written = []
    for dtype_name, bits in SHIPPED:
        path = bundle_path(dtype_name, bits)
        payload = json.dumps(render_bundle(dtype_name, bits, render_routine_text),
                             sort_keys=True).encode()
        with open(path, "wb") as f:   # mtime 0: the same code gives the same bytes
            f.write(gzip.compress(payload, compresslevel=9, mtime=0))
        written.append(path)
    return written
