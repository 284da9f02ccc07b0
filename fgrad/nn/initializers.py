"""`fgrad.nn.initializers`: jax.nn.initializers' weight initializers.

Each builder returns `init(key, shape, dtype=float32) -> Tensor`. The numbers follow JAX's
recipes step by step (the same samplers, the scale computed in `dtype` as JAX does), so where
`fgrad.random` draws JAX's bits (uniform), the weights equal JAX's bit for bit; the normal
family (normal, truncated normal, orthogonal) agrees with JAX to float32 round-off, as
`fgrad.random.normal` does.

    init = fgrad.nn.initializers.glorot_normal()
    w = init(fgrad.random.key(0), (784, 256))
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from fgrad import random
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.random import _shape as checked_shape
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import to_dtype
from fgrad.numpy.creation import full
from fgrad.numpy.linalg import qr
from fgrad.numpy.shape import moveaxis

__all__ = ["Initializer", "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform",
           "he_normal", "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal",
           "lecun_uniform", "normal", "ones", "orthogonal", "truncated_normal", "uniform",
           "variance_scaling", "xavier_normal", "xavier_uniform", "zeros"]

Axes = int | Sequence[int]
Mode = Literal["fan_in", "fan_out", "fan_avg", "fan_geo_avg"]
Distribution = Literal["truncated_normal", "normal", "uniform"]
# The standard deviation of a standard normal truncated to (-2, 2) (JAX's constant).
_TRUNCATED_STDDEV = .87962566103423978


@runtime_checkable
class Initializer(Protocol):
    """What the builders return: `init(key, shape, dtype=None) -> Tensor`."""

    def __call__(self, key: Tensor, shape: Sequence[int], dtype: Any = None) -> Tensor:
        ...


def _shape(shape: Any, who: str) -> tuple[int, ...]:
    return checked_shape(shape, f"initializers.{who}")


def _dtype(dtype: Any, who: str, floating: bool = True) -> DType:
    out = dtypes.default_float if dtype is None else to_dtype(dtype)
    assert out is not None
    if floating and out.kind != "f":
        raise TypeError(f"initializers.{who}: dtype {out.np.name} is not a float dtype; pass a "
                        f"float dtype such as fgrad.dtypes.float32")
    return out


def _scalar(value: Any, dtype: DType) -> Tensor:
    """`value` as a 0-d Tensor of `dtype` (JAX's `jnp.array(value, dtype)`)."""
    return value.cast(dtype) if isinstance(value, Tensor) else Tensor(value, dtype)


def zeros(key: Any, shape: Sequence[int], dtype: Any = None) -> Tensor:
    """An array of zeros (`key` is ignored)."""
    return full(_shape(shape, "zeros"), 0, _dtype(dtype, "zeros", False))


def ones(key: Any, shape: Sequence[int], dtype: Any = None) -> Tensor:
    """An array of ones (`key` is ignored)."""
    return full(_shape(shape, "ones"), 1, _dtype(dtype, "ones", False))


def constant(value: Any, dtype: Any = None) -> Initializer:
    """Builds an initializer that fills its arrays with `value` (broadcast to the shape)."""
    default = dtype

    def init(key: Any, shape: Sequence[int], dtype: Any = default) -> Tensor:
        return full(_shape(shape, "constant"), value, _dtype(dtype, "constant", False))
    return init


def uniform(scale: Any = 1e-2, dtype: Any = None) -> Initializer:
    """Builds an initializer of values uniform in [0, scale)."""
    default = dtype

    def init(key: Tensor, shape: Sequence[int], dtype: Any = default) -> Tensor:
        dt = _dtype(dtype, "uniform")
        return random.uniform(key, _shape(shape, "uniform"), dt) * _scalar(scale, dt)
    return init


def normal(stddev: Any = 1e-2, dtype: Any = None) -> Initializer:
    """Builds an initializer of normal values with mean 0 and standard deviation `stddev`."""
    default = dtype

    def init(key: Tensor, shape: Sequence[int], dtype: Any = default) -> Tensor:
        dt = _dtype(dtype, "normal")
        return random.normal(key, _shape(shape, "normal"), dt) * _scalar(stddev, dt)
    return init


def truncated_normal(stddev: Any = 1e-2, dtype: Any = None, lower: Any = -2.0,
                     upper: Any = 2.0) -> Initializer:
    """Builds an initializer of `stddev` times a standard normal truncated to (lower, upper).

    As in JAX, `stddev` is not corrected for the truncation (variance_scaling does that)."""
    default = dtype

    def init(key: Tensor, shape: Sequence[int], dtype: Any = default) -> Tensor:
        dt = _dtype(dtype, "truncated_normal")
        draws = random.truncated_normal(key, lower, upper, _shape(shape, "truncated_normal"),
                                        dt)
        return draws * _scalar(stddev, dt)
    return init


def _axes(axis: Axes, ndim: int, name: str, who: str) -> list[int]:
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    for a in axes:
        if not -ndim <= int(a) < ndim:
            raise ValueError(f"initializers.{who}: {name}={axis!r} is out of range for a "
                             f"{ndim}-d shape; pass axes in [{-ndim}, {ndim})")
    return [int(a) for a in axes]


def _compute_fans(shape: Sequence[int], in_axis: Axes = -2, out_axis: Axes = -1,
                 batch_axis: Axes = (), who: str = "variance_scaling") -> tuple[float, float]:
    """(fan_in, fan_out) of a weight shape: the in/out axes' sizes times the receptive field
    (every axis that is not an in, out or batch axis), as JAX computes them."""
    shape = tuple(shape)
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"initializers.{who}: can't compute the fans of a {len(shape)}-d "
                         f"shape {shape} with the default in_axis=-2; use a shape of at least "
                         f"2 dimensions or pass in_axis (and out_axis) explicitly")
    size = {name: math.prod(shape[a] for a in _axes(ax, len(shape), name, who))
            for name, ax in (("in_axis", in_axis), ("out_axis", out_axis),
                             ("batch_axis", batch_axis))}
    receptive = math.prod(shape) / size["in_axis"] / size["out_axis"] / size["batch_axis"]
    return size["in_axis"] * receptive, size["out_axis"] * receptive


def variance_scaling(scale: Any, mode: Mode, distribution: Distribution, in_axis: Axes = -2,
                     out_axis: Axes = -1, batch_axis: Axes = (),
                     dtype: Any = None) -> Initializer:
    """Builds an initializer whose draws have variance `scale / n`, n the fan-in, fan-out,
    their mean ("fan_avg") or their geometric mean ("fan_geo_avg"). Distributions:
    "truncated_normal" (cut at 2 standard deviations, then rescaled to the wanted stddev),
    "normal" and "uniform" (in [-sqrt(3 scale / n), sqrt(3 scale / n)))."""
    who = "variance_scaling"
    if mode not in ("fan_in", "fan_out", "fan_avg", "fan_geo_avg"):
        raise ValueError(f"initializers.{who}: invalid mode {mode!r}; use 'fan_in', "
                         f"'fan_out', 'fan_avg' or 'fan_geo_avg'")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise ValueError(f"initializers.{who}: invalid distribution {distribution!r}; use "
                         f"'truncated_normal', 'normal' or 'uniform'")
    default = dtype

    def init(key: Tensor, shape: Sequence[int], dtype: Any = default) -> Tensor:
        dims = _shape(shape, who)
        dt = _dtype(dtype, who)
        fan_in, fan_out = _compute_fans(dims, in_axis, out_axis, batch_axis)
        denominator = {"fan_in": fan_in, "fan_out": fan_out,
                       "fan_avg": (fan_in + fan_out) / 2,
                       "fan_geo_avg": (fan_in * fan_out) ** 0.5}[mode]
        variance = _scalar(scale / denominator, dt)
        if distribution == "truncated_normal":
            stddev = variance.sqrt() / _scalar(_TRUNCATED_STDDEV, dt)
            return random.truncated_normal(key, -2, 2, dims, dt) * stddev
        if distribution == "normal":
            return random.normal(key, dims, dt) * variance.sqrt()
        return random.uniform(key, dims, dt, -1) * (variance * 3).sqrt()
    return init


def glorot_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                   dtype: Any = None) -> Initializer:
    """Builds a Glorot (Xavier) uniform initializer:
    variance_scaling(1.0, "fan_avg", "uniform")."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis,
                            batch_axis, dtype)


def glorot_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                  dtype: Any = None) -> Initializer:
    """Builds a Glorot (Xavier) normal initializer:
    variance_scaling(1.0, "fan_avg", "truncated_normal")."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis,
                            batch_axis, dtype)


def lecun_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                  dtype: Any = None) -> Initializer:
    """Builds a LeCun uniform initializer:
    variance_scaling(1.0, "fan_in", "uniform")."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis,
                            batch_axis, dtype)


def lecun_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                 dtype: Any = None) -> Initializer:
    """Builds a LeCun normal initializer:
    variance_scaling(1.0, "fan_in", "truncated_normal")."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis,
                            batch_axis, dtype)


def he_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
               dtype: Any = None) -> Initializer:
    """Builds a He (Kaiming) uniform initializer:
    variance_scaling(2.0, "fan_in", "uniform")."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis,
                            batch_axis, dtype)


def he_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
              dtype: Any = None) -> Initializer:
    """Builds a He (Kaiming) normal initializer:
    variance_scaling(2.0, "fan_in", "truncated_normal")."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis,
                            batch_axis, dtype)


xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


def _orthogonal_matrix(key: Tensor, n: int, m: int, dtype: DType) -> Tensor:
    """An (n, m) matrix with orthonormal rows or columns (whichever are fewer), as
    jax.random.orthogonal draws it: QR of a normal matrix, columns' signs fixed by R."""
    z = random.normal(key, (max(n, m), min(n, m)), dtype)
    q, r = qr(z)
    signs = r.diagonal(dim1=-2, dim2=-1).sign()
    x = q * signs.reshape(1, -1)
    return x.T if n < m else x


def orthogonal(scale: Any = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """Builds an initializer of (semi-)orthogonal matrices times `scale`: the shape's
    `column_axis` holds the columns, every other axis is flattened into the rows; rows or
    columns, whichever are fewer, are orthonormal."""
    default = dtype

    def init(key: Tensor, shape: Sequence[int], dtype: Any = default) -> Tensor:
        dims = _shape(shape, "orthogonal")
        dt = _dtype(dtype, "orthogonal")
        if len(dims) < 2:
            raise ValueError(f"initializers.orthogonal: needs a shape of at least 2 "
                             f"dimensions, got {dims}")
        axis = _axes(column_axis, len(dims), "column_axis", "orthogonal")[0] % len(dims)
        if 0 in dims:
            return full(dims, 0, dt)
        n_cols = dims[axis]
        q = _orthogonal_matrix(key, math.prod(dims) // n_cols, n_cols, dt)
        rows = dims[:axis] + dims[axis + 1:]
        return _scalar(scale, dt) * moveaxis(q.reshape(rows + (n_cols,)), -1, axis)
    return init


def delta_orthogonal(scale: Any = 1.0, column_axis: int = -1,
                     dtype: Any = None) -> Initializer:
    """Builds a delta-orthogonal initializer for 3-, 4- or 5-d convolution kernels (spatial
    axes first): zero except an orthogonal (in, out) matrix at the kernel's centre."""
    default = dtype

    def init(key: Tensor, shape: Sequence[int], dtype: Any = default) -> Tensor:
        dims = _shape(shape, "delta_orthogonal")
        dt = _dtype(dtype, "delta_orthogonal")
        if len(dims) not in (3, 4, 5):
            raise ValueError(f"initializers.delta_orthogonal: needs a 3-, 4- or 5-d shape, "
                             f"got {dims}")
        if dims[-1] < dims[-2]:
            raise ValueError(f"initializers.delta_orthogonal: fan_in {dims[-2]} must be at "
                             f"most fan_out {dims[-1]} (shape {dims})")
        matrix = orthogonal(scale, column_axis, dt)(key, dims[-2:])
        centre = tuple((k - 1) // 2 for k in dims[:-2])
        return full(dims, 0, dt).at[centre].set(matrix)
    return init
