"""Tensor methods: qr, svd, cholesky, solve, inv, det/slogdet.

All act on the trailing two axes (leading axes are a batch) and are built from the matrix
primitives in fgrad/core/prims/linalg.py, so grad/vmap/jit come from those primitives.
Integer and bool inputs are computed in the default float dtype.
Singular matrices do not raise: solve/inv give inf/nan, det gives 0 (slogdet: sign 0,
logabsdet -inf) and their derivatives there are nan. A matrix that is not positive
definite gives a NaN Cholesky factor.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fgrad.core import dtypes as _dt
from fgrad.core import prims as P
from fgrad.core.dtypes import dtypes
from fgrad.core.errors import ArgumentError
from fgrad.core.prims._util import fmt_shape
from fgrad.core.prims import linalg as lp
from fgrad.core.methods.tensor_math import broadcast_shapes

if TYPE_CHECKING:
    from fgrad.core.tensor import Tensor


def _float_matrix(op: str, x: Any, square: bool = False) -> "Tensor":
    """x as a floating (batch of) matrix, or an error naming `op` and the shape."""
    if x.ndim < 2:
        raise ArgumentError(f"{op}: expected a matrix or a batch of matrices (two or more "
                            f"dimensions), got shape {fmt_shape(x.shape)}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ArgumentError(f"{op}: expected square matrices (..., n, n), got shape "
                            f"{fmt_shape(x.shape)}")
    return x if x.dtype.is_float else x.cast(dtypes.default_float)


def _diagonal(x: Any) -> Any:
    """The main diagonal of each matrix: (..., n, n) -> (..., n)."""
    n = x.shape[-1]
    flat = x.reshape(x.shape[:-2] + (n * n,))
    start = (0,) * flat.ndim
    strides = (1,) * (flat.ndim - 1) + (n + 1,)
    return P.slice_(flat, start, flat.shape, strides) if n else x.reshape(x.shape[:-1])


def _pivot_sign(pivots: Any, dtype: Any) -> Any:
    """(-1) ** (number of row swaps) of LAPACK pivots, as `dtype`."""
    steps = P.iota(dtypes.int32, pivots.shape, pivots.ndim - 1)
    swaps = (pivots != steps).cast(dtypes.int32).sum(-1)
    return 1 - 2 * (swaps & 1).cast(dtype)


def _lu_solve(lu: Any, perm: Any, b: Any) -> Any:
    """X with A X = B from A's LU factors: X = U^-1 L^-1 B[perm]."""
    y = lp.triangular_solve(lu, lp.permute_rows(b, perm), lower=True, unit_diagonal=True)
    return lp.triangular_solve(lu, y, lower=False)


class LinalgMixin:
    """Tensor methods: qr, svd, cholesky, solve, inv, det/slogdet."""

    __slots__ = ()

    def qr(self) -> tuple["Tensor", "Tensor"]:
        """QR decomposition `self = Q @ R`: Q (..., m, m) orthogonal, R (..., m, n) upper
        triangular (signs as LAPACK chooses them; they are not unique)."""
        q, r = lp.qr(_float_matrix("qr", self), full_matrices=True)
        return q, r

    def svd(self, full_matrices: bool = True) -> tuple["Tensor", "Tensor", "Tensor"]:
        """Singular value decomposition: (U, S, V^T) with S descending, k = min(m, n) and
        `self = U[..., :k] * S[..., None, :] @ V^T[..., :k, :]`. U is (..., m, m) and V^T
        (..., n, n) with `full_matrices`, else (..., m, k) and (..., k, n).

        Derivatives need distinct, non-zero singular values (else they are inf/nan)."""
        u, s, vh = lp.svd(_float_matrix("svd", self), full_matrices=bool(full_matrices))
        return u, s, vh

    def cholesky(self, upper: bool = False) -> "Tensor":
        """Cholesky factor of a symmetric positive-definite matrix: lower L with
        `self = L @ L^T`, or upper U = L^T with `self = U^T @ U` if `upper`. Only the
        symmetric part (self + self^T) / 2 is used; non positive-definite gives NaN."""
        lower = lp.cholesky(_float_matrix("cholesky", self, square=True))
        return lower.transpose(-1, -2) if upper else lower

    def solve(self, b: Any) -> "Tensor":
        """X with `self @ X = b` for square self (..., n, n). b is (..., n, k) with batch
        axes broadcast against self's, or a vector (n,) giving X (..., n) (NumPy's rules)."""
        from fgrad.core.tensor import as_tensor
        a = _float_matrix("solve", self, square=True)
        b = as_tensor(b)
        vector = b.ndim == 1
        rhs = b.reshape(b.shape + (1,)) if vector else b
        if rhs.ndim < 2 or rhs.shape[-2] != a.shape[-1]:
            raise ArgumentError(f"solve: b of shape {fmt_shape(b.shape)} does not match A of "
                                f"shape {fmt_shape(a.shape)}: need b (..., {a.shape[-1]}, k) "
                                f"or ({a.shape[-1]},)")
        a, rhs = _promote(a, rhs)
        batch = broadcast_shapes("solve", a.shape[:-2], rhs.shape[:-2])
        a = a.expand(batch + a.shape[-2:])
        rhs = rhs.expand(batch + rhs.shape[-2:])
        lu_mat, _, perm = lp.lu(a)
        x = _lu_solve(lu_mat, perm, rhs)
        return x.reshape(x.shape[:-1]) if vector else x

    def inv(self) -> "Tensor":
        """Inverse of each square matrix (inf/nan where singular)."""
        from fgrad.core.tensor import Tensor
        a = _float_matrix("inv", self, square=True)
        eye = Tensor.eye(a.shape[-1], dtype=a.dtype).expand(a.shape)
        lu_mat, _, perm = lp.lu(a)
        return _lu_solve(lu_mat, perm, eye)

    def det(self) -> "Tensor":
        """Determinant of each square matrix (..., n, n) -> (...), from an LU factorization."""
        a = _float_matrix("det", self, square=True)
        lu_mat, pivots, _ = lp.lu(a)
        return _pivot_sign(pivots, a.dtype) * _diagonal(lu_mat).prod(-1)

    def slogdet(self) -> tuple["Tensor", "Tensor"]:
        """(sign, logabsdet) with det = sign * exp(logabsdet); singular: (0, -inf)."""
        a = _float_matrix("slogdet", self, square=True)
        lu_mat, pivots, _ = lp.lu(a)
        diag = _diagonal(lu_mat)
        sign = _pivot_sign(pivots, a.dtype) * diag.sign().prod(-1)
        return sign, diag.abs().log().sum(-1)


def _promote(a: Any, b: Any) -> tuple[Any, Any]:
    """Cast a and b to their common dtype (no broadcasting)."""
    dtype = _dt.promote(a.dtype, b.dtype)
    dtype = dtype if dtype.is_float else dtypes.default_float
    return a.cast(dtype), b.cast(dtype)
