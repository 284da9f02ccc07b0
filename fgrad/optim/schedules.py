"""Schedules: functions `count -> value` written with Tensor ops.

`count` is the step number (an int32 Tensor, traced under `jit`, or a Python int); the result
is a float32 0-d Tensor. Pass a schedule wherever an optimizer takes a hyperparameter.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

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
    if decay_steps <= 0:
        raise ValueError(f"cosine_decay_schedule: decay_steps must be > 0, got {decay_steps}")

    def schedule(count: Any) -> Tensor:
        t = _steps(count).minimum(float(decay_steps))
        cosine = (0.5 * (1.0 + (t * (math.pi / decay_steps)).cos())).maximum(0.0)
        return init_value * ((1.0 - alpha) * cosine ** exponent + alpha)
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
    def cosine(count: Any) -> Tensor:
        span = max(decay_steps - warmup_steps, 1)
        t = _steps(count).minimum(float(span))
        c = (0.5 * (1.0 + (t * (math.pi / span)).cos())).maximum(0.0)
        return end_value + (peak_value - end_value) * c ** exponent
    warmup = linear_schedule(init_value, peak_value, warmup_steps)
    return join_schedules([warmup, cosine], [warmup_steps])


def exponential_decay(init_value: float, transition_steps: int, decay_rate: float,
                      transition_begin: int = 0, staircase: bool = False,
                      end_value: float | None = None) -> Schedule:
    """`init_value * decay_rate ** ((count - transition_begin) / transition_steps)`
    (`staircase` floors the exponent); `end_value` bounds the value."""
    if transition_steps <= 0:
        raise ValueError(f"exponential_decay: transition_steps must be > 0, got "
                         f"{transition_steps}")

    def schedule(count: Any) -> Tensor:
        p = (_steps(count) - transition_begin).maximum(0.0) / transition_steps
        if staircase:
            p = p.floor()
        value = init_value * _const(decay_rate) ** p
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
