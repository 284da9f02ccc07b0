"""Tests for fgrad/core/methods/math_ops.py: activations, extra elementwise math, statistics,
softmax family and cumulative ops.

Forward values and gradients are compared with PyTorch references stored in
fixtures/math_ops.npz (written by fixtures/gen_math_ops.py, computed in float64); dtype rules,
errors and the reference documentation's examples are checked inline with NumPy.
"""
from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, dtypes

FIXTURES = np.load(pathlib.Path(__file__).parent / "fixtures" / "math_ops.npz")
CASES = json.loads(str(FIXTURES["__cases__"]))


def _lerp(x, end, weight=None):
    return x.lerp(end, weight)


def _clip(x, *bounds, **kw):
    return x.clip(*bounds, **kw)


OPS = {
    "clip": _clip,
    "lerp": _lerp,
    "isclose": lambda x, y, **kw: x.isclose(y, **kw),
    "allclose": lambda x, y, **kw: x.allclose(y, **kw),
}

# Looser tolerances where float32 rounding of large intermediate values shows.
RTOL = {"cosh": 1e-5, "sinh": 1e-5, "logcumsumexp": 1e-5, "cumprod": 1e-5}


def _call(op: str, args: list, kwargs: dict):
    fn = OPS.get(op) or (lambda x, *rest, **kw: getattr(x, op)(*rest, **kw))
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    out = fn(*args, **kwargs)
    return out if isinstance(out, tuple) else (out,)


def _inputs(case: dict) -> list[np.ndarray]:
    return [FIXTURES[f"{case['id']}:in{i}"] for i in range(case["n_in"])]


def _expected_dtype(ref: np.ndarray, first_input: np.ndarray) -> np.dtype:
    if ref.dtype.kind == "b":
        return np.dtype(np.bool_)
    if ref.dtype.kind in "iu":
        return np.dtype(np.int32)
    return first_input.dtype if first_input.dtype.kind == "f" else np.dtype(np.float32)


def _tolerance(case: dict, dtype: np.dtype) -> tuple[float, float]:
    if dtype == np.float16:
        return 2e-2, 2e-2
    return RTOL.get(case["op"], 3e-6), 1e-6


@pytest.mark.backends
@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_forward_matches_torch(case, run_op):
    arrays = _inputs(case)
    outs = run_op(lambda *xs: _call(case["op"], list(xs), case["kwargs"]),
                  *[Tensor(a) for a in arrays])
    for i, out in enumerate(outs):
        ref = FIXTURES[f"{case['id']}:out{i}"]
        want_dtype = _expected_dtype(ref, arrays[0])
        got = out.numpy()
        assert got.dtype == want_dtype, f"output {i}: dtype {got.dtype}, want {want_dtype}"
        assert got.shape == ref.shape
        with np.errstate(over="ignore"):
            expected = ref.astype(want_dtype)
        if want_dtype.kind == "f":
            rtol, atol = _tolerance(case, want_dtype)
            np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                                       rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(got, expected)


GRAD_CASES = [c for c in CASES if c["grad"]]


@pytest.mark.backends
@pytest.mark.parametrize("case", GRAD_CASES, ids=[c["id"] for c in GRAD_CASES])
def test_grad_matches_torch(case, run_op):
    cid = case["id"]
    arrays = _inputs(case)
    n_out = sum(1 for k in FIXTURES.files if k.startswith(f"{cid}:out"))
    weights = [Tensor(FIXTURES[f"{cid}:w{i}"].astype(np.float32)) for i in range(n_out)]

    def loss(xs):
        outs = _call(case["op"], list(xs), case["kwargs"])
        terms = [(o * w).sum() for o, w in zip(outs, weights) if o.dtype.is_float]
        return sum(terms[1:], terms[0])

    grads = run_op(lambda *xs: fgrad.grad(loss)(list(xs)), *[Tensor(a) for a in arrays])
    for i, g in enumerate(grads):
        want = FIXTURES[f"{cid}:grad{i}"]
        assert g.shape == want.shape
        np.testing.assert_allclose(g.numpy(), want, rtol=2e-4, atol=2e-5)


# ---------------------------------------------------------------------------- where and NaN

def test_where_grad_not_poisoned_by_unselected_branch():
    # log(x) is NaN/-inf where x <= 0, but that branch is not selected there.
    x = Tensor(np.array([-1.0, 0.0, 0.5, 2.0], dtype=np.float32))
    g = fgrad.grad(lambda x: (x > 0).where(x.log(), 0).sum())(x)
    np.testing.assert_allclose(g.numpy(), [0.0, 0.0, 2.0, 0.5])


ACTIVATIONS = ["elu", "celu", "selu", "softplus", "logsigmoid", "mish", "silu", "gelu",
               "sinh", "cosh", "asinh", "softsign", "leaky_relu", "relu6", "hardswish"]


@pytest.mark.parametrize("op", ACTIVATIONS)
def test_activation_grads_finite_for_extreme_inputs(op):
    x = Tensor(np.array([-80.0, -30.0, 30.0, 80.0], dtype=np.float32))
    g = fgrad.grad(lambda x: getattr(x, op)().clip(-1e30, 1e30).sum())(x)
    assert np.isfinite(g.numpy()).all(), f"{op}: {g.numpy()}"


# ---------------------------------------------------------------------------- documentation

T2 = Tensor([[1.9576, -0.1859, 1.6404], [-0.7647, -0.8695, -0.4379]])
N2 = Tensor([[3.4788, 2.407, 3.3202], [2.1177, 2.0653, 2.2811]])


@pytest.mark.parametrize("call, expected", [
    (lambda: T2.softmax(), [[0.5419, 0.0635, 0.3946], [0.3042, 0.274, 0.4218]]),
    (lambda: T2.softmax(axis=0), [[0.9383, 0.6645, 0.8888], [0.0617, 0.3355, 0.1112]]),
    (lambda: T2.log_softmax(), [[-0.6127, -2.7563, -0.9299], [-1.19, -1.2948, -0.8632]]),
    (lambda: T2.log_softmax(axis=0), [[-0.0637, -0.4087, -0.1179], [-2.786, -1.0922, -2.1962]]),
    (lambda: T2.logsumexp(), 2.681043),
    (lambda: T2.logsumexp(axis=0), [2.0213, 0.2227, 1.7583]),
    (lambda: T2.logsumexp(axis=1), [2.5703, 0.4253]),
    (lambda: T2.logcumsumexp(), [[1.9576, -0.1859, 1.6404], [2.0213, 0.2227, 1.7583]]),
    (lambda: T2.logcumsumexp(axis=1), [[1.9576, 2.0685, 2.5703], [-0.7647, -0.1226, 0.4253]]),
    (lambda: N2.var(), 0.38955206),
    (lambda: N2.var(axis=0), [0.9264, 0.0584, 0.5399]),
    (lambda: N2.var(axis=1), [0.3346, 0.0127]),
    (lambda: N2.std(), 0.62414104),
    (lambda: N2.std(axis=0), [0.9625, 0.2417, 0.7348]),
    (lambda: N2.std(axis=1), [0.5785, 0.1126]),
    (lambda: N2.var_mean()[1], 2.6116748),
    (lambda: N2.std_mean()[0], 0.62414104),
    (lambda: Tensor.ones(2, 3).cumsum(1), [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]),
])
def test_reference_examples(call, expected):
    # The inputs are the documentation's printed (rounded) values, hence atol.
    np.testing.assert_allclose(call().numpy(), expected, atol=2e-4)


def test_reference_examples_exact():
    t = Tensor.arange(1, 7).reshape(2, 3).cumprod(axis=0)
    assert t.dtype == dtypes.int32
    np.testing.assert_array_equal(t.numpy(), [[1, 2, 3], [4, 10, 18]])
    values, indices = Tensor([0, 1, -1, 2, -2, 3, -3]).cummax(0)
    np.testing.assert_array_equal(values.numpy(), [0, 1, 1, 2, 2, 3, 3])
    np.testing.assert_array_equal(indices.numpy(), [0, 1, 1, 3, 3, 5, 5])
    values, indices = Tensor([0, 1, -1, 2, -2, 3, -3]).cummin(0)
    np.testing.assert_array_equal(values.numpy(), [0, 0, -1, -1, -2, -2, -3])
    np.testing.assert_array_equal(indices.numpy(), [0, 0, 2, 2, 4, 4, 6])
    close = Tensor([1e-7, 1e-8, 1e-9, math.nan]).isclose(Tensor([0.0, 0.0, 0.0, math.nan]))
    np.testing.assert_array_equal(close.numpy(), [False, True, True, False])
    nan_close = Tensor([math.nan]).isclose(Tensor([math.nan]), equal_nan=True)
    np.testing.assert_array_equal(nan_close.numpy(), [True])


# ---------------------------------------------------------------------------- dtypes

UNARY_FLOAT = ["elu", "celu", "selu", "gelu", "quick_gelu", "silu", "swish", "softplus",
               "softsign", "mish", "hardsigmoid", "hardswish", "logsigmoid", "leaky_relu",
               "sinh", "cosh", "asinh", "acosh", "atanh", "asin", "acos", "atan"]


@pytest.mark.parametrize("op", UNARY_FLOAT)
@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.float32, dtypes.float64])
def test_float_ops_keep_float_dtype(op, dtype):
    assert getattr(Tensor([0.5, 2.0], dtype=dtype), op)().dtype == dtype


@pytest.mark.parametrize("op", UNARY_FLOAT)
def test_int_inputs_compute_in_default_float(op):
    x = Tensor([1, 2, 3])
    got = getattr(x, op)()
    assert got.dtype == dtypes.float32
    want = getattr(Tensor([1.0, 2.0, 3.0]), op)()
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("dtype", [dtypes.int8, dtypes.int32, dtypes.uint8])
def test_piecewise_linear_ops_keep_int_dtype(dtype):
    x = Tensor(np.array([0, 1, 5, 7, 100], dtype=dtype.np))
    for got, want in [(x.relu6(), np.clip(x.numpy(), 0, 6)),
                      (x.hardtanh(2, 6), np.clip(x.numpy(), 2, 6)),
                      (x.clip(1, 6), np.clip(x.numpy(), 1, 6)),
                      (x.clamp(max_=5), np.minimum(x.numpy(), 5))]:
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.numpy(), want)


def test_clip_promotes_like_arithmetic():
    assert Tensor([1, 2, 3]).clip(0.5, 2.5).dtype == dtypes.float32
    np.testing.assert_array_equal(Tensor([1, 2, 3]).clip(1.5).numpy(), [1.5, 2.0, 3.0])
    x16 = Tensor([1.0, 2.0], dtype=dtypes.float16)
    assert x16.clip(Tensor([1.5, 1.5], dtype=dtypes.float32)).dtype == dtypes.float32


def test_cumulative_dtypes():
    b = Tensor([True, False, True])
    assert b.cumsum().dtype == dtypes.int32
    np.testing.assert_array_equal(b.cumsum().numpy(), [1, 1, 2])
    i8 = Tensor(np.array([100, 100, 100], dtype=np.int8))
    assert i8.cumsum().dtype == dtypes.int32
    np.testing.assert_array_equal(i8.cumsum().numpy(), [100, 200, 300])
    u8 = Tensor(np.array([3, 4], dtype=np.uint8))
    assert u8.cumprod(0).dtype == dtypes.uint32
    values, indices = b.cummax()
    assert values.dtype == dtypes.bool and indices.dtype == dtypes.int32
    np.testing.assert_array_equal(indices.numpy(), [0, 0, 2])


@pytest.mark.parametrize("op", ["var", "std", "logsumexp", "softmax", "log_softmax",
                                "logcumsumexp"])
def test_statistics_of_ints_are_float32(op):
    x = Tensor([[1, 2, 3], [4, 6, 9]])
    got = getattr(x, op)()
    assert got.dtype == dtypes.float32
    np.testing.assert_allclose(got.numpy(), getattr(x.float(), op)().numpy(), rtol=1e-6)


def test_half_statistics_accumulate_in_float32():
    # 4096 copies of 1000 + small offsets: a float16 accumulator would lose the variance.
    data = (1000 + np.tile([-1.0, 1.0], 2048)).astype(np.float16)
    x = Tensor(data)
    assert x.var().dtype == dtypes.float16
    np.testing.assert_allclose(float(x.var().numpy()), np.var(data.astype(np.float64),
                                                               ddof=1), rtol=1e-3)
    lse = Tensor(np.zeros(4096, dtype=np.float16)).logsumexp()
    np.testing.assert_allclose(float(lse.numpy()), math.log(4096), rtol=1e-3)


def test_softmax_dtype_argument():
    x = Tensor([[1.0, 2.0, 3.0]], dtype=dtypes.float16)
    assert x.softmax().dtype == dtypes.float16
    out = x.softmax(dtype=dtypes.float32)
    assert out.dtype == dtypes.float32
    e = np.exp([1.0, 2.0, 3.0])
    np.testing.assert_allclose(out.numpy()[0], e / e.sum(), rtol=1e-6)
    assert x.log_softmax(dtype=dtypes.float64).dtype == dtypes.float64


def test_isclose_and_allclose_results():
    a = Tensor([1, 2, 3])
    assert a.isclose(Tensor([1.0, 2.0, 3.1])).dtype == dtypes.bool
    np.testing.assert_array_equal(a.isclose(Tensor([1.0, 2.0, 3.1])).numpy(),
                                  [True, True, False])
    result = a.allclose(Tensor([1.0, 2.0, 3.0]))
    assert isinstance(result, Tensor) and result.shape == () and result.dtype == dtypes.bool
    assert bool(result) and not bool(a.allclose(Tensor([1.0, 2.0, 3.1])))
    assert bool(Tensor([1.0, 2.0]).allclose(2.0, atol=1.0))


# ---------------------------------------------------------------------------- semantics

def test_clip_requires_a_bound():
    with pytest.raises(ValueError, match="clip: at least one of min_ and max_"):
        Tensor([1.0]).clip()


def test_clip_with_min_above_max_gives_max():
    np.testing.assert_array_equal(Tensor([0.0, 5.0, 10.0]).clip(6.0, 4.0).numpy(), [4.0] * 3)


def test_cummax_ties_report_latest_index_and_nan_propagates():
    values, indices = Tensor([1.0, 3.0, 3.0, 2.0, 3.0]).cummax()
    np.testing.assert_array_equal(values.numpy(), [1, 3, 3, 3, 3])
    np.testing.assert_array_equal(indices.numpy(), [0, 1, 2, 2, 4])
    values, indices = Tensor([1.0, math.nan, 5.0]).cummin()
    np.testing.assert_array_equal(values.numpy(), [1.0, math.nan, math.nan])
    np.testing.assert_array_equal(indices.numpy(), [0, 1, 1])


def test_zero_dim_cumulative_ops():
    x = Tensor(2.5)
    assert x.cumsum().shape == () and float(x.cumsum().numpy()) == 2.5
    values, indices = x.cummax()
    assert values.shape == () and indices.shape == () and indices.dtype == dtypes.int32


def test_stable_for_large_magnitudes():
    big = Tensor([1000.0, 1000.0, -1000.0])
    np.testing.assert_allclose(big.softmax().numpy(), [0.5, 0.5, 0.0])
    np.testing.assert_allclose(float(big.logsumexp().numpy()), 1000 + math.log(2), rtol=1e-6)
    np.testing.assert_allclose(big.logcumsumexp().numpy(),
                               [1000.0, 1000 + math.log(2), 1000 + math.log(2)], rtol=1e-6)
    np.testing.assert_allclose(Tensor([-1000.0, 0.0]).logcumsumexp().numpy(), [-1000.0, 0.0])
    np.testing.assert_allclose(Tensor([200.0, -200.0]).softplus().numpy(), [200.0, 0.0])
    np.testing.assert_allclose(Tensor([-200.0]).logsigmoid().numpy(), [-200.0])
    np.testing.assert_allclose(Tensor([1e-7]).asinh().numpy(), [1e-7], rtol=1e-6)
    np.testing.assert_allclose(Tensor([1e-7]).sinh().numpy(), [1e-7], rtol=1e-6)


def test_logsumexp_of_infinities():
    inf = math.inf
    np.testing.assert_array_equal(Tensor([-inf, -inf]).logsumexp().numpy(), -inf)
    np.testing.assert_array_equal(Tensor([1.0, inf]).logsumexp().numpy(), inf)
    np.testing.assert_array_equal(Tensor([-inf, -inf, 0.0]).logcumsumexp().numpy(),
                                  [-inf, -inf, 0.0])


def test_var_correction_at_least_n_gives_nan_or_inf():
    x = Tensor([1.0, 2.0])
    assert math.isinf(float(x.var(correction=2).numpy()))
    assert math.isnan(float(Tensor([3.0]).var().numpy()))
    assert math.isnan(float(Tensor(np.zeros((0,), np.float32)).var().numpy()))


# ---------------------------------------------------------------------------- tracing

TRACED = [("relu6", {}), ("leaky_relu", {}), ("elu", {}), ("celu", {}), ("selu", {}),
          ("gelu", {}), ("quick_gelu", {}), ("silu", {}), ("softplus", {}), ("softsign", {}),
          ("mish", {}), ("hardtanh", {}), ("hardsigmoid", {}), ("hardswish", {}),
          ("logsigmoid", {}), ("sinh", {}), ("cosh", {}), ("asinh", {}), ("acosh", {}),
          ("atanh", {}), ("asin", {}), ("acos", {}), ("atan", {}), ("clip", {"min_": 0.1}),
          ("var", {"axis": 1}), ("std", {}), ("softmax", {}), ("log_softmax", {"axis": 0}),
          ("logsumexp", {"axis": 1}), ("logcumsumexp", {"axis": 1}), ("cumsum", {"axis": 1}),
          ("cumprod", {"axis": 0}), ("cummax", {"axis": 1}), ("cummin", {})]


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("op, kwargs", TRACED, ids=[t[0] for t in TRACED])
def test_ops_trace_to_primitives(op, kwargs):
    from fgrad.core.staging import eval_jaxpr
    x = Tensor(np.random.default_rng(0).uniform(-0.9, 0.9, (3, 5)).astype(np.float32))
    fn = lambda x: getattr(x, op)(**kwargs)  # noqa: E731
    closed = fgrad.make_jaxpr(fn)(x)
    traced = eval_jaxpr(closed.jaxpr, closed.consts, [x])
    for t, e in zip(traced, _as_tuple(fn(x)), strict=True):
        np.testing.assert_array_equal(t.numpy(), e.numpy())


@pytest.mark.parametrize("op, kwargs", TRACED, ids=[t[0] for t in TRACED])
def test_vmap_matches_a_loop(op, kwargs):
    x = Tensor(np.random.default_rng(1).uniform(-0.9, 0.9, (4, 3, 5)).astype(np.float32))
    fn = lambda x: getattr(x, op)(**kwargs)  # noqa: E731
    batched = _as_tuple(fgrad.vmap(fn)(x))
    rows = [_as_tuple(fn(x[i])) for i in range(x.shape[0])]
    for j, out in enumerate(batched):
        looped = np.stack([r[j].numpy() for r in rows])
        np.testing.assert_allclose(out.numpy(), looped, rtol=1e-6, atol=1e-7, equal_nan=True)


def test_multinomial_frequencies_and_distinctness() -> None:
    """With replacement: frequencies match the normalized weights; without: distinct,
    never a zero-weight category."""
    from fgrad import random
    t = Tensor([1.0, 2.0, 3.0, 4.0])
    draws = t.multinomial(40000, replacement=True, key=random.key(1)).numpy()
    assert draws.dtype == np.int32 and draws.shape == (40000,)
    np.testing.assert_allclose(np.bincount(draws, minlength=4) / 40000,
                               [0.1, 0.2, 0.3, 0.4], atol=0.01)
    for seed in range(20):
        rows = Tensor([[0.0, 1.0, 1.0, 2.0], [5.0, 0.0, 1.0, 0.0]]).multinomial(
            2, key=random.key(seed)).numpy()
        assert len(set(rows[0])) == 2 and 0 not in rows[0]
        assert sorted(rows[1]) == [0, 2]
    with pytest.raises(ValueError, match="replacement=True"):
        t.multinomial(5, key=random.key(0))


def test_relu_gradient_at_zero_is_zero() -> None:
    """PyTorch, JAX and tinygrad give 0 at the kink; so do we."""
    import fgrad
    g = fgrad.grad(lambda x: x.relu().sum())(Tensor([-1.0, 0.0, 2.0]))
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0, 1.0])


def test_mish_from_one_exp_matches_float64_and_its_derivative():
    """mish's one-exp form against float64 x * tanh(softplus(x)) over [-80, 80] (tails
    included), its derivative against the analytic one, 0.6 = tanh(log 2) at 0."""
    x = np.concatenate([np.linspace(-80, 80, 20001), [0.0, 1e-20, -1e-20]]).astype(np.float32)
    wide = x.astype(np.float64)
    t = np.tanh(np.logaddexp(0, wide))
    got = Tensor(x).mish().numpy()
    np.testing.assert_allclose(got, wide * t, rtol=3e-6, atol=1e-37)
    grad = fgrad.grad(lambda v: v.mish().sum())(Tensor(x)).numpy()
    want = t + wide * (1 - t * t) / (1 + np.exp(-wide))
    np.testing.assert_allclose(grad, want, rtol=2e-5, atol=1e-6)   # it crosses 0 at -1.19
    assert grad[-3] == np.float32(0.6)
