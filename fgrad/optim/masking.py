"""Optimizing part of a model: `masked`, `multi_transform`, `set_to_zero`, buffer protection.

Names and semantics follow Optax:

- `masked(inner, mask)` runs `inner` on the leaves where `mask` is True; the other leaves'
  updates pass through unchanged. `inner`'s state only holds the selected leaves.
- `multi_transform({"adam": Adam(...), "frozen": set_to_zero()}, labels)` gives each leaf the
  transformation its label names; `labels` is a pytree of labels or a function params -> it.

Besides, every named optimizer (and `apply_updates`) leaves non-trainable leaves alone:
leaves that `fgrad.nn.trainable_mask` marks False (BatchNorm's running statistics, fields of
`nn.Frozen`) get zero gradients in and zero updates out, so neither momentum nor weight decay
moves them.
"""
from __future__ import annotations

from typing import Any, Hashable, NamedTuple

from fgrad.core import tree_util
from fgrad.optim.base import EmptyState, GradientTransformation, transformation

__all__ = ["MaskedNode", "MaskedState", "MultiTransformState", "masked", "multi_transform",
           "set_to_zero", "zero_non_trainable"]


class MaskedNode(NamedTuple):
    """Stands in for a leaf that a masked transformation does not see (holds no leaves)."""


class MaskedState(NamedTuple):
    """State of `masked`: the inner transformation's state over the selected leaves."""

    inner_state: Any


class MultiTransformState(NamedTuple):
    """State of `multi_transform`: one inner state per label."""

    inner_states: dict[Hashable, Any]


def _is_masked(x: Any) -> bool:
    return isinstance(x, MaskedNode)


def leaf_flags(spec: Any, params: Any, who: str) -> list[Any]:
    """One entry of `spec` per leaf of `params`; `spec` is shaped like `params` or a prefix
    of it (a value at an inner node applies to every leaf below), or a function of params."""
    if callable(spec) and tree_util.tree_structure(spec).is_leaf():
        spec = spec(params)
    return tree_util.prefix_leaves(spec, params, f"{who} mask/labels")


def _select(tree: Any, flags: list[bool]) -> Any:
    leaves, treedef = tree_util.tree_flatten(tree)
    return treedef.unflatten(x if f else MaskedNode() for x, f in zip(leaves, flags))


def masked(inner: GradientTransformation, mask: Any) -> GradientTransformation:
    """Apply `inner` only where `mask` (bools shaped like the params, or params -> bools) is
    True; elsewhere the incoming updates pass through unchanged (Optax's `masked`)."""
    def init(params: Any) -> MaskedState:
        flags = [bool(f) for f in leaf_flags(mask, params, "masked")]
        return MaskedState(inner.init(_select(params, flags)))

    def update(grads: Any, state: MaskedState, params: Any = None) -> tuple[Any, MaskedState]:
        flags = [bool(f) for f in leaf_flags(mask, grads if params is None else params,
                                              "masked")]
        sub_params = None if params is None else _select(params, flags)
        new, inner_state = inner.update(_select(grads, flags), state.inner_state, sub_params)
        new_leaves = tree_util.tree_leaves(new, is_leaf=_is_masked)
        leaves, treedef = tree_util.tree_flatten(grads)
        merged = [n if f else g for n, g, f in zip(new_leaves, leaves, flags)]
        return treedef.unflatten(merged), MaskedState(inner_state)
    return transformation(init, update)


def set_to_zero() -> GradientTransformation:
    """Replace every update by zeros (freezes the parameters it is applied to)."""
    def init(params: Any) -> EmptyState:
        return EmptyState()

    def update(grads: Any, state: EmptyState, params: Any = None) -> tuple[Any, EmptyState]:
        return tree_util.tree_map(lambda g: g.zeros_like(), grads), state
    return transformation(init, update)


def multi_transform(transforms: dict[Hashable, GradientTransformation],
                    param_labels: Any) -> GradientTransformation:
    """Give each parameter the transformation named by its label (Optax's `multi_transform`).

    `param_labels` is a pytree of labels shaped like the params (or a prefix), or a function
    params -> such a pytree. Every label used must be a key of `transforms`.
    """
    def masks(params: Any) -> dict[Hashable, list[bool]]:
        labels = leaf_flags(param_labels, params, "multi_transform")
        unknown = sorted({repr(x) for x in labels if x not in transforms})
        if unknown:
            raise ValueError(f"multi_transform: labels {unknown} have no transformation; the "
                             f"transforms are {sorted(map(repr, transforms))}")
        return {k: [x == k for x in labels] for k in transforms}

    def init(params: Any) -> MultiTransformState:
        sel = masks(params)
        return MultiTransformState({k: masked(t, lambda _, k=k: _unflat(params, sel[k]))
                                    .init(params) for k, t in transforms.items()})

    def update(grads: Any, state: MultiTransformState, params: Any = None
               ) -> tuple[Any, MultiTransformState]:
        sel = masks(grads if params is None else params)
        new_states = {}
        for k, t in transforms.items():
            step = masked(t, lambda _, k=k: _unflat(grads, sel[k]))
            grads, new_states[k] = step.update(grads, state.inner_states[k], params)
        return grads, MultiTransformState(new_states)
    return transformation(init, update)


def _unflat(like: Any, flags: list[bool]) -> Any:
    return tree_util.tree_structure(like).unflatten(flags)


def zero_non_trainable(tree: Any, like: Any = None) -> Any:
    """`tree` with zeros at the leaves that `fgrad.nn.trainable_mask(like or tree)` marks
    non-trainable; `tree` itself when there are none."""
    from fgrad.nn.trainable import trainable_mask
    keep = tree_util.tree_leaves(trainable_mask(tree if like is None else like))
    if all(keep):
        return tree
    leaves, treedef = tree_util.tree_flatten(tree)
    return treedef.unflatten(x if k else x.zeros_like() for x, k in zip(leaves, keep))


def keep_non_trainable(params: Any, new_params: Any) -> Any:
    """`new_params` with the non-trainable leaves of `params` put back unchanged."""
    from fgrad.nn.trainable import trainable_mask
    keep = tree_util.tree_leaves(trainable_mask(params))
    if all(keep):
        return new_params
    old, treedef = tree_util.tree_flatten(params)
    new = treedef.flatten_up_to(new_params)
    return treedef.unflatten(n if k else o for o, n, k in zip(old, new, keep))
