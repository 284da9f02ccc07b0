"""The symmetric eigendecomposition primitive `eigh`.

`eigh(x)` acts on the trailing two axes (leading axes are a batch) and returns
[w, v]: ascending eigenvalues w (..., n) and orthonormal eigenvectors v (..., n, n), column
v[..., :, i] for w[..., i], of the symmetric part (x + x^T) / 2. Eigenvector signs are
LAPACK's. There is no native kernel: on llvm and opencl the equation is a host step that
runs this NumPy/LAPACK impl between native segments (the schedule printout says so).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from fgrad.core.ir import ShapedArray
from fgrad.core.primitive import Primitive
from fgrad.core.prims.linalg import _check_matrix, _eye_like, _lapack_float, _mT, _unary_batch

eigh_p = Primitive("eigh", multiple_results=True)

HOST_FALLBACK = ("host step: the NumPy/LAPACK impl runs between native segments (no native "
                 "eigensolver yet; documented fallback)")


def _eigh_abstract(x: ShapedArray) -> list[ShapedArray]:
    _check_matrix("eigh", x, square=True)
    return [ShapedArray(x.shape[:-1], x.dtype), x]


def _eigh_impl(x: np.ndarray) -> list[np.ndarray]:
    a = _lapack_float(x)
    a = (a + np.swapaxes(a, -1, -2)) / 2
    if a.size == 0:
        return [np.zeros(a.shape[:-1], x.dtype), np.zeros(a.shape, x.dtype)]
    w, v = np.linalg.eigh(a)
    return [w.astype(x.dtype), v.astype(x.dtype)]


def _eigh_jvp(primals: list[Any], tangents: list[Any]) -> tuple[list[Any], list[Any]]:
    """With S = V^T sym(dA) V: dw = diag(S), dV = V (F * S), F_ij = 1 / (w_j - w_i) off the
    diagonal and 0 on it (repeated eigenvalues give inf/nan eigenvector tangents)."""
    (x,), (x_dot,) = primals, tangents
    w, v = eigh_p.bind(x)
    if x_dot is None:
        return [w, v], [None, None]
    sym = (x_dot + _mT(x_dot)) * 0.5
    s = _mT(v) @ sym @ v
    eye = _eye_like(s)
    w_dot = (s * eye).sum(-1)
    gap = w.unsqueeze(-2) - w.unsqueeze(-1)
    f = 1.0 / (gap + eye) - eye
    return [w, v], [w_dot, v @ (f * s)]


eigh_p.abstract_eval = _eigh_abstract
eigh_p.impl = _eigh_impl
eigh_p.jvp = _eigh_jvp
eigh_p.batch = _unary_batch(eigh_p)
for _backend in ("llvm", "opencl"):  # recorded like fgrad/lower's descriptions
    eigh_p.lowerings[_backend] = HOST_FALLBACK


def eigh(x: Any) -> list[Any]:
    """[w, v]: ascending eigenvalues and eigenvectors (columns) of the symmetric part of x."""
    return eigh_p.bind(x)
