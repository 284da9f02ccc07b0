"""Large leading-axes reductions split in two (fgrad.lower.schedule.split_reduce): results
against NumPy, and the threads plan shows the first stage shared by the pool."""
from __future__ import annotations

import numpy as np
import pytest

import fgrad
import fgrad.lower  # noqa: F401  (registers the llvm compiler)
from fgrad import Tensor
from fgrad.lower.llvm.runtime import plan
from fgrad.lower.llvm.threads import describe_threads
from fgrad.lower.schedule.split_reduce import (MIN_ELEMENTS, reduce_untransposed,
                                             split_reductions)
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(3)
CASES = {
    "full sum": (lambda x: x.sum(), lambda x: x.sum(dtype=np.float64)),
    "column sum": (lambda x: x.sum(axis=0), lambda x: x.sum(axis=0, dtype=np.float64)),
    "full max": (lambda x: x.max(), lambda x: x.max()),
    "column min of a product": (lambda x: (x * x - 1).min(axis=0), lambda x: (x * x - 1).min(0)),
    "two leading axes": (lambda x: x.reshape(32, 64, 512).sum(axis=(0, 1)),
                         lambda x: x.reshape(32, 64, 512).sum(axis=(0, 1), dtype=np.float64)),
}


def _jaxpr(fn, x):
    return open_jaxpr(fgrad.make_jaxpr(fn)(Tensor(x)))[0]


@pytest.mark.parametrize("name", list(CASES))
def test_split_reductions_match_numpy_and_use_the_pool(name):
    fn, ref = CASES[name]
    x = RNG.standard_normal((2048, 512)).astype(np.float32)
    assert x.size >= MIN_ELEMENTS
    jaxpr = _jaxpr(fn, x)
    assert split_reductions(jaxpr) is not jaxpr
    assert "split" in describe_threads(plan(jaxpr))
    got = fgrad.jit(fn, backend="llvm")(Tensor(x)).numpy()
    np.testing.assert_allclose(got, ref(x), rtol=2e-5, atol=1e-3)


def test_integer_sums_stay_exact():
    x = RNG.integers(-1000, 1000, (4096, 512)).astype(np.int32)
    got = fgrad.jit(lambda t: (t.sum(), t.sum(axis=0)), backend="llvm")(Tensor(x))
    assert int(got[0].numpy()) == int(x.sum())
    np.testing.assert_array_equal(got[1].numpy(), x.sum(axis=0))


def test_small_and_trailing_reductions_are_left_alone():
    small = RNG.standard_normal((64, 64)).astype(np.float32)
    rows = RNG.standard_normal((2048, 512)).astype(np.float32)
    for fn, x in [(lambda t: t.sum(), small), (lambda t: t.sum(axis=1), rows)]:
        jaxpr = _jaxpr(fn, x)
        assert split_reductions(jaxpr) is jaxpr


def test_an_extent_without_a_suitable_divisor_is_left_alone():
    x = RNG.standard_normal((1031, 1031)).astype(np.float32)  # 1031 is prime
    jaxpr = _jaxpr(lambda t: t.sum(axis=0), x)
    assert split_reductions(jaxpr) is jaxpr


# ---------------------------------------------------------------- reductions through transposes

UNTRANSPOSED = {
    "x.T.sum(-1)": (lambda x: x.permute(2, 1, 0).sum(-1), lambda x: x.transpose(2, 1, 0).sum(-1)),
    "max, the kept axes reordered": (
        lambda x: x.permute(2, 0, 1).max(axis=(1,)),
        lambda x: x.transpose(2, 0, 1).max(axis=1)),
    "argmax": (lambda x: x.permute(0, 2, 1).argmax(-1),
               lambda x: x.transpose(0, 2, 1).argmax(-1)),
    "argmin of a swap of the leading axes": (lambda x: x.permute(1, 0, 2).argmin(1),
                                              lambda x: x.transpose(1, 0, 2).argmin(1)),
    "prod": (lambda x: x.permute(1, 2, 0).prod(-1), lambda x: x.transpose(1, 2, 0).prod(-1)),
    "min, the transpose also an output": (
        lambda x: (x.permute(2, 1, 0).min(0), x.permute(2, 1, 0)),
        lambda x: (x.transpose(2, 1, 0).min(0), x.transpose(2, 1, 0))),
}


@pytest.mark.parametrize("name", list(UNTRANSPOSED))
@pytest.mark.parametrize("backend", ["llvm", "opencl"])
def test_reductions_of_transposes_match_numpy(name, backend):
    fn, ref = UNTRANSPOSED[name]
    x = (RNG.standard_normal((24, 40, 56)) * 0.3 + 1).astype(np.float32)
    got = fgrad.jit(fn, backend=backend)(Tensor(x))
    want = ref(x)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,), strict=True):
        if w.dtype.kind in "iu":
            np.testing.assert_array_equal(g.numpy(), w)
        else:
            np.testing.assert_allclose(g.numpy(), w, rtol=2e-5)


def test_a_reduction_reads_the_transposed_operand_directly():
    x = RNG.standard_normal((2048, 1024)).astype(np.float32)
    jaxpr = reduce_untransposed(_jaxpr(lambda t: t.T.sum(-1), x))
    assert [e.primitive.name for e in jaxpr.eqns] == ["reduce_sum"]
    assert jaxpr.eqns[0].params["axes"] == (0,)
    kept = reduce_untransposed(_jaxpr(lambda t: (t.T.sum(-1), t.T + 1), x))
    assert "transpose" in [e.primitive.name for e in kept.eqns]   # still read by the add


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_column_argmax_splits_both_of_its_reductions(kind):
    """argmax / argmin along axis 0 expand into an extremum and a smallest index: both are
    split after the expansion (threads share them), and the first index of the extremum
    comes out as NumPy's, with ties and NaN (a column's first NaN is its answer)."""
    x = RNG.integers(-3, 4, (2048, 512)).astype(np.float32)   # many ties
    x[700, 5] = x[900, 5] = np.nan
    x[1500:, 9] = 50.0
    fn = (lambda t: t.argmax(0)) if kind == "argmax" else (lambda t: t.argmin(0))
    described = describe_threads(plan(_jaxpr(fn, x)))
    assert described.count(" over ") >= 2, described   # both first stages split
    got = fgrad.jit(fn, backend="llvm")(Tensor(x)).numpy()
    np.testing.assert_array_equal(got, getattr(np, kind)(x, axis=0))


def test_a_reduction_inside_an_inlined_call_splits():
    """A column sum in a nested jitted function is inlined by the expansion and still split."""
    inner = fgrad.jit(lambda t: t.sum(axis=0))
    x = RNG.standard_normal((2048, 512)).astype(np.float32)
    fn = lambda t: inner(t * 2)   # noqa: E731
    assert "split" in describe_threads(plan(_jaxpr(fn, x)))
    got = fgrad.jit(fn, backend="llvm")(Tensor(x)).numpy()
    np.testing.assert_allclose(got, (x * 2).sum(axis=0, dtype=np.float64), rtol=2e-5,
                               atol=1e-3)
