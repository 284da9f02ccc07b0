"""Native linalg: cholesky, triangular_solve, lu, qr and svd under `fgrad.jit`.

On the llvm backend they are LAPACK calls from generated code (llvm/lapack.py, no host
step); on opencl they stay NumPy host steps. Values are checked against NumPy/SciPy on every
backend (the tests mentioning jit run once per backend, conftest.py).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.linalg
from scipy.linalg import blas

import fgrad
import fgrad.lower
from fgrad import Tensor
from fgrad.core.prims import linalg as lp
from fgrad.lower.llvm import runtime as llvm_runtime
from fgrad.lower.kernel import program as program_lib
from fgrad.lower.schedule.partition import LinalgStep
from fgrad.transforms.jit_prim import open_jaxpr

pytestmark = pytest.mark.backends

FLOATS = [np.float32, np.float64]
TOL = {np.float32: {"rtol": 2e-4, "atol": 2e-4}, np.float64: {"rtol": 1e-9, "atol": 1e-10}}
BATCHES = [(), (3,), (2, 2)]


def jitted(fn: Callable[..., Any], *arrays: np.ndarray) -> list[np.ndarray]:
    """`fn` under `fgrad.jit` (the test's backend) on `arrays`, outputs as a list."""
    out = fgrad.jit(fn)(*[Tensor(a) for a in arrays])
    return [o.numpy() for o in (out if isinstance(out, (list, tuple)) else [out])]


def jaxpr_of(fn: Callable[..., Any], *arrays: np.ndarray) -> Any:
    """The open jaxpr of `fn` traced at `arrays`."""
    return open_jaxpr(fgrad.make_jaxpr(fn)(*[Tensor(a) for a in arrays]))[0]


def assert_lapack_on_llvm(fn: Callable[..., Any], *arrays: np.ndarray) -> None:
    """The llvm program of `fn` has no host step and at least one LAPACK step."""
    sched = llvm_runtime.plan(jaxpr_of(fn, *arrays)).schedule
    assert sched.hosts() == [] and sched.linalgs(), str(sched)


def close(got: np.ndarray, want: np.ndarray, dtype: Any) -> None:
    """Same dtype and shape, values within the dtype's tolerance (NaNs in the same places)."""
    assert got.dtype == dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    np.testing.assert_allclose(got, want.astype(dtype), equal_nan=True, **TOL[dtype])


def per_matrix(fn: Callable[..., Any], *arrays: np.ndarray) -> list[np.ndarray]:
    """`fn` (matrices in, a tuple of arrays out) applied to every matrix of a batch."""
    batch = arrays[0].shape[:-2]
    results = [fn(*(a[i] for a in arrays)) for i in np.ndindex(*batch)]
    return [np.stack([r[t] for r in results]).reshape(batch + np.shape(results[0][t]))
            for t in range(len(results[0]))]


def spd(shape: tuple[int, ...], dtype: Any, seed: int = 0) -> np.ndarray:
    """Symmetric positive definite matrices (well conditioned; the same for a seed)."""
    x = np.random.default_rng(seed).standard_normal(shape)
    return (x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def general(shape: tuple[int, ...], dtype: Any, seed: int = 0) -> np.ndarray:
    """Standard normal matrices (the same for a seed, whichever tests ran before)."""
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------------------- cholesky


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("batch", BATCHES)
def test_cholesky_matches_numpy(batch: tuple[int, ...], dtype: Any) -> None:
    a = spd(batch + (5, 5), dtype)
    skew = general(batch + (5, 5), dtype, seed=1) * 0.1
    x = a + skew - np.swapaxes(skew, -1, -2)  # only the symmetric part counts
    (got,) = jitted(lp.cholesky, x)
    close(got, np.linalg.cholesky(a.astype(np.float64)), dtype)
    assert_lapack_on_llvm(lp.cholesky, x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_cholesky_not_positive_definite_is_nan_per_matrix(dtype: Any) -> None:
    a = spd((3, 4, 4), dtype)
    a[1, 2, 2] = -50.0
    (got,) = jitted(lp.cholesky, a)
    assert np.isnan(got[1]).all()
    close(got[[0, 2]], np.linalg.cholesky(a[[0, 2]].astype(np.float64)), dtype)


def test_cholesky_empty_matrices_under_jit() -> None:
    (got,) = jitted(lp.cholesky, np.zeros((2, 0, 0)))
    assert got.shape == (2, 0, 0)
    (got,) = jitted(lp.cholesky, np.zeros((0, 3, 3)))
    assert got.shape == (0, 3, 3)


# ---------------------------------------------------------------------------- triangular_solve

FLAGS = [(lower, trans, unit) for lower in (True, False) for trans in (False, True)
         for unit in (False, True)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("lower,transpose_a,unit", FLAGS)
def test_triangular_solve_matches_scipy(lower: bool, transpose_a: bool, unit: bool,
                                        dtype: Any) -> None:
    a = general((3, 5, 5), dtype) + 4 * np.eye(5, dtype=dtype)  # both triangles filled
    b = general((3, 5, 2), dtype, seed=1)

    def solve(x: Tensor, y: Tensor) -> Tensor:
        return lp.triangular_solve(x, y, lower=lower, transpose_a=transpose_a,
                                   unit_diagonal=unit)
    (got,) = jitted(solve, a, b)
    want = per_matrix(lambda x, y: (scipy.linalg.solve_triangular(
        x.astype(np.float64), y.astype(np.float64), lower=lower, trans=int(transpose_a),
        unit_diagonal=unit),), a, b)[0]
    close(got, want, dtype)
    assert_lapack_on_llvm(solve, a, b)


@pytest.mark.parametrize("dtype", FLOATS)
def test_singular_triangular_solve_gives_inf_nan_like_trsm(dtype: Any) -> None:
    a = np.tril(general((4, 4), dtype)) + 3 * np.eye(4, dtype=dtype)
    a[1, 1] = 0.0
    b = general((4, 3), dtype, seed=1)
    (got,) = jitted(lambda x, y: lp.triangular_solve(x, y, lower=True), a, b)
    trsm = blas.get_blas_funcs("trsm", (a, b))
    want = trsm(1.0, a, b, side=0, lower=1)
    assert not np.isfinite(want).all()
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], **TOL[dtype])


def test_triangular_solve_empty_right_hand_side_under_jit() -> None:
    a = spd((2, 3, 3), np.float64)
    (got,) = jitted(lambda x, y: lp.triangular_solve(x, y, lower=True), a, np.zeros((2, 3, 0)))
    assert got.shape == (2, 3, 0)


# ---------------------------------------------------------------------------- lu


def scipy_lu(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SciPy's getrf of one matrix: (lu, pivots, perm) in the primitive's convention."""
    lu, piv = scipy.linalg.lu_factor(x)
    perm = np.arange(len(piv))
    for i, p in enumerate(piv):
        perm[[i, p]] = perm[[p, i]]
    return lu, piv.astype(np.int32), perm.astype(np.int32)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("batch", BATCHES)
def test_lu_matches_scipy(batch: tuple[int, ...], dtype: Any) -> None:
    x = general(batch + (6, 6), dtype)
    lu, pivots, perm = jitted(lp.lu, x)
    want_lu, want_piv, want_perm = per_matrix(scipy_lu, x.astype(np.float64)) if batch else \
        scipy_lu(x.astype(np.float64))
    close(lu, want_lu, dtype)
    assert pivots.dtype == perm.dtype == np.int32
    np.testing.assert_array_equal(pivots, want_piv)
    np.testing.assert_array_equal(perm, want_perm)
    lower = np.tril(lu, -1) + np.eye(6, dtype=dtype)
    rows = np.take_along_axis(x, perm[..., None].astype(np.int64), -2)
    np.testing.assert_allclose(lower @ np.triu(lu), rows, **TOL[dtype])
    assert_lapack_on_llvm(lp.lu, x)


@pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning")  # the reference warns
def test_lu_of_a_singular_matrix_completes_like_scipy() -> None:
    x = general((4, 4), np.float64)
    x[:, 2] = x[:, 0]
    lu, pivots, _ = jitted(lp.lu, x)
    want_lu, want_piv, _ = scipy_lu(x)
    close(lu, want_lu, np.float64)
    np.testing.assert_array_equal(pivots, want_piv)


# ---------------------------------------------------------------------------- qr

SHAPES = [(5, 5), (6, 4), (4, 6), (7, 1), (1, 7)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("shape", SHAPES)
def test_qr_matches_numpy(shape: tuple[int, int], full: bool, dtype: Any) -> None:
    x = general((2,) + shape, dtype)
    fn = lambda t: lp.qr(t, full_matrices=full)
    q, r = jitted(fn, x)
    want_q, want_r = np.linalg.qr(x.astype(np.float64), mode="complete" if full else "reduced")
    close(q, want_q, dtype)
    close(r, want_r, dtype)
    assert_lapack_on_llvm(fn, x)


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("shape", [(3, 0), (0, 3), (2, 0, 0)])
def test_qr_of_empty_matrices_under_jit(shape: tuple[int, ...], full: bool) -> None:
    x = np.zeros(shape)
    q, r = jitted(lambda t: lp.qr(t, full_matrices=full), x)
    want_q, want_r = np.linalg.qr(x, mode="complete" if full else "reduced")
    close(q, want_q, np.float64)
    close(r, want_r, np.float64)


# ---------------------------------------------------------------------------- svd


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("shape", SHAPES)
def test_svd_matches_numpy(shape: tuple[int, int], full: bool, dtype: Any) -> None:
    x = general((3,) + shape, dtype)
    fn = lambda t: lp.svd(t, full_matrices=full)
    u, s, vh = jitted(fn, x)
    want_u, want_s, want_vh = np.linalg.svd(x, full_matrices=full)  # signs: same precision
    close(s, want_s, dtype)
    k = min(shape)
    reconstructed = (u[..., :k] * s[..., None, :]) @ vh[..., :k, :]
    np.testing.assert_allclose(reconstructed, x, **TOL[dtype])
    # NumPy's routine, but another OpenBLAS build may flip a singular pair's sign
    signs = np.sign((u[..., :k] * want_u[..., :k]).sum(-2))
    close(u[..., :k] * signs[..., None, :], want_u[..., :k], dtype)
    close(vh[..., :k, :] * signs[..., :, None], want_vh[..., :k, :], dtype)
    for m in (u, np.swapaxes(vh, -1, -2)):  # orthonormal columns, completions included
        eye = np.broadcast_to(np.eye(m.shape[-1]), m.shape[:-2] + (m.shape[-1],) * 2)
        np.testing.assert_allclose(np.swapaxes(m, -1, -2) @ m, eye, **TOL[dtype])
    assert_lapack_on_llvm(fn, x)


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("shape", [(3, 0), (0, 2)])
def test_svd_of_empty_matrices_under_jit(shape: tuple[int, int], full: bool) -> None:
    x = np.zeros(shape)
    got = jitted(lambda t: lp.svd(t, full_matrices=full), x)
    for g, w in zip(got, np.linalg.svd(x, full_matrices=full), strict=True):
        close(g, w, np.float64)


def test_svd_of_non_finite_input_is_nan_on_llvm() -> None:
    x = general((2, 4, 3), np.float64)
    x[0, 1, 1] = np.nan
    x[1, 0, 0] = np.inf
    got = fgrad.jit(lambda t: lp.svd(t, full_matrices=False), backend="llvm")(Tensor(x))
    for out in got:
        assert np.isnan(out.numpy()).all()


# ---------------------------------------------------------------------------- large


def test_matrices_larger_than_a_transpose_tile_under_jit() -> None:
    """Partial 32 x 32 tiles of the transposing copies (70 = 2 * 32 + 6)."""
    x, a = general((70, 45), np.float64), spd((70, 70), np.float64)
    b = general((70, 40), np.float64, seed=1)
    got = jitted(lambda t, s, r: (lp.qr(t)[1], lp.svd(t)[1], lp.lu(s)[0], lp.cholesky(s),
                                  lp.triangular_solve(s, r, lower=False)), x, a, b)
    want = [np.linalg.qr(x, mode="complete")[1], np.linalg.svd(x, compute_uv=False),
            scipy_lu(a)[0], np.linalg.cholesky(a),
            scipy.linalg.solve_triangular(a, b, lower=False)]
    for g, w in zip(got, want, strict=True):
        close(g, w, np.float64)


# ---------------------------------------------------------------------------- schedules


LINALG_FNS = {
    "cholesky": (lp.cholesky, lambda: spd((2, 3, 3), np.float32)),
    "lu": (lp.lu, lambda: general((2, 3, 3), np.float32)),
    "qr": (lp.qr, lambda: general((2, 4, 3), np.float64)),
    "svd": (lp.svd, lambda: general((2, 3, 4), np.float64)),
}


@pytest.mark.parametrize("name", sorted(LINALG_FNS))
def test_llvm_lowers_linalg_to_a_library_call(name: str) -> None:
    fn, make = LINALG_FNS[name]
    x = make()
    program = llvm_runtime.plan(jaxpr_of(fn, x))
    (step,) = program.schedule.linalgs()
    assert isinstance(step, LinalgStep) and step.eqn.primitive.name == name
    assert program.schedule.hosts() == [] and step.name in program.library_calls
    text = fgrad.jit(fn, backend="llvm").lower(Tensor(x)).as_text()
    assert f"lapack {name}" in text and "0 host steps" in text


@pytest.mark.parametrize("name", sorted(LINALG_FNS))
def test_without_lapack_linalg_stays_a_host_step(name: str) -> None:
    fn, make = LINALG_FNS[name]
    sched = program_lib.plan(jaxpr_of(fn, make()), native_linalg=False).schedule
    assert [h.eqn.primitive.name for h in sched.hosts()] == [name] and not sched.linalgs()


@pytest.mark.opencl
def test_opencl_runs_linalg_as_host_steps() -> None:
    from fgrad.lower.opencl import runtime as opencl_runtime
    sched = opencl_runtime.plan(jaxpr_of(lp.cholesky, spd((2, 3, 3), np.float32))).schedule
    assert [h.eqn.primitive.name for h in sched.hosts()] == ["cholesky"]


def test_half_precision_linalg_stays_a_host_step_on_llvm() -> None:
    x = spd((3, 3), np.float16)
    sched = llvm_runtime.plan(jaxpr_of(lp.cholesky, x)).schedule
    assert [h.eqn.primitive.name for h in sched.hosts()] == ["cholesky"]
    (got,) = jitted(lp.cholesky, x)
    np.testing.assert_allclose(got.astype(np.float64), np.linalg.cholesky(
        x.astype(np.float64)), rtol=2e-3, atol=2e-3)


def test_only_llvm_records_a_linalg_lowering() -> None:
    from fgrad.core.primitive import REGISTRY
    for name in ("cholesky", "triangular_solve", "lu", "qr", "svd"):
        assert "llvm" in REGISTRY[name].lowerings
        assert "opencl" not in REGISTRY[name].lowerings


# ---------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("dtype", FLOATS)
def test_grad_through_cholesky_under_jit_matches_finite_differences(dtype: Any) -> None:
    a = spd((2, 4, 4), np.float64)
    weights = general((2, 4, 4), np.float64, seed=1)

    def loss(x: Tensor) -> Tensor:
        return (lp.cholesky(x) * Tensor(weights.astype(dtype))).sum()

    def numpy_loss(x: np.ndarray) -> float:
        return float((np.linalg.cholesky((x + np.swapaxes(x, -1, -2)) / 2) * weights).sum())
    (got,) = jitted(fgrad.grad(loss), a.astype(dtype))
    eps = 1e-6
    want = np.zeros_like(a)
    for idx in np.ndindex(*a.shape):
        step = np.zeros_like(a)
        step[idx] = eps
        want[idx] = (numpy_loss(a + step) - numpy_loss(a - step)) / (2 * eps)
    np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == np.float32 else 1e-6,
                               atol=1e-4 if dtype == np.float32 else 1e-7)
    grad_jaxpr = jaxpr_of(fgrad.grad(loss), a.astype(dtype))
    sched = llvm_runtime.plan(grad_jaxpr).schedule
    names = sorted(s.eqn.primitive.name for s in sched.linalgs())
    assert sched.hosts() == [] and "triangular_solve" in names and "cholesky" in names
