"""Control flow in compiled programs: scan, while and cond with natively compiled bodies.

In: a `scan`, `while` or `cond` equation (a `ControlStep` of the schedule), its operand
arrays, the backend's compiler and its `RowOps` (how that backend slices, stacks and reads
its arrays). Out: the equation's results.

Each sub-jaxpr (scan body, while cond and body, every cond branch) is compiled ONCE for the
same backend as the enclosing program (`executables.executable_for` caches by jaxpr), so
its kernels are fused, vectorized native code like any jitted function. The loop or the
branch choice runs on the host between those native calls: one call per iteration, the
iteration's slices of `xs` taken and its `ys` rows stored on the backend's own memory
(no copy through NumPy on a device). Only the chosen branch of a cond runs.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from fgrad.core.ir import Eqn, Jaxpr, ShapedArray

CONTROL_FLOW = frozenset({"scan", "while", "cond"})


class RowOps(Protocol):
    """What the loop driver needs from a backend's arrays."""

    def row(self, xs: Any, i: int) -> Any:
        """xs[i] (a view or a device-side copy)."""

    def stacked(self, aval: ShapedArray) -> Any:
        """An uninitialized array of `aval`'s shape and dtype."""

    def set_row(self, ys: Any, i: int, y: Any) -> None:
        """ys[i] = y."""

    def scalar(self, x: Any) -> Any:
        """The value of a 0-d array as a NumPy scalar (copied to the host on a device)."""


Compile = Callable[[Jaxpr], Callable[..., list[Any]]]


def run_control(eqn: Eqn, args: list[Any], compile_sub: Compile, ops: RowOps) -> list[Any]:
    """Evaluate a scan/while/cond equation on backend arrays `args`."""
    name = eqn.primitive.name
    if name == "scan":
        return _scan(args, compile_sub, ops, **eqn.params)
    if name == "while":
        return _while(args, compile_sub, ops, **eqn.params)
    if name == "cond":
        return _cond(args, compile_sub, ops, **eqn.params)
    raise ValueError(f"run_control: {name} is not a control-flow primitive")


def _scan(args: list[Any], compile_sub: Compile, ops: RowOps, *, body: Jaxpr,
          num_consts: int, num_carry: int, length: int, reverse: bool) -> list[Any]:
    step = compile_sub(body)
    consts = args[:num_consts]
    carry = args[num_consts:num_consts + num_carry]
    xs = args[num_consts + num_carry:]
    y_avals = [v.aval for v in body.outvars[num_carry:]]
    ys = [ops.stacked(ShapedArray((length,) + a.shape, a.dtype)) for a in y_avals]
    for i in (range(length - 1, -1, -1) if reverse else range(length)):
        outs = step(*consts, *carry, *[ops.row(x, i) for x in xs])
        carry = list(outs[:num_carry])
        for stack, y in zip(ys, outs[num_carry:], strict=True):
            ops.set_row(stack, i, y)
    return carry + ys


def _while(args: list[Any], compile_sub: Compile, ops: RowOps, *, cond: Jaxpr, body: Jaxpr,
           cond_nconsts: int, body_nconsts: int) -> list[Any]:
    test, step = compile_sub(cond), compile_sub(body)
    cond_consts = args[:cond_nconsts]
    body_consts = args[cond_nconsts:cond_nconsts + body_nconsts]
    carry = args[cond_nconsts + body_nconsts:]
    while bool(ops.scalar(test(*cond_consts, *carry)[0])):
        carry = list(step(*body_consts, *carry))
    return carry


def _cond(args: list[Any], compile_sub: Compile, ops: RowOps, *,
          branches: tuple[Jaxpr, ...]) -> list[Any]:
    index = int(np.clip(int(ops.scalar(args[0])), 0, len(branches) - 1))
    return list(compile_sub(branches[index])(*args[1:]))


class HostRows:
    """`RowOps` for NumPy arrays (the llvm backend)."""

    def row(self, xs: np.ndarray, i: int) -> np.ndarray:
        """A view of xs[i] (contiguous: xs is C-contiguous)."""
        return xs[i]

    def stacked(self, aval: ShapedArray) -> np.ndarray:
        """A fresh array of the stacked shape."""
        return np.empty(aval.shape, aval.dtype.np)

    def set_row(self, ys: np.ndarray, i: int, y: Any) -> None:
        """ys[i] = y."""
        ys[i] = y

    def scalar(self, x: Any) -> Any:
        """The element of a 0-d array."""
        return np.asarray(x).reshape(())[()]
