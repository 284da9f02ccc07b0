"""fgrad.lax's general gather / scatter against jax.lax's results (values, dtypes, shapes and
gradients in fixtures/lax_more_jax.npz, written by fixtures/gen_lax_more_jax.py with jax
0.10.2): every mode incl. out-of-bounds indices, repeated indices, batching dims; eagerly,
under jit, under vmap; gradients w.r.t. operand and updates."""
from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

import fgrad
from fgrad import lax
from fgrad.core.errors import ArgumentError, ArgumentTypeError

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "gen_lax_more_jax", os.path.join(HERE, "fixtures", "gen_lax_more_jax.py"))
assert _spec is not None and _spec.loader is not None
GEN = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(GEN)
FIX = np.load(os.path.join(HERE, "fixtures", "lax_more_jax.npz"))
MODES = GEN.MODES


def _check(got, want):
    got = got.numpy()
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype,
                                                                 want.shape, want.dtype)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)


def _gather_call(name, mode):
    shape, dtype, idx, dn, sizes, fill = GEN.GATHER[name]
    dnums = lax.GatherDimensionNumbers(**dn)
    return (GEN.operand(shape, dtype, 1), idx,
            lambda a, i: lax.gather(a, i, dnums, sizes, mode=mode, fill_value=fill))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(GEN.GATHER))
def test_gather_matches_jax(name, mode):
    x, idx, f = _gather_call(name, mode)
    want = FIX[f"gather/{name}/{mode}"]
    _check(f(x, idx), want)
    _check(fgrad.jit(f)(x, idx), want)
    key = f"gather_grad/{name}/{mode}"
    # JAX's promise_in_bounds gradient of an out-of-bounds gather drops what the forward
    # clamped (its documentation calls it incorrect); fgrad's is the clamped gather's
    in_bounds = np.array_equal(FIX[f"gather/{name}/fill"], FIX[f"gather/{name}/clip"])
    if key in FIX and (in_bounds or mode in ("clip", "fill")):
        w = GEN.operand(want.shape, "float32", 99)
        g = fgrad.grad(lambda a: (f(a, idx) * w).sum())(x)
        _check(g, FIX[key])


def _scatter_call(name, mode):
    fn, shape, dtype, idx, ushape, dn = GEN.SCATTER[name]
    dnums = lax.ScatterDimensionNumbers(**dn)
    x, u = GEN.operand(shape, dtype, 2), GEN.operand(ushape, dtype, 3)
    return x, idx, u, lambda a, i, b: getattr(lax, fn)(a, i, b, dnums, mode=mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(GEN.SCATTER))
def test_scatter_matches_jax(name, mode):
    x, idx, u, f = _scatter_call(name, mode)
    want = FIX[f"scatter/{name}/{mode}"]
    _check(f(x, idx, u), want)
    _check(fgrad.jit(f)(x, idx, u), want)
    fn = GEN.SCATTER[name][0]
    # JAX's own gradients are wrong for out-of-bounds indices in two places (checked here
    # against finite differences instead): promise_in_bounds gathers the cotangent of
    # dropped updates, and clip-mode scatter_min/max gives inf for clamped updates
    jax_right = mode != "promise_in_bounds" and not (
        mode == "clip" and fn in ("scatter_min", "scatter_max"))
    if name in GEN.GRAD_SCATTER and jax_right:
        w = GEN.operand(want.shape, "float32", 99)
        gx, gu = fgrad.grad(lambda a, b: (f(a, idx, b) * w).sum(), (0, 1))(x, u)
        _check(gx, FIX[f"scatter_grad_x/{name}/{mode}"])
        _check(gu, FIX[f"scatter_grad_u/{name}/{mode}"])


FD_CASES = [("scatter_mul_rows", "clip"), ("scatter_mul_rows", "fill"),
            ("scatter_mul_points", None), ("scatter_min_rows", "clip"),
            ("scatter_max_points", "clip"), ("scatter_add_rows", "promise_in_bounds"),
            ("scatter_rows", "promise_in_bounds")]


@pytest.mark.parametrize("name, mode", FD_CASES)
def test_scatter_grads_match_finite_differences(name, mode):
    x, idx, u, f = _scatter_call(name, mode)
    x, u = x.astype(np.float64), u.astype(np.float64)
    w = GEN.operand(x.shape, "float64", 99)

    def loss(a, b):
        return (f(a, idx, b) * w).sum()
    gx, gu = fgrad.grad(loss, (0, 1))(x, u)
    for arr, g, which in ((x, gx, 0), (u, gu, 1)):
        num = np.zeros_like(arr)
        for k in np.ndindex(arr.shape):
            step = np.zeros_like(arr)
            step[k] = 1e-6
            args = [x, u]
            args[which] = arr + step
            hi = float(loss(*args).numpy())
            args[which] = arr - step
            num[k] = (hi - float(loss(*args).numpy())) / 2e-6
        np.testing.assert_allclose(g.numpy(), num, rtol=1e-6, atol=1e-7)


def test_scatter_set_with_repeated_indices_last_update_wins_and_gets_the_gradient():
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    idx = np.array([[2], [2], [2], [4]])
    u = np.array([5.0, 6.0, 7.0, 8.0], np.float32)
    out = lax.scatter(np.zeros(6, np.float32), idx, u, dn)
    np.testing.assert_array_equal(out.numpy(), [0, 0, 7, 0, 8, 0])
    g = fgrad.grad(lambda b: lax.scatter(np.zeros(6, np.float32), idx, b, dn).sum())(u)
    np.testing.assert_array_equal(g.numpy(), [0, 0, 1, 1])


def test_scatter_apply_applies_func_once_per_hit():
    dn = lax.ScatterDimensionNumbers(**GEN._PT)
    x = GEN.operand((6,), "float32", 4)
    f = lambda a: lax.scatter_apply(a, GEN._DUP, lambda v: v * 2.0 + 1.0, dn,  # noqa: E731
                                    update_shape=(7,))
    _check(f(x), FIX["scatter_apply"])
    _check(fgrad.jit(f)(x), FIX["scatter_apply"])
    once = lax.scatter_apply(x, np.array([[0], [3]]), lambda v: v * v, dn, update_shape=(2,),
                             unique_indices=True)
    want = x.copy()
    want[[0, 3]] **= 2
    np.testing.assert_allclose(once.numpy(), want, rtol=1e-6)


def test_gather_and_scatter_under_vmap_match_a_loop():
    xs = GEN.operand((3, 5, 4), "float32", 8)
    ids = np.array([[[1], [4]], [[0], [9]], [[2], [2]]], np.int32)
    dn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                    start_index_map=(0,))
    for mode in MODES:
        def g(a, i, m=mode):
            return lax.gather(a, i, dn, (1, 4), mode=m)
        loop = np.stack([g(a, i).numpy() for a, i in zip(xs, ids)])
        np.testing.assert_array_equal(fgrad.vmap(g)(xs, ids).numpy(), loop)
        np.testing.assert_array_equal(fgrad.jit(fgrad.vmap(g))(xs, ids).numpy(), loop)
        shared = np.stack([g(xs[0], i).numpy() for i in ids])
        np.testing.assert_array_equal(fgrad.vmap(g, (None, 0))(xs[0], ids).numpy(), shared)
    sd = lax.ScatterDimensionNumbers(**GEN._ROW)
    us = GEN.operand((3, 2, 4), "float32", 9)
    for fn in ("scatter", "scatter_add", "scatter_mul", "scatter_max", "scatter_min"):
        def s(a, i, b, fn=fn):
            return getattr(lax, fn)(a, i, b, sd)
        loop = np.stack([s(a, i, b).numpy() for a, i, b in zip(xs, ids, us)])
        np.testing.assert_allclose(fgrad.jit(fgrad.vmap(s))(xs, ids, us).numpy(), loop,
                                   rtol=1e-6)
        gl = fgrad.vmap(fgrad.grad(lambda a, i, b, s=s: (s(a, i, b) ** 2).sum(), (0, 2)))(
            xs, ids, us)
        for k, (a, i, b) in enumerate(zip(xs, ids, us)):
            one = fgrad.grad(lambda a, b, s=s, i=i: (s(a, i, b) ** 2).sum(), (0, 1))(a, b)
            np.testing.assert_allclose(gl[0].numpy()[k], one[0].numpy(), rtol=1e-6)
            np.testing.assert_allclose(gl[1].numpy()[k], one[1].numpy(), rtol=1e-6)


def test_index_take_matches_jax():
    src = GEN.operand((4, 3, 5), "float32", 6)
    _check(lax.index_take(src, GEN.INDEX_TAKE, (0, 2)), FIX["index_take"])


def test_gather_scatter_mode_from_any():
    M = lax.GatherScatterMode
    assert M.from_any(None) is M.FILL_OR_DROP and M.from_any("drop") is M.FILL_OR_DROP
    assert M.from_any("clip") is M.CLIP and M.from_any(M.CLIP) is M.CLIP
    assert M.from_any("promise_in_bounds") is M.PROMISE_IN_BOUNDS
    assert M.from_any("one_hot") is M.ONE_HOT
    with pytest.raises(ValueError, match="Unknown gather mode"):
        M.from_any("wrap")


X = np.arange(12.0, dtype=np.float32).reshape(4, 3)
GDN = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                 start_index_map=(0,))
SDN = lax.ScatterDimensionNumbers(**GEN._ROW)
ERRORS = [
    (lambda: lax.gather(X, np.array([[1]]), GDN, (1, 3), mode="one_hot"), ValueError,
     "ONE_HOT"),
    (lambda: lax.gather(X, np.array([[1.0]]), GDN, (1, 3)), ArgumentTypeError, "integer"),
    (lambda: lax.gather(X, np.array([[1, 2]]), GDN, (1, 3)), ArgumentError,
     "start_index_map"),
    (lambda: lax.gather(X, np.array([[1]]), GDN, (1, 4)), ArgumentError, "slice size 4"),
    (lambda: lax.gather(X, np.array([[1]]), GDN, (2, 3)), ArgumentError, "slice size 1"),
    (lambda: lax.gather(X, np.array([[1]]), GDN, (1,)), ArgumentError, "one entry per"),
    (lambda: lax.gather(X, np.array(1), GDN, (1, 3)), ArgumentError, "trailing axis"),
    (lambda: lax.gather(X, np.array([[1]]), lax.GatherDimensionNumbers((0, 1), (0,), (0,)),
                        (1, 3)), ArgumentError, "offset_dims"),
    (lambda: lax.scatter_add(X, np.array([[1]]), np.ones((1, 3), np.int32), SDN),
     ArgumentTypeError, "same dtypes"),
    (lambda: lax.scatter_add(X, np.array([[1]]), np.ones((2, 3), np.float32), SDN),
     ArgumentError, "batch shape"),
    (lambda: lax.scatter_add(X, np.array([[1]]), np.ones((1, 4), np.float32), SDN),
     ArgumentError, "exceeds operand axis"),
    (lambda: lax.scatter_add(X, np.array([[1]]), np.ones((1, 3, 1), np.float32), SDN),
     ArgumentError, "must have 2 axes"),
    (lambda: lax.scatter(X, np.array([[1]]), np.ones((1, 3), np.float32), GDN),
     ArgumentTypeError, "ScatterDimensionNumbers"),
    (lambda: lax.scatter_add(X > 1, np.array([[1]]), np.ones((1, 3), bool), SDN),
     ArgumentTypeError, "bool"),
    (lambda: lax.index_take(X, (np.array([1]),), (0, 1)), ArgumentError, "one index array"),
]


@pytest.mark.parametrize("call, kind, fragment", ERRORS, ids=range(len(ERRORS)))
def test_errors_name_the_problem(call, kind, fragment):
    with pytest.raises(kind, match=fragment):
        call()
