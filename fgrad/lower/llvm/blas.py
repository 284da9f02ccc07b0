"""Native matmul for the llvm backend: generated code calls SciPy's OpenBLAS gemm.

In: a library call of a Program (its dot_general equation, whose BLAS view `gemm_dims`
gives). Out: an internal LLVM function `void name(T* out, T* lhs, T* rhs)` that loops over
the batch and calls sgemm/dgemm once per batch entry, reading each operand in place.

The BLAS is the one SciPy exports for Cython (`scipy.linalg.cython_blas`): its capsules hold
C function pointers with the Fortran convention (every argument by pointer, column-major).
They are registered as process symbols `fgrad_sgemm`/`fgrad_dgemm` that the module declares
and MCJIT resolves by name when it links the module. Row-major out = lhs @ rhs is computed
as the column-major out^T = rhs^T lhs^T: rhs goes first and the row-major leading
dimensions carry over unchanged.

Also `render_library_call`: the function of any library call (a product by fgrad's own
GEMM or by OpenBLAS, LAPACK, a native sequence op or top_k), and how each one splits over
the pool.
"""
from __future__ import annotations

import ctypes
import glob
import math
import os

import llvmlite.binding as llvm
from llvmlite import ir

from fgrad.core.dtypes import dtypes
from fgrad.core.ir import Eqn
from fgrad.lower.kernel.ir import Kernel
from fgrad.lower.llvm.kernels.selection import render_top_k
from fgrad.lower.llvm.scans import scan_rows
from fgrad.lower.llvm.sequences import CUMULATIVE, SORTS, render_sequence_op, sort_chunking
from fgrad.lower.schedule.gemm_layout import GemmDims, gemm_dims

I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
FLOATS = {dtypes.float32: (ir.FloatType(), "sgemm"), dtypes.float64: (ir.DoubleType(), "dgemm")}
_registered: set[str] = set()


def _capsule_address(capsule: object) -> int:
    """The C pointer a PyCapsule holds (looked up under the capsule's own name)."""
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    address = api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule))
    if not address:
        raise RuntimeError("fgrad llvm backend: SciPy's BLAS capsule holds no pointer")
    return int(address)


def register_routine(routine: str, library: str = "blas") -> str:
    """Make SciPy's BLAS (or, with library "lapack", LAPACK) `routine`, e.g. "dtrsm" or
    "spotrf", resolvable by MCJIT as `fgrad_<routine>`; returns that symbol name. Call it
    before linking any module (or cached object code) that calls it; idempotent."""
    symbol = f"fgrad_{routine}"
    if routine not in _registered:
        single_threaded_blas()  # one pool per process: fgrad's threads split large gemms
        if library == "lapack":
            from scipy.linalg import cython_lapack as exports
        else:
            from scipy.linalg import cython_blas as exports
        llvm.add_symbol(symbol, _capsule_address(exports.__pyx_capi__[routine]))
        _registered.add(routine)
    return symbol


def register_symbols() -> None:
    """Make `fgrad_sgemm` and `fgrad_dgemm` resolvable by MCJIT in this process. Call it
    before linking any module (or cached object code) that calls a gemm; idempotent."""
    for routine in ("sgemm", "dgemm"):
        register_routine(routine)


def _declare(module: ir.Module, routine: str, ft: ir.Type) -> ir.Function:
    """`void fgrad_?gemm(char*, char*, int*, int*, int*, T*, T*, int*, T*, int*, T*, T*,
    int*)`, declared once per module."""
    name = f"fgrad_{routine}"
    if name in module.globals:
        return module.globals[name]
    ip, fp, cp = I32.as_pointer(), ft.as_pointer(), I8.as_pointer()
    args = [cp, cp, ip, ip, ip, fp, fp, ip, fp, ip, fp, fp, ip]
    return ir.Function(module, ir.FunctionType(ir.VoidType(), args), name=name)


def _zero(b: ir.IRBuilder, fn: ir.Function, out: ir.Value, count: int, ft: ir.Type) -> None:
    """Store 0 to out[0:count] (the product of an empty contraction)."""
    with _loop(b, fn, count, "z") as i:
        b.store(ir.Constant(ft, 0.0), b.gep(out, [i], inbounds=True))


class _loop:
    """`with _loop(b, fn, n, name) as i:` emits `for i in 0..n` (i64) around the body."""

    def __init__(self, b: ir.IRBuilder, fn: ir.Function, n: int, name: str):
        self.b, self.fn, self.n, self.name = b, fn, n, name

    def __enter__(self) -> ir.Value:
        b = self.b
        before = b.block
        self.head = self.fn.append_basic_block(f"{self.name}.head")
        body = self.fn.append_basic_block(f"{self.name}.body")
        self.done = self.fn.append_basic_block(f"{self.name}.done")
        b.branch(self.head)
        b.position_at_end(self.head)
        self.i = b.phi(I64, name=self.name)
        self.i.add_incoming(ir.Constant(I64, 0), before)
        b.cbranch(b.icmp_signed("<", self.i, ir.Constant(I64, self.n)), body, self.done)
        b.position_at_end(body)
        return self.i

    def __exit__(self, *exc: object) -> None:
        b = self.b
        self.i.add_incoming(b.add(self.i, ir.Constant(I64, 1), flags=("nuw", "nsw")), b.block)
        b.branch(self.head)
        b.position_at_end(self.done)


def _batch_offset(b: ir.IRBuilder, i: ir.Value, sizes: tuple[int, ...],
                  strides: tuple[int, ...]) -> ir.Value:
    """Element offset of flat batch entry `i` in an operand with these batch strides."""
    total: ir.Value = ir.Constant(I64, 0)
    for t, (size, stride) in enumerate(zip(sizes, strides, strict=True)):
        inner = int(math.prod(sizes[t + 1:]))
        j = b.urem(b.udiv(i, ir.Constant(I64, inner)), ir.Constant(I64, size))
        total = b.add(total, b.mul(j, ir.Constant(I64, stride)))
    return total


def _arguments(b: ir.IRBuilder, d: GemmDims, ft: ir.Type) -> list[ir.Value]:
    """The by-pointer scalar arguments: transa, transb, m, n, k, alpha, lda, ldb, beta, ldc
    (BLAS m, n = our n, m; BLAS a, b = our rhs, lhs)."""
    def slot(ty: ir.Type, value: object) -> ir.Value:
        ptr = b.alloca(ty)
        b.store(ir.Constant(ty, value), ptr)
        return ptr
    return [slot(I8, ord("T" if d.rhs.trans else "N")), slot(I8, ord("T" if d.lhs.trans else "N")),
            slot(I32, d.n), slot(I32, d.m), slot(I32, d.k), slot(ft, 1.0), slot(I32, d.rhs.ld),
            slot(I32, d.lhs.ld), slot(ft, 0.0), slot(I32, max(1, d.n))]


def _blas_view(renderer: str, name: str, eqn: Eqn) -> tuple[GemmDims, ir.Type, str]:
    """The BLAS view of a float dot_general, its LLVM float type and gemm routine (the
    routines registered); ValueError for anything else (a bug in the schedule)."""
    dims = gemm_dims(eqn)
    dtype = eqn.outvars[0].aval.dtype
    if dims is None or dtype not in FLOATS:
        raise ValueError(f"{renderer}: {name} is not a BLAS-readable float dot_general "
                         f"({eqn.inputs[0].aval} x {eqn.inputs[1].aval}); a bug in the schedule")
    register_symbols()
    ft, routine = FLOATS[dtype]
    return dims, ft, routine


def render_gemm(module: ir.Module, name: str, eqn: Eqn) -> ir.Function:
    """Add `void name(T* out, T* lhs, T* rhs)` computing the dot_general `eqn` with one BLAS
    gemm call per batch entry (no call at all for an empty product)."""
    dims, ft, routine = _blas_view("render_gemm", name, eqn)
    fp = ft.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [fp, fp, fp]), name=name)
    fn.linkage = "internal"
    out, lhs, rhs = fn.args
    out.name, lhs.name, rhs.name = "out", "lhs", "rhs"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    n_batch = int(math.prod(dims.batch))
    if dims.m * dims.n * n_batch == 0:
        pass
    elif dims.k == 0:
        _zero(b, fn, out, n_batch * dims.m * dims.n, ft)
    else:
        _call_per_batch(b, fn, _declare(module, routine, ft), dims, ft)
    b.ret_void()
    return fn


def _call_per_batch(b: ir.IRBuilder, fn: ir.Function, gemm: ir.Function, d: GemmDims,
                    ft: ir.Type) -> None:
    out, lhs, rhs = fn.args
    transa, transb, m, n, k, alpha, lda, ldb, beta, ldc = _arguments(b, d, ft)

    def call(i: ir.Value) -> None:
        x = b.gep(lhs, [_batch_offset(b, i, d.batch, d.lhs.batch_strides)], inbounds=True)
        y = b.gep(rhs, [_batch_offset(b, i, d.batch, d.rhs.batch_strides)], inbounds=True)
        c = b.gep(out, [b.mul(i, ir.Constant(I64, d.m * d.n))], inbounds=True)
        b.call(gemm, [transa, transb, m, n, k, alpha, y, lda, x, ldb, beta, c, ldc])

    n_batch = int(math.prod(d.batch))
    if n_batch == 1:
        call(ir.Constant(I64, 0))
        return
    with _loop(b, fn, n_batch, "batch") as i:
        call(i)


# ------------------------------------------------------------ split over fgrad's threads

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
    the pool, else (1, 0, 0): the call runs whole on one thread. fgrad's own GEMM splits an
    unbatched product into packing units and row chunks (gemm/prepack.py)."""
    from fgrad.lower.llvm.gemm.prepack import prepack_plan
    prepack = prepack_plan(eqn)
    if prepack is not None:
        return prepack.chunking
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
    """`gemm_chunking` (`sort_chunking` for a sort or top_k, `scans.scan_rows` for a
    cumulative op) of every library call that splits (by call name)."""
    found = {}
    for name, eqn in library_calls.items():
        prim = eqn.primitive.name
        chunks = gemm_chunking(eqn) if prim == "dot_general" else sort_chunking(eqn) \
            if prim in SORTS else scan_rows(eqn) if prim in CUMULATIVE else (1, 0, 0)
        if chunks[0] > 1:
            found[name] = chunks
    return found


def _row_offset(b: ir.IRBuilder, row: ir.Value, d: GemmDims) -> ir.Value:
    """Element offset of logical lhs row `row` within one batch entry."""
    return row if d.lhs.trans else b.mul(row, ir.Constant(I64, d.lhs.ld))


def render_gemm_rows(module: ir.Module, name: str, eqn: Eqn) -> ir.Function:
    """Add `void name(T* out, T* lhs, T* rhs, i64 start, i64 stop)`: rows [start, stop) of
    the stacked outputs (batch entry r // m, row r % m), one BLAS gemm per batch entry."""
    dims, ft, routine = _blas_view("render_gemm_rows", name, eqn)
    single_threaded_blas()
    fp = ft.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [fp, fp, fp, I64, I64]), name=name)
    fn.linkage = "internal"
    for arg, label in zip(fn.args, ("out", "lhs", "rhs", "start", "stop"), strict=True):
        arg.name = label
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    _row_loop(b, fn, _declare(module, routine, ft), dims, ft)
    b.ret_void()
    return fn


def _row_loop(b: ir.IRBuilder, fn: ir.Function, gemm: ir.Function, d: GemmDims,
              ft: ir.Type) -> None:
    """for batch entry e from start // m to (stop - 1) // m: gemm on its rows in range."""
    out, lhs, rhs, start, stop = fn.args
    args = _arguments(b, d, ft)
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
    x_off = b.add(_batch_offset(b, e, d.batch, d.lhs.batch_strides), _row_offset(b, lo, d))
    y_off = _batch_offset(b, e, d.batch, d.rhs.batch_strides)
    c_off = b.add(b.mul(e, ir.Constant(I64, d.m * d.n)), b.mul(lo, ir.Constant(I64, d.n)))
    x, y = b.gep(lhs, [x_off], inbounds=True), b.gep(rhs, [y_off], inbounds=True)
    c = b.gep(out, [c_off], inbounds=True)
    transa, transb, mm, _, k, alpha, lda, ldb, beta, ldc = args
    b.call(gemm, [transa, transb, mm, rows_slot, k, alpha, y, lda, x, ldb, beta, c, ldc])
    e.add_incoming(b.add(e, ir.Constant(I64, 1)), b.block)
    b.branch(head)
    b.position_at_end(done)


def render_library_call(module: ir.Module, name: str, eqn: Eqn, split: bool,
                        epilogue: ir.Function | None = None,
                        epilogue_kernel: Kernel | None = None,
                        private: bool = False) -> ir.Function:
    """Add the function computing library call `eqn`: a dot_general by fgrad's own GEMM (or,
    with FGRAD_GEMM=openblas, by OpenBLAS calls), by rows when the pool `split`s it, with
    the `epilogue` kernel (`epilogue_kernel` its IR) inside when given; LAPACK else."""
    from fgrad.lower.llvm.gemm.driver import render_native_gemm, render_native_gemm_rows
    from fgrad.lower.llvm.gemm.native import epilogue_row_scale, uses_native_gemm
    from fgrad.lower.llvm.lapack import render_lapack   # they import this module
    from fgrad.lower.schedule.partition import SEQUENCE_OPS
    if eqn.primitive.name == "top_k":
        return render_top_k(module, name, eqn, split)
    if eqn.primitive.name in SEQUENCE_OPS:
        return render_sequence_op(module, name, eqn, split)
    if eqn.primitive.name != "dot_general":
        return render_lapack(module, name, eqn)
    if uses_native_gemm(eqn):
        if epilogue is None or epilogue_kernel is None:
            return render_native_gemm_rows(module, name, eqn) if split \
                else render_native_gemm(module, name, eqn)
        scale = epilogue_row_scale(eqn, epilogue_kernel)
        if split:
            return render_native_gemm_rows(module, name, eqn, epilogue, scale,
                                           epilogue_kernel=epilogue_kernel, private=private)
        return render_native_gemm(module, name, eqn, epilogue, scale, epilogue_kernel,
                                  private)
    return render_gemm_rows(module, name, eqn) if split else render_gemm(module, name, eqn)
