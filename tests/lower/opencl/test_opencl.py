"""The opencl jit backend against NumPy: elementwise semantics of every primitive and dtype,
casts, movement as indexing, work-group reductions, matmul, programs with host steps,
CLArray and device selection, and the printed OpenCL C.

Programs are compiled straight from their jaxprs (`run`); references are NumPy or the
primitives' NumPy impls. Ops are grouped into multi-output programs to keep builds few.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from llvm_helpers import random_program

pytest.importorskip("pyopencl")

import fgrad
from fgrad import Tensor, dtypes, tree_util
from fgrad.core import prims
from fgrad.core.dtypes import DType
from fgrad.core.ir import ShapedArray
from fgrad.core.primitive import REGISTRY
from fgrad.lower.opencl import device as opencl_device
from fgrad.lower.opencl import runtime as opencl_runtime
from fgrad.lower.kernel.build import build_kernel
from fgrad.lower.opencl.device import CLArray, CLDevice
from fgrad.lower.opencl.render import lower_kernel, render_kernel
from fgrad.lower.opencl.runtime import compile_opencl, plan
from fgrad.lower.schedule.partition import BINARY, UNARY
from fgrad.transforms.jit_prim import open_jaxpr

pytestmark = pytest.mark.opencl  # skipped without a working device, an error in CI

RNG = np.random.default_rng(0)
ALL_DTYPES = [dtypes.bool, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64,
              dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64, dtypes.float16,
              dtypes.float32, dtypes.float64]
INT_DTYPES = [d for d in ALL_DTYPES if d.is_int]
APPROX = {"exp", "log", "sin", "cos", "tan", "tanh", "logistic", "log1p", "expm1", "erf",
          "pow", "atan2"}
RTOL = {"half": 2e-3, "float": 4e-6, "double": 1e-13}


def run(fn: Callable[..., Any], *args: Any) -> list[np.ndarray]:
    """`fn(*args)` compiled by the opencl backend (args: pytrees of NumPy arrays); the flat
    outputs as NumPy arrays."""
    leaves = tree_util.tree_leaves(args)
    tensors = tree_util.tree_map(Tensor, args)
    jaxpr, consts = open_jaxpr(fgrad.make_jaxpr(fn)(*tensors))
    outs = compile_opencl(jaxpr)(*[c._data for c in consts], *leaves)
    assert all(isinstance(o, CLArray) for o in outs)
    return [o.numpy() for o in outs]


def close(got: np.ndarray, want: Any, rtol: float = 1e-6, atol: float = 0.0) -> None:
    """Same dtype and shape, values within tolerance (NaNs in the same places)."""
    want = np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                   want.dtype, want.shape)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                               atol=atol, equal_nan=True)


def w1(x: Tensor) -> Tensor:
    """The W1 elementwise chain."""
    return (x * 1.5 + 0.5).tanh() * x.sigmoid() + (-x * x).exp()


# ---------------------------------------------------------------------------- elementwise


def sample(dtype: DType, n: int, rng: np.random.Generator) -> np.ndarray:
    """Edge values first, then random ones, n in all."""
    if dtype == dtypes.bool:
        return rng.integers(0, 2, n).astype(bool)
    if dtype.is_float:
        special = [-np.inf, -100, -2.5, -1, -0.5, -0.0, 0.0, 1e-5, 0.5, 1, 2.5, 100, np.inf,
                   np.nan]
        with np.errstate(over="ignore"):
            vals = np.array(special + list(rng.standard_normal(n) * 3)).astype(dtype.np)
        return rng.permutation(vals)[:n]
    info = np.iinfo(dtype.np)
    edges = np.array([info.min, info.max, 0, 1, 2, info.max - 1, info.min + 1], dtype.np)
    small = rng.integers(max(info.min, -20), min(info.max, 20), n, endpoint=True)
    wide = rng.integers(info.min, info.max, n, dtype=dtype.np, endpoint=True)
    return rng.permutation(np.concatenate([edges, small.astype(dtype.np), wide]))[:n]


def _accepts(name: str, dtype: DType) -> bool:
    arity = 1 if name in UNARY else 2
    try:
        REGISTRY[name].abstract_eval(*[ShapedArray((4,), dtype)] * arity)
    except TypeError:
        return False
    return True


OPS = sorted((UNARY | BINARY) - {"convert_element_type", "bitcast_convert_type"})


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.short)
def test_every_elementwise_primitive_matches_its_numpy_impl(dtype: DType) -> None:
    names = [n for n in OPS if _accepts(n, dtype)]
    rng = np.random.default_rng(dtype.itemsize)
    x, y = sample(dtype, 200, rng), sample(dtype, 200, rng)
    cond = rng.integers(0, 2, 200).astype(bool)

    def f(a: Tensor, b: Tensor, c: Tensor) -> Any:
        outs = [REGISTRY[n].bind(a) if n in UNARY else REGISTRY[n].bind(a, b) for n in names]
        return (*outs, prims.select(c, a, b))

    got = run(f, x, y, cond)
    for name, g in zip(names + ["select"], got, strict=True):
        prim = REGISTRY[name]
        if name == "select":
            want = np.where(cond, x, y)
        else:
            args = [x] if name in UNARY else [x, y]
            aval = prim.abstract_eval(*[ShapedArray(a.shape, dtype) for a in args])
            want = np.asarray(prim.impl(*args)).astype(aval.dtype.np)
        if name in APPROX and dtype.is_float:
            close(g, want, RTOL[dtype.name], atol=RTOL[dtype.name] / 10)
        else:
            np.testing.assert_array_equal(g, want, err_msg=f"{name} {dtype.name}")


def test_integer_division_edge_cases_never_trap() -> None:
    pairs = {}
    for d in INT_DTYPES:
        info = np.iinfo(d.np)
        v = [0, 1, 2, 7, info.max, info.min] + ([-1, -2, -7] if info.min < 0 else [])
        v = np.array(v, d.np)
        pairs[d.name] = (np.repeat(v, len(v)), np.tile(v, len(v)))

    def f(args: dict) -> Any:
        return {k: (prims.div_p.bind(a, b), prims.rem_p.bind(a, b)) for k, (a, b) in
                args.items()}

    got = iter(run(f, pairs))
    for _, (x, y) in sorted(pairs.items()):
        np.testing.assert_array_equal(next(got), prims.div_p.impl(x, y))
        np.testing.assert_array_equal(next(got), prims.rem_p.impl(x, y))
    x = np.array([7, -7, 7, -7, 0, 5, -5], np.int32)
    y = np.array([2, 2, -2, -2, 3, 0, 0], np.int32)
    floor, modulo = run(lambda a, b: (a // b, a % b), x, y)
    ref = fgrad.jit(lambda a, b: (a // b, a % b), backend="numpy")(Tensor(x), Tensor(y))
    np.testing.assert_array_equal(floor, ref[0].numpy())
    np.testing.assert_array_equal(modulo, ref[1].numpy())


@pytest.mark.parametrize("src", ALL_DTYPES, ids=lambda d: d.short)
def test_casts_match_numpy(src: DType) -> None:
    targets = list(ALL_DTYPES)
    x = sample(src, 60, np.random.default_rng(src.itemsize))
    if src.is_float:
        with np.errstate(over="ignore"):
            x[:12] = np.array([1e10, -1e10, 3e9, -3e9, 255.9, -128.5, 65504, 7e4, 0.5, -0.5,
                               2.0 ** 63, -(2.0 ** 63)]).astype(src.np)
    got = run(lambda t: tuple(prims.convert(t, d) for d in targets), x)
    for d, g in zip(targets, got, strict=True):
        with np.errstate(over="ignore", invalid="ignore"):
            np.testing.assert_array_equal(g, prims.convert_p.impl(x, new_dtype=d),
                                          err_msg=f"{src.name} -> {d.name}")


def test_bitcasts_keep_bits() -> None:
    x32 = sample(dtypes.float32, 40, RNG)
    x64 = sample(dtypes.int64, 40, RNG)
    got = run(lambda a, b: (prims.bitcast(a, dtypes.int32), prims.bitcast(a, dtypes.uint32),
                            prims.bitcast(b, dtypes.float64)), x32, x64)
    np.testing.assert_array_equal(got[0], x32.view(np.int32))
    np.testing.assert_array_equal(got[1], x32.view(np.uint32))
    np.testing.assert_array_equal(got[2].view(np.int64), x64)


def test_w1_chain_is_one_kernel_and_matches_numpy() -> None:
    x = RNG.standard_normal(70001).astype(np.float32) * 4
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(w1)(Tensor(x)))
    assert len(plan(jaxpr).kernels) == 1 and not plan(jaxpr).schedule.hosts()
    want = np.tanh(x * 1.5 + 0.5) * (1 / (1 + np.exp(-x))) + np.exp(-x * x)
    close(run(w1, x)[0], want.astype(np.float32), rtol=2e-6, atol=1e-7)


def test_tanh_saturates_exactly_as_numpy() -> None:
    x = np.array([-np.inf, -100, -20, -12, -0.0, 0.0, 1e-8, 12, 30, np.inf, np.nan],
                 np.float32)
    got = run(lambda t: (t.tanh() + 1, (t * 0.5).tanh() * t, t.tanh()), x)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got[0], np.tanh(x) + 1)
        close(got[1], np.tanh(x * 0.5) * x, rtol=1e-6)
    np.testing.assert_array_equal(np.signbit(got[2]), np.signbit(np.tanh(x)))


def test_float16_io_and_accumulation() -> None:
    x = RNG.standard_normal((8, 300)).astype(np.float16)
    got = run(lambda t: ((t * 3 + 1).sum(1), (t * 1.5).exp() - t), x)
    want = prims.reduce_sum_p.impl(x * np.float16(3) + np.float16(1), axes=(1,))
    close(got[0], want, rtol=2e-3, atol=1e-2)
    close(got[1], np.exp(x * np.float16(1.5)) - x, rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------------------- movement


MOVEMENT: list[tuple[str, Callable[[Tensor], Tensor], Callable[[np.ndarray], Any]]] = [
    ("pad", lambda t: t.pad(((1, 2), (0, 3))) * 2, lambda a: np.pad(a, ((1, 2), (0, 3))) * 2),
    ("pad_crop", lambda t: prims.pad(t, ((-1, 2, 0), (2, -3, 1)), 7.0) + 1,
     lambda a: prims.pad_p.impl(a, config=((-1, 2, 0), (2, -3, 1)), value=7.0) + 1),
    ("slice", lambda t: t[1:6:2, ::3] + 1, lambda a: a[1:6:2, ::3] + 1),
    ("flip", lambda t: t.flip(0).flip(1) - t, lambda a: a[::-1, ::-1] - a),
    ("permute", lambda t: t.reshape(2, 3, 10).permute(2, 0, 1).exp(),
     lambda a: np.exp(a.reshape(2, 3, 10).transpose(2, 0, 1))),
    ("broadcast", lambda t: t[:, :1] + t[:1, :], lambda a: a[:, :1] + a[:1, :]),
    ("cat", lambda t: t[:, :4].cat(t[:, 7:].exp(), t[:, 4:7], dim=1) * 1,
     lambda a: np.concatenate([a[:, :4], np.exp(a[:, 7:]), a[:, 4:7]], 1)),
    ("iota", lambda t: t + Tensor.arange(60).reshape(6, 10).cast(dtypes.float32),
     lambda a: a + np.arange(60, dtype=np.float32).reshape(6, 10)),
]


def test_movement_ops_become_indexing() -> None:
    x = RNG.standard_normal((6, 10)).astype(np.float32)
    got = run(lambda t: tuple(fn(t) for _, fn, _ in MOVEMENT), x)
    for (name, _, ref), g in zip(MOVEMENT, got, strict=True):
        close(g, np.asarray(ref(x), np.float32), rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------------- reductions


@pytest.mark.parametrize("shape,axes", [((3, 5, 7), (0,)), ((3, 5, 7), (1,)), ((3, 5, 7), (2,)),
                                        ((3, 5, 7), (0, 2)), ((3, 5, 7), (0, 1, 2)),
                                        ((4, 1000), (1,)), ((1000, 5), (0,)),
                                        ((300, 3, 40), (0, 2))])
def test_reductions_over_axes(shape: tuple[int, ...], axes: tuple[int, ...]) -> None:
    x = RNG.uniform(0.9, 1.1, shape).astype(np.float32)

    def f(t: Tensor) -> Any:
        u = t * 2
        return (prims.reduce_sum(u, axes), prims.reduce_max(u, axes),
                prims.reduce_min(u, axes), prims.reduce_prod(t, axes))

    got = run(f, x)
    refs = [np.sum(x * 2, axes), np.max(x * 2, axes), np.min(x * 2, axes), np.prod(x, axes)]
    for g, want in zip(got, refs, strict=True):
        close(g, want.astype(np.float32), rtol=2e-5)


def test_reductions_of_ints_bools_nans_and_empty_axes() -> None:
    xi = RNG.integers(-50, 50, (4, 600)).astype(np.int32)
    xb = xi > 0
    got = run(lambda a, b: (prims.reduce_sum(a, (0,)), prims.reduce_max(a, (1,)),
                            prims.reduce_sum(b, (1,)), prims.reduce_min(b, (0,)),
                            prims.reduce_prod(a % 3 - 1, (1,))), xi, xb)
    np.testing.assert_array_equal(got[0], xi.sum(0).astype(np.int32))
    np.testing.assert_array_equal(got[1], xi.max(1))
    np.testing.assert_array_equal(got[2], xb.any(1))
    np.testing.assert_array_equal(got[3], xb.all(0))
    np.testing.assert_array_equal(got[4], np.prod(np.fmod(xi, 3) - 1, 1).astype(np.int32))
    xn = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]], np.float32)
    got = run(lambda t: (prims.reduce_max(t, (1,)), prims.reduce_min(t, (0,))), xn)
    close(got[0], np.max(xn, 1))
    close(got[1], np.min(xn, 0))
    empty = np.zeros((0, 5), np.float32)
    got = run(lambda t: (prims.reduce_sum(t, (0,)), prims.reduce_prod(t, (0,))), empty)
    close(got[0], np.zeros(5, np.float32))
    close(got[1], np.ones(5, np.float32))


def test_softmax_and_keepdim_statistics() -> None:
    x = RNG.standard_normal((33, 700)).astype(np.float32)
    got = run(lambda t: (t.softmax(-1), t - t.mean(axis=0, keepdim=True)
                         + t.max(axis=1, keepdim=True)), x)
    e = np.exp(x - x.max(-1, keepdims=True))
    close(got[0], e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-8)
    close(got[1], x - x.mean(0, keepdims=True) + x.max(1, keepdims=True), rtol=1e-5,
          atol=1e-5)


def test_reduction_kernels_use_local_memory_trees() -> None:
    x = np.ones((64, 512), np.float32)
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda t: (t.sum(1), t.sum(0)))(Tensor(x)))
    rendered = opencl_runtime.OpenCLExecutable(plan(jaxpr)).rendered()
    assert [r.form for r in rendered] == ["reduce", "reduce"]
    for r in rendered:
        assert "__local float" in r.source and "barrier(CLK_LOCAL_MEM_FENCE)" in r.source
        assert r.launch.local_size[0] > 1


def test_memory_form_kernel_runs_serially_and_correctly() -> None:
    x = RNG.standard_normal((9, 70)).astype(np.float32)
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda t: (t * 2).sum(0))(Tensor(x)))
    sched = plan(jaxpr).schedule
    kernel, _ = build_kernel(sched, sched.kernels()[0])
    r = lower_kernel(kernel)
    assert r.form == "serial"
    dev = opencl_device.get_device()
    out, inp = CLArray.empty((70,), np.float32, dev), CLArray.from_numpy(x, dev.name)
    getattr(dev.program(render_kernel(kernel)), r.name)(dev.queue, r.launch.global_size,
                                           r.launch.local_size, out.buffer, inp.buffer)
    close(out.numpy(), (x * 2).sum(0), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------- matmul


def test_matmul_shapes_layouts_and_dtypes() -> None:
    a = RNG.standard_normal((37, 45)).astype(np.float32)
    b = RNG.standard_normal((45, 29)).astype(np.float32)
    c = RNG.standard_normal((3, 20, 7)).astype(np.float64)
    d = RNG.standard_normal((3, 9, 7)).astype(np.float64)
    got = run(lambda p, q, r, s: (p @ q, q.T @ p.T, r @ s.permute(0, 2, 1), p[:, :0] @ q[:0]),
              a, b, c, d)
    close(got[0], a @ b, rtol=1e-4, atol=1e-5)
    close(got[1], b.T @ a.T, rtol=1e-4, atol=1e-5)
    close(got[2], c @ d.transpose(0, 2, 1), rtol=1e-12)
    close(got[3], np.zeros((37, 29), np.float32))
    ints = RNG.integers(-5, 5, (6, 4)).astype(np.int32)
    close(run(lambda t: t @ t.T, ints)[0], ints @ ints.T)


def test_matmul_is_tiled_through_local_memory() -> None:
    from fgrad.lower.opencl.gemm import GemmTarget, gpu_shape, lower_gemm
    a = Tensor(np.ones((64, 32), np.float32))
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda p, q: p @ q)(a, a.T))
    eqn = next(e for e in jaxpr.eqns if e.primitive.name == "dot_general")
    r = lower_gemm("g0", eqn)
    assert "__local float" in r.source and "barrier(CLK_LOCAL_MEM_FENCE)" in r.source
    side = gpu_shape(GemmTarget(), 4).side  # no target: the generic GPU form
    assert r.launch.local_size[:2] == (side, side)


# ---------------------------------------------------------------------------- programs


def _mlp_loss(params: dict, x: Tensor, y: Tensor) -> Tensor:
    h = (x @ params["w1"] + params["b1"]).relu()
    z = (h @ params["w2"] + params["b2"]).tanh()
    return ((z - y) ** 2).mean() + (params["w1"] * params["w1"]).sum() * 1e-3


def test_grad_of_mlp_loss_inside_jit_matches_numpy_backend() -> None:
    rng = np.random.default_rng(7)
    params = {"w1": rng.standard_normal((5, 16)).astype(np.float32) * 0.5,
              "b1": rng.standard_normal(16).astype(np.float32) * 0.1,
              "w2": rng.standard_normal((16, 3)).astype(np.float32) * 0.5,
              "b2": np.zeros(3, np.float32)}
    x = rng.standard_normal((32, 5)).astype(np.float32)
    y = rng.standard_normal((32, 3)).astype(np.float32)
    g = fgrad.jit(fgrad.value_and_grad(_mlp_loss))
    got = run(g, params, x, y)
    want = fgrad.jit(fgrad.value_and_grad(_mlp_loss), backend="numpy")(
        tree_util.tree_map(Tensor, params), Tensor(x), Tensor(y))
    for gv, wv in zip(got, tree_util.tree_leaves(want), strict=True):
        close(gv, wv.numpy(), rtol=1e-5, atol=1e-6)


def test_gather_sort_scan_and_argmax_run_natively() -> None:
    x = RNG.standard_normal((5, 7)).astype(np.float32)
    idx = RNG.integers(0, 7, (5, 3)).astype(np.int32)

    def f(t: Tensor, i: Tensor) -> Any:
        return t.cumsum(1).exp(), t.argmax(1), t.sort(1)[0] * 2, t.gather(1, i) + 1

    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(f)(Tensor(x), Tensor(idx)))
    assert plan(jaxpr).schedule.hosts() == []
    got = run(f, x, idx)
    close(got[0], np.exp(np.cumsum(x, 1)), rtol=1e-5)
    np.testing.assert_array_equal(got[1], np.argmax(x, 1))
    close(got[2], np.sort(x, 1) * 2)
    close(got[3], np.take_along_axis(x, idx, 1) + 1)


def test_host_step_primitives_give_numpy_results() -> None:
    x = (RNG.standard_normal((4, 4)) + 4 * np.eye(4)).astype(np.float32)

    def f(t: Tensor) -> Any:
        q, r = (t * 2.0).qr()
        return q.abs() + 1.0, r.abs()

    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(f)(Tensor(x)))
    assert plan(jaxpr).schedule.hosts()  # no LAPACK on OpenCL: qr copies through the host
    got = run(f, x)
    q, r = np.linalg.qr(x * 2)
    close(got[0], np.abs(q) + 1, rtol=1e-4)
    close(got[1], np.abs(r), rtol=1e-4)


def test_zero_d_empty_and_passthrough_outputs() -> None:
    s = np.array(2.5, np.float32)
    got = run(lambda t: (t * 2 + t.exp(), t), s)
    close(got[0], np.array(s * 2 + np.exp(s)))
    close(got[1], s)
    e = np.zeros((0, 3), np.float32)
    got = run(lambda t: ((t * 2).exp().T, t.pad(((1, 1), (0, 0))) + 1), e)
    close(got[0], np.zeros((3, 0), np.float32))
    close(got[1], np.ones((2, 3), np.float32))
    v = np.arange(4, dtype=np.float32)
    got = run(lambda t: (t * 0 + 3, t.T), v)
    close(got[0], np.full(4, 3, np.float32))
    close(got[1], v)


@pytest.mark.parametrize("seed", range(6))
def test_random_movement_and_reduction_programs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = tuple(int(d) for d in rng.integers(1, 6, int(rng.integers(1, 4))))
    program = random_program(rng, ("reshape", "permute", "slice", "pad", "expand", "sum",
                                   "max", "math"))
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    want = fgrad.jit(program, backend="numpy")(Tensor(x)).numpy()
    close(run(program, x)[0], want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------- arrays, devices


@pytest.mark.parametrize("arr", [np.arange(12, dtype=np.float32).reshape(3, 4),
                                 np.array(True), np.zeros((0, 4), np.int64),
                                 np.array([1.5, -2.0], np.float16)],
                         ids=["f32", "bool0d", "empty", "f16"])
def test_clarray_round_trip(arr: np.ndarray) -> None:
    c = CLArray.from_numpy(arr)
    assert (c.shape, c.dtype, c.size, c.ndim, c.nbytes) == (arr.shape, arr.dtype, arr.size,
                                                           arr.ndim, arr.nbytes)
    assert c.device.startswith("CL:") and (c.buffer is None) == (arr.size == 0)
    np.testing.assert_array_equal(c.numpy(), arr)
    np.testing.assert_array_equal(np.asarray(c), arr)
    assert np.asarray(c, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="copy"):
        c.__array__(copy=False)


def test_device_arrays_flow_through_executables() -> None:
    x = RNG.standard_normal(100).astype(np.float32)
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda t, s: t * s + 1)(Tensor(x), Tensor(2.0)))
    exe = compile_opencl(jaxpr)
    (first,) = exe(CLArray.from_numpy(x), 2.0)
    (second,) = exe(first, np.float32(0.5))
    close(second.numpy(), (x * 2 + 1) * 0.5 + 1)
    with pytest.raises(TypeError, match="shape"):
        exe(CLArray.from_numpy(x[:5]), 2.0)


def test_device_list_and_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    listing = opencl_runtime.device_list()
    assert listing and listing[0].startswith("CL:0  ")
    assert opencl_device.parse_device("0:0") == 0
    assert opencl_device.parse_device("CL:0") == 0
    name = opencl_device.get_device("CL:0").cl_device.name
    assert opencl_device.parse_device(name.upper()) == 0  # a name part, any case
    with pytest.raises(ValueError, match="no device 9 on platform 9"):
        opencl_device.parse_device("9:9")
    with pytest.raises(ValueError, match="names no OpenCL device"):
        opencl_device.parse_device("no such accelerator")
    with pytest.raises(ValueError, match="no OpenCL device 'CL:99'"):
        opencl_device.parse_device("CL:99")
    monkeypatch.setenv("FGRAD_OPENCL_DEVICE", "7:3")
    with pytest.raises(ValueError, match="FGRAD_OPENCL_DEVICE='7:3'"):
        opencl_device.default_index()


def test_float64_on_a_device_without_fp64_says_so() -> None:
    dev = CLDevice(opencl_device.default_index())
    dev.fp64 = False
    with pytest.raises(RuntimeError, match="cl_khr_fp64"):
        dev.program("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n__kernel void k() {}")


def test_as_text_shows_schedule_kernel_ir_and_opencl_c() -> None:
    text = fgrad.jit(w1, backend="opencl").lower(Tensor(np.ones(8, np.float32))).as_text()
    assert "schedule: 1 kernel" in text and "kernel k0(out" in text
    assert "__kernel void k0(__global float* restrict" in text
    assert "if (gid >= 8) return;" in text and "tanh(" in text
    x = np.ones((4, 3), np.float64)
    text = fgrad.jit(lambda t: t.sum(1), backend="opencl").lower(Tensor(x)).as_text()
    assert "cl_khr_fp64 : enable" in text and "__local double" in text


def test_jit_with_opencl_backend_returns_device_tensors() -> None:
    x = RNG.standard_normal(50).astype(np.float32)
    out = fgrad.jit(w1, backend="opencl")(Tensor(x))
    assert out.device.startswith("CL")
    want = np.tanh(x * 1.5 + 0.5) * (1 / (1 + np.exp(-x))) + np.exp(-x * x)
    close(out.numpy(), want.astype(np.float32), rtol=2e-6, atol=1e-7)


def test_block_until_ready_waits_for_the_device_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    out = fgrad.jit(w1, backend="opencl")(Tensor(np.ones(1 << 16, np.float32)))
    dev = opencl_device.get_device(out.device)
    finished = []

    class Queue:
        def finish(self) -> None:
            finished.append(True)
            real.finish()

    real = dev.queue
    monkeypatch.setattr(dev, "queue", Queue())
    assert fgrad.block_until_ready({"y": [out]})["y"][0] is out
    assert out.block_until_ready() is out
    assert len(finished) == 2


def test_block_until_ready_finishes_each_device_queue_once(monkeypatch: pytest.MonkeyPatch) -> None:
    f = fgrad.jit(lambda x: [x * float(i) for i in range(6)], backend="opencl")
    outs = f(Tensor(np.arange(8, dtype=np.float32)))
    for i, out in enumerate(outs):
        np.testing.assert_array_equal(out.numpy(), np.arange(8) * float(i))
    outs = f(Tensor(np.arange(8, dtype=np.float32)))
    dev = opencl_device.get_device(outs[0].device)
    finished = []
    real = dev.queue

    class Queue:
        def finish(self) -> None:
            finished.append(True)
            real.finish()

    monkeypatch.setattr(dev, "queue", Queue())
    tree = {"outs": outs, "host": Tensor(np.ones(2, np.float32)), "n": 3}
    assert fgrad.block_until_ready(tree) is tree
    assert len(finished) == 1  # six leaves on one device: one wait
