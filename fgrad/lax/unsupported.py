"""`jax.lax` names fgrad does not provide, with what to use instead.

`gather` and `scatter` (XLA's general forms with GatherDimensionNumbers /
ScatterDimensionNumbers) exist so that a port fails with a clear NotImplementedError at the
call; the other names in `NOT_PROVIDED` raise AttributeError on lookup from
`fgrad.lax.__getattr__`.
"""
from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["NOT_PROVIDED", "gather", "scatter"]

_INDEXING = ("index with x[idx], fgrad.numpy.take(x, idx, axis), "
             "fgrad.numpy.take_along_axis(x, idx, axis), or lax.dynamic_slice for traced starts")
_UPDATING = ("update with x.at[idx].set(v) (or .add/.mul/.min/.max), or "
             "lax.dynamic_update_slice for traced starts")

NOT_PROVIDED = {
    "scatter_add": "x.at[idx].add(v)", "scatter_mul": "x.at[idx].mul(v)",
    "scatter_min": "x.at[idx].min(v)", "scatter_max": "x.at[idx].max(v)",
    "scatter_apply": "x.at[idx].set(f(x[idx]))",
    "reduce": "lax.reduce_sum / reduce_prod / reduce_max / reduce_min / reduce_and / "
              "reduce_or / reduce_xor",
    "cumlogsumexp": "m + lax.log(lax.cumsum(lax.exp(x - m))) with m the maximum of x",
    "slice_": "lax.slice(operand, start_indices, limit_indices, strides)",
    "convert": "lax.convert_element_type(operand, new_dtype)",
    "cumulative": "lax.cumsum / cumprod / cummax / cummin(operand, axis, reverse)",
}


def gather(operand: Any, start_indices: Any, dimension_numbers: Any = None,
           slice_sizes: Any = None, **kwargs: Any) -> NoReturn:
    """Not provided: XLA's general gather. Raises NotImplementedError naming the
    alternatives."""
    raise NotImplementedError(f"fgrad.lax.gather (XLA's general gather with "
                              f"GatherDimensionNumbers) is not provided; {_INDEXING}")


def scatter(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: Any = None,
            **kwargs: Any) -> NoReturn:
    """Not provided: XLA's general scatter. Raises NotImplementedError naming the
    alternatives."""
    raise NotImplementedError(f"fgrad.lax.scatter (XLA's general scatter with "
                              f"ScatterDimensionNumbers) is not provided; {_UPDATING}")
