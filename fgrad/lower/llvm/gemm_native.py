"""fgrad's own GEMM for the llvm backend: packed panels and a register-blocked micro-kernel.

In: a float32/float64 dot_general with a BLAS view (`gemm_dims`). Out: an internal function
`void name(T* out, T* lhs, T* rhs, i64 start, i64 stop)` computing output rows [start, stop)
of the batch-stacked output (the contract of `blas.render_gemm_rows`, so the pool
splits it the same way), or `void name(T* out, T* lhs, T* rhs)` for the whole product.

Structure (GotoBLAS/BLIS): for each NC-wide column block and KC-deep slice of the
contraction, B's slice is packed into NR-wide slivers (zero-padded at the right edge); for
each MC-tall block of this call's rows, A's slice is packed into MR-tall slivers; the
micro-kernel multiplies one A sliver by one B sliver into an MR x NR tile held in vector
registers (per step of k: NR/L vector loads of B, MR broadcasts of A, 2*MR FMAs) and adds
the tile to C (stores it on the first slice). Edge tiles go through a small stack tile, so
only the last row and column of tiles pay for partial sizes. Transposed operands and
leading dimensions are read by the packing loops; no copy kernel runs before the call.

Tile sizes come from the vector width `target.vector_bits()` (L lanes): NR = 2L; MR = 6 with
16 vector registers (12 accumulators + 2 B vectors + 1 broadcast), 12 with AVX-512's 32.
KC x NR of B (16 KiB for f32 at L=8) stays in L1, MC x KC of A (~144 KiB) in L2, KC x NC of
B in L3. The packing buffers come from malloc (never the stack: worker threads' stacks are
small), one pair per call.
"""
from __future__ import annotations

import functools
from typing import Callable

from llvmlite import ir

from fgrad.core.dtypes import dtypes
from fgrad.core.ir import Eqn
from fgrad.lower.kernel.ir import Expr, Kernel, Load, Loop, Op, Store
from fgrad.lower.llvm import target
from fgrad.lower.schedule.gemm_layout import GemmDims, MatrixView, gemm_dims

I1 = ir.IntType(1)
I64 = ir.IntType(64)
I8P = ir.IntType(8).as_pointer()
FLOAT_TYPES = {dtypes.float32: (ir.FloatType(), 4), dtypes.float64: (ir.DoubleType(), 8)}
KC = 256
MC_TARGET = 144
NC = 2048


def tile_shape(dtype_bytes: int, vector_bits: int | None = None) -> tuple[int, int, int]:
    """(MR, NR, lanes) of the micro-kernel for this element size and vector width."""
    bits = target.vector_bits() if vector_bits is None else vector_bits
    lanes = max(bits // (8 * dtype_bytes), 1)
    return (12 if bits >= 512 else 6), 2 * lanes, lanes


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _loop(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value, step: int,
          body: Callable[[ir.Value], None], label: str) -> None:
    """for (i = lo; i < hi; i += step) body(i), emitted at the builder's position."""
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
    i.add_incoming(b.add(i, _c(step), flags=("nsw",)), b.block)
    b.branch(head)
    b.position_at_end(done)


def _smin(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


def _libc(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    found = module.globals.get(name)
    return found if found is not None else ir.Function(
        module, ir.FunctionType(ret, args), name=name)


ROUTINES_VERSION = 1   # bump when the shared routines' code changes (their symbols)


class _Routines:
    """The shared GEMM routines of one dtype at the host's width, emitted into their own
    modules, compiled once and cached like kernels; each program's gemm
    drivers only declare them (`routine_texts`). `micro(kc, a, b, c, ldc, rows, cols, first)` and
    `pack_{a,b}_{n,t}(dest, base, ld, first, limit, k0, kc)` (module docstring)."""

    def __init__(self, module: ir.Module, ft: ir.Type, size: int):
        self.module, self.ft, self.size = module, ft, size
        self.fp = ft.as_pointer()
        self.mr, self.nr, self.lanes = tile_shape(size)
        self.vt = ir.VectorType(ft, self.lanes)
        self.prefix = routine_prefix(ft, size)

    # ------------------------------------------------------------------ micro-kernel

    def _micro_kernel(self) -> ir.Function:
        """`void micro(i64 kc, T* a, T* b, T* c, i64 ldc, i64 rows, i64 cols, i1 first)`: the
        MR x NR tile C[0:rows, 0:cols] (row stride ldc) = (first ? 0 : C) + a @ b slivers."""
        fp, mr, nr, lanes = self.fp, self.mr, self.nr, self.lanes
        fty = ir.FunctionType(ir.VoidType(), [I64, fp, fp, fp, I64, I64, I64, I1])
        fn = ir.Function(self.module, fty, name=f"{self.prefix}_micro")
        kc, a, bp, c, ldc, rows, cols, first = fn.args
        for arg in (a, bp, c):
            arg.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        entry = b.block
        head, body, done = (fn.append_basic_block(s) for s in ("k.head", "k.body", "k.done"))
        b.branch(head)
        b.position_at_end(head)
        zero = ir.Constant(self.vt, [0.0] * lanes)
        p = b.phi(I64, name="p")
        p.add_incoming(_c(0), entry)
        accs = [[b.phi(self.vt, name=f"c{i}_{v}") for v in range(nr // lanes)]
                for i in range(mr)]
        for row in accs:
            for acc in row:
                acc.add_incoming(zero, entry)
        b.cbranch(b.icmp_signed("<", p, kc), body, done)
        b.position_at_end(body)
        vp = self.vt.as_pointer()
        bvecs = [b.load(b.bitcast(b.gep(bp, [b.add(b.mul(p, _c(nr)), _c(v * lanes))],
                                        inbounds=True), vp), align=self.size)
                 for v in range(nr // lanes)]
        fma = _libc(self.module, f"llvm.fma.v{lanes}{self._suffix()}", self.vt,
                    [self.vt] * 3)
        new = []
        for i in range(mr):
            x = b.load(b.gep(a, [b.add(b.mul(p, _c(mr)), _c(i))], inbounds=True))
            splat = b.insert_element(ir.Constant(self.vt, ir.Undefined), x, ir.Constant(
                ir.IntType(32), 0))
            splat = b.shuffle_vector(splat, ir.Constant(self.vt, ir.Undefined),
                                     ir.Constant(ir.VectorType(ir.IntType(32), lanes),
                                                 [0] * lanes))
            new.append([b.call(fma, [splat, bv, accs[i][v]]) for v, bv in enumerate(bvecs)])
        latch = b.block
        p.add_incoming(b.add(p, _c(1), flags=("nsw",)), latch)
        for i in range(mr):
            for v, acc in enumerate(accs[i]):
                acc.add_incoming(new[i][v], latch)
        b.branch(head)
        b.position_at_end(done)
        self._write_tile(b, accs, c, ldc, rows, cols, first)
        b.ret_void()
        return fn

    def _suffix(self) -> str:
        return "f64" if isinstance(self.ft, ir.DoubleType) else "f32"

    def _write_tile(self, b: ir.IRBuilder, accs: list[list[ir.Value]], c: ir.Value,
                    ldc: ir.Value, rows: ir.Value, cols: ir.Value, first: ir.Value) -> None:
        """Full tiles: vector load-add-store into C; edge tiles: through a stack tile."""
        mr, nr, lanes = self.mr, self.nr, self.lanes
        vp = self.vt.as_pointer()
        full = b.and_(b.icmp_signed("==", rows, _c(mr)), b.icmp_signed("==", cols, _c(nr)))
        with b.if_else(full) as (then, otherwise):
            with then:
                for i in range(mr):
                    row = b.mul(_c(i), ldc)
                    for v in range(nr // lanes):
                        at = b.add(row, _c(v * lanes))
                        ptr = b.bitcast(b.gep(c, [at], inbounds=True), vp)
                        old = b.load(ptr, align=self.size)
                        total = b.select(first, accs[i][v], b.fadd(old, accs[i][v]))
                        b.store(total, ptr, align=self.size)
            with otherwise:
                tile = b.alloca(self.ft, size=mr * nr)
                for i in range(mr):
                    for v in range(nr // lanes):
                        ptr = b.bitcast(b.gep(tile, [_c(i * nr + v * lanes)]), vp)
                        b.store(accs[i][v], ptr, align=self.size)

                def row_of(i: ir.Value) -> None:
                    def col(j: ir.Value) -> None:
                        src = b.gep(tile, [b.add(b.mul(i, _c(nr)), j)])
                        dst = b.gep(c, [b.add(b.mul(i, ldc), j)], inbounds=True)
                        val = b.load(src)
                        b.store(b.select(first, val, b.fadd(b.load(dst), val)), dst)
                    _loop(b, _c(0), cols, 1, col, "ej")
                _loop(b, _c(0), rows, 1, row_of, "ei")

    # ------------------------------------------------------------------ packing

    def _pack_function(self, side: str, width: int, trans: bool) -> ir.Function:
        """`pack_<side>_<n|t>(T* dest, T* base, i64 ld, i64 first, i64 limit, i64 k0,
        i64 kc)`: A(row, k) slivers of MR rows (side "a") or B(k, col) slivers of NR
        columns (side "b") of an operand stored plainly (n) or transposed (t) with
        leading dimension ld."""
        fp = self.fp
        fty = ir.FunctionType(ir.VoidType(), [fp, fp, I64, I64, I64, I64, I64])
        name = f"{self.prefix}_pack_{side}_{'t' if trans else 'n'}"
        fn = ir.Function(self.module, fty, name=name)
        dest, base, ld, first, limit, k0, kc = fn.args
        dest.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))

        def read(outer: ir.Value, p: ir.Value) -> ir.Value:
            kk = b.add(k0, p)
            r, col = (outer, kk) if side == "a" else (kk, outer)
            major, minor = (col, r) if trans else (r, col)
            return b.gep(base, [b.add(b.mul(major, ld), minor)], inbounds=True)
        if (side == "a") != trans:  # k runs along memory: copy each row (column) whole
            self._pack_k_inner(b, dest, read, first, limit, kc, width)
        else:
            self._pack(b, dest, read, first, limit, kc, width)
        b.ret_void()
        return fn

    def _pack_k_inner(self, b: ir.IRBuilder, dest: ir.Value,
                      read: Callable[[ir.Value, ir.Value], ir.Value], first: ir.Value,
                      limit: ir.Value, kc: ir.Value, width: int) -> None:
        """The layout of `_pack`, filled one outer index at a time (contiguous reads along
        k, stores `width` apart): the form for operands stored with k innermost."""
        count = b.sdiv(b.add(b.sub(limit, first), _c(width - 1)), _c(width))
        zero = ir.Constant(self.ft, 0.0)

        def sliver(t: ir.Value) -> None:
            start = b.add(first, b.mul(t, _c(width)))
            base = b.mul(t, b.mul(kc, _c(width)))

            def lane(w: ir.Value) -> None:
                o = b.add(start, w)
                inside = b.icmp_signed("<", o, limit)
                safe = b.select(inside, o, first)

                def step(p: ir.Value) -> None:
                    val = b.select(inside, b.load(read(safe, p)), zero)
                    at = b.add(b.add(base, b.mul(p, _c(width))), w)
                    b.store(val, b.gep(dest, [at], inbounds=True))
                _loop(b, _c(0), kc, 1, step, "pk")
            _loop(b, _c(0), _c(width), 1, lane, "pw")
        _loop(b, _c(0), count, 1, sliver, "ps")

    def _pack(self, b: ir.IRBuilder, dest: ir.Value, read: Callable[[ir.Value, ir.Value],
              ir.Value], first: ir.Value, limit: ir.Value, kc: ir.Value, width: int) -> None:
        """dest[t][p][w] = read(first + t*width + w, p) for the slivers t covering
        [first, limit), zero beyond limit."""
        count = b.sdiv(b.add(b.sub(limit, first), _c(width - 1)), _c(width))
        zero = ir.Constant(self.ft, 0.0)

        def sliver(t: ir.Value) -> None:
            start = b.add(first, b.mul(t, _c(width)))
            base = b.mul(t, b.mul(kc, _c(width)))
            whole = b.icmp_signed("<=", b.add(start, _c(width)), limit)

            def whole_step(p: ir.Value) -> None:
                at = b.add(base, b.mul(p, _c(width)))
                for w in range(width):
                    val = b.load(read(b.add(start, _c(w)), p))
                    b.store(val, b.gep(dest, [b.add(at, _c(w))], inbounds=True))

            def edge_step(p: ir.Value) -> None:   # the last sliver: a loop, zero-padded
                at = b.add(base, b.mul(p, _c(width)))

                def lane(w: ir.Value) -> None:
                    o = b.add(start, w)
                    inside = b.icmp_signed("<", o, limit)
                    val = b.select(inside, b.load(read(b.select(inside, o, first), p)), zero)
                    b.store(val, b.gep(dest, [b.add(at, w)], inbounds=True))
                _loop(b, _c(0), _c(width), 1, lane, "pw")
            with b.if_else(whole) as (then, otherwise):
                with then:
                    _loop(b, _c(0), kc, 1, whole_step, "pk")
                with otherwise:
                    _loop(b, _c(0), kc, 1, edge_step, "pe")
        _loop(b, _c(0), count, 1, sliver, "ps")



class _Gemm:
    """Emits one dot_general's driver (the block loops and packing/micro-kernel calls)."""

    def __init__(self, module: ir.Module, name: str, dims: GemmDims, ft: ir.Type,
                 size: int, epilogue: ir.Function | None = None, row_scale: int = 1):
        self.module, self.d, self.ft, self.size = module, dims, ft, size
        self.epilogue, self.row_scale = epilogue, row_scale
        args = epilogue.function_type.args if epilogue is not None else ()
        self.row_ranged = len(args) >= 2 and all(a == I64 for a in args[-2:])
        self.epilogue_types = list(args[:-2] if self.row_ranged else args)
        self.fp = ft.as_pointer()
        self.mr, self.nr, _ = tile_shape(size)
        self.mc = max(self.mr, MC_TARGET // self.mr * self.mr)
        self.kc = min(KC, max(dims.k, 1))
        self.nc = min(NC, -(-dims.n // self.nr) * self.nr)
        self.name = name
        prefix, fp = routine_prefix(ft, size), self.fp
        self.micro = _libc(module, f"{prefix}_micro", ir.VoidType(),
                           [I64, fp, fp, fp, I64, I64, I64, I1])
        packs = {(side, t): _libc(module, f"{prefix}_pack_{side}_{t}", ir.VoidType(),
                                  [fp, fp, I64, I64, I64, I64, I64])
                 for side in "ab" for t in "nt"}
        self.pack_a = packs[("a", "t" if dims.lhs.trans else "n")]
        self.pack_b = packs[("b", "t" if dims.rhs.trans else "n")]

    def rows_function(self) -> ir.Function:
        """`void name(T* out, T* lhs, T* rhs, i64 start, i64 stop)` (module docstring)."""
        fp = self.fp
        fty = ir.FunctionType(ir.VoidType(), [fp, fp, fp, *self.epilogue_types, I64, I64])
        fn = ir.Function(self.module, fty, name=self.name)
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        fn.attributes.add("minsize")  # only loops around routine calls: compile it fast
        out, lhs, rhs = fn.args[:3]
        start, stop = fn.args[-2:]
        self.epilogue_args = list(fn.args[3:-2])
        for arg, label in zip((out, lhs, rhs, start, stop), ("out", "lhs", "rhs", "start",
                                                              "stop")):
            arg.name = label
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        d = self.d
        malloc = _libc(self.module, "malloc", I8P, [I64])
        free = _libc(self.module, "free", ir.VoidType(), [I8P])
        a_raw = b.call(malloc, [_c(self.mc * self.kc * self.size + 64)])
        b_raw = b.call(malloc, [_c(self.kc * self.nc * self.size + 64)])
        apack, bpack = b.bitcast(a_raw, fp), b.bitcast(b_raw, fp)
        m = _c(d.m)
        first_entry = b.sdiv(start, m)
        last_entry = b.add(b.sdiv(b.sub(stop, _c(1)), m), _c(1))

        def entry(e: ir.Value) -> None:
            base_row = b.mul(e, m)
            lo = b.sub(b.select(b.icmp_signed(">", start, base_row), start, base_row),
                       base_row)
            hi = b.sub(_smin(b, stop, b.add(base_row, m)), base_row)
            x = b.gep(lhs, [_batch_offset(b, e, d.batch, d.lhs.batch_strides)], inbounds=True)
            y = b.gep(rhs, [_batch_offset(b, e, d.batch, d.rhs.batch_strides)], inbounds=True)
            c = b.gep(out, [b.mul(e, _c(d.m * d.n))], inbounds=True)
            self._blocks(b, x, y, c, lo, hi, apack, bpack)
        _loop(b, first_entry, last_entry, 1, entry, "e")
        if self.epilogue is not None and not self.row_ranged:
            b.call(self.epilogue, self.epilogue_args)     # a small gemm: once, at the end
        b.call(free, [a_raw])
        b.call(free, [b_raw])
        b.ret_void()
        return fn

    def _blocks(self, b: ir.IRBuilder, x: ir.Value, y: ir.Value, c: ir.Value, lo: ir.Value,
                hi: ir.Value, apack: ir.Value, bpack: ir.Value) -> None:
        """The jc / pc / ic / jr / ir loops over rows [lo, hi) of one batch entry."""
        d = self.d
        n, k = _c(d.n), _c(d.k)

        def col_block(jc: ir.Value) -> None:
            nc = _smin(b, _c(self.nc), b.sub(n, jc))

            def k_slice(pc: ir.Value) -> None:
                kc = _smin(b, _c(self.kc), b.sub(k, pc))
                first = b.icmp_signed("==", pc, _c(0))
                b.call(self.pack_b, [bpack, y, _c(d.rhs.ld), jc, b.add(jc, nc), pc, kc])

                def row_block(ic: ir.Value) -> None:
                    mc = _smin(b, _c(self.mc), b.sub(hi, ic))
                    b.call(self.pack_a, [apack, x, _c(d.lhs.ld), ic, b.add(ic, mc), pc, kc])

                    def col_tile(jr: ir.Value) -> None:
                        cols = _smin(b, _c(self.nr), b.sub(nc, jr))
                        bsl = b.gep(bpack, [b.mul(jr, kc)], inbounds=True)

                        def row_tile(ir_: ir.Value) -> None:
                            rows = _smin(b, _c(self.mr), b.sub(mc, ir_))
                            asl = b.gep(apack, [b.mul(ir_, kc)], inbounds=True)
                            at = b.add(b.mul(b.add(ic, ir_), n), b.add(jc, jr))
                            b.call(self.micro, [kc, asl, bsl, b.gep(c, [at], inbounds=True),
                                                n, rows, cols, first])
                        _loop(b, _c(0), mc, self.mr, row_tile, "ir")
                    _loop(b, _c(0), nc, self.nr, col_tile, "jr")
                    if self.epilogue is not None and self.row_ranged:
                        final = b.and_(b.icmp_signed(">=", b.add(pc, kc), k),
                                       b.icmp_signed(">=", b.add(jc, nc), n))
                        with b.if_then(final):   # these rows are final: run the epilogue
                            scale = _c(self.row_scale)
                            b.call(self.epilogue, [*self.epilogue_args, b.mul(ic, scale),
                                                   b.mul(b.add(ic, mc), scale)])
                _loop(b, lo, hi, self.mc, row_block, "ic")
            _loop(b, _c(0), k, self.kc, k_slice, "pc")
        _loop(b, _c(0), n, self.nc, col_block, "jc")


def _batch_offset(b: ir.IRBuilder, i: ir.Value, sizes: tuple[int, ...],
                  strides: tuple[int, ...]) -> ir.Value:
    """Element offset of flat batch entry `i` in an operand with these batch strides."""
    total: ir.Value = _c(0)
    inner = 1
    for size, stride in reversed(list(zip(sizes, strides, strict=True))):
        j = b.urem(b.udiv(i, _c(inner)), _c(size))
        total = b.add(total, b.mul(j, _c(stride)))
        inner *= size
    return total


def routine_prefix(ft: ir.Type, size: int) -> str:
    """Symbol prefix of the shared routines for this dtype at the host's tile."""
    mr, nr, _ = tile_shape(size)
    kind = "f64" if isinstance(ft, ir.DoubleType) else "f32"
    return f"fgrad_gemm{ROUTINES_VERSION}_{kind}_{mr}x{nr}"


@functools.cache
def routine_texts(dtype_name: str) -> tuple[str, ...]:
    """The shared routines for "float32" or "float64", one LLVM IR module text each (so
    they compile in parallel and are cached apart)."""
    if dtype_name not in ("float32", "float64"):
        raise ValueError(f"routine_texts: no shared GEMM routines for {dtype_name!r}")
    ft, size = FLOAT_TYPES[dtypes.float32 if dtype_name == "float32" else dtypes.float64]
    texts = []
    for which in (None, ("a", False), ("a", True), ("b", False), ("b", True)):
        module = ir.Module(name=f"fgrad_gemm_{dtype_name}")
        module.triple, module.data_layout = target.triple_and_layout()
        routines = _Routines(module, ft, size)
        if which is None:
            routines._micro_kernel()
        else:
            side, trans = which
            routines._pack_function(side, routines.mr if side == "a" else routines.nr, trans)
        texts.append(str(module))
    return tuple(texts)


def routine_dtypes(library_calls: dict[str, Eqn]) -> list[str]:
    """The dtypes ("float32"/"float64") whose shared routines these calls need."""
    from fgrad import flags
    if flags.gemm_library() != "native":
        return []
    sizes = {e.outvars[0].aval.dtype.itemsize for e in library_calls.values()
             if e.primitive.name == "dot_general" and native_gemm_applies(e)}
    return sorted({4: "float32", 8: "float64"}[size] for size in sizes)


def native_gemm_applies(eqn: Eqn) -> bool:
    """Whether fgrad's own GEMM computes this dot_general: float32/64 with a BLAS view and
    no empty dimension (empty products keep the BLAS path, which handles them)."""
    dims = gemm_dims(eqn)
    return dims is not None and min(dims.m, dims.n, dims.k, *dims.batch) > 0 \
        and eqn.outvars[0].aval.dtype in FLOAT_TYPES


def _loads_of(e: Expr, buf: int, found: list[Load]) -> None:
    if isinstance(e, Load):
        if e.buf == buf:
            found.append(e)
    elif isinstance(e, Op):
        for a in e.args:
            _loads_of(a, buf, found)


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


def render_native_gemm_rows(module: ir.Module, name: str, eqn: Eqn,
                            epilogue: ir.Function | None = None,
                            row_scale: int = 1) -> ir.Function:
    """Add `void name(T* out, T* lhs, T* rhs, [epilogue's buffers...], i64 start, i64 stop)`
    (module docstring); with an `epilogue` kernel function, it runs on each block of rows
    once they are final (or, when it takes no row range, once at the end)."""
    dims = gemm_dims(eqn)
    dtype = eqn.outvars[0].aval.dtype
    if dims is None or dtype not in FLOAT_TYPES or dims.k == 0:
        raise ValueError(f"render_native_gemm_rows: {name} is not a float dot_general with a "
                         f"BLAS view ({eqn.inputs[0].aval} x {eqn.inputs[1].aval}); a bug in "
                         f"the schedule")
    ft, size = FLOAT_TYPES[dtype]
    return _Gemm(module, name, dims, ft, size, epilogue, row_scale).rows_function()


def render_native_gemm(module: ir.Module, name: str, eqn: Eqn,
                       epilogue: ir.Function | None = None, row_scale: int = 1) -> ir.Function:
    """Add `void name(T* out, T* lhs, T* rhs, [epilogue's buffers...])`: every row."""
    rows = render_native_gemm_rows(module, f"{name}.rows", eqn, epilogue, row_scale)
    dims = gemm_dims(eqn)
    assert dims is not None
    pointers = rows.function_type.args[:-2]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), pointers), name=name)
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    total = dims.m
    for size in dims.batch:
        total *= size
    b.call(rows, [*fn.args, _c(0), _c(total)])
    b.ret_void()
    return fn
