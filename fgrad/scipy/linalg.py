"""fgrad.scipy.linalg: jax.scipy.linalg's functions (SciPy's arguments) over the linalg
primitives."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from fgrad.core.prims import linalg as _lp
from fgrad.core.tensor import Tensor
from fgrad.numpy import linalg as _nla
from fgrad.numpy._base import ArrayLike, asarray, float_of
from fgrad.numpy.shape import matrix_transpose

_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
           1187353796428800.0, 129060195264000.0, 10559470521600.0, 670442572800.0,
           33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152
_MAX_SQUARINGS = 24


def _mat(name: str, a: ArrayLike) -> Tensor:
    x = float_of(asarray(a))
    if x.ndim < 2:
        raise ValueError(f"fgrad.scipy.linalg.{name}: expected a matrix on the last two axes, "
                         f"got shape {x.shape}")
    return x


def cholesky(a: ArrayLike, lower: bool = False, overwrite_a: bool = False,
             check_finite: bool = True) -> Tensor:
    """The Cholesky factor: upper U (a = U^T U) by default, lower L with lower=True."""
    return _nla.cholesky(a, upper=not lower)


def cho_factor(a: ArrayLike, lower: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> tuple[Tensor, bool]:
    """(c, lower) for cho_solve; c holds the factor in its `lower` or upper triangle."""
    return cholesky(a, lower), lower


def cho_solve(c_and_lower: tuple[ArrayLike, bool], b: ArrayLike, overwrite_b: bool = False,
              check_finite: bool = True) -> Tensor:
    """x with a @ x = b given cho_factor(a)."""
    c, lower = c_and_lower
    factor = _mat("cho_solve", c)
    low = factor if lower else matrix_transpose(factor)
    rhs = asarray(b).cast(factor.dtype)
    vector = rhs.ndim == 1
    rhs = rhs.unsqueeze(-1) if vector else rhs
    y = _lp.triangular_solve(low, rhs, lower=True)
    x = _lp.triangular_solve(low, y, lower=True, transpose_a=True)
    return x[..., 0] if vector else x


def solve_triangular(a: ArrayLike, b: ArrayLike, trans: Any = 0, lower: bool = False,
                     unit_diagonal: bool = False, overwrite_b: bool = False,
                     check_finite: bool = True) -> Tensor:
    """x with op(a) @ x = b for triangular a; trans 0/"N", 1/"T" (2/"C" = "T" for reals)."""
    m = _mat("solve_triangular", a)
    rhs = asarray(b).cast(m.dtype)
    vector = rhs.ndim == m.ndim - 1
    rhs = rhs.unsqueeze(-1) if vector else rhs
    transpose = trans in (1, 2, "T", "C")
    x = _lp.triangular_solve(m, rhs, lower=lower, transpose_a=transpose,
                             unit_diagonal=unit_diagonal)
    return x[..., 0] if vector else x


def solve(a: ArrayLike, b: ArrayLike, lower: bool = False, overwrite_a: bool = False,
          overwrite_b: bool = False, check_finite: bool = True, assume_a: str = "gen") -> Tensor:
    """x with a @ x = b; assume_a="pos" uses a Cholesky factorization."""
    if assume_a == "pos":
        return cho_solve(cho_factor(a, lower=True), b)
    return _nla.solve(a, b)


def inv(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> Tensor:
    """The inverse matrix."""
    return _nla.inv(a)


def det(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> Tensor:
    """The determinant."""
    return _nla.det(a)


def lu_factor(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True
              ) -> tuple[Tensor, Tensor]:
    """(lu, piv): L (unit, below the diagonal) and U packed in one matrix, and LAPACK's row
    interchanges (row i was swapped with row piv[i])."""
    lu, pivots, _ = _lp.lu(_mat("lu_factor", a))
    return lu, pivots


def _perm_from_pivots(piv: Tensor) -> Tensor:
    """The permutation the successive row swaps of `piv` apply (concrete or traced)."""
    n = piv.shape[-1]
    perm = Tensor(np.broadcast_to(np.arange(n, dtype=np.int32), piv.shape).copy())
    positions = Tensor(np.arange(n, dtype=np.int32))
    for i in range(n):
        p = piv[..., i:i + 1]
        at_i = perm[..., i:i + 1]
        at_p = (positions == p).where(perm, 0).sum(-1, keepdim=True).cast(perm.dtype)
        perm = (positions == i).where(at_p, (positions == p).where(at_i, perm))
    return perm


def lu_solve(lu_and_piv: tuple[ArrayLike, ArrayLike], b: ArrayLike, trans: int = 0,
             overwrite_b: bool = False, check_finite: bool = True) -> Tensor:
    """x with a @ x = b (trans=0) or a^T @ x = b (trans=1) from lu_factor(a)."""
    lu_, piv = lu_and_piv
    lu = _mat("lu_solve", lu_)
    perm = _perm_from_pivots(asarray(piv))
    rhs = asarray(b).cast(lu.dtype)
    vector = rhs.ndim == 1
    rhs = rhs.unsqueeze(-1) if vector else rhs
    if trans == 0:
        y = _lp.triangular_solve(lu, _lp.permute_rows(rhs, perm), lower=True,
                                 unit_diagonal=True)
        x = _lp.triangular_solve(lu, y, lower=False)
    else:
        y = _lp.triangular_solve(lu, rhs, lower=False, transpose_a=True)
        z = _lp.triangular_solve(lu, y, lower=True, transpose_a=True, unit_diagonal=True)
        inverse = perm.argsort(-1)
        x = _lp.permute_rows(z, inverse)
    return x[..., 0] if vector else x


def qr(a: ArrayLike, overwrite_a: bool = False, lwork: Any = None, mode: str = "full",
       pivoting: bool = False, check_finite: bool = True) -> Any:
    """QR decomposition; SciPy's modes "full" (default), "economic" and "r"."""
    if pivoting:
        raise NotImplementedError("fgrad.scipy.linalg.qr: pivoting=True is not supported")
    modes = {"full": "complete", "economic": "reduced", "r": "r"}
    if mode not in modes:
        raise ValueError(f"fgrad.scipy.linalg.qr: mode must be one of {sorted(modes)}, got "
                         f"{mode!r}")
    out = _nla.qr(a, modes[mode])
    return (out,) if mode == "r" else tuple(out)


def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True,
        overwrite_a: bool = False, check_finite: bool = True,
        lapack_driver: str = "gesdd") -> Any:
    """Singular value decomposition (U, s, Vh), or s alone."""
    out = _nla.svd(a, full_matrices, compute_uv)
    return tuple(out) if compute_uv else out


def eigh(a: ArrayLike, b: Any = None, lower: bool = True, eigvals_only: bool = False,
         **kwargs: Any) -> Any:
    """(w, v) of a symmetric matrix using its `lower` (or upper) triangle; w alone with
    eigvals_only=True. The generalized problem (b) is not supported."""
    if b is not None:
        raise NotImplementedError("fgrad.scipy.linalg.eigh: the generalized problem (b=) is "
                                  "not supported; transform with cholesky(b) first")
    w, v = _nla.eigh(a, UPLO="L" if lower else "U")
    return w if eigvals_only else (w, v)


def expm(A: ArrayLike, *, upper_triangular: bool = False,  # noqa: N803
         max_squarings: int = 16) -> Tensor:
    """The matrix exponential: a degree-13 Pade approximant of A / 2^s, squared s times,
    with s chosen from the 1-norm (at most `max_squarings`; works under jit)."""
    x = _mat("expm", A)
    n = x.shape[-1]
    norm1 = x.abs().sum(-2).max(-1)
    s = ((norm1 / _THETA13).log() / math.log(2)).ceil().clip(0, max_squarings)
    s = s.isnan().where(0.0, s)
    scaled = x / (2.0 ** s).reshape(s.shape + (1, 1))
    eye = Tensor(np.eye(n, dtype=x.dtype.np))
    a2 = scaled @ scaled
    a4 = a2 @ a2
    a6 = a4 @ a2
    b = _PADE13
    u_in = a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 \
        + b[1] * eye
    u = scaled @ u_in
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 \
        + b[0] * eye
    r = _nla.solve(v - u, v + u)
    for i in range(max_squarings):
        squared = r @ r
        r = (s > i).reshape(s.shape + (1, 1)).where(squared, r)
    return r
