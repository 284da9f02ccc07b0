"""`fgrad.random`: counter-based random numbers with explicit keys (JAX's names).

The key machinery and the basic samplers live in `fgrad.core.random` (Tensor's own random
constructors use them); the other distributions of `jax.random` live in this package:
`gaussian` (uniform, normal, truncated_normal and exponential: their float64 paths),
`distributions` (transforms of uniform and normal draws), `gamma_family` (gamma and what is
built on it), `discrete` (poisson, binomial, multinomial, geometric) and `keys`. This module
is the public namespace.
"""
from fgrad.core.random import (PRNGKey, bernoulli, bits, categorical, choice, fold_in, gumbel,
                               key, permutation, randint, split, threefry2x32)
from fgrad.random.discrete import binomial, geometric, multinomial, poisson
from fgrad.random.distributions import (cauchy, double_sided_maxwell, laplace, logistic,
                                        lognormal, maxwell, multivariate_normal, orthogonal,
                                        pareto, rademacher, rayleigh, triangular, wald,
                                        weibull_min)
from fgrad.random.gaussian import exponential, normal, truncated_normal, uniform
from fgrad.random.gamma_family import (ball, beta, chisquare, dirichlet, f, gamma,
                                       generalized_normal, loggamma, t)
from fgrad.random.keys import clone, key_data, key_dtype, key_impl, wrap_key_data

__all__ = ["PRNGKey", "ball", "bernoulli", "beta", "binomial", "bits", "categorical", "cauchy",
           "chisquare", "choice", "clone", "dirichlet", "double_sided_maxwell", "exponential",
           "f", "fold_in", "gamma", "generalized_normal", "geometric", "gumbel", "key",
           "key_data", "laplace", "loggamma", "logistic", "lognormal", "maxwell",
           "multinomial", "multivariate_normal", "normal", "orthogonal", "pareto",
           "permutation", "poisson", "rademacher", "randint", "rayleigh", "split", "t",
           "threefry2x32", "triangular", "truncated_normal", "uniform", "wald",
           "weibull_min", "wrap_key_data", "key_dtype", "key_impl"]
