"""Tracebacks that point at the user's code.

An error raised inside a transformation (jit, grad, vmap, ...) travels through many fgrad
frames. At the outermost transformation boundary (`api_boundary`) those frames are removed
from the traceback, leaving the user's own frames (the call of the transformed function and
the line inside it that failed), and a note says how to see everything:
FGRAD_TRACEBACK_FILTERING=off. Separately, a TypeError or ValueError raised while a
function is traced (`annotate_tracing_error`) gets the user's line added to its message,
since with tracers the failing line is otherwise hard to find.
"""
from __future__ import annotations

import functools
import linecache
import os
import types
from typing import Any, Callable, TypeVar

from fgrad import flags

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_NOTE = ("fgrad removed {n} of its internal frames from this traceback; set "
         "FGRAD_TRACEBACK_FILTERING=off to see them.")
F = TypeVar("F", bound=Callable[..., Any])


def is_fgrad_frame(code: types.CodeType) -> bool:
    """Whether a code object belongs to the fgrad package."""
    return os.path.abspath(code.co_filename).startswith(_PKG_DIR)


def filter_traceback(tb: types.TracebackType | None) -> tuple[Any, int]:
    """(the traceback without fgrad's frames, how many were removed)."""
    kept, removed = [], 0
    while tb is not None:
        if is_fgrad_frame(tb.tb_frame.f_code):
            removed += 1
        else:
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(kept):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out, removed


def filtered(err: BaseException) -> BaseException:
    """`err` with fgrad's frames removed from its traceback (and a note saying so), unless
    filtering is off; re-raise what this returns (`raise filtered(err)`). Each boundary
    filters what it sees, so nested boundaries leave none; the note is kept once."""
    if not flags.traceback_filtering():
        return err
    tb, removed = filter_traceback(err.__traceback__)
    if not removed or tb is None:
        return err
    total = getattr(err, "_fgrad_removed", 0) + removed
    setattr(err, "_fgrad_removed", total)
    notes = [n for n in getattr(err, "__notes__", []) if not n.startswith("fgrad removed")]
    setattr(err, "__notes__", notes + [_NOTE.format(n=total)])  # add_note is 3.11+
    return err.with_traceback(tb)


def api_boundary(fn: F) -> F:
    """Decorate a public entry point: errors leaving it lose fgrad's frames."""
    @functools.wraps(fn)
    def boundary(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as err:
            raise filtered(err)
    return boundary  # type: ignore[return-value]


def transform_boundary(transform: F) -> F:
    """`api_boundary` for a transformation and for the function it returns (grad(f) ...)."""
    @functools.wraps(transform)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = api_boundary(transform)(*args, **kwargs)
        if isinstance(out, types.FunctionType):
            return api_boundary(out)
        return out
    return wrapper  # type: ignore[return-value]


def user_line(tb: types.TracebackType | None) -> str | None:
    """`file:line (function): source` of the innermost non-fgrad frame of a traceback."""
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if not is_fgrad_frame(code):
            found = (code.co_filename, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    if found is None:
        return None
    text = linecache.getline(found[0], found[1]).strip()
    return f"{found[0]}:{found[1]} ({found[2]})" + (f": {text}" if text else "")


def annotate_tracing_error(err: BaseException, what: str) -> None:
    """Add the user's failing line to a TypeError/ValueError raised while tracing `what`
    (once: the innermost trace adds it)."""
    if not isinstance(err, (TypeError, ValueError)) or getattr(err, "_fgrad_line", False):
        return
    line = user_line(err.__traceback__)
    if line is None:
        return
    setattr(err, "_fgrad_line", True)
    extra = f"\n  (while tracing {what}, at {line})"
    if len(err.args) == 1 and isinstance(err.args[0], str):
        err.args = (err.args[0] + extra,)
    else:
        setattr(err, "__notes__", [*getattr(err, "__notes__", []), extra.strip()])
