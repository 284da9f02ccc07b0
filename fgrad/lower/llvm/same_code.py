"""Units whose LLVM IR is the same text compile once, whatever their cache keys.

A kernel's cache key (kernel_cache.py) hashes its kernel IR, loop extents included, so a
kernel is found in a cache without being rendered. Kernels that differ only in an extent can
still render to the same LLVM IR: a loop that threads split runs a [start, stop) given at run
time, so the Adam updates of W5's 784 x 512 and 512 x 512 weights are one function, ~10 ms
of LLVM each on a cold start. So before a unit is compiled, its neutral text (the function
named `fgrad_kernel`, its parameters by position) is hashed with its level; a unit whose text
an earlier unit of this process claimed takes that unit's object code with the exported
symbol renamed. Both symbols are `fgk_` and 32 hex digits, so the object's string table keeps
its layout: the copy is the same bytes but the name.
"""
from __future__ import annotations

import hashlib
import threading

_FIRST: dict[str, str] = {}   # digest of (level, text) -> key of the unit that claimed it
_lock = threading.Lock()
KEPT = 4096   # digests remembered; past this the table starts over


def claim(text: str, level: int | None, key: str) -> str:
    """The key whose object code serves a unit of `text` compiled at `level`: the first
    key that claimed this text, or `key` itself (now its claimant)."""
    digest = hashlib.sha256(f"O{level}\n{text}".encode()).hexdigest()
    with _lock:
        if len(_FIRST) >= KEPT and digest not in _FIRST:
            _FIRST.clear()
        return _FIRST.setdefault(digest, key)


def renamed(obj: bytes, symbol: str, new_symbol: str) -> bytes:
    """Object code `obj` exporting `symbol`, with that name replaced by `new_symbol` (of
    the same length, so no offset in the object moves)."""
    if len(symbol) != len(new_symbol) or obj.count(symbol.encode()) == 0:
        raise ValueError(f"same_code.renamed: cannot rename {symbol!r} to {new_symbol!r}")
    return obj.replace(symbol.encode(), new_symbol.encode())


def forget() -> None:
    """Forget every claim (with the objects kept in memory, `kernel_cache.clear_memory`)."""
    with _lock:
        _FIRST.clear()
