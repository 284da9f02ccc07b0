"""The Tensor's methods, one mixin per family, each built on primitives.

`fgrad.core.tensor.Tensor` inherits them all. Core (`tensor_*`): creation, elementwise
math, movement, reductions. The documented API beyond the core: `math_ops` (activations,
extra elementwise math, softmax family, statistics), `movement_ops` (pad modes, cat/stack/
split, repeat, roll, sort, triu/tril), `index_ops` (gather/scatter), `nn_ops`, `conv_ops`,
`pool_ops`, `loss_ops`, `einsum`, `linalg` (qr, svd, cholesky, solve, inv, det),
`array_methods` (jax.Array's method spellings and NumPy keywords: take, ravel, trace, ...).
"""
