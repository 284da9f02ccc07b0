"""`fgrad.typing`: JAX's `jax.typing` annotations for functions that take arrays.

    def f(x: ArrayLike, dtype: DTypeLike | None = None) -> fgrad.Array: ...

`ArrayLike` is what fgrad functions accept as an array argument (a Tensor, a NumPy array or
scalar, a Python number); `DTypeLike` what they accept as a dtype (an fgrad DType, a NumPy
dtype, a name like 'float32', a scalar type like np.float32 or float). Both are unions for
static type checkers, as in JAX: use `isinstance(x, fgrad.Array)` at run time.
"""
from __future__ import annotations

from typing import Any, Protocol, Union

import numpy as np

from fgrad.core.dtypes import DType
from fgrad.core.tensor import Tensor

__all__ = ["ArrayLike", "DTypeLike"]


class SupportsDType(Protocol):
    """Anything with a `dtype` attribute (an array, a ShapeDtypeStruct)."""

    @property
    def dtype(self) -> Any: ...


ArrayLike = Union[Tensor, np.ndarray, np.bool_, np.number, bool, int, float, complex]
DTypeLike = Union[str, type, np.dtype, DType, SupportsDType]
