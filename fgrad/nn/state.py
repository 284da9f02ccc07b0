"""Model state: named Tensors of a pytree, and checkpoint files.

`get_state_dict(model)` names every Tensor leaf of a pytree by its path ('layers.0.weight');
`load_state_dict(model, sd)` returns a new model with those leaves replaced. `safe_save` /
`safe_load` write and read safetensors files; `torch_load` reads PyTorch checkpoints without
importing torch; `gguf_load` reads GGUF files. Loaded Tensors wrap memory-mapped data.
"""
from __future__ import annotations

import copy
import functools
import json
import os
import types
import uuid
import warnings
from typing import Any, Callable

import numpy as np

from fgrad.core import tree_util
from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor
from fgrad.nn.state_gguf import gguf_load
from fgrad.nn.state_io import Blob, StateFileError, open_bytes
from fgrad.nn.state_torch import UnsafePickleError, torch_load

__all__ = ["StateFileError", "UnsafePickleError", "get_state_dict", "get_parameters",
           "load_state_dict", "safe_save", "safe_load", "safe_load_metadata", "torch_load",
           "gguf_load"]

# --------------------------------------------------------------------------- pytree state


def _key_name(key: Any) -> str:
    if isinstance(key, tree_util.SequenceKey):
        return str(key.idx)
    if isinstance(key, tree_util.DictKey):
        return str(key.key)
    if isinstance(key, tree_util.GetAttrKey):
        return key.name
    if isinstance(key, tree_util.FlattenedIndexKey):
        return str(key.key)
    return str(key)


def _children(obj: Any) -> tuple[list[tuple[str, Any]], Callable[[list[Any]], Any]] | None:
    """Named children of one node and a function rebuilding it; None for a leaf."""
    keyed, treedef = tree_util.tree_flatten_with_path(obj, is_leaf=lambda x: x is not obj)
    if not treedef.is_leaf():
        named = [(_key_name(path[-1]), child) for path, child in keyed]
        return named, lambda kids: tree_util.tree_unflatten(treedef, kids)
    if hasattr(obj, "__dict__") and not isinstance(obj, _OPAQUE):
        return list(vars(obj).items()), lambda kids: _replace_attrs(obj, kids)
    return None


# objects with a __dict__ that are not containers of model state
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
           types.MethodType, functools.partial)


def _replace_attrs(obj: Any, kids: list[Any]) -> Any:
    new = copy.copy(obj)
    vars(new).update(zip(vars(obj), kids, strict=True))
    return new


def _map_named(obj: Any, prefix: str, fn: Callable[[str, Any], Any], tensor_type: type,
               active: frozenset = frozenset()) -> Any:
    """Rebuild `obj` with every `tensor_type` leaf replaced by `fn(dotted_name, leaf)`."""
    if isinstance(obj, tensor_type):
        return fn(prefix, obj)
    node = None if id(obj) in active else _children(obj)
    if node is None:
        return obj
    named, rebuild = node
    inner = active | {id(obj)}
    kids = [_map_named(child, f"{prefix}.{name}" if prefix else name, fn, tensor_type, inner)
            for name, child in named]
    if all(new is old for new, (_, old) in zip(kids, named, strict=True)):
        return obj
    return rebuild(kids)


def get_state_dict(obj: Any, prefix: str = "", tensor_type: type = Tensor) -> dict[str, Tensor]:
    """The Tensors of a pytree (module, dict, list, namedtuple, object) by dotted path name.

    Example: `{'layers': [{'weight': w}]}` gives `{'layers.0.weight': w}`.
    """
    state: dict[str, Tensor] = {}

    def collect(name: str, leaf: Tensor) -> Tensor:
        if name in state:
            raise ValueError(f"get_state_dict: two Tensors are both named {name!r}; rename a "
                             f"dict key so the dotted paths differ")
        state[name] = leaf
        return leaf

    _map_named(obj, prefix.rstrip("."), collect, tensor_type)
    return state


def get_parameters(obj: Any) -> list[Tensor]:
    """The Tensors of a pytree, in `get_state_dict` order."""
    return list(get_state_dict(obj).values())


def load_state_dict(model: Any, state_dict: dict[str, Any], strict: bool = True,
                    verbose: bool = True, consume: bool = False) -> Any:
    """A copy of `model` whose Tensors are replaced by `state_dict` entries of the same name.

    Values are cast to the model Tensor's dtype and must have its shape. With `strict`,
    missing and unexpected names raise one `ValueError` listing both; otherwise missing Tensors
    keep their values (a warning lists the differences when `verbose`). `consume=True`
    removes loaded entries from `state_dict` to free memory early. The model is not changed.
    """
    names = get_state_dict(model)
    missing = sorted(names.keys() - state_dict.keys())
    unexpected = sorted(state_dict.keys() - names.keys())
    if strict and (missing or unexpected):
        raise ValueError(f"load_state_dict: state_dict does not match the model: missing "
                         f"keys {missing}, unexpected keys {unexpected}; pass strict=False to "
                         f"load the common keys only")
    if verbose and (missing or unexpected):
        warnings.warn(f"load_state_dict: not loading {missing}; unused {unexpected}",
                      stacklevel=2)

    def replace(name: str, old: Tensor) -> Tensor:
        if name not in state_dict:
            return old
        new = state_dict.pop(name) if consume else state_dict[name]
        new = new if isinstance(new, Tensor) else Tensor(np.asarray(new))
        if tuple(new.shape) != tuple(old.shape):
            raise ValueError(f"load_state_dict: shape mismatch for {name!r}: the model has "
                             f"{tuple(old.shape)}, the state_dict has {tuple(new.shape)}")
        return new if new.dtype == old.dtype else new.cast(old.dtype)

    return _map_named(model, "", replace, Tensor)


# --------------------------------------------------------------------------- safetensors

_SAFE_DTYPES = {"BOOL": dtypes.bool, "U8": dtypes.uint8, "I8": dtypes.int8,
                "I16": dtypes.int16, "U16": dtypes.uint16, "F16": dtypes.float16,
                "BF16": dtypes.bfloat16, "I32": dtypes.int32, "U32": dtypes.uint32,
                "F32": dtypes.float32, "F64": dtypes.float64, "I64": dtypes.int64,
                "U64": dtypes.uint64}
_SAFE_NAMES = {dt.np: name for name, dt in _SAFE_DTYPES.items()}
# the safetensors package stores wider dtypes first (its dtype order, reversed), then by name
_SAFE_RANK = {name: i for i, name in enumerate(_SAFE_DTYPES)}
_MAX_HEADER = 100_000_000


def _safe_arrays(tensors: dict[str, Any]) -> list[tuple[str, np.ndarray]]:
    out = []
    for name, value in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise ValueError(f"safe_save: tensor names must be strings other than "
                             f"'__metadata__', got {name!r}")
        arr = np.asarray(value)
        arr = arr if arr.flags.c_contiguous else arr.copy(order="C")
        if arr.dtype not in _SAFE_NAMES:
            raise TypeError(f"safe_save: {name!r} has dtype {arr.dtype}, which safetensors "
                            f"cannot store here; cast it to a supported dtype")
        out.append((name, arr))
    return sorted(out, key=lambda kv: (-_SAFE_RANK[_SAFE_NAMES[kv[1].dtype]], kv[0]))


def _safe_header(arrays: list[tuple[str, np.ndarray]], metadata: dict | None) -> bytes:
    header: dict[str, Any] = {}
    if metadata:
        bad = [k for k, v in metadata.items() if not (isinstance(k, str) and isinstance(v, str))]
        if bad:
            raise TypeError(f"safe_save: metadata keys and values must be str (the safetensors "
                            f"format); offending keys: {bad}")
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, arr in arrays:
        header[name] = {"dtype": _SAFE_NAMES[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return text + b" " * (-len(text) % 8)


def safe_save(tensors: dict[str, Tensor], fn: str | os.PathLike,
              metadata: dict[str, str] | None = None) -> None:
    """Write `tensors` (name -> Tensor) to a safetensors file, with optional str metadata.

    The file is written next to `fn` and renamed into place, so Tensors memory-mapped from
    an older `fn` stay valid.
    """
    arrays = _safe_arrays(tensors)
    header = _safe_header(arrays, metadata)
    folder, base = os.path.split(os.path.abspath(os.fspath(fn)))
    tmp = os.path.join(folder, f".{base}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "xb") as f:
            f.write(len(header).to_bytes(8, "little"))
            f.write(header)
            for _, arr in arrays:
                f.write(arr.reshape(-1).view(np.uint8).data)
        os.replace(tmp, fn)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


_MAX_NDIM = 64  # NumPy's limit


def _parse_safe_header(blob: Blob) -> tuple[int, dict[str, Any]]:
    if len(blob) < 8:
        raise blob.fail(f"a safetensors file starts with an 8-byte header length, but the "
                        f"file has {len(blob)} bytes")
    n = int(blob.data[:8].view("<u8")[0])
    if n > min(len(blob) - 8, _MAX_HEADER):
        raise blob.fail(f"header length {n} exceeds the file size {len(blob)} (or the "
                        f"100 MB limit); not a safetensors file or truncated")
    try:
        header = json.loads(blob.view(8, n, "header").tobytes().decode("utf-8"),
                            object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as err:  # bad UTF-8 or JSON, duplicate keys
        raise blob.fail(f"header is not valid JSON: {err}") from None
    if not isinstance(header, dict):
        raise blob.fail(f"header must be a JSON object, got {type(header).__name__}")
    return 8 + n, header


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate keys in a JSON object")
    return out


def _check_entry(blob: Blob, name: str, info: Any, size: int) -> tuple[int, int, Any, tuple]:
    if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
        raise blob.fail(f"entry {name!r} must have exactly dtype, shape, data_offsets")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if dtype not in _SAFE_DTYPES:
        raise blob.fail(f"tensor {name!r} has dtype {dtype!r}, which fgrad does not support "
                        f"(supported: {', '.join(_SAFE_DTYPES)})")
    if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
        raise blob.fail(f"tensor {name!r} has an invalid shape {shape!r}")
    _check_shape_fits(blob, name, shape, _SAFE_DTYPES[dtype].itemsize)
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(map(_is_count, offsets))
            or not offsets[0] <= offsets[1] <= size):
        raise blob.fail(f"tensor {name!r} has data_offsets {offsets!r} outside the "
                        f"{size}-byte data section (or not [begin, end])")
    nbytes = int(np.prod(shape, dtype=object)) * _SAFE_DTYPES[dtype].itemsize
    if nbytes != offsets[1] - offsets[0]:
        raise blob.fail(f"tensor {name!r} of shape {shape} and dtype {dtype} needs {nbytes} "
                        f"bytes but data_offsets {offsets} span {offsets[1] - offsets[0]}")
    return offsets[0], offsets[1], _SAFE_DTYPES[dtype], tuple(shape)


def _check_shape_fits(blob: Blob, name: str, shape: list[int], itemsize: int) -> None:
    """Refuse shapes NumPy cannot represent (at most 64 dims, and the product of the nonzero
    dims times the item size below 2**63), computed with Python ints, so a hostile header
    fails with StateFileError rather than NumPy's ValueError."""
    if len(shape) > _MAX_NDIM:
        raise blob.fail(f"tensor {name!r} has {len(shape)} dimensions; at most {_MAX_NDIM} "
                        f"are supported")
    extent = itemsize
    for d in shape:
        extent *= max(d, 1)
    if extent >= 2 ** 63:
        raise blob.fail(f"tensor {name!r} of shape {shape} is too large to address "
                        f"(corrupted header)")


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _safe_entries(blob: Blob) -> tuple[int, dict[str, Any], list]:
    start, header = _parse_safe_header(blob)
    size = len(blob) - start
    metadata = header.get("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise blob.fail(f"__metadata__ must map str to str, got {metadata!r}")
    entries = sorted(((*_check_entry(blob, k, v, size), k) for k, v in header.items()
                      if k != "__metadata__"), key=lambda e: (e[0], e[1], e[4]))
    end = 0
    for begin, stop, _, _, name in entries:
        if begin != end:
            problem = "overlaps the previous tensor" if begin < end else "leaves a gap before it"
            raise blob.fail(f"tensor {name!r} at data_offsets [{begin}, {stop}] {problem}")
        end = stop
    if end != size:
        raise blob.fail(f"the tensors cover {end} bytes but the data section has {size} "
                        f"(truncated or trailing bytes)")
    return start, metadata, entries


def safe_load(fn: str | os.PathLike | Tensor) -> dict[str, Tensor]:
    """Read a safetensors file into name -> Tensor; the data is memory-mapped, not copied."""
    blob = open_bytes(fn, what="safe_load")
    start, _, entries = _safe_entries(blob)
    return {name: Tensor._wrap(blob.array(start + begin, dt.np, shape, f"tensor {name!r}"))
            for begin, _, dt, shape, name in entries}


def safe_load_metadata(fn: str | os.PathLike | Tensor) -> dict[str, str]:
    """The `__metadata__` (str -> str) of a safetensors file; {} when it has none."""
    blob = open_bytes(fn, what="safe_load_metadata")
    return dict(_safe_entries(blob)[1])
