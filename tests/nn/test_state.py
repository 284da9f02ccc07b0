"""Tests for fgrad.nn.state: pytree state dicts and safetensors files.

PyTorch checkpoints and GGUF files are tested in test_state_formats.py.
"""
import collections
import dataclasses
import json
import pathlib
import struct

import ml_dtypes
import numpy as np
import pytest

import fgrad
from fgrad import Tensor, dtypes
from fgrad.core import tree_util
from fgrad.nn import state
from fgrad.nn.state import StateFileError

pytestmark = pytest.mark.backends  # jit tests run per backend (conftest.py)

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
Pair = collections.namedtuple("Pair", ["first", "second"])


@tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Dense:
    weight: Tensor
    bias: Tensor
    act: str = dataclasses.field(default="relu", metadata={"static": True})


def tensor(*shape, dtype=np.float32, start=0.0):
    n = int(np.prod(shape))
    return Tensor((np.arange(n) + start).astype(dtype).reshape(shape))


def model():
    return {"layers": [Dense(tensor(3, 2), tensor(3)), Dense(tensor(1, 3, start=9), tensor(1))],
            "norm": Pair(tensor(4, dtype=np.float64), None), "step": 3, "name": "net"}


# --------------------------------------------------------------------------- get_state_dict


def test_get_state_dict_names_nested_containers():
    sd = state.get_state_dict(model())
    assert sorted(sd) == ["layers.0.bias", "layers.0.weight", "layers.1.bias",
                          "layers.1.weight", "norm.first"]
    assert sd["layers.1.weight"].shape == (1, 3)
    np.testing.assert_array_equal(sd["layers.1.weight"].numpy(), [[9, 10, 11]])


def test_get_state_dict_prefix_and_parameters():
    m = model()
    sd = state.get_state_dict(m, prefix="model.")
    assert "model.layers.0.weight" in sd and len(sd) == 5
    params = state.get_parameters(m)
    assert len(params) == 5
    assert all(a is b for a, b in zip(params, state.get_state_dict(m).values(), strict=True))


def test_get_state_dict_plain_object_like_reference():
    class Net:
        def __init__(self):
            self.l1 = Dense(tensor(5, 4), tensor(5))
            self.l2 = {"w": tensor(6, 5)}
            self.activation = np.tanh

    assert list(state.get_state_dict(Net())) == ["l1.weight", "l1.bias", "l2.w"]
    assert len(state.get_parameters(Net())) == 3


def test_get_state_dict_bare_tensor_and_empty():
    t = tensor(2)
    assert state.get_state_dict(t) == {"": t}
    assert state.get_state_dict({"a": 1, "b": None, "c": "x"}) == {}


def test_get_state_dict_cycle_does_not_hang():
    class Node:
        pass

    a = Node()
    a.w = tensor(2)
    a.me = a
    assert list(state.get_state_dict(a)) == ["w"]


def test_get_state_dict_duplicate_names_raise():
    with pytest.raises(ValueError, match="a.b"):
        state.get_state_dict({"a.b": tensor(1), "a": {"b": tensor(1)}})


# --------------------------------------------------------------------------- load_state_dict


def test_load_state_dict_round_trip_is_pure():
    m = model()
    new_values = {k: Tensor(np.full(v.shape, 7, v.dtype.np))
                  for k, v in state.get_state_dict(m).items()}
    loaded = state.load_state_dict(m, new_values)
    for v in state.get_state_dict(loaded).values():
        np.testing.assert_array_equal(v.numpy(), np.full(v.shape, 7))
    assert loaded["step"] == 3 and loaded["name"] == "net" and loaded["layers"][0].act == "relu"
    assert isinstance(loaded["norm"], Pair) and loaded["norm"].second is None
    assert isinstance(loaded["layers"][1], Dense)
    # the original model is untouched
    np.testing.assert_array_equal(m["layers"][1].weight.numpy(), [[9, 10, 11]])


def test_load_state_dict_casts_to_model_dtype():
    m = {"w": tensor(3), "i": tensor(2, dtype=np.int32)}
    loaded = state.load_state_dict(m, {"w": np.array([1.5, 2.5, 3.5]), "i": Tensor([1.0, 2.0])})
    assert loaded["w"].dtype == dtypes.float32 and loaded["i"].dtype == dtypes.int32
    np.testing.assert_array_equal(loaded["w"].numpy(), [1.5, 2.5, 3.5])
    np.testing.assert_array_equal(loaded["i"].numpy(), [1, 2])


def test_load_state_dict_shape_mismatch_names_key_and_shapes():
    with pytest.raises(ValueError, match=r"'layers\.0\.weight'.*\(3, 2\).*\(2, 3\)"):
        sd = state.get_state_dict(model())
        state.load_state_dict(model(), {**sd, "layers.0.weight": tensor(2, 3)})


def test_load_state_dict_strict_reports_missing_and_unexpected_together():
    sd = state.get_state_dict(model())
    del sd["norm.first"]
    sd["extra.weight"] = tensor(1)
    with pytest.raises(ValueError) as info:
        state.load_state_dict(model(), sd)
    assert "norm.first" in str(info.value) and "extra.weight" in str(info.value)


def test_load_state_dict_non_strict_keeps_missing_values():
    m = model()
    with pytest.warns(UserWarning, match="norm.first"):
        loaded = state.load_state_dict(m, {"layers.0.bias": tensor(3, start=100)}, strict=False)
    np.testing.assert_array_equal(loaded["layers"][0].bias.numpy(), [100, 101, 102])
    assert loaded["norm"].first is m["norm"].first
    state.load_state_dict(m, {"nothing": tensor(1)}, strict=False, verbose=False)


def test_load_state_dict_consume_pops_loaded_entries():
    sd = dict(state.get_state_dict(model()))
    sd["unused"] = tensor(1)
    state.load_state_dict(model(), sd, strict=False, verbose=False, consume=True)
    assert list(sd) == ["unused"]


def test_load_state_dict_plain_object_is_copied():
    class Net:
        def __init__(self):
            self.w = tensor(2)
            self.k = 5

    net = Net()
    loaded = state.load_state_dict(net, {"w": Tensor([4.0, 5.0])})
    assert isinstance(loaded, Net) and loaded is not net and loaded.k == 5
    np.testing.assert_array_equal(loaded.w.numpy(), [4, 5])
    np.testing.assert_array_equal(net.w.numpy(), [0, 1])


def test_load_state_dict_under_grad_and_jit():
    if not hasattr(fgrad, "grad"):
        pytest.skip("fgrad.grad not available yet")
    rng = np.random.default_rng(5)
    x = rng.standard_normal(3).astype(np.float32)
    model = {"w": tensor(3), "b": Tensor(np.float32(0.0)), "tag": "linear"}

    def loss(sd):
        m = state.load_state_dict(model, sd)
        return ((m["w"] * Tensor(x)).sum() + m["b"]) ** 2

    w, b = rng.standard_normal(3).astype(np.float32), np.float32(0.7)
    sd = {"w": Tensor(w), "b": Tensor(b)}
    residual = float(w @ x + b)
    grads = fgrad.grad(loss)(sd)
    np.testing.assert_allclose(grads["w"].numpy(), 2 * residual * x, rtol=1e-5)
    np.testing.assert_allclose(grads["b"].numpy(), 2 * residual, rtol=1e-5)
    np.testing.assert_allclose(fgrad.jit(loss)(sd).numpy(), residual ** 2, rtol=1e-5)


# --------------------------------------------------------------------------- safetensors

ALL_NP_DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, np.int8, np.int16,
                 np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]


def sample_arrays():
    rng = np.random.default_rng(0)
    out = {f"x.{np.dtype(dt).name}": (rng.standard_normal((3, 2)) * 50).astype(dt)
           for dt in ALL_NP_DTYPES}
    out["scalar"] = np.array(-1.5, np.float32)
    out["empty"] = np.zeros((0, 3), np.int64)
    out["big.odd"] = rng.standard_normal((5, 7, 3)).astype(np.float32)
    return out


def assert_same(arrays, loaded):
    assert set(loaded) == set(arrays)
    for name, arr in arrays.items():
        got = np.asarray(loaded[name])
        assert got.dtype == arr.dtype and got.shape == arr.shape, name
        np.testing.assert_array_equal(got, arr, err_msg=name)


def test_safe_save_is_read_by_safetensors_package(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    arrays = sample_arrays()
    path = tmp_path / "m.safetensors"
    state.safe_save({k: Tensor(v) for k, v in arrays.items()}, path, metadata={"a": "b"})
    assert_same(arrays, st.load_file(path))
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        assert json.loads(f.read(n))["__metadata__"] == {"a": "b"}


def test_safe_save_matches_safetensors_bytes(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    arrays = sample_arrays()
    path = tmp_path / "m.safetensors"
    state.safe_save({k: Tensor(v) for k, v in arrays.items()}, path, metadata={"k": "ü"})
    assert path.read_bytes() == st.save(arrays, metadata={"k": "ü"})


def test_safe_load_reads_safetensors_package_files(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    arrays = sample_arrays()
    st.save_file(arrays, tmp_path / "ref.safetensors", metadata={"format": "np"})
    assert_same(arrays, state.safe_load(tmp_path / "ref.safetensors"))
    assert state.safe_load_metadata(tmp_path / "ref.safetensors") == {"format": "np"}


def test_safe_load_committed_fixture():
    loaded = state.safe_load(FIXTURES / "state_ref.safetensors")
    rng = np.random.default_rng(1)
    for dt in (np.float32, np.float16, np.float64, np.int8, np.int16, np.int32, np.int64,
               np.uint8, np.uint16, np.uint32, np.uint64, np.bool_):
        expected = rng.integers(0, 100, (2, 3)).astype(dt)
        np.testing.assert_array_equal(loaded[f"t.{np.dtype(dt).name}"].numpy(), expected)
        assert loaded[f"t.{np.dtype(dt).name}"].dtype.np == np.dtype(dt)
    bf16 = rng.standard_normal(5).astype(ml_dtypes.bfloat16)
    assert loaded["t.bfloat16"].dtype == dtypes.bfloat16
    np.testing.assert_array_equal(loaded["t.bfloat16"].numpy(), bf16)
    assert loaded["t.scalar"].shape == () and loaded["t.scalar"].item() == 3.5
    assert loaded["t.empty"].shape == (0, 4)
    meta = state.safe_load_metadata(FIXTURES / "state_ref.safetensors")
    assert meta == {"format": "np", "note": "é"}


def test_safe_round_trip_metadata_and_no_metadata(tmp_path):
    arrays = sample_arrays()
    state.safe_save({k: Tensor(v) for k, v in arrays.items()}, tmp_path / "a.st",
                    metadata={"epoch": "3", "ünicode": "✓"})
    assert_same(arrays, state.safe_load(tmp_path / "a.st"))
    assert state.safe_load_metadata(tmp_path / "a.st") == {"epoch": "3", "ünicode": "✓"}
    state.safe_save({"w": tensor(2)}, tmp_path / "b.st")
    assert state.safe_load_metadata(tmp_path / "b.st") == {}


def test_safe_load_is_memory_mapped_and_survives_overwrite(tmp_path):
    path = tmp_path / "w.safetensors"
    state.safe_save({"w": tensor(1000), "b": tensor(3)}, path)
    old = state.safe_load(path)
    arr = np.asarray(old["w"])
    assert not arr.flags.owndata and not arr.flags.writeable
    state.safe_save({"w": old["w"] * 2, "b": old["b"]}, path)  # overwrite the mapped file
    np.testing.assert_array_equal(old["w"].numpy(), np.arange(1000))
    np.testing.assert_array_equal(state.safe_load(path)["w"].numpy(), np.arange(1000) * 2)
    np.testing.assert_array_equal((old["b"] + 1).numpy(), [1, 2, 3])


def test_safe_load_accepts_uint8_tensor_of_bytes(tmp_path):
    state.safe_save({"w": tensor(2, 2)}, tmp_path / "w.st")
    raw = Tensor(np.frombuffer((tmp_path / "w.st").read_bytes(), np.uint8))
    np.testing.assert_array_equal(state.safe_load(raw)["w"].numpy(), [[0, 1], [2, 3]])


def test_safe_save_rejects_bad_input(tmp_path):
    with pytest.raises(TypeError, match="metadata"):
        state.safe_save({"w": tensor(1)}, tmp_path / "x.st", metadata={"n": 3})
    with pytest.raises(ValueError, match="__metadata__"):
        state.safe_save({"__metadata__": tensor(1)}, tmp_path / "x.st")
    assert list(tmp_path.iterdir()) == []


def test_safe_save_file_mode_follows_umask(tmp_path):
    import os
    old = os.umask(0o022)
    try:
        state.safe_save({"w": tensor(1)}, tmp_path / "w.st")
    finally:
        os.umask(old)
    assert (tmp_path / "w.st").stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["w.st"]


def test_safe_save_under_transformation_needs_concrete_values(tmp_path):
    if not hasattr(fgrad, "jit"):
        pytest.skip("fgrad.jit not available yet")

    def f(x):
        state.safe_save({"x": x}, tmp_path / "x.st")
        return x

    with pytest.raises(TypeError):
        fgrad.jit(f)(tensor(2))
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- malformed safetensors


def safetensors_bytes(header, data=b"", pad=True):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


GOOD = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "I8", "shape": [3], "data_offsets": [8, 11]}}
GOOD_DATA = bytes(11)


def entry(dtype="F32", shape=(2,), offsets=(0, 8)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


MALFORMED_SAFETENSORS = {
    "empty": b"",
    "short length": b"\x05\x00\x00",
    "length beyond file": struct.pack("<Q", 1000) + b"{}",
    "length 2^63": struct.pack("<Q", 1 << 63) + b"{}",
    "length max u64": b"\xff" * 8 + b"{}",
    "bad json": safetensors_bytes(b'{"a": {"dtype": '),
    "json list": safetensors_bytes([1, 2]),
    "deeply nested json": safetensors_bytes(b"[" * 200_000 + b"]" * 200_000),
    "not utf-8": safetensors_bytes(b'{"\xff\xfe": 1}'),
    "unknown dtype": safetensors_bytes({"a": entry("F8_E4M3", (2,), (0, 2))}, bytes(2)),
    "made-up dtype": safetensors_bytes({"a": entry("Q99")}, bytes(8)),
    "negative dim": safetensors_bytes({"a": entry(shape=(-2,))}, bytes(8)),
    "float dim": safetensors_bytes({"a": entry(shape=(2.0,))}, bytes(8)),
    "bool dim": safetensors_bytes({"a": entry(shape=(True, 2))}, bytes(8)),
    "shape not a list": safetensors_bytes({"a": {**entry(), "shape": 2}}, bytes(8)),
    "offsets past end": safetensors_bytes({"a": entry(offsets=(0, 800))}, bytes(8)),
    "offsets reversed": safetensors_bytes({"a": entry(shape=(0,), offsets=(8, 0))}, bytes(8)),
    "offsets negative": safetensors_bytes({"a": entry(offsets=(-8, 0))}, bytes(8)),
    "three offsets": safetensors_bytes({"a": entry(offsets=(0, 4, 8))}, bytes(8)),
    "overlap": safetensors_bytes({"a": entry(), "b": entry(offsets=(4, 12))}, bytes(12)),
    "gap": safetensors_bytes({"a": entry(offsets=(4, 12))}, bytes(12)),
    "trailing bytes": safetensors_bytes(GOOD, GOOD_DATA + b"xyz"),
    "truncated data": safetensors_bytes(GOOD, GOOD_DATA[:-1]),
    "size mismatch": safetensors_bytes({"a": entry(shape=(3,))}, bytes(8)),
    "huge shape": safetensors_bytes({"a": entry(shape=(1 << 40, 1 << 40))}, bytes(8)),
    "entry not a dict": safetensors_bytes({"a": [1, 2]}),
    "missing field": safetensors_bytes({"a": {"dtype": "F32", "shape": [2]}}, bytes(8)),
    "extra field": safetensors_bytes({"a": {**entry(), "x": 1}}, bytes(8)),
    "duplicate key": safetensors_bytes(b'{"a":' + json.dumps(entry()).encode() + b',"a":'
                                       + json.dumps(entry()).encode() + b"}", bytes(8)),
    "metadata not str": safetensors_bytes({"__metadata__": {"k": 1}, **GOOD}, GOOD_DATA),
    "metadata not dict": safetensors_bytes({"__metadata__": [1], **GOOD}, GOOD_DATA),
}


def test_malformed_safetensors_fixture_is_valid_when_intact():
    loaded = state.safe_load(safetensors_bytes(GOOD, GOOD_DATA))
    assert loaded["a"].shape == (2,) and loaded["b"].dtype == dtypes.int8


@pytest.mark.parametrize("name", sorted(MALFORMED_SAFETENSORS))
def test_malformed_safetensors_raise_state_file_error(tmp_path, name):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(MALFORMED_SAFETENSORS[name])
    with pytest.raises(StateFileError, match="bad.safetensors"):
        state.safe_load(path)
    with pytest.raises(StateFileError):
        state.safe_load_metadata(path)


def test_safetensors_truncated_at_every_length(tmp_path):
    data = (FIXTURES / "state_ref.safetensors").read_bytes()
    for cut in range(0, len(data), 7):
        with pytest.raises(StateFileError):
            state.safe_load(data[:cut])


def test_safetensors_error_names_tensor_and_problem(tmp_path):
    bad = safetensors_bytes({"layer.w": entry(shape=(3,))}, bytes(8))
    with pytest.raises(StateFileError, match=r"'layer\.w'.*12 bytes"):
        state.safe_load(bad)
