"""Tensor.qr/svd/cholesky/solve/inv/det/slogdet and the matrix primitives behind them.

Values are checked against np.linalg (QR/SVD by reconstruction, since signs are not unique),
derivatives against central finite differences in float64, batching against a loop.
"""
import numpy as np
import pytest

import fgrad
from fgrad import Tensor, dtypes
from fgrad.core.prims import linalg as lp
from fgrad.core.prims._util import UndefinedPrimal

pytestmark = pytest.mark.backends  # jit tests run per backend (conftest.py)

RNG = np.random.default_rng(1234)
TOL = {np.float32: dict(rtol=2e-4, atol=2e-4), np.float64: dict(rtol=1e-9, atol=1e-9)}
FD_TOL = dict(rtol=1e-6, atol=1e-6)


def general(*shape, dtype=np.float64):
    """Random well-conditioned (batch of) matrices: diagonally shifted Gaussians."""
    n = shape[-1]
    return (RNG.normal(size=shape) + 2 * np.sqrt(n) * np.eye(shape[-2], n)).astype(dtype)


def spd(*shape, dtype=np.float64):
    a = RNG.normal(size=shape)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def mT(x):  # noqa: N802
    return np.swapaxes(x, -1, -2)


def fd(fn, x, dx, eps=1e-6):
    """Central difference of fn (arrays in, list of arrays out) along dx."""
    return [(p - m) / (2 * eps) for p, m in zip(fn(x + eps * dx), fn(x - eps * dx))]


def numeric_grad(fn, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (fn(x + e) - fn(x - e)) / (2 * eps)
    return g


def assert_orthonormal_columns(q, tol):
    k = q.shape[-1]
    np.testing.assert_allclose(mT(q) @ q, np.broadcast_to(np.eye(k), q.shape[:-2] + (k, k)),
                               **tol)


# ------------------------------------------------------------------------------ values

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 4, 4), (5, 3), (3, 5), (2, 6, 2), (1, 1)])
def test_qr_reconstructs(shape, dtype):
    a = RNG.normal(size=shape).astype(dtype)
    q, r = Tensor(a).qr()
    m, n = shape[-2:]
    assert q.shape == shape[:-2] + (m, m) and r.shape == shape[:-2] + (m, n)
    assert q.dtype == r.dtype == dtypes.from_np(dtype)
    q, r = q.numpy(), r.numpy()
    np.testing.assert_allclose(q @ r, a, **TOL[dtype])
    assert_orthonormal_columns(q, TOL[dtype])
    assert np.all(np.tril(r, -1) == 0)
    ref_r = np.linalg.qr(a.astype(np.float64), mode="complete")[1]
    np.testing.assert_allclose(np.abs(r), np.abs(ref_r), **TOL[dtype])


def test_qr_householder_sign_convention():
    # The reference's Householder QR makes R[0, 0] = -sign(A[0, 0]) * ||A[:, 0]||.
    a = RNG.normal(size=(6, 4, 3))
    r = Tensor(a).qr()[1].numpy()
    norms = np.linalg.norm(a[:, :, 0], axis=-1)
    np.testing.assert_allclose(r[:, 0, 0], -np.sign(a[:, 0, 0]) * norms)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 4, 4), (5, 3), (3, 5), (2, 2, 6)])
def test_svd_reconstructs(shape, full, dtype):
    a = RNG.normal(size=shape).astype(dtype)
    u, s, vh = Tensor(a).svd(full_matrices=full)
    m, n = shape[-2:]
    k = min(m, n)
    batch = shape[:-2]
    assert u.shape == batch + ((m, m) if full else (m, k))
    assert s.shape == batch + (k,)
    assert vh.shape == batch + ((n, n) if full else (k, n))
    u, s, vh = u.numpy(), s.numpy(), vh.numpy()
    np.testing.assert_allclose(s, np.linalg.svd(a.astype(np.float64), compute_uv=False),
                               **TOL[dtype])
    assert np.all(np.diff(s, axis=-1) <= 0)
    np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a,
                               **TOL[dtype])
    assert_orthonormal_columns(u, TOL[dtype])
    assert_orthonormal_columns(mT(vh), TOL[dtype])


def test_svd_default_is_full_matrices():
    u, s, vh = Tensor(RNG.normal(size=(5, 2))).svd()
    assert (u.shape, s.shape, vh.shape) == ((5, 5), (2,), (2, 2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (2, 3, 5, 5)])
def test_cholesky(shape, dtype):
    a = spd(*shape, dtype=dtype)
    lower = Tensor(a).cholesky().numpy()
    np.testing.assert_allclose(lower, np.linalg.cholesky(a.astype(np.float64)), **TOL[dtype])
    upper = Tensor(a).cholesky(upper=True).numpy()
    np.testing.assert_allclose(upper, mT(lower), **TOL[dtype])
    np.testing.assert_allclose(mT(upper) @ upper, a, **TOL[dtype])


def test_cholesky_uses_symmetric_part():
    a = spd(3, 4, 4)
    skew = RNG.normal(size=a.shape)
    skew = skew - mT(skew)
    np.testing.assert_allclose(Tensor(a + skew).cholesky().numpy(), np.linalg.cholesky(a))


def test_cholesky_not_positive_definite_is_nan_per_matrix():
    a = np.stack([np.array([[1.0, 2.0], [2.0, 1.0]]), spd(2, 2)])
    lower = Tensor(a).cholesky().numpy()
    assert np.isnan(lower[0]).all()
    np.testing.assert_allclose(lower[1], np.linalg.cholesky(a[1]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("a_shape,b_shape", [
    ((3, 3), (3, 2)), ((3, 3), (3,)), ((2, 4, 4), (2, 4, 1)), ((2, 1, 3, 3), (4, 3, 2)),
    ((3, 3), (5, 3, 2)), ((2, 3, 3), (3,))])
def test_solve(a_shape, b_shape, dtype):
    a, b = general(*a_shape, dtype=dtype), RNG.normal(size=b_shape).astype(dtype)
    x = Tensor(a).solve(Tensor(b))
    ref = np.linalg.solve(a.astype(np.float64), b.astype(np.float64))
    assert x.shape == ref.shape and x.dtype == dtypes.from_np(dtype)
    np.testing.assert_allclose(x.numpy(), ref, **TOL[dtype])


def test_solve_needs_pivoting_and_promotes():
    a = np.array([[0.0, 2.0, 1.0], [1.0, 1.0, 0.0], [3.0, 0.0, 1.0]])
    b = np.array([[1, 2], [3, 4], [5, 6]], np.int32)
    x = Tensor(a.astype(np.float32)).solve(Tensor(b))
    assert x.dtype == dtypes.float32
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(a, b), rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (2, 3, 3, 3)])
def test_inv_det_slogdet(shape, dtype):
    a = RNG.normal(size=shape).astype(dtype)  # general: both determinant signs occur
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(Tensor(a).inv().numpy(), np.linalg.inv(a64), rtol=1e-3 if
                               dtype == np.float32 else 1e-8, atol=1e-3)
    np.testing.assert_allclose(Tensor(a).det().numpy(), np.linalg.det(a64), **TOL[dtype])
    sign, logabs = Tensor(a).slogdet()
    ref_sign, ref_logabs = np.linalg.slogdet(a64)
    np.testing.assert_array_equal(sign.numpy(), ref_sign)
    np.testing.assert_allclose(logabs.numpy(), ref_logabs, **TOL[dtype])
    assert sign.dtype == logabs.dtype == dtypes.from_np(dtype)


def test_det_of_permutations_counts_swaps():
    perms = [(0, 1, 2, 3), (1, 0, 2, 3), (1, 2, 0, 3), (3, 2, 1, 0), (1, 0, 3, 2), (1, 2, 3, 0)]
    mats = np.stack([np.eye(4)[list(p)] for p in perms])
    np.testing.assert_array_equal(Tensor(mats).det().numpy(), np.linalg.det(mats).round())
    np.testing.assert_array_equal(Tensor(mats).slogdet()[0].numpy(), [1, -1, 1, 1, 1, -1])


def test_integer_input_is_computed_in_default_float():
    d = Tensor([[2, 1], [1, 3]]).det()
    assert d.dtype == dtypes.float32 and d.item() == pytest.approx(5.0)
    assert Tensor([[4, 2], [2, 3]]).cholesky().dtype == dtypes.float32


def test_half_precision_keeps_dtype():
    a = general(3, 3, dtype=np.float16)
    q, r = Tensor(a).qr()
    assert q.dtype == r.dtype == dtypes.float16
    np.testing.assert_allclose((q.numpy() @ r.numpy()).astype(np.float32), a, atol=2e-2)


def test_empty_matrices():
    assert Tensor(np.zeros((2, 0, 0))).det().tolist() == [1.0, 1.0]
    assert Tensor(np.zeros((0, 0))).inv().shape == (0, 0)
    assert Tensor(np.zeros((0, 3, 3))).det().shape == (0,)
    assert Tensor(np.zeros((0, 3, 2))).svd()[1].shape == (0, 2)


def test_singular_matrices_do_not_raise():
    s = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert Tensor(s).det().item() == 0
    sign, logabs = Tensor(s).slogdet()
    assert sign.item() == 0 and logabs.item() == -np.inf
    assert not np.isfinite(Tensor(s).inv().numpy()).all()


@pytest.mark.parametrize("method", ["cholesky", "inv", "det", "slogdet"])
def test_non_square_errors_name_op_and_shape(method):
    with pytest.raises(ValueError, match=rf"{method}: expected square .*\(2, 3, 4\)"):
        getattr(Tensor(np.ones((2, 3, 4))), method)()


@pytest.mark.parametrize("method", ["qr", "svd", "cholesky", "det"])
def test_vector_input_errors(method):
    with pytest.raises(ValueError, match=rf"{method}: expected a matrix.*\(3,\)"):
        getattr(Tensor(np.ones(3)), method)()


def test_solve_shape_errors():
    with pytest.raises(ValueError, match=r"solve: b of shape \(4, 2\) does not match"):
        Tensor(np.eye(3)).solve(Tensor(np.ones((4, 2))))
    with pytest.raises(ValueError, match="solve: expected square"):
        Tensor(np.ones((3, 2))).solve(Tensor(np.ones((3, 1))))
    with pytest.raises(ValueError, match="solve: cannot broadcast"):
        Tensor(np.ones((2, 3, 3))).solve(Tensor(np.ones((4, 3, 1))))


def test_primitive_abstract_eval_errors():
    with pytest.raises(TypeError, match="qr requires a floating-point"):
        lp.qr(Tensor(np.ones((3, 3), np.int32)))
    with pytest.raises(ValueError, match="triangular_solve: cannot solve"):
        lp.triangular_solve(Tensor(np.eye(3)), Tensor(np.ones((4, 1))), lower=True)


# ------------------------------------------------------------------------------ JVP rules

def rule_jvp(prim, primals, tangents, **params):
    """Call a primitive's JVP rule directly on concrete Tensors; outputs as lists."""
    out, out_dot = prim.jvp([Tensor(p) for p in primals], [Tensor(t) for t in tangents],
                            **params)
    if not prim.multiple_results:
        out, out_dot = [out], [out_dot]
    return [o.numpy() for o in out], [None if t is None else t.numpy() for t in out_dot]


def test_cholesky_jvp_rule():
    a, da = spd(2, 4, 4), RNG.normal(size=(2, 4, 4))
    _, (dl,) = rule_jvp(lp.cholesky_p, [a], [da])
    (ref,) = fd(lambda x: [np.linalg.cholesky((x + mT(x)) / 2)], a, da)
    np.testing.assert_allclose(dl, ref, **FD_TOL)


def test_lu_jvp_rule():
    a, da = RNG.normal(size=(3, 4, 4)), RNG.normal(size=(3, 4, 4))
    (lu, pivots, perm), (dlu, dpiv, dperm) = rule_jvp(lp.lu_p, [a], [da])
    (ref,) = fd(lambda x: [lp.lu(Tensor(x))[0].numpy()], a, da)
    np.testing.assert_allclose(dlu, ref, **FD_TOL)
    assert dpiv is None and dperm is None
    lower, upper = np.tril(lu, -1) + np.eye(4), np.triu(lu)
    np.testing.assert_allclose(lower @ upper, np.take_along_axis(a, perm[..., None], -2))


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_triangular_solve_values_and_jvp(lower, transpose_a, unit):
    tri = np.tril if lower else np.triu
    a = RNG.normal(size=(2, 4, 4)) + 4 * np.eye(4)  # the unread triangle holds junk
    b = RNG.normal(size=(2, 4, 3))
    params = dict(lower=lower, transpose_a=transpose_a, unit_diagonal=unit)
    used = tri(a, -1 if lower else 1) + np.eye(4) if unit else tri(a)
    op = mT(used) if transpose_a else used
    solve = lambda x, y: lp.triangular_solve(Tensor(x), Tensor(y), **params).numpy()  # noqa
    np.testing.assert_allclose(solve(a, b), np.linalg.solve(op, b), rtol=1e-10)
    da, db = RNG.normal(size=a.shape), RNG.normal(size=b.shape)
    _, (dx,) = rule_jvp(lp.triangular_solve_p, [a, b], [da, db], **params)
    ref = (solve(a + 1e-6 * da, b + 1e-6 * db) - solve(a - 1e-6 * da, b - 1e-6 * db)) / 2e-6
    np.testing.assert_allclose(dx, ref, **FD_TOL)


@pytest.mark.parametrize("transpose_a", [True, False])
def test_triangular_solve_transpose_rule(transpose_a):
    """<ct, T b> == <T^t ct, b> for the map b -> op(A)^-1 b."""
    a = Tensor(np.triu(RNG.normal(size=(2, 3, 3))) + 3 * np.eye(3))
    b, ct = RNG.normal(size=(2, 3, 2)), RNG.normal(size=(2, 3, 2))
    params = dict(lower=False, transpose_a=transpose_a, unit_diagonal=False)
    tb = lp.triangular_solve(a, Tensor(b), **params).numpy()
    undefined = UndefinedPrimal(Tensor(b).aval)
    ct_a, ct_b = lp.triangular_solve_p.transpose(Tensor(ct), a, undefined, **params)
    assert ct_a is None
    np.testing.assert_allclose(np.sum(ct * tb), np.sum(ct_b.numpy() * b), rtol=1e-12)


def aligned(ref_cols, cols, rows=None):
    """Flip the signs of column i of `cols` (and row i of `rows`) to agree with ref_cols."""
    k = ref_cols.shape[-1]
    sign = np.sign(np.sum(ref_cols * cols[..., :k], axis=-2, keepdims=True))
    cols = np.concatenate([cols[..., :k] * sign, cols[..., k:]], -1)
    if rows is None:
        return cols
    return cols, np.concatenate([rows[..., :k, :] * mT(sign), rows[..., k:, :]], -2)


@pytest.mark.parametrize("shape", [(2, 4, 4), (5, 3), (3, 5)])
def test_qr_jvp_rule(shape):
    a, da = RNG.normal(size=shape), RNG.normal(size=shape)
    k = min(shape[-2:])
    for full in (False, True):
        (q, r), (dq, dr) = rule_jvp(lp.qr_p, [a], [da], full_matrices=full)
        factor = lambda x: [t.numpy() for t in lp.qr(Tensor(x), full)]  # noqa: E731
        signed = lambda x: list(aligned(q[..., :k], *factor(x)))  # noqa: E731
        ref_dq, ref_dr = fd(signed, a, da)
        np.testing.assert_allclose(dq[..., :k], ref_dq[..., :k], **FD_TOL)
        np.testing.assert_allclose(dr, ref_dr, **FD_TOL)


@pytest.mark.parametrize("shape", [(2, 4, 4), (5, 3), (3, 5), (2, 6, 2)])
def test_svd_jvp_rule(shape):
    a, da = RNG.normal(size=shape), RNG.normal(size=shape)
    k = min(shape[-2:])
    for full in (False, True):
        (u, s, vh), (du, ds, dvh) = rule_jvp(lp.svd_p, [a], [da], full_matrices=full)

        def signed(x):
            uu, ss, vv = [t.numpy() for t in lp.svd(Tensor(x), full)]
            uu, vv = aligned(u[..., :k], uu, vv)
            return [uu, ss, vv]
        ref_du, ref_ds, ref_dvh = fd(signed, a, da)
        np.testing.assert_allclose(ds, ref_ds, **FD_TOL)
        np.testing.assert_allclose(du[..., :k], ref_du[..., :k], **FD_TOL)
        np.testing.assert_allclose(dvh[..., :k, :], ref_dvh[..., :k, :], **FD_TOL)


@pytest.mark.parametrize("which", ["qr", "svd_u", "svd_v"])
def test_completed_columns_have_exact_projector_derivative(which):
    """The extra columns Q2 of a complete factor are not unique, but Q2 Q2^T = I - Q1 Q1^T is:
    its tangent must match finite differences, and Q must stay orthogonal to first order."""
    shape = (2, 3, 5) if which == "svd_v" else (2, 5, 3)
    a, da = RNG.normal(size=shape), RNG.normal(size=shape)
    prim, params = (lp.qr_p, {}) if which == "qr" else (lp.svd_p, {})
    outs, dots = rule_jvp(prim, [a], [da], full_matrices=True, **params)
    pick = {"qr": lambda o: o[0], "svd_u": lambda o: o[0], "svd_v": lambda o: mT(o[2])}[which]
    q, dq = pick(outs), pick(dots)
    np.testing.assert_allclose(mT(dq) @ q + mT(q) @ dq, 0, atol=1e-12)

    def projector(x):
        fn = lp.qr if which == "qr" else lp.svd
        qq = pick([t.numpy() for t in fn(Tensor(x), True)])
        return [qq[..., 3:] @ mT(qq[..., 3:])]
    (ref,) = fd(projector, a, da)
    q2, dq2 = q[..., 3:], dq[..., 3:]
    np.testing.assert_allclose(dq2 @ mT(q2) + q2 @ mT(dq2), ref, **FD_TOL)


def test_svd_jvp_repeated_singular_values_is_not_finite():
    with np.errstate(all="ignore"):
        _, (du, ds, _) = rule_jvp(lp.svd_p, [np.eye(3)], [RNG.normal(size=(3, 3))],
                                  full_matrices=False)
    assert np.isfinite(ds).all() and not np.isfinite(du).all()


# ------------------------------------------------------------------------------ transforms

WEIGHTS = RNG.normal(size=(3, 3))
SCALARS = {  # scalar functions of a 3x3 matrix, sign-invariant where the factor is not unique
    "det": lambda x: x.det(),
    "slogdet": lambda x: x.slogdet()[1] * x.slogdet()[0],
    "inv": lambda x: (x.inv() * Tensor(WEIGHTS)).sum(),
    "solve": lambda x: (x.solve(Tensor(WEIGHTS)) ** 2).sum(),
    "solve_vec": lambda x: (x.solve(Tensor(WEIGHTS[0])) ** 3).sum(),
    "cholesky": lambda x: ((x @ x.transpose(-1, -2)).cholesky() * Tensor(WEIGHTS)).sum(),
    "cholesky_upper": lambda x: (x @ x.transpose(-1, -2)).cholesky(upper=True).sum(),
    "qr_r": lambda x: (x.qr()[1] ** 2 * Tensor(WEIGHTS)).sum(),
    "qr_q": lambda x: _qr_q_signed(x),
    "svd_s": lambda x: (x.svd()[1] * Tensor(WEIGHTS[0])).sum(),
    "svd_uv": lambda x: _svd_rank1(x),
}


def _qr_q_signed(x):
    """Q with columns scaled by sign(R_ii): unique for invertible x."""
    q, r = x.qr()
    diag_sign = (r * Tensor(np.eye(3))).sum(-2).sign()
    return (q * diag_sign * Tensor(WEIGHTS)).sum()


def _svd_rank1(x):
    """sum_i w_i u_i v_i^T: each term is invariant to flipping the signs of u_i and v_i."""
    u, s, vh = x.svd()
    return ((u * Tensor(WEIGHTS[1])) @ vh * Tensor(WEIGHTS)).sum()


@pytest.mark.parametrize("name", sorted(SCALARS))
def test_grad_matches_finite_differences(name):
    fn = SCALARS[name]
    a = general(3, 3)
    g = fgrad.grad(fn)(Tensor(a)).numpy()
    ref = numeric_grad(lambda x: fn(Tensor(x)).item(), a)
    np.testing.assert_allclose(g, ref, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["det", "inv", "cholesky", "qr_r", "svd_s", "svd_uv"])
def test_jvp_transform_matches_finite_differences(name):
    fn = SCALARS[name]
    a, da = general(3, 3), RNG.normal(size=(3, 3))
    out, out_dot = fgrad.jvp(fn, (Tensor(a),), (Tensor(da),))
    (ref,) = fd(lambda x: [fn(Tensor(x)).numpy()], a, da)
    np.testing.assert_allclose(out.numpy(), fn(Tensor(a)).numpy())
    np.testing.assert_allclose(out_dot.numpy(), ref, rtol=1e-6, atol=1e-7)


def test_solve_grad_wrt_b_and_broadcast_batch():
    a, b = general(2, 1, 3, 3), RNG.normal(size=(4, 3, 2))
    fn = lambda x, y: (Tensor(x).solve(Tensor(y)) ** 2).sum().item()  # noqa: E731
    ga, gb = fgrad.grad(lambda x, y: (x.solve(y) ** 2).sum(), argnums=(0, 1))(Tensor(a),
                                                                              Tensor(b))
    np.testing.assert_allclose(ga.numpy(), numeric_grad(lambda x: fn(x, b), a), rtol=1e-6)
    np.testing.assert_allclose(gb.numpy(), numeric_grad(lambda y: fn(a, y), b), rtol=1e-6)


@pytest.mark.parametrize("name", ["slogdet", "inv", "cholesky", "svd_s", "qr_r"])
def test_second_derivative(name):
    """Hessian-vector product (grad of a jvp) against finite differences of the gradient."""
    fn = SCALARS[name]
    a, v = general(3, 3), RNG.normal(size=(3, 3))
    hvp = fgrad.grad(lambda x: fgrad.jvp(fn, (x,), (Tensor(v),))[1])(Tensor(a)).numpy()
    (ref,) = fd(lambda x: [fgrad.grad(fn)(Tensor(x)).numpy()], a, v, eps=1e-5)
    np.testing.assert_allclose(hvp, ref, rtol=1e-5, atol=1e-6)


def test_log_det_gradient_is_inverse_transpose():
    a = general(2, 4, 4)
    g = fgrad.grad(lambda x: x.slogdet()[1].sum())(Tensor(a)).numpy()
    np.testing.assert_allclose(g, mT(np.linalg.inv(a)), rtol=1e-10)


BATCHED = {
    "det": lambda x: x.det(),
    "slogdet": lambda x: x.slogdet()[1],
    "inv": lambda x: x.inv(),
    "cholesky": lambda x: (x @ x.transpose(-1, -2)).cholesky(),
    "qr": lambda x: x.qr()[1].abs(),
    "svd": lambda x: x.svd()[1],
}


@pytest.mark.parametrize("name", sorted(BATCHED))
def test_vmap_over_a_middle_axis_matches_loop(name):
    fn = BATCHED[name]
    a = general(2, 5, 3, 3)  # vmapped over axis 1, a middle axis
    out = fgrad.vmap(fn, in_axes=1)(Tensor(a)).numpy()
    ref = np.stack([fn(Tensor(a[:, i])).numpy() for i in range(a.shape[1])])
    np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-12)


def test_vmap_triangular_solve_with_unbatched_matrix():
    a = np.triu(general(3, 3))
    b = RNG.normal(size=(4, 3, 2))
    fn = lambda x, y: lp.triangular_solve(x, y, lower=False)  # noqa: E731
    out = fgrad.vmap(fn, in_axes=(None, 0))(Tensor(a), Tensor(b)).numpy()
    np.testing.assert_allclose(out, np.linalg.solve(a, b), rtol=1e-10)


def test_vmap_of_grad_of_det():
    a = general(4, 3, 3)
    g = fgrad.vmap(fgrad.grad(lambda x: x.det()))(Tensor(a)).numpy()
    np.testing.assert_allclose(g, np.linalg.det(a)[:, None, None] * mT(np.linalg.inv(a)),
                               rtol=1e-9)


def test_jit_matches_eager():
    a = general(2, 4, 4)

    def everything(x):
        q, r = x.qr()
        u, s, vh = x.svd(full_matrices=False)
        return (x.det(), x.slogdet()[1], x.inv(), (x @ x.transpose(-1, -2)).cholesky(),
                q @ r, s, x.solve(x[..., :1]))
    jitted = fgrad.jit(everything)(Tensor(a))
    for got, ref in zip(jitted, everything(Tensor(a))):
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)


def test_jaxpr_shows_the_primitives():
    text = str(fgrad.make_jaxpr(lambda x: (x.det(), x.qr(), x.svd(), x.cholesky()))(
        Tensor(spd(3, 3))))
    for prim in ("lu", "qr", "svd", "cholesky"):
        assert f" {prim}[" in text or f" {prim} " in text, prim
