"""The llvm jit backend on programs: schedule shape, indexing, reductions, integer and bool
semantics, grad/vmap programs, random movement chains.

References are NumPy expressions and the "numpy" jit backend; tests never assert on timing.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
from llvm_helpers import (assert_native, close, llvm, needs_half, random_program, sched_of, w1,
                          w1_numpy)

import fgrad
from fgrad import Tensor, dtypes
from fgrad.core import prims
from fgrad.lower.llvm.runtime import plan
from fgrad.lower.schedule.partition import HostStep
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(0)


# ---------------------------------------------------------------------------- schedule


def test_w1_is_one_kernel_and_matches_numpy() -> None:
    x = RNG.standard_normal(1000).astype(np.float32) * 4
    s = assert_native(w1, Tensor(x))
    assert len(s.kernels()) == 1
    close(llvm(w1, Tensor(x)), w1_numpy(x).astype(np.float32), rtol=2e-6, atol=1e-7)


def test_softmax_takes_at_most_two_passes() -> None:
    x = RNG.standard_normal((16, 33)).astype(np.float32)
    s = assert_native(lambda t: t.softmax(-1), Tensor(x))
    assert len(s.kernels()) <= 2  # passes over the 2-D data: a row-fused kernel makes one
    e = np.exp(x - x.max(-1, keepdims=True))
    close(llvm(lambda t: t.softmax(-1), Tensor(x)), e / e.sum(-1, keepdims=True), rtol=1e-6)


def test_reshape_and_permute_between_elementwise_ops_add_no_copy() -> None:
    def f(t: Tensor) -> Tensor:
        return (t * 2).reshape(4, 6).permute(1, 0).exp().reshape(24) + 1

    x = RNG.standard_normal(24).astype(np.float32)
    s = assert_native(f, Tensor(x))
    assert len(s.kernels()) == 1
    want = np.exp((x * 2).reshape(4, 6).T).reshape(24) + 1
    close(llvm(f, Tensor(x)), want.astype(np.float32))


def test_schedule_prints_kernels_and_host_steps() -> None:
    def f(x: Tensor, w: Tensor) -> Tensor:
        return (x @ w).relu().sum()

    s = sched_of(f, Tensor(np.ones((4, 8), np.int64)), Tensor(np.ones((8, 3), np.int64)))
    text = str(s)  # (float32 and int32 matmuls are native gemms: see test_llvm_gemm.py)
    assert "host dot_general" in text and "temporary fallback" in text
    assert "kernel reduce axes=(0, 1) i64[4,3] (c) -> (" in text
    assert text.endswith("reduce_sum")
    assert isinstance(s.steps[0], HostStep)


def test_lowered_as_text_shows_schedule_kernel_ir_and_llvm() -> None:
    text = fgrad.jit(w1, backend="llvm").lower(Tensor(np.ones(8, np.float32))).as_text()
    assert "schedule: 1 kernel" in text
    assert "kernel k0(out" in text and "for i0 in 0..8" in text
    assert "define" in text and "@\"seg0\"" in text


def test_executable_is_cached_per_jaxpr() -> None:
    f = fgrad.jit(lambda t: t * 3 + 1, backend="llvm")
    x = Tensor(np.arange(5, dtype=np.float32))
    f(x)
    seconds = f.cache_info().compile_seconds
    close(f(x), np.arange(5, dtype=np.float32) * 3 + 1)
    assert f.cache_info().compile_seconds == seconds


def test_broadcast_transcendental_is_not_recomputed_per_element() -> None:
    def f(row: Tensor, m: Tensor) -> Tensor:
        return m * row.exp().reshape(1, 64).expand(32, 64)

    s = sched_of(f, Tensor(np.ones(64, np.float32)), Tensor(np.ones((32, 64), np.float32)))
    assert [int(np.prod(k.shape)) for k in s.kernels()] == [64, 32 * 64]


# ---------------------------------------------------------------------------- indexing


MOVEMENT_CASES: list[tuple[str, Callable[[Tensor], Tensor], Callable[[np.ndarray], Any]]] = [
    ("pad", lambda t: t.pad(((1, 2), (0, 3))) * 2,
     lambda a: np.pad(a, ((1, 2), (0, 3))) * 2),
    ("pad_crop", lambda t: prims.pad(t, ((-1, 2, 0), (2, -3, 1)), 7.0) + 1,
     lambda a: prims.pad_p.impl(a, config=((-1, 2, 0), (2, -3, 1)), value=7.0) + 1),
    ("slice_strided", lambda t: t[1:6:2, ::3] + 1, lambda a: a[1:6:2, ::3] + 1),
    ("rev", lambda t: t.flip(0).flip(1) - t, lambda a: a[::-1, ::-1] - a),
    ("transpose", lambda t: t.T * t.T, lambda a: a.T * a.T),
    ("reshape_split", lambda t: t.reshape(2, 3, 10).permute(2, 0, 1).exp(),
     lambda a: np.exp(a.reshape(2, 3, 10).transpose(2, 0, 1))),
    ("broadcast", lambda t: t[:, :1] + t[:1, :], lambda a: a[:, :1] + a[:1, :]),
    ("cat", lambda t: t[:, :4].cat(t[:, 7:].exp(), t[:, 4:7], dim=1) * 1,
     lambda a: np.concatenate([a[:, :4], np.exp(a[:, 7:]), a[:, 4:7]], 1)),
    ("pad_of_reshape", lambda t: t.reshape(10, 6).pad(((2, 1), (1, 1))).sum(1),
     lambda a: np.pad(a.reshape(10, 6), ((2, 1), (1, 1))).sum(1)),
]


@pytest.mark.parametrize("name,fn,ref", MOVEMENT_CASES, ids=[c[0] for c in MOVEMENT_CASES])
def test_movement_becomes_indexing(name: str, fn: Callable, ref: Callable) -> None:
    x = RNG.standard_normal((6, 10)).astype(np.float32)
    assert_native(fn, Tensor(x))
    close(llvm(fn, Tensor(x)), np.asarray(ref(x), np.float32), rtol=1e-6)


def test_iota_and_arange_are_native() -> None:
    def f(t: Tensor) -> Tensor:
        return t + Tensor.arange(12).reshape(3, 4).cast(dtypes.float32)

    x = np.ones((3, 4), np.float32)
    assert_native(f, Tensor(x))
    close(llvm(f, Tensor(x)), x + np.arange(12, dtype=np.float32).reshape(3, 4))


# ---------------------------------------------------------------------------- reductions


@pytest.mark.parametrize("axes", [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)])
@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
def test_reductions_over_axes(op: str, axes: tuple[int, ...]) -> None:
    x = RNG.uniform(0.5, 1.5, (3, 5, 7)).astype(np.float32)
    fn = {"sum": prims.reduce_sum, "max": prims.reduce_max, "min": prims.reduce_min,
          "prod": prims.reduce_prod}[op]
    ref = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}[op]
    f = lambda t: fn(t * 2, axes)  # noqa: E731
    assert_native(f, Tensor(x))
    close(llvm(f, Tensor(x)), ref(x * 2, axis=axes).astype(np.float32), rtol=1e-5)


def test_keepdim_mean_and_broadcast_back() -> None:
    def f(t: Tensor) -> Tensor:
        return t - t.mean(axis=0, keepdim=True) + t.max(axis=1, keepdim=True)

    x = RNG.standard_normal((9, 17)).astype(np.float32)
    assert_native(f, Tensor(x))
    want = x - x.mean(0, keepdims=True) + x.max(1, keepdims=True)
    close(llvm(f, Tensor(x)), want, rtol=1e-5, atol=1e-6)


def test_reductions_of_ints_bools_and_empty_axes() -> None:
    xi = RNG.integers(-50, 50, (4, 6)).astype(np.int32)
    close(llvm(lambda t: prims.reduce_sum(t, (0,)), Tensor(xi)), xi.sum(0).astype(np.int32))
    close(llvm(lambda t: prims.reduce_max(t, (1,)), Tensor(xi)), xi.max(1))
    xb = xi > 0
    close(llvm(lambda t: prims.reduce_sum(t, (1,)), Tensor(xb)), xb.sum(1).astype(bool))
    close(llvm(lambda t: prims.reduce_min(t, (0,)), Tensor(xb)), xb.min(0))
    empty = np.zeros((0, 5), np.float32)
    close(llvm(lambda t: prims.reduce_sum(t, (0,)), Tensor(empty)), np.zeros(5, np.float32))
    close(llvm(lambda t: prims.reduce_prod(t, (0,)), Tensor(empty)), np.ones(5, np.float32))


def test_nan_propagates_through_max_reduction() -> None:
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]], np.float32)
    close(llvm(lambda t: prims.reduce_max(t, (1,)), Tensor(x)), np.max(x, 1))
    close(llvm(lambda t: prims.reduce_max(t, (0,)), Tensor(x)), np.max(x, 0))


@needs_half
def test_float16_io_and_accumulation() -> None:
    x = RNG.standard_normal((8, 300)).astype(np.float16)
    f = lambda t: (t * 3 + 1).sum(1)  # noqa: E731
    assert_native(f, Tensor(x))
    want = prims.reduce_sum_p.impl(x * np.float16(3) + np.float16(1), axes=(1,))
    close(llvm(f, Tensor(x)), want, rtol=2e-3, atol=1e-2)
    g = lambda t: (t * 1.5).exp() - t  # noqa: E731
    close(llvm(g, Tensor(x)), np.exp(x * np.float16(1.5)) - x, rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------------------- integers


INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
              np.uint64]


def _int_values(npd: Any) -> np.ndarray:
    info = np.iinfo(npd)
    vals = [0, 1, 2, 3, 7, 100, info.max, info.max - 1, info.min, info.min + 1]
    if info.min < 0:
        vals += [-1, -2, -3, -7, -100]
    return np.array(vals, dtype=npd)


@pytest.mark.parametrize("npd", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_integer_division_and_remainder_never_trap(npd: Any) -> None:
    v = _int_values(npd)
    x, y = np.repeat(v, len(v)), np.tile(v, len(v))
    for p in (prims.div_p, prims.rem_p):
        f = lambda a, b, p=p: p.bind(a, b)  # noqa: E731
        assert_native(f, Tensor(x), Tensor(y))
        close(llvm(f, Tensor(x), Tensor(y)), p.impl(x, y))
    assert (p.impl(x, y)[y == 0] == 0).all()


def test_tensor_floordiv_and_mod_follow_python_signs() -> None:
    x = np.array([7, -7, 7, -7, 0, 5, -5], np.int32)
    y = np.array([2, 2, -2, -2, 3, 0, 0], np.int32)
    got = llvm(lambda a, b: (a // b, a % b), Tensor(x), Tensor(y))
    nz = y != 0
    np.testing.assert_array_equal(got[0].numpy()[nz], (x // np.where(nz, y, 1))[nz])
    np.testing.assert_array_equal(got[1].numpy()[nz], (x % np.where(nz, y, 1))[nz])
    ref = fgrad.jit(lambda a, b: (a // b, a % b), backend="numpy")(Tensor(x), Tensor(y))
    np.testing.assert_array_equal(got[0].numpy(), ref[0].numpy())
    np.testing.assert_array_equal(got[1].numpy(), ref[1].numpy())


@pytest.mark.parametrize("npd", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_shifts_and_integer_pow(npd: Any) -> None:
    bits = np.dtype(npd).itemsize * 8
    x = np.resize(_int_values(npd), 12)
    signed = np.iinfo(npd).min < 0
    amounts = [0, 1, 3, bits - 1, bits, bits + 5] + ([-1, -bits] if signed else [])
    y = np.resize(np.array(amounts, npd), 12)
    for p in (prims.shift_left_p, prims.shift_right_p):
        close(llvm(lambda a, b, p=p: p.bind(a, b), Tensor(x), Tensor(y)), p.impl(x, y))
    base = np.resize(np.array([0, 1, 2, 3, 5, 7, 11], npd), 12)
    if signed:
        base = np.resize(np.array([0, 1, -1, 2, -3, 5, 7], npd), 12)
    exps = np.resize(np.array([0, 1, 2, 3, 7, 13, 40] + ([-1, -2] if signed else []),
                              npd), 12)
    close(llvm(lambda a, b: prims.pow_p.bind(a, b), Tensor(base), Tensor(exps)),
          prims.pow_p.impl(base, exps))


# ---------------------------------------------------------------------------- bool


def test_comparisons_and_logic_produce_bools() -> None:
    x = np.array([1.0, np.nan, -2.0, 0.0, np.inf, 3.0], np.float32)
    y = np.array([1.0, np.nan, 2.0, -0.0, np.inf, np.nan], np.float32)

    def f(a: Tensor, b: Tensor) -> Any:
        return (a == b, a != b, a < b, (a <= b) | (a > b), ~(a >= b), (a < b) ^ (a == b))

    assert_native(f, Tensor(x), Tensor(y))
    want = (x == y, x != y, x < y, (x <= y) | (x > y), ~(x >= y), (x < y) ^ (x == y))
    for g, w in zip(llvm(f, Tensor(x), Tensor(y)), want, strict=True):
        np.testing.assert_array_equal(g.numpy(), w)
    cond = Tensor(np.array([True, False, True, False, True, False]))
    close(llvm(lambda c, a, b: c.where(a, b), cond, Tensor(x), Tensor(y)),
          np.where(cond.numpy(), x, y))


# ---------------------------------------------------------------------------- programs


def test_zero_d_and_empty_arrays() -> None:
    s = np.float32(2.5)
    close(llvm(lambda t: t * 2 + t.exp(), Tensor(np.array(s))), np.array(s * 2 + np.exp(s)))
    e = np.zeros((0, 3), np.float32)
    close(llvm(lambda t: (t * 2).exp().T, Tensor(e)), np.zeros((3, 0), np.float32))
    close(llvm(lambda t: t.pad(((1, 1), (0, 0))) + 1, Tensor(e)), np.ones((2, 3), np.float32))


def test_outputs_that_are_inputs_or_constants() -> None:
    x = np.arange(4, dtype=np.float32)
    out = llvm(lambda t: (t, t * 0 + 3, t.T), Tensor(x))
    close(out[0], x)
    close(out[1], np.full(4, 3, np.float32))
    close(out[2], x)


def _mlp_loss(params: dict, x: Tensor, y: Tensor) -> Tensor:
    h = (x @ params["w1"] + params["b1"]).relu()
    z = (h @ params["w2"] + params["b2"]).tanh()
    return ((z - y) ** 2).mean() + (params["w1"] * params["w1"]).sum() * 1e-3


def _mlp_data() -> tuple[dict, Tensor, Tensor]:
    rng = np.random.default_rng(7)
    params = {"w1": Tensor(rng.standard_normal((5, 16)).astype(np.float32) * 0.5),
              "b1": Tensor(rng.standard_normal(16).astype(np.float32) * 0.1),
              "w2": Tensor(rng.standard_normal((16, 3)).astype(np.float32) * 0.5),
              "b2": Tensor(np.zeros(3, np.float32))}
    x = Tensor(rng.standard_normal((32, 5)).astype(np.float32))
    y = Tensor(rng.standard_normal((32, 3)).astype(np.float32))
    return params, x, y


def test_grad_of_mlp_loss_matches_numpy_backend() -> None:
    params, x, y = _mlp_data()
    g = fgrad.grad(_mlp_loss)
    got = fgrad.jit(g, backend="llvm")(params, x, y)
    want = fgrad.jit(g, backend="numpy")(params, x, y)
    for k in params:
        close(got[k], want[k].numpy(), rtol=1e-5, atol=1e-6)
    vg = fgrad.jit(fgrad.value_and_grad(_mlp_loss), backend="llvm")
    loss, _ = vg(params, x, y)
    close(loss, _mlp_loss(params, x, y).numpy(), rtol=1e-5)


def test_vmap_of_per_example_loss_matches_numpy_backend() -> None:
    params, x, y = _mlp_data()
    per_example = fgrad.vmap(lambda xi, yi: _mlp_loss(params, xi.reshape(1, 5),
                                                      yi.reshape(1, 3)))
    got = fgrad.jit(per_example, backend="llvm")(x, y)
    want = fgrad.jit(per_example, backend="numpy")(x, y)
    close(got, want.numpy(), rtol=1e-5, atol=1e-7)
    grads = fgrad.vmap(fgrad.grad(lambda xi, yi: _mlp_loss(params, xi.reshape(1, 5),
                                                          yi.reshape(1, 3))))
    close(fgrad.jit(grads, backend="llvm")(x, y),
          fgrad.jit(grads, backend="numpy")(x, y).numpy(), rtol=1e-5, atol=1e-6)


def test_intermediate_buffers_are_reused_and_results_stay_right() -> None:
    def f(x: Tensor, w: Tensor) -> Tensor:
        for _ in range(4):
            x = (x @ w).tanh() * 2
        return x

    x = RNG.standard_normal((8, 8)).astype(np.float32)
    w = RNG.standard_normal((8, 8)).astype(np.float32) * 0.3
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(f)(Tensor(x), Tensor(w)))
    program = plan(jaxpr)
    assert len(program.buffer_bytes) < len(program.buffer_of) == 7  # 4 gemms, 3 kernels
    want = x
    for _ in range(4):
        want = np.tanh(want @ w) * 2
    close(llvm(f, Tensor(x), Tensor(w)), want, rtol=1e-5, atol=1e-6)


def test_zero_d_arguments_pass_through_unchanged() -> None:
    out = llvm(lambda s, t: (s, t * s), Tensor(np.float32(2.0)), Tensor(np.ones(3, np.float32)))
    assert out[0].shape == () and float(out[0].numpy()) == 2.0
    close(out[1], np.full(3, 2.0, np.float32))


def test_host_fallback_primitives_give_numpy_results() -> None:
    x = RNG.standard_normal((5, 7)).astype(np.float32)

    def f(t: Tensor) -> Any:
        many = Tensor.cat(*[t[:, i:i + 1] * i for i in range(7)] * 3, dim=1)
        return t.cumsum(1).exp(), t.argmax(1), many.sum(1)

    s = sched_of(f, Tensor(x))
    assert {h.eqn.primitive.name for h in s.hosts()} >= {"argmax", "concatenate"}
    assert [step.eqn.primitive.name for step in s.linalgs()] == ["cumsum"]  # a library call
    got = llvm(f, Tensor(x))
    close(got[0], np.exp(np.cumsum(x, 1)), rtol=1e-6)
    np.testing.assert_array_equal(got[1].numpy(), np.argmax(x, 1))
    close(got[2], (x * np.arange(7, dtype=np.float32)).sum(1) * 3, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", range(40))
def test_random_movement_programs_match_numpy_backend(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = tuple(int(d) for d in rng.integers(1, 5, int(rng.integers(1, 4))))
    x = Tensor(rng.uniform(-1, 1, shape).astype(np.float32))
    program = random_program(rng, ("reshape", "permute", "slice", "flip", "pad", "expand",
                                   "math", "sum", "cat"))
    want = fgrad.jit(program, backend="numpy")(x).numpy()
    close(llvm(program, x), want, rtol=1e-5, atol=1e-6)
