"""The jax.numpy functions added late (set operations, unique_*, compress/extract, insert,
place, put, bit packing, histogram2d/dd, nanquantile, polydiv, mask_indices, r_/c_,
einsum_path, host I/O and printing) against NumPy: values, shapes and dtypes, eagerly and
under jit, gradients against finite differences, and the error messages.

JAX-only semantics (size=/fill_value=, functional put/place, r_ dtypes) are checked against
JAX's own results in test_jnp_more_jax_fixture.py."""
from __future__ import annotations

import io
import warnings
from typing import Any, Callable

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import Tensor

RNG = np.random.default_rng(7)
F32 = np.float32


def _same(got: Any, want: Any, tol: float = 1e-5, dtype: bool = True) -> None:
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w, tol, dtype)
        return
    assert isinstance(got, Tensor), type(got)
    g, w = got.numpy(), np.asarray(want)
    assert g.shape == w.shape, (g.shape, w.shape)
    if dtype:
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
    np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol, atol=tol,
                               equal_nan=True)


def _fd_grad(f: Callable[[np.ndarray], float], x: np.ndarray, eps: float = 1e-3
             ) -> np.ndarray:
    out = np.zeros_like(x, dtype=np.float64)
    for i in np.ndindex(x.shape):
        hi, lo = x.astype(np.float64).copy(), x.astype(np.float64).copy()
        hi[i] += eps
        lo[i] -= eps
        out[i] = (f(hi.astype(F32)) - f(lo.astype(F32))) / (2 * eps)
    return out


def _check_grad(fn: Callable[[Any], Any], x: np.ndarray, tol: float = 2e-2) -> None:
    got = fgrad.grad(lambda t: fn(t).sum())(Tensor(x)).numpy()
    want = _fd_grad(lambda v: float(fn(Tensor(v)).sum().numpy()), x)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# ---------------------------------------------------------------------------- sets

SET_INPUTS = [
    (RNG.integers(0, 8, 10).astype(np.int32), RNG.integers(3, 12, 7).astype(np.int32)),
    (RNG.integers(-3, 3, (3, 4)).astype(np.int8), RNG.integers(-3, 3, 5).astype(np.int8)),
    (np.array([0.5, -1.0, 2.0, 2.0, 0.25], F32), np.array([2.0, 7.0, -1.0], F32)),
    (np.array([], np.int32), np.array([1, 2], np.int32)),
]


@pytest.mark.parametrize("i", range(len(SET_INPUTS)))
def test_set_operations_match_numpy(i: int) -> None:
    a, b = SET_INPUTS[i]
    _same(fnp.union1d(a, b), np.union1d(a, b))
    _same(fnp.setdiff1d(a, b), np.setdiff1d(a, b))
    _same(fnp.setxor1d(a, b), np.setxor1d(a, b))
    _same(fnp.intersect1d(a, b), np.intersect1d(a, b))
    v, i1, i2 = fnp.intersect1d(a, b, return_indices=True)
    wv, w1, w2 = np.intersect1d(a, b, return_indices=True)
    _same(v, wv)
    _same([i1, i2], [w1.astype(np.int32), w2.astype(np.int32)])
    ua, ub = np.unique(a), np.unique(b)
    _same(fnp.setdiff1d(ua, ub, assume_unique=True), np.setdiff1d(ua, ub, assume_unique=True))
    _same(fnp.setxor1d(ua, ub, assume_unique=True), np.setxor1d(ua, ub, assume_unique=True))


@pytest.mark.parametrize("i", range(3))
def test_sized_set_operations_agree_with_numpy_prefix(i: int) -> None:
    a, b = SET_INPUTS[i]
    for fn in ("union1d", "setdiff1d", "setxor1d", "intersect1d"):
        want = getattr(np, fn)(a, b)
        for size in (0, 2, len(want), len(want) + 3):
            got = fgrad.jit(lambda x, y: getattr(fnp, fn)(x, y, size=size, fill_value=-5)
                            )(a, b)
            n = min(size, len(want))
            _same(got[:n], want[:n])
            assert got.shape == (size,) and (got.numpy()[n:] == -5).all()


def test_unique_api_matches_numpy() -> None:
    x = RNG.integers(0, 5, (4, 3)).astype(np.int16)
    got = fnp.unique_all(x)
    # NumPy >= 2.3's unique_* may leave the values unsorted; JAX (and fgrad) sort them
    want = fnp.sets.UniqueAllResult(*np.unique(x, True, True, True, equal_nan=False))
    _same(got.values, want.values)
    _same([got.indices, got.inverse_indices, got.counts],
          [np.asarray(w, np.int32).reshape(s) for w, s in
           ((want.indices, want.indices.shape), (want.inverse_indices, x.shape),
            (want.counts, want.counts.shape))])
    assert fnp.unique_counts(x)._fields == ("values", "counts")
    assert fnp.unique_inverse(x)._fields == ("values", "inverse_indices")
    _same(fnp.unique_values(x), np.unique(x))
    nan = np.array([1.0, np.nan, 2.0, np.nan], F32)
    _same(fnp.unique_values(nan), np.unique(nan, equal_nan=False))   # NaNs stay distinct
    _same(fnp.unique(nan), np.unique(nan))                 # ... but unique merges them
    sized = fgrad.jit(lambda t: fnp.unique_all(t, size=12))(x)
    k = len(want.values)
    _same(sized.values[:k], want.values)
    _same(sized.counts[:k], want.counts.astype(np.int32))
    _same(sized.inverse_indices, want.inverse_indices.reshape(x.shape).astype(np.int32))
    v, idx, inv, cnt = fnp.unique(x, True, True, True, size=3)
    _same(v, want.values[:3])
    _same(cnt, want.counts[:3].astype(np.int32))


def test_set_gradients() -> None:
    d = np.array([3.1, 1.2, 4.3, 2.4, 5.5], F32)
    _check_grad(lambda t: fnp.unique_values(t, size=6) ** 2, d)
    _check_grad(lambda t: fnp.union1d(t, t * 2.0 + 0.1, size=12) * 1.5, d)
    x = np.array([3.0, 1.0, 3.0, 2.0, 5.0], F32)
    # the first occurrence of each value gets the gradient, as in JAX
    g = fgrad.grad(lambda t: fnp.unique_values(t, size=4).sum())(Tensor(x)).numpy()
    assert g.tolist() == [1.0, 1.0, 0.0, 1.0, 1.0]


# ---------------------------------------------------------------------------- compress

def test_compress_extract_match_numpy() -> None:
    a = RNG.normal(size=(4, 5)).astype(F32)
    for cond, axis in [([1, 0, 1, 1], 0), ([True, False, True], 1), ([0, 1] * 3, None),
                       ([0.5, 0.0, 2.0, 0.0, 1.0], -1), ([1, 0, 1, 0, 0, 0], 0)]:
        c = np.array(cond)
        if axis == 0 and len(c) > 4:
            c = c[:4]
        _same(fnp.compress(c, a, axis), np.compress(c, a, axis))
        _same(fgrad.jit(lambda t: fnp.compress(c, t, axis))(a), np.compress(c, a, axis))
    m = a > 0
    _same(fnp.extract(m, a), np.extract(m, a))
    _same(fnp.extract(m.astype(np.int32), a, size=20)[:int(m.sum())], np.extract(m, a))


def test_compress_grad_with_size() -> None:
    a = RNG.normal(size=(3, 4)).astype(F32)
    c = np.array([True, False, True])
    _check_grad(lambda t: fnp.compress(c, t, axis=0, size=3, fill_value=1.0) ** 2, a)
    g = fgrad.grad(lambda t, k: (fnp.compress(k, t, axis=0, size=2) ** 2).sum())(
        Tensor(a), Tensor(c))
    _same(g, np.where(c[:, None], 2 * a, 0).astype(F32))


# ---------------------------------------------------------------------------- insert / place / put

INSERTS: list[tuple[Any, Any, Any]] = [
    (1, 9, None), ([0, 2, 2], [7, 8, 9], None), (slice(0, 3), -1, None), (3, [5.5, 6.5], None),
    (1, [[10], [20], [30]], 1), ([1, 3], [[10, 11]] * 3, 1), (0, [1, 2, 3, 4], 0),
    (-1, 0, 1), (np.array([4, 0]), 7, 1), (2, [[1, 2, 3, 4], [5, 6, 7, 8]], 0),
]


@pytest.mark.parametrize("i", range(len(INSERTS)))
def test_insert_matches_numpy(i: int) -> None:
    obj, values, axis = INSERTS[i]
    a = np.arange(12, dtype=F32).reshape(3, 4)
    want = np.insert(a, obj, values, axis)
    _same(fnp.insert(a, obj, values, axis), want)
    if not isinstance(obj, slice):
        idx = np.asarray(obj, np.int32)
        _same(fgrad.jit(lambda t, j: fnp.insert(t, j, values, axis))(a, idx), want)


def test_insert_grad() -> None:
    a = RNG.normal(size=(2, 3)).astype(F32)
    w = np.arange(15, dtype=F32).reshape(3, 5)
    _check_grad(lambda t: fnp.insert(t, [1, 3], 0.5, axis=1) * Tensor(w[:2]), a)
    v = np.array([1.5, -2.0], F32)
    _check_grad(lambda t: fnp.insert(Tensor(a), 1, t, axis=1) * Tensor(w[:2, :4]), v)


def test_place_and_put_match_numpy() -> None:
    a = RNG.normal(size=(3, 4)).astype(F32)
    mask = a > 0
    want = a.copy()
    np.place(want, mask, [9.0, 8.0, 7.0])
    _same(fnp.place(a, mask, np.array([9.0, 8.0, 7.0], F32), inplace=False), want)
    _same(fgrad.jit(lambda t, m: fnp.place(t, m, Tensor(np.array([9.0, 8.0, 7.0], F32)),
                                           inplace=False))(a, mask), want)
    for mode in ("wrap", "clip"):
        ind = np.array([0, 13, -1, -20, 5], np.int32)
        want = a.copy()
        np.put(want, ind, [1.0, 2.0], mode=mode)
        _same(fnp.put(a, ind, np.array([1.0, 2.0], F32), mode=mode, inplace=False), want)
        _same(fgrad.jit(lambda t, j: fnp.put(t, j, np.array([1.0, 2.0], F32), mode=mode,
                                             inplace=False))(a, ind), want)
    ints = np.arange(6, dtype=np.int32)
    got = fnp.put(ints, np.array([1, 4], np.int32), 2.9, inplace=False)
    assert got.dtype == fnp.int32 and got.numpy().tolist() == [0, 2, 2, 3, 2, 5]


def test_place_put_grads() -> None:
    a = RNG.normal(size=(2, 3)).astype(F32)
    mask = np.array([[True, False, True], [False, False, True]])
    _check_grad(lambda t: fnp.place(t, mask, Tensor(np.array([2.0], F32)), inplace=False)
                ** 2, a)
    _check_grad(lambda t: fnp.place(Tensor(a), mask, t, inplace=False) ** 2,
                np.array([1.0, -2.0], F32))
    _check_grad(lambda t: fnp.put(t, np.array([1, 4], np.int32), 0.0, inplace=False) ** 2, a)


# ---------------------------------------------------------------------------- bits

def test_packbits_unpackbits_match_numpy() -> None:
    bits = RNG.integers(0, 2, (3, 11)).astype(np.int32)
    for axis in (None, 0, 1, -1):
        for order in ("big", "little"):
            packed = np.packbits(bits, axis=axis, bitorder=order)
            _same(fnp.packbits(bits, axis, order), packed)
            _same(fgrad.jit(lambda t: fnp.packbits(t, axis, order))(bits), packed)
            for count in (None, 3, -2, 30):
                _same(fnp.unpackbits(packed, axis, count, order),
                      np.unpackbits(packed, axis, count, order))
    _same(fnp.packbits(np.array([True, False, True])), np.packbits([True, False, True]))


def test_bitwise_count_matches_numpy() -> None:
    for dt in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
               np.uint64):
        info = np.iinfo(dt)
        x = np.array([0, 1, info.min, info.max, 7, info.max // 3], dt)
        _same(fnp.bitwise_count(x), np.bitwise_count(x))
        _same(fgrad.jit(fnp.bitwise_count)(x), np.bitwise_count(x))
    _same(fnp.bitwise_count(np.array([True, False])), np.bitwise_count(np.array([1, 0])))


# ---------------------------------------------------------------------------- statistics

def test_histogram2d_dd_match_numpy() -> None:
    x, y = RNG.normal(size=50).astype(F32), RNG.normal(size=50).astype(F32)
    w = RNG.random(50).astype(F32)
    for kw in ({}, {"bins": 4}, {"bins": [3, 5], "range": [(-1, 1), None]},
               {"bins": np.linspace(-2, 2, 6).astype(F32), "weights": w},
               {"bins": 3, "density": True}):
        want = np.histogram2d(x, y, **kw)
        _same(fnp.histogram2d(x, y, **kw), want, tol=1e-4, dtype=False)
        _same(fgrad.jit(lambda a, b: fnp.histogram2d(a, b, **kw))(x, y), want, tol=1e-4,
              dtype=False)
    s = RNG.normal(size=(40, 3)).astype(F32)
    for kw in ({"bins": 3}, {"bins": (2, 3, 4), "density": True}):
        h, e = fnp.histogramdd(s, **kw)
        wh, we = np.histogramdd(s, **kw)
        _same(h, wh, tol=1e-4, dtype=False)
        _same(e, we, tol=1e-5, dtype=False)
    assert fnp.histogram2d(x, y)[0].dtype == fnp.int32
    g = fgrad.grad(lambda t: (fnp.histogram2d(x, y, bins=3, weights=t)[0] ** 2).sum())(w)
    hist = np.histogram2d(x, y, bins=3, weights=w)[0]
    ix = np.clip(np.searchsorted(np.histogram2d(x, y, bins=3)[1], x, "right") - 1, 0, 2)
    iy = np.clip(np.searchsorted(np.histogram2d(x, y, bins=3)[2], y, "right") - 1, 0, 2)
    np.testing.assert_allclose(g.numpy(), 2 * hist[ix, iy], rtol=1e-4)


def test_nanquantile_matches_numpy() -> None:
    a = RNG.normal(size=(4, 6)).astype(F32)
    a[RNG.random(a.shape) < 0.3] = np.nan
    a[1] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for q, axis, method, keep in [(0.3, None, "linear", False),
                                      ([0.0, 0.5, 1.0], 1, "linear", False),
                                      (0.7, 0, "lower", True), (0.7, -1, "higher", False),
                                      ([0.2, 0.6], (0, 1), "nearest", True),
                                      (0.45, 1, "midpoint", False)]:
            qa = np.asarray(q, F32)
            want = np.nanquantile(a, qa, axis=axis, method=method, keepdims=keep)
            got = fnp.nanquantile(a, qa, axis=axis, method=method, keepdims=keep)
            _same(got, want.astype(F32), tol=1e-5)
            jitted = fgrad.jit(lambda t: fnp.nanquantile(t, qa, axis=axis, method=method,
                                                         keepdims=keep))(a)
            _same(jitted, want.astype(F32), tol=1e-5)
            _same(fnp.nanpercentile(a, qa * 100, axis=axis, method=method, keepdims=keep),
                  np.nanpercentile(a, qa * 100, axis=axis, method=method,
                                   keepdims=keep).astype(F32), tol=1e-4)
    b = np.array([[1.0, np.nan, 3.0, 4.0], [2.0, 5.0, -1.0, np.nan]], F32)
    _check_grad(lambda t: fnp.nanquantile(t, np.array([0.3, 0.8], F32), axis=1),
                np.nan_to_num(b))
    g = fgrad.grad(lambda t: fnp.nanquantile(t, 0.3))(Tensor(b[0])).numpy()
    np.testing.assert_allclose(g, [0.4, 0.0, 0.6, 0.0], atol=1e-6)


# ---------------------------------------------------------------------------- polynomials

def test_polydiv_matches_numpy() -> None:
    for u, v in [([1.0, 2.0, 3.0, 4.0], [2.0, 1.0]), ([3.0, 0.0, -2.0, 5.0, 1.0],
                                                     [1.0, -1.0, 2.0]),
                 ([1.0, 2.0], [1.0, 2.0, 3.0]), ([4.0, 2.0], [0.5])]:
        ua, va = np.array(u, F32), np.array(v, F32)
        wq, wr = np.polydiv(ua.astype(np.float64), va.astype(np.float64))
        q, r = fnp.polydiv(ua, va)
        _same(q, wq.astype(F32), tol=1e-5)
        assert r.shape == ua.shape      # JAX keeps u's length
        np.testing.assert_allclose(r.numpy()[len(u) - len(wr):], wr, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(r.numpy()[:len(u) - len(wr)], 0, atol=1e-5)
        _same(fgrad.jit(fnp.polydiv)(ua, va), [q, r])
    u0 = np.array([3.0, 0.0, -2.0, 5.0, 1.0], F32)
    v0 = np.array([1.0, -1.0, 2.0], F32)
    _check_grad(lambda t: fnp.concatenate([fnp.polydiv(t, v0)[0] * 2.0,
                                           fnp.polydiv(t, v0)[1]]), u0)
    _check_grad(lambda t: fnp.concatenate([fnp.polydiv(u0, t)[0],
                                           fnp.polydiv(u0, t)[1] ** 2]), v0)


# ---------------------------------------------------------------------------- index tricks

def test_mask_indices_and_r_c_match_numpy() -> None:
    for k in (-1, 0, 2):
        _same(fnp.mask_indices(4, fnp.triu, k), [i.astype(np.int32) for i in
                                                 np.mask_indices(4, np.triu, k)])
        _same(fnp.mask_indices(4, fnp.tril, k), [i.astype(np.int32) for i in
                                                 np.mask_indices(4, np.tril, k)])
    a, b = np.arange(3, dtype=np.int32), np.arange(3, 6, dtype=np.int32)
    m = np.ones((2, 2), F32)
    for got, want in [(fnp.r_[a, 0, b], np.r_[a, 0, b]), (fnp.r_[1:7:2, a], np.r_[1:7:2, a]),
                      (fnp.r_[-1:1:5j], np.r_[-1:1:5j].astype(F32)),
                      (fnp.r_["0,2", a, b], np.r_["0,2", a, b]),
                      (fnp.r_["1,2,0", a, b], np.r_["1,2,0", a, b]),
                      (fnp.r_["-1", m, np.zeros((2, 1), F32)],
                       np.r_["-1", m, np.zeros((2, 1), F32)]),
                      (fnp.c_[a, b], np.c_[a, b]), (fnp.c_[m, a[:2]], np.c_[m, a[:2]]),
                      (fnp.r_["r", a, b], np.asarray(np.r_["r", a, b])),
                      (fnp.r_["c", a, b], np.asarray(np.r_["c", a, b]))]:
        _same(got, want.astype(got.numpy().dtype), dtype=False)
        assert got.shape == want.shape
    out = fgrad.jit(lambda t: fnp.r_[t, 0.0:2.0, 5.0])(np.array([1.0, 2.0], F32))
    _same(out, np.array([1, 2, 0, 1, 5], F32))
    g = fgrad.grad(lambda t: (fnp.c_[t, t * 3.0] ** 2).sum())(Tensor(np.array([1.0, 2.0], F32)))
    _same(g, np.array([20.0, 40.0], F32))


def test_einsum_path_uses_numpy_on_shapes() -> None:
    a, b, c = np.ones((2, 3), F32), np.ones((3, 4), F32), np.ones((4, 5), F32)
    for opt in ("greedy", "optimal"):
        path, text = fnp.einsum_path("ij,jk,kl->il", a, Tensor(b), c, optimize=opt)
        want = np.einsum_path("ij,jk,kl->il", a, b, c, optimize=opt)
        assert path == want[0][1:] and "Complete contraction" in text
    assert fnp.einsum_path("ij,jk,kl->il", a, b, c, optimize=False)[0] == [(0, 1), (0, 1)]
    assert fnp.einsum_path("ij,jk,kl->il", a, b, c, optimize=[(1, 2), (0, 1)])[0] == \
        [(1, 2), (0, 1)]

    def f(x: Any, y: Any) -> Any:
        path, _ = fnp.einsum_path("ij,jk->ik", x, y)
        assert path == [(0, 1)]
        return fnp.einsum("ij,jk->ik", x, y, optimize=path)

    _same(fgrad.jit(f)(a, b), a @ b)


# ---------------------------------------------------------------------------- host side

def test_host_constructors_io_and_printing() -> None:
    raw = np.arange(5, dtype=np.int16)
    _same(fnp.frombuffer(raw.tobytes(), dtype=fnp.int16, count=3, offset=2), raw[1:4])
    _same(fnp.frombuffer(np.arange(3, dtype=F32).tobytes()), np.arange(3, dtype=F32))
    _same(fnp.fromstring("1, 2.5, 3", sep=","), np.array([1, 2.5, 3], F32))
    _same(fnp.fromstring("4 5", dtype=int, sep=" "), np.array([4, 5], np.int32))
    f = io.BytesIO()
    fnp.save(f, fnp.array([1.5, 2.0], dtype=fnp.bfloat16))
    f.seek(0)
    back = fnp.load(f)
    assert isinstance(back, Tensor) and back.dtype == fnp.bfloat16
    f = io.BytesIO()
    fnp.savez(f, fnp.arange(3), y=np.ones(2, F32))
    f.seek(0)
    with fnp.load(f) as z:
        assert z["arr_0"].tolist() == [0, 1, 2] and z["y"].dtype == F32
    x = np.array([1 / 3, 2.0], F32)
    assert fnp.array_repr(x) == np.array_repr(x)
    assert fnp.array_str(Tensor(x), precision=2) == np.array_str(x, precision=2)
    with fnp.printoptions(precision=3):
        assert fnp.get_printoptions()["precision"] == 3
    old = fnp.get_printoptions()["precision"]
    fnp.set_printoptions(precision=4)
    try:
        assert np.get_printoptions()["precision"] == 4
    finally:
        fnp.set_printoptions(precision=old)


# ---------------------------------------------------------------------------- errors

def _raises(exc: type[Exception], match: str, fn: Callable[[], Any]) -> None:
    with pytest.raises(exc, match=match):
        fn()


def test_value_dependent_shapes_under_jit_ask_for_size() -> None:
    a, b = np.array([1, 2, 2], np.int32), np.array([2, 3], np.int32)
    for name, call in [("union1d", lambda x: fnp.union1d(x, b)),
                       ("intersect1d", lambda x: fnp.intersect1d(x, b)),
                       ("setdiff1d", lambda x: fnp.setdiff1d(x, b)),
                       ("setxor1d", lambda x: fnp.setxor1d(x, b)),
                       ("unique_all", fnp.unique_all), ("unique_values", fnp.unique_values),
                       ("unique_counts", fnp.unique_counts),
                       ("unique_inverse", fnp.unique_inverse),
                       ("compress", lambda x: fnp.compress(x > 1, x)),
                       ("extract", lambda x: fnp.extract(x > 1, x))]:
        _raises(TypeError, f"{name}.*size=", lambda: fgrad.jit(call)(a))


def test_bad_inputs_raise_clear_errors() -> None:
    x = np.arange(5, dtype=F32)
    _raises(ValueError, "place cannot modify arrays in place.*inplace=False",
            lambda: fnp.place(x, x > 1, 1.0))
    _raises(ValueError, "put cannot modify arrays in place.*inplace=False",
            lambda: fnp.put(x, np.array([0]), 1.0))
    _raises(NotImplementedError, "mode='raise'",
            lambda: fnp.put(x, np.array([0]), 1.0, mode="raise", inplace=False))
    _raises(ValueError, "mode must be", lambda: fnp.put(x, np.array([0]), 1.0, mode="fill",
                                                        inplace=False))
    _raises(TypeError, "ind must hold integers",
            lambda: fnp.put(x, np.array([0.5]), 1.0, inplace=False))
    _raises(ValueError, "vals is empty",
            lambda: fnp.place(x, x > 1, np.array([], F32), inplace=False))
    _raises(ValueError, "same size", lambda: fnp.place(x, x[:3] > 1, 1.0, inplace=False))
    _raises(ValueError, "indices must be integers", lambda: fnp.insert(x, 1.5, 0.0))
    _raises(ValueError, "1-d array of indices", lambda: fnp.insert(x, [[1]], 0.0))
    _raises(ValueError, "axis 2 is out of bounds", lambda: fnp.insert(x, 1, 0.0, axis=2))
    _raises(ValueError, "2 indices but values has 3",
            lambda: fnp.insert(x, [1, 2], [1.0, 2.0, 3.0]))
    _raises(ValueError, "condition must be 1-d",
            lambda: fnp.compress(np.ones((1, 2), bool), x))
    _raises(ValueError, "beyond axis", lambda: fnp.compress(np.ones(7, bool), x))
    _raises(ValueError, "size=6 is larger", lambda: fnp.compress(x > 1, x, size=6))
    _raises(ValueError, "size must be >= 0", lambda: fnp.union1d(x, x, size=-1))
    _raises(TypeError, "size must be an int", lambda: fnp.unique_values(x, size=2.5))
    _raises(ValueError, "pass fill_value", lambda: fnp.unique_values(x[:0], size=2))
    _raises(TypeError, "integer or bool", lambda: fnp.packbits(x))
    _raises(ValueError, "bitorder", lambda: fnp.packbits(np.ones(3, np.int32), bitorder="x"))
    _raises(TypeError, "uint8", lambda: fnp.unpackbits(np.ones(3, np.int32)))
    _raises(TypeError, "integer or bool", lambda: fnp.bitwise_count(x))
    _raises(ValueError, r"q must be in \[0, 1\]", lambda: fnp.nanquantile(x, 1.5))
    _raises(ValueError, "scalar or 1-d", lambda: fnp.nanquantile(x, [[0.5]]))
    _raises(ValueError, "unknown method", lambda: fnp.nanquantile(x, 0.5, method="weibull"))
    _raises(NotImplementedError, "weights", lambda: fnp.nanquantile(x, 0.5, weights=x))
    _raises(ValueError, "x and y must be 1-d", lambda: fnp.histogram2d(x, x[:3]))
    _raises(ValueError, "one entry per dimension",
            lambda: fnp.histogramdd(np.ones((4, 2), F32), bins=[2, 3, 4]))
    _raises(ValueError, "divisor v is empty", lambda: fnp.polydiv(x, np.array([], F32)))
    _raises(TypeError, "trim_leading_zeros=True needs concrete",
            lambda: fgrad.jit(lambda u: fnp.polydiv(u, x[:2], trim_leading_zeros=True))(x))
    _raises(ValueError, "directive 'x'", lambda: fnp.r_["x", 1])
    _raises(ValueError, "must come first", lambda: fnp.r_[[1, 2], "r"])
    _raises(ValueError, "einsum_path.*shapes", lambda: fnp.einsum_path("ij,jk", x[:2],
                                                                         x[:3]))
    _raises(NotImplementedError, "np.fromiter", lambda: fnp.fromiter(range(3), float))
    _raises(NotImplementedError, "np.fromfile", lambda: fnp.fromfile("nothing"))
    _raises(TypeError, "sep", lambda: fnp.fromstring("1 2"))  # type: ignore[call-arg]
    _raises(TypeError, "cannot print a traced value",
            lambda: fgrad.jit(lambda t: fnp.array_repr(t) and t)(x))
    _raises(TypeError, "cannot save a traced value",
            lambda: fgrad.jit(lambda t: fnp.save(io.BytesIO(), t) or t)(x))
