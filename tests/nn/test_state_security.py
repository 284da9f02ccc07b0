"""Hostile checkpoints: a file may fail to load, but never changes fgrad's own objects,
reads another entry's bytes, or escapes `StateFileError` (issue 18, items 1, 8, 11, 12)."""
import collections
import io
import json
import pickle
import struct
import zipfile
import zlib

import numpy as np
import pytest

from fgrad import dtypes
from fgrad.nn import state
from fgrad.nn.state import StateFileError, UnsafePickleError
from subprocess_probe import run_probe


def torch_zip(pkl: bytes, storages: dict | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("archive/data.pkl", pkl)
        for key, data in (storages or {}).items():
            archive.writestr(f"archive/data/{key}", data)
    return out.getvalue()


# --------------------------------------------------------------------------- item 1: BUILD

DTYPE_REWRITE = b"ctorch\nfloat32\n}(X\x08\x00\x00\x00itemsizeK\x08ub."
DEFAULTS_REWRITE = b"c_codecs\nencode\n(N}X\x0c\x00\x00\x00__defaults__(X\x04\x00\x00\x00zlibtstb."
CLASS_REWRITE = b"ccollections\nOrderedDict\n}X\x04\x00\x00\x00evilK\x01sb."


@pytest.mark.parametrize("payload", [DTYPE_REWRITE, DEFAULTS_REWRITE, CLASS_REWRITE],
                         ids=["dtype-itemsize", "function-defaults", "class-attribute"])
def test_build_on_allow_listed_globals_is_refused(payload):
    with pytest.raises(UnsafePickleError, match="BUILD"):
        state.torch_load(torch_zip(payload))
    assert dtypes.float32.itemsize == 4
    assert not hasattr(collections.OrderedDict, "evil")
    ok = b"\x80\x02c_codecs\nencode\nX\x02\x00\x00\x00abX\x06\x00\x00\x00latin1\x86R."
    assert state.torch_load(torch_zip(ok)) == b"ab"


def test_dtype_rewrite_cannot_break_a_later_jit():
    """The issue's 40-byte probe, then a jitted float32 program, in a fresh process."""
    out = run_probe(f"""
        import io, zipfile, numpy as np, fgrad
        from fgrad import Tensor, dtypes
        from fgrad.nn import state
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("archive/data.pkl", {DTYPE_REWRITE!r})
        try:
            state.torch_load(buf.getvalue())
        except state.UnsafePickleError:
            pass
        x = np.arange(4096, dtype=np.float32)
        y = fgrad.jit(lambda a: a * 2 + 1)(Tensor(x)).numpy()
        print(dtypes.float32.itemsize, bool(np.array_equal(y, x * 2 + 1)))
    """)
    assert out.split() == ["4", "True"]


def test_ordered_dict_metadata_still_loads():
    od = collections.OrderedDict(a=1)
    od._metadata = {"": {"version": 1}}
    loaded = state.torch_load(torch_zip(pickle.dumps(od, protocol=2)))
    assert type(loaded) is collections.OrderedDict and loaded["a"] == 1
    assert loaded._metadata == {"": {"version": 1}}


# --------------------------------------------------------------------------- item 8: zip


def two_storage_checkpoint() -> bytes:
    def text(t: bytes) -> bytes:
        return b"X" + struct.pack("<I", len(t)) + t

    tensor = (b"ctorch._utils\n_rebuild_tensor_v2\n((" + text(b"storage")
              + b"ctorch\nFloatStorage\n%s" + text(b"cpu") + b"K\x02tQK\x00K\x02\x85K\x01\x85"
              + b"\x89ccollections\nOrderedDict\n)RtR")
    pkl = (b"\x80\x02}(" + text(b"a") + tensor % text(b"0") + text(b"b")
           + tensor % text(b"1") + b"u.")
    return torch_zip(pkl, {"0": np.array([1, 2], np.float32).tobytes(),
                           "1": np.array([7, 8], np.float32).tobytes()})


def redirect_central_entry(data: bytes, name: bytes, to: bytes) -> bytes:
    """Point the central-directory record of `name` at the local header of `to`."""
    out = bytearray(data)
    offsets = {}
    pos = out.find(b"PK\x01\x02")
    while pos >= 0:
        n = struct.unpack_from("<H", out, pos + 28)[0]
        offsets[bytes(out[pos + 46:pos + 46 + n])] = pos
        pos = out.find(b"PK\x01\x02", pos + 4)
    target = struct.unpack_from("<I", out, offsets[to] + 42)[0]
    struct.pack_into("<I", out, offsets[name] + 42, target)
    return bytes(out)


def test_hand_built_two_storage_checkpoint_loads():
    loaded = state.torch_load(two_storage_checkpoint())
    np.testing.assert_array_equal(loaded["a"].numpy(), [1, 2])
    np.testing.assert_array_equal(loaded["b"].numpy(), [7, 8])


def test_central_directory_pointing_at_another_entry_is_refused():
    bad = redirect_central_entry(two_storage_checkpoint(), b"archive/data/0",
                                 b"archive/data/1")
    with zipfile.ZipFile(io.BytesIO(bad)) as z:  # the reference reader refuses it too
        with pytest.raises(zipfile.BadZipFile):
            z.read("archive/data/0")
    with pytest.raises(StateFileError, match="local header names"):
        state.torch_load(bad)


def test_storage_bytes_failing_crc_are_refused():
    data = bytearray(two_storage_checkpoint())
    at = data.find(np.array([7, 8], np.float32).tobytes())
    data[at] ^= 0x40
    with pytest.raises(StateFileError, match="CRC-32"):
        state.torch_load(bytes(data))
    assert zlib.crc32(b"") == 0


# --------------------------------------------------------------------------- item 11: shapes


def safetensors_file(shape, nbytes=0, dtype="F32"):
    header = json.dumps({"t": {"dtype": dtype, "shape": shape,
                               "data_offsets": [0, nbytes]}}).encode()
    return struct.pack("<Q", len(header)) + header + bytes(nbytes)


@pytest.mark.parametrize("shape,nbytes", [
    ([2 ** 63], 0), ([2 ** 64, 0], 0), ([0, 2 ** 63], 0), ([1] * 65, 4), ([0] * 65, 0),
    ([2 ** 40, 2 ** 40, 0], 0), ([2 ** 62, 2 ** 62, 0], 0), ([2 ** 61, 0], 0)])
def test_safetensors_shapes_numpy_cannot_hold_raise_state_file_error(shape, nbytes):
    with pytest.raises(StateFileError, match="tensor 't'"):
        state.safe_load(safetensors_file(shape, nbytes))


def test_safetensors_edge_shapes_that_fit_still_load():
    loaded = state.safe_load(safetensors_file([1] * 64, 4))
    assert loaded["t"].shape == (1,) * 64
    assert state.safe_load(safetensors_file([2 ** 20, 0]))["t"].shape == (2 ** 20, 0)


# --------------------------------------------------------------------------- item 12: GGUF


def gguf_with_array(values: np.ndarray, etype: int) -> bytes:
    key = b"big.array"
    return (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
            + struct.pack("<IIQ", 9, etype, values.size) + values.tobytes())


def test_gguf_numeric_metadata_arrays_are_numpy_and_small():
    import tracemalloc
    values = np.arange(1_000_000, dtype="<u4") * 3
    data = gguf_with_array(values, 4)
    tracemalloc.start()
    kv, tensors = state.gguf_load(data)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert tensors == {}
    arr = kv["big.array"]
    assert isinstance(arr, np.ndarray) and arr.dtype == np.uint32 and not arr.flags.writeable
    np.testing.assert_array_equal(arr, values)
    assert peak < 2 * len(data), f"loading used {peak} bytes for a {len(data)}-byte file"


def test_gguf_bool_metadata_array():
    kv, _ = state.gguf_load(gguf_with_array(np.array([0, 1, 2, 0], np.uint8), 7))
    np.testing.assert_array_equal(kv["big.array"], [False, True, True, False])
