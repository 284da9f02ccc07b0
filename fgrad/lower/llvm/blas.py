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
"""
from __future__ import annotations

import ctypes
import math

import llvmlite.binding as llvm
from llvmlite import ir

from fgrad.core.dtypes import dtypes
from fgrad.core.ir import Eqn
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
        from fgrad.lower.llvm.gemm_split import single_threaded_blas
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


def render_gemm(module: ir.Module, name: str, eqn: Eqn) -> ir.Function:
    """Add `void name(T* out, T* lhs, T* rhs)` computing the dot_general `eqn` with one BLAS
    gemm call per batch entry (no call at all for an empty product)."""
    dims = gemm_dims(eqn)
    dtype = eqn.outvars[0].aval.dtype
    if dims is None or dtype not in FLOATS:
        raise ValueError(f"render_gemm: {name} is not a BLAS-readable float dot_general "
                         f"({eqn.inputs[0].aval} x {eqn.inputs[1].aval}); a bug in the schedule")
    register_symbols()
    ft, routine = FLOATS[dtype]
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
