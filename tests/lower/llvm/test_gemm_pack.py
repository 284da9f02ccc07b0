"""The GEMM's packing routines (llvm/gemm/pack.py), called directly: every operand layout
at every tile width this package generates, against a NumPy copy of the sliver layout,
including partial slivers, k remainders and an offset k window; and the register transpose
they use, for 2 to 16 lanes."""
from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

from fgrad.lower.llvm import target
from fgrad.lower.llvm.gemm.pack import render_pack, transpose_rows

RNG = np.random.default_rng(11)
TYPES = {np.float32: ir.FloatType(), np.float64: ir.DoubleType(), np.int32: ir.IntType(32)}
_KEEP: list[object] = []   # engines whose functions the tests call


def _compiled(module: ir.Module, name: str, argtypes: list[object]) -> ctypes._CFuncPtr:
    """`name` from `module`, compiled with no middle end (as the routines are)."""
    module.triple, module.data_layout = target.triple_and_layout()
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    engine = llvm.create_mcjit_compiler(parsed, target.new_machine())
    engine.finalize_object()
    _KEEP.append(engine)
    return ctypes.CFUNCTYPE(None, *argtypes)(engine.get_function_address(name))


@pytest.mark.parametrize("dtype,lanes", [(np.float32, 2), (np.float32, 4), (np.float32, 8),
                                         (np.float32, 16), (np.float64, 8), (np.int32, 16)])
def test_transpose_rows(dtype, lanes):
    module = ir.Module()
    element = TYPES[dtype]
    fp = element.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [fp, fp]), name="transpose")
    b = ir.IRBuilder(fn.append_basic_block())
    vp = ir.VectorType(element, lanes).as_pointer()

    def row(ptr: ir.Value, i: int) -> ir.Value:
        return b.bitcast(b.gep(ptr, [ir.Constant(ir.IntType(64), i * lanes)]), vp)
    rows = [b.load(row(fn.args[0], i), align=4) for i in range(lanes)]
    for i, column in enumerate(transpose_rows(b, rows)):
        b.store(column, row(fn.args[1], i), align=4)
    b.ret_void()
    call = _compiled(module, "transpose", [ctypes.c_void_p] * 2)
    x = (RNG.standard_normal((lanes, lanes)) * 1000).astype(dtype)
    out = np.zeros_like(x)
    call(x.ctypes.data, out.ctypes.data)
    np.testing.assert_array_equal(out, x.T)


@pytest.mark.skipif(target.vector_bits() != 512, reason="the host has no AVX-512")
def test_avx512_transposes_are_two_table_permutes():
    """On AVX-512 the 16 x 16 transposes are vpermt2ps/vpermi2ps, whose index vectors LLVM
    cannot see through (pack.py `_opaque_permute`: a fraction of the compile time)."""
    from fgrad.lower.llvm import kernel_cache
    module = ir.Module()
    render_pack(module, "pack", ir.FloatType(), 4, 16, "b", 32, True)
    module.triple, module.data_layout = target.triple_and_layout()
    asm = kernel_cache.assembly_of(str(module), kernel_cache.BY_HAND)
    permutes = asm.count("vpermt2ps") + asm.count("vpermi2ps")
    assert permutes >= 2 * 64 and "vshufps" not in asm


def _expected(matrix: np.ndarray, side: str, trans: bool, width: int, first: int,
              limit: int, k0: int, kc: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dest[t][p][w] = operand(first + t*width + w, k0 + p); past limit (the padding):
    zero, or where k runs along memory the last row's value at step p (`pack.py`). Returns
    the expected panel (zero-padded), where the padding is, and the last row's values."""
    operand = matrix.T if trans else matrix          # A as (rows, k); B as (k, cols)
    rows_by_k = operand if side == "a" else operand.T
    count = -(-(limit - first) // width)
    out = np.zeros((count, kc, width), matrix.dtype)
    padded = np.zeros(out.shape, bool)
    last = np.zeros(out.shape, matrix.dtype)
    for t in range(count):
        for w in range(width):
            o = first + t * width + w
            if o < limit:
                out[t, :, w] = rows_by_k[o, k0:k0 + kc]
            else:
                padded[t, :, w] = True
                last[t, :, w] = rows_by_k[limit - 1, k0:k0 + kc]
    return out.ravel(), padded.ravel(), last.ravel()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("side,trans", [("a", False), ("a", True), ("b", False), ("b", True)])
@pytest.mark.parametrize("lanes_per_width", [(4, 6), (4, 8), (8, 6), (8, 16), (16, 12),
                                             (16, 32)])
def test_pack_matches_the_sliver_layout(dtype, side, trans, lanes_per_width):
    lanes, width = lanes_per_width
    module = ir.Module()
    size = np.dtype(dtype).itemsize
    render_pack(module, "pack", TYPES[dtype], size, lanes, side, width, trans)
    call = _compiled(module, "pack", [ctypes.c_void_p] * 2 + [ctypes.c_int64] * 5)
    outer, depth = 3 * width + 5, 3 * lanes + 3       # rows (a) or columns (b), and k
    shape = (outer, depth) if side == "a" else (depth, outer)
    stored = (RNG.standard_normal(shape[::-1] if trans else shape) * 100).astype(dtype)
    ld = stored.shape[1]
    for first, limit, k0, kc in [(0, outer, 0, depth), (1, outer, 2, depth - 2),
                                 (2, 2 + width, 1, lanes), (0, width - 1, 0, lanes + 1),
                                 (3, 4, depth - 1, 1)]:
        want, padded, last = _expected(stored, side, trans, width, first, limit, k0, kc)
        dest = np.full(want.size + 64, -7, dtype)
        call(dest.ctypes.data, stored.ctypes.data, ld, first, limit, k0, kc)
        got = dest[:want.size]
        np.testing.assert_array_equal(got[~padded], want[~padded])
        along_k = (side == "a") != trans
        pads = got[padded]
        assert ((pads == 0) | (along_k & (pads == last[padded]))).all()
        assert (dest[want.size:] == -7).all()              # nothing written past the panel
