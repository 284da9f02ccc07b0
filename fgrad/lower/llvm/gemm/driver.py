"""The GEMM's block loops: one shared driver per dtype, and a thin wrapper per call site.

In: a float dot_general with a BLAS view (`gemm_dims`). Out: `void name(T* out, T* lhs,
T* rhs, [epilogue's buffers...], i64 start, i64 stop)` computing output rows [start, stop)
of the batch-stacked output, or `void name(T* out, T* lhs, T* rhs, [buffers...])` for all
of them (the contract of `blas.render_gemm_rows`, so the pool splits it the same way).

The loops around the packing routines and the micro-kernel (gemm/native.py: jc over NC-wide
column blocks, pc over KC-deep slices, ic over MC-tall row blocks, then jr/ir over tiles in
`<prefix>_tiles`, which lives in the micro-kernel's module) are the same for every product,
so they are compiled once per dtype as a shared routine,
`<prefix>_driver(i64* dims, T* out, T* lhs, T* rhs, i64 start, i64 stop, epilogue, ctx)`,
that reads the sizes from `dims` (layout: `DIMS`, then the batch sizes and both operands'
batch strides). A call site only copies its sizes (from a constant table) and calls it: a
module of a few calls that compiles in milliseconds, where a driver specialized to constant
sizes took ~30 ms of LLVM's time per product (W9 has 19). bfloat16 products over pairs of
k steps (gemm/pairs.py) have a driver of their own, the same code around AMX routines. A
fused epilogue kernel that runs on row ranges is called through a small thunk
`void thunk(i8** buffers, i64 lo, i64 hi)` that the wrapper defines; one without a row
range runs once after the driver.
"""
from __future__ import annotations

import functools
import math

from llvmlite import ir

from fgrad.core.dtypes import dtypes
from fgrad.core.ir import Eqn
from fgrad.lower.llvm import target
from fgrad.lower.llvm.gemm.native import (GEMM_TYPES, I1, I64, I8P, MC_TARGET, NC,
                                          RESIDUAL_MODES, _c, _libc, _loop, _smin,
                                          micro_args, routine_prefix, shared_routines,
                                          slice_depth, tile_shape)
from fgrad.lower.kernel.ir import Kernel
from fgrad.lower.llvm.gemm.claimed import ClaimedPlan, claimed_blocks, emit_claimed
from fgrad.lower.llvm.gemm.conv_pack import GEOMETRY, conv_pack_type, render_conv_pack
from fgrad.lower.llvm.gemm.epilogue import RegisterEpilogue, register_epilogue
from fgrad.lower.llvm.gemm.pack import render_pack
from fgrad.lower.llvm.gemm.pairs import pair_sizes, render_pair_interleave, render_pair_rows
from fgrad.lower.llvm.gemm.prepack import PrepackPlan, emit_units, prepack_plan, render_prepack
from fgrad.lower.llvm.gemm.prerendered import shipped_text
from fgrad.lower.llvm.gemm.scratch import give_block, is_null, record_failure, take_block
from fgrad.lower.schedule.fuse_patches import PatchRead
from fgrad.lower.schedule.gemm_layout import PAIRS_PARAM, GemmDims, gemm_dims

# The fixed part of a driver's `dims` array; the batch sizes and strides follow.
DIMS = ("m", "n", "k", "lhs_ld", "rhs_ld", "lhs_trans", "rhs_trans", "mc", "kc", "nc",
        "row_scale", "epi_mode", "epi_out", "epi_bias", *GEOMETRY, "conv_pack", "claims",
        "batch_rank")
THUNK = ir.FunctionType(ir.VoidType(), [I8P.as_pointer(), I64, I64])


def driver_type(ft: ir.Type) -> ir.FunctionType:
    """The shared driver's function type for element type `ft`."""
    fp = ft.as_pointer()
    return ir.FunctionType(ir.VoidType(), [I64.as_pointer(), fp, fp, fp, I64, I64,
                                           THUNK.as_pointer(), I8P.as_pointer(), fp])


def driver_dims(d: GemmDims, size: int, row_scale: int,
                patches: PatchRead | None = None, pairs: bool = False) -> list[int]:
    """The `dims` array of one product for the shared driver (module docstring); with
    `patches`, B is read from an image (gemm/conv_pack.py); with `pairs`, the operands are
    bfloat16, taken in pairs of k steps (gemm/pairs.py)."""
    mr, nr, _ = tile_shape(size, pairs=pairs)
    mc = max(mr, MC_TARGET // mr * mr)
    k, lhs_ld, rhs_ld = d.k, d.lhs.ld, d.rhs.ld
    lhs_strides, rhs_strides = d.lhs.batch_strides, d.rhs.batch_strides
    if pairs:
        k, lhs_ld, rhs_ld, lhs_strides, rhs_strides = pair_sizes(d)
    kc = min(slice_depth(size, image=patches is not None, pairs=pairs), max(k, 1))
    nc = min(NC, -(-d.n // nr) * nr)
    geometry = [0] * len(GEOMETRY)
    if patches is not None:
        image, kernel, stride, dilation, padding, out = patches.as_3d()
        geometry = [2 if patches.transposed else 1, *image, *kernel, *stride, *dilation,
                    *(lo for lo, _ in padding), *out[1:]]
        rhs_strides = tuple(math.prod(patches.image[a + 1:]) for a in range(patches.lead))
    # epi_*, conv_pack and claims are set at run time
    fixed = [d.m, d.n, k, lhs_ld, rhs_ld, int(d.lhs.trans), int(d.rhs.trans), mc, kc,
             nc, row_scale, 0, 0, 0, *geometry, 0, 0, len(d.batch)]
    assert len(fixed) == len(DIMS)
    return [*fixed, *d.batch, *lhs_strides, *rhs_strides]


class _Driver:
    """Emits the shared driver of one dtype into `module`."""

    def __init__(self, module: ir.Module, ft: ir.Type, size: int, pairs: bool = False):
        self.module, self.ft, self.size = module, ft, size
        self.fp = ft.as_pointer()
        self.mr, self.nr, _ = tile_shape(size, pairs=pairs)
        prefix, fp = routine_prefix(ft, size, pairs), self.fp
        self.name = f"{prefix}_driver"
        self.tiles = _libc(module, f"{prefix}_tiles", ir.VoidType(), tiles_args(fp))
        self.packs = {(side, t): _libc(module, f"{prefix}_pack_{side}_{t}", ir.VoidType(),
                                       [fp, fp, I64, I64, I64, I64, I64])
                      for side in "ab" for t in "nt"}

    def function(self) -> ir.Function:
        """Define `<prefix>_driver` (module docstring)."""
        fn = ir.Function(self.module, driver_type(self.ft), name=self.name)
        dims, out, lhs, rhs, start, stop, epilogue, ctx, packed_b = fn.args
        for arg, label in zip(fn.args, ("dims", "out", "lhs", "rhs", "start", "stop",
                                        "epilogue", "ctx", "packed_b")):
            arg.name = label
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.b = b
        self.d = {name: b.load(b.gep(dims, [_c(i)], inbounds=True), name=f"dims.{name}")
                  for i, name in enumerate(DIMS)}
        self.dims_array = dims
        self.epilogue, self.ctx = epilogue, ctx
        self.pack_a = self._choose(self.d["lhs_trans"], "a")
        self.pack_b = self._choose(self.d["rhs_trans"], "b")
        d, size = self.d, _c(self.size)
        self.packed_b = packed_b
        self.prepacked = b.icmp_unsigned("!=", packed_b, ir.Constant(self.fp, None))
        self.local = b.alloca(I64, size=2, name="local")   # claimed_blocks' plain split
        b.store(_c(2 ** 62), b.gep(self.local, [_c(1)]))
        # A's block, then B's panel (none when B comes prepacked), in one cached block
        a_bytes = b.and_(b.add(b.mul(b.mul(d["mc"], d["kc"]), size), _c(63)), _c(-64))
        b_bytes = b.select(self.prepacked, _c(0), b.mul(b.mul(d["kc"], d["nc"]), size))
        raw = take_block(b, b.add(a_bytes, b_bytes))
        with b.if_then(is_null(b, raw), likely=False):
            # out of memory: no row is computed; the call raises MemoryError (gemm/scratch.py)
            record_failure(b, "dot_general", b.add(a_bytes, b_bytes))
            b.ret_void()
        apack = b.bitcast(raw, self.fp)
        bpack = b.bitcast(b.gep(raw, [a_bytes], inbounds=True), self.fp)
        m = d["m"]
        first_entry = b.sdiv(start, m)
        last_entry = b.add(b.sdiv(b.sub(stop, _c(1)), m), _c(1))

        def entry(e: ir.Value) -> None:
            base_row = b.mul(e, m)
            lo = b.sub(b.select(b.icmp_signed(">", start, base_row), start, base_row),
                       base_row)
            hi = b.sub(_smin(b, stop, b.add(base_row, m)), base_row)
            lhs_at, rhs_at = self._batch_offsets(e)
            x = b.gep(lhs, [lhs_at], inbounds=True)
            y = b.gep(rhs, [rhs_at], inbounds=True)
            self._entry_offset = b.mul(e, b.mul(m, d["n"]))
            c = b.gep(out, [self._entry_offset], inbounds=True)
            self._blocks(x, y, c, lo, hi, apack, bpack)
        _loop(b, first_entry, last_entry, 1, entry, "e")
        give_block(b, raw)
        b.ret_void()
        return fn

    def _choose(self, trans: ir.Value, side: str) -> ir.Value:
        """The packing routine of `side` for an operand stored plainly or transposed."""
        plain, transposed = self.packs[(side, "n")], self.packs[(side, "t")]
        return self.b.select(self.b.icmp_signed("!=", trans, _c(0)), transposed, plain)

    def _batch_offsets(self, e: ir.Value) -> tuple[ir.Value, ir.Value]:
        """Element offsets of flat batch entry `e` in lhs and rhs (batch strides from dims;
        the last batch axis varies fastest)."""
        b, rank, base = self.b, self.d["batch_rank"], len(DIMS)
        entry = b.block
        head, body, done = (b.function.append_basic_block(f"bo.{s}")
                            for s in ("head", "body", "done"))
        b.branch(head)
        b.position_at_end(head)
        axis = b.phi(I64, name="axis")
        rest, lhs_at, rhs_at = b.phi(I64), b.phi(I64), b.phi(I64)
        for phi, start in ((axis, rank), (rest, e), (lhs_at, _c(0)), (rhs_at, _c(0))):
            phi.add_incoming(start, entry)
        b.cbranch(b.icmp_signed(">", axis, _c(0)), body, done)
        b.position_at_end(body)
        a = b.sub(axis, _c(1))

        def read(offset: ir.Value) -> ir.Value:
            return b.load(b.gep(self.dims_array, [b.add(_c(base), offset)], inbounds=True))
        extent = read(a)
        j = b.urem(rest, extent)
        new_lhs = b.add(lhs_at, b.mul(j, read(b.add(rank, a))))
        new_rhs = b.add(rhs_at, b.mul(j, read(b.add(b.mul(rank, _c(2)), a))))
        for phi, value in ((axis, a), (rest, b.udiv(rest, extent)), (lhs_at, new_lhs),
                           (rhs_at, new_rhs)):
            phi.add_incoming(value, body)
        b.branch(head)
        b.position_at_end(done)
        return lhs_at, rhs_at

    def _blocks(self, x: ir.Value, y: ir.Value, c: ir.Value, lo: ir.Value, hi: ir.Value,
                apack: ir.Value, bpack: ir.Value) -> None:
        """The jc / pc / ic loops over rows [lo, hi) of one batch entry (the jr / ir
        loops over tiles: `render_tiles`)."""
        b, d = self.b, self.d
        n, k = d["n"], d["k"]
        out2 = b.gep(b.inttoptr(d["epi_out"], self.fp), [self._entry_offset])
        bias = b.inttoptr(d["epi_bias"], self.fp)
        # a residual (a matrix like the product) is read at the tile; a bias at its column
        residual = functools.reduce(b.or_, [b.icmp_signed("==", d["epi_mode"], _c(mode))
                                            for mode in RESIDUAL_MODES])

        def col_block(jc: ir.Value) -> None:
            nc = _smin(b, d["nc"], b.sub(n, jc))

            def k_slice(pc: ir.Value) -> None:
                kc = _smin(b, d["kc"], b.sub(k, pc))
                first = b.icmp_signed("==", pc, _c(0))
                last = b.icmp_signed(">=", b.add(pc, kc), k)
                mode = b.select(last, d["epi_mode"], _c(0))

                def row_block(ic: ir.Value, mc: ir.Value, panel: ir.Value) -> None:
                    b.call(self.pack_a, [apack, x, d["lhs_ld"], ic, b.add(ic, mc), pc, kc])
                    b.call(self.tiles, [kc, apack, panel, c, n, mc, nc, first, mode, out2,
                                        bias, residual, ic, jc])
                    self._epilogue_rows(ic, mc, pc, kc, jc, nc)

                def pack_panel() -> ir.Value:
                    return self._b_panel(y, jc, nc, pc, kc, bpack)
                # gemm/claimed.py: blocks claimed from the call's counters, or (claims 0)
                # all of [lo, hi) by this thread
                claimed_blocks(b, d["claims"], d, jc, pc, (lo, hi), self.local, pack_panel,
                               row_block, self.mr)
            _loop(b, _c(0), k, d["kc"], k_slice, "pc")
        _loop(b, _c(0), n, d["nc"], col_block, "jc")

    def _b_panel(self, y: ir.Value, jc: ir.Value, nc: ir.Value, pc: ir.Value, kc: ir.Value,
                 bpack: ir.Value) -> ir.Value:
        """B's panel for column block jc and slice pc: packed now into `bpack`, or, when
        the call gave `packed_b`, where gemm/prepack.py put it."""
        b, d, nr = self.b, self.d, self.nr
        implicit = b.icmp_signed("!=", d["conv"], _c(0))
        with b.if_then(b.not_(self.prepacked)):
            with b.if_else(implicit) as (image, stored):
                with image:
                    # through a pointer: programs without a conv never compile it
                    pack = b.inttoptr(d["conv_pack"], conv_pack_type(self.fp).as_pointer())
                    b.call(pack, [bpack, y, self.dims_array, jc, b.add(jc, nc), pc, kc])
                with stored:
                    b.call(self.pack_b, [bpack, y, d["rhs_ld"], jc, b.add(jc, nc), pc, kc])
        padded = b.mul(b.sdiv(b.add(nc, _c(nr - 1)), _c(nr)), _c(nr))
        given = b.gep(self.packed_b, [b.add(b.mul(jc, d["k"]), b.mul(pc, padded))])
        return b.select(self.prepacked, given, bpack)

    def _epilogue_rows(self, ic: ir.Value, mc: ir.Value, pc: ir.Value, kc: ir.Value,
                       jc: ir.Value, nc: ir.Value) -> None:
        """Run the epilogue (when given) on rows [ic, ic + mc) once they are final."""
        b, d = self.b, self.d
        given = b.icmp_unsigned("!=", self.epilogue, ir.Constant(THUNK.as_pointer(), None))
        final = b.and_(b.icmp_signed(">=", b.add(pc, kc), d["k"]),
                       b.icmp_signed(">=", b.add(jc, nc), d["n"]))
        with b.if_then(b.and_(given, final)):
            scale = d["row_scale"]
            b.call(self.epilogue, [self.ctx, b.mul(ic, scale), b.mul(b.add(ic, mc), scale)])


def tiles_args(fp: ir.Type) -> list[ir.Type]:
    """`tiles`' parameter types (`render_tiles`)."""
    return [I64, fp, fp, fp, I64, I64, I64, I1, I64, fp, fp, I1, I64, I64]


def render_tiles(module: ir.Module, ft: ir.Type, size: int, pairs: bool = False
                 ) -> ir.Function:
    """Define `<prefix>_tiles(i64 kc, T* apack, T* panel, T* c, i64 n, i64 mc, i64 nc,
    i1 first, i64 mode, T* out2, T* bias, i1 residual, i64 ic, i64 jc)`: the jr loop over
    the columns of tiles of one packed MC x KC block of A and KC x NC panel of B, calling
    the micro-kernel on each (it loops over the column's tiles: C's column at row ic,
    column jc + jr, row stride n). It lives
    beside the micro-kernel, compiled as scheduled code, so the driver around it (per
    block, not per tile) compiles as glue: 10 instead of ~50 ms of LLVM."""
    fp = ft.as_pointer()
    _, nr, _ = tile_shape(size)
    prefix = routine_prefix(ft, size, pairs)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), tiles_args(fp)),
                     name=f"{prefix}_tiles")
    kc, apack, panel, c, n, mc, nc, first, mode, out2, bias, residual, ic, jc = fn.args
    micro = _libc(module, f"{prefix}_micro", ir.VoidType(), micro_args(fp))
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def col_tile(jr: ir.Value) -> None:
        cols = _smin(b, _c(nr), b.sub(nc, jr))
        bsl = b.gep(panel, [b.mul(jr, kc)], inbounds=True)
        at = b.add(b.mul(ic, n), b.add(jc, jr))
        addend = b.select(residual, at, b.add(jc, jr))
        b.call(micro, [kc, apack, bsl, b.gep(c, [at], inbounds=True), n, mc, cols, first,
                       mode, b.gep(out2, [at]), b.gep(bias, [addend])])
    _loop(b, _c(0), nc, nr, col_tile, "jr")
    b.ret_void()
    return fn


def render_driver(module: ir.Module, ft: ir.Type, size: int, pairs: bool = False
                  ) -> ir.Function:
    """Define the shared driver of element type `ft` (`size` bytes; bfloat16 `pairs`) in
    `module`."""
    return _Driver(module, ft, size, pairs).function()


def render_call_site(module: ir.Module, name: str, d: GemmDims, ft: ir.Type, size: int,
                     epilogue: ir.Function | None, row_scale: int,
                     prepack: PrepackPlan | ClaimedPlan | None = None,
                     register: RegisterEpilogue | None = None,
                     private: bool = False, patches: PatchRead | None = None,
                     pairs: bool = False) -> ir.Function:
    """Add `void name(T* out, T* lhs, T* rhs, [epilogue's buffers...], i64 start, i64 stop)`
    calling the shared driver with this product's sizes (module docstring); with a
    `prepack` plan, start and stop count its chunks and an `i64* line` (the call's state
    line) follows (gemm/prepack.py). With `register`, the micro-kernel computes the
    epilogue kernel in registers (gemm/epilogue.py) and the kernel is not called; when the
    product is `private` to it too, the product is accumulated in the kernel's output
    and never stored on its own."""
    fp = ft.as_pointer()
    args = list(epilogue.function_type.args) if epilogue is not None else []
    row_ranged = len(args) >= 2 and all(a == I64 for a in args[-2:])
    buffers = args[:-2] if row_ranged else args
    tail = [I64, I64] + ([I64.as_pointer()] if prepack is not None else [])
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [fp, fp, fp, *buffers, *tail]),
                     name=name)
    fn.linkage = "internal"
    out, lhs, rhs = fn.args[:3]
    start, stop = fn.args[3 + len(buffers):5 + len(buffers)]
    given = list(fn.args[3:3 + len(buffers)])
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    values = driver_dims(d, size, row_scale, patches, pairs)
    if isinstance(prepack, ClaimedPlan):
        values[DIMS.index("mc")] = prepack.rows_per
    dims = _dims_copy(b, name, values)
    if patches is not None:
        pack = _libc(module, f"{routine_prefix(ft, size)}_pack_b_conv", ir.VoidType(),
                     list(conv_pack_type(fp).args))
        b.store(b.ptrtoint(pack, I64), b.gep(dims, [_c(DIMS.index("conv_pack"))]))
    if register is not None:
        kernel_out = _register_fields(b, dims, register, given)
        if private:
            out = kernel_out
    ctx = b.alloca(I8P, size=max(len(given), 1), name="buffers")
    for i, value in enumerate(given):
        b.store(b.bitcast(value, I8P), b.gep(ctx, [_c(i)]))
    thunk = _thunk(module, name, epilogue, buffers) \
        if epilogue is not None and row_ranged and register is None \
        else ir.Constant(THUNK.as_pointer(), None)
    driver = _libc(module, f"{routine_prefix(ft, size, pairs)}_driver", ir.VoidType(),
                   list(driver_type(ft).args))
    call = (driver, dims, out, lhs, rhs, thunk, ctx)
    if isinstance(prepack, ClaimedPlan):
        claims_at = b.gep(dims, [_c(DIMS.index("claims"))])
        emit_claimed(b, prepack, call, claims_at, start, stop, fn.args[-1])
    elif prepack is not None:
        emit_units(b, prepack, ft, size, call, start, stop, fn.args[-1])
    else:
        b.call(driver, [dims, out, lhs, rhs, start, stop, thunk, ctx, ir.Constant(fp, None)])
    if epilogue is not None and not row_ranged and register is None:
        b.call(epilogue, given)     # a small gemm: once, at the end
    b.ret_void()
    return fn


def _dims_copy(b: ir.IRBuilder, name: str, values: list[int]) -> ir.Value:
    """A stack copy of the call's `dims` (the call writes its run-time fields into it),
    copied from a private constant: one memcpy, where a store per field made each call
    site ~70 instructions longer (W9 has 41 call sites)."""
    table = ir.ArrayType(I64, len(values))
    const = ir.GlobalVariable(b.module, table, name=f"{name}.dims")
    const.global_constant, const.linkage = True, "private"
    const.initializer = ir.Constant(table, values)
    dims = b.alloca(I64, size=len(values), name="dims")
    copy = b.module.declare_intrinsic("llvm.memcpy", [I8P, I8P, I64])
    b.call(copy, [b.bitcast(dims, I8P), b.bitcast(const, I8P), _c(8 * len(values)),
                  ir.Constant(I1, 0)])
    return dims


def _register_fields(b: ir.IRBuilder, dims: ir.Value, register: RegisterEpilogue,
                     given: list[ir.Value]) -> ir.Value:
    """Store a register epilogue's mode and pointers into `dims`; the kernel's output."""
    out2 = given[register.out]
    bias = given[register.bias] if register.bias is not None else out2
    for field, value in (("epi_mode", _c(register.mode)), ("epi_out", b.ptrtoint(out2, I64)),
                         ("epi_bias", b.ptrtoint(bias, I64))):
        b.store(value, b.gep(dims, [_c(DIMS.index(field))]))
    return out2


def _thunk(module: ir.Module, name: str, epilogue: ir.Function,
           buffers: list[ir.Type]) -> ir.Function:
    """`void thunk(i8** buffers, i64 lo, i64 hi)`: the epilogue on rows [lo, hi)."""
    fn = ir.Function(module, THUNK, name=f"{name}.epilogue")
    fn.linkage = "internal"
    ctx, lo, hi = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    loaded = [b.bitcast(b.load(b.gep(ctx, [_c(i)])), ty) for i, ty in enumerate(buffers)]
    b.call(epilogue, [*loaded, lo, hi])
    b.ret_void()
    return fn


# The shared routines' parts, the slowest to compile first (LLVM CPU ms for float32 on the
# bench machine: pack_b_conv ~95, micro ~60, driver ~40, pack_b_t ~34, pack_a ~25, the
# others ~12), so a cold start's first compile begins after one part's text, not all.
ROUTINE_PARTS = ("pack_b_conv", "micro", "driver", "pack_b_t", "pack_a", "pack_a_t", "pack_b")


def routine_parts(with_conv: bool = False) -> tuple[str, ...]:
    """The parts of the shared routines a program needs, slowest to compile first."""
    return tuple(p for p in ROUTINE_PARTS if with_conv or p != "pack_b_conv")


@functools.cache
def routine_text(dtype_name: str, part: str) -> str:
    """One shared routine of "float32", "float64" or "int32" as an LLVM IR module's text
    (one module each, so they compile in parallel and are cached apart). Parts: "micro"
    (the micro-kernel), "pack_a", "pack_a_t", "pack_b", "pack_b_t", "driver" and
    "pack_b_conv" (implicit GEMM; the call sites of a program that has one give the driver
    its address). The text shipped with the package when it matches (`prerendered.py`),
    else rendered now."""
    shipped = shipped_text(dtype_name, part) if part in ROUTINE_PARTS else None
    return shipped if shipped is not None else render_routine_text(dtype_name, part)


def render_routine_text(dtype_name: str, part: str) -> str:
    """`routine_text` rendered through llvmlite."""
    if dtype_name not in ("float32", "float64", "int32", "bfloat16"):
        raise ValueError(f"routine_text: no shared GEMM routines for {dtype_name!r}")
    if part not in ROUTINE_PARTS:
        raise ValueError(f"routine_text: no shared GEMM routine {part!r}; one of "
                         f"{ROUTINE_PARTS}")
    module = ir.Module(name=f"fgrad_gemm_{dtype_name}")
    module.triple, module.data_layout = target.triple_and_layout()
    if dtype_name == "bfloat16":
        render_pair_routine(module, part)
        return str(module)
    ft, size = GEMM_TYPES[getattr(dtypes, dtype_name)]
    routines = shared_routines(module, ft, size)
    if part == "driver":
        render_driver(module, ft, size)
        render_prepack(module, ft, size, DIMS)
    elif part == "micro":
        routines.micro_kernel()
        render_tiles(module, ft, size)
    elif part == "pack_b_conv":
        render_conv_pack(module, ft, size, routines.nr, routine_prefix(ft, size),
                         {name: DIMS.index(name) for name in GEOMETRY})
    else:   # packing of operand a or b, plain or transposed
        side = part[len("pack_")]
        routines.pack_function(side, routines.mr if side == "a" else routines.nr,
                               part.endswith("_t"))
    return str(module)


def render_pair_routine(module: ir.Module, part: str) -> None:
    """Define one shared routine of the bfloat16 pairs GEMM (gemm/pairs.py) in `module`:
    float32's driver and tile loops around the AMX micro-kernel, and the pairs' packing
    (B stored transposed copies words with the int32 routine)."""
    ft, size = GEMM_TYPES[dtypes.float32]
    routines = shared_routines(module, ft, size, pairs=True)
    name = f"{routines.prefix}_{part}" + ("_n" if part in ("pack_a", "pack_b") else "")
    if part == "driver":
        render_driver(module, ft, size, pairs=True)
    elif part == "micro":
        routines.micro_kernel()
        render_tiles(module, ft, size, pairs=True)
    elif part in ("pack_a", "pack_a_t"):
        render_pair_rows(module, name, interleave=part == "pack_a_t")
    elif part == "pack_b":
        render_pair_interleave(module, name, routines.nr)
    elif part == "pack_b_t":
        render_pack(module, name, ir.IntType(32), 4, routines.lanes, "b", routines.nr, True)
    else:
        raise ValueError(f"routine_text: the bfloat16 pairs GEMM has no {part!r}")


def routine_texts(dtype_name: str, with_conv: bool = False) -> tuple[tuple[str, str], ...]:
    """Every shared routine a program of `dtype_name` products needs, as (part, IR text)
    (`routine_text`), slowest to compile first."""
    return tuple((part, routine_text(dtype_name, part)) for part in routine_parts(with_conv))


def render_native_gemm_rows(module: ir.Module, name: str, eqn: Eqn,
                            epilogue: ir.Function | None = None,
                            row_scale: int = 1, split: bool = True,
                            epilogue_kernel: Kernel | None = None,
                            private: bool = False) -> ir.Function:
    """Add `void name(T* out, T* lhs, T* rhs, [epilogue's buffers...], i64 start, i64 stop)`
    (module docstring); with an `epilogue` kernel function, it runs on each block of rows
    once they are final (or, when it takes no row range, once at the end)."""
    dims = gemm_dims(eqn)
    dtype = eqn.outvars[0].aval.dtype
    if dims is None or dtype not in GEMM_TYPES or dims.k == 0:
        raise ValueError(f"render_native_gemm_rows: {name} is not a float/int32 dot_general "
                         f"with a BLAS view ({eqn.inputs[0].aval} x {eqn.inputs[1].aval}); a "
                         f"bug in the schedule")
    ft, size = GEMM_TYPES[dtype]
    register = None if epilogue_kernel is None else register_epilogue(eqn, epilogue_kernel)
    return render_call_site(module, name, dims, ft, size, epilogue, row_scale,
                            prepack_plan(eqn) if split else None, register, private,
                            eqn.params.get("rhs_patches"), bool(eqn.params.get(PAIRS_PARAM)))


def render_native_gemm(module: ir.Module, name: str, eqn: Eqn,
                       epilogue: ir.Function | None = None, row_scale: int = 1,
                       epilogue_kernel: Kernel | None = None,
                       private: bool = False) -> ir.Function:
    """Add `void name(T* out, T* lhs, T* rhs, [epilogue's buffers...])`: every row."""
    rows = render_native_gemm_rows(module, f"{name}.rows", eqn, epilogue, row_scale,
                                   split=False, epilogue_kernel=epilogue_kernel,
                                   private=private)
    dims = gemm_dims(eqn)
    assert dims is not None
    pointers = rows.function_type.args[:-2]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), pointers), name=name)
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.call(rows, [*fn.args, _c(0), _c(dims.m * math.prod(dims.batch))])
    b.ret_void()
    return fn
