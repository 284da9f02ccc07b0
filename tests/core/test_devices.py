"""Devices: Tensor.to / device_put / devices(), eager ops on OpenCL data, jit outputs that
stay on the device, and the errors for unknown devices. References are NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import fgrad
from fgrad import Tensor

pytest.importorskip("pyopencl")
pytestmark = pytest.mark.opencl  # skipped without a working device, an error in CI

RNG = np.random.default_rng(0)


def test_devices_lists_cpu_then_opencl():
    found = fgrad.devices()
    assert found[0] == "CPU"
    assert all(d.startswith("CL:") for d in found[1:]) and len(found) > 1


def test_to_and_back_round_trips_every_dtype():
    for dtype in (np.float32, np.float64, np.int32, np.uint8, np.bool_, np.float16):
        a = (RNG.standard_normal((3, 4)) * 5).astype(dtype)
        x = Tensor(a).to("CL")
        assert x.device.startswith("CL") and x.shape == (3, 4)
        np.testing.assert_array_equal(x.numpy(), a)
        back = x.to("CPU")
        assert back.device == "CPU"
        np.testing.assert_array_equal(back.numpy(), a)


def test_eager_ops_run_on_the_device_and_match_numpy():
    a = RNG.standard_normal((5, 7)).astype(np.float32)
    x = Tensor(a).to("CL")
    y = (x.exp() * 2 - x).sum(axis=1)
    assert y.device == x.device
    np.testing.assert_allclose(y.numpy(), (np.exp(a) * 2 - a).sum(1), rtol=1e-5)
    z = x @ Tensor(a.T).to("CL")
    np.testing.assert_allclose(z.numpy(), a @ a.T, rtol=1e-4, atol=1e-5)


def test_cpu_operands_are_copied_to_the_device():
    a = RNG.standard_normal(6).astype(np.float32)
    x = Tensor(a).to("CL")
    y = x + Tensor(np.ones(6, np.float32))
    assert y.device == x.device
    np.testing.assert_allclose(y.numpy(), a + 1)


def test_jit_opencl_keeps_outputs_on_device_and_accepts_device_inputs():
    a = RNG.standard_normal((4, 3)).astype(np.float32)
    step = fgrad.jit(lambda p, g: p - 0.1 * g, backend="opencl")
    p = Tensor(a)
    for _ in range(3):
        p = step(p, Tensor(np.ones((4, 3), np.float32)))
        assert p.device.startswith("CL")
    np.testing.assert_allclose(p.numpy(), a - 0.3, rtol=1e-6, atol=1e-6)


def test_jit_llvm_copies_device_arguments_back():
    a = RNG.standard_normal(5).astype(np.float32)
    out = fgrad.jit(lambda x: x * 3, backend="llvm")(Tensor(a).to("CL"))
    assert out.device == "CPU"
    np.testing.assert_allclose(out.numpy(), a * 3)


def test_device_put_moves_a_pytree():
    tree = {"w": np.ones((2, 2), np.float32), "b": [Tensor([1.0, 2.0]), 3.0]}
    moved = fgrad.device_put(tree, "CL")
    leaves = fgrad.tree_util.tree_leaves(moved)
    assert all(leaf.device.startswith("CL") for leaf in leaves)
    np.testing.assert_array_equal(moved["b"][0].numpy(), [1.0, 2.0])
    assert all(leaf.device == "CPU" for leaf in
               fgrad.tree_util.tree_leaves(fgrad.device_put(moved, "CPU")))


def test_grad_of_device_data_under_jit():
    a = RNG.standard_normal(8).astype(np.float32)
    g = fgrad.jit(fgrad.grad(lambda x: (x * x).sum()), backend="opencl")(Tensor(a).to("CL"))
    np.testing.assert_allclose(g.numpy(), 2 * a, rtol=1e-6)


def test_repr_and_item_of_device_tensors():
    x = Tensor([1.5, 2.5]).to("CL")
    assert "device='CL" in repr(x)
    assert x.sum().item() == 4.0
    assert x.tolist() == [1.5, 2.5]


@pytest.mark.parametrize("bad", ["TPU", "CL:99", "cuda"])
def test_unknown_devices_name_the_available_ones(bad):
    with pytest.raises(ValueError, match="available"):
        Tensor([1.0]).to(bad)
