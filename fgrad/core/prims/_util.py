"""Helpers shared by the primitive definitions: aval checks, zeros, batch-dim moves."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fgrad.core.dtypes import DType
from fgrad.core.errors import ArgumentError, ArgumentTypeError
from fgrad.core.ir import ShapedArray


class UndefinedPrimal:
    """Marks a linear input during transposition: only its aval is known."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self) -> str:
        return f"UndefinedPrimal({self.aval})"


def is_undefined(x: Any) -> bool:
    """True for a linear input of a transpose rule."""
    return isinstance(x, UndefinedPrimal)


def fmt_shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def check_kinds(op: str, aval: ShapedArray, kinds: str, what: str = "operand") -> None:
    """Raise a TypeError naming the op and dtype if `aval.dtype.kind` is not in `kinds`."""
    if aval.dtype.kind not in kinds:
        wanted = {"f": "floating-point", "iu": "integer", "biu": "integer or bool",
                  "iuf": "numeric", "b": "bool"}.get(kinds, f"kind in {kinds!r}")
        raise ArgumentTypeError(f"{op} requires a {wanted} {what}, got {aval.dtype.name} "
                                f"{fmt_shape(aval.shape)}; cast it first, e.g. "
                                f"x.cast(dtypes.float32)")


def check_same(op: str, avals: Sequence[ShapedArray]) -> None:
    """Elementwise operands must agree in shape and dtype (the Tensor layer broadcasts)."""
    first = avals[0]
    for a in avals[1:]:
        if a.shape != first.shape:
            raise ArgumentError(f"{op}: operands must have the same shape, got "
                                f"{fmt_shape(first.shape)} and {fmt_shape(a.shape)}")
        if a.dtype != first.dtype:
            raise ArgumentTypeError(f"{op}: operands must have the same dtype, got "
                                    f"{first.dtype.name} and {a.dtype.name}; cast one of them")


def normalize_axes(op: str, axes: Sequence[int], ndim: int) -> tuple[int, ...]:
    out = []
    for ax in axes:
        if not -ndim <= ax < max(ndim, 1) or (ndim == 0):
            raise ArgumentError(f"{op}: axis {ax} is out of range for a {ndim}-d operand")
        out.append(ax % ndim)
    return tuple(out)


def zeros(shape: Sequence[int], dtype: DType) -> Any:
    """A Tensor of zeros (a broadcast scalar, so it costs nothing eagerly)."""
    from fgrad.core.prims.movement import broadcast_in_dim
    from fgrad.core.tensor import Tensor
    scalar = Tensor._wrap(np.zeros((), dtype.np))
    return broadcast_in_dim(scalar, tuple(shape), ()) if shape else scalar


def zeros_like_aval(aval: ShapedArray) -> Any:
    return zeros(aval.shape, aval.dtype)


def instantiate(t: Any, like_aval: ShapedArray) -> Any:
    """A symbolic-zero tangent (None) made into a Tensor of zeros."""
    return zeros_like_aval(like_aval) if t is None else t


def move_bdim(x: Any, src: int | None, dst: int, size: int) -> Any:
    """Move (or create, by broadcasting) the batch dimension of `x` to position `dst`."""
    from fgrad.core.prims.movement import broadcast_in_dim, transpose
    if src is None:
        shape = list(x.shape)
        shape.insert(dst, size)
        dims = tuple(i for i in range(len(shape)) if i != dst)
        return broadcast_in_dim(x, tuple(shape), dims)
    if src == dst:
        return x
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    return transpose(x, tuple(perm))


def batch_size(args: Sequence[Any], dims: Sequence[int | None]) -> int:
    for x, d in zip(args, dims, strict=True):
        if d is not None:
            return x.shape[d]
    raise ArgumentError("no batched argument")
