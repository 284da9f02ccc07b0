"""Argument checks of `fgrad.jit` that run when `jit` is called, not at the first call."""
from __future__ import annotations

import inspect
from typing import Any, Callable

from fgrad.core.api_util import fn_name

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _parameters(fn: Callable[..., Any]) -> list[inspect.Parameter] | None:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # builtins and other callables without a signature
        return None


def check_static(fn: Callable[..., Any], static_argnums: tuple, static_argnames: tuple,
                 donate_argnums: tuple) -> None:
    """Raise when an argument number or name cannot refer to a parameter of `fn`."""
    name = fn_name(fn)
    for what, nums in (("static_argnums", static_argnums), ("donate_argnums", donate_argnums)):
        for i in nums:
            if type(i) is not int:
                raise TypeError(f"jit({name}): {what} must hold ints, got {i!r}")
    for n in static_argnames:
        if not isinstance(n, str):
            raise TypeError(f"jit({name}): static_argnames must hold parameter names "
                            f"(str), got {n!r}")
    params = _parameters(fn)
    if params is None:
        return
    positional = [p.name for p in params if p.kind in _POSITIONAL]
    if not any(p.kind == p.VAR_POSITIONAL for p in params):
        for what, nums in (("static_argnums", static_argnums),
                           ("donate_argnums", donate_argnums)):
            bad = [i for i in nums if not -len(positional) <= i < len(positional)]
            if bad:
                raise ValueError(f"jit({name}): {what}={bad[0]} is out of range: {name} takes "
                                 f"{len(positional)} positional parameter(s) "
                                 f"{tuple(positional)}")
    if not any(p.kind == p.VAR_KEYWORD for p in params):
        names = [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        unknown = [n for n in static_argnames if n not in names]
        if unknown:
            raise ValueError(f"jit({name}): static_argnames {unknown[0]!r} is not a parameter "
                             f"of {name}; its parameters are {tuple(names)}")


def positions_of(fn: Callable[..., Any], names: tuple[str, ...]) -> tuple[int, ...]:
    """Positions of the parameters `names` that may also be passed positionally, so that
    `jit(f, static_argnames="n")` treats `f(x, 3)` like `f(x, n=3)`."""
    params = _parameters(fn) or []
    return tuple(i for i, p in enumerate(params) if p.kind == p.POSITIONAL_OR_KEYWORD
                 and p.name in names)
