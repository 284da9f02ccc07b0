"""Tensor methods: activations, extra elementwise math, softmax family and statistics."""
from __future__ import annotations


class MathOpsMixin:
    """Tensor methods: activations, extra elementwise math, softmax family and statistics."""

    __slots__ = ()
