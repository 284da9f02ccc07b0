"""Counter-based random numbers with explicit keys (JAX's design).

A key is a uint32 Tensor of shape (2,). A draw hashes a ramp of counters with the key through
Threefry-2x32 (20 rounds), so one key always gives the same numbers and `split`/`fold_in`
derive fresh keys the same way. Everything is Tensor ops on uint32 values, so draws trace,
jit and vmap; counters follow JAX's "partitionable" layout (its default since 0.5).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import ml_dtypes
import numpy as np

from fgrad.core import dtypes as _dt
from fgrad.core import prims as P
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.tensor import Tensor, as_tensor

Shape = int | Sequence[int]

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA
_MASK32 = 0xFFFFFFFF
_UINT = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}


# ---------------------------------------------------------------------------- keys

def key(seed: int | Tensor) -> Tensor:
    """A raw key from an integer seed: uint32 [seed >> 32, seed & 0xffffffff]."""
    hi, lo = _seed_words(seed, "key")
    return P.concatenate([hi.reshape(1), lo.reshape(1)], 0)


PRNGKey = key


def _seed_words(seed: Any, op: str) -> tuple[Tensor, Tensor]:
    """The high and low 32-bit words of an integer seed, as 0-d uint32 Tensors."""
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
        seed = int(seed)
        if not -2**63 <= seed < 2**64:
            raise OverflowError(f"{op}: seed {seed} does not fit in 64 bits")
        return (Tensor(np.uint32((seed >> 32) & _MASK32)), Tensor(np.uint32(seed & _MASK32)))
    if not isinstance(seed, Tensor) or not seed.dtype.is_int or seed.ndim != 0:
        raise TypeError(f"{op}: expected a Python int or a 0-d integer Tensor, got "
                        f"{_describe(seed)}")
    if seed.dtype.itemsize < 8:
        return Tensor(np.uint32(0)), seed.cast(dtypes.uint32)
    wide = seed.cast(dtypes.uint64)
    return (wide >> 32).cast(dtypes.uint32), wide.cast(dtypes.uint32)


def _describe(x: Any) -> str:
    if isinstance(x, Tensor):
        return f"a Tensor of shape {x.shape} and dtype {x.dtype.name}"
    return f"{type(x).__name__} {x!r}"


def _check_key(k: Any, op: str) -> Tensor:
    """`k` as a uint32 Tensor of shape (2,), or a TypeError saying how to make one."""
    if not isinstance(k, Tensor):
        arr = np.asarray(k)
        if arr.dtype.kind in "iu" and arr.size and (arr.min() < 0 or arr.max() > _MASK32):
            raise TypeError(f"{op}: key words must lie in [0, 2**32), got {arr.tolist()}")
        k = Tensor(arr.astype(np.uint32)) if arr.dtype.kind in "iu" else Tensor(arr)
    if k.shape != (2,) or k.dtype != dtypes.uint32:
        raise TypeError(f"{op}: a key must be a uint32 Tensor of shape (2,), got "
                        f"{_describe(k)}; make one with fgrad.random.key(seed) and derive "
                        f"more with fgrad.random.split(key)")
    return k


def threefry2x32(k: Tensor, x0: Tensor, x1: Tensor) -> tuple[Tensor, Tensor]:
    """Threefry-2x32 with 20 rounds: hash the counter pairs (x0, x1) under key `k`."""
    k = _check_key(k, "threefry2x32")
    k0, k1 = k[0], k[1]
    ks = (k0, k1, k0 ^ k1 ^ _PARITY)
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for group in range(5):
        for r in _ROTATIONS[group % 2]:
            x0 = x0 + x1
            x1 = ((x1 << r) | (x1 >> (32 - r))) ^ x0
        x0 = x0 + ks[(group + 1) % 3]
        x1 = x1 + (ks[(group + 2) % 3] + (group + 1))
    return x0, x1


def _hash_counters(k: Tensor, shape: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """Threefry of the row-major position of every element of `shape` (hi word 0)."""
    n = math.prod(shape)
    if n >= 2**32:
        raise ValueError(f"fgrad.random: cannot draw {n} (>= 2**32) values from one key; "
                         f"split the key and draw in pieces")
    lo = P.iota(dtypes.uint32, (n,), 0).reshape(shape)
    hi = Tensor.zeros(*shape, dtype=dtypes.uint32)
    return threefry2x32(k, hi, lo)


def split(key: Tensor, num: int = 2) -> Tensor:
    """`num` new independent keys, shape (num, 2)."""
    k = _check_key(key, "split")
    if not isinstance(num, int) or num < 0:
        raise ValueError(f"split: num must be a non-negative int, got {num!r}")
    y0, y1 = _hash_counters(k, (num,))
    return P.concatenate([y0.reshape(num, 1), y1.reshape(num, 1)], 1)


def fold_in(key: Tensor, data: int | Tensor) -> Tensor:
    """A new key that mixes the integer `data` into `key`."""
    k = _check_key(key, "fold_in")
    hi, lo = _seed_words(data, "fold_in")
    y0, y1 = threefry2x32(k, hi.reshape(1), lo.reshape(1))
    return P.concatenate([y0, y1], 0)


# ---------------------------------------------------------------------------- raw bits

def _shape(shape: Any, op: str) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        out = tuple(int(d) for d in dims)
    except TypeError:
        raise TypeError(f"{op}: shape must be an int or a sequence of ints, got "
                        f"{shape!r}") from None
    if any(d < 0 for d in out):
        raise ValueError(f"{op}: negative dimension in shape {out}")
    return out


def bits(key: Tensor, shape: Shape = (), dtype: Any = dtypes.uint32) -> Tensor:
    """Uniformly random bits of an unsigned dtype (uint8, uint16, uint32 or uint64)."""
    k = _check_key(key, "bits")
    shape = _shape(shape, "bits")
    dtype = _dt.to_dtype(dtype)
    if not dtype.is_unsigned:
        raise TypeError(f"bits: dtype must be uint8, uint16, uint32 or uint64, got "
                        f"{dtype.name}")
    y0, y1 = _hash_counters(k, shape)
    if dtype == dtypes.uint64:
        return (y0.cast(dtypes.uint64) << 32) | y1.cast(dtypes.uint64)
    return (y0 ^ y1).cast(dtype)


# ---------------------------------------------------------------------------- floats

def _float_dtype(dtype: Any, op: str) -> DType:
    dtype = _dt.to_dtype(dtype)
    if not dtype.is_float:
        raise TypeError(f"{op}: dtype must be a float type, got {dtype.name}")
    return dtype


def _unit_floats(k: Tensor, shape: tuple[int, ...], dtype: DType) -> Tensor:
    """Uniform floats in [0, 1): random mantissa bits under the exponent of 1.0, minus 1."""
    nmant = ml_dtypes.finfo(dtype.np).nmant
    udt = _UINT[dtype.itemsize]
    nbits = 8 if nmant < 8 else 8 * dtype.itemsize
    raw = bits(k, shape, _UINT[nbits // 8]).cast(udt)
    one = int(np.array(1, dtype.np).view(udt.np))
    return ((raw >> (nbits - nmant)) | one).bitcast(dtype) - 1.0


def _float_bound(x: Any, dtype: DType) -> Tensor | float:
    if isinstance(x, (int, float, np.number)) and not isinstance(x, bool):
        return float(x)
    return as_tensor(x).cast(dtype) if isinstance(x, Tensor) else as_tensor(x, dtype)


def _float_tensor(x: Any, dtype: DType) -> Tensor:
    return x.cast(dtype) if isinstance(x, Tensor) else as_tensor(x, dtype)


def _next_float(x: Tensor | float, dtype: DType, up: bool) -> Tensor | float:
    """The neighbouring value of `x` in `dtype` towards +inf (up) or -inf."""
    target = np.array(np.inf if up else -np.inf, dtype.np)
    if not isinstance(x, Tensor):
        return float(np.nextafter(np.array(x, dtype.np), target))
    u = x.bitcast(_UINT[dtype.itemsize])
    away_from_zero = (x > 0) if up else (x < 0)
    moved = away_from_zero.where(u + 1, u - 1).bitcast(dtype)
    return (x == 0).where(float(np.nextafter(np.array(0, dtype.np), target)), moved)


def uniform(key: Tensor, shape: Shape = (), dtype: Any = float,
            minval: Any = 0.0, maxval: Any = 1.0) -> Tensor:
    """Uniform floats in [minval, maxval) (bounds may be Tensors broadcastable to shape)."""
    k = _check_key(key, "uniform")
    shape = _shape(shape, "uniform")
    dtype = _float_dtype(dtype, "uniform")
    lo, hi = _float_bound(minval, dtype), _float_bound(maxval, dtype)
    unit = _unit_floats(k, shape, dtype)
    out = (unit * (hi - lo) + lo).maximum(lo).minimum(_next_float(hi, dtype, up=False))
    if out.shape != shape:
        raise ValueError(f"uniform: minval/maxval of shapes {np.shape(minval)} and "
                         f"{np.shape(maxval)} do not broadcast to shape {shape}")
    return out


# ---------------------------------------------------------------------------- normal quantiles
#
# Normals are sqrt(2) erfinv(u) for u uniform on (-1, 1). float64 uses Giles' double-precision
# erfinv (the three-piece polynomial XLA evaluates for float64), with w = -log1p(-x^2) from
# `_log1p`: XLA's CPU float64 recipe x - x^2/2 + x^3 P(x)/Q(x) (Cephes' log1p rational) for
# |x| < sqrt(2) - 1, else log(1 + x). erfinv is then float64-accurate (relative 4e-15) for
# |x| < 0.998; nearer +-1 the rounding of x^2 in w (XLA's formulation) makes it up to 1e-10.
# XLA's log1p strays up to ~130 ulps from the exact value on (-0.414, -0.293); following it is
# what lets fgrad.random's float64 samplers match JAX's to the last bit or two. Other float
# dtypes use Giles' single-precision erfinv (float16/bfloat16 in float32).

# log1p rational: P and Q (Q monic), coefficients from the highest power down.
_LOG1P_P = (4.52700008624452e-05, 0.49854102823193375, 6.578732594206104, 29.911919328553072,
            60.94966798098779, 57.11296359058554, 20.039553499201283)
_LOG1P_Q = (1.0, 15.062909083469192, 83.04756596796722, 221.76239823732857,
            309.09872225312057, 216.42788614495947, 60.11866049760384)
_LOG1P_SMALL = float.fromhex("0x1.a827999fcef32p-2")  # sqrt(2) - 1, rounded to float64

# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011), double precision:
# erfinv(x) = x p(t) with t = w - 3.125 (w < 6.25), sqrt(w) - 3.25 (w < 16) or sqrt(w) - 5,
# p a polynomial per piece. Coefficients from the highest power down.
_ERFINV64_CENTRAL = (
    -3.64441206401782e-21, -1.6850591381820166e-19, 1.28584807152564e-18,
    1.1157877678025181e-17, -1.3331716628546209e-16, 2.0972767875968562e-17,
    6.6376381343583238e-15, -4.0545662729752069e-14, -8.1519341976054722e-14,
    2.6335093153082323e-12, -1.2975133253453532e-11, -5.4154120542946279e-11,
    1.0512122733215323e-09, -4.1126339803469837e-09, -2.9070369957882005e-08,
    4.2347877827932404e-07, -1.3654692000834679e-06, -1.3882523362786469e-05,
    0.00018673420803405714, -0.000740702534166267, -0.0060336708714301491,
    0.24015818242558962, 1.6536545626831027)
_ERFINV64_MIDDLE = (
    2.2137376921775787e-09, 9.0756561938885391e-08, -2.7517406297064545e-07,
    1.8239629214389228e-08, 1.5027403968909828e-06, -4.013867526981546e-06,
    2.9234449089955446e-06, 1.2475304481671779e-05, -4.7318229009055734e-05,
    6.8284851459573175e-05, 2.4031110387097894e-05, -0.00035503752036284748,
    0.0009532893797373805, -0.0016882755560235047, 0.0024914420961078508,
    -0.0037512085075692412, 0.0053709145535900636, 1.0052589676941592, 3.0838856104922208)
_ERFINV64_TAIL = (
    -2.7109920616438573e-11, -2.5556418169965252e-10, 1.5076572693500548e-09,
    -3.789465440126737e-09, 7.61570120807834e-09, -1.496002662714924e-08,
    2.9147953450901081e-08, -6.7711997758452339e-08, 2.2900482228026655e-07,
    -9.9298272942317e-07, 4.5260625972231537e-06, -1.9681778105531671e-05,
    7.5995277030017761e-05, -0.00021503011930044477, -0.00013871931833623122,
    1.0103004648645344, 4.8499064014085844)


def _horner(coeffs: tuple[float, ...], t: Tensor) -> Tensor:
    """sum c_i t^(n-i), by Horner's rule (a multiply and an add per coefficient)."""
    p = t * coeffs[0] + coeffs[1]
    for c in coeffs[2:]:
        p = p * t + c
    return p


def _log1p(x: Tensor) -> Tensor:
    """log(1 + x); float64 by XLA's recipe (see above), other dtypes by fgrad's log1p."""
    if x.dtype != dtypes.float64:
        return P.log1p_p.bind(x)
    x2 = x * x
    ratio = _horner(_LOG1P_P, x) / _horner(_LOG1P_Q, x)
    small = x + (x2 * -0.5 + (x * x2) * ratio)
    return (x.abs() < _LOG1P_SMALL).where(small, (x + 1.0).log())


def _erfinv(x: Tensor) -> Tensor:
    """Inverse error function on [-1, 1] (+-inf at +-1): Giles' double-precision polynomials
    (2011) for float64, his single-precision ones (2010) for other dtypes."""
    if x.dtype == dtypes.float64:
        w = -_log1p(x * -x)
        root = w.sqrt()
        p64 = (w < 6.25).where(_horner(_ERFINV64_CENTRAL, w - 3.125),
                               (w < 16.0).where(_horner(_ERFINV64_MIDDLE, root - 3.25),
                                                _horner(_ERFINV64_TAIL, root - 5.0)))
        return (x.abs() == 1.0).where(x * math.inf, p64 * x)
    w = -((1.0 - x) * (1.0 + x)).log()
    central = w - 2.5
    p: float | Tensor = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
              -0.00125372503, -0.00417768164, 0.246640727, 1.50140941):
        p = c + p * central
    tail = w.sqrt() - 3.0
    q: float | Tensor = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
              -0.0076224613, 0.00943887047, 1.00167406, 2.83297682):
        q = c + q * tail
    return (w < 5.0).where(p, q) * x


def _inverse_cdf(u: Tensor, dtype: DType) -> Tensor:
    """sqrt(2) * erfinv(u): normal quantiles of uniforms u on (-1, 1), computed in at least
    float32 and returned as `dtype` (float64 to float64 accuracy)."""
    work = u.cast(dtypes.float32) if dtype.itemsize < 4 else u
    return (_erfinv(work) * math.sqrt(2.0)).cast(dtype)


def normal(key: Tensor, shape: Shape = (), dtype: Any = float) -> Tensor:
    """Standard normal samples: the inverse CDF of a uniform, accurate to the dtype's
    precision (float64 included)."""
    k = _check_key(key, "normal")
    dtype = _float_dtype(dtype, "normal")
    lo = _next_float(-1.0, dtype, up=True)
    return _inverse_cdf(uniform(k, shape, dtype, lo, 1.0), dtype)


def truncated_normal(key: Tensor, lower: Any, upper: Any, shape: Shape | None = None,
                     dtype: Any = float) -> Tensor:
    """Standard normal samples conditioned to lie strictly inside (lower, upper)."""
    k = _check_key(key, "truncated_normal")
    dtype = _float_dtype(dtype, "truncated_normal")
    lower, upper = _float_tensor(lower, dtype), _float_tensor(upper, dtype)
    if shape is None:
        shape = np.broadcast_shapes(lower.shape, upper.shape)
    a = (lower * (1 / math.sqrt(2.0))).erf()
    b = (upper * (1 / math.sqrt(2.0))).erf()
    out = _inverse_cdf(uniform(k, shape, dtype, a, b), dtype)
    low = _next_float(lower.detach(), dtype, up=True)
    high = _next_float(upper.detach(), dtype, up=False)
    return out.maximum(low).minimum(high)


def gumbel(key: Tensor, shape: Shape = (), dtype: Any = float) -> Tensor:
    """Standard Gumbel samples: -log(-log(u))."""
    k = _check_key(key, "gumbel")
    dtype = _float_dtype(dtype, "gumbel")
    tiny = float(ml_dtypes.finfo(dtype.np).tiny)
    return -(-uniform(k, shape, dtype, tiny, 1.0).log()).log()


def exponential(key: Tensor, shape: Shape = (), dtype: Any = float) -> Tensor:
    """Standard exponential samples: -log(1 - u)."""
    k = _check_key(key, "exponential")
    dtype = _float_dtype(dtype, "exponential")
    return -(1.0 - uniform(k, shape, dtype)).log()


# ---------------------------------------------------------------------------- discrete

def _int_bound(x: Any, dtype: DType, wide: DType, extra: int, what: str) -> Tensor:
    """Bound `x` clipped to [min, max + extra] of `dtype`, as a Tensor of dtype `wide`."""
    info = np.iinfo(dtype.np)
    if isinstance(x, Tensor) and x.dtype.is_int:
        return x.cast(wide).maximum(int(info.min)).minimum(int(info.max) + extra)
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return Tensor(np.array(min(max(int(x), info.min), info.max + extra), wide.np))
    raise TypeError(f"randint: {what} must be a Python int or an integer Tensor, got "
                    f"{_describe(x)}")


def randint(key: Tensor, shape: Shape, minval: Any, maxval: Any,
            dtype: Any = int) -> Tensor:
    """Integers uniform in [minval, maxval) (bounds clipped to dtype's range)."""
    k = _check_key(key, "randint")
    shape = _shape(shape, "randint")
    dtype = _dt.to_dtype(dtype)
    if not dtype.is_int:
        raise TypeError(f"randint: dtype must be an integer type, got {dtype.name}")
    # Small dtypes work in int64 so maxval may be dtype.max + 1 (randint(k, s, 0, 256, u8)).
    wide, extra = (dtype, 0) if dtype.itemsize == 8 else (dtypes.int64, 1)
    lo = _int_bound(minval, dtype, wide, extra, "minval")
    hi = _int_bound(maxval, dtype, wide, extra, "maxval")
    u64 = dtypes.uint64
    span = (hi <= lo).where(1, hi.cast(u64) - lo.cast(u64))
    offset = bits(k, shape, u64) % span  # bias below span / 2**64
    out = (lo.cast(u64) + offset).cast(wide).cast(dtype)
    if out.shape != shape:
        raise ValueError(f"randint: minval/maxval of shapes {np.shape(minval)} and "
                         f"{np.shape(maxval)} do not broadcast to shape {shape}")
    return out


def bernoulli(key: Tensor, p: Any = 0.5, shape: Shape | None = None) -> Tensor:
    """Booleans that are True with probability `p` (shape defaults to p's shape)."""
    k = _check_key(key, "bernoulli")
    p = as_tensor(p)
    p = p if p.dtype.is_float else p.cast(dtypes.default_float)
    shape = p.shape if shape is None else _shape(shape, "bernoulli")
    out = uniform(k, shape, p.dtype) < p
    if out.shape != shape:
        raise ValueError(f"bernoulli: p of shape {p.shape} does not broadcast to {shape}")
    return out


def categorical(key: Tensor, logits: Any, axis: int = -1,
                shape: Shape | None = None) -> Tensor:
    """Category indices drawn with probabilities softmax(logits) (the Gumbel-max trick)."""
    k = _check_key(key, "categorical")
    logits = as_tensor(logits)
    logits = logits if logits.dtype.is_float else logits.cast(dtypes.default_float)
    if logits.ndim == 0:
        raise ValueError("categorical: logits must have at least one dimension")
    axis = logits._axis(axis)
    batch = logits.shape[:axis] + logits.shape[axis + 1:]
    shape = batch if shape is None else _shape(shape, "categorical")
    n_prefix = len(shape) - len(batch)
    if n_prefix < 0 or shape[n_prefix:] != batch:
        raise ValueError(f"categorical: shape {shape} must end with the batch shape {batch} "
                         f"of logits {logits.shape} without axis {axis}")
    full = shape[:n_prefix] + logits.shape
    noise = gumbel(k, full, logits.dtype)
    return (noise + logits.reshape((1,) * n_prefix + logits.shape)).argmax(n_prefix + axis)


def _argsort(x: Tensor) -> Tensor:
    """Stable ascending argsort of a 1-d Tensor (Tensor.argsort, else O(n^2) ranks)."""
    if hasattr(Tensor, "argsort"):
        return x.argsort().cast(dtypes.int32)
    return _rank_argsort(x)


def _rank_argsort(x: Tensor) -> Tensor:
    """Stable argsort by comparisons: rank every element, then invert the ranking."""
    n = x.shape[0]
    i = P.iota(dtypes.int32, (n, n), 0)
    j = P.iota(dtypes.int32, (n, n), 1)
    xi, xj = x.reshape(n, 1), x.reshape(1, n)
    before = (xj < xi) | ((xj == xi) & (j < i))
    rank = before.cast(dtypes.int32).sum(1)
    hit = rank.reshape(n, 1) == j
    return (hit.cast(dtypes.int32) * i).sum(0).cast(dtypes.int32)


def _shuffled_range(k: Tensor, n: int) -> Tensor:
    """A random permutation of 0..n-1 (int32): sort by random keys, enough rounds that
    duplicate sort keys are unlikely."""
    idx = P.iota(dtypes.int32, (n,), 0)
    rounds = math.ceil(3 * math.log(max(1, n)) / math.log(2**32 - 1))
    for _ in range(rounds):
        keys = split(k)
        k, sub = keys[0], keys[1]
        idx = P.gather(idx, _argsort(bits(sub, (n,))))
    return idx


def _take(x: Tensor, idx: Tensor, axis: int) -> Tensor:
    """`x` indexed by the 1-d `idx` along `axis`."""
    if axis == 0:
        return P.gather(x, idx)
    return P.gather(x.transpose(0, axis), idx).transpose(0, axis)


def _population(a: Any, axis: int, op: str) -> tuple[Tensor | None, int, int]:
    """(array or None, population size, normalized axis) of an int or array argument."""
    if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
        return None, int(a), 0
    arr = as_tensor(a)
    if arr.ndim == 0:
        raise TypeError(f"{op}: expected a Python int or a Tensor with at least one "
                        f"dimension, got a 0-d Tensor")
    axis = arr._axis(axis)
    return arr, arr.shape[axis], axis


def permutation(key: Tensor, x: Any, axis: int = 0) -> Tensor:
    """A random permutation of range(x) for an int `x`, else `x` shuffled along `axis`."""
    k = _check_key(key, "permutation")
    arr, n, axis = _population(x, axis, "permutation")
    if n < 0:
        raise ValueError(f"permutation: n must be >= 0, got {n}")
    perm = _shuffled_range(k, n)
    return perm if arr is None else _take(arr, perm, axis)


def choice(key: Tensor, a: Any, shape: Shape = (), replace: bool = True, p: Any = None,
           axis: int = 0) -> Tensor:
    """Random elements of range(a) (int `a`) or of `a` along `axis`, optionally weighted."""
    k = _check_key(key, "choice")
    shape = _shape(shape, "choice")
    arr, n, axis = _population(a, axis, "choice")
    n_draws = math.prod(shape)
    if n <= 0 and n_draws:
        raise ValueError(f"choice: the population must be non-empty, got size {n}")
    if not replace and n_draws > n:
        raise ValueError(f"choice: cannot take {n_draws} samples from {n} without "
                         f"replacement; pass replace=True or a smaller shape")
    ind = _choice_indices(k, n, n_draws, replace, p)
    if arr is None:
        return ind.reshape(shape)
    return _take(arr, ind, axis).reshape(arr.shape[:axis] + shape + arr.shape[axis + 1:])


def _choice_indices(k: Tensor, n: int, n_draws: int, replace: bool, p: Any) -> Tensor:
    """`n_draws` flat int32 indices into range(n)."""
    if p is None:
        if replace:
            return randint(k, (n_draws,), 0, n)
        return _shuffled_range(k, n)[:n_draws]
    p = as_tensor(p)
    p = p if p.dtype.is_float else p.cast(dtypes.default_float)
    if p.shape != (n,):
        raise ValueError(f"choice: p must have shape ({n},) to match the population, got "
                         f"{p.shape}")
    if replace:
        cum = P.cumulative(p, 0, False, "cumsum")
        r = cum[-1] * (1.0 - uniform(k, (n_draws,), p.dtype))
        below = (cum.reshape(1, n) < r.reshape(n_draws, 1)).cast(dtypes.int32).sum(1)
        return below.minimum(n - 1).cast(dtypes.int32)
    scores = gumbel(k, (n,), p.dtype) + p.log()
    return _argsort(-scores)[:n_draws]


__all__ = ["PRNGKey", "bernoulli", "bits", "categorical", "choice", "exponential",
           "fold_in", "gumbel", "key", "normal", "permutation", "randint", "split",
           "threefry2x32", "truncated_normal", "uniform"]
