"""Context managers of JAX's top level: `named_scope` and `ensure_compile_time_eval`.

`ensure_compile_time_eval()` makes the current trace a `CompileTimeEvalTrace` for the
block: an operation whose operands are all concrete (no tracer among them) runs eagerly on
the root trace, even while `jit` or `make_jaxpr` is staging the surrounding function, so its
result is concrete and can drive Python control flow (`int(...)`, `if`) at trace time.
Operations on traced values are handed to the enclosing trace unchanged. Outside any
transformation fgrad is eager already and the block changes nothing.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

from fgrad.core.tensor import Tracer
from fgrad.core.trace import Trace, current_trace, set_current_trace

__all__ = ["CompileTimeEvalTrace", "ensure_compile_time_eval", "named_scope"]


@contextlib.contextmanager
def named_scope(name: str) -> Iterator[None]:
    """JAX's `named_scope`: a name for the operations traced in the block. fgrad records
    no scope names (its jaxprs name each equation's source line instead), so this only
    checks the name; ported code keeps working unchanged."""
    if not isinstance(name, str):
        raise TypeError(f"named_scope name argument must be a string, got "
                        f"{type(name).__name__} {name!r}")
    yield


def _root(trace: Trace) -> Trace:
    while trace.parent is not None:
        trace = trace.parent
    return trace


class CompileTimeEvalTrace(Trace):
    """Evaluates operations on concrete values eagerly (on the root trace); operations
    with a traced operand go to `parent`, the trace that was current before."""

    name = "ensure_compile_time_eval"

    def __init__(self, parent: Trace):
        self.parent = parent

    def process_primitive(self, prim: Any, args: Sequence[Any], params: dict) -> list[Any]:
        assert self.parent is not None
        traced = any(isinstance(x, Tracer) for x in args)
        with set_current_trace(self.parent if traced else _root(self.parent)):
            out = prim.bind(*args, **params)
        return list(out) if prim.multiple_results else [out]


@contextlib.contextmanager
def ensure_compile_time_eval() -> Iterator[None]:
    """JAX's `ensure_compile_time_eval`: in the block, operations on concrete values run
    eagerly even inside `jit` tracing (see the module docstring), e.g.

        @fgrad.jit
        def f(x):
            with fgrad.ensure_compile_time_eval():
                n = int(fgrad.numpy.arange(4).sum())   # concrete: 6
            return x * n
    """
    trace = current_trace()
    if trace.parent is None:  # eager already
        yield
        return
    with set_current_trace(CompileTimeEvalTrace(trace)):
        yield
