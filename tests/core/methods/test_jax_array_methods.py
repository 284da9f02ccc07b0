"""jax.Array's method spellings on Tensor, against NumPy's array methods on the same data.

Each NumPy form is checked eagerly and under fgrad.jit, a few derivatives against central
differences; tinygrad's own forms keep their results (transpose swaps, repeat tiles, std
divides by n - 1, size() is the shape, sort returns (values, indices)); conflicting or
unsupported arguments raise errors that name the method and the fix.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, dtypes

RNG = np.random.default_rng(7)
A = RNG.standard_normal((2, 3, 4)).astype(np.float32)
M = RNG.standard_normal((3, 4)).astype(np.float32)
W = np.array([True, False, True, True])          # a where= mask broadcast along M's rows
W2 = RNG.random((3, 4)) > 0.3
MI = RNG.integers(-40, 40, (3, 4)).astype(np.int32)
S = np.sort(RNG.standard_normal(9)).astype(np.float32)
IDX = np.array([[0, 5], [-1, 11]])
V = np.array([-9.0, 0.0, 0.5, 9.0, S[3], S[6]], np.float32)  # with ties
NAN_V = np.array([np.nan, 1.0, -1.0], np.float32)

# name: (the fgrad call, NumPy's call, the data); both get the same array
CASES: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any], np.ndarray]] = {
    "sum_keepdims": (lambda x: x.sum(axis=1, keepdims=True),
                     lambda x: x.sum(axis=1, keepdims=True), A),
    "sum_where_initial": (lambda x: x.sum(axis=1, where=W, initial=2.0),
                          lambda x: x.sum(axis=1, where=W, initial=2.0), M),
    "sum_where_all": (lambda x: x.sum(where=W2), lambda x: x.sum(where=W2), M),
    "prod_where": (lambda x: x.prod(axis=0, where=W2, keepdims=True),
                   lambda x: x.prod(axis=0, where=W2, keepdims=True), M),
    "mean_keepdims": (lambda x: x.mean((0, 2), keepdims=True),
                      lambda x: x.mean((0, 2), keepdims=True), A),
    "mean_where": (lambda x: x.mean(axis=1, where=W), lambda x: x.mean(axis=1, where=W), M),
    "mean_int": (lambda x: x.mean(axis=0, keepdims=True),
                 lambda x: x.mean(axis=0, keepdims=True), MI),
    "max_initial_where": (lambda x: x.max(axis=1, initial=-0.5, where=W2),
                          lambda x: x.max(axis=1, initial=-0.5, where=W2), M),
    "min_initial": (lambda x: x.min(axis=0, initial=0.0, keepdims=True),
                    lambda x: x.min(axis=0, initial=0.0, keepdims=True), M),
    "max_int_where": (lambda x: x.max(axis=1, initial=-3, where=W2),
                      lambda x: x.max(axis=1, initial=-3, where=W2), MI),
    "max_empty_initial": (lambda x: x[:0].max(axis=0, initial=2.0),
                          lambda x: x[:0].max(axis=0, initial=2.0), M),
    "any_where": (lambda x: (x > 0).any(axis=1, where=W2), lambda x: (x > 0).any(axis=1, where=W2),
                  M),
    "all_where": (lambda x: (x > 0).all(axis=0, where=W2, keepdims=True),
                  lambda x: (x > 0).all(axis=0, where=W2, keepdims=True), M),
    "var_ddof": (lambda x: x.var(axis=1, ddof=1, keepdims=True),
                 lambda x: x.var(axis=1, ddof=1, keepdims=True), M),
    "std_ddof0": (lambda x: x.std(ddof=0), lambda x: x.std(ddof=0), A),
    "var_where": (lambda x: x.var(axis=1, where=W, ddof=0), lambda x: x.var(axis=1, where=W), M),
    "std_where_default": (lambda x: x.std(axis=1, where=W),
                          lambda x: x.std(axis=1, where=W, ddof=1), M),
    "argmax_keepdims": (lambda x: x.argmax(axis=1, keepdims=True),
                        lambda x: x.argmax(axis=1, keepdims=True), M),
    "argmin_flat_keepdims": (lambda x: x.argmin(keepdims=True), lambda x: x.argmin(keepdims=True),
                             A),
    "transpose_tuple": (lambda x: x.transpose((2, 0, 1)), lambda x: x.transpose((2, 0, 1)), A),
    "transpose_list": (lambda x: x.transpose([1, 2, 0]), lambda x: x.transpose([1, 2, 0]), A),
    "transpose_ints": (lambda x: x.transpose(2, 0, 1), lambda x: x.transpose(2, 0, 1), A),
    "transpose_none": (lambda x: x.transpose(None), lambda x: x.transpose(None), A),
    "transpose_1d": (lambda x: x.transpose(), lambda x: x.transpose(), S),
    "round_2": (lambda x: x.round(2), lambda x: x.round(2), M * 10),
    "round_minus1": (lambda x: x.round(-1), lambda x: x.round(-1), M * 100),
    "round_int_minus1": (lambda x: x.round(-1), lambda x: x.round(-1),
                         np.array([-25, -15, -5, 5, 14, 15, 25, 35], np.int32)),
    "ravel": (lambda x: x.ravel(), lambda x: x.ravel(), A),
    "ravel_f": (lambda x: x.ravel(order="F"), lambda x: x.ravel(order="F"), A),
    "swapaxes": (lambda x: x.swapaxes(0, 2), lambda x: x.swapaxes(0, 2), A),
    "take_flat": (lambda x: x.take(IDX), lambda x: x.take(IDX), M),
    "take_axis": (lambda x: x.take(np.array([2, -3, 0]), axis=1),
                  lambda x: x.take(np.array([2, -3, 0]), axis=1), A),
    "take_clip": (lambda x: x.take(np.array([-7, -1, 0, 4, 9]), axis=1, mode="clip"),
                  lambda x: x.take(np.array([-7, -1, 0, 4, 9]), axis=1, mode="clip"), M),
    "take_wrap": (lambda x: x.take(np.array([-7, -1, 0, 4, 9]), axis=1, mode="wrap"),
                  lambda x: x.take(np.array([-7, -1, 0, 4, 9]), axis=1, mode="wrap"), M),
    "repeat_axis": (lambda x: x.repeat(2, axis=0), lambda x: x.repeat(2, axis=0), M),
    "repeat_axis_none": (lambda x: x.repeat(2, axis=None), lambda x: x.repeat(2, axis=None), M),
    "repeat_counts": (lambda x: x.repeat(np.array([1, 0, 2]), axis=0),
                      lambda x: x.repeat(np.array([1, 0, 2]), axis=0), M),
    "clip_keywords": (lambda x: x.clip(min=-0.5, max=0.5), lambda x: x.clip(min=-0.5, max=0.5),
                      M),
    "clip_min_only": (lambda x: x.clip(min=0.0), lambda x: x.clip(min=0.0), M),
    "clip_positional": (lambda x: x.clip(-0.5, 0.5), lambda x: x.clip(-0.5, 0.5), M),
    "argsort_axis": (lambda x: x.argsort(axis=0), lambda x: x.argsort(axis=0, kind="stable"),
                     M),
    "argsort_axis_none": (lambda x: x.argsort(axis=None),
                          lambda x: x.argsort(axis=None, kind="stable"), M),
    "searchsorted": (lambda x: x.searchsorted(V), lambda x: x.searchsorted(V), S),
    "searchsorted_right": (lambda x: x.searchsorted(V.reshape(2, 3), side="right"),
                           lambda x: x.searchsorted(V.reshape(2, 3), side="right"), S),
    "searchsorted_nan": (lambda x: x.searchsorted(NAN_V), lambda x: x.searchsorted(NAN_V),
                         np.array([0.0, 1.0, 1.0, np.nan], np.float32)),
    "searchsorted_nan_right": (lambda x: x.searchsorted(NAN_V, side="right"),
                               lambda x: x.searchsorted(NAN_V, side="right"),
                               np.array([0.0, 1.0, 1.0, np.nan], np.float32)),
    "searchsorted_sorter": (lambda x: x.searchsorted(0.1, sorter=np.argsort(M[0])),
                            lambda x: x.searchsorted(0.1, sorter=np.argsort(M[0])), M[0]),
    "cumsum_axis": (lambda x: x.cumsum(axis=1), lambda x: x.cumsum(axis=1), M),
    "cumsum_none": (lambda x: x.cumsum(axis=None), lambda x: x.cumsum(axis=None), M),
    "cumsum_dtype": (lambda x: x.cumsum(axis=1, dtype=dtypes.float32),
                     lambda x: x.cumsum(axis=1, dtype=np.float32), MI),
    "cumprod_none": (lambda x: x.cumprod(axis=None), lambda x: x.cumprod(axis=None), M[:2]),
    "diagonal_axes": (lambda x: x.diagonal(1, axis1=1, axis2=0),
                      lambda x: x.diagonal(1, axis1=1, axis2=0), M),
    "diagonal_3d": (lambda x: x.diagonal(axis1=2, axis2=0), lambda x: x.diagonal(axis1=2, axis2=0),
                    A),
    "trace": (lambda x: x.trace(), lambda x: x.trace(), M),
    "trace_offset_axes": (lambda x: x.trace(offset=-1, axis1=1, axis2=2),
                          lambda x: x.trace(offset=-1, axis1=1, axis2=2), A),
    "trace_int": (lambda x: x.trace(), lambda x: x.trace(), MI),
    "dot_2d": (lambda x: x.dot(M.T), lambda x: x.dot(M.T), M),
    "dot_scalar": (lambda x: x.dot(2.0), lambda x: x.dot(2.0), M),
    "dot_0d_self": (lambda x: x[0, 0].dot(M[1]), lambda x: np.dot(x[0, 0], M[1]), M),
    "dot_preferred": (lambda x: x.dot(MI.T, preferred_element_type=dtypes.float32),
                      lambda x: x.dot(MI.T).astype(np.float32), MI),
    "flatten": (lambda x: x.flatten(), lambda x: x.flatten(), A),
    "flatten_f": (lambda x: x.flatten(order="F"), lambda x: x.flatten(order="F"), A),
    "squeeze_axis": (lambda x: x.reshape(1, 3, 1, 4).squeeze(axis=(0, 2)),
                     lambda x: x.reshape(1, 3, 1, 4).squeeze(axis=(0, 2)), M),
    "squeeze_axis_int": (lambda x: x.reshape(1, 12).squeeze(axis=0),
                         lambda x: x.reshape(1, 12).squeeze(axis=0), M),
    "reshape_c": (lambda x: x.reshape(4, 3, order="C"), lambda x: x.reshape(4, 3, order="C"), M),
    "reshape_f": (lambda x: x.reshape((2, 6), order="F"), lambda x: x.reshape((2, 6), order="F"),
                  M),
    "astype": (lambda x: x.astype(np.int32), lambda x: x.astype(np.int32), M * 4),
    "ptp": (lambda x: x.ptp(axis=1, keepdims=True), lambda x: np.ptp(x, axis=1, keepdims=True),
            M),
    "copy": (lambda x: x.copy(), lambda x: x.copy(), M),
    "conj": (lambda x: x.conj(), lambda x: x.conj(), M),
    "conjugate": (lambda x: x.conjugate(), lambda x: x.conjugate(), MI),
    "real": (lambda x: x.real, lambda x: x.real, M),
    "imag": (lambda x: x.imag, lambda x: x.imag, MI),
    "mT": (lambda x: x.mT, lambda x: x.mT, A),
}


def _check(got: Any, want: Any) -> None:
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got.numpy().astype(np.float64), want.astype(np.float64),
                               rtol=2e-5, atol=2e-5, equal_nan=True)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_numpy_form_matches_numpy(name: str) -> None:
    fn, reference, data = CASES[name]
    want = reference(data.copy())
    _check(fn(Tensor(data)), want)
    _check(fgrad.jit(fn)(Tensor(data)), want)


def test_jax_only_forms() -> None:
    """take's fill mode and total_repeat_length (NumPy has neither; values as jax.Array's)."""
    m = Tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    got = m.take(np.array([-7, -1, 0, 3, 4]), axis=1).numpy()
    np.testing.assert_array_equal(got[0], [np.nan, 3.0, 0.0, 3.0, np.nan])
    assert m.take(np.array([5, 1]), axis=0, fill_value=-1.0).tolist() == [[-1.0] * 4,
                                                                           [4.0, 5.0, 6.0, 7.0]]
    ints = Tensor(np.arange(3, dtype=np.int32))
    assert ints.take(np.array([-4, 1, 3])).tolist() == [-2 ** 31, 1, -2 ** 31]
    assert Tensor([True, False]).take(np.array([5])).tolist() == [True]
    assert Tensor(np.arange(3, dtype=np.uint8)).take(np.array([9])).tolist() == [255]
    counts = np.array([1, 2])
    pairs = Tensor([[1, 2], [3, 4]])
    want = [[1, 2], [3, 4], [3, 4], [3, 4], [3, 4]]
    assert pairs.repeat(counts, axis=0, total_repeat_length=5).tolist() == want
    assert pairs.repeat(counts, axis=0, total_repeat_length=2).tolist() == [[1, 2], [3, 4]]
    traced = fgrad.jit(lambda x, r: x.repeat(r, axis=0, total_repeat_length=5))
    assert traced(pairs, Tensor(counts)).tolist() == want
    assert Tensor([1, 2, 3]).repeat(2, total_repeat_length=4).tolist() == [1, 1, 2, 2]


def test_properties_and_item() -> None:
    x = Tensor(np.arange(6, dtype=np.int16).reshape(2, 3))
    assert x.itemsize == 2 and x.real is x and x.conj() is x
    assert x.imag.dtype == dtypes.int16 and x.imag.tolist() == [[0] * 3] * 2
    assert x.item(4) == 4 and x.item(1, 2) == 5 and isinstance(x.item(0), int)
    assert Tensor([7.5]).item() == 7.5
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert Tensor(np.ones(2, np.float16)).dot(2.0).dtype == dtypes.float16  # a weak scalar


# ---------------------------------------------------------------------------- derivatives
GRAD_CASES: dict[str, tuple[Callable[[Any], Any], np.ndarray]] = {
    "sum_where": (lambda x: x.sum(axis=1, where=W, keepdims=True), M),
    "mean_where": (lambda x: x.mean(axis=0, where=W2), M),
    "var_where_ddof": (lambda x: x.var(axis=1, where=W, ddof=1), M),
    "std_ddof0": (lambda x: x.std(axis=0, ddof=0), M),
    "max_initial_where": (lambda x: x.max(axis=1, initial=-5.0, where=W2), M),
    "take_fill": (lambda x: x.take(np.array([-6, -1, 2, 7]), axis=1, fill_value=0.5), M),
    "transpose_tuple": (lambda x: x.transpose((2, 0, 1)) * np.arange(24.0).reshape(4, 2, 3), A),
    "repeat_axis": (lambda x: x.repeat(np.array([2, 0, 1]), axis=0) ** 2, M),
    "trace": (lambda x: x.trace(offset=1), M),
    "reshape_f": (lambda x: x.reshape(2, 6, order="F") * np.arange(12.0).reshape(2, 6), M),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradient_matches_finite_differences(name: str) -> None:
    fn, data = GRAD_CASES[name]
    x64 = data.astype(np.float64)

    def loss(t: Tensor) -> Tensor:
        return fn(t).sum()

    got = fgrad.jit(fgrad.grad(loss))(Tensor(x64)).numpy()
    eps, want = 1e-6, np.zeros_like(x64)
    for i in range(x64.size):
        step = np.zeros_like(x64)
        step.flat[i] = eps
        want.flat[i] = (loss(Tensor(x64 + step)).item() - loss(Tensor(x64 - step)).item()) / (
            2 * eps)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------- tinygrad's forms
def test_tinygrad_forms_keep_their_results() -> None:
    a = Tensor(A)
    assert a.transpose().shape == (3, 2, 4)                 # swaps dims 1 and 0, no reversal
    np.testing.assert_array_equal(a.transpose(0, 2).numpy(), A.swapaxes(0, 2))
    np.testing.assert_array_equal(Tensor(M).transpose().numpy(), M.T)
    assert Tensor([1, 2]).repeat(2).tolist() == [1, 2, 1, 2]   # tiles
    assert Tensor([[1, 2]]).repeat(2, 1).tolist() == [[1, 2], [1, 2]]
    np.testing.assert_allclose(Tensor(M).std().numpy(), M.std(ddof=1), rtol=1e-5)
    np.testing.assert_allclose(Tensor(M).var(0).numpy(), M.var(0, ddof=1), rtol=1e-5)
    np.testing.assert_allclose(Tensor(M).var(0, correction=0).numpy(), M.var(0), rtol=1e-5)
    assert a.size() == (2, 3, 4) and a.size(1) == 3 and a.nbytes() == 96
    values, indices = Tensor(M).sort()
    np.testing.assert_array_equal(values.numpy(), np.sort(M))
    np.testing.assert_array_equal(indices.numpy(), np.argsort(M, kind="stable"))
    np.testing.assert_array_equal(Tensor(M).argsort(0).numpy(), np.argsort(M, 0, kind="stable"))
    assert Tensor([1, 0, 2]).nonzero().tolist() == [[0], [2]]   # a (k, ndim) Tensor
    np.testing.assert_allclose(Tensor(M).cumsum().numpy(), M.cumsum(0), rtol=1e-6)
    assert Tensor(M).squeeze(0).shape == (3, 4)              # a non-1 dim is left alone
    assert Tensor(M).sum(1, True).shape == (3, 1) and Tensor(M).max(0, True).shape == (1, 4)
    assert Tensor([0.5, 1.5, 2.5, -0.5]).round().tolist() == [0.0, 2.0, 2.0, -0.0]
    np.testing.assert_allclose(Tensor(M).diagonal(1, 1, 0).numpy(), M.diagonal(1, 1, 0))
    batched = RNG.standard_normal((2, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(a.dot(Tensor(batched)).numpy(), A @ batched, rtol=1e-5)
    np.testing.assert_allclose(Tensor(M).clip(-0.5, None).numpy(), M.clip(-0.5, None))


# ---------------------------------------------------------------------------- errors
ERRORS: dict[str, tuple[Callable[[Tensor], Any], type, str]] = {
    "keepdim_and_keepdims": (lambda x: x.sum(1, True, keepdims=True), TypeError,
                             r"Tensor\.sum: got both keepdim=True and keepdims=True"),
    "mean_both": (lambda x: x.mean(keepdim=True, keepdims=False), TypeError, r"Tensor\.mean"),
    "argmax_both": (lambda x: x.argmax(0, True, keepdims=True), TypeError, r"Tensor\.argmax"),
    "ddof_and_correction": (lambda x: x.var(correction=0, ddof=1), TypeError,
                            r"Tensor\.var: got both correction=0 and ddof=1"),
    "max_where_no_initial": (lambda x: x.max(where=W), ValueError,
                             r"Tensor\.max: where= needs initial="),
    "sort_axis": (lambda x: x.sort(axis=0), TypeError, r"x\.sort\(dim=0\)\[0\]"),
    "sort_axis_none": (lambda x: x.sort(axis=None), TypeError, r"x\.flatten\(\)\.sort\(\)"),
    "argsort_dim_and_axis": (lambda x: x.argsort(0, axis=1), TypeError, r"Tensor\.argsort"),
    "transpose_not_permutation": (lambda x: x.transpose((0, 0)), ValueError,
                                  r"Tensor\.transpose: axes \(0, 0\) are not a permutation"),
    "transpose_tuple_and_int": (lambda x: x.transpose((1, 0), 1), TypeError,
                                r"Tensor\.transpose"),
    "squeeze_axis_not_one": (lambda x: x.squeeze(axis=0), ValueError,
                             r"Tensor\.squeeze: axis 0 has length 3"),
    "squeeze_dim_and_axis": (lambda x: x.squeeze(0, axis=0), TypeError, r"Tensor\.squeeze"),
    "take_raise_mode": (lambda x: x.take(np.array([0]), mode="raise"), ValueError,
                        r"Tensor\.take: mode='raise'"),
    "take_float_indices": (lambda x: x.take(np.array([0.0])), TypeError,
                           r"Tensor\.take: indices must be integers"),
    "repeat_axis_and_tiles": (lambda x: x.repeat(2, 3, axis=0), TypeError,
                              r"Tensor\.repeat: axis="),
    "repeat_negative": (lambda x: x.repeat(-1, axis=0), ValueError, r"Tensor\.repeat"),
    "reshape_order": (lambda x: x.reshape(12, order="A"), ValueError,
                      r"Tensor\.reshape: order='A'"),
    "flatten_order_with_dims": (lambda x: x.flatten(1, order="F"), ValueError,
                                r"Tensor\.flatten"),
    "clip_min_twice": (lambda x: x.clip(0.0, min=1.0), TypeError,
                       r"Tensor\.clip: got both min_=0\.0 and min=1\.0"),
    "diagonal_dim_and_axis": (lambda x: x.diagonal(0, 1, axis1=0), TypeError,
                              r"Tensor\.diagonal"),
    "searchsorted_2d": (lambda x: x.searchsorted(0.0), ValueError,
                        r"Tensor\.searchsorted: the sorted Tensor must be 1-d"),
    "searchsorted_side": (lambda x: x.reshape(-1).searchsorted(0.0, side="middle"), ValueError,
                          r"side must be 'left' or 'right'"),
    "mT_1d": (lambda x: x.reshape(-1).mT, ValueError, r"Tensor\.mT"),
    "where_shape": (lambda x: x.sum(where=np.ones(3, bool)), ValueError,
                    r"Tensor\.sum: where= mask of shape \(3,\)"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_name_the_method_and_fix(name: str) -> None:
    fn, kind, message = ERRORS[name]
    with pytest.raises(kind, match=message):
        fn(Tensor(M))


def test_traced_repeat_counts_need_total_length() -> None:
    f = fgrad.jit(lambda x, r: x.repeat(r, axis=0))
    with pytest.raises(TypeError, match=r"total_repeat_length="):
        f(Tensor(M), Tensor(np.array([1, 2, 0])))
