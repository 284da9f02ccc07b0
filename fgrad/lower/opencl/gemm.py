"""The OpenCL matmul of the Program's library calls (float32/float64 dot_general).

In: a call name, its dot_general equation (slots: out, lhs, rhs) and a `GemmTarget` (the
device's kind and limits, from `gemm_target(dev)`). Out: a `RenderedKernel`: out[b] (m x n)
= lhs[b] (m x k) @ rhs[b] (k x n), each operand read in place through its BLAS view
(schedule/gemm_layout.py: transpose flag, leading dimension, batch strides; a batch stride
of 0 broadcasts), the output row-major and contiguous. No form reads or writes outside
the operands, for any m, n, k.

Two forms, picked by the device kind (`gemm_target`; tests force either on any device):

- CPU (opencl/gemm_cpu.py): no __local memory and no barriers; each work-item owns 96 rows
  x 64 columns, steps through k in 256-wide slabs copied to private memory, and keeps
  6 x 2 vector accumulators (the device's preferred width: 6 x 16 floats with AVX2) per
  register block. Measured with pocl 3.0 on a 2-core AMD EPYC VM (AVX2+FMA), float32
  n x n, data on the device, median per call: the earlier 16 x 16 local-memory kernel
  (2 x 2 outputs per work-item) ran 1.2 / 2.4 / 3.1 GFLOP/s at n = 256 / 1024 / 2048; this
  one 47 / 83 / 47 GFLOP/s at best (load average 1.7 from another job; 128-wide slabs)
  and 31-48 / 34-50 / 31-43 with the cores loaded (load 3-4, where NumPy's OpenBLAS
  reached 41-49 / 61-88 GFLOP/s at n = 1024 / 2048). The W5 MLP training step went from
  661 ms to 29 ms (llvm backend: 21 ms).
- GPU: work-groups of up to 16 x 16 work-items, each computing 4 x 4 outputs (a 64 x 64
  block per group), k stepping through 16-wide slabs staged in __local memory (loads
  outside the matrices read as 0, consecutive work-items loading consecutive elements);
  sizes shrink to fit the device's work-group and __local memory limits. Tested on pocl
  and on NVIDIA's OpenCL (H100); figures in docs/opencl_gpu.md.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fgrad.core.dtypes import dtypes
from fgrad.core.ir import Eqn
from fgrad.lower.opencl.gemm_cpu import CpuShape, cpu_gemm
from fgrad.lower.opencl.render import Launch, RenderedKernel
from fgrad.lower.schedule.gemm_layout import GemmDims, MatrixView, gemm_dims

if TYPE_CHECKING:
    from fgrad.lower.opencl.device import CLDevice


# A GPU keeps a work-item's private arrays in (cached) device memory and reserves them for
# every resident work-item: NVIDIA's OpenCL refuses the CPU form's ~100-200 KB slabs
# (OUT_OF_HOST_MEMORY at launch), so the CPU form forced on a GPU uses smaller slabs.
GPU_PRIVATE_BYTES = 16384


@dataclass(frozen=True)
class GemmTarget:
    """What a matmul kernel is sized for: a CPU (register blocks in vector types) or a GPU
    (tiles in __local memory), the largest work-group, __local bytes, and the preferred
    vector widths (elements) of float and double."""

    cpu: bool = False
    max_group: int = 256
    local_mem: int = 32768
    vector_width: tuple[int, int] = (8, 4)
    private_limit: int | None = None  # bytes of private arrays per work-item (None: any)
    compute_units: int = 0  # the device's (0: unknown)


def gemm_target(dev: CLDevice | None, variant: str | None = None) -> GemmTarget:
    """The target of `dev` (None: a generic GPU); `variant` "cpu"/"gpu" forces the form."""
    if variant not in (None, "cpu", "gpu"):
        raise ValueError(f"gemm variant {variant!r}: expected 'cpu' or 'gpu'")
    if dev is None:
        return GemmTarget(cpu=variant == "cpu")
    cpu = dev.is_cpu if variant is None else variant == "cpu"
    widths = (dev.vector_width["float"], dev.vector_width["double"])
    return GemmTarget(cpu, dev.max_group, dev.local_mem, widths,
                      None if dev.is_cpu else GPU_PRIVATE_BYTES, dev.compute_units)


@dataclass(frozen=True)
class GpuShape:
    """Sizes of the tiled (GPU) kernel: a `side` x `side` work-group, `work` x `work`
    outputs per work-item, k slabs `tk` wide."""

    side: int = 16
    work: int = 4
    tk: int = 16

    @property
    def block(self) -> int:
        """Output rows (and columns) per work-group."""
        return self.side * self.work


def gpu_shape(target: GemmTarget, itemsize: int, d: GemmDims | None = None) -> GpuShape:
    """The tiled shape for `d` within the target's work-group and __local memory limits:
    8 x 8 outputs per work-item when the product still gives every compute unit a
    work-group (an H100, n = 2048: 23.5 TFLOP/s against 17.5 with 4 x 4), else 4 x 4 (at
    n = 1024, 8 x 8 leaves half of its 132 units idle: 8.4 against 14.3 TFLOP/s)."""
    side = next(s for s in (16, 8, 4, 2, 1) if s * s <= max(1, target.max_group))
    big = side * 8
    groups = 0 if d is None else -(-d.m // big) * -(-d.n // big) * math.prod(d.batch)
    work = 8 if target.compute_units and groups >= target.compute_units else 4
    shape = GpuShape(side, work, 16)
    while shape.work > 1 and _local_bytes(shape, itemsize) > target.local_mem:
        shape = GpuShape(side, shape.work // 2, shape.tk)
    while shape.tk > 1 and _local_bytes(shape, itemsize) > target.local_mem:
        shape = GpuShape(side, shape.work, shape.tk // 2)
    return shape


def _local_bytes(s: GpuShape, itemsize: int) -> int:
    return (s.block * (s.tk + 1) + s.tk * (s.block + 1)) * itemsize


def cpu_shape(target: GemmTarget, double: bool) -> CpuShape:
    """The register block for the target's vector width (a power of two up to 16)."""
    want = target.vector_width[1 if double else 0]
    vec = max(w for w in (1, 2, 4, 8, 16) if w <= max(1, want))
    shape = CpuShape(vec=vec)
    limit = target.private_limit
    while limit is not None and shape.private_bytes(8 if double else 4) > limit:
        if shape.blocks > 1:
            shape = dataclasses.replace(shape, blocks=shape.blocks // 2)
        elif shape.kc > 16:
            shape = dataclasses.replace(shape, kc=shape.kc // 2)
        else:
            break
    return shape


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


def _stage(d: GemmDims, s: GpuShape) -> list[str]:
    """Copy one k slab of each operand into __local memory, consecutive work-items reading
    consecutive elements of the operand's storage (loads outside read as 0)."""
    bm, tk, group = s.block, s.tk, s.side * s.side
    ar, ac = ("l % {0}", "l / {0}") if d.lhs.trans else ("l / {1}", "l % {1}")
    bq, bc = ("l % {1}", "l / {1}") if d.rhs.trans else ("l / {0}", "l % {0}")
    return [
        f"    for (int l = lid; l < {bm * tk}; l += {group}) {{",
        f"      const int r = {ar.format(bm, tk)}, q = {ac.format(bm, tk)};",
        "      const long ar = i0 + r, ac = p0 + q;",
        f"      As[r][q] = (ar < {d.m} && ac < {d.k}) ? a[{_element(d.lhs, 'ar', 'ac')}] : 0;",
        "    }",
        f"    for (int l = lid; l < {bm * tk}; l += {group}) {{",
        f"      const int q = {bq.format(bm, tk)}, c = {bc.format(bm, tk)};",
        "      const long br = p0 + q, bc = j0 + c;",
        f"      Bs[q][c] = (br < {d.k} && bc < {d.n}) ? bm[{_element(d.rhs, 'br', 'bc')}] : 0;",
        "    }"]


def _k_loop(d: GemmDims, t: str, s: GpuShape) -> list[str]:
    """Step through k: stage a slab of each operand, then accumulate outer products of
    register copies of its columns and rows."""
    return [
        f"  for (long p0 = 0; p0 < {d.k}; p0 += {s.tk}) {{",
        *_stage(d, s),
        "    barrier(CLK_LOCAL_MEM_FENCE);",
        f"    for (int q = 0; q < {s.tk}; ++q) {{",
        f"      {t} ra[{s.work}], rb[{s.work}];",
        f"      for (int w = 0; w < {s.work}; ++w) {{",
        f"        ra[w] = As[ti + w * {s.side}][q];",
        f"        rb[w] = Bs[q][tj + w * {s.side}];",
        "      }",
        f"      for (int wi = 0; wi < {s.work}; ++wi)",
        f"        for (int wj = 0; wj < {s.work}; ++wj)",
        "          acc[wi][wj] = fma(ra[wi], rb[wj], acc[wi][wj]);",
        "    }",
        "    barrier(CLK_LOCAL_MEM_FENCE);",
        "  }"]


def _gpu_gemm(name: str, d: GemmDims, t: str, s: GpuShape,
              offsets: tuple[str, str], n_batch: int) -> tuple[str, Launch]:
    """The tiled kernel's source and launch (dimension 0: columns, 1: rows, 2: batch)."""
    side, block = s.side, s.block
    lines = [
        f"__kernel __attribute__((reqd_work_group_size({side}, {side}, 1)))",
        (f"void {name}(__global {t}* restrict out, __global const {t}* restrict lhs, "
         f"__global const {t}* restrict rhs) {{"),
        f"  __local {t} As[{block}][{s.tk + 1}];",
        f"  __local {t} Bs[{s.tk}][{block + 1}];",
        f"  const int tj = get_local_id(0), ti = get_local_id(1), lid = ti * {side} + tj;",
        (f"  const long j0 = (long)get_group_id(0) * {block}, "
         f"i0 = (long)get_group_id(1) * {block};"),
        "  const long b = get_global_id(2);",
        f"  __global const {t}* a = lhs + {offsets[0]};",
        f"  __global const {t}* bm = rhs + {offsets[1]};",
        f"  {t} acc[{s.work}][{s.work}] = {{{{0}}}};",
        *_k_loop(d, t, s),
        f"  for (int wi = 0; wi < {s.work}; ++wi)",
        f"    for (int wj = 0; wj < {s.work}; ++wj) {{",
        f"      const long i = i0 + ti + wi * {side}, j = j0 + tj + wj * {side};",
        f"      if (i < {d.m} && j < {d.n}) out[b * {d.m * d.n}L + i * {d.n} + j] = acc[wi][wj];",
        "    }",
        "}"]
    groups = (-(-d.n // block) * side, -(-d.m // block) * side, n_batch)
    return "\n".join(lines), Launch(groups, (side, side, 1))


def lower_gemm(name: str, eqn: Eqn, target: GemmTarget | None = None) -> RenderedKernel:
    """The OpenCL C source and 3-D launch of one library call for `target` (None: a generic
    GPU); the form is "gemm" (tiled, GPU) or "gemm-cpu" (register blocks)."""
    d = gemm_dims(eqn)
    if d is None:
        raise ValueError(f"{name}: dot_general layout has no matrix view (pack it first)")
    return render_gemm(name, d, eqn.outvars[0].aval.dtype == dtypes.float64, target)


def render_gemm(name: str, d: GemmDims, double: bool,
                target: GemmTarget | None = None) -> RenderedKernel:
    """The kernel of the matmul `d` in float64 (`double`) or float32 for `target`."""
    target = target or GemmTarget()
    t = "double" if double else "float"
    n_batch = math.prod(d.batch)
    offsets = (_batch_offset(d.batch, d.lhs.batch_strides),
               _batch_offset(d.batch, d.rhs.batch_strides))
    if target.cpu:
        source, glob, local = cpu_gemm(name, d, t, cpu_shape(target, double), offsets, n_batch)
        return RenderedKernel(name, source, Launch(glob, local), "gemm-cpu")
    shape = gpu_shape(target, 8 if double else 4, d)
    source, launch = _gpu_gemm(name, d, t, shape, offsets, n_batch)
    return RenderedKernel(name, source, launch, "gemm")
