"""The CPU form of the OpenCL matmul: register blocks in vector types, no __local memory.

In: `GemmDims`, the element type and a `CpuShape`. Out: the OpenCL C of one kernel (plus
its inline helper) and its launch.

out (m x n) = S (m x k) @ V (k x n), S the lhs and V the rhs, each read through its view.
A work-item owns `blocks` x `rows` rows and `panels` panels of `vecs` vectors of columns,
and steps through k in slabs of `kc`. Per slab it copies S's slab into private memory when
S runs along m (a transposed lhs; else S is read in place, row by row), and per panel the
slab of V: contiguous, zeros past n, w x w tiles transposed in registers when V runs
along k. Each block of `rows` rows then runs the register kernel: rows x vecs vector
accumulators, one broadcast element of S times one vector of V per multiply-add, partial
sums kept in the output between slabs. Rows past m are clamped (read, never stored),
columns past n are zeros in the copy, stores are guarded at the edges: nothing outside
the operands is read or written. Consecutive work-items take consecutive panels of the
same rows, so S's rows stay in cache while V streams.

pocl (3.0, LLVM 14) calls vloadN, vstoreN and fma out of line, so vectors are moved by
plain unaligned vector loads and stores, and a * b + c is contracted (FP_CONTRACT ON,
inside the helper only) into one fused multiply-add.
"""
from __future__ import annotations

from dataclasses import dataclass

from fgrad.lower.schedule.gemm_layout import GemmDims

_VEC = "@VEC@"  # placeholder for the kernel's unaligned vector typedef
_LANES = "0123456789abcdef"


@dataclass(frozen=True)
class CpuShape:
    """Sizes of the CPU kernel: vector width (elements), rows and vectors of the register
    block, row blocks and column panels per work-item, the k slab, and work-items per
    work-group."""

    vec: int = 8
    rows: int = 6
    vecs: int = 2
    blocks: int = 16
    panels: int = 4
    kc: int = 256
    group: int = 1

    @property
    def width(self) -> int:
        """Columns per panel (one register block wide)."""
        return self.vec * self.vecs

    @property
    def span(self) -> int:
        """Columns per work-item: `panels` panels of `width`."""
        return self.width * self.panels

    @property
    def height(self) -> int:
        """Rows per work-item."""
        return self.rows * self.blocks

    def private_bytes(self, itemsize: int) -> int:
        """Bytes of a work-item's private arrays: both slabs and the block being drained."""
        return (self.kc * (self.height + self.width) + self.rows * self.width) * itemsize


@dataclass(frozen=True)
class _Axpy:
    """The matmul as the kernel reads it: ni x nj outputs (row-major) over k; S(i, p) at
    s_i * i + s_p * p of operand `s`, V(p, j) at v_p * p + v_j * j of operand `v`."""

    ni: int
    nj: int
    k: int
    s: str
    s_i: int
    s_p: int
    v: str
    v_p: int
    v_j: int


def _axpy_of(d: GemmDims) -> _Axpy:
    """How the kernel reads the operands of the matmul `d` (see the module docstring)."""
    a_ld, b_ld = d.lhs.ld, d.rhs.ld
    s_i, s_p = (1, a_ld) if d.lhs.trans else (a_ld, 1)
    v_p, v_j = (1, b_ld) if d.rhs.trans else (b_ld, 1)
    return _Axpy(d.m, d.n, d.k, "a", s_i, s_p, "bm", v_p, v_j)


def _pack_v(f: _Axpy, t: str, c: CpuShape) -> list[str]:
    """Copy V[kc0 : kc0 + kn, j0 : j0 + width] into pv (zeros past n): whole vectors when the
    panel is full and V runs along n, else element by element down V's storage order."""
    w, nv = c.vec, c.vecs
    general = [f"    for (int x = 0; x < {c.width}; ++x) {{",
               f"      const long j = j0 + x < {f.nj} ? j0 + x : {f.nj - 1};",
               f"      __global const {t}* src = v + kc0 * {f.v_p} + j * {f.v_j};",
               f"      for (int p = 0; p < kn; ++p) "
               f"pvs[p * {c.width} + x] = j0 + x < {f.nj} ? src[p * {f.v_p}] : 0;",
               "    }"]
    if w == 1 or (f.v_j != 1 and f.v_p != 1):
        return general
    if f.v_j != 1:
        return _pack_v_transposed(f, t, c, general)
    loads = [f"pv[p * {nv} + {x}] = *(__global const {_VEC}*)(src + {x * w});"
             for x in range(nv)]
    return [f"  if (j0 + {c.width} <= {f.nj}) {{",
            "    for (int p = 0; p < kn; ++p) {",
            f"      __global const {t}* src = v + (kc0 + p) * {f.v_p} + j0;",
            *(f"      {x}" for x in loads),
            "    }",
            "  } else {", *general, "  }"]


def _pack_v_transposed(f: _Axpy, t: str, c: CpuShape, general: list[str]) -> list[str]:
    """The V copy when V runs along k (its columns are contiguous): w x w tiles, w columns
    loaded as vectors along k and transposed in registers; the k tail element by element."""
    w, tv = c.vec, f"{t}{c.vec}"
    tile = []
    for g in range(c.vecs):
        tile.append(f"      __global const {t}* src{g} = v + kc0 + p + (j0 + {g * w}) * "
                    f"{f.v_j};")
        tile += [f"      const {tv} r{g}_{x} = *(__global const {_VEC}*)(src{g} + {x * f.v_j});"
                 for x in range(w)]
        for q in range(w):
            lanes = ", ".join(f"r{g}_{x}.s{_LANES[q]}" for x in range(w))
            tile.append(f"      pv[(p + {q}) * {c.vecs} + {g}] = ({tv})({lanes});")
    return [f"  if (j0 + {c.width} <= {f.nj}) {{",
            "    int p = 0;",
            f"    for (; p + {w} <= kn; p += {w}) {{", *tile, "    }",
            "    for (; p < kn; ++p)",
            f"      for (int x = 0; x < {c.width}; ++x) "
            f"pvs[p * {c.width} + x] = v[kc0 + p + (j0 + x) * {f.v_j}];",
            "  } else {", *general, "  }"]


def _pack_s(f: _Axpy, t: str, c: CpuShape) -> list[str]:
    """Copy S[i0 : i0 + height, kc0 : kc0 + kn] (S runs along m) into ps, p-major (rows past
    m read as row m - 1)."""
    h, w = c.height, c.vec
    lines = ["  for (int p = 0; p < kn; ++p) {",
             f"    __global const {t}* src = s + (kc0 + p) * {f.s_p};"]
    if w > 1 and h % w == 0:
        lines += [f"    if (i0 + {h} <= {f.ni}) {{",
                  *(f"      *(__private {_VEC}*)(ps + p * {h} + {x * w}) = "
                    f"*(__global const {_VEC}*)(src + i0 + {x * w});" for x in range(h // w)),
                  "      continue;", "    }"]
    return [*lines, f"    for (int x = 0; x < {h}; ++x) ps[p * {h} + x] = "
            f"src[i0 + x < {f.ni} ? i0 + x : {f.ni - 1}];", "  }"]


def _c_io(f: _Axpy, c: CpuShape, load: bool) -> list[str]:
    """Load (partial sums) or store the accumulators of the block at (r0, j0): whole vectors
    when the block is full, else element by element, guarded."""
    acc = [(r, v) for r in range(c.rows) for v in range(c.vecs)]
    at = f"(r0 + {{r}}) * {f.nj} + j0 + {{x}}"
    if load:
        vec_io = [f"c{r}_{v} = *(__global {_VEC}*)(o + {at.format(r=r, x=v * c.vec)});"
                  for r, v in acc]
    else:
        vec_io = [f"*(__global {_VEC}*)(o + {at.format(r=r, x=v * c.vec)}) = c{r}_{v};"
                  for r, v in acc]
    elem = f"o[(r0 + r) * {f.nj} + j0 + x]"
    guard = f"r0 + r < {f.ni} && j0 + x < {f.nj}"
    fill = [f"tmp[{r}][{v}] = c{r}_{v};" for r, v in acc]
    drain = [f"c{r}_{v} = tmp[{r}][{v}];" for r, v in acc]
    loop = [f"for (int r = 0; r < {c.rows}; ++r)",
            f"  for (int x = 0; x < {c.width}; ++x)",
            (f"    tmps[r * {c.width} + x] = {guard} ? {elem} : 0;" if load
             else f"    if ({guard}) {elem} = tmps[r * {c.width} + x];")]
    slow = (loop + drain) if load else (fill + loop)
    if c.vec == 1:
        return [f"    {x}" for x in slow]
    full = f"r0 + {c.rows} <= {f.ni} && j0 + {c.width} <= {f.nj}"
    return [f"    if ({full}) {{", *(f"      {x}" for x in vec_io), "    } else {",
            *(f"      {x}" for x in slow), "    }"]


def _block(f: _Axpy, t: str, c: CpuShape, packed_s: bool) -> list[str]:
    """The register kernel of one block of rows at r0 over the slab (accumulating)."""
    tv = f"{t}{c.vec}" if c.vec > 1 else t
    acc = [(r, v) for r in range(c.rows) for v in range(c.vecs)]
    lines = [f"  for (int rb = 0; rb < {c.blocks}; ++rb) {{",
             f"    const long r0 = i0 + rb * {c.rows};",
             f"    if (r0 >= {f.ni}) break;",
             f"    {tv} {', '.join(f'c{r}_{v} = 0' for r, v in acc)};",
             "    if (kc0 > 0) {", *_c_io(f, c, True), "    }"]
    if packed_s:
        elem = [f"ps[p * {c.height} + rb * {c.rows} + {r}]" for r in range(c.rows)]
    else:
        for r in range(c.rows):
            row = f"r0 + {r} < {f.ni} ? r0 + {r} : {f.ni - 1}"
            lines.append(f"    __global const {t}* s{r} = s + ({row}) * {f.s_i} + kc0 * {f.s_p};")
        elem = [f"s{r}[p * {f.s_p}]" for r in range(c.rows)]
    lines += ["    for (int p = 0; p < kn; ++p) {",
              *(f"      const {tv} v{v} = pv[p * {c.vecs} + {v}];" for v in range(c.vecs))]
    for r in range(c.rows):
        lines.append(f"      const {tv} a{r} = ({tv})({elem[r]});")
        lines += [f"      c{r}_{v} = a{r} * v{v} + c{r}_{v};" for v in range(c.vecs)]
    return [*lines, "    }", *_c_io(f, c, False), "  }"]


def _body(name: str, f: _Axpy, t: str, c: CpuShape) -> list[str]:
    """The work-item's function: for each k slab, pack, then run its row blocks."""
    tv = f"{t}{c.vec}" if c.vec > 1 else t
    packed_s = f.s_p != 1 and f.s_i == 1  # S runs along m: copy its slab
    kc = max(1, min(c.kc, f.k))
    lines = [f"inline void {name}_panel(__global {t}* restrict o, __global const {t}* "
             f"restrict s, __global const {t}* restrict v, const long i0, const long jw) {{",
             "  #pragma OPENCL FP_CONTRACT ON",
             f"  {tv} pv[{kc * c.vecs}];",
             f"  __private {t}* pvs = (__private {t}*)pv;",
             f"  {tv} tmp[{c.rows}][{c.vecs}];",
             f"  __private {t}* tmps = (__private {t}*)tmp;"]
    if packed_s:
        lines.append(f"  {t} ps[{kc * c.height}];")
    lines += [f"  for (long kc0 = 0; kc0 < {f.k}; kc0 += {kc}) {{",
              f"  const int kn = {f.k} - kc0 < {kc} ? {f.k} - kc0 : {kc};"]
    if packed_s:
        lines += _pack_s(f, t, c)
    lines += [f"  for (int jp = 0; jp < {c.panels}; ++jp) {{",
              f"  const long j0 = jw + jp * {c.width};",
              f"  if (j0 >= {f.nj}) break;",
              *_pack_v(f, t, c), *_block(f, t, c, packed_s), "  }"]
    return [*lines, "  }", *_zero_fill(f, c), "}", ""]


def _zero_fill(f: _Axpy, c: CpuShape) -> list[str]:
    """With k = 0 there is no slab: store zeros."""
    if f.k:
        return []
    return [f"  for (int r = 0; r < {c.height}; ++r)",
            f"    for (int x = 0; x < {c.span}; ++x)",
            f"      if (i0 + r < {f.ni} && jw + x < {f.nj}) "
            f"o[(i0 + r) * {f.nj} + jw + x] = 0;"]


def _blocks(total: int, size: int) -> int:
    return -(-total // size)


def cpu_gemm(name: str, d: GemmDims, t: str, c: CpuShape, offsets: tuple[str, str],
             n_batch: int) -> tuple[str, tuple[int, int, int], tuple[int, int, int]]:
    """The OpenCL C (helper and kernel), global size and local size of the CPU matmul of
    `d` in element type `t`; `offsets`: the lhs and rhs batch offsets of entry `b`."""
    f = _axpy_of(d)
    gi, gj = _blocks(f.ni, c.height), _blocks(f.nj, c.span)
    kernel = [f"__kernel __attribute__((reqd_work_group_size({c.group}, 1, 1)))",
              (f"void {name}(__global {t}* restrict out, __global const {t}* restrict lhs, "
               f"__global const {t}* restrict rhs) {{"),
              "  const long jb = get_global_id(0), ib = get_global_id(1), b = get_global_id(2);",
              f"  if (jb >= {gj}) return;",
              f"  __global const {t}* a = lhs + {offsets[0]};",
              f"  __global const {t}* bm = rhs + {offsets[1]};",
              f"  {name}_panel(out + b * {d.m * d.n}L, {f.s}, {f.v}, ib * {c.height}, "
              f"jb * {c.span});",
              "}"]
    vec = f"{name}_vec"
    size = 8 if t == "double" else 4
    typedef = [f"typedef {t}{c.vec} {vec} __attribute__((aligned({size})));"] * (c.vec > 1)
    source = "\n".join(typedef + _body(name, f, t, c) + kernel).replace(_VEC, vec)
    glob = (_blocks(gj, c.group) * c.group, gi, n_batch)
    return source, glob, (c.group, 1, 1)
