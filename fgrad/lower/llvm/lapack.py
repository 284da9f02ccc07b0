"""Native linalg for the llvm backend: generated code calls SciPy's LAPACK (and BLAS trsm).

In: a library call of a Program whose equation is cholesky, triangular_solve, lu, qr or svd
on float32/float64 (fgrad/core/prims/linalg.py has the output conventions).
Out: an internal LLVM function `void name(outs..., ins...)` (outputs first, then inputs,
one pointer per buffer) that loops over the batch entries and calls the routines once per
entry, with the same results as the primitive's NumPy impl (llvm/lapack_builder.py builds
it; transposing copies go tile by tile).

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
freed at its end.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from llvmlite import ir
from scipy.linalg import lapack

from fgrad.core.ir import Eqn
from fgrad.lower.llvm.blas import register_routine
from fgrad.lower.llvm.lapack_builder import FLOATS, I32, I64, LapackBuilder, _register_libc

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


def _qr(g: LapackBuilder) -> None:
    m, n = g.eqn.inputs[0].aval.shape[-2:]
    k = min(m, n)
    kq = m if g.eqn.params["full_matrices"] else k
    if m == 0:
        return
    lwork = max(int(lapack.dgeqrf_lwork(m, n)[0]) if k else 1, ORGQR_BLOCK * max(1, kq))
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
    lwork = int(lapack.dgesdd_lwork(m, n, compute_uv=1, full_matrices=int(full))[0])
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
