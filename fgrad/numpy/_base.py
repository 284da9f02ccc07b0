"""Conversions and dtype rules shared by fgrad.numpy (jax.numpy's conventions).

Inputs may be Tensors (or tracers), NumPy arrays, Python scalars and nested lists. Python
floats and lists of floats become float32, ints int32, bools bool; NumPy arrays keep their
dtype. Python scalars stay *weak* when they meet a Tensor in a binary function
(`fnp.add(int8_tensor, 3)` is int8), as in JAX.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fgrad.core import dtypes as _dt
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.tensor import Tensor

ArrayLike = Any
Axis = int | Sequence[int] | None


def to_dtype(dtype: Any) -> DType | None:
    """A DType for NumPy/fgrad dtype specs (None stays None)."""
    return None if dtype is None else _dt.to_dtype(dtype)


def asarray(a: ArrayLike, dtype: Any = None, copy: Any = None) -> Tensor:
    """`a` as a Tensor (a Tensor or traced value is returned as is, cast to `dtype` if given).

    Python floats -> float32, ints -> int32, bools -> bool; NumPy arrays keep their dtype."""
    want = to_dtype(dtype)
    if isinstance(a, Tensor):
        return a if want is None or a.dtype == want else a.cast(want)
    if isinstance(a, (list, tuple)) and any(isinstance(v, Tensor) for v in _flat(a)):
        from fgrad.numpy.shape import stack
        return stack([asarray(v, want) for v in a])
    if isinstance(a, np.ndarray) or isinstance(a, np.generic):
        arr = np.asarray(a)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"fgrad.numpy: cannot make a Tensor from a NumPy array of dtype "
                            f"{arr.dtype}; use a bool, integer or float array")
        return Tensor(arr, want)
    return Tensor(a, want)


def array(a: ArrayLike, dtype: Any = None, copy: bool = True, ndmin: int = 0) -> Tensor:
    """Like `asarray` (Tensors are immutable, so a copy is never needed); `ndmin` prepends
    length-1 axes."""
    out = asarray(a, dtype)
    if out.ndim < ndmin:
        out = out.reshape((1,) * (ndmin - out.ndim) + out.shape)
    return out


def astype(x: ArrayLike, dtype: Any, copy: bool = False) -> Tensor:
    """x converted to `dtype` (jax.numpy.astype; the same as `x.astype(dtype)`)."""
    return asarray(x).cast(to_dtype(dtype))


def _flat(seq: Any) -> list[Any]:
    if isinstance(seq, (list, tuple)):
        return [v for s in seq for v in _flat(s)]
    return [seq]


def is_scalar(x: Any) -> bool:
    """A Python bool/int/float (a weakly typed scalar)."""
    return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def operands(*xs: Any) -> list[Any]:
    """Binary-op operands: arrays become Tensors; Python scalars stay weak unless every
    operand is one (then the first becomes a Tensor by the default rules)."""
    if all(is_scalar(x) for x in xs):
        return [asarray(xs[0]), *xs[1:]]
    return [x if is_scalar(x) else asarray(x) for x in xs]


def refuse_out(name: str, out: Any) -> None:
    """fgrad arrays are immutable: `out=` is refused with the functional alternative."""
    if out is not None:
        raise TypeError(f"fgrad.numpy.{name}: the out= argument is not supported (Tensors are "
                        f"immutable); use the returned value, e.g. y = fnp.{name}(...)")


def float_of(x: Tensor) -> Tensor:
    """Integer and bool Tensors become float32 (float64 with `enable_x64`: jnp's rule for
    sin, mean, sqrt, ...)."""
    return x if x.dtype.is_float else x.cast(dtypes.default_float)


def axes_of(axis: Axis, ndim: int, name: str) -> tuple[int, ...]:
    """Normalized non-negative axes (None: all); errors name the function and the axis."""
    if axis is None:
        return tuple(range(ndim))
    seq = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for ax in seq:
        if not -ndim <= int(ax) < max(ndim, 1) or (ndim == 0 and ax not in (0, -1)):
            raise ValueError(f"fgrad.numpy.{name}: axis {ax} is out of bounds for an array of "
                             f"dimension {ndim}")
        out.append(int(ax) % max(ndim, 1))
    if len(set(out)) != len(out):
        raise ValueError(f"fgrad.numpy.{name}: repeated axis in {axis}")
    return tuple(out)


def axis_of(axis: int, ndim: int, name: str) -> int:
    """One normalized axis."""
    return axes_of(axis, ndim, name)[0]


def result_type(*xs: Any) -> DType:
    """The dtype binary ops give for these operands (weak Python scalars included)."""
    tensors = [x for x in xs if not is_scalar(x)]
    if not tensors:
        return asarray(xs[0]).dtype
    out = asarray(tensors[0]).dtype
    for t in tensors[1:]:
        out = _dt.promote(out, asarray(t).dtype)
    for s in xs:
        if is_scalar(s):
            out = _dt.result_dtype(out, _dt.weak_type_of(s) or "f")
    return out
