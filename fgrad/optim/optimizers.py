"""Named optimizers: short compositions of transformations with hyperparameters in the state.

Names, arguments and defaults follow the reference (SGD, LARS, Adam, AdamW, LAMB) and
PyTorch (RMSprop, Adagrad) or the Lion paper. Every number (or schedule `count -> value`) is
a hyperparameter held in the state; change one between steps with `set_hyperparams`. A term
that is off at construction (momentum=0, weight_decay=0 in SGD/LARS/RMSprop/Adagrad/Lion,
tcoef=0) is not built and has no hyperparameter.
"""
from __future__ import annotations

import functools
from typing import Any

from fgrad.core.tensor import Tensor
from fgrad.core.tree_util import tree_map
from fgrad.optim.base import (EmptyState, GradientTransformation, ScalarOrSchedule, cast_like,
                              chain, inject_hyperparams, require_params, transformation)
from fgrad.optim.transforms import (Scalar, TraceState, add_decayed_weights, scale,
                                    scale_by_adam, scale_by_lion, scale_by_rms, scale_by_rss,
                                    scale_by_trust_ratio, trace)


def _active(value: Any) -> bool:
    """Whether a switchable term (momentum, weight decay, tcoef) is on."""
    return callable(value) or isinstance(value, Tensor) or value != 0


def _present(**hparams: Any) -> dict[str, Any]:
    """The hyperparameters whose value is not None."""
    return {k: v for k, v in hparams.items() if v is not None}


def _optional(value: Any) -> Any:
    return value if _active(value) else None


# --------------------------------------------------------------------------- LARS / SGD


def _lars_ratio(g: Tensor, w: Tensor, weight_decay: Scalar | None, tcoef: Scalar) -> Tensor:
    """`tcoef * |w| / (|g| + weight_decay * |w|)`, 1 where either norm is zero."""
    w_norm = w.float().square().sum().sqrt()
    g_norm = g.float().square().sum().sqrt()
    denom = g_norm if weight_decay is None else g_norm + weight_decay * w_norm
    safe = (denom > 0).where(denom, 1.0)
    return ((w_norm > 0) & (g_norm > 0)).where(tcoef * w_norm / safe, 1.0)


def _lars(lr: Scalar, weight_decay: Scalar | None = None, momentum: Scalar | None = None,
          tcoef: Scalar | None = None, *, nesterov: bool, classic: bool
          ) -> GradientTransformation:
    """One LARS step. `classic` scales by lr (and the trust ratio) before the momentum
    buffer; the popular rule scales the buffer's output instead."""
    momentum_step = trace(momentum, nesterov) if momentum is not None else None

    def init(params: Any) -> TraceState | EmptyState:
        return momentum_step.init(params) if momentum_step else EmptyState()

    def update(grads: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        if weight_decay is not None or tcoef is not None:
            params = require_params(params, "LARS/SGD with weight_decay or tcoef")
        rate = lr
        if tcoef is not None:
            rate = tree_map(lambda g, w: lr * _lars_ratio(g, w, weight_decay, tcoef),
                            grads, params)
        if weight_decay is not None:
            grads = tree_map(lambda g, w: cast_like(g + weight_decay * w, g), grads, params)
        if classic:
            grads = _times(grads, rate)
        if momentum_step:
            grads, state = momentum_step.update(grads, state)
        if not classic:
            grads = _times(grads, rate)
        return tree_map(lambda u: -u, grads), state
    return transformation(init, update)


def _times(tree: Any, factor: Any) -> Any:
    """`tree * factor` leafwise; `factor` is one scalar or a pytree of scalars."""
    if isinstance(factor, (int, float, Tensor)):
        return tree_map(lambda u: cast_like(u * factor, u), tree)
    return tree_map(lambda u, f: cast_like(u * f, u), tree, factor)


def LARS(lr: ScalarOrSchedule = 0.001, momentum: ScalarOrSchedule = 0.9,  # noqa: N802
         weight_decay: ScalarOrSchedule = 1e-4, nesterov: bool = False, classic: bool = True,
         tcoef: ScalarOrSchedule = 0.001) -> GradientTransformation:
    """Layer-wise Adaptive Rate Scaling: SGD whose step per parameter is scaled by the trust
    ratio `tcoef * |w| / (|g| + weight_decay * |w|)`."""
    build = functools.partial(_lars, nesterov=nesterov, classic=classic)
    hparams = _present(lr=lr, weight_decay=_optional(weight_decay),
                       momentum=_optional(momentum), tcoef=_optional(tcoef))
    return inject_hyperparams(build)(**hparams)


def SGD(lr: ScalarOrSchedule = 0.001, momentum: ScalarOrSchedule = 0.0,  # noqa: N802
        weight_decay: ScalarOrSchedule = 0.0, nesterov: bool = False, classic: bool = False
        ) -> GradientTransformation:
    """Stochastic gradient descent with optional (Nesterov) momentum and weight decay.

    `classic=False` is the popular rule (PyTorch's): `b = m*b + g; w -= lr*b`;
    `classic=True` puts lr inside the buffer: `b = m*b + lr*g; w -= b`.
    """
    return LARS(lr, momentum, weight_decay, nesterov, classic, tcoef=0.0)


# --------------------------------------------------------------------------- Adam family


def _lamb(lr: Scalar, b1: Scalar, b2: Scalar, eps: Scalar, weight_decay: Scalar | None = None,
          *, adam: bool, mask: Any = None) -> GradientTransformation:
    parts = [scale_by_adam(b1, b2, eps)]
    if weight_decay is not None:
        parts.append(add_decayed_weights(weight_decay, mask))
    if not adam:
        parts.append(scale_by_trust_ratio())
    return chain(*parts, scale(-lr))


def LAMB(lr: ScalarOrSchedule = 0.001, b1: ScalarOrSchedule = 0.9,  # noqa: N802
         b2: ScalarOrSchedule = 0.999, eps: ScalarOrSchedule = 1e-6,
         weight_decay: ScalarOrSchedule = 0.0, adam: bool = False, mask: Any = None
         ) -> GradientTransformation:
    """LAMB: the Adam direction plus `weight_decay * w`, scaled per parameter by the trust
    ratio `|w| / |update|` (`adam=True` leaves the ratio out: AdamW). `mask` (bools shaped
    like the params, or params -> bools) picks the parameters that decay."""
    build = functools.partial(_lamb, adam=adam, mask=mask)
    hparams = _present(lr=lr, b1=b1, b2=b2, eps=eps, weight_decay=_optional(weight_decay))
    return inject_hyperparams(build)(**hparams)


def AdamW(lr: ScalarOrSchedule = 0.001, b1: ScalarOrSchedule = 0.9,  # noqa: N802
          b2: ScalarOrSchedule = 0.999, eps: ScalarOrSchedule = 1e-8,
          weight_decay: ScalarOrSchedule = 0.01, mask: Any = None) -> GradientTransformation:
    """Adam with decoupled weight decay: `w -= lr * (adam_direction + weight_decay * w)`.

    `mask` (bools shaped like the params or a prefix, or params -> bools, as Optax's) picks
    the parameters that decay, e.g. `lambda p: tree_map(lambda w: w.ndim > 1, p)`."""
    return LAMB(lr, b1, b2, eps, weight_decay, adam=True, mask=mask)


def Adam(lr: ScalarOrSchedule = 0.001, b1: ScalarOrSchedule = 0.9,  # noqa: N802
         b2: ScalarOrSchedule = 0.999, eps: ScalarOrSchedule = 1e-8) -> GradientTransformation:
    """Adam: `w -= lr * m_hat / (sqrt(v_hat) + eps)` with bias-corrected moments."""
    return LAMB(lr, b1, b2, eps, 0.0, adam=True)


# --------------------------------------------------------------------------- others


def _rmsprop(lr: Scalar, alpha: Scalar, eps: Scalar, weight_decay: Scalar | None = None,
             momentum: Scalar | None = None, *, centered: bool) -> GradientTransformation:
    parts = [] if weight_decay is None else [add_decayed_weights(weight_decay)]
    parts.append(scale_by_rms(alpha, eps, centered))
    if momentum is not None:
        parts.append(trace(momentum))
    return chain(*parts, scale(-lr))


def RMSprop(lr: ScalarOrSchedule = 0.01, alpha: ScalarOrSchedule = 0.99,  # noqa: N802
            eps: ScalarOrSchedule = 1e-8, weight_decay: ScalarOrSchedule = 0.0,
            momentum: ScalarOrSchedule = 0.0, centered: bool = False) -> GradientTransformation:
    """RMSprop as PyTorch: `v = alpha*v + (1-alpha)*g**2; w -= lr * g / (sqrt(v) + eps)`."""
    build = functools.partial(_rmsprop, centered=centered)
    hparams = _present(lr=lr, alpha=alpha, eps=eps, weight_decay=_optional(weight_decay),
                       momentum=_optional(momentum))
    return inject_hyperparams(build)(**hparams)


def _adagrad(lr: Scalar, eps: Scalar, weight_decay: Scalar | None = None, *,
             initial_accumulator_value: float) -> GradientTransformation:
    parts = [] if weight_decay is None else [add_decayed_weights(weight_decay)]
    return chain(*parts, scale_by_rss(initial_accumulator_value, eps), scale(-lr))


def Adagrad(lr: ScalarOrSchedule = 0.01, weight_decay: ScalarOrSchedule = 0.0,  # noqa: N802
            initial_accumulator_value: float = 0.0, eps: ScalarOrSchedule = 1e-10
            ) -> GradientTransformation:
    """Adagrad as PyTorch: `s += g**2; w -= lr * g / (sqrt(s) + eps)` (for PyTorch's
    `lr_decay`, pass the schedule `lambda c: lr / (1 + c * lr_decay)` as `lr`)."""
    build = functools.partial(_adagrad, initial_accumulator_value=initial_accumulator_value)
    hparams = _present(lr=lr, eps=eps, weight_decay=_optional(weight_decay))
    return inject_hyperparams(build)(**hparams)


def _lion(lr: Scalar, b1: Scalar, b2: Scalar, weight_decay: Scalar | None = None
          ) -> GradientTransformation:
    parts = [scale_by_lion(b1, b2)]
    if weight_decay is not None:
        parts.append(add_decayed_weights(weight_decay))
    return chain(*parts, scale(-lr))


def Lion(lr: ScalarOrSchedule = 1e-4, b1: ScalarOrSchedule = 0.9,  # noqa: N802
         b2: ScalarOrSchedule = 0.99, weight_decay: ScalarOrSchedule = 0.0
         ) -> GradientTransformation:
    """Lion (Chen et al. 2023): `w -= lr * (sign(b1*m + (1-b1)*g) + weight_decay*w)`,
    then `m = b2*m + (1-b2)*g`."""
    hparams = _present(lr=lr, b1=b1, b2=b2, weight_decay=_optional(weight_decay))
    return inject_hyperparams(_lion)(**hparams)
