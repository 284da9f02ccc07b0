"""uniform, normal, truncated_normal and exponential with float64 paths that follow JAX's (x64).

The float64 special functions live in `fgrad.core.random` (one implementation, shared with
`Tensor.randn` and friends): Giles' double-precision erfinv, the three-piece polynomial XLA
evaluates for float64, with w = -log1p(-x^2) by the log1p recipe XLA's CPU backend uses for
float64 (x - x^2/2 + x^3 P(x)/Q(x), Cephes' log1p rational, for |x| < sqrt(2) - 1, else
log(1 + x)). erfinv's relative error is below 4e-15 for |x| < 0.998; closer to +-1 the
rounding of x^2 in w (XLA's formulation) makes it up to 1e-10, as JAX's. That log1p is also
what `fgrad.random`'s float64 samplers built on log1p(-u) use (exponential, laplace, logistic,
pareto, weibull_min, the gamma sampler), so their samples agree with JAX's to the last bit or
two. (XLA's log1p strays up to ~130 ulps from the exact value for x in (-0.414, -0.293),
outside the interval the Cephes rational was fitted on; matching JAX there is the point.)
`log1p`, `erfinv` and `inverse_cdf` here re-export them.

XLA also fuses multiply-adds into FMAs (one rounding instead of two). `fma` emulates one
exactly with float64 operations; the float64 uniform uses it for its scale and shift (so
uniform draws with bounds equal JAX's bit for bit, and truncated_normal's tails do not magnify
a stray ulp). The polynomials keep plain multiply-adds (an emulated FMA per step would make
normal draws ~12x slower): about 7% of float64 normal samples differ from JAX's by 1-3 ulps.
Other dtypes are left to `fgrad.core.random`, unchanged.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from fgrad.core import random as R
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.tensor import Tensor

_SQRT2 = math.sqrt(2.0)


# ---------------------------------------------------------------------------- exact FMA

_SPLITTER = 134217729.0  # 2^27 + 1: Veltkamp's split of a float64 into two 26-bit halves


def _split(a: Any) -> tuple[Any, Any]:
    """(hi, lo) with a = hi + lo exactly, each with at most 26 significant bits."""
    t = a * _SPLITTER
    hi = t - (t - a)
    return hi, a - hi


def _two_product(a: Any, b: Any) -> tuple[Any, Any]:
    """(p, e) with p = a * b rounded and p + e = a * b exactly (Dekker)."""
    p = a * b
    (ah, al), (bh, bl) = _split(a), _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _two_sum(a: Any, b: Any) -> tuple[Any, Any]:
    """(s, e) with s = a + b rounded and s + e = a + b exactly (Knuth)."""
    s = a + b
    b_part = s - a
    a_part = s - b_part
    return s, (a - a_part) + (b - b_part)


def _add_round_to_odd(a: Tensor, b: Tensor) -> Tensor:
    """a + b rounded to odd: exact sums as they are, the others to whichever neighbour has an
    odd last bit (the rounded sum, or the float next to it towards the exact sum)."""
    s, e = _two_sum(a, b)
    bits = s.bitcast(dtypes.uint64)
    away = (e > 0.0) == (s > 0.0)  # the exact sum lies further from zero than s
    moved = away.where(bits + 1, bits - 1).bitcast(dtypes.float64)
    return ((e != 0.0) & ((bits & 1) == 0)).where(moved, s)


def fma(a: Tensor, b: Any, c: Any) -> Tensor:
    """a * b + c with a single rounding, for float64 `a` (b and c: float64 Tensors or Python
    floats), as XLA's fused multiply-adds compute it. Error-free transformations do it with
    plain float64 operations: Dekker's exact product, Knuth's two-sum and a sum rounded to odd
    (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums", IEEE TC 2008).
    Where that would overflow (|a| or |b| near 1e300) or underflow, a * b + c rounded twice
    is returned; derivatives are those of a * b + c."""
    plain = a * b + c
    a_d, b_d, c_d = (v.detach() if isinstance(v, Tensor) else v for v in (a, b, c))
    high, low = _two_product(a_d, b_d)
    sum_high, sum_low = _two_sum(c_d, high)
    exact = sum_high + _add_round_to_odd(sum_low, low)
    plain_d = plain.detach()
    usable = exact.isfinite() & plain_d.isfinite()
    return plain + usable.where(exact - plain_d, 0.0).detach()


# ---------------------------------------------------------------------------- special functions

def log1p(x: Tensor) -> Tensor:
    """log(1 + x); float64 by XLA's recipe (see the module docstring), else fgrad's log1p."""
    return R._log1p(x)


def erfinv(x: Tensor) -> Tensor:
    """The inverse error function on [-1, 1] (+-inf at +-1). float64: Giles' double-precision
    approximation; other dtypes: his single-precision one."""
    return R._erfinv(x)


def inverse_cdf(u: Tensor, dtype: DType) -> Tensor:
    """sqrt(2) * erfinv(u): normal quantiles of uniforms u on (-1, 1), as `dtype`."""
    return R._inverse_cdf(u, dtype)


# ---------------------------------------------------------------------------- samplers

def _scale_and_shift(unit: Tensor, lo: Tensor | float, hi: Tensor | float) -> Tensor:
    """unit * (hi - lo) + lo with one rounding in float64 (as XLA fuses it), clipped to
    [lo, hi); twice-rounded where a power-of-two scale makes the product exact anyway."""
    scale = hi - lo
    if isinstance(scale, float) and (scale == 0.0 or math.frexp(scale)[0] == 0.5):
        out = unit * scale + lo
    else:
        out = fma(unit, scale, lo)
    return out.maximum(lo).minimum(R._next_float(hi, dtypes.float64, up=False))


def uniform(key: Tensor, shape: Any = (), dtype: Any = float, minval: Any = 0.0,
            maxval: Any = 1.0) -> Tensor:
    """Uniform floats in [minval, maxval) (bounds may be Tensors broadcastable to shape); in
    float64 the scale and shift round once, as JAX's do."""
    k = R._check_key(key, "uniform")
    dtype = R._float_dtype(dtype, "uniform")
    if dtype != dtypes.float64:
        return R.uniform(k, shape, dtype, minval, maxval)
    shape = R._shape(shape, "uniform")
    lo, hi = R._float_bound(minval, dtype), R._float_bound(maxval, dtype)
    out = _scale_and_shift(R._unit_floats(k, shape, dtype), lo, hi)
    if out.shape != shape:
        raise ValueError(f"uniform: minval/maxval of shapes {np.shape(minval)} and "
                         f"{np.shape(maxval)} do not broadcast to shape {shape}")
    return out


def normal(key: Tensor, shape: Any = (), dtype: Any = float) -> Tensor:
    """Standard normal samples: sqrt(2) erfinv(u) with u uniform on (-1, 1), accurate to the
    dtype's precision (float64 included)."""
    return R.normal(key, shape, dtype)


def truncated_normal(key: Tensor, lower: Any, upper: Any, shape: Any = None,
                     dtype: Any = float) -> Tensor:
    """Standard normal samples conditioned to lie strictly inside (lower, upper): the inverse
    CDF of uniforms between erf(lower / sqrt 2) and erf(upper / sqrt 2)."""
    k = R._check_key(key, "truncated_normal")
    dtype = R._float_dtype(dtype, "truncated_normal")
    if dtype != dtypes.float64:
        return R.truncated_normal(k, lower, upper, shape, dtype)
    lower, upper = R._float_tensor(lower, dtype), R._float_tensor(upper, dtype)
    if shape is None:
        shape = np.broadcast_shapes(lower.shape, upper.shape)
    a = (lower / _SQRT2).erf()
    b = (upper / _SQRT2).erf()
    out = inverse_cdf(uniform(k, shape, dtype, a, b), dtype)
    low = R._next_float(lower.detach(), dtype, up=True)
    high = R._next_float(upper.detach(), dtype, up=False)
    return out.maximum(low).minimum(high)


def exponential(key: Tensor, shape: Any = (), dtype: Any = float) -> Tensor:
    """Standard exponential samples: -log1p(-u) with u uniform on [0, 1)."""
    k = R._check_key(key, "exponential")
    dtype = R._float_dtype(dtype, "exponential")
    if dtype != dtypes.float64:
        return R.exponential(k, shape, dtype)
    return -log1p(-R.uniform(k, R._shape(shape, "exponential"), dtype))


__all__ = ["erfinv", "exponential", "fma", "inverse_cdf", "log1p", "normal", "truncated_normal",
           "uniform"]
