"""Tensor methods: convolution, pooling, normalization, attention, losses, dropout, einsum."""
from __future__ import annotations


class NNOpsMixin:
    """Tensor methods: convolution, pooling, normalization, attention, losses, dropout, einsum."""

    __slots__ = ()
