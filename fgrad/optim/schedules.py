"""Schedules: functions `count -> value` written with Tensor ops, with Optax's names,
signatures and formulas.

`count` is the step number (an int32 Tensor, traced under `jit`, or a Python int); the result
is a float32 0-d Tensor. Pass a schedule wherever an optimizer takes a hyperparameter.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.optim.base import Schedule


def _steps(count: Any) -> Tensor:
    """The step count as a float32 Tensor."""
    return as_tensor(count).cast(dtypes.float32)


def _const(value: float) -> Tensor:
    return Tensor(float(value), dtype=dtypes.float32)


def constant_schedule(value: float) -> Schedule:
    """Always `value`."""
    def schedule(count: Any) -> Tensor:
        return _const(value)
    return schedule


def polynomial_schedule(init_value: float, end_value: float, power: float,
                        transition_steps: int, transition_begin: int = 0) -> Schedule:
    """From `init_value` to `end_value` over `transition_steps` steps after `transition_begin`,
    along `(1 - t / transition_steps) ** power`; constant before and after."""
    if transition_steps <= 0:
        return constant_schedule(init_value)
    transition_begin = max(transition_begin, 0)

    def schedule(count: Any) -> Tensor:
        t = (_steps(count) - transition_begin).maximum(0.0).minimum(float(transition_steps))
        frac = 1.0 - t / transition_steps
        return (init_value - end_value) * frac ** power + end_value
    return schedule


def linear_schedule(init_value: float, end_value: float, transition_steps: int,
                    transition_begin: int = 0) -> Schedule:
    """Linear interpolation from `init_value` to `end_value` (a warmup when rising)."""
    return polynomial_schedule(init_value, end_value, 1.0, transition_steps, transition_begin)


def cosine_decay_schedule(init_value: float, decay_steps: int, alpha: float = 0.0,
                          exponent: float = 1.0) -> Schedule:
    """`init_value * ((1 - alpha) * c ** exponent + alpha)` with
    `c = (1 + cos(pi * min(count, decay_steps) / decay_steps)) / 2`."""
    if not decay_steps > 0:
        raise ValueError(f"cosine_decay_schedule: decay_steps must be > 0, got {decay_steps}")

    def schedule(count: Any) -> Tensor:
        t = _steps(count).minimum(float(decay_steps))
        cosine = 0.5 * (1 + (math.pi * t / float(decay_steps)).cos())
        return init_value * ((1 - alpha) * cosine ** exponent + alpha)
    return schedule


def join_schedules(schedules: Sequence[Schedule], boundaries: Sequence[int]) -> Schedule:
    """`schedules[i]` from `boundaries[i-1]` on, fed the count minus that boundary."""
    if len(boundaries) != len(schedules) - 1:
        raise ValueError(f"join_schedules: {len(schedules)} schedules need "
                         f"{len(schedules) - 1} boundaries, got {len(boundaries)}")

    def schedule(count: Any) -> Tensor:
        count = as_tensor(count)
        value = schedules[0](count)
        for fn, start in zip(schedules[1:], boundaries, strict=True):
            value = (count >= start).where(fn(count - start), value)
        return value
    return schedule


def warmup_cosine_decay_schedule(init_value: float, peak_value: float, warmup_steps: int,
                                 decay_steps: int, end_value: float = 0.0,
                                 exponent: float = 1.0) -> Schedule:
    """Linear warmup from `init_value` to `peak_value`, then cosine decay to `end_value`;
    `decay_steps` counts the warmup too."""
    alpha = 0.0 if peak_value == 0.0 else end_value / peak_value
    warmup = linear_schedule(init_value, peak_value, warmup_steps)
    cosine = cosine_decay_schedule(peak_value, max(decay_steps - warmup_steps, 1), alpha,
                                   exponent)
    return join_schedules([warmup, cosine], [warmup_steps])


def exponential_decay(init_value: float, transition_steps: int, decay_rate: float,
                      transition_begin: int = 0, staircase: bool = False,
                      end_value: float | None = None) -> Schedule:
    """`init_value * decay_rate ** ((count - transition_begin) / transition_steps)`
    (`staircase` floors the exponent); `end_value` bounds the value. As Optax's, a
    non-positive `transition_steps` or a zero `decay_rate` gives a constant schedule."""
    if transition_steps <= 0 or decay_rate == 0:
        return constant_schedule(init_value)
    transition_begin = max(transition_begin, 0)

    def schedule(count: Any) -> Tensor:
        shifted = _steps(count) - transition_begin
        p = shifted / transition_steps
        if staircase:
            p = p.floor()
        value = (shifted <= 0).where(_const(init_value), init_value * _const(decay_rate) ** p)
        if end_value is None:
            return value
        return value.maximum(end_value) if decay_rate < 1 else value.minimum(end_value)
    return schedule


def piecewise_constant_schedule(init_value: float,
                                boundaries_and_scales: dict[int, float] | None = None
                                ) -> Schedule:
    """`init_value` times every `scale` whose `boundary` the count has reached."""
    pairs = sorted((boundaries_and_scales or {}).items())

    def schedule(count: Any) -> Tensor:
        count = as_tensor(count)
        value = _const(init_value)
        for boundary, factor in pairs:
            value = (count >= boundary).where(value * factor, value)
        return value
    return schedule


def warmup_constant_schedule(init_value: float, peak_value: float, warmup_steps: int
                             ) -> Schedule:
    """Linear warmup from `init_value` to `peak_value`, then `peak_value`."""
    return linear_schedule(init_value, peak_value, warmup_steps)


def warmup_exponential_decay_schedule(init_value: float, peak_value: float,
                                      warmup_steps: int, transition_steps: int,
                                      decay_rate: float, transition_begin: int = 0,
                                      staircase: bool = False,
                                      end_value: float | None = None) -> Schedule:
    """Linear warmup to `peak_value`, then `exponential_decay` from it."""
    return join_schedules([linear_schedule(init_value, peak_value, warmup_steps),
                           exponential_decay(peak_value, transition_steps, decay_rate,
                                             transition_begin, staircase, end_value)],
                          [warmup_steps])


def sgdr_schedule(cosine_kwargs: Iterable[dict[str, Any]]) -> Schedule:
    """Warm restarts: `warmup_cosine_decay_schedule(**kwargs)` for each dict, one after
    the other (each lasting its `decay_steps`)."""
    schedules, boundaries, step = [], [], 0
    for kwargs in cosine_kwargs:
        schedules.append(warmup_cosine_decay_schedule(**kwargs))
        step += kwargs["decay_steps"]
        boundaries.append(step)
    return join_schedules(schedules, boundaries[:-1])


def piecewise_interpolate_schedule(interpolate_type: str, init_value: float,
                                   boundaries_and_scales: dict[int, float] | None = None
                                   ) -> Schedule:
    """Values `init_value * prod(scales so far)` at the boundaries, joined by linear or
    cosine (`interpolate_type`) interpolation; constant after the last boundary."""
    if interpolate_type not in ("linear", "cosine"):
        raise ValueError("`interpolate_type` must be either 'cosine' or 'linear'")
    pairs = sorted((boundaries_and_scales or {}).items())
    if any(factor < 0.0 for _, factor in pairs):
        raise ValueError("`piecewise_interpolate_schedule` expects non-negative scale factors")
    bounds = [0] + [b for b, _ in pairs]
    values = [float(np.float32(init_value))]  # float32 running products, as Optax's cumprod
    for _, factor in pairs:
        values.append(float(np.float32(values[-1]) * np.float32(factor)))

    def interpolate(start: float, end: float, pct: Tensor) -> Tensor:
        if interpolate_type == "linear":
            return (end - start) * pct + start
        return end + (start - end) / 2.0 * ((math.pi * pct).cos() + 1)

    def schedule(count: Any) -> Tensor:
        t = _steps(count)
        value = (t >= bounds[-1]).where(_const(values[-1]), 0.0)
        for i in range(len(pairs)):
            size = max(bounds[i + 1] - bounds[i], 1)
            inside = (t >= bounds[i]) & (t < bounds[i + 1])
            piece = interpolate(values[i], values[i + 1], (t - bounds[i]) / size)
            value = value + inside.where(piece, 0.0)
        return value
    return schedule


def linear_onecycle_schedule(transition_steps: int, peak_value: float, pct_start: float = 0.3,
                             pct_final: float = 0.85, div_factor: float = 25.0,
                             final_div_factor: float = 1e4) -> Schedule:
    """One cycle, linear: up from `peak_value / div_factor` to `peak_value` over the first
    `pct_start` of `transition_steps`, back by `pct_final`, then down to
    `peak_value / (div_factor * final_div_factor)` at `transition_steps`."""
    if transition_steps <= 0:
        raise ValueError("A linear onecycle schedule was set with a non-positive "
                         "`transition_steps`")
    return piecewise_interpolate_schedule(
        "linear", peak_value / div_factor,
        {int(pct_start * transition_steps): div_factor,
         int(pct_final * transition_steps): 1.0 / div_factor,
         transition_steps: 1.0 / final_div_factor})


def cosine_onecycle_schedule(transition_steps: int, peak_value: float, pct_start: float = 0.3,
                             div_factor: float = 25.0, final_div_factor: float = 1e4
                             ) -> Schedule:
    """One cycle, cosine: up from `peak_value / div_factor` to `peak_value`, then down to
    `peak_value / (div_factor * final_div_factor)` at `transition_steps`."""
    if transition_steps <= 0:
        raise ValueError("A cosine onecycle schedule was set with a non-positive "
                         "`transition_steps`")
    return piecewise_interpolate_schedule(
        "cosine", peak_value / div_factor,
        {int(pct_start * transition_steps): div_factor,
         int(transition_steps): 1.0 / (div_factor * final_div_factor)})
