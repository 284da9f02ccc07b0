"""Which outputs of a kernel to write with non-temporal ("streaming") stores.

An ordinary store first reads the output's cache line from memory (to own it), so a kernel
that writes N bytes moves 2N over the memory bus for them. A non-temporal store writes
whole lines around the caches and skips that read. It pays only when:
- the outputs are larger than the last-level cache (a later kernel would not have found
  them in cache anyway; smaller ones are better left there);
- the kernel is bound by memory, not arithmetic: a slow loop fills its write-combining
  buffers slowly, they are flushed half full, and partial lines cost more than the read
  saved (measured: W1's exp/tanh/sigmoid chain went 20 -> 35 ms with them);
- the kernel writes one output, at the loop's own index, in order, so each line fills
  whole before the next: two outputs written half a line at a time (as the vectorized
  loop interleaves them) were 4-8x slower than ordinary stores on this VM (`relu(x)` and
  `x * 2` of 2^24 float32 in one kernel: 10-15 -> 43-52 ms).

So a kernel qualifies when it is one loop with one store `out[i] = f(...)`, no
transcendental in `f`, a few dozen ops at most, elements of at least 2 bytes and at least
`STREAM_MIN_BYTES` of output. The llvm renderer (`render.py`) writes such a kernel's
aligned middle with non-temporal vector stores, and its unaligned ends (and any call whose
outputs are not 64-byte aligned) with ordinary ones. Measured on this VM (2 cores, 32 MiB
L3): `x + 1` on 2^24 float32 6.6 -> 5.1 ms.
"""
from __future__ import annotations

from fgrad.lower.kernel.index import Ix, Sym
from fgrad.lower.kernel.ir import Expr, Kernel, Loop, Op, Store
from fgrad.lower.schedule.partition import COSTLY

LINE_BYTES = 64          # a cache line: the unit a streaming store fills, and the alignment
MAX_STREAMED_OPS = 32    # ops per element at most (the renderer unrolls a line's elements)


def _last_level_cache_bytes() -> int:
    """The largest cache's size from Linux's sysfs; 32 MiB where it does not say."""
    sizes = []
    for index in range(8):
        try:
            with open(f"/sys/devices/system/cpu/cpu0/cache/index{index}/size") as f:
                text = f.read().strip()
        except OSError:
            break
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text[:-1] if text[-1:] in "KMG" else text
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=32 << 20)


STREAM_MIN_BYTES = _last_level_cache_bytes()


def _at_loop_index(index: Ix, sym: Sym) -> bool:
    return index.const == 0 and index.terms == ((sym, 1),)


def _op_count(e: Expr, seen: set[int]) -> int | None:
    """Ops in `e` not counted yet (None when one is a transcendental)."""
    if not isinstance(e, Op) or id(e) in seen:
        return 0
    seen.add(id(e))
    if e.op in COSTLY:
        return None
    total = 1
    for a in e.args:
        n = _op_count(a, seen)
        if n is None:
            return None
        total += n
    return total


def streamed_outputs(kernel: Kernel) -> tuple[int, ...]:
    """The parameter numbers of the outputs `kernel` writes with streaming stores (module
    docstring); () when it does not qualify."""
    if kernel.row_range or len(kernel.body) != 1 or not isinstance(kernel.body[0], Loop):
        return ()
    loop = kernel.body[0]
    if len(loop.body) != 1 or not isinstance(loop.body[0], Store):
        return ()
    store = loop.body[0]
    ops = _op_count(store.value, set())
    if ops is None or ops > MAX_STREAMED_OPS or not _at_loop_index(store.index, loop.sym):
        return ()
    itemsize = kernel.params[store.buf].dtype.itemsize
    if itemsize < 2 or loop.sym.extent * itemsize < STREAM_MIN_BYTES:
        return ()
    return (store.buf,)


def line_elements(kernel: Kernel, streamed: tuple[int, ...]) -> int:
    """Elements of the streamed outputs per cache line."""
    return LINE_BYTES // kernel.params[streamed[0]].dtype.itemsize
