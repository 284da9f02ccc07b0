"""BLAS views of dot_general: which float matmuls a BLAS gemm reads in place, and packing.

In: dot_general equations (or a whole Jaxpr). Out: `GemmDims` (batch, m, n, k and per
operand a `MatrixView`: transpose flag, leading dimension, batch strides) and
`pack_gemm_operands(jaxpr)`, which rewrites a jaxpr so every float dot_general has such a
view. Backend-neutral: the schedule uses it to turn dot_generals into `GemmStep`s.

An operand that is a `broadcast_in_dim` adding only leading batch axes (new axes, or
size-1 ones), e.g. a weight shared by a batch of products (`w @ x` with x (B, k, n), a
convolution's weight for each image), is read from the broadcast's input with batch
stride 0 (`BatchBroadcast`, the dot_general's `broadcast_operands` param): the broadcast
is never stored.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable, cast

from fgrad.core.dtypes import dtypes
from fgrad.core.ir import Atom, Eqn, Jaxpr, ShapedArray, Var

GEMM_DTYPES = frozenset({dtypes.float32, dtypes.float64})
# computed by a backend's own GEMM where it has one (llvm), else expanded (expand_dot.py)
INT_GEMM_DTYPES = frozenset({dtypes.int32})
BLAS_INT_MAX = 2 ** 31 - 1  # BLAS sizes and leading dimensions are 32-bit ints


@dataclass(frozen=True)
class MatrixView:
    """How BLAS reads one operand as a batch of `rows x cols` matrices: stored row-major with
    `ld` elements between rows, or, if `trans`, stored as `cols x rows` (ld between columns);
    `batch_strides`: elements between consecutive entries of each batch axis."""

    trans: bool
    ld: int
    batch_strides: tuple[int, ...]


@dataclass(frozen=True)
class GemmDims:
    """A dot_general as BLAS sees it: out[b] (m x n) = lhs[b] (m x k) @ rhs[b] (k x n)."""

    batch: tuple[int, ...]
    m: int
    n: int
    k: int
    lhs: MatrixView
    rhs: MatrixView


@dataclass(frozen=True)
class BatchBroadcast:
    """A dot_general operand read from a broadcast's input: `shape` is the operand as the
    product sees it, whose first `leading` axes (all batch axes) have stride 0."""

    shape: tuple[int, ...]
    leading: int


def _merge(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, int] | None:
    """(size, stride) of `axes` of a row-major array read as one axis, None if they are not
    one evenly strided run in that order (size-1 axes do not count)."""
    strides = [int(math.prod(shape[i + 1:])) for i in range(len(shape))]
    live = [a for a in axes if shape[a] != 1]
    for a, b in itertools.pairwise(live):
        if strides[a] != strides[b] * shape[b]:
            return None
    size = int(math.prod(shape[a] for a in axes))
    return size, (strides[live[-1]] if live else 1)


def matrix_view(shape: tuple[int, ...], batch: tuple[int, ...], rows: tuple[int, ...],
                cols: tuple[int, ...]) -> MatrixView | None:
    """How BLAS can read the `rows x cols` matrices of a row-major array (None: it cannot;
    the operand must be packed first). Leading dimensions are legal: >= max(1, stored
    row length)."""
    strides = tuple(int(math.prod(shape[a + 1:])) for a in batch)
    if 0 in shape:  # BLAS is not called on empty matrices
        return MatrixView(False, max(1, int(math.prod(shape[a] for a in cols))), strides)
    r, c = _merge(shape, rows), _merge(shape, cols)
    if r is None or c is None:
        return None
    (nr, sr), (nc, sc) = r, c
    if nc <= 1 or sc == 1:
        return MatrixView(False, max(sr if nr > 1 else 1, nc, 1), strides)
    if nr <= 1 or sr == 1:
        return MatrixView(True, max(sc, nr, 1), strides)
    return None


def _free(ndim: int, *used: tuple[int, ...]) -> tuple[int, ...]:
    taken = set().union(*used)
    return tuple(i for i in range(ndim) if i not in taken)


def gemm_dims(eqn: Eqn) -> GemmDims | None:
    """The BLAS view of a dot_general (None if an operand's layout needs packing)."""
    (xc, yc), (xb, yb) = eqn.params["dimension_numbers"]
    xs, ys = eqn.inputs[0].aval.shape, eqn.inputs[1].aval.shape
    if "rhs_patches" in eqn.params:   # B is read from an image (fuse_patches.py)
        ys = eqn.params["rhs_patches"].shape
    bx, by = eqn.params.get("broadcast_operands", (None, None))
    xs, ys = bx.shape if bx else xs, by.shape if by else ys
    xf, yf = _free(len(xs), xc, xb), _free(len(ys), yc, yb)
    lhs = _broadcast_view(matrix_view(xs, xb, xf, xc), xb, bx)
    rhs = _broadcast_view(matrix_view(ys, yb, yc, yf), yb, by)
    if lhs is None or rhs is None:
        return None
    m, n, k = (int(math.prod(s[a] for a in axes)) for s, axes in ((xs, xf), (ys, yf), (xs, xc)))
    return GemmDims(tuple(xs[a] for a in xb), m, n, k, lhs, rhs)


def _broadcast_view(view: MatrixView | None, batch: tuple[int, ...],
                    read: BatchBroadcast | None) -> MatrixView | None:
    """`view` with stride 0 on the broadcast leading axes (the other axes' strides are the
    stored input's: the broadcast axes all come first)."""
    if view is None or read is None:
        return view
    strides = tuple(0 if a < read.leading else s
                    for a, s in zip(batch, view.batch_strides, strict=True))
    return MatrixView(view.trans, view.ld, strides)


def _fold_broadcast(v: Var, batch: tuple[int, ...], producers: dict[int, Eqn]
                    ) -> tuple[Var, BatchBroadcast | None]:
    """(the input of the broadcast producing `v`, how to read it) when that broadcast only
    adds leading axes that are all batch axes of the product; else (v, None)."""
    eqn = producers.get(id(v))
    if eqn is None or eqn.primitive.name != "broadcast_in_dim" \
            or not isinstance(eqn.inputs[0], Var):
        return v, None
    src, shape = eqn.inputs[0], v.aval.shape
    dims = tuple(eqn.params["broadcast_dimensions"])
    kept = [a for a, i in zip(dims, range(src.aval.ndim)) if src.aval.shape[i] == shape[a]]
    leading = min(kept, default=len(shape))
    expanded = [a for a in range(len(shape)) if a not in kept]
    if not kept or not expanded or any(a >= leading or a not in batch for a in expanded) \
            or dims != tuple(sorted(dims)) or kept != list(range(leading, len(shape))):
        return v, None
    return src, BatchBroadcast(shape, leading)


def gemm_reason(eqn: Eqn, layout: bool = True, integer: bool = True) -> str | None:
    """Why a dot_general cannot be a native BLAS gemm (None: it can). With `layout` False,
    only what `pack_gemm_operands` cannot fix counts (dtype, literal operands). `integer`:
    whether an int32 product counts as a gemm (the backend has its own; an int32 product
    that reaches the schedule was left for it by `expand`)."""
    dtype = eqn.outvars[0].aval.dtype
    if dtype not in GEMM_DTYPES and not (integer and dtype in INT_GEMM_DTYPES):
        return f"dot_general on {dtype.name}: native matmul (BLAS) covers float32/float64"
    if dtype in INT_GEMM_DTYPES and any(a.aval.size == 0 for a in [*eqn.inputs, *eqn.outvars]):
        return "an empty int32 dot_general (no BLAS to hand it to): expanded"
    if not all(isinstance(a, Var) for a in eqn.inputs):
        return "dot_general on a literal operand"
    if not layout:
        return None
    dims = gemm_dims(eqn)
    if dims is None:
        return "dot_general operand layout that BLAS cannot read (pack_gemm_operands packs it)"
    sizes = (dims.m, dims.n, dims.k, dims.lhs.ld, dims.rhs.ld)
    if max(sizes) > BLAS_INT_MAX:
        return f"dot_general with a matrix side over {BLAS_INT_MAX} (BLAS takes 32-bit sizes)"
    return None


def _fold_transpose(v: Var, contract: tuple[int, ...], batch: tuple[int, ...],
                    producers: dict[int, Eqn]) -> tuple[Var, tuple[int, ...], tuple[int, ...]]:
    """Read a transposed operand from the transpose's input, if its free axes keep order."""
    eqn = producers.get(id(v))
    while eqn is not None and eqn.primitive.name == "transpose" \
            and isinstance(eqn.inputs[0], Var):
        perm = eqn.params["permutation"]
        free = [perm[a] for a in _free(len(perm), contract, batch)]
        if free != sorted(free):
            break
        contract = tuple(perm[a] for a in contract)
        batch = tuple(perm[a] for a in batch)
        v = eqn.inputs[0]
        eqn = producers.get(id(v))
    return v, contract, batch


Packs = dict[tuple[int, tuple[int, ...]], Var]


def _pack(v: Var, perm: tuple[int, ...], eqns: list[Eqn], packs: Packs) -> Var:
    """`v` with its axes permuted by a new `transpose` equation (appended to `eqns`), or by
    the one an earlier dot_general added."""
    from fgrad.core.prims.movement import transpose_p
    if (id(v), perm) not in packs:
        out = Var(ShapedArray(tuple(v.aval.shape[p] for p in perm), v.aval.dtype))
        eqns.append(Eqn(transpose_p, [v], {"permutation": perm}, [out]))
        packs[(id(v), perm)] = out
    return packs[(id(v), perm)]


def _packed(v: Var, batch: tuple[int, ...], free: tuple[int, ...], contract: tuple[int, ...],
            eqns: list[Eqn], packs: Packs) -> tuple[Var, tuple[int, ...], tuple[int, ...]]:
    """`v` packed as (batch, free, contract) or (batch, contract, free), whichever keeps its
    last axis innermost (so the packing kernel reads its producer contiguously); returns
    the packed operand and its new batch and contract axes."""
    nb, nf = len(batch), len(free)
    if contract and contract[-1] == v.aval.ndim - 1 or not free:
        perm = batch + free + contract
        return _pack(v, perm, eqns, packs), tuple(range(nb)), tuple(range(nb + nf, len(perm)))
    perm = batch + contract + free
    return _pack(v, perm, eqns, packs), tuple(range(nb)), tuple(range(nb, nb + len(contract)))


def _pack_dot(eqn: Eqn, producers: dict[int, Eqn], eqns: list[Eqn], packs: Packs) -> Eqn:
    """`eqn` with folded transposes and operands packed where BLAS cannot read them."""
    (xc, yc), (xb, yb) = eqn.params["dimension_numbers"]
    x_in, y_in = (cast(Var, a) for a in eqn.inputs)  # variables: see _is_float_dot
    x, xc, xb = _fold_transpose(x_in, xc, xb, producers)
    y, yc, yb = _fold_transpose(y_in, yc, yb, producers)
    xf, yf = _free(x.aval.ndim, xc, xb), _free(y.aval.ndim, yc, yb)
    if matrix_view(x.aval.shape, xb, xf, xc) is None:
        x, xb, xc = _packed(x, xb, xf, xc, eqns, packs)
    if matrix_view(y.aval.shape, yb, yc, yf) is None:
        y, yb, yc = _packed(y, yb, yf, yc, eqns, packs)
    dn = ((xc, yc), (xb, yb))
    if x is not eqn.inputs[0] or y is not eqn.inputs[1] or dn != eqn.params["dimension_numbers"]:
        eqn = Eqn(eqn.primitive, [x, y], {**eqn.params, "dimension_numbers": dn},
                  eqn.outvars, eqn.source)
    return _read_broadcasts(eqn, producers)


def _fold_reshape(v: Var, read: BatchBroadcast | None, producers: dict[int, Eqn]
                  ) -> tuple[Var, BatchBroadcast | None]:
    """(v, read) reading through the reshape producing `v`, if any: a reshape's input holds
    the same elements in the same order (buffers are dense), so the product reads it with
    the shape it sees (`read`, or v's own shape with no stride-0 axes)."""
    eqn = producers.get(id(v))
    if eqn is None or eqn.primitive.name != "reshape" or not isinstance(eqn.inputs[0], Var):
        return v, read
    return eqn.inputs[0], read if read is not None else BatchBroadcast(v.aval.shape, 0)


def _read_broadcasts(eqn: Eqn, producers: dict[int, Eqn]) -> Eqn:
    """`eqn` reading a broadcast operand from the broadcast's input (module docstring), and
    the left operand through a reshape (a grouped convolution's dY, its weight)."""
    (_, _), (xb, yb) = eqn.params["dimension_numbers"]
    x, bx = _fold_reshape(*_fold_broadcast(cast(Var, eqn.inputs[0]), xb, producers),
                          producers)
    y, by = cast(Var, eqn.inputs[1]), None
    if "rhs_patches" not in eqn.params:   # else B is an image, read as fuse_patches.py says
        y, by = _fold_broadcast(y, yb, producers)
    if bx is None and by is None:
        return eqn
    folded = Eqn(eqn.primitive, [x, y], {**eqn.params, "broadcast_operands": (bx, by)},
                 eqn.outvars, eqn.source)
    return folded if gemm_dims(folded) is not None else eqn


def _is_float_dot(eqn: Eqn) -> bool:
    """A float32/float64 (or int32, left for a backend's own GEMM) dot_general on
    variables (what `pack_gemm_operands` rewrites; not one reading its B operand from an
    image, whose layout fuse_patches.py chose)."""
    return eqn.primitive.name == "dot_general" and len(eqn.outvars) == 1 \
        and "rhs_patches" not in eqn.params and "broadcast_operands" not in eqn.params \
        and eqn.outvars[0].aval.dtype in GEMM_DTYPES | INT_GEMM_DTYPES \
        and all(isinstance(a, Var) for a in eqn.inputs)


def _swap_perm(eqn: Eqn) -> tuple[int, ...]:
    """The permutation that swaps a dot_general's lhs-free and rhs-free output axes."""
    (xc, yc), (xb, _) = eqn.params["dimension_numbers"]
    nb = len(xb)
    nxf = eqn.inputs[0].aval.ndim - len(xc) - nb
    nyf = eqn.inputs[1].aval.ndim - len(yc) - nb
    return tuple(range(nb)) + tuple(range(nb + nxf, nb + nxf + nyf)) + tuple(range(nb, nb + nxf))


def _swapped_products(jaxpr: Jaxpr) -> dict[int, Eqn]:
    """Float dot_generals (by id) whose one use is a transpose swapping their free axes (a
    weight gradient, say), each as the dot_general that computes the transpose directly
    (operands swapped: (x y)^T = y^T x^T), writing the transpose's output."""
    uses: dict[int, list[Eqn]] = {}
    for e in jaxpr.eqns:
        for a in e.inputs:
            uses.setdefault(id(a), []).append(e)
    outs = {id(v) for v in jaxpr.outvars}
    swapped = {}
    for e in jaxpr.eqns:
        if not _is_float_dot(e) or id(e.outvars[0]) in outs:
            continue
        users = uses.get(id(e.outvars[0]), [])
        if len(users) != 1:
            continue
        t = users[0]
        if t.primitive.name == "transpose" and t.params["permutation"] == _swap_perm(e):
            (xc, yc), (xb, yb) = e.params["dimension_numbers"]
            dn = ((yc, xc), (yb, xb))
            swapped[id(e)] = Eqn(e.primitive, [e.inputs[1], e.inputs[0]],
                                 {**e.params, "dimension_numbers": dn}, t.outvars, e.source)
    return swapped


def _cancel_transpose_pairs(jaxpr: Jaxpr) -> Jaxpr:
    """`jaxpr` with every transpose of a transpose that composes to the identity read from
    the first one's input (the weight gradient of `x @ W.T` is such a pair: transposing it
    twice in a consumer's loads made the optimizer read it with a 2 KiB stride), and the
    transposes left without uses dropped."""
    producers = {id(v): e for e in jaxpr.eqns for v in e.outvars}
    outs = {id(v) for v in jaxpr.outvars}
    alias: dict[int, Var] = {}
    for e in jaxpr.eqns:
        first = producers.get(id(e.inputs[0])) if e.primitive.name == "transpose" else None
        if first is None or first.primitive.name != "transpose" or id(e.outvars[0]) in outs:
            continue
        p1, p2 = first.params["permutation"], e.params["permutation"]
        if all(p1[p2[i]] == i for i in range(len(p2))) and isinstance(first.inputs[0], Var):
            alias[id(e.outvars[0])] = first.inputs[0]
    if not alias:
        return jaxpr
    eqns = [Eqn(e.primitive, [alias.get(id(a), a) for a in e.inputs], e.params, e.outvars,
                e.source) for e in jaxpr.eqns if id(e.outvars[0]) not in alias]
    used = {id(a) for e in eqns for a in e.inputs} | outs
    eqns = [e for e in eqns if e.primitive.name != "transpose" or id(e.outvars[0]) in used]
    return Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, jaxpr.outvars)


GemmTile = Callable[[int], tuple[int, int]]   # element bytes -> the GEMM's (MR, NR) tile
# Padded work the swapped product must save, as a factor: it also pays a transposed copy of
# its output and gives up a fused epilogue (relu(x @ w + b) with 16 columns stays one call)
NARROW_GAIN = 2.0


def _padded_work(m: int, n: int, tile: tuple[int, int]) -> float:
    """The work of an m x n product in whole MR x NR tiles, per useful element (a tile of
    at most MR / 2 rows runs at half height: llvm's micro-kernel)."""
    mr, nr = tile
    rows = mr // 2 if 2 * m <= mr else -(-m // mr) * mr
    return rows * -(-n // nr) * nr / (m * n)


def _narrow_swapped(eqn: Eqn, gemm_tile: GemmTile | None) -> tuple[Eqn, Eqn] | None:
    """A product narrower than the GEMM's tile (n < NR: a classifier's 10 logits, whose
    256 x 512 x 10 product ran in 32-wide tiles at 28 GFLOP/s) as the swapped product
    (y^T x^T, m and n exchanged) and the transpose that restores its layout, when whole
    tiles then waste `NARROW_GAIN` less; else None. A consumer kernel reads the transpose
    in its loads, a consumer product through its transpose flag."""
    if gemm_tile is None:
        return None
    (xc, yc), (xb, yb) = eqn.params["dimension_numbers"]
    x, y = eqn.inputs
    m = math.prod(d for i, d in enumerate(x.aval.shape) if i not in xc and i not in xb)
    n = math.prod(d for i, d in enumerate(y.aval.shape) if i not in yc and i not in yb)
    tile = gemm_tile(eqn.outvars[0].aval.dtype.itemsize)
    if min(m, n) == 0 or n >= tile[1] or \
            _padded_work(n, m, tile) * NARROW_GAIN > _padded_work(m, n, tile):
        return None
    from fgrad.core.prims.movement import transpose_p
    out, nb, nxf = eqn.outvars[0], len(xb), x.aval.ndim - len(xc) - len(xb)
    shape = out.aval.shape
    product = Var(ShapedArray(shape[:nb] + shape[nb + nxf:] + shape[nb:nb + nxf],
                              out.aval.dtype))
    swapped = Eqn(eqn.primitive, [y, x], {**eqn.params, "dimension_numbers": ((yc, xc), (yb, xb))},
                  [product], eqn.source)
    return swapped, Eqn(transpose_p, [product], {"permutation": _swap_perm(swapped)}, [out],
                        eqn.source)


# The param of a float32 dot_general whose operands are bfloat16 arrays, multiplied in pairs
# of k steps by the backend (llvm on AMX: gemm/pairs.py).
PAIRS_PARAM = "bf16_pairs"


def _fold_bfloat16_operands(eqn: Eqn, producers: dict[int, Eqn],
                            accepts: Callable[[Eqn], bool]) -> Eqn:
    """A float32 product of two bfloat16 arrays converted to float32 (how `expand` widens
    a bfloat16 product) reading the bfloat16 arrays instead, marked `PAIRS_PARAM`, when
    the backend `accepts` it; the conversions are then left unread."""
    if eqn.outvars[0].aval.dtype != dtypes.float32 or set(eqn.params) != {"dimension_numbers"}:
        return eqn
    sources: list[Atom] = []
    for a in eqn.inputs:
        made = producers.get(id(a))
        if made is None or made.primitive.name != "convert_element_type" \
                or not isinstance(made.inputs[0], Var) \
                or made.inputs[0].aval.dtype != dtypes.bfloat16:
            return eqn
        sources.append(made.inputs[0])
    folded = Eqn(eqn.primitive, sources, {**eqn.params, PAIRS_PARAM: True}, eqn.outvars,
                 eqn.source)
    return folded if gemm_dims(folded) is not None and accepts(folded) else eqn


def pack_gemm_operands(jaxpr: Jaxpr,
                       pair_products: Callable[[Eqn], bool] | None = None,
                       gemm_tile: GemmTile | None = None) -> Jaxpr:
    """`jaxpr` with every float dot_general readable by BLAS in place: an operand that is a
    transpose is read from the transpose's input (BLAS's transpose flag), any other layout
    BLAS cannot stride through is packed by a new `transpose` equation (a kernel that fuses
    with the operand's producer), and a product whose one use swaps its free axes is
    computed swapped; transpose pairs that cancel are removed first. `pair_products`: which
    products of converted bfloat16 arrays the backend multiplies from the bfloat16 arrays
    (`_fold_bfloat16_operands`). `gemm_tile`: the backend GEMM's tile, by which a product
    narrower than it is computed swapped (`_narrow_swapped`). Returns `jaxpr` itself if
    nothing changed."""
    jaxpr = _cancel_transpose_pairs(jaxpr)
    swapped = _swapped_products(jaxpr)
    dropped = {id(e.outvars[0]) for e in swapped.values()}
    producers = {id(v): e for e in jaxpr.eqns for v in e.outvars}
    producers.update({id(e.outvars[0]): e for e in swapped.values()})
    eqns: list[Eqn] = []
    packs: Packs = {}
    for e in jaxpr.eqns:
        if e.primitive.name == "transpose" and id(e.outvars[0]) in dropped:
            continue
        restore = None
        if id(e) in swapped:
            e = swapped[id(e)]
        elif _is_float_dot(e) and (narrow := _narrow_swapped(e, gemm_tile)) is not None:
            e, restore = narrow
            producers[id(restore.outvars[0])] = restore
        if _is_float_dot(e):
            e = _pack_dot(e, producers, eqns, packs)
            if pair_products is not None:
                e = _fold_bfloat16_operands(e, producers, pair_products)
            if restore is not None:
                eqns.append(e)
                e = restore
        elif e.primitive.name == "dot_general" and "rhs_patches" in e.params:
            e = _read_broadcasts(e, producers)
        eqns.append(e)
    if len(eqns) == len(jaxpr.eqns) and all(a is b for a, b in zip(eqns, jaxpr.eqns)):
        return jaxpr
    return Jaxpr(jaxpr.constvars, jaxpr.invars, without_unread_views(eqns, jaxpr.outvars),
                 jaxpr.outvars)


UNREAD_VIEWS = ("broadcast_in_dim", "reshape", "convert_element_type")


def without_unread_views(eqns: list[Eqn], outvars: list) -> list[Eqn]:
    """`eqns` less the broadcasts, reshapes and conversions nothing reads any more (every
    product now reads their input), repeated until none is left (a reshape feeding such a
    broadcast)."""
    kept = list(eqns)
    while True:
        used = {id(a) for e in kept for a in e.inputs} | {id(v) for v in outvars}
        fewer = [e for e in kept if e.primitive.name not in UNREAD_VIEWS
                 or id(e.outvars[0]) in used]
        if len(fewer) == len(kept):
            return kept
        kept = fewer
