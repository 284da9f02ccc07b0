"""Byte-level helpers shared by the checkpoint readers in `fgrad.nn.state`.

A file is opened as a read-only, memory-mapped uint8 array (`open_bytes`). Readers take
bounds-checked slices of it (`Blob.view`), so a malformed length raises `StateFileError`
instead of reading past the end or allocating what the file cannot hold.
"""
from __future__ import annotations

import mmap
import os
import struct
from typing import Any

import numpy as np

from fgrad.core.tensor import Tensor


class StateFileError(ValueError):
    """A checkpoint file (safetensors, PyTorch, GGUF) is malformed or unsupported."""


class Blob:
    """The bytes of one file as a read-only uint8 array, plus its name for error messages."""

    def __init__(self, data: np.ndarray, name: str):
        self.data = data
        self.name = name

    def __len__(self) -> int:
        return int(self.data.shape[0])

    def fail(self, problem: str) -> StateFileError:
        """An error that names this file and the problem."""
        return StateFileError(f"{self.name}: {problem}")

    def view(self, offset: int, nbytes: int, what: str) -> np.ndarray:
        """The bytes [offset, offset + nbytes) without copying; raises if out of range."""
        if offset < 0 or nbytes < 0 or offset + nbytes > len(self):
            raise self.fail(f"{what} needs bytes [{offset}, {offset + nbytes}) but the file "
                            f"has {len(self)} bytes (truncated or corrupted)")
        return self.data[offset:offset + nbytes]

    def array(self, offset: int, dtype: np.dtype, shape: tuple[int, ...], what: str) -> np.ndarray:
        """`shape` elements of `dtype` at `offset`, read-only, memory-mapped when aligned."""
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=object))
        raw = self.view(offset, count * dtype.itemsize, what)
        if count == 0:
            return read_only(np.zeros(shape, dtype))
        arr = raw.view(dtype).reshape(shape)
        return arr if arr.flags.aligned else read_only(arr.copy())


def read_only(arr: np.ndarray) -> np.ndarray:
    """`arr` with its writeable flag cleared (a Tensor only wraps read-only arrays)."""
    arr.flags.writeable = False
    return arr


def open_bytes(source: Any, *, what: str) -> Blob:
    """Open a path, a uint8 Tensor, or bytes as a `Blob`; files are memory-mapped."""
    if isinstance(source, Tensor):
        data = np.asarray(source)
        if data.dtype != np.uint8:
            raise TypeError(f"{what} expects a file name or a uint8 Tensor of file bytes, "
                            f"got a {source.dtype!r} Tensor")
        return Blob(read_only(data.reshape(-1)), f"<{what} Tensor>")
    if isinstance(source, (bytes, bytearray, memoryview)):
        return Blob(np.frombuffer(bytes(source), np.uint8), f"<{what} bytes>")
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"{what} expects a file name (str or Path), got "
                        f"{type(source).__name__}")
    path = os.fspath(source)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return Blob(read_only(np.zeros(0, np.uint8)), path)
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return Blob(np.frombuffer(mapped, np.uint8), path)


class Cursor:
    """Sequential little-endian reads from a `Blob`; every read is bounds-checked."""

    def __init__(self, blob: Blob, pos: int = 0):
        self.blob = blob
        self.pos = pos

    @property
    def remaining(self) -> int:
        """Bytes left after the current position."""
        return len(self.blob) - self.pos

    def take(self, nbytes: int, what: str) -> np.ndarray:
        """The next `nbytes` bytes (a view)."""
        out = self.blob.view(self.pos, nbytes, what)
        self.pos += nbytes
        return out

    def unpack(self, fmt: str, what: str) -> Any:
        """One value of struct format `fmt` (little-endian)."""
        size = struct.calcsize("<" + fmt)
        return struct.unpack("<" + fmt, self.take(size, what).tobytes())[0]

    def count(self, fmt: str, min_item_bytes: int, what: str) -> int:
        """A length field, checked against what the rest of the file can hold."""
        n = self.unpack(fmt, what)
        if n * min_item_bytes > self.remaining:
            raise self.blob.fail(f"{what} is {n}, but only {self.remaining} bytes remain "
                                 f"(corrupted or truncated)")
        return n


class ByteStream:
    """A read-only file object over a `Blob` slice that never allocates past its end.

    `pickle` and `zipfile` read through it; `read(n)` returns at most the bytes that exist,
    so a corrupted length inside a pickle cannot trigger a giant allocation.
    """

    def __init__(self, data: np.ndarray):
        self._mv = data.data
        self._pos = 0

    def read(self, n: int = -1) -> bytes:
        end = len(self._mv) if n is None or n < 0 else min(len(self._mv), self._pos + n)
        out = self._mv[self._pos:end].tobytes()
        self._pos = max(self._pos, end)
        return out

    def readinto(self, buf: Any) -> int:
        out = memoryview(buf).cast("B")
        n = max(0, min(len(out), len(self._mv) - self._pos))
        out[:n] = self._mv[self._pos:self._pos + n]
        self._pos += n
        return n

    def readline(self, limit: int = -1) -> bytes:
        end = len(self._mv) if limit is None or limit < 0 else self._pos + limit
        start = self._pos
        while self._pos < min(end, len(self._mv)):
            chunk = self._mv[self._pos:min(end, self._pos + 4096)].tobytes()
            hit = chunk.find(b"\n")
            if hit >= 0:
                self._pos += hit + 1
                break
            self._pos += len(chunk)
        return self._mv[start:self._pos].tobytes()

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: len(self._mv)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True
