"""Matmul on fgrad's own threads: a gemm's output rows cut into chunks, BLAS on one thread.

In: the dot_general of a library call (its BLAS view, `gemm_dims`). Out:
`gemm_chunking(eqn)`: (chunk count, rows per chunk, rows in all) when the product is large
enough to split over the pool, else (1, 0, 0); `render_gemm_rows`: an internal function
`void name(T* out, T* lhs, T* rhs, i64 start, i64 stop)` computing output rows
[start, stop) of the batch-major stack of all batch entries' rows, one BLAS call per batch
entry it touches; `single_threaded_blas()`, which limits SciPy's OpenBLAS to one thread.

Why: OpenBLAS's own threads and fgrad's pool each want every core; inside one jitted call
they took turns badly (a small MLP step 2-39 ms instead of 0.3-0.6 ms on 2 cores). With
OpenBLAS on one thread, the pool's threads claim row chunks of the gemm like chunks of any
split kernel (threads.py), so one pool runs everything and a gemm can share a parallel part
with the small kernels around it. Each chunk packs all of rhs again inside BLAS, so chunks
are few (about two per thread) and large.
"""
from __future__ import annotations

import ctypes
import glob
import math
import os

from llvmlite import ir

from fgrad.core.ir import Eqn
from fgrad.lower.llvm import blas
from fgrad.lower.schedule.gemm_layout import GemmDims, gemm_dims

I64 = ir.IntType(64)
MIN_SPLIT_FLOPS = 1 << 22  # a smaller product runs whole on one thread
MIN_CHUNK_FLOPS = 1 << 21  # ... and a split one in chunks of at least this much work
ROW_ALIGN = 16  # rows per chunk round up to this (whole register blocks inside BLAS)
CHUNKS_PER_THREAD = 1
_pinned: list[bool] = []


def _openblas_setter() -> object | None:
    """`set_num_threads` of the OpenBLAS that SciPy ships, or None when it is not found."""
    import scipy
    root = os.path.dirname(os.path.abspath(scipy.__file__))
    patterns = [os.path.join(root, os.pardir, "scipy.libs", "*openblas*"),
                os.path.join(root, ".dylibs", "*openblas*")]
    for path in sorted(p for pattern in patterns for p in glob.glob(pattern)):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for symbol in ("scipy_openblas_set_num_threads", "openblas_set_num_threads",
                       "scipy_openblas_set_num_threads64_"):
            setter = getattr(lib, symbol, None)
            if setter is not None:
                setter.argtypes, setter.restype = [ctypes.c_int], None
                return setter
    return None


def single_threaded_blas() -> bool:
    """Limit SciPy's OpenBLAS (the one jitted gemm and LAPACK calls use) to one thread, once
    per process; fgrad's pool splits large gemms instead. NumPy's own BLAS is untouched.
    Returns whether the limit is in place (False: that OpenBLAS was not found)."""
    if not _pinned:
        setter = _openblas_setter()
        if setter is not None:
            setter(1)  # type: ignore[operator]
        _pinned.append(setter is not None)
    return _pinned[0]


def gemm_chunking(eqn: Eqn) -> tuple[int, int, int]:
    """(chunk count, rows per chunk, rows in all) of a float dot_general that splits over
    the pool, else (1, 0, 0): the call runs whole on one thread."""
    dims = gemm_dims(eqn)
    if dims is None or dims.k == 0:
        return 1, 0, 0
    threads = max(2, os.cpu_count() or 1)  # the machine's, not FGRAD_NUM_THREADS: one plan
    rows = int(math.prod(dims.batch)) * dims.m
    row_flops = 2 * dims.n * dims.k
    if rows < 2 or rows * row_flops < MIN_SPLIT_FLOPS:
        return 1, 0, 0
    size = max(-(-rows // (threads * CHUNKS_PER_THREAD)), -(-MIN_CHUNK_FLOPS // row_flops))
    size = min(rows, -(-size // ROW_ALIGN) * ROW_ALIGN)
    count = -(-rows // size)
    return (count, size, rows) if count > 1 else (1, 0, 0)


def library_chunking(library_calls: dict[str, Eqn]) -> dict[str, tuple[int, int, int]]:
    """`gemm_chunking` of every library call that splits (by call name)."""
    found = {}
    for name, eqn in library_calls.items():
        if eqn.primitive.name == "dot_general":
            chunks = gemm_chunking(eqn)
            if chunks[0] > 1:
                found[name] = chunks
    return found


def _row_offset(b: ir.IRBuilder, row: ir.Value, d: GemmDims) -> ir.Value:
    """Element offset of logical lhs row `row` within one batch entry."""
    return row if d.lhs.trans else b.mul(row, ir.Constant(I64, d.lhs.ld))


def render_gemm_rows(module: ir.Module, name: str, eqn: Eqn) -> ir.Function:
    """Add `void name(T* out, T* lhs, T* rhs, i64 start, i64 stop)`: rows [start, stop) of
    the stacked outputs (batch entry r // m, row r % m), one BLAS gemm per batch entry."""
    dims = gemm_dims(eqn)
    dtype = eqn.outvars[0].aval.dtype
    if dims is None or dtype not in blas.FLOATS:
        raise ValueError(f"render_gemm_rows: {name} is not a BLAS-readable float dot_general "
                         f"({eqn.inputs[0].aval} x {eqn.inputs[1].aval}); a bug in the schedule")
    blas.register_symbols()
    single_threaded_blas()
    ft, routine = blas.FLOATS[dtype]
    fp = ft.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [fp, fp, fp, I64, I64]), name=name)
    fn.linkage = "internal"
    for arg, label in zip(fn.args, ("out", "lhs", "rhs", "start", "stop"), strict=True):
        arg.name = label
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    _row_loop(b, fn, blas._declare(module, routine, ft), dims, ft)
    b.ret_void()
    return fn


def _row_loop(b: ir.IRBuilder, fn: ir.Function, gemm: ir.Function, d: GemmDims,
              ft: ir.Type) -> None:
    """for batch entry e from start // m to (stop - 1) // m: gemm on its rows in range."""
    out, lhs, rhs, start, stop = fn.args
    args = blas._arguments(b, d, ft)
    rows_slot = args[3]  # BLAS n = our m: the rows of this call
    m = ir.Constant(I64, d.m)
    first = b.udiv(start, m)
    last = b.udiv(b.sub(stop, ir.Constant(I64, 1)), m)
    before = b.block
    head, body, done = (fn.append_basic_block(s) for s in ("rows.head", "rows.body", "rows.done"))
    b.branch(head)
    b.position_at_end(head)
    e = b.phi(I64, name="entry")
    e.add_incoming(first, before)
    b.cbranch(b.icmp_unsigned("<=", e, last), body, done)
    b.position_at_end(body)
    base = b.mul(e, m)
    lo = b.select(b.icmp_unsigned(">", start, base), b.sub(start, base), ir.Constant(I64, 0))
    end = b.sub(stop, base)
    hi = b.select(b.icmp_unsigned("<", end, m), end, m)
    b.store(b.trunc(b.sub(hi, lo), ir.IntType(32)), rows_slot)
    x_off = b.add(blas._batch_offset(b, e, d.batch, d.lhs.batch_strides), _row_offset(b, lo, d))
    y_off = blas._batch_offset(b, e, d.batch, d.rhs.batch_strides)
    c_off = b.add(b.mul(e, ir.Constant(I64, d.m * d.n)), b.mul(lo, ir.Constant(I64, d.n)))
    x, y = b.gep(lhs, [x_off], inbounds=True), b.gep(rhs, [y_off], inbounds=True)
    c = b.gep(out, [c_off], inbounds=True)
    transa, transb, mm, _, k, alpha, lda, ldb, beta, ldc = args
    b.call(gemm, [transa, transb, mm, rows_slot, k, alpha, y, lda, x, ldb, beta, c, ldc])
    e.add_incoming(b.add(e, ir.Constant(I64, 1)), b.block)
    b.branch(head)
    b.position_at_end(done)
