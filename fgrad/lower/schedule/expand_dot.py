"""dot_general without BLAS: a fused multiply-and-reduce for the dtypes gemm does not take.

In: fgrad values x, y (tracers of schedule/expand.py's staging trace) and dimension_numbers of a
dot_general that cannot be a gemm (integer, bool, float16/bfloat16 operands; see
`gemm_layout.gemm_reason`). Out: the product, computed as reduce_sum over the contracted
axes of a broadcast elementwise product, so the schedule makes ONE reduction kernel with the
multiply fused in (nothing of the (batch, m, k, n) product is stored). Half precision is
computed in float32 and rounded once, as the NumPy impl does; bool contracts with `or` of
`and`, which is what the impl's integer matmul gives after the cast back to bool.
"""
from __future__ import annotations

from typing import Any

from fgrad.core import prims as P
from fgrad.core.dtypes import dtypes
from fgrad.lower.schedule.gemm_layout import gemm_reason

WIDENED = (dtypes.float16, dtypes.bfloat16)


def _free(ndim: int, *used: tuple[int, ...]) -> tuple[int, ...]:
    taken = set().union(*used)
    return tuple(i for i in range(ndim) if i not in taken)


def needs_expansion(eqn: Any) -> bool:
    """Whether a dot_general equation runs as this expansion (gemm cannot take it). An
    operand layout BLAS cannot read does not count: the schedule packs such operands."""
    return eqn.primitive.name == "dot_general" and gemm_reason(eqn, layout=False) is not None


def dot_as_reduction(x: Any, y: Any, *, dimension_numbers: Any) -> list[Any]:
    """dot_general(x, y) as reduce_sum(x[b, m, k, -] * y[b, -, k, n]) over k."""
    (xc, yc), (xb, yb) = dimension_numbers
    xf, yf = _free(x.ndim, xc, xb), _free(y.ndim, yc, yb)
    out_dtype = x.dtype
    if out_dtype in WIDENED:
        x, y = P.convert(x, dtypes.float32), P.convert(y, dtypes.float32)
    nb, nf, ng, nk = len(xb), len(xf), len(yf), len(xc)
    shape = (tuple(x.shape[a] for a in xb) + tuple(x.shape[a] for a in xf)
             + tuple(y.shape[a] for a in yf) + tuple(x.shape[a] for a in xc))
    x = P.transpose(x, xb + xf + xc)  # axis order (batch, free, contract): the
    y = P.transpose(y, yb + yf + yc)  # broadcast dimensions below then increase
    x_dims = tuple(range(nb + nf)) + tuple(range(nb + nf + ng, nb + nf + ng + nk))
    y_dims = tuple(range(nb)) + tuple(range(nb + nf, nb + nf + ng + nk))
    wide_x = P.broadcast_in_dim(x, shape, x_dims)
    wide_y = P.broadcast_in_dim(y, shape, y_dims)
    contract = tuple(range(nb + nf + ng, nb + nf + ng + nk))
    if out_dtype == dtypes.bool:
        product = P.and_p.bind(wide_x, wide_y)
        out = P.reduce_max(product, contract) if nk else product
    else:
        product = P.mul_p.bind(wide_x, wide_y)
        out = P.reduce_sum(product, contract) if nk else product
    return [P.convert(out, out_dtype) if out_dtype in WIDENED else out]
