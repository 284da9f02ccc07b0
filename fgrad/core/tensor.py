"""`Tensor`, the user-facing immutable array, and the eager root trace.

A concrete Tensor wraps a read-only NumPy array. Under a transformation the same methods run
on `Tracer`s (Tensor subclasses owned by a trace), so every Tensor method is a composition of
primitives that any transformation can interpret. Operators and ops live in the mixins.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

import numpy as np

from fgrad import flags as _flags
from fgrad.core import device as _device
from fgrad.core import dtypes as _dt
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.errors import ArgumentError, ArgumentTypeError, IndexRangeError
from fgrad.core.ir import ShapedArray
from fgrad.core.methods.array_methods import ArrayMethodsMixin
from fgrad.core.methods.interop import InteropMixin
from fgrad.core.methods.tensor_create import CreationMixin
from fgrad.core.methods.tensor_math import MathMixin
from fgrad.core.methods.tensor_movement import MovementMixin
from fgrad.core.methods.tensor_reduce import ReduceMixin
from fgrad.core.trace import LeakedTracerError, Trace
from fgrad.core.methods.extra_ops import ExtraOpsMixin
from fgrad.core.methods.linalg import LinalgMixin
from fgrad.core.methods.math_ops import MathOpsMixin
from fgrad.core.methods.movement_ops import MovementOpsMixin
from fgrad.core.methods.nn.nn_ops import NNOpsMixin


class ConcretizationError(TypeError):
    """A traced value was needed as a concrete Python value (bool, int, float, numpy)."""


def _from_python(data: Any, dtype: DType | None) -> np.ndarray:
    if isinstance(data, (bool, int, float)):
        dtype = dtype or _dt.scalar_default_dtype(data)
        return _checked_cast(np.asarray(data), dtype, data)
    try:
        arr = np.asarray(data)
    except ValueError:
        raise ArgumentError(f"cannot build a Tensor from a ragged nested {type(data).__name__}: "
                            f"every row must have the same length") from None
    if arr.dtype == object and all(_dt.weak_type_of(v) == "i" for v in arr.flat):
        raise OverflowError("a Python int is too large for any fgrad integer dtype (int64 "
                            "is the widest)")
    if arr.dtype.kind not in "biuf":
        raise ArgumentTypeError(f"cannot build a Tensor from {type(data).__name__}: elements "
                                f"must be Python numbers or bools, got NumPy dtype {arr.dtype}")
    if dtype is None:
        kind = arr.dtype.kind
        dtype = {"b": dtypes.bool, "f": dtypes.default_float}.get(kind, dtypes.default_int)
        if arr.size == 0:
            dtype = dtypes.default_float
    return _checked_cast(arr, dtype, data)


def _checked_cast(arr: np.ndarray, dtype: DType, source: Any) -> np.ndarray:
    if dtype.is_int and arr.dtype.kind in "iu" and arr.size:
        info = np.iinfo(dtype.np)
        if arr.min() < info.min or arr.max() > info.max:
            raise OverflowError(f"value out of range for {dtype!r}: pass dtype=dtypes.int64 "
                                f"(or a wider type) to Tensor(...)")
    with np.errstate(over="ignore"):  # float overflow gives inf, as in PyTorch
        return arr.astype(dtype.np)


def _freeze(arr: np.ndarray) -> np.ndarray:
    if arr.flags.writeable:
        arr = arr if arr.base is None and arr.flags.owndata else arr.copy()
        arr.flags.writeable = False
    return arr


# the maker of `Tensor.sharding` (fgrad.transforms.extras.sharding registers its own)
SHARDING_OF: list[Callable[[str], Any]] = [lambda device: device]


class Tensor(MathMixin, MovementMixin, ReduceMixin, CreationMixin, MathOpsMixin,
             MovementOpsMixin, NNOpsMixin, LinalgMixin, ExtraOpsMixin, InteropMixin,
             ArrayMethodsMixin):
    """An immutable n-dimensional array (tinygrad's API, JAX's semantics).

    `Tensor(data, dtype=None)` accepts Python scalars, nested lists, NumPy arrays and Tensors.
    Python ints give int32, floats float32, bools bool; NumPy arrays keep their dtype.
    """

    __slots__ = ("_data", "__weakref__")
    __array_priority__ = 100
    _data: Any  # a frozen np.ndarray, a backend's device array, or a donated-buffer marker

    def __init__(self, data: Any, dtype: Any = None, device: str | None = None):
        dtype = None if dtype is None else _dt.to_dtype(dtype)
        if isinstance(data, Tracer):
            raise ArgumentTypeError("Tensor(tracer) is not allowed under a transformation; use "
                                    "x.cast(dtype) to change a traced value's dtype")
        if isinstance(data, Tensor):
            device = device if device is not None else data.device
            arr = _device.to_host(data._data)
            arr = arr if dtype is None else arr.astype(dtype.np)
        elif isinstance(data, np.ndarray) or np.isscalar(data) and isinstance(data, np.generic):
            arr = np.array(data)  # a copy: never freeze or alias the caller's array
            _dt.from_numpy(arr.dtype)
            arr = arr if dtype is None else arr.astype(dtype.np)
        else:
            arr = _from_python(data, dtype)
        if _device.is_device_array(arr):
            arr = _device.to_host(arr)
        self._data = _freeze(np.array(arr) if arr is getattr(data, "_data", None) else arr)
        if device is not None and _device.canonical_device(device) != "CPU":
            self._data = _device.put(self._data, device)

    @classmethod
    def _wrap(cls, arr: np.ndarray) -> "Tensor":
        t = object.__new__(Tensor)
        if type(arr) is np.ndarray and not arr.flags.writeable:
            t._data = arr
        else:
            t._data = arr if _device.is_device_array(arr) else _freeze(arr)
        return t

    # ---------------------------------------------------------------- properties
    @property
    def aval(self) -> ShapedArray:
        return ShapedArray(self._data.shape, _dt.from_numpy(self._data.dtype))

    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    @property
    def dtype(self) -> DType:
        return _dt.from_numpy(self._data.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def device(self) -> str:
        """Where the data lives: 'CPU' or an OpenCL device such as 'CL:0'."""
        return _device.device_of(self._data)

    @property
    def sharding(self) -> Any:
        """JAX's `Array.sharding`: a SingleDeviceSharding of the Tensor's device (fgrad has
        one device; a sharding given to device_put / jit is validated, not kept here)."""
        return SHARDING_OF[0](self.device)

    def numel(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    def element_size(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    def nbytes(self) -> int:
        """Total bytes of the elements."""
        return self.numel() * self.element_size()

    def is_floating_point(self) -> bool:
        """True for float16, bfloat16, float32 and float64 Tensors."""
        return self.dtype.is_float

    def size(self, dim: int | None = None) -> tuple[int, ...] | int:
        """The shape, or the length of dimension `dim` (negative counts from the end)."""
        if dim is None:
            return self.shape
        return self.shape[self._axis(dim)]

    def __len__(self) -> int:
        if not self.shape:
            raise ArgumentTypeError("len() of a 0-d Tensor")
        return self.shape[0]

    # ---------------------------------------------------------------- data access
    def _concrete(self, why: str) -> np.ndarray:
        return _device.to_host(self._data)

    def numpy(self) -> np.ndarray:
        """A NumPy copy of the data."""
        return np.array(self._concrete("numpy()"))

    def data(self) -> memoryview:
        """The raw data as a (read-only) memoryview (bfloat16 as its uint16 bit patterns)."""
        arr = np.ascontiguousarray(self._concrete("data()"))
        return (arr.view(np.uint16) if arr.dtype == dtypes.bfloat16.np else arr).data

    def item(self, *args: int) -> Any:
        """The value of a one-element Tensor as a Python number; with NumPy's arguments, of
        the element at a flat index (one int) or at one index per axis."""
        arr = self._concrete("item()")
        if args:
            index = args[0] if len(args) == 1 else args
            arr = arr.reshape(-1)[index] if len(args) == 1 else arr[index]
            return arr.item() if arr.dtype != dtypes.bfloat16.np else float(arr)
        if arr.size != 1:
            raise ArgumentError(f"item() needs a Tensor with one element, got shape {arr.shape}")
        return arr.reshape(()).item() if arr.dtype != dtypes.bfloat16.np else float(arr.flat[0])

    def tolist(self) -> Any:
        """The data as (nested) Python lists; a scalar for a 0-d Tensor."""
        arr = self._concrete("tolist()")
        if arr.dtype in (dtypes.bfloat16.np,):
            arr = arr.astype(np.float32)
        return arr.tolist()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self._concrete("np.asarray()")
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            return arr.astype(dtype)
        return np.array(arr) if copy else arr

    def __bool__(self) -> bool:
        arr = self._concrete("bool()")
        if arr.size != 1:
            raise ArgumentError(f"the truth value of a Tensor with shape {arr.shape} is ambiguous; "
                                f"use .any() or .all()")
        return bool(arr.reshape(()))

    def __int__(self) -> int:
        return int(self._scalar("int()"))

    def __float__(self) -> float:
        return float(self._scalar("float()"))

    def __index__(self) -> int:
        if not self.dtype.is_int:
            raise ArgumentTypeError(f"only integer Tensors can be used as an index, got "
                                    f"{self.dtype!r}")
        return int(self._scalar("__index__()"))

    def _scalar(self, why: str) -> Any:
        arr = self._concrete(why)
        if arr.size != 1:
            raise ArgumentTypeError(f"{why} needs a Tensor with one element, got shape {arr.shape}")
        return arr.reshape(())

    def __repr__(self) -> str:
        arr = _device.to_host(self._data)
        if arr.dtype == dtypes.bfloat16.np:
            arr = arr.astype(np.float32)
        body = np.array2string(arr, separator=", ", prefix="Tensor(", threshold=200)
        where = "" if self.device == "CPU" else f", device={self.device!r}"
        return f"Tensor({body}, dtype={self.dtype!r}{where})"

    def __hash__(self) -> int:
        return id(self)

    def __iter__(self) -> Iterator[Tensor]:
        if not self.shape:
            raise ArgumentTypeError("iteration over a 0-d Tensor")
        return (self[i] for i in range(self.shape[0]))

    def _axis(self, dim: int) -> int:
        n = self.ndim
        if not -max(n, 1) <= dim < max(n, 1):
            raise IndexRangeError(f"dimension {dim} is out of range for a Tensor of "
                                  f"shape {self.shape}")
        return dim % max(n, 1)

    def detach(self) -> "Tensor":
        """The same value with no derivative (`stop_gradient`)."""
        from fgrad.core.prims import stop_gradient
        return stop_gradient(self)

    def clone(self) -> "Tensor":
        """A copy (Tensors are immutable, so this is the identity on values)."""
        return self + 0 if self.dtype != dtypes.bool else self.logical_or(False)

    def contiguous(self) -> "Tensor":
        """The identity (kept for tinygrad compatibility)."""
        return self

    def realize(self) -> "Tensor":
        """The identity: eager Tensors are always realized."""
        return self

    def to(self, device: str) -> "Tensor":
        """This Tensor on `device` ('CPU', 'CL', 'CL:<n>'; see `fgrad.devices()`): a copy
        when it lives elsewhere, itself when it is already there."""
        if isinstance(self, Tracer):
            raise ConcretizationError(f"Tensor.to({device!r}) cannot move a traced value; "
                                      f"move the arguments before calling the transformed "
                                      f"function")
        moved = _device.put(self._data, device)
        return self if moved is self._data else Tensor._wrap(moved)


class Tracer(Tensor):
    """A Tensor owned by a trace. Subclasses define `aval` and how to concretize."""

    __slots__ = ("_trace",)
    _trace: Trace

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval.shape

    @property
    def dtype(self) -> DType:
        return self.aval.dtype

    @property
    def device(self) -> str:
        return "CPU"

    def _concrete(self, why: str) -> np.ndarray:
        raise ConcretizationError(
            f"{why} needs a concrete value, but this Tensor is traced by {self._trace.name}. "
            f"Use fgrad.lax.cond or Tensor.where for data-dependent choices, or mark the "
            f"argument with static_argnums.")

    def __repr__(self) -> str:
        return f"Traced<{self.aval}>({self._trace.name})"


def as_concrete_array(x: Any) -> np.ndarray:
    """The NumPy value of a concrete Tensor (eager evaluation only)."""
    if isinstance(x, Tracer):
        raise LeakedTracerError(
            f"a traced value ({x.aval}, from {x._trace.name}) reached eager evaluation: it "
            f"escaped the transformation that created it")
    return x._data


class EvalTrace(Trace):
    """The root trace: evaluate primitives eagerly with their NumPy `impl`."""

    name = "eager evaluation"

    def process_primitive(self, prim: Any, args: Sequence[Any], params: dict) -> list[Any]:
        arrays = [as_concrete_array(x) for x in args]
        in_avals = [x.aval for x in args]
        out_avals = prim.abstract_eval_list(*in_avals, **params)
        device = _device.common_device(prim.name, arrays)
        if device != "CPU" and prim.name != "jit":  # jit runs device data itself
            outs = _device.eval_on_device(prim, arrays, in_avals, params, device)
        else:
            outs = prim.impl_list(*arrays, **params)
        if _flags.jit_call_flags()[1] and prim.name != "jit":  # jit checks itself
            from fgrad.core.nonfinite import check_eager
            check_eager(prim.name, arrays, outs)
        return [Tensor._wrap(_conform(o, a)) for o, a in zip(outs, out_avals, strict=True)]


def _conform(out: Any, aval: ShapedArray) -> np.ndarray:
    if _device.is_device_array(out):
        if tuple(out.shape) != aval.shape or out.dtype != aval.dtype.np:
            raise AssertionError(f"device result {out.shape} {out.dtype}, expected {aval}")
        return out
    arr = np.asarray(out)
    if arr.dtype != aval.dtype.np:
        arr = arr.astype(aval.dtype.np)
    if arr.shape != aval.shape:
        raise AssertionError(f"impl gave shape {arr.shape}, abstract_eval {aval.shape}")
    return arr


def as_tensor(x: Any, dtype: DType | None = None) -> Tensor:
    """`x` as a Tensor (Tensors pass through; scalars, lists and arrays are converted)."""
    if isinstance(x, Tensor):
        return x if dtype is None or x.dtype == dtype else x.cast(dtype)
    return Tensor(x, dtype=dtype)


TensorLike = Tensor | np.ndarray | float | int | bool | Sequence[Any]
