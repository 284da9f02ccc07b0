"""Discrete distributions with JAX's algorithms and key use: poisson (Knuth's product of
uniforms for lam < 10, Hormann's transformed rejection PTRS above), binomial (a sum of
geometric waiting times for n p <= 10, Hormann's BTRS above), multinomial (a chain of
binomials) and geometric (inverse CDF).

The rejection loops are `while_loop`s over rounds that draw for the whole shape from a fresh
key each round (JAX's scheme), stopping once every element has accepted; accepted elements keep
their value. Results are exact in distribution and, as the uniforms are JAX's, agree with JAX's
except where a transcendental function's last bit decides an acceptance or a floor.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from fgrad.core import random as R
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.random import _util as U
from fgrad.transforms.control.scan import scan
from fgrad.transforms.control.while_loop import while_loop

# ---------------------------------------------------------------------------- poisson


def _poisson_knuth(key: Tensor, lam: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Count uniforms until their product falls below exp(-lam), minus one."""
    def cond(state: tuple) -> Tensor:
        return (state[2] > -lam).any()

    def body(state: tuple) -> tuple:
        n, rng, log_prod = state
        keys = R.split(rng)
        n = (log_prod > -lam).where(n + 1, n)
        u = R.uniform(keys[1], shape, dtypes.float32)
        return n, keys[0], log_prod + u.log()

    zero = lam * 0.0
    return while_loop(cond, body, (zero.cast(dtypes.int32), key, zero))[0] - 1


def _poisson_rejection(key: Tensor, lam: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Hormann's PTRS (1993), as floats (k = -1 until accepted)."""
    log_lam = lam.log()
    b = 0.931 + 2.53 * lam.sqrt()
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2.0)

    def cond(state: tuple) -> Tensor:
        return (~state[2]).any()

    def body(state: tuple) -> tuple:
        rng, k_out, accepted = state
        keys = R.split(rng, 3)
        u = R.uniform(keys[1], shape, lam.dtype) - 0.5
        v = R.uniform(keys[2], shape, lam.dtype)
        us = 0.5 - u.abs()
        k = ((2.0 * a / us + b) * u + lam + 0.43).floor()
        s = (v * inv_alpha / (a / (us * us) + b)).log()
        t = -lam + k * log_lam - U.lgamma(k + 1.0)
        accept1 = (us >= 0.07) & (v <= v_r)
        reject = (k < 0.0) | ((us < 0.013) & (v > us))
        accept = accept1 | (~reject & (s <= t))
        return keys[0], accept.where(k, k_out), accepted | accept

    init = (key, lam * 0.0 - 1.0, lam < lam)
    return while_loop(cond, body, init)[1]


def poisson(key: Tensor, lam: Any, shape: Any = None, dtype: Any = None) -> Tensor:
    """Poisson(lam) counts (int32 by default; lam is used in float32, as in JAX). lam = 0
    gives 0, lam < 0 or NaN gives -1 and lam = inf the dtype's maximum (JAX's values)."""
    k = R._check_key(key, "poisson")
    dtype = U.int_dtype(dtype, "poisson")
    lam = U.param(lam, dtypes.float32)
    shape = U.shape_of(lam) if shape is None else R._shape(shape, "poisson")
    lam = U.full(lam, shape)
    use_knuth = lam.isnan() | (lam < 10.0)
    knuth = _poisson_knuth(k, use_knuth.where(lam, 0.0), shape)
    rejection = _poisson_rejection(k, use_knuth.where(1e5, lam), shape)
    out = use_knuth.where(knuth.cast(dtype), rejection.cast(dtype))
    return (lam == 0.0).where(out * 0, out)


# ---------------------------------------------------------------------------- binomial

_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.010411265261972, 0.00925546218271273,
                  0.00833056343336287)


def _stirling_tail(k: Tensor) -> Tensor:
    """log(k!) minus Stirling's formula: a table for k <= 9, the series above. (JAX evaluates
    the series at k clamped to 9, which makes its BTRS bound slightly wrong; this is
    Hormann's.)"""
    kp1sq = (k + 1.0) * (k + 1.0)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1.0)
    kf = k.maximum(0.0).minimum(9.0).floor()
    table = k * 0.0
    for i, value in enumerate(_STIRLING_TAIL):
        table = (kf == float(i)).where(value, table)
    return (k <= 9.0).where(table, approx)


def _binomial_inversion(key: Tensor, count: Tensor, prob: Tensor,
                        shape: tuple[int, ...]) -> Tensor:
    """The number of geometric(prob) waiting times that fit in `count` trials."""
    log1m = U.log1p(-prob)

    def cond(state: tuple) -> Tensor:
        return (state[1] <= count).any()

    def body(state: tuple) -> tuple:
        num, total, rng = state
        keys = R.split(rng)
        num = (total <= count).where(num + 1.0, num)
        u = R.uniform(keys[0], shape, prob.dtype)
        return num, total + (u.log() / log1m).ceil(), keys[1]

    zero = prob * 0.0
    return while_loop(cond, body, (zero, zero, key))[0] - 1.0


def _btrs(key: Tensor, count: Tensor, prob: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Hormann's BTRS (1993) transformed rejection with squeeze."""
    stddev = (count * prob * (1.0 - prob)).sqrt()
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1.0 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = ((count + 1.0) * prob).floor()
    tail_m, tail_cm = _stirling_tail(m), _stirling_tail(count - m)

    def cond(state: tuple) -> Tensor:
        return (~state[2]).any()

    def body(state: tuple) -> tuple:
        rng, k_out, accepted = state
        keys = R.split(rng, 3)
        u = R.uniform(keys[1], shape, prob.dtype)
        v = R.uniform(keys[2], shape, prob.dtype)
        u = u - 0.5
        us = 0.5 - u.abs()
        accept1 = (us >= 0.07) & (v <= v_r)
        k = ((2.0 * a / us + b) * u + c).floor()
        reject = (k < 0.0) | (k > count)
        v = (v * alpha / (a / (us * us) + b)).log()
        ub = ((m + 0.5) * ((m + 1.0) / (r * (count - m + 1.0))).log()
              + (count + 1.0) * ((count - m + 1.0) / (count - k + 1.0)).log()
              + (k + 0.5) * (r * (count - k + 1.0) / (k + 1.0)).log()
              + tail_m + tail_cm - _stirling_tail(k) - _stirling_tail(count - k))
        accept = accept1 | (~reject & (v <= ub))
        return keys[0], accept.where(k, k_out), accepted | accept

    init = (key, prob * 0.0 - 1.0, prob < prob)
    return while_loop(cond, body, init)[1]


def _binomial(key: Tensor, count: Tensor, prob: Tensor, shape: tuple[int, ...],
              dtype: DType) -> Tensor:
    count, prob = U.full(count, shape), U.full(prob, shape)
    p_low = prob < 0.5
    q = p_low.where(prob, 1.0 - prob)
    count_bad = count.isnan() | (count < 0.0)
    count_inf = count.isinf()
    q_nan, q_neg = q.isnan(), q < 0.0
    q = (q_nan | q_neg).where(0.01, q)
    use_inversion = count_bad | (count * q <= 10.0)
    count = count.floor()
    inv = _binomial_inversion(key, use_inversion.where(count, 0.0), q, shape)
    btrs = _btrs(key, use_inversion.where(10000.0, count), use_inversion.where(0.5, q), shape)
    out = use_inversion.where(inv, btrs).cast(dtype)
    invalid = q_neg | q_nan | count_bad
    out = invalid.where(float("nan"), out)
    out = (count_inf & ~invalid).where(float("inf"), out)
    keep = p_low | count_bad | q_nan | count_inf
    return keep.where(out, count.cast(dtype) - out)


def _float_param(x: Any) -> Tensor:
    """A probability-like parameter as a float Tensor: Tensors and NumPy arrays keep a float
    dtype, Python numbers and integer arrays get the default float (JAX's promotion)."""
    if not isinstance(x, (Tensor, np.ndarray, np.generic)):
        x = np.asarray(x, dtypes.default_float.np)
    t = as_tensor(x)
    return t if t.dtype.is_float else t.cast(dtypes.default_float)


def binomial(key: Tensor, n: Any, p: Any, shape: Any = None, dtype: Any = None) -> Tensor:
    """Binomial(n, p) counts, as floats (JAX's choice; float32 by default). Invalid n or p
    (negative or NaN) give NaN, n = inf gives inf."""
    k = R._check_key(key, "binomial")
    dtype = U.float_dtype(dtype, "binomial")
    prob = _float_param(p)
    count = as_tensor(n).cast(prob.dtype)
    shape = U.out_shape("binomial", shape, count, prob)
    return _binomial(k, count, prob, shape, dtype)


def multinomial(key: Tensor, n: Any, p: Any, *, shape: Any = None, dtype: Any = None,
                unroll: int | bool = 1) -> Tensor:
    """Multinomial(n, p) counts over the last axis of `p`, as floats: one binomial per
    category for what the previous ones left (`unroll` is accepted for JAX's signature)."""
    del unroll
    k = R._check_key(key, "multinomial")
    prob = _float_param(p)
    count = as_tensor(n).cast(prob.dtype)
    shape = prob.shape if shape is None else R._shape(shape, "multinomial")
    if not shape:
        raise ValueError("multinomial: p must have at least one dimension (the categories)")
    count = U.full(count, shape[:-1])
    prob = U.full(prob, shape)
    ncat = shape[-1]
    probs = prob.permute(prob.ndim - 1, *range(prob.ndim - 1))   # categories first
    remaining = probs.flip(0).cumsum(0).flip(0)
    ratios = probs / (remaining == 0.0).where(1.0, remaining)
    keys = R.split(k, ncat)

    def step(left: Tensor, xs: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        ratio, sub = xs
        drawn = _binomial(sub, left, ratio.maximum(0.0).minimum(1.0), left.shape, left.dtype)
        return left - drawn, drawn

    _, counts = scan(step, count, (ratios, keys))
    out = counts.permute(*range(1, counts.ndim), 0)
    return out.cast(U.float_dtype(dtype, "multinomial")) if dtype is not None else out


def geometric(key: Tensor, p: Any, shape: Any = None, dtype: Any = None) -> Tensor:
    """Geometric(p) counts of trials up to the first success (support 1, 2, ...; int32 by
    default): floor(log(u) / log1p(-p)) + 1."""
    k = R._check_key(key, "geometric")
    dtype = U.int_dtype(dtype, "geometric")
    prob = _float_param(p)
    shape = U.out_shape("geometric", shape, prob)
    u = R.uniform(k, shape, prob.dtype)
    u = (u == 0.0).where(1.0, u)
    g = (u.log() / U.full(U.log1p(-prob), shape)).floor() + 1.0
    return g.cast(dtype)


__all__ = ["binomial", "geometric", "multinomial", "poisson"]
