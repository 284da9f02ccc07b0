"""Gather and scatter along the leading axis, with indices clamped into range.

`gather(x, idx)` has shape `idx.shape + x.shape[1:]`; `scatter(x, idx, upd, mode)` writes
`upd` (shape `idx.shape + x.shape[1:]`) into rows of `x`, combining by mode: 'add', 'set',
'mul', 'max' or 'min'. Clamping keeps generated kernels in bounds; the Tensor layer checks
bounds eagerly and raises IndexError.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.errors import ArgumentError, ArgumentTypeError
from fgrad.core.ir import ShapedArray
from fgrad.core.primitive import Primitive
from fgrad.core.prims._util import (batch_size, fmt_shape, instantiate, is_undefined,
                                     move_bdim, zeros, zeros_like_aval)

gather_p = Primitive("gather", linear=True)
scatter_p = Primitive("scatter", linear=True)
SCATTER_MODES = ("add", "set", "mul", "max", "min")


def _check_indices(op: str, x: ShapedArray, idx: ShapedArray) -> None:
    if not idx.dtype.is_int:
        raise ArgumentTypeError(f"{op}: indices must be integers, got {idx.dtype.name}")
    if x.ndim == 0:
        raise ArgumentError(f"{op}: cannot index a 0-d operand")


def _gather_abstract(x: ShapedArray, idx: ShapedArray) -> ShapedArray:
    _check_indices("gather", x, idx)
    return ShapedArray(idx.shape + x.shape[1:], x.dtype)


def _clamped(idx: np.ndarray, n: int) -> np.ndarray:
    return np.clip(idx, 0, max(n - 1, 0)).astype(np.int64)


def _gather_impl(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    if x.shape[0] == 0:
        return np.zeros(idx.shape + x.shape[1:], x.dtype)
    return x[_clamped(idx, x.shape[0])]


def _gather_batch(args: list[Any], dims: list[Any]) -> Any:
    (x, idx), (xd, idd) = args, dims
    if idd is None:
        return gather(move_bdim(x, xd, 1, x.shape[xd]), idx), idx.ndim
    if xd is None:
        return gather(x, idx), idd
    size = batch_size(args, dims)
    x = move_bdim(x, xd, 0, size)
    idx = move_bdim(idx, idd, 0, size)
    return gather(*_flatten_batch(x, idx)), 0


def _flatten_batch(x: Any, idx: Any) -> tuple[Any, Any]:
    """Fold a shared leading batch axis into the gathered axis: row b*n + i."""
    from fgrad.core.prims.misc import iota
    from fgrad.core.prims.movement import reshape
    b, n = x.shape[0], x.shape[1]
    flat_x = reshape(x, (b * n,) + x.shape[2:])
    clamped = idx.maximum(0).minimum(max(n - 1, 0)).cast(dtypes.int32 if b * n < 2**31
                                                          else dtypes.int64)
    offsets = iota(clamped.dtype, clamped.shape, 0) * n
    return flat_x, clamped + offsets


gather_p.abstract_eval = _gather_abstract
gather_p.impl = _gather_impl
gather_p.jvp = lambda primals, tangents: (
    gather(*primals), None if tangents[0] is None else gather(tangents[0], primals[1]))
gather_p.transpose = lambda ct, x, idx: [
    scatter(zeros_like_aval(x.aval), idx, ct, "add"), None]
gather_p.batch = _gather_batch


# ---------------------------------------------------------------------------- scatter

def _scatter_abstract(x: ShapedArray, idx: ShapedArray, upd: ShapedArray, *,
                      mode: str) -> ShapedArray:
    _check_indices("scatter", x, idx)
    if mode not in SCATTER_MODES:
        raise ArgumentError(f"scatter: mode must be one of {SCATTER_MODES}, got {mode!r}")
    want = idx.shape + x.shape[1:]
    if upd.shape != want or upd.dtype != x.dtype:
        raise ArgumentError(f"scatter: updates must have shape {fmt_shape(want)} and dtype "
                            f"{x.dtype.name}, got {fmt_shape(upd.shape)} {upd.dtype.name}")
    return x


def _scatter_impl(x: np.ndarray, idx: np.ndarray, upd: np.ndarray, *, mode: str) -> np.ndarray:
    out = np.array(x)
    if x.shape[0] == 0 or idx.size == 0:
        return out
    flat_idx = _clamped(idx, x.shape[0]).reshape(-1)
    flat_upd = upd.reshape((-1,) + x.shape[1:])
    if mode == "set":
        for i, row in zip(flat_idx, flat_upd):
            out[i] = row
        return out
    ufunc = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[mode]
    with np.errstate(all="ignore"):
        ufunc.at(out, flat_idx, flat_upd)
    return out


def _scatter_jvp(primals: list[Any], tangents: list[Any], *, mode: str) -> Any:
    x, idx, upd = primals
    x_dot, _, upd_dot = tangents
    out = scatter(x, idx, upd, mode)
    if x_dot is None and upd_dot is None:
        return out, None
    x_dot, upd_dot = instantiate(x_dot, x.aval), instantiate(upd_dot, upd.aval)
    if mode in ("add", "set"):
        return out, scatter(x_dot, idx, upd_dot, mode)
    if mode == "mul":
        return out, _scatter_mul_tangent(x, idx, upd, out, x_dot, upd_dot)
    return out, _scatter_extremum_tangent(x, idx, upd, out, x_dot, upd_dot)


def _scatter_mul_tangent(x: Any, idx: Any, upd: Any, out: Any, x_dot: Any,
                         upd_dot: Any) -> Any:
    """Product rule: out = x * P, dP = P * sum(upd_dot / upd) over the rows hitting a slot."""
    from fgrad.core.prims.elementwise import select
    one = zeros(x.shape, x.dtype) + 1
    prods = scatter(one, idx, upd, "mul")
    safe = select(upd == 0, upd * 0 + 1, upd)
    rel = scatter(zeros(x.shape, x.dtype), idx, upd_dot / safe, "add")
    return x_dot * prods + x * prods * rel


def _scatter_extremum_tangent(x: Any, idx: Any, upd: Any, out: Any, x_dot: Any,
                              upd_dot: Any) -> Any:
    """Tangent of the winning entries; ties share it equally."""
    from fgrad.core.prims.elementwise import select
    x_wins = (x == out).cast(x.dtype)
    upd_wins = (upd == gather(out, idx)).cast(x.dtype)
    zero = zeros(x.shape, x.dtype)
    count = x_wins + scatter(zero, idx, upd_wins, "add")
    total = x_dot * x_wins + scatter(zero, idx, upd_dot * upd_wins, "add")
    return total / select(count == 0, count + 1, count)


def _scatter_transpose(ct: Any, x: Any, idx: Any, upd: Any, *, mode: str) -> list[Any]:
    if mode not in ("add", "set"):
        raise NotImplementedError(f"scatter mode {mode!r} is not linear")
    ct_x = ct_upd = None
    if is_undefined(x):
        ct_x = ct if mode == "add" else scatter(ct, idx, zeros(upd.aval.shape, ct.dtype), "set")
    if is_undefined(upd):
        ct_upd = gather(ct, idx)
        if mode == "set" and int(np.prod(idx.shape)) > 1:   # only a row's last update counts
            won = _last_writers(idx, ct.shape[0])
            ct_upd = ct_upd * won.cast(ct.dtype).reshape(idx.shape + (1,) * (ct.ndim - 1))
    return [ct_x, None, ct_upd]


def _last_writers(idx: Any, rows: int) -> Any:
    """Whether each update of a 'set' scatter is the last one its (clamped) row receives, in
    the order the updates are written (idx's row-major order): only those reach the output."""
    from fgrad.core.prims.misc import iota
    from fgrad.core.prims.movement import reshape
    count = int(np.prod(idx.shape))
    flat = reshape(idx, (count,))
    order = iota(dtypes.int32, (count,), 0)
    last = scatter(zeros((rows,), dtypes.int32) - 1, flat, order, "max")
    return reshape(gather(last, flat) == order, idx.shape)


def _scatter_batch(args: list[Any], dims: list[Any], *, mode: str) -> Any:
    from fgrad.core.prims.movement import reshape
    size = batch_size(args, dims)
    x, idx, upd = (move_bdim(a, d, 0, size) for a, d in zip(args, dims, strict=True))
    flat_x, flat_idx = _flatten_batch(x, idx)
    return reshape(scatter(flat_x, flat_idx, upd, mode), x.shape), 0


scatter_p.abstract_eval = _scatter_abstract
scatter_p.impl = _scatter_impl
scatter_p.jvp = _scatter_jvp
scatter_p.transpose = _scatter_transpose
scatter_p.batch = _scatter_batch


# ---------------------------------------------------------------------------- wrappers

def gather(x: Any, idx: Any) -> Any:
    """Rows `idx` of `x` (indices clamped to [0, len(x) - 1])."""
    return gather_p.bind(x, idx)


def scatter(x: Any, idx: Any, upd: Any, mode: str) -> Any:
    """`x` with rows `idx` combined with `upd` by `mode` (indices clamped)."""
    return scatter_p.bind(x, idx, upd, mode=mode)


def take_along(x: Any, idx: Any, axis: int) -> Any:
    """`out[..., i, ...] = x[..., idx[..., i, ...], ...]` along `axis` (NumPy's
    take_along_axis, with `idx` broadcast-free: same shape as x except along `axis`)."""
    from fgrad.core.prims.movement import reshape, transpose
    perm = tuple(i for i in range(x.ndim) if i != axis) + (axis,)
    xt, it = transpose(x, perm), transpose(idx, perm)
    lead = xt.shape[:-1]
    m = int(np.prod(lead)) if lead else 1
    n, k = xt.shape[-1], it.shape[-1]
    flat = reshape(xt, (m, n))
    rows = reshape(it, (m, k))
    picked = gather(*_flatten_batch(flat, rows))
    out = reshape(picked, lead + (k,))
    return transpose(out, tuple(int(i) for i in np.argsort(perm)))
