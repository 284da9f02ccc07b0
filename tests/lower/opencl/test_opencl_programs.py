"""How an executable's kernels become OpenCL programs: on a GPU one program per kernel,
built on threads at once and reused by source across executables; on a CPU driver one
program for all. Forced here on pocl; the GPU run is in docs/opencl_gpu.md."""
from __future__ import annotations

import threading
from typing import Any, Iterator

import numpy as np
import pytest

pytest.importorskip("pyopencl")

import fgrad
from fgrad import Tensor
from fgrad.lower.opencl import device as opencl_device
from fgrad.lower.opencl.runtime import OpenCLExecutable, plan
from fgrad.transforms.jit_prim import open_jaxpr

pytestmark = pytest.mark.opencl


def _two_kernels(x: Tensor, w: Tensor) -> tuple[Tensor, Tensor]:
    h = (x @ w).relu()
    return h.exp().sum(1), (x * 2.0 + 1.0).tanh()


def _executable(args: tuple[np.ndarray, ...]) -> OpenCLExecutable:
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(_two_kernels)(*map(Tensor, args)))
    return OpenCLExecutable(plan(jaxpr))


def _recording_device(monkeypatch: pytest.MonkeyPatch, split: bool) -> Any:
    """The default device, its program cache emptied, recording each build's source and
    thread in `dev.builds`."""
    dev = opencl_device.get_device()
    monkeypatch.setattr(dev, "split_programs", split)
    monkeypatch.setattr(dev, "programs", {})
    monkeypatch.setattr(dev, "kernels", {})
    builds: list[tuple[str, str]] = []
    real_build = dev._build

    def recording_build(source: str) -> Any:
        builds.append((source, threading.current_thread().name))
        return real_build(source)

    monkeypatch.setattr(dev, "_build", recording_build)
    monkeypatch.setattr(dev, "builds", builds, raising=False)
    return dev


@pytest.fixture
def split_device(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The default device building one program per kernel (a GPU's way)."""
    yield _recording_device(monkeypatch, split=True)


def _args() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    return (rng.standard_normal((16, 24)).astype(np.float32),
            rng.standard_normal((24, 8)).astype(np.float32))


def _want(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h = np.maximum(x.astype(np.float64) @ w, 0)
    return np.exp(h).sum(1), np.tanh(x.astype(np.float64) * 2 + 1)


def test_split_programs_build_each_kernel_on_threads_and_compute_right(split_device: Any) -> None:
    args = _args()
    exe = _executable(args)
    names = [r.name for r in exe.rendered(split_device)]
    assert len(names) >= 2
    assert len(split_device.builds) == len(names)  # one program per kernel
    assert all(src.count("__kernel") == 1 for src, _ in split_device.builds)
    assert all(thread.startswith("fgrad-clbuild") for _, thread in split_device.builds)
    for got, want in zip(exe(*args), _want(*args), strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_a_second_executable_reuses_the_built_kernels(split_device: Any) -> None:
    args = _args()
    _executable(args)
    built = len(split_device.builds)
    second = _executable(args)
    assert len(split_device.builds) == built  # every program came from the device's cache
    for got, want in zip(second(*args), _want(*args), strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_a_cpu_device_builds_one_program(monkeypatch: pytest.MonkeyPatch) -> None:
    if not opencl_device.get_device().is_cpu:
        pytest.skip("the default OpenCL device is not a CPU")
    assert not opencl_device.get_device().split_programs
    dev = _recording_device(monkeypatch, split=False)
    args = _args()
    exe = _executable(args)
    (source, _), = dev.builds
    assert source.count("__kernel") == len(exe.rendered(dev)) >= 2
    for got, want in zip(exe(*args), _want(*args), strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_a_build_error_names_the_device_and_shows_the_source(split_device: Any) -> None:
    with pytest.raises(RuntimeError, match="could not build the generated kernel") as info:
        split_device.programs_of(["__kernel void a(__global float* x) { x[0] = ; }",
                                  "__kernel void b(__global float* x) { x[0] = 1; }"])
    assert "--- source ---" in str(info.value)
