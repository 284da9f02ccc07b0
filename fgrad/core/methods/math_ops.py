"""Tensor methods: activations, extra elementwise math, softmax family and statistics.

Every method is a composition of primitives. Where a `where` discards a branch that could
overflow or leave its domain, that branch is fed a safe stand-in value, so its derivative is
finite too and `grad` never meets 0 * inf. Integer inputs of transcendental functions
compute in the default float dtype; statistics and the softmax family of half-precision
inputs compute in float32 and cast the result back.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence, cast

from fgrad.core import prims as P
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.errors import ArgumentError
from fgrad.core.methods.tensor_math import coerce
from fgrad.core.methods import array_methods as _np
from fgrad.core.methods.tensor_reduce import Axis, _axes, sum_dtype

if TYPE_CHECKING:
    from fgrad.core.tensor import Tensor

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_LARGE = 4096.0  # above this, sqrt(x * x + 1) == x in float32 and log(2x) is exact enough


def _float(x: Any) -> "Tensor":
    return x if x.dtype.is_float else x.cast(dtypes.default_float)


def _log1p(x: "Tensor") -> "Tensor":
    return P.log1p_p.bind(x)


def _expm1(x: "Tensor") -> "Tensor":
    return P.expm1_p.bind(x)


def _nonpositive(x: "Tensor") -> "Tensor":
    """x where x <= 0, else 0 (derivative 1 on x <= 0): a safe input for exp/expm1."""
    return (x > 0).where(0, x)


def _widened(x: "Tensor") -> tuple["Tensor", DType]:
    """x in a dtype to compute statistics in (float32 for halves and ints), and the result's."""
    out_dtype = x.dtype if x.dtype.is_float else dtypes.default_float
    wide = dtypes.float32 if out_dtype.itemsize < 4 else out_dtype
    return x.cast(wide), out_dtype


def _shift(x: "Tensor", axes: tuple[int, ...]) -> Any:
    """max over `axes` (keepdim, no derivative), 0 where it is not finite or axes are empty."""
    if any(x.shape[a] == 0 for a in axes):
        return 0.0
    m = x.max(axes, keepdim=True).detach()
    return m.isfinite().where(m, 0.0)


def _logaddexp(a: "Tensor", b: "Tensor") -> "Tensor":
    """log(exp(a) + exp(b)) elementwise; -inf with -inf gives -inf. The max is detached, so
    the derivative with respect to a is exp(a - out) (0.5 where a == b)."""
    m = a.maximum(b).detach()
    m = m.isfinite().where(m, 0.0)
    return ((a - m).exp() + (b - m).exp()).log() + m


def _softplus(x: "Tensor") -> "Tensor":
    """log(1 + exp(x)) as x + log1p(exp(-x)) for x > 0, else log1p(exp(x)): one exp and one
    log1p of -|x| (chosen by a select, not abs, so the derivative is sigmoid(x) everywhere,
    0.5 at 0, where abs' 0 would give 0). Two branches evaluated whole cost twice the
    transcendentals (4096^2 float32 on two cores: 11.5 ms)."""
    positive = x > 0
    tail = _log1p(positive.where(-x, x).exp())
    return positive.where(x + tail, tail)


def _acosh_from_one(x: "Tensor") -> "Tensor":
    """acosh(x) for x >= 1 (NaN below), accurate near 1 and for large x."""
    large = x > _LARGE
    y = large.where(1, x) - 1
    near = _log1p(y + y.sqrt() * (y + 2).sqrt())
    far = large.where(x, 1).log() + math.log(2)
    return large.where(far, near)


def _count(shape: Sequence[int], axes: tuple[int, ...]) -> int:
    return math.prod(shape[a] for a in axes)


class MathOpsMixin:
    """Tensor methods: activations, extra elementwise math, softmax family and statistics."""

    __slots__ = ()

    # ------------------------------------------------------------------ piecewise linear
    def hardtanh(self, min_val: float = -1, max_val: float = 1) -> "Tensor":
        """Clamp to [min_val, max_val]; the derivative is 0 at and beyond the bounds."""
        x = cast("Tensor", self)
        low = (x <= min_val).where(min_val, x)
        return (x >= max_val).where(max_val, low)

    def relu6(self) -> "Tensor":
        """min(max(x, 0), 6)."""
        return self.hardtanh(0, 6)

    def leaky_relu(self, neg_slope: float = 0.01) -> "Tensor":
        """x for x > 0, else neg_slope * x."""
        x = cast("Tensor", self)
        return (x > 0).where(x, x * neg_slope)

    def hardsigmoid(self, alpha: float = 1 / 6, beta: float = 0.5) -> "Tensor":
        """max(0, min(1, alpha * x + beta)); PyTorch's hardsigmoid with the defaults."""
        return (_float(self) * alpha + beta).hardtanh(0, 1)

    def hardswish(self) -> "Tensor":
        """x * relu6(x + 3) / 6."""
        return self * self.hardsigmoid()

    def clip(self, min_: Any = None, max_: Any = None, *, min: Any = None,  # noqa: A002
             max: Any = None) -> "Tensor":  # noqa: A002
        """Clamp to [min_, max_] (either may be None; Tensors broadcast); NaN stays NaN.
        NumPy's keyword names min= and max= work too."""
        if min is not None or max is not None:
            min_ = _np.alias("clip", "min_", min_, None, "min", min)
            max_ = _np.alias("clip", "max_", max_, None, "max", max)
        if min_ is None and max_ is None:
            raise ArgumentError("clip: at least one of min_ and max_ must be given")
        out = cast("Tensor", self)
        if min_ is not None:
            out = (out < min_).where(min_, out)
        if max_ is not None:
            out = (out > max_).where(max_, out)
        return out

    def clamp(self, min_: Any = None, max_: Any = None) -> "Tensor":
        """Alias of clip."""
        return self.clip(min_, max_)

    def lerp(self, end: Any, weight: Any) -> "Tensor":
        """Linear interpolation self + (end - self) * weight."""
        return self + (end - self) * weight

    # ------------------------------------------------------------------ exponential family
    def elu(self, alpha: float = 1.0) -> "Tensor":
        """x for x > 0, else alpha * (exp(x) - 1)."""
        x = _float(self)
        return (x > 0).where(x, _expm1(_nonpositive(x)) * alpha)

    def celu(self, alpha: float = 1.0) -> "Tensor":
        """x for x > 0, else alpha * (exp(x / alpha) - 1)."""
        x = _float(self)
        return (x > 0).where(x, _expm1(_nonpositive(x) / alpha) * alpha)

    def selu(self, alpha: float = SELU_ALPHA, gamma: float = SELU_SCALE) -> "Tensor":
        """gamma * elu(x, alpha), with PyTorch's constants by default."""
        return self.elu(alpha) * gamma

    def softplus(self, beta: float = 1.0) -> "Tensor":
        """log(1 + exp(beta * x)) / beta, without overflow; the derivative is
        sigmoid(beta * x) everywhere (0.5 at 0)."""
        return _softplus(_float(self) * beta) * (1 / beta)

    def logsigmoid(self) -> "Tensor":
        """log(sigmoid(x)) = -softplus(-x), without overflow."""
        return -_softplus(-_float(self))

    def softsign(self) -> "Tensor":
        """x / (1 + |x|)."""
        x = _float(self)
        return x / (x.abs() + 1)

    def silu(self) -> "Tensor":
        """x * sigmoid(x)."""
        return self * self.sigmoid()

    def swish(self) -> "Tensor":
        """Alias of silu."""
        return self.silu()

    def mish(self) -> "Tensor":
        """x * tanh(softplus(x)), from one exp: with e = exp(-|x|), tanh(softplus(x)) is
        (1 + 2e) / (1 + 2e + 2e^2) for x > 0, else e (e + 2) / (e (e + 2) + 2): nothing
        overflows, one division (three transcendentals before: 4096^2 float32 on two cores
        11.0 -> 3.9 ms). The derivative at 0 is 0.6, tanh(log 2), as the composition's."""
        x = _float(self)
        positive = x > 0
        e = positive.where(-x, x).exp()
        numerator = positive.where(e * 2 + 1, e * (e + 2))
        return x * (numerator / (numerator + positive.where(e * e * 2, 2)))

    def gelu(self, approximate: str = "tanh") -> "Tensor":
        """GELU. approximate="tanh" (the default, as in the reference):
        0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))); "none": the exact
        0.5 * x * (1 + erf(x / sqrt(2))) (PyTorch's default)."""
        x = _float(self)
        if approximate == "none":
            return x * 0.5 * ((x * (1 / math.sqrt(2))).erf() + 1)
        if approximate != "tanh":
            raise ArgumentError(f"gelu: approximate must be 'tanh' or 'none', got "
                                f"{approximate!r}")
        inner = (x + x * x * x * 0.044715) * _SQRT_2_OVER_PI
        return x * 0.5 * (inner.tanh() + 1)

    def quick_gelu(self) -> "Tensor":
        """x * sigmoid(1.702 * x)."""
        x = cast("Tensor", self)
        return x * (x * 1.702).sigmoid()

    # ------------------------------------------------------------------ hyperbolic
    def sinh(self) -> "Tensor":
        """Hyperbolic sine (accurate near 0)."""
        x = _float(self)
        return (_expm1(x) - _expm1(-x)) * 0.5

    def cosh(self) -> "Tensor":
        """Hyperbolic cosine."""
        x = _float(self)
        return (x.exp() + (-x).exp()) * 0.5

    def atanh(self) -> "Tensor":
        """Inverse hyperbolic tangent (NaN outside [-1, 1], +-inf at +-1)."""
        x = _float(self)
        return (_log1p(x) - _log1p(-x)) * 0.5

    def asinh(self) -> "Tensor":
        """Inverse hyperbolic sine, accurate near 0 and for large |x|."""
        x = _float(self)
        negative = x < 0
        a = negative.where(-x, x)
        large = a > _LARGE
        small = large.where(0, a)
        near = _log1p(small + small * small / ((small * small + 1).sqrt() + 1))
        far = large.where(a, 1).log() + math.log(2)
        out = large.where(far, near)
        return negative.where(-out, out)

    def acosh(self) -> "Tensor":
        """Inverse hyperbolic cosine (NaN below 1), accurate near 1 and for large x. The
        derivative is 1 / sqrt(x^2 - 1) wherever that is defined, below -1 too (PyTorch's)."""
        x = _float(self)
        mirrored = x <= -1
        out = _acosh_from_one(mirrored.where(-x, x))
        return mirrored.where(math.nan - out, out)

    # ------------------------------------------------------------------ inverse trigonometric
    def atan(self) -> "Tensor":
        """Inverse tangent."""
        x = _float(self)
        return P.atan2_p.bind(x, x.ones_like())

    def asin(self) -> "Tensor":
        """Inverse sine (NaN outside [-1, 1])."""
        x = _float(self)
        return P.atan2_p.bind(x, ((1 - x) * (1 + x)).sqrt())

    def acos(self) -> "Tensor":
        """Inverse cosine (NaN outside [-1, 1])."""
        x = _float(self)
        return P.atan2_p.bind(((1 - x) * (1 + x)).sqrt(), x)

    # ------------------------------------------------------------------ comparison
    def isclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08,
                equal_nan: bool = False) -> "Tensor":
        """|self - other| <= atol + rtol * |other| elementwise; equal infinities are close."""
        x, y = coerce("isclose", self, other)
        x, y = _float(x), _float(y)
        near = (x - y).abs() <= (y.abs() * rtol + atol)
        close = (x.isfinite() & y.isfinite() & near) | ((x.isinf() | y.isinf()) & (x == y))
        return close | (x.isnan() & y.isnan()) if equal_nan else close

    def allclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08,
                 equal_nan: bool = False) -> "Tensor":
        """True (a 0-d bool Tensor) if every element of self is close to other."""
        return self.isclose(other, rtol=rtol, atol=atol, equal_nan=equal_nan).all()

    # ------------------------------------------------------------------ statistics
    def var(self, axis: Axis = None, keepdim: bool = False, correction: int = 1, *,
            keepdims: bool | None = None, ddof: int | None = None, where: Any = None,
            dtype: Any = None) -> "Tensor":
        """Variance over `axis`: the sum of squared deviations over n - correction (Bessel's
        correction 1 by default, unlike NumPy's ddof=0); inf or NaN, with NaN gradients, when
        that is <= 0. NumPy's keepdims=, ddof= (correction), where= and dtype= work too."""
        if keepdims is not None or ddof is not None or where is not None or dtype is not None:
            return _np.numpy_var(cast("Tensor", self), "var", axis, keepdim, correction,
                                 keepdims, ddof, where, dtype)
        x, out_dtype = _widened(cast("Tensor", self))
        axes = _axes(x, axis)
        squares = (x - x.mean(axes, keepdim=True)).square()
        dof = _count(x.shape, axes) - correction
        total = squares.sum(axes, keepdim)
        # no degrees of freedom: inf (NaN for 0 / 0) with NaN gradients, as PyTorch
        return (total / dof if dof > 0 else total * math.inf).cast(out_dtype)

    def std(self, axis: Axis = None, keepdim: bool = False, correction: int = 1, *,
            keepdims: bool | None = None, ddof: int | None = None, where: Any = None,
            dtype: Any = None) -> "Tensor":
        """Standard deviation over `axis` (the square root of var; correction 1 by default);
        NumPy's keepdims=, ddof= (correction), where= and dtype= work too."""
        if keepdims is not None or ddof is not None or where is not None or dtype is not None:
            return _np.numpy_var(cast("Tensor", self), "std", axis, keepdim, correction,
                                 keepdims, ddof, where, dtype)
        x, out_dtype = _widened(cast("Tensor", self))
        return x.var(axis, keepdim, correction).sqrt().cast(out_dtype)

    def var_mean(self, axis: Axis = None, keepdim: bool = False, correction: int = 1, *,
                 keepdims: bool | None = None) -> tuple["Tensor", "Tensor"]:
        """(var, mean) over `axis` (keepdims= is accepted for keepdim)."""
        if keepdims is not None:
            keepdim = _np.keep_flag("var_mean", keepdim, keepdims)
        return self.var(axis, keepdim, correction), self.mean(axis, keepdim)

    def std_mean(self, axis: Axis = None, keepdim: bool = False, correction: int = 1, *,
                 keepdims: bool | None = None) -> tuple["Tensor", "Tensor"]:
        """(std, mean) over `axis` (keepdims= is accepted for keepdim)."""
        if keepdims is not None:
            keepdim = _np.keep_flag("std_mean", keepdim, keepdims)
        return self.std(axis, keepdim, correction), self.mean(axis, keepdim)

    # ------------------------------------------------------------------ softmax family
    def _softmax_parts(self, axis: int, dtype: Any) -> tuple["Tensor", "Tensor", DType]:
        x, out_dtype = _widened(cast("Tensor", self) if dtype is None else self.cast(dtype))
        axes = (x._axis(axis),) if x.ndim else ()
        shifted = x - _shift(x, axes)
        return shifted, shifted.exp().sum(axes, keepdim=True), out_dtype

    def softmax(self, axis: int = -1, dtype: Any = None) -> "Tensor":
        """exp(x) / sum(exp(x)) along `axis`, computed from x - max(x). Like PyTorch, it
        multiplies by the sum's reciprocal (one division per row, not per element; within
        an ulp of dividing)."""
        shifted, total, out_dtype = self._softmax_parts(axis, dtype)
        return (shifted.exp() * total.reciprocal()).cast(out_dtype)

    def log_softmax(self, axis: int = -1, dtype: Any = None) -> "Tensor":
        """x - logsumexp(x) along `axis`."""
        shifted, total, out_dtype = self._softmax_parts(axis, dtype)
        return (shifted - total.log()).cast(out_dtype)

    def logsumexp(self, axis: Axis = None, keepdim: bool = False, *,
                  keepdims: bool | None = None) -> "Tensor":
        """log(sum(exp(x))) over `axis`, computed from x - max(x) (keepdims= is accepted for
        keepdim)."""
        if keepdims is not None:
            keepdim = _np.keep_flag("logsumexp", keepdim, keepdims)
        x, out_dtype = _widened(cast("Tensor", self))
        axes = _axes(x, axis)
        m = _shift(x, axes)
        out = (x - m).exp().sum(axes, keepdim=True).log() + m
        if not keepdim:
            out = out.reshape(tuple(d for i, d in enumerate(x.shape) if i not in axes))
        return out.cast(out_dtype)

    def logcumsumexp(self, axis: int = 0) -> "Tensor":
        """log(cumsum(exp(x))) along `axis`, by log2(n) pairwise log-add-exp doubling steps."""
        x, out_dtype = _widened(cast("Tensor", self))
        if x.ndim == 0:
            return x.cast(out_dtype)
        a, step = x._axis(axis), 1
        while step < x.shape[a]:
            config = [(step, -step, 0) if i == a else (0, 0, 0) for i in range(x.ndim)]
            x = _logaddexp(x, P.pad(x, config, float("-inf")))
            step *= 2
        return x.cast(out_dtype)

    # ------------------------------------------------------------------ cumulative
    def _cumulative(self, axis: int | None, kind: str, dtype: Any = None) -> "Tensor":
        if axis is None:  # NumPy: along the flattened Tensor
            return self.reshape(-1)._cumulative(0, kind, dtype)
        x = self.cast(sum_dtype(self.dtype) if dtype is None else dtype)
        a = x._axis(axis)  # 0-d: only 0 and -1 are valid
        return x if x.ndim == 0 else P.cumulative(x, a, False, kind)

    def cumsum(self, axis: int | None = 0, *, dtype: Any = None) -> "Tensor":
        """Running sum along `axis` (0 by default, as tinygrad; None: of the flattened Tensor,
        as NumPy); bools and small ints accumulate in int32, or in `dtype` if given."""
        return self._cumulative(axis, "cumsum", dtype)

    def cumprod(self, axis: int | None, *, dtype: Any = None) -> "Tensor":
        """Running product along `axis` (None: of the flattened Tensor), in `dtype` if given."""
        return self._cumulative(axis, "cumprod", dtype)

    def _cum_extremum(self, axis: int, kind: str) -> tuple["Tensor", "Tensor"]:
        from fgrad.core.tensor import Tensor
        a = self._axis(axis)  # 0-d: only 0 and -1 are valid
        if self.ndim == 0:
            return cast(Tensor, self), Tensor.zeros((), dtype=dtypes.int32)
        values = P.cumulative(self, a, False, kind)
        hit = self == values
        if self.dtype.is_float:
            hit = hit | self.isnan()
        marker = hit.where(P.iota(dtypes.int32, self.shape, a), -1)
        return values, P.cumulative(marker, a, False, "cummax")

    def cummax(self, axis: int = 0) -> tuple["Tensor", "Tensor"]:
        """(running max, int32 index where it occurred, the latest one on ties) along `axis`."""
        return self._cum_extremum(axis, "cummax")

    def cummin(self, axis: int = 0) -> tuple["Tensor", "Tensor"]:
        """(running min, int32 index where it occurred, the latest one on ties) along `axis`."""
        return self._cum_extremum(axis, "cummin")

    def multinomial(self, num_samples: int = 1, replacement: bool = False, *,
                    key: Any) -> "Tensor":
        """`num_samples` int32 indices drawn with probability proportional to self (1-d, or
        one distribution per row of a 2-d Tensor); without replacement (the default) they
        are distinct (Gumbel top-k). Needs `key=` from fgrad.random."""
        from fgrad.core import random
        if self.ndim not in (1, 2) or num_samples < 1:
            raise ArgumentError(f"multinomial: weights must be 1-d or 2-d and num_samples >= 1, "
                                f"got shape {self.shape} and num_samples={num_samples}")
        w = self.reshape(1, -1) if self.ndim == 1 else cast("Tensor", self)
        w = w.cast(dtypes.float32) if not w.dtype.is_float else w
        rows, n = w.shape
        if not replacement and num_samples > n:
            raise ArgumentError(f"multinomial: cannot draw {num_samples} distinct samples from "
                                f"{n} categories; pass replacement=True")
        if replacement:
            cdf = w.cumsum(axis=1) / w.sum(axis=1, keepdim=True)
            u = random.uniform(key, (rows, num_samples), cdf.dtype)
            below = (u.reshape(rows, num_samples, 1) >= cdf.reshape(rows, 1, n))
            out = below.sum(axis=2).minimum(n - 1).cast(dtypes.int32)
        else:
            logits = (w > 0).where(w.maximum(1e-38).log(), -math.inf)
            perturbed = logits + random.gumbel(key, (rows, n), logits.dtype)
            out = perturbed.topk(num_samples, dim=1)[1].cast(dtypes.int32)
        return out.reshape(num_samples) if self.ndim == 1 else out
