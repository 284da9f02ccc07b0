"""Checks of what user rules of `custom_jvp` / `custom_vjp` return.

A rule that returns the wrong structure, shape or dtype would otherwise flow into the
derivative unnoticed (e.g. a bwd returning `g.sum()` for a (2,) input makes `grad` return
shape ()). Each error names the rule, the expected and the got structure/shape/dtype.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from fgrad.core import tree_util
from fgrad.core.api_util import fn_name
from fgrad.core.errors import ArgumentError, ArgumentTypeError


def _aval(x: Any) -> tuple[tuple[int, ...], str]:
    dtype = getattr(x, "dtype", None)
    name = getattr(dtype, "name", None) or np.asarray(x).dtype.name
    return tuple(getattr(x, "shape", np.shape(x))), name


def _fmt(x: Any) -> str:
    shape, dtype = _aval(x)
    return f"{dtype}{list(shape)}"


def _check_leaves(kind: str, rule: Callable[..., Any], what: str, expected: Any,
                  got: Any, shape_error: type[Exception]) -> None:
    """Structure mismatches raise a TypeError, shape/dtype mismatches `shape_error` (JAX's
    classes: ValueError for custom_vjp, TypeError for custom_jvp)."""
    exp_leaves, exp_tree = tree_util.tree_flatten(expected)
    got_leaves, got_tree = tree_util.tree_flatten(got)
    if exp_tree != got_tree:
        raise ArgumentTypeError(f"{kind} rule {fn_name(rule)}: {what} must have the structure "
                                f"{exp_tree}, got {got_tree}")
    for i, (e, g) in enumerate(zip(exp_leaves, got_leaves, strict=True)):
        (e_shape, e_dtype), (g_shape, g_dtype) = _aval(e), _aval(g)
        float_pair = all(getattr(getattr(v, "dtype", None), "is_float", False) for v in (e, g))
        if e_shape != g_shape or (float_pair and e_dtype != g_dtype):
            raise shape_error(f"{kind} rule {fn_name(rule)}: {what}, leaf {i}, must "
                              f"have shape/dtype {_fmt(e)}, got {_fmt(g)}")


def check_bwd_output(bwd: Callable[..., Any], in_cts: tuple, args: tuple) -> tuple:
    """`in_cts` if each cotangent from `bwd` matches its argument's structure, shape and
    (for float arguments) dtype; None stands for a zero cotangent of a whole argument."""
    for i, (ct, arg) in enumerate(zip(in_cts, args, strict=True)):
        if ct is not None:
            _check_leaves("custom_vjp bwd", bwd, f"the cotangent of argument {i}", arg, ct,
                          ArgumentError)
    return in_cts


def check_jvp_output(rule: Callable[..., Any], out: Any, out_dot: Any, out_tree: Any) -> None:
    """Raise unless the rule's primal output has the function's output structure and its
    tangent output matches the primal output leaf by leaf (structure, shape, float dtype)."""
    got_tree = tree_util.tree_structure(out)
    if got_tree != out_tree:
        raise ArgumentTypeError(f"custom_jvp rule {fn_name(rule)}: the primal output must "
                                f"have the function's output structure {out_tree}, got "
                                f"{got_tree}")
    _check_leaves("custom_jvp", rule, "the tangent output", out, out_dot, ArgumentTypeError)


__all__ = ["check_bwd_output", "check_jvp_output"]
