"""Tests for Tensor interop and conveniences: DLPack with NumPy / PyTorch / JAX (zero-copy on
the CPU), np.asarray, astype, __format__, block_until_ready, eval_shape and fgrad.tree."""
import dataclasses

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, dtypes

A = np.arange(12, dtype=np.float32).reshape(3, 4) / 7


def _ptr(t):
    return t._data.ctypes.data


def test_np_asarray_is_zero_copy_and_read_only():
    t = Tensor(A)
    a = np.asarray(t)
    assert np.shares_memory(a, t._data) and not a.flags.writeable
    np.testing.assert_array_equal(a, A)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64


def test_numpy_from_dlpack_shares_memory():
    t = Tensor(A)
    a = np.from_dlpack(t)
    assert np.shares_memory(a, t._data)
    assert t.__dlpack_device__() == (1, 0)
    c = np.from_dlpack(t, copy=True)
    assert not np.shares_memory(c, t._data)
    np.testing.assert_array_equal(c, A)


def test_torch_round_trip_is_zero_copy():
    torch = pytest.importorskip("torch")
    t = Tensor(A)
    x = torch.from_dlpack(t)
    assert x.data_ptr() == _ptr(t) and x.dtype == torch.float32
    np.testing.assert_array_equal(x.numpy(), A)
    src = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    back = fgrad.from_dlpack(src)
    assert _ptr(back) == src.data_ptr() and back.dtype == dtypes.float64
    np.testing.assert_array_equal(back.numpy(), src.numpy())
    np.testing.assert_allclose((back * 2).numpy(), src.numpy() * 2)


def _aligned_tensor(arr, align=64):
    """A Tensor over `align`-byte aligned memory (XLA copies unaligned host buffers)."""
    raw = np.empty(arr.nbytes + align, np.uint8)
    start = -raw.ctypes.data % align
    view = raw[start:start + arr.nbytes].view(arr.dtype).reshape(arr.shape)
    view[...] = arr
    view.flags.writeable = False
    return Tensor._wrap(view)


def test_jax_round_trip_is_zero_copy():
    jax = pytest.importorskip("jax")
    t = _aligned_tensor(A)
    j = jax.dlpack.from_dlpack(t)
    assert j.unsafe_buffer_pointer() == _ptr(t)
    np.testing.assert_array_equal(np.asarray(j), A)
    src = jax.numpy.arange(5, dtype="int32")
    back = fgrad.from_dlpack(src)
    assert _ptr(back) == src.unsafe_buffer_pointer() and back.dtype == dtypes.int32


def test_from_dlpack_rejects_objects_without_dlpack():
    with pytest.raises(TypeError, match="from_dlpack"):
        fgrad.from_dlpack([1, 2, 3])


def test_astype_and_format():
    t = Tensor(A)
    assert t.astype("float16").dtype == dtypes.float16
    assert t.astype(np.int32).dtype == dtypes.int32
    assert t.astype(dtypes.float64).dtype == dtypes.float64
    loss = Tensor(np.float32(1.23456))
    assert f"{loss:.3f}" == "1.235"
    assert f"{Tensor([1.5, 2.25]):.1f}" == "[1.5, 2.2]"
    # without a spec a 0-d Tensor prints its number, as a JAX array does (ported programs'
    # f"accuracy {acc}" lines print the same text); arrays print as str
    assert f"{loss}" == str(float(np.float32(1.23456)))
    assert f"{Tensor(7)}" == "7" and f"{Tensor(True)}" == "True"
    assert f"{Tensor([1.5, 2.25])}" == str(Tensor([1.5, 2.25]))
    assert f"{Tensor(7):>4d}" == "   7"

    @fgrad.jit
    def f(x):
        return f"{x:.2f}"
    with pytest.raises(Exception, match="format"):
        f(loss)


def test_block_until_ready():
    t = Tensor(A)
    assert t.block_until_ready() is t
    tree = {"a": t, "b": [Tensor(1.0), 3]}
    assert fgrad.block_until_ready(tree) is tree


def test_eval_shape_computes_nothing():
    calls = []

    def f(x, y, scale=1.0):
        calls.append(type(x).__name__)
        return {"mm": (x @ y) * scale, "n": x.sum().cast(dtypes.int32)}

    out = fgrad.eval_shape(f, fgrad.ShapeDtypeStruct((3, 4), dtypes.float32),
                           np.zeros((4, 5), np.float16), scale=2.0)
    assert out["mm"].shape == (3, 5) and out["mm"].dtype == dtypes.float32
    assert out["n"].shape == () and out["n"].dtype == dtypes.int32
    assert calls and calls[0] != "Tensor"
    with pytest.raises(TypeError, match="eval_shape"):
        fgrad.eval_shape(f, "x", 1)


def test_tree_namespace():
    tree = {"b": [1, 2], "a": (3, {"c": 4})}
    assert fgrad.tree.leaves(tree) == [3, 4, 1, 2]              # dict keys sorted, as JAX
    assert fgrad.tree.map(lambda x: x * 10, tree) == {"b": [10, 20], "a": (30, {"c": 40})}
    leaves, treedef = fgrad.tree.flatten(tree)
    assert fgrad.tree.unflatten(treedef, leaves) == tree
    assert fgrad.tree.structure(tree) == treedef
    assert fgrad.tree.reduce(lambda a, b: a + b, tree) == 10
    assert fgrad.tree.reduce(lambda a, b: a + b, tree, 100) == 110
    assert fgrad.tree.all([1, True]) and not fgrad.tree.all([1, 0])
    paths = [fgrad.tree_util.keystr(p) for p, _ in fgrad.tree.flatten_with_path(tree)[0]]
    assert paths == ["['a'][0]", "['a'][1]['c']", "['b'][0]", "['b'][1]"]
    tagged = fgrad.tree.map_with_path(lambda p, x: (len(p), x), tree)
    assert tagged["a"][1]["c"] == (3, 4)


def test_tree_transpose():
    outer = fgrad.tree.structure([0, 0, 0])
    inner = fgrad.tree.structure({"x": 0, "y": 0})
    rows = [{"x": 1, "y": 2}, {"x": 3, "y": 4}, {"x": 5, "y": 6}]
    assert fgrad.tree.transpose(outer, inner, rows) == {"x": [1, 3, 5], "y": [2, 4, 6]}
    assert fgrad.tree.transpose(outer, None, rows) == {"x": [1, 3, 5], "y": [2, 4, 6]}
    with pytest.raises(ValueError, match="inner structure"):
        fgrad.tree.transpose(outer, inner, [{"x": 1, "y": 2}, {"x": 3}, {"x": 5, "y": 6}])


def test_register_pytree_node_class_and_dataclass():
    @fgrad.tree.register_pytree_node_class
    class Pair:
        def __init__(self, a, b, tag):
            self.a, self.b, self.tag = a, b, tag

        def tree_flatten(self):
            return (self.a, self.b), self.tag

        @classmethod
        def tree_unflatten(cls, tag, children):
            return cls(*children, tag)

    p = fgrad.tree.map(lambda x: x + 1, Pair(1, 2, "t"))
    assert (p.a, p.b, p.tag) == (2, 3, "t")
    g = fgrad.grad(lambda q: (q.a * q.b).sum())(Pair(Tensor(2.0), Tensor(5.0), "t"))
    assert float(g.a) == 5.0 and float(g.b) == 2.0

    @dataclasses.dataclass
    class Point:
        x: object
        y: object
        name: str = dataclasses.field(default="p", metadata={"static": True})

    fgrad.tree.register_dataclass(Point)
    assert fgrad.tree.leaves(Point(1, 2)) == [1, 2]
    with pytest.raises(TypeError, match="tree_flatten method"):
        fgrad.tree.register_pytree_node_class(type("NoMethods", (), {}))
