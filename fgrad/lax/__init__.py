"""`fgrad.lax`: structured control flow (cond, switch, scan, while_loop, fori_loop) and the
primitive-level operations (JAX's lax), for users who want them directly."""
from fgrad.core.prims import (broadcast_in_dim, concatenate, convert, cumulative,  # noqa: F401
                              dot_general, gather, iota, pad, reduce_max, reduce_min,
                              reduce_prod, reduce_sum, reshape, rev, scatter, select, slice_,
                              transpose)
from fgrad.lax.collectives import all_gather, axis_index, pmax, pmean, pmin, psum
from fgrad.lax.conv import conv_general_dilated
from fgrad.lax.dynamic import (dynamic_index_in_dim, dynamic_slice, dynamic_slice_in_dim,
                               dynamic_update_index_in_dim, dynamic_update_slice,
                               dynamic_update_slice_in_dim)
from fgrad.lax.sorting import top_k
from fgrad.transforms.autodiff import stop_gradient
from fgrad.transforms.control.cond import cond, switch
from fgrad.transforms.control.scan import scan
from fgrad.transforms.control.while_loop import fori_loop, while_loop

__all__ = ["cond", "switch", "scan", "while_loop", "fori_loop", "broadcast_in_dim",
           "concatenate", "convert", "cumulative", "dot_general", "gather", "iota", "pad",
           "reduce_max", "reduce_min", "reduce_prod", "reduce_sum", "reshape", "rev", "scatter",
           "select", "slice_", "stop_gradient", "transpose", "conv_general_dilated",
           "dynamic_index_in_dim", "dynamic_slice", "dynamic_slice_in_dim",
           "dynamic_update_index_in_dim", "dynamic_update_slice", "dynamic_update_slice_in_dim",
           "all_gather", "axis_index", "pmax", "pmean", "pmin", "psum", "top_k"]
