"""Tensor constructors: zeros, ones, full, empty, arange, linspace, eye, *_like, random.

Constant fills are a broadcast 0-d value (free eagerly, a literal under tracing); ramps are
`iota`. Random constructors take an explicit `key=` from `fgrad.random`.
"""
from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from fgrad.core import dtypes as _dt
from fgrad.core import prims as P
from fgrad.core.dtypes import dtypes
from fgrad.core.errors import ArgumentError

if TYPE_CHECKING:
    from fgrad.core.tensor import Tensor


def _shape(shape: Sequence[Any]) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    out = tuple(int(d) for d in shape)
    if any(d < 0 for d in out):
        raise ArgumentError(f"negative dimension in shape {out}")
    if math.prod(max(d, 1) for d in out) >= 2 ** 63 or len(out) > 64:
        raise ArgumentError(f"shape {out} is too large: a Tensor has at most 64 dimensions "
                            f"and fewer than 2**63 elements (about {math.prod(out):.3g} requested)")
    return out


def _fill_dtype(value: Any, dtype: Any) -> _dt.DType:
    if dtype is not None:
        return _dt.to_dtype(dtype)
    from fgrad.core.tensor import Tensor
    if isinstance(value, Tensor):
        return value.dtype
    return _dt.scalar_default_dtype(value)



def _arange_dtype(first: Any, last: Any, step: Any, dtype: Any) -> Any:
    """The dtype of arange: default float / int32, or int64 when the ints do not fit int32;
    an explicit integer dtype must hold the first and the last value."""
    if any(isinstance(v, float) for v in (first, last, step)):
        return _dt.to_dtype(dtype) if dtype is not None else dtypes.default_float
    if dtype is None:
        lo, hi = _dt.dtype_limits(dtypes.default_int)
        return dtypes.default_int if lo <= min(first, last) and max(first, last) <= hi \
            else dtypes.int64
    dtype = _dt.to_dtype(dtype)
    lo, hi = _dt.dtype_limits(dtype)
    if dtype.is_int and not (lo <= min(first, last) and max(first, last) <= hi):
        raise OverflowError(f"arange: the values {first} .. {last} do not fit {dtype!r} "
                            f"[{lo}, {hi}]; pass a wider dtype (e.g. dtypes.int64)")
    return dtype


def _check_size(op: str, n: int, dtype: Any) -> None:
    """Refuse, before allocating, a result larger than the machine's memory."""
    need = n * dtype.itemsize
    try:
        have = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not available on this platform
        return
    if need > have:
        raise MemoryError(f"{op}: {n} elements of {dtype!r} need {need / 2**30:.1f} GiB, more "
                          f"than this machine's {have / 2**30:.1f} GiB of memory")

class CreationMixin:
    """Static constructors of Tensor."""

    __slots__ = ()

    @staticmethod
    def full(shape: Any, fill_value: Any, dtype: Any = None) -> "Tensor":
        """A Tensor of `shape` filled with `fill_value` (a scalar or 0-d Tensor)."""
        from fgrad.core.tensor import Tensor, as_tensor
        shape = _shape(shape if isinstance(shape, (tuple, list)) else (shape,))
        dtype = _fill_dtype(fill_value, dtype)
        value = as_tensor(fill_value, dtype) if isinstance(fill_value, Tensor) \
            else Tensor(fill_value, dtype=dtype)
        if value.ndim != 0:
            raise ArgumentError(f"full: fill_value must be a scalar, got shape {value.shape}")
        return P.broadcast_in_dim(value, shape, ())

    @staticmethod
    def zeros(*shape: Any, dtype: Any = None) -> "Tensor":
        """A Tensor of zeros (float32 by default)."""
        from fgrad.core.tensor import Tensor
        return Tensor.full(_shape(shape), 0, dtype or dtypes.default_float)

    @staticmethod
    def ones(*shape: Any, dtype: Any = None) -> "Tensor":
        """A Tensor of ones (float32 by default)."""
        from fgrad.core.tensor import Tensor
        return Tensor.full(_shape(shape), 1, dtype or dtypes.default_float)

    @staticmethod
    def empty(*shape: Any, dtype: Any = None) -> "Tensor":
        """An uninitialized Tensor; fgrad fills it with zeros (values are unspecified)."""
        from fgrad.core.tensor import Tensor
        return Tensor.zeros(*shape, dtype=dtype)

    @staticmethod
    def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> "Tensor":
        """Values from start (inclusive) to stop (exclusive) by step, as range(). Integer
        ranges past int32 give int64; values that do not fit an explicit integer `dtype`
        raise OverflowError."""
        if stop is None:
            start, stop = 0, start
        if step == 0:
            raise ArgumentError("arange: step must not be zero")
        n = max(0, math.ceil((stop - start) / step))
        dtype = _arange_dtype(start, start + (n - 1) * step if n else start, step, dtype)
        _check_size("arange", n, dtype)
        ramp = P.iota(dtype if n else dtype, (n,), 0) if n else _empty(dtype)
        if n == 0:
            return ramp
        return (ramp * step + start).cast(dtype) if (step, start) != (1, 0) else ramp

    @staticmethod
    def linspace(start: float, stop: float, steps: int, dtype: Any = None) -> "Tensor":
        """`steps` evenly spaced values from start to stop, both included."""
        dtype = _dt.to_dtype(dtype) if dtype is not None else dtypes.default_float
        if steps < 0:
            raise ArgumentError(f"linspace: steps must be >= 0, got {steps}")
        if dtype == dtypes.bool:
            raise ArgumentError("linspace: dtype bool is not supported (as in PyTorch); use a "
                                "numeric dtype and compare")
        if steps == 0:
            return _empty(dtype)
        if steps == 1:
            from fgrad.core.tensor import Tensor
            return Tensor.full((1,), start, dtype=dtype)
        ramp = P.iota(dtypes.float32 if dtype.itemsize <= 4 else dtypes.float64, (steps,), 0)
        delta = (stop - start) / (steps - 1)
        return (ramp * delta + start).cast(dtype)

    @staticmethod
    def eye(n: int, m: int | None = None, dtype: Any = None) -> "Tensor":
        """An n x m matrix with ones on the diagonal."""
        m = n if m is None else m
        dtype = _dt.to_dtype(dtype) if dtype is not None else dtypes.default_float
        rows = P.iota(dtypes.int32, (n, m), 0)
        cols = P.iota(dtypes.int32, (n, m), 1)
        return (rows == cols).cast(dtype)

    def full_like(self, fill_value: Any, dtype: Any = None) -> "Tensor":
        """A Tensor shaped like self filled with `fill_value` (self's dtype by default)."""
        from fgrad.core.tensor import Tensor
        return Tensor.full(self.shape, fill_value, dtype or self.dtype)

    def zeros_like(self, dtype: Any = None) -> "Tensor":
        """Zeros shaped like self."""
        return self.full_like(0, dtype)

    def ones_like(self, dtype: Any = None) -> "Tensor":
        """Ones shaped like self."""
        return self.full_like(1, dtype)

    # ------------------------------------------------------------------ random
    @staticmethod
    def rand(*shape: Any, key: Any, dtype: Any = None) -> "Tensor":
        """Uniform [0, 1) samples; needs `key=` from fgrad.random."""
        from fgrad.core import random
        return random.uniform(key, _shape(shape), dtype or dtypes.default_float)

    @staticmethod
    def randn(*shape: Any, key: Any, dtype: Any = None) -> "Tensor":
        """Standard normal samples."""
        from fgrad.core import random
        return random.normal(key, _shape(shape), dtype or dtypes.default_float)

    @staticmethod
    def randint(*shape: Any, low: int = 0, high: int = 10, key: Any,
                dtype: Any = None) -> "Tensor":
        """Integers in [low, high)."""
        from fgrad.core import random
        return random.randint(key, _shape(shape), low, high, dtype or dtypes.int32)

    @staticmethod
    def uniform(*shape: Any, low: float = 0.0, high: float = 1.0, key: Any,
                dtype: Any = None) -> "Tensor":
        """Uniform [low, high) samples."""
        from fgrad.core import random
        return random.uniform(key, _shape(shape), dtype or dtypes.default_float, low, high)

    @staticmethod
    def normal(*shape: Any, mean: float = 0.0, std: float = 1.0, key: Any,
               dtype: Any = None) -> "Tensor":
        """Normal samples with the given mean and std."""
        from fgrad.core import random
        return random.normal(key, _shape(shape), dtype or dtypes.default_float) * std + mean

    @staticmethod
    def scaled_uniform(*shape: Any, key: Any, dtype: Any = None) -> "Tensor":
        """Uniform in [-1, 1) scaled by 1/sqrt(numel) (as the reference)."""
        from fgrad.core.tensor import Tensor
        s = _shape(shape)
        n = int(np.prod(s)) or 1
        return Tensor.uniform(*s, low=-1.0, high=1.0, key=key, dtype=dtype) * (n ** -0.5)

    @staticmethod
    def glorot_uniform(*shape: Any, key: Any, dtype: Any = None) -> "Tensor":
        """Glorot/Xavier uniform: bound sqrt(6 / (fan_in + fan_out)) (as the reference)."""
        from fgrad.core.tensor import Tensor
        s = _shape(shape)
        fan = s[0] + int(np.prod(s[1:])) if s else 1
        bound = math.sqrt(6 / fan)
        return Tensor.uniform(*s, low=-bound, high=bound, key=key, dtype=dtype)

    @staticmethod
    def kaiming_uniform(*shape: Any, a: float = 0.01, key: Any, dtype: Any = None) -> "Tensor":
        """Kaiming uniform with leaky-relu slope `a`: bound gain*sqrt(3/fan_in)."""
        from fgrad.core.tensor import Tensor
        s = _shape(shape)
        fan_in = int(np.prod(s[1:])) if len(s) > 1 else 1
        bound = math.sqrt(2.0 / (1 + a * a)) * math.sqrt(3.0 / fan_in)
        return Tensor.uniform(*s, low=-bound, high=bound, key=key, dtype=dtype)

    @staticmethod
    def kaiming_normal(*shape: Any, a: float = 0.01, key: Any, dtype: Any = None) -> "Tensor":
        """Kaiming normal with leaky-relu slope `a`: std gain/sqrt(fan_in)."""
        from fgrad.core.tensor import Tensor
        s = _shape(shape)
        fan_in = int(np.prod(s[1:])) if len(s) > 1 else 1
        std = math.sqrt(2.0 / (1 + a * a)) / math.sqrt(fan_in)
        return Tensor.normal(*s, mean=0.0, std=std, key=key, dtype=dtype)


def _empty(dtype: _dt.DType) -> "Tensor":
    from fgrad.core.tensor import Tensor
    return Tensor._wrap(np.zeros((0,), dtype.np))
