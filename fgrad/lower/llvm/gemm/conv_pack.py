"""The B packing routine of an implicit-GEMM convolution: slivers read from the image.

In: the driver's `dims` (gemm/driver.py DIMS: `conv` is 1 or 2, the `conv_*` fields the
image's geometry, schedule/fuse_patches.py). Out: `<prefix>_pack_b_conv(T* dest, T* image,
i64* dims, i64 first, i64 limit, i64 k0, i64 kc)`, which writes the same panel as
`pack_b_n` / `pack_b_t` would from the stored patches of one (C, D, H, W) image (a 1-d or
2-d convolution's with D = 1 and H = 1 as needed: kernel, stride and dilation 1 there):
dest[t][p][w] = B(k0 + p, first + t*NR + w), zero beyond `limit` columns.

B(row, col) is patches[c, tap, pixel] with (c, tap) the row and the pixel the column
(conv 1, a convolution's forward product) or the other way round (conv 2, the weight's
gradient). Element: image[c, od*sd - pd + kd*dd, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw],
zero outside the image (the padding). Per call, i32 tables give each of the kc rows its
part of the address and bounds, and each column of the slivers its own (filled by counters,
no division per entry; in a forward product only for the slivers it gathers). Per row of a
sliver, when its pixels are consecutive input pixels of one row (stride 1, the sliver
within one output row: most slivers of a forward conv; its first pixel's place computed
once), one plain load (a masked one at the image's left or right edge, zeros in its
padding rows), else a masked gather. A weight gradient's panel (rows pixels) is packed 8
rows at a time where they are consecutive input pixels of one row: per tap one 8-pixel
load, then 8 x 8 transposes in registers (`_pixel_blocks`); its other rows are gathered.
Offsets are 32-bit: fuse_patches.py admits images of < 2^31 elements per batch entry.
"""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from fgrad.lower.llvm.gemm.native import I64, KC, NC, _c, _loop
from fgrad.lower.llvm.gemm.pack import transpose_rows

GEOMETRY = ("conv", "conv_d", "conv_h", "conv_w", "conv_kd", "conv_kh", "conv_kw",
            "conv_sd", "conv_sh", "conv_sw", "conv_dd", "conv_dh", "conv_dw",
            "conv_pd", "conv_ph", "conv_pw", "conv_oh", "conv_ow")
AXES = ("d", "h", "w")   # a 1-d or 2-d convolution is read as a 3-d one with unit axes
I1, I32 = ir.IntType(1), ir.IntType(32)
# A weight gradient's panel (pixels x taps) is packed BLOCK pixel rows at a time where they
# are consecutive input pixels: per tap one vector load along the pixels, then BLOCK x BLOCK
# transposes in registers (instead of a gather of every row's taps).
BLOCK = 8


def conv_pack_type(fp: ir.Type) -> ir.FunctionType:
    """The packing routine's type for element pointer type `fp`."""
    return ir.FunctionType(ir.VoidType(), [fp, fp, I64.as_pointer(), I64, I64, I64, I64])


class _ConvPack:
    def __init__(self, module: ir.Module, ft: ir.Type, size: int, nr: int, prefix: str,
                 fields: dict[str, int]):
        self.module, self.ft, self.size, self.nr = module, ft, size, nr
        self.fp = ft.as_pointer()
        self.vec, self.ivec = ir.VectorType(ft, nr), ir.VectorType(I32, nr)
        self.lvec = ir.VectorType(I64, nr)
        self.name, self.fields = f"{prefix}_pack_b_conv", fields
        suffix = "f64" if size == 8 else "f32"
        self.masked_load = self._intrinsic(f"llvm.masked.load.v{nr}{suffix}.p0",
                                           self.vec.as_pointer(), self.vec)
        self.gather = self._intrinsic(f"llvm.masked.gather.v{nr}{suffix}.v{nr}p0",
                                      ir.VectorType(self.fp, nr), self.vec)
        self.block = ir.VectorType(ft, BLOCK)   # BLOCK pixels of one tap (a transposed run)
        self.block_load = self._intrinsic(f"llvm.masked.load.v{BLOCK}{suffix}.p0",
                                          self.block.as_pointer(), self.block)

    def _intrinsic(self, name: str, pointer: ir.Type, vec: ir.Type) -> ir.Function:
        """A masked load or gather `vec f(pointer, i32 align, <n x i1> mask, vec passthru)`."""
        found = self.module.globals.get(name)
        return found if found is not None else ir.Function(self.module, ir.FunctionType(
            vec, [pointer, I32, ir.VectorType(I1, vec.count), vec]), name=name)

    def function(self) -> ir.Function:
        """Define the routine (module docstring)."""
        fn = ir.Function(self.module, conv_pack_type(self.fp), name=self.name)
        dest, image, dims, first, limit, k0, kc = fn.args
        dest.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.b, self.image = b, image
        self.scratch = b.alloca(self.block, size=BLOCK, name="tap_runs")
        self.blocked = b.alloca(I1, size=KC // BLOCK, name="blocked")
        self.g = {name: b.load(b.gep(dims, [_c(self.fields[name])]), name=name)
                  for name in GEOMETRY}
        # (address part, depth, row and column offsets) in the image, as i32: per panel
        # row, and per column of the panel's slivers
        parts = ("at",) + tuple(f"d{axis}" for axis in AXES)
        rows = [b.alloca(I32, size=KC, name=f"row_{n}") for n in parts]
        cols = [b.alloca(I32, size=NC + self.nr, name=f"col_{n}") for n in parts]
        self.counters = [b.alloca(I64, name=f"counter{i}") for i in range(4)]  # in entry:
        count = b.sdiv(b.add(b.sub(limit, first), _c(self.nr - 1)), _c(self.nr))  # registers
        span = b.mul(count, _c(self.nr))
        transposed = b.icmp_signed("==", self.g["conv"], _c(2))
        with b.if_else(transposed) as (pixel_rows, tap_rows):
            with pixel_rows:
                self._walk_pixels(k0, kc, rows)
                self._walk_taps(first, span, cols)
            with tap_rows:   # a sliver's pixels are walked only when it is gathered
                self._walk_taps(k0, kc, rows)
        columns = b.trunc(b.sub(limit, first), I32)

        blocks = b.sdiv(kc, _c(BLOCK)) if self.nr % BLOCK == 0 else _c(0)

        def blocked(p: ir.Value) -> ir.Value:   # a transposed row packed by _pixel_blocks
            q = b.sdiv(p, _c(BLOCK))
            return b.and_(transposed, b.select(b.icmp_signed("<", q, blocks),
                                               b.load(b.gep(self.blocked, [q])),
                                               ir.Constant(I1, 0)))

        def sliver(t: ir.Value) -> None:
            start = b.add(first, b.mul(t, _c(self.nr)))
            at = b.mul(t, _c(self.nr))
            out = b.gep(dest, [b.mul(t, b.mul(kc, _c(self.nr)))])
            run = b.and_(b.not_(transposed), self._one_input_run(start, limit))
            with b.if_else(transposed) as (tap_columns, pixel_columns):
                with tap_columns:
                    self._pixel_blocks(out, blocks, rows, cols, at, columns)
                with pixel_columns:
                    with b.if_else(run) as (runs, scattered):
                        with runs:
                            self._run_rows(out, kc, rows, self._pixel_at(start))
                        with scattered:
                            self._walk_pixels(start, _c(self.nr), cols)
            with b.if_then(b.not_(run)):   # the rows left: gathered, one copy of the code
                table_at = b.select(transposed, at, _c(0))
                lanes = tuple(b.load(b.bitcast(b.gep(table, [table_at]),
                                               self.ivec.as_pointer()), align=4)
                              for table in cols)
                index = b.add(self._splat(b.trunc(at, I32)),
                              ir.Constant(self.ivec, list(range(self.nr))))
                valid = b.icmp_signed("<", index, self._splat(columns))
                self._rows(out, kc, rows, lanes, valid, self._gather, blocked)
        _loop(b, _c(0), count, 1, sliver, "sl")
        b.ret_void()
        return fn

    def _splat(self, v: ir.Value, lanes: int = 0) -> ir.Value:
        """`v` in every lane of a vector of `lanes` (default: the sliver's NR)."""
        b, lanes = self.b, lanes or self.nr
        vty = ir.VectorType(v.type, lanes)
        one = b.insert_element(ir.Constant(vty, ir.Undefined), v, ir.Constant(I32, 0))
        return b.shuffle_vector(one, ir.Constant(vty, ir.Undefined),
                                ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))

    def _walk(self, state: list[ir.Value], count: ir.Value, tables: list[ir.Value],
              parts: Callable[[list[ir.Value]], tuple[ir.Value, ...]],
              step: Callable[[list[ir.Value]], list[ir.Value]]) -> None:
        """tables[i][j] = parts(state_j)[i] for j in [0, count), state_{j+1} = step(state_j):
        counters instead of a division per entry."""
        b = self.b
        slots = self.counters[:len(state)]
        for slot, value in zip(slots, state):
            b.store(value, slot)

        def entry(j: ir.Value) -> None:
            now = [b.load(slot) for slot in slots]
            for table, value in zip(tables, parts(now)):
                b.store(b.trunc(value, I32), b.gep(table, [j]))
            for slot, value in zip(slots, step(now)):
                b.store(value, slot)
        _loop(b, _c(0), count, 1, entry, "walk")

    def _address(self, offsets: list[ir.Value]) -> ir.Value:
        """The image offset of (depth, row, column) offsets."""
        b, g = self.b, self.g
        return b.add(b.mul(b.add(b.mul(offsets[0], g["conv_h"]), offsets[1]), g["conv_w"]),
                     offsets[2])

    def _walk_pixels(self, start: ir.Value, count: ir.Value, tables: list[ir.Value]) -> None:
        """Output pixels start, start + 1, ...: (address part, depth, row, column offset)."""
        b, g = self.b, self.g

        def step(s: list[ir.Value]) -> list[ir.Value]:
            ow = b.add(s[2], _c(1))
            next_row = b.icmp_signed(">=", ow, g["conv_ow"])
            oh = b.add(s[1], b.zext(next_row, I64))
            next_plane = b.icmp_signed(">=", oh, g["conv_oh"])
            return [b.add(s[0], b.zext(next_plane, I64)), b.select(next_plane, _c(0), oh),
                    b.select(next_row, _c(0), ow)]
        self._walk(self._position(start), count, tables, self._pixel_parts, step)

    def _position(self, pixel: ir.Value) -> list[ir.Value]:
        """(od, oh, ow) of output pixel `pixel` (its flat index)."""
        b, g = self.b, self.g
        rows = b.sdiv(pixel, g["conv_ow"])
        return [b.sdiv(rows, g["conv_oh"]), b.srem(rows, g["conv_oh"]),
                b.srem(pixel, g["conv_ow"])]

    def _pixel_parts(self, position: list[ir.Value]) -> tuple[ir.Value, ...]:
        """(address part, depth, row, column offset) in the image of output position
        (od, oh, ow)."""
        b, g = self.b, self.g
        offsets = [b.sub(b.mul(v, g[f"conv_s{axis}"]), g[f"conv_p{axis}"])
                   for v, axis in zip(position, AXES)]
        return (self._address(offsets), *offsets)

    def _walk_taps(self, start: ir.Value, count: ir.Value, tables: list[ir.Value]) -> None:
        """(channel, tap) indices start, start + 1, ...: (address part, depth, row, column
        offset)."""
        b, g = self.b, self.g
        channel = b.mul(g["conv_d"], b.mul(g["conv_h"], g["conv_w"]))

        def parts(s: list[ir.Value]) -> tuple[ir.Value, ...]:
            offsets = [b.mul(v, g[f"conv_d{axis}"]) for v, axis in zip(s[1:], AXES)]
            return (b.add(b.mul(s[0], channel), self._address(offsets)), *offsets)

        def step(s: list[ir.Value]) -> list[ir.Value]:
            kw = b.add(s[3], _c(1))
            next_row = b.icmp_signed(">=", kw, g["conv_kw"])
            kh = b.add(s[2], b.zext(next_row, I64))
            next_plane = b.icmp_signed(">=", kh, g["conv_kh"])
            kd = b.add(s[1], b.zext(next_plane, I64))
            next_channel = b.icmp_signed(">=", kd, g["conv_kd"])
            return [b.add(s[0], b.zext(next_channel, I64)),
                    b.select(next_channel, _c(0), kd), b.select(next_plane, _c(0), kh),
                    b.select(next_row, _c(0), kw)]
        plane = b.mul(g["conv_kh"], g["conv_kw"])
        taps = b.mul(g["conv_kd"], plane)
        tap = b.srem(start, taps)
        in_plane = b.srem(tap, plane)
        state = [b.sdiv(start, taps), b.sdiv(tap, plane), b.sdiv(in_plane, g["conv_kw"]),
                 b.srem(in_plane, g["conv_kw"])]
        self._walk(state, count, tables, parts, step)

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
              read: Callable[[ir.Value, ir.Value], ir.Value],
              skip: Callable[[ir.Value], ir.Value] | None = None) -> None:
        """out[p][w] for p in [0, kc) but the rows `skip` names: the row's and the lane's
        parts added."""
        b, g = self.b, self.g
        vp = self.vec.as_pointer()
        sizes = [self._splat(b.trunc(g[f"conv_{axis}"], I32)) for axis in AXES]

        def row(p: ir.Value) -> None:
            if skip is not None:
                with b.if_then(b.not_(skip(p))):
                    row_values(p)
            else:
                row_values(p)

        def row_values(p: ir.Value) -> None:
            at, *offsets = (b.load(b.gep(t, [p])) for t in tables)
            inside = valid
            for lane, offset, size in zip(lanes[1:], offsets, sizes):
                inside = b.and_(inside, b.icmp_unsigned("<", b.add(lane, self._splat(offset)),
                                                        size))
            value = read(b.add(lanes[0], self._splat(at)), inside)
            b.store(value, b.bitcast(b.gep(out, [b.mul(p, _c(self.nr))]), vp),
                    align=self.size)
        _loop(b, _c(0), kc, 1, row, "row")

    def _pixel_at(self, pixel: ir.Value) -> tuple[ir.Value, ...]:
        """(address part, depth, row, column offset) of output pixel `pixel`, as i32."""
        return tuple(self.b.trunc(v, I32)
                     for v in self._pixel_parts(self._position(pixel)))

    def _run_rows(self, out: ir.Value, kc: ir.Value, tables: list[ir.Value],
                  start: tuple[ir.Value, ...]) -> None:
        """out[p] for p in [0, kc) of a sliver of nr consecutive input pixels of one row
        (`_one_input_run`, every lane inside the panel): one plain vector load where the
        row's pixels are all inside the image, zeros where its input row is padding, else
        a load masked by column. Tests of scalars, as masks of several conditions cost
        LLVM ~25 instructions per row (it packs i1 vectors to bytes and back)."""
        b, g, vp = self.b, self.g, self.vec.as_pointer()
        at0, d0, h0, w0 = start
        depth, height, width = (b.trunc(g[f"conv_{axis}"], I32) for axis in AXES)
        last = ir.Constant(I32, self.nr)
        run = b.add(self._splat(w0), ir.Constant(self.ivec, list(range(self.nr))))

        def row(p: ir.Value) -> None:
            at, dd, dh, dw = (b.load(b.gep(t, [p])) for t in tables)
            iw = b.add(w0, dw)
            pointer = b.bitcast(b.gep(self.image, [b.sext(b.add(at0, at), I64)]), vp)
            dest = b.bitcast(b.gep(out, [b.mul(p, _c(self.nr))]), vp)
            row_inside = b.and_(b.icmp_unsigned("<", b.add(h0, dh), height),
                                b.icmp_unsigned("<", b.add(d0, dd), depth))
            columns_inside = b.and_(b.icmp_signed(">=", iw, ir.Constant(I32, 0)),
                                    b.icmp_signed("<=", b.add(iw, last), width))
            with b.if_else(b.and_(row_inside, columns_inside)) as (whole, part):
                with whole:
                    b.store(b.load(pointer, align=self.size), dest, align=self.size)
                with part:
                    self._part_row(pointer, dest, row_inside, b.add(run, self._splat(dw)))
        _loop(b, _c(0), kc, 1, row, "run")

    def _pixel_blocks(self, out: ir.Value, blocks: ir.Value, rows: list[ir.Value],
                      cols: list[ir.Value], at: ir.Value, columns: ir.Value) -> None:
        """A transposed sliver (rows pixels, lanes taps at panel column `at`): each of the
        first `blocks` BLOCKs of rows that are consecutive input pixels of one row (the
        last one's depth and row those of the first, its column BLOCK - 1 further: stride
        1) by `_block_lanes`, noted in `self.blocked` (the other rows are gathered)."""
        b = self.b

        def block(q: ir.Value) -> None:
            p = b.mul(q, _c(BLOCK))
            first = [b.load(b.gep(t, [p])) for t in rows]
            last = [b.load(b.gep(t, [b.add(p, _c(BLOCK - 1))])) for t in rows]
            run = b.and_(b.and_(b.icmp_signed("==", first[1], last[1]),
                                b.icmp_signed("==", first[2], last[2])),
                         b.icmp_signed("==", b.add(first[3], ir.Constant(I32, BLOCK - 1)),
                                       last[3]))
            b.store(run, b.gep(self.blocked, [q]))
            with b.if_then(run):
                _loop(b, _c(0), _c(self.nr // BLOCK), 1, lambda group: self._block_lanes(
                    out, p, first, cols, b.add(at, b.mul(group, _c(BLOCK))), columns,
                    group), "grp")
        _loop(b, _c(0), blocks, 1, block, "blk")

    def _block_lanes(self, out: ir.Value, p: ir.Value, first: list[ir.Value],
                     cols: list[ir.Value], column: ir.Value, columns: ir.Value,
                     group: ir.Value) -> None:
        """out[p + i][group * BLOCK + j] for i, j < BLOCK: tap j's BLOCK pixels in one
        vector load (masked at the image's edge, zeros outside it or beyond `columns`),
        then transposed."""
        b, g = self.b, self.g
        depth, height, width = (b.trunc(g[f"conv_{axis}"], I32) for axis in AXES)
        zero = ir.Constant(self.block, None)

        def lane(j: ir.Value) -> None:
            c = b.add(column, j)
            at, dd, dh, dw = (b.load(b.gep(t, [c])) for t in cols)
            iw = b.add(first[3], dw)
            inside = b.and_(b.icmp_signed("<", b.trunc(c, I32), columns), b.and_(
                b.icmp_unsigned("<", b.add(first[1], dd), depth),
                b.icmp_unsigned("<", b.add(first[2], dh), height)))
            whole = b.and_(inside, b.and_(
                b.icmp_signed(">=", iw, ir.Constant(I32, 0)),
                b.icmp_signed("<=", b.add(iw, ir.Constant(I32, BLOCK)), width)))
            pointer = b.bitcast(b.gep(self.image, [b.sext(b.add(first[0], at), I64)]),
                                self.block.as_pointer())
            slot = b.gep(self.scratch, [j])
            with b.if_else(whole) as (plain, edge):
                with plain:
                    b.store(b.load(pointer, align=self.size), slot)
                with edge:
                    b.store(zero, slot)
                    with b.if_then(inside):
                        lanes = b.add(self._splat(iw, BLOCK),
                                      ir.Constant(ir.VectorType(I32, BLOCK), list(range(BLOCK))))
                        mask = b.icmp_unsigned("<", lanes, self._splat(width, BLOCK))
                        b.store(b.call(self.block_load, [pointer, ir.Constant(I32, self.size),
                                                         mask, zero]), slot)
        _loop(b, _c(0), _c(BLOCK), 1, lane, "tap")
        taps = [b.load(b.gep(self.scratch, [_c(j)])) for j in range(BLOCK)]
        for i, pixel in enumerate(transpose_rows(b, taps)):
            at = b.add(b.mul(b.add(p, _c(i)), _c(self.nr)), b.mul(group, _c(BLOCK)))
            b.store(pixel, b.bitcast(b.gep(out, [at]), self.block.as_pointer()),
                    align=self.size)

    def _part_row(self, pointer: ir.Value, dest: ir.Value, row_inside: ir.Value,
                  columns: ir.Value) -> None:
        """A run's row that is not all inside: zeros (its input row is padding) or the
        columns inside the image, read by a masked load."""
        b, zero = self.b, ir.Constant(self.vec, None)
        with b.if_else(row_inside) as (inside, padding):
            with inside:
                width = self._splat(b.trunc(self.g["conv_w"], I32))
                mask = b.icmp_unsigned("<", columns, width)
                b.store(b.call(self.masked_load, [pointer, ir.Constant(I32, self.size), mask,
                                                  zero]), dest, align=self.size)
            with padding:
                b.store(zero, dest, align=self.size)

    def _gather(self, offsets: ir.Value, mask: ir.Value) -> ir.Value:
        b = self.b
        base = self._splat(b.ptrtoint(self.image, I64))
        wide = b.sext(offsets, self.lvec)
        addresses = b.add(base, b.mul(wide, self._splat(_c(self.size))))
        pointers = b.inttoptr(addresses, ir.VectorType(self.fp, self.nr))
        return b.call(self.gather, [pointers, ir.Constant(I32, self.size), mask,
                                    ir.Constant(self.vec, None)])


def render_conv_pack(module: ir.Module, ft: ir.Type, size: int, nr: int, prefix: str,
                     fields: dict[str, int]) -> ir.Function:
    """Define `<prefix>_pack_b_conv` (module docstring); `fields`: index of each GEOMETRY
    name in the driver's dims array."""
    return _ConvPack(module, ft, size, nr, prefix, fields).function()
