"""Key data: fgrad's keys are their raw words already (uint32, shape (..., 2)), so these are
checks and copies that keep JAX programs running."""
from __future__ import annotations

from typing import Any

import numpy as np

from fgrad.core import random as R
from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor

_IMPLS = (None, "threefry2x32", "threefry")


def _key_array(keys: Any, op: str) -> Tensor:
    """`keys` as a uint32 Tensor of shape (..., 2), or a TypeError saying what a key is."""
    if not isinstance(keys, Tensor):
        arr = np.asarray(keys)
        if arr.dtype.kind in "iu" and arr.size and (arr.min() < 0 or arr.max() > R._MASK32):
            raise TypeError(f"{op}: key words must lie in [0, 2**32), got {arr.tolist()}")
        keys = Tensor(arr.astype(np.uint32)) if arr.dtype.kind in "iu" else Tensor(arr)
    if keys.ndim < 1 or keys.shape[-1] != 2 or keys.dtype != dtypes.uint32:
        raise TypeError(f"{op}: expected uint32 key data of shape (..., 2), got "
                        f"{R._describe(keys)}; make keys with fgrad.random.key(seed)")
    return keys


def key_data(keys: Any) -> Tensor:
    """The raw uint32 words of a key or an array of keys, shape (..., 2). fgrad keys are raw
    words, so this returns them (checked) unchanged."""
    return _key_array(keys, "key_data")


def wrap_key_data(key_bits_array: Any, *, impl: Any = None, dtype: Any = None) -> Tensor:
    """A key (or array of keys) from raw uint32 words of shape (..., 2), as made by
    `key_data`. Only the Threefry-2x32 implementation exists (`impl`/`dtype` may name it)."""
    if dtype is not None:
        if impl is not None:
            raise ValueError("wrap_key_data: pass impl or dtype, not both")
        impl = dtype
    if impl not in _IMPLS:
        raise ValueError(f"wrap_key_data: fgrad only has the 'threefry2x32' key "
                         f"implementation, got impl={impl!r}")
    return _key_array(key_bits_array, "wrap_key_data")


def clone(key: Any) -> Tensor:
    """The same key (JAX's clone exists for its key-reuse checker; fgrad keys are values)."""
    return _key_array(key, "clone")


def key_impl(keys: Any) -> str:
    """The name of the implementation of `keys` (a key or an array of keys): always
    'threefry2x32', fgrad's only one; anything that is not key data is a TypeError."""
    _key_array(keys, "key_impl")
    return "threefry2x32"


def key_dtype(impl_spec: Any = None) -> Any:
    """The dtype of the keys of implementation `impl_spec` (None or 'threefry2x32'). fgrad
    has no typed key dtype (JAX's `key<fry>`): its keys are raw words, so this is uint32."""
    if impl_spec not in _IMPLS:
        raise ValueError(f"key_dtype: fgrad only has the 'threefry2x32' key implementation, "
                         f"got {impl_spec!r}")
    return dtypes.uint32


__all__ = ["clone", "key_data", "key_dtype", "key_impl", "wrap_key_data"]
