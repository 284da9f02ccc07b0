"""bfloat16 computed in native kernels (llvm and opencl): no host steps, NumPy's answers.

The reference is ml_dtypes through NumPy: each ufunc computes in float32 and rounds its
result to bfloat16, which is what fgrad's kernels do after every op (docs/design.md,
"Half precision"). Transcendentals may differ from the C library's float32 by an ulp of
float32, which can move a bfloat16 rounding by one ulp (2^-8 relative): those compare with
that tolerance, the exact ops (arithmetic, comparisons, rounding, movement) exactly.
"""
from __future__ import annotations

from typing import Any, Callable

import ml_dtypes
import numpy as np
import pytest
import scipy.special

import fgrad
from fgrad import Tensor, dtypes
from fgrad.lower.llvm import runtime as llvm_runtime
from fgrad.transforms.jit_prim import open_jaxpr

pytestmark = pytest.mark.backends
BF16 = np.dtype(ml_dtypes.bfloat16)
ULP = 2.0 ** -7  # a bfloat16 ulp relative to the value (8 significant bits)
RNG = np.random.default_rng(5)


def bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (ml_dtypes: nearest, ties to even)."""
    return np.asarray(x, np.float32).astype(BF16)


def host_steps(fn: Callable[..., Any], *args: Tensor) -> list[str]:
    """The primitives the llvm plan of `fn` leaves to the NumPy impl."""
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(*args))
    return [h.eqn.primitive.name for h in llvm_runtime.plan(jaxpr).schedule.hosts()]


def check(got: Tensor, want: np.ndarray, rtol: float = 0.0) -> None:
    """bfloat16 result equal to `want` (NaN where it is NaN), or within `rtol`."""
    out = np.asarray(got.numpy())
    assert out.dtype == want.dtype and out.shape == want.shape, (out.dtype, out.shape)
    a, b = out.astype(np.float32), want.astype(np.float32)
    if rtol == 0.0:
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-30)


X = bf16(RNG.standard_normal((5, 67)) * 3)
POS = bf16(np.abs(RNG.standard_normal((5, 67))) * 3 + 0.01)
Y = bf16(RNG.standard_normal((5, 67)) * 3)
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e38, -3e38, 1e-40, 0.5, 2.5],
                   np.float32).astype(BF16)

EXACT_UNARY = {
    "neg": (lambda t: -t, lambda x: -x),
    "abs": (lambda t: t.abs(), np.abs),
    "floor": (lambda t: t.floor(), np.floor),
    "ceil": (lambda t: t.ceil(), np.ceil),
    "round": (lambda t: t.round(), np.round),
    "sqrt": (lambda t: t.abs().sqrt(), lambda x: np.sqrt(np.abs(x))),
    "square": (lambda t: t * t, lambda x: x * x),
    "relu": (lambda t: t.relu(), lambda x: np.maximum(x, BF16.type(0))),
}
CLOSE_UNARY = {
    "exp": (lambda t: t.exp(), np.exp),
    "log": (lambda t: t.abs().log(), lambda x: np.log(np.abs(x))),
    "sin": (lambda t: t.sin(), np.sin),
    "cos": (lambda t: t.cos(), np.cos),
    "tanh": (lambda t: t.tanh(), np.tanh),
    "sigmoid": (lambda t: t.sigmoid(),
                lambda x: bf16(scipy.special.expit(x.astype(np.float32)))),
    "erf": (lambda t: t.erf(), lambda x: bf16(scipy.special.erf(x.astype(np.float32)))),
    "rsqrt": (lambda t: t.abs().rsqrt(), lambda x: bf16(1.0 / np.sqrt(np.abs(x))
                                                       .astype(np.float32))),
}


@pytest.mark.parametrize("name", sorted(EXACT_UNARY) + sorted(CLOSE_UNARY))
def test_unary_ops_round_like_ml_dtypes(jit_backend: str, name: str) -> None:
    fn, ref = {**EXACT_UNARY, **CLOSE_UNARY}[name]
    t = Tensor(X)
    assert host_steps(fn, t) == []
    with np.errstate(all="ignore"):
        want = np.asarray(ref(X), BF16)
    check(fgrad.jit(fn, backend=jit_backend)(t), want, 0.0 if name in EXACT_UNARY else ULP)


BINARY = {
    "add": (lambda a, b: a + b, lambda x, y: x + y),
    "sub": (lambda a, b: a - b, lambda x, y: x - y),
    "mul": (lambda a, b: a * b, lambda x, y: x * y),
    "div": (lambda a, b: a / b, lambda x, y: x / y),
    "maximum": (lambda a, b: a.maximum(b), np.maximum),
    "minimum": (lambda a, b: a.minimum(b), np.minimum),
    "where": (lambda a, b: (a < b).where(a, b), lambda x, y: np.where(x < y, x, y)),
    "fma-like": (lambda a, b: a * b + a, lambda x, y: x * y + x),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_ops_round_after_each_op(jit_backend: str, name: str) -> None:
    fn, ref = BINARY[name]
    a, b = Tensor(X), Tensor(Y)
    assert host_steps(fn, a, b) == []
    with np.errstate(all="ignore"):
        check(fgrad.jit(fn, backend=jit_backend)(a, b), np.asarray(ref(X, Y), BF16))


def test_comparisons_and_special_values(jit_backend: str) -> None:
    t = Tensor(SPECIAL)
    fn = lambda v: ((v * v) / v, v < 1, v == v, (v + v).cast(dtypes.float32))  # noqa: E731
    assert host_steps(fn, t) == []
    sq, lt, eq, wide = fgrad.jit(fn, backend=jit_backend)(t)
    with np.errstate(all="ignore"):
        check(sq, (SPECIAL * SPECIAL) / SPECIAL)
        np.testing.assert_array_equal(np.asarray(lt.numpy()), SPECIAL < 1)
        np.testing.assert_array_equal(np.asarray(eq.numpy()), SPECIAL == SPECIAL)
        np.testing.assert_array_equal(np.asarray(wide.numpy()),
                                      (SPECIAL + SPECIAL).astype(np.float32))


def test_conversions_round_once(jit_backend: str) -> None:
    """float32 -> bfloat16 rounds to nearest even (ties, overflow to inf, tiny values,
    NaN); the exact ways back are exact; int16 -> bfloat16 rounds once."""
    bits = RNG.integers(0, 2 ** 32, 4096, dtype=np.uint64).astype(np.uint32)
    ties = np.array([0x3F808000, 0x3F818000, 0x7F7FFFFF, 0x00008000, 0x80018000,
                     0x7FC00001, 0xFFA00000], np.uint32)
    f32 = np.concatenate([bits, ties]).view(np.float32)
    ints = RNG.integers(-30000, 30000, 300).astype(np.int16)
    fn = lambda f, i: (f.cast(dtypes.bfloat16), i.cast(dtypes.bfloat16),  # noqa: E731
                       f.cast(dtypes.bfloat16).cast(dtypes.float16))
    args = Tensor(f32), Tensor(ints)
    assert host_steps(fn, *args) == []
    narrow, from_int, half = fgrad.jit(fn, backend=jit_backend)(*args)
    with np.errstate(all="ignore"):
        want = f32.astype(BF16)
        got = np.asarray(narrow.numpy())
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
        check(from_int, ints.astype(np.float32).astype(BF16))
        np.testing.assert_array_equal(np.asarray(half.numpy()),
                                      want.astype(np.float32).astype(np.float16))


def test_reductions_accumulate_in_float32(jit_backend: str) -> None:
    """sum/max/mean over each axis: float32 accumulation, one rounding (the NumPy impl)."""
    t = Tensor(X)
    fn = lambda v: (v.sum(1), v.sum(0), v.max(1), v.mean(1), v.softmax(-1))  # noqa: E731
    assert host_steps(fn, t) == []
    got = fgrad.jit(fn, backend=jit_backend)(t)
    wide = X.astype(np.float32)
    check(got[0], bf16(wide.sum(1)), ULP)
    check(got[1], bf16(wide.sum(0)), ULP)
    check(got[2], X.max(1))
    check(got[3], bf16(wide.mean(1)), 2 * ULP)
    soft = np.exp(wide - wide.max(1, keepdims=True))
    check(got[4], bf16(soft / soft.sum(1, keepdims=True)), 4 * ULP)


def test_movement_is_exact(jit_backend: str) -> None:
    t = Tensor(X)
    fn = lambda v: (v.T.pad(((1, 2), (0, 1))), v[:, ::3].cat(v[:, :2], dim=1),  # noqa: E731
                    Tensor.arange(7, dtype=dtypes.bfloat16))
    assert host_steps(fn, t) == []
    padded, joined, counted = fgrad.jit(fn, backend=jit_backend)(t)
    check(padded, np.pad(X.T, ((1, 2), (0, 1))))
    check(joined, np.concatenate([X[:, ::3], X[:, :2]], axis=1))
    check(counted, np.arange(7).astype(BF16))


def test_matmul_and_a_training_step_stay_native(jit_backend: str) -> None:
    """A bfloat16 dense layer and its gradient: float32 gemms between native conversions
    (no host step), close to float32 NumPy within bfloat16's rounding."""
    x = bf16(RNG.standard_normal((16, 40)))
    w = bf16(RNG.standard_normal((40, 24)) * 0.2)
    b = bf16(RNG.standard_normal(24) * 0.1)

    def loss(w_: Tensor, b_: Tensor, x_: Tensor) -> Tensor:
        return ((x_ @ w_ + b_).relu() ** 2).mean()

    step = lambda w_, b_, x_: fgrad.grad(loss, argnums=(0, 1))(w_, b_, x_)  # noqa: E731
    args = Tensor(w), Tensor(b), Tensor(x)
    assert host_steps(step, *args) == []
    gw, gb = fgrad.jit(step, backend=jit_backend)(*args)
    xf, wf, bf = (v.astype(np.float32) for v in (x, w, b))
    h = xf @ wf + bf
    dh = 2 * np.maximum(h, 0) / h.size
    assert np.asarray(gw.numpy()).dtype == BF16
    np.testing.assert_allclose(np.asarray(gw.numpy()).astype(np.float32), xf.T @ dh,
                               rtol=0.05, atol=0.02 * np.abs(xf.T @ dh).max())
    np.testing.assert_allclose(np.asarray(gb.numpy()).astype(np.float32), dh.sum(0),
                               rtol=0.05, atol=0.02 * np.abs(dh.sum(0)).max())


WIDE = np.array([1 + 2 ** -8 + 2 ** -30, 1 + 2 ** -11 + 2 ** -40, -(1 + 2 ** -11 + 2 ** -40),
                 65519.99, 65520.0, 1e-8, 2 ** -25 + 2 ** -50, 3e38, -1e300, np.nan, np.inf,
                 0.1, -0.0], np.float64)
INTS = np.array([2 ** 24 + 2 ** 16 + 1, -(2 ** 24 + 2 ** 16 + 1), 2 ** 31 - 1, 65519, 65521,
                 4099, -7, 0], np.int64)


@pytest.mark.parametrize("narrow", ["float16", "bfloat16"])
def test_conversions_from_wide_types_match_the_impl(jit_backend: str, narrow: str) -> None:
    """float64 and 32/64-bit integers into a half type, natively: NumPy rounds float64 ->
    float16 once (the kernels round to odd in float32 first), ml_dtypes rounds everything
    -> bfloat16 through float32 (so do the kernels); ints overflow float16 the same way."""
    dst = getattr(dtypes, narrow)
    args = Tensor(WIDE), Tensor(INTS), Tensor(INTS.astype(np.int32)), Tensor(
        np.abs(INTS).astype(np.uint32))
    fn = lambda *vs: tuple(v.cast(dst) for v in vs)  # noqa: E731
    assert host_steps(fn, *args) == []
    got = fgrad.jit(fn, backend=jit_backend)(*args)
    with np.errstate(all="ignore"):
        for g, a in zip(got, args, strict=True):
            want = np.asarray(a.numpy()).astype(dst.np)
            np.testing.assert_array_equal(np.asarray(g.numpy()).astype(np.float64),
                                          want.astype(np.float64))
    # the table holds cases where rounding once and twice differ: float64 -> float16
    # (NumPy rounds once) and int -> bfloat16 (ml_dtypes rounds twice: 2^24 + 2^16 + 1 is
    # nearer 2^24 + 2^17, yet comes out 2^24)
    assert np.float16(np.float32(WIDE[1])) != np.float16(WIDE[1])
    assert float(INTS[:1].astype(BF16)[0]) == 2.0 ** 24
