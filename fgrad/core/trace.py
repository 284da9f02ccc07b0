"""The current trace: which interpreter handles `bind`.

There is no global level stack. A context variable holds the *current* trace; every trace
knows its `parent`. A trace's `process_primitive` computes with its own tracers and hands
work on the values beneath them to its parent by making the parent current. Eager
evaluation is the root trace.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Iterator, Sequence


class Trace:
    """An interpreter for primitives. Subclasses implement `process_primitive` and `pure`."""

    parent: "Trace | None" = None
    name = "trace"

    def process_primitive(self, prim: Any, args: Sequence[Any], params: dict) -> list[Any]:
        raise NotImplementedError

    def is_ancestor_of(self, other: "Trace") -> bool:
        t: Trace | None = other
        while t is not None:
            if t is self:
                return True
            t = t.parent
        return False

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


class LeakedTracerError(RuntimeError):
    """A tracer was used outside the transformation that created it."""


_current: contextvars.ContextVar[Trace] = contextvars.ContextVar("fgrad_current_trace")


def current_trace() -> Trace:
    """The trace that `bind` dispatches to now (the eager root when nothing is active)."""
    try:
        return _current.get()
    except LookupError:
        from fgrad.core.tensor import EvalTrace
        root = EvalTrace()
        _current.set(root)
        return root


@contextlib.contextmanager
def set_current_trace(trace: Trace) -> Iterator[Trace]:
    """Make `trace` current for the duration of the block."""
    token = _current.set(trace)
    try:
        yield trace
    finally:
        _current.reset(token)


def own_tracer(trace: Trace, x: Any) -> bool:
    """True if `x` is a tracer of `trace`; raises LeakedTracerError for escaped tracers."""
    t = getattr(x, "_trace", None)
    if t is None:
        return False
    if t is trace:
        return True
    if not t.is_ancestor_of(trace):
        raise LeakedTracerError(
            f"a value traced by {t.name} was used after that transformation finished (it "
            f"leaked out, e.g. stored in a global or a closure). Pass it as an argument or "
            f"return it from the transformed function instead.")
    return False
