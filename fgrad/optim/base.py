"""Optimizer building blocks: `GradientTransformation`, `chain`, `apply_updates`, hyperparameters.

An optimizer is a `GradientTransformation(init, update)` of two pure functions:
`state = opt.init(params)` and `updates, state = opt.update(grads, state, params)`;
`apply_updates(params, updates)` returns the new params. States are pytrees whose leaves are
Tensors only, so they save with `fgrad.nn.state` and pass through `jit` unchanged.
Hyperparameters live in the state as float32 0-d Tensors (see `inject_hyperparams`).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.core import tree_util
from fgrad.core.tree_util import tree_map

Schedule = Callable[[Tensor], Tensor]
ScalarOrSchedule = float | Tensor | Schedule


class GradientTransformation(NamedTuple):
    """A pair of pure functions: `init(params) -> state` and
    `update(grads, state, params=None) -> (updates, new_state)`."""

    init: Callable[[Any], Any]
    update: Callable[..., tuple[Any, Any]]


def tensor_tree(tree: Any) -> Any:
    """`tree` with every leaf a Tensor: NumPy arrays and Python numbers are converted, as
    Optax's functions take any array-like (`tree` itself when every leaf already is one)."""
    leaves, treedef = tree_util.tree_flatten(tree)
    if all(isinstance(x, Tensor) for x in leaves):
        return tree
    return treedef.unflatten(as_tensor(x) for x in leaves)


def transformation(init: Callable[[Any], Any], update: Callable[..., tuple[Any, Any]]
                   ) -> GradientTransformation:
    """`GradientTransformation(init, update)` whose functions also take params and grads
    with NumPy leaves (converted by `tensor_tree` before `init` / `update` see them)."""
    def init_any(params: Any) -> Any:
        return init(tensor_tree(params))

    def update_any(grads: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        return update(tensor_tree(grads), state, None if params is None else tensor_tree(params))
    return GradientTransformation(init_any, update_any)


class EmptyState(NamedTuple):
    """State of a stateless transformation."""


class ScaleByScheduleState(NamedTuple):
    """Step count (int32) fed to a schedule."""

    count: Tensor  # type: ignore[assignment]  # optax's name; shadows tuple.count


class InjectHyperparamsState(NamedTuple):
    """State of `inject_hyperparams`: settable values, current schedule values, inner state."""

    count: Tensor  # type: ignore[assignment]  # optax's name; shadows tuple.count
    hyperparams: dict[str, Tensor]
    schedules: dict[str, Tensor]
    inner_state: Any


# --------------------------------------------------------------------------- helpers


def scalar(value: Any, name: str) -> Tensor:
    """`value` (a Python number or a one-element Tensor) as a float32 0-d Tensor."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Tensor)):
        raise TypeError(f"hyperparameter {name!r} must be a number or a scalar Tensor, got "
                        f"{type(value).__name__}")
    t = as_tensor(value)
    if t.shape != ():
        if t.numel() != 1:
            raise ValueError(f"hyperparameter {name!r} must be a scalar, got a Tensor of shape "
                             f"{t.shape}")
        t = t.reshape(())
    return t if t.dtype == dtypes.float32 else t.cast(dtypes.float32)


def cast_like(x: Tensor, ref: Tensor) -> Tensor:
    """`x` in `ref`'s dtype (a no-op when they already agree)."""
    return x if x.dtype == ref.dtype else x.cast(ref.dtype)


def zeros_like_tree(tree: Any) -> Any:
    """A pytree of zeros shaped like `tree`."""
    return tree_map(lambda x: x.zeros_like(), tree)


def step_count(value: int = 0) -> Tensor:
    """An int32 0-d step counter."""
    return Tensor(value, dtype=dtypes.int32)


def require_params(params: Any, who: str) -> Any:
    """`params`, or a clear error when an update rule that needs them got None."""
    if params is None:
        raise ValueError(f"{who} needs the current parameters: call "
                         f"opt.update(grads, state, params)")
    return params


# --------------------------------------------------------------------------- composition


def identity() -> GradientTransformation:
    """Leaves the updates unchanged."""
    def init(params: Any) -> EmptyState:
        return EmptyState()

    def update(grads: Any, state: EmptyState, params: Any = None) -> tuple[Any, EmptyState]:
        return grads, state
    return transformation(init, update)


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Apply `transforms` in order; the state is the tuple of their states."""
    def init(params: Any) -> tuple:
        return tuple(t.init(params) for t in transforms)

    def update(grads: Any, state: tuple, params: Any = None) -> tuple[Any, tuple]:
        if not isinstance(state, tuple) or len(state) != len(transforms):
            raise ValueError(f"chain of {len(transforms)} transformations got a state that is "
                             f"not a tuple of {len(transforms)} states; pass the state its "
                             f"init returned")
        new_state = []
        for t, s in zip(transforms, state, strict=True):
            grads, s = t.update(grads, s, params)
            new_state.append(s)
        return grads, tuple(new_state)
    return transformation(init, update)


def apply_updates(params: Any, updates: Any) -> Any:
    """`params + updates` leafwise, keeping each parameter's dtype; non-trainable leaves
    (`fgrad.nn.trainable_mask`, e.g. BatchNorm's running statistics) stay as they are."""
    from fgrad.optim.masking import keep_non_trainable
    params, updates = tensor_tree(params), tensor_tree(updates)
    return keep_non_trainable(params, tree_map(lambda p, u: cast_like(p + u, p), params, updates))


def scale_by_schedule(step_size_fn: Schedule) -> GradientTransformation:
    """Multiply the updates by `step_size_fn(count)`; `count` is an int32 Tensor in the state."""
    def init(params: Any) -> ScaleByScheduleState:
        return ScaleByScheduleState(step_count())

    def update(grads: Any, state: ScaleByScheduleState, params: Any = None
               ) -> tuple[Any, ScaleByScheduleState]:
        step = scalar(step_size_fn(state.count), "step_size_fn(count)")
        updates = tree_map(lambda g: cast_like(g * step, g), grads)
        return updates, ScaleByScheduleState(state.count + 1)
    return transformation(init, update)


# --------------------------------------------------------------------------- hyperparameters


def _split(hparams: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Schedule]]:
    constants = {k: scalar(v, k) for k, v in hparams.items() if not callable(v)}
    schedules = {k: v for k, v in hparams.items() if callable(v)}
    return constants, schedules


def inject_hyperparams(build: Callable[..., GradientTransformation]
                       ) -> Callable[..., GradientTransformation]:
    """`inject_hyperparams(build)(**hparams)`: `build`'s numeric arguments live in the state.

    Each value is a number (stored as a float32 Tensor, changeable with `set_hyperparams`) or
    a schedule `count -> value` evaluated on the int32 step count kept in the state. `build` is
    called at every step with Tensor values, so its structure must not depend on them.
    """
    def make(**hparams: Any) -> GradientTransformation:
        constants, schedules = _split(hparams)

        def current(count: Tensor) -> dict[str, Tensor]:
            return {k: scalar(fn(count), k) for k, fn in schedules.items()}

        def init(params: Any) -> InjectHyperparamsState:
            count = step_count()
            values = current(count)
            inner = build(**constants, **values).init(params)
            return InjectHyperparamsState(count, dict(constants), values, inner)

        def update(grads: Any, state: InjectHyperparamsState, params: Any = None
                   ) -> tuple[Any, InjectHyperparamsState]:
            from fgrad.optim.masking import zero_non_trainable
            values = current(state.count)
            opt = build(**state.hyperparams, **values)
            grads = zero_non_trainable(grads)
            updates, inner = opt.update(grads, state.inner_state, params)
            updates = zero_non_trainable(updates, grads)
            return updates, InjectHyperparamsState(state.count + 1, state.hyperparams, values,
                                                   inner)
        return transformation(init, update)
    return make


def _is_injected(x: Any) -> bool:
    return isinstance(x, InjectHyperparamsState)


def set_hyperparams(state: Any, **values: Any) -> Any:
    """A copy of `state` whose hyperparameters `values` (e.g. `lr=0.01`) are replaced.

    Values become float32 0-d Tensors, so a jitted step does not retrace.
    """
    found: set[str] = set()
    known: set[str] = set()

    def replace(node: Any) -> Any:
        if not _is_injected(node):
            return node
        known.update(node.hyperparams)
        hparams = dict(node.hyperparams)
        for key, value in values.items():
            if key in node.schedules:
                raise ValueError(f"set_hyperparams: {key!r} follows a schedule; build the "
                                 f"optimizer with a number for {key!r} to set it by hand")
            if key in hparams:
                hparams[key] = scalar(value, key)
                found.add(key)
        inner = tree_map(replace, node.inner_state, is_leaf=_is_injected)
        return node._replace(hyperparams=hparams, inner_state=inner)

    new_state = tree_map(replace, state, is_leaf=_is_injected)
    missing = sorted(set(values) - found)
    if missing:
        raise KeyError(f"set_hyperparams: no hyperparameter {missing} in this state; it has "
                       f"{sorted(known)}. (A term switched off at construction, e.g. "
                       f"momentum=0 or weight_decay=0, has no hyperparameter.)")
    return new_state


def get_hyperparams(state: Any) -> dict[str, Tensor]:
    """The hyperparameters in `state` (set values and the current schedule values)."""
    out: dict[str, Tensor] = {}

    def collect(node: Any) -> Any:
        if _is_injected(node):
            out.update(node.hyperparams)
            out.update(node.schedules)
            tree_map(collect, node.inner_state, is_leaf=_is_injected)
        return node

    tree_map(collect, state, is_leaf=_is_injected)
    return out
