"""The B packing routine of an implicit-GEMM convolution: slivers read from the image.

In: the driver's `dims` (gemm/driver.py DIMS: `conv` is 1 or 2, the `conv_*` fields the
image's geometry, schedule/fuse_patches.py). Out: `<prefix>_pack_b_conv(T* dest, T* image,
i64* dims, i64 first, i64 limit, i64 k0, i64 kc)`, which writes the same panel as
`pack_b_n` / `pack_b_t` would from the stored patches of one (C, H, W) image:
dest[t][p][w] = B(k0 + p, first + t*NR + w), zero beyond `limit` columns.

B(row, col) is patches[c, tap, pixel] with (c, tap) the row and the pixel the column
(conv 1, a convolution's forward product) or the other way round (conv 2, the weight's
gradient). Element: image[c, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw], zero outside the
image (the padding). Per call, a table gives each of the kc rows its part of the address
and bounds; per sliver, vectors give each lane its part; per row of a sliver, one masked
load when the sliver's pixels are consecutive input pixels of one row (stride 1, the
sliver within one output row: most slivers of a forward conv), else a masked gather.
"""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from fgrad.lower.llvm.gemm.native import I64, KC, _c, _loop

GEOMETRY = ("conv", "conv_h", "conv_w", "conv_kh", "conv_kw", "conv_sh", "conv_sw",
            "conv_dh", "conv_dw", "conv_ph", "conv_pw", "conv_ow")
I1, I32 = ir.IntType(1), ir.IntType(32)


class _ConvPack:
    def __init__(self, module: ir.Module, ft: ir.Type, size: int, nr: int, prefix: str,
                 fields: dict[str, int]):
        self.module, self.ft, self.size, self.nr = module, ft, size, nr
        self.fp = ft.as_pointer()
        self.vec, self.ivec = ir.VectorType(ft, nr), ir.VectorType(I64, nr)
        self.mask_type = ir.VectorType(I1, nr)
        self.name, self.fields = f"{prefix}_pack_b_conv", fields
        suffix = "f64" if size == 8 else "f32"
        self.masked_load = self._intrinsic(f"llvm.masked.load.v{nr}{suffix}.p0",
                                           self.vec.as_pointer())
        self.gather = self._intrinsic(f"llvm.masked.gather.v{nr}{suffix}.v{nr}p0",
                                      ir.VectorType(self.fp, nr))

    def _intrinsic(self, name: str, pointer: ir.Type) -> ir.Function:
        found = self.module.globals.get(name)
        return found if found is not None else ir.Function(self.module, ir.FunctionType(
            self.vec, [pointer, I32, self.mask_type, self.vec]), name=name)

    def function(self) -> ir.Function:
        """Define the routine (module docstring)."""
        fn = ir.Function(self.module, ir.FunctionType(
            ir.VoidType(), [self.fp, self.fp, I64.as_pointer(), I64, I64, I64, I64]),
            name=self.name)
        dest, image, dims, first, limit, k0, kc = fn.args
        dest.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.b, self.image = b, image
        self.g = {name: b.load(b.gep(dims, [_c(self.fields[name])]), name=name)
                  for name in GEOMETRY}
        self.plane = b.mul(self.g["conv_h"], self.g["conv_w"])
        # per row of the panel: address part, row offset and column offset in the image
        tables = [b.alloca(I64, size=KC, name=n) for n in ("row_at", "row_dh", "row_dw")]
        transposed = b.icmp_signed("==", self.g["conv"], _c(2))

        def fill(p: ir.Value) -> None:
            at, dh, dw = self._row_parts(b.add(k0, p), transposed)
            for table, value in zip(tables, (at, dh, dw)):
                b.store(value, b.gep(table, [p]))
        _loop(b, _c(0), kc, 1, fill, "tab")
        count = b.sdiv(b.add(b.sub(limit, first), _c(self.nr - 1)), _c(self.nr))

        def sliver(t: ir.Value) -> None:
            start = b.add(first, b.mul(t, _c(self.nr)))
            cols = b.add(self._splat(start), ir.Constant(self.ivec, list(range(self.nr))))
            valid = b.icmp_signed("<", cols, self._splat(limit))
            at, dh, dw = self._lane_parts(cols, transposed)
            out = b.gep(dest, [b.mul(t, b.mul(kc, _c(self.nr)))])
            contiguous = b.and_(b.not_(transposed), self._one_input_run(start, limit))
            with b.if_else(contiguous) as (then, otherwise):
                with then:
                    self._rows(out, kc, tables, (at, dh, dw), valid, self._load_run)
                with otherwise:
                    self._rows(out, kc, tables, (at, dh, dw), valid, self._gather)
        _loop(b, _c(0), count, 1, sliver, "sl")
        b.ret_void()
        return fn

    def _splat(self, v: ir.Value) -> ir.Value:
        b = self.b
        one = b.insert_element(ir.Constant(self.ivec, ir.Undefined), v, ir.Constant(I32, 0))
        return b.shuffle_vector(one, ir.Constant(self.ivec, ir.Undefined),
                                ir.Constant(ir.VectorType(I32, self.nr), [0] * self.nr))

    def _tap_parts(self, row: ir.Value, vector: bool) -> tuple[ir.Value, ...]:
        """(address part, row offset, column offset) of (channel, tap) index `row`."""
        b, g = self.b, self.g
        c = (lambda v: self._splat(v)) if vector else (lambda v: v)
        taps = b.mul(g["conv_kh"], g["conv_kw"])
        channel, tap = b.sdiv(row, c(taps)), b.srem(row, c(taps))
        dh = b.mul(b.sdiv(tap, c(g["conv_kw"])), c(g["conv_dh"]))
        dw = b.mul(b.srem(tap, c(g["conv_kw"])), c(g["conv_dw"]))
        at = b.add(b.mul(channel, c(self.plane)), b.add(b.mul(dh, c(g["conv_w"])), dw))
        return at, dh, dw

    def _pixel_parts(self, pixel: ir.Value, vector: bool) -> tuple[ir.Value, ...]:
        """(address part, row offset, column offset) of output pixel index `pixel`."""
        b, g = self.b, self.g
        c = (lambda v: self._splat(v)) if vector else (lambda v: v)
        oh, ow = b.sdiv(pixel, c(g["conv_ow"])), b.srem(pixel, c(g["conv_ow"]))
        dh = b.sub(b.mul(oh, c(g["conv_sh"])), c(g["conv_ph"]))
        dw = b.sub(b.mul(ow, c(g["conv_sw"])), c(g["conv_pw"]))
        return b.add(b.mul(dh, c(g["conv_w"])), dw), dh, dw

    def _row_parts(self, row: ir.Value, transposed: ir.Value) -> tuple[ir.Value, ...]:
        b = self.b
        tap, pixel = self._tap_parts(row, False), self._pixel_parts(row, False)
        return tuple(b.select(transposed, p, t) for t, p in zip(tap, pixel))

    def _lane_parts(self, cols: ir.Value, transposed: ir.Value) -> tuple[ir.Value, ...]:
        b = self.b
        tap, pixel = self._tap_parts(cols, True), self._pixel_parts(cols, True)
        return tuple(b.select(transposed, t, p) for t, p in zip(tap, pixel))

    def _one_input_run(self, start: ir.Value, limit: ir.Value) -> ir.Value:
        """Whether a forward sliver's pixels are nr consecutive pixels of one output row
        read with stride 1: consecutive input pixels."""
        b, g, nr = self.b, self.g, _c(self.nr)
        inside = b.icmp_signed("<=", b.add(start, nr), limit)
        one_row = b.icmp_signed("<=", b.add(b.srem(start, g["conv_ow"]), nr), g["conv_ow"])
        unit = b.icmp_signed("==", g["conv_sw"], _c(1))
        return b.and_(inside, b.and_(one_row, unit))

    def _rows(self, out: ir.Value, kc: ir.Value, tables: list[ir.Value],
              lanes: tuple[ir.Value, ...], valid: ir.Value,
              read: Callable[[ir.Value, ir.Value, ir.Value], ir.Value]) -> None:
        """out[p][w] for p in [0, kc): the row's and the lane's parts added."""
        b, g = self.b, self.g
        vp = self.vec.as_pointer()

        def row(p: ir.Value) -> None:
            at, dh, dw = (b.load(b.gep(t, [p])) for t in tables)
            ih = b.add(lanes[1], self._splat(dh))
            iw = b.add(lanes[2], self._splat(dw))
            inside = b.and_(b.icmp_unsigned("<", ih, self._splat(g["conv_h"])),
                            b.icmp_unsigned("<", iw, self._splat(g["conv_w"])))
            value = read(b.add(lanes[0], self._splat(at)), at, b.and_(valid, inside))
            b.store(value, b.bitcast(b.gep(out, [b.mul(p, _c(self.nr))]), vp),
                    align=self.size)
        _loop(b, _c(0), kc, 1, row, "row")

    def _load_run(self, offsets: ir.Value, row_at: ir.Value, mask: ir.Value) -> ir.Value:
        b = self.b
        first = b.extract_element(offsets, ir.Constant(I32, 0))
        pointer = b.bitcast(b.gep(self.image, [first]), self.vec.as_pointer())
        return b.call(self.masked_load, [pointer, ir.Constant(I32, self.size), mask,
                                         ir.Constant(self.vec, None)])

    def _gather(self, offsets: ir.Value, row_at: ir.Value, mask: ir.Value) -> ir.Value:
        b = self.b
        base = self._splat(b.ptrtoint(self.image, I64))
        addresses = b.add(base, b.mul(offsets, self._splat(_c(self.size))))
        pointers = b.inttoptr(addresses, ir.VectorType(self.fp, self.nr))
        return b.call(self.gather, [pointers, ir.Constant(I32, self.size), mask,
                                    ir.Constant(self.vec, None)])


def render_conv_pack(module: ir.Module, ft: ir.Type, size: int, nr: int, prefix: str,
                     fields: dict[str, int]) -> ir.Function:
    """Define `<prefix>_pack_b_conv` (module docstring); `fields`: index of each GEOMETRY
    name in the driver's dims array."""
    return _ConvPack(module, ft, size, nr, prefix, fields).function()
