"""`torch_load`: read PyTorch checkpoints (.pt/.pth) without importing torch.

Both formats `torch.save` writes are read: the zip archive (`<root>/data.pkl` plus one
stored entry per storage under `<root>/data/`) and the legacy stream (`_use_new_zipfile_
serialization=False`: magic, protocol and system-info pickles, the object pickle, the list
of storage keys, then each storage as an int64 element count followed by its bytes).

The pickle is read by an unpickler that resolves only tensor-rebuild functions, storage
and dtype names, `OrderedDict` and harmless builtins; any other global raises
`UnsafePickleError` before it can run. The pickle is also scanned opcode by opcode first,
so a corrupted length fails cleanly instead of allocating.
"""
from __future__ import annotations

import codecs
import collections
import io
import os
import pickle
import pickletools
import struct
import zipfile
import zlib
from typing import IO, Any, Callable, cast

import numpy as np

from fgrad.core.dtypes import DType, dtypes
from fgrad.core.tensor import Tensor
from fgrad.nn.state_io import Blob, ByteStream, Cursor, StateFileError, open_bytes, read_only

__all__ = ["UnsafePickleError", "torch_load"]

_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001


class UnsafePickleError(StateFileError, pickle.UnpicklingError):
    """A checkpoint's pickle names a global that `torch_load` refuses to resolve."""


_STORAGE_DTYPES = {
    "FloatStorage": dtypes.float32, "DoubleStorage": dtypes.float64,
    "HalfStorage": dtypes.float16, "BFloat16Storage": dtypes.bfloat16,
    "ByteStorage": dtypes.uint8, "CharStorage": dtypes.int8, "ShortStorage": dtypes.int16,
    "IntStorage": dtypes.int32, "LongStorage": dtypes.int64, "BoolStorage": dtypes.bool,
    "UntypedStorage": dtypes.uint8,
}
_TORCH_DTYPES = {
    "float32": dtypes.float32, "float64": dtypes.float64, "float16": dtypes.float16,
    "bfloat16": dtypes.bfloat16, "uint8": dtypes.uint8, "int8": dtypes.int8,
    "int16": dtypes.int16, "int32": dtypes.int32, "int64": dtypes.int64, "bool": dtypes.bool,
    "uint16": dtypes.uint16, "uint32": dtypes.uint32, "uint64": dtypes.uint64,
}


class _StorageType:
    """Stands for `torch.FloatStorage` & co. inside the pickle."""

    def __init__(self, dtype: DType):
        self.dtype = dtype


class _Marker:
    """Stands for a torch class used only as a tag (`torch.Tensor`, `nn.Parameter`)."""

    def __init__(self, name: str):
        self.name = name


class _Storage:
    """One storage: its element dtype and data (None while only the layout is known)."""

    def __init__(self, dtype: DType, data: np.ndarray | None):
        self.dtype = dtype
        self.data = data


def _latin1_encode(text: str, encoding: str = "latin1") -> bytes:
    if encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"refusing _codecs.encode with encoding {encoding!r}")
    return codecs.encode(text, "latin1")


class _Loader:
    """Rebuild functions and the unpickler for one file."""

    def __init__(self, blob: Blob):
        self.blob = blob
        self.copy_budget = 8 * len(blob) + (1 << 26)

    # ------------------------------------------------------------------ tensor rebuilding
    def rebuild_v2(self, storage: Any, storage_offset: Any, size: Any, stride: Any,
                   requires_grad: Any = False, backward_hooks: Any = None,
                   metadata: Any = None) -> Tensor | None:
        """torch._utils._rebuild_tensor_v2: a view of a typed storage."""
        if not isinstance(storage, _Storage):
            raise self.blob.fail(f"tensor storage is a {type(storage).__name__}, not a storage")
        return self.view(storage, storage.dtype, storage_offset, size, stride)

    def rebuild_v1(self, storage: Any, storage_offset: Any, size: Any, stride: Any) -> Any:
        """torch._utils._rebuild_tensor (old checkpoints)."""
        return self.rebuild_v2(storage, storage_offset, size, stride)

    def rebuild_v3(self, storage: Any, storage_offset: Any, size: Any, stride: Any,
                   requires_grad: Any, backward_hooks: Any, dtype: Any,
                   metadata: Any = None) -> Tensor | None:
        """torch._utils._rebuild_tensor_v3: an untyped storage viewed as `dtype`."""
        if not isinstance(storage, _Storage) or not isinstance(dtype, DType):
            raise self.blob.fail("_rebuild_tensor_v3 needs a storage and a dtype")
        return self.view(storage, dtype, storage_offset, size, stride)

    def rebuild_parameter(self, data: Any, requires_grad: Any = True,
                          backward_hooks: Any = None, state: Any = None) -> Any:
        """torch._utils._rebuild_parameter(_with_state): a Parameter loads as its data."""
        return data

    def rebuild_from_type(self, func: Any, new_type: Any, args: Any, state: Any) -> Any:
        """torch._tensor._rebuild_from_type_v2: a tensor with Python attributes (dropped)."""
        if func not in self.rebuilders().values() or not isinstance(args, tuple):
            raise UnsafePickleError(f"{self.blob.name}: _rebuild_from_type_v2 may only call "
                                    f"a tensor rebuild function, got {func!r}")
        return func(*args)

    def view(self, storage: _Storage, dtype: DType, offset: Any, size: Any,
             stride: Any) -> Tensor | None:
        """The tensor `size`/`stride`/`offset` (in elements of `dtype`) over `storage`."""
        if storage.data is None:
            return None
        size, stride, offset = _layout(self.blob, size, stride, offset)
        flat = storage.data
        if flat.nbytes % dtype.itemsize:
            raise self.blob.fail(f"a storage of {flat.nbytes} bytes does not hold whole "
                                 f"{dtype.name} elements")
        flat = flat.view(np.uint8).view(dtype.np)
        numel = int(np.prod(size, dtype=object))
        if numel == 0:
            return Tensor._wrap(np.zeros(size, dtype.np))
        last = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
        if last >= flat.shape[0]:
            raise self.blob.fail(f"tensor of size {size}, stride {stride}, offset {offset} "
                                 f"reads element {last} of a {flat.shape[0]}-element storage")
        if stride != _contiguous_strides(size):
            return Tensor._wrap(self.strided_copy(flat, offset, size, stride))
        arr = flat[offset:offset + numel].reshape(size)
        return Tensor._wrap(arr if arr.flags.aligned else read_only(arr.copy()))

    def strided_copy(self, flat: np.ndarray, offset: int, size: tuple, stride: tuple) -> Any:
        """A contiguous copy of a strided view, within the file's copy budget."""
        nbytes = int(np.prod(size, dtype=object)) * flat.itemsize
        if nbytes > self.copy_budget:
            raise self.blob.fail(f"strided tensors would expand to more than "
                                 f"{self.copy_budget} bytes; refusing a giant allocation")
        self.copy_budget -= nbytes
        strides = tuple(s * flat.itemsize for s in stride)
        view = np.lib.stride_tricks.as_strided(flat[offset:], size, strides, writeable=False)
        return read_only(np.ascontiguousarray(view))

    # ------------------------------------------------------------------ unpickling
    def rebuilders(self) -> dict[str, Callable]:
        """The allowed torch._utils functions, by name."""
        return {"_rebuild_tensor_v2": self.rebuild_v2, "_rebuild_tensor": self.rebuild_v1,
                "_rebuild_tensor_v3": self.rebuild_v3,
                "_rebuild_parameter": self.rebuild_parameter,
                "_rebuild_parameter_with_state": self.rebuild_parameter}

    def find_class(self, module: str, name: str) -> Any:
        """Resolve a pickle global from the allow-list; refuse everything else."""
        if module == "torch._utils" and name in self.rebuilders():
            return self.rebuilders()[name]
        if (module, name) == ("torch._tensor", "_rebuild_from_type_v2"):
            return self.rebuild_from_type
        if module in ("torch", "torch.storage") and name in _STORAGE_DTYPES:
            return _StorageType(_STORAGE_DTYPES[name])
        if module == "torch" and name in _TORCH_DTYPES:
            return _TORCH_DTYPES[name]
        if (module, name) in (("torch", "Tensor"), ("torch.nn.parameter", "Parameter")):
            return _Marker(name)
        safe = {("collections", "OrderedDict"): collections.OrderedDict,
                ("torch", "Size"): tuple, ("builtins", "set"): set,
                ("builtins", "frozenset"): frozenset, ("builtins", "slice"): slice,
                ("builtins", "complex"): complex, ("_codecs", "encode"): _latin1_encode}
        if (module, name) in safe:
            return safe[(module, name)]
        raise UnsafePickleError(
            f"{self.blob.name}: refusing to load global '{module}.{name}': torch_load only "
            f"rebuilds tensors, storages and plain containers. If you trust this file, load "
            f"it with torch.load and save its state_dict (or use safetensors).")

    def unpickle(self, data: np.ndarray, storages: Callable[[tuple], Any],
                 scanned: bool = False) -> Any:
        """Check (unless `scanned`), then load the pickle in `data`; persistent ids go to
        `storages`."""
        if not scanned:
            _scan_pickle(self.blob, data)
        loader = self

        class Restricted(_BuildCheckingUnpickler):
            source_name = loader.blob.name

            def find_class(self, module: str, name: str) -> Any:
                return loader.find_class(module, name)

            def persistent_load(self, pid: Any) -> Any:
                if not isinstance(pid, tuple) or not pid:
                    raise loader.blob.fail(f"unexpected persistent id {pid!r}")
                return storages(pid)

        return Restricted(ByteStream(data)).load()


class _BuildCheckingUnpickler(pickle._Unpickler):
    """The pure-Python unpickler with BUILD limited to OrderedDicts the pickle created.

    BUILD sets attributes on the object below it on the stack; on an allow-listed global
    (a dtype singleton, a rebuild function) that would rewrite fgrad's own objects
    process-wide. Only `OrderedDict` instances (whose `_metadata` torch pickles this way)
    take plain, non-dunder attributes.
    """

    dispatch = dict(pickle._Unpickler.dispatch)
    source_name = "<pickle>"

    def load_build(self) -> None:
        state = self.stack.pop()  # type: ignore[attr-defined]
        inst = self.stack[-1]  # type: ignore[attr-defined]
        if type(inst) is not collections.OrderedDict or not isinstance(state, dict) or not all(
                isinstance(k, str) and not k.startswith("__") for k in state):
            raise UnsafePickleError(
                f"{self.source_name}: refusing BUILD (attribute setting) on a "
                f"{type(inst).__name__}: torch_load only sets plain attributes on "
                f"OrderedDicts the checkpoint itself creates")
        inst.__dict__.update(state)

    dispatch[pickle.BUILD[0]] = load_build  # type: ignore[assignment]


def _contiguous_strides(size: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(size):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _layout(blob: Blob, size: Any, stride: Any, offset: Any) -> tuple[tuple, tuple, int]:
    def ints(x: Any) -> bool:
        return isinstance(x, tuple) and all(type(v) is int and v >= 0 for v in x)

    if not (ints(size) and ints(stride) and len(size) == len(stride) and ints((offset,))):
        raise blob.fail(f"invalid tensor layout: size {size!r}, stride {stride!r}, "
                        f"offset {offset!r}")
    dense = _contiguous_strides(size)
    stride = tuple(s if n != 1 else c for n, s, c in zip(size, stride, dense, strict=True))
    return size, stride, offset


def _scan_pickle(blob: Blob, data: np.ndarray) -> int:
    """Walk the opcodes, checking every length and memo index; return the pickle's size.

    Lengths must fit in the bytes that exist, and memo indices stay below the pickle's size
    (picklers number them from 0), so the unpickler never allocates far beyond the file.
    """
    end = 0
    try:
        for op, arg, pos in pickletools.genops(cast(IO[bytes], ByteStream(data))):
            if "PUT" in op.name and not (isinstance(arg, int) and 0 <= arg < len(data)):
                raise ValueError(f"memo index {arg} at byte {pos} is out of range")
            assert pos is not None, "a ByteStream has tell(), so genops reports positions"
            end = pos + 1
    except (ValueError, KeyError, EOFError, struct.error, UnicodeDecodeError) as err:
        raise blob.fail(f"corrupted pickle: {err}") from None
    return end


# --------------------------------------------------------------------------- zip format


def _zip_entries(blob: Blob) -> dict[str, np.ndarray]:
    """Each stored (uncompressed) zip entry's bytes, as views into the file."""
    with zipfile.ZipFile(ByteStream(blob.data)) as archive:
        infos = archive.infolist()
    entries = {}
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED:
            raise blob.fail(f"zip entry {info.filename!r} is compressed; torch.save writes "
                            f"stored entries only")
        entries[info.filename] = _entry_bytes(blob, info)
    return entries


def _entry_bytes(blob: Blob, info: zipfile.ZipInfo) -> np.ndarray:
    """An entry's bytes, after checking that its local header names the same file as the
    central directory and that the bytes match the directory's CRC-32 (as `zipfile` does),
    so a damaged directory cannot make one tensor read another entry's bytes."""
    header = Cursor(blob, info.header_offset)
    if header.take(4, "zip local header").tobytes() != b"PK\x03\x04":
        raise blob.fail(f"zip entry {info.filename!r} has no local header")
    header.pos += 22
    name_len = header.unpack("H", "zip local header")
    extra_len = header.unpack("H", "zip local header")
    local_name = header.take(name_len, "zip local header name").tobytes()
    encoding = "utf-8" if info.flag_bits & 0x800 else "cp437"
    if local_name.decode(encoding, "replace") != info.orig_filename:
        raise blob.fail(f"zip entry {info.filename!r}: its local header names "
                        f"{local_name!r} (corrupted central directory)")
    data = blob.view(header.pos + extra_len, info.file_size, f"zip entry {info.filename!r}")
    if zlib.crc32(data) != info.CRC:  # type: ignore[arg-type]
        raise blob.fail(f"zip entry {info.filename!r} fails its CRC-32 check (corrupted)")
    return data


def _load_zip(blob: Blob) -> Any:
    entries = _zip_entries(blob)
    pickles = [n for n in entries if n.endswith("data.pkl") and n.count("/") <= 1]
    if not pickles:
        raise blob.fail("zip archive has no data.pkl; not a torch.save checkpoint")
    root = pickles[0][: -len("data.pkl")]
    byteorder = entries.get(root + "byteorder")
    if byteorder is not None and byteorder.tobytes() != b"little":
        raise blob.fail(f"storages are {byteorder.tobytes()!r}-endian; only little-endian "
                        f"checkpoints are supported")
    loader, storages = _Loader(blob), {}

    def storage(pid: tuple) -> _Storage:
        kind, typ, key = (tuple(pid) + (None, None))[:3]
        if kind != "storage" or not isinstance(typ, _StorageType):
            raise blob.fail(f"unexpected persistent id {pid!r}")
        if f"{root}data/{key}" not in entries:
            raise blob.fail(f"storage {key!r} has no entry {root}data/{key} in the archive")
        if key not in storages:
            storages[key] = _Storage(typ.dtype, entries[f"{root}data/{key}"])
        return storages[key]

    return loader.unpickle(entries[root + "data.pkl"], storage)


# --------------------------------------------------------------------------- legacy format


def _legacy_header(blob: Blob, loader: _Loader, stream: ByteStream) -> None:
    for expected, what in ((_LEGACY_MAGIC, "magic number"), (_LEGACY_PROTOCOL, "protocol")):
        value = _next_pickle(blob, loader, stream, lambda pid: None)
        if value != expected:
            raise blob.fail(f"bad legacy {what} {value!r}; not a torch.save checkpoint")
    info = _next_pickle(blob, loader, stream, lambda pid: None)
    if not isinstance(info, dict) or not info.get("little_endian", False):
        raise blob.fail("legacy checkpoint is not little-endian (or has no system info)")


def _next_pickle(blob: Blob, loader: _Loader, stream: ByteStream,
                 storages: Callable[[tuple], Any]) -> Any:
    """Load the pickle that starts at the stream's position; move the stream past it."""
    start = stream.tell()
    end = start + _scan_pickle(blob, blob.data[start:])
    stream.seek(end)
    return loader.unpickle(blob.data[start:end], storages, scanned=True)


def _legacy_storages(blob: Blob, keys: Any, layout: dict[str, tuple], pos: int) -> dict:
    if not isinstance(keys, list):
        raise blob.fail(f"legacy storage key list is a {type(keys).__name__}")
    found, cursor = {}, Cursor(blob, pos)
    for key in keys:
        if key not in layout:
            raise blob.fail(f"legacy storage {key!r} is not used by any tensor")
        dtype, numel = layout[key]
        count = cursor.unpack("q", f"legacy storage {key!r} size")
        if count != numel:
            raise blob.fail(f"legacy storage {key!r} holds {count} elements, expected {numel}")
        found[key] = cursor.take(count * dtype.itemsize, f"legacy storage {key!r}")
    return found


def _load_legacy(blob: Blob) -> Any:
    loader, stream = _Loader(blob), ByteStream(blob.data)
    _legacy_header(blob, loader, stream)
    layout: dict[str, tuple] = {}

    def plan(pid: tuple) -> _Storage:
        if len(pid) != 6 or pid[0] != "storage" or not isinstance(pid[1], _StorageType):
            raise blob.fail(f"unexpected persistent id {pid!r}")
        _, typ, key, _, numel, view = pid
        if type(numel) is not int or numel < 0 or view is not None:
            raise blob.fail(f"unsupported legacy storage {key!r} (numel {numel!r}, view "
                            f"{view!r})")
        layout[key] = (typ.dtype, numel)
        return _Storage(typ.dtype, None)

    main = stream.tell()
    _next_pickle(blob, loader, stream, plan)
    keys = _next_pickle(blob, loader, stream, lambda pid: None)
    data = _legacy_storages(blob, keys, layout, stream.tell())
    stream.seek(main)
    storages = {key: _Storage(layout[key][0], data[key]) for key in data}

    def resolve(pid: tuple) -> _Storage:
        if pid[2] not in storages:
            raise blob.fail(f"legacy storage {pid[2]!r} is missing from the file")
        return storages[pid[2]]

    return _next_pickle(blob, loader, stream, resolve)


# --------------------------------------------------------------------------- entry point

_FAILURES = (pickle.UnpicklingError, zipfile.BadZipFile, EOFError, ValueError, KeyError,
             IndexError, TypeError, AttributeError, struct.error, UnicodeDecodeError,
             OverflowError, RecursionError, NotImplementedError, io.UnsupportedOperation)


def torch_load(t: str | os.PathLike | Tensor) -> Any:
    """Load a PyTorch checkpoint (zip or legacy format) with every tensor as a Tensor.

    Returns what was saved, usually a (nested) dict of name -> Tensor. Contiguous tensors
    are memory-mapped views of the file. Pickled globals other than tensor, storage and
    container types raise `UnsafePickleError` and are never called.
    """
    blob = open_bytes(t, what="torch_load")
    head = blob.data[:6].tobytes()
    try:
        if head.startswith(b"PK\x03\x04"):
            return _load_zip(blob)
        if head.startswith(b"\x80"):
            return _load_legacy(blob)
    except StateFileError:
        raise
    except _FAILURES as err:
        raise blob.fail(f"corrupted PyTorch checkpoint ({type(err).__name__}: {err})") from err
    if len(blob) > 262 and blob.data[257:262].tobytes() == b"ustar":
        raise blob.fail("tar-based PyTorch checkpoints (torch < 0.4) are not supported")
    raise blob.fail("not a PyTorch checkpoint (neither a zip archive nor a legacy pickle)")
