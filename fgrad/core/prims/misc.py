"""iota (index ramps) and dot_general (batched contraction, the matmul primitive)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fgrad.core.dtypes import DType, dtypes
from fgrad.core.errors import ArgumentError
from fgrad.core.ir import ShapedArray
from fgrad.core.primitive import Primitive
from fgrad.core.prims._util import fmt_shape, is_undefined, move_bdim

iota_p = Primitive("iota")


def _iota_abstract(*, dtype: DType, shape: tuple[int, ...], dimension: int) -> ShapedArray:
    if not 0 <= dimension < len(shape):
        raise ArgumentError(f"iota: dimension {dimension} out of range for shape {shape}")
    return ShapedArray(tuple(shape), dtype)


def _iota_impl(*, dtype: DType, shape: tuple[int, ...], dimension: int) -> np.ndarray:
    ramp = np.arange(shape[dimension], dtype=dtype.np)
    view = [1] * len(shape)
    view[dimension] = shape[dimension]
    return np.broadcast_to(ramp.reshape(view), shape)


iota_p.abstract_eval = _iota_abstract
iota_p.impl = _iota_impl
iota_p.jvp = lambda primals, tangents, **params: (iota_p.bind(**params), None)
iota_p.batch = lambda args, dims, **params: (iota_p.bind(**params), None)


def iota(dtype: DType, shape: Sequence[int], dimension: int = 0) -> Any:
    """A Tensor whose entries count 0, 1, 2, ... along `dimension`."""
    return iota_p.bind(dtype=dtype, shape=tuple(int(d) for d in shape), dimension=int(dimension))


# ---------------------------------------------------------------------------- dot_general

dot_general_p = Primitive("dot_general", linear=True)
DimNums = tuple[tuple[tuple[int, ...], tuple[int, ...]], tuple[tuple[int, ...], tuple[int, ...]]]
# What `dot_general` accepts: any int sequences, normalised to DimNums.
DimNumsLike = tuple[tuple[Sequence[int], Sequence[int]], tuple[Sequence[int], Sequence[int]]]


def _free(ndim: int, *used: tuple[int, ...]) -> tuple[int, ...]:
    taken = set().union(*used)
    return tuple(i for i in range(ndim) if i not in taken)


def _dot_abstract(x: ShapedArray, y: ShapedArray, *, dimension_numbers: DimNums) -> ShapedArray:
    (xc, yc), (xb, yb) = dimension_numbers
    bad = (x.dtype != y.dtype or len(xc) != len(yc) or len(xb) != len(yb)
           or any(x.shape[a] != y.shape[b] for a, b in zip(xc + xb, yc + yb)))
    if bad:
        raise ArgumentError(f"matmul/dot_general: cannot contract {fmt_shape(x.shape)} "
                            f"{x.dtype.name} with {fmt_shape(y.shape)} {y.dtype.name} over "
                            f"axes {xc}/{yc} (batch {xb}/{yb})")
    shape = (tuple(x.shape[a] for a in xb) + tuple(x.shape[a] for a in _free(x.ndim, xc, xb))
             + tuple(y.shape[a] for a in _free(y.ndim, yc, yb)))
    return ShapedArray(shape, x.dtype)


def _dot_impl(x: np.ndarray, y: np.ndarray, *, dimension_numbers: DimNums) -> np.ndarray:
    """Permute to (batch, free, contract) x (batch, contract, free) and call BLAS matmul."""
    (xc, yc), (xb, yb) = dimension_numbers
    xf, yf = _free(x.ndim, xc, xb), _free(y.ndim, yc, yb)
    if x.dtype in (np.float16, dtypes.bfloat16.np):
        x, y = x.astype(np.float32), y.astype(np.float32)
    size = lambda arr, axes: int(np.prod([arr.shape[a] for a in axes]))  # noqa: E731
    b, m, k, n = size(x, xb), size(x, xf), size(x, xc), size(y, yf)
    x3 = np.transpose(x, xb + xf + xc).reshape(b, m, k)
    y3 = np.transpose(y, yb + yc + yf).reshape(b, k, n)
    out = np.matmul(x3, y3)
    shape = tuple(x.shape[a] for a in xb + xf) + tuple(y.shape[a] for a in yf)
    return out.reshape(shape)


def dot_general(x: Any, y: Any, dimension_numbers: DimNumsLike) -> Any:
    """Contract `x` and `y` over the given axes with shared batch axes (output: batch, x free,
    y free)."""
    (xc, yc), (xb, yb) = dimension_numbers
    dn = ((tuple(int(a) for a in xc), tuple(int(a) for a in yc)),
          (tuple(int(a) for a in xb), tuple(int(a) for a in yb)))
    return dot_general_p.bind(x, y, dimension_numbers=dn)


def _dot_jvp(primals: list[Any], tangents: list[Any], *, dimension_numbers: DimNums) -> Any:
    (x, y), (x_dot, y_dot) = primals, tangents
    out = dot_general(x, y, dimension_numbers)
    terms = []
    if x_dot is not None:
        terms.append(dot_general(x_dot, y, dimension_numbers))
    if y_dot is not None:
        terms.append(dot_general(x, y_dot, dimension_numbers))
    if not terms:
        return out, None
    return out, terms[0] if len(terms) == 1 else terms[0] + terms[1]


def _dot_cotangent(ct: Any, other: Any, self_ndim: int, mine: tuple, theirs: tuple,
                   ct_mine: tuple, ct_theirs: tuple) -> Any:
    """Cotangent of one operand of dot_general. `mine`/`theirs` are (contract, batch) axes."""
    from fgrad.core.prims.movement import transpose
    (my_c, my_b), (their_c, their_b) = mine, theirs
    my_free = _free(self_ndim, my_c, my_b)
    their_free = _free(other.ndim, their_c, their_b)
    ct_batch = tuple(range(len(my_b)))
    out = dot_general(ct, other, ((ct_theirs, their_free), (ct_batch, their_b)))
    their_rest = _free(other.ndim, their_free, their_b)
    result_axes = list(my_b) + list(my_free) + [my_c[their_c.index(b)] for b in their_rest]
    return transpose(out, tuple(int(i) for i in np.argsort(result_axes)))


def _dot_transpose(ct: Any, x: Any, y: Any, *, dimension_numbers: DimNums) -> list[Any]:
    (xc, yc), (xb, yb) = dimension_numbers
    nb = len(xb)
    n_xf = x.aval.ndim - len(xc) - nb
    n_yf = y.aval.ndim - len(yc) - nb
    ct_xfree = tuple(range(nb, nb + n_xf))
    ct_yfree = tuple(range(nb + n_xf, nb + n_xf + n_yf))
    ct_x = ct_y = None
    if is_undefined(x):
        ct_x = _dot_cotangent(ct, y, x.aval.ndim, (xc, xb), (yc, yb), ct_xfree, ct_yfree)
    if is_undefined(y):
        ct_y = _dot_cotangent(ct, x, y.aval.ndim, (yc, yb), (xc, xb), ct_yfree, ct_xfree)
    return [ct_x, ct_y]


def _free_bdim(dn: DimNums, ndims: tuple[int, int], which: int, d: int) -> tuple[DimNums, int]:
    """Dimension numbers when operand `which` alone carries a vmapped axis at `d`: that axis
    becomes one more free axis (so the product stays one large matmul, not a batch of small
    ones); also the axis it lands on in the output."""
    shift = lambda axes: tuple(a + (a >= d) for a in axes)  # noqa: E731
    (xc, yc), (xb, yb) = dn
    if which == 0:
        xc, xb = shift(xc), shift(xb)
    else:
        yc, yb = shift(yc), shift(yb)
    new = ((xc, yc), (xb, yb))
    nx = ndims[0] + (which == 0)
    x_free = _free(nx, xc, xb)
    if which == 0:
        return new, len(xb) + x_free.index(d)
    y_free = _free(ndims[1] + 1, yc, yb)
    return new, len(xb) + len(x_free) + y_free.index(d)


def _dot_batch(args: list[Any], dims: list[Any], *, dimension_numbers: DimNums) -> Any:
    """One operand vmapped: its axis becomes a free axis of the contraction. Both: the two
    axes become a new leading batch axis."""
    from fgrad.core.prims._util import batch_size
    (xc, yc), (xb, yb) = dimension_numbers
    x, y = args
    if (dims[0] is None) != (dims[1] is None):
        which = 0 if dims[1] is None else 1
        ndims = (x.ndim - (which == 0), y.ndim - (which == 1))
        dn, out_dim = _free_bdim(dimension_numbers, ndims, which, dims[which])
        return dot_general(x, y, dn), out_dim
    size = batch_size(args, dims)
    x = move_bdim(x, dims[0], 0, size)
    y = move_bdim(y, dims[1], 0, size)
    shift = lambda axes: tuple(a + 1 for a in axes)  # noqa: E731
    dn = ((shift(xc), shift(yc)), ((0,) + shift(xb), (0,) + shift(yb)))
    return dot_general(x, y, dn), 0


dot_general_p.abstract_eval = _dot_abstract
dot_general_p.impl = _dot_impl
dot_general_p.jvp = _dot_jvp
dot_general_p.transpose = _dot_transpose
dot_general_p.batch = _dot_batch
