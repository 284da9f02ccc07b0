"""More of Optax's scalings (RMS family, Lion, trust ratio, momentum, EMA, ...), with
Optax's names, signatures, defaults, states and formulas; see `transforms_more`.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.core.tree_util import tree_flatten, tree_map
from fgrad.optim.base import (EmptyState, GradientTransformation, ScalarOrSchedule, cast_like,
                              identity, require_params, scale_by_schedule, step_count,
                              transformation)
from fgrad.optim.transforms import ScaleByRssState, TraceState, scale
from fgrad.optim.transforms_more import (Scalar, bias_correction, canonicalize_dtype,
                                         cast_tree_like, full_tree, safe_increment,
                                         update_moment, zeros_tree)


class ScaleByAdaDeltaState(NamedTuple):
    """Running means of squared gradients (`e_g`) and squared updates (`e_x`)."""

    e_g: Any
    e_x: Any


class ScaleByRmsState(NamedTuple):
    """Running mean of squared gradients."""

    nu: Any


class ScaleByRmsWithCountState(NamedTuple):
    """Step count and running mean of squared gradients (`bias_correction=True`)."""

    count: Tensor  # type: ignore[assignment]  # optax's name; shadows tuple.count
    nu: Any


class ScaleByRStdDevState(NamedTuple):
    """Running means of gradients and squared gradients."""

    mu: Any
    nu: Any


class ScaleByRStdDevWithCountState(NamedTuple):
    """Step count and running means of gradients and squared gradients."""

    count: Tensor  # type: ignore[assignment]  # optax's name; shadows tuple.count
    mu: Any
    nu: Any


class ScaleByLionState(NamedTuple):
    """Step count and Lion's momentum."""

    count: Tensor  # type: ignore[assignment]  # optax's name; shadows tuple.count
    mu: Any


class EmaState(NamedTuple):
    """Step count and the exponential moving average."""

    count: Tensor  # type: ignore[assignment]  # optax's name; shadows tuple.count
    ema: Any


def _stateless(fn: Any) -> GradientTransformation:
    def init(params: Any) -> EmptyState:
        return EmptyState()

    def update(grads: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        return fn(grads, params), state
    return transformation(init, update)


# --------------------------------------------------------------------------- RMS family


def scale_by_adadelta(rho: Scalar = 0.9, eps: Scalar = 1e-6) -> GradientTransformation:
    """AdaDelta: `g * sqrt(E[dx**2] + eps) / sqrt(E[g**2] + eps)`."""
    def init(params: Any) -> ScaleByAdaDeltaState:
        return ScaleByAdaDeltaState(zeros_tree(params), zeros_tree(params))

    def update(grads: Any, state: ScaleByAdaDeltaState, params: Any = None
               ) -> tuple[Any, ScaleByAdaDeltaState]:
        e_g = update_moment(grads, state.e_g, rho, 2)
        updates = tree_map(lambda g, cur, prev: cast_like(
            ((prev + eps).sqrt() / (cur + eps).sqrt()) * g, g), grads, e_g, state.e_x)
        e_x = update_moment(updates, state.e_x, rho, 2)
        return updates, ScaleByAdaDeltaState(e_g, e_x)
    return transformation(init, update)


def _rms_scaling(v: Tensor, eps: Scalar, eps_in_sqrt: bool) -> Tensor:
    return (v + eps).rsqrt() if eps_in_sqrt else 1 / (v.sqrt() + eps)


def scale_by_rms(decay: Scalar = 0.9, eps: Scalar = 1e-8, initial_scale: Scalar = 0.0,
                 eps_in_sqrt: bool = True, bias_correction: bool = False
                 ) -> GradientTransformation:
    """Optax's RMSProp direction `g / sqrt(v + eps)` (`eps_in_sqrt=False`:
    `g / (sqrt(v) + eps)`), `v` a running mean of `g**2` started at `initial_scale`."""
    debias = bias_correction

    def init(params: Any) -> Any:
        nu = full_tree(params, initial_scale)
        return ScaleByRmsWithCountState(step_count(), nu) if debias else ScaleByRmsState(nu)

    def update(grads: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        nu = update_moment(grads, state.nu, decay, 2)
        count = safe_increment(state.count) if debias else None
        nu_hat = _debias(nu, decay, count)
        updates = tree_map(lambda g, v: cast_like(_rms_scaling(v, eps, eps_in_sqrt) * g, g),
                           grads, nu_hat)
        new = ScaleByRmsWithCountState(count, nu) if count is not None else ScaleByRmsState(nu)
        return updates, new
    return transformation(init, update)


def _debias(moment: Any, decay: Scalar, count: Tensor | None) -> Any:
    return moment if count is None else bias_correction(moment, decay, count)


def scale_by_stddev(decay: Scalar = 0.9, eps: Scalar = 1e-8, initial_scale: Scalar = 0.0,
                    eps_in_sqrt: bool = True, bias_correction: bool = False
                    ) -> GradientTransformation:
    """Centered RMSProp's direction `g / sqrt(v - m**2 + eps)` (Optax's)."""
    debias = bias_correction

    def init(params: Any) -> Any:
        mu, nu = zeros_tree(params), full_tree(params, initial_scale)
        return (ScaleByRStdDevWithCountState(step_count(), mu, nu) if debias
                else ScaleByRStdDevState(mu, nu))

    def update(grads: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        mu = update_moment(grads, state.mu, decay, 1)
        nu = update_moment(grads, state.nu, decay, 2)
        count = safe_increment(state.count) if debias else None
        mu_hat, nu_hat = _debias(mu, decay, count), _debias(nu, decay, count)
        updates = tree_map(lambda g, m, v: cast_like(
            _rms_scaling(v - m * m, eps, eps_in_sqrt) * g, g), grads, mu_hat, nu_hat)
        new = (ScaleByRStdDevWithCountState(count, mu, nu) if count is not None
               else ScaleByRStdDevState(mu, nu))
        return updates, new
    return transformation(init, update)


def scale_by_rss(initial_accumulator_value: Scalar = 0.1, eps: Scalar = 1e-7
                 ) -> GradientTransformation:
    """Optax's Adagrad direction `g / sqrt(s + eps)` (0 where `s` is 0), `s` the running
    sum of `g**2` started at `initial_accumulator_value`."""
    def init(params: Any) -> ScaleByRssState:
        return ScaleByRssState(full_tree(params, initial_accumulator_value))

    def update(grads: Any, state: ScaleByRssState, params: Any = None
               ) -> tuple[Any, ScaleByRssState]:
        sums = tree_map(lambda g, t: g * g + t, grads, state.sum_of_squares)
        updates = tree_map(lambda g, t: cast_like((t > 0).where((t + eps).rsqrt(), 0.0) * g, g),
                           grads, sums)
        return updates, ScaleByRssState(sums)
    return transformation(init, update)


# --------------------------------------------------------------------------- others


def scale_by_lion(b1: Scalar = 0.9, b2: Scalar = 0.99, mu_dtype: Any = None, *,
                  mode: str = "hard", smooth_beta: float = 1.0) -> GradientTransformation:
    """Lion's direction `sign((1 - b1) * g + b1 * m)` (`mode="smooth"`: tanh, `"refined"`:
    the value itself inside [-1, 1]), then `m = (1 - b2) * g + b2 * m`."""
    if mode not in ("hard", "smooth", "refined"):
        raise ValueError(f"Unknown lion mode: {mode}. It needs to be one of "
                         f"['hard', 'smooth', 'refined'].")
    mu_dt = canonicalize_dtype(mu_dtype)

    def comb(g: Tensor, m: Tensor) -> Tensor:
        x = (1.0 - b1) * g + b1 * m
        out = x.sign() if mode == "hard" else (smooth_beta * x).tanh() if mode == "smooth" \
            else (x.abs() < 1.0).where(x, x.sign())
        return cast_like(out, g)

    def init(params: Any) -> ScaleByLionState:
        return ScaleByLionState(step_count(), zeros_tree(params, mu_dt))

    def update(grads: Any, state: ScaleByLionState, params: Any = None
               ) -> tuple[Any, ScaleByLionState]:
        updates = tree_map(comb, grads, state.mu)
        mu = cast_tree_like(update_moment(grads, state.mu, b2, 1), state.mu)
        return updates, ScaleByLionState(safe_increment(state.count), mu)
    return transformation(init, update)


def scale_by_sign() -> GradientTransformation:
    """Replace each update by its sign."""
    return _stateless(lambda grads, params: tree_map(lambda g: g.sign(), grads))


def safe_norm(x: Any, min_norm: Scalar, ord: Any = None, axis: Any = None,  # noqa: A002
              keepdims: bool = False) -> Tensor:
    """`max(norm(x), min_norm)` whose gradient is finite at `x = 0` (Optax's)."""
    from fgrad.numpy import linalg
    x = as_tensor(x)
    small = linalg.norm(x, ord=ord, axis=axis, keepdims=True) <= min_norm
    masked = linalg.norm(small.where(x.ones_like(), x), ord=ord, axis=axis, keepdims=keepdims)
    norm = linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    return (norm <= min_norm).where(as_tensor(min_norm).cast(masked.dtype), masked)


def scale_by_trust_ratio(min_norm: Scalar = 0.0, trust_coefficient: Scalar = 1.0,
                         eps: Scalar = 0.0) -> GradientTransformation:
    """Multiply each update by `trust_coefficient * |param| / (|update| + eps)` (1 where
    either norm is 0), as LAMB and LARS do."""
    def one(u: Tensor, p: Tensor) -> Tensor:
        p_norm, u_norm = safe_norm(p, min_norm), safe_norm(u, min_norm)
        ratio = trust_coefficient * p_norm / (u_norm + eps)
        zero = (p_norm == 0.0).logical_or(u_norm == 0.0)
        return cast_like(u * zero.where(1.0, ratio), u)

    def apply(grads: Any, params: Any) -> Any:
        return tree_map(one, grads, require_params(params, "scale_by_trust_ratio"))
    return _stateless(apply)


def scale_by_param_block_norm(min_scale: Scalar = 1e-3) -> GradientTransformation:
    """Multiply each update by its parameter's norm (at least `min_scale`)."""
    def apply(grads: Any, params: Any) -> Any:
        params = require_params(params, "scale_by_param_block_norm")
        return tree_map(lambda u, p: cast_like(u * safe_norm(p, min_scale), u), grads, params)
    return _stateless(apply)


def safe_root_mean_squares(x: Any, min_rms: Scalar) -> Tensor:
    """`max(rms(x), min_rms)` with a finite gradient at `x = 0` (Optax's)."""
    x = as_tensor(x)
    rms = x.square().mean().sqrt()
    x = (rms <= min_rms).where(x.ones_like(), x)
    return (rms <= min_rms).where(as_tensor(min_rms).cast(rms.dtype), x.square().mean().sqrt())


def scale_by_param_block_rms(min_scale: Scalar = 1e-3) -> GradientTransformation:
    """Multiply each update by its parameter's root mean square (at least `min_scale`)."""
    def apply(grads: Any, params: Any) -> Any:
        params = require_params(params, "scale_by_param_block_rms")
        return tree_map(lambda u, p: cast_like(u * safe_root_mean_squares(p, min_scale), u),
                        grads, params)
    return _stateless(apply)


def normalize_by_update_norm(scale_factor: Scalar = 1.0, eps: Scalar = 1e-6
                             ) -> GradientTransformation:
    """Divide the updates by `(global_norm + eps) / scale_factor`."""
    def apply(grads: Any, params: Any) -> Any:
        from fgrad.optim.transforms import global_norm
        norm = (global_norm(grads) + eps) / scale_factor
        return tree_map(lambda g: cast_like(g / norm, g), grads)
    return _stateless(apply)


def scale_by_learning_rate(learning_rate: ScalarOrSchedule | None = None, *,
                           flip_sign: bool = True) -> GradientTransformation:
    """Multiply the updates by `-learning_rate` (`flip_sign=False`: `+learning_rate`); a
    schedule `count -> lr` is evaluated on a step count kept in the state."""
    if learning_rate is None:
        return identity()
    m = -1 if flip_sign else 1
    if callable(learning_rate):
        lr_fn = learning_rate
        return scale_by_schedule(lambda count: m * lr_fn(count))
    return scale(m * learning_rate)


def trace(decay: Scalar, nesterov: bool = False, accumulator_dtype: Any = None
          ) -> GradientTransformation:
    """Momentum `t = g + decay * t`; returns `t` (`nesterov`: `g + decay * t`)."""
    acc_dt = canonicalize_dtype(accumulator_dtype)

    def init(params: Any) -> TraceState:
        return TraceState(zeros_tree(params, acc_dt))

    def update(grads: Any, state: TraceState, params: Any = None) -> tuple[Any, TraceState]:
        new = tree_map(lambda g, t: g + decay * t, grads, state.trace)
        out = tree_map(lambda g, t: g + decay * t, grads, new) if nesterov else new
        return tree_map(cast_like, out, grads), TraceState(cast_tree_like(new, state.trace))
    return transformation(init, update)


def ema(decay: Scalar, debias: bool = True, accumulator_dtype: Any = None
        ) -> GradientTransformation:
    """Exponential moving average of the updates (bias-corrected when `debias`)."""
    acc_dt = canonicalize_dtype(accumulator_dtype)

    def init(params: Any) -> EmaState:
        return EmaState(step_count(), zeros_tree(params, acc_dt))

    def update(grads: Any, state: EmaState, params: Any = None) -> tuple[Any, EmaState]:
        new = update_moment(grads, state.ema, decay, 1)
        count = safe_increment(state.count)
        out = bias_correction(new, decay, count) if debias else new
        return tree_map(cast_like, out, grads), EmaState(count, cast_tree_like(new, state.ema))
    return transformation(init, update)


class ScaleByOptimisticGradientState(NamedTuple):
    """Whether the next step is the first, and the previous gradient."""

    is_initial_step: Tensor
    previous_gradient: Any


def scale_by_optimistic_gradient(alpha: Scalar = 1.0, beta: Scalar = 1.0
                                 ) -> GradientTransformation:
    """Optimistic gradient: `(alpha + beta) * g - beta * g_previous`."""
    def init(params: Any) -> ScaleByOptimisticGradientState:
        return ScaleByOptimisticGradientState(Tensor(True), zeros_tree(params))

    def update(grads: Any, state: ScaleByOptimisticGradientState, params: Any = None
               ) -> tuple[Any, ScaleByOptimisticGradientState]:
        def one(g: Tensor, prev: Tensor) -> Tensor:
            prev = state.is_initial_step.where(g, prev)
            return cast_like((alpha + beta) * g - beta * prev, g)
        return tree_map(one, grads, state.previous_gradient), \
            ScaleByOptimisticGradientState(Tensor(False), grads)
    return transformation(init, update)


class ScaleByRpropState(NamedTuple):
    """Per-element step sizes and the previous updates."""

    step_sizes: Any
    prev_updates: Any


def scale_by_rprop(learning_rate: Scalar, eta_minus: Scalar = 0.5, eta_plus: Scalar = 1.2,
                   min_step_size: Scalar = 1e-6, max_step_size: Scalar = 50.0
                   ) -> GradientTransformation:
    """Rprop: per-element steps that grow by `eta_plus` while the gradient keeps its sign and
    shrink by `eta_minus` when it flips (then no step is taken)."""
    def init(params: Any) -> ScaleByRpropState:
        return ScaleByRpropState(full_tree(params, learning_rate), zeros_tree(params))

    def update(grads: Any, state: ScaleByRpropState, params: Any = None
               ) -> tuple[Any, ScaleByRpropState]:
        sign = tree_map(lambda g, p: g * p, grads, state.prev_updates)
        steps = tree_map(lambda s, size: (s == 0).where(size, (size * (s > 0).where(
            eta_plus, eta_minus)).clip(min_step_size, max_step_size)), sign, state.step_sizes)
        prev = tree_map(lambda s, g, size: (s < 0).where(g.zeros_like(), size * g.sign()),
                        sign, grads, steps)
        # As Optax's code: the update is the step stored at the previous call.
        updates = tree_map(lambda s, p, g: cast_like((s < 0).where(p.zeros_like(), p), g),
                           sign, state.prev_updates, grads)
        return updates, ScaleByRpropState(steps, prev)
    return transformation(init, update)


class FactoredState(NamedTuple):
    """Adafactor's step count and per-leaf row / column (or full) second moments."""

    count: Tensor  # type: ignore[assignment]  # optax's name; shadows tuple.count
    v_row: Any
    v_col: Any
    v: Any


def _decay_rate_pow(i: Any, exponent: Scalar = 0.8) -> Tensor:
    """Adafactor's decay `1 - (i + 1) ** -exponent`."""
    t = (as_tensor(i) + 1).cast(dtypes.float32)
    return 1.0 - t ** (-exponent)


def _factored_dims(shape: tuple[int, ...], factored: bool, min_dim: int
                   ) -> tuple[int, int] | None:
    if not factored or len(shape) < 2:
        return None
    order = np.argsort(shape)
    if shape[order[-2]] < min_dim:
        return None
    return int(order[-2]), int(order[-1])


def scale_by_factored_rms(factored: bool = True, decay_rate: Scalar = 0.8,
                          step_offset: Any = 0, min_dim_size_to_factor: int = 128,
                          epsilon: Scalar = 1e-30,
                          decay_rate_fn: Callable[[Any, Any], Any] = _decay_rate_pow
                          ) -> GradientTransformation:
    """Adafactor's direction: `g / sqrt(v)` with `v` the running mean of `g**2 + epsilon`,
    kept as row and column means for leaves whose two largest dimensions are at least
    `min_dim_size_to_factor`."""
    def dims_of(p: Tensor) -> tuple[int, int] | None:
        return _factored_dims(p.shape, factored, min_dim_size_to_factor)

    def init(params: Any) -> FactoredState:
        leaves, treedef = tree_flatten(params)
        rows, cols, fulls = [], [], []
        for p in leaves:
            dims, none = dims_of(p), Tensor.zeros(1, dtype=p.dtype)
            rows.append(none if dims is None else p.sum(dims[1]).zeros_like())
            cols.append(none if dims is None else p.sum(dims[0]).zeros_like())
            fulls.append(p.zeros_like() if dims is None else none)
        return FactoredState(step_count(), *(treedef.unflatten(x) for x in (rows, cols, fulls)))

    def update(grads: Any, state: FactoredState, params: Any = None
               ) -> tuple[Any, FactoredState]:
        params = require_params(params, "scale_by_factored_rms")
        rate = decay_rate_fn(state.count - step_offset, decay_rate)
        leaves, treedef = tree_flatten(grads)
        old = [treedef.flatten_up_to(t) for t in (state.v_row, state.v_col, state.v, params)]
        out: list[list[Tensor]] = [[], [], [], []]
        for g, v_row, v_col, v, p in zip(leaves, *old):
            dims, none = dims_of(p), Tensor.zeros(1, dtype=p.dtype)
            g_sqr = g * g + epsilon
            if dims is None:
                new_v = (rate * v + (1.0 - rate) * g_sqr).cast(p.dtype)
                new = [g * new_v ** -0.5, none, none, new_v]
            else:
                d1, d0 = dims
                row = (rate * v_row + (1.0 - rate) * g_sqr.mean(d0)).cast(p.dtype)
                col = (rate * v_col + (1.0 - rate) * g_sqr.mean(d1)).cast(p.dtype)
                row_mean = row.mean(d1 - 1 if d1 > d0 else d1, keepdims=True)
                row_factor = ((row / row_mean) ** -0.5).unsqueeze(d0)
                new = [g * row_factor * (col ** -0.5).unsqueeze(d1), row, col, none]
            new[0] = cast_like(new[0], g)
            for acc, x in zip(out, new):
                acc.append(x)
        updates, rows, cols, fulls = (treedef.unflatten(x) for x in out)
        return updates, FactoredState(safe_increment(state.count), rows, cols, fulls)
    return transformation(init, update)


def _unitwise_norm(x: Tensor, axis: Any = None) -> Tensor:
    """Norms of `x`'s units (rows of linear layers, output channels of HWIO convolutions)."""
    sq = x * x
    if axis is not None:
        norm2 = sq.sum(axis, keepdims=True)
    elif x.squeeze().ndim <= 1:
        norm2 = sq.sum(keepdims=True)
    elif x.ndim in (2, 3):
        norm2 = sq.sum(0, keepdims=True)
    elif x.ndim in (4, 5):
        norm2 = sq.sum(tuple(range(x.ndim - 1)), keepdims=True)
    else:
        raise ValueError(f"Expected parameter with shape in {{1, 2, 3, 4, 5}}, got {x.shape}. "
                         f"Use axis parameter to specify reduction axes for other shapes.")
    return norm2.sqrt().expand(*x.shape)


def adaptive_grad_clip(clipping: Scalar, eps: Scalar = 1e-3, axis: Any = None
                       ) -> GradientTransformation:
    """Adaptive gradient clipping (Brock et al. 2021): clip each unit's gradient norm to
    `clipping * max(|param unit|, eps)`."""
    def one(g: Tensor, p: Tensor) -> Tensor:
        g_norm = _unitwise_norm(g, axis)
        max_norm = clipping * _unitwise_norm(p, axis).maximum(eps)
        clipped = g * (max_norm / g_norm.maximum(1e-6))
        return cast_like((g_norm < max_norm).where(g, clipped), g)

    def apply(grads: Any, params: Any) -> Any:
        return tree_map(one, grads, require_params(params, "adaptive_grad_clip"))
    return _stateless(apply)
