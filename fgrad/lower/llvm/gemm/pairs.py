"""bfloat16 products on AMX or AVX512_BF16: the GEMM over pairs of k steps.

In: a float32 dot_general whose operands are bfloat16 arrays (the schedule folded their
conversions into it and marked it `bf16_pairs`, schedule/gemm_layout.py). Out: the same
driver and tile loops as float32 (gemm/native.py, gemm/driver.py), over k / 2 steps whose
"element" is a 32-bit word holding a pair of bfloat16 values (k, k + 1). The micro-kernel
(`tile_products`) holds a 32 x 32 float32 C tile in four AMX tile registers and, per 16
pairs of k, loads two 16 x 32 tiles of A and two 32 x 16 of B and issues four `tdpbf16ps`
(16 x 16 x 32 products each); the sums then pass through the float32 micro-kernel's
store and epilogue code. Products of bfloat16 values are exact in float32, as in the
float32 GEMM between conversions this replaces; AMX adds them with round-to-nearest and
treats subnormal inputs and results as zero (it ignores MXCSR).

AVX512_BF16's `vdpbf16ps` was measured first on the machine this was built on (a 2-core
Intel Xeon with AMX): 1.86 G instructions/s on one core, half the rate of float32 FMAs
(7.5 G/s), so a pairs GEMM on it ran at 0.6x the float32 GEMM's speed; AMX is used instead.
On AMD's Zen 4, which has no AMX, it runs at the float32 FMA's rate, and the micro-kernel is
`vdpbf16ps` alone (`_dot_products`): 1024^3 at 1.9x the float32 GEMM's speed there. Like AMX
it reads and writes subnormal values as zero and rounds to nearest.

Packing, in words: A's slivers of 32 rows are stored row by row (a tile row is 16 pairs of
one matrix row), B's slivers of 32 columns pair by pair (a tile row is one pair step of 16
columns, AMX's layout for B). Where a pair lies in memory as one word (A stored plainly, B
stored transposed) the routines copy words; elsewhere they interleave two stored rows, 2q
and 2q + 1. Only products with an even k take this path, so no pair reaches past the
contraction; a k-slice whose pairs are not a multiple of 16 ends with narrower A tiles and
shorter B tiles (AMX's tile shapes are set at run time).
"""
from __future__ import annotations

import ctypes
import functools
import sys
from typing import Callable

from llvmlite import ir

from fgrad.core.ir import Eqn
from fgrad.lower.llvm import target
from fgrad.lower.llvm.gemm.native import I8P, I64, _c as c64, _libc, _loop as loop
from fgrad.lower.schedule.gemm_layout import GemmDims, gemm_dims

I16 = ir.IntType(16)
I32 = ir.IntType(32)
TILE_PAIRS = 16    # pairs of k per tile step (a tile row: 64 bytes)
PASSES = ((0, 12), (12, 12), (24, 8))   # (first row, rows) of vdpbf16ps's passes over a tile
_ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA, _SYS_ARCH_PRCTL = 0x1023, 18, 158


class NamedType(ir.Type):
    """An LLVM type that llvmlite has no class for, by its name (`x86_amx`: a tile
    register's value; `bfloat`): only passed to intrinsics and bitcast here."""

    def __init__(self, name: str):
        self.name = name

    def _to_string(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NamedType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


AMX, BFLOAT = NamedType("x86_amx"), NamedType("bfloat")


@functools.cache
def host_pairs_kind() -> str | None:
    """How bfloat16 products run in pairs here: "amx" where the CPU has AMX-BF16 (and
    AVX512_BF16) and the kernel lets this process use its tile registers (Linux asks each
    process to request them once; the request is made here, the first time a program could
    use them); "dot" on an AMD CPU with AVX512_BF16 and 512-bit vectors, whose `vdpbf16ps`
    runs at the float32 FMA's rate (Zen 4); None elsewhere (Intel's runs at half that rate
    on the Xeon this was measured on: module docstring)."""
    flags = target.features().split(",")
    if "+avx512bf16" not in flags or target.vector_bits() != 512:
        return None
    if "+amx-bf16" not in flags or "+amx-tile" not in flags:
        return "dot" if target.cpu_name().startswith("znver") else None
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        granted = libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) == 0
    except (OSError, AttributeError):
        return None
    return "amx" if granted else None


def host_has_pairs() -> bool:
    """Whether bfloat16 products run in pairs of k steps here (`host_pairs_kind`)."""
    return host_pairs_kind() is not None


def pairs_fit(d: GemmDims) -> bool:
    """Whether a product of bfloat16 operands with BLAS view `d` runs over pairs: an even
    k (no pair reaches past the contraction), and every pair of an operand stored along k
    on a 32-bit boundary (even leading dimensions and batch strides)."""
    along_k = [view.ld for view, contiguous in ((d.lhs, not d.lhs.trans),
                                                (d.rhs, d.rhs.trans)) if contiguous]
    strides = [*d.lhs.batch_strides, *d.rhs.batch_strides]
    return d.k % 2 == 0 and all(v % 2 == 0 for v in [*along_k, *strides])


def pair_sizes(d: GemmDims) -> tuple[int, int, int, tuple[int, ...], tuple[int, ...]]:
    """(k, lhs_ld, rhs_ld, lhs batch strides, rhs batch strides) of the driver's `dims` for
    a pairs product: k and the batch strides in pairs (32-bit words), a leading dimension in
    words where the packing copies words, in bfloat16 elements where it interleaves."""
    lhs_ld = d.lhs.ld if d.lhs.trans else d.lhs.ld // 2
    rhs_ld = d.rhs.ld // 2 if d.rhs.trans else d.rhs.ld
    return (d.k // 2, lhs_ld, rhs_ld, tuple(s // 2 for s in d.lhs.batch_strides),
            tuple(s // 2 for s in d.rhs.batch_strides))


def tile_products(b: ir.IRBuilder, kc: ir.Value, slivers: tuple[ir.Value, ir.Value],
                  scratch: ir.Value, lanes: int) -> list[list[ir.Value]]:
    """The 32 x 32 sums of one A sliver (32 rows x kc pairs, row by row) times one B sliver
    (kc pairs x 32 columns) as 32 rows of two float32 vectors: on AMX (`host_pairs_kind`)
    steps of 16 pairs through four AMX tiles (stored to `scratch`, 32 x 32 floats, and
    loaded back as vectors), then the pairs left (kc mod 16) with `vdpbf16ps` on the vectors
    (tiles of other shapes would need registers of their own: AMX has 8); elsewhere
    `vdpbf16ps` alone (`_dot_products`)."""
    if host_pairs_kind() != "amx":
        return _dot_products(b, kc, slivers, scratch, lanes)
    zero = _libc(b.module, "llvm.x86.tilezero.internal", AMX, [I16, I16])
    fn, before = b.function, b.block
    head, body, done = (fn.append_basic_block(f"t.{s}") for s in ("head", "body", "done"))
    initial = [b.call(zero, [ir.Constant(I16, 16), ir.Constant(I16, 64)]) for _ in range(4)]
    b.branch(head)
    b.position_at_end(head)
    p = b.phi(I64, name="tp")
    p.add_incoming(c64(0), before)
    sums = [b.phi(AMX, name=f"c{i}") for i in range(4)]
    for phi, value in zip(sums, initial, strict=True):
        phi.add_incoming(value, before)
    b.cbranch(b.icmp_signed("<=", b.add(p, c64(TILE_PAIRS)), kc), body, done)
    b.position_at_end(body)
    new = _tile_step(b, kc, slivers, p, sums)
    p.add_incoming(b.add(p, c64(TILE_PAIRS)), b.block)
    for phi, value in zip(sums, new, strict=True):
        phi.add_incoming(value, b.block)
    b.branch(head)
    b.position_at_end(done)
    store = _libc(b.module, "llvm.x86.tilestored64.internal", ir.VoidType(),
                  [I16, I16, I8P, I64, AMX])
    for i in (0, 1):
        for j in (0, 1):
            at = b.bitcast(b.gep(scratch, [c64(16 * 32 * i + 16 * j)]), I8P)
            b.call(store, [ir.Constant(I16, 16), ir.Constant(I16, 64), at, c64(128),
                           sums[2 * i + j]])
    vp = ir.VectorType(ir.FloatType(), lanes).as_pointer()
    accs = [[b.load(b.bitcast(b.gep(scratch, [c64(32 * r + lanes * v)]), vp), align=64)
             for v in range(32 // lanes)] for r in range(32)]
    return _vector_tail(b, kc, slivers, p, accs, lanes)


def _dot_products(b: ir.IRBuilder, kc: ir.Value, slivers: tuple[ir.Value, ir.Value],
                  scratch: ir.Value, lanes: int) -> list[list[ir.Value]]:
    """`tile_products` with `vdpbf16ps` only: passes of 12, 12 and 8 rows over the whole kc
    (24 accumulators, the B sliver's two vectors and a broadcast fit the 32 registers; 32
    rows at once would spill), each pass's sums stored to `scratch` and the tile loaded
    back as vectors."""
    a, bp = slivers
    vt = ir.VectorType(ir.FloatType(), lanes)
    zero = ir.Constant(vt, [0.0] * lanes)
    vectors = 32 // lanes
    vp = vt.as_pointer()

    def row_vector(r: int, v: int) -> ir.Value:
        return b.bitcast(b.gep(scratch, [c64(32 * r + lanes * v)]), vp)
    for first, height in PASSES:
        part = (b.gep(a, [b.mul(kc, c64(first))]), bp)
        start = [[zero] * vectors for _ in range(height)]
        sums = _vector_tail(b, kc, part, c64(0), start, lanes)
        for r, row in enumerate(sums):
            for v, value in enumerate(row):
                b.store(value, row_vector(first + r, v), align=64)
    return [[b.load(row_vector(r, v), align=64) for v in range(vectors)] for r in range(32)]


def _tile_step(b: ir.IRBuilder, kc: ir.Value, slivers: tuple[ir.Value, ir.Value],
               p: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
    """The four C tiles after 16 more pairs from pair p: A tiles of 16 rows x 16 words, B
    tiles of 16 pair rows x 16 columns."""
    module = b.module
    load = _libc(module, "llvm.x86.tileloadd64.internal", AMX, [I16, I16, I8P, I64])
    dot = _libc(module, "llvm.x86.tdpbf16ps.internal", AMX, [I16, I16, I16, AMX, AMX, AMX])
    a, bp = slivers
    rows, row_bytes = ir.Constant(I16, 16), ir.Constant(I16, 64)

    def tile(base: ir.Value, at: ir.Value, stride: ir.Value) -> ir.Value:
        return b.call(load, [rows, row_bytes, b.bitcast(b.gep(base, [at]), I8P), stride])
    a_tiles = [tile(a, b.add(p, b.mul(kc, c64(16 * h))), b.mul(kc, c64(4))) for h in (0, 1)]
    b_tiles = [tile(bp, b.add(b.mul(p, c64(32)), c64(16 * h)), c64(128)) for h in (0, 1)]
    return [b.call(dot, [rows, row_bytes, row_bytes, sums[2 * i + j], a_tiles[i],
                         b_tiles[j]]) for i in (0, 1) for j in (0, 1)]


def _vector_tail(b: ir.IRBuilder, kc: ir.Value, slivers: tuple[ir.Value, ir.Value],
                 start: ir.Value, accs: list[list[ir.Value]], lanes: int
                 ) -> list[list[ir.Value]]:
    """`accs` plus pairs [start, kc) with AVX512_BF16's `vdpbf16ps`: per pair, each row's
    A word broadcast against the B sliver's two vectors of pairs."""
    vt = ir.VectorType(ir.FloatType(), lanes)
    pairs_t = ir.VectorType(BFLOAT, 2 * lanes)
    dot = _libc(b.module, "llvm.x86.avx512bf16.dpbf16ps.512", vt, [vt, pairs_t, pairs_t])
    a, bp = slivers
    fn, before = b.function, b.block
    head, body, done = (fn.append_basic_block(f"v.{s}") for s in ("head", "body", "done"))
    b.branch(head)
    b.position_at_end(head)
    p = b.phi(I64, name="vp")
    p.add_incoming(start, before)
    phis = [[b.phi(vt) for _ in row] for row in accs]
    for row, values in zip(phis, accs, strict=True):
        for phi, value in zip(row, values, strict=True):
            phi.add_incoming(value, before)
    b.cbranch(b.icmp_signed("<", p, kc), body, done)
    b.position_at_end(body)
    vp = vt.as_pointer()
    columns = [b.bitcast(b.load(b.bitcast(b.gep(bp, [b.add(b.mul(p, c64(32)),
                                                          c64(lanes * v))]), vp), align=4),
                         pairs_t) for v in range(len(accs[0]))]
    new = []
    for r, row in enumerate(phis):
        word = b.load(b.gep(a, [b.add(b.mul(kc, c64(r)), p)]))
        splat = b.shuffle_vector(b.insert_element(ir.Constant(vt, ir.Undefined), word,
                                                  ir.Constant(I32, 0)),
                                 ir.Constant(vt, ir.Undefined),
                                 ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))
        pair = b.bitcast(splat, pairs_t)
        new.append([b.call(dot, [acc, pair, col]) for acc, col in zip(row, columns)])
    for row, values in zip(phis, new, strict=True):
        for phi, value in zip(row, values, strict=True):
            phi.add_incoming(value, b.block)
    p.add_incoming(b.add(p, c64(1)), b.block)
    b.branch(head)
    b.position_at_end(done)
    return [list(row) for row in phis]


def _pack_function(module: ir.Module, name: str) -> tuple[ir.Function, ir.IRBuilder]:
    """A packing routine `name(dest, base, i64 ld, i64 first, i64 limit, i64 q0, i64 kc)`
    (the pointers typed as the driver declares them) and a builder at its entry."""
    ptr = ir.FloatType().as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, *[I64] * 5]),
                     name=name)
    fn.args[0].add_attribute("noalias")
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))


def render_pair_rows(module: ir.Module, name: str, interleave: bool) -> ir.Function:
    """`name(i32* dest, base, i64 ld, i64 first, i64 limit, i64 q0, i64 kc)`: A's slivers
    of 32 rows, row by row: dest[t][i][p] = the pair (k = 2(q0 + p), + 1) of row
    first + 32t + i, zero past `limit`. A stored plainly (`interleave` False): base holds
    words, row r's pair q at r * ld + q; transposed: base holds bfloat16 values, k rows of
    ld, the pair (S[2q, r], S[2q + 1, r])."""
    fn, b = _pack_function(module, name)
    dest_f, base_f, ld, first, limit, q0, kc = fn.args
    dest = b.bitcast(dest_f, I32.as_pointer())
    count = b.sdiv(b.add(b.sub(limit, first), c64(31)), c64(32))
    vec = ir.VectorType(I32, TILE_PAIRS)

    def row(t: ir.Value, i: ir.Value) -> None:
        r = b.add(b.add(first, b.mul(t, c64(32))), i)
        out = b.gep(dest, [b.mul(b.add(b.mul(t, c64(32)), i), kc)], inbounds=True)
        with b.if_else(b.icmp_signed("<", r, limit)) as (inside, outside):
            with inside:
                if interleave:
                    _interleaved_row(b, out, base_f, ld, r, q0, kc)
                else:
                    words = b.gep(b.bitcast(base_f, I32.as_pointer()),
                                  [b.add(b.mul(r, ld), q0)], inbounds=True)
                    loop(b, c64(0), kc, TILE_PAIRS, lambda p: b.store(
                        b.load(b.bitcast(b.gep(words, [p]), vec.as_pointer()), align=4),
                        b.bitcast(b.gep(out, [p]), vec.as_pointer()), align=4), "rw")
            with outside:
                loop(b, c64(0), kc, TILE_PAIRS, lambda p: b.store(
                    ir.Constant(vec, [0] * TILE_PAIRS),
                    b.bitcast(b.gep(out, [p]), vec.as_pointer()), align=4), "rz")
    loop(b, c64(0), count, 1, lambda t: loop(b, c64(0), c64(32), 1,
                                             lambda i: row(t, i), "ri"), "rt")
    b.ret_void()
    return fn


def _interleaved_row(b: ir.IRBuilder, out: ir.Value, base_f: ir.Value, ld: ir.Value,
                     r: ir.Value, q0: ir.Value, kc: ir.Value) -> None:
    """Row r's pairs q0 .. q0 + kc of a transposed A (bfloat16, k rows of ld), one by one."""
    base = b.bitcast(base_f, I16.as_pointer())

    def pair(p: ir.Value) -> None:
        k = b.mul(b.add(q0, p), c64(2))
        low, high = (b.zext(b.load(b.gep(base, [b.add(b.mul(b.add(k, c64(h)), ld), r)],
                                          inbounds=True)), I32) for h in (0, 1))
        b.store(b.or_(low, b.shl(high, ir.Constant(I32, 16))), b.gep(out, [p], inbounds=True))
    loop(b, c64(0), kc, 1, pair, "rp")


def render_pair_interleave(module: ir.Module, name: str, width: int) -> ir.Function:
    """`name(i32* dest, i16* base, i64 ld, i64 first, i64 limit, i64 q0, i64 kc)`: slivers
    of `width` columns of a matrix S stored row-major (ld elements apart) whose rows are k:
    dest[t][p][w] = (S[2(q0 + p), c], S[2(q0 + p) + 1, c]) for c = first + t * width + w,
    zero past `limit` (gemm/pack.py's layout, pairs for elements). A whole sliver's step is
    two vector loads and one interleaving shuffle."""
    fn, b = _pack_function(module, name)
    dest_f, base_f, ld, first, limit, q0, kc = fn.args
    dest, base = b.bitcast(dest_f, I32.as_pointer()), b.bitcast(base_f, I16.as_pointer())
    count = b.sdiv(b.add(b.sub(limit, first), c64(width - 1)), c64(width))

    def row_at(p: ir.Value, half: int, col: ir.Value) -> ir.Value:
        row = b.add(b.mul(b.add(q0, p), c64(2)), c64(half))
        return b.gep(base, [b.add(b.mul(row, ld), col)], inbounds=True)

    def sliver(t: ir.Value) -> None:
        start = b.add(first, b.mul(t, c64(width)))
        out = b.gep(dest, [b.mul(t, b.mul(kc, c64(width)))], inbounds=True)
        whole = b.icmp_signed("<=", b.add(start, c64(width)), limit)
        with b.if_else(whole) as (then, otherwise):
            with then:
                loop(b, c64(0), kc, 1, lambda p: _interleaved_step(b, out, row_at, start, p,
                                                                   width), "qk")
            with otherwise:
                loop(b, c64(0), kc, 1, lambda p: _scalar_step(b, out, row_at, start, limit,
                                                              p, width), "qe")
    loop(b, c64(0), count, 1, sliver, "qs")
    b.ret_void()
    return fn


Rows = Callable[[ir.Value, int, ir.Value], ir.Value]   # (step, 0 or 1, column) -> address


def _interleaved_step(b: ir.IRBuilder, out: ir.Value, row_at: Rows, start: ir.Value,
                      p: ir.Value, width: int) -> None:
    vec = ir.VectorType(I16, width)
    low, high = (b.load(b.bitcast(row_at(p, h, start), vec.as_pointer()), align=2)
                 for h in (0, 1))
    order = [i // 2 + (width if i % 2 else 0) for i in range(2 * width)]
    pairs = b.shuffle_vector(low, high, ir.Constant(ir.VectorType(I32, 2 * width), order))
    at = b.gep(out, [b.mul(p, c64(width))], inbounds=True)
    b.store(pairs, b.bitcast(at, ir.VectorType(I16, 2 * width).as_pointer()), align=4)


def _scalar_step(b: ir.IRBuilder, out: ir.Value, row_at: Rows, start: ir.Value,
                 limit: ir.Value, p: ir.Value, width: int) -> None:
    def lane(w: ir.Value) -> None:
        col = b.add(start, w)
        inside = b.icmp_signed("<", col, limit)
        safe = b.select(inside, col, start)
        low, high = (b.zext(b.load(row_at(p, h, safe)), I32) for h in (0, 1))
        word = b.or_(low, b.shl(high, ir.Constant(I32, 16)))
        value = b.select(inside, word, ir.Constant(I32, 0))
        b.store(value, b.gep(out, [b.add(b.mul(p, c64(width)), w)], inbounds=True))
    loop(b, c64(0), c64(width), 1, lane, "qw")


def pairs_product(eqn: Eqn) -> bool:
    """Whether the GEMM multiplies this product of bfloat16 arrays (`PARAM` set by the
    schedule) in pairs: fgrad's own GEMM on a CPU with AVX512_BF16, no image read, a view
    that `pairs_fit`."""
    from fgrad.lower.llvm.gemm.native import uses_native_gemm
    dims = gemm_dims(eqn)
    return host_has_pairs() and dims is not None and "rhs_patches" not in eqn.params \
        and uses_native_gemm(eqn) and pairs_fit(dims)
