"""`jax.lax`'s special functions beyond lgamma/digamma/erf_inv/erfc: zeta, polygamma,
bessel_i0e, bessel_i1e, igamma, igammac and betainc.

Operands follow lax's rules (one float dtype, no promotion). `zeta` (Hurwitz), `polygamma`
and `bessel_i1e` are computed here from elementwise primitives in float64 and rounded once.
`igamma`, `igammac`, `betainc`, `bessel_i0e` (and polygamma's digamma case) have their code in
fgrad.scipy.special, a layer above fgrad.lax: `import fgrad` registers those implementations
in `SCIPY_HOOKS`, and the wrappers here check the arguments and call them.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from fgrad.core import prims as P
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.tensor import Tensor
from fgrad.lax._args import broadcast_shape, check_kind, expand, same_dtype

__all__ = ["SCIPY_HOOKS", "bessel_i0e", "bessel_i1e", "betainc", "igamma", "igammac",
           "polygamma", "zeta"]

SCIPY_HOOKS: dict[str, Callable[..., Tensor]] = {}

# B_2j / (2j)! for j = 1..12 (Bernoulli numbers over factorials), for Euler-Maclaurin
_BERNOULLI = [(1, 6), (-1, 30), (1, 42), (-1, 30), (5, 66), (-691, 2730), (7, 6),
              (-3617, 510), (43867, 798), (-174611, 330), (854513, 138),
              (-236364091, 2730)]
_EM_COEFFS = [n / d / math.factorial(2 * j) for j, (n, d) in enumerate(_BERNOULLI, start=1)]
_DIRECT_TERMS = 10
_FACTORIALS = np.array([float(math.factorial(k)) for k in range(171)])


def _args(op: str, *xs: Any, names: tuple[str, ...]) -> list[Tensor]:
    ts = same_dtype(op, list(xs), names)
    check_kind(op, ts[0], "f", names[0])
    shape = broadcast_shape(op, ts, names)
    return [expand(t, shape) for t in ts]


def _hook(op: str, name: str) -> Callable[..., Tensor]:
    fn = SCIPY_HOOKS.get(name)
    if fn is None:
        raise RuntimeError(f"lax.{op} is implemented in fgrad.scipy.special, which "
                           f"`import fgrad` registers; import the fgrad package first")
    return fn


def _wide(t: Tensor) -> Tensor:
    return t if t.dtype == dtypes.float64 else P.convert(t, dtypes.float64)


def _back(y: Tensor, dtype: DType) -> Tensor:
    return y if y.dtype == dtype else P.convert(y, dtype)


def _full(value: float, like: Tensor) -> Tensor:
    return P.broadcast_in_dim(Tensor(np.array(value, like.dtype.np)), like.shape, ())


def igamma(a: Any, x: Any) -> Tensor:
    """The regularized lower incomplete gamma function P(a, x)."""
    ta, tx = _args("igamma", a, x, names=("a", "x"))
    return _hook("igamma", "gammainc")(ta, tx)


def igammac(a: Any, x: Any) -> Tensor:
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    ta, tx = _args("igammac", a, x, names=("a", "x"))
    return _hook("igammac", "gammaincc")(ta, tx)


def betainc(a: Any, b: Any, x: Any) -> Tensor:
    """The regularized incomplete beta function I_x(a, b)."""
    ta, tb, tx = _args("betainc", a, b, x, names=("a", "b", "x"))
    return _hook("betainc", "betainc")(ta, tb, tx)


def bessel_i0e(x: Any) -> Tensor:
    """exp(-|x|) I0(x), the exponentially scaled modified Bessel function of order 0."""
    (t,) = _args("bessel_i0e", x, names=("x",))
    return _hook("bessel_i0e", "i0e")(t)


def _hurwitz(s: Tensor, q: Tensor) -> Tensor:
    """zeta(s, q) in float64 by Euler-Maclaurin: a direct sum of the first terms, then the
    integral, half the next term and the Bernoulli corrections. For q < 0 the direct terms
    take integer powers of negative bases (callers keep s an integer there)."""
    total = _full(0.0, s)
    odd = P.ne_p.bind(P.rem_p.bind(s, _full(2.0, s)), _full(0.0, s))
    for k in range(_DIRECT_TERMS):
        base = q + float(k)
        mag = P.exp_p.bind(P.neg_p.bind(s) * P.log_p.bind(P.abs_p.bind(base)))
        negative = P.lt_p.bind(base, _full(0.0, s))
        total = total + P.select(negative & odd, P.neg_p.bind(mag), mag)
    a = q + float(_DIRECT_TERMS)
    a = P.select(P.gt_p.bind(a, _full(0.0, s)), a, _full(1.0, s))
    log_a = P.log_p.bind(a)
    power = P.exp_p.bind(P.neg_p.bind(s) * log_a)        # a^-s
    total = total + power * a / (s - 1.0) + power * 0.5
    rising = s                                           # s (s+1) ... (s+2j-2)
    term_power = power / a                               # a^(-s-1)
    for j, coeff in enumerate(_EM_COEFFS):
        total = total + coeff * rising * term_power
        rising = rising * (s + float(2 * j + 1)) * (s + float(2 * j + 2))
        term_power = term_power / (a * a)
    return total


def _zeta_wide(s: Tensor, q: Tensor) -> Tensor:
    zero = _full(0.0, s)
    s_int = P.eq_p.bind(s, P.floor_p.bind(s))
    q_int = P.eq_p.bind(q, P.floor_p.bind(q))
    q_pos = P.gt_p.bind(q, zero)
    ok = P.gt_p.bind(s, _full(1.0, s)) & (q_pos | (s_int & ~q_int)) & q.isfinite()
    value = _hurwitz(P.select(ok, s, _full(2.0, s)), P.select(ok, q, _full(1.0, s)))
    pole = P.eq_p.bind(s, _full(1.0, s)) | (P.gt_p.bind(s, _full(1.0, s)) & ~q_pos & q_int)
    nan = _full(math.nan, s)
    return P.select(ok, value, P.select(pole & ~q.isnan(), _full(math.inf, s), nan))


def zeta(x: Any, q: Any) -> Tensor:
    """The Hurwitz zeta function sum_k (q + k)^-x: inf at x = 1 and at non-positive integer
    q, NaN for x < 1; negative non-integer q needs an integer x (as in JAX, accuracy falls
    off for q below about -1)."""
    s, tq = _args("zeta", x, q, names=("x", "q"))
    return _back(_zeta_wide(_wide(s), _wide(tq)), s.dtype)


def polygamma(m: Any, x: Any) -> Tensor:
    """The m-th derivative of the digamma function, for integer-valued m >= 0 (NaN
    otherwise): digamma for m = 0, else (-1)^(m+1) m! zeta(m + 1, x)."""
    tm, tx = _args("polygamma", m, x, names=("m", "x"))
    wm, wx = _wide(tm), _wide(tx)
    valid = P.eq_p.bind(wm, P.floor_p.bind(wm)) & P.ge_p.bind(wm, _full(0.0, wm))
    order = P.select(valid & P.le_p.bind(wm, _full(170.0, wm)), wm, _full(1.0, wm))
    fact = P.gather(Tensor(_FACTORIALS), P.convert(order, dtypes.int32))
    odd = P.ne_p.bind(P.rem_p.bind(order, _full(2.0, wm)), _full(0.0, wm))
    sign = P.select(odd, _full(1.0, wm), _full(-1.0, wm))
    higher = sign * fact * _zeta_wide(order + 1.0, wx)
    digamma = _hook("polygamma", "digamma")(wx)
    out = P.select(P.eq_p.bind(wm, _full(0.0, wm)), digamma, higher)
    return _back(P.select(valid, out, _full(math.nan, wm)), tx.dtype)


_SERIES_TERMS, _ASYMPTOTIC_TERMS, _SWITCH = 64, 24, 30.0


def bessel_i1e(x: Any) -> Tensor:
    """exp(-|x|) I1(x), the exponentially scaled modified Bessel function of order 1 (odd):
    its power series up to |x| = 30, the asymptotic expansion above."""
    (t,) = _args("bessel_i1e", x, names=("x",))
    w = _wide(t)
    a = P.abs_p.bind(w)
    near = P.le_p.bind(a, _full(_SWITCH, w))
    s = P.select(near, a, _full(1.0, w))
    quarter_sq = s * s * 0.25
    term = s * 0.5
    total = term
    for k in range(_SERIES_TERMS):
        term = term * quarter_sq / float((k + 1) * (k + 2))
        total = total + term
    series = total * P.exp_p.bind(P.neg_p.bind(s))
    z = P.select(near, _full(_SWITCH + 1.0, w), a)
    coeff, acc, inv = 1.0, _full(1.0, w), 1.0 / z
    power = _full(1.0, w)
    for k in range(1, _ASYMPTOTIC_TERMS + 1):
        coeff *= -(4.0 - (2 * k - 1) ** 2) / (k * 8.0)
        power = power * inv
        acc = acc + coeff * power
    asym = acc / (z * (2.0 * math.pi)).sqrt()
    mag = P.select(near, series, asym)
    out = P.select(P.lt_p.bind(w, _full(0.0, w)), P.neg_p.bind(mag), mag)
    return _back(P.select(w.isnan(), w, out), t.dtype)
