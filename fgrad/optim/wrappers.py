"""Optax's clipping, wrappers and utilities with Optax's names, signatures and formulas.

`clip`, `clip_by_block_rms`, `clip_by_global_norm`, `zero_nans`, `apply_if_finite`,
`centralize`, `add_decayed_weights` (a number or a schedule), `add_noise`,
`keep_params_nonnegative`, `MultiSteps` (a class with `init`, `update`, `has_updated` and
`gradient_transformation`), Optax's `inject_hyperparams(factory, static_args=...)`, the
target-network updates `incremental_update` / `periodic_update`, and `stateless`. Branches that
Optax takes with `lax.cond` are selections with `where`, so every update traces under `jit`.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, NamedTuple

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.core.tree_util import tree_flatten, tree_leaves, tree_map
from fgrad.optim import base
from fgrad.optim.base import (EmptyState, GradientTransformation, InjectHyperparamsState,
                              ScalarOrSchedule, cast_like, require_params, step_count,
                              tensor_tree, transformation)
from fgrad.optim.transforms import global_norm
from fgrad.optim.transforms_more import (canonicalize_dtype, cast_tree_like, safe_increment,
                                         zeros_tree)

GradientTransformationExtraArgs = GradientTransformation
Params = Any
Updates = Any
OptState = Any


class ZeroNansState(NamedTuple):
    """Per leaf, whether the last updates held a NaN."""

    found_nan: Any


class ApplyIfFiniteState(NamedTuple):
    """Consecutive and total non-finite steps, whether the last was finite, inner state."""

    notfinite_count: Tensor
    last_finite: Tensor
    total_notfinite: Tensor
    inner_state: Any


class WeightDecaySchedule(NamedTuple):
    """Step count fed to a weight-decay schedule."""

    count: Tensor  # type: ignore[assignment]  # optax's name; shadows tuple.count


class AddNoiseState(NamedTuple):
    """Step count and PRNG key of `add_noise`."""

    count: Tensor  # type: ignore[assignment]  # optax's name; shadows tuple.count
    rng_key: Tensor


class MultiStepsState(NamedTuple):
    """Position in the k mini-steps, steps taken, inner state, accumulated gradients."""

    mini_step: Tensor
    gradient_step: Tensor
    inner_opt_state: Any
    acc_grads: Any
    skip_state: Any = ()


def _select(cond: Tensor, a: Any, b: Any) -> Any:
    """`a` where `cond` else `b`, leafwise, in `b`'s dtypes."""
    return tree_map(lambda x, y: cond.where(x, y).cast(y.dtype), a, b)


def init_empty_state(params: Any) -> EmptyState:
    """The state of a stateless transformation, whatever the params."""
    return EmptyState()


def stateless(f: Callable[[Any, Any], Any]) -> GradientTransformation:
    """A transformation without state from `f(updates, params) -> updates`."""
    def init(params: Any) -> EmptyState:
        return EmptyState()

    def update(grads: Any, state: Any, params: Any = None) -> tuple[Any, EmptyState]:
        return f(grads, params), EmptyState()
    return transformation(init, update)


def stateless_with_tree_map(f: Callable[[Tensor, Tensor | None], Tensor]
                            ) -> GradientTransformation:
    """`stateless` from a function of one update array and its parameter (or None)."""
    def apply(grads: Any, params: Any) -> Any:
        if params is None:
            return tree_map(lambda u: f(u, None), grads)
        return tree_map(f, grads, params)
    return stateless(apply)


def with_extra_args_support(tx: GradientTransformation) -> GradientTransformation:
    """`tx` whose update also takes (and ignores) keyword arguments such as `value=`."""
    def update(grads: Any, state: Any, params: Any = None, **extra_args: Any
               ) -> tuple[Any, Any]:
        return tx.update(grads, state, params)
    return GradientTransformation(tx.init, update)


def named_chain(*transforms: tuple[str, GradientTransformation]) -> GradientTransformation:
    """`chain` of `(name, transformation)` pairs whose state is a dict by name."""
    names = [name for name, _ in transforms]
    if len(names) != len(set(names)):
        raise ValueError(f"Named transformations must have unique names, but got {names}")

    def init(params: Any) -> dict[str, Any]:
        return {name: tx.init(params) for name, tx in transforms}

    def update(grads: Any, state: dict[str, Any], params: Any = None, **extra_args: Any
               ) -> tuple[Any, dict[str, Any]]:
        new_state = {}
        for name, tx in transforms:
            grads, new_state[name] = tx.update(grads, state[name], params)
        return grads, new_state
    return GradientTransformation(init, update)


class ApplyEvery(NamedTuple):
    """Call count modulo k and the gradients summed since the last emission."""

    count: Tensor  # type: ignore[assignment]  # optax's name; shadows tuple.count
    grad_acc: Any


def apply_every(k: int = 1) -> GradientTransformation:
    """Sum the updates over k calls and emit the sum every k-th call (zeros otherwise)."""
    def init(params: Any) -> ApplyEvery:
        return ApplyEvery(step_count(), zeros_tree(params))

    def update(grads: Any, state: ApplyEvery, params: Any = None) -> tuple[Any, ApplyEvery]:
        c = state.count % k
        keep, emit = c != 0, c == k - 1
        acc = tree_map(lambda g, a: cast_like(keep.where(a, 0) + g, a), grads, state.grad_acc)
        updates = tree_map(lambda a, g: emit.where(a, 0).cast(g.dtype), acc, grads)
        return updates, ApplyEvery(safe_increment(state.count) % k, acc)
    return transformation(init, update)


# --------------------------------------------------------------------------- clipping


def clip(max_delta: Any) -> GradientTransformation:
    """Clip each update element to `[-max_delta, max_delta]`."""
    return stateless(lambda grads, params: tree_map(
        lambda g: cast_like(g.clip(-max_delta, max_delta), g), grads))


def clip_by_block_rms(threshold: Any) -> GradientTransformation:
    """Divide each update by `max(1, rms(update) / threshold)`."""
    def one(u: Tensor) -> Tensor:
        return cast_like(u / (u.square().mean().sqrt() / threshold).maximum(1.0), u)
    return stateless(lambda grads, params: tree_map(one, grads))


def clip_by_global_norm(max_norm: Any) -> GradientTransformation:
    """Rescale the updates to global norm `max_norm` when theirs is larger:
    `g / norm * max_norm` (Optax's formula)."""
    if isinstance(max_norm, (int, float)) and max_norm <= 0:
        raise ValueError(f"clip_by_global_norm: max_norm must be > 0, got {max_norm}")

    def apply(grads: Any, params: Any) -> Any:
        norm = global_norm(grads)
        keep = norm < max_norm
        return tree_map(lambda t: keep.where(t, (t / cast_like(norm, t)) * max_norm)
                        .cast(t.dtype), grads)
    return stateless(apply)


def zero_nans() -> GradientTransformation:
    """Replace NaNs in the updates by 0; the state records, per leaf, whether one was."""
    def init(params: Any) -> ZeroNansState:
        return ZeroNansState(tree_map(lambda p: Tensor(False), params))

    def update(grads: Any, state: ZeroNansState, params: Any = None
               ) -> tuple[Any, ZeroNansState]:
        found = tree_map(lambda g: g.isnan().any(), grads)
        return tree_map(lambda g: g.isnan().where(0, g).cast(g.dtype), grads), \
            ZeroNansState(found)
    return transformation(init, update)


def _all_finite(tree: Any) -> Tensor:
    flags = [as_tensor(x).isfinite().all() for x in tree_leaves(tree)]
    out = Tensor(True)
    for f in flags:
        out = out.logical_and(f)
    return out


def apply_if_finite(inner: GradientTransformation, max_consecutive_errors: int
                    ) -> GradientTransformation:
    """Run `inner` only on finite updates; a non-finite step gives zero updates and keeps
    `inner`'s state, unless it is past `max_consecutive_errors` such steps in a row."""
    def init(params: Any) -> ApplyIfFiniteState:
        return ApplyIfFiniteState(step_count(), Tensor(True), step_count(), inner.init(params))

    def update(grads: Any, state: ApplyIfFiniteState, params: Any = None
               ) -> tuple[Any, ApplyIfFiniteState]:
        finite = _all_finite(grads)
        bad = finite.where(0, safe_increment(state.notfinite_count)).cast(dtypes.int32)
        new_updates, new_inner = inner.update(grads, state.inner_state, params)
        take = finite.logical_or(bad > max_consecutive_errors)
        updates = tree_map(lambda u: take.where(u, 0).cast(u.dtype), new_updates)
        inner_state = _select(take, new_inner, state.inner_state)
        total = finite.where(state.total_notfinite, safe_increment(state.total_notfinite))
        return updates, ApplyIfFiniteState(bad, finite, total.cast(dtypes.int32), inner_state)
    return transformation(init, update)


# --------------------------------------------------------------------------- adding


def centralize() -> GradientTransformation:
    """Subtract from each update of rank > 1 its mean over all axes but the first."""
    def one(g: Tensor) -> Tensor:
        return g - g.mean(tuple(range(1, g.ndim)), keepdims=True) if g.ndim > 1 else g
    return stateless(lambda grads, params: tree_map(one, grads))


def add_decayed_weights(weight_decay: ScalarOrSchedule = 0.0, mask: Any = None
                        ) -> GradientTransformation:
    """Add `weight_decay * param` to each update; `weight_decay` may be a schedule
    `count -> value`; `mask` (bools like the params, or params -> bools) picks the leaves."""
    if not callable(weight_decay):
        from fgrad.optim import transforms
        return transforms.add_decayed_weights(weight_decay, mask)
    schedule = weight_decay

    def init(params: Any) -> WeightDecaySchedule:
        return WeightDecaySchedule(step_count())

    def update(grads: Any, state: WeightDecaySchedule, params: Any = None
               ) -> tuple[Any, WeightDecaySchedule]:
        from fgrad.optim import transforms
        s = base.scalar(schedule(state.count), "weight_decay(count)")
        updates, _ = transforms.add_decayed_weights(s, mask).update(grads, EmptyState(), params)
        return updates, WeightDecaySchedule(safe_increment(state.count))
    return transformation(init, update)


def _as_key(key: Any) -> Tensor:
    from fgrad import random
    return random.PRNGKey(int(key)) if isinstance(key, (int, np.integer)) else as_tensor(key)


def add_noise(eta: Any, gamma: Any, key: Any = None, *, seed: int | None = None
              ) -> GradientTransformation:
    """Add Gaussian noise of variance `eta / (t + 1) ** gamma` to the updates (the noise is
    jax.random's, drawn from `key`, an int seed or a PRNG key)."""
    if seed is not None and key is not None:
        raise ValueError("Only one of seed or key can be specified.")
    key = 0 if key is None and seed is None else seed if key is None else key

    def init(params: Any) -> AddNoiseState:
        return AddNoiseState(step_count(), _as_key(key))

    def update(grads: Any, state: AddNoiseState, params: Any = None
               ) -> tuple[Any, AddNoiseState]:
        from fgrad import random
        count = safe_increment(state.count)
        std = (eta / count.cast(dtypes.float32) ** gamma).sqrt()
        pair = random.split(state.rng_key)
        leaves, treedef = tree_flatten(grads)
        keys = random.split(pair[1], len(leaves))
        noisy = [cast_like(g + std * random.normal(keys[i], g.shape, g.dtype), g)
                 for i, g in enumerate(leaves)]
        return treedef.unflatten(noisy), AddNoiseState(count, pair[0])
    return transformation(init, update)


def keep_params_nonnegative() -> GradientTransformation:
    """Change the updates so that no parameter goes below 0 (to 0 instead)."""
    def apply(grads: Any, params: Any) -> Any:
        params = require_params(params, "keep_params_nonnegative")
        return tree_map(lambda u, p: ((p + u) < 0).where(-p, u).cast(u.dtype), grads, params)
    return stateless(apply)


# --------------------------------------------------------------------------- accumulation


def skip_not_finite(updates: Any, gradient_step: Any, params: Any) -> tuple[Tensor, Any]:
    """`MultiSteps` skip rule: skip when an update holds a NaN or an infinity."""
    count = Tensor(0, dtype=dtypes.int32)
    for x in tree_leaves(updates):
        count = count + as_tensor(x).isfinite().logical_not().sum().cast(dtypes.int32)
    should_skip = count > 0
    return should_skip, {"should_skip": should_skip, "num_not_finite": count}


def skip_large_updates(updates: Any, gradient_step: Any, params: Any,
                       max_squared_norm: Any) -> tuple[Tensor, Any]:
    """`MultiSteps` skip rule: skip when the squared global norm reaches `max_squared_norm`."""
    norm_sq = global_norm(updates).square()
    should_skip = (norm_sq < max_squared_norm).logical_not()
    return should_skip, {"should_skip": should_skip, "norm_squared": norm_sq}


class MultiSteps:
    """Accumulate gradients over `every_k_schedule` calls (an int or `step -> k`) and step
    `opt` on their mean (`use_grad_mean=False`: their sum) once per k; the other calls return
    zero updates. `should_skip_update_fn(updates, gradient_step, params) -> (skip, info)`
    drops a step. `every_k` is fgrad's older name for `every_k_schedule`."""

    def __init__(self, opt: Any, every_k_schedule: Any = None, use_grad_mean: bool = True,
                 should_skip_update_fn: Callable[..., Any] | None = None,
                 accumulator_dtype: Any = dtypes.float32, *, every_k: int | None = None):
        k = every_k_schedule if every_k is None else every_k
        if k is None or (isinstance(k, int) and (isinstance(k, bool) or k < 1)):
            raise ValueError(f"MultiSteps: every_k_schedule must be a positive int or a "
                             f"schedule, got {k!r}")
        self._opt = opt
        self._every_k: Callable[[Any], Any] = (lambda step: k) if isinstance(k, int) else k
        self._use_grad_mean = use_grad_mean
        self._skip_fn = should_skip_update_fn
        self._acc_dtype = canonicalize_dtype(accumulator_dtype)

    @property
    def inner_opt(self) -> Any:
        """The wrapped transformation."""
        return self._opt

    def init(self, params: Any) -> MultiStepsState:
        """The initial state: zero counters and accumulators, `opt`'s initial state."""
        params = tensor_tree(params)
        skip_state: Any = ()
        if self._skip_fn is not None:
            _, skip_state = self._skip_fn(zeros_tree(params), step_count(), params)
        return MultiStepsState(step_count(), step_count(), self._opt.init(params),
                               zeros_tree(params, self._acc_dtype), skip_state)

    def update(self, updates: Any, state: MultiStepsState, params: Any = None,
               **extra_args: Any) -> tuple[Any, MultiStepsState]:
        """Accumulate `updates`; every k-th call, step `opt` on the accumulated gradients."""
        updates = tensor_tree(updates)
        params = None if params is None else tensor_tree(params)
        k = self._every_k(state.gradient_step)
        n = state.mini_step

        def acc(g: Tensor, a: Tensor) -> Tensor:
            if self._use_grad_mean:
                return a + (g - a) / (n + 1).cast(a.dtype)
            return g + a
        acc_grads = tree_map(acc, updates, state.acc_grads)
        final, new_inner = self._opt.update(cast_tree_like(acc_grads, updates),
                                            state.inner_opt_state, params)
        emit = n == (as_tensor(k) - 1)
        new_state = MultiStepsState(
            safe_increment(n) % k, emit.where(safe_increment(state.gradient_step),
                                              state.gradient_step).cast(dtypes.int32),
            _select(emit, new_inner, state.inner_opt_state),
            tree_map(lambda a: emit.where(0, a).cast(a.dtype), acc_grads), state.skip_state)
        final = tree_map(lambda u: emit.where(u, 0).cast(u.dtype), final)
        if self._skip_fn is None:
            return final, new_state
        skip, skip_state = self._skip_fn(updates, state.gradient_step, params)
        kept = _select(skip, state._replace(skip_state=skip_state),
                       new_state._replace(skip_state=skip_state))
        return tree_map(lambda u: skip.where(0, u).cast(u.dtype), final), kept

    def has_updated(self, state: MultiStepsState) -> Tensor:
        """Whether the last call stepped the inner optimizer."""
        return (state.mini_step == 0).logical_and(state.gradient_step > 0)

    def gradient_transformation(self) -> GradientTransformation:
        """`GradientTransformation(self.init, self.update)`."""
        return GradientTransformation(self.init, self.update)


# --------------------------------------------------------------------------- hyperparameters


def inject_hyperparams(inner_factory: Callable[..., Any], static_args: Any = (),
                       hyperparam_dtype: Any = None) -> Callable[..., GradientTransformation]:
    """Optax's `inject_hyperparams`: `inject_hyperparams(optax.adam)(learning_rate=sched)`.

    The factory's arguments (positional or keyword, defaults included) are sorted as Optax
    does: bools, `static_args` and non-numbers are fixed; callables are schedules of the step
    count; numbers are float32 Tensors in `state.hyperparams` (which also shows the current
    schedule values), changeable with `set_hyperparams` or by assigning into that dict.
    `hyperparam_dtype` is accepted for Optax's signature; hyperparameters are float32.
    """
    static = {static_args} if isinstance(static_args, str) else set(static_args)
    signature = inspect.signature(inner_factory)
    if not static.issubset(signature.parameters):
        raise ValueError("`static_args` must specify a subset of `inner_factory`'s "
                         f"parameters. Given `static_args`: {static}. `inner_factory` "
                         f"parameters: {set(signature.parameters)}")

    @functools.wraps(inner_factory)
    def wrapped(*args: Any, **kwargs: Any) -> GradientTransformation:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        fixed_args: list[Any] = []
        fixed: dict[str, Any] = {}
        values: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            kind = signature.parameters[name].kind
            if kind == inspect.Parameter.VAR_POSITIONAL:
                fixed_args.extend(value)
            elif kind == inspect.Parameter.VAR_KEYWORD:
                fixed.update(value)
            elif name in static or isinstance(value, bool):
                fixed[name] = value
            elif callable(value) or isinstance(value, (int, float, np.number, Tensor)) or (
                    isinstance(value, np.ndarray) and value.size == 1):
                values[name] = value
            else:
                fixed[name] = value
        build = functools.partial(inner_factory, *fixed_args, **fixed)
        inner = base.inject_hyperparams(build)(**values)
        scheduled = [k for k, v in values.items() if callable(v)]

        def shown(state: InjectHyperparamsState) -> InjectHyperparamsState:
            return state._replace(hyperparams={**state.hyperparams, **state.schedules})

        def init(params: Any) -> InjectHyperparamsState:
            return shown(inner.init(params))

        def update(grads: Any, state: InjectHyperparamsState, params: Any = None,
                   **extra_args: Any) -> tuple[Any, InjectHyperparamsState]:
            own = {k: v for k, v in state.hyperparams.items() if k not in scheduled}
            updates, new = inner.update(grads, state._replace(hyperparams=own), params)
            return updates, shown(new)
        return GradientTransformation(init, update)
    return wrapped


# --------------------------------------------------------------------------- target networks


def incremental_update(new_tensors: Any, old_tensors: Any, step_size: Any) -> Any:
    """Polyak averaging: `step_size * new + (1 - step_size) * old` leafwise."""
    return tree_map(lambda new, old: step_size * as_tensor(new) + (1.0 - step_size) * old,
                    tensor_tree(new_tensors), tensor_tree(old_tensors))


def periodic_update(new_tensors: Any, old_tensors: Any, steps: Any, update_period: Any
                    ) -> Any:
    """`new_tensors` when `steps % update_period == 0`, else `old_tensors`."""
    if isinstance(steps, (int, np.integer)) and isinstance(update_period, (int, np.integer)):
        return new_tensors if steps % update_period == 0 else old_tensors
    due = as_tensor(steps) % update_period == 0
    return tree_map(lambda new, old: due.where(new, old), tensor_tree(new_tensors),
                    tensor_tree(old_tensors))
