"""dot_general for the dtypes gemm does not take (integer, bool, float16/bfloat16 operands;
see `gemm_layout.gemm_reason`).

In: fgrad values x, y (tracers of schedule/expand.py's staging trace) and dimension_numbers.
Out: the product.
- float16/bfloat16: the operands converted to float32, a float32 dot_general (a native
  gemm: fgrad's own GEMM on llvm, the tiled kernel on opencl) and one rounding of the
  float32 sums, as the NumPy impl (and XLA on CPU) computes it. The products of two halves
  are exact in float32, so only the accumulation order differs from the impl. The
  operand conversions are O(mk + kn) next to the O(mkn) product, and the rounding of the
  result is an elementwise kernel the gemm runs as its epilogue.
- integers and bool: reduce_sum over the contracted axes of a broadcast elementwise
  product, so the schedule makes ONE reduction kernel with the multiply fused in (nothing
  of the (batch, m, k, n) product is stored); bool contracts with `or` of `and`, which is
  what the impl's integer matmul gives after the cast back to bool. Not int32 on a backend
  with its own GEMM (llvm: `needs_expansion(own_gemm=True)`), which computes it natively.
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


def needs_expansion(eqn: Any, own_gemm: bool = False) -> bool:
    """Whether a dot_general equation runs as this expansion (gemm cannot take it). An
    operand layout BLAS cannot read does not count: the schedule packs such operands.
    `own_gemm`: the backend's own GEMM takes int32 products (llvm)."""
    return eqn.primitive.name == "dot_general" \
        and gemm_reason(eqn, layout=False, integer=own_gemm) is not None


def dot_as_reduction(x: Any, y: Any, *, dimension_numbers: Any) -> list[Any]:
    """dot_general(x, y) as reduce_sum(x[b, m, k, -] * y[b, -, k, n]) over k, or, for half
    precision, as a float32 gemm between conversions (module docstring)."""
    out_dtype = x.dtype
    if out_dtype in WIDENED:
        x, y = P.convert(x, dtypes.float32), P.convert(y, dtypes.float32)
        return [P.convert(P.dot_general(x, y, dimension_numbers), out_dtype)]
    (xc, yc), (xb, yb) = dimension_numbers
    xf, yf = _free(x.ndim, xc, xb), _free(y.ndim, yc, yb)
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
    return [out]
