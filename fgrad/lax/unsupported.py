"""`jax.lax` names fgrad does not provide, with what to use instead.

The names in `NOT_PROVIDED` raise AttributeError on lookup from `fgrad.lax.__getattr__`,
with the alternative in the message.
"""
from __future__ import annotations

__all__ = ["NOT_PROVIDED"]

NOT_PROVIDED = {
    "slice_": "lax.slice(operand, start_indices, limit_indices, strides)",
    "convert": "lax.convert_element_type(operand, new_dtype)",
    "cumulative": "lax.cumsum / cumprod / cummax / cummin(operand, axis, reverse)",
    "rng_uniform": "fgrad.random.uniform(key, shape, minval=a, maxval=b) (XLA's stateful "
                   "generator has no fgrad counterpart)",
}
