"""Tensor methods: copysign, log10, logaddexp, softmin, normalize, diag, diagonal, unfold,
contiguous_backward.

Each is a composition of primitives, so its derivative, batching rule and lowering come from
them. Integer inputs of the float functions compute in the default float dtype.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence, cast

from fgrad.core import prims as P
from fgrad.core.dtypes import dtypes
from fgrad.core.errors import ArgumentError
from fgrad.core.prims._util import fmt_shape
from fgrad.core.methods.tensor_math import coerce
from fgrad.core.methods.index_ops import as_int, take_range
from fgrad.core.methods.math_ops import _logaddexp
from fgrad.core.methods.array_methods import alias

if TYPE_CHECKING:
    from fgrad.core.tensor import Tensor

_SIGN_BIT_INT = {2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}


def _float(x: Any) -> "Tensor":
    return x if x.dtype.is_float else x.cast(dtypes.default_float)


def split_sequence(op: str, seq: Sequence[Any], args: Sequence[Any]) -> tuple[Any, list[Any]]:
    """The first Tensor and the rest of `Tensor.cat([a, b])` / `Tensor.stack((a, b))`."""
    from fgrad.core.tensor import as_tensor
    if args:
        raise ArgumentError(f"{op}: pass the Tensors either as one sequence or as separate "
                            f"arguments, not both (got a {type(seq).__name__} and "
                            f"{len(args)} more)")
    if not seq:
        raise ArgumentError(f"{op}: needs at least one Tensor, got an empty sequence")
    ts = [as_tensor(t) for t in seq]
    return ts[0], ts[1:]


def sign_bit(x: "Tensor") -> "Tensor":
    """True where the float `x` has its sign bit set (-0.0 and negative NaNs included)."""
    return x.bitcast(_SIGN_BIT_INT[x.dtype.itemsize]) < 0


class ExtraOpsMixin:
    """Tensor methods: copysign, log10, logaddexp, softmin, normalize, diag, diagonal,
    unfold, contiguous_backward."""

    __slots__ = ()

    def copysign(self, other: Any) -> "Tensor":
        """|self| with the sign (bit) of `other`, elementwise; floats result (PyTorch's rule:
        the derivative with respect to self is sign(self) * sign(result), 0 at 0)."""
        x, y = coerce("copysign", self, other)
        x, y = _float(x), _float(y)
        magnitude = x.abs()
        return sign_bit(y).where(-magnitude, magnitude)

    def log10(self) -> "Tensor":
        """Base-10 logarithm."""
        return _float(self).log() * (1 / math.log(10))

    def logaddexp(self, other: Any) -> "Tensor":
        """log(exp(self) + exp(other)) elementwise, without overflow."""
        x, y = coerce("logaddexp", self, other)
        return _logaddexp(_float(x), _float(y))

    def softmin(self, axis: int = -1, dtype: Any = None) -> "Tensor":
        """softmax(-x) along `axis`."""
        return (-cast("Tensor", self)).softmax(axis, dtype)

    def normalize(self, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> "Tensor":
        """self / max(||self||_p, eps) with the p-norm taken along `dim` (PyTorch's
        F.normalize; p=0 counts nonzero entries, p=inf takes the largest magnitude)."""
        x = _float(self)
        a = x.abs()
        if p == 0:
            norm = (x != 0).cast(x.dtype).sum(dim, keepdim=True)
        elif math.isinf(p):
            norm = a.max(dim, keepdim=True) if p > 0 else a.min(dim, keepdim=True)
        else:
            norm = a.pow(p).sum(dim, keepdim=True).pow(1 / p)
        return x / norm.maximum(eps)

    def contiguous_backward(self) -> "Tensor":
        """Identity: fgrad's gradients are always dense arrays, so there is nothing to make
        contiguous (kept for the reference API)."""
        return self  # type: ignore[return-value]

    def diag(self) -> "Tensor":
        """The square matrix with the 1-d self on its diagonal (the diagonal of a 2-d self)."""
        if self.ndim == 2:
            return self.diagonal()
        if self.ndim != 1:
            raise ArgumentError(f"diag: expected a 1-d or 2-d Tensor, got shape "
                                f"{fmt_shape(self.shape)}")
        n = self.shape[0]
        rows = P.pad(self.reshape(n, 1), [(0, 0, 0), (0, n, 0)], 0)
        return take_range(rows.reshape(n * (n + 1)), 0, 0, n * n).reshape(n, n)

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1, *,
                 axis1: int | None = None, axis2: int | None = None) -> "Tensor":
        """Entries (i, i + offset) of the planes spanned by `dim1` and `dim2`, as a new last
        axis (PyTorch's diagonal; NumPy's axis1= and axis2= name dim1 and dim2)."""
        if axis1 is not None or axis2 is not None:
            dim1 = alias("diagonal", "dim1", dim1, 0, "axis1", axis1)
            dim2 = alias("diagonal", "dim2", dim2, 1, "axis2", axis2)
        if self.ndim < 2:
            raise ArgumentError(f"diagonal: needs at least 2 dims, got shape "
                                f"{fmt_shape(self.shape)}")
        d1, d2, k = self._axis(dim1), self._axis(dim2), as_int("diagonal", offset)
        if d1 == d2:
            raise ArgumentError(f"diagonal: dim1 and dim2 must differ, both are {d1}")
        rest = [i for i in range(self.ndim) if i not in (d1, d2)]
        x = self.permute(*rest, d1, d2)
        rows, cols = x.shape[-2:]
        r0, c0 = max(-k, 0), max(k, 0)
        m = max(min(rows - r0, cols - c0), 0)
        x = take_range(take_range(x, x.ndim - 2, r0, r0 + m), x.ndim - 1, c0, c0 + m)
        lead = tuple(x.shape[:-2])
        flat = P.pad(x.reshape(*lead, m * m), [(0, 0, 0)] * len(lead) + [(0, m, 0)], 0)
        return take_range(flat.reshape(*lead, m, m + 1), len(lead) + 1, 0, 1).reshape(*lead, m)

    def unfold(self, dim: int, size: int, step: int) -> "Tensor":
        """Windows of `size` entries every `step` along `dim`, as a new last axis (PyTorch's
        Tensor.unfold): dim's length becomes (n - size) // step + 1."""
        d = self._axis(dim)
        size, step = as_int("unfold", size), as_int("unfold", step)
        n = self.shape[d] if self.ndim else 1
        if size < 0 or size > n or step <= 0:
            raise ArgumentError(f"unfold: need 0 <= size <= {n} (the length of dim {d} of "
                                f"{fmt_shape(self.shape)}) and step > 0, got size={size}, "
                                f"step={step}")
        count = (n - size) // step + 1
        windows = [take_range(self, d, i * step, i * step + size) for i in range(count)]
        out = windows[0].unsqueeze(d) if count == 1 else windows[0].stack(*windows[1:], dim=d)
        order = [i for i in range(out.ndim) if i != d + 1] + [d + 1]
        return out.permute(*order)


__all__ = ["ExtraOpsMixin", "sign_bit", "split_sequence"]
