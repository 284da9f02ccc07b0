"""Native gather and scatter under `fgrad.jit` (llvm and OpenCL), checked against NumPy.

Gathers of 1-D to 3-D operands by 0-d to 2-d indices of every integer dtype (negative and
too-large indices clamp), fused into their consumers; scatter in every mode with duplicate
indices; empty operands; an embedding lookup and its gradient (a scatter-add); cross-entropy
with integer labels. Also the schedules (no host steps, no kernel of a gather's own), the
kernel IR (run-time indices checked, printed deterministically) and the thread/work-item
plans of scatter kernels.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from llvm_helpers import sched_of

import fgrad
from fgrad import Tensor
from fgrad.core.dtypes import dtypes
from fgrad.core.prims.indexing import gather, scatter
from fgrad.lower.kernel.index import Ix, Sym, ix_dyn, ix_sym, linearize
from fgrad.lower.kernel.build import build_kernel
from fgrad.lower.kernel.ir import (
    Kernel,
    KernelIRError,
    Load,
    Loop,
    Param,
    Store,
    check_kernel,
    expr_syms,
    kernel_indices,
)

pytestmark = pytest.mark.backends

RNG = np.random.default_rng(11)
INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
              np.uint64]
MODES = ("add", "set", "mul", "max", "min")


def gather_np(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Rows of x at idx clamped into range (zeros when x has no rows)."""
    if x.shape[0] == 0:
        return np.zeros(idx.shape + x.shape[1:], x.dtype)
    return x[clamped_np(idx, x.shape[0])]


def clamped_np(idx: np.ndarray, n: int) -> np.ndarray:
    """idx clamped into [0, n - 1], compared exactly whatever its dtype."""
    wide = [min(max(int(i), 0), n - 1) for i in idx.reshape(-1)]
    return np.array(wide, np.int64).reshape(idx.shape)


def scatter_np(x: np.ndarray, idx: np.ndarray, upd: np.ndarray, mode: str) -> np.ndarray:
    """x with the rows of upd combined into rows clamp(idx), one after another."""
    out = x.copy()
    if x.shape[0] == 0:
        return out
    rows = clamped_np(idx, x.shape[0]).reshape(-1)
    flat = upd.reshape((-1,) + x.shape[1:])
    combine = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
    with np.errstate(all="ignore"):
        for r, u in zip(rows, flat, strict=True):
            if out.dtype == np.bool_ and mode != "set":
                out[r] = (out[r] | u) if mode in ("add", "max") else (out[r] & u)
            else:
                out[r] = u if mode == "set" else combine[mode](out[r], u)
    return out


def values(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Random values of `dtype` (small integers, so sums and products stay exact)."""
    if dtype == np.bool_:
        return RNG.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(1, 4, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def indices(shape: tuple[int, ...], n: int, dtype: Any = np.int32) -> np.ndarray:
    """Indices of `shape` mostly in [0, n), with some out of range on either side."""
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -3), min(int(info.max), n + 3)
    return RNG.integers(lo, hi + 1, shape).astype(dtype)


def exact(got: Tensor, want: np.ndarray) -> None:
    """Same dtype, shape and values (NaNs in the same places)."""
    g = got.numpy()
    assert g.dtype == want.dtype and g.shape == want.shape
    np.testing.assert_array_equal(g, want)


def no_host_steps(fn: Any, *args: Any) -> None:
    """Assert that the native schedule of `fn` has no NumPy host step."""
    s = sched_of(fn, *args)
    assert not s.hosts(), str(s)


# ---------------------------------------------------------------------------- gather

GATHER_SHAPES = [((7,), ()), ((7,), (5,)), ((7,), (2, 3)), ((6, 4), ()), ((6, 4), (9,)),
                 ((6, 4), (2, 5)), ((3, 4, 5), ()), ((3, 4, 5), (4,)), ((3, 4, 5), (2, 2))]


@pytest.mark.parametrize("x_shape,idx_shape", GATHER_SHAPES)
def test_gather_shapes(x_shape: tuple[int, ...], idx_shape: tuple[int, ...],
                       jit_backend: str) -> None:
    """gather under jit matches NumPy for operands 1-D..3-D and indices 0-d..2-d."""
    x = values(x_shape, np.float32)
    idx = indices(idx_shape, x_shape[0])
    got = fgrad.jit(lambda a, i: gather(a, i))(Tensor(x), Tensor(idx))
    exact(got, gather_np(x, idx))
    no_host_steps(lambda a, i: gather(a, i), Tensor(x), Tensor(idx))


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_gather_index_dtypes(dtype: Any, jit_backend: str) -> None:
    """Every integer index dtype, with its extreme values, clamps like NumPy's clip."""
    x = values((5, 3), np.float32)
    info = np.iinfo(dtype)
    idx = np.array([info.min, info.max, 0, 4, 5, 2, info.max - 1, info.min + 1], dtype)
    got = fgrad.jit(lambda a, i: gather(a, i) + 1)(Tensor(x), Tensor(idx))
    exact(got, gather_np(x, idx) + 1)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int32, np.bool_],
                         ids=lambda d: np.dtype(d).name)
def test_gather_operand_dtypes(dtype: Any, jit_backend: str) -> None:
    """float16, float32, int32 and bool operands gather exactly."""
    x = values((6, 5), dtype)
    idx = indices((3, 2), 6, np.int64)
    got = fgrad.jit(lambda a, i: gather(a, i))(Tensor(x), Tensor(idx))
    exact(got, gather_np(x, idx))


def test_gather_fuses_into_consumer(jit_backend: str) -> None:
    """A gather with one elementwise consumer adds no kernel: one kernel, no host step."""
    x = values((10, 8), np.float32)
    idx = indices((4,), 10)

    def f(a: Tensor, i: Tensor) -> Tensor:
        return (gather(a * 2, i) - 1).exp()

    got = fgrad.jit(f)(Tensor(x), Tensor(idx))
    np.testing.assert_allclose(got.numpy(), np.exp(gather_np(x * 2, idx) - 1), rtol=1e-6)
    s = sched_of(f, Tensor(x), Tensor(idx))
    assert not s.hosts() and len(s.kernels()) == 1, str(s)
    if jit_backend != "numpy":
        text = fgrad.jit(f).lower(Tensor(x), Tensor(idx)).as_text()
        assert "0 host steps" in text and "dyn(" in text


def test_gather_of_reduced_and_shared_values(jit_backend: str) -> None:
    """A gathered value with a second consumer, a gather of a reduction's result, a reduction
    of a gather, and a gather of an iota and of a pad."""
    x = values((6, 5), np.float32)
    idx = indices((7,), 6)

    def f(a: Tensor, i: Tensor) -> tuple[Tensor, ...]:
        e = a.exp()
        row_max = a.max(1)
        picked = gather(e, i)
        return (picked * 2, e.sum(0), gather(row_max, i) + a.sum(), gather(a, i).sum(1),
                gather(Tensor.arange(6) * 3, i), gather(a.pad(((1, 1), (0, 0))), i))

    got = fgrad.jit(f)(Tensor(x), Tensor(idx))
    e = np.exp(x)
    want = (gather_np(e, idx) * 2, e.sum(0), gather_np(x.max(1), idx) + x.sum(),
            gather_np(x, idx).sum(1), gather_np(np.arange(6) * 3, idx),
            gather_np(np.pad(x, ((1, 1), (0, 0))), idx))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-6)
    no_host_steps(f, Tensor(x), Tensor(idx))


def test_gathered_row_results_stay_out_of_row_fusion(jit_backend: str) -> None:
    """A row's reduction gathered at run-time rows is not the current row's: the consumer
    gets a kernel of its own instead of joining the reduction's row-fused kernel."""
    x = values((6, 9), np.float32)
    idx = np.array([5, 0, 0, 2, 9, -1], np.int32)

    def f(a: Tensor, i: Tensor) -> tuple[Tensor, Tensor]:
        m = a.max(1)
        return a - gather(m, i).reshape(6, 1), a - gather(m, i).sum()

    got = fgrad.jit(f)(Tensor(x), Tensor(idx))
    m = x.max(1)
    want = (x - gather_np(m, idx)[:, None], x - gather_np(m, idx).sum())
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-6)
    assert not any(k.is_rows for k in sched_of(f, Tensor(x), Tensor(idx)).kernels())


def test_take_along_axis(jit_backend: str) -> None:
    """Tensor.gather along a middle axis (a batched gather through iota offsets)."""
    x = values((3, 5, 4), np.float32)
    idx = RNG.integers(0, 5, (3, 2, 4))
    got = fgrad.jit(lambda a, i: a.gather(1, i))(Tensor(x), Tensor(idx))
    exact(got, np.take_along_axis(x, idx, 1))


def test_gather_empty(jit_backend: str) -> None:
    """Empty index arrays give empty results; an operand without rows gives zeros."""
    x = values((4, 3), np.float32)
    idx = np.zeros((0,), np.int32)
    exact(fgrad.jit(lambda a, i: gather(a, i) * 2)(Tensor(x), Tensor(idx)),
          np.zeros((0, 3), np.float32))
    none = np.zeros((0, 3), np.float32)
    idx = np.array([0, 2, -1], np.int32)
    exact(fgrad.jit(lambda a, i: gather(a, i) + 1)(Tensor(none), Tensor(idx)),
          np.ones((3, 3), np.float32))


# ---------------------------------------------------------------------------- scatter


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.float16],
                         ids=lambda d: np.dtype(d).name)
def test_scatter_modes_with_duplicates(mode: str, dtype: Any, jit_backend: str) -> None:
    """Every mode with repeated (and out-of-range) indices matches NumPy's in-order result:
    sums and products combine every duplicate, 'set' keeps the last."""
    x = values((6, 4), dtype)
    idx = np.array([[1, 3, 1], [-2, 9, 1], [3, 3, 0]], np.int32)
    upd = values((3, 3, 4), dtype)

    def f(a: Tensor, i: Tensor, u: Tensor) -> Tensor:
        return scatter(a, i, u, mode)

    got = fgrad.jit(f)(Tensor(x), Tensor(idx), Tensor(upd))
    want = scatter_np(x, idx, upd, mode)
    if dtype == np.float16 and mode in ("add", "mul"):
        np.testing.assert_allclose(got.numpy().astype(np.float32), want.astype(np.float32),
                                   rtol=2e-3)
    else:
        exact(got, want)
    no_host_steps(f, Tensor(x), Tensor(idx), Tensor(upd))


@pytest.mark.parametrize("x_shape,idx_shape", [((9,), (12,)), ((9,), ()), ((5, 3, 2), (7,)),
                                               ((5, 3), (2, 4)), ((1, 1), (3,))])
def test_scatter_shapes(x_shape: tuple[int, ...], idx_shape: tuple[int, ...],
                        jit_backend: str) -> None:
    """Scatter-add of 1-D..3-D operands with 0-d..2-d indices, fused with its producers."""
    x = values(x_shape, np.float32)
    idx = indices(idx_shape, x_shape[0], np.int64)
    upd = values(idx_shape + x_shape[1:], np.float32)

    def f(a: Tensor, i: Tensor, u: Tensor) -> Tensor:
        return scatter(a * 2, i, u.exp(), "add") + 1

    got = fgrad.jit(f)(Tensor(x), Tensor(idx), Tensor(upd))
    want = scatter_np(x * 2, idx, np.exp(upd), "add") + 1
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)


@pytest.mark.parametrize("mode", ["set", "add"])
def test_scatter_wide_rows(mode: str, jit_backend: str) -> None:
    """Rows wider than a work-group, many duplicates: every column keeps NumPy's order."""
    x = values((7, 300), np.float32)
    idx = indices((40,), 7)
    upd = values((40, 300), np.float32)
    got = fgrad.jit(lambda a, i, u: scatter(a, i, u, mode))(Tensor(x), Tensor(idx),
                                                            Tensor(upd))
    np.testing.assert_allclose(got.numpy(), scatter_np(x, idx, upd, mode), rtol=1e-6)


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_scatter_index_dtypes(dtype: Any, jit_backend: str) -> None:
    """Every integer index dtype, with its extreme values, scatters like NumPy's clip."""
    x = values((5, 2), np.float32)
    info = np.iinfo(dtype)
    idx = np.array([info.min, info.max, 3, 3, 0], dtype)
    upd = values((5, 2), np.float32)
    got = fgrad.jit(lambda a, i, u: scatter(a, i, u, "set"))(Tensor(x), Tensor(idx),
                                                               Tensor(upd))
    exact(got, scatter_np(x, idx, upd, "set"))


def test_scatter_empty(jit_backend: str) -> None:
    """No updates leave the operand as it is; an operand without rows stays empty."""
    x = values((4, 3), np.float32)
    idx = np.zeros((0,), np.int32)
    upd = np.zeros((0, 3), np.float32)
    exact(fgrad.jit(lambda a, i, u: scatter(a, i, u, "add"))(Tensor(x), Tensor(idx),
                                                               Tensor(upd)), x)
    none = np.zeros((0, 3), np.float32)
    idx = np.array([0, 1], np.int32)
    upd = values((2, 3), np.float32)
    exact(fgrad.jit(lambda a, i, u: scatter(a, i, u, "max"))(Tensor(none), Tensor(idx),
                                                               Tensor(upd)), none)


def test_scatter_nan_extrema(jit_backend: str) -> None:
    """max/min propagate NaN from either side, as np.maximum/np.minimum do."""
    x = np.array([[1.0, np.nan], [2.0, 0.5]], np.float32)
    idx = np.array([0, 1, 0], np.int32)
    upd = np.array([[np.nan, 3.0], [1.0, np.nan], [5.0, -1.0]], np.float32)
    for mode in ("max", "min"):
        got = fgrad.jit(lambda a, i, u, m=mode: scatter(a, i, u, m))(
            Tensor(x), Tensor(idx), Tensor(upd))
        exact(got, scatter_np(x, idx, upd, mode))


# ---------------------------------------------------------------------------- models


def test_embedding_and_gradient(jit_backend: str) -> None:
    """An embedding lookup and its gradient (a scatter-add of the cotangent rows)."""
    table = values((10, 6), np.float32)
    ids = np.array([[1, 2, 9], [1, 1, 0]], np.int64)
    scale = values((2, 3, 6), np.float32)

    def loss(w: Tensor, i: Tensor, c: Tensor) -> Tensor:
        return (w[i] * c).sum()

    def step(w: Tensor, i: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        return loss(w, i, c), fgrad.grad(loss)(w, i, c)

    value, grad = fgrad.jit(step)(Tensor(table), Tensor(ids), Tensor(scale))
    np.testing.assert_allclose(value.numpy(), (table[ids] * scale).sum(), rtol=1e-5)
    want = np.zeros_like(table)
    np.add.at(want, ids.reshape(-1), scale.reshape(-1, 6))
    np.testing.assert_allclose(grad.numpy(), want, rtol=1e-6)
    no_host_steps(step, Tensor(table), Tensor(ids), Tensor(scale))


def test_cross_entropy_integer_labels(jit_backend: str) -> None:
    """Cross-entropy with integer labels and its gradient run natively, match NumPy."""
    logits = values((8, 5), np.float32)
    labels = np.array([0, 4, 2, 1, 3, 3, 0, 1], np.int32)

    def step(z: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        return z.cross_entropy(y), fgrad.grad(lambda q: q.cross_entropy(y))(z)

    value, grad = fgrad.jit(step)(Tensor(logits), Tensor(labels))
    z = logits.astype(np.float64)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    rows = np.arange(8)
    np.testing.assert_allclose(value.numpy(), -np.log(p[rows, labels]).mean(), rtol=1e-5)
    onehot = np.eye(5)[labels]
    np.testing.assert_allclose(grad.numpy(), (p - onehot) / 8, rtol=1e-4, atol=1e-6)
    no_host_steps(step, Tensor(logits), Tensor(labels))


# ---------------------------------------------------------------------------- structure


def _scatter_kernel(n: int, width: int) -> Kernel:
    x = Tensor(np.zeros((n, width), np.float32))
    idx = Tensor(np.zeros((n,), np.int32))
    s = sched_of(lambda a, i: scatter(a, i, a + 1, "add"), x, idx)
    (step,) = s.kernels()
    return build_kernel(s, step)[0]


def test_scatter_kernels_run_serially() -> None:
    """A large scatter kernel never splits across llvm threads; OpenCL runs it as one
    work-item per column."""
    from fgrad.lower.llvm.threads import split_extent
    from fgrad.lower.opencl.render import lower_kernel
    kernel = _scatter_kernel(1 << 12, 1 << 8)
    assert split_extent(kernel) == 0
    rendered = lower_kernel(kernel)
    assert rendered.form == "columns" and rendered.launch.global_size == (256,)


def test_dyn_loads_are_checked() -> None:
    """The checker accepts loads through a run-time index, and checks the loads inside it."""
    i, j = Sym("i0", 4), Sym("i1", 3)
    params = (Param("out", (4, 3), dtypes.float32, True), Param("x", (5, 3), dtypes.float32,
                                                                 False),
              Param("idx", (4,), dtypes.int32, False))

    def kernel(idx_load: Load) -> Kernel:
        row = ix_dyn(idx_load, 4, expr_syms(idx_load), "idx[i0]")
        load = Load(1, linearize((row, ix_sym(j)), (5, 3)), dtypes.float32)
        store = Store(0, linearize((ix_sym(i), ix_sym(j)), (4, 3)), load)
        return Kernel("k", params, (Loop(i, (Loop(j, (store,)),)),))

    good = kernel(Load(2, ix_sym(i), dtypes.int32))
    check_kernel(good)
    assert "dyn(idx[i0], 0, 4)" in str(good)
    assert ix_sym(i) in kernel_indices(good)  # the index buffer's load is seen
    with pytest.raises(KernelIRError, match="outside the buffer"):
        check_kernel(kernel(Load(2, Ix(((i, 2),), 0), dtypes.int32)))
    with pytest.raises(KernelIRError, match="not an integer"):
        check_kernel(kernel(Load(1, ix_sym(i), dtypes.float32)))


def test_printed_ir_is_deterministic() -> None:
    """Two traces of the same function print the same IR (no object ids leak)."""
    x = Tensor(values((6, 4), np.float32))
    idx = Tensor(indices((3,), 6))

    def f(a: Tensor, i: Tensor) -> Tensor:
        return scatter(a, i, gather(a, i) * 2, "add")

    texts = {fgrad.jit(f, backend="llvm").lower(x, idx).as_text() for _ in range(2)}
    assert len(texts) == 1
