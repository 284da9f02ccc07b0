"""Optax's losses (`optax.losses.*`, most also at `optax.*`) with Optax's signatures.

Each returns the loss per example (no reduction: take `.mean()` yourself, as with Optax) and
is written with differentiable Tensor ops, so it works under `grad`, `jit` and `vmap`.
"""
from __future__ import annotations

import math
import operator
from typing import Any

from fgrad import nn
from fgrad import numpy as fnp
from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.scipy.special import logsumexp

Axis = int | tuple[int, ...] | None

__all__ = [
    "convex_kl_divergence", "cosine_distance", "cosine_similarity", "generalized_kl_divergence",
    "hinge_loss", "huber_loss", "kl_divergence", "kl_divergence_with_log_targets", "l2_loss",
    "log_cosh", "multiclass_hinge_loss", "multiclass_perceptron_loss", "perceptron_loss",
    "poly_loss_cross_entropy", "safe_softmax_cross_entropy", "sigmoid_binary_cross_entropy",
    "sigmoid_focal_loss", "smooth_labels", "softmax_cross_entropy",
    "softmax_cross_entropy_with_integer_labels", "sparsemax_loss", "squared_error",
]


def _floating(x: Any, who: str) -> Tensor:
    x = as_tensor(x)
    if x.dtype.kind != "f":
        raise ValueError(f"{who}: expected a floating-point array, got {x.dtype}")
    return x


def _expand_where(where: Any, ndim: int, axis: Axis) -> Tensor | None:
    if where is None:
        return None
    where = as_tensor(where)
    return fnp.expand_dims(where, axis) if where.ndim != ndim and axis is not None else where


# --------------------------------------------------------------------------- classification


def sigmoid_binary_cross_entropy(logits: Any, labels: Any) -> Tensor:
    """`-labels * log sigmoid(logits) - (1 - labels) * log sigmoid(-logits)`, elementwise."""
    logits = _floating(logits, "sigmoid_binary_cross_entropy")
    labels = as_tensor(labels).cast(logits.dtype)
    return -labels * nn.log_sigmoid(logits) - (1.0 - labels) * nn.log_sigmoid(-logits)


def hinge_loss(predictor_outputs: Any, targets: Any) -> Tensor:
    """`max(0, 1 - outputs * targets)` for targets in {-1, 1}."""
    return (1 - as_tensor(predictor_outputs) * targets).maximum(0)


def perceptron_loss(predictor_outputs: Any, targets: Any) -> Tensor:
    """`max(0, -outputs * targets)` for targets in {-1, 1}."""
    return (-as_tensor(predictor_outputs) * targets).maximum(0)


def _sparse_plus(x: Tensor) -> Tensor:
    return (x <= -1.0).where(0.0, (x >= 1.0).where(x, (x + 1.0) ** 2 / 4))


def sparsemax_loss(logits: Any, labels: Any) -> Tensor:
    """Binary sparsemax loss: `sparse_plus(-logits if labels else logits)`."""
    logits = as_tensor(logits)
    return _sparse_plus(as_tensor(labels).cast(dtypes.bool).where(-logits, logits))


def safe_softmax_cross_entropy(logits: Any, labels: Any) -> Tensor:
    """Softmax cross entropy that is finite (and has finite gradients) where logits are
    -inf and the matching labels are 0."""
    logits = _floating(logits, "safe_softmax_cross_entropy")
    labels = as_tensor(labels)
    weighted = (labels != 0.0).where(labels * nn.log_softmax(logits, axis=-1), 0.0)
    return -weighted.sum(-1)


def softmax_cross_entropy(logits: Any, labels: Any, axis: Axis = -1, where: Any = None
                          ) -> Tensor:
    """`-sum(labels * log_softmax(logits), axis)`; `labels` are probabilities."""
    logits = _floating(logits, "softmax_cross_entropy")
    where = _expand_where(where, logits.ndim, axis)
    log_probs = nn.log_softmax(logits, axis, where)
    return -(as_tensor(labels) * log_probs).sum(axis, where=where)


def _canonical_axis(axis: int, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def softmax_cross_entropy_with_integer_labels(logits: Any, labels: Any, axis: Axis = -1,
                                              where: Any = None) -> Tensor:
    """`logsumexp(logits) - logits[label]` along `axis`; `labels` are class indices."""
    logits = _floating(logits, "softmax_cross_entropy_with_integer_labels")
    labels = as_tensor(labels)
    if labels.dtype.kind not in "iu":
        raise ValueError(f"softmax_cross_entropy_with_integer_labels: labels must be "
                         f"integers, got {labels.dtype}")
    where = _expand_where(where, logits.ndim, axis)
    if isinstance(axis, int):
        axis = _canonical_axis(axis, logits.ndim)
    elif isinstance(axis, tuple):
        logit_axes = tuple(_canonical_axis(a, logits.ndim) for a in axis)
        batch = tuple(i for i in range(logits.ndim) if i not in logit_axes)
        axis = len(batch)
        logits = logits.permute(batch + logit_axes)
        logits = logits.reshape(logits.shape[:axis] + (-1,))
        if where is not None:
            where = where.permute(batch + logit_axes)
            where = where.reshape(where.shape[:axis] + (-1,))
    else:
        raise ValueError(f"Keyword argument 'axis' must be of type 'int' or "
                         f"'tuple[int, ...]' but actual type is {type(axis)}.")
    picked = fnp.take_along_axis(logits, fnp.expand_dims(labels, axis), axis=axis)
    out = logsumexp(logits, axis=axis, where=where) - picked.squeeze(axis)
    if where is not None:
        out = fnp.any(where, axis).where(out, 0.0)
    return out


def multiclass_hinge_loss(scores: Any, labels: Any) -> Tensor:
    """`max(scores + 1 - one_hot(labels)) - scores[labels]`."""
    scores = as_tensor(scores)
    one_hot = nn.one_hot(labels, scores.shape[-1], dtype=scores.dtype)
    return (scores + 1.0 - one_hot).max(-1) - (scores * one_hot).sum(-1)


def multiclass_perceptron_loss(scores: Any, labels: Any) -> Tensor:
    """`max(scores) - scores[labels]`."""
    scores = as_tensor(scores)
    one_hot = nn.one_hot(labels, scores.shape[-1], dtype=scores.dtype)
    return scores.max(-1) - (scores * one_hot).sum(-1)


def poly_loss_cross_entropy(logits: Any, labels: Any, *, epsilon: Any = 2.0, axis: Axis = -1,
                            where: Any = None) -> Tensor:
    """PolyLoss: cross entropy plus `epsilon * sum(labels * (1 - softmax(logits)))`."""
    logits = _floating(logits, "poly_loss_cross_entropy")
    labels = _floating(labels, "poly_loss_cross_entropy")
    p = nn.softmax(logits, axis=axis, where=where)
    one_minus_pt = (labels * (1 - p)).sum(axis, where=where)
    return softmax_cross_entropy(logits, labels, axis, where) + epsilon * one_minus_pt


def kl_divergence(log_predictions: Any, targets: Any, axis: Axis = -1, where: Any = None
                  ) -> Tensor:
    """`sum(targets * (log targets - log_predictions))` (0 log 0 taken as 0)."""
    log_predictions = _floating(log_predictions, "kl_divergence")
    targets = _floating(targets, "kl_divergence")
    log_t = (targets == 0).where(0.0, targets.log())
    return (targets * (log_t - log_predictions)).sum(axis, where=where)


def kl_divergence_with_log_targets(log_predictions: Any, log_targets: Any, axis: Axis = -1,
                                   where: Any = None) -> Tensor:
    """`sum(exp(log_targets) * (log_targets - log_predictions))`."""
    log_predictions = _floating(log_predictions, "kl_divergence_with_log_targets")
    log_targets = _floating(log_targets, "kl_divergence_with_log_targets")
    return (log_targets.exp() * (log_targets - log_predictions)).sum(axis, where=where)


def generalized_kl_divergence(log_predictions: Any, targets: Any, axis: Axis = -1,
                              where: Any = None) -> Tensor:
    """`kl_divergence + sum(exp(log_predictions) - targets)` (convex in the predictions)."""
    kl = kl_divergence(log_predictions, targets, axis, where)
    extra = (as_tensor(log_predictions).exp() - targets).sum(axis, where=where)
    return kl + extra


def convex_kl_divergence(log_predictions: Any, targets: Any, axis: Axis = -1,
                         where: Any = None) -> Tensor:
    """Optax's older name of `generalized_kl_divergence`."""
    return generalized_kl_divergence(log_predictions, targets, axis, where)


def sigmoid_focal_loss(logits: Any, labels: Any, *, alpha: Any = None, gamma: Any = 2.0
                       ) -> Tensor:
    """Focal loss: sigmoid cross entropy weighted by `(1 - p_t) ** gamma` (and by `alpha`
    for positives, `1 - alpha` for negatives, when given)."""
    logits = _floating(logits, "sigmoid_focal_loss")
    labels = as_tensor(labels).cast(logits.dtype)
    ce = sigmoid_binary_cross_entropy(logits, labels)
    log_p, log_q = nn.log_sigmoid(logits), nn.log_sigmoid(-logits)
    log_one_minus_pt = logsumexp(fnp.stack([log_p, log_q], axis=-1), axis=-1,
                                 b=fnp.stack([1 - labels, labels], axis=-1))
    loss = ce * (gamma * log_one_minus_pt).exp()
    if alpha is None:
        return loss
    return (alpha * labels + (1.0 - alpha) * (1.0 - labels)) * loss


# --------------------------------------------------------------------------- regression


def squared_error(predictions: Any, targets: Any = None) -> Tensor:
    """`(predictions - targets) ** 2` (targets default to 0)."""
    predictions = _floating(predictions, "squared_error")
    if targets is not None and as_tensor(targets).shape != predictions.shape:
        raise ValueError(f"squared_error: shapes differ: {predictions.shape} vs "
                         f"{as_tensor(targets).shape}")
    errors = predictions - targets if targets is not None else predictions
    return errors * errors


def l2_loss(predictions: Any, targets: Any = None) -> Tensor:
    """`0.5 * (predictions - targets) ** 2`."""
    return 0.5 * squared_error(predictions, targets)


def huber_loss(predictions: Any, targets: Any = None, *, delta: Any = 1.0) -> Tensor:
    """Quadratic within `delta` of the target, linear beyond."""
    predictions = _floating(predictions, "huber_loss")
    errors = predictions - targets if targets is not None else predictions
    abs_errors = errors.abs()
    quadratic = abs_errors.minimum(delta)
    linear = abs_errors - quadratic
    return 0.5 * (quadratic * quadratic) + delta * linear


def log_cosh(predictions: Any, targets: Any = None) -> Tensor:
    """`log(cosh(predictions - targets))`, computed without overflow."""
    predictions = _floating(predictions, "log_cosh")
    errors = predictions - targets if targets is not None else predictions
    return fnp.logaddexp(errors, -errors) - math.log(2.0)


def cosine_similarity(predictions: Any, targets: Any, *, epsilon: Any = 0.0, axis: Axis = -1,
                      where: Any = None) -> Tensor:
    """`sum(a * b) / (|a| |b|)` along `axis`; squared norms are clipped below at `epsilon`."""
    a = _floating(predictions, "cosine_similarity")
    b = _floating(targets, "cosine_similarity")
    a_norm = a.square().sum(axis, where=where, keepdims=True).clip(epsilon).sqrt()
    b_norm = b.square().sum(axis, where=where, keepdims=True).clip(epsilon).sqrt()
    return ((a / a_norm) * (b / b_norm)).sum(axis, where=where)


def cosine_distance(predictions: Any, targets: Any, *, epsilon: Any = 0.0, axis: Axis = -1,
                    where: Any = None) -> Tensor:
    """`1 - cosine_similarity`."""
    return 1.0 - cosine_similarity(predictions, targets, epsilon=epsilon, axis=axis,
                                   where=where)


# --------------------------------------------------------------------------- smoothing


def smooth_labels(labels: Any, alpha: Any, *, axis: Axis = -1, where: Any = None) -> Tensor:
    """`(1 - alpha) * labels + alpha / num_categories` (label smoothing)."""
    labels = _floating(labels, "smooth_labels")
    if where is None:
        axes = range(labels.ndim) if axis is None else \
            (axis,) if isinstance(axis, int) else axis
        num: Any = math.prod(labels.shape[a] for a in axes)
    else:
        num = as_tensor(where).sum(axis, keepdims=True)
    return (1.0 - alpha) * labels + alpha / num
