"""Streaming (non-temporal) stores on llvm: which kernels take them, the machine code they
make, and exact results on every path (aligned lines, unaligned ends, thread chunks that
start mid-line, outputs that are not line-aligned)."""
from __future__ import annotations

from typing import Any, Callable

import ml_dtypes
import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.kernel import streaming
from fgrad.lower.kernel.index import Clamp, Ix, Sym, add, ix_const, ix_sym
from fgrad.lower.kernel.ir import Loop
from fgrad.lower.llvm import kernel_cache
from fgrad.lower.llvm import runtime as llvm_runtime
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(3)


@pytest.fixture
def stream_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stream outputs of any size, so small arrays take the streaming path."""
    monkeypatch.setattr(streaming, "STREAM_MIN_BYTES", 0)


def kernels_of(fn: Callable[..., Any], *args: Tensor) -> list[Any]:
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(*args))
    return list(llvm_runtime.plan(jaxpr).kernels)


def test_only_single_output_memory_bound_kernels_stream(stream_everything: None) -> None:
    x = Tensor(RNG.standard_normal(4096).astype(np.float32))
    streamed = lambda fn: [streaming.streamed_outputs(k) for k in kernels_of(fn, x)]  # noqa
    assert streamed(lambda v: v * 2 + 1) == [(0,)]
    assert streamed(lambda v: v.exp() + 1) == [(0,)]        # by blocks (below)
    assert streamed(lambda v: (v.relu(), v * 2)) == [()]    # two outputs
    assert streamed(lambda v: v > 0) == [()]                # one-byte elements
    assert streamed(lambda v: v.sum()) in ([()], [(), ()])  # a reduction


def test_a_row_kernel_streams_its_last_phase(stream_everything: None) -> None:
    """layernorm's normalized rows stream; so do softmax's (its exps staged on the stack) and
    a transpose staged through registers by tiles; a transpose of rows of 65 reads across
    the loop, a permuted flattened axis reads by quotient and remainder, output rows of 65
    elements are not whole lines."""
    m = Tensor(RNG.standard_normal((48, 64)).astype(np.float32))
    odd = Tensor(RNG.standard_normal((48, 65)).astype(np.float32))
    streamed = lambda fn, a: [streaming.streamed_outputs(k) for k in kernels_of(fn, a)]  # noqa
    (kernel,) = kernels_of(lambda v: v.layernorm(), m)
    assert streaming.streamed_outputs(kernel) == (len(kernel.params) - 2,)
    (kernel,) = kernels_of(lambda v: v.softmax(-1), m)
    assert streaming.scratch_row(kernel) is not None
    assert streaming.streamed_outputs(kernel) == (streaming.scratch_row(kernel).buf,)
    assert streamed(lambda v: v.T + 1, m) == [(0,)]
    assert streamed(lambda v: v.T + 1, odd) == [()]
    assert streamed(lambda v: v.flip(1) * 2, m) == [(0,)]        # reads backwards by lines
    # reads by quotient and remainder of the loop index (a permuted flattened axis)
    assert streamed(lambda v: v.reshape(8, 6, 64).permute(1, 0, 2).reshape(48, 64) * 2,
                    m) == [()]
    assert streamed(lambda v: v * 2, odd) == [(0,)]          # one flat loop
    assert streamed(lambda v: v[:, 1:] * 2, odd) == [(0,)]   # output rows of 64
    assert [streaming.streamed_outputs(k) for k in kernels_of(lambda v: v.layernorm(), odd)
            ] == [()]


@pytest.mark.parametrize("shape", [(7, 64), (33, 48), (5, 4096)])
def test_streamed_rows_are_exact(stream_everything: None, shape: tuple[int, int]) -> None:
    x = RNG.standard_normal(shape).astype(np.float32)
    fn = lambda v: v.layernorm() * 2 + (v[0:1] + 1)  # noqa: E731
    got = fgrad.jit(fn, backend="llvm")(Tensor(x)).numpy()
    want = fgrad.jit(fn, backend="numpy")(Tensor(x)).numpy()
    wide = x.astype(np.float64)
    ref = (wide - wide.mean(1, keepdims=True)) / np.sqrt(wide.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, ref * 2 + (wide[0:1] + 1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_small_outputs_stay_in_cache() -> None:
    x = Tensor(RNG.standard_normal(4096).astype(np.float32))
    assert [streaming.streamed_outputs(k) for k in kernels_of(lambda v: v + 1, x)] == [()]
    assert streaming.STREAM_MIN_BYTES >= 1 << 20


def test_streaming_kernel_stores_whole_lines_around_the_cache(stream_everything: None
                                                              ) -> None:
    x = Tensor(RNG.standard_normal(1 << 16).astype(np.float32))
    (kernel,) = kernels_of(lambda v: v * 2 + 1, x)
    text, _ = kernel_cache._kernel_text(kernel)
    assert "!nontemporal" in text and ".stream" in text
    assembly = kernel_cache.assembly_of(text)
    assert "vmovntps" in assembly or "movntps" in assembly


@pytest.mark.parametrize("n", [1, 15, 16, 17, 1000, 4099, (1 << 18) + 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, ml_dtypes.bfloat16])
def test_results_are_exact_on_every_path(stream_everything: None, n: int, dtype: Any) -> None:
    """Odd lengths run the head and tail loops; the large one splits over threads into
    chunks that start mid-line."""
    x = (RNG.standard_normal(n) * 100).astype(dtype)
    got = fgrad.jit(lambda v: v * 3 - 2, backend="llvm")(Tensor(x)).numpy()
    if dtype == ml_dtypes.bfloat16:   # each op rounds to bfloat16 (as ml_dtypes does)
        tripled = (x.astype(np.float32) * 3).astype(dtype)
        want = (tripled.astype(np.float32) - 2).astype(dtype)
    else:
        want = x * dtype(3) - dtype(2)
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def test_transcendental_values_stream_by_blocks(stream_everything: None) -> None:
    """tanh and the logistic per element: the vectorized loop computes a block into
    the stack and aligned streaming stores copy it out (one vectorized exp, no scalar line
    of them); a row kernel's last phase does not take this path."""
    x = Tensor(RNG.standard_normal(1 << 16).astype(np.float32))
    (kernel,) = kernels_of(lambda v: (v * 1.5).tanh() * v.sigmoid() + (-v * v).exp()
                           + (v * 3).exp(), x)
    assert streaming.streamed_outputs(kernel) == ()   # four: bound by arithmetic
    for three in (True, False):   # W1's three (since vscalefps) and two
        (kernel,) = kernels_of(lambda v: (v * 1.5).tanh() * v.sigmoid()
                               + ((-v * v).exp() if three else v * v), x)
        assert streaming.streams_by_blocks(kernel)
    text, _ = kernel_cache._kernel_text(kernel)
    assert '"stream_block"' in text and "!nontemporal" in text
    assembly = kernel_cache.assembly_of(text)
    assert "vmovntps" in assembly or "movntps" in assembly
    (kernel,) = kernels_of(lambda v: v * 2 + 1, x)
    assert not streaming.streams_by_blocks(kernel)   # a line's elements unrolled
    m = Tensor(RNG.standard_normal((48, 64)).astype(np.float32))
    (kernel,) = kernels_of(lambda v: v.layernorm(), m)
    assert not streaming.streams_by_blocks(kernel)


@pytest.mark.parametrize("n", [1, 17, 127, 128, 129, 1000, 4099, (1 << 18) + 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blocks_of_transcendentals_keep_every_value(stream_everything: None, n: int,
                                                    dtype: Any) -> None:
    """The same values streamed by blocks as computed in place: heads, whole blocks, a
    last partial block, tails, and thread chunks that start mid-line (the large one)."""
    x = (RNG.standard_normal(n) * 3).astype(dtype)
    fn = lambda v: (v * 1.5 + 0.5).tanh() * v.sigmoid() + v * v  # noqa: E731
    streamed = fgrad.jit(fn, backend="llvm")(Tensor(x)).numpy()
    streaming_off = pytest.MonkeyPatch()
    streaming_off.setattr(streaming, "STREAM_MIN_BYTES", 1 << 60)
    try:
        in_place = fgrad.jit(fn, backend="llvm")(Tensor(x)).numpy()
    finally:
        streaming_off.undo()
    np.testing.assert_array_equal(streamed, in_place)
    want = np.tanh(x * 1.5 + 0.5) / (1 + np.exp(-x)) + x * x
    np.testing.assert_allclose(streamed, want, rtol=2e-6 if dtype == np.float32 else 1e-13,
                               atol=1e-7 if dtype == np.float32 else 1e-15)


def test_outputs_not_aligned_to_a_line_take_ordinary_stores(stream_everything: None
                                                            ) -> None:
    """A donated argument's memory (NumPy aligns it to 16 bytes only) as the output."""
    results = []   # 16 starts: one donated in place but not line-aligned is near-certain
    kept = []   # every array stays alive, so each start is a new block (a freed one came
    for offset in range(16):   # back each time, and with it one alignment for all 16)
        base = np.zeros(5000 + offset, np.float32)
        x = base[offset:]
        x[:] = RNG.standard_normal(5000)
        out = fgrad.jit(lambda v: v * 2 + 1, donate_argnums=(0,), backend="llvm")(Tensor(x))
        got = np.asarray(out.numpy())
        kept.append((base, out))
        results.append(got.ctypes.data % streaming.LINE_BYTES)
        np.testing.assert_array_equal(got, x * np.float32(2) + np.float32(1))
    assert any(results), "no output was misaligned: the fallback went untested"


def test_the_threshold_is_at_most_this_machines_share_of_the_cache(monkeypatch) -> None:
    monkeypatch.setattr(streaming, "cache_bytes", lambda level=None: 480 << 20)
    monkeypatch.setattr(streaming.os, "cpu_count", lambda: 2)
    assert streaming._stream_min_bytes() == 2 * streaming.LLC_SHARE_PER_CPU
    monkeypatch.setattr(streaming, "cache_bytes", lambda level=None: 8 << 20)
    assert streaming._stream_min_bytes() == 8 << 20
    monkeypatch.setattr(streaming, "cache_bytes", lambda level=None: None)
    assert streaming._stream_min_bytes() == 32 << 20


def test_a_staged_row_keeps_the_bits(monkeypatch) -> None:
    """softmax with its exps staged on the stack and its output streamed gives the same
    bits as the kernel that writes the exps to the output and rescales them there."""
    x = (RNG.standard_normal((40, 128)) * 5).astype(np.float32)
    x[3, 7], x[5, :], x[9, 2], x[11, 4] = np.inf, -np.inf, np.nan, -np.inf
    monkeypatch.setattr(streaming, "STREAM_MIN_BYTES", 0)
    staged = fgrad.jit(lambda v: v.softmax(-1))(Tensor(x)).numpy()
    monkeypatch.setattr(streaming, "STREAM_MIN_BYTES", 1 << 60)
    plain = fgrad.jit(lambda v: v.softmax(-1))(Tensor(x)).numpy()
    np.testing.assert_array_equal(staged.view(np.int32), plain.view(np.int32))
    with np.errstate(all="ignore"):
        top = x.max(1, keepdims=True)
        e = np.exp(x - np.where(np.isfinite(top), top, 0))
        np.testing.assert_allclose(staged, e / e.sum(1, keepdims=True), rtol=1e-5,
                                   atol=1e-7, equal_nan=True)


def test_rows_too_long_to_stage_are_not_streamed(stream_everything: None) -> None:
    wide = Tensor(np.ones((2, 2 * streaming.SCRATCH_ROW_MAX), np.float32))
    (kernel,) = kernels_of(lambda v: v.softmax(-1), wide)
    assert streaming.scratch_row(kernel) is None and streaming.streamed_outputs(kernel) == ()


LATE = {"softmax": (lambda v: v.softmax(-1), True), "layernorm": (lambda v: v.layernorm(), True),
        "log_softmax": (lambda v: v.log_softmax(-1), True),
        # a reduction, then the streamed row: its last phase is the carrier itself
        "x - max": (lambda v: v - v.max(axis=1, keepdim=True), False),
        "x / sum": (lambda v: v / v.abs().sum(axis=1, keepdim=True), False)}

TWO_PHASES = {"x - max": (lambda v: v - v.max(axis=1, keepdim=True),
                          lambda a: a - a.max(axis=1, keepdims=True)),
              "x - mean": (lambda v: v - v.mean(axis=1, keepdim=True),
                           lambda a: a - a.mean(axis=1, keepdims=True)),
              "x / sum": (lambda v: v / v.abs().sum(axis=1, keepdim=True),
                          lambda a: a / np.abs(a).sum(axis=1, keepdims=True))}


@pytest.mark.parametrize("name", sorted(TWO_PHASES))
@pytest.mark.parametrize("rows,cols,dtype,blocks", [
    (2, 1024, np.float32, False), (257, 1024, np.float32, True), (300, 1040, np.float32, True),
    (1200, 272, np.float32, True), (512, 520, np.float64, True)])
def test_a_reduction_then_its_streamed_row_is_right(stream_everything: None, name: str,
                                                    rows: int, cols: int, dtype: Any,
                                                    blocks: bool) -> None:
    """A row kernel of two phases, a reduction and the streamed row that uses it: the row
    loop is the pipeline's carrier and its last phase at once. Streamed one row late it
    was never written (all but each chunk's last row read 0, 4096 x 4096 included). Split
    over threads, the next row's reduction rides in it and it streams by stack blocks
    (its loop vectorized): whole blocks and partial last blocks."""
    fn, reference = TWO_PHASES[name]
    x = RNG.standard_normal((rows, cols)).astype(dtype)
    (kernel,) = kernels_of(fn, Tensor(x))
    assert streaming.streamed_outputs(kernel)
    assert ("i1.block.head" in fgrad.jit(fn).lower(Tensor(x)).as_text()) == blocks
    got = fgrad.jit(fn)(Tensor(x)).numpy()
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, reference(x.astype(np.float64)), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(LATE))
@pytest.mark.parametrize("rows", [300, 257])
def test_a_late_last_phase_keeps_the_results(monkeypatch, name: str, rows: int) -> None:
    """A pipelined row kernel whose streamed last phase runs a row late, inside the next
    row's loop, through stack blocks (kernels/rows.py): the results of the kernel that
    runs it in place (to rounding: its blocked loop sums in another order), with special
    rows, over thread chunks (each chunk's first row is written twice) and a chunk's last
    row (after the loop)."""
    fn, runs_late = LATE[name]
    x = (RNG.standard_normal((rows, 1024)) * 5).astype(np.float32)
    x[3, 7], x[5, :], x[9, 2], x[11, 4], x[rows - 1, 0] = np.inf, -np.inf, np.nan, -np.inf, 9
    monkeypatch.setattr(streaming, "STREAM_MIN_BYTES", 0)
    text = fgrad.jit(fn).lower(Tensor(x)).as_text()
    late = fgrad.jit(fn)(Tensor(x)).numpy()
    monkeypatch.setattr(streaming, "STREAM_MIN_BYTES", 1 << 60)
    plain = fgrad.jit(fn)(Tensor(x)).numpy()
    np.testing.assert_array_equal(np.isnan(late), np.isnan(plain))
    np.testing.assert_array_equal(np.isinf(late), np.isinf(plain))
    np.testing.assert_allclose(late, plain, rtol=2e-6, atol=1e-6, equal_nan=True)
    assert ("late_block" in text) == runs_late


@pytest.mark.parametrize("rows,cols", [(300, 1024), (257, 1040)])
def test_a_layernorm_gradient_streams_right(stream_everything: None, rows: int,
                                            cols: int) -> None:
    """The gradient of sum(layernorm(x) * w): one row kernel of four phases whose third
    starts an accumulator after the pipeline's carrier. Its streamed last phase may not run
    a row late inside the carrier (the accumulator and the row's values are not there yet:
    a KeyError, then LLVM's "does not dominate", at 4096 x 4096 without forcing); it runs in
    its own row and matches NumPy's gradient."""
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    w = RNG.standard_normal(cols).astype(np.float32)
    got = fgrad.jit(fgrad.grad(lambda t, v: (t.layernorm(-1) * v).sum()))(Tensor(x),
                                                                         Tensor(w)).numpy()
    wide, g = x.astype(np.float64), np.broadcast_to(w.astype(np.float64), x.shape)
    mean = wide.mean(-1, keepdims=True)
    scale = np.sqrt(((wide - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    y = (wide - mean) / scale
    want = (g - g.mean(-1, keepdims=True) - y * (g * y).mean(-1, keepdims=True)) / scale
    np.testing.assert_allclose(got, want, atol=5e-6)


# ---------------------------------------------------------------------------- prefetching

def w1_chain(v: Tensor) -> Tensor:
    return (v * 1.5 + 0.5).tanh() * v.sigmoid() + (-(v * v)).exp()


def test_transcendental_loops_prefetch_ahead_and_others_do_not(stream_everything: None
                                                               ) -> None:
    """A flat loop of transcendentals (W1) runs by blocks with prefetches of its input
    ahead; a streamed exp prefetches in its blocks; a cheap loop and small inputs do not."""
    x = Tensor(RNG.standard_normal(1 << 16).astype(np.float32))
    (w1,) = kernels_of(w1_chain, x)
    assert streaming.prefetched_loop(w1) is w1.body[0]
    assert [e.buf for e in streaming.prefetched_loads(w1.body[0])] == [1]
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(w1_chain)(x))
    assert "llvm.prefetch" in str(llvm_runtime.module_ir(llvm_runtime.plan(jaxpr)))
    (cheap,) = kernels_of(lambda v: v * 2 + 1, x)
    assert streaming.prefetched_loop(cheap) is None
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda v: v.exp())(x))
    assert "llvm.prefetch" in str(llvm_runtime.module_ir(llvm_runtime.plan(jaxpr)))


def test_row_reductions_of_transcendentals_prefetch_their_rows(stream_everything: None
                                                                ) -> None:
    """A kernel that is one loop over rows around one innermost loop (exp(x).sum(-1))
    prefetches that loop's reads; a cheap row sum does not."""
    x = Tensor(RNG.standard_normal((64, 300)).astype(np.float32))
    (reduce,) = kernels_of(lambda v: v.exp().sum(-1), x)
    inner = reduce.body[0].body[1]
    assert streaming.prefetched_loop(reduce) is inner
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda v: v.exp().sum(-1))(x))
    assert "llvm.prefetch" in str(llvm_runtime.module_ir(llvm_runtime.plan(jaxpr)))
    (cheap,) = kernels_of(lambda v: v.sum(-1), x)
    assert streaming.prefetched_loop(cheap) is None
    tall = Tensor(RNG.standard_normal((1024, 1024)).astype(np.float32))
    column = kernels_of(lambda v: v.exp().sum(0), tall)[0]   # partial sums by row blocks
    found = streaming.prefetched_loop(column)
    assert found is not None and not any(isinstance(t, Loop) for t in found.body)


@pytest.mark.parametrize("shape", [(64, 300), (1000, 16), (7, 1000), (3, 129), (1024, 1000)])
def test_prefetched_row_reductions_keep_every_value(stream_everything: None,
                                                    shape: tuple[int, int]) -> None:
    """Rows in blocks (the last partial, rows shorter than a block) against NumPy in
    float64: a sum of exps, a mean of tanhs, a max of logistics, a column sum of exps (float32
    sums of up to 1024 terms in blocks: within 1e-5)."""
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    d = x.astype(np.float64)
    cases = [(lambda v: (v - 3.0).exp().sum(-1), np.exp(d - 3.0).sum(-1)),
             (lambda v: v.tanh().mean(-1), np.tanh(d).mean(-1)),
             (lambda v: v.sigmoid().max(-1), (1 / (1 + np.exp(-d))).max(-1)),
             (lambda v: v.exp().sum(0), np.exp(d).sum(0))]
    for fn, want in cases:
        got = fgrad.jit(fn)(Tensor(x)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_pipelined_rows_prefetch_the_next_row_without_transcendentals(
        stream_everything: None) -> None:
    """A pipelined layernorm (no transcendental per element) prefetches the next row that
    its carrier loop reads; its values against NumPy in float64."""
    x = RNG.standard_normal((512, 1024)).astype(np.float32)   # 2 MiB: pipelined

    def norm(v: Tensor) -> Tensor:
        return v.layernorm(-1, eps=1e-5)
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(norm)(Tensor(x)))
    assert "llvm.prefetch" in str(llvm_runtime.module_ir(llvm_runtime.plan(jaxpr)))
    d = x.astype(np.float64)
    want = (d - d.mean(-1, keepdims=True)) / np.sqrt(d.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(fgrad.jit(norm)(Tensor(x)).numpy(), want, rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape", [(48, 64), (64, 128), (256, 32)])
def test_streamed_transposes_keep_every_value(stream_everything: None, dtype: type,
                                              shape: tuple[int, int]) -> None:
    """Transposes staged by tiles and written with streaming stores (the first two shapes'
    32- and 64-bit ones; 32 rows of 256 tile otherwise), and reversed rows, exact against
    NumPy."""
    x = np.random.default_rng(shape[0]).standard_normal(shape).astype(dtype)
    (kernel,) = kernels_of(lambda v: v.T + 1, Tensor(x))
    if dtype != np.float16 and shape != (256, 32):
        assert streaming.streamed_outputs(kernel) == (0,)
    np.testing.assert_array_equal(fgrad.jit(lambda v: v.T + 1)(Tensor(x)).numpy(),
                                  (x.T + np.asarray(1, dtype)).astype(dtype))
    np.testing.assert_array_equal(fgrad.jit(lambda v: v.flip(1) * 2)(Tensor(x)).numpy(),
                                  x[:, ::-1] * np.asarray(2, dtype))
    square = x[:shape[1], :shape[1]] if shape[0] >= shape[1] else x[:, :shape[0]]
    np.testing.assert_array_equal(fgrad.jit(lambda v: v + v.T)(Tensor(square)).numpy(),
                                  square + square.T)


@pytest.mark.parametrize("shape", [(48, 4112), (64, 256), (100, 144)])
def test_rows_of_transcendentals_stream_by_blocks(stream_everything: None,
                                                  shape: tuple[int, int]) -> None:
    """A loop over rows around an elementwise loop of transcendentals (a broadcast row or
    column operand) streams its output by blocks, the last one partial; values against
    NumPy in float64."""
    rng = np.random.default_rng(shape[1])
    x = rng.standard_normal(shape).astype(np.float32)
    row = rng.standard_normal(shape[1]).astype(np.float32)
    column = rng.standard_normal((shape[0], 1)).astype(np.float32)
    d, r, c = x.astype(np.float64), row.astype(np.float64), column.astype(np.float64)
    cases = [(lambda v: (v + Tensor(row)).exp(), np.exp(d + r)),
             (lambda v: (v * Tensor(column)).sigmoid(), 1 / (1 + np.exp(-d * c))),
             (lambda v: v.softmax(0), np.exp(d - d.max(0)) / np.exp(d - d.max(0)).sum(0))]
    for fn, want in cases[:2]:
        (kernel,) = kernels_of(fn, Tensor(x))
        assert streaming.streamed_outputs(kernel) == (0,)
        assert streaming.streams_by_blocks(kernel)
    for fn, want in cases:
        np.testing.assert_allclose(fgrad.jit(fn)(Tensor(x)).numpy(), want, rtol=3e-6,
                                   atol=1e-7)


def test_small_inputs_are_not_prefetched() -> None:
    x = Tensor(RNG.standard_normal(1 << 12).astype(np.float32))
    (w1,) = kernels_of(w1_chain, x)
    assert streaming.prefetched_loop(w1) is None


@pytest.mark.parametrize("n", [1 << 16, (1 << 16) + 37, 1000])
def test_prefetched_blocks_keep_every_value(stream_everything: None, n: int) -> None:
    """Blocks of the split loop, the last one partial, against NumPy in float64."""
    x = RNG.standard_normal(n).astype(np.float32)
    got = fgrad.jit(w1_chain)(Tensor(x)).numpy()
    d = x.astype(np.float64)
    want = np.tanh(d * 1.5 + 0.5) / (1 + np.exp(-d)) + np.exp(-d * d)
    np.testing.assert_allclose(got, want, rtol=3e-6, atol=3e-7)


CONCATENATES: dict[str, tuple[Callable[..., Any], list[tuple[int, ...]]]] = {
    "two": (lambda a, b: a.cat(b, dim=1), [(40, 64), (40, 64)]),
    "three": (lambda a, b, c: a.cat(b, c, dim=1), [(40, 32), (40, 48), (40, 80)]),
    "pieces_mid_line": (lambda a, b: a.cat(b, dim=1), [(40, 17), (40, 47)]),
    "costly_piece": (lambda a, b: a.exp().cat(b * 2, dim=1), [(40, 64), (40, 96)]),
    "costly_second_piece": (lambda a, b: (a * 2).cat(b.exp(), dim=1), [(40, 64), (40, 96)]),
    "three_d": (lambda a, b: (a.cat(b, dim=2) - 1) * 2, [(4, 12, 64), (4, 12, 32)]),
    "rows_split": (lambda a, b: a.cat(b, dim=1), [(3001, 48), (3001, 16)]),
}


@pytest.mark.parametrize("name", sorted(CONCATENATES))
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32])
def test_concatenates_along_rows_stream_piece_by_piece(stream_everything: None, name: str,
                                                      dtype: Any) -> None:
    """A concatenate along the innermost axis reads each operand through a clamp that is
    idle in its own piece and pinned to one end in the others: the renderer loops piece by
    piece (kernel/pieces.py), so every piece streams its lines (`pieced_loads`); exact
    against NumPy at every piece boundary, on lines that start mid-piece, by blocks for
    transcendental pieces, and over rows split between threads."""
    fn, shapes = CONCATENATES[name]
    arrays = [(RNG.standard_normal(s) * 10).astype(dtype) for s in shapes]
    costly = name.startswith("costly")
    if costly and dtype == np.int32:
        pytest.skip("exp of integers is a float")
    tensors = [Tensor(a) for a in arrays]
    (kernel,) = kernels_of(fn, *tensors)
    assert streaming.streamed_outputs(kernel) == (0,)
    assert streaming.streams_by_blocks(kernel) == costly   # the exp: by blocks
    got = fgrad.jit(fn, backend="llvm")(*tensors).numpy()
    want = fgrad.jit(fn, backend="numpy")(*tensors).numpy()
    rtol = 0.0 if not costly else 1e-6 if dtype == np.float32 else 1e-2
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol)


def test_concatenate_reads_that_would_clamp_inside_a_piece_do_not_stream() -> None:
    """A flat concatenate's loop is the one split between threads (no pieces there); an
    index clamped inside a piece is no contiguous read."""
    x = Tensor(RNG.standard_normal(4096).astype(np.float32))
    assert [streaming.streamed_outputs(k) for k in
            kernels_of(lambda a, b: a.cat(b), x, x)] == [()]
    i = Sym("i", 64)
    index = Ix(((Clamp(add(ix_sym(i), ix_const(-8)), 40), 1),), 0)   # clamp(i - 8, 0, 40)
    assert streaming._clamps_settle(index, i, [(0, 31), (32, 63)]) is False
    assert streaming._clamps_settle(index, i, [(0, 7), (8, 48), (49, 63)]) is True
