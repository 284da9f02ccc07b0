"""Tests for fgrad.nn.state.torch_load and gguf_load.

Fixtures were written by real PyTorch and the `gguf` package
(tests/nn/fixtures/gen_state_fixtures.py); torch is never imported here. Hand-built files
cover refused pickles and malformed inputs.
"""
import collections
import io
import json
import pathlib
import pickle
import struct
import zipfile

import numpy as np
import pytest

from fgrad import Tensor, dtypes
from fgrad.core.dtypes import to_dtype
from fgrad.nn import state
from fgrad.nn.state import StateFileError, UnsafePickleError

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
TORCH_FILES = ["state_torch_zip.pt", "state_torch_legacy.pt"]


# --------------------------------------------------------------------------- torch fixtures


def check_against_spec(obj, spec, arrays):
    kind = spec["kind"]
    if kind == "tensor":
        assert isinstance(obj, Tensor), spec["path"]
        assert obj.dtype == to_dtype(spec["dtype"]), spec["path"]
        expected = arrays[spec["path"]]
        assert obj.shape == expected.shape, spec["path"]
        np.testing.assert_array_equal(np.asarray(obj).astype(expected.dtype), expected)
    elif kind in ("dict", "odict"):
        assert type(obj) is (collections.OrderedDict if kind == "odict" else dict)
        assert list(obj) == [k for k, _ in spec["items"]]
        for key, sub in spec["items"]:
            check_against_spec(obj[key], sub, arrays)
    elif kind in ("list", "tuple"):
        assert type(obj).__name__ == kind and len(obj) == len(spec["items"])
        for item, sub in zip(obj, spec["items"], strict=True):
            check_against_spec(item, sub, arrays)
    else:
        assert obj == spec["value"]


@pytest.fixture(scope="module")
def torch_expected():
    with np.load(FIXTURES / "state_torch_expected.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    return json.loads(str(arrays.pop("spec"))), arrays


@pytest.mark.parametrize("name", TORCH_FILES)
def test_torch_load_matches_pytorch(name, torch_expected):
    spec, arrays = torch_expected
    check_against_spec(state.torch_load(FIXTURES / name), spec, arrays)


@pytest.mark.parametrize("name", TORCH_FILES)
def test_torch_load_strided_views(name):
    loaded = state.torch_load(FIXTURES / name)
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(loaded["transposed"].numpy(), base.T)
    np.testing.assert_array_equal(loaded["window"].numpy(), base[1:3, 2:5])
    np.testing.assert_array_equal(loaded["column"].numpy(), base[:, 4])
    np.testing.assert_array_equal(loaded["expanded"].numpy(), [[0, 1, 2], [0, 1, 2]])
    assert loaded["dtypes"]["bfloat16"].dtype == dtypes.bfloat16


def test_torch_load_state_dict_keys_and_mmap(torch_expected):
    loaded = state.torch_load(FIXTURES / "state_torch_zip.pt")
    assert list(loaded["model"]) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    weight = np.asarray(loaded["model"]["0.weight"])
    assert weight.shape == (3, 4) and not weight.flags.owndata and not weight.flags.writeable


def test_torch_load_into_model_with_load_state_dict():
    sd = state.torch_load(FIXTURES / "state_torch_zip.pt")["model"]
    model = {"0": {"weight": Tensor(np.zeros((3, 4), np.float32)),
                   "bias": Tensor(np.zeros(3, np.float32))},
             "2": {"weight": Tensor(np.zeros((2, 3), np.float32)),
                   "bias": Tensor(np.zeros(2, np.float32))}}
    loaded = state.load_state_dict(model, sd)
    np.testing.assert_array_equal(loaded["2"]["weight"].numpy(), sd["2.weight"].numpy())


def test_pytorch_weights_run_in_fgrad_sequential(torch_expected):
    nn = pytest.importorskip("fgrad.nn")
    random = pytest.importorskip("fgrad.random")
    if not all(hasattr(nn, name) for name in ("Sequential", "Linear")):
        pytest.skip("fgrad.nn layers not available")
    key = random.key(0)
    model = nn.Sequential(nn.Linear(4, 3, key=key), Tensor.relu, nn.Linear(3, 2, key=key))
    prefix = next(n for n in state.get_state_dict(model) if n.endswith("0.weight"))[:-8]
    sd = state.torch_load(FIXTURES / "state_torch_zip.pt")["model"]
    loaded = state.load_state_dict(model, {prefix + k: v for k, v in sd.items()})
    out = loaded(Tensor(torch_expected[1]["model_in"]))
    np.testing.assert_allclose(out.numpy(), torch_expected[1]["model_out"], rtol=1e-5, atol=1e-6)


def test_torch_load_bare_parameter(torch_expected):
    loaded = state.torch_load(FIXTURES / "state_torch_param.pt")
    np.testing.assert_array_equal(loaded.numpy(), torch_expected[1]["param"])


def test_torch_load_from_bytes_tensor():
    raw = np.frombuffer((FIXTURES / "state_torch_zip.pt").read_bytes(), np.uint8)
    assert state.torch_load(Tensor(raw))["step"] == 12


# --------------------------------------------------------------------------- hand-built pickles


def p_str(s):
    data = s.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def p_int(i):
    return b"J" + struct.pack("<i", i)


def p_global(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def p_tuple(*items):
    return b"(" + b"".join(items) + b"t"


def p_call(func, *args):
    return func + p_tuple(*args) + b"R"


def p_tensor(size, stride, offset=0, storage="FloatStorage", key="0", numel=6):
    pid = p_tuple(p_str("storage"), p_global("torch", storage), p_str(key), p_str("cpu"),
                  p_int(numel)) + b"Q"
    return p_call(p_global("torch._utils", "_rebuild_tensor_v2"), pid, p_int(offset),
                  p_tuple(*map(p_int, size)), p_tuple(*map(p_int, stride)), b"\x89",
                  p_call(p_global("collections", "OrderedDict")))


def p_dict(**items):
    return b"}(" + b"".join(p_str(k) + v for k, v in items.items()) + b"u"


def pickled(body):
    return b"\x80\x02" + body + b"."


def torch_zip(pkl, storages=None, compress=zipfile.ZIP_STORED):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compress) as archive:
        archive.writestr("archive/data.pkl", pkl)
        archive.writestr("archive/byteorder", "little")
        for key, data in (storages or {}).items():
            archive.writestr(f"archive/data/{key}", data)
    return out.getvalue()


SIX_FLOATS = {"0": np.arange(6, dtype=np.float32).tobytes()}


def test_hand_built_zip_checkpoint_loads():
    pkl = pickled(p_dict(w=p_tensor((2, 2), (1, 2), offset=1), n=p_int(-3)))
    loaded = state.torch_load(torch_zip(pkl, SIX_FLOATS))
    np.testing.assert_array_equal(loaded["w"].numpy(), [[1, 3], [2, 4]])
    assert loaded["n"] == -3


def marker_command(marker):
    return p_str(f"touch {marker}")


EVIL_GLOBALS = [("os", "system"), ("posix", "system"), ("builtins", "eval"),
                ("builtins", "exec"), ("subprocess", "call"), ("builtins", "getattr"),
                ("torch", "load"), ("torch.serialization", "load"),
                ("torch._utils", "_rebuild_tensor_v2.__globals__"),
                ("numpy.core.multiarray", "_reconstruct"), ("collections", "namedtuple"),
                ("builtins", "bytearray"), ("torch.storage", "_load_from_bytes")]


@pytest.mark.parametrize("module,name", EVIL_GLOBALS)
@pytest.mark.parametrize("container", ["zip", "legacy", "nested-zip"])
def test_refused_global_never_runs(tmp_path, module, name, container):
    marker = tmp_path / "pwned"
    evil = p_call(p_global(module, name), marker_command(marker))
    if container == "zip":
        data = torch_zip(pickled(evil))
    elif container == "nested-zip":
        data = torch_zip(pickled(p_dict(ok=p_tensor((2,), (1,)), bad=evil)), SIX_FLOATS)
    else:
        data = pickled(evil)
    path = tmp_path / "evil.pt"
    path.write_bytes(data)
    with pytest.raises(UnsafePickleError, match=rf"{module}\.{name}") as info:
        state.torch_load(path)
    assert isinstance(info.value, pickle.UnpicklingError)
    assert isinstance(info.value, ValueError) and "evil.pt" in str(info.value)
    assert not marker.exists()


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_refused_reduce_from_real_pickler(tmp_path, protocol):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            import os
            return os.system, (f"touch {marker}",)

    data = torch_zip(pickle.dumps({"w": Evil()}, protocol=protocol))
    with pytest.raises(UnsafePickleError, match="system"):
        state.torch_load(data)
    assert not marker.exists()


def test_rebuild_from_type_only_calls_rebuild_functions(tmp_path):
    marker = tmp_path / "pwned"
    sneaky = p_call(p_global("torch._tensor", "_rebuild_from_type_v2"),
                    p_global("builtins", "set"), p_global("torch", "Tensor"),
                    p_tuple(p_str("abc")), b"}")
    with pytest.raises(UnsafePickleError, match="rebuild"):
        state.torch_load(torch_zip(pickled(sneaky)))
    assert not marker.exists()


def test_codecs_encode_only_latin1():
    ok = p_call(p_global("_codecs", "encode"), p_str("ab"), p_str("latin1"))
    assert state.torch_load(torch_zip(pickled(ok))) == b"ab"
    bad = p_call(p_global("_codecs", "encode"), p_str("ab"), p_str("zlib_codec"))
    with pytest.raises(StateFileError):
        state.torch_load(torch_zip(pickled(bad)))


# --------------------------------------------------------------------------- malformed torch


def zip_without_pickle():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("archive/version", "3")
    return out.getvalue()


MALFORMED_TORCH = {
    "garbage": b"hello, this is not a checkpoint" * 3,
    "empty": b"",
    "tar": b"x" * 257 + b"ustar" + bytes(300),
    "zip without data.pkl": zip_without_pickle(),
    "missing storage entry": torch_zip(pickled(p_dict(w=p_tensor((2,), (1,)))), {}),
    "storage too small": torch_zip(pickled(p_dict(w=p_tensor((7,), (1,)))), SIX_FLOATS),
    "offset past storage": torch_zip(pickled(p_dict(w=p_tensor((2,), (1,), 5))), SIX_FLOATS),
    "stride past storage": torch_zip(pickled(p_dict(w=p_tensor((2, 2), (5, 1)))), SIX_FLOATS),
    "negative stride": torch_zip(pickled(p_dict(w=p_tensor((2,), (-1,), 3))), SIX_FLOATS),
    "negative size": torch_zip(pickled(p_dict(w=p_tensor((-2,), (1,)))), SIX_FLOATS),
    "size/stride rank": torch_zip(pickled(p_dict(w=p_tensor((2, 3), (1,)))), SIX_FLOATS),
    "storage not whole elements": torch_zip(pickled(p_dict(w=p_tensor((1,), (1,)))),
                                            {"0": b"abc"}),
    "unsupported dtype": torch_zip(pickled(p_dict(w=p_tensor((1,), (1,),
                                                             storage="ComplexFloatStorage")))),
    "compressed entry": torch_zip(pickled(p_dict(w=p_tensor((2,), (1,)))), SIX_FLOATS,
                                  zipfile.ZIP_DEFLATED),
    "bad persistent id": torch_zip(pickled(p_tuple(p_str("module")) + b"Q")),
    "truncated pickle": torch_zip(pickled(p_dict(w=p_str("abc")))[:-4]),
    "giant bytes length": torch_zip(b"\x80\x04\x8e" + struct.pack("<Q", 1 << 60) + b"ab."),
    "giant expanded view": torch_zip(pickled(p_dict(w=p_tensor((1 << 30, 1 << 30), (0, 0)))),
                                     SIX_FLOATS),
    "huge memo index": torch_zip(b"\x80\x02K\x01r\xff\xff\xff\x7f."),
    "legacy huge memo index": b"\x80\x02K\x01r\x00\x00\x00\x10.",
    "legacy bad magic": pickled(p_int(12345)),
    "legacy truncated header": pickled(b"\x8a\n" + bytes(9))[:-3],
}


@pytest.mark.parametrize("name", sorted(MALFORMED_TORCH))
def test_malformed_torch_raise_state_file_error(tmp_path, name):
    path = tmp_path / "bad.pt"
    path.write_bytes(MALFORMED_TORCH[name])
    with pytest.raises(StateFileError, match="bad.pt"):
        state.torch_load(path)


@pytest.mark.parametrize("name", TORCH_FILES)
def test_torch_truncated_files(name):
    data = (FIXTURES / name).read_bytes()
    for cut in range(0, len(data) - 8, max(1, len(data) // 60)):
        with pytest.raises(StateFileError):
            state.torch_load(data[:cut])


# --------------------------------------------------------------------------- gguf fixtures


@pytest.fixture(scope="module")
def gguf_expected():
    with np.load(FIXTURES / "state_gguf_expected.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    return json.loads(str(arrays.pop("metadata"))), arrays


def test_gguf_metadata_all_value_types(gguf_expected):
    kv, _ = state.gguf_load(FIXTURES / "state_small.gguf")
    metadata, _ = gguf_expected
    assert kv["general.architecture"] == "testarch"
    for key, value in metadata.items():
        if isinstance(value, float) or (isinstance(value, list) and isinstance(value[0], float)):
            np.testing.assert_allclose(kv[key], value, rtol=1e-7)
        elif isinstance(value, list) and not isinstance(value[0], (str, list)):
            assert isinstance(kv[key], np.ndarray), key
            np.testing.assert_array_equal(kv[key], value)
        elif isinstance(value, list) and isinstance(value[0], list):
            assert [np.asarray(v).tolist() for v in kv[key]] == value, key
        else:
            assert kv[key] == value, key
    assert isinstance(kv["test.bool"], bool) and isinstance(kv["test.u64"], int)


def test_gguf_plain_tensors_keep_dtype_and_numpy_shape(gguf_expected):
    _, tensors = state.gguf_load(FIXTURES / "state_small.gguf")
    _, expected = gguf_expected
    kinds = {"plain.f32": dtypes.float32, "plain.f16": dtypes.float16,
             "plain.f64": dtypes.float64, "plain.i8": dtypes.int8, "plain.i16": dtypes.int16,
             "plain.i32": dtypes.int32}
    for name, dtype in kinds.items():
        assert tensors[name].dtype == dtype and tensors[name].shape == expected[name].shape
        np.testing.assert_array_equal(tensors[name].numpy(), expected[name])
    assert tensors["plain.f32"].shape == (2, 3, 32)
    assert not np.asarray(tensors["plain.f32"]).flags.owndata


QUANTS = ["BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q4_K", "Q5_K", "Q6_K"]


@pytest.mark.parametrize("qtype", QUANTS)
def test_gguf_dequantize_matches_gguf_package(qtype, gguf_expected):
    _, tensors = state.gguf_load(FIXTURES / "state_small.gguf")
    got = tensors[f"quant.{qtype}"]
    expected = gguf_expected[1][f"quant.{qtype}"]
    assert got.shape == expected.shape
    assert got.dtype == (dtypes.bfloat16 if qtype == "BF16" else dtypes.float32)
    np.testing.assert_allclose(np.asarray(got, np.float32), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("qtype,tol", [("Q8_0", 0.02), ("Q5_0", 0.1), ("Q5_1", 0.1),
                                       ("Q4_0", 0.25), ("Q4_1", 0.25), ("BF16", 0.01)])
def test_gguf_quantized_close_to_original_floats(qtype, tol, gguf_expected):
    _, tensors = state.gguf_load(FIXTURES / "state_small.gguf")
    original = gguf_expected[1]["original"]
    error = np.abs(np.asarray(tensors[f"quant.{qtype}"], np.float32) - original)
    assert error.max() <= tol * np.abs(original).max()


def test_gguf_custom_alignment(gguf_expected):
    kv, tensors = state.gguf_load(FIXTURES / "state_align64.gguf")
    assert kv["general.alignment"] == 64
    np.testing.assert_array_equal(tensors["plain.f16"].numpy(), gguf_expected[1]["plain.f16"])


def test_gguf_version_2_reads_like_version_3(gguf_expected):
    data = bytearray((FIXTURES / "state_small.gguf").read_bytes())
    data[4:8] = struct.pack("<I", 2)
    _, tensors = state.gguf_load(bytes(data))
    np.testing.assert_array_equal(tensors["plain.f32"].numpy(), gguf_expected[1]["plain.f32"])


@pytest.mark.parametrize("qtype", ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"])
def test_gguf_round_trip_with_gguf_writer(tmp_path, qtype):
    gguf = pytest.importorskip("gguf")
    kind = gguf.GGMLQuantizationType[qtype]
    x = np.random.default_rng(3).standard_normal((3, 5, 64)).astype(np.float32) * 4
    blocks = gguf.quants.quantize(x, kind)
    writer = gguf.GGUFWriter(str(tmp_path / "x.gguf"), "arch")
    writer.add_tensor("x", blocks, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    _, tensors = state.gguf_load(tmp_path / "x.gguf")
    expected = gguf.quants.dequantize(blocks, kind)
    np.testing.assert_allclose(tensors["x"].numpy(), expected, rtol=1e-6, atol=1e-7)
    reader = gguf.GGUFReader(str(tmp_path / "x.gguf"))
    assert tuple(reversed(reader.tensors[0].shape.tolist())) == tensors["x"].shape


# --------------------------------------------------------------------------- malformed gguf


def g_str(s):
    data = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(data)) + data


def gguf_bytes(kv=(), infos=(), data=b"", version=3, n_tensors=None, n_kv=None, align=32):
    """A GGUF file; kv items are (key, type, payload) and infos (name, dims, type, offset)."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(infos) if n_tensors is None else n_tensors,
                                 len(kv) if n_kv is None else n_kv)
    body = b"".join(g_str(k) + struct.pack("<I", t) + v for k, t, v in kv)
    for name, dims, ggml_type, offset in infos:
        body += g_str(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        body += struct.pack("<IQ", ggml_type, offset)
    out = head + body
    return out + bytes(-len(out) % align) + data


F32_INFO = ("w", (4,), 0, 0)
F32_DATA = np.arange(4, dtype=np.float32).tobytes()


def test_hand_built_gguf_loads():
    nested = struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 5, 1) + struct.pack("<i", 7)
    kv = [("k", 4, struct.pack("<I", 9)), ("arr", 9, nested)]
    meta, tensors = state.gguf_load(gguf_bytes(kv, [F32_INFO], F32_DATA))
    assert meta == {"k": 9, "arr": [[7]]}
    np.testing.assert_array_equal(tensors["w"].numpy(), [0, 1, 2, 3])


MALFORMED_GGUF = {
    "empty": b"",
    "bad magic": b"GGUX" + bytes(20),
    "version 1": gguf_bytes(version=1),
    "version 4": gguf_bytes(version=4),
    "big-endian": gguf_bytes(version=3 << 24),
    "2^60 tensors": gguf_bytes(n_tensors=1 << 60),
    "2^60 metadata": gguf_bytes(n_kv=1 << 60),
    "max u64 metadata": gguf_bytes(n_kv=(1 << 64) - 1),
    "key longer than file": gguf_bytes([("k", 4, b"")])[:24] + struct.pack("<Q", 1 << 40),
    "string value too long": gguf_bytes([("k", 8, struct.pack("<Q", 1 << 50) + b"abc")]),
    "array count absurd": gguf_bytes([("k", 9, struct.pack("<IQ", 4, 1 << 59))]),
    "string array count absurd": gguf_bytes([("k", 9, struct.pack("<IQ", 8, 1 << 40))]),
    "unknown value type": gguf_bytes([("k", 13, b"\x00" * 8)]),
    "unknown array type": gguf_bytes([("k", 9, struct.pack("<IQ", 77, 0))]),
    "deeply nested array": gguf_bytes([("k", 9, struct.pack("<IQ", 9, 1) * 40)]),
    "duplicate key": gguf_bytes([("k", 0, b"\x01"), ("k", 0, b"\x02")]),
    "bad alignment": gguf_bytes([("general.alignment", 4, struct.pack("<I", 3))]),
    "zero alignment": gguf_bytes([("general.alignment", 4, struct.pack("<I", 0))]),
    "unknown ggml type": gguf_bytes(infos=[("w", (4,), 99, 0)], data=F32_DATA),
    "unsupported iq type": gguf_bytes(infos=[("w", (256,), 16, 0)], data=bytes(66)),
    "not whole blocks": gguf_bytes(infos=[("w", (40,), 8, 0)], data=bytes(68)),
    "data past end": gguf_bytes(infos=[("w", (8,), 0, 0)], data=F32_DATA),
    "offset past end": gguf_bytes(infos=[("w", (4,), 0, 1 << 62)], data=F32_DATA),
    "huge dims": gguf_bytes(infos=[("w", (1 << 32, 1 << 32), 0, 0)], data=F32_DATA),
    "too many dims": gguf_bytes(infos=[("w", (1,) * 1000, 0, 0)], data=F32_DATA),
    "duplicate tensor": gguf_bytes(infos=[F32_INFO, F32_INFO], data=F32_DATA),
    "aliased quantized data": gguf_bytes(infos=[(f"q{i}", (1 << 20,), 8, 0) for i in range(300)],
                                         data=bytes(34 << 15)),
    "truncated tensor info": gguf_bytes(infos=[F32_INFO])[:40],
}


@pytest.mark.parametrize("name", sorted(MALFORMED_GGUF))
def test_malformed_gguf_raise_state_file_error(tmp_path, name):
    path = tmp_path / "bad.gguf"
    path.write_bytes(MALFORMED_GGUF[name])
    with pytest.raises(StateFileError, match="bad.gguf"):
        state.gguf_load(path)


def test_gguf_truncated_files():
    data = (FIXTURES / "state_small.gguf").read_bytes()
    for cut in range(0, int(len(data) * 0.8), 37):
        with pytest.raises(StateFileError):
            state.gguf_load(data[:cut])


# --------------------------------------------------------------------------- fuzzing


def corrupt(data, rng, flips):
    out = bytearray(data)
    for pos in rng.integers(0, len(out), flips):
        out[pos] = rng.integers(0, 256)
    return bytes(out)


@pytest.mark.parametrize("name,loader", [
    ("state_ref.safetensors", state.safe_load), ("state_small.gguf", state.gguf_load),
    ("state_torch_zip.pt", state.torch_load), ("state_torch_legacy.pt", state.torch_load)])
def test_random_corruption_loads_or_raises_state_file_error(name, loader):
    data = (FIXTURES / name).read_bytes()
    rng = np.random.default_rng(len(name))
    for trial in range(150):
        try:
            loader(corrupt(data, rng, 1 + trial % 4))
        except StateFileError:
            pass
