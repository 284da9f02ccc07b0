"""Host memory that stays mapped between calls: a size-class pool of raw blocks.

In: requests for scratch blocks (`take(nbytes)` / `give(block)`) and for output arrays
(`array(shape, dtype)`). Out: 64-byte aligned NumPy memory, reused instead of freshly
mapped, so a call on large arrays takes no page faults once the pool is warm.

An output array is a read-only view of a pooled block owned by a `_Lease`; NumPy keeps the
lease alive as the `base` of every view derived from the array, and when the last view dies
the lease's finalizer returns the block. So a block is never handed out while any view of it
lives. Free blocks are kept up to `limit_bytes` (least recently freed are dropped first).
Requests under `MIN_POOLED_BYTES` go straight to NumPy (64-byte aligned, `aligned_empty`).
The pool starts at 64 KiB although a pooled array costs ~10 us (its lease, finalizer and
array interface) against ~1.5 us for `np.empty` of the same size: with plain heap memory,
glibc gives freed blocks of a few hundred KiB back to the system (its trim threshold follows
its mmap threshold) and the next call takes page faults on them; a 256 x 256 matmul with a
bias epilogue (an intermediate and an output of 256 KiB) ran 750-950 us per call that way
against 440-450 us pooled (2-core EPYC VM).
`exclusively_owned` is the check donation (jit's `donate_argnums`) makes before an output
may be written into a donated array.
"""
from __future__ import annotations

import collections
import ctypes
import math
import sys
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

MIN_POOLED_BYTES = 1 << 16
DEFAULT_LIMIT_BYTES = 1 << 30
ALIGN = 64
_STEPS_PER_OCTAVE = 8


def size_class(nbytes: int) -> int:
    """The capacity of the block that serves `nbytes`: a multiple of 4 KiB, at most 1/8
    (one step of eight per power of two) larger than asked."""
    nbytes = max(int(nbytes), 1)
    top = 1 << (nbytes - 1).bit_length()
    step = max(top // (2 * _STEPS_PER_OCTAVE), 4096)
    return -(-nbytes // step) * step


def _new_block(capacity: int) -> np.ndarray:
    return aligned_empty((capacity,), np.dtype(np.uint8))[0]


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype) -> tuple[np.ndarray, int]:
    """A fresh writable C-contiguous array whose data starts on a 64-byte boundary, and that
    address. (NumPy aligns to 16 bytes only: a GEMM writing a 16-byte aligned output ran
    2.5x slower, its vector rows split across cache lines.)"""
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + ALIGN, np.uint8)
    address = _address(raw)
    start = -address % ALIGN
    return raw[start:start + nbytes].view(dtype).reshape(shape), address + start


_EXACT: dict[np.dtype, bool] = {}


class _Lease:
    """Owns one pooled block while NumPy arrays view it (it is their `base`); gives it back
    to its pool when the last of them dies (`__del__`: a tenth of a weakref.finalize)."""

    __slots__ = ("__array_interface__", "__weakref__", "block", "pool")

    def __init__(self, block: np.ndarray, address: int, shape: tuple[int, ...],
                 typestr: str, pool: BufferPool):
        self.block, self.pool = block, pool
        self.__array_interface__ = {"shape": shape, "typestr": typestr, "version": 3,
                                    "data": (address, True)}

    def __del__(self) -> None:
        self.pool.give(self.block)


def _address(block: np.ndarray) -> int:
    """The data address of a writable block (a third of the cost of `block.ctypes.data`)."""
    # NumPy's stubs make ndarray a Buffer only for Python 3.12+
    return ctypes.addressof(ctypes.c_char.from_buffer(block))  # type: ignore[arg-type]


@dataclass
class PoolStats:
    """Counters of one pool: requests served from cache (`hits`) or by a new block."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    cached_bytes: int = 0


class BufferPool:
    """A thread-safe pool of raw blocks, bucketed by `size_class`, bounded by bytes."""

    def __init__(self, limit_bytes: int = DEFAULT_LIMIT_BYTES,
                 min_bytes: int = MIN_POOLED_BYTES):
        self.limit_bytes, self.min_bytes = limit_bytes, min_bytes
        self.stats = PoolStats()
        self._lock = threading.Lock()
        self._free: dict[int, list[np.ndarray]] = {}
        self._lru: collections.OrderedDict[int, np.ndarray] = collections.OrderedDict()
        self._returned: collections.deque[np.ndarray] = collections.deque()

    def take(self, nbytes: int) -> np.ndarray:
        """A writable uint8 block of at least `nbytes` bytes; `give` it back when done."""
        if nbytes < self.min_bytes:
            return _new_block(nbytes)
        capacity = size_class(nbytes)
        with self._lock:
            self._drain()
            bucket = self._free.get(capacity)
            if bucket:
                block = bucket.pop()
                del self._lru[id(block)]
                self.stats.cached_bytes -= capacity
                self.stats.hits += 1
                return block
            self.stats.misses += 1
        return _new_block(capacity)

    def give(self, block: np.ndarray) -> None:
        """Return a block from `take`; the caller must hold no view of it any more.
        Never blocks (finalizers call it at arbitrary points, even inside `take`)."""
        if block.nbytes < self.min_bytes:
            return
        self._returned.append(block)
        if self._lock.acquire(blocking=False):
            try:
                self._drain()
            finally:
                self._lock.release()

    def array(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A read-only C-contiguous array whose block returns to the pool when the array and
        every view of it are gone (native code writes it through its address)."""
        return self.array_at(shape, dtype)[0]

    def array_at(self, shape: tuple[int, ...], dtype: Any) -> tuple[np.ndarray, int]:
        """`array(shape, dtype)` and its data address."""
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes < self.min_bytes:
            arr, address = aligned_empty(tuple(shape), dtype)
            arr.flags.writeable = False
            return arr, address
        exact = _EXACT.get(dtype)
        if exact is None:   # does the interface's type string name it (bfloat16's: void)?
            exact = _EXACT[dtype] = np.dtype(dtype.str) == dtype
        block = self.take(nbytes)
        address = _address(block)
        lease = _Lease(block, address, tuple(shape) if exact else (nbytes,),
                       dtype.str if exact else "|u1", self)
        arr = np.asarray(lease)  # read-only; its `base` is the lease
        return (arr if exact else arr.view(dtype).reshape(shape)), address

    def clear(self) -> None:
        """Drop every cached free block (blocks in use are unaffected)."""
        with self._lock:
            self._drain()
            self._free.clear()
            self._lru.clear()
            self.stats.cached_bytes = 0

    def _drain(self) -> None:
        """Move returned blocks into their buckets, then trim to the limit (lock held)."""
        while self._returned:
            block = self._returned.popleft()
            self._free.setdefault(block.nbytes, []).append(block)
            self._lru[id(block)] = block
            self.stats.cached_bytes += block.nbytes
        while self.stats.cached_bytes > self.limit_bytes and self._lru:
            _, block = self._lru.popitem(last=False)
            bucket = self._free[block.nbytes]
            bucket.pop(next(i for i, b in enumerate(bucket) if b is block))
            self.stats.cached_bytes -= block.nbytes
            self.stats.evictions += 1


def exclusively_owned(arr: Any, holders: int) -> bool:
    """Whether nothing but the caller's `holders` known references reaches the memory of
    `arr`: no other array object, no NumPy view, no memoryview. Conservative:
    only arrays that own their data or are whole pooled outputs qualify."""
    if type(arr) is not np.ndarray or not arr.flags.c_contiguous:
        return False
    if sys.getrefcount(arr) != holders + 2:  # + this call's parameter and getrefcount's
        return False
    base = arr.base
    if base is None:
        return arr.flags.owndata
    if type(base) is np.ndarray:  # an `aligned_empty` array: a view of its raw bytes
        offset = arr.ctypes.data - base.ctypes.data
        return base.flags.owndata and base.dtype == np.uint8 and 0 <= offset < ALIGN \
            and offset + arr.nbytes <= base.nbytes and sys.getrefcount(base) == 3
    if type(base) is not _Lease or arr.ctypes.data != base.block.ctypes.data:
        return False
    return sys.getrefcount(base) == 3  # arr.base, the local `base`, the argument


POOL = BufferPool()
