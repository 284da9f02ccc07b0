"""`lax.reduce_window`: a reduction over sliding windows of every axis (pooling, running sums).

The operand is padded (explicit (lo, hi) pairs, or 'VALID' / 'SAME' / 'SAME_LOWER' worked
out as JAX does: on the operand's shape with the dilated window), `base_dilation` spaces its
elements, and each window tap is one strided slice (`window_dilation` spaces the taps). As
in XLA, a window's result is `init_value` combined with the operand elements it covers
(padding and base-dilation holes add nothing), so a non-identity init (1 for a sum) enters
once per window. The taps are combined by

- `lax.add`, `lax.mul`, `lax.max`, `lax.min` (and `operator.add` / `operator.mul`,
  `fgrad.numpy.add` / `multiply` / `maximum` / `minimum`): a reduction of the stacked taps
  (padded with the identity), so gradients are those of sums / products / maxima;
- any other `computation(a, b)` (an associative binary function, JAX's contract): a fold
  over the taps from `init_value` that skips padding (for pytrees of operands it takes and
  returns tuples); it is differentiable wherever the function is.
"""
from __future__ import annotations

import itertools
import math
import operator
from typing import Any, Callable, Sequence

import numpy as np

from fgrad.core import prims as P
from fgrad.core import tree_util
from fgrad.core.errors import ArgumentError, ArgumentTypeError
from fgrad.core.methods.nn.conv_ops import tap_slices
from fgrad.core.prims.patches import window_counts
from fgrad.core.prims._util import fmt_shape
from fgrad.core.tensor import Tensor, Tracer, as_tensor
from fgrad.lax import elementwise as E
from fgrad.lax._args import dtype_name, int_tuple, same_dtype
from fgrad.lax.reductions import _identity
from fgrad.lax.shape_util import padtype_to_pads
from fgrad.lax.shapes import pad

__all__ = ["reduce_window"]

_OP = "reduce_window"
_KINDS: dict[Any, str] = {E.add: "sum", E.mul: "prod", E.max: "max", E.min: "min",
                          operator.add: "sum", operator.mul: "prod"}
_NUMPY_NAMES = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min"}
_REDUCERS = {"sum": P.reduce_sum, "prod": P.reduce_prod, "max": P.reduce_max,
             "min": P.reduce_min}
_COMBINE = {"sum": P.add_p, "prod": P.mul_p, "max": P.max_p, "min": P.min_p}


def _kind(computation: Callable[..., Any]) -> str | None:
    """'sum' / 'prod' / 'max' / 'min' for a recognized monoid, else None."""
    try:
        kind = _KINDS.get(computation)
    except TypeError:  # an unhashable callable
        return None
    if kind is None and getattr(computation, "__module__", "").startswith("fgrad.numpy"):
        kind = _NUMPY_NAMES.get(getattr(computation, "__name__", ""))
    return kind


def _geometry(x: Tensor, window_dimensions: Any, window_strides: Any, padding: Any,
              base_dilation: Any, window_dilation: Any
              ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...],
                         tuple[tuple[int, int, int], ...]]:
    """(window, strides, window dilation, pad config (lo, hi, interior) per axis)."""
    nd = x.ndim
    window = int_tuple(_OP, window_dimensions, "window_dimensions")
    strides = int_tuple(_OP, window_strides, "window_strides")
    bdil = int_tuple(_OP, base_dilation, "base_dilation") if base_dilation is not None \
        else (1,) * nd
    wdil = int_tuple(_OP, window_dilation, "window_dilation") if window_dilation is not None \
        else (1,) * nd
    for what, vals in (("window_dimensions", window), ("window_strides", strides),
                       ("base_dilation", bdil), ("window_dilation", wdil)):
        if len(vals) != nd:
            raise ArgumentTypeError(f"lax.reduce_window got the wrong number of {what} for "
                                    f"operand: got operand shape {fmt_shape(x.shape)} with "
                                    f"{what} {vals}; give one entry per axis")
        if any(v < 1 for v in vals):
            raise ArgumentError(f"lax.reduce_window: {what} must be positive, got {vals}")
    if isinstance(padding, str):  # as JAX: the operand's own shape, the dilated window
        dilated_window = [(k - 1) * d + 1 for k, d in zip(window, wdil)]
        pairs = padtype_to_pads(x.shape, dilated_window, strides, padding)
    else:
        try:
            pairs = [tuple(int_tuple(_OP, p, "padding")) for p in padding]  # type: ignore
        except TypeError:
            pairs = []
        if len(pairs) != nd or any(len(p) != 2 for p in pairs):
            raise ArgumentError(f"lax.reduce_window: padding must be 'VALID', 'SAME', "
                                f"'SAME_LOWER' or one (lo, hi) pair per axis of the operand "
                                f"of shape {fmt_shape(x.shape)}, got {padding!r}")
    config = tuple((lo, hi, d - 1) for (lo, hi), d in zip(pairs, bdil))
    return window, strides, wdil, config


def _taps(x: Tensor, fill: Any, window: tuple[int, ...], strides: tuple[int, ...],
          wdil: tuple[int, ...], config: tuple[tuple[int, int, int], ...]
          ) -> tuple[list[Tensor], tuple[int, ...]]:
    """The strided slice of every window tap of the operand padded with `fill` (a scalar
    or 0-d Tensor), and the output shape (no taps when no window fits)."""
    padded = pad(x, fill, config)
    out = tuple(max(n, 0) for n in window_counts(padded.shape, window, strides, wdil))
    if x.ndim == 0:
        return [padded], ()
    if math.prod(out) == 0:
        return [], out
    return tap_slices(padded, window, strides, wdil, "lax.reduce_window"), out


def _valid_taps(shape: tuple[int, ...], window: tuple[int, ...], strides: tuple[int, ...],
                wdil: tuple[int, ...], config: tuple[tuple[int, int, int], ...],
                out: tuple[int, ...]) -> list[np.ndarray | None]:
    """Per tap, where it reads an operand element rather than padding or a base-dilation
    hole (None: everywhere), in the order of `tap_slices`."""
    mask = np.ones(shape, bool)
    for axis, (lo, hi, interior) in enumerate(config):
        n = mask.shape[axis]
        size = n + max(n - 1, 0) * interior
        grown = np.zeros(mask.shape[:axis] + (size,) + mask.shape[axis + 1:], bool)
        index: list[Any] = [slice(None)] * mask.ndim
        index[axis] = slice(0, size, interior + 1)
        grown[tuple(index)] = mask
        widths = [(0, 0)] * mask.ndim
        widths[axis] = (max(lo, 0), max(hi, 0))
        grown = np.pad(grown, widths)
        index[axis] = slice(-min(lo, 0), grown.shape[axis] + min(hi, 0))
        mask = grown[tuple(index)]
    found: list[np.ndarray | None] = []
    for offset in itertools.product(*(range(k) for k in window)):
        box = tuple(slice(o * d, o * d + (m - 1) * st + 1, st)
                    for o, d, m, st in zip(offset, wdil, out, strides))
        tap = mask[box]
        found.append(None if tap.all() else tap)
    return found


def _is_identity(init: Tensor, kind: str) -> bool:
    if isinstance(init, Tracer):
        return False
    return bool(init.item() == _identity(kind, init.dtype))


def _monoid(kind: str, taps: list[Tensor], init: Tensor) -> Tensor:
    """Reduce the stacked taps (padded with the monoid's identity); a non-identity init
    then enters once."""
    if len(taps) == 1:
        result = taps[0]
    else:
        keep = tuple(range(1, taps[0].ndim + 1))
        stacked = P.concatenate([P.broadcast_in_dim(t, (1,) + t.shape, keep) for t in taps], 0)
        result = _REDUCERS[kind](stacked, (0,))
    if _is_identity(init, kind):
        return result
    return _COMBINE[kind].bind(P.broadcast_in_dim(init, result.shape, ()), result)


def _fold(computation: Callable[..., Any], multi: bool, taps: list[list[Tensor]],
          valid: list[np.ndarray | None], inits: list[Tensor], out: tuple[int, ...]
          ) -> list[Tensor]:
    """`computation` folded over the taps from `init`, skipping padding and holes (XLA's
    semantics: init combined with the window's operand elements)."""
    acc = [P.broadcast_in_dim(i, out, ()) for i in inits]
    for step, mask in zip(zip(*taps), valid):
        res = computation(tuple(acc), tuple(step)) if multi else computation(acc[0], step[0])
        leaves = tree_util.tree_leaves(res) if multi else [res]
        if len(leaves) != len(acc):
            raise TypeError(f"lax.reduce_window: computation must return {len(acc)} values "
                            f"(one per operand), got {len(leaves)}")
        new = [as_tensor(v) for v in leaves]
        for a, v in zip(acc, new):
            if v.shape != a.shape or v.dtype != a.dtype:
                raise TypeError(f"lax.reduce_window: computation changed a value from "
                                f"{dtype_name(a.dtype)}{list(a.shape)} to "
                                f"{dtype_name(v.dtype)}{list(v.shape)}; it must keep the "
                                f"operand's dtype (it combines two window elements)")
        if mask is not None:
            keep = Tensor(mask)
            new = [P.select(keep, v, a) for v, a in zip(new, acc)]
        acc = new
    return acc


def reduce_window(operand: Any, init_value: Any, computation: Callable[..., Any],
                  window_dimensions: Sequence[int], window_strides: Sequence[int],
                  padding: Any, base_dilation: Sequence[int] | None = None,
                  window_dilation: Sequence[int] | None = None) -> Any:
    """JAX's `lax.reduce_window` (see the module docstring): `computation` reduces every
    window of `window_dimensions` elements, moved by `window_strides`, of `operand` padded
    by `padding` ('VALID', 'SAME', 'SAME_LOWER' or (lo, hi) pairs) with `init_value`.
    `operand` / `init_value` may be matching pytrees; the result has their structure."""
    leaves, tree = tree_util.tree_flatten(operand)
    init_leaves, init_tree = tree_util.tree_flatten(init_value)
    if init_tree != tree:
        raise TypeError(f"lax.reduce_window: init_value {init_tree} must have the structure "
                        f"of operand {tree}")
    multi = not tree.is_leaf()
    pairs = [same_dtype(_OP, [x, i], ("operand", "init_value"))
             for x, i in zip(leaves, init_leaves)]
    xs, inits = [p[0] for p in pairs], [p[1] for p in pairs]
    for i in inits:
        if i.ndim:
            raise ArgumentError(f"lax.reduce_window: init_value must be a scalar, got shape "
                                f"{fmt_shape(i.shape)}")
    if len({x.shape for x in xs}) > 1:
        raise ArgumentError(f"lax.reduce_window: operands must share one shape, got "
                            f"{[fmt_shape(x.shape) for x in xs]}")
    window, strides, wdil, config = _geometry(xs[0], window_dimensions, window_strides,
                                              padding, base_dilation, window_dilation)
    kind = None if multi else _kind(computation)
    taps: list[list[Tensor]] = []
    outs: tuple[int, ...] = ()
    for x, i in zip(xs, inits):
        fill = _identity(kind, x.dtype) if kind is not None else i
        t, outs = _taps(x, fill, window, strides, wdil, config)
        taps.append(t)
    if not taps[0]:  # no window fits: an empty result
        results = [P.broadcast_in_dim(i, outs, ()) for i in inits]
    elif kind is not None:
        results = [_monoid(kind, taps[0], inits[0])]
    else:
        valid: list[np.ndarray | None] = [None]
        if xs[0].ndim:
            valid = _valid_taps(xs[0].shape, window, strides, wdil, config, outs)
        results = _fold(computation, multi, taps, valid, inits, outs)
    return tree_util.tree_unflatten(tree, results)
