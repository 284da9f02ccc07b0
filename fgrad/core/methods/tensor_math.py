"""Tensor arithmetic: Python operators, dtype promotion, broadcasting, elementwise math."""
from __future__ import annotations

import builtins
import math
from typing import TYPE_CHECKING, Any, Callable, cast

from fgrad.core import dtypes as _dt
from fgrad.core import prims as P
from fgrad.core.precision import promote_checked
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.errors import ArgumentError, ArgumentTypeError
from fgrad.core.prims._util import fmt_shape

if TYPE_CHECKING:
    from fgrad.core.tensor import Tensor


def broadcast_shapes(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy broadcasting of `shapes`; the error names the op and every shape."""
    ndim = max(len(s) for s in shapes)
    out = []
    for axis in range(ndim):
        sizes = {s[axis - ndim + len(s)] for s in shapes if axis - ndim + len(s) >= 0} - {1}
        if len(sizes) > 1:
            listed = " and ".join(fmt_shape(s) for s in shapes)
            raise ArgumentError(f"{op}: cannot broadcast shapes {listed}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_to(x: "Tensor", shape: tuple[int, ...]) -> "Tensor":
    """Broadcast `x` to `shape` (NumPy rules: align trailing axes)."""
    if x.shape == shape:
        return x
    lead = len(shape) - x.ndim
    if lead < 0 or any(d not in (1, shape[lead + i]) for i, d in enumerate(x.shape)):
        raise ArgumentError(f"expand: cannot broadcast {fmt_shape(x.shape)} to {fmt_shape(shape)}")
    return P.broadcast_in_dim(x, shape, tuple(range(lead, len(shape))))


def _as_operand(x: Any) -> tuple[Any, str | None]:
    from fgrad.core.tensor import Tensor
    if isinstance(x, Tensor):
        return x, None
    kind = _dt.weak_type_of(x)
    if kind is not None:
        return x, kind
    return Tensor(x), None


def coerce(op: str, x: Any, y: Any) -> tuple["Tensor", "Tensor"]:
    """Promote dtypes (Python scalars are weak) and broadcast two operands of `op`."""
    from fgrad.core.tensor import Tensor
    x, kx = _as_operand(x)
    y, ky = _as_operand(y)
    if kx and ky:
        x = Tensor(x)
        x, kx = x, None
    if kx:
        dtype = _dt.result_dtype(y.dtype, kx)
        x = Tensor(x, dtype=dtype)
    elif ky:
        dtype = _dt.result_dtype(x.dtype, ky)
        y = Tensor(y, dtype=dtype)
    else:
        dtype = promote_checked(x.dtype, y.dtype, op)
    x, y = x.cast(dtype), y.cast(dtype)
    shape = broadcast_shapes(op, x.shape, y.shape)
    return broadcast_to(x, shape), broadcast_to(y, shape)


def _float_input(x: "Tensor") -> "Tensor":
    return x if x.dtype.is_float else x.cast(dtypes.default_float)


class MathMixin:
    """Operators and elementwise math for Tensor."""

    __slots__ = ()

    # ------------------------------------------------------------------ binary core
    def _binary(self, other: Any, prim: Any, op: str, reverse: bool = False) -> "Tensor":
        x, y = coerce(op, other, self) if reverse else coerce(op, self, other)
        return prim.bind(x, y)

    def add(self, other: Any, reverse: bool = False) -> "Tensor":
        """Elementwise `self + other` with broadcasting and promotion."""
        if _is_bool_pair(self, other):
            return self.logical_or(other)
        return self._binary(other, P.add_p, "add", reverse)

    def sub(self, other: Any, reverse: bool = False) -> "Tensor":
        """Elementwise `self - other`."""
        return self._binary(other, P.sub_p, "sub", reverse)

    def mul(self, other: Any, reverse: bool = False) -> "Tensor":
        """Elementwise `self * other`."""
        if _is_bool_pair(self, other):
            return self.logical_and(other)
        return self._binary(other, P.mul_p, "mul", reverse)

    def div(self, other: Any, reverse: bool = False, rounding_mode: str | None = None
            ) -> "Tensor":
        """True division (ints become float); rounding_mode 'trunc' or 'floor' as PyTorch."""
        x, y = coerce("div", other, self) if reverse else coerce("div", self, other)
        if rounding_mode is None:
            x, y = _float_input(x), _float_input(y)
            return P.div_p.bind(x, y)
        if rounding_mode == "trunc":
            if x.dtype.is_int:
                return P.div_p.bind(x, y)
            return P.div_p.bind(x, y).trunc()
        if rounding_mode == "floor":
            return x._floordiv(y)
        raise ArgumentError(f"div: rounding_mode must be None, 'trunc' or 'floor', "
                            f"got {rounding_mode!r}")

    def _floordiv(self, y: "Tensor") -> "Tensor":
        x = self
        if x.dtype.is_float:
            return P.div_p.bind(x, y).floor()
        q = P.div_p.bind(x, y)
        r = P.rem_p.bind(x, y)
        fix = (r != 0) & ((r < 0) != (y < 0))
        return q - fix.cast(q.dtype)

    def floordiv(self, other: Any, reverse: bool = False) -> "Tensor":
        """Floor division (Python's `//`)."""
        x, y = coerce("floordiv", other, self) if reverse else coerce("floordiv", self, other)
        return x._floordiv(y)

    def mod(self, other: Any, reverse: bool = False) -> "Tensor":
        """Remainder with the sign of the divisor (Python's and PyTorch's `%`)."""
        x, y = coerce("mod", other, self) if reverse else coerce("mod", self, other)
        r = P.rem_p.bind(x, y)
        fix = (r != 0) & ((r < 0) != (y < 0))
        return P.select(fix, r + y, r)

    def fmod(self, other: Any) -> "Tensor":
        """Remainder with the sign of the dividend (C's fmod)."""
        return self._binary(other, P.rem_p, "fmod")

    def pow(self, other: Any, reverse: bool = False) -> "Tensor":
        """Elementwise power. Integer to negative integer powers are an error (as in
        PyTorch) when the exponent is known; an int Tensor to a float power is float."""
        shortcut = isinstance(other, int) or isinstance(other, float) and self.dtype.is_float
        if not reverse and shortcut and not isinstance(other, bool):
            if other == 2:
                return self * self
            if other == 1:
                return self + 0
        x, y = coerce("pow", other, self) if reverse else coerce("pow", self, other)
        if x.dtype.is_int and _has_negative(y):
            raise ArgumentError(f"pow: integers to negative integer powers are not allowed "
                                f"({x.dtype.name} base, exponent {_describe(other, y)}); cast "
                                f"the base to a float dtype first")
        return P.pow_p.bind(x, y)

    def maximum(self, other: Any) -> "Tensor":
        """Elementwise maximum."""
        return self._binary(other, P.max_p, "maximum")

    def minimum(self, other: Any) -> "Tensor":
        """Elementwise minimum."""
        return self._binary(other, P.min_p, "minimum")

    def _compare(self, other: Any, prim: Any, op: str) -> "Tensor":
        return self._binary(other, prim, op)

    def eq(self, other: Any) -> "Tensor":
        """Elementwise `==` (bool result)."""
        return self._compare(other, P.eq_p, "eq")

    def ne(self, other: Any) -> "Tensor":
        """Elementwise `!=`."""
        return self._compare(other, P.ne_p, "ne")

    def __lt__(self, other: Any) -> "Tensor":
        return self._compare(other, P.lt_p, "lt")

    def __le__(self, other: Any) -> "Tensor":
        return self._compare(other, P.le_p, "le")

    def __gt__(self, other: Any) -> "Tensor":
        return self._compare(other, P.gt_p, "gt")

    def __ge__(self, other: Any) -> "Tensor":
        return self._compare(other, P.ge_p, "ge")

    def __eq__(self, other: Any) -> "Tensor":  # type: ignore[override]  # elementwise, as NumPy
        return self.eq(other)

    def __ne__(self, other: Any) -> "Tensor":  # type: ignore[override]  # elementwise, as NumPy
        return self.ne(other)

    def _bitwise(self, other: Any, prim: Any, op: str, reverse: bool = False) -> "Tensor":
        x, y = coerce(op, other, self) if reverse else coerce(op, self, other)
        if x.dtype.is_float:
            raise ArgumentTypeError(f"{op} needs bool or integer Tensors, got {x.dtype.name}")
        return prim.bind(x, y)

    def bitwise_and(self, other: Any) -> "Tensor":
        """Elementwise `&` of bool/int Tensors."""
        return self._bitwise(other, P.and_p, "bitwise_and")

    def bitwise_or(self, other: Any) -> "Tensor":
        """Elementwise `|`."""
        return self._bitwise(other, P.or_p, "bitwise_or")

    def bitwise_xor(self, other: Any) -> "Tensor":
        """Elementwise `^`."""
        return self._bitwise(other, P.xor_p, "bitwise_xor")

    def bitwise_not(self) -> "Tensor":
        """Elementwise `~` (logical not for bool)."""
        if self.dtype.is_float:
            raise ArgumentTypeError(f"bitwise_not needs bool or integer Tensors, got "
                                    f"{self.dtype.name}")
        return P.not_p.bind(self)

    def lshift(self, other: Any) -> "Tensor":
        """Shift left by `other` bits."""
        return self._bitwise(other, P.shift_left_p, "lshift")

    def rshift(self, other: Any) -> "Tensor":
        """Shift right (arithmetic for signed, logical for unsigned)."""
        return self._bitwise(other, P.shift_right_p, "rshift")

    def logical_not(self) -> "Tensor":
        """Elementwise logical not (bool result)."""
        return P.not_p.bind(self.cast(dtypes.bool))

    def logical_and(self, other: Any) -> "Tensor":
        """Elementwise logical and."""
        x, y = coerce("logical_and", self, other)
        return P.and_p.bind(x.cast(dtypes.bool), y.cast(dtypes.bool))

    def logical_or(self, other: Any) -> "Tensor":
        """Elementwise logical or."""
        x, y = coerce("logical_or", self, other)
        return P.or_p.bind(x.cast(dtypes.bool), y.cast(dtypes.bool))

    def logical_xor(self, other: Any) -> "Tensor":
        """Elementwise logical xor."""
        x, y = coerce("logical_xor", self, other)
        return P.xor_p.bind(x.cast(dtypes.bool), y.cast(dtypes.bool))

    # ------------------------------------------------------------------ operators
    def __add__(self, o: Any) -> "Tensor": return self.add(o)
    def __radd__(self, o: Any) -> "Tensor": return self.add(o, reverse=True)
    def __sub__(self, o: Any) -> "Tensor": return self.sub(o)
    def __rsub__(self, o: Any) -> "Tensor": return self.sub(o, reverse=True)
    def __mul__(self, o: Any) -> "Tensor": return self.mul(o)
    def __rmul__(self, o: Any) -> "Tensor": return self.mul(o, reverse=True)
    def __truediv__(self, o: Any) -> "Tensor": return self.div(o)
    def __rtruediv__(self, o: Any) -> "Tensor": return self.div(o, reverse=True)
    def __floordiv__(self, o: Any) -> "Tensor": return self.floordiv(o)
    def __rfloordiv__(self, o: Any) -> "Tensor": return self.floordiv(o, reverse=True)
    def __mod__(self, o: Any) -> "Tensor": return self.mod(o)
    def __rmod__(self, o: Any) -> "Tensor": return self.mod(o, reverse=True)
    def __pow__(self, o: Any) -> "Tensor": return self.pow(o)
    def __rpow__(self, o: Any) -> "Tensor": return self.pow(o, reverse=True)
    def __matmul__(self, o: Any) -> "Tensor": return self.matmul(o)
    def __rmatmul__(self, o: Any) -> "Tensor": return _tensor(o).matmul(self)
    def __and__(self, o: Any) -> "Tensor": return self.bitwise_and(o)
    def __rand__(self, o: Any) -> "Tensor": return self._bitwise(o, P.and_p, "and", True)
    def __or__(self, o: Any) -> "Tensor": return self.bitwise_or(o)
    def __ror__(self, o: Any) -> "Tensor": return self._bitwise(o, P.or_p, "or", True)
    def __xor__(self, o: Any) -> "Tensor": return self.bitwise_xor(o)
    def __rxor__(self, o: Any) -> "Tensor": return self._bitwise(o, P.xor_p, "xor", True)
    def __lshift__(self, o: Any) -> "Tensor": return self.lshift(o)
    def __rshift__(self, o: Any) -> "Tensor": return self.rshift(o)
    def __rlshift__(self, o: Any) -> "Tensor":
        return self._bitwise(o, P.shift_left_p, "lshift", True)
    def __rrshift__(self, o: Any) -> "Tensor":
        return self._bitwise(o, P.shift_right_p, "rshift", True)
    def __invert__(self) -> "Tensor": return self.bitwise_not()
    def __neg__(self) -> "Tensor": return self.neg()
    def __pos__(self) -> "Tensor": return cast("Tensor", self)
    def __abs__(self) -> "Tensor": return self.abs()

    # ------------------------------------------------------------------ unary math
    def neg(self) -> "Tensor":
        """Elementwise negation (logical not for bool)."""
        return self.logical_not() if self.dtype == dtypes.bool else P.neg_p.bind(self)

    def abs(self) -> "Tensor":
        """Elementwise absolute value."""
        return cast("Tensor", self) if self.dtype.is_unsigned or self.dtype == dtypes.bool \
            else P.abs_p.bind(self)

    def sign(self) -> "Tensor":
        """-1, 0 or 1 by the sign of each element."""
        return P.sign_p.bind(self) if self.dtype != dtypes.bool else cast("Tensor", self)

    def _float_unary(self, prim: Any) -> "Tensor":
        return prim.bind(_float_input(cast("Tensor", self)))

    def exp(self) -> "Tensor":
        """e ** x."""
        return self._float_unary(P.exp_p)

    def log(self) -> "Tensor":
        """Natural logarithm."""
        return self._float_unary(P.log_p)

    def exp2(self) -> "Tensor":
        """2 ** x."""
        return (_float_input(cast("Tensor", self)) * math.log(2)).exp()

    def log2(self) -> "Tensor":
        """Base-2 logarithm."""
        return self.log() * (1 / math.log(2))

    def sin(self) -> "Tensor":
        """Sine."""
        return self._float_unary(P.sin_p)

    def cos(self) -> "Tensor":
        """Cosine."""
        return self._float_unary(P.cos_p)

    def tan(self) -> "Tensor":
        """Tangent."""
        return self._float_unary(P.tan_p)

    def tanh(self) -> "Tensor":
        """Hyperbolic tangent."""
        return self._float_unary(P.tanh_p)

    def sigmoid(self) -> "Tensor":
        """1 / (1 + exp(-x))."""
        return self._float_unary(P.logistic_p)

    def sqrt(self) -> "Tensor":
        """Square root."""
        return self._float_unary(P.sqrt_p)

    def rsqrt(self) -> "Tensor":
        """1 / sqrt(x)."""
        return self._float_unary(P.rsqrt_p)

    def erf(self) -> "Tensor":
        """The error function."""
        return self._float_unary(P.erf_p)

    def reciprocal(self) -> "Tensor":
        """1 / x."""
        return 1.0 / _float_input(cast("Tensor", self))

    def square(self) -> "Tensor":
        """x * x."""
        return self * self

    def relu(self) -> "Tensor":
        """max(x, 0); NaN stays NaN and the derivative at 0 is 0 (as PyTorch and JAX)."""
        return (self <= 0).where(0, self)

    def _rounding(self, prim: Any) -> "Tensor":
        return cast("Tensor", self) if not self.dtype.is_float else prim.bind(self)

    def floor(self) -> "Tensor":
        """Round down."""
        return self._rounding(P.floor_p)

    def ceil(self) -> "Tensor":
        """Round up."""
        return self._rounding(P.ceil_p)

    def round(self, decimals: builtins.int = 0) -> "Tensor":
        """Round half to even (as PyTorch); to `decimals` places as NumPy's round (negative:
        to tens, hundreds, ...; integers stay integers)."""
        if decimals:
            from fgrad.core.methods.array_methods import round_decimals
            return round_decimals(cast("Tensor", self), decimals)
        return self._rounding(P.round_p)

    def trunc(self) -> "Tensor":
        """Round toward zero."""
        if not self.dtype.is_float:
            return cast("Tensor", self)
        return P.select(self < 0, self.ceil(), self.floor())

    def isnan(self) -> "Tensor":
        """True where x is NaN."""
        if not self.dtype.is_float:
            return self.cast(dtypes.bool) & False
        return P.isnan_p.bind(self)

    def isinf(self, detect_positive: bool = True, detect_negative: bool = True) -> "Tensor":
        """True where x is +inf (detect_positive) or -inf (detect_negative)."""
        pos = (self == math.inf) if detect_positive else self.cast(dtypes.bool) & False
        neg = (self == -math.inf) if detect_negative else self.cast(dtypes.bool) & False
        return pos | neg

    def isfinite(self) -> "Tensor":
        """True where x is neither inf nor NaN."""
        return (self.isinf() | self.isnan()).logical_not()

    def where(self, x: Any, y: Any) -> "Tensor":
        """`x` where self (the condition) is true, else `y`, with broadcasting."""
        x, y = coerce("where", x, y)
        cond = self.cast(dtypes.bool)
        shape = broadcast_shapes("where", cond.shape, x.shape, y.shape)
        return P.select(broadcast_to(cond, shape), broadcast_to(x, shape),
                        broadcast_to(y, shape))

    def cast(self, dtype: Any) -> "Tensor":
        """Convert to `dtype` (floats to ints truncate toward zero, saturating)."""
        return P.convert(self, _dt.to_dtype(dtype))

    def bitcast(self, dtype: Any) -> "Tensor":
        """Reinterpret the bits as `dtype` (same item size)."""
        return P.bitcast(self, _dt.to_dtype(dtype))

    def float(self) -> "Tensor":
        """Cast to float32."""
        return self.cast(dtypes.float32)

    def half(self) -> "Tensor":
        """Cast to float16."""
        return self.cast(dtypes.float16)

    def int(self) -> "Tensor":
        """Cast to int32."""
        return self.cast(dtypes.int32)

    def bool(self) -> "Tensor":
        """Cast to bool."""
        return self.cast(dtypes.bool)

    def matmul(self, x: Any, reverse: builtins.bool = False, dtype: Any = None) -> "Tensor":
        """Matrix product with NumPy's rules for 1-d operands and batch broadcasting; with
        `dtype`, both operands are cast to it first (the product's dtype)."""
        a, b = (_tensor(x), self) if reverse else (self, _tensor(x))
        if dtype is not None:
            a, b = a.cast(dtype), b.cast(dtype)
        return _linalg_core.matmul(a, b)

    def dot(self, w: Any, dtype: Any = None, *, precision: Any = None,
            preferred_element_type: Any = None) -> "Tensor":
        """Alias of matmul (as in the reference: N-d operands batch, unlike NumPy's dot); a
        0-d operand multiplies, as NumPy's. jax.Array.dot's preferred_element_type= casts
        the result; `precision` is accepted and ignored (products run in the dtype)."""
        if not isinstance(w, (builtins.bool, builtins.int, builtins.float)):
            w = _tensor(w)  # Python scalars stay weak: they multiply below
        if self.ndim and getattr(w, "ndim", 0):
            out = self.matmul(w, dtype=dtype)
        else:
            out = self * w if dtype is None else self.cast(dtype) * w
        return out if preferred_element_type is None else out.cast(preferred_element_type)


def _has_negative(y: Any) -> bool:
    """Whether a concrete integer exponent has a negative entry (False under tracing)."""
    from fgrad.core.tensor import Tracer
    return y.dtype.kind == "i" and not isinstance(y, Tracer) and bool((y.numpy() < 0).any())


def _describe(other: Any, y: Any) -> str:
    return repr(other) if isinstance(other, int) else f"a Tensor of shape {tuple(y.shape)}"


def _tensor(x: Any) -> "Tensor":
    from fgrad.core.tensor import as_tensor
    return as_tensor(x)


def _is_bool_pair(x: Any, y: Any) -> bool:
    from fgrad.core.tensor import Tensor
    y_bool = y.dtype == dtypes.bool if isinstance(y, Tensor) else isinstance(y, bool)
    return isinstance(x, Tensor) and x.dtype == dtypes.bool and y_bool


def binary_op(fn: Callable[..., Any]) -> Callable[..., Any]:
    return fn


__all__ = ["MathMixin", "broadcast_shapes", "broadcast_to", "coerce", "DType"]


# linalg_core builds on this module: imported once it is complete (kernel/build.py's note)
from fgrad.core.methods import linalg_core as _linalg_core  # noqa: E402
