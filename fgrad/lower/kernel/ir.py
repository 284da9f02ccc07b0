"""Kernel IR: loop nests over a domain, loads, ALU ops, stores, accumulators; a printer and a
checker.

In: nothing (these are the data types; `kernel/build.py` builds kernels from a schedule).
Out: frozen dataclasses, `str(kernel)`, and `check_kernel` (every loop variable bound, every
load and store provably inside its buffer, accumulators initialized before use).

Index expressions are `fgrad.lower.kernel.index.Ix` values; loads clamp every axis index whose
bounds are not provably inside the buffer, so generated code never reads out of bounds. An
index may hold run-time values (`Dyn` atoms: an integer expression, e.g. a load of a
gather's index buffer, clamped into range); the printer, the checker and `kernel_indices`
see those expressions too.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence, Union

from fgrad.core.dtypes import DType
from fgrad.lower.kernel.index import Ix, Sym, dyn_atoms, ix_range, used_syms

# ---------------------------------------------------------------------------- values


@dataclass(frozen=True, eq=False)
class Const:
    """A scalar constant."""

    value: Any
    dtype: DType


@dataclass(frozen=True, eq=False)
class Load:
    """buffer[index]; the index is within bounds by construction."""

    buf: int
    index: Ix
    dtype: DType


@dataclass(frozen=True, eq=False)
class IndexValue:
    """An index expression converted to a value (iota)."""

    index: Ix
    dtype: DType


@dataclass(frozen=True)
class Cond:
    """lo <= index <= hi and index % step == 0."""

    index: Ix
    lo: int
    hi: int
    step: int = 1

    def __str__(self) -> str:
        text = f"{self.lo} <= {self.index} <= {self.hi}"
        return text + (f" && ({self.index}) % {self.step} == 0" if self.step > 1 else "")


@dataclass(frozen=True, eq=False)
class IndexPred:
    """The conjunction of index conditions, as a bool value (pad regions)."""

    conds: tuple[Cond, ...]
    dtype: DType


@dataclass(frozen=True, eq=False)
class Op:
    """An ALU operation named after its primitive (`add`, `exp`, `select`, ...)."""

    op: str
    args: tuple["Expr", ...]
    dtype: DType


@dataclass(frozen=True, eq=False)
class AccRead:
    """The current value of accumulator `acc`."""

    acc: int
    dtype: DType


Expr = Union[Const, Load, IndexValue, IndexPred, Op, AccRead]

# ---------------------------------------------------------------------------- statements


@dataclass(frozen=True)
class Loop:
    """for sym in 0 .. sym.extent-1: body."""

    sym: Sym
    body: tuple["Stmt", ...]


@dataclass(frozen=True)
class Store:
    """buffer[index] = value."""

    buf: int
    index: Ix
    value: Expr


@dataclass(frozen=True)
class AccInit:
    """acc = identity of `op` (in dtype)."""

    acc: int
    op: str
    dtype: DType


@dataclass(frozen=True)
class AccUpdate:
    """acc = op(acc, value); reassociation is allowed (so the loop vectorizes)."""

    acc: int
    op: str
    value: Expr


Stmt = Union[Loop, Store, AccInit, AccUpdate]


@dataclass(frozen=True)
class Param:
    """A kernel buffer parameter: what it holds and whether the kernel writes it."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    written: bool


@dataclass(frozen=True)
class Kernel:
    """One native function: buffer parameters and a loop nest."""

    name: str
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    row_range: bool = False  # run on a range of its outer loop even when small (epilogues)
    product: int | None = None   # an epilogue's: the parameter holding the gemm's product

    def __str__(self) -> str:
        return pp_kernel(self)


def expr_indices(e: Expr) -> list[Ix]:
    """The index expressions an expression node uses directly (not those of its args)."""
    if isinstance(e, (Load, IndexValue)):
        return [e.index]
    if isinstance(e, IndexPred):
        return [c.index for c in e.conds]
    return []


def dyn_values(ix: Ix) -> list[Expr]:
    """The run-time values (kernel-IR expressions) inside an index expression."""
    return [d.value for d in dyn_atoms(ix)]


def expr_syms(e: Expr) -> frozenset[Sym]:
    """The loop variables an expression depends on (through every index it uses)."""
    out: set[Sym] = set()
    seen: set[int] = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        for ix in expr_indices(x):
            out |= used_syms(ix)
        if isinstance(x, Op):
            stack.extend(x.args)
    return frozenset(out)


def expr_nodes(stmts: Sequence["Stmt"], in_indices: bool = False) -> list[Expr]:
    """Every expression node of the values stored and accumulated under `stmts` (loop
    bodies included), each once, operands after the node that uses them; `in_indices`:
    also the run-time values inside indices (a gather's index loads)."""
    found: list[Expr] = []
    seen: set[int] = set()

    def index(ix: Ix) -> None:
        for v in dyn_values(ix) if in_indices else ():
            expr(v)

    def expr(e: Expr) -> None:
        if id(e) in seen:
            return
        seen.add(id(e))
        found.append(e)
        for ix in expr_indices(e):
            index(ix)
        if isinstance(e, Op):
            for a in e.args:
                expr(a)

    def stmt(s: Stmt) -> None:
        if isinstance(s, Loop):
            for b in s.body:
                stmt(b)
        elif isinstance(s, Store):
            index(s.index)
            expr(s.value)
        elif isinstance(s, AccUpdate):
            expr(s.value)

    for s in stmts:
        stmt(s)
    return found


def accumulators_written(stmts: Sequence["Stmt"]) -> set[int]:
    """Accumulators initialized or updated anywhere under `stmts`."""
    found: set[int] = set()
    for s in stmts:
        if isinstance(s, Loop):
            found |= accumulators_written(s.body)
        elif isinstance(s, (AccInit, AccUpdate)):
            found.add(s.acc)
    return found


def _stores(stmts: Sequence["Stmt"]) -> list["Store"]:
    return [t for s in stmts for t in (_stores(s.body) if isinstance(s, Loop) else [s])
            if isinstance(t, Store)]


def kernel_indices(kernel: Kernel) -> list[Ix]:
    """Every index expression of a kernel (loads, stores, iota values, predicates, and
    those of the run-time values inside them)."""
    return [s.index for s in _stores(kernel.body)] + [
        ix for e in expr_nodes(kernel.body, in_indices=True) for ix in expr_indices(e)]


# ---------------------------------------------------------------------------- printing


class _Printer:
    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.lines: list[str] = []
        self.names: dict[int, str] = {}

    def expr(self, e: Expr, pad: str) -> str:
        if isinstance(e, Const):
            return f"{e.value}:{e.dtype.short}"
        if isinstance(e, AccRead):
            return f"acc{e.acc}"
        if id(e) in self.names:
            return self.names[id(e)]
        for ix in expr_indices(e):
            self.dyn_values(ix, pad)
        if isinstance(e, Load):
            text = f"load {self.kernel.params[e.buf].name}[{e.index}]"
        elif isinstance(e, IndexValue):
            text = f"index {e.index}"
        elif isinstance(e, IndexPred):
            text = "in_bounds " + " && ".join(f"({c})" for c in e.conds)
        else:
            text = f"{e.op} " + " ".join(self.expr(a, pad) for a in e.args)
        name = f"t{len(self.names)}"
        self.names[id(e)] = name
        self.lines.append(f"{pad}{name}:{e.dtype.short} = {text}")
        return name

    def dyn_values(self, ix: Ix, pad: str) -> None:
        """Print the run-time values an index uses before the line that uses it."""
        for v in dyn_values(ix):
            self.expr(v, pad)

    def stmt(self, s: Stmt, pad: str) -> None:
        if isinstance(s, Loop):
            self.lines.append(f"{pad}for {s.sym.name} in 0..{s.sym.extent}:")
            scope = dict(self.names)
            for b in s.body:
                self.stmt(b, pad + "  ")
            self.names = scope
        elif isinstance(s, Store):
            value = self.expr(s.value, pad)
            self.dyn_values(s.index, pad)
            self.lines.append(f"{pad}{self.kernel.params[s.buf].name}[{s.index}] = {value}")
        elif isinstance(s, AccInit):
            self.lines.append(f"{pad}acc{s.acc}:{s.dtype.short} = identity of {s.op}")
        else:
            value = self.expr(s.value, pad)
            self.lines.append(f"{pad}acc{s.acc} = {s.op} acc{s.acc} {value}")


def pp_kernel(kernel: Kernel) -> str:
    """Print a kernel: its signature, then one line per loop, value and store."""
    params = ", ".join(f"{'out' if p.written else 'in'} {p.name}:{p.dtype.short}"
                       f"[{','.join(str(d) for d in p.shape)}]" for p in kernel.params)
    printer = _Printer(kernel)
    printer.lines.append(f"kernel {kernel.name}({params}):")
    for s in kernel.body:
        printer.stmt(s, "  ")
    return "\n".join(printer.lines)


_UNKEYED: dict[type, tuple[str, ...]] = {Kernel: ("name",), Param: ("name", "shape")}
_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _keyed_fields(cls: type) -> tuple[str, ...] | None:
    """The fields of dataclass `cls` a fingerprint serializes (None: not a dataclass),
    looked up once per class."""
    if cls not in _FIELDS:
        _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls)
                             if f.name not in _UNKEYED.get(cls, ())
                             ) if dataclasses.is_dataclass(cls) else None
    return _FIELDS[cls]


def innermost_extents(stmts: Sequence[Stmt]) -> list[int]:
    """The extent of every innermost loop under `stmts` (0 for statements outside loops)."""
    found = [0]
    for s in stmts:
        if isinstance(s, Loop):
            inner = [t for t in s.body if isinstance(t, Loop)]
            found += innermost_extents(s.body) if inner else [s.sym.extent]
    return found


def kernel_fingerprint(kernel: Kernel) -> str:
    """Every field of the kernel but the names (its own and its parameters') and its
    parameters' shapes, serialized (a node shared in the expression DAG once, then by
    number), so two kernels have equal fingerprints exactly when they are the same loop
    nest: a cache key that needs no rendering. A shape changes the machine code only
    through the loops' extents and the indices, which are part of it; so one code serves
    e.g. Adam's update of weight matrices of equal size, or a 600x500 and a 500x600 one (a
    flat loop over a thread's chunk). Generic over the
    dataclasses' fields, so a field added later is part of it too."""
    numbers: dict[int, int] = {}

    def node(x: Any) -> str:
        if isinstance(x, (tuple, list)):
            return "(" + ",".join(node(i) for i in x) + ")"
        names = _keyed_fields(type(x))
        if names is None:
            if isinstance(x, frozenset):
                return "{" + ",".join(sorted(node(i) for i in x)) + "}"
            return f"{type(x).__name__}:{x!r}"
        if id(x) in numbers:
            return f"#{numbers[id(x)]}"
        numbers[id(x)] = len(numbers)
        fields = ",".join(f"{name}={node(getattr(x, name))}" for name in names)
        return f"{type(x).__name__}({fields})"
    return node(kernel)


# ---------------------------------------------------------------------------- checking


class KernelIRError(ValueError):
    """A kernel is malformed: an unbound loop variable, an out-of-bounds access, ..."""


def _check_index(kernel: Kernel, ix: Ix, bound: set[Sym], size: int | None, what: str
                 ) -> None:
    for d in dyn_atoms(ix):
        if not d.value.dtype.is_int:
            raise KernelIRError(f"{kernel.name}: run-time index {d} of {what} is "
                                f"{d.value.dtype.name}, not an integer")
        if d.syms != expr_syms(d.value):
            raise KernelIRError(f"{kernel.name}: run-time index {d} of {what} depends on "
                                f"{set(expr_syms(d.value))}, not on {set(d.syms)}")
    free = used_syms(ix) - bound
    if free:
        raise KernelIRError(f"{kernel.name}: {what} uses unbound loop variables {free}")
    if size is not None and size > 0:
        lo, hi = ix_range(ix)
        if lo < 0 or hi >= size:
            raise KernelIRError(f"{kernel.name}: {what} index {ix} spans [{lo}, {hi}], "
                                f"outside the buffer of {size} elements")


class _Checker:
    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.seen: set[int] = set()
        self.accs: set[int] = set()

    def size(self, buf: int) -> int:
        if not 0 <= buf < len(self.kernel.params):
            raise KernelIRError(f"{self.kernel.name}: no buffer parameter {buf}")
        shape = self.kernel.params[buf].shape
        n = 1
        for d in shape:
            n *= d
        return n

    def expr(self, e: Expr, bound: set[Sym]) -> None:
        if id(e) in self.seen and not isinstance(e, AccRead):
            return
        self.seen.add(id(e))
        for ix in expr_indices(e):
            self.dyn_values(ix, bound)
        if isinstance(e, Load):
            name = self.kernel.params[e.buf].name if e.buf < len(self.kernel.params) else "?"
            _check_index(self.kernel, e.index, bound, self.size(e.buf), f"load of {name}")
        elif isinstance(e, IndexValue):
            _check_index(self.kernel, e.index, bound, None, "index value")
        elif isinstance(e, IndexPred):
            for c in e.conds:
                _check_index(self.kernel, c.index, bound, None, "predicate")
        elif isinstance(e, AccRead) and e.acc not in self.accs:
            raise KernelIRError(f"{self.kernel.name}: acc{e.acc} read before it is set")
        elif isinstance(e, Op):
            for a in e.args:
                self.expr(a, bound)

    def dyn_values(self, ix: Ix, bound: set[Sym]) -> None:
        """Check the run-time values inside an index (their loads in particular)."""
        for v in dyn_values(ix):
            self.expr(v, bound)

    def stmt(self, s: Stmt, bound: set[Sym]) -> None:
        if isinstance(s, Loop):
            for b in s.body:
                self.stmt(b, bound | {s.sym})
        elif isinstance(s, Store):
            if not self.kernel.params[s.buf].written:
                raise KernelIRError(f"{self.kernel.name}: store to input buffer {s.buf}")
            self.dyn_values(s.index, bound)
            _check_index(self.kernel, s.index, bound, self.size(s.buf), "store")
            self.expr(s.value, bound)
        elif isinstance(s, AccInit):
            self.accs.add(s.acc)
        else:
            if s.acc not in self.accs:
                raise KernelIRError(f"{self.kernel.name}: acc{s.acc} updated before init")
            self.expr(s.value, bound)


def check_kernel(kernel: Kernel) -> None:
    """Raise KernelIRError unless every loop variable is bound where it is used, every load
    and store is provably inside its buffer, and accumulators are set before use."""
    checker = _Checker(kernel)
    for s in kernel.body:
        checker.stmt(s, set())
