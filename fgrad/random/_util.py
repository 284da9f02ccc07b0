"""Helpers shared by the samplers of `fgrad.random`: dtypes, parameters that broadcast against
`shape` (JAX's rules), draws with one key per element (JAX's gamma gives every element its own
key and loop), and the special functions the samplers need (lgamma, digamma).
"""
from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from fgrad.core import prims as P
from fgrad.core import random as R
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.random import gaussian as G

# ---------------------------------------------------------------------------- arguments


def float_dtype(dtype: Any, op: str) -> DType:
    """The requested float dtype (None: the default float, as JAX's `dtype=None`)."""
    return R._float_dtype(dtypes.default_float if dtype is None else dtype, op)


def int_dtype(dtype: Any, op: str) -> DType:
    """The requested integer dtype (None: the default int)."""
    from fgrad.core import dtypes as _dt
    out = _dt.to_dtype(dtypes.default_int if dtype is None else dtype)
    if not out.is_int:
        raise TypeError(f"{op}: dtype must be an integer type, got {out.name}")
    return out


def work_dtype(dtype: DType) -> DType:
    """The dtype a sampler computes in: float16/bfloat16 work in float32."""
    return dtypes.float32 if dtype.itemsize < 4 else dtype


def shape_of(x: Any) -> tuple[int, ...]:
    """The shape of a parameter (Tensor, NumPy array or Python scalar)."""
    return tuple(x.shape) if isinstance(x, Tensor) else tuple(np.shape(x))


def out_shape(op: str, shape: Any, *params: Any) -> tuple[int, ...]:
    """JAX's rule: with no shape, the parameters' broadcast shape; with a shape, that shape,
    which the parameters must broadcast to."""
    shapes = [shape_of(p) for p in params]
    if shape is None:
        return tuple(np.broadcast_shapes(*shapes)) if shapes else ()
    out = R._shape(shape, op)
    check_shape(op, out, *shapes)
    return out


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*shapes))


def check_shape(op: str, shape: tuple[int, ...], *param_shapes: tuple[int, ...]) -> None:
    """A ValueError unless every parameter shape broadcasts to exactly `shape`."""
    try:
        joint = tuple(np.broadcast_shapes(shape, *param_shapes))
    except ValueError:
        joint = None
    if joint != shape:
        raise ValueError(f"{op}: parameter shapes {list(param_shapes)} must broadcast to the "
                         f"shape argument {shape}, but broadcasting gives "
                         f"{joint if joint is not None else 'an error'}")


def param(x: Any, dtype: DType) -> Tensor:
    """A parameter as a Tensor of `dtype` (Tensors, traced or not, are cast)."""
    return x.cast(dtype) if isinstance(x, Tensor) else as_tensor(np.asarray(x), dtype)


def full(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    """`x` broadcast to `shape`."""
    return x if x.shape == shape else x.expand(shape)


def finfo(dtype: DType) -> Any:
    return ml_dtypes.finfo(dtype.np)


def log1p(x: Tensor) -> Tensor:
    """log(1 + x), in float64 as XLA computes it (`gaussian.log1p`)."""
    return G.log1p(x)


def exponential(key: Tensor, shape: tuple[int, ...], dtype: DType) -> Tensor:
    """Standard exponential samples as JAX draws them: -log1p(-u)."""
    return -log1p(-R.uniform(key, shape, dtype))


# ---------------------------------------------------------------------------- per-element keys

def threefry_each(k0: Tensor, k1: Tensor, x0: Tensor, x1: Tensor) -> tuple[Tensor, Tensor]:
    """Threefry-2x32 (20 rounds) with one key (k0[i], k1[i]) per counter pair."""
    ks = (k0, k1, k0 ^ k1 ^ R._PARITY)
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for group in range(5):
        for r in R._ROTATIONS[group % 2]:
            x0 = x0 + x1
            x1 = ((x1 << r) | (x1 >> (32 - r))) ^ x0
        x0 = x0 + ks[(group + 1) % 3]
        x1 = x1 + (ks[(group + 2) % 3] + (group + 1))
    return x0, x1


Words = tuple[Tensor, Tensor]


def element_keys(key: Tensor, shape: tuple[int, ...]) -> Words:
    """`split(key, prod(shape))` reshaped to `shape`, as its two words."""
    return R._hash_counters(key, shape)


def hash_each(pairs: list[tuple[Words, int]]) -> list[Words]:
    """Threefry of the counter (0, c) under every per-element key, for several (key, c) pairs
    in one call (the pairs are stacked on a new leading axis): JAX's `split(key, n)[c]` is
    the pair (key, c), and a scalar draw from `key` hashes (key, 0)."""
    if len(pairs) == 1:
        (k0, k1), c = pairs[0]
        zero = k0 ^ k0
        return [threefry_each(k0, k1, zero, zero + c)]
    k0s = [k[0].reshape((1,) + k[0].shape) for k, _ in pairs]
    k1s = [k[1].reshape((1,) + k[1].shape) for k, _ in pairs]
    k0 = P.concatenate(k0s, 0)
    k1 = P.concatenate(k1s, 0)
    ctr = Tensor(np.array([c for _, c in pairs], np.uint32).reshape((-1,) + (1,) * (k0.ndim - 1)))
    y0, y1 = threefry_each(k0, k1, k0 ^ k0, (k0 ^ k0) + ctr)
    return [(y0[i], y1[i]) for i in range(len(pairs))]


def split_each(k: Words, num: int) -> list[Words]:
    """`split(k, num)` for every per-element key of `k` at once."""
    return hash_each([(k, i) for i in range(num)])


def unit_from_words(y: Words, dtype: DType) -> Tensor:
    """Uniform floats in [0, 1) from hashed words, as `uniform(key, (), dtype)` makes them
    from the words of its key's counter 0."""
    y0, y1 = y
    nmant = finfo(dtype).nmant
    udt = R._UINT[dtype.itemsize]
    nbits = 8 if nmant < 8 else 8 * dtype.itemsize
    if nbits == 64:
        raw = (y0.cast(dtypes.uint64) << 32) | y1.cast(dtypes.uint64)
    else:
        raw = (y0 ^ y1).cast(R._UINT[nbits // 8]).cast(udt)
    one = int(np.array(1, dtype.np).view(udt.np))
    return ((raw >> (nbits - nmant)) | one).bitcast(dtype) - 1.0


def uniform_from_words(y: Words, dtype: DType, lo: float = 0.0, hi: float = 1.0) -> Tensor:
    """`uniform(key, (), dtype, lo, hi)` from the hashed words of (key, 0)."""
    unit = unit_from_words(y, dtype)
    return (unit * (hi - lo) + lo).maximum(lo).minimum(R._next_float(hi, dtype, up=False))


def normal_from_words(y: Words, dtype: DType) -> Tensor:
    """`normal(key, (), dtype)` from the hashed words of (key, 0)."""
    lo = R._next_float(-1.0, dtype, up=True)
    return G.inverse_cdf(uniform_from_words(y, dtype, float(lo), 1.0), dtype)


def uniform_each(k: Words, dtype: DType, lo: float = 0.0, hi: float = 1.0) -> Tensor:
    """`uniform(key, (), dtype, lo, hi)` for every per-element key."""
    return uniform_from_words(hash_each([(k, 0)])[0], dtype, lo, hi)


def normal_each(k: Words, dtype: DType) -> Tensor:
    """`normal(key, (), dtype)` for every per-element key."""
    return normal_from_words(hash_each([(k, 0)])[0], dtype)


def select_words(pred: Tensor, a: Words, b: Words) -> Words:
    return pred.where(a[0], b[0]), pred.where(a[1], b[1])


# ---------------------------------------------------------------------------- special functions

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def lgamma(x: Tensor) -> Tensor:
    """log Gamma(x) for x > 0: Stirling's series at x + 8 or more, shifted down by the
    recurrence (absolute error below 1e-10 in float64)."""
    small = x < 8.0
    z = small.where(x + 8.0, x)
    zi = 1.0 / z
    zi2 = zi * zi
    series = zi * (1 / 12 - zi2 * (1 / 360 - zi2 * (1 / 1260 - zi2 * (1 / 1680))))
    stirling = (z - 0.5) * z.log() - z + _HALF_LOG_2PI + series
    prod = x
    for i in range(1, 8):
        prod = prod * (x + float(i))
    return small.where(stirling - small.where(prod, 1.0).log(), stirling)


def digamma(x: Tensor) -> Tensor:
    """psi(x) = d log Gamma(x) / dx for x > 0: the asymptotic series at x + 6 or more,
    shifted down by the recurrence psi(x) = psi(x + 1) - 1 / x."""
    small = x < 6.0
    z = small.where(x + 6.0, x)
    zi2 = 1.0 / (z * z)
    series = zi2 * (1 / 12 - zi2 * (1 / 120 - zi2 * (1 / 252 - zi2 * (1 / 240 - zi2 / 132))))
    out = z.log() - 0.5 / z - series
    shift = 1.0 / x
    for i in range(1, 6):
        shift = shift + 1.0 / (x + float(i))
    return small.where(out - shift, out)
