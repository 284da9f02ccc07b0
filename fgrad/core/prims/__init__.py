"""The primitive set. Importing this package registers every primitive."""
from fgrad.core.prims._util import UndefinedPrimal, is_undefined, zeros
from fgrad.core.prims.elementwise import (  # noqa: F401
    abs_p, add_p, and_p, atan2_p, bitcast, bitcast_p, ceil_p, convert, convert_p, cos_p, div_p,
    eq_p, erf_p, exp_p, expm1_p, floor_p, ge_p, gt_p, isnan_p, le_p, log1p_p, log_p, logistic_p,
    lt_p, max_p, min_p, mul_p, ne_p, neg_p, not_p, or_p, pow_p, rem_p, round_p, rsqrt_p,
    safe_mul, safe_mul_p, select, select_p, shift_left_p, shift_right_p, sign_p, sin_p, sqrt_p,
    stop_gradient, stop_gradient_p, sub_p, tan_p, tanh_p, xor_p)
from fgrad.core.prims.indexing import gather, gather_p, scatter, scatter_p, take_along
from fgrad.core.prims.misc import dot_general, dot_general_p, iota, iota_p
from fgrad.core.prims.movement import (broadcast_in_dim, broadcast_p, concatenate,
                                       concatenate_p, pad, pad_p, reshape, reshape_p, rev,
                                       rev_p, slice_, slice_p, transpose, transpose_p)
from fgrad.core.prims.reduce import (argmax_p, argmin_p, cumulative, cummax_p, cummin_p,
                                     cumprod_p, cumsum_p, reduce_max, reduce_max_p,
                                     reduce_min, reduce_min_p, reduce_prod, reduce_prod_p,
                                     reduce_sum, reduce_sum_p)
from fgrad.core.prims.patches import (conv_patches, conv_patches_p, conv_patches_transpose,
                                      conv_patches_transpose_p)
from fgrad.core.prims.sort import sort, sort_p, top_k, top_k_p

__all__ = [n for n in dir() if not n.startswith("_")]
from fgrad.core.prims._util import move_bdim as move_bdim_public  # noqa: E402
from fgrad.core.prims import linalg  # noqa: E402,F401  (cholesky, lu, qr, svd, trsm)
from fgrad.core.prims import eigh as _eigh  # noqa: E402,F401  (eigh: host-step fallback)
