"""The CPU form of the OpenCL matmul: register blocks in vector types, no __local memory.

In: `GemmDims`, the element type and a `CpuShape`. Out: the OpenCL C of one kernel (plus
its inline helpers) and its launch. Each work-item computes one block of the output with
its accumulators in registers, reading the operands in place through their views:

- "axpy" form (rhs not transposed, or both transposed): the block is `rows` x (`vecs` x
  vector width); every k step loads `vecs` vectors of one operand's row and broadcasts one
  element per row of the other (both transposed: C^T = B^T A^T, stored transposed);
- "dot" form (lhs plain, rhs transposed, so both run along k): the block is `rows` x
  `cols` outputs, each a vector accumulator over k that is summed at the end.

Blocks at the matrices' edges take a guarded copy of the loop (rows clamped into range,
partial vectors loaded lane by lane, stores masked), so nothing is read or written out
of bounds.
"""
from __future__ import annotations

from dataclasses import dataclass

from fgrad.lower.schedule.gemm_layout import GemmDims

_LANES = "0123456789abcdef"
_UNALIGNED = "@VEC@"  # placeholder for the kernel's unaligned vector typedef
_CONTRACT = "  #pragma OPENCL FP_CONTRACT ON"  # a * b + c may fuse (into one FMA)


@dataclass(frozen=True)
class CpuShape:
    """Sizes of the CPU kernel: vector width (elements), rows and vectors per work-item in
    the axpy form, rows x cols in the dot form, and work-items per work-group."""

    vec: int = 8
    rows: int = 6
    vecs: int = 2
    dot_rows: int = 3
    dot_cols: int = 4
    group: int = 8


@dataclass(frozen=True)
class _Axpy:
    """The axpy form in kernel coordinates: I rows, J columns (vector direction).
    s(i, p) = s_i * i + s_p * p reads the broadcast operand, v(p, j) = ldv * p + j the
    vector operand, out(i, j) = o_i * i + o_j * j."""

    ni: int
    nj: int
    k: int
    s: str
    s_i: int
    s_p: int
    v: str
    ldv: int
    o_i: int
    o_j: int


def _axpy_of(d: GemmDims) -> _Axpy:
    """The axpy form of a matmul whose rhs is plain (or whose operands both are transposed:
    then I runs over n, J over m, and the output is stored transposed)."""
    if not d.rhs.trans:
        s_i, s_p = (1, d.lhs.ld) if d.lhs.trans else (d.lhs.ld, 1)
        return _Axpy(d.m, d.n, d.k, "a", s_i, s_p, "bm", d.rhs.ld, d.n, 1)
    return _Axpy(d.n, d.m, d.k, "bm", d.rhs.ld, 1, "a", d.lhs.ld, 1, d.n)


def _vec_load(t: str, w: int, base: str, full: bool, lim: str) -> str:
    """A vector of `w` elements from `base` on: one unaligned vector load when the block is
    full, else lane by lane with column indices clamped to `lim` (those lanes are never
    stored). (pocl calls vloadN and fma out of line; plain loads and contracted a * b + c
    compile to vmovups and vfmadd.)"""
    if full:
        return f"*(__global const {_UNALIGNED}*)({base})" if w > 1 else f"{base}[0]"
    lanes = ", ".join(f"({base})[{x} < {lim} ? {x} : {lim}]" for x in range(w))
    return f"({t}{w})({lanes})" if w > 1 else lanes


def _axpy_loop(f: _Axpy, t: str, c: CpuShape, full: bool) -> list[str]:
    """Declarations and the k loop of one axpy block at (i0, j0)."""
    tv = f"{t}{c.vec}" if c.vec > 1 else t
    acc = [f"c{r}_{v}" for r in range(c.rows) for v in range(c.vecs)]
    lines = [f"  {tv} {', '.join(f'{a} = 0' for a in acc)};"]
    for r in range(c.rows):
        row = f"i0 + {r}" if full else f"i0 + {r} < {f.ni} ? i0 + {r} : {f.ni - 1}"
        lines.append(f"  __global const {t}* s{r} = s + ({row}) * {f.s_i};")
    lines += [f"  __global const {t}* vp = v + j0;",
              f"  for (long p = 0; p < {f.k}; ++p, vp += {f.ldv}) {{"]
    for v in range(c.vecs):
        lim = f"{f.nj - 1}L - j0 - {v * c.vec}"
        lines.append(f"    const {tv} v{v} = "
                     f"{_vec_load(t, c.vec, f'vp + {v * c.vec}', full, lim)};")
    for r in range(c.rows):
        lines.append(f"    const {tv} a{r} = ({tv})(s{r}[p * {f.s_p}]);")
        lines += [f"    c{r}_{v} = a{r} * v{v} + c{r}_{v};" for v in range(c.vecs)]
    return [*lines, "  }"]


def _axpy_store(f: _Axpy, c: CpuShape, full: bool) -> list[str]:
    """Stores of one axpy block: whole vectors when full and the output runs along J."""
    lines = []
    for r in range(c.rows):
        for v in range(c.vecs):
            j = f"j0 + {v * c.vec}"
            if full and f.o_j == 1 and c.vec > 1:
                lines.append(f"  *(__global {_UNALIGNED}*)(o + (i0 + {r}) * {f.o_i} + {j}) = "
                             f"c{r}_{v};")
                continue
            for x in range(c.vec):
                lane = f"c{r}_{v}.s{_LANES[x]}" if c.vec > 1 else f"c{r}_{v}"
                at = f"o[(i0 + {r}) * {f.o_i} + ({j} + {x}) * {f.o_j}] = {lane};"
                guard = f"i0 + {r} < {f.ni} && {j} + {x} < {f.nj}"
                lines.append(f"  {at}" if full else f"  if ({guard}) {at}")
    return lines


def _axpy_helpers(name: str, f: _Axpy, t: str, c: CpuShape) -> list[str]:
    """The full-block and edge-block functions of the axpy form."""
    lines = []
    for full, tag in ((True, "full"), (False, "edge")):
        lines += [f"inline void {name}_{tag}(__global {t}* restrict o, "
                  f"__global const {t}* restrict s, __global const {t}* restrict v, "
                  f"const long i0, const long j0) {{", _CONTRACT,
                  *_axpy_loop(f, t, c, full), *_axpy_store(f, c, full), "}", ""]
    return lines


def _dot_helper(name: str, d: GemmDims, t: str, c: CpuShape) -> list[str]:
    """The dot-form block function: rows of lhs and rows of rhs^T, both contiguous in k,
    multiplied vector by vector (rows and columns clamped into range), summed at the end."""
    w, tv = c.vec, (f"{t}{c.vec}" if c.vec > 1 else t)
    pairs = [(r, q) for r in range(c.dot_rows) for q in range(c.dot_cols)]
    lines = [f"inline void {name}_dot(__global {t}* restrict o, __global const {t}* restrict "
             f"a, __global const {t}* restrict bm, const long i0, const long j0) {{", _CONTRACT,
             f"  {tv} {', '.join(f'c{r}_{q} = 0' for r, q in pairs)};"]
    for r in range(c.dot_rows):
        row = f"(i0 + {r} < {d.m} ? i0 + {r} : {d.m - 1})"
        lines.append(f"  __global const {t}* a{r} = a + {row} * {d.lhs.ld};")
    for q in range(c.dot_cols):
        col = f"(j0 + {q} < {d.n} ? j0 + {q} : {d.n - 1})"
        lines.append(f"  __global const {t}* b{q} = bm + {col} * {d.rhs.ld};")
    body = d.k - d.k % w
    load = (lambda p, x: f"*(__global const {_UNALIGNED}*)({x} + {p})") if w > 1 \
        else (lambda p, x: f"{x}[{p}]")
    lines += [f"  for (long p = 0; p < {body}; p += {w}) {{",
              *(f"    const {tv} x{r} = {load('p', f'a{r}')};" for r in range(c.dot_rows)),
              *(f"    const {tv} y{q} = {load('p', f'b{q}')};" for q in range(c.dot_cols)),
              *(f"    c{r}_{q} = x{r} * y{q} + c{r}_{q};" for r, q in pairs),
              "  }"]
    for r, q in pairs:
        terms = " + ".join(f"c{r}_{q}.s{_LANES[x]}" for x in range(w)) if w > 1 else f"c{r}_{q}"
        lines += [f"  {t} t{r}_{q} = {terms};",
                  f"  for (long p = {body}; p < {d.k}; ++p) "
                  f"t{r}_{q} = a{r}[p] * b{q}[p] + t{r}_{q};",
                  f"  if (i0 + {r} < {d.m} && j0 + {q} < {d.n}) "
                  f"o[(i0 + {r}) * {d.n} + j0 + {q}] = t{r}_{q};"]
    return [*lines, "}", ""]


def _blocks(total: int, size: int) -> int:
    return -(-total // size)


def cpu_gemm(name: str, d: GemmDims, t: str, c: CpuShape, offsets: tuple[str, str],
             n_batch: int) -> tuple[str, tuple[int, int, int], tuple[int, int, int]]:
    """The OpenCL C (helpers and kernel), global size and local size of the CPU matmul of
    `d` in element type `t`; `offsets`: the lhs and rhs batch offsets of entry `b`."""
    dot = d.lhs.trans is False and d.rhs.trans is True
    if dot:
        ni, nj, bi, bj = d.m, d.n, c.dot_rows, c.dot_cols
        helpers = _dot_helper(name, d, t, c)
        call = [f"  {name}_dot(o, a, bm, i0, j0);"]
    else:
        f = _axpy_of(d)
        ni, nj, bi, bj = f.ni, f.nj, c.rows, c.vecs * c.vec
        helpers = _axpy_helpers(name, f, t, c)
        args = f"o, {f.s}, {f.v}, i0, j0"
        call = [f"  if (i0 + {bi} <= {ni} && j0 + {bj} <= {nj}) {name}_full({args});",
                f"  else {name}_edge({args});"]
    gi, gj = _blocks(ni, bi), _blocks(nj, bj)
    kernel = [f"__kernel __attribute__((reqd_work_group_size({c.group}, 1, 1)))",
              (f"void {name}(__global {t}* restrict out, __global const {t}* restrict lhs, "
               f"__global const {t}* restrict rhs) {{"),
              "  const long ib = get_global_id(0), jb = get_global_id(1), b = get_global_id(2);",
              f"  if (ib >= {gi}) return;",
              f"  const long i0 = ib * {bi}, j0 = jb * {bj};",
              f"  __global {t}* o = out + b * {d.m * d.n}L;",
              f"  __global const {t}* a = lhs + {offsets[0]};",
              f"  __global const {t}* bm = rhs + {offsets[1]};",
              *call, "}"]
    glob = (_blocks(gi, c.group) * c.group, gj, n_batch)
    vec = f"{name}_vec"
    typedef = [f"typedef {t}{c.vec} {vec} __attribute__((aligned({8 if t == 'double' else 4})));"]
    source = "\n".join(typedef * (c.vec > 1) + helpers + kernel).replace(_UNALIGNED, vec)
    return source, glob, (c.group, 1, 1)
