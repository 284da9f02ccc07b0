"""fgrad.numpy: jax.numpy's names, arguments and semantics over fgrad Tensors.

`import fgrad.numpy as fnp`. Functions accept Tensors (traced ones too), NumPy arrays,
Python scalars and nested lists, and return Tensors, so they work inside jit, grad and vmap.
The Tensor methods keep tinygrad's API; these functions follow NumPy where the two differ
(var/std ddof=0, transpose reverses axes, split takes sections, repeat repeats elements,
meshgrid indexing="xy", sort returns values only). See README "Coming from JAX".
"""
import math as _math

import numpy as _np

from fgrad.core.dtypes import dtypes as _dtypes
from fgrad.core.tensor import Tensor
from fgrad.numpy import linalg
from fgrad.numpy._base import array, asarray, astype, result_type
from fgrad.numpy.creation import (arange, diag, diagflat, empty, empty_like, eye, full,
                                  full_like, identity, linspace, logspace, meshgrid, ones,
                                  ones_like, tri, tril, triu, zeros, zeros_like)
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
from fgrad.numpy.reductions import (all, amax, amin, any, argmax, argmin, average,
                                    count_nonzero, cumprod, cumsum, cumulative_prod,
                                    cumulative_sum, max, mean, median, min, nanargmax,
                                    nanargmin, nancumsum, nanmax, nanmean, nanmedian, nanmin,
                                    nanprod, nanstd, nansum, nanvar, percentile, prod, ptp,
                                    quantile, std, sum, var)
from fgrad.numpy.sets import argwhere, flatnonzero, in1d, isin, nonzero, unique
from fgrad.numpy.shape import (array_split, atleast_1d, atleast_2d, atleast_3d,
                               broadcast_arrays, broadcast_shapes, broadcast_to, column_stack,
                               concat, concatenate, diagonal, dsplit, dstack, expand_dims,
                               flip, fliplr, flipud, hsplit, hstack, matrix_transpose,
                               moveaxis, ndim, pad, put_along_axis, ravel, repeat, reshape,
                               roll, rot90, row_stack, shape, size, split, squeeze, stack,
                               swapaxes, take, take_along_axis, tile, trace, transpose, vsplit,
                               vstack)

ndarray = Tensor
pi, e, inf, nan, euler_gamma = _math.pi, _math.e, _math.inf, _math.nan, 0.5772156649015329
newaxis = None
bool_ = _dtypes.bool
int8, int16, int32, int64 = _dtypes.int8, _dtypes.int16, _dtypes.int32, _dtypes.int64
uint8, uint16, uint32, uint64 = _dtypes.uint8, _dtypes.uint16, _dtypes.uint32, _dtypes.uint64
float16, bfloat16 = _dtypes.float16, _dtypes.bfloat16
float32, float64 = _dtypes.float32, _dtypes.float64
finfo, iinfo = _np.finfo, _np.iinfo

__all__ = [n for n in dir() if not n.startswith("_")]
