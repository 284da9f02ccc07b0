"""A tiled OpenCL matmul for the Program's library calls (float32/float64 dot_general).

In: a call name and its dot_general equation (slots: out, lhs, rhs). Out: a
`RenderedKernel`: out[b] (m x n) = lhs[b] (m x k) @ rhs[b] (k x n), each operand read in
place through its BLAS view (schedule/gemm_layout.py: transpose flag, leading dimension, batch
strides), the output row-major and contiguous.

Work-groups of TILE x TILE work-items compute a (TILE*WORK) x (TILE*WORK) block of the
output, WORK x WORK values per work-item, with k stepping through TILE-wide slabs staged
in __local memory; loads outside the matrices read as 0, so any m, n, k work.
"""
from __future__ import annotations

import math

from fgrad.core.dtypes import dtypes
from fgrad.core.ir import Eqn
from fgrad.lower.schedule.gemm_layout import GemmDims, MatrixView, gemm_dims
from fgrad.lower.opencl.render import Launch, RenderedKernel

TILE = 16
WORK = 2
BLOCK = TILE * WORK


def _batch_offset(batch: tuple[int, ...], strides: tuple[int, ...]) -> str:
    """Element offset of flat batch entry `b` in an operand with these batch strides."""
    terms, inner = [], 1
    for size, stride in reversed(list(zip(batch, strides, strict=True))):
        if size != 1 and stride:
            terms.append(f"((b / {inner}) % {size}) * {stride}")
        inner *= size
    return " + ".join(terms) or "0"


def _element(view: MatrixView, row: str, col: str) -> str:
    """Offset of (row, col) of an operand matrix through its view."""
    return f"{col} * {view.ld} + {row}" if view.trans else f"{row} * {view.ld} + {col}"


def _k_loop(d: GemmDims) -> list[str]:
    """Step through k: stage a slab of each operand in __local memory, then accumulate."""
    a_at, b_at = _element(d.lhs, "ar", "ac"), _element(d.rhs, "br", "bc")
    return [
        f"  for (long p0 = 0; p0 < {d.k}; p0 += {TILE}) {{",
        f"    for (int w = 0; w < {WORK}; ++w) {{",
        f"      const long ar = i0 + ti + w * {TILE}, ac = p0 + tj;",
        f"      As[ti + w * {TILE}][tj] = (ar < {d.m} && ac < {d.k}) ? a[{a_at}] : 0;",
        f"      const long br = p0 + ti, bc = j0 + tj + w * {TILE};",
        f"      Bs[ti][tj + w * {TILE}] = (br < {d.k} && bc < {d.n}) ? bm[{b_at}] : 0;",
        "    }",
        "    barrier(CLK_LOCAL_MEM_FENCE);",
        f"    for (int q = 0; q < {TILE}; ++q)",
        f"      for (int wi = 0; wi < {WORK}; ++wi)",
        f"        for (int wj = 0; wj < {WORK}; ++wj)",
        f"          acc[wi][wj] += As[ti + wi * {TILE}][q] * Bs[q][tj + wj * {TILE}];",
        "    barrier(CLK_LOCAL_MEM_FENCE);",
        "  }"]


def lower_gemm(name: str, eqn: Eqn) -> RenderedKernel:
    """The OpenCL C source and 3-D launch (n, m, batch) of one library call."""
    d = gemm_dims(eqn)
    if d is None:
        raise ValueError(f"{name}: dot_general layout has no matrix view (pack it first)")
    t = "double" if eqn.outvars[0].aval.dtype == dtypes.float64 else "float"
    n_batch = math.prod(d.batch)
    lines = [
        f"__kernel __attribute__((reqd_work_group_size({TILE}, {TILE}, 1)))",
        (f"void {name}(__global {t}* restrict out, __global const {t}* restrict lhs, "
         f"__global const {t}* restrict rhs) {{"),
        f"  __local {t} As[{BLOCK}][{TILE + 1}];",
        f"  __local {t} Bs[{TILE}][{BLOCK + 1}];",
        "  const int tj = get_local_id(0), ti = get_local_id(1);",
        (f"  const long j0 = (long)get_group_id(0) * {BLOCK}, "
         f"i0 = (long)get_group_id(1) * {BLOCK};"),
        "  const long b = get_global_id(2);",
        f"  __global const {t}* a = lhs + {_batch_offset(d.batch, d.lhs.batch_strides)};",
        f"  __global const {t}* bm = rhs + {_batch_offset(d.batch, d.rhs.batch_strides)};",
        f"  {t} acc[{WORK}][{WORK}] = {{{{0}}}};",
        *_k_loop(d),
        f"  for (int wi = 0; wi < {WORK}; ++wi)",
        f"    for (int wj = 0; wj < {WORK}; ++wj) {{",
        f"      const long i = i0 + ti + wi * {TILE}, j = j0 + tj + wj * {TILE};",
        f"      if (i < {d.m} && j < {d.n}) out[b * {d.m * d.n} + i * {d.n} + j] = acc[wi][wj];",
        "    }",
        "}"]
    groups = (-(-d.n // BLOCK) * TILE, -(-d.m // BLOCK) * TILE, n_batch)
    return RenderedKernel(name, "\n".join(lines), Launch(groups, (TILE, TILE, 1)), "gemm")
