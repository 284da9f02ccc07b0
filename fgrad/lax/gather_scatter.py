"""XLA's general gather and scatter, as `jax.lax` exposes them.

`gather(operand, start_indices, GatherDimensionNumbers(...), slice_sizes)` and the
`scatter*` family follow XLA's semantics with JAX's conventions: the index vector is always
the last axis of the indices, and out-of-bounds indices are handled by `GatherScatterMode`:

- CLIP: each start index is clamped so that the whole window lies inside the operand;
- FILL_OR_DROP: a gather window that does not fit entirely is filled with `fill_value`
  (default NaN for floats, the minimum of a signed integer type, the maximum of an unsigned
  one, True for bool); a scatter window that does not fit is dropped;
- PROMISE_IN_BOUNDS: no checks are promised; as on XLA, gathers clamp and scatters drop.

`mode=None` means PROMISE_IN_BOUNDS for `gather` and FILL_OR_DROP for the scatters, as in
JAX. ONE_HOT is listed (JAX's enum has it) but, as in JAX's `lax.gather`, it is rejected.

Nothing here is a new primitive: every element's position in the flattened operand is
computed with integer arithmetic, then read with the leading-axis gather primitive or
written with the scatter primitive, so grad (w.r.t. operand and updates), vmap and jit work
through these functions. Windows that are dropped (or filled) are pointed at one extra slot
appended to the flattened operand. `scatter` with possibly repeated indices lets the last
update win (as XLA on CPU does), and only that update receives a gradient.
"""
from __future__ import annotations

import enum
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from fgrad.core import prims as P
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.errors import ArgumentError, ArgumentTypeError
from fgrad.core.prims._util import fmt_shape
from fgrad.core.tensor import Tensor, Tracer
from fgrad.lax._args import dtype_name, int_tuple, same_dtype, to_tensor

__all__ = ["GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers", "gather",
           "index_take", "scatter", "scatter_add", "scatter_apply", "scatter_max", "scatter_min",
           "scatter_mul", "scatter_sub"]


class GatherDimensionNumbers(NamedTuple):
    """How the axes of a gather's operand, start indices and output relate (XLA's
    GatherDimensionNumbers; the index vector is the last axis of the start indices)."""
    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """How the axes of a scatter's operand, indices and updates relate (XLA's
    ScatterDimensionNumbers; the index vector is the last axis of the indices)."""
    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


class GatherScatterMode(enum.Enum):
    """How gather and scatter treat indices whose window does not fit in the operand."""
    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()
    ONE_HOT = enum.auto()

    @staticmethod
    def from_any(s: "str | GatherScatterMode | None") -> "GatherScatterMode":
        """A mode from a member, 'clip', 'fill'/'drop' or None (FILL_OR_DROP),
        'promise_in_bounds' or 'one_hot'."""
        if isinstance(s, GatherScatterMode):
            return s
        names = {"clip": GatherScatterMode.CLIP, "fill": GatherScatterMode.FILL_OR_DROP,
                 "drop": GatherScatterMode.FILL_OR_DROP, None: GatherScatterMode.FILL_OR_DROP,
                 "promise_in_bounds": GatherScatterMode.PROMISE_IN_BOUNDS,
                 "one_hot": GatherScatterMode.ONE_HOT}
        if isinstance(s, (str, type(None))) and s in names:
            return names[s]
        raise ValueError(f"Unknown gather mode {s!r}: use 'clip', 'fill' (or 'drop'), "
                         f"'promise_in_bounds', None or a lax.GatherScatterMode")


def _mode(op: str, mode: Any, default: GatherScatterMode) -> GatherScatterMode:
    parsed = default if mode is None else GatherScatterMode.from_any(mode)
    if parsed is GatherScatterMode.ONE_HOT:
        raise ValueError(f"lax.{op}: mode ONE_HOT is not supported (JAX's lax.{op} rejects it "
                         f"too); use 'clip', 'fill' or 'promise_in_bounds'")
    return parsed


def _sorted_axes(op: str, axes: Any, what: str, ndim: int, where: str) -> tuple[int, ...]:
    out = int_tuple(op, axes, what)
    if any(not 0 <= a < ndim for a in out):
        raise ArgumentError(f"lax.{op}: {what} {out} must hold axes in [0, {ndim}) of the "
                            f"{where}")
    if len(set(out)) != len(out):
        raise ArgumentError(f"lax.{op}: {what} {out} repeats an axis")
    return out


def _index_tensor(op: str, indices: Any, what: str) -> Tensor:
    t = to_tensor(op, indices, what)
    if not t.dtype.is_int:
        raise ArgumentTypeError(f"lax.{op}: {what} must be an integer array, got "
                                f"{dtype_name(t.dtype)}; cast with lax.convert_element_type")
    if t.ndim == 0:
        raise ArgumentError(f"lax.{op}: {what} must have at least one axis (the last axis is "
                            f"the index vector); add a trailing axis of size 1")
    return t


class _Layout(NamedTuple):
    """What gather and scatter share: the operand axes the index vector addresses, the
    batching axis pairs and the window (operand axes that appear in the output/updates)."""
    shape: tuple[int, ...]
    index_map: tuple[int, ...]
    batching: tuple[tuple[int, int], ...]   # (operand axis, indices axis)
    window_axes: tuple[int, ...]
    sizes: tuple[int, ...]                  # per operand axis: window size (1 if not window)


def _linear_positions(op: str, lay: _Layout, idx: Tensor, mode: GatherScatterMode
                      ) -> tuple[Tensor, Tensor | None, DType]:
    """The flat operand position of every element of the canonical (batch..., window...)
    array, and a per-batch validity mask when windows that do not fit must be dropped."""
    total = int(np.prod(lay.shape)) if lay.shape else 1
    itype = dtypes.int32 if total + 1 < 2 ** 31 else dtypes.int64
    strides = [int(np.prod(lay.shape[d + 1:])) for d in range(len(lay.shape))]
    batch_shape = idx.shape[:-1]
    base = P.broadcast_in_dim(Tensor(np.zeros((), itype.np)), batch_shape, ())
    valid: Tensor | None = None
    top = np.iinfo(idx.dtype.np).max
    for j, d in enumerate(lay.index_map):
        s = P.reshape(P.slice_(idx, (0,) * (idx.ndim - 1) + (j,), idx.shape[:-1] + (j + 1,),
                               None), batch_shape)
        bound = min(lay.shape[d] - lay.sizes[d], int(top))
        if mode is not GatherScatterMode.CLIP and mode is not None:
            fits = (s <= bound) if idx.dtype.is_unsigned else (s >= 0) & (s <= bound)
            valid = fits if valid is None else valid & fits
        s = s.minimum(bound) if idx.dtype.is_unsigned else s.maximum(0).minimum(bound)
        base = base + s.cast(itype) * strides[d]
    for d, axis in lay.batching:
        base = base + P.iota(itype, batch_shape, axis) * strides[d]
    window = tuple(lay.sizes[d] for d in lay.window_axes)
    offs = P.broadcast_in_dim(Tensor(np.zeros((), itype.np)), window, ())
    for i, d in enumerate(lay.window_axes):
        offs = offs + P.iota(itype, window, i) * strides[d]
    nb = len(batch_shape)
    full = batch_shape + window
    lin = P.broadcast_in_dim(base, full, tuple(range(nb))) + \
        P.broadcast_in_dim(offs, full, tuple(range(nb, len(full))))
    if valid is not None:
        mask = P.broadcast_in_dim(valid, full, tuple(range(nb)))
        lin = mask.where(lin, Tensor(np.array(total, itype.np)))
    return lin, valid, itype


def _check_batching(op: str, operand_axes: tuple[int, ...], index_axes: tuple[int, ...],
                    shape: tuple[int, ...], idx: Tensor, names: tuple[str, str]
                    ) -> tuple[tuple[int, int], ...]:
    if len(operand_axes) != len(index_axes):
        raise ArgumentError(f"lax.{op}: {names[0]} {operand_axes} and {names[1]} "
                            f"{index_axes} must have the same length")
    for d, a in zip(operand_axes, index_axes):
        if not 0 <= a < idx.ndim - 1:
            raise ArgumentError(f"lax.{op}: {names[1]} entry {a} must be an axis of the "
                                f"indices other than the last (index vector) axis; indices "
                                f"have shape {fmt_shape(idx.shape)}")
        if shape[d] != idx.shape[a]:
            raise ArgumentError(f"lax.{op}: batching axes must have equal sizes, got operand "
                                f"axis {d} of size {shape[d]} and indices axis {a} of size "
                                f"{idx.shape[a]}")
    return tuple(zip(operand_axes, index_axes))


def _index_map(op: str, what: str, index_map: Any, shape: tuple[int, ...], idx: Tensor,
               batching: tuple[int, ...]) -> tuple[int, ...]:
    out = _sorted_axes(op, index_map, what, len(shape), "operand")
    if len(out) != idx.shape[-1]:
        raise ArgumentError(f"lax.{op}: {what} {out} has {len(out)} entries but the index "
                            f"vector (last axis of indices of shape {fmt_shape(idx.shape)}) "
                            f"has {idx.shape[-1]}")
    if set(out) & set(batching):
        raise ArgumentError(f"lax.{op}: {what} {out} may not name operand batching axes "
                            f"{batching}")
    return out


# ---------------------------------------------------------------------------- gather

def _fill_value(op: str, dtype: DType, fill_value: Any) -> Tensor:
    if fill_value is None:
        if dtype.is_float:
            fill_value = np.nan
        elif dtype.kind == "b":
            fill_value = True
        else:
            info = np.iinfo(dtype.np)
            fill_value = info.max if dtype.is_unsigned else info.min
    try:
        with np.errstate(all="ignore"):
            return Tensor(np.array(fill_value).astype(dtype.np))
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"lax.{op}: fill_value {fill_value!r} cannot be converted to "
                                f"the operand dtype {dtype_name(dtype)}") from None


def gather(operand: Any, start_indices: Any, dimension_numbers: GatherDimensionNumbers,
           slice_sizes: Sequence[int], *, unique_indices: bool = False,
           indices_are_sorted: bool = False, mode: str | GatherScatterMode | None = None,
           fill_value: Any = None) -> Tensor:
    """XLA's gather: one window of `slice_sizes` per index vector (the last axis of
    `start_indices`), laid out by `dimension_numbers`; `mode` handles windows that do not
    fit (see the module docstring; None means PROMISE_IN_BOUNDS, which clamps)."""
    op = "gather"
    x = to_tensor(op, operand, "operand")
    idx = _index_tensor(op, start_indices, "start_indices")
    parsed = _mode(op, mode, GatherScatterMode.PROMISE_IN_BOUNDS)
    if not isinstance(dimension_numbers, GatherDimensionNumbers):
        raise ArgumentTypeError(f"lax.gather: dimension_numbers must be a "
                                f"lax.GatherDimensionNumbers, got "
                                f"{type(dimension_numbers).__name__}")
    dn, shape = dimension_numbers, x.shape
    sizes = int_tuple(op, slice_sizes, "slice_sizes")
    if len(sizes) != x.ndim:
        raise ArgumentError(f"lax.gather: slice_sizes {sizes} must have one entry per operand "
                            f"axis (operand shape {fmt_shape(shape)})")
    for d, (n, dim) in enumerate(zip(sizes, shape)):
        if not 0 <= n <= dim:
            raise ArgumentError(f"lax.gather: slice size {n} on operand axis {d} must be in "
                                f"[0, {dim}] (operand shape {fmt_shape(shape)})")
    collapsed = _sorted_axes(op, dn.collapsed_slice_dims, "collapsed_slice_dims", x.ndim,
                             "operand")
    obatch = _sorted_axes(op, dn.operand_batching_dims, "operand_batching_dims", x.ndim,
                          "operand")
    ibatch = int_tuple(op, dn.start_indices_batching_dims, "start_indices_batching_dims")
    batching = _check_batching(op, obatch, ibatch, shape, idx,
                               ("operand_batching_dims", "start_indices_batching_dims"))
    if set(collapsed) & set(obatch):
        raise ArgumentError(f"lax.gather: collapsed_slice_dims {collapsed} and "
                            f"operand_batching_dims {obatch} must not overlap")
    for d in collapsed + obatch:
        if sizes[d] > 1:
            raise ArgumentError(f"lax.gather: collapsed and batching operand axes need slice "
                                f"size 1, got {sizes[d]} on axis {d}")
    index_map = _index_map(op, "start_index_map", dn.start_index_map, shape, idx, obatch)
    window_axes = tuple(d for d in range(x.ndim) if d not in collapsed and d not in obatch)
    out_rank = idx.ndim - 1 + len(window_axes)
    offset = _sorted_axes(op, dn.offset_dims, "offset_dims", out_rank, "output")
    if len(offset) != len(window_axes) or list(offset) != sorted(offset):
        raise ArgumentError(f"lax.gather: offset_dims {offset} must be sorted and name "
                            f"{len(window_axes)} output axes (one per operand axis that is "
                            f"neither collapsed nor batching)")
    lay = _Layout(shape, index_map, batching, window_axes,
                  tuple(1 if d in collapsed or d in obatch else n for d, n in enumerate(sizes)))
    if parsed is GatherScatterMode.PROMISE_IN_BOUNDS:
        parsed = GatherScatterMode.CLIP   # XLA's gather clamps
    lin, _, _ = _linear_positions(op, lay, idx, parsed)
    flat = P.reshape(x, (int(np.prod(shape)) if shape else 1,))
    if parsed is GatherScatterMode.FILL_OR_DROP:
        flat = P.concatenate([flat, P.reshape(_fill_value(op, x.dtype, fill_value), (1,))], 0)
    canon = P.gather(flat, lin) if flat.shape[0] else P.broadcast_in_dim(
        _fill_value(op, x.dtype, 0), lin.shape, ())
    nb = idx.ndim - 1
    perm, b, w = [], 0, nb
    for o in range(out_rank):
        if o in offset:
            perm.append(w)
            w += 1
        else:
            perm.append(b)
            b += 1
    return P.transpose(canon, tuple(perm)) if perm != sorted(perm) else canon


def index_take(src: Any, idxs: Sequence[Any], axes: Sequence[int]) -> Tensor:
    """Entries of `src` at the points whose coordinates along `axes` are given by the 1-d
    index arrays `idxs` (one per axis, equal lengths n; negative and out-of-range indices
    wrap around): shape (n,) + the sizes of the other axes, in order."""
    op = "index_take"
    x = to_tensor(op, src, "src")
    ax = _sorted_axes(op, axes, "axes", x.ndim, "src")
    items = list(idxs)
    if len(items) != len(ax) or not items:
        raise ArgumentError(f"lax.index_take: needs one index array per axis in {ax}, got "
                            f"{len(items)}")
    cols = []
    for i, (v, d) in enumerate(zip(items, ax)):
        t = _index_tensor(op, v, f"idxs[{i}]")
        if t.ndim != 1 or t.shape != _index_tensor(op, items[0], "idxs[0]").shape:
            raise ArgumentError(f"lax.index_take: idxs must be 1-d arrays of one length, got "
                                f"idxs[{i}] of shape {fmt_shape(t.shape)}")
        n = P.broadcast_in_dim(Tensor(np.array(x.shape[d], t.dtype.np)), t.shape, ())
        wrapped = P.rem_p.bind(P.add_p.bind(P.rem_p.bind(t, n), n), n) if x.shape[d] else t
        cols.append(P.reshape(wrapped, t.shape + (1,)))
    index = P.concatenate(cols, 1) if len(cols) > 1 else cols[0]
    rest = x.ndim - len(ax)
    dn = GatherDimensionNumbers(offset_dims=tuple(range(1, rest + 1)),
                                collapsed_slice_dims=ax, start_index_map=ax)
    sizes = tuple(1 if d in ax else n for d, n in enumerate(x.shape))
    return gather(x, index, dn, sizes, mode=GatherScatterMode.CLIP)


# ---------------------------------------------------------------------------- scatter

def _scatter_layout(op: str, x: Tensor, idx: Tensor, upd_shape: tuple[int, ...],
                    dn: Any) -> tuple[_Layout, tuple[int, ...]]:
    """The layout and the permutation that puts the updates in (batch..., window...) order."""
    if not isinstance(dn, ScatterDimensionNumbers):
        raise ArgumentTypeError(f"lax.{op}: dimension_numbers must be a "
                                f"lax.ScatterDimensionNumbers, got {type(dn).__name__}")
    shape = x.shape
    inserted = _sorted_axes(op, dn.inserted_window_dims, "inserted_window_dims", x.ndim,
                            "operand")
    obatch = _sorted_axes(op, dn.operand_batching_dims, "operand_batching_dims", x.ndim,
                          "operand")
    ibatch = int_tuple(op, dn.scatter_indices_batching_dims, "scatter_indices_batching_dims")
    batching = _check_batching(op, obatch, ibatch, shape, idx,
                               ("operand_batching_dims", "scatter_indices_batching_dims"))
    if set(inserted) & set(obatch):
        raise ArgumentError(f"lax.{op}: inserted_window_dims {inserted} and "
                            f"operand_batching_dims {obatch} must not overlap")
    index_map = _index_map(op, "scatter_dims_to_operand_dims", dn.scatter_dims_to_operand_dims,
                           shape, idx, obatch)
    window_axes = tuple(d for d in range(x.ndim) if d not in inserted and d not in obatch)
    nb = idx.ndim - 1
    rank = nb + len(window_axes)
    if len(upd_shape) != rank:
        raise ArgumentError(f"lax.{op}: updates of shape {fmt_shape(upd_shape)} must have "
                            f"{rank} axes ({nb} scatter axes from indices of shape "
                            f"{fmt_shape(idx.shape)} plus {len(window_axes)} window axes)")
    uwin = _sorted_axes(op, dn.update_window_dims, "update_window_dims", rank, "updates")
    if len(uwin) != len(window_axes) or list(uwin) != sorted(uwin):
        raise ArgumentError(f"lax.{op}: update_window_dims {uwin} must be sorted and name "
                            f"{len(window_axes)} axes of the updates (one per operand axis "
                            f"that is neither inserted nor batching)")
    scatter_axes = tuple(a for a in range(rank) if a not in uwin)
    if tuple(upd_shape[a] for a in scatter_axes) != idx.shape[:-1]:
        raise ArgumentError(f"lax.{op}: the scatter axes {scatter_axes} of updates of shape "
                            f"{fmt_shape(upd_shape)} must match the indices' batch shape "
                            f"{fmt_shape(idx.shape[:-1])}")
    sizes = [1] * x.ndim
    for a, d in zip(uwin, window_axes):
        if upd_shape[a] > shape[d]:
            raise ArgumentError(f"lax.{op}: update window size {upd_shape[a]} (updates axis "
                                f"{a}) exceeds operand axis {d} of size {shape[d]}")
        sizes[d] = upd_shape[a]
    return _Layout(shape, index_map, batching, window_axes, tuple(sizes)), scatter_axes + uwin


def _prepare(op: str, operand: Any, scatter_indices: Any, updates: Any, dn: Any, mode: Any
             ) -> tuple[Tensor, Tensor, Tensor, DType]:
    """(flat operand with one extra slot, flat positions, flat updates, index dtype)."""
    x, upd = same_dtype(op, [operand, updates], ("operand", "updates"))
    idx = _index_tensor(op, scatter_indices, "scatter_indices")
    parsed = _mode(op, mode, GatherScatterMode.FILL_OR_DROP)
    lay, perm = _scatter_layout(op, x, idx, upd.shape, dn)
    lin, _, itype = _linear_positions(op, lay, idx, parsed)
    canon = P.transpose(upd, perm) if list(perm) != sorted(perm) else upd
    total = int(np.prod(x.shape)) if x.shape else 1
    ext = P.concatenate([P.reshape(x, (total,)), P.broadcast_in_dim(
        Tensor(np.zeros((), x.dtype.np)), (1,), ())], 0)
    count = int(np.prod(lin.shape)) if lin.shape else 1
    return ext, P.reshape(lin, (count,)), P.reshape(canon, (count,)), itype


def _finish(ext: Tensor, shape: tuple[int, ...]) -> Tensor:
    total = ext.shape[0] - 1
    return P.reshape(P.slice_(ext, (0,), (total,), None), shape)


def _combine(op: str, kind: str, operand: Any, scatter_indices: Any, updates: Any,
             dimension_numbers: Any, mode: Any, unique_indices: bool = True) -> Tensor:
    ext, lin, upd, itype = _prepare(op, operand, scatter_indices, updates, dimension_numbers,
                                    mode)
    shape = to_tensor(op, operand, "operand").shape
    if kind == "set" and not unique_indices and lin.shape[0] > 1:
        ids = P.iota(itype, lin.shape, 0)
        start = P.broadcast_in_dim(Tensor(np.array(-1, itype.np)), ext.shape, ())
        winner = P.scatter(start, lin, ids, "max")
        lost = P.gather(winner, lin) != ids
        lin = lost.where(Tensor(np.array(ext.shape[0] - 1, itype.np)), lin)
    if kind == "sub":
        kind, upd = "add", P.neg_p.bind(upd)
    if kind in ("add", "mul") and ext.dtype.kind == "b":
        raise ArgumentTypeError(f"lax.{op} does not accept bool operands; use "
                                f"lax.scatter_max / scatter_min for logical or / and")
    return _finish(P.scatter(ext, lin, upd, kind), shape)


def scatter(operand: Any, scatter_indices: Any, updates: Any,
            dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: str | GatherScatterMode | None = None
            ) -> Tensor:
    """XLA's scatter with replacement: `operand` with the windows of `updates` written at
    `scatter_indices`; with repeated indices the last update wins. `mode=None` drops windows
    that do not fit (FILL_OR_DROP); 'clip' clamps them into range."""
    return _combine("scatter", "set", operand, scatter_indices, updates, dimension_numbers,
                    mode, bool(unique_indices))


def scatter_add(operand: Any, scatter_indices: Any, updates: Any,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None
                ) -> Tensor:
    """`operand` plus the scattered `updates` (repeated indices accumulate); see `scatter`."""
    return _combine("scatter_add", "add", operand, scatter_indices, updates,
                    dimension_numbers, mode)


def scatter_sub(operand: Any, scatter_indices: Any, updates: Any,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None
                ) -> Tensor:
    """`operand` minus the scattered `updates` (repeated indices accumulate); see `scatter`."""
    return _combine("scatter_sub", "sub", operand, scatter_indices, updates,
                    dimension_numbers, mode)


def scatter_mul(operand: Any, scatter_indices: Any, updates: Any,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None
                ) -> Tensor:
    """`operand` times the scattered `updates` (repeated indices multiply); see `scatter`.
    Unlike JAX, gradients also work with repeated indices."""
    return _combine("scatter_mul", "mul", operand, scatter_indices, updates,
                    dimension_numbers, mode)


def scatter_min(operand: Any, scatter_indices: Any, updates: Any,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None
                ) -> Tensor:
    """The elementwise minimum of `operand` and the scattered `updates`; gradients go to
    the winners, ties share equally (as in JAX); see `scatter`."""
    return _combine("scatter_min", "min", operand, scatter_indices, updates,
                    dimension_numbers, mode)


def scatter_max(operand: Any, scatter_indices: Any, updates: Any,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None
                ) -> Tensor:
    """The elementwise maximum of `operand` and the scattered `updates`; gradients go to
    the winners, ties share equally (as in JAX); see `scatter`."""
    return _combine("scatter_max", "max", operand, scatter_indices, updates,
                    dimension_numbers, mode)


def scatter_apply(operand: Any, scatter_indices: Any, func: Callable[[Tensor], Tensor],
                  dimension_numbers: ScatterDimensionNumbers, *,
                  update_shape: Sequence[int] = (), indices_are_sorted: bool = False,
                  unique_indices: bool = False, mode: str | GatherScatterMode | None = None
                  ) -> Tensor:
    """`operand` with the elementwise `func` applied at the scattered positions, once per
    time a position is hit (as in JAX, repeated indices apply `func` repeatedly).
    `update_shape` is the shape the updates would have. `func` must be elementwise (it is
    applied to whole arrays). Differentiable when every position is hit at most once."""
    op = "scatter_apply"
    x = to_tensor(op, operand, "operand")
    if not callable(func):
        raise ArgumentTypeError(f"lax.scatter_apply: func must be callable, got "
                                f"{type(func).__name__}")
    ushape = int_tuple(op, update_shape, "update_shape")
    ones = P.broadcast_in_dim(Tensor(np.ones((), np.int32)), ushape, ())
    zeros = P.broadcast_in_dim(Tensor(np.zeros((), np.int32)), x.shape, ())
    ext, lin, upd, _ = _prepare(op, zeros, scatter_indices, ones, dimension_numbers, mode)
    counts = _finish(P.scatter(ext, lin, upd, "add"), x.shape)

    def apply(y: Tensor, hit: Tensor) -> Tensor:
        out = to_tensor(op, func(y), "func's result")
        if out.shape != y.shape or out.dtype != y.dtype:
            raise ArgumentError(f"lax.scatter_apply: func must keep the shape and dtype "
                                f"(elementwise), got {fmt_shape(out.shape)} "
                                f"{dtype_name(out.dtype)} from {fmt_shape(y.shape)} "
                                f"{dtype_name(y.dtype)}")
        return hit.where(out, y)

    y = apply(x, counts > 0)
    if unique_indices:
        return y
    if not isinstance(counts, Tracer):
        for k in range(1, int(np.max(counts.numpy(), initial=0))):
            y = apply(y, counts > k)
        return y
    from fgrad.transforms.control.while_loop import while_loop

    def body(carry: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        k, val = carry
        return k + 1, apply(val, counts > k)

    top = P.reduce_max(counts, tuple(range(counts.ndim)))
    _, y = while_loop(lambda c: c[0] < top, body, (Tensor(np.array(1, np.int32)), y))
    return y
