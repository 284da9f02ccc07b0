"""The llvm backend kernel by kernel: every elementwise primitive, cast and select against
its NumPy impl; polynomial transcendentals in ulps; the kernel IR printer, checker and
index algebra; vectorization of fused loops.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from llvm_helpers import HALF, assert_native, close, ix_value, llvm, sched_of, w1

import fgrad
from fgrad import Tensor, dtypes
from fgrad.core import prims
from fgrad.core.dtypes import DType
from fgrad.core.ir import ShapedArray
from fgrad.core.primitive import REGISTRY
from fgrad.lower.kernel import index as ixa
from fgrad.lower.kernel.build import build_kernel
from fgrad.lower.kernel.ir import Kernel, KernelIRError, Load, Loop, Param, Store, check_kernel
from fgrad.lower.llvm.runtime import optimized_ir, plan
from fgrad.lower.schedule.partition import BINARY, ELEMENTWISE, UNARY
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(1)


# ---------------------------------------------------------------------------- primitive table


ALL_DTYPES = [dtypes.bool, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64,
              dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64, dtypes.float16,
              dtypes.float32, dtypes.float64]
SPECIAL = [-np.inf, -100, -10, -2.5, -1, -0.5, -1e-5, -0.0, 0.0, 1e-5, 0.3, 0.5, 1, 1.5, 2.5,
           10, 100, np.inf, np.nan]
APPROX = {"exp", "log", "sin", "cos", "tan", "tanh", "logistic", "log1p", "expm1", "erf",
          "pow", "atan2"}
RTOL = {"half": 1e-3, "float": 1e-6, "double": 1e-13}
ATOL = {"half": 1e-4, "float": 1e-7, "double": 1e-15}
COVERED_ELSEWHERE = {"convert_element_type", "bitcast_convert_type", "select"}


def sample(dtype: DType, n: int, rng: np.random.Generator) -> np.ndarray:
    """Edge values first, then random ones, n in all."""
    if dtype == dtypes.bool:
        return rng.integers(0, 2, n).astype(bool)
    if dtype.is_float:
        with np.errstate(over="ignore"):
            vals = np.array(SPECIAL + list(rng.standard_normal(n) * 3)).astype(dtype.np)
        return rng.permutation(vals)[:n]
    info = np.iinfo(dtype.np)
    edges = np.array([info.min, info.max, 0, 1, 2, info.max - 1, info.min + 1], dtype.np)
    small = rng.integers(max(info.min, -20), min(info.max, 20), n, endpoint=True)
    wide = rng.integers(info.min, info.max, n, dtype=dtype.np, endpoint=True)
    vals = np.concatenate([edges, small.astype(dtype.np), wide])
    return rng.permutation(vals)[:n]


def _accepts(prim: Any, arity: int, dtype: DType) -> bool:
    try:
        prim.abstract_eval(*[ShapedArray((4,), dtype)] * arity)
    except TypeError:
        return False
    return True


TABLE = [(name, dt) for name in sorted(ELEMENTWISE - COVERED_ELSEWHERE) for dt in ALL_DTYPES
         if _accepts(REGISTRY[name], 1 if name in UNARY else 2, dt)]


def test_table_covers_every_native_elementwise_primitive() -> None:
    assert {name for name, _ in TABLE} == ELEMENTWISE - COVERED_ELSEWHERE
    assert UNARY | BINARY | {"select"} == ELEMENTWISE


@pytest.mark.parametrize("name,dtype", TABLE, ids=[f"{n}-{d.short}" for n, d in TABLE])
def test_elementwise_primitive_matches_numpy_impl(name: str, dtype: DType) -> None:
    prim = REGISTRY[name]
    rng = np.random.default_rng(len(name))
    arity = 1 if name in UNARY else 2
    n = 64 if arity == 1 else 400
    args = [sample(dtype, n, rng) for _ in range(arity)]
    fn = lambda *xs: prim.bind(*xs)  # noqa: E731
    if HALF or dtype != dtypes.float16:
        assert_native(fn, *[Tensor(a) for a in args])
    got = llvm(fn, *[Tensor(a) for a in args]).numpy()
    aval = prim.abstract_eval(*[ShapedArray(a.shape, dtype) for a in args])
    want = np.asarray(prim.impl(*args)).astype(aval.dtype.np)  # scipy gives f64 for f16
    assert got.dtype == want.dtype and got.shape == want.shape
    if name in APPROX and dtype.is_float:
        close(got, want, RTOL[dtype.name], ATOL[dtype.name])
    else:
        np.testing.assert_array_equal(got, want)


CASTS = [(s, d) for s in ALL_DTYPES for d in ALL_DTYPES]


@pytest.mark.parametrize("src,dst", CASTS, ids=[f"{s.short}-{d.short}" for s, d in CASTS])
def test_convert_matches_numpy_impl(src: DType, dst: DType) -> None:
    x = sample(src, 80, np.random.default_rng(src.itemsize))
    with np.errstate(over="ignore"):
        if src.is_float:
            x[:12] = np.array([1e10, -1e10, 3e9, -3e9, 255.9, -128.5, 65504, 7e4, 0.5, -0.5,
                               2.0 ** 63, -(2.0 ** 63)]).astype(src.np)
        want = prims.convert_p.impl(x, new_dtype=dst)
    fn = lambda t: prims.convert(t, dst)  # noqa: E731
    if HALF or dtypes.float16 not in (src, dst):
        assert_native(fn, Tensor(x))
    np.testing.assert_array_equal(llvm(fn, Tensor(x)).numpy(), want)


BITCASTS = [(s, d) for s in ALL_DTYPES for d in ALL_DTYPES if s != d and s.itemsize == d.itemsize
            and dtypes.bool not in (s, d) and dtypes.float16 not in (s, d)]


@pytest.mark.parametrize("src,dst", BITCASTS, ids=[f"{s.short}-{d.short}" for s, d in BITCASTS])
def test_bitcast_keeps_bits(src: DType, dst: DType) -> None:
    x = sample(src, 40, np.random.default_rng(3))
    got = llvm(lambda t: prims.bitcast(t, dst) , Tensor(x)).numpy()
    bits = np.dtype(f"u{src.itemsize}")
    np.testing.assert_array_equal(got.view(bits), x.view(bits))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.short)
def test_select_every_dtype(dtype: DType) -> None:
    rng = np.random.default_rng(5)
    c, x, y = rng.integers(0, 2, 50).astype(bool), sample(dtype, 50, rng), sample(dtype, 50, rng)
    got = llvm(lambda a, b, d: prims.select(a, b, d), Tensor(c), Tensor(x), Tensor(y))
    np.testing.assert_array_equal(got.numpy(), np.where(c, x, y))


# ---------------------------------------------------------------------------- IR details


PINNED = """schedule: 1 kernel, 0 host steps
  k0: kernel reduce axes=(1,) f32[4,3] (a) -> (f)  # reshape transpose exp pad reduce_sum
kernel k0(out f:f32[4], in a:f32[6]):
  for i0 in 0..4:
    acc0:f32 = identity of add
    for i1 in 0..3:
      t0:bool = in_bounds (0 <= i0 <= 2) && (0 <= i1 - 1 <= 1)
      t1:f32 = load a[clamp(i0, 0, 2) + 3*clamp(i1 - 1, 0, 1)]
      t2:f32 = exp t1
      t3:f32 = select t0 t2 0.0:f32
      acc0 = add acc0 t3
    f[i0] = acc0"""


def _pinned_program(x: Tensor) -> Tensor:
    y = prims.exp_p.bind(prims.transpose(prims.reshape(x, (2, 3)), (1, 0)))
    return prims.reduce_sum(prims.pad(y, ((0, 1, 0), (1, 0, 0)), 0.0), (1,))


def test_schedule_and_kernel_ir_print_as_pinned() -> None:
    x = np.arange(6, dtype=np.float32) / 4
    s = sched_of(_pinned_program, Tensor(x))
    assert f"{s}\n{build_kernel(s, s.kernels()[0])[0]}" == PINNED
    want = np.pad(np.exp(x.reshape(2, 3).T), ((0, 1), (1, 0))).sum(1)
    close(llvm(_pinned_program, Tensor(x)), want.astype(np.float32), rtol=1e-6)


def test_index_algebra_is_exact_and_its_bounds_are_sound() -> None:
    rng = np.random.default_rng(11)
    i, j = ixa.Sym("i", 6), ixa.Sym("j", 10)
    for _ in range(300):
        ci, cj, c0 = (int(v) for v in rng.integers(-7, 8, 3))
        d = int(rng.integers(1, 9))
        base = ixa.add(ixa.scale(ixa.ix_sym(i), ci), ixa.scale(ixa.ix_sym(j), cj),
                       ixa.ix_const(c0))
        exprs = {"div": (ixa.floordiv(base, d), lambda v, d=d: v // d),
                 "mod": (ixa.mod(base, d), lambda v, d=d: v % d),
                 "clamp": (ixa.clamp(base, d), lambda v, d=d: min(max(v, 0), d)),
                 "split": (ixa.add(ixa.scale(ixa.floordiv(base, d), d), ixa.mod(base, d)),
                           lambda v: v)}
        for e, ref in exprs.values():
            lo, hi = ixa.ix_range(e)
            for a in range(6):
                for b in range(10):
                    got = ix_value(e, {i: a, j: b})
                    assert got == ref(ci * a + cj * b + c0) and lo <= got <= hi, str(e)
    f = ixa.Sym("f", 24)
    assert ixa.linearize(ixa.delinearize(ixa.ix_sym(f), (2, 3, 4)), (2, 3, 4)) == \
        ixa.ix_sym(f)


def test_check_kernel_rejects_out_of_bounds_and_unbound_indices() -> None:
    i = ixa.Sym("i", 4)
    params = (Param("out", (4,), dtypes.float32, True), Param("x", (3,), dtypes.float32, False))
    bad = Load(1, ixa.ix_sym(i), dtypes.float32)
    with pytest.raises(KernelIRError, match="outside the buffer"):
        check_kernel(Kernel("k", params, (Loop(i, (Store(0, ixa.ix_sym(i), bad),)),)))
    with pytest.raises(KernelIRError, match="unbound"):
        check_kernel(Kernel("k", params, (Store(0, ixa.ix_sym(i), bad),)))
    good = Load(1, ixa.clamp(ixa.ix_sym(i), 2), dtypes.float32)
    check_kernel(Kernel("k", params, (Loop(i, (Store(0, ixa.ix_sym(i), good),)),)))


def _ulps(got: np.ndarray, ref: np.ndarray, dtype: Any) -> float:
    """Largest error in units of the last place of the correctly rounded reference."""
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = ref.astype(dtype)
    assert np.array_equal(np.isnan(got), np.isnan(rounded))
    assert np.array_equal(got[np.isinf(rounded)], rounded[np.isinf(rounded)])
    finite = np.isfinite(rounded) & ~np.isnan(got)
    unit = np.maximum(np.spacing(np.abs(rounded[finite])).astype(np.longdouble),
                      np.finfo(dtype).smallest_subnormal)
    return float(np.max(np.abs(got[finite].astype(np.longdouble) - ref[finite]) / unit))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_polynomial_transcendentals_stay_within_3_ulp(dtype: Any) -> None:
    """Against long double NumPy; NaNs and infinities lead (inside the vector loop, where
    exp has no NaN select: a NaN must travel through its integer steps as a NaN)."""
    x = np.concatenate([[np.nan, 1.0, -np.nan, np.inf, 2.0, -np.inf, 0.5, np.nan] * 4,
                        np.linspace(-120, 100, 20001), np.linspace(-1e-3, 1e-3, 2001),
                        np.linspace(-760, 720, 10001),
                        [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 1e-8]]).astype(dtype)
    wide = x.astype(np.longdouble)
    with np.errstate(over="ignore"):
        refs = {"exp": np.exp(wide), "expm1": np.expm1(wide), "tanh": np.tanh(wide),
                "logistic": 1 / (1 + np.exp(-wide))}
    for name, ref in refs.items():
        got = llvm(lambda t, p=REGISTRY[name]: p.bind(t), Tensor(x)).numpy()
        assert _ulps(got, ref, dtype) <= 3.0, name
        if name in ("expm1", "tanh"):  # odd at 0: the sign of zero is kept
            np.testing.assert_array_equal(np.signbit(got[x == 0]), np.signbit(x[x == 0]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_log_stays_within_3_ulp(dtype: Any) -> None:
    """vmath.log against long double NumPy: zeros (-inf), negative numbers (NaN), NaN, inf,
    denormals (scaled into the normal range first), around 1 (relative accuracy of tiny
    logs), the largest finite number; vectorized (no call into the C library)."""
    info = np.finfo(dtype)
    x = np.concatenate([[np.nan, 0.0, -0.0, -1.0, -np.inf, np.inf, 1.0, info.max, info.tiny,
                         info.smallest_subnormal, info.tiny / 3, -info.smallest_subnormal],
                        np.linspace(0, 10, 20001), np.linspace(1 - 1e-3, 1 + 1e-3, 4001),
                        np.geomspace(float(info.smallest_subnormal), float(info.max), 20001),
                        RNG.random(20000) * 1000]).astype(dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        ref = np.log(x.astype(np.longdouble))
    got = llvm(lambda t: t.log(), Tensor(x)).numpy()
    assert _ulps(got, ref, dtype) <= 3.0
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda t: t.log())(Tensor(x[:4096])))
    text = optimized_ir(plan(jaxpr))
    assert "@logf" not in text and "@log(" not in text and "@llvm.log." not in text


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_log1p_stays_within_3_ulp(dtype: Any) -> None:
    """vmath.log1p against long double NumPy: -1 (-inf), below it (NaN), signed zeros,
    tiny arguments (where 1 + x rounds to 1), near -1, denormals, the largest float; and
    softplus, which takes two, vectorized."""
    info = np.finfo(dtype)
    x = np.concatenate([[np.nan, -1.0, -2.0, -np.inf, np.inf, 0.0, -0.0, info.tiny, -info.tiny,
                         info.smallest_subnormal, info.max, 1e-30, -1e-30],
                        np.linspace(-1, 10, 20001), np.linspace(-1e-3, 1e-3, 4001),
                        np.linspace(-1, -0.999, 2001),
                        np.geomspace(float(info.smallest_subnormal), float(info.max), 10001),
                        -np.geomspace(float(info.smallest_subnormal), 0.999, 10001)]).astype(dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        ref = np.log1p(x.astype(np.longdouble))
    got = llvm(lambda t: REGISTRY["log1p"].bind(t), Tensor(x)).numpy()
    assert _ulps(got, ref, dtype) <= 3.0
    np.testing.assert_array_equal(np.signbit(got[x == 0]), np.signbit(x[x == 0]))
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda t: t.softplus())(Tensor(x[:4096])))
    text = optimized_ir(plan(jaxpr))
    assert "@log1p" not in text and (" x float>" in text or " x double>" in text)


@pytest.mark.parametrize("exponent", [3, 4.0])
def test_cube_and_fourth_power_are_products(exponent: Any) -> None:
    """x ** 3 and x ** 4 multiply (as jax.lax.integer_pow does), vectorized, within 2 ulp
    of long double, with pow's infinities, NaN and signed zeros."""
    x = np.concatenate([[np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-20, -1e-20, 3e12, -3e12],
                        RNG.standard_normal(20000) * 10]).astype(np.float32)
    got = llvm(lambda t: t ** exponent, Tensor(x)).numpy()
    with np.errstate(over="ignore", under="ignore"):
        ref = np.power(x.astype(np.longdouble), exponent)
    assert _ulps(got, ref, np.float32) <= 2.0
    rounded = ref.astype(np.float32)
    np.testing.assert_array_equal(np.signbit(got[rounded == 0]), np.signbit(rounded[rounded == 0]))
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda t: t ** exponent)(Tensor(x[:4096])))
    assert "@powf" not in optimized_ir(plan(jaxpr))


def test_float32_erf_stays_within_3_ulp() -> None:
    """vmath.erf (docs/fit_erf.py's fits) against math.erf: both forms' ranges and the
    point between them, denormals, signed zeros, the saturation at 1, NaN and infinities;
    vectorized. float64 keeps the C library's erf."""
    import math
    x = np.concatenate([[np.nan, 0.0, -0.0, np.inf, -np.inf, 1e-40, -1e-40, 0.875, -0.875,
                         0.87499994, 3.92, -3.9199998], np.linspace(-6, 6, 60001),
                        np.geomspace(1e-38, 1, 10001), -np.geomspace(1e-38, 1, 1001)])
    x = x.astype(np.float32)
    ref = np.array([math.erf(float(v)) if not np.isnan(v) else np.nan for v in x])
    got = llvm(lambda t: t.erf(), Tensor(x)).numpy()
    assert _ulps(got, ref.astype(np.longdouble), np.float32) <= 3.0
    np.testing.assert_array_equal(np.signbit(got[x == 0]), np.signbit(x[x == 0]))
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda t: t.erf())(Tensor(x[:4096])))
    assert "@erff" not in optimized_ir(plan(jaxpr))
    wide = np.linspace(-6, 6, 1001)
    np.testing.assert_allclose(llvm(lambda t: t.erf(), Tensor(wide)).numpy(),
                               [math.erf(v) for v in wide], rtol=1e-15, atol=1e-16)


def test_fused_elementwise_kernel_is_vectorized() -> None:
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(w1)(Tensor(np.ones(4096, np.float32))))
    text = optimized_ir(plan(jaxpr))
    assert " x float>" in text and "call float @expf" not in text


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_exp_of_arguments_known_nonpositive_stays_within_3_ulp(dtype: Any) -> None:
    """exp(-x*x), exp(-(x*x)) and exp(-|x|) take the one-step scale (vmath.exp_nonpositive):
    results from 1 down through the denormals to 0, NaN and infinities included."""
    x = np.concatenate([[np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30],
                        np.linspace(-30, 30, 20001), np.linspace(-760, 760, 10001),
                        np.linspace(-0.01, 0.01, 2001)]).astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        square = (x * x).astype(np.longdouble)    # exp's argument as the kernel rounds it
    forms = {"-x*x": (lambda t: (-t * t).exp(), np.exp(-square)),
             "-(x*x)": (lambda t: (-(t * t)).exp(), np.exp(-square)),
             "-|x|": (lambda t: (-t.abs()).exp(), np.exp(-np.abs(x.astype(np.longdouble))))}
    for name, (fn, ref) in forms.items():
        llvm_ir = fgrad.jit(fn, backend="llvm").lower(Tensor(x)).as_text().split("# LLVM IR")[1]
        assert " ashr " not in llvm_ir, name     # not the general exp's two-step scale
        got = llvm(fn, Tensor(x)).numpy()
        assert _ulps(got, ref, dtype) <= 3.0, name
        assert np.any((got > 0) & (got < np.finfo(dtype).tiny)), name   # denormals reached


def test_softmax_rows_with_a_finite_maximum_take_the_one_step_exp(monkeypatch: Any) -> None:
    """A softmax's exp loop runs in two versions chosen per row (render.py
    `versioned_loop`): a row whose maximum is finite shifts every value to <= 0, so its exps
    scale in one step; a row with inf, -inf or NaN takes the general exp. An exp shifted by
    the maximum of other values keeps the general form. Both agree with NumPy."""
    from fgrad.lower.llvm.kernels import render
    used: list[int] = []
    one_step = render.llvm_math.exp_nonpositive
    monkeypatch.setattr(render.llvm_math, "exp_nonpositive",
                        lambda em, x: used.append(1) or one_step(em, x))
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((64, 37)) * 30).astype(np.float32)
    x[3, 5], x[4, :], x[5, 7], x[6, 2], x[7, :] = np.inf, -np.inf, np.nan, -np.inf, np.inf
    for fn in (lambda t: t.softmax(-1), lambda t: t.log_softmax(-1)):
        fgrad.jit(fn).lower(Tensor(x)).as_text()
        assert used, "no exp took the one-step scale"
        used.clear()
    fgrad.jit(lambda t, u: (t - u.max(-1, keepdim=True)).exp()).lower(
        Tensor(x), Tensor(x[::-1].copy())).as_text()
    assert not used
    with np.errstate(all="ignore"):
        a = x.astype(np.float64)
        shift = np.where(np.isfinite(a.max(-1, keepdims=True)), a.max(-1, keepdims=True), 0)
        e = np.exp(a - shift)
        want = {"softmax": e / e.sum(-1, keepdims=True),
                "log_softmax": a - shift - np.log(e.sum(-1, keepdims=True))}
    got = {"softmax": llvm(lambda t: t.softmax(-1), Tensor(x)).numpy(),
           "log_softmax": llvm(lambda t: t.log_softmax(-1), Tensor(x)).numpy()}
    for name, atol in (("softmax", 1e-30), ("log_softmax", 1e-6)):   # float32's rounding
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=atol,
                                   equal_nan=True, err_msg=name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_max_and_min_reductions_propagate_nan_through_maxnum(dtype: type) -> None:
    """A float max/min accumulator runs `llvm.maxnum`/`minnum` with a NaN flag beside it
    (render.py, ops.py `nan_key`): the reduction vectorizes as a plain max, and a NaN
    anywhere in a row (first, middle, last, several) still makes the row's result NaN;
    rows of inf and -inf keep them. Against NumPy, over rows, columns and everything, and
    through softmax's pipelined rows."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((33, 300)).astype(dtype)
    x[0, 0], x[1, 150], x[2, 299], x[3, ::7] = np.nan, np.nan, np.nan, np.nan
    x[4, :], x[5, :], x[6, 3], x[7, 9] = np.inf, -np.inf, np.inf, -np.inf
    for fn, ref in ((lambda t: t.max(-1), lambda a: a.max(-1)),
                    (lambda t: t.min(-1), lambda a: a.min(-1)),
                    (lambda t: t.max(0), lambda a: a.max(0)),
                    (lambda t: t.min(), lambda a: a.min()),
                    (lambda t: t.max(), lambda a: a.max())):
        np.testing.assert_array_equal(fgrad.jit(fn)(Tensor(x)).numpy(), ref(x))
    text = fgrad.jit(lambda t: t.max(-1)).lower(Tensor(x)).as_text()
    assert "llvm.maxnum" in text and "llvm.maximum" not in text, text
    got = fgrad.jit(lambda t: t.softmax(-1))(Tensor(x)).numpy()
    assert np.isnan(got[:4]).all() and not np.isnan(got[8:]).any()


@pytest.mark.parametrize("scalef", [True, False], ids=["vscalef", "integer-steps"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exp_family_with_and_without_vscalef(monkeypatch: Any, dtype: type,
                                             scalef: bool) -> None:
    """exp, exp(-x*x), expm1, tanh and the logistic scaled by `vscalefps` (AVX-512:
    `vector_calls`) and by integer steps (other CPUs) both stay within 3 ulp of long
    double NumPy over the whole range, overflow, denormal results, zeros and NaN included;
    the vscalef build's optimized code holds the instruction and no call is left."""
    from fgrad.lower.llvm.kernels import vector_calls
    if scalef and not vector_calls.available():
        pytest.skip("the host has no AVX-512")
    monkeypatch.setattr(vector_calls, "available", lambda: scalef)
    rng = np.random.default_rng(9)
    limit = 760 if dtype == np.float64 else 110
    x = np.concatenate([rng.uniform(-limit, limit, 50000), rng.standard_normal(5000),
                        rng.uniform(-1e-3, 1e-3, 2000),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 88.72, -103.9, -745.1]])
    x = x.astype(dtype)
    wide = x.astype(np.longdouble)
    with np.errstate(all="ignore"):
        refs = {"exp": np.exp(wide), "expm1": np.expm1(wide), "tanh": np.tanh(wide),
                "logistic": 1 / (1 + np.exp(-wide))}
        fns = {name: lambda t, p=REGISTRY[name]: p.bind(t) for name in refs}
        refs["exp(-x*x)"] = np.exp(-(x * x).astype(np.longdouble))
        fns["exp(-x*x)"] = lambda t: (-(t * t)).exp()
        for name, ref in refs.items():
            got = fgrad.jit(fns[name])(Tensor(x)).numpy()
            assert _ulps(got, ref, dtype) <= 3.0, name
    text = fgrad.jit(lambda t: t.exp()).lower(Tensor(x)).as_text()
    assert (vector_calls.MARKER in text) == scalef
    if scalef:
        from fgrad.lower.llvm import kernel_cache
        assembly = kernel_cache.assembly_of(text[text.index("\n", text.index("# LLVM IR")):])
        assert "vscalefp" in assembly and vector_calls.MARKER not in assembly


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exp_below_its_range_is_zero_without_underflowing(dtype: type) -> None:
    """exp of arguments below its range (exp(-x*x) of large x, a causal softmax's -inf
    entries) is +0, computed from a point whose scale is +0 (vmath `exp_nonpositive`) or
    selected (`exp`), not from a product that underflows; values just inside the range
    still round to denormals. Against NumPy."""
    lo = -104.0 if dtype == np.float32 else -746.0
    x = np.concatenate([np.linspace(2 * lo, lo - 1e-3, 4001), np.linspace(lo, lo + 20, 4001),
                        [-np.inf, np.nan, 0.0]]).astype(dtype)
    wide = x.astype(np.float64)
    with np.errstate(all="ignore"):
        cases = ((lambda t: t.exp(), np.exp(wide)),
                 (lambda t: (-(t * t)).exp(), np.exp(-(wide * wide))))
        for fn, ref in cases:
            got = fgrad.jit(fn)(Tensor(x)).numpy()
            np.testing.assert_array_max_ulp(got, ref.astype(dtype), maxulp=3)
            assert not np.signbit(got[~np.isnan(got)]).any()
    scores = np.random.default_rng(3).standard_normal((64, 64)).astype(dtype)
    scores[np.triu_indices(64, 1)] = -np.inf
    probs = fgrad.jit(lambda t: t.softmax(-1))(Tensor(scores)).numpy()
    e = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(probs, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=0)
    assert (probs[np.triu_indices(64, 1)] == 0).all()


@pytest.mark.parametrize("src", [np.float32, np.float64])
def test_float_to_int_casts_saturate_and_vectorize(src: Any) -> None:
    """A float cast to an integer type truncates toward zero, saturates at the type's
    limits and sends NaN to 0 (LLVM's fptosi.sat semantics, kept), with the conversion
    in vector form (the saturating intrinsic's vector form was scalarized)."""
    limits = [2.0 ** 31, -2.0 ** 31, 2.0 ** 31 - 128, 2.0 ** 32, 2.0 ** 63, -2.0 ** 63,
              2.0 ** 64, 127.9, 128.0, -128.0, -129.0, 255.9, 256.0, 65536.0, -32769.0]
    x = np.concatenate([[np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1e30, -1e30], limits,
                        RNG.standard_normal(4000) * 1e5, np.linspace(-3e9, 3e9, 4001)]).astype(src)
    for dst in (dtypes.int32, dtypes.int64, dtypes.uint32, dtypes.uint8, dtypes.int8,
                dtypes.uint64):
        got = llvm(lambda t, d=dst: t.cast(d), Tensor(x)).numpy()
        info = np.iinfo(got.dtype)
        want = [0 if np.isnan(v) else min(max(int(np.trunc(v)) if np.isfinite(v) else
                                              (int(info.max) if v > 0 else int(info.min)),
                                              int(info.min)), int(info.max))
                for v in x.astype(np.float64)]
        assert got.tolist() == want, dst
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda t: t.cast(dtypes.int32))(Tensor(x[:4096])))
    text = optimized_ir(plan(jaxpr))
    assert "fptosi <" in text and "fptosi.sat" not in text


def test_float32_sin_cos_tan_stay_within_1_ulp_for_every_argument() -> None:
    """vmath's integer reduction is exact for all float32 arguments (and the polynomials
    run in double): random bit patterns over the whole range, the floats around multiples
    of pi/2 (the hardest reductions), signed zeros, NaN and infinities; against long
    double; vectorized. float64 keeps LLVM's intrinsic."""
    patterns = RNG.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32)
    k = np.arange(1, 20001) * (np.pi / 2)
    near = k.astype(np.float32)
    x = np.concatenate([patterns.view(np.float32), near, np.nextafter(near, np.float32(0)),
                        -np.nextafter(near, np.float32(np.inf)),
                        np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-40, -1e-40,
                                  np.float32(0.7853981), 3.4e38], np.float32)])
    x = x.astype(np.float32)
    wide = x.astype(np.longdouble)
    with np.errstate(invalid="ignore"):
        refs = {"sin": np.sin(wide), "cos": np.cos(wide), "tan": np.tan(wide)}
    for name, ref in refs.items():
        got = llvm(lambda t, p=REGISTRY[name]: p.bind(t), Tensor(x)).numpy()
        assert _ulps(got, ref, np.float32) <= 1.0, name
        if name != "cos":
            odd = llvm(lambda t, p=REGISTRY[name]: p.bind(t), Tensor(x[-9:-7])).numpy()
            np.testing.assert_array_equal(np.signbit(odd), [False, True])
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda t: t.sin() + t.cos() + REGISTRY["tan"].bind(t))(
        Tensor(x[:4096])))
    text = optimized_ir(plan(jaxpr))
    assert not any(f in text for f in ("@sinf", "@cosf", "@tanf", "@llvm.sin.f32"))
    wide64 = np.linspace(-1e4, 1e4, 4001)
    np.testing.assert_allclose(llvm(lambda t: t.sin(), Tensor(wide64)).numpy(), np.sin(wide64),
                               rtol=0, atol=1e-15)


def test_float32_pow_matches_c_and_stays_within_1_ulp() -> None:
    """vmath.pow_float (exp(y log|x|) in double): every pair of special values (zeros,
    +-1, +-inf, NaN, integers odd and even, non-integers, tiny and huge) as NumPy's float32
    pow (C99), results within 1 ulp of long double, vectorized."""
    specials = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5,
                         np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e30, -1e30, 1e-45,
                         16777216.0, 33554434.0, -7.0], np.float32)
    xs, ys = (np.repeat(specials, len(specials)), np.tile(specials, len(specials)))
    got = llvm(lambda a, b: a ** b, Tensor(xs), Tensor(ys)).numpy()
    with np.errstate(all="ignore"):
        want = np.power(xs, ys)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    exact = ~np.isnan(want) & ((want == 0) | np.isinf(want))
    np.testing.assert_array_equal(got[exact], want[exact])
    np.testing.assert_array_equal(np.signbit(got[exact]), np.signbit(want[exact]))
    x = np.abs(RNG.standard_normal(50000) * 10).astype(np.float32)
    y = (RNG.standard_normal(50000) * 5).astype(np.float32)
    got = llvm(lambda a, b: a ** b, Tensor(x), Tensor(y)).numpy()
    with np.errstate(all="ignore"):
        ref = np.power(x.astype(np.longdouble), y.astype(np.longdouble))
    assert _ulps(got, ref, np.float32) <= 1.0
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda a: a ** 2.5)(Tensor(x[:4096])))
    assert "@powf" not in optimized_ir(plan(jaxpr))



def test_float32_atan2_matches_c_and_stays_within_1_ulp() -> None:
    """trig.atan2 (in double): every pair of special values (signed zeros, infinities,
    NaN, denormals, the largest floats) as NumPy's float32 arctan2 (C99), random pairs over
    40 orders of magnitude within 1 ulp of long double, atan through it, vectorized."""
    specials = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, np.inf, -np.inf, np.nan, 1e-45,
                         -1e-45, 3e38, -3e38, 0.5], np.float32)
    ys, xs = np.repeat(specials, len(specials)), np.tile(specials, len(specials))
    atan2 = REGISTRY["atan2"]
    got = llvm(lambda a, b: atan2.bind(a, b), Tensor(ys), Tensor(xs)).numpy()
    want = np.arctan2(ys, xs)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_allclose(got, want, rtol=2.5e-7, atol=0)
    scale = np.exp(RNG.uniform(-20, 20, (2, 50000)))
    y, x = (RNG.standard_normal((2, 50000)) * scale).astype(np.float32)
    got = llvm(lambda a, b: atan2.bind(a, b), Tensor(y), Tensor(x)).numpy()
    assert _ulps(got, np.arctan2(y.astype(np.longdouble), x.astype(np.longdouble)),
                 np.float32) <= 1.0
    t = np.linspace(-50, 50, 10001, dtype=np.float32)
    assert _ulps(llvm(lambda a: a.atan(), Tensor(t)).numpy(), np.arctan(t.astype(np.longdouble)),
                 np.float32) <= 1.0
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda a: a.atan())(Tensor(t[:4096])))
    assert "@atan2f" not in optimized_ir(plan(jaxpr))
