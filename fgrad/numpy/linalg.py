"""fgrad.numpy.linalg: jax.numpy.linalg's functions over the linalg primitives (cholesky,
lu, triangular_solve, qr, svd, eigh). Every function takes a batch of matrices on the
trailing two axes and works under jit, grad and vmap."""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.prims import eigh as _eigh_prim
from fgrad.core.prims import linalg as _lp
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import ArrayLike, Axis, asarray, axes_of, float_of
from fgrad.numpy.products import matmul
from fgrad.numpy.shape import matrix_transpose, moveaxis


class EighResult(NamedTuple):
    """Eigenvalues (ascending) and eigenvectors (columns)."""
    eigenvalues: Tensor
    eigenvectors: Tensor


class SlogdetResult(NamedTuple):
    """sign and log|det|."""
    sign: Tensor
    logabsdet: Tensor


class QRResult(NamedTuple):
    """Q and R."""
    Q: Tensor
    R: Tensor


class SVDResult(NamedTuple):
    """U, S (descending) and Vh."""
    U: Tensor
    S: Tensor
    Vh: Tensor


def _matrix(name: str, a: ArrayLike, square: bool = True) -> Tensor:
    x = float_of(asarray(a))
    if x.ndim < 2 or (square and x.shape[-1] != x.shape[-2]):
        kind = "square matrices" if square else "matrices"
        raise ValueError(f"fgrad.numpy.linalg.{name}: expected {kind} on the last two axes, "
                         f"got shape {x.shape}")
    return x


def _eye(n: int, dtype: Any) -> Tensor:
    return Tensor(np.eye(n, dtype=dtype.np))


def cholesky(a: ArrayLike, *, upper: bool = False) -> Tensor:
    """The lower Cholesky factor L (L L^T = a); NaN where a is not positive definite."""
    low = _lp.cholesky(_matrix("cholesky", a))
    return matrix_transpose(low) if upper else low


def det(a: ArrayLike) -> Tensor:
    """The determinant."""
    return _matrix("det", a).det()


def slogdet(a: ArrayLike) -> SlogdetResult:
    """(sign, log|det|) of a, computed from its LU factors."""
    x = _matrix("slogdet", a)
    lu, _, perm = _lp.lu(x)
    diag = _diag(lu)
    parity = _perm_parity(perm)
    negatives = (diag < 0).cast(dtypes.int32).sum(-1)
    sign = 1.0 - 2.0 * ((negatives + parity) % 2).cast(x.dtype)
    sign = (diag == 0).any(-1).where(0.0, sign)
    return SlogdetResult(sign, diag.abs().log().sum(-1))


def _perm_parity(perm: Tensor) -> Tensor:
    """The parity (0 even, 1 odd) of each permutation along the last axis (inversions)."""
    n = perm.shape[-1]
    upper = Tensor(np.triu(np.ones((n, n), bool), 1))
    inv = (perm.unsqueeze(-1) > perm.unsqueeze(-2)) & upper
    return inv.cast(dtypes.int32).sum((-1, -2)) % 2


def _diag(x: Tensor) -> Tensor:
    return (x * _eye(x.shape[-1], x.dtype)).sum(-1)


def inv(a: ArrayLike) -> Tensor:
    """The inverse matrix."""
    x = _matrix("inv", a)
    return solve(x, Tensor.full(x.shape, 0.0, dtype=x.dtype) + _eye(x.shape[-1], x.dtype))


def solve(a: ArrayLike, b: ArrayLike) -> Tensor:
    """x with a @ x = b; b is a vector (b.ndim == a.ndim - 1) or a matrix (JAX's rule)."""
    x = _matrix("solve", a)
    rhs = asarray(b).cast(x.dtype)
    vector = rhs.ndim == x.ndim - 1 or rhs.ndim == 1
    if vector:
        rhs = rhs.unsqueeze(-1)
    if rhs.shape[-2] != x.shape[-1]:
        raise ValueError(f"fgrad.numpy.linalg.solve: a (shape {x.shape}) and b (shape "
                         f"{asarray(b).shape}) do not match; b is a batch of vectors when "
                         f"b.ndim == a.ndim - 1 (JAX's rule), else a batch of matrices")
    try:
        batch = tuple(np.broadcast_shapes(x.shape[:-2], rhs.shape[:-2]))
    except ValueError:
        raise ValueError(f"fgrad.numpy.linalg.solve: batch shapes {x.shape[:-2]} and "
                         f"{rhs.shape[:-2]} do not broadcast") from None
    x = x.expand(batch + x.shape[-2:]) if x.shape[:-2] != batch else x
    rhs = rhs.expand(batch + rhs.shape[-2:]) if rhs.shape[:-2] != batch else rhs
    lu, _, perm = _lp.lu(x)
    y = _lp.triangular_solve(lu, _lp.permute_rows(rhs, perm), lower=True, unit_diagonal=True)
    out = _lp.triangular_solve(lu, y, lower=False)
    return out[..., 0] if vector else out


def qr(a: ArrayLike, mode: str = "reduced") -> Any:
    """QR decomposition: mode "reduced" (default), "complete" or "r" (R only)."""
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"fgrad.numpy.linalg.qr: mode must be 'reduced', 'complete' or 'r', "
                         f"got {mode!r}")
    q, r = _lp.qr(_matrix("qr", a, square=False), full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True,
        hermitian: bool = False) -> Any:
    """Singular value decomposition a = U diag(S) Vh (S descending); S only if not
    compute_uv."""
    u, s, vh = _lp.svd(_matrix("svd", a, square=False), full_matrices=full_matrices)
    return SVDResult(u, s, vh) if compute_uv else s


def svdvals(x: ArrayLike) -> Tensor:
    """The singular values, descending."""
    return svd(x, compute_uv=False)


def eigh(a: ArrayLike, UPLO: str | None = None, symmetrize_input: bool = True  # noqa: N803
         ) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of a symmetric matrix. UPLO="L"/"U" uses
    only that triangle; by default the symmetric part (a + a^T) / 2 is used."""
    x = _matrix("eigh", a)
    if UPLO in ("L", "U"):
        n = x.shape[-1]
        keep = np.tril(np.ones((n, n), bool)) if UPLO == "L" else np.triu(np.ones((n, n), bool))
        half = Tensor(keep).where(x, 0.0)
        x = half + matrix_transpose(half) - x * _eye(n, x.dtype)
    w, v = _eigh_prim.eigh(x)
    return EighResult(w, v)


def eigvalsh(a: ArrayLike, UPLO: str | None = "L") -> Tensor:  # noqa: N803
    """The eigenvalues (ascending) of a symmetric matrix."""
    return eigh(a, UPLO).eigenvalues


def _tol_rank(s: Tensor, shape: tuple[int, ...], rtol: Any) -> Tensor:
    eps = float(np.finfo(s.dtype.np).eps)
    r = max(shape[-2:]) * eps if rtol is None else rtol
    return s.max(-1, keepdim=True) * r


def pinv(a: ArrayLike, rtol: Any = None, hermitian: bool = False, *,
         rcond: Any = None) -> Tensor:
    """The Moore-Penrose pseudo-inverse (singular values below rtol * max(S) are dropped;
    default rtol = max(m, n) * eps)."""
    x = _matrix("pinv", a, square=False)
    u, s, vh = _lp.svd(x, full_matrices=False)
    cut = _tol_rank(s, x.shape, rcond if rtol is None else rtol)
    keep = s > cut
    s_inv = keep.where(1.0 / keep.where(s, 1.0), 0.0)
    return matrix_transpose(vh) @ (s_inv.unsqueeze(-1) * matrix_transpose(u))


def lstsq(a: ArrayLike, b: ArrayLike, rcond: Any = None, *, numpy_resid: bool = False
          ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(x, residuals, rank, s): the least-squares solution of a @ x = b via the SVD."""
    x = _matrix("lstsq", a, square=False)
    rhs = asarray(b).cast(x.dtype)
    vector = rhs.ndim == 1
    rhs2 = rhs.unsqueeze(-1) if vector else rhs
    u, s, vh = _lp.svd(x, full_matrices=False)
    cut = _tol_rank(s, x.shape, rcond)
    keep = s > cut
    s_inv = keep.where(1.0 / keep.where(s, 1.0), 0.0)
    sol = matrix_transpose(vh) @ (s_inv.unsqueeze(-1) * (matrix_transpose(u) @ rhs2))
    rank = keep.cast(dtypes.int32).sum(-1)
    m, n = x.shape[-2:]
    if m > n:
        resid = ((rhs2 - x @ sol) ** 2).sum(-2)
        resid = resid[..., 0] if vector else resid
    else:
        resid = Tensor(np.zeros((0,), x.dtype.np))
    return (sol[..., 0] if vector else sol), resid, rank, s


def matrix_rank(M: ArrayLike, rtol: Any = None, *, tol: Any = None) -> Tensor:  # noqa: N803
    """The number of singular values above rtol * max(S) (or above `tol`)."""
    x = float_of(asarray(M))
    if x.ndim < 2:
        return (x != 0).any().cast(dtypes.int32)
    s = svdvals(x)
    cut = tol if tol is not None else _tol_rank(s, x.shape, rtol)
    return (s > cut).cast(dtypes.int32).sum(-1)


def matrix_power(a: ArrayLike, n: int) -> Tensor:
    """a raised to the integer power n (n < 0: of the inverse), by repeated squaring."""
    x = _matrix("matrix_power", a)
    if not isinstance(n, (int, np.integer)):
        raise TypeError(f"fgrad.numpy.linalg.matrix_power: n must be an int, got {n!r}")
    if n < 0:
        x, n = inv(x), -n
    result = None
    base = x
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    if result is None:
        return Tensor.full(x.shape, 0.0, dtype=x.dtype) + _eye(x.shape[-1], x.dtype)
    return result


def multi_dot(arrays: Sequence[ArrayLike]) -> Tensor:
    """The chained matrix product of the arrays (first and last may be 1-d)."""
    xs = [asarray(a) for a in arrays]
    out = xs[0]
    for x in xs[1:]:
        out = matmul(out, x)
    return out


def cond(x: ArrayLike, p: Any = None) -> Tensor:
    """The condition number (ratio of extreme singular values for p None / 2 / -2)."""
    if p not in (None, 2, -2):
        return norm(x, p, axis=(-2, -1)) * norm(inv(x), p, axis=(-2, -1))
    s = svdvals(x)
    ratio = s[..., 0] / s[..., -1]
    return 1.0 / ratio if p == -2 else ratio


# ---------------------------------------------------------------------------- norms

def vector_norm(x: ArrayLike, axis: Axis = None, keepdims: bool = False,
                ord: Any = 2) -> Tensor:  # noqa: A002
    """The vector p-norm over `axis` (None: all elements)."""
    t = float_of(asarray(x))
    axes = axes_of(axis, t.ndim, "vector_norm")
    a = t.abs()
    if ord in (None, 2):
        return (t * t).sum(axes, keepdim=keepdims).sqrt()
    if ord == math.inf:
        return a.max(axes, keepdim=keepdims)
    if ord == -math.inf:
        return a.min(axes, keepdim=keepdims)
    if ord == 0:
        return (t != 0).cast(t.dtype).sum(axes, keepdim=keepdims)
    if ord == 1:
        return a.sum(axes, keepdim=keepdims)
    p = float(ord)
    return (a ** p).sum(axes, keepdim=keepdims) ** (1.0 / p)


def matrix_norm(x: ArrayLike, keepdims: bool = False, ord: Any = "fro") -> Tensor:  # noqa: A002
    """A matrix norm of the last two axes: "fro", "nuc", 1, -1, 2, -2, inf, -inf."""
    return norm(x, ord, axis=(-2, -1), keepdims=keepdims)


def norm(x: ArrayLike, ord: Any = None, axis: Axis = None,  # noqa: A002
         keepdims: bool = False) -> Tensor:
    """NumPy's norm: a vector norm for one axis (or a 1-d array), a matrix norm for two axes
    (or a 2-d array), the 2-norm of everything for ord=None and axis=None."""
    t = float_of(asarray(x))
    if axis is None:
        if ord is None:
            out = (t * t).sum().sqrt()
            return out.reshape((1,) * t.ndim) if keepdims else out
        if t.ndim not in (1, 2):
            raise ValueError(f"fgrad.numpy.linalg.norm: ord={ord!r} needs a 1-d or 2-d array "
                             f"or an axis, got shape {t.shape}")
        axis = tuple(range(t.ndim))
    axes = axes_of(axis, t.ndim, "norm")
    if len(axes) == 1:
        if isinstance(ord, str):
            raise ValueError(f"fgrad.numpy.linalg.norm: ord={ord!r} is a matrix norm; pass "
                             f"two axes")
        return vector_norm(t, axes, keepdims, ord)
    if len(axes) != 2:
        raise ValueError(f"fgrad.numpy.linalg.norm: axis must name one or two axes, got "
                         f"{axis}")
    return _matrix_norm(t, axes, ord, keepdims)


def _matrix_norm(t: Tensor, axes: tuple[int, ...], ord: Any,  # noqa: A002
                 keepdims: bool) -> Tensor:
    r, c = axes
    m = moveaxis(t, (r, c), (-2, -1))
    if ord in (None, "fro"):
        out = (m * m).sum((-2, -1)).sqrt()
    elif ord == "nuc":
        out = svdvals(m).sum(-1)
    elif ord in (1, -1):
        col = m.abs().sum(-2)
        out = col.max(-1) if ord == 1 else col.min(-1)
    elif ord in (math.inf, -math.inf):
        row = m.abs().sum(-1)
        out = row.max(-1) if ord == math.inf else row.min(-1)
    elif ord in (2, -2):
        s = svdvals(m)
        out = s[..., 0] if ord == 2 else s[..., -1]
    else:
        raise ValueError(f"fgrad.numpy.linalg.norm: invalid norm order {ord!r} for matrices")
    if keepdims:
        shape = [1 if i in axes else d for i, d in enumerate(t.shape)]
        out = out.reshape(shape)
    return out


def outer(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The outer product of two 1-d arrays."""
    from fgrad.numpy.products import outer as _outer
    return _outer(x1, x2)

