"""`debug_nans` / `debug_infs`: find the primitive that first produced a non-finite value.

When either setting is on (`fgrad.config.update("debug_nans", True)`, the context managers
below, or FGRAD_DEBUG_NANS=1 / FGRAD_DEBUG_INFS=1), every jitted call checks its float outputs.
If one holds a NaN (or an infinity), the call's jaxpr is run again equation by equation with
the reference NumPy rules, and `FloatingPointError` names the first primitive whose output is
non-finite and the user's source line that created it. Gradients are jitted calls too
(`grad(jit(f))` binds the transposed jaxpr as a jitted call), so the backward pass is checked
the same way.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

import numpy as np

from fgrad import flags
from fgrad.core.ir import Jaxpr, Literal
from fgrad.core.nonfinite import first_rejected, nonfinite_error

__all__ = ["check_jit_outputs", "debug_infs", "debug_nans", "enabled"]


@contextlib.contextmanager
def debug_nans(enable: bool = True) -> Iterator[None]:
    """Check jitted calls for NaNs inside this block (see the module docstring)."""
    from fgrad.config import config
    with config.override(debug_nans=enable):
        yield


@contextlib.contextmanager
def debug_infs(enable: bool = True) -> Iterator[None]:
    """Check jitted calls for infinities inside this block (see the module docstring)."""
    from fgrad.config import config
    with config.override(debug_infs=enable):
        yield


def enabled() -> bool:
    """Whether either check is on."""
    return bool(flags.setting("debug_nans") or flags.setting("debug_infs"))


def _locate(jaxpr: Jaxpr, args: Sequence[Any], where: str) -> None:
    """Run `jaxpr` op by op with NumPy impls; raise at the first non-finite output."""
    env: dict[int, Any] = {id(v): np.asarray(a) for v, a in zip(jaxpr.invars, args)}

    def read(x: Any) -> Any:
        return np.asarray(x.val, x.aval.dtype.np) if isinstance(x, Literal) else env[id(x)]

    for eqn in jaxpr.eqns:
        if getattr(eqn.primitive, "effectful", False):
            continue                       # host callbacks already ran once
        ins = [read(x) for x in eqn.inputs]
        outs = eqn.primitive.impl(*ins, **eqn.params)
        outs = list(outs) if eqn.primitive.multiple_results else [outs]
        kind = first_rejected(outs)
        if kind is None:
            for v, o in zip(eqn.outvars, outs):
                env[id(v)] = o
            continue
        inner = eqn.params.get("jaxpr")
        if eqn.primitive.name == "jit" and isinstance(inner, Jaxpr):
            _locate(inner, ins, f"{where} > jit({eqn.params.get('name')})")
        raise nonfinite_error(kind, eqn.primitive.name, where, eqn.source, ins)


def check_jit_outputs(jaxpr: Jaxpr, args: Sequence[Any], outs: Sequence[Any],
                      name: str) -> None:
    """After a jitted call: when its outputs hold a rejected value, find where it began."""
    if first_rejected(outs) is None:
        return
    _locate(jaxpr, args, f"jit({name})")
    raise FloatingPointError(f"jit({name}) returned a non-finite value, but the op-by-op "
                             f"rerun did not reproduce it (a backend difference)")
