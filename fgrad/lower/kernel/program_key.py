"""What a compiled program depends on, hashed: the key of a whole program in a compile cache.

In: a Jaxpr and the backend's context strings (toolchain, host CPU, settings, `tunables` of
its modules). Out: a hex
digest, or None when some parameter cannot be described exactly (a Python callable, an
object printed by address), in which case the program is simply not cached whole.

The jaxpr is described exactly, not printed for people: variables numbered by first
appearance, literals and array parameters by their bytes and dtype, sub-jaxprs recursively.
fgrad's own source enters by each file's size and modification time (a stat per file,
~2 ms; hashing the contents costs ~20 ms, a large share of a warm start).
"""
from __future__ import annotations

import enum
import functools
import hashlib
import os
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from fgrad.core.dtypes import DType
from fgrad.core.ir import ClosedJaxpr, Jaxpr, Literal, ShapedArray, Var


class _Unkeyable(Exception):
    """A parameter the key cannot describe exactly."""


@functools.cache
def package_signature() -> str:
    """(relative path, size, mtime) of each of fgrad's source files, hashed; "" when the
    files cannot be read (e.g. a zipped install: programs are then not cached whole)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    digest, found = hashlib.sha256(), 0
    try:
        for folder, subfolders, files in os.walk(root):
            subfolders.sort()
            for name in sorted(f for f in files if f.endswith(".py")):
                path = os.path.join(folder, name)
                stat = os.stat(path)
                relative = os.path.relpath(path, root)
                digest.update(f"{relative}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
                found += 1
    except OSError:
        return ""
    return digest.hexdigest() if found else ""


def tunables(modules: Sequence[ModuleType]) -> str:
    """Every upper-case number, string or flag of `modules` (thread split sizes, fusion
    limits, GEMM blocking...): whatever a test or a user changes there at run time must
    change the key too. The backend names its modules, so the key does not depend on which
    others happen to be loaded."""
    found = []
    for module in modules:
        for attr, value in sorted(vars(module).items()):
            if attr.isupper() and type(value) in (int, float, str, bool):
                found.append(f"{module.__name__}.{attr}={value!r}")
    return "\n".join(found)


class _Describer:
    """Writes a jaxpr as exact text; variables numbered by first appearance."""

    def __init__(self) -> None:
        self.numbers: dict[int, int] = {}
        self.parts: list[str] = []

    def var(self, v: Var) -> str:
        number = self.numbers.setdefault(id(v), len(self.numbers))
        return f"v{number}:{v.aval}"

    def atom(self, a: Any) -> str:
        if isinstance(a, Literal):
            return f"lit({_value(a.val)}:{a.aval})"
        return self.var(a)

    def jaxpr(self, jaxpr: Jaxpr) -> str:
        lines = ["{", " ".join(map(self.var, jaxpr.constvars)), ";",
                 " ".join(map(self.var, jaxpr.invars))]
        for eqn in jaxpr.eqns:
            params = ",".join(f"{k}={self.param(v)}" for k, v in sorted(eqn.params.items()))
            lines.append(f"{' '.join(map(self.var, eqn.outvars))} = {eqn.primitive.name}"
                         f"[{params}] {' '.join(map(self.atom, eqn.inputs))}")
        lines += ["->", " ".join(map(self.atom, jaxpr.outvars)), "}"]
        return "\n".join(lines)

    def param(self, value: Any) -> str:
        if isinstance(value, ClosedJaxpr):
            consts = ",".join(_value(c) for c in value.consts)
            return f"closed({consts}){self.jaxpr(value.jaxpr)}"
        if isinstance(value, Jaxpr):
            return self.jaxpr(value)
        if isinstance(value, (tuple, list)):
            inner = ",".join(self.param(v) for v in value)
            return f"{type(value).__name__}({inner})"
        if isinstance(value, dict):
            return "dict(" + ",".join(f"{self.param(k)}:{self.param(v)}"
                                      for k, v in sorted(value.items(), key=repr)) + ")"
        if isinstance(value, (DType, ShapedArray)):
            return str(value) if isinstance(value, ShapedArray) else value.short
        if isinstance(value, (np.ndarray, np.generic)):
            return _value(value)
        if value is None or isinstance(value, (bool, int, float, str, complex, enum.Enum)):
            return f"{type(value).__name__}:{value!r}"
        raise _Unkeyable(type(value).__name__)


def _value(x: Any) -> str:
    """An array or scalar exactly: dtype, shape and the bytes' hash."""
    arr = np.asarray(x)
    if arr.dtype == object:
        raise _Unkeyable("object array")
    digest = hashlib.sha256(arr.tobytes()).hexdigest()[:32]
    return f"{arr.dtype.str}{list(arr.shape)}#{digest}"


def program_key(jaxpr: Jaxpr, *context: str) -> str | None:
    """The hex key of compiling `jaxpr` in `context` (the backend's toolchain, host and
    settings), including fgrad's source; None when the jaxpr holds a parameter that has no
    exact description (such a program is compiled, never cached whole)."""
    source = package_signature()
    if not source:
        return None
    try:
        described = _Describer().jaxpr(jaxpr)
    except _Unkeyable:
        return None
    text = "\0".join(["fgrad-program", source, *context, described])
    return hashlib.sha256(text.encode()).hexdigest()
