"""Native linalg for the llvm backend: generated code calls SciPy's LAPACK (and BLAS trsm).

In: a library call of a Program whose equation is cholesky, triangular_solve, lu, qr or svd
on float32/float64 (fgrad/core/prims/linalg.py has the output conventions).
Out: an internal LLVM function `void name(outs..., ins...)` (outputs first, then inputs,
one pointer per buffer) that loops over the batch entries and calls the routines once per
entry, with the same results as the primitive's NumPy impl (built by `LapackBuilder`, below;
transposing copies go tile by tile).

LAPACK is column-major and overwrites its operand, so each routine works on a copy, and a
row-major matrix read column-major is its transpose:
- cholesky: ?potrf('U') on the symmetric part read column-major leaves U with S = U^T U;
  read row-major that is the lower factor L = U^T. The other triangle is zeroed; a matrix
  that is not positive definite (info != 0) becomes NaN.
- triangular_solve, lu, qr and svd: the operands are transposed into column-major memory
  and ?trsm (on the left), ?getrf, ?geqrf then ?orgqr, or ?gesdd run exactly as SciPy and
  NumPy run them (same inf/NaN of a singular solve, NumPy's signs of Q and of the singular
  vectors up to OpenBLAS build differences); the results are transposed back. For svd,
  non-finite input (LAPACK may not return on it) and no convergence give NaN outputs.
Workspace sizes are fixed at compile time (shapes are static: the optimal sizes SciPy's
workspace queries report, ORGQR_BLOCK for ?orgqr); scratch is malloc'ed once per call and
freed at its end (where malloc fails, the function frees what it took and returns before
any routine runs; the call raises MemoryError).

The builder, `LapackBuilder`: one library function with its loops, scratch memory, by-pointer
LAPACK arguments and element moves.
Given an `ir.Module`, the function's name and its linalg equation, it holds
`void name(outs..., ins...)` (one pointer per buffer: the equation's outputs, then its
inputs; float operands as float/double, int32 as i32); its methods emit loops (`loop`, tiled
`for_tiles`), per-batch-entry pointers (`per_batch`), constant arguments passed by pointer
(`arg`), malloc'ed scratch freed by `finish`, and copies, transposes and NaN fills of
matrices. Routines are SciPy's Cython-exported BLAS/LAPACK (Fortran convention: every
argument by pointer, column-major), registered by llvm/blas.py; malloc and free are the
process's libc ones, registered as `fgrad_malloc` and `fgrad_free`. `library_symbols` says
what any library call (LAPACK, OpenBLAS's gemm) resolves from the process, and
`register_named_symbols` registers those names (object code from a cache is linked
without rendering, so the runtime registers them for every call).
"""
from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from typing import Any

import llvmlite.binding as llvm
from llvmlite import ir

from fgrad.core.dtypes import DType, dtypes
from fgrad.core.ir import Eqn
from fgrad.lower.llvm.blas import register_routine, register_symbols, single_threaded_blas
from fgrad.lower.llvm.gemm.native import uses_native_gemm
from fgrad.lower.llvm.gemm.scratch import bail_if_null
from fgrad.lower.schedule.partition import SEQUENCE_OPS

I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
TILE = 32  # transposing copies move TILE x TILE blocks
FLOATS = {dtypes.float32: (ir.FloatType(), "s"), dtypes.float64: (ir.DoubleType(), "d")}
_libc_registered: list[bool] = []


def _register_libc() -> None:
    """Make the process's malloc and free resolvable as `fgrad_malloc` / `fgrad_free`."""
    if _libc_registered:
        return
    libc = ctypes.CDLL(None)
    for name in ("malloc", "free"):
        address = ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
        if not address:
            raise RuntimeError(f"fgrad llvm backend: libc's {name} is not in this process")
        llvm.add_symbol(f"fgrad_{name}", address)
    _libc_registered.append(True)


def _i64(v: ir.Value | int) -> ir.Value:
    return ir.Constant(I64, v) if isinstance(v, int) else v


class _Loop:
    """`with _Loop(builder, fn, start, stop, name) as i:` emits `for i in start..stop` (i64)."""

    def __init__(self, b: ir.IRBuilder, fn: ir.Function, start: ir.Value | int,
                 stop: ir.Value | int, name: str):
        self.b, self.fn, self.start, self.stop, self.name = b, fn, start, stop, name

    def __enter__(self) -> ir.Value:
        b = self.b
        before = b.block
        self.head = self.fn.append_basic_block(f"{self.name}.head")
        body = self.fn.append_basic_block(f"{self.name}.body")
        done = self.fn.append_basic_block(f"{self.name}.done")
        b.branch(self.head)
        b.position_at_end(self.head)
        self.i = b.phi(I64, name=self.name)
        self.i.add_incoming(_i64(self.start), before)
        b.cbranch(b.icmp_signed("<", self.i, _i64(self.stop)), body, done)
        b.position_at_end(body)
        self.done = done
        return self.i

    def __exit__(self, *exc: object) -> None:
        b = self.b
        self.i.add_incoming(b.add(self.i, _i64(1), flags=("nsw",)), b.block)
        b.branch(self.head)
        b.position_at_end(self.done)


class LapackBuilder:
    """Builds one internal library function (module docstring)."""

    def __init__(self, module: ir.Module, name: str, eqn: Eqn):
        self.module, self.eqn = module, eqn
        self.ft, self.prefix = FLOATS[eqn.inputs[0].aval.dtype]
        params = [*eqn.outvars, *eqn.inputs]
        types = [self._pointee(v.aval.dtype).as_pointer() for v in params]
        self.fn = ir.Function(module, ir.FunctionType(ir.VoidType(), types), name=name)
        self.fn.linkage = "internal"
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.batch = eqn.inputs[0].aval.shape[:-2]
        self.sizes = [math.prod(v.aval.shape[len(self.batch):]) for v in params]
        self._slots: dict[tuple[str, object], ir.Value] = {}
        self._scratch: list[ir.Value] = []

    def _pointee(self, dtype: DType) -> ir.Type:
        return I32 if dtype == dtypes.int32 else self.ft

    # ------------------------------------------------------------------ declarations

    def routine(self, base: str, spec: str, library: str = "lapack") -> ir.Function:
        """Declare `fgrad_<s|d><base>` with arguments by `spec`: c = char*, i = int*,
        f = float* (of this dtype), e.g. potrf: "cifii"."""
        from fgrad.lower.llvm.lapack import ROUTINES
        assert (base, library) in ROUTINES[self.eqn.primitive.name], \
            f"{base} is missing from lapack.ROUTINES[{self.eqn.primitive.name!r}]"
        symbol = register_routine(self.prefix + base, library)
        if symbol in self.module.globals:
            return self.module.globals[symbol]
        kinds = {"c": I8.as_pointer(), "i": I32.as_pointer(), "f": self.ft.as_pointer()}
        signature = ir.FunctionType(ir.VoidType(), [kinds[c] for c in spec])
        return ir.Function(self.module, signature, name=symbol)

    def _libc(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        _register_libc()
        symbol = f"fgrad_{name}"
        if symbol in self.module.globals:
            return self.module.globals[symbol]
        return ir.Function(self.module, ir.FunctionType(ret, args), name=symbol)

    # ------------------------------------------------------------------ memory

    def local(self, ty: ir.Type) -> ir.Value:
        """A fresh stack slot, allocated at the start of the entry block."""
        here = self.b.block
        self.b.position_at_start(self.fn.entry_basic_block)
        slot = self.b.alloca(ty)
        self.b.position_at_end(here)
        return slot

    def arg(self, value: str | float) -> ir.Value:
        """A pointer to the constant `value`: a str is a char, an int an int, a float one of
        this dtype (LAPACK takes every argument by pointer)."""
        ty = I8 if isinstance(value, str) else I32 if isinstance(value, int) else self.ft
        key = (str(ty), value)
        if key not in self._slots:
            here = self.b.block
            self.b.position_at_start(self.fn.entry_basic_block)
            slot = self.b.alloca(ty)
            self.b.store(ir.Constant(ty, ord(value) if isinstance(value, str) else value), slot)
            self.b.position_at_end(here)
            self._slots[key] = slot
        return self._slots[key]

    def scratch(self, ty: ir.Type, count: int) -> ir.Value:
        """`count` elements of `ty` from malloc (freed by `finish`); call before any loop.
        Where malloc returns NULL, the function frees the scratch it took so far, records
        the failure (gemm/scratch.py: the call raises MemoryError) and returns."""
        width = 4 if ty in (I32, ir.FloatType()) else 8
        malloc = self._libc("malloc", I8.as_pointer(), [I64])
        nbytes = _i64(max(1, count) * width)
        raw = self.b.call(malloc, [nbytes])
        free = self._libc("free", ir.VoidType(), [I8.as_pointer()])
        bail_if_null(self.b, [raw], free, self.eqn.primitive.name, nbytes, self._scratch)
        self._scratch.append(raw)
        return self.b.bitcast(raw, ty.as_pointer())

    def finish(self) -> ir.Function:
        """Free the scratch memory and return."""
        free = self._libc("free", ir.VoidType(), [I8.as_pointer()])
        for raw in self._scratch:
            self.b.call(free, [raw])
        self.b.ret_void()
        return self.fn

    # ------------------------------------------------------------------ control

    def loop(self, stop: ir.Value | int, start: ir.Value | int = 0, name: str = "i") -> _Loop:
        """`with builder.loop(n) as i:` a for loop over [start, stop)."""
        return _Loop(self.b, self.fn, start, stop, name)

    def per_batch(self, body: Callable[..., None]) -> None:
        """Emit `body(*pointers)` once per batch entry: each parameter (outputs, then inputs)
        offset to that entry's matrix."""
        n_batch = math.prod(self.batch)

        def at(i: ir.Value) -> list[ir.Value]:
            return [self.b.gep(arg, [self.b.mul(i, _i64(size))], inbounds=True)
                    for arg, size in zip(self.fn.args, self.sizes, strict=True)]
        if n_batch == 1:
            body(*at(_i64(0)))
        elif n_batch > 1:
            with self.loop(n_batch, name="batch") as i:
                body(*at(i))

    # ------------------------------------------------------------------ elements

    def lin(self, i: ir.Value | int, stride: int, j: ir.Value | int) -> ir.Value:
        """The index i * stride + j."""
        return self.b.add(self.b.mul(_i64(i), _i64(stride)), _i64(j))

    def load(self, ptr: ir.Value, index: ir.Value | int) -> ir.Value:
        """ptr[index]."""
        return self.b.load(self.b.gep(ptr, [_i64(index)], inbounds=True))

    def store(self, ptr: ir.Value, index: ir.Value | int, value: ir.Value) -> None:
        """ptr[index] = value."""
        self.b.store(value, self.b.gep(ptr, [_i64(index)], inbounds=True))

    def const(self, value: float) -> ir.Constant:
        """A constant of this dtype."""
        return ir.Constant(self.ft, value)

    def copy(self, dst: ir.Value, src: ir.Value, count: int) -> None:
        """dst[0:count] = src[0:count]."""
        with self.loop(count) as i:
            self.store(dst, i, self.load(src, i))

    def for_tiles(self, rows: int, cols: int, body: Callable[[ir.Value, ir.Value], None]
                  ) -> None:
        """Emit `body(i, j)` for every (i, j) of a rows x cols matrix, tile by tile (TILE x
        TILE), so that a transposing copy reads and writes within cache."""
        if rows <= TILE and cols <= TILE:
            with self.loop(rows) as i, self.loop(cols, name="j") as j:
                body(i, j)
            return
        tile = _i64(TILE)
        with self.loop(-(-rows // TILE), name="ti") as ti, \
                self.loop(-(-cols // TILE), name="tj") as tj:
            i0, j0 = self.b.mul(ti, tile), self.b.mul(tj, tile)
            with self.loop(self._tile_end(i0, rows), i0) as i, \
                    self.loop(self._tile_end(j0, cols), j0, "j") as j:
                body(i, j)

    def _tile_end(self, start: ir.Value, extent: int) -> ir.Value:
        """min(start + TILE, extent)."""
        end = self.b.add(start, _i64(TILE))
        return self.b.select(self.b.icmp_signed("<", end, _i64(extent)), end, _i64(extent))

    def transpose(self, dst: ir.Value, src: ir.Value, rows: int, cols: int,
                  finite: bool = False) -> ir.Value | None:
        """dst (column-major, leading dimension rows) = src (row-major rows x cols). With
        `finite`, returns an i1 that says whether every element was finite."""
        acc = self.local(self.ft) if finite else None
        if acc is not None:
            self.b.store(self.const(0.0), acc)

        def move(i: ir.Value, j: ir.Value) -> None:
            x = self.load(src, self.lin(i, cols, j))
            self.store(dst, self.lin(j, rows, i), x)
            if acc is not None:  # x - x is 0 unless x is inf or NaN
                self.b.store(self.b.fadd(self.b.load(acc), self.b.fsub(x, x)), acc)
        self.for_tiles(rows, cols, move)
        if acc is None:
            return None
        return self.b.fcmp_ordered("==", self.b.load(acc), self.const(0.0))

    def from_column_major(self, dst: ir.Value, src: ir.Value, rows: int, cols: int) -> None:
        """dst (row-major rows x cols) = src (column-major, leading dimension rows)."""
        def move(i: ir.Value, j: ir.Value) -> None:
            self.store(dst, self.lin(i, cols, j), self.load(src, self.lin(j, rows, i)))
        self.for_tiles(rows, cols, move)

    def fill(self, ptr: ir.Value, count: int, value: float) -> None:
        """ptr[0:count] = value."""
        with self.loop(count) as i:
            self.store(ptr, i, self.const(value))

    def identity(self, ptr: ir.Value, n: int) -> None:
        """The n x n identity matrix at ptr."""
        with self.loop(n) as i, self.loop(n, name="j") as j:
            diagonal = self.b.icmp_signed("==", i, j)
            self.store(ptr, self.lin(i, n, j),
                       self.b.select(diagonal, self.const(1.0), self.const(0.0)))

    def nan_if(self, failed: ir.Value, outputs: list[tuple[ir.Value, int]]) -> None:
        """When `failed` (i1) holds, fill each (pointer, count) with NaN."""
        with self.b.if_then(failed):
            for ptr, count in outputs:
                self.fill(ptr, count, math.nan)

    def failed(self, info: ir.Value) -> ir.Value:
        """i1: the LAPACK info slot holds non-zero."""
        return self.b.icmp_signed("!=", self.b.load(info), ir.Constant(I32, 0))


ORGQR_BLOCK = 64  # ?orgqr's workspace: columns x block size (LAPACK's documented optimum)


def _cholesky(g: LapackBuilder) -> None:
    n = g.eqn.inputs[0].aval.shape[-1]
    potrf = g.routine("potrf", "cifii")
    info = g.local(I32)
    b = g.b

    def body(out: ir.Value, x: ir.Value) -> None:
        def symmetric_part(i: ir.Value, j: ir.Value) -> None:
            ij = g.lin(i, n, j)
            total = b.fadd(g.load(x, ij), g.load(x, g.lin(j, n, i)))
            g.store(out, ij, b.fmul(total, g.const(0.5)))
        g.for_tiles(n, n, symmetric_part)
        b.call(potrf, [g.arg("U"), g.arg(n), out, g.arg(max(1, n)), info])
        with g.loop(n) as i, g.loop(n, b.add(i, ir.Constant(I64, 1)), "j") as j:
            g.store(out, g.lin(i, n, j), g.const(0.0))
        g.nan_if(g.failed(info), [(out, n * n)])

    if n:
        g.per_batch(body)


def _triangular_solve(g: LapackBuilder) -> None:
    p = g.eqn.params
    n, k = g.eqn.inputs[1].aval.shape[-2:]
    if not n * k:
        return
    trsm = g.routine("trsm", "cccciiffifi", library="blas")
    flags = ["L", "L" if p["lower"] else "U", "T" if p["transpose_a"] else "N",
             "U" if p["unit_diagonal"] else "N"]
    a_col, x_col = g.scratch(g.ft, n * n), g.scratch(g.ft, n * k)

    def body(out: ir.Value, a: ir.Value, rhs: ir.Value) -> None:
        g.transpose(a_col, a, n, n)
        g.transpose(x_col, rhs, n, k)
        g.b.call(trsm, [g.arg(c) for c in flags] + [
            g.arg(n), g.arg(k), g.arg(1.0), a_col, g.arg(n), x_col, g.arg(n)])
        g.from_column_major(out, x_col, n, k)

    g.per_batch(body)


def _lu(g: LapackBuilder) -> None:
    n = g.eqn.inputs[0].aval.shape[-1]
    getrf = g.routine("getrf", "iifiii")
    info = g.local(I32)
    a = g.scratch(g.ft, n * n)
    b = g.b

    def body(lu: ir.Value, pivots: ir.Value, perm: ir.Value, x: ir.Value) -> None:
        g.transpose(a, x, n, n)
        b.call(getrf, [g.arg(n), g.arg(n), a, g.arg(n), pivots, info])
        g.from_column_major(lu, a, n, n)
        with g.loop(n) as i:
            row = b.sub(g.load(pivots, i), ir.Constant(I32, 1))
            g.store(pivots, i, _clamp(b, row, n - 1))
            g.store(perm, i, b.trunc(i, I32))
        with g.loop(n) as i:
            j = b.sext(g.load(pivots, i), I64)
            here, there = g.load(perm, i), g.load(perm, j)
            g.store(perm, i, there)
            g.store(perm, j, here)

    if n:
        g.per_batch(body)


def _clamp(b: ir.IRBuilder, v: ir.Value, hi: int) -> ir.Value:
    """v clamped to [0, hi] (a pivot row that LAPACK reports, never out of bounds)."""
    v = b.select(b.icmp_signed("<", v, ir.Constant(I32, 0)), ir.Constant(I32, 0), v)
    return b.select(b.icmp_signed(">", v, ir.Constant(I32, hi)), ir.Constant(I32, hi), v)


def _scipy_lapack() -> Any:
    """`scipy.linalg.lapack` (its workspace queries), imported on first use: importing
    scipy.linalg took ~170 ms of the llvm backend's import (numpy.f2py, numpy.testing and
    numpy.polynomial come with it), which every first jit paid, LAPACK or not."""
    from scipy.linalg import lapack
    return lapack


def _qr(g: LapackBuilder) -> None:
    m, n = g.eqn.inputs[0].aval.shape[-2:]
    k = min(m, n)
    kq = m if g.eqn.params["full_matrices"] else k
    if m == 0:
        return
    lwork = max(int(_scipy_lapack().dgeqrf_lwork(m, n)[0]) if k else 1,
                ORGQR_BLOCK * max(1, kq))
    geqrf = g.routine("geqrf", "iififfii")
    orgqr = g.routine("orgqr", "iiififfii")
    info = g.local(I32)
    w = g.scratch(g.ft, m * max(n, kq))
    tau = g.scratch(g.ft, k)
    work = g.scratch(g.ft, lwork)
    b = g.b
    shared = [g.arg(m), tau, work, g.arg(lwork), info]

    def body(q: ir.Value, r: ir.Value, x: ir.Value) -> None:
        g.transpose(w, x, m, n)
        b.call(geqrf, [g.arg(m), g.arg(n), w] + shared)
        def upper_triangle(i: ir.Value, j: ir.Value) -> None:
            upper = b.icmp_signed(">=", j, i)
            value = b.select(upper, g.load(w, g.lin(j, m, i)), g.const(0.0))
            g.store(r, g.lin(i, n, j), value)
        g.for_tiles(kq, n, upper_triangle)
        b.call(orgqr, [g.arg(m), g.arg(kq), g.arg(k), w] + shared)
        g.from_column_major(q, w, m, kq)

    g.per_batch(body)


def _svd(g: LapackBuilder) -> None:
    m, n = g.eqn.inputs[0].aval.shape[-2:]
    full = g.eqn.params["full_matrices"]
    k = min(m, n)
    if k == 0:
        if full:  # NumPy's convention for an empty matrix
            def identities(u: ir.Value, s: ir.Value, vh: ir.Value, x: ir.Value) -> None:
                g.identity(u, m)
                g.identity(vh, n)
            g.per_batch(identities)
        return
    u_cols, v_rows = (m, n) if full else (k, k)
    lwork = int(_scipy_lapack().dgesdd_lwork(m, n, compute_uv=1, full_matrices=int(full))[0])
    gesdd = g.routine("gesdd", "ciififfififiii")
    info = g.local(I32)
    a, work = g.scratch(g.ft, m * n), g.scratch(g.ft, lwork)
    u_col, vh_col = g.scratch(g.ft, m * u_cols), g.scratch(g.ft, v_rows * n)
    iwork = g.scratch(I32, 8 * k)
    b = g.b

    def body(u: ir.Value, s: ir.Value, vh: ir.Value, x: ir.Value) -> None:
        finite = g.transpose(a, x, m, n, finite=True)
        b.store(ir.Constant(I32, 1), info)
        with b.if_then(finite):
            b.call(gesdd, [g.arg("A" if full else "S"), g.arg(m), g.arg(n), a, g.arg(m), s,
                           u_col, g.arg(m), vh_col, g.arg(v_rows), work, g.arg(lwork),
                           iwork, info])
        g.from_column_major(u, u_col, m, u_cols)
        g.from_column_major(vh, vh_col, v_rows, n)
        g.nan_if(g.failed(info), [(u, m * u_cols), (s, k), (vh, v_rows * n)])

    g.per_batch(body)


BODIES: dict[str, Callable[[LapackBuilder], None]] = {
    "cholesky": _cholesky, "triangular_solve": _triangular_solve, "lu": _lu, "qr": _qr,
    "svd": _svd}


ROUTINES = {"cholesky": [("potrf", "lapack")], "triangular_solve": [("trsm", "blas")],
            "lu": [("getrf", "lapack")], "qr": [("geqrf", "lapack"), ("orgqr", "lapack")],
            "svd": [("gesdd", "lapack")]}  # what each body calls (LapackBuilder.routine)


def lapack_symbols(eqn: Eqn) -> list[str]:
    """What the linalg call `eqn`'s code resolves from the process: "library:routine" of
    each routine it calls (e.g. "lapack:spotrf"), and "libc" (malloc/free)."""
    _, prefix = FLOATS[eqn.inputs[0].aval.dtype]
    return [f"{library}:{prefix}{base}" for base, library in ROUTINES[eqn.primitive.name]] + [
        "libc"]


# every name `lapack_symbols` can give (a name read from a cache must be one of them)
KNOWN_SYMBOLS = frozenset(f"{library}:{prefix}{base}" for routines in ROUTINES.values()
                          for base, library in routines for prefix in "sd") | {"libc"}


def register_named(names: list[str]) -> None:
    """Make the `lapack_symbols` names resolvable by MCJIT (needed before linking object
    code that calls them, which a warm cache gives without rendering)."""
    for name in names:
        if name not in KNOWN_SYMBOLS:
            raise ValueError(f"unknown library symbol {name!r}")
        if name == "libc":
            _register_libc()
        else:
            library, routine = name.split(":")
            register_routine(routine, library)


def render_lapack(module: ir.Module, name: str, eqn: Eqn) -> ir.Function:
    """Add `void name(outs..., ins...)` computing the linalg equation `eqn` natively
    (module docstring)."""
    prim = eqn.primitive.name
    if prim not in BODIES or eqn.inputs[0].aval.dtype not in FLOATS:
        raise ValueError(f"render_lapack: {name} ({prim} on {eqn.inputs[0].aval}) has no "
                         f"native lowering; a bug in the schedule")
    g = LapackBuilder(module, name, eqn)
    if math.prod(g.batch):
        BODIES[prim](g)
    return g.finish()


# ---------------------------------------------------------------------------- symbols

def library_symbols(eqn: Eqn) -> list[str]:
    """What library call `eqn`'s code resolves from the process: "gemm" (OpenBLAS's gemm),
    LAPACK/BLAS routines and libc (`lapack.lapack_symbols`), or nothing (native code)."""
    if eqn.primitive.name in SEQUENCE_OPS:
        return []
    if eqn.primitive.name != "dot_general":
        return lapack_symbols(eqn)
    if uses_native_gemm(eqn):
        return []
    return ["gemm"]


def register_named_symbols(names: list[str]) -> None:
    """Make the `library_symbols` names resolvable by MCJIT (ValueError for a name no call
    gives). Rendering does it too; object code from a cache is linked without rendering,
    so the runtime calls this for every library call."""
    if "gemm" in names:
        register_symbols()
        single_threaded_blas()
    register_named([name for name in names if name != "gemm"])


def register_library_symbols(eqn: Eqn) -> None:
    """`register_named_symbols` of library call `eqn`'s `library_symbols`."""
    register_named_symbols(library_symbols(eqn))
