"""More elementwise `jax.lax` operations: inverse trigonometric and hyperbolic functions,
cbrt, exp2, nextafter, bit counting and `reduce_precision`; plus `Precision` and the
`DotDimensionNumbers` type name; and the implicitly differentiated solvers `custom_root` and
`custom_linear_solve` (built on custom_jvp, closure_convert and custom_vjp's custom_lin).

All are composed from fgrad's elementwise primitives, so they jit, vmap and differentiate.
float16 and bfloat16 are evaluated in float32 and rounded once. Differences from XLA on CPU:
`exp2` and `nextafter` return subnormal results where XLA flushes them to zero, and
`nextafter` keeps the sign of a zero reached from below (-0.0), as NumPy does.
"""
from __future__ import annotations

import enum
import math
from typing import Any, Callable, Sequence, Tuple

import numpy as np

from fgrad.core import prims as P
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.errors import ArgumentError
from fgrad.core.tensor import Tensor
from fgrad.core.tree_util import tree_map
from fgrad.lax._args import as_int, to_tensor
from fgrad.lax.elementwise import _binary, _const, _same_size, _unary

__all__ = ["DotDimensionNumbers", "Precision", "acos", "acosh", "asin", "asinh", "atan",
           "atanh", "cbrt", "clz", "cosh", "custom_linear_solve", "custom_root", "exp2",
           "nextafter", "optimization_barrier",
           "population_count", "reduce_precision", "sinh"]

DotDimensionNumbers = Tuple[Tuple[Sequence[int], Sequence[int]],
                            Tuple[Sequence[int], Sequence[int]]]


class Precision(enum.Enum):
    """Matmul/convolution precision (JAX's `lax.Precision`). fgrad always computes in the
    operands' dtype (or `preferred_element_type`), so every level gives the same result;
    the enum exists so that `precision=` arguments port unchanged. Also made from the names
    'default'/'bfloat16'/'fastest', 'high'/'bfloat16_3x'/'tensorfloat32' and
    'highest'/'float32'."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value: object) -> "Precision | None":
        names = {"default": 0, "bfloat16": 0, "fastest": 0, "high": 1, "bfloat16_3x": 1,
                 "tensorfloat32": 1, "highest": 2, "float32": 2}
        if isinstance(value, str) and value.lower() in names:
            return cls(names[value.lower()])
        return None

    def __str__(self) -> str:
        return self.name


_HALF = (dtypes.float16, dtypes.bfloat16)


def _layout(dtype: DType) -> tuple[int, int]:
    """(mantissa bits, exponent bits) of a float dtype."""
    return {2: (10, 5) if dtype == dtypes.float16 else (7, 8), 4: (23, 8),
            8: (52, 11)}[dtype.itemsize]


def _float(op: str, x: Any) -> tuple[Tensor, DType]:
    """A float operand (float16/bfloat16 widened to float32) and the dtype to return."""
    t = _unary(op, x, "f")
    return (P.convert(t, dtypes.float32) if t.dtype in _HALF else t), t.dtype


def _back(y: Tensor, dtype: DType) -> Tensor:
    return y if y.dtype == dtype else P.convert(y, dtype)


def _c(value: float, like: Tensor) -> Tensor:
    return _const(value, like)


def _odd(t: Tensor, mag: Tensor) -> Tensor:
    """An odd function from its value at |t|: negated for negative t, and t itself at
    +-0 (so -0.0 maps to -0.0)."""
    signed = P.select(P.lt_p.bind(t, _c(0.0, t)), P.neg_p.bind(mag), mag)
    return P.select(P.eq_p.bind(t, _c(0.0, t)), t, signed)


def atan(x: Any) -> Tensor:
    """The inverse tangent, in (-pi/2, pi/2)."""
    t, dt = _float("atan", x)
    return _back(P.atan2_p.bind(t, _c(1.0, t)), dt)


def asin(x: Any) -> Tensor:
    """The inverse sine, in [-pi/2, pi/2] (NaN outside [-1, 1])."""
    t, dt = _float("asin", x)
    one = _c(1.0, t)
    root = (P.sub_p.bind(one, t) * P.add_p.bind(one, t)).sqrt()
    return _back(_c(2.0, t) * P.atan2_p.bind(t, one + root), dt)


def acos(x: Any) -> Tensor:
    """The inverse cosine, in [0, pi] (NaN outside [-1, 1])."""
    t, dt = _float("acos", x)
    one = _c(1.0, t)
    root = (P.sub_p.bind(one, t) * P.add_p.bind(one, t)).sqrt()
    minus_one = P.eq_p.bind(t, _c(-1.0, t))
    den = P.select(minus_one, one, one + t)
    out = P.select(minus_one, _c(math.pi, t), _c(2.0, t) * P.atan2_p.bind(root, den))
    return _back(out, dt)


def _big(t: Tensor) -> float:
    """Above this, x*x overflows: use log(x) + log(2) for acosh/asinh."""
    return float(np.sqrt(np.finfo(t.dtype.np).max)) / 2


def acosh(x: Any) -> Tensor:
    """The inverse hyperbolic cosine, >= 0 (NaN below 1)."""
    t, dt = _float("acosh", x)
    big = P.ge_p.bind(t, _c(_big(t), t))
    y = P.select(big, _c(1.0, t), t) - 1.0
    small = P.log1p_p.bind(y + (y * (y + 2.0)).sqrt())
    large = P.log_p.bind(P.select(big, t, _c(1.0, t))) + math.log(2.0)
    return _back(P.select(big, large, small), dt)


def asinh(x: Any) -> Tensor:
    """The inverse hyperbolic sine (odd; -0.0 stays -0.0)."""
    t, dt = _float("asinh", x)
    a = P.abs_p.bind(t)
    big = P.ge_p.bind(a, _c(_big(t), t))
    s = P.select(big, _c(1.0, t), a)
    small = P.log1p_p.bind(s + s * s / (((s * s) + 1.0).sqrt() + 1.0))
    large = P.log_p.bind(P.select(big, a, _c(1.0, t))) + math.log(2.0)
    return _back(_odd(t, P.select(big, large, small)), dt)


def atanh(x: Any) -> Tensor:
    """The inverse hyperbolic tangent (+-inf at +-1, NaN outside [-1, 1])."""
    t, dt = _float("atanh", x)
    a = P.abs_p.bind(t)
    mag = P.log1p_p.bind(_c(2.0, t) * a / (_c(1.0, t) - a)) * 0.5
    return _back(_odd(t, mag), dt)


def _exp_parts(t: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(|x|, whether exp(-|x|) is negligible beside exp(|x|), exp(|x|) / 2 for those)."""
    a = P.abs_p.bind(t)
    cut = 10.0 if t.dtype == dtypes.float32 else 20.0
    large = P.gt_p.bind(a, _c(cut, t))
    root = P.exp_p.bind(P.select(large, a, _c(cut, t)) * 0.5)
    return a, large, root * 0.5 * root


def sinh(x: Any) -> Tensor:
    """The hyperbolic sine, accurate near 0 and finite up to where it overflows."""
    t, dt = _float("sinh", x)
    a, large, half_exp = _exp_parts(t)
    e = P.expm1_p.bind(P.select(large, _c(0.0, t), a))
    mag = P.select(large, half_exp, (e + e / (e + 1.0)) * 0.5)
    return _back(_odd(t, mag), dt)


def cosh(x: Any) -> Tensor:
    """The hyperbolic cosine, finite up to where it overflows."""
    t, dt = _float("cosh", x)
    a, large, half_exp = _exp_parts(t)
    s = P.select(large, _c(0.0, t), a)
    small = (P.exp_p.bind(s) + P.exp_p.bind(P.neg_p.bind(s))) * 0.5
    return _back(P.select(large, half_exp, small), dt)


def cbrt(x: Any) -> Tensor:
    """The real cube root (odd; exact for perfect cubes that fit the dtype)."""
    t, dt = _float("cbrt", x)
    a = P.abs_p.bind(t)
    special = P.eq_p.bind(a, _c(0.0, t)) | P.eq_p.bind(a, _c(math.inf, t)) | a.isnan()
    safe = P.select(special, _c(1.0, t), a)
    r = P.pow_p.bind(safe, _c(1.0 / 3.0, t))
    r = (r * 2.0 + safe / (r * r)) / 3.0   # one Newton step fixes pow's last bit
    mag = P.select(special, a, r)
    return _back(_odd(t, mag), dt)


def _power_of_two(k: Tensor, like: Tensor) -> Tensor:
    """2**k exactly, for integer k (int32) inside the normal exponent range of `like`."""
    mant, ebits = _layout(like.dtype)
    bias = (1 << (ebits - 1)) - 1
    idt = _same_size(like.dtype, "i")
    biased = P.convert(k + bias, idt)
    return P.bitcast(P.shift_left_p.bind(biased, _const(mant, biased)), like.dtype)


def exp2(x: Any) -> Tensor:
    """2 ** x, exact at integers (including the subnormal range)."""
    t, dt = _float("exp2", x)
    limit = 3 * ((1 << (_layout(t.dtype)[1] - 1)) - 2)
    finite = t.isfinite()
    s = P.select(finite, t, _c(0.0, t))
    n = P.floor_p.bind(s + 0.5)
    r = P.exp_p.bind((s - n) * math.log(2.0))
    k = P.convert(P.select(P.gt_p.bind(n, _c(limit, t)), _c(limit, t),
                           P.select(P.lt_p.bind(n, _c(-limit, t)), _c(-limit, t), n)),
                  dtypes.int32)
    k1 = P.div_p.bind(k, _const(3, k))
    k2 = P.div_p.bind(k - k1, _const(2, k))
    out = r * _power_of_two(k1, t) * _power_of_two(k2, t) * _power_of_two(k - k1 - k2, t)
    inf_out = P.select(P.gt_p.bind(t, _c(0.0, t)), _c(math.inf, t), _c(0.0, t))
    return _back(P.select(finite, out, P.select(t.isnan(), t, inf_out)), dt)


def nextafter(x1: Any, x2: Any) -> Tensor:
    """The next representable float after `x1` in the direction of `x2` (NumPy's
    nextafter; subnormals included)."""
    a, b = _binary("nextafter", x1, x2, "f")
    idt = _same_size(a.dtype, "i")
    bits = P.bitcast(a, idt)
    away = P.eq_p.bind(P.gt_p.bind(b, a), P.gt_p.bind(a, _c(0.0, a)))
    step = P.select(away, _const(1, bits), _const(-1, bits))
    moved = P.bitcast(bits + step, a.dtype)
    tiny = P.bitcast(_const(1, bits), a.dtype)
    from_zero = P.select(P.lt_p.bind(b, _c(0.0, b)), P.neg_p.bind(tiny), tiny)
    out = P.select(P.eq_p.bind(a, _c(0.0, a)), from_zero, moved)
    out = P.select(P.eq_p.bind(a, b), b, out)
    return P.select(a.isnan() | b.isnan(), a + b, out)


def _unsigned(op: str, x: Any) -> tuple[Tensor, DType]:
    t = _unary(op, x, "iu")
    return (t if t.dtype.is_unsigned else P.bitcast(t, _same_size(t.dtype, "u"))), t.dtype


def _mask(pattern: int, like: Tensor) -> Tensor:
    bits = like.dtype.itemsize * 8
    return _const(int.from_bytes(bytes([pattern]) * (bits // 8), "little"), like)


def population_count(x: Any) -> Tensor:
    """The number of set bits of each integer (same dtype as x)."""
    v, dt = _unsigned("population_count", x)
    bits = dt.itemsize * 8

    def shr(y: Tensor, n: int) -> Tensor:
        return P.shift_right_p.bind(y, _const(n, y))

    v = v - P.and_p.bind(shr(v, 1), _mask(0x55, v))
    v = P.and_p.bind(v, _mask(0x33, v)) + P.and_p.bind(shr(v, 2), _mask(0x33, v))
    v = P.and_p.bind(v + shr(v, 4), _mask(0x0F, v))
    n = 8
    while n < bits:
        v = v + shr(v, n)
        n *= 2
    v = P.and_p.bind(v, _const(0x7F, v))
    return v if v.dtype == dt else P.bitcast(v, dt)


def clz(x: Any) -> Tensor:
    """The number of leading zero bits of each integer (its bit width for 0)."""
    v, dt = _unsigned("clz", x)
    bits = dt.itemsize * 8
    count = _const(0, v)
    s = bits // 2
    while s >= 1:
        zero_top = P.eq_p.bind(P.shift_right_p.bind(v, _const(bits - s, v)), _const(0, v))
        count = P.select(zero_top, count + s, count)
        v = P.select(zero_top, P.shift_left_p.bind(v, _const(s, v)), v)
        s //= 2
    count = count + P.convert(P.eq_p.bind(P.shift_right_p.bind(v, _const(bits - 1, v)),
                                          _const(0, v)), v.dtype)
    return count if count.dtype == dt else P.bitcast(count, dt)


def reduce_precision(operand: Any, exponent_bits: int, mantissa_bits: int) -> Tensor:
    """`operand` rounded (to nearest, ties to even) to a float format with `exponent_bits`
    and `mantissa_bits`, then stored back in its own dtype: values beyond the format's range
    become +-inf, values below its smallest normal become +-0 (the format has no
    subnormals), NaN stays NaN."""
    op = "reduce_precision"
    t = _unary(op, operand, "f")
    ebits, mbits = as_int(op, exponent_bits, "exponent_bits"), as_int(op, mantissa_bits,
                                                                          "mantissa_bits")
    if ebits < 1 or mbits < 0:
        raise ArgumentError(f"lax.reduce_precision: exponent_bits must be >= 1 and "
                            f"mantissa_bits >= 0, got {ebits} and {mbits}")
    src_m, src_e = _layout(t.dtype)
    width = t.dtype.itemsize * 8
    udt = _same_size(t.dtype, "u")
    v = P.bitcast(t, udt)
    if mbits < src_m:
        drop = src_m - mbits
        last = 1 << drop
        lsb = P.and_p.bind(P.shift_right_p.bind(v, _const(drop, v)), _const(1, v))
        v = v + lsb + _const((last >> 1) - 1, v)
        v = P.and_p.bind(v, _const(((1 << width) - 1) ^ (last - 1), v))
    if ebits < src_e:
        exp_mask = ((1 << src_e) - 1) << src_m
        bias, reduced = (1 << (src_e - 1)) - 1, (1 << (ebits - 1)) - 1
        e = P.and_p.bind(v, _const(exp_mask, v))
        sign = P.and_p.bind(v, _const(1 << (width - 1), v))
        over = P.gt_p.bind(e, _const((bias + reduced) << src_m, v))
        under = P.le_p.bind(e, _const((bias - reduced) << src_m, v))
        v = P.select(over, P.or_p.bind(sign, _const(exp_mask, v)), P.select(under, sign, v))
    out = P.bitcast(v, t.dtype)
    return P.select(t.isnan(), t, out)


def optimization_barrier(operand: Any, /) -> Any:
    """`operand` (any pytree of arrays) unchanged, its leaves as Tensors. fgrad does not
    model XLA's scheduling barrier: values, gradients and batching are those of the
    identity; only the ordering guarantee XLA gives is absent."""
    return tree_map(lambda v: to_tensor("optimization_barrier", v, "operand"), operand)


# ------------------------------------------------------------- implicitly differentiated solves
# Both are a `custom_jvp` of the solver over (right-hand side or guess, *hoisted parameters):
# `closure_convert` hoists the traced values `f`/`matvec` close over so they get tangents;
# values `solve` closes over get none (JAX's rule). Under reverse mode (a tangent staged by
# linearize) the tangent solve is a `custom_lin` equation whose transpose calls
# `transpose_solve` on the transposed matvec; elsewhere it is `solve` applied to the tangent.

def _float_leaves(tree: Any, who: str, what: str) -> tuple[list[Tensor], Any]:
    from fgrad.core.tensor import as_tensor
    from fgrad.core.tree_util import tree_flatten
    leaves, treedef = tree_flatten(tree)
    out = [as_tensor(x) for x in leaves]
    for i, x in enumerate(out):
        if not x.dtype.is_float:
            raise TypeError(f"{who}: {what} must hold floating-point arrays, but leaf {i} has "
                            f"dtype {x.dtype.name}; convert it with .astype(float32)")
    return out, treedef


def _like(value: Any, ref_leaves: list[Tensor], ref_tree: Any, who: str, what: str) -> None:
    """Raise TypeError unless `value` has the tree, shapes and dtypes of the reference."""
    from fgrad.core.tensor import as_tensor
    from fgrad.core.tree_util import tree_flatten
    leaves, treedef = tree_flatten(value)
    got = [as_tensor(x).aval for x in leaves]
    want = [x.aval for x in ref_leaves]
    if treedef != ref_tree or [(a.shape, a.dtype) for a in got] != \
            [(a.shape, a.dtype) for a in want]:
        raise TypeError(f"{who}: {what} must have the structure, shapes and dtypes of the "
                        f"input ({ref_tree}: {want}), got {treedef}: {got}")


def _split_aux(out: Any, has_aux: bool, who: str, fn: str) -> tuple[Any, Any]:
    if not has_aux:
        return out, None
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(f"{who}: with has_aux=True, {fn} must return a pair (solution, aux); "
                        f"got {type(out).__name__}")
    return out[0], out[1]


def _no_tangent(tree: Any) -> Any:
    from fgrad.core.tensor import as_tensor
    return tree_map(lambda v: as_tensor(v).zeros_like(), tree)


def _in_linearize(leaves: list[Any]) -> bool:
    """Whether a tangent is being staged by linearize (reverse mode), so the solve's transpose
    rule will be applied to it rather than its value computed."""
    from fgrad.core.staging import StagingTrace, StagingTracer
    from fgrad.transforms.transpose import LINEARIZE_TRACE
    return any(isinstance(x, StagingTracer) and isinstance(x._trace, StagingTrace)
               and x._trace.partial and x._trace.name == LINEARIZE_TRACE for x in leaves)


def _vecmat(mv: Callable[..., Any], cs: Sequence[Any], example: Any,
            symmetric: bool) -> Callable[[Any], Any]:
    """The transpose of `x -> mv(x, *cs)` (itself when symmetric)."""
    from fgrad.transforms.extras.linear import linear_transpose
    if symmetric:
        return lambda y: mv(y, *cs)
    transposed = linear_transpose(lambda x: mv(x, *cs), example)
    return lambda y: transposed(y)[0]


class _Solvers:
    """`solve` and `transpose_solve` staged as closure-free functions of (rhs, *matvec
    consts, *their own hoisted consts), so transpose time never sees a dead tracer."""

    def __init__(self, mv: Callable[..., Any], cs: Sequence[Any], b: Any, solve: Callable,
                 tsolve: Callable | None, symmetric: bool, has_aux: bool, who: str):
        from fgrad.transforms.extras.linear import closure_convert
        self.mv, self.symmetric, self.has_aux, self.who = mv, symmetric, has_aux, who
        self.n_cs = len(cs)
        self.sv, s_consts = closure_convert(
            lambda r, *c: solve(lambda x: mv(x, *c), r), b, *cs)
        self.tv: Callable[..., Any] | None = None
        t_consts: list[Any] = []
        if tsolve is not None:
            self.tv, t_consts = closure_convert(
                lambda r, *c: tsolve(_vecmat(mv, c, r, symmetric), r), b, *cs)
        self.n_s = len(s_consts)
        self.consts = list(cs) + list(s_consts) + list(t_consts)

    def split(self, consts: Sequence[Any]) -> tuple[list, list, list]:
        a, b = self.n_cs, self.n_cs + self.n_s
        return list(consts[:a]), list(consts[a:b]), list(consts[b:])

    def solve(self, rhs: Any, consts: Sequence[Any]) -> Any:
        cs, ss, _ = self.split(consts)
        return self.sv(rhs, *cs, *ss)

    def tangent(self, rhs: Any, consts: Sequence[Any]) -> Any:
        """x with mv(x, *cs) == rhs, linear in rhs; reverse mode transposes it with the
        transpose solve."""
        from fgrad.core.tree_util import tree_flatten, tree_leaves, tree_unflatten
        from fgrad.transforms.custom import custom_lin_p
        leaves, treedef = tree_flatten(rhs)
        if not _in_linearize(leaves):
            return _split_aux(self.solve(rhs, consts), self.has_aux, self.who, "solve")[0]
        if self.tv is None:
            raise TypeError(f"{self.who}: reverse-mode differentiation (grad/vjp) needs "
                            f"transpose_solve, or symmetric=True when the map is symmetric")

        def bwd(res: list[Any], _tree: Any, cts: list[Any]) -> list[Any]:
            ct = tree_unflatten(treedef, list(cts))
            cs, ss, ts = self.split(res)
            tv, sv = self.tv, self.sv
            assert tv is not None
            lam = custom_linear_solve(_vecmat(self.mv, cs, ct, self.symmetric), ct,
                                      lambda _, r: tv(r, *cs, *ts),
                                      transpose_solve=lambda _, r: sv(r, *cs, *ss),
                                      symmetric=self.symmetric, has_aux=self.has_aux)
            return tree_leaves(lam[0] if self.has_aux else lam)

        outs = custom_lin_p.bind(*consts, *leaves, bwd=bwd, res_tree=None,
                                 num_res=len(consts), out_avals=tuple(x.aval for x in leaves))
        return tree_unflatten(treedef, list(outs))


def custom_linear_solve(matvec: Callable[[Any], Any], b: Any,
                        solve: Callable[[Callable[[Any], Any], Any], Any],
                        transpose_solve: Callable[[Callable[[Any], Any], Any], Any] | None = None,
                        symmetric: bool = False, has_aux: bool = False) -> Any:
    """JAX's `lax.custom_linear_solve`: `solve(matvec, b)` (a pytree like `b`; with
    `has_aux=True` solve returns `(x, aux)` and so does this), differentiated implicitly
    from `matvec(x) == b` instead of through `solve`: the tangent solves the same system
    with right-hand side `b_dot - d(matvec)(x)`, and reverse mode solves the transposed
    system with `transpose_solve(vecmat, ct)` (`vecmat` is matvec's transpose; with
    `symmetric=True` it is `matvec` and `solve` is the default `transpose_solve`).
    Traced values `matvec` closes over get gradients; those the solves close over do not.
    Reverse mode applies `transpose_solve` under grad/vjp (also inside jit or vmap); when
    the differentiation crosses a jit or vmap boundary (grad(jit(f)), grad(vmap(f))) the
    tangent is `solve` itself, which must then be differentiable."""
    who = "custom_linear_solve"
    for name, fn in (("matvec", matvec), ("solve", solve), ("transpose_solve", transpose_solve)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{who}: {name} must be a function, got {type(fn).__name__}")
    from fgrad.core.tree_util import tree_unflatten
    from fgrad.transforms.extras.linear import closure_convert
    b_leaves, b_tree = _float_leaves(b, who, "b")
    b = tree_unflatten(b_tree, b_leaves)
    mv, consts = closure_convert(matvec, b)
    _like(mv(b, *consts), b_leaves, b_tree, who, "matvec(x)")
    tsolve = solve if transpose_solve is None and symmetric else transpose_solve
    solvers = _Solvers(mv, consts, b, solve, tsolve, symmetric, has_aux, who)
    return _linear_solve(solvers, b)


def _linear_solve(sol: _Solvers, b: Any) -> Any:
    from fgrad.core.tree_util import tree_flatten
    from fgrad.transforms.custom import custom_jvp
    from fgrad.transforms.jvp import jvp
    who, has_aux = sol.who, sol.has_aux
    b_leaves, b_tree = tree_flatten(b)

    def value(rhs: Any, *consts: Any) -> Any:
        out = sol.solve(rhs, consts)
        _like(_split_aux(out, has_aux, who, "solve")[0], b_leaves, b_tree, who, "solve's x")
        return tuple(out) if has_aux else out

    def rule(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
        (rhs, *consts), (rhs_dot, *consts_dot) = primals, tangents
        out = value(rhs, *consts)
        x, aux = _split_aux(out, has_aux, who, "solve")
        cs, cs_dot = consts[:sol.n_cs], consts_dot[:sol.n_cs]
        if cs:
            _, mv_dot = jvp(lambda *c: sol.mv(x, *c), tuple(cs), tuple(cs_dot))
            rhs_dot = tree_map(lambda u, v: u - v, rhs_dot, mv_dot)
        x_dot = sol.tangent(rhs_dot, consts)
        return out, ((x_dot, _no_tangent(aux)) if has_aux else x_dot)

    wrapped = custom_jvp(value)
    wrapped.defjvp(rule)
    return wrapped(b, *sol.consts)


def custom_root(f: Callable[[Any], Any], initial_guess: Any,
                solve: Callable[[Callable[[Any], Any], Any], Any],
                tangent_solve: Callable[[Callable[[Any], Any], Any], Any],
                has_aux: bool = False) -> Any:
    """JAX's `lax.custom_root`: the root `solve(f, initial_guess)` of `f(x) == 0` (with
    `has_aux=True` solve returns `(root, aux)` and so does this), differentiated by the
    implicit function theorem instead of through `solve`: the root's tangent is
    `-tangent_solve(g, df/dθ θ_dot)`, where `g` is `f` linearized at the root and
    `tangent_solve(g, y)` returns `v` with `g(v) == y` (scalar: `lambda g, y: y / g(1.0)`).
    θ are the traced values `f` closes over; `initial_guess` and values `solve` closes over
    get no gradient. Reverse mode transposes the tangent solve with `tangent_solve` on the
    transposed linearization."""
    who = "custom_root"
    for name, fn in (("f", f), ("solve", solve), ("tangent_solve", tangent_solve)):
        if not callable(fn):
            raise TypeError(f"{who}: {name} must be a function, got {type(fn).__name__}")
    from fgrad.core.tree_util import tree_unflatten
    from fgrad.transforms.custom import custom_jvp
    from fgrad.transforms.extras.linear import closure_convert
    from fgrad.transforms.jvp import jvp
    x_leaves, x_tree = _float_leaves(initial_guess, who, "initial_guess")
    guess = tree_unflatten(x_tree, x_leaves)
    fc, consts = closure_convert(f, guess)
    _like(fc(guess, *consts), x_leaves, x_tree, who, "f(x)")
    n_f = len(consts)
    rs, r_consts = closure_convert(lambda x0, *c: solve(lambda x: fc(x, *c), x0), guess,
                                   *consts)

    def value(x0: Any, *cs: Any) -> Any:
        out = rs(x0, *cs)
        _like(_split_aux(out, has_aux, who, "solve")[0], x_leaves, x_tree, who, "the root")
        return tuple(out) if has_aux else out

    def rule(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
        (x0, *cs), (_, *cs_dot) = primals, tangents
        out = value(x0, *cs)
        root, aux = _split_aux(out, has_aux, who, "solve")
        fcs, fcs_dot = cs[:n_f], cs_dot[:n_f]
        if fcs:
            _, rhs = jvp(lambda *c: fc(root, *c), tuple(fcs), tuple(fcs_dot))

            def g(v: Any) -> Any:
                return jvp(lambda x: fc(x, *fcs), (root,), (v,))[1]

            gc, g_consts = closure_convert(g, rhs)
            tangent = _Solvers(gc, g_consts, rhs, tangent_solve, tangent_solve, False, False,
                               who)
            root_dot = tree_map(lambda v: -v, tangent.tangent(rhs, tangent.consts))
        else:
            root_dot = _no_tangent(root)
        return out, ((root_dot, _no_tangent(aux)) if has_aux else root_dot)

    wrapped = custom_jvp(value)
    wrapped.defjvp(rule)
    return wrapped(guess, *consts, *r_consts)
