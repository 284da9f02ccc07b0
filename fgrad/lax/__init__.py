"""`fgrad.lax`: JAX's `jax.lax` for fgrad: structured control flow (cond, switch, scan,
while_loop, fori_loop), collectives over named vmap axes, and the primitive-level operations
with `jax.lax`'s signatures and semantics (array-like operands, no implicit promotion; see
`fgrad/lax/_args.py`), including XLA's general gather/scatter (`fgrad/lax/gather_scatter.py`).
jax.lax names that are not provided raise AttributeError with a hint.
`fgrad.lax.linalg` holds JAX's `jax.lax.linalg` decompositions."""
from typing import Any

from fgrad.lax.collectives import all_gather, axis_index, pmax, pmean, pmin, psum
from fgrad.lax.convolution import (ConvDimensionNumbers, ConvGeneralDilatedDimensionNumbers,
                                  conv, conv_dimension_numbers, conv_general_dilated,
                                  conv_general_dilated_patches, conv_transpose,
                                  conv_with_general_padding)
from fgrad.lax.dynamic import (dynamic_index_in_dim, dynamic_slice, dynamic_slice_in_dim,
                               dynamic_update_index_in_dim, dynamic_update_slice,
                               dynamic_update_slice_in_dim)
from fgrad.lax.elementwise import (RoundingMethod, abs, add, atan2,  # noqa: A004
                                   bitcast_convert_type, bitwise_and, bitwise_not, bitwise_or,
                                   bitwise_xor, ceil, clamp, convert_element_type, cos, div, eq,
                                   erf, exp, expm1, floor, ge, gt, integer_pow, is_finite, le,
                                   log, log1p, logistic, lt, max, min, mul, ne, neg, pow,
                                   reciprocal, rem, round, rsqrt, select, select_n, shift_left,
                                   shift_right_arithmetic, shift_right_logical, sign, sin, sqrt,
                                   square, sub, tan, tanh)
from fgrad.lax.gather_scatter import (GatherDimensionNumbers, GatherScatterMode,
                                     ScatterDimensionNumbers, gather, index_take, scatter,
                                     scatter_add, scatter_apply, scatter_max, scatter_min,
                                     scatter_mul, scatter_sub)
from fgrad.lax.more_ops import (DotDimensionNumbers, Precision, acos, acosh, asin, asinh, atan,
                                atanh, cbrt, clz, cosh, custom_linear_solve, custom_root, exp2,
                                nextafter, optimization_barrier,
                                population_count, reduce_precision, sinh)
from fgrad.lax.reductions import (argmax, argmin, batch_matmul, cumlogsumexp, cummax, cummin,
                                  cumprod, cumsum, dot, dot_general, reduce, reduce_and,
                                  reduce_max, reduce_min, reduce_or, reduce_prod, reduce_sum,
                                  reduce_xor)
from fgrad.lax.shapes import (broadcast, broadcast_in_dim, broadcast_to_rank,  # noqa: A004
                              broadcasted_iota, collapse, concatenate, expand_dims, full,
                              full_like, index_in_dim, iota, pad, reshape, rev, slice,
                              slice_in_dim, split, squeeze, stack, tile, transpose, unstack)
from fgrad.lax.special_fns import (bessel_i0e, bessel_i1e, betainc, igamma, igammac, polygamma,
                                   zeta)
from fgrad.lax import linalg
from fgrad.lax.scan_ops import associative_scan, map  # noqa: A004
from fgrad.lax.shape_util import broadcast_shapes, padtype_to_pads
from fgrad.lax.sorting import sort, sort_key_val, top_k
from fgrad.lax.unsupported import NOT_PROVIDED as _NOT_PROVIDED
from fgrad.lax.windowed import reduce_window
from fgrad.transforms.autodiff import stop_gradient
from fgrad.transforms.control.cond import cond, switch
from fgrad.transforms.control.scan import scan
from fgrad.transforms.control.while_loop import fori_loop, while_loop
from fgrad.transforms.extras.sharding import with_sharding_constraint

__all__ = [
    # control flow and autodiff
    "cond", "switch", "scan", "while_loop", "fori_loop", "stop_gradient", "map",
    "associative_scan",
    # collectives
    "all_gather", "axis_index", "pmax", "pmean", "pmin", "psum",
    # elementwise
    "RoundingMethod", "abs", "add", "atan2", "bitcast_convert_type", "bitwise_and",
    "bitwise_not", "bitwise_or", "bitwise_xor", "ceil", "clamp", "convert_element_type", "cos",
    "div", "eq", "erf", "exp", "expm1", "floor", "ge", "gt", "integer_pow", "is_finite", "le",
    "log", "log1p", "logistic", "lt", "max", "min", "mul", "ne", "neg", "pow", "reciprocal",
    "rem", "round", "rsqrt", "select", "select_n", "shift_left", "shift_right_arithmetic",
    "shift_right_logical", "sign", "sin", "sqrt", "square", "sub", "tan", "tanh",
    # shapes and creation
    "broadcast", "broadcast_in_dim", "broadcasted_iota", "collapse", "concatenate",
    "expand_dims", "full", "full_like", "index_in_dim", "iota", "pad", "reshape", "rev", "slice",
    "slice_in_dim", "squeeze", "transpose",
    # reductions and contractions
    "argmax", "argmin", "batch_matmul", "cummax", "cummin", "cumprod", "cumsum", "dot",
    "dot_general", "reduce_and", "reduce_max", "reduce_min", "reduce_or", "reduce_prod",
    "reduce_sum", "reduce_xor", "reduce_window",
    # sorting, dynamic slicing, convolution
    "sort", "sort_key_val", "top_k", "dynamic_index_in_dim", "dynamic_slice",
    "dynamic_slice_in_dim", "dynamic_update_index_in_dim", "dynamic_update_slice",
    "dynamic_update_slice_in_dim", "conv_general_dilated", "ConvDimensionNumbers", "conv",
    "conv_dimension_numbers", "conv_transpose", "conv_with_general_padding",
    # static shape rules, and the linalg submodule
    "broadcast_shapes", "padtype_to_pads", "linalg",
    # general gather / scatter
    "GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers", "gather",
    "index_take", "scatter", "scatter_add", "scatter_apply", "scatter_max", "scatter_min",
    "scatter_mul", "scatter_sub",
    # more elementwise, special functions, reductions, shapes, types
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "clz", "cosh", "exp2",
    "nextafter", "population_count", "reduce_precision", "sinh", "bessel_i0e", "bessel_i1e",
    "betainc", "igamma", "igammac", "polygamma", "zeta", "cumlogsumexp", "reduce",
    "broadcast_to_rank", "split", "stack", "tile", "unstack", "optimization_barrier",
    "conv_general_dilated_patches", "ConvGeneralDilatedDimensionNumbers",
    "DotDimensionNumbers", "Precision", "custom_root", "custom_linear_solve",
]
__all__ += ["with_sharding_constraint"]


def __getattr__(name: str) -> Any:
    """A jax.lax name fgrad does not provide: an AttributeError that names the alternative."""
    if name in _NOT_PROVIDED:
        raise AttributeError(f"module 'fgrad.lax' has no attribute {name!r}: fgrad does not "
                             f"provide jax.lax.{name}; use {_NOT_PROVIDED[name]}")
    raise AttributeError(f"module 'fgrad.lax' has no attribute {name!r}")
