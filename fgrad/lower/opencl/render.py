"""Render kernel IR to OpenCL C: one `__kernel` per kernel, with its launch geometry.

In: a `Kernel` (kernel/ir.py) and the largest work-group to use. Out: `RenderedKernel`
(source text and a 1-D `Launch`); `render_kernel(kernel)` gives the source alone.

Three forms, read off the loop nest that kernel/build.py produces:
- elementwise (a perfect loop nest around stores): one work-item per point of the
  collapsed nest; the global size is rounded up to whole work-groups and every work-item
  past the end returns at once;
- register reduction (kept loops; acc = identity; reduced loops: acc op= x; stores of
  acc): work-groups of `lanes x rows` work-items, one row per kept output; each lane
  accumulates a strided part of the reduced loop, then the lanes combine their partial
  results by a tree in __local memory. Lanes run along the reduced index when it is the
  contiguous one in memory ("row" mode), else rows run along the contiguous kept index
  ("column" mode), so neighbouring work-items read neighbouring elements either way;
- row-fused kernels (phases of loops over each row): one work-group per row, and scatter
  kernels (a copy, then updates through a run-time row index): one work-item per column,
  see opencl/render_rows.py;
- anything else: one work-item runs the nest as written (correct, not parallel).
Values are `const` temporaries named like the kernel IR printer's; float16 is stored as
`half` (vload_half/vstore_half) and bfloat16 as `ushort` (its float's upper bits), both
computed in float; float64 enables cl_khr_fp64.
"""
from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from fgrad.core.dtypes import DType, dtypes
from fgrad.lower.kernel.index import Clamp, Div, Dyn, Ix, Mod, Sym, ix_range
from fgrad.lower.kernel.build import identity
from fgrad.lower.kernel.ir import (
    AccInit,
    AccRead,
    AccUpdate,
    Const,
    Expr,
    IndexPred,
    IndexValue,
    Kernel,
    Load,
    Loop,
    Op,
    Stmt,
    Store,
    kernel_indices,
)
from fgrad.lower.opencl.ops import (
    OPS,
    const,
    helpers_for,
    index_cast,
    mem_type,
    reg_type,
    render_op,
    rounded,
)

DEFAULT_GROUP = 256
INT_INDEX_LIMIT = 2 ** 31 - 2 ** 20  # int indices when every index stays below this


@dataclass(frozen=True)
class Launch:
    """An NDRange: `global_size` work-items in groups of `local_size` (one int per axis)."""

    global_size: tuple[int, ...]
    local_size: tuple[int, ...]

    @property
    def empty(self) -> bool:
        """Whether there is nothing to launch."""
        return 0 in self.global_size


@dataclass(frozen=True)
class RenderedKernel:
    """A kernel's OpenCL C function (`program_source` adds pragmas and helpers), its
    launch, and which form it took."""

    name: str
    source: str
    launch: Launch
    form: str


# ---------------------------------------------------------------------------- structure


def _perfect_nest(body: tuple[Stmt, ...]) -> tuple[list[Sym], tuple[Stmt, ...]]:
    syms = []
    while len(body) == 1 and isinstance(body[0], Loop):
        syms.append(body[0].sym)
        body = body[0].body
    return syms, body


@dataclass(frozen=True)
class _Reduce:
    kept: list[Sym]
    inits: tuple[AccInit, ...]
    reduced: list[Sym]
    body: tuple[Stmt, ...]    # inside the reduced loops: side stores and acc updates
    finals: tuple[Stmt, ...]  # after them: the stores of the accumulators


def _as_reduce(kernel: Kernel) -> _Reduce | None:
    kept, inner = _perfect_nest(kernel.body)
    n_init = next((i for i, s in enumerate(inner) if not isinstance(s, AccInit)), len(inner))
    if n_init == 0:
        return None
    rest = inner[n_init:]
    if rest and isinstance(rest[0], Loop):
        reduced, body = _perfect_nest(rest[:1])
        finals = rest[1:]
    else:
        last = max((i for i, s in enumerate(rest) if isinstance(s, AccUpdate)), default=-1)
        reduced, body, finals = [], rest[:last + 1], rest[last + 1:]
    if not all(isinstance(s, (Store, AccUpdate)) for s in body):
        return None
    if not all(isinstance(s, Store) for s in finals):
        return None
    inits = cast(tuple[AccInit, ...], inner[:n_init])  # the leading AccInits, counted above
    return _Reduce(kept, inits, reduced, body, finals)


def _extent(syms: list[Sym]) -> int:
    n = 1
    for s in syms:
        n *= s.extent
    return n


def _pow2ceil(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


# ---------------------------------------------------------------------------- index type


def _bound(ix: Ix) -> int:
    """An upper bound of |ix| and of every sub-expression of it."""
    total, inner = abs(ix.const), 0
    for atom, c in ix.terms:
        if isinstance(atom, Sym):
            v = atom.extent
        elif isinstance(atom, Dyn):
            v = atom.hi
        else:
            b = _bound(atom.arg)
            inner = max(inner, b)
            v = b // atom.d + 1 if isinstance(atom, Div) else \
                atom.d if isinstance(atom, Mod) else atom.hi
        total += abs(c) * v
    return max(total, inner)


def _all_loops(body: tuple[Stmt, ...]) -> Iterator[Sym]:
    for s in body:
        if isinstance(s, Loop):
            yield s.sym
            yield from _all_loops(s.body)


def index_type(kernel: Kernel) -> str:
    """'int' when every index, extent and buffer size of the kernel fits, else 'long'."""
    sizes = [1]
    for p in kernel.params:
        n = 1
        for d in p.shape:
            n *= d
        sizes.append(n)
    sizes += [_extent(list(_all_loops(kernel.body))) + 4 * DEFAULT_GROUP]
    sizes += [_bound(ix) for ix in kernel_indices(kernel)]
    return "int" if max(sizes) < INT_INDEX_LIMIT else "long"


def _eval_ix(ix: Ix, env: dict[Sym, int]) -> int:
    """ix at the loop point `env` (missing variables and run-time values count 0)."""
    total = ix.const
    for atom, c in ix.terms:
        if isinstance(atom, Sym):
            v = env.get(atom, 0)
        elif isinstance(atom, Dyn):
            v = 0
        else:
            x = _eval_ix(atom.arg, env)
            v = x // atom.d if isinstance(atom, Div) else x % atom.d \
                if isinstance(atom, Mod) else min(max(x, 0), atom.hi)
        total += c * v
    return total


def _unit_stride(kernel: Kernel, sym: Sym) -> bool:
    """Whether stepping `sym` by one moves some access by one element."""
    return any(abs(_eval_ix(ix, {sym: 1}) - _eval_ix(ix, {})) == 1
               for ix in kernel_indices(kernel))


# ---------------------------------------------------------------------------- writer


class _Writer:
    """Emits C lines; values and indices are memoized per block scope."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.ity = index_type(kernel)
        self.lines: list[str] = []
        self.pad = "  "
        self.values: dict[int, str] = {}
        self.indices: dict[Ix, str] = {}
        self.count = 0
        self.params = [f"g_{re.sub(r'[^0-9A-Za-z_]', '_', p.name)}" for p in kernel.params]

    def line(self, text: str) -> None:
        self.lines.append(self.pad + text)

    @contextlib.contextmanager
    def block(self, header: str) -> Iterator[None]:
        """`header {` ... `}` with its own scope of temporaries."""
        self.line(header + " {")
        saved = (self.pad, dict(self.values), dict(self.indices))
        self.pad += "  "
        yield
        self.pad, self.values, self.indices = saved
        self.line("}")

    def temp(self, ctype: str, text: str, prefix: str = "t") -> str:
        name = f"{prefix}{self.count}"
        self.count += 1
        self.line(f"const {ctype} {name} = {text};")
        return name

    def bind_flat(self, flat: str, syms: list[Sym]) -> None:
        """Declare each loop variable of a row-major nest from its flat position."""
        stride = 1
        for j in reversed(range(len(syms))):
            q = flat if stride == 1 else f"{flat} / {stride}"
            text = q if j == 0 else f"({q}) % {syms[j].extent}"
            self.line(f"const {self.ity} {syms[j].name} = {text};")
            stride *= syms[j].extent

    # ------------------------------------------------------------------ statements

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Loop):
            name, ity = s.sym.name, self.ity
            with self.block(f"for ({ity} {name} = 0; {name} < {s.sym.extent}; ++{name})"):
                for b in s.body:
                    self.stmt(b)
        elif isinstance(s, Store):
            self.store(s)
        elif isinstance(s, AccInit):
            self.line(f"acc{s.acc} = {const(s.dtype, identity(s.op, s.dtype))};")
        else:
            new = self.combine(s.op, f"acc{s.acc}", self.value(s.value), s.value.dtype)
            self.line(f"acc{s.acc} = {new};")

    def combine(self, op: str, a: str, b: str, dtype: DType) -> str:
        """op(a, b) for an accumulator: float16 accumulates in float, unrounded."""
        return OPS[op]([a, b], dtype, dtype)

    def store(self, s: Store) -> None:
        dtype = self.kernel.params[s.buf].dtype
        ptr, ix, v = self.params[s.buf], self.index(s.index), self.value(s.value)
        if dtype == dtypes.float16:
            self.line(f"vstore_half_rte({v}, {ix}, {ptr});")
        elif dtype == dtypes.bfloat16:
            self.line(f"{ptr}[{ix}] = fg_bb({v});")
        elif dtype == dtypes.bool:
            self.line(f"{ptr}[{ix}] = (uchar){v};")
        else:
            self.line(f"{ptr}[{ix}] = {v};")

    # ------------------------------------------------------------------ values

    def value(self, e: Expr) -> str:
        if isinstance(e, Const):
            return const(e.dtype, e.value)
        if isinstance(e, AccRead):
            return f"acc{e.acc}"
        if id(e) not in self.values:
            self.values[id(e)] = self.temp(reg_type(e.dtype), self.compute(e))
        return self.values[id(e)]

    def compute(self, e: Expr) -> str:
        if isinstance(e, Load):
            ptr, ix = self.params[e.buf], self.index(e.index)
            if e.dtype == dtypes.float16:
                return f"vload_half({ix}, {ptr})"
            if e.dtype == dtypes.bfloat16:
                return f"fg_bl({ptr}[{ix}])"
            return f"({ptr}[{ix}] != 0)" if e.dtype == dtypes.bool else f"{ptr}[{ix}]"
        if isinstance(e, IndexValue):
            return rounded(e.dtype, index_cast(e.dtype, self.index(e.index)))
        if isinstance(e, IndexPred):
            return " && ".join(self.condition(c.index, c.lo, c.hi, c.step) for c in e.conds)
        assert isinstance(e, Op)
        args = [self.value(a) for a in e.args]
        arg_dtype = e.args[0].dtype if e.args else e.dtype
        if e.op == "select":
            arg_dtype = e.args[1].dtype
        return render_op(e.op, args, arg_dtype, e.dtype)

    def condition(self, ix: Ix, lo: int, hi: int, step: int) -> str:
        i = self.index(ix)
        text = f"({i} >= {lo} && {i} <= {hi}"
        return text + (f" && {i} % {step} == 0)" if step > 1 else ")")

    # ------------------------------------------------------------------ indices

    def index(self, ix: Ix) -> str:
        if not ix.terms:
            return str(ix.const)
        if len(ix.terms) == 1 and ix.const == 0 and ix.terms[0][1] == 1 \
                and isinstance(ix.terms[0][0], Sym):
            return ix.terms[0][0].name
        if ix not in self.indices:
            parts = [self.atom(a) if c == 1 else f"{c} * {self.atom(a)}" for a, c in ix.terms]
            if ix.const:
                parts.append(str(ix.const))
            text = " + ".join(parts).replace("+ -", "- ")
            self.indices[ix] = self.temp(self.ity, text, "x")
        return self.indices[ix]

    def atom(self, a: Sym | Div | Mod | Clamp | Dyn) -> str:
        if isinstance(a, Sym):
            return a.name
        if isinstance(a, Dyn):
            return self.run_time_index(a)
        x = self.index(a.arg)
        nonneg = ix_range(a.arg)[0] >= 0
        if isinstance(a, Clamp):
            return f"clamp({x}, ({self.ity})0, ({self.ity}){a.hi})"
        if isinstance(a, Div):
            return f"({x} / {a.d})" if nonneg else \
                f"({x} >= 0 ? {x} / {a.d} : ({x} - {a.d - 1}) / {a.d})"
        return f"({x} % {a.d})" if nonneg else f"((({x} % {a.d}) + {a.d}) % {a.d})"

    def run_time_index(self, a: Dyn) -> str:
        """The integer value of `a` clamped into [0, a.hi] in 64 bits (unsigned values
        compare unsigned), then narrowed to the index type."""
        v = self.value(a.value)
        if a.value.dtype.is_unsigned:
            return f"(({self.ity})min((ulong){v}, (ulong){a.hi}))"
        return f"(({self.ity})clamp((long){v}, 0L, (long){a.hi}))"


# ---------------------------------------------------------------------------- forms


def _signature(w: _Writer, attribute: str = "") -> str:
    params = []
    for p, name in zip(w.kernel.params, w.params, strict=True):
        qual = "" if p.written else "const "
        params.append(f"__global {qual}{mem_type(p.dtype)}* restrict {name}")
    return f"__kernel {attribute}void {w.kernel.name}({', '.join(params)})"


def _elementwise(w: _Writer, syms: list[Sym], stores: tuple[Stmt, ...], group: int
                 ) -> Launch:
    n = _extent(syms)
    w.line(f"const {w.ity} gid = get_global_id(0);")
    w.line(f"if (gid >= {n}) return;")
    w.bind_flat("gid", syms)
    for s in stores:
        w.stmt(s)
    local = min(group, n)
    return Launch((-(-n // local) * local if n else 0,), (max(local, 1),))


def _declare_accs(w: _Writer, inits: list[AccInit]) -> None:
    for s in inits:
        w.line(f"{reg_type(s.dtype)} acc{s.acc} = {const(s.dtype, identity(s.op, s.dtype))};")


def _tree(w: _Writer, red: _Reduce, lanes: int, partner: int) -> None:
    """Combine the lanes' partial results in __local memory, halving each step."""
    for s in red.inits:
        w.line(f"l{s.acc}[lid] = acc{s.acc};")
    step = lanes // 2
    while step:
        w.line("barrier(CLK_LOCAL_MEM_FENCE);")
        with w.block(f"if (lane < {step})"):
            for s in red.inits:
                ty = reg_type(s.dtype)
                a = w.temp(ty, f"l{s.acc}[lid]", "a")
                b = w.temp(ty, f"l{s.acc}[lid + {step * partner}]", "b")
                w.line(f"l{s.acc}[lid] = {w.combine(s.op, a, b, s.dtype)};")
        step //= 2
    w.line("barrier(CLK_LOCAL_MEM_FENCE);")


def _reduce_shape(kernel: Kernel, red: _Reduce, group: int) -> tuple[int, int, bool]:
    """(lanes, rows, row mode) of a reduction's work-groups; both powers of two."""
    kept, total = _extent(red.kept), _extent(red.reduced)
    row = not red.kept or (bool(red.reduced) and _unit_stride(kernel, red.reduced[-1])) \
        or not _unit_stride(kernel, red.kept[-1])
    if row:
        lanes = min(_pow2ceil(total), group)
        rows = min(group // lanes, _pow2ceil(kept))
    else:
        rows = min(_pow2ceil(kept), 64, group)
        lanes = min(_pow2ceil(total), group // rows)
    return lanes, rows, row


def _reduction(w: _Writer, red: _Reduce, group: int) -> Launch:
    lanes, rows, row = _reduce_shape(w.kernel, red, group)
    kept, total, ity = _extent(red.kept), _extent(red.reduced), w.ity
    if lanes > 1:
        for s in red.inits:
            local_ty = "uchar" if s.dtype == dtypes.bool else reg_type(s.dtype)
            w.line(f"__local {local_ty} l{s.acc}[{lanes * rows}];")
    w.line("const int lid = get_local_id(0);")
    lane, which = ("lid % {0}", "lid / {0}") if row else ("lid / {1}", "lid % {1}")
    w.line(f"const int lane = {lane.format(lanes, rows)};")
    w.line(f"const {ity} kk = ({ity})get_group_id(0) * {rows} + {which.format(lanes, rows)};")
    w.bind_flat("kk", red.kept)
    _declare_accs(w, list(red.inits))
    loop = f"for ({ity} rr = lane; rr < {total}; rr += {lanes})"
    with w.block(f"if (kk < {kept})"), w.block(loop):
        w.bind_flat("rr", red.reduced)
        for stmt in red.body:
            w.stmt(stmt)
    final = "lane == 0 && kk < " + str(kept)
    if lanes > 1:
        _tree(w, red, lanes, 1 if row else rows)
    with w.block(f"if ({final})"):
        if lanes > 1:
            for s in red.inits:
                w.line(f"acc{s.acc} = l{s.acc}[lid];")
        for stmt in red.finals:
            w.stmt(stmt)
    groups = -(-kept // rows)
    return Launch((groups * lanes * rows,), (lanes * rows,))


def _serial(w: _Writer) -> Launch:
    w.line("if (get_global_id(0) != 0) return;")
    inits = {}
    for s in _walk(w.kernel.body):
        if isinstance(s, AccInit):
            inits[s.acc] = s
    _declare_accs(w, list(inits.values()))
    for s in w.kernel.body:
        w.stmt(s)
    return Launch((1,), (1,))


def _walk(body: tuple[Stmt, ...]) -> Iterator[Stmt]:
    for s in body:
        yield s
        if isinstance(s, Loop):
            yield from _walk(s.body)


# ---------------------------------------------------------------------------- entry


def lower_kernel(kernel: Kernel, group: int = DEFAULT_GROUP) -> RenderedKernel:
    """The OpenCL C function and launch of `kernel`; work-groups of at most `group` items."""
    group = max(1, 1 << (group.bit_length() - 1))
    w = _Writer(kernel)
    syms, inner = _perfect_nest(kernel.body)
    red = None if all(isinstance(s, Store) for s in inner) else _as_reduce(kernel)
    if red is None and all(isinstance(s, Store) for s in inner):
        launch, form = _elementwise(w, syms, inner, group), "elementwise"
    elif red is not None:
        launch, form = _reduction(w, red, group), "reduce"
    else:
        from fgrad.lower.opencl.render_rows import (  # they build on this module
            as_columns,
            as_rows,
            render_columns,
            render_rows,
        )
        rows, cols = as_rows(kernel), as_columns(kernel)
        if rows is not None:
            launch, form = render_rows(w, rows, group), "rows"
        elif cols is not None:
            launch, form = render_columns(w, cols, group), "columns"
        else:
            launch, form = _serial(w), "serial"
    attribute = "" if form in ("elementwise", "serial", "columns") else \
        f"__attribute__((reqd_work_group_size({launch.local_size[0]}, 1, 1))) "
    text = "\n".join([_signature(w, attribute) + " {"] + w.lines + ["}"])
    return RenderedKernel(kernel.name, text, launch, form)


def program_source(kernels: list[RenderedKernel]) -> str:
    """One OpenCL program holding `kernels`: pragmas, the helpers they call, the kernels."""
    body = "\n\n".join(k.source for k in kernels)
    head = ["#pragma OPENCL FP_CONTRACT OFF"]
    if re.search(r"\bdouble\b", body):
        head.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
    helpers = helpers_for(body)
    return "\n".join(head + ([helpers] if helpers else []) + [body, ""])


def render_kernel(kernel: Kernel, group: int = DEFAULT_GROUP) -> str:
    """The OpenCL C program of `kernel` alone (see `lower_kernel` for its launch)."""
    return program_source([lower_kernel(kernel, group)])
