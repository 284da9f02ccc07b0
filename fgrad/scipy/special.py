"""fgrad.scipy.special: jax.scipy.special's functions over Tensors (traceable)."""
from __future__ import annotations

import math
from typing import Any

from fgrad.core.prims import log1p_p
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, Axis, asarray, axes_of, float_of
from fgrad.scipy import _special_math as _m
from fgrad.scipy._stats_math import betainc, gammainc, gammaincc, i0e  # noqa: F401
from fgrad.transforms import stop_gradient

_SQRT1_2 = math.sqrt(0.5)


def _f(x: ArrayLike) -> Tensor:
    return _m.float_input(x)


def _pair(a: ArrayLike, b: ArrayLike) -> tuple[Tensor, Tensor]:
    from fgrad.numpy.elementwise import same_shape_float
    return same_shape_float(a if not isinstance(a, bool) else float(a),
                            b if not isinstance(b, bool) else float(b))


def erf(x: ArrayLike) -> Tensor:
    """The error function."""
    return _f(x).erf()


def erfc(x: ArrayLike) -> Tensor:
    """The complementary error function 1 - erf(x), accurate for large x."""
    return _m.erfc(_f(x))


def erfinv(x: ArrayLike) -> Tensor:
    """The inverse error function on (-1, 1)."""
    return _m.erfinv(_f(x))


def expit(x: ArrayLike) -> Tensor:
    """The logistic sigmoid 1 / (1 + exp(-x))."""
    return _f(x).sigmoid()


def logit(x: ArrayLike) -> Tensor:
    """log(p / (1 - p))."""
    p = _f(x)
    return p.log() - log1p_p.bind(-p)


def gammaln(x: ArrayLike) -> Tensor:
    """log|Gamma(x)|."""
    return _m.lgamma(_f(x))


def digamma(x: ArrayLike) -> Tensor:
    """The digamma function psi(x) = d/dx log Gamma(x)."""
    return _m.digamma(_f(x))


psi = digamma


def polygamma(n: int, x: ArrayLike) -> Tensor:
    """psi^(n)(x) for n = 0 (digamma) and n = 1 (trigamma)."""
    if n == 0:
        return digamma(x)
    if n == 1:
        return _m.trigamma(_f(x))
    raise NotImplementedError(f"fgrad.scipy.special.polygamma: only n = 0 and 1 are "
                              f"available, got n = {n}")


def gamma(x: ArrayLike) -> Tensor:
    """Gamma(x): its sign by the reflection formula for negative x; NaN at negative integers."""
    t = _f(x)
    sign = ((t < 0) & ((t.floor() % 2) != 0)).where(-1.0, 1.0)
    pole = (t < 0) & (t == t.floor())
    return pole.where(math.nan, sign * gammaln(t).exp())


def betaln(a: ArrayLike, b: ArrayLike) -> Tensor:
    """log|B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b)."""
    x, y = _pair(a, b)
    return gammaln(x) + gammaln(y) - gammaln(x + y)


def xlogy(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x * log(y), 0 where x == 0 and y == 0 (d/dx is log(y) elsewhere, as in JAX)."""
    a, b = _pair(x, y)
    safe = ((a == 0) & (b == 0)).where(1.0, b)
    return a * safe.log()


def xlog1py(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x * log1p(y), 0 where x == 0 and y == -1."""
    a, b = _pair(x, y)
    safe = ((a == 0) & (b == -1)).where(0.0, b)
    return a * log1p_p.bind(safe)


def entr(x: ArrayLike) -> Tensor:
    """-x log x for x > 0, 0 at 0, -inf below."""
    t = _f(x)
    pos = t > 0
    edge = (t == 0).where(0.0, -math.inf).cast(t.dtype)
    return pos.where(-t * pos.where(t, 1.0).log(), edge)


def ndtr(x: ArrayLike) -> Tensor:
    """The standard normal CDF."""
    return 0.5 * _m.erfc(-_f(x) * _SQRT1_2)


def ndtri(p: ArrayLike) -> Tensor:
    """The inverse of ndtr (the standard normal quantile function)."""
    return _m.ndtri(_f(p))


def log_ndtr(x: ArrayLike) -> Tensor:
    """log(ndtr(x)), accurate in both tails."""
    t = _f(x)
    left = math.log(0.5) + _m.log_erfc(-t * _SQRT1_2)
    right = log1p_p.bind(-0.5 * _m.erfc(t * _SQRT1_2))
    return (t < 0).where(left, right)


def logsumexp(a: ArrayLike, axis: Axis = None, b: ArrayLike = None, keepdims: bool = False,
              return_sign: bool = False, where: ArrayLike = None) -> Any:
    """log(sum(b * exp(a))) over `axis`, stable; with return_sign=True also the sign of the
    sum (negative sums are NaN otherwise)."""
    x = float_of(asarray(a))
    if where is not None:
        x = asarray(where).where(x, -math.inf)
    w = None
    if b is not None:
        from fgrad.numpy.shape import broadcast_arrays
        x, w = broadcast_arrays(x, float_of(asarray(b)))
        x = (w == 0).where(-math.inf, x)
    axes = axes_of(axis, x.ndim, "logsumexp")
    if not axes:
        axes, x = (0,), x.reshape((1,) + x.shape)
        w = None if w is None else w.reshape((1,) + w.shape)
    peak = stop_gradient(x.max(axes, keepdim=True))
    peak = peak.isfinite().where(peak, 0.0)
    terms = (x - peak).exp()
    total = (terms if w is None else terms * w).sum(axes, keepdim=True)
    sign = total.sign()
    out = total.abs().log() + peak
    if not keepdims:
        out, sign = _squeeze(out, axes), _squeeze(sign, axes)
    if return_sign:
        return out, sign
    return (sign < 0).where(math.nan, out) if b is not None else out


def _squeeze(x: Tensor, axes: tuple[int, ...]) -> Tensor:
    return x.reshape(tuple(d for i, d in enumerate(x.shape) if i not in axes))


def softmax(x: ArrayLike, axis: Axis = -1) -> Tensor:
    """exp(x) / sum(exp(x)) along `axis` (stable)."""
    t = _f(x)
    axes = axes_of(axis, t.ndim, "softmax")
    shifted = t - stop_gradient(t.max(axes, keepdim=True))
    e = shifted.exp()
    return e / e.sum(axes, keepdim=True)


def log_softmax(x: ArrayLike, axis: Axis = -1) -> Tensor:
    """x - logsumexp(x) along `axis`."""
    t = _f(x)
    axes = axes_of(axis, t.ndim, "log_softmax")
    shifted = t - stop_gradient(t.max(axes, keepdim=True))
    return shifted - shifted.exp().sum(axes, keepdim=True).log()
