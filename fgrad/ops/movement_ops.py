"""Tensor methods: padding modes, joining/splitting, repeat, roll, gather/scatter, sort."""
from __future__ import annotations


class MovementOpsMixin:
    """Tensor methods: padding modes, joining/splitting, repeat, roll, gather/scatter, sort."""

    __slots__ = ()
