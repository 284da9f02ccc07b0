"""The documented Tensor API beyond the core: each file is a Tensor mixin built on primitives.

- math_ops: activations, extra elementwise math, softmax-family and statistical reductions
- movement_ops: pad modes, cat/stack/split, repeat, roll, gather/scatter, sort, triu/tril
- nn_ops: conv, pooling, normalization, attention, losses, dropout, einsum
- linalg: qr, svd, cholesky, solve, inv, det/slogdet
"""
