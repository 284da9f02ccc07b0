"""The jax.numpy functions added beside the first conformance table: callable scalar types and
dtype introspection (dtype_info.py), numeric.py, polynomial.py, functional.py, indexing.py,
mathfuncs.py and extras.py.

fnp_cases.py holds their conformance rows (values, dtypes and finite-difference gradients
against NumPy); here: JAX's behaviour where it departs from NumPy (bincount clips negatives,
histogram of NaN data, float32 results for integer inputs), edge cases against NumPy, jit,
vmap and grad agreeing with eager evaluation, and the error messages.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import ml_dtypes
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import Tensor

F32 = np.float32
RNG = np.random.default_rng(11)


def _np(x: Any) -> Any:
    if isinstance(x, (tuple, list)):
        return [_np(v) for v in x]
    return x.numpy() if isinstance(x, Tensor) else np.asarray(x)


def _same(got: Any, want: Any, tol: float = 1e-5) -> None:
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w, tol)
        return
    g, w = _np(got), np.asarray(want)
    assert g.shape == w.shape, (g.shape, w.shape)
    np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol,
                               atol=tol, equal_nan=True)


# ---------------------------------------------------------------------------- scalar types

def test_scalar_types_make_arrays() -> None:
    one = fnp.float32(1.0)
    assert isinstance(one, Tensor) and one.shape == () and one.dtype == fnp.float32
    ints = fnp.int32([1.7, -2.2])
    assert ints.dtype == fnp.int32 and ints.numpy().tolist() == [1, -2]   # truncation
    assert fnp.bool_(3).numpy() == np.True_ and fnp.bool is fnp.bool_
    assert fnp.int8(np.float32(3.9)).numpy() == 3
    assert fnp.bfloat16(1.5).dtype == fnp.bfloat16 and fnp.uint8([1, 255]).dtype == fnp.uint8
    assert fnp.float16(np.arange(3.0)).dtype == fnp.float16
    x = Tensor(np.arange(3, dtype=F32))
    assert fnp.float32(x) is x and fnp.int16(x).dtype == fnp.int16
    mixed = fnp.float32([x[0], 2, [3.0][0]])
    assert mixed.dtype == fnp.float32 and mixed.numpy().tolist() == [0.0, 2.0, 3.0]


def test_scalar_types_are_the_dtypes() -> None:
    x = fnp.asarray(np.ones(3, F32))
    assert x.dtype == fnp.float32 and fnp.float32 is fgrad.dtypes.float32
    assert {fnp.float32: "f"}[x.dtype] == "f" and hash(fnp.float32) == hash(x.dtype)
    assert fnp.zeros(2, fnp.int16).dtype == fnp.int16
    assert x.astype(fnp.float16).dtype == fnp.float16 and x.cast(fnp.int8).dtype == fnp.int8
    assert fnp.astype(x, fnp.bfloat16).dtype == fnp.bfloat16
    assert np.dtype(fnp.float32) == np.float32 and fnp.float32.dtype == np.dtype("float32")
    assert np.zeros(2, fnp.float16).dtype == np.float16        # NumPy accepts them too
    assert fnp.float32 == np.dtype("float32") and np.dtype("int8") == fnp.int8
    assert fnp.single is fnp.float32 and fnp.double is fnp.float64
    assert fnp.int_ is fnp.int64 and fnp.float_ is fnp.float64 and fnp.uint is fnp.uint64


def test_scalar_types_under_transformations() -> None:
    x = Tensor(np.array([1.5, -2.5, 3.0], F32))
    np.testing.assert_array_equal(fgrad.jit(fnp.int32)(x).numpy(), [1, -2, 3])
    g = fgrad.grad(lambda t: (fnp.float64(t) ** 2).sum())(x)
    np.testing.assert_allclose(g.numpy(), 2 * x.numpy())
    rows = Tensor(np.arange(6, dtype=F32).reshape(3, 2))
    got = fgrad.vmap(lambda r: fnp.float32([r[0], r[1] * 2]).sum())(rows)
    np.testing.assert_allclose(got.numpy(), [2.0, 8.0, 14.0])


def test_scalar_types_refuse_non_numbers() -> None:
    with pytest.raises(TypeError, match=r"float32\('abc'\): cannot convert"):
        fnp.float32("abc")
    with pytest.raises(TypeError, match="cannot convert NoneType"):
        fnp.float32(None)
    with pytest.raises(ValueError, match="out of bounds for uint8"):
        fnp.uint8(300)


# ---------------------------------------------------------------------------- dtype info

def _spellings(dt: Any) -> list[Any]:
    npd = np.dtype(dt)
    return [fgrad.dtypes.from_np(npd), npd.type, npd.name, npd, Tensor(np.ones(2, npd)),
            np.ones(2, npd)]


@pytest.mark.parametrize("i", range(6),
                         ids=["DType", "np-type", "name", "np-dtype", "Tensor", "array"])
def test_iinfo_and_finfo_accept_every_spelling(i: int) -> None:
    int_spec, float_spec = _spellings(np.int32)[i], _spellings(np.float32)[i]
    assert fnp.iinfo(int_spec).max == 2**31 - 1 and fnp.iinfo(int_spec).bits == 32
    assert fnp.finfo(float_spec).eps == np.finfo(np.float32).eps


def test_finfo_bfloat16_and_errors() -> None:
    assert fnp.finfo(fnp.bfloat16).eps == ml_dtypes.finfo(ml_dtypes.bfloat16).eps
    assert fnp.finfo(fnp.float16).max == np.finfo(np.float16).max
    assert fnp.iinfo(fnp.uint8).max == 255
    with pytest.raises(ValueError, match="iinfo: float32 is not an integer dtype"):
        fnp.iinfo(fnp.float32)
    with pytest.raises(ValueError, match="finfo: int32 is not a float dtype"):
        fnp.finfo(fnp.int32)
    with pytest.raises(TypeError, match="finfo: 'junk' is not a dtype"):
        fnp.finfo("junk")


def test_issubdtype_isdtype_and_kinds() -> None:
    table = [(fnp.float32, fnp.floating, True), (fnp.bfloat16, fnp.floating, True),
             (fnp.bfloat16, fnp.inexact, True), (fnp.bfloat16, fnp.integer, False),
             (fnp.int8, fnp.signedinteger, True), (fnp.uint8, fnp.signedinteger, False),
             (fnp.uint16, fnp.unsignedinteger, True), (fnp.bool_, fnp.integer, False),
             (fnp.bool_, fnp.generic, True), ("float32", fnp.number, True),
             (fnp.float32, fnp.float64, False), (fnp.int32, fnp.int32, True),
             (np.float16, fnp.complexfloating, False), (fnp.float32, np.floating, True)]
    for a, b, want in table:
        assert fnp.issubdtype(a, b) is want, (a, b)
    x = fnp.arange(3)
    assert fnp.issubdtype(x.dtype, fnp.integer) and not fnp.issubdtype(x.dtype, fnp.floating)
    assert fnp.isdtype(fnp.float32, "real floating") and fnp.isdtype(fnp.bfloat16, "numeric")
    assert fnp.isdtype(fnp.int32, ("integral", "bool")) and fnp.isdtype(fnp.bool_, "bool")
    assert not fnp.isdtype(fnp.uint8, "signed integer") and fnp.isdtype(fnp.int8, fnp.int8)
    assert not fnp.isdtype(fnp.bool_, "numeric")
    with pytest.raises(ValueError, match="unknown kind 'float'"):
        fnp.isdtype(fnp.float32, "float")
    assert fnp.dtype is np.dtype and fnp.dtype("bfloat16") == fnp.bfloat16


def test_promote_types_can_cast_result_type() -> None:
    assert fnp.promote_types(fnp.int8, fnp.uint8) == fnp.int16
    assert fnp.promote_types("float16", fnp.bfloat16) == fnp.float32
    assert fnp.promote_types(np.int64, np.float16) == fnp.float16   # a float beats any int
    assert fnp.promote_types(int, fnp.int8) == fnp.int8             # Python types are weak
    assert fnp.result_type(fnp.int8, fnp.uint8) == fnp.int16
    assert fnp.result_type(np.zeros(2, np.float16), 1.0) == fnp.float16
    assert fnp.result_type(float, np.zeros(2, np.int8)) == fnp.float32
    assert fnp.result_type(True, 1) == fnp.int32 and fnp.result_type(2.0) == fnp.float32
    assert isinstance(fnp.result_type(fnp.int8), fgrad.DType)
    assert fnp.can_cast(fnp.int8, fnp.int32) and not fnp.can_cast(fnp.float32, fnp.int32)
    assert fnp.can_cast(fnp.float64, fnp.float32, "same_kind")
    assert fnp.can_cast(fnp.bfloat16, fnp.float32) and not fnp.can_cast(fnp.float32,
                                                                         fnp.bfloat16)
    assert fnp.can_cast(np.zeros(2, np.int8), fnp.int16)
    with pytest.raises(TypeError, match="can_cast: Python scalars"):
        fnp.can_cast(1.0, fnp.int32)


# ---------------------------------------------------------------------------- JAX's behaviour

def test_bincount_follows_jax() -> None:
    got = fnp.bincount(np.array([-1, 0, 1, 1, 7], np.int32), length=4)   # -1 -> bin 0
    assert got.dtype == fnp.int32 and got.numpy().tolist() == [2, 2, 0, 0]  # 7 dropped
    assert fnp.bincount(np.array([0, 1, 1, 5], np.int32)).numpy().tolist() == [1, 2, 0, 0, 0, 1]
    assert fnp.bincount(np.array([True, False, True])).numpy().tolist() == [1, 2]
    w = fnp.bincount(np.array([0, 2], np.int32), np.array([1, 5], np.int32))
    assert w.dtype == fnp.int32 and w.numpy().tolist() == [1, 0, 5]
    assert fnp.bincount(np.zeros(0, np.int32), length=3).numpy().tolist() == [0, 0, 0]
    assert fnp.bincount(np.zeros(0, np.int32), minlength=2).numpy().tolist() == [0, 0]
    f = fgrad.jit(lambda x: fnp.bincount(x, length=3))
    assert f(Tensor(np.array([2, 2, 9], np.int32))).numpy().tolist() == [0, 0, 2]
    with pytest.raises(TypeError, match="pass length=N"):
        fgrad.jit(fnp.bincount)(Tensor(np.array([1, 2], np.int32)))
    with pytest.raises(TypeError, match="must hold integers"):
        fnp.bincount(np.array([1.5]))


def test_histogram_follows_jax() -> None:
    counts, edges = fnp.histogram(np.array([1, 2, 2, 3], np.int32), 3)
    assert counts.dtype == fnp.float32 and edges.dtype == fnp.float32  # float, as in JAX
    np.testing.assert_array_equal(counts.numpy(), [1, 2, 1])
    nan_data = np.array([1, np.nan, 2], F32)
    c, e = fnp.histogram(nan_data, 3)           # range from the data: NaN edges, no counts
    assert np.isnan(e.numpy()).all() and c.numpy().sum() == 0
    _same(fnp.histogram(nan_data, 2, range=(0, 3)), np.histogram(nan_data, 2, range=(0, 3)))
    _same(fnp.histogram(np.zeros(0, F32), 3), np.histogram(np.zeros(0, F32), 3))
    _same(fnp.histogram(np.full(4, 2.0, F32), 2), np.histogram(np.full(4, 2.0, F32), 2))
    data = np.array([0.0, 1.0, 1.0, 2.0, 5.0, -1.0], F32)       # edges and outside values
    _same(fnp.histogram(data, 4, range=(0, 2)), np.histogram(data, 4, range=(0, 2)))
    hist = fgrad.jit(lambda x: fnp.histogram(x, bins=4))       # traced range, static bins
    d = RNG.normal(size=50).astype(F32)
    _same(hist(Tensor(d)), np.histogram(d, 4))


def test_float_results_for_integer_inputs() -> None:
    ints = np.array([1, 2, 3], np.int32)
    assert fnp.convolve(ints, ints).dtype == fnp.float32
    assert fnp.correlate(ints, ints).dtype == fnp.float32
    assert fnp.interp(ints, ints, ints).dtype == fnp.float32
    assert fnp.trapezoid(ints).dtype == fnp.float32 and fnp.gradient(ints).dtype == fnp.float32
    assert fnp.cov(np.array([[1, 2, 4], [2, 1, 0]])).dtype == fnp.float32   # as fnp.mean
    assert fnp.polyval(ints, ints).dtype == fnp.int32 and fnp.diff(ints).dtype == fnp.int32
    assert fnp.convolve(ints, ints, preferred_element_type=fnp.int32).dtype == fnp.int32
    assert fnp.i0(ints).dtype == fnp.float32 and fnp.hanning(4).dtype == fnp.float32


# ---------------------------------------------------------------------------- edge cases

def test_edge_cases_against_numpy() -> None:
    x = np.array([1.0, 4.0, 9.0, 16.0], F32)
    _same(fnp.diff(x[:1]), np.diff(x[:1]))
    _same(fnp.diff(np.ones((2, 3), F32), n=2, axis=0), np.diff(np.ones((2, 3)), n=2, axis=0))
    _same(fnp.diff(x, n=0), x)
    _same(fnp.interp([np.nan, -5.0, 0.5, 30.0], x, x * 2),
          np.interp([np.nan, -5.0, 0.5, 30.0], x, x * 2))
    _same(fnp.interp(2.0, [1.0], [7.0]), np.interp(2.0, [1.0], [7.0]))
    _same(fnp.interp(x, x[::2], x[::2], left="extrapolate", right="extrapolate"), x)
    _same(fnp.digitize(x, np.zeros(0, F32)), np.digitize(x, np.zeros(0, F32)))
    m = RNG.normal(size=(2, 5)).astype(F32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _same(fnp.cov(m[:, :1]), np.cov(m[:, :1]))                   # n - ddof = 0: inf/nan
        _same(fnp.cov(np.zeros((2, 0), F32)), np.full((2, 2), np.nan))
    _same(fnp.cov(m[0], ddof=0), np.cov(m[0], ddof=0))
    _same(fnp.corrcoef(m[0], m[1]), np.corrcoef(m[0], m[1]))
    _same(fnp.trapezoid(x, dx=np.float32(0.5)), np.trapezoid(x, dx=0.5))
    _same(fnp.gradient(np.arange(12, dtype=F32).reshape(3, 4) ** 2, 2.0, 0.5),
          np.gradient(np.arange(12, dtype=F32).reshape(3, 4) ** 2, 2.0, 0.5))
    assert fnp.gradient(x, axis=()) == []
    for mode in ("full", "same", "valid"):
        for a, v in (([1.0, 2, 3, 4], [1.0, 1]), ([1.0, 2], [3.0, 4, 5, 6]), ([3.0], [1.0, 2])):
            _same(fnp.convolve(a, v, mode), np.convolve(a, v, mode))
            _same(fnp.correlate(a, v, mode), np.correlate(a, v, mode))
    _same(fnp.polymul(np.zeros(0, F32), [1.0, 2.0]), np.zeros(2))
    _same(fnp.polymul([0.0, 1, 2], [1.0], trim_leading_zeros=True), np.array([1.0, 2.0]))
    _same(fnp.polyfit(np.arange(6.0), np.arange(6.0) ** 2, 2, full=True)[0],
          np.polyfit(np.arange(6.0), np.arange(6.0) ** 2, 2))
    c, cov = fnp.polyfit(np.arange(6.0), np.arange(6.0) ** 1.5, 1, cov=True)
    _same(cov, np.polyfit(np.arange(6.0), np.arange(6.0) ** 1.5, 1, cov=True)[1], 1e-4)
    _same(fnp.unwrap(np.zeros(0, F32)), np.zeros(0))
    _same(fnp.unravel_index(np.array([14, 15, -16], np.int32), (3, 5)),
          (np.array([2, 2, 0]), np.array([4, 4, 0])))                  # clamped, as in JAX
    _same(fnp.hanning(0), np.hanning(0))
    _same(fnp.kaiser(1, 2.0), np.kaiser(1, 2.0))


def test_index_tricks_and_from_dlpack() -> None:
    _same(fnp.mgrid[0:3, 0:4:2], np.mgrid[0:3, 0:4:2])
    assert fnp.mgrid[0:3].dtype == fnp.int32 and fnp.mgrid[0:1:5j].dtype == fnp.float32
    _same(fnp.mgrid[0:1:5j], np.mgrid[0:1:5j])
    _same(fnp.ogrid[0:2, 0:3], np.ogrid[0:2, 0:3])
    assert fnp.s_[1:3] == slice(1, 3) and fnp.index_exp[0] == (0,)
    a = np.arange(4, dtype=F32)
    np.testing.assert_array_equal(fnp.from_dlpack(a).numpy(), a)
    with pytest.raises(TypeError, match="mgrid: index with slices"):
        fnp.mgrid[3]


# ---------------------------------------------------------------------------- functional

def test_vectorize() -> None:
    a = np.arange(12, dtype=F32).reshape(3, 4)
    add = fnp.vectorize(lambda x, y: x + y)
    _same(add(a, np.arange(4, dtype=F32)), a + np.arange(4))
    _same(add(np.ones((1, 3), F32), np.ones((2, 1), F32)), np.full((2, 3), 2.0))
    _same(add(1.0, 2.0), 3.0)
    dot = fnp.vectorize(lambda x, y: (x * y).sum(), signature="(n),(n)->()")
    _same(dot(a, np.ones(4, F32)), a.sum(1))
    _same(dot(a[:, None], a[None]), a @ a.T)
    two = fnp.vectorize(lambda x: (x.sum(), x * 2), signature="(n)->(),(n)")
    _same(two(a), (a.sum(1), a * 2))
    power = fnp.vectorize(lambda x, p: x ** p, excluded={1})
    _same(power(a, 2), a ** 2)
    _same(fgrad.jit(dot)(Tensor(a), Tensor(a)), (a * a).sum(1))
    with pytest.raises(ValueError, match="core dimension 'n' is 3 in one place and 4"):
        dot(np.ones(3, F32), np.ones(4, F32))
    with pytest.raises(ValueError, match="not a valid gufunc signature"):
        fnp.vectorize(lambda x: x, signature="(n)->")(a)
    with pytest.raises(TypeError, match="must return a tuple"):
        fnp.vectorize(lambda x: x, signature="(n)->(),()")(a)


def test_functional_helpers_under_transformations() -> None:
    x = RNG.normal(size=(3, 6)).astype(F32)
    pw = fgrad.vmap(lambda r: fnp.piecewise(r, [r < 0, r > 1], [lambda t: -t, 5.0]))
    _same(pw(Tensor(x)), np.piecewise(x, [x < 0, x > 1], [lambda t: -t, 5.0]))
    along = fgrad.jit(lambda t: fnp.apply_along_axis(lambda r: r[:, None] * r[None], 1, t))
    _same(along(Tensor(x)), np.apply_along_axis(lambda r: np.outer(r, r), 1, x))
    sel = fgrad.grad(lambda t: fnp.select([t < 0], [t * 3], t).sum())(Tensor(x))
    _same(sel, np.where(x < 0, 3.0, 1.0))
    with pytest.raises(ValueError, match="returned 0 dimensions for an input of 2"):
        fnp.apply_over_axes(lambda a, ax: fnp.sum(a), x, [0])


# ---------------------------------------------------------------------------- transformations

X = RNG.normal(size=(3, 8)).astype(F32)
TRANSFORMED: dict[str, Callable[[Tensor], Any]] = {
    "diff-ediff1d": lambda x: fnp.diff(x, n=2, prepend=0.0).sum() + fnp.ediff1d(x, to_end=1.0),
    "gradient-unwrap": lambda x: fnp.gradient(x, fnp.cumsum(fnp.abs(x) + 0.5)) + fnp.unwrap(x * 4),
    "interp": lambda x: fnp.interp(x, fnp.array([-1.0, 0, 0.5, 2]), fnp.array([0.0, 1, -1, 3]))
    + fnp.interp(fnp.array([0.1, 0.7]), fnp.sort(x), x * 2).sum()
    + fnp.interp(x, fnp.array([0.0, 1, 2]), fnp.array([1.0, 3, 2]), period=2.5),
    "digitize-bincount": lambda x: fnp.bincount(fnp.digitize(x, fnp.array([-1.0, 0, 1])), x,
                                                 length=4),
    "histogram": lambda x: fnp.histogram(x, bins=4)[0] + fnp.histogram(
        x, 4, range=(-1, 1), weights=x * x, density=True)[0],
    "convolve-correlate": lambda x: fnp.convolve(x, x[:3], mode="same")
    + fnp.correlate(x, fnp.array([1.0, -2, 0.5]), mode="same"),
    "trapezoid-cov": lambda x: fnp.trapezoid(x, x=fnp.cumsum(fnp.abs(x)))
    + fnp.cov(x.reshape(2, 4)).sum() + fnp.corrcoef(x.reshape(2, 4))[0, 1],
    "poly": lambda x: fnp.polyval(x[:3], x) + fnp.polyfit(fnp.arange(8.0), x, 2).sum()
    + fnp.polyint(x, 2, k=x[:1])[:8] + fnp.polymul(x[:3], x[3:]).sum(),
    "select-piecewise-vectorize": lambda x: fnp.select([x < 0, x > 1], [x * 2, x * x], -1.0)
    + fnp.piecewise(x, [x < 0], [lambda t: -t, lambda t: t * 10])
    + fnp.vectorize(lambda a, b: (a * b).sum(), signature="(n),(n)->()")(
        x.reshape(2, 4), x[:4]).sum(),
    "bits": lambda x: fnp.frexp(x)[0] + fnp.ldexp(x, fnp.astype(x * 4, fnp.int32))
    + fnp.nextafter(x, 0.0) + fnp.spacing(x) + fnp.modf(x * 3)[0],
    "i0-kaiser-gcd": lambda x: fnp.i0(x * 5) + fnp.kaiser(8, x[0] ** 2 + 1)
    + fnp.gcd(fnp.astype(x * 30, fnp.int32), 12),
    "indices": lambda x: fnp.ravel_multi_index(
        fnp.unravel_index(fnp.astype(fnp.abs(x) * 4, fnp.int32), (2, 3)), (2, 3), mode="clip")
    + fnp.fill_diagonal(x.reshape(2, 4), x[0], inplace=False).sum(),
    "extras": lambda x: fnp.block([[x.reshape(2, 4), x.reshape(2, 4)]]).sum(0)
    + fnp.choose(fnp.astype(fnp.abs(x), fnp.int32), [x, -x, x * 0], mode="clip")
    + fnp.partition(x, 3) + fnp.matvec(x.reshape(2, 4), x[:4]).sum() + fnp.int32(x * 3),
}


def _leaves(t: Any) -> list[Tensor]:
    return [v for s in t for v in _leaves(s)] if isinstance(t, (tuple, list)) else [t]


@pytest.mark.parametrize("name", list(TRANSFORMED))
def test_jit_vmap_grad_agree_with_eager(name: str) -> None:
    fn = TRANSFORMED[name]
    eager = [fn(Tensor(X[i])) for i in range(X.shape[0])]
    _same(fgrad.jit(fn)(Tensor(X[0])), eager[0], 2e-5)
    batched = fgrad.jit(fgrad.vmap(fn))(Tensor(X))
    for i, want in enumerate(eager):
        _same(batched[i], want, 2e-5)

    def loss(x: Tensor) -> Tensor:
        return sum(v.cast(fnp.float32).sum() for v in _leaves(fn(x)))
    g_eager = fgrad.grad(loss)(Tensor(X[0]))
    _same(fgrad.jit(fgrad.grad(loss))(Tensor(X[0])), g_eager, 1e-4)
    assert np.isfinite(g_eager.numpy()).all()


@pytest.mark.backends
@pytest.mark.parametrize("name", ["histogram", "bits", "convolve-correlate"])
def test_native_backends(name: str, jit_backend: str) -> None:
    """Scatter-add, bit casts and gathers compile on every jit backend."""
    fn = TRANSFORMED[name]
    _same(fgrad.jit(fgrad.vmap(fn))(Tensor(X))[1], fn(Tensor(X[1])), 2e-5)


KNOTS = np.array([-2.0, -0.5, 0.3, 2.0])
GRAD_CHECKS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "diff": (lambda x: fnp.diff(x, n=2), lambda x: np.diff(x, n=2)),
    "interp": (lambda x: fnp.interp(x, KNOTS, KNOTS ** 2), lambda x: np.interp(x, KNOTS,
                                                                             KNOTS ** 2)),
    "trapezoid": (lambda x: fnp.trapezoid(x * x, x=fnp.cumsum(fnp.abs(x) + 0.1)),
                  lambda x: np.trapezoid(x * x, x=np.cumsum(np.abs(x) + 0.1))),
    "convolve": (lambda x: fnp.convolve(x, x[:3], "same"), lambda x: np.convolve(x, x[:3],
                                                                                 "same")),
    "polyval": (lambda x: fnp.polyval(x[:4], x), lambda x: np.polyval(x[:4], x)),
    "cov": (lambda x: fnp.cov(x.reshape(2, 4), aweights=x[:4] * x[:4] + 0.5),
            lambda x: np.cov(x.reshape(2, 4), aweights=x[:4] * x[:4] + 0.5)),
}


@pytest.mark.parametrize("name", list(GRAD_CHECKS))
def test_jitted_gradient_vs_finite_differences(name: str) -> None:
    fn, ref = GRAD_CHECKS[name]
    x = X[2].astype(np.float64)
    w = np.random.default_rng(3).normal(size=np.shape(ref(x)))
    got = fgrad.jit(fgrad.grad(lambda t: (fn(t) * Tensor(w)).sum()))(Tensor(x)).numpy()
    eps, fd = 1e-6, np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        fd[i] = ((ref(up) * w).sum() - (ref(down) * w).sum()) / (2 * eps)
    np.testing.assert_allclose(got, fd, rtol=1e-5, atol=1e-6)


def test_float32_inputs_stay_float32() -> None:
    """No float64 constant sneaks in (fgrad warns when float64 meets float32)."""
    x = Tensor(X[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", fgrad.Float64PromotionWarning)
        for fn in TRANSFORMED.values():
            for v in _leaves(fn(x)):
                assert v.dtype in (fnp.float32, fnp.int32), v.dtype


# ---------------------------------------------------------------------------- errors

@pytest.mark.parametrize("call,kind,message", [
    (lambda: fnp.diff(1.0), ValueError, "diff: needs an array of at least one dimension"),
    (lambda: fnp.diff([1.0, 2.0], n=1.5), TypeError, "diff: n must be an int"),
    (lambda: fnp.interp(1.0, [1.0, 2.0], [1.0]), ValueError, "interp: xp and fp must be 1-d"),
    (lambda: fnp.interp(1.0, [1.0], [1.0], left="x"), ValueError, "'extrapolate'"),
    (lambda: fnp.bincount([[1, 2]]), ValueError, "bincount: x must be 1-d"),
    (lambda: fnp.bincount([1, 2], [1.0]), ValueError, "weights must have the shape of x"),
    (lambda: fnp.histogram([1.0], bins="auto"), NotImplementedError, "string bins"),
    (lambda: fnp.histogram([1.0], range=(1, 2, 3)), ValueError, "range must be a pair"),
    (lambda: fnp.convolve([], [1.0]), ValueError, "convolve: a and v must not be empty"),
    (lambda: fnp.convolve([1.0], [1.0], mode="x"), ValueError, "mode must be 'full'"),
    (lambda: fnp.gradient([1.0]), ValueError, "gradient: every differentiated axis"),
    (lambda: fnp.gradient([1.0, 2], edge_order=2), NotImplementedError, "edge_order=1"),
    (lambda: fnp.cov(np.ones((2, 3)), fweights=[1.0, 2, 3]), TypeError, "fweights must be"),
    (lambda: fnp.cov(np.ones((2, 2, 2))), ValueError, "cov: m and y must have at most 2"),
    (lambda: fnp.polyder([1.0, 2], -1), ValueError, "polyder: the order m"),
    (lambda: fnp.polyfit([1.0, 2], [1.0, 2, 3], 1), TypeError, "polyfit: y must be"),
    (lambda: fnp.poly(np.eye(2)), NotImplementedError, "poly: only a 1-d array of roots"),
    (lambda: fnp.select([True], [1, 2]), ValueError, "select: condlist and choicelist"),
    (lambda: fnp.piecewise(np.ones(3), [np.ones(3) > 0], [1, 2, 3]), ValueError,
     "piecewise: with 1 condition"),
    (lambda: fnp.ravel_multi_index(([1], [5]), (2, 2)), ValueError, "mode='wrap' or 'clip'"),
    (lambda: fgrad.jit(lambda i: fnp.ravel_multi_index((i, i), (2, 2)))(
        Tensor(np.array([1]))), TypeError, "mode='raise' needs concrete indices"),
    (lambda: fnp.fill_diagonal(np.ones((2, 2)), 1.0), NotImplementedError, "inplace=False"),
    (lambda: fnp.unravel_index([1.5], (2, 2)), TypeError, "unravel_index: indices must be"),
    (lambda: fnp.ldexp(1.0, 2.0), TypeError, "ldexp: the exponent x2 must be an integer"),
    (lambda: fnp.gcd(1.0, 2), TypeError, "gcd: arguments must be integers"),
    (lambda: fgrad.jit(lambda m: fnp.hanning(m))(Tensor(3)), TypeError,
     "hanning: M fixes the result's shape"),
    (lambda: fnp.delete(np.ones(3), [5]), IndexError, "delete: index out of range"),
    (lambda: fnp.block([[1.0], 2.0]), ValueError, "block: list depths differ"),
    (lambda: fnp.choose(np.array([3]), [[1.0], [2.0]]), ValueError, "choose: a holds values"),
    (lambda: fgrad.jit(fnp.trim_zeros)(Tensor(np.ones(3))), TypeError, "trim_zeros: the"),
    (lambda: fnp.vecdot(np.ones(3), np.ones(4)), ValueError, "vecdot: the vectors' lengths"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_errors_name_the_function_and_the_fix(call: Callable[[], Any], kind: type,
                                              message: str) -> None:
    with pytest.raises(kind, match=message):
        call()
