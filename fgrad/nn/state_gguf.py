"""`gguf_load`: read GGUF (v2/v3) files, as written by llama.cpp and the `gguf` package.

Layout: magic 'GGUF', version (u32), tensor count and metadata count (u64), the metadata
key/value pairs, one info record per tensor (name, dims innermost-first, ggml type, offset),
padding to `general.alignment` (default 32), then the tensor data. Unquantized tensors keep
their dtype and are memory-mapped; quantized blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
Q4_K, Q5_K, Q6_K) are dequantized to float32 with vectorized NumPy.
"""
from __future__ import annotations

import os
import struct
from typing import Any, Callable

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor
from fgrad.nn.state_io import Blob, Cursor, StateFileError, open_bytes, read_only

__all__ = ["gguf_load", "dequantize"]

# metadata value types: struct format and size; 8 = string, 9 = array
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
            12: "d"}
_STRING, _ARRAY = 8, 9
_MAX_DIMS = 16
_MAX_NESTING = 8


# --------------------------------------------------------------------------- dequantization


def _half(blocks: np.ndarray, at: int) -> np.ndarray:
    """The float16 at byte `at` of every block, as a float32 column."""
    return blocks[:, at:at + 2].copy().view(np.float16).astype(np.float32)


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """Bytes (n, 16) -> 4-bit values (n, 32): low nibbles first, then high nibbles."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1)


def _high_bits(blocks: np.ndarray, at: int) -> np.ndarray:
    """The little-endian u32 at byte `at` as 32 bits (n, 32), bit j for element j."""
    qh = blocks[:, at:at + 4].copy().view("<u4")
    return ((qh >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint8)


def _q4_0(b: np.ndarray) -> np.ndarray:
    return _half(b, 0) * (_nibbles(b[:, 2:18]).astype(np.int8) - 8).astype(np.float32)


def _q4_1(b: np.ndarray) -> np.ndarray:
    return _half(b, 0) * _nibbles(b[:, 4:20]).astype(np.float32) + _half(b, 2)


def _q5_0(b: np.ndarray) -> np.ndarray:
    q = _nibbles(b[:, 6:22]) | (_high_bits(b, 2) << 4)
    return _half(b, 0) * (q.astype(np.int8) - 16).astype(np.float32)


def _q5_1(b: np.ndarray) -> np.ndarray:
    q = _nibbles(b[:, 8:24]) | (_high_bits(b, 4) << 4)
    return _half(b, 0) * q.astype(np.float32) + _half(b, 2)


def _q8_0(b: np.ndarray) -> np.ndarray:
    return _half(b, 0) * b[:, 2:34].view(np.int8).astype(np.float32)


def _k_scales(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 8 six-bit scales and mins packed into 12 bytes (Q4_K, Q5_K)."""
    scale = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 0x0F) | ((s[:, 0:4] >> 6) << 4)], 1)
    mins = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], 1)
    return scale.astype(np.float32), mins.astype(np.float32)


def _k_sub_blocks(qs: np.ndarray) -> np.ndarray:
    """128 bytes -> 8 sub-blocks of 32 nibbles: per 32-byte chunk, low then high nibbles."""
    chunks = qs.reshape(-1, 4, 1, 32)
    return np.concatenate([chunks & 0x0F, chunks >> 4], axis=2).reshape(-1, 8, 32)


def _q4_k(b: np.ndarray) -> np.ndarray:
    scale, mins = _k_scales(b[:, 4:16])
    d, dmin = _half(b, 0), _half(b, 2)
    q = _k_sub_blocks(b[:, 16:144]).astype(np.float32)
    return (d * scale)[:, :, None] * q - (dmin * mins)[:, :, None]


def _q5_k(b: np.ndarray) -> np.ndarray:
    scale, mins = _k_scales(b[:, 4:16])
    d, dmin = _half(b, 0), _half(b, 2)
    bits = (b[:, None, 16:48] >> np.arange(8, dtype=np.uint8)[None, :, None]) & 1
    q = (_k_sub_blocks(b[:, 48:176]) + (bits << 4)).astype(np.float32)
    return (d * scale)[:, :, None] * q - (dmin * mins)[:, :, None]


def _q6_k(b: np.ndarray) -> np.ndarray:
    ql, qh = b[:, 0:128].reshape(-1, 2, 2, 32), b[:, 128:192].reshape(-1, 2, 32)
    low, high = ql[:, :, 0], ql[:, :, 1]
    parts = [low & 0x0F, high & 0x0F, low >> 4, high >> 4]
    q = np.stack([p | (((qh >> (2 * i)) & 3) << 4) for i, p in enumerate(parts)], axis=2)
    scale = b[:, 192:208].view(np.int8).reshape(-1, 2, 4, 2).astype(np.float32)
    scale = np.repeat(scale, 16, axis=3)
    d = _half(b, 208)[:, :, None, None]
    return (d * scale) * (q.astype(np.float32) - 32)


def _q2_k(b: np.ndarray) -> np.ndarray:
    sc = np.repeat(b[:, 0:16].reshape(-1, 2, 4, 2), 16, axis=3)
    qs = b[:, 16:80].reshape(-1, 2, 1, 32)
    q = ((qs >> (2 * np.arange(4, dtype=np.uint8))[None, None, :, None]) & 3)
    d, dmin = _half(b, 80)[:, :, None, None], _half(b, 82)[:, :, None, None]
    return (d * (sc & 0x0F).astype(np.float32)) * q.astype(np.float32) - dmin * (sc >> 4)


# ggml type -> (name, elements per block, bytes per block, dequantize or numpy dtype)
_GGML_TYPES: dict[int, tuple[str, int, int, Callable | np.dtype]] = {
    0: ("F32", 1, 4, np.dtype("<f4")), 1: ("F16", 1, 2, np.dtype("<f2")),
    2: ("Q4_0", 32, 18, _q4_0), 3: ("Q4_1", 32, 20, _q4_1), 6: ("Q5_0", 32, 22, _q5_0),
    7: ("Q5_1", 32, 24, _q5_1), 8: ("Q8_0", 32, 34, _q8_0), 10: ("Q2_K", 256, 84, _q2_k),
    12: ("Q4_K", 256, 144, _q4_k), 13: ("Q5_K", 256, 176, _q5_k),
    14: ("Q6_K", 256, 210, _q6_k), 24: ("I8", 1, 1, np.dtype("i1")),
    25: ("I16", 1, 2, np.dtype("<i2")), 26: ("I32", 1, 4, np.dtype("<i4")),
    27: ("I64", 1, 8, np.dtype("<i8")), 28: ("F64", 1, 8, np.dtype("<f8")),
    30: ("BF16", 1, 2, dtypes.bfloat16.np),
}
_UNSUPPORTED = {9: "Q8_1", 11: "Q3_K", 15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS",
                19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS",
                29: "IQ1_M", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4"}


def dequantize(data: np.ndarray, ggml_type: int) -> np.ndarray:
    """Dequantize raw ggml blocks (uint8 bytes) of a quantized type to a flat float32 array."""
    name, block, size, rule = _GGML_TYPES[ggml_type]
    if not callable(rule) or data.size % size:
        raise ValueError(f"dequantize: {name} needs whole {size}-byte blocks of a quantized type")
    with np.errstate(all="ignore"):
        out = rule(data.reshape(-1, size))
    return out.astype(np.float32, copy=False).reshape(-1)


# --------------------------------------------------------------------------- file parsing


def _string(cur: Cursor, what: str) -> str:
    n = cur.count("Q", 1, f"{what} length")
    return cur.take(n, what).tobytes().decode("utf-8", errors="replace")


def _value(cur: Cursor, vtype: int, what: str, depth: int = 0) -> Any:
    if vtype in _SCALARS:
        return cur.unpack(_SCALARS[vtype], what)
    if vtype == _STRING:
        return _string(cur, what)
    if vtype == _ARRAY and depth < _MAX_NESTING:
        return _array(cur, what, depth)
    if vtype == _ARRAY:
        raise cur.blob.fail(f"{what} nests arrays more than {_MAX_NESTING} deep")
    raise cur.blob.fail(f"{what} has unknown value type {vtype}")


def _array(cur: Cursor, what: str, depth: int) -> np.ndarray | list:
    """A metadata array: numbers as a read-only NumPy array (a view of the file when
    aligned, so a 100k-entry array costs no Python objects), strings and nested arrays as
    a list."""
    etype = cur.unpack("I", f"{what} element type")
    if etype not in _SCALARS and etype not in (_STRING, _ARRAY):
        raise cur.blob.fail(f"{what} has unknown element type {etype}")
    size = struct.calcsize("<" + _SCALARS[etype]) if etype in _SCALARS else 8
    n = cur.count("Q", size, f"{what} element count")
    if etype in _SCALARS:
        raw = cur.take(n * size, what)
        if _SCALARS[etype] == "?":
            return read_only(raw != 0)
        arr = raw.view(np.dtype("<" + _SCALARS[etype]))
        return arr if arr.flags.aligned else read_only(arr.copy())
    return [_value(cur, etype, f"{what}[{i}]", depth + 1) for i in range(n)]


def _tensor_info(cur: Cursor, index: int) -> tuple[str, tuple[int, ...], int, int]:
    name = _string(cur, f"tensor {index} name")
    ndim = cur.unpack("I", f"tensor {name!r} ndim")
    if ndim > _MAX_DIMS:
        raise cur.blob.fail(f"tensor {name!r} has {ndim} dimensions (at most {_MAX_DIMS})")
    dims = tuple(cur.unpack("Q", f"tensor {name!r} dims") for _ in range(ndim))
    ggml_type = cur.unpack("I", f"tensor {name!r} type")
    offset = cur.unpack("Q", f"tensor {name!r} offset")
    return name, dims, ggml_type, offset


def _header(cur: Cursor) -> tuple[int, int]:
    if cur.take(min(4, len(cur.blob)), "magic").tobytes() != b"GGUF":
        raise cur.blob.fail("not a GGUF file (the magic bytes are not 'GGUF')")
    version = cur.unpack("I", "version")
    if version not in (2, 3):
        hint = " (big-endian files are not supported)" if version >= 1 << 16 else ""
        raise cur.blob.fail(f"GGUF version {version} is not supported (2 and 3 are){hint}")
    n_tensors = cur.count("Q", 24, "tensor count")
    n_kv = cur.count("Q", 13, "metadata count")
    return n_tensors, n_kv


def _metadata(cur: Cursor, n_kv: int) -> dict[str, Any]:
    kv: dict[str, Any] = {}
    for i in range(n_kv):
        key = _string(cur, f"metadata key {i}")
        if key in kv:
            raise cur.blob.fail(f"duplicate metadata key {key!r}")
        kv[key] = _value(cur, cur.unpack("I", f"type of {key!r}"), f"metadata {key!r}")
    return kv


def _alignment(blob: Blob, kv: dict[str, Any]) -> int:
    align = kv.get("general.alignment", 32)
    if type(align) is not int or align <= 0 or align & (align - 1):
        raise blob.fail(f"general.alignment must be a power of two, got {align!r}")
    return align


def _load_tensor(blob: Blob, start: int, info: tuple, budget: list[int]) -> Tensor:
    """One tensor; `budget` bounds the bytes that dequantizing may still allocate."""
    name, dims, ggml_type, offset = info
    if ggml_type not in _GGML_TYPES:
        kind = _UNSUPPORTED.get(ggml_type, "unknown")
        raise blob.fail(f"tensor {name!r} has ggml type {ggml_type} ({kind}), which "
                        f"gguf_load cannot decode")
    type_name, block, size, rule = _GGML_TYPES[ggml_type]
    shape = tuple(reversed(dims))
    numel = int(np.prod(dims, dtype=object))
    if (dims[0] if dims else 1) % block:
        raise blob.fail(f"tensor {name!r} of {type_name} has {dims[0]} innermost elements, "
                        f"not a multiple of its block size {block}")
    what = f"tensor {name!r} ({type_name}, shape {shape})"
    if not callable(rule):
        return Tensor._wrap(blob.array(start + offset, rule, shape, what))
    raw = blob.view(start + offset, numel // block * size, what)
    budget[0] -= 4 * numel
    if budget[0] < 0:
        raise blob.fail(f"dequantizing {what} would allocate far more memory than the file "
                        f"holds (tensors share data?); refusing")
    return Tensor._wrap(read_only(dequantize(raw, ggml_type).reshape(shape)))


def _parse(blob: Blob) -> tuple[dict[str, Any], dict[str, Tensor]]:
    cur = Cursor(blob)
    n_tensors, n_kv = _header(cur)
    kv = _metadata(cur, n_kv)
    infos = [_tensor_info(cur, i) for i in range(n_tensors)]
    align = _alignment(blob, kv)
    start = -(-cur.pos // align) * align
    tensors: dict[str, Tensor] = {}
    budget = [16 * len(blob) + (1 << 26)]
    for info in infos:
        if info[0] in tensors:
            raise blob.fail(f"duplicate tensor name {info[0]!r}")
        tensors[info[0]] = _load_tensor(blob, start, info, budget)
    return kv, tensors


def gguf_load(tensor: str | os.PathLike | Tensor) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """Read a GGUF file: (metadata key -> value, tensor name -> Tensor).

    Shapes are in NumPy order (GGUF stores dims innermost-first). F32/F16/BF16/F64 and
    integer tensors keep their dtype and are memory-mapped; quantized ones become float32.
    """
    blob = open_bytes(tensor, what="gguf_load")
    try:
        return _parse(blob)
    except StateFileError:
        raise
    except (ValueError, KeyError, IndexError, TypeError, struct.error, OverflowError) as err:
        raise blob.fail(f"corrupted GGUF file ({type(err).__name__}: {err})") from err
