"""Compiled code on disk, so a fresh process skips LLVM's optimizer and code generator.

In: a key (hex digest chosen by the runtime: it hashes everything the code depends on) and
the bytes of an object file. Out: the bytes again in a later process, or None.

The directory is `fgrad.flags.cache_dir()` (FGRAD_CACHE_DIR); "" or "0" turns the cache off.
Each entry is one file written atomically (a temporary file, then `os.replace`) with a
header: magic, format version, payload length, the payload's sha256 and the sha256 of its
key. An entry that is truncated or corrupted, or that was written for another key (a file
copied or renamed over this key's name), fails the check, is deleted, and reads as a miss
(never loaded). A directory that cannot be written leaves fgrad working, with one warning.
Past `MAX_ENTRIES` files, the least recently used quarter is deleted (a hit refreshes an
entry's mtime).

The checks catch damage and mix-ups, not an attacker: whoever can write the directory can
make fgrad run their code (see docs/security.md). So the directory is created private
(0700), and one that another user owns, or that group or others may write, is not used
(one warning).
"""
from __future__ import annotations

import hashlib
import os
import struct
import tempfile
import warnings

from llvmlite import ir

from fgrad import flags

MAGIC = b"FGRADOBJ"
FORMAT_VERSION = 2
_HEADER = struct.Struct("<8sIQ32s32s")  # magic, version, payload length, sha256, key sha256
_SUFFIX = ".fgo"
MAX_ENTRIES = 4096
_warned: set[str] = set()


def directory(kind: str = "llvm") -> str | None:
    """The cache directory of `kind` (whole programs: "llvm"; single kernels:
    "llvm_kernels"), or None when FGRAD_CACHE_DIR disables the cache."""
    path = flags.cache_dir()
    return None if path.strip() in ("", "0") else os.path.join(path, kind)


def _path(key: str, kind: str = "llvm") -> str | None:
    folder = directory(kind)
    return None if folder is None else os.path.join(folder, key + _SUFFIX)


def _key_digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def encode(payload: bytes, key: str = "") -> bytes:
    """An entry of `key`: the header, then the payload."""
    digest = hashlib.sha256(payload).digest()
    return _HEADER.pack(MAGIC, FORMAT_VERSION, len(payload), digest,
                        _key_digest(key)) + payload


def decode(entry: bytes, key: str = "") -> bytes | None:
    """The payload of an entry of `key`, or None when the entry is damaged, of another
    format, or was written for another key."""
    if len(entry) < _HEADER.size:
        return None
    magic, version, length, digest, key_digest = _HEADER.unpack_from(entry)
    payload = entry[_HEADER.size:]
    if magic != MAGIC or version != FORMAT_VERSION or length != len(payload) \
            or key_digest != _key_digest(key):
        return None
    return payload if hashlib.sha256(payload).digest() == digest else None


def _trusted(folder: str) -> bool:
    """Whether only this user can write `folder` and the cache directory holding it."""
    getuid = getattr(os, "getuid", None)
    for path in (folder, os.path.dirname(folder)):
        try:
            info = os.stat(path)
        except OSError:
            continue
        if (getuid is not None and info.st_uid != getuid()) or info.st_mode & 0o022:
            break
    else:
        return True
    if folder not in _warned:
        _warned.add(folder)
        warnings.warn(f"fgrad: not using the compile cache {folder!r}: another user owns it or "
                      f"group/others may write it, and its entries are run as code. Use a "
                      f"private directory (chmod 700) in FGRAD_CACHE_DIR, or 0 to turn the "
                      f"cache off", RuntimeWarning, stacklevel=3)
    return False


def has(key: str, kind: str = "llvm") -> bool:
    """Whether an entry of `key` exists (unread: `load` may still find it damaged)."""
    path = _path(key, kind)
    return path is not None and os.path.exists(path)


def load(key: str, kind: str = "llvm") -> bytes | None:
    """The cached payload of `key`; None on a miss. A damaged entry is deleted."""
    path = _path(key, kind)
    if path is None or not _trusted(os.path.dirname(path)):
        return None
    try:
        with open(path, "rb") as f:
            entry = f.read()
    except OSError:
        return None
    payload = decode(entry, key)
    if payload is None:
        _remove(path)
    else:
        _touch(path)
    return payload


def store(key: str, payload: bytes, kind: str = "llvm") -> None:
    """Write the entry of `key` atomically; failures only warn (once per directory)."""
    path = _path(key, kind)
    if path is None:
        return
    folder = os.path.dirname(path)
    tmp = None
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if not _trusted(folder):
            return
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=_SUFFIX, dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(encode(payload, key))
        os.replace(tmp, path)
        _prune(folder)
    except OSError as err:
        if tmp is not None:
            _remove(tmp)
        if folder not in _warned:
            _warned.add(folder)
            warnings.warn(f"fgrad: cannot write the compile cache in {folder!r} ({err}); "
                          f"compiled code will not be reused across processes. Set "
                          f"FGRAD_CACHE_DIR to a writable directory, or to 0 to turn the "
                          f"cache off", RuntimeWarning, stacklevel=2)


def _prune(folder: str) -> None:
    """Keep the directory under MAX_ENTRIES entries, dropping the least recently used."""
    names = [n for n in os.listdir(folder) if n.endswith(_SUFFIX) and not n.startswith(".")]
    if len(names) <= MAX_ENTRIES:
        return
    paths = [os.path.join(folder, n) for n in names]
    aged = sorted(paths, key=_mtime)
    for path in aged[:len(aged) - MAX_ENTRIES * 3 // 4]:
        _remove(path)


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _touch(path: str) -> None:
    try:
        os.utime(path)
    except OSError:
        pass


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


class Signatures:
    """Function types of library calls by key, in memory and on disk (folder
    "llvm_signatures"), written as the types' names, one per argument; anything else read
    back is a miss."""

    FOLDER = "llvm_signatures"
    _TYPES = {str(t): t for t in (ir.IntType(8), ir.IntType(32), ir.IntType(64),
                                  ir.HalfType(), ir.FloatType(), ir.DoubleType())}

    def __init__(self) -> None:
        self._known: dict[str, ir.FunctionType] = {}

    def store(self, key: str, ftype: ir.FunctionType) -> None:
        """Remember the (void) function type of unit `key`."""
        self._known[key] = ftype
        store(key, ",".join(str(a) for a in ftype.args).encode(), self.FOLDER)

    def load(self, key: str) -> ir.FunctionType | None:
        """The function type of unit `key`, or None when unknown or unreadable."""
        if key in self._known:
            return self._known[key]
        data = load(key, self.FOLDER)
        if data is None:
            return None
        args = []
        for name in data.decode("ascii", "replace").split(","):
            base = self._TYPES.get(name.removesuffix("*"))
            if base is None or name.count("*") > 1:
                return None
            args.append(base.as_pointer() if name.endswith("*") else base)
        self._known[key] = ftype = ir.FunctionType(ir.VoidType(), args)
        return ftype

    def clear(self) -> None:
        """Forget the types kept in memory (the disk entries stay)."""
        self._known.clear()


signatures = Signatures()
