"""fgrad.numpy: jax.numpy's names, arguments and semantics over fgrad Tensors.

`import fgrad.numpy as fnp`. Functions accept Tensors (traced ones too), NumPy arrays,
Python scalars and nested lists, and return Tensors, so they work inside jit, grad and vmap.
The Tensor methods keep tinygrad's API; these functions follow NumPy where the two differ
(var/std ddof=0, transpose reverses axes, split takes sections, repeat repeats elements,
meshgrid indexing="xy", sort returns values only). See README "Coming from JAX".
"""
import math as _math

from fgrad.core.methods.interop import from_dlpack
from fgrad.core.tensor import Tensor
from fgrad.numpy import linalg
from fgrad.numpy._base import array, asarray, astype
from fgrad.numpy.creation import (arange, diag, diagflat, empty, empty_like, eye, full,
                                  full_like, identity, linspace, logspace, meshgrid, ones,
                                  ones_like, tri, tril, triu, zeros, zeros_like)
from fgrad.numpy.creation import (frombuffer, fromfile, fromiter, fromstring, load, save,
                                  savez)
from fgrad.numpy.elementwise import (abs, absolute, add, allclose, arccos, arccosh, arcsin,
                                     arcsinh, arctan, arctan2, arctanh, around, array_equal,
                                     bitwise_and, bitwise_not, bitwise_or, bitwise_xor, cbrt,
                                     ceil, clip, copysign, cos, cosh, deg2rad, degrees, divide,
                                     divmod, equal, exp, exp2, expm1, fix, float_power, floor,
                                     floor_divide, fmax, fmin, fmod, greater, greater_equal,
                                     heaviside, hypot, invert, isclose, isfinite, isinf, isnan,
                                     isneginf, isposinf, left_shift, less, less_equal, log,
                                     log1p, log2, log10, logaddexp, logaddexp2, logical_and,
                                     logical_not, logical_or, logical_xor, maximum, minimum,
                                     mod, multiply, nan_to_num, negative, not_equal, positive,
                                     power, rad2deg, radians, reciprocal, remainder,
                                     right_shift, rint, round, sign, signbit, sin, sinc, sinh,
                                     sqrt, square, subtract, tan, tanh, true_divide, trunc,
                                     where)
from fgrad.numpy.products import (argsort, cross, dot, einsum, inner, kron, lexsort, matmul,
                                  outer, searchsorted, sort, tensordot, vdot)
from fgrad.numpy.products import einsum_path
from fgrad.numpy.reductions import (all, amax, amin, any, argmax, argmin, average,
                                    count_nonzero, cumprod, cumsum, cumulative_prod,
                                    cumulative_sum, max, mean, median, min, nanargmax,
                                    nanargmin, nancumsum, nanmax, nanmean, nanmedian, nanmin,
                                    nanprod, nanstd, nansum, nanvar, percentile, prod, ptp,
                                    quantile, std, sum, var)
from fgrad.numpy.reductions import nanpercentile, nanquantile
from fgrad.numpy.sets import argwhere, flatnonzero, in1d, isin, nonzero, unique
from fgrad.numpy.sets import (compress, extract, intersect1d, setdiff1d, setxor1d, union1d,
                              unique_all, unique_counts, unique_inverse, unique_values)
from fgrad.numpy.shape import (array_split, atleast_1d, atleast_2d, atleast_3d,
                               broadcast_arrays, broadcast_shapes, broadcast_to, column_stack,
                               concat, concatenate, diagonal, dsplit, dstack, expand_dims,
                               flip, fliplr, flipud, hsplit, hstack, matrix_transpose,
                               moveaxis, ndim, pad, put_along_axis, ravel, repeat, reshape,
                               roll, rot90, row_stack, shape, size, split, squeeze, stack,
                               swapaxes, take, take_along_axis, tile, trace, transpose, vsplit,
                               vstack)

from fgrad.numpy.dtype_info import (bfloat16, bool_, can_cast, character, complexfloating,
                                    double, dtype, finfo, flexible, float16, float32, float64,
                                    float_, floating, generic, iinfo, inexact, int8, int16,
                                    int32, int64, int_, integer, isdtype, issubdtype, number,
                                    promote_types, result_type, signedinteger, single, uint,
                                    uint8, uint16, uint32, uint64, unsignedinteger)
from fgrad.numpy.extras import (angle, append, argpartition, array_equiv, block, choose, conj,
                                conjugate, copy, delete, geomspace, imag, iscomplex,
                                iscomplexobj, isreal, isrealobj, isscalar, iterable, matvec,
                                nancumprod, partition, permute_dims, real, resize, rollaxis,
                                trim_zeros, unstack, vecdot, vecmat)
from fgrad.numpy.extras import (array_repr, array_str, get_printoptions, insert, packbits,
                                place, printoptions, put, set_printoptions, unpackbits)
from fgrad.numpy.functional import (apply_along_axis, apply_over_axes, fromfunction,
                                    piecewise, select, vectorize)
from fgrad.numpy.indexing import (diag_indices, diag_indices_from, fill_diagonal, index_exp,
                                  indices, ix_, mgrid, ogrid, ravel_multi_index, s_,
                                  tril_indices, tril_indices_from, triu_indices,
                                  triu_indices_from, unravel_index)
from fgrad.numpy.indexing import c_, mask_indices, r_
from fgrad.numpy.mathfuncs import (acos, acosh, asin, asinh, atan, atan2, atanh, bartlett,
                                   bitwise_invert, bitwise_left_shift, bitwise_right_shift,
                                   blackman, fabs, frexp, gcd, hamming, hanning, i0, kaiser,
                                   lcm, ldexp, modf, nextafter, pow, spacing)
from fgrad.numpy.mathfuncs import bitwise_count
from fgrad.numpy.numeric import (bincount, convolve, corrcoef, correlate, cov, diff, digitize,
                                 ediff1d, gradient, histogram, histogram_bin_edges, interp,
                                 trapezoid, unwrap)
from fgrad.numpy.numeric import histogram2d, histogramdd
from fgrad.numpy.polynomial import (poly, polyadd, polyder, polyfit, polyint, polymul,
                                    polysub, polyval, vander)
from fgrad.numpy.polynomial import polydiv

ndarray = Tensor
pi, e, inf, nan, euler_gamma = _math.pi, _math.e, _math.inf, _math.nan, 0.5772156649015329
newaxis = None
bool = bool_  # noqa: A001  (jnp.bool; the builtin is shadowed only inside this module)

__all__ = [n for n in dir() if not n.startswith("_")]
