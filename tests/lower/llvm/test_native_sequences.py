"""The llvm backend's native sort and cumulative ops (fgrad/lower/llvm/sequences.py and
scans.py) against independent references: Python's stable `sorted` with NaN ordered largest
(first when descending), and NumPy's accumulate."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import fgrad
import fgrad.lower  # noqa: F401  (registers the llvm compiler)
from fgrad import Tensor
from fgrad.lower.llvm import runtime as llvm_runtime
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(5)
SHAPES = [(1,), (2,), (7,), (16,), (17,), (33,), (1000,), (3, 31), (2, 3, 64), (4, 0), (0, 5)]
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint32, np.uint64]
BF16 = np.dtype(ml_dtypes.bfloat16)
SORT_DTYPES = DTYPES + [np.float16, BF16, np.int8, np.uint8, np.int16, np.uint16]


def _reference(x: np.ndarray, descending: bool) -> tuple[np.ndarray, np.ndarray]:
    """Values and indices, row by row, from Python's stable sort."""
    rows = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])
    order = np.zeros(rows.shape, np.int32)
    for r, row in enumerate(rows):
        def key(i: int) -> tuple:
            v = float(row[i]) if row.dtype.kind == "f" or row.dtype == BF16 else row[i].item()
            nan = isinstance(v, float) and math.isnan(v)
            if descending:
                return (not nan, 0 if nan else -v)
            return (nan, 0 if nan else v)
        order[r] = sorted(range(len(row)), key=key)
    values = np.take_along_axis(rows, order, axis=-1)
    return values.reshape(x.shape), order.reshape(x.shape)


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Equal element for element, NaNs (and their signs) included: the values are the
    input's own, gathered."""
    bits = np.dtype(f"u{want.dtype.itemsize}")
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(bits), want.view(bits))


def _is_float(dtype: type) -> bool:
    return np.dtype(dtype).kind == "f" or np.dtype(dtype) == BF16


def _sample(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    if _is_float(dtype):
        x = RNG.integers(-5, 5, shape).astype(dtype)       # many ties
        flat = x.reshape(-1)
        specials = [np.nan, -0.0, 0.0, np.inf, -np.inf, np.nan]
        for i, v in zip(RNG.permutation(flat.size)[:len(specials)], specials):
            flat[i] = v
        return x
    info = np.iinfo(dtype)
    x = RNG.integers(-3, 3, shape) if info.min < 0 else RNG.integers(0, 6, shape)
    x = x.astype(dtype)
    flat = x.reshape(-1)
    for i, v in zip(RNG.permutation(flat.size)[:2], (info.min, info.max)):
        flat[i] = v
    return x


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", SORT_DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_native_sort_matches_a_stable_sort(shape: tuple[int, ...], dtype: type,
                                           descending: bool):
    _check_sort(_sample(shape, dtype), descending)


def _check_sort(x: np.ndarray, descending: bool) -> None:
    """fgrad's sort of `x` along its last axis, values and indices, against `_reference`."""
    values, indices = fgrad.jit(lambda t: t.sort(-1, descending=descending),
                                backend="llvm")(Tensor(x))
    want_values, want_indices = _reference(x, descending)
    np.testing.assert_array_equal(indices.numpy(), want_indices)
    _same_bits(values.numpy(), want_values)


def _wide(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    """Keys spread over the whole range (every radix pass runs), some repeated, with the
    float specials (NaNs of both signs, signed zeros, infinities, denormals)."""
    if _is_float(dtype):
        info = ml_dtypes.finfo(dtype)
        decades = min(30, int(np.log10(float(info.max))) - 1)
        x = (RNG.standard_normal(shape) * 10.0 ** RNG.integers(-decades, decades, shape))
        x = x.astype(dtype)
        tiny = float(info.smallest_subnormal)
        specials = [np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf, tiny, -tiny]
    else:
        info = np.iinfo(dtype)
        x = RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
        specials = [info.min, info.max, 0]
    flat = x.reshape(-1)
    picks = RNG.permutation(flat.size)
    for i, v in zip(picks[:3 * len(specials)], specials * 3):
        flat[i] = v
    flat[picks[-20:]] = flat[picks[-40:-20]]   # repeated keys
    return x


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", SORT_DTYPES)
@pytest.mark.parametrize("shape", [(63,), (2, 64), (3, 65), (300,), (40, 1000)])
def test_radix_sort_of_wide_keys_matches_a_stable_sort(shape: tuple[int, ...], dtype: type,
                                                        descending: bool):
    """Rows of RADIX_MIN and more sort by radix passes; (40, 1000) is split over the pool
    (`sort_chunking`); (63,) is the merge path beside it."""
    _check_sort(_wide(shape, dtype), descending)


def test_large_sorts_split_over_the_pool():
    from fgrad.lower.llvm.threads import describe_threads
    x = Tensor(RNG.standard_normal((40, 1000)).astype(np.float32))
    program = llvm_runtime.plan(open_jaxpr(fgrad.make_jaxpr(lambda t: t.sort(-1))(x))[0])
    assert "split" in describe_threads(program) and "over 40 rows" in describe_threads(program)


def test_sort_is_one_library_call_not_a_network():
    x = Tensor(RNG.standard_normal((8, 1024)).astype(np.float32))
    program = llvm_runtime.plan(open_jaxpr(fgrad.make_jaxpr(lambda t: t.sort(-1))(x))[0])
    assert [e.primitive.name for e in program.library_calls.values()] == ["sort"]
    assert not program.kernels
    half = Tensor(RNG.standard_normal((4, 64)).astype(np.float16))   # a native half sort...
    program = llvm_runtime.plan(open_jaxpr(fgrad.make_jaxpr(lambda t: t.sort(-1))(half))[0])
    assert [e.primitive.name for e in program.library_calls.values()] == ["sort"]
    program = llvm_runtime.plan(open_jaxpr(fgrad.make_jaxpr(lambda t: t.cumsum(-1))(half))[0])
    assert not program.library_calls and program.kernels          # ... but no half cumsum


def test_gradient_and_vmap_through_the_native_sort():
    x = RNG.standard_normal((3, 50)).astype(np.float64)
    weights = np.arange(50, dtype=np.float64)

    def loss(t: Tensor) -> Tensor:
        return (t.sort(-1)[0] * Tensor(weights)).sum()
    grad = fgrad.jit(fgrad.grad(loss), backend="llvm")(Tensor(x)).numpy()
    order = np.argsort(x, axis=-1, kind="stable")
    want = np.zeros_like(x)
    np.put_along_axis(want, order, np.broadcast_to(weights, x.shape), axis=-1)
    np.testing.assert_array_equal(grad, want)
    per_row = fgrad.jit(fgrad.vmap(lambda r: r.sort(0, descending=True)[1]),
                        backend="llvm")(Tensor(x)).numpy()
    np.testing.assert_array_equal(per_row, np.argsort(-x, axis=-1, kind="stable"))


CUMULATIVE = {"cumsum": np.add.accumulate, "cumprod": np.multiply.accumulate,
              "cummax": np.maximum.accumulate, "cummin": np.minimum.accumulate}


def _cumulative(op: str, x: Tensor, axis: int, reverse: bool) -> Tensor:
    from fgrad.core.prims.reduce import cumulative
    return cumulative(x, axis, reverse, op)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("op", list(CUMULATIVE))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis", [((1,), 0), ((37,), 0), ((5, 9), 0), ((5, 9), 1),
                                        ((2, 3, 17), 1), ((3, 0, 4), 1), ((4, 6), 1),
                                        ((16, 16), 1), ((33, 50), 1), ((17, 5), 1),
                                        ((3, 20, 40), 2), ((64, 1024), 1),
                                        ((128, 1000), 0), ((16, 4096), 0)])
def test_native_cumulative_matches_numpy(shape: tuple[int, ...], axis: int, dtype: type,
                                         op: str, reverse: bool):
    x = _sample(shape, dtype)
    if op == "cumprod" and np.issubdtype(dtype, np.floating):
        x = np.where(np.isfinite(x), x / 3, x).astype(dtype)
    got = fgrad.jit(lambda t: _cumulative(op, t, axis, reverse), backend="llvm")(Tensor(x))
    src = np.flip(x, axis) if reverse else x
    with np.errstate(all="ignore"):
        want = CUMULATIVE[op](src, axis=axis, dtype=x.dtype)
    want = np.flip(want, axis) if reverse else want
    np.testing.assert_array_equal(got.numpy(), want)   # same order of operations: exact


def test_cumulative_ops_are_one_library_call_each():
    x = Tensor(RNG.standard_normal((8, 1024)).astype(np.float32))
    jaxpr = fgrad.make_jaxpr(lambda t: (t.cumsum(1), t.cumprod(0)))(x)
    program = llvm_runtime.plan(open_jaxpr(jaxpr)[0])
    assert sorted(e.primitive.name for e in program.library_calls.values()) == [
        "cumprod", "cumsum"]
    assert not program.kernels


def test_last_axis_cumulative_rows_run_side_by_side_and_split():
    """A last-axis cumulative op renders vectors of `scan_lanes` rows at the host's width,
    and a large one shares its rows with the pool in whole groups of them."""
    from fgrad.lower.llvm import scans, target
    x = Tensor(RNG.standard_normal((256, 512)).astype(np.float32))
    jaxpr = open_jaxpr(fgrad.make_jaxpr(lambda t: t.cumsum(-1))(x))[0]
    (eqn,) = jaxpr.eqns
    lanes = scans.scan_lanes(eqn)
    assert lanes == min(16, target.vector_bits() // 32)
    count, size, rows = scans.scan_rows(eqn)
    assert count > 1 and size % lanes == 0 and rows == 256
    text = str(llvm_runtime.module_ir(llvm_runtime.plan(jaxpr)))
    assert f"<{lanes} x float>" in text
    wide = Tensor(RNG.standard_normal((64, 4096)).astype(np.float32))
    column = open_jaxpr(fgrad.make_jaxpr(lambda t: t.cumsum(0))(wide))[0].eqns[0]
    assert scans.scan_lanes(column) == 0            # a middle axis vectorizes on its own
    assert scans.splits_columns(column)             # ... and shares its columns
    count, size, columns = scans.scan_rows(column)
    assert count > 1 and size % scans.LINE_ELEMENTS == 0 and columns == 4096
    assert size * 4 >= scans.MIN_COLUMN_BYTES


@pytest.mark.parametrize("bits", [128, 256, 512])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint64])
def test_rows_side_by_side_at_every_vector_width(bits: int, dtype: type):
    """The function rendered for each vector width (its register transposes differ), run
    on this CPU over [start, stop) rows, against NumPy: the rows outside stay untouched."""
    import ctypes
    import llvmlite.binding as llvm
    from llvmlite import ir
    from fgrad.lower.llvm import scans, target
    x = _sample((45, 37), dtype)
    op = "cumsum" if _is_float(dtype) else "cummax"
    for reverse in (False, True):
        eqn = open_jaxpr(fgrad.make_jaxpr(lambda t: _cumulative(op, t, 1, reverse))(
            Tensor(x)))[0].eqns[0]
        module = ir.Module(name="scan")
        module.triple, module.data_layout = target.triple_and_layout()
        with target.rendering_for_width(bits):
            fn = scans.ScanBuilder(module, "scan", eqn, split=True).build()
        fn.linkage = "external"
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)),
                                            target.new_machine(opt=2))
        engine.finalize_object()
        call = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                ctypes.c_int64)(engine.get_function_address("scan"))
        out = np.full_like(x, 7)
        call(out.ctypes.data, x.ctypes.data, 3, 42)
        src = x[3:42, ::-1] if reverse else x[3:42]
        with np.errstate(all="ignore"):
            want = CUMULATIVE[op](src, axis=1, dtype=x.dtype)
        _same_bits(out[3:42], want[:, ::-1] if reverse else want)
        assert (out[:3] == 7).all() and (out[42:] == 7).all()
