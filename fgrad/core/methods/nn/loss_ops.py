"""Loss functions with PyTorch semantics, written in numerically stable forms.

Log-probabilities come from `Tensor.log_softmax` (shifted by the maximum); the logits loss
uses `Tensor.softplus` (max(z, 0) + log1p(exp(-|z|))). Class labels are picked with
`take_along` (a gather), so -inf log-probabilities of unselected classes never meet a zero
weight. reduction is 'mean', 'sum' or 'none'.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from fgrad.core import prims as P
from fgrad.core.dtypes import dtypes
from fgrad.core.errors import ArgumentError, ArgumentTypeError
from fgrad.core.prims._util import fmt_shape

if TYPE_CHECKING:
    from fgrad.core.tensor import Tensor

REDUCTIONS = ("mean", "sum", "none")


def reduce_loss(loss: "Tensor", reduction: str, op: str) -> "Tensor":
    """Apply a loss reduction: 'mean', 'sum' or 'none'."""
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.mean()
    raise ArgumentError(f"{op}: reduction must be one of {REDUCTIONS}, got {reduction!r}")


def _check_reduction(reduction: str, op: str) -> None:
    if reduction not in REDUCTIONS:
        raise ArgumentError(f"{op}: reduction must be one of {REDUCTIONS}, got {reduction!r}")


def _check_smoothing(label_smoothing: float, op: str) -> None:
    if not 0.0 <= label_smoothing <= 1.0:
        raise ArgumentError(f"{op}: label_smoothing must be in [0, 1], got {label_smoothing}")


def _float(x: "Tensor") -> "Tensor":
    return x if x.dtype.is_float else x.cast(dtypes.default_float)


def _tensor(x: Any) -> "Tensor":
    from fgrad.core.tensor import as_tensor
    return as_tensor(x)


def _labels(Y: Any, op: str) -> "Tensor":
    Y = _tensor(Y)
    if not Y.dtype.is_int:
        raise ArgumentTypeError(f"{op}: class labels must be integers, got {Y.dtype.name} "
                                f"{fmt_shape(Y.shape)}; cast them with Y.cast(dtypes.int32)")
    return Y


def pick(x: "Tensor", labels: "Tensor", axis: int) -> "Tensor":
    """x[..., labels[...], ...] along `axis` (labels have x's shape without that axis)."""
    picked = P.take_along(x, labels.unsqueeze(axis), axis)
    return picked.squeeze(axis)


class LossOpsMixin:
    """Tensor methods: cross-entropy family and negative log likelihood."""

    __slots__ = ()

    def binary_crossentropy(self, Y: Any, reduction: str = "mean") -> "Tensor":
        """-(Y log p + (1 - Y) log(1 - p)) with self = p; logs are clamped at -100 (PyTorch)."""
        log_p = _float(cast("Tensor", self)).log().maximum(-100.0)
        log_q = (1 - _float(cast("Tensor", self))).log().maximum(-100.0)
        return reduce_loss(-(Y * log_p + (1 - Y) * log_q), reduction, "binary_crossentropy")

    def binary_crossentropy_logits(self, Y: Any, reduction: str = "mean",
                                   pos_weight: Any = None) -> "Tensor":
        """Binary cross-entropy of logits self (sigmoid folded in, stable for large |x|).

        pos_weight multiplies the positive term, broadcast along the last axis (PyTorch).
        """
        x = _float(cast("Tensor", self))
        weight = 1 if pos_weight is None else 1 + (pos_weight - 1) * Y
        loss = (1 - Y) * x + weight * (-x).softplus()
        return reduce_loss(loss, reduction, "binary_crossentropy_logits")

    def sparse_categorical_crossentropy(self, Y: Any, ignore_index: int = -1,
                                        label_smoothing: float = 0.0,
                                        reduction: str = "mean") -> "Tensor":
        """Cross-entropy of logits self (..., classes) and integer labels Y (...).

        The class axis is the last one. Labels equal to ignore_index add nothing and are left
        out of the mean (PyTorch's ignore_index semantics).
        """
        op = "sparse_categorical_crossentropy"
        _check_smoothing(label_smoothing, op)
        _check_reduction(reduction, op)
        Y = _labels(Y, op)
        if tuple(Y.shape) != tuple(self.shape[:-1]):
            raise ArgumentError(f"{op}: labels {fmt_shape(Y.shape)} must have the logits' shape "
                                f"{fmt_shape(self.shape)} without the last (class) axis")
        logp = _float(cast("Tensor", self)).log_softmax(-1)
        keep = Y != ignore_index
        picked = pick(logp, keep.where(Y, 0), logp.ndim - 1)
        nll = -((1 - label_smoothing) * picked + label_smoothing * logp.mean(-1))
        loss = keep.where(nll, 0)
        if reduction == "mean":
            return loss.sum() / keep.sum().cast(loss.dtype)
        return reduce_loss(loss, reduction, op)

    def cross_entropy(self, Y: Any, reduction: str = "mean",
                      label_smoothing: float = 0.0) -> "Tensor":
        """Cross-entropy of logits self (N, C, ...) or (C,) with class indices Y (N, ...)
        or class probabilities Y (self's shape), as torch.nn.functional.cross_entropy."""
        op = "cross_entropy"
        _check_smoothing(label_smoothing, op)
        _check_reduction(reduction, op)
        Y = _tensor(Y)
        axis = 0 if self.ndim == 1 else 1
        classes = self.shape[axis]
        logp = _float(cast("Tensor", self)).log_softmax(axis)
        if Y.dtype.is_int:
            want = self.shape[:axis] + self.shape[axis + 1:]
            if tuple(Y.shape) != tuple(want):
                raise ArgumentError(f"{op}: class-index targets must have shape {fmt_shape(want)} "
                                    f"for logits {fmt_shape(self.shape)}, got {fmt_shape(Y.shape)}")
            loss = -((1 - label_smoothing) * pick(logp, Y, axis)
                     + label_smoothing * logp.mean(axis))
            return reduce_loss(loss, reduction, op)
        if tuple(Y.shape) != tuple(self.shape):
            raise ArgumentError(f"{op}: probability targets must have the logits' shape "
                                f"{fmt_shape(self.shape)}, got {fmt_shape(Y.shape)}")
        target = (1 - label_smoothing) * Y + label_smoothing / classes
        return reduce_loss(-(logp * target).sum(axis), reduction, op)

    def nll_loss(self, Y: Any, weight: "Tensor | None" = None,
                 ignore_index: int | None = None, reduction: str = "mean") -> "Tensor":
        """Negative log likelihood of log-probabilities self (N, C, ...) or (C,) at labels Y.

        weight (C,) rescales each class; 'mean' divides by the total weight of the
        non-ignored targets (PyTorch).
        """
        op = "nll_loss"
        _check_reduction(reduction, op)
        Y = _labels(Y, op)
        axis = 0 if self.ndim == 1 else 1
        want = self.shape[:axis] + self.shape[axis + 1:]
        if tuple(Y.shape) != tuple(want):
            raise ArgumentError(f"{op}: targets must have shape {fmt_shape(want)} for input "
                                f"{fmt_shape(self.shape)}, got {fmt_shape(Y.shape)}")
        x = _float(cast("Tensor", self))
        keep = Y.ones_like(dtypes.bool) if ignore_index is None else Y != ignore_index
        labels = keep.where(Y, 0)
        if weight is None:
            w = keep.cast(x.dtype)
        else:
            w = keep.where(P.gather(weight.cast(x.dtype), labels), 0)
        loss = -pick(x, labels, axis) * w
        if reduction == "mean":
            return loss.sum() / w.sum()
        return reduce_loss(loss, reduction, op)
