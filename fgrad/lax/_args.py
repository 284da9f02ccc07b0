"""Argument handling shared by the `jax.lax`-style wrappers of fgrad.lax.

Operands may be Tensors (concrete or traced), NumPy arrays and scalars, Python scalars and
nested lists. NumPy values keep their dtype; Python floats become float32, ints int32, bools
bool. As in `jax.lax`, operands of one op must share a dtype: nothing is promoted. A Python
scalar that meets an array takes the array's dtype when it is of the same kind (an int for
an integer array, a float for a float array, a bool for a bool array); any other mix is an
error. Shapes broadcast only as lax's do: 0-d operands go with any shape, and operands of
equal rank may have size-1 axes; different ranks are an error (use broadcast_in_dim).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fgrad.core import dtypes as _dt
from fgrad.core import prims as P
from fgrad.core.dtypes import DType
from fgrad.core.errors import ArgumentError, ArgumentTypeError, AxisError
from fgrad.core.prims._util import fmt_shape
from fgrad.core.tensor import Tensor

KIND_WORDS = {"f": "floating-point", "i": "signed integer", "u": "unsigned integer",
              "b": "bool"}


def dtype_name(dtype: DType) -> str:
    """The NumPy-style name of `dtype` ('float32', 'int8', 'bfloat16')."""
    return str(dtype.np)


def is_weak(x: Any) -> bool:
    """A Python bool/int/float (NumPy scalars subclassing float are not weak)."""
    return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def _from_sequence(op: str, seq: Sequence[Any], what: str) -> Tensor:
    """A nested list that holds Tensors: its entries stacked (one dtype, one shape)."""
    items = [to_tensor(op, v, what) for v in seq]
    first = items[0]
    for t in items[1:]:
        if t.shape != first.shape or t.dtype != first.dtype:
            raise ArgumentError(f"lax.{op}: the entries of the list given as {what} must "
                                f"share one shape and dtype, got {fmt_shape(first.shape)} "
                                f"{dtype_name(first.dtype)} and {fmt_shape(t.shape)} "
                                f"{dtype_name(t.dtype)}")
    return P.concatenate([P.reshape(t, (1,) + t.shape) for t in items], 0)


def to_tensor(op: str, x: Any, what: str = "operand", dtype: DType | None = None
              ) -> Tensor:
    """`x` as a Tensor (see the module docstring); errors name `lax.op` and the argument."""
    if isinstance(x, Tensor):
        return x
    if is_weak(x):
        return weak_scalar(op, x, dtype or _dt.scalar_default_dtype(x), what)
    if isinstance(x, (list, tuple)) and _holds_tensor(x):
        return _from_sequence(op, x, what)
    if x is None or isinstance(x, (str, bytes, dict, set)):
        raise ArgumentTypeError(f"lax.{op}: {what} must be an array, a Tensor or a Python "
                                f"scalar, got {type(x).__name__}")
    if not isinstance(x, (list, tuple, np.ndarray, np.generic)):
        try:
            x = np.asarray(x)
        except Exception:
            raise ArgumentTypeError(f"lax.{op}: {what} must be an array, a Tensor or a "
                                    f"Python scalar, got {type(x).__name__}") from None
    if isinstance(x, (np.ndarray, np.generic)):
        try:
            _dt.from_numpy(np.asarray(x).dtype)
        except TypeError:
            raise ArgumentTypeError(f"lax.{op}: {what} has NumPy dtype {np.asarray(x).dtype}, "
                                    f"which fgrad does not support; use a bool, integer or "
                                    f"float array") from None
    try:
        return Tensor(x)
    except (ArgumentError, ArgumentTypeError, OverflowError, TypeError, ValueError) as err:
        raise ArgumentTypeError(f"lax.{op}: cannot use {what} as an array: {err}") from None


def _holds_tensor(seq: Any) -> bool:
    if isinstance(seq, Tensor):
        return True
    return isinstance(seq, (list, tuple)) and any(_holds_tensor(v) for v in seq)


def weak_scalar(op: str, x: Any, dtype: DType, what: str) -> Tensor:
    """A Python scalar as a 0-d Tensor of `dtype`, which must be of the scalar's kind."""
    kind = _dt.weak_type_of(x)
    fits = {"b": "b", "i": "iu", "f": "f"}[kind or "f"]
    if dtype.kind not in fits:
        raise ArgumentTypeError(
            f"lax.{op} requires arguments to have the same dtypes, got {dtype_name(dtype)} "
            f"and the Python {type(x).__name__} {x!r} ({what}); lax does not promote: pass "
            f"a {dtype_name(dtype)} value, or use fgrad.numpy for implicit promotion")
    if kind == "i" and dtype.kind in "iu":
        lo, hi = _dt.dtype_limits(dtype)
        if not lo <= x <= hi:
            raise ArgumentTypeError(f"lax.{op}: the Python int {x} ({what}) does not fit "
                                    f"{dtype_name(dtype)} (range {lo}..{hi})")
    return Tensor(x, dtype=dtype)


def check_kind(op: str, x: Tensor, kinds: str, what: str = "operand") -> None:
    """Raise ArgumentTypeError unless the dtype kind of `x` is in `kinds` ('f', 'i', 'u',
    'b')."""
    if x.dtype.kind not in kinds:
        wanted = " or ".join(KIND_WORDS[k] for k in kinds)
        raise ArgumentTypeError(f"lax.{op} does not accept dtype {dtype_name(x.dtype)} "
                                f"({what} of shape {fmt_shape(x.shape)}); it takes {wanted} "
                                f"arrays: convert first with lax.convert_element_type")


def same_dtype(op: str, xs: Sequence[Any], names: Sequence[str]) -> list[Tensor]:
    """Operands as Tensors of one dtype: weak Python scalars take the arrays' dtype; arrays
    of different dtypes are an ArgumentTypeError (lax never promotes)."""
    strong = [i for i, x in enumerate(xs) if not is_weak(x)]
    out: list[Tensor | None] = [None] * len(xs)
    for i in strong:
        out[i] = to_tensor(op, xs[i], names[i])
    first = strong[0] if strong else 0
    if out[first] is None:
        out[first] = to_tensor(op, xs[first], names[first])
    ref = out[first]
    assert ref is not None
    for i, x in enumerate(xs):
        t = out[i]
        if t is None:
            out[i] = weak_scalar(op, x, ref.dtype, names[i])
        elif t.dtype != ref.dtype:
            listed = ", ".join(f"{n}: {dtype_name(o.dtype)}" for n, o in zip(names, out)
                               if o is not None)
            raise ArgumentTypeError(f"lax.{op} requires arguments to have the same dtypes, got "
                                    f"{listed}; convert one with lax.convert_element_type "
                                    f"(lax does not promote; fgrad.numpy does)")
    return [t for t in out if t is not None]


def broadcast_shape(op: str, xs: Sequence[Tensor], names: Sequence[str]) -> tuple[int, ...]:
    """lax's broadcasting: 0-d operands fit any shape; the others share one rank, and each
    axis has one size or size 1."""
    shaped = [x.shape for x in xs if x.ndim]
    if not shaped:
        return ()
    listed = ", ".join(f"{n} {fmt_shape(x.shape)}" for n, x in zip(names, xs))
    if len({len(s) for s in shaped}) > 1:
        raise ArgumentError(f"lax.{op}: arrays must have the same number of dimensions (or be "
                            f"0-d), got {listed}; add axes with lax.broadcast_in_dim or "
                            f"lax.expand_dims")
    out = []
    for sizes in zip(*shaped):
        big = {d for d in sizes if d != 1}
        if len(big) > 1:
            raise ArgumentError(f"lax.{op}: incompatible shapes {listed}: each axis must have "
                                f"one size (or size 1)")
        out.append(big.pop() if big else 1)
    return tuple(out)


def expand(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    """`x` (0-d, or of `shape` with some size-1 axes) broadcast to `shape`."""
    if x.shape == shape:
        return x
    return P.broadcast_in_dim(x, shape, tuple(range(x.ndim)))


def to_dtype(op: str, spec: Any, what: str = "dtype") -> DType:
    """A DType from a NumPy dtype, an fgrad dtype, a name or a Python type."""
    try:
        return _dt.to_dtype(spec)
    except TypeError:
        raise ArgumentTypeError(f"lax.{op}: {what} {spec!r} is not a dtype fgrad supports; use "
                                f"e.g. 'float32', np.int32 or fgrad.dtypes.float32") from None


def as_int(op: str, value: Any, what: str) -> int:
    """A Python int from an int-like static argument (not a float, bool or traced value)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        if isinstance(value, Tensor):
            raise ArgumentTypeError(f"lax.{op}: {what} must be a static Python int, got a "
                                    f"Tensor; use the lax.dynamic_* functions for traced "
                                    f"positions")
        raise ArgumentTypeError(f"lax.{op}: {what} must be an int, got "
                                f"{type(value).__name__} {value!r}")
    return int(value)


def int_tuple(op: str, values: Any, what: str) -> tuple[int, ...]:
    """A tuple of Python ints from a sequence argument."""
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        raise ArgumentTypeError(f"lax.{op}: {what} must be a sequence of ints, got the "
                                f"int {values}; write ({values},)")
    try:
        seq = list(values)
    except TypeError:
        raise ArgumentTypeError(f"lax.{op}: {what} must be a sequence of ints, got "
                                f"{type(values).__name__}") from None
    return tuple(as_int(op, v, what) for v in seq)


def shape_arg(op: str, shape: Any, what: str = "shape") -> tuple[int, ...]:
    """A shape: non-negative ints (an int alone means a 1-d shape)."""
    dims = (as_int(op, shape, what),) if isinstance(shape, (int, np.integer)) and not \
        isinstance(shape, bool) else int_tuple(op, shape, what)
    if any(d < 0 for d in dims):
        raise ArgumentError(f"lax.{op}: {what} {dims} has a negative size; every size must "
                            f"be >= 0 (lax has no -1 placeholder)")
    return dims


def axes_arg(op: str, axes: Any, ndim: int, shape: tuple[int, ...], what: str = "axes",
             negative: bool = False) -> tuple[int, ...]:
    """Distinct axes in range for a `ndim`-d operand; negative ones count from the end only
    when `negative` (lax's reductions, cumulative ops and rev take non-negative axes)."""
    out = []
    for a in int_tuple(op, axes, what):
        if negative and -ndim <= a < 0:
            a += ndim
        if not 0 <= a < ndim:
            hint = "" if negative or a >= 0 else f" (lax takes non-negative axes: use {a + ndim})"
            raise AxisError(f"lax.{op}: axis {a} in {what} is out of range for an operand of "
                            f"shape {fmt_shape(shape)}{hint}")
        out.append(a)
    if len(set(out)) != len(out):
        raise ArgumentError(f"lax.{op}: {what} {tuple(out)} repeats an axis")
    return tuple(out)


def axis_arg(op: str, axis: Any, shape: tuple[int, ...], what: str = "axis",
             negative: bool = False) -> int:
    """One axis (see `axes_arg`)."""
    return axes_arg(op, (as_int(op, axis, what),), len(shape), shape, what, negative)[0]
