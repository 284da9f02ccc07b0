"""`fgrad.lax.linalg`: JAX's `jax.lax.linalg` matrix decompositions and triangular solve.

Each acts on the trailing two axes (leading axes are a batch) and binds fgrad's matrix
primitives (fgrad/core/prims/linalg.py, eigh.py), so grad, vmap and jit apply. Operands must
be floating point, as in JAX (fgrad has no complex dtypes, so `conjugate_a` changes
nothing). Factorizations that fail (a matrix that is not positive definite) give NaNs
rather than raising, as JAX's do.
"""
from __future__ import annotations

from typing import Any

from fgrad.core import prims as P
from fgrad.core.errors import ArgumentError
from fgrad.core.prims import eigh as _eigh
from fgrad.core.prims import linalg as _lp
from fgrad.core.prims._util import fmt_shape
from fgrad.core.tensor import Tensor
from fgrad.lax._args import check_kind, to_tensor

__all__ = ["cholesky", "eigh", "lu", "qr", "svd", "triangular_solve"]


def _matrix(op: str, x: Any, square: bool = True) -> Tensor:
    t = to_tensor(f"linalg.{op}", x, "x")
    check_kind(f"linalg.{op}", t, "f", "x")
    if t.ndim < 2 or (square and t.shape[-1] != t.shape[-2]):
        kind = "square matrices (..., n, n)" if square else "matrices (..., m, n)"
        raise ArgumentError(f"lax.linalg.{op}: expected a batch of {kind}, got shape "
                            f"{fmt_shape(t.shape)}")
    return t


def _mT(x: Tensor) -> Tensor:  # noqa: N802
    return P.transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


def _from_triangle(x: Tensor, lower: bool) -> Tensor:
    """The symmetric matrix that the `lower` (or upper) triangle of x describes."""
    half = x.tril(-1) if lower else x.triu(1)
    diag = x.tril(0).triu(0)
    return half + _mT(half) + diag


def cholesky(x: Any, symmetrize_input: bool = True) -> Tensor:
    """The lower Cholesky factor L (x = L L^T). With `symmetrize_input` x is replaced by
    (x + x^T) / 2, else only its lower triangle is read. Not positive definite: NaNs."""
    a = _matrix("cholesky", x)
    return _lp.cholesky(a if symmetrize_input else _from_triangle(a, True))


def eigh(x: Any, *, lower: bool = True, symmetrize_input: bool = True,
         sort_eigenvalues: bool = True, subset_by_index: Any = None) -> tuple[Tensor, Tensor]:
    """`(v, w)`: eigenvectors (columns of v) and ascending eigenvalues of a symmetric x,
    in JAX's order. With `symmetrize_input` x is replaced by (x + x^T) / 2 first; then only
    its `lower` (or upper) triangle is read. `subset_by_index` is not supported."""
    if subset_by_index is not None:
        raise NotImplementedError("lax.linalg.eigh: subset_by_index is not supported; slice "
                                  "the result (eigenvalues are ascending) instead")
    a = _matrix("eigh", x)
    if symmetrize_input:
        a = (a + _mT(a)) * 0.5
    w, v = _eigh.eigh(_from_triangle(a, lower))
    return v, w


def lu(x: Any) -> tuple[Tensor, Tensor, Tensor]:
    """`(lu, pivots, permutation)` of a square (batch of) matrix with partial pivoting:
    x[permutation] = L U, L unit lower triangular (strictly below the diagonal of `lu`), U
    upper triangular; `pivots` are LAPACK's row interchanges (int32)."""
    lu_, pivots, perm = _lp.lu(_matrix("lu", x))
    return lu_, pivots, perm


def qr(x: Any, *, pivoting: bool = False, full_matrices: bool = True,
       use_magma: Any = None) -> tuple[Tensor, Tensor]:
    """`(q, r)` with x = q r, q with orthonormal columns and r upper triangular;
    `full_matrices=False` gives the reduced factors. Pivoting is not supported."""
    if pivoting:
        raise NotImplementedError("lax.linalg.qr: pivoting=True is not supported")
    q, r = _lp.qr(_matrix("qr", x, square=False), full_matrices=bool(full_matrices))
    return q, r


def svd(x: Any, *, full_matrices: bool = True, compute_uv: bool = True,
        subset_by_index: Any = None, algorithm: Any = None) -> Any:
    """`(u, s, vh)` with x = u[..., :k] diag(s) vh[..., :k, :], s descending (k = min(m,
    n)), or `s` alone when not `compute_uv`. `subset_by_index` is not supported."""
    if subset_by_index is not None:
        raise NotImplementedError("lax.linalg.svd: subset_by_index is not supported; slice "
                                  "the result (singular values are descending) instead")
    u, s, vh = _lp.svd(_matrix("svd", x, square=False), full_matrices=bool(full_matrices))
    return (u, s, vh) if compute_uv else s


def triangular_solve(a: Any, b: Any, *, left_side: bool = False, lower: bool = False,
                     transpose_a: bool = False, conjugate_a: bool = False,
                     unit_diagonal: bool = False) -> Tensor:
    """X with op(a) X = b (`left_side`) or X op(a) = b (the default, as in JAX), a
    triangular: only its `lower` (or upper) triangle is read, and with `unit_diagonal` its
    diagonal is taken as ones; op(a) = a^T when `transpose_a`. Leading axes are a batch;
    a 1-d `b` is a single right-hand side."""
    m = _matrix("triangular_solve", a)
    rhs = to_tensor("linalg.triangular_solve", b, "b")
    if rhs.dtype != m.dtype:
        raise ArgumentError(f"lax.linalg.triangular_solve: a and b must have the same dtype, "
                            f"got {m.dtype.name} and {rhs.dtype.name}")
    vector = rhs.ndim == m.ndim - 1
    if vector:
        rhs = rhs.unsqueeze(-1) if left_side else rhs.unsqueeze(-2)
    if left_side:
        out = _lp.triangular_solve(m, rhs, lower=lower, transpose_a=transpose_a,
                                   unit_diagonal=unit_diagonal)
    else:  # X op(a) = b  <=>  op(a)^T X^T = b^T
        out = _mT(_lp.triangular_solve(m, _mT(rhs), lower=lower,
                                       transpose_a=not transpose_a,
                                       unit_diagonal=unit_diagonal))
    return out.squeeze(-1 if left_side else -2) if vector else out
