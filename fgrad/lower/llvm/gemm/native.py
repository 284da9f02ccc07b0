"""fgrad's own GEMM for the llvm backend: packed panels and a register-blocked micro-kernel.

In: a float32/float64 (or int32) element type. Out: the shared routines every product calls, the
micro-kernel and four packing routines (`shared_routines`); the loops that call them are the
shared driver of gemm/driver.py. Also: which dot_generals this GEMM computes
(`native_gemm_applies`) and which kernels it runs inside as epilogues (`epilogue_fits`).

Structure (GotoBLAS/BLIS): for each NC-wide column block and KC-deep slice of the
contraction, B's slice is packed into NR-wide slivers (padded at the right edge); for
each MC-tall block of this call's rows, A's slice is packed into MR-tall slivers; the
micro-kernel multiplies one A sliver by one B sliver into an MR x NR tile held in vector
registers (per step of k: NR/L vector loads of B, MR broadcasts of A, 2*MR FMAs) and adds
the tile to C (stores it on the first slice). Edge tiles are written through a small stack
tile with vector loads and stores masked to their columns: the last row and column of
tiles pay little for their partial sizes. Transposed operands and
leading dimensions are read by the packing loops; no copy kernel runs before the call.

Tile sizes come from the vector width `target.vector_bits()` (L lanes): NR = 2L; MR = 6 with
16 vector registers (12 accumulators + 2 B vectors + 1 broadcast), 12 with AVX-512's 32.
KC x NR of B stays in L1 where it fits (else deeper slices: `slice_depth`), MC x KC of A in
L2, KC x NC of B in L3. The packing buffers are one heap block per call and thread (never
the stack: worker threads' stacks are small), kept between calls (gemm/scratch.py).
"""
from __future__ import annotations

import functools
from typing import Callable, NamedTuple, Sequence

from llvmlite import ir

from fgrad.core.dtypes import dtypes
from fgrad.core.ir import Eqn
from fgrad.lower.kernel.ir import Expr, Kernel, Load, Loop, Op, Store
from fgrad.lower.llvm import target
from fgrad.lower.llvm.gemm.scratch import declared
from fgrad.lower.schedule.gemm_layout import PAIRS_PARAM, gemm_dims

I1 = ir.IntType(1)
I64 = ir.IntType(64)
I8P = ir.IntType(8).as_pointer()
FLOAT_TYPES = {dtypes.float32: (ir.FloatType(), 4), dtypes.float64: (ir.DoubleType(), 8)}
# every dtype the GEMM computes: int32 with wrapping products and sums (NumPy's int32 matmul)
GEMM_TYPES = {**FLOAT_TYPES, dtypes.int32: (ir.IntType(32), 4)}
KC = 256
K_UNROLL = 4   # k steps per trip of the micro-kernel's main loop (then one at a time)
MC_TARGET = 144
# The micro-kernel prefetches its C tile when its k loop is at least this long: a shorter
# one (W8's per-example outer products have k = 1) reaches the tile before the lines could
# arrive (measured either way within noise there: 0.98x, in-process A/B).
PREFETCH_MIN_K = 16
NC = 2048
DEEP_KC = 1024   # the deepest slice where a B sliver is read from L2 anyway (slice_depth)


@functools.cache
def slice_depth(dtype_bytes: int, image: bool = False, pairs: bool = False) -> int:
    """KC, the depth of the contraction's slices, for a product of `dtype_bytes` elements
    (an implicit GEMM's `image` and bfloat16 `pairs` keep KC: the conv pack's stack arrays
    are KC long). KC where a B sliver (KC x NR) fits in 3/4 of the L1 data cache; where it
    does not, it streams from L2 whatever KC is, and deeper slices (the deepest power of two
    up to DEEP_KC whose MC x KC block of A fits in 3/4 of L2) make fewer passes over C: on
    a 2-core Zen 4 (32 KiB L1d, 1 MiB L2), float32 1024^3 10.33 -> 10.15 ms, 2048^3 88.6 ->
    82.7, W5's step 5.98 -> 5.83 ms (in-process, interleaved with JAX)."""
    from fgrad.lower.kernel.streaming import cache_bytes
    mr, nr, _ = tile_shape(dtype_bytes)
    l1, l2 = cache_bytes(1), cache_bytes(2)
    if image or pairs or l1 is None or l2 is None or 4 * KC * nr * dtype_bytes <= 3 * l1:
        return KC
    depth, block_rows = DEEP_KC, max(mr, MC_TARGET // mr * mr)
    while depth > KC and 4 * block_rows * depth * dtype_bytes > 3 * l2:
        depth //= 2
    return depth


def tile_shape(dtype_bytes: int, vector_bits: int | None = None,
               pairs: bool = False) -> tuple[int, int, int]:
    """(MR, NR, lanes) of the micro-kernel for this element size and vector width; with
    `pairs`, of the bfloat16 AMX micro-kernel (2 x 2 tiles of 16 x 16: gemm/pairs.py)."""
    bits = target.vector_bits() if vector_bits is None else vector_bits
    lanes = max(bits // (8 * dtype_bytes), 1)
    if pairs:
        return 32, 32, lanes
    return (12 if bits >= 512 else 6), 2 * lanes, lanes


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _loop(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value, step: int | ir.Value,
          body: Callable[[ir.Value], None], label: str,
          flags: tuple[str, ...] = ("nsw",)) -> ir.Instruction:
    """for (i = lo; i < hi; i += step) body(i), emitted at the builder's position (the
    step's add with `flags`); returns the back edge's branch (for loop metadata)."""
    fn = b.function
    before = b.block
    head = fn.append_basic_block(f"{label}.head")
    inner = fn.append_basic_block(f"{label}.body")
    done = fn.append_basic_block(f"{label}.done")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64, name=label)
    i.add_incoming(lo, before)
    b.cbranch(b.icmp_signed("<", i, hi), inner, done)
    b.position_at_end(inner)
    body(i)
    stride = step if isinstance(step, ir.Value) else _c(step)
    i.add_incoming(b.add(i, stride, flags=flags), b.block)
    backedge = b.branch(head)
    b.position_at_end(done)
    return backedge


def _smin(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


_libc = declared   # gemm/scratch.py's: the same declaration, one definition


# The register epilogues the micro-kernel applies on a product's last k-slice (0: none);
# `register_epilogue` recognizes the kernels they compute. "bias" adds a vector per column,
# "residual" a matrix of the product's shape (read at the tile's own elements).
EPILOGUE_MODES = {"bias": 1, "bias_relu": 2, "relu": 3, "residual": 4, "residual_relu": 5}
RESIDUAL_MODES = (EPILOGUE_MODES["residual"], EPILOGUE_MODES["residual_relu"])


def _mode_in(b: ir.IRBuilder, mode: ir.Value, codes: Sequence[int]) -> ir.Value:
    """Whether the i64 `mode` is one of `codes`."""
    return functools.reduce(b.or_, [b.icmp_signed("==", mode, _c(code)) for code in codes])


class _Mode(NamedTuple):
    """What a register epilogue's `mode` asks for, as i1 values tested once at the
    micro-kernel's entry (tested per vector, they were a quarter of its IR and of LLVM's
    time on it): any epilogue, an addend (bias or residual), relu, a residual; and the
    addend's row stride (ldc for a residual, else 0: the bias row)."""
    active: ir.Value
    adds: ir.Value
    relu: ir.Value
    residual: ir.Value
    addend_stride: ir.Value

    @classmethod
    def test(cls, b: ir.IRBuilder, mode: ir.Value, ldc: ir.Value) -> "_Mode":
        """The flags of the i64 `mode` (`EPILOGUE_MODES`, 0 for none)."""
        residual = _mode_in(b, mode, RESIDUAL_MODES)
        return cls(b.icmp_signed("!=", mode, _c(0)),
                   _mode_in(b, mode, [c for n, c in EPILOGUE_MODES.items() if n != "relu"]),
                   _mode_in(b, mode, [c for n, c in EPILOGUE_MODES.items()
                                      if n.endswith("relu")]),
                   residual, b.select(residual, ldc, _c(0)))


def aligned_alloc(b: ir.IRBuilder, nbytes: ir.Value) -> ir.Value:
    """libc `aligned_alloc(64, nbytes rounded up to 64)` (freed with `free`): packed panels
    start on a cache line, so no vector load of the micro-kernel straddles two (malloc's
    16-byte alignment split every other 32-byte load of B across lines)."""
    fn = _libc(b.module, "aligned_alloc", I8P, [I64, I64])
    return b.call(fn, [_c(64), b.and_(b.add(nbytes, _c(63)), _c(-64))])


def micro_args(fp: ir.Type) -> list[ir.Type]:
    """The micro-kernel's parameter types (`_Routines.micro_kernel`)."""
    return [I64, fp, fp, fp, I64, I64, I64, I1, I64, fp, fp]


ROUTINES_VERSION = 25   # bump when the shared routines' code changes (their symbols)


class _Routines:
    """The shared GEMM routines of one dtype at the host's width, emitted into their own
    modules, compiled once and cached like kernels; each program's gemm
    drivers only declare them (`routine_texts`). `micro(kc, a, b, c, ldc, rows, cols, first)` and
    `pack_{a,b}_{n,t}(dest, base, ld, first, limit, k0, kc)` (module docstring)."""

    def __init__(self, module: ir.Module, ft: ir.Type, size: int, pairs: bool = False):
        self.module, self.ft, self.size, self.pairs = module, ft, size, pairs
        self.fp = ft.as_pointer()
        self.mr, self.nr, self.lanes = tile_shape(size, pairs=pairs)
        self.vt = ir.VectorType(ft, self.lanes)
        self.prefix = routine_prefix(ft, size, pairs)

    # ------------------------------------------------------------------ micro-kernel

    def micro_kernel(self) -> ir.Function:
        """`void micro(i64 kc, T* a, T* b, T* c, i64 ldc, i64 height, i64 cols, i1 first,
        i64 mode, T* out2, T* bias)`: a column of MR x NR tiles, C[0:height, 0:cols] (row
        stride ldc) = (first ? 0 : C) + a @ b, from the packed A slivers `a` (MR * kc
        elements apart) and one B sliver `b`; with `mode` (`EPILOGUE_MODES`, on the last
        k-slice) each tile, plus bias[col] (or, in a residual mode, bias[row * ldc + col])
        and/or through relu, is also stored into out2 (same layout), in registers. `bias`
        points at the column's first element of n readable ones (a residual mode: its first
        element in a matrix laid out as C) even when the mode adds none (its loads are then
        discarded). One call per column of tiles decodes the mode once and pays the call
        once (with a short k loop, a small convolution's k = 27, the per-tile entry took
        ~20% of the micro-kernel's profile samples)."""
        fp, mr = self.fp, self.mr
        fty = ir.FunctionType(ir.VoidType(), micro_args(fp))
        fn = ir.Function(self.module, fty, name=f"{self.prefix}_micro")
        kc, a, bp, c, ldc, height, cols, first, mode, out2, bias = fn.args
        for arg in (a, bp, c):
            arg.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        flags = _Mode.test(b, mode, ldc)
        scratch = b.alloca(self.ft, size=mr * self.nr, name="edge")   # an edge tile's sums
        scratch.align = 64

        def row_tile(i: ir.Value) -> None:
            rows = _smin(b, _c(mr), b.sub(height, i))
            at = b.mul(i, ldc)
            tile_c = b.gep(c, [at], inbounds=True)
            tile_bias = b.gep(bias, [b.mul(i, flags.addend_stride)])
            with b.if_then(b.icmp_signed(">=", kc, _c(PREFETCH_MIN_K))):
                self._prefetch_tile(b, tile_c, ldc, rows, cols)
                with b.if_then(flags.residual):
                    self._prefetch_tile(b, tile_bias, ldc, rows, cols, write=0)
            slivers = (b.gep(a, [b.mul(i, kc)], inbounds=True), bp)
            if self.pairs:
                from fgrad.lower.llvm.gemm.pairs import tile_products   # it imports this
                accs = tile_products(b, kc, slivers, scratch, self.lanes)
            else:
                accs = self._products(b, fn, kc, rows, slivers)
            self._write_tile(b, accs, tile_c, ldc, rows, cols, first,
                             (flags, b.gep(out2, [at]), tile_bias), scratch)
        _loop(b, _c(0), height, mr, row_tile, "ir")
        b.ret_void()
        return fn

    def _products(self, b: ir.IRBuilder, fn: ir.Function, kc: ir.Value, rows: ir.Value,
                  slivers: tuple[ir.Value, ir.Value]) -> list[list[ir.Value]]:
        """The tile's MR x NR sums over kc steps. A tile of at most MR / 2 rows (the last
        of 32 rows at MR = 6: 2) runs k loops of MR / 2 rows, its other rows 0: half the
        FMAs (a 32 x 27 x 1024 product: a full tile's time for 2 rows before)."""
        mr, vectors = self.mr, self.nr // self.lanes
        zero = self._zero(self.vt)
        half = mr // 2

        def sums(height: int, label: str) -> tuple[list[list[ir.Value]], ir.Block]:
            accs = [[zero] * vectors for _ in range(height)]
            p, accs = self._k_loop(b, fn, kc, _c(0), accs, K_UNROLL, f"{label}4", slivers)
            p, accs = self._k_loop(b, fn, kc, p, accs, 1, label, slivers)
            return accs + [[zero] * vectors for _ in range(mr - height)], b.block
        with b.if_else(b.icmp_signed("<=", rows, _c(half))) as (short, whole):
            with short:
                low, low_end = sums(half, "h")
            with whole:
                full, full_end = sums(mr, "k")
        merged = []
        for i in range(mr):
            row = []
            for v in range(vectors):
                phi = b.phi(self.vt, name=f"sum{i}_{v}")
                phi.add_incoming(low[i][v], low_end)
                phi.add_incoming(full[i][v], full_end)
                row.append(phi)
            merged.append(row)
        return merged

    def _prefetch_tile(self, b: ir.IRBuilder, c: ir.Value, ldc: ir.Value, rows: ir.Value,
                       cols: ir.Value, write: int = 1) -> None:
        """Ask for the C tile's lines (first and last element of each row, for writing)
        before the k loop, so they arrive while it runs: a tile of a large C is not in
        cache, and its loads and stores after the loop waited for memory (2048^3 on two
        threads 0.87-0.93x the time, 1024^3 0.93-0.97x, in-process A/B), when the k loop
        is long enough (`PREFETCH_MIN_K`). An edge tile's addresses are clamped into it.
        With `write` 0, the lines of a matrix laid out as C that is only read (a residual
        epilogue's)."""
        i32 = ir.IntType(32)
        prefetch = _libc(self.module, "llvm.prefetch.p0", ir.VoidType(),
                         [I8P, i32, i32, i32])
        rw, keep, data = (ir.Constant(i32, v) for v in (write, 3, 1))
        last_col = b.sub(cols, _c(1))
        for i in range(self.mr):
            row = _smin(b, _c(i), b.sub(rows, _c(1)))
            for col in (_c(0), _smin(b, _c(self.nr - 1), last_col)):
                at = b.gep(c, [b.add(b.mul(row, ldc), col)], inbounds=True)
                b.call(prefetch, [b.bitcast(at, I8P), rw, keep, data])

    def _k_loop(self, b: ir.IRBuilder, fn: ir.Function, kc: ir.Value, start: ir.Value,
                accs: list[list[ir.Value]], steps: int, name: str,
                slivers: tuple[ir.Value, ir.Value]) -> tuple[ir.Value, list[list[ir.Value]]]:
        """A loop of `steps` k steps per trip while `steps` more fit below kc, from k =
        `start` with accumulators `accs`, over the packed A and B `slivers`; returns (k,
        accumulators) after it (in its exit block, where `b` is left)."""
        mr, nr, lanes = self.mr, self.nr, self.lanes
        before = b.block
        head, body, done = (fn.append_basic_block(f"{name}.{s}") for s in ("head", "body", "done"))
        b.branch(head)
        b.position_at_end(head)
        p = b.phi(I64, name=name)
        p.add_incoming(start, before)
        phis = [[b.phi(self.vt, name=f"{name}c{i}_{v}") for v in range(nr // lanes)]
                for i in range(len(accs))]
        for row, init in zip(phis, accs, strict=True):
            for phi, value in zip(row, init, strict=True):
                phi.add_incoming(value, before)
        b.cbranch(b.icmp_signed("<=", b.add(p, _c(steps)), kc), body, done)
        b.position_at_end(body)
        a, bp = slivers
        vp, fma = self.vt.as_pointer(), self._multiply_add()
        new: list[list[ir.Value]] = [list(row) for row in phis]
        for step in range(steps):
            at = b.add(p, _c(step)) if step else p
            bvecs = [b.load(b.bitcast(b.gep(bp, [b.add(b.mul(at, _c(nr)), _c(v * lanes))],
                                            inbounds=True), vp), align=self.size)
                     for v in range(nr // lanes)]
            for i in range(len(accs)):   # the sliver's first rows (all MR but in a short tile)
                x = b.load(b.gep(a, [b.add(b.mul(at, _c(mr)), _c(i))], inbounds=True))
                splat = b.insert_element(ir.Constant(self.vt, ir.Undefined), x,
                                         ir.Constant(ir.IntType(32), 0))
                splat = b.shuffle_vector(splat, ir.Constant(self.vt, ir.Undefined),
                                         ir.Constant(ir.VectorType(ir.IntType(32), lanes),
                                                     [0] * lanes))
                new[i] = [fma(b, splat, bv, new[i][v]) for v, bv in enumerate(bvecs)]
        latch = b.block
        p.add_incoming(b.add(p, _c(steps), flags=("nsw",)), latch)
        for row, values in zip(phis, new, strict=True):
            for phi, value in zip(row, values, strict=True):
                phi.add_incoming(value, latch)
        b.branch(head)
        b.position_at_end(done)
        return p, [list(row) for row in phis]

    def _addend_rows(self, b: ir.IRBuilder, bias: ir.Value,
                     mode: _Mode) -> Callable[[int, int], ir.Value]:
        """addend(i, v): the vector the epilogue adds to row i's vector v (read even when
        the mode adds none): the bias vectors, loaded once, or the residual's row."""
        vp, lanes = self.vt.as_pointer(), self.lanes
        stride = mode.addend_stride
        loaded: dict[tuple[int, int], ir.Value] = {}

        def addend(i: int, v: int) -> ir.Value:
            if (i, v) not in loaded:
                at = b.add(b.mul(_c(i), stride), _c(v * lanes))
                loaded[(i, v)] = b.load(b.bitcast(b.gep(bias, [at]), vp), align=self.size)
            return loaded[(i, v)]
        return addend

    def _epilogue_tile(self, b: ir.IRBuilder, c: ir.Value, ldc: ir.Value, mode: _Mode,
                       out2: ir.Value, bias: ir.Value) -> None:
        """A full tile's epilogue into out2, reading back the tile just stored into C."""
        vp = self.vt.as_pointer()
        addend = self._addend_rows(b, bias, mode)
        for i in range(self.mr):
            for v in range(self.nr // self.lanes):
                at = b.add(b.mul(_c(i), ldc), _c(v * self.lanes))
                total = b.load(b.bitcast(b.gep(c, [at], inbounds=True), vp), align=self.size)
                b.store(self._epilogue(b, total, mode, addend(i, v)),
                        b.bitcast(b.gep(out2, [at]), vp), align=self.size)

    def _integer(self) -> bool:
        return isinstance(self.ft, ir.IntType)

    def _zero(self, ty: ir.Type) -> ir.Constant:
        """0 of the element type, or a vector of them."""
        one = 0 if self._integer() else 0.0
        return ir.Constant(ty, [one] * ty.count if isinstance(ty, ir.VectorType) else one)

    def _add(self, b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
        return b.add(x, y) if self._integer() else b.fadd(x, y)

    def _multiply_add(self) -> Callable[[ir.IRBuilder, ir.Value, ir.Value, ir.Value],
                                        ir.Value]:
        """a * b + c on vectors: `llvm.fma` for floats, a wrapping multiply and add for
        int32."""
        if self._integer():
            return lambda b, x, y, acc: b.add(b.mul(x, y), acc)
        fma = _libc(self.module, f"llvm.fma.v{self.lanes}{self._suffix()}", self.vt,
                    [self.vt] * 3)
        return lambda b, x, y, acc: b.call(fma, [x, y, acc])

    def _suffix(self) -> str:
        return "f64" if isinstance(self.ft, ir.DoubleType) else "f32"

    def _epilogue(self, b: ir.IRBuilder, total: ir.Value, mode: _Mode,
                  bias: ir.Value) -> ir.Value:
        """`total` through the register epilogue `mode` (a vector or a scalar; `bias` the
        matching load, read only when the mode adds it). Float products only: an int32
        gemm is never given a mode (`epilogue.register_epilogue`)."""
        if self._integer():
            return total
        zero = self._zero(total.type)
        biased = b.select(mode.adds, b.fadd(total, bias), total)
        # le then select, as the kernel computes relu: a NaN stays NaN
        clipped = b.select(b.fcmp_ordered("<=", biased, zero), zero, biased)
        return b.select(mode.relu, clipped, biased)

    def _write_tile(self, b: ir.IRBuilder, accs: list[list[ir.Value]], c: ir.Value,
                    ldc: ir.Value, rows: ir.Value, cols: ir.Value, first: ir.Value,
                    epilogue: tuple[_Mode, ir.Value, ir.Value], tile: ir.Value) -> None:
        """Full tiles: vector load-add-store into C (and the epilogue's store into out2);
        edge tiles: `_write_edge_tile`, through the stack tile `tile`."""
        mr, nr, lanes = self.mr, self.nr, self.lanes
        mode, out2, bias = epilogue
        active = mode.active
        # the epilogue's output is C itself (a product only the epilogue reads): one store
        own = b.and_(active, b.icmp_unsigned("==", b.ptrtoint(out2, I64), b.ptrtoint(c, I64)))
        vp = self.vt.as_pointer()
        full = b.and_(b.icmp_signed("==", rows, _c(mr)), b.icmp_signed("==", cols, _c(nr)))
        with b.if_else(full) as (then, otherwise):
            with then:
                # one row vector at a time (load, add, store): holding the whole tile's
                # sums beside the accumulators spilled registers (W4 forward 1.0 -> 1.9 ms)
                def total_at(i: int, v: int) -> tuple[ir.Value, ir.Value]:
                    ptr = b.bitcast(b.gep(c, [b.add(b.mul(_c(i), ldc), _c(v * lanes))],
                                          inbounds=True), vp)
                    old = b.load(ptr, align=self.size)
                    return ptr, b.select(first, accs[i][v], self._add(b, old, accs[i][v]))
                with b.if_else(own) as (fused, plain):
                    with fused:
                        addend = self._addend_rows(b, bias, mode)
                        for i in range(mr):
                            for v in range(nr // lanes):
                                ptr, total = total_at(i, v)
                                b.store(self._epilogue(b, total, mode, addend(i, v)), ptr,
                                        align=self.size)
                    with plain:
                        for i in range(mr):
                            for v in range(nr // lanes):
                                ptr, total = total_at(i, v)
                                b.store(total, ptr, align=self.size)
                        with b.if_then(active):
                            self._epilogue_tile(b, c, ldc, mode, out2, bias)
            with otherwise:
                self._write_edge_tile(b, accs, c, ldc, (rows, cols), first, epilogue, own,
                                      tile)

    def _write_edge_tile(self, b: ir.IRBuilder, accs: list[list[ir.Value]], c: ir.Value,
                         ldc: ir.Value, extent: tuple[ir.Value, ir.Value], first: ir.Value,
                         epilogue: tuple[_Mode, ir.Value, ir.Value], own: ir.Value,
                         tile: ir.Value) -> None:
        """An edge tile (`extent` = rows < MR or cols < NR): the sums go through the stack
        tile `tile`, then a loop over the tile's rows writes them as the full tile is
        written, with vector loads and stores masked to its columns (no lane past them is
        read or written: C, the addend, out2). Element by element, an edge tile took
        several full tiles' time (W4's 32 filters, rows 12 + 12 + 8: 0.34 ms against
        0.26 ms for 36 filters)."""
        mr, nr, lanes = self.mr, self.nr, self.lanes
        mode, out2, bias = epilogue
        rows, cols = extent
        vp, i32 = self.vt.as_pointer(), ir.IntType(32)
        for i in range(mr):
            for v in range(nr // lanes):
                at = b.gep(tile, [_c(i * nr + v * lanes)])   # whole vectors from a line
                b.store(accs[i][v], b.bitcast(at, vp), align=lanes * self.size)
        masks = ir.VectorType(I1, lanes)
        suffix = f"v{lanes}{'i32' if self._integer() else self._suffix()}.p0"
        load = _libc(self.module, f"llvm.masked.load.{suffix}", self.vt,
                     [vp, i32, masks, self.vt])
        store = _libc(self.module, f"llvm.masked.store.{suffix}", ir.VoidType(),
                      [self.vt, vp, i32, masks])
        align, zero = ir.Constant(i32, self.size), self._zero(self.vt)
        lane = ir.Constant(ir.VectorType(I64, lanes), list(range(lanes)))
        in_cols = []
        for v in range(nr // lanes):
            splat = b.insert_element(ir.Constant(lane.type, ir.Undefined),
                                     b.sub(cols, _c(v * lanes)), _c(0))
            splat = b.shuffle_vector(splat, ir.Constant(lane.type, ir.Undefined),
                                     ir.Constant(ir.VectorType(i32, lanes), [0] * lanes))
            in_cols.append(b.icmp_signed("<", lane, splat))
        spare = b.and_(mode.active, b.not_(own))   # the epilogue's own output beside C

        def row(i: ir.Value) -> None:
            for v, mask in enumerate(in_cols):
                sums = b.load(b.bitcast(b.gep(tile, [b.add(b.mul(i, _c(nr)), _c(v * lanes))]),
                                        vp), align=self.size)
                at = b.add(b.mul(i, ldc), _c(v * lanes))
                ptr = b.bitcast(b.gep(c, [at], inbounds=True), vp)
                total = b.select(first, sums,
                                 self._add(b, b.call(load, [ptr, align, mask, zero]), sums))
                addend_at = b.add(b.mul(i, mode.addend_stride), _c(v * lanes))
                addend = b.call(load, [b.bitcast(b.gep(bias, [addend_at]), vp), align, mask,
                                       zero])
                result = self._epilogue(b, total, mode, addend)
                b.call(store, [b.select(own, result, total), ptr, align, mask])
                with b.if_then(spare):   # out2 is no array at all without an epilogue
                    b.call(store, [result, b.bitcast(b.gep(out2, [at]), vp), align, mask])
        _loop(b, _c(0), rows, 1, row, "er")

    # ------------------------------------------------------------------ packing

    def pack_function(self, side: str, width: int, trans: bool) -> ir.Function:
        """`pack_<side>_<n|t>`: A(row, k) slivers of MR rows (side "a") or B(k, col)
        slivers of NR columns (side "b") of an operand stored plainly (n) or transposed
        (t) (gemm/pack.py)."""
        from fgrad.lower.llvm.gemm.pack import render_pack   # it imports this module
        name = f"{self.prefix}_pack_{side}_{'t' if trans else 'n'}"
        return render_pack(self.module, name, self.ft, self.size, self.lanes, side, width,
                           trans)


def routine_prefix(ft: ir.Type, size: int, pairs: bool = False) -> str:
    """Symbol prefix of the shared routines for this dtype (or bfloat16 `pairs`, whose
    accumulators are float32: gemm/pairs.py) at the host's tile."""
    mr, nr, _ = tile_shape(size, pairs=pairs)
    kind = "bf16" if pairs else "i32" if isinstance(ft, ir.IntType) \
        else "f64" if isinstance(ft, ir.DoubleType) else "f32"
    return f"fgrad_gemm{ROUTINES_VERSION}_{kind}_{mr}x{nr}"


def routine_dtypes(library_calls: dict[str, Eqn]) -> list[str]:
    """The dtypes ("float32", "float64", "int32"; "bfloat16" for products over bfloat16
    pairs, gemm/pairs.py) whose shared routines these calls need."""
    names = {dtypes.float32: "float32", dtypes.float64: "float64", dtypes.int32: "int32"}
    return sorted({"bfloat16" if e.params.get(PAIRS_PARAM) else names[e.outvars[0].aval.dtype]
                   for e in library_calls.values()
                   if e.primitive.name == "dot_general" and uses_native_gemm(e)})


def uses_native_gemm(eqn: Eqn) -> bool:
    """Whether fgrad's own GEMM runs this dot_general here: a float one under the `native`
    gemm setting (else OpenBLAS), an int32 one always (OpenBLAS has no integer gemm)."""
    from fgrad import flags
    return native_gemm_applies(eqn) and (flags.gemm_library() == "native"
                                         or eqn.outvars[0].aval.dtype not in FLOAT_TYPES)


def native_gemm_applies(eqn: Eqn) -> bool:
    """Whether fgrad's own GEMM can compute this dot_general: float32/64 or int32 with a
    BLAS view and no empty dimension (an empty float product keeps the BLAS path, which
    handles it; an empty int32 one is expanded, `gemm_layout.gemm_reason`)."""
    dims = gemm_dims(eqn)
    return dims is not None and min(dims.m, dims.n, dims.k, *dims.batch) > 0 \
        and eqn.outvars[0].aval.dtype in GEMM_TYPES


def _loads_of(e: Expr, buf: int, found: list[Load]) -> None:
    """Append the distinct loads of `buf` in `e`, each shared subexpression visited once
    (a walk of every path took exponential time on an epilogue with shared terms)."""
    stack, seen = [e], set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, Load):
            if x.buf == buf:
                found.append(x)
        elif isinstance(x, Op):
            stack.extend(x.args)


def epilogue_fits(eqn: Eqn, kernel: Kernel, buf: int) -> bool:
    """Whether `kernel` (reading the gemm's output as its buffer `buf`) can run inside this
    gemm as its epilogue: an unbatched native gemm, and a kernel that is a plain (m, n)
    loop nest of stores reading the gemm's output only at the element it stores, whose rows
    are disjoint (so a block of rows needs only those rows; it then runs on row ranges)."""
    from fgrad.lower.llvm.blas import gemm_chunking
    from fgrad.lower.llvm.threads import _disjoint_iterations, split_extent
    dims = gemm_dims(eqn)
    if dims is None or dims.batch or not native_gemm_applies(eqn) or len(kernel.body) != 1:
        return False
    outer = kernel.body[0]
    if not isinstance(outer, Loop):
        return False
    inner = outer.body[0] if len(outer.body) == 1 and isinstance(outer.body[0], Loop) \
        else None
    if inner is not None:  # a (m, n) nest
        body = inner.body
        if outer.sym.extent != dims.m or inner.sym.extent != dims.n:
            return False
    else:                  # one flat loop over m * n elements
        body = outer.body
        if outer.sym.extent != dims.m * dims.n:
            return False
    if not all(isinstance(st, Store) for st in body):
        return False
    stores = [st for st in body if isinstance(st, Store)]
    where = {str(st.index) for st in stores}
    found: list[Load] = []
    for st in stores:
        _loads_of(st.value, buf, found)
    if len(where) != 1 or any(str(ld.index) not in where for ld in found):
        return False
    if gemm_chunking(eqn)[0] == 1 and split_extent(kernel) > 0:
        return False  # a small gemm before a kernel that splits: keep the kernel parallel
    return _disjoint_iterations(kernel, outer)


def epilogue_row_scale(eqn: Eqn, kernel: Kernel) -> int:
    """Iterations of the epilogue kernel's outer loop per output row (1 or n)."""
    dims = gemm_dims(eqn)
    assert dims is not None and isinstance(kernel.body[0], Loop)
    return kernel.body[0].sym.extent // dims.m


def shared_routines(module: ir.Module, ft: ir.Type, size: int,
                    pairs: bool = False) -> _Routines:
    """What emits the micro-kernel (`micro_kernel()`) and the packing routines
    (`pack_function(side, width, trans)`) of element type `ft` (or bfloat16 `pairs`) into
    `module`."""
    return _Routines(module, ft, size, pairs)
