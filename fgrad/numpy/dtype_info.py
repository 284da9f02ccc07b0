"""Data types the jax.numpy way: the scalar types (`fnp.float32(1.0)` makes a float32
array), the abstract kinds for issubdtype (floating, integer, ...), and dtype(), iinfo,
finfo, issubdtype, isdtype, promote_types, can_cast and result_type.

The scalar types are fgrad's DType objects themselves (fnp.float32 is dtypes.float32): a
DType is callable and `np.dtype(fnp.float32)` is NumPy's float32, so one object serves as a
dtype argument everywhere, compares equal to `x.dtype`, and converts values. Functions that
return a dtype return a DType, which compares equal to the NumPy dtype of the same name.
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from fgrad.core import dtypes as _dt
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import asarray, is_scalar

dtype = np.dtype  # jnp.dtype is NumPy's dtype class too

generic, number, inexact, floating = np.generic, np.number, np.inexact, np.floating
complexfloating, integer = np.complexfloating, np.integer
signedinteger, unsignedinteger = np.signedinteger, np.unsignedinteger
flexible, character = np.flexible, np.character

bool_ = dtypes.bool
int8, int16, int32, int64 = dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64
uint8, uint16, uint32, uint64 = dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64
float16, bfloat16 = dtypes.float16, dtypes.bfloat16
float32, float64 = dtypes.float32, dtypes.float64
# NumPy's C-named aliases, as jax.numpy spells them (64-bit ones stay 64-bit in fgrad)
int_, uint, float_ = dtypes.int64, dtypes.uint64, dtypes.float64
single, double = dtypes.float32, dtypes.float64

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def _np_dtype(x: Any, name: str) -> np.dtype:
    """The NumPy dtype of a DType, Tensor, NumPy array/scalar, scalar type or dtype name."""
    if isinstance(x, DType):
        return x.np
    if isinstance(x, Tensor):
        return x.dtype.np
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype
    if x is None:
        raise TypeError(f"fgrad.numpy.{name}: expected a dtype, got None")
    try:
        return np.dtype(x)
    except TypeError:
        pass
    try:
        return _dt.to_dtype(x).np
    except TypeError:
        raise TypeError(f"fgrad.numpy.{name}: {x!r} is not a dtype; pass a dtype such as "
                        f"fnp.float32, a NumPy dtype, a dtype name or an array") from None


def _kind(d: np.dtype) -> str:
    """NumPy's kind letter, with bfloat16 counted as a float ('f')."""
    return "f" if d == _BFLOAT16 else d.kind


def iinfo(int_type: Any) -> Any:
    """Machine limits of an integer dtype (min, max, bits): accepts fgrad and NumPy dtypes,
    names, Tensors and arrays."""
    d = _np_dtype(int_type, "iinfo")
    if d.kind not in "iu":
        raise ValueError(f"fgrad.numpy.iinfo: {d} is not an integer dtype; use fnp.finfo for "
                         f"floats")
    return ml_dtypes.iinfo(d)


def finfo(dtype: Any) -> Any:
    """Machine limits of a float dtype (eps, max, tiny, bits, ...), bfloat16 included:
    accepts fgrad and NumPy dtypes, names, Tensors and arrays."""
    d = _np_dtype(dtype, "finfo")
    if _kind(d) != "f":
        raise ValueError(f"fgrad.numpy.finfo: {d} is not a float dtype; use fnp.iinfo for "
                         f"integers")
    return ml_dtypes.finfo(d)


def _scalar_type(x: Any, name: str) -> type:
    if isinstance(x, type) and issubclass(x, np.generic):
        return x
    return _np_dtype(x, name).type


def issubdtype(arg1: Any, arg2: Any) -> bool:
    """Whether dtype arg1 is arg2 or lies under the abstract kind arg2 (fnp.floating,
    fnp.integer, fnp.number, ...); bfloat16 counts as floating, as in JAX."""
    a, b = _scalar_type(arg1, "issubdtype"), _scalar_type(arg2, "issubdtype")
    if a is _BFLOAT16.type:
        return b is a or b in (np.generic, np.number, np.inexact, np.floating)
    return bool(np.issubdtype(a, b))


_KINDS = {"bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu",
          "real floating": "f", "complex floating": "c", "numeric": "iufc"}


def isdtype(dtype: Any, kind: Any) -> bool:
    """The Array API test: whether `dtype` is of `kind` ("bool", "signed integer",
    "unsigned integer", "integral", "real floating", "complex floating", "numeric"), is a
    given dtype, or matches any entry of a tuple of these."""
    d = _np_dtype(dtype, "isdtype")
    for k in (kind if isinstance(kind, tuple) else (kind,)):
        if isinstance(k, str):
            if k not in _KINDS:
                raise ValueError(f"fgrad.numpy.isdtype: unknown kind {k!r}; use one of "
                                 f"{sorted(_KINDS)} or a dtype")
            if _kind(d) in _KINDS[k]:
                return True
        elif _np_dtype(k, "isdtype") == d:
            return True
    return False


def _is_dtype_like(x: Any) -> bool:
    return isinstance(x, (DType, np.dtype, str)) or (
        isinstance(x, type) and (issubclass(x, np.generic) or x in (bool, int, float)))


_WEAK_TYPES = {bool: "b", int: "i", float: "f"}


def result_type(*args: Any) -> DType:
    """The dtype fgrad's binary functions give for these operands: arrays, Tensors and
    dtypes are strong; Python scalars (and the types bool, int, float) are weak."""
    if not args:
        raise ValueError("fgrad.numpy.result_type: needs at least one argument")
    strong: list[DType] = []
    weak: list[str] = []
    for a in args:
        if isinstance(a, type) and a in _WEAK_TYPES:
            weak.append(_WEAK_TYPES[a])
        elif is_scalar(a):
            weak.append(_dt.weak_type_of(a) or "f")
        elif _is_dtype_like(a):
            strong.append(_dt.from_numpy(_np_dtype(a, "result_type"))
                          if not isinstance(a, DType) else a)
        else:
            strong.append(a.dtype if isinstance(a, Tensor) else asarray(a).dtype)
    if strong:
        out = strong[0]
        for d in strong[1:]:
            out = _dt.promote(out, d)
    else:
        out = {"b": dtypes.bool, "i": dtypes.int32, "f": dtypes.float32}[weak.pop(0)]
    for w in weak:
        out = _dt.result_dtype(out, w)
    return out


def promote_types(a: Any, b: Any) -> DType:
    """The dtype two dtypes promote to under fgrad's rules (bool < ints < floats; a float
    beats any int; uint8 + int8 -> int16; float16 + bfloat16 -> float32)."""
    return result_type(*[x if isinstance(x, type) and x in _WEAK_TYPES
                         else _dt.from_numpy(_np_dtype(x, "promote_types"))
                         for x in (a, b)])


def can_cast(from_: Any, to: Any, casting: str = "safe") -> bool:
    """Whether NumPy's `casting` rule ("no", "equiv", "safe", "same_kind", "unsafe") allows
    casting dtype (or array) `from_` to dtype `to`."""
    if is_scalar(from_):
        raise TypeError("fgrad.numpy.can_cast: Python scalars have no fixed dtype (NEP 50); "
                        "pass a dtype or an array, e.g. fnp.can_cast(fnp.float32, to)")
    return bool(np.can_cast(_np_dtype(from_, "can_cast"), _np_dtype(to, "can_cast"),
                            casting))  # type: ignore[arg-type]
