"""`fgrad.random`: counter-based random numbers with explicit keys (JAX's names).

The implementation lives in `fgrad.core.random` (Tensor's own random constructors use it);
this module is the public namespace.
"""
from fgrad.core.random import (PRNGKey, bernoulli, bits, categorical, choice, exponential,
                               fold_in, gumbel, key, normal, permutation, randint, split,
                               threefry2x32, truncated_normal, uniform)

__all__ = ["PRNGKey", "bernoulli", "bits", "categorical", "choice", "exponential",
           "fold_in", "gumbel", "key", "normal", "permutation", "randint", "split",
           "threefry2x32", "truncated_normal", "uniform"]
