"""Trace and compile timing through `logging` (logger "fgrad.jit").

Every trace/compile is logged at INFO when the `log_compiles` setting is on
(`fgrad.config.update("log_compiles", True)` or FGRAD_LOG_COMPILES=1); one slower than
`SLOW_COMPILE_S` seconds is logged at WARNING whatever the setting, naming the function, its
signature and why it was (re)traced.
"""
from __future__ import annotations

import logging
from typing import Any

from fgrad import flags
from fgrad.core.api_util import fn_name

log = logging.getLogger("fgrad.jit")
SLOW_COMPILE_S = 5.0


def log_compile(jitted: Any, leaves: list[Any], retraced: bool, trace_s: float,
                compile_s: float) -> None:
    """Log one call's tracing and compiling of `jitted` (a JittedFunction)."""
    slow = trace_s + compile_s > SLOW_COMPILE_S
    if not (slow or flags.setting("log_compiles")):
        return
    if not retraced:
        why = "first compile for this backend"
    elif jitted.info.misses == 1:
        why = "first call"
    else:
        why = f"retraced: {jitted.last_retrace_reason}"
    sig = ", ".join(f"{x.dtype.name}{list(x.shape)}" for x in leaves)
    level = logging.WARNING if slow else logging.INFO
    log.log(level, "jit(%s)(%s): traced in %.3f s, compiled in %.3f s for backend %r (%s)",
            fn_name(jitted.fn), sig, trace_s, compile_s, jitted._backend(), why)
