"""`fgrad.clear_caches()`: drop every trace and compiled program fgrad keeps in memory.

Backends keep caches of their own (engines, pooled memory, eager device programs); each
registers a clearer here when it is imported, so this module never imports a backend.
"""
from __future__ import annotations

import gc
import sys
from typing import Callable

from fgrad import flags

_CLEARERS: list[Callable[[], None]] = []
_AFTER_COLLECT: list[Callable[[], None]] = []


def register_clearer(clear: Callable[[], None], after_collect: bool = False) -> None:
    """Have `clear_caches` call `clear` (after the garbage collection that frees compiled
    programs, when `after_collect`: e.g. for memory that dead programs still hold)."""
    (_AFTER_COLLECT if after_collect else _CLEARERS).append(clear)


def clear_caches() -> None:
    """Forget every jitted function's traces, the compiled programs they hold, the LLVM
    engines kept for reuse, the cached eager device programs and the free blocks of the
    buffer pool. Calls running on other threads keep what they use until they return; the
    on-disk compile cache is untouched (delete FGRAD_CACHE_DIR for that)."""
    jit_module = sys.modules["fgrad.transforms.jit"]  # the package re-exports `jit` itself
    for jitted in list(jit_module._LIVE):
        jitted.clear_cache()
    for clear in _CLEARERS:
        clear()
    gc.collect()  # compiled programs and their jaxprs reference each other
    for clear in _AFTER_COLLECT:
        clear()


def _on_setting_change(name: str) -> None:
    """A jitted function traced before `enable_x64` changed holds constants in the old
    default dtypes: retrace (JAX keys its caches on the flag instead)."""
    if name == "enable_x64" and "fgrad.transforms.jit" in sys.modules:
        clear_caches()


flags.ON_CHANGE.append(_on_setting_change)
