"""Tensor methods: qr, svd, cholesky, solve, inv, det/slogdet."""
from __future__ import annotations


class LinalgMixin:
    """Tensor methods: qr, svd, cholesky, solve, inv, det/slogdet."""

    __slots__ = ()
