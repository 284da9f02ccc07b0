"""Optax's Adam-family scalings with Optax's names, signatures, defaults, states, formulas.

`scale_by_adam`, `scale_by_amsgrad`, `scale_by_radam`, ... (and, in `scalings`, the RMS
family, Lion, momentum, ...) compute what `optax.<name>` computes, operation for operation,
so that `import fgrad.optim as optax` gives Optax's numbers. One deliberate difference: the
bias correction `1 - b**t` is formed as `-expm1(t * log b)` (`transforms.one_minus_power`,
as fgrad's Adam does) rather than from a float32 `b**t`; with b = 0.999 Optax's float32 value
is off by ~1e-5 relative in the first steps, so updates differ by that much (parameters by
~lr * 1e-5 per step). RAdam's rectification length follows Optax's float32 formula, so its
switch at `threshold` agrees.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from fgrad.core.dtypes import DType, dtypes, to_dtype
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.core.tree_util import tree_map
from fgrad.optim.base import (EmptyState, GradientTransformation, cast_like, require_params,
                              step_count, transformation)
from fgrad.optim.transforms import ScaleByAdamState, one_minus_power

Scalar = float | Tensor
INT32_MAX = 2**31 - 1


class ScaleByAmsgradState(NamedTuple):
    """Step count, moments and the running maximum of the second moment."""

    count: Tensor  # type: ignore[assignment]  # optax's name; shadows tuple.count
    mu: Any
    nu: Any
    nu_max: Any


class ScaleByBeliefState(NamedTuple):
    """Step count, first moment and the second moment of the prediction error."""

    count: Tensor  # type: ignore[assignment]  # optax's name; shadows tuple.count
    mu: Any
    nu: Any


class ScaleByNovogradState(NamedTuple):
    """Step count, first moment and one second-moment scalar per leaf."""

    count: Tensor  # type: ignore[assignment]  # optax's name; shadows tuple.count
    mu: Any
    nu: Any


# --------------------------------------------------------------------------- helpers


def safe_increment(count: Any) -> Tensor:
    """`count + 1`, staying at int32's maximum instead of wrapping (Optax's)."""
    count = as_tensor(count)
    return (count < INT32_MAX).where(count + 1, count)


def canonicalize_dtype(dtype: Any) -> DType | None:
    """`dtype` as an fgrad DType (None stays None: keep each leaf's dtype)."""
    return None if dtype is None else to_dtype(dtype)


def zeros_tree(tree: Any, dtype: DType | None = None) -> Any:
    """Zeros shaped like `tree`'s leaves, in `dtype` (default: each leaf's)."""
    return tree_map(lambda x: x.zeros_like(dtype), tree)


def full_tree(tree: Any, value: Any) -> Any:
    """Leaves of `tree` filled with `value`, each in its leaf's dtype."""
    return tree_map(lambda x: x.zeros_like() + value, tree)


def cast_tree(tree: Any, dtype: DType | None) -> Any:
    """`tree` with every leaf in `dtype` (unchanged when `dtype` is None)."""
    if dtype is None:
        return tree
    return tree_map(lambda x: x if x.dtype == dtype else x.cast(dtype), tree)


def cast_tree_like(tree: Any, like: Any) -> Any:
    """`tree` with each leaf in the dtype of the matching leaf of `like`."""
    return tree_map(cast_like, tree, like)


def _power(g: Tensor, order: int) -> Tensor:
    return g if order == 1 else g * g if order == 2 else g ** order


def update_moment(updates: Any, moments: Any, decay: Scalar, order: int) -> Any:
    """`(1 - decay) * g**order + decay * moment` leafwise (Optax's `update_moment`)."""
    return tree_map(lambda g, t: (1 - decay) * _power(g, order) + decay * t, updates, moments)


def update_infinity_moment(updates: Any, moments: Any, decay: Scalar, eps: Scalar) -> Any:
    """`max(|g| + eps, decay * moment)` leafwise (Adamax's infinity norm)."""
    return tree_map(lambda g, t: (g.abs() + eps).maximum(decay * t), updates, moments)


def bias_correction(moment: Any, decay: Scalar, count: Tensor) -> Any:
    """`moment / (1 - decay ** count)` leafwise; `count` is the int32 step (>= 1)."""
    factor = one_minus_power(decay, count.cast(dtypes.float32))
    return tree_map(lambda t: t / cast_like(factor, t), moment)


def power_f32(base: Scalar, count: Tensor) -> Tensor:
    """float32 `base ** count` rounded once, as XLA's float32 pow gives it."""
    b = base.cast(dtypes.float64) if isinstance(base, Tensor) else \
        Tensor(float(np.float32(base)), dtype=dtypes.float64)
    return (b ** count.cast(dtypes.float64)).cast(dtypes.float32)


def _nesterov_mu(mu: Any, grads: Any, b1: Scalar, count: Tensor) -> Any:
    """Nesterov's first moment: `b1 * m_hat(t+1) + (1 - b1) * g_hat(t)`."""
    return tree_map(lambda m, g: b1 * m + (1 - b1) * g,
                    bias_correction(mu, b1, safe_increment(count)),
                    bias_correction(grads, b1, count))


def _stateless(fn: Any) -> GradientTransformation:
    def init(params: Any) -> EmptyState:
        return EmptyState()

    def update(grads: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        return fn(grads, params), state
    return transformation(init, update)


# --------------------------------------------------------------------------- Adam family


def scale_by_adam(b1: Scalar = 0.9, b2: Scalar = 0.999, eps: Scalar = 1e-8,
                  eps_root: Scalar = 0.0, mu_dtype: Any = None, *, nesterov: bool = False
                  ) -> GradientTransformation:
    """Adam's direction `m_hat / (sqrt(v_hat + eps_root) + eps)` (Optax's `scale_by_adam`);
    `nesterov` uses the Nesterov first moment (NAdam); `mu_dtype` is the dtype of `mu`."""
    mu_dt = canonicalize_dtype(mu_dtype)

    def init(params: Any) -> ScaleByAdamState:
        return ScaleByAdamState(step_count(), zeros_tree(params, mu_dt), zeros_tree(params))

    def update(grads: Any, state: ScaleByAdamState, params: Any = None
               ) -> tuple[Any, ScaleByAdamState]:
        mu = update_moment(grads, state.mu, b1, 1)
        nu = update_moment(grads, state.nu, b2, 2)
        count = safe_increment(state.count)
        mu_hat = _nesterov_mu(mu, grads, b1, count) if nesterov else \
            bias_correction(mu, b1, count)
        nu_hat = bias_correction(nu, b2, count)
        updates = tree_map(lambda g, m, v: cast_like(m / ((v + eps_root).sqrt() + eps), g),
                           grads, mu_hat, nu_hat)
        mu = cast_tree_like(mu, state.mu)
        return updates, ScaleByAdamState(count, mu, cast_tree_like(nu, state.nu))
    return transformation(init, update)


def scale_by_amsgrad(b1: Scalar = 0.9, b2: Scalar = 0.999, eps: Scalar = 1e-8,
                     eps_root: Scalar = 0.0, mu_dtype: Any = None,
                     bias_correction_mu: bool = True, bias_correction_nu: bool = True
                     ) -> GradientTransformation:
    """AMSGrad: Adam with the running maximum of `v_hat` in the denominator."""
    mu_dt = canonicalize_dtype(mu_dtype)

    def init(params: Any) -> ScaleByAmsgradState:
        return ScaleByAmsgradState(step_count(), zeros_tree(params, mu_dt), zeros_tree(params),
                                   zeros_tree(params))

    def update(grads: Any, state: ScaleByAmsgradState, params: Any = None
               ) -> tuple[Any, ScaleByAmsgradState]:
        mu = update_moment(grads, state.mu, b1, 1)
        nu = update_moment(grads, state.nu, b2, 2)
        count = safe_increment(state.count)
        mu_hat = bias_correction(mu, b1, count) if bias_correction_mu else mu
        nu_eff = bias_correction(nu, b2, count) if bias_correction_nu else nu
        nu_max = tree_map(lambda a, b: a.maximum(b), state.nu_max, nu_eff)
        updates = tree_map(lambda g, m, v: cast_like(m / ((v + eps_root).sqrt() + eps), g),
                           grads, mu_hat, nu_max)
        return updates, ScaleByAmsgradState(count, cast_tree_like(mu, state.mu), nu, nu_max)
    return transformation(init, update)


def scale_by_adamax(b1: Scalar = 0.9, b2: Scalar = 0.999, eps: Scalar = 1e-8
                    ) -> GradientTransformation:
    """Adamax: `m_hat / max(|g| + eps, b2 * u)` with `u` the running infinity norm."""
    def init(params: Any) -> ScaleByAdamState:
        return ScaleByAdamState(step_count(), zeros_tree(params), zeros_tree(params))

    def update(grads: Any, state: ScaleByAdamState, params: Any = None
               ) -> tuple[Any, ScaleByAdamState]:
        count = safe_increment(state.count)
        mu = update_moment(grads, state.mu, b1, 1)
        nu = update_infinity_moment(grads, state.nu, b2, eps)
        mu_hat = bias_correction(mu, b1, count)
        updates = tree_map(lambda g, m, v: cast_like(m / v, g), grads, mu_hat, nu)
        return updates, ScaleByAdamState(count, mu, nu)
    return transformation(init, update)


def scale_by_belief(b1: Scalar = 0.9, b2: Scalar = 0.999, eps: Scalar = 1e-16,
                    eps_root: Scalar = 1e-16, *, nesterov: bool = False
                    ) -> GradientTransformation:
    """AdaBelief: Adam whose second moment tracks `(g - m)**2`, the gradient's surprise."""
    def init(params: Any) -> ScaleByBeliefState:
        return ScaleByBeliefState(step_count(), zeros_tree(params), zeros_tree(params))

    def update(grads: Any, state: ScaleByBeliefState, params: Any = None
               ) -> tuple[Any, ScaleByBeliefState]:
        mu = update_moment(grads, state.mu, b1, 1)
        error = tree_map(lambda g, m: g - m, grads, mu)
        nu = update_moment(error, state.nu, b2, 2)
        nu = tree_map(lambda v: v + eps_root, nu)
        count = safe_increment(state.count)
        mu_hat = _nesterov_mu(mu, grads, b1, count) if nesterov else \
            bias_correction(mu, b1, count)
        nu_hat = bias_correction(nu, b2, count)
        updates = tree_map(lambda g, m, v: cast_like(m / (v.sqrt() + eps), g),
                           grads, mu_hat, nu_hat)
        return updates, ScaleByBeliefState(count, mu, nu)
    return transformation(init, update)


def scale_by_radam(b1: Scalar = 0.9, b2: Scalar = 0.999, eps: Scalar = 1e-8,
                   eps_root: Scalar = 0.0, threshold: Scalar = 5.0, *, nesterov: bool = False
                   ) -> GradientTransformation:
    """Rectified Adam: the bias-corrected momentum while the variance estimate is too
    uncertain (rectification length below `threshold`), rectified Adam after."""
    ro_inf = 2.0 / (1.0 - b2) - 1.0

    def init(params: Any) -> ScaleByAdamState:
        return ScaleByAdamState(step_count(), zeros_tree(params), zeros_tree(params))

    def update(grads: Any, state: ScaleByAdamState, params: Any = None
               ) -> tuple[Any, ScaleByAdamState]:
        mu = update_moment(grads, state.mu, b1, 1)
        nu = update_moment(grads, state.nu, b2, 2)
        count = safe_increment(state.count)
        b2t = power_f32(b2, count)
        ro = ro_inf - (2 * count).cast(dtypes.float32) * b2t / (1 - b2t)
        mu_hat = _nesterov_mu(mu, grads, b1, count) if nesterov else \
            bias_correction(mu, b1, count)
        nu_hat = bias_correction(nu, b2, count)
        r = ((ro - 4.0) * (ro - 2.0) * ro_inf / ((ro_inf - 4.0) * (ro_inf - 2.0) * ro)).sqrt()
        rectified = ro >= threshold

        def step(g: Tensor, m: Tensor, v: Tensor) -> Tensor:
            adam = cast_like(r, m) * m / ((v + eps_root).sqrt() + eps)
            return cast_like(rectified.where(adam, m), g)
        return tree_map(step, grads, mu_hat, nu_hat), ScaleByAdamState(count, mu, nu)
    return transformation(init, update)


def scale_by_yogi(b1: Scalar = 0.9, b2: Scalar = 0.999, eps: Scalar = 1e-3,
                  eps_root: Scalar = 0.0, initial_accumulator_value: Scalar = 1e-6
                  ) -> GradientTransformation:
    """Yogi: Adam whose second moment moves additively, `v -= (1-b2) sign(v - g**2) g**2`."""
    def init(params: Any) -> ScaleByAdamState:
        return ScaleByAdamState(step_count(), full_tree(params, initial_accumulator_value),
                                full_tree(params, initial_accumulator_value))

    def update(grads: Any, state: ScaleByAdamState, params: Any = None
               ) -> tuple[Any, ScaleByAdamState]:
        mu = update_moment(grads, state.mu, b1, 1)
        nu = tree_map(lambda g, v: v - (1 - b2) * (v - g * g).sign() * (g * g), grads, state.nu)
        count = safe_increment(state.count)
        mu_hat = bias_correction(mu, b1, count)
        nu_hat = bias_correction(nu, b2, count)
        updates = tree_map(lambda g, m, v: cast_like(m / ((v + eps_root).sqrt() + eps), g),
                           grads, mu_hat, nu_hat)
        return updates, ScaleByAdamState(count, mu, nu)
    return transformation(init, update)


def scale_by_novograd(b1: Scalar = 0.9, b2: Scalar = 0.25, eps: Scalar = 1e-8,
                      eps_root: Scalar = 0.0, weight_decay: Scalar = 0.0, mu_dtype: Any = None
                      ) -> GradientTransformation:
    """NovoGrad: a second moment per layer (the squared norm of its gradient) and momentum
    over the normalized gradient plus `weight_decay * param`."""
    mu_dt = canonicalize_dtype(mu_dtype)
    decays = isinstance(weight_decay, Tensor) or weight_decay != 0

    def init(params: Any) -> ScaleByNovogradState:
        return ScaleByNovogradState(step_count(), zeros_tree(params, mu_dt),
                                    tree_map(lambda p: Tensor(0.0, dtype=p.dtype), params))

    def update(grads: Any, state: ScaleByNovogradState, params: Any = None
               ) -> tuple[Any, ScaleByNovogradState]:
        if decays:
            params = require_params(params, "scale_by_novograd with weight_decay")
        count = safe_increment(state.count)
        first = count == 1

        def new_nu(g: Tensor, n: Tensor) -> Tensor:
            norm2 = cast_like(g.square().sum().sqrt() ** 2, n)
            return first.where(norm2, (1 - b2) * norm2 + b2 * n)
        nu = tree_map(new_nu, grads, state.nu)

        def new_mu(g: Tensor, m: Tensor, n: Tensor, p: Tensor | None = None) -> Tensor:
            step = g / ((n + eps_root).sqrt() + eps)
            if p is not None:
                step = step + weight_decay * p
            return cast_like(first.where(step, b1 * m + step), m)
        mu = tree_map(new_mu, grads, state.mu, nu, *([params] if decays else []))
        updates = tree_map(cast_like, mu, grads)
        return updates, ScaleByNovogradState(count, mu, nu)
    return transformation(init, update)


class ScaleByAdanState(NamedTuple):
    """Adan's moments `m`, `v`, `n`, the previous gradient `g` and the step count `t`."""

    m: Any
    v: Any
    n: Any
    g: Any
    t: Tensor


def scale_by_adan(b1: Scalar = 0.98, b2: Scalar = 0.92, b3: Scalar = 0.99, eps: Scalar = 1e-8,
                  eps_root: Scalar = 0.0) -> GradientTransformation:
    """Adan (Xie et al. 2022): Nesterov-style momentum on the gradient and its difference."""
    def init(params: Any) -> ScaleByAdanState:
        z = zeros_tree
        return ScaleByAdanState(z(params), z(params), z(params), z(params), step_count())

    def update(grads: Any, state: ScaleByAdanState, params: Any = None
               ) -> tuple[Any, ScaleByAdanState]:
        first = state.t == 0
        diff = tree_map(lambda g, p: first.where(g.zeros_like(), g - p), grads, state.g)
        m = update_moment(grads, state.m, b1, 1)
        v = update_moment(diff, state.v, b2, 1)
        sq = tree_map(lambda g, d: g + (1 - b2) * d, grads, diff)
        n = update_moment(sq, state.n, b3, 2)
        t = safe_increment(state.t)
        m_hat, v_hat = bias_correction(m, b1, t), bias_correction(v, b2, t)
        n_hat = bias_correction(n, b3, t)
        updates = tree_map(lambda g, a, b, c: cast_like(
            (a + (1 - b2) * b) / ((c + eps_root).sqrt() + eps), g), grads, m_hat, v_hat, n_hat)
        return updates, ScaleByAdanState(m, v, n, grads, t)
    return transformation(init, update)
