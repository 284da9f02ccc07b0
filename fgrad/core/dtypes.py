"""Data types and the promotion rules.

A `DType` pairs fgrad's name with a NumPy dtype. `promote(a, b)` gives the result dtype of a
binary op between two Tensors; Python scalars are *weak* (see `result_dtype`).

Promotion rules (the same lattice as PyTorch and JAX for the common cases):
- bool < integers < floats. A float beats any integer, whatever its size
  (int64 + float16 -> float16).
- Two floats: the wider one; float16 with bfloat16 gives float32.
- Two signed or two unsigned ints: the wider one. Signed with unsigned: the smallest signed
  type that holds both (uint8 + int8 -> int16, uint32 + int32 -> int64); uint64 with a signed
  int gives int64.
- Python scalars are weak: `Tensor(int8) + 3 -> int8`, `Tensor(int32) + 1.5 -> float32`
  (the default float), `Tensor(bool) + 1 -> int32` (the default int),
  `Tensor(float16) * 2.0 -> float16`.
"""
from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import cast
from typing import Any

import ml_dtypes
import numpy as np
from numpy.typing import DTypeLike

from fgrad.flags import x64_enabled

_NumpyDType = np.dtype


@dataclass(frozen=True, eq=True)
class DType:
    """A Tensor element type: `name` (tinygrad's), `short` (the jaxpr printer's), `kind`."""

    name: str
    short: str
    itemsize: int
    kind: str  # "b" bool, "i" signed int, "u" unsigned int, "f" float
    np: np.dtype

    def __repr__(self) -> str:
        return f"dtypes.{self.name}"

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    @property
    def is_unsigned(self) -> bool:
        return self.kind == "u"

    @property
    def min(self) -> Any:
        """The smallest value of the dtype (-inf for floats, False for bool)."""
        return dtype_limits(self)[0]

    @property
    def max(self) -> Any:
        """The largest value of the dtype (inf for floats, True for bool)."""
        return dtype_limits(self)[1]

    @property
    def dtype(self) -> _NumpyDType:
        """The NumPy dtype, so `np.dtype(dtypes.float32)` and NumPy's dtype arguments accept a
        DType (as `jnp.float32.dtype` is NumPy's float32)."""
        return self.np

    def __call__(self, x: Any) -> Any:
        """`x` as a Tensor of this dtype, as `jnp.float32(1.0)` or `jnp.int32([1, 2])` make an
        array in JAX: Tensors (traced ones too) are cast, Python values and NumPy arrays are
        converted with NumPy's casting (floats truncate toward zero for integer dtypes)."""
        from fgrad.core.tensor import Tensor
        if isinstance(x, Tensor):
            return x if x.dtype == self else x.cast(self)
        if isinstance(x, (list, tuple)) and x and _holds_tensor(x):
            return Tensor.stack(*[self(v) for v in x])
        try:
            if x is None or isinstance(x, (str, bytes, dict, set)):
                raise TypeError("not a number")
            arr = np.asarray(x).astype(self.np) if isinstance(x, (np.ndarray, np.generic)) \
                else np.asarray(x, dtype=self.np)
        except (TypeError, ValueError, OverflowError) as err:
            kind = TypeError if isinstance(err, TypeError) else ValueError
            raise kind(f"{self.np.name}({x!r}): cannot convert {type(x).__name__} to "
                       f"{self.np.name} ({err}); pass numbers, nested lists of numbers, a "
                       f"NumPy array or a Tensor") from None
        return Tensor(arr)


def _holds_tensor(seq: Any) -> builtins.bool:
    from fgrad.core.tensor import Tensor
    return any(isinstance(v, Tensor) or isinstance(v, (list, tuple)) and _holds_tensor(v)
               for v in seq)


def _make(name: str, short: str, npdtype: DTypeLike, kind: str) -> DType:
    npd = np.dtype(npdtype)
    return DType(name, short, npd.itemsize, kind, npd)


class _Defaults(type):
    """`dtypes.default_float` / `default_int`: float32 / int32, or float64 / int64 while
    `enable_x64` is on (JAX's jax_enable_x64)."""

    @property
    def default_float(cls) -> DType:
        return cls.float64 if x64_enabled() else cls.float32  # type: ignore[attr-defined]

    @property
    def default_int(cls) -> DType:
        return cls.int64 if x64_enabled() else cls.int32  # type: ignore[attr-defined]


class dtypes(metaclass=_Defaults):
    """Namespace of every DType, with tinygrad's aliases (`dtypes.float`, `dtypes.int`, ...)."""

    bool = _make("bool", "bool", np.bool_, "b")
    int8 = _make("char", "i8", np.int8, "i")
    int16 = _make("short", "i16", np.int16, "i")
    int32 = _make("int", "i32", np.int32, "i")
    int64 = _make("long", "i64", np.int64, "i")
    uint8 = _make("uchar", "u8", np.uint8, "u")
    uint16 = _make("ushort", "u16", np.uint16, "u")
    uint32 = _make("uint", "u32", np.uint32, "u")
    uint64 = _make("ulong", "u64", np.uint64, "u")
    float16 = _make("half", "f16", np.float16, "f")
    bfloat16 = _make("bfloat16", "bf16", ml_dtypes.bfloat16, "f")
    float32 = _make("float", "f32", np.float32, "f")
    float64 = _make("double", "f64", np.float64, "f")
    # aliases, as in the reference
    char, short, int, long = int8, int16, int32, int64
    uchar, ushort, uint, ulong = uint8, uint16, uint32, uint64
    half, float, double = float16, float32, float64

    @staticmethod
    def is_float(dtype: DType) -> builtins.bool:
        """True for float16, bfloat16, float32 and float64."""
        return dtype.kind == "f"

    @staticmethod
    def is_int(dtype: DType) -> builtins.bool:
        """True for signed and unsigned integers (not bool)."""
        return dtype.kind in "iu"

    @staticmethod
    def is_unsigned(dtype: DType) -> builtins.bool:
        """True for unsigned integers."""
        return dtype.kind == "u"

    @staticmethod
    def from_np(npdtype: DTypeLike) -> DType:
        """The DType of a NumPy dtype; raises TypeError for unsupported ones (complex, str)."""
        return from_numpy(npdtype)


ALL_DTYPES: tuple[DType, ...] = (
    dtypes.bool, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8,
    dtypes.uint16, dtypes.uint32, dtypes.uint64, dtypes.float16, dtypes.bfloat16,
    dtypes.float32, dtypes.float64,
)
# Computed in float32 registers and rounded to their own precision after each op (lowering).
NARROW_FLOATS = (dtypes.float16, dtypes.bfloat16)
_BY_NP = {d.np: d for d in ALL_DTYPES}
_BY_NAME = {d.name: d for d in ALL_DTYPES} | {d.short: d for d in ALL_DTYPES} | {
    str(d.np): d for d in ALL_DTYPES}


def from_numpy(npdtype: DTypeLike) -> DType:
    """Map a NumPy dtype to a DType."""
    key = np.dtype(npdtype)
    if key not in _BY_NP:
        raise TypeError(f"fgrad has no dtype for NumPy dtype {key}; supported: "
                        f"{', '.join(d.short for d in ALL_DTYPES)}")
    return _BY_NP[key]


def to_dtype(spec: object) -> DType:
    """Accept a DType, a name ('float32', 'f32', 'float'), a NumPy dtype or a Python type."""
    if isinstance(spec, DType):
        return spec
    if spec is float:
        return dtypes.default_float
    if spec is int:
        return dtypes.default_int
    if spec is bool:
        return dtypes.bool
    if isinstance(spec, str) and spec in _BY_NAME:
        return _BY_NAME[spec]
    try:  # anything else NumPy cannot read as a dtype raises TypeError here
        return from_numpy(cast(DTypeLike, spec))
    except TypeError:
        raise TypeError(f"not a dtype: {spec!r}; use one of fgrad.dtypes "
                        f"(e.g. dtypes.float32)") from None


def _wider_signed_for(u: DType, s: DType) -> DType:
    for cand in (dtypes.int16, dtypes.int32, dtypes.int64):
        if cand.itemsize > u.itemsize and cand.itemsize >= s.itemsize:
            return cand
    return dtypes.int64


def promote(a: DType, b: DType) -> DType:
    """Result dtype of a binary op between Tensors of dtypes `a` and `b` (module docstring)."""
    if a == b:
        return a
    order = {"b": 0, "u": 1, "i": 1, "f": 2}
    if order[a.kind] != order[b.kind]:
        return a if order[a.kind] > order[b.kind] else b
    if a.kind == "f":
        if {a, b} == {dtypes.float16, dtypes.bfloat16}:
            return dtypes.float32
        return a if a.itemsize > b.itemsize else b
    if a.kind == b.kind:
        return a if a.itemsize > b.itemsize else b
    u, s = (a, b) if a.kind == "u" else (b, a)
    if s.itemsize > u.itemsize:
        return s
    return _wider_signed_for(u, s)


def weak_type_of(value: object) -> str | None:
    """'b', 'i' or 'f' for Python bool/int/float scalars (weakly typed), else None."""
    if isinstance(value, bool):
        return "b"
    if isinstance(value, int):
        return "i"
    if isinstance(value, float):
        return "f"
    return None


def result_dtype(tensor_dtype: DType, weak_kind: str) -> DType:
    """Dtype of `tensor op scalar` where the scalar is weak of kind 'b', 'i' or 'f'."""
    if weak_kind == "f" and tensor_dtype.kind != "f":
        return dtypes.default_float
    if weak_kind == "i" and tensor_dtype.kind == "b":
        return dtypes.default_int
    return tensor_dtype


def scalar_default_dtype(value: object) -> DType:
    """The dtype a Python scalar gets on its own: bool, int32 or float32."""
    kind = weak_type_of(value)
    if kind is None:
        raise TypeError(f"expected a Python scalar, got {type(value).__name__}")
    return {"b": dtypes.bool, "i": dtypes.default_int, "f": dtypes.default_float}[kind]


def dtype_limits(dtype: DType) -> tuple[Any, Any]:
    """(min, max) of `dtype` as Python values: -inf/inf for floats, False/True for bool."""
    if dtype.kind == "b":
        return False, True
    if dtype.kind == "f":
        return -float("inf"), float("inf")
    info = np.iinfo(dtype.np)
    return int(info.min), int(info.max)
