"""Matrix primitives: cholesky, lu, triangular_solve, qr, svd.

Each acts on the trailing two axes of its operands (leading axes are a batch), so batching a
primitive means moving the vmapped axis to the front. `impl` calls LAPACK through NumPy/SciPy
(half precision is computed in float32). JVP rules are the standard matrix-calculus formulas,
written with Tensor ops and these primitives, so they can be differentiated again.
Singular or indefinite inputs give inf/nan instead of raising, in eager mode as under `jit`.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.errors import ArgumentError
from fgrad.core.ir import ShapedArray
from fgrad.core.primitive import Primitive
from fgrad.core.prims._util import check_kinds, fmt_shape, instantiate, is_undefined, move_bdim

# ---------------------------------------------------------------------------- helpers


def _check_matrix(op: str, x: ShapedArray, square: bool = False) -> tuple[int, int]:
    """The trailing (m, n) of a floating (batch of) matrix; errors name `op` and the shape."""
    check_kinds(op, x, "f")
    if x.ndim < 2:
        raise ArgumentError(f"{op}: expected a matrix or a batch of matrices (two or more "
                            f"dimensions), got shape {fmt_shape(x.shape)}")
    m, n = x.shape[-2:]
    if square and m != n:
        raise ArgumentError(f"{op}: expected square matrices (..., n, n), got shape "
                            f"{fmt_shape(x.shape)} ({m} x {n})")
    return m, n


def _lapack_float(x: np.ndarray) -> np.ndarray:
    """LAPACK has no half precision: compute float16/bfloat16 in float32."""
    return x.astype(np.float32) if x.dtype.itemsize < 4 else x


def _per_matrix(fn: Callable[..., tuple], *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """Apply `fn` (matrices in, a tuple of arrays out) to every matrix of a batch."""
    batch = arrays[0].shape[:-2]
    outs = None
    for index in np.ndindex(*batch):
        res = fn(*(a[index] for a in arrays))
        if outs is None:
            outs = tuple(np.empty(batch + np.shape(r), np.asarray(r).dtype) for r in res)
        for out, r in zip(outs, res, strict=True):
            out[index] = r
    assert outs is not None, "callers handle empty batches before this"
    return outs


def _unary_batch(prim: Primitive) -> Callable[..., Any]:
    def rule(args: list[Any], dims: list[Any], **params: Any) -> Any:
        x = move_bdim(args[0], dims[0], 0, args[0].shape[dims[0]])
        out = prim.bind(x, **params)
        return (out, [0] * len(out)) if prim.multiple_results else (out, 0)
    return rule


def _mT(x: Any) -> Any:  # noqa: N802
    """Swap the two matrix axes."""
    return x.transpose(-1, -2)


def _tri(x: Any, k: int = 0, lower: bool = True) -> Any:
    """The lower (j <= i + k) or upper (j >= i + k) triangle of x; the rest is zero."""
    from fgrad.core.prims.misc import iota
    shape = x.shape[-2:]
    offset = iota(dtypes.int32, shape, 1) - iota(dtypes.int32, shape, 0)
    keep = offset <= k if lower else offset >= k
    return keep.where(x, 0.0)


def _complete_tangent(q: Any, dq1: Any) -> Any:
    """Tangent of an orthogonal Q = [Q1 | Q2] given dQ1, choosing dQ2 = -Q1 dQ1^T Q2.

    Q2 (any orthonormal completion) is not determined by the input; this is the smallest
    change that keeps Q orthogonal to first order, so Q2 Q2^T gets its exact derivative.
    """
    from fgrad.core.prims.movement import concatenate
    k = dq1.shape[-1]
    q1, q2 = q[..., :k], q[..., k:]
    return concatenate([dq1, -(q1 @ (_mT(dq1) @ q2))], q.ndim - 1)


# ---------------------------------------------------------------------------- cholesky

cholesky_p = Primitive("cholesky")


def _cholesky_impl(x: np.ndarray) -> np.ndarray:
    a = _lapack_float(x)
    a = (a + np.swapaxes(a, -1, -2)) / 2
    try:
        return np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        return _per_matrix(_cholesky_or_nan, a)[0]


def _cholesky_or_nan(a: np.ndarray) -> tuple[np.ndarray]:
    try:
        return (np.linalg.cholesky(a),)
    except np.linalg.LinAlgError:
        return (np.full_like(a, np.nan),)


def _cholesky_abstract(x: ShapedArray) -> ShapedArray:
    _check_matrix("cholesky", x, square=True)
    return x


def _cholesky_jvp(primals: list[Any], tangents: list[Any]) -> tuple[Any, Any]:
    """dL = L Phi(L^-1 sym(dA) L^-T), Phi = lower triangle with the diagonal halved."""
    (x,), (x_dot,) = primals, tangents
    lower = cholesky_p.bind(x)
    if x_dot is None:
        return lower, None
    sym = (x_dot + _mT(x_dot)) * 0.5
    half = triangular_solve(lower, _mT(triangular_solve(lower, sym, lower=True)), lower=True)
    phi = _tri(half, -1) + _tri(_tri(half), 0, lower=False) * 0.5
    return lower, lower @ phi


cholesky_p.abstract_eval = _cholesky_abstract
cholesky_p.impl = _cholesky_impl
cholesky_p.jvp = _cholesky_jvp
cholesky_p.batch = _unary_batch(cholesky_p)


def cholesky(x: Any) -> Any:
    """Lower Cholesky factor L of the symmetric part of x (L @ L^T == (x + x^T) / 2).

    Not positive definite: that matrix of the batch becomes NaN."""
    return cholesky_p.bind(x)


# ---------------------------------------------------------------------------- triangular_solve

triangular_solve_p = Primitive("triangular_solve", linear=True)


def _trsm(a: np.ndarray, b: np.ndarray, lower: bool, transpose_a: bool,
          unit_diagonal: bool) -> tuple[np.ndarray]:
    if a.shape[-1] == 0 or b.shape[-1] == 0:
        return (np.zeros(b.shape, b.dtype),)
    from scipy.linalg import blas  # on first use: keeps `import fgrad` light
    trsm = blas.get_blas_funcs("trsm", (a, b))
    return (trsm(1.0, a, b, side=0, lower=int(lower), trans_a=int(transpose_a),
                 diag=int(unit_diagonal)),)


def _ts_impl(a: np.ndarray, b: np.ndarray, *, lower: bool, transpose_a: bool,
             unit_diagonal: bool) -> np.ndarray:
    a, b = _lapack_float(a), _lapack_float(b)
    if b.size == 0 or a.ndim == 2:
        return _trsm(a, b, lower, transpose_a, unit_diagonal)[0]
    return _per_matrix(lambda x, y: _trsm(x, y, lower, transpose_a, unit_diagonal), a, b)[0]


def _ts_abstract(a: ShapedArray, b: ShapedArray, **params: Any) -> ShapedArray:
    _check_matrix("triangular_solve", a, square=True)
    _check_matrix("triangular_solve", b)
    if a.dtype != b.dtype or a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-2]:
        raise ArgumentError(f"triangular_solve: cannot solve A {fmt_shape(a.shape)} "
                            f"{a.dtype.name} against B {fmt_shape(b.shape)} {b.dtype.name}: "
                            f"need A (..., n, n) and B (..., n, k) with equal batch and dtype")
    return b


def _ts_jvp(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[Any, Any]:
    """X = op(A)^-1 B: dX = op(A)^-1 (dB - op(dA) X), dA restricted to the read triangle."""
    (a, b), (a_dot, b_dot) = primals, tangents
    out = triangular_solve_p.bind(a, b, **params)
    if a_dot is None and b_dot is None:
        return out, None
    rhs = instantiate(b_dot, b.aval) if b_dot is not None else None
    if a_dot is not None:
        k = -1 if params["unit_diagonal"] else 0
        used = _tri(a_dot, k) if params["lower"] else _tri(a_dot, -k, lower=False)
        term = (_mT(used) if params["transpose_a"] else used) @ out
        rhs = -term if rhs is None else rhs - term
    return out, triangular_solve_p.bind(a, rhs, **params)


def _ts_transpose(ct: Any, a: Any, b: Any, *, lower: bool, transpose_a: bool,
                  unit_diagonal: bool) -> list[Any]:
    if is_undefined(a):
        raise ArgumentError("triangular_solve is linear in B only; its matrix A cannot be "
                            "transposed (it must be a known value)")
    ct_b = triangular_solve(a, ct, lower=lower, transpose_a=not transpose_a,
                            unit_diagonal=unit_diagonal)
    return [None, ct_b]


def _ts_batch(args: list[Any], dims: list[Any], **params: Any) -> Any:
    from fgrad.core.prims._util import batch_size
    size = batch_size(args, dims)
    a, b = (move_bdim(x, d, 0, size) for x, d in zip(args, dims, strict=True))
    return triangular_solve_p.bind(a, b, **params), 0


triangular_solve_p.abstract_eval = _ts_abstract
triangular_solve_p.impl = _ts_impl
triangular_solve_p.jvp = _ts_jvp
triangular_solve_p.transpose = _ts_transpose
triangular_solve_p.batch = _ts_batch


def triangular_solve(a: Any, b: Any, *, lower: bool, transpose_a: bool = False,
                     unit_diagonal: bool = False) -> Any:
    """Solve op(A) X = B for X, A triangular (only its `lower`/upper triangle is read;
    with `unit_diagonal` its diagonal is taken as ones), op(A) = A^T if `transpose_a`."""
    return triangular_solve_p.bind(a, b, lower=bool(lower), transpose_a=bool(transpose_a),
                                   unit_diagonal=bool(unit_diagonal))


# ---------------------------------------------------------------------------- lu

lu_p = Primitive("lu", multiple_results=True)


def _getrf(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = a.shape[-1]
    if n == 0:
        return a.copy(), np.zeros(0, np.int32), np.zeros(0, np.int32)
    from scipy.linalg import lapack
    getrf = lapack.get_lapack_funcs("getrf", (a,))
    lu, pivots, _ = getrf(a)
    perm = np.arange(n, dtype=np.int32)
    for i, p in enumerate(pivots):
        perm[[i, p]] = perm[[p, i]]
    return lu, pivots.astype(np.int32), perm


def _lu_impl(x: np.ndarray) -> tuple[np.ndarray, ...]:
    a = _lapack_float(x)
    if a.ndim == 2:
        return _getrf(a)
    if a.size == 0:
        shape = a.shape[:-1]
        return a.copy(), np.zeros(shape, np.int32), np.zeros(shape, np.int32)
    return _per_matrix(_getrf, a)


def _lu_abstract(x: ShapedArray) -> list[ShapedArray]:
    _check_matrix("lu", x, square=True)
    pivots = ShapedArray(x.shape[:-1], dtypes.int32)
    return [x, pivots, pivots]


def permute_rows(x: Any, perm: Any) -> Any:
    """Rows of x reordered: out[..., i, :] = x[..., perm[..., i], :]."""
    from fgrad.core.prims.indexing import take_along
    from fgrad.core.prims.movement import broadcast_in_dim
    idx = broadcast_in_dim(perm, x.shape, tuple(range(perm.ndim)))
    return take_along(x, idx, x.ndim - 2)


def _lu_jvp(primals: list[Any], tangents: list[Any]) -> tuple[list[Any], list[Any]]:
    """P A = L U: with X = L^-1 P dA U^-1, dL = L tril(X, -1) and dU = triu(X) U."""
    (x,), (x_dot,) = primals, tangents
    lu, pivots, perm = lu_p.bind(x)
    if x_dot is None:
        return [lu, pivots, perm], [None, None, None]
    y = triangular_solve(lu, permute_rows(x_dot, perm), lower=True, unit_diagonal=True)
    xs = _mT(triangular_solve(lu, _mT(y), lower=False, transpose_a=True))
    l_unit = _tri(lu, -1) + _eye_like(lu)
    lu_dot = l_unit @ _tri(xs, -1) + _tri(xs, 0, lower=False) @ _tri(lu, 0, lower=False)
    return [lu, pivots, perm], [lu_dot, None, None]


def _eye_like(x: Any) -> Any:
    from fgrad.core.prims.misc import iota
    shape = x.shape[-2:]
    return (iota(dtypes.int32, shape, 0) == iota(dtypes.int32, shape, 1)).cast(x.dtype)


lu_p.abstract_eval = _lu_abstract
lu_p.impl = _lu_impl
lu_p.jvp = _lu_jvp
lu_p.batch = _unary_batch(lu_p)


def lu(x: Any) -> list[Any]:
    """LU with partial pivoting of square x: [lu, pivots, perm] with x[perm] = L U, L unit
    lower (strictly below the diagonal of `lu`), U upper, `pivots` LAPACK's row swaps."""
    return lu_p.bind(x)


# ---------------------------------------------------------------------------- qr

qr_p = Primitive("qr", multiple_results=True)


def _qr_abstract(x: ShapedArray, *, full_matrices: bool) -> list[ShapedArray]:
    m, n = _check_matrix("qr", x)
    k = m if full_matrices else min(m, n)
    batch = x.shape[:-2]
    return [ShapedArray(batch + (m, k), x.dtype), ShapedArray(batch + (k, n), x.dtype)]


def _qr_impl(x: np.ndarray, *, full_matrices: bool) -> list[np.ndarray]:
    q, r = np.linalg.qr(_lapack_float(x), mode="complete" if full_matrices else "reduced")
    return [q, r]


def _qr_square_jvp(q: Any, r: Any, dx: Any) -> tuple[Any, Any]:
    """Reduced QR of a tall or square x (m >= n): the formula of Walter et al. / Seeger."""
    dx_rinv = _mT(triangular_solve(r, _mT(dx), lower=False, transpose_a=True))
    c = _mT(q) @ dx_rinv
    below = _tri(c, -1)
    omega = below - _mT(below)
    return q @ (omega - c) + dx_rinv, (c - omega) @ r


def _qr_jvp(primals: list[Any], tangents: list[Any], *, full_matrices: bool) -> Any:
    from fgrad.core.prims.movement import concatenate, pad
    (x,), (x_dot,) = primals, tangents
    q, r = qr_p.bind(x, full_matrices=full_matrices)
    if x_dot is None:
        return [q, r], [None, None]
    m, n = x.shape[-2:]
    k = min(m, n)
    dq1, dr1 = _qr_square_jvp(q[..., :k], r[..., :k, :k], x_dot[..., :k])
    if m < n:  # x = [X | Y], R = [R_X | Q^T Y]
        dr_rest = _mT(dq1) @ x[..., k:] + _mT(q) @ x_dot[..., k:]
        return [q, r], [dq1, concatenate([dr1, dr_rest], x.ndim - 1)]
    if full_matrices and m > n:
        no_pad = ((0, 0, 0),) * (x.ndim - 2)
        return [q, r], [_complete_tangent(q, dq1), pad(dr1, no_pad + ((0, m - n, 0), (0, 0, 0)))]
    return [q, r], [dq1, dr1]


qr_p.abstract_eval = _qr_abstract
qr_p.impl = _qr_impl
qr_p.jvp = _qr_jvp
qr_p.batch = _unary_batch(qr_p)


def qr(x: Any, full_matrices: bool = True) -> list[Any]:
    """[Q, R] with x = Q R, Q orthonormal columns, R upper triangular (LAPACK's signs).

    For m > n and full_matrices the last m - n columns of Q are an arbitrary completion."""
    return qr_p.bind(x, full_matrices=bool(full_matrices))


# ---------------------------------------------------------------------------- svd

svd_p = Primitive("svd", multiple_results=True)


def _svd_abstract(x: ShapedArray, *, full_matrices: bool) -> list[ShapedArray]:
    m, n = _check_matrix("svd", x)
    k = min(m, n)
    batch = x.shape[:-2]
    u_cols, v_rows = (m, n) if full_matrices else (k, k)
    return [ShapedArray(batch + (m, u_cols), x.dtype), ShapedArray(batch + (k,), x.dtype),
            ShapedArray(batch + (v_rows, n), x.dtype)]


def _svd_impl(x: np.ndarray, *, full_matrices: bool) -> list[np.ndarray]:
    u, s, vh = np.linalg.svd(_lapack_float(x), full_matrices=full_matrices)
    return [u, s, vh]


def _svd_reduced_jvp(x: Any, u: Any, s: Any, v: Any, dx: Any) -> tuple[Any, Any, Any]:
    """Thin SVD tangents (dU, dS, dV) for distinct non-zero singular values.

    F_ij = 1 / (s_j^2 - s_i^2) off the diagonal: repeated singular values give inf/nan."""
    ds_full = _mT(u) @ dx @ v
    ds = (ds_full * _eye_like(ds_full)).sum(-1)
    s_row = s.unsqueeze(-2)
    s_col = s.unsqueeze(-1)
    eye = _eye_like(ds_full)
    f = 1.0 / ((s_row + s_col) * (s_row - s_col) + eye) - eye
    dss = ds_full * s_row
    sds = s_col * ds_full
    du = u @ (f * (dss + _mT(dss)))
    dv = v @ (f * (sds + _mT(sds)))
    m, n = x.shape[-2:]
    if m > n:
        dxv = dx @ v
        du = du + (dxv - u @ (_mT(u) @ dxv)) / s_row
    if n > m:
        dxtu = _mT(dx) @ u
        dv = dv + (dxtu - v @ (_mT(v) @ dxtu)) / s_row
    return du, ds, dv


def _svd_jvp(primals: list[Any], tangents: list[Any], *, full_matrices: bool) -> Any:
    (x,), (x_dot,) = primals, tangents
    u, s, vh = svd_p.bind(x, full_matrices=full_matrices)
    if x_dot is None:
        return [u, s, vh], [None, None, None]
    m, n = x.shape[-2:]
    k = min(m, n)
    v = _mT(vh)
    du, ds, dv = _svd_reduced_jvp(x, u[..., :k], s, v[..., :k], x_dot)
    if full_matrices and m > k:
        du = _complete_tangent(u, du)
    if full_matrices and n > k:
        dv = _complete_tangent(v, dv)
    return [u, s, vh], [du, ds, _mT(dv)]


svd_p.abstract_eval = _svd_abstract
svd_p.impl = _svd_impl
svd_p.jvp = _svd_jvp
svd_p.batch = _unary_batch(svd_p)


def svd(x: Any, full_matrices: bool = True) -> list[Any]:
    """[U, S, Vh] with x = U[..., :k] diag(S) Vh[..., :k, :], S descending, k = min(m, n)."""
    return svd_p.bind(x, full_matrices=bool(full_matrices))
