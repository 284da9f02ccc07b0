"""jax.example_libraries.optimizers over fgrad: optimizers as (init, update, get_params).

    opt_init, opt_update, get_params = optimizers.adam(1e-3)
    state = opt_init(params)                  # params: any pytree of arrays
    state = opt_update(step, grads, state)    # step: the iteration number (int)
    params = get_params(state)

An optimizer is written for one array (`init(x) -> state`, `update(i, g, state) -> state`,
`get_params(state) -> x`, where a state is an array or a tuple of arrays); the `optimizer`
decorator lifts it to pytrees. `OptimizerState` is a pytree (its leaves are the per-array
states), so it passes through `jit` as JAX's does. Step sizes are numbers or schedules
(`i -> step size`).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

from fgrad.core import tree_util
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import asarray, float_of

__all__ = ["JoinPoint", "Optimizer", "OptimizerState", "adagrad", "adam", "adamax",
           "clip_grads", "constant", "exponential_decay", "inverse_time_decay", "l2_norm",
           "make_schedule", "momentum", "nesterov", "optimizer", "pack_optimizer_state",
           "piecewise_constant", "polynomial_decay", "rmsprop", "rmsprop_momentum", "sgd",
           "sm3", "unpack_optimizer_state"]

Schedule = Callable[[Any], Any]


class OptimizerState(NamedTuple):
    """The lifted state: per-array states flattened, with the params' and states' trees."""

    packed_state: list[Any]
    tree_def: Any
    subtree_defs: tuple[Any, ...]


def _flatten_state(state: OptimizerState) -> tuple[list[Any], tuple[Any, Any]]:
    return list(state.packed_state), (state.tree_def, state.subtree_defs)


def _unflatten_state(aux: tuple[Any, Any], leaves: Any) -> OptimizerState:
    return OptimizerState(list(leaves), aux[0], aux[1])


tree_util.register_pytree_node(OptimizerState, _flatten_state, _unflatten_state)


class Optimizer(NamedTuple):
    """(init_fn, update_fn, params_fn) over pytrees."""

    init_fn: Callable[[Any], OptimizerState]
    update_fn: Callable[[Any, Any, OptimizerState], OptimizerState]
    params_fn: Callable[[OptimizerState], Any]


def optimizer(opt_maker: Callable[..., tuple[Callable, Callable, Callable]]
              ) -> Callable[..., Optimizer]:
    """Decorator: lift an optimizer written for one array to pytrees of arrays."""
    @functools.wraps(opt_maker)
    def tree_opt_maker(*args: Any, **kwargs: Any) -> Optimizer:
        init, update, get_params = opt_maker(*args, **kwargs)

        def tree_init(params: Any) -> OptimizerState:
            leaves, tree = tree_util.tree_flatten(params)
            states = [init(asarray(x)) for x in leaves]
            flat = [tree_util.tree_flatten(s) for s in states]
            return OptimizerState([leaf for leaves_, _ in flat for leaf in leaves_], tree,
                                  tuple(d for _, d in flat))

        def tree_update(i: Any, grads: Any, opt_state: OptimizerState) -> OptimizerState:
            states = _split_states(opt_state)
            grad_leaves, grad_tree = tree_util.tree_flatten(grads)
            if grad_tree != opt_state.tree_def:
                raise TypeError(f"optimizer update: the gradient tree {grad_tree} does not "
                                f"match the parameter tree {opt_state.tree_def}")
            new = [update(i, asarray(g), s) for g, s in zip(grad_leaves, states, strict=True)]
            flat = [tree_util.tree_flatten(s)[0] for s in new]
            return OptimizerState([leaf for leaves_ in flat for leaf in leaves_],
                                  opt_state.tree_def, opt_state.subtree_defs)

        def tree_get_params(opt_state: OptimizerState) -> Any:
            params = [get_params(s) for s in _split_states(opt_state)]
            return tree_util.tree_unflatten(opt_state.tree_def, params)
        return Optimizer(tree_init, tree_update, tree_get_params)
    return tree_opt_maker


def _split_states(opt_state: OptimizerState) -> list[Any]:
    """The per-array states of a lifted state, each rebuilt in its own tree."""
    states, at = [], 0
    for subtree in opt_state.subtree_defs:
        n = subtree.num_leaves
        states.append(tree_util.tree_unflatten(subtree, opt_state.packed_state[at:at + n]))
        at += n
    return states


# --------------------------------------------------------------------------- schedules


def constant(step_size: float) -> Schedule:
    """The same step size at every step."""
    return lambda i: step_size


def exponential_decay(step_size: float, decay_steps: float, decay_rate: float) -> Schedule:
    """step_size * decay_rate ** (i / decay_steps)."""
    return lambda i: step_size * decay_rate ** (float_of(asarray(i)) / decay_steps)


def inverse_time_decay(step_size: float, decay_steps: float, decay_rate: float,
                       staircase: bool = False) -> Schedule:
    """step_size / (1 + decay_rate * i / decay_steps), the ratio floored when `staircase`."""
    def schedule(i: Any) -> Any:
        ratio = float_of(asarray(i)) / decay_steps
        return step_size / (1 + decay_rate * (ratio.floor() if staircase else ratio))
    return schedule


def polynomial_decay(step_size: float, decay_steps: int, final_step_size: float,
                     power: float = 1.0) -> Schedule:
    """From step_size to final_step_size over decay_steps by (1 - i / decay_steps) ** power,
    then final_step_size."""
    def schedule(i: Any) -> Any:
        done = float_of(asarray(i)).minimum(decay_steps) / decay_steps
        return (step_size - final_step_size) * (1 - done) ** power + final_step_size
    return schedule


def piecewise_constant(boundaries: Any, values: Any) -> Schedule:
    """values[k] for boundaries[k-1] < i <= boundaries[k] (len(values) == len(boundaries)
    + 1), as JAX's."""
    bounds, vals = asarray(boundaries), asarray(values)
    if bounds.ndim != 1 or vals.ndim != 1 or vals.shape[0] != bounds.shape[0] + 1:
        raise ValueError(f"piecewise_constant: needs 1-d boundaries and one more value than "
                         f"boundaries, got shapes {bounds.shape} and {vals.shape}")

    def schedule(i: Any) -> Any:
        return vals[(asarray(i) > bounds).cast(vals.dtype).sum().cast(bounds.dtype)
                    if bounds.shape[0] else 0]
    return schedule


def make_schedule(scalar_or_schedule: float | Schedule) -> Schedule:
    """A schedule: callables as they are, numbers as `constant`."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if isinstance(scalar_or_schedule, (int, float)) or (
            isinstance(scalar_or_schedule, Tensor) and scalar_or_schedule.ndim == 0):
        return constant(scalar_or_schedule)
    raise TypeError(f"make_schedule: expected a number or a function of the step, got "
                    f"{type(scalar_or_schedule).__name__}")


# --------------------------------------------------------------------------- optimizers


@optimizer
def sgd(step_size: float | Schedule) -> tuple[Callable, Callable, Callable]:
    """Stochastic gradient descent: x - step_size(i) * g."""
    rate = make_schedule(step_size)
    return (lambda x: x), (lambda i, g, x: x - rate(i) * g), (lambda x: x)


@optimizer
def momentum(step_size: float | Schedule, mass: float) -> tuple[Callable, Callable, Callable]:
    """Heavy-ball momentum: v = mass * v + g; x - step_size(i) * v."""
    rate = make_schedule(step_size)

    def update(i: Any, g: Tensor, state: tuple) -> tuple:
        x, velocity = state
        velocity = mass * velocity + g
        return x - rate(i) * velocity, velocity
    return (lambda x: (x, x.zeros_like())), update, (lambda state: state[0])


@optimizer
def nesterov(step_size: float | Schedule, mass: float) -> tuple[Callable, Callable, Callable]:
    """Nesterov momentum: v = mass * v + g; x - step_size(i) * (mass * v + g)."""
    rate = make_schedule(step_size)

    def update(i: Any, g: Tensor, state: tuple) -> tuple:
        x, velocity = state
        velocity = mass * velocity + g
        return x - rate(i) * (mass * velocity + g), velocity
    return (lambda x: (x, x.zeros_like())), update, (lambda state: state[0])


@optimizer
def adagrad(step_size: float | Schedule, momentum: float = 0.9
            ) -> tuple[Callable, Callable, Callable]:
    """Adagrad with momentum: squares summed, then a momentum step on g / sqrt(sum)."""
    rate = make_schedule(step_size)

    def init(x: Tensor) -> tuple:
        return x, x.zeros_like(), x.zeros_like()

    def update(i: Any, g: Tensor, state: tuple) -> tuple:
        x, squares, velocity = state
        squares = squares + g * g
        scaled = g * (squares > 0).where(1 / squares.maximum(1e-38).sqrt(), 0.0)
        velocity = momentum * velocity + (1 - momentum) * scaled
        return x - rate(i) * velocity, squares, velocity
    return init, update, (lambda state: state[0])


@optimizer
def rmsprop(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8
            ) -> tuple[Callable, Callable, Callable]:
    """RMSProp: a running mean of g^2; x - step_size(i) * g / sqrt(mean + eps)."""
    rate = make_schedule(step_size)

    def update(i: Any, g: Tensor, state: tuple) -> tuple:
        x, avg = state
        avg = avg * gamma + g * g * (1 - gamma)
        return x - rate(i) * g / (avg + eps).sqrt(), avg
    return (lambda x: (x, x.zeros_like())), update, (lambda state: state[0])


@optimizer
def rmsprop_momentum(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8,
                     momentum: float = 0.9) -> tuple[Callable, Callable, Callable]:
    """RMSProp whose scaled gradient drives a momentum term."""
    rate = make_schedule(step_size)

    def update(i: Any, g: Tensor, state: tuple) -> tuple:
        x, avg, mom = state
        avg = avg * gamma + g * g * (1 - gamma)
        mom = momentum * mom + rate(i) * g / (avg + eps).sqrt()
        return x - mom, avg, mom
    return (lambda x: (x, x.zeros_like(), x.zeros_like())), update, (lambda state: state[0])


def _power(base: float, i: Any, dtype: Any) -> Tensor:
    """base ** (i + 1) in `dtype`: by repeated squaring for a Python int step (as JAX's
    integer power), else as a float power."""
    b = asarray(base, dtype)
    if not isinstance(i, int):
        return b ** (float_of(asarray(i)).cast(dtype) + 1)
    result, square, n = None, b, i + 1
    while n:
        if n & 1:
            result = square if result is None else result * square
        n >>= 1
        square = square * square if n else square
    return b * 0 + 1 if result is None else result


@optimizer
def adam(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
         ) -> tuple[Callable, Callable, Callable]:
    """Adam (Kingma & Ba), bias-corrected at step i + 1."""
    rate = make_schedule(step_size)

    def update(i: Any, g: Tensor, state: tuple) -> tuple:
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * g * g + b2 * v
        m_hat = m / (1 - _power(b1, i, x.dtype))
        v_hat = v / (1 - _power(b2, i, x.dtype))
        return x - rate(i) * m_hat / (v_hat.sqrt() + eps), m, v
    return (lambda x: (x, x.zeros_like(), x.zeros_like())), update, (lambda state: state[0])


@optimizer
def adamax(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
           ) -> tuple[Callable, Callable, Callable]:
    """AdaMax: Adam with the infinity norm in place of the second moment."""
    rate = make_schedule(step_size)

    def update(i: Any, g: Tensor, state: tuple) -> tuple:
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = (b2 * u).maximum(g.abs())
        return x - (rate(i) / (1 - _power(b1, i, x.dtype))) * m / (u + eps), m, u
    return (lambda x: (x, x.zeros_like(), x.zeros_like())), update, (lambda state: state[0])


@optimizer
def sm3(step_size: float | Schedule, momentum: float = 0.9
        ) -> tuple[Callable, Callable, Callable]:
    """SM3 (Anil et al.): one accumulator per axis, their minimum bounds the squares."""
    rate = make_schedule(step_size)

    def init(x: Tensor) -> tuple:
        return (x, x.zeros_like(),
                tuple(Tensor.zeros(n, dtype=x.dtype) for n in (x.shape or (1,))))

    def update(i: Any, g: Tensor, state: tuple) -> tuple:
        x, mom, accs = state
        grad = g if g.ndim else g.reshape(1)   # a scalar keeps one accumulator
        ndim = grad.ndim
        shaped = [a.reshape(tuple(a.shape[0] if k == axis else 1 for k in range(ndim)))
                  for axis, a in enumerate(accs)]
        squares = functools.reduce(lambda a, b: a.minimum(b), shaped) + grad * grad
        scaled = grad * (squares > 0).where(1 / squares.maximum(1e-38).sqrt(), 0.0)
        mom = momentum * mom + (1 - momentum) * scaled.reshape(x.shape)
        new_accs = tuple(squares.max(tuple(k for k in range(ndim) if k != axis))
                         for axis in range(ndim))
        return x - rate(i) * mom, mom, new_accs
    return init, update, (lambda state: state[0])


# --------------------------------------------------------------------------- utilities


def l2_norm(tree: Any) -> Tensor:
    """The L2 norm of all leaves of `tree` together."""
    leaves = [asarray(x) for x in tree_util.tree_leaves(tree)]
    total = sum(((x * x).sum() for x in leaves), asarray(0.0))
    return asarray(total).sqrt()


def clip_grads(grad_tree: Any, max_norm: float) -> Any:
    """`grad_tree` scaled down so its L2 norm is at most `max_norm`."""
    norm = l2_norm(grad_tree)
    factor = (norm < max_norm).where(1.0, max_norm / norm)
    return tree_util.tree_map(lambda g: asarray(g) * factor.cast(asarray(g).dtype), grad_tree)


class JoinPoint:
    """Marks where a per-array state subtree joins the params' tree (unpacked states)."""

    def __init__(self, subtree: Any):
        self.subtree = subtree

    def __iter__(self) -> Any:
        yield self.subtree


def unpack_optimizer_state(opt_state: OptimizerState) -> Any:
    """The state as a plain pytree (the params' tree with a JoinPoint of each array's
    state at its leaf), e.g. for pickling."""
    return tree_util.tree_unflatten(opt_state.tree_def,
                                    [JoinPoint(s) for s in _split_states(opt_state)])


def pack_optimizer_state(marked_pytree: Any) -> OptimizerState:
    """The inverse of `unpack_optimizer_state`."""
    joins, tree = tree_util.tree_flatten(marked_pytree,
                                         is_leaf=lambda x: isinstance(x, JoinPoint))
    if not all(isinstance(j, JoinPoint) for j in joins):
        raise TypeError("pack_optimizer_state: expected the output of unpack_optimizer_state")
    flat = [tree_util.tree_flatten(j.subtree) for j in joins]
    return OptimizerState([leaf for leaves_, _ in flat for leaf in leaves_], tree,
                          tuple(d for _, d in flat))

