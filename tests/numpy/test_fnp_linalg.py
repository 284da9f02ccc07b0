"""fgrad.numpy.linalg against numpy.linalg: values (batched, float32 and float64) and
gradients against central differences of the NumPy reference."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import Tensor

RNG = np.random.default_rng(3)


def well(*shape: int) -> np.ndarray:
    a = RNG.normal(size=shape)
    return a + 3 * np.eye(shape[-2], shape[-1])


def spd(*shape: int) -> np.ndarray:
    a = RNG.normal(size=shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def sign_fixed(v: np.ndarray) -> np.ndarray:
    """Eigen/singular vectors with the largest-magnitude entry of each column positive."""
    idx = np.argmax(np.abs(v), axis=-2)[..., None, :]
    return v * np.sign(np.take_along_axis(v, idx, -2))


A = well(2, 3, 3)
TALL = well(5, 3)
S = spd(2, 4, 4)
VALUES: list[tuple[str, Callable[..., Any], Callable[..., Any], tuple]] = [
    ("det", fnp.linalg.det, np.linalg.det, (A,)),
    ("inv", fnp.linalg.inv, np.linalg.inv, (A,)),
    ("solve-matrix", fnp.linalg.solve, np.linalg.solve, (A, RNG.normal(size=(2, 3, 2)))),
    ("solve-vector", fnp.linalg.solve, np.linalg.solve, (A[0], RNG.normal(size=3))),
    ("cholesky", fnp.linalg.cholesky, np.linalg.cholesky, (S,)),
    ("pinv", fnp.linalg.pinv, np.linalg.pinv, (TALL,)),
    ("matrix_power-3", lambda a: fnp.linalg.matrix_power(a, 3),
     lambda a: np.linalg.matrix_power(a, 3), (A,)),
    ("matrix_power--2", lambda a: fnp.linalg.matrix_power(a, -2),
     lambda a: np.linalg.matrix_power(a, -2), (A[0],)),
    ("matrix_power-0", lambda a: fnp.linalg.matrix_power(a, 0),
     lambda a: np.linalg.matrix_power(a, 0), (A[0],)),
    ("eigvalsh", fnp.linalg.eigvalsh, np.linalg.eigvalsh, (S,)),
    ("svdvals", fnp.linalg.svdvals, lambda a: np.linalg.svd(a, compute_uv=False), (TALL,)),
    ("matrix_rank", fnp.linalg.matrix_rank, np.linalg.matrix_rank,
     (np.outer(np.arange(1.0, 4.0), np.arange(1.0, 5.0)),)),
    ("cond", fnp.linalg.cond, np.linalg.cond, (A,)),
    ("multi_dot", lambda *m: fnp.linalg.multi_dot(m), lambda *m: np.linalg.multi_dot(m),
     (RNG.normal(size=3), A[0], A[1])),
]
NORMS = [(None, None), (None, -1), (2, None), (1, 0), (math.inf, -1), (-math.inf, 0),
         (0, -1), (3, -1), (0.5, 1), ("fro", (0, 1)), ("nuc", (-2, -1)), (1, (1, 0)),
         (-1, (0, 1)), (2, (0, 1)), (-2, (0, 1)), (math.inf, (0, 1)), (-math.inf, (1, 0))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,fn,ref,args", VALUES, ids=[v[0] for v in VALUES])
def test_values(name: str, fn: Any, ref: Any, args: tuple, dtype: Any) -> None:
    cast = [a.astype(dtype) for a in args]
    got = fn(*cast)
    want = ref(*args)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)
    if np.asarray(want).dtype.kind == "f":
        assert got.dtype.np == dtype


@pytest.mark.parametrize("ord_,axis", NORMS, ids=[f"{o}-{a}" for o, a in NORMS])
def test_norm(ord_: Any, axis: Any) -> None:
    x = RNG.normal(size=(3, 4))
    for keepdims in (False, True):
        got = fnp.linalg.norm(x, ord_, axis, keepdims)
        want = np.linalg.norm(x, ord_, axis, keepdims)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)
    vec = x[0] if axis is None and ord_ not in (None, "fro", "nuc") else x
    if axis is None:
        np.testing.assert_allclose(fnp.linalg.norm(vec, ord_).numpy(),
                                   np.linalg.norm(vec, ord_), rtol=1e-10)


def test_slogdet_signs_and_decompositions() -> None:
    mats = np.stack([well(3, 3), -well(3, 3), well(3, 3)[[1, 0, 2]]])
    sign, logdet = fnp.linalg.slogdet(mats)
    ws, wl = np.linalg.slogdet(mats)
    np.testing.assert_allclose(sign.numpy(), ws)
    np.testing.assert_allclose(logdet.numpy(), wl, rtol=1e-12)
    q, r = fnp.linalg.qr(TALL)
    np.testing.assert_allclose((q @ r).numpy(), TALL, atol=1e-12)
    assert fnp.linalg.qr(TALL, mode="complete").Q.shape == (5, 5)
    np.testing.assert_allclose(np.abs(fnp.linalg.qr(TALL, "r").numpy()),
                               np.abs(np.linalg.qr(TALL, "r")), atol=1e-12)
    u, s, vh = fnp.linalg.svd(TALL, full_matrices=False)
    np.testing.assert_allclose((u * s.unsqueeze(-2) @ vh).numpy(), TALL, atol=1e-12)
    w, v = fnp.linalg.eigh(S)
    ww, wv = np.linalg.eigh(S)
    np.testing.assert_allclose(w.numpy(), ww, rtol=1e-12)
    np.testing.assert_allclose(sign_fixed(v.numpy()), sign_fixed(wv), atol=1e-10)
    upper = np.triu(S[0]) + np.tril(RNG.normal(size=(4, 4)), -1)
    np.testing.assert_allclose(fnp.linalg.eigh(upper, UPLO="U").eigenvalues.numpy(),
                               np.linalg.eigh(upper, UPLO="U")[0], rtol=1e-12)


def test_lstsq() -> None:
    b = RNG.normal(size=(5, 2))
    x, resid, rank, s = fnp.linalg.lstsq(TALL, b)
    wx, wres, wrank, ws = np.linalg.lstsq(TALL, b)
    np.testing.assert_allclose(x.numpy(), wx, rtol=1e-10)
    np.testing.assert_allclose(resid.numpy(), wres, rtol=1e-10)
    assert int(rank.numpy()) == wrank
    np.testing.assert_allclose(s.numpy(), ws, rtol=1e-12)


def _fd_check(f: Callable[[np.ndarray], np.ndarray], g: Callable[[Tensor], Tensor],
              x: np.ndarray) -> None:
    w = np.random.default_rng(1).normal(size=np.shape(f(x)))
    grad = fgrad.grad(lambda t: (g(t) * Tensor(w)).sum())(Tensor(x)).numpy()
    fd = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        for sgn in (1, -1):
            moved = x.copy()
            moved[idx] += sgn * 1e-6
            fd[idx] += sgn * np.sum(f(moved) * w) / 2e-6
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)


GRADS = [
    ("det", np.linalg.det, fnp.linalg.det, A[0]),
    ("inv", np.linalg.inv, fnp.linalg.inv, A[0]),
    ("slogdet", lambda a: np.linalg.slogdet(a)[1], lambda a: fnp.linalg.slogdet(a)[1], A[0]),
    ("solve", lambda a: np.linalg.solve(a, np.arange(3.0)),
     lambda a: fnp.linalg.solve(a, np.arange(3.0)), A[0]),
    ("pinv", np.linalg.pinv, fnp.linalg.pinv, TALL),
    ("eigvalsh", lambda a: np.linalg.eigvalsh(a + a.T), lambda a: fnp.linalg.eigvalsh(a + a.T),
     S[0]),
    ("eigh-vectors", lambda a: sign_fixed(np.linalg.eigh(a + a.T)[1]) ** 2,
     lambda a: fnp.linalg.eigh(a + a.T)[1] ** 2, S[0]),
    ("norm-nuc", lambda a: np.linalg.norm(a, "nuc"), lambda a: fnp.linalg.norm(a, "nuc"), TALL),
    ("norm-2", lambda a: np.linalg.norm(a, 2), lambda a: fnp.linalg.norm(a, 2), TALL),
    ("norm-3", lambda a: np.linalg.norm(a, 3, -1), lambda a: fnp.linalg.norm(a, 3, -1), TALL),
    ("matrix_power", lambda a: np.linalg.matrix_power(a, 3),
     lambda a: fnp.linalg.matrix_power(a, 3), A[0]),
    ("cholesky", lambda a: np.linalg.cholesky(a @ a.T), lambda a: fnp.linalg.cholesky(a @ a.T),
     A[0]),
]


@pytest.mark.parametrize("name,f,g,x", GRADS, ids=[v[0] for v in GRADS])
def test_gradients(name: str, f: Any, g: Any, x: np.ndarray) -> None:
    _fd_check(f, g, np.asarray(x, np.float64))


@pytest.mark.backends
def test_linalg_under_jit_and_vmap(jit_backend: str) -> None:
    """jit and vmap of linalg functions agree with eager (eigh is a host step natively)."""
    def f(a: Tensor) -> Tensor:
        w, v = fnp.linalg.eigh(a)
        return fnp.linalg.solve(a, w) + v.sum(0) + fnp.linalg.det(a) + fnp.linalg.norm(a, 2)
    x = Tensor(S.astype(np.float32))
    eager = np.stack([f(x[i]).numpy() for i in range(2)])
    jitted = fgrad.jit(fgrad.vmap(f))(x).numpy()
    np.testing.assert_allclose(jitted, eager, rtol=2e-4, atol=2e-4)


def test_solve_broadcasts_batches_and_explains_mismatches() -> None:
    a = well(4, 1, 3, 3)
    b = RNG.normal(size=(1, 2, 3, 5))
    np.testing.assert_allclose(fnp.linalg.solve(a, b).numpy(), np.linalg.solve(a, b),
                               rtol=1e-10)
    with pytest.raises(ValueError, match="batch of vectors when b.ndim == a.ndim - 1"):
        fnp.linalg.solve(a, RNG.normal(size=(2, 3, 2)))
