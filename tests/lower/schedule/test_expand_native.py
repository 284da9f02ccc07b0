"""Primitives lowered by expansion (fgrad/lower/schedule/expand.py) against NumPy, on every backend.

argmax/argmin (ties, NaN, each axis, int/bool/half inputs), cumsum/cumprod/cummax/cummin
(each axis, reverse, lengths 1..1000, int/bool/float dtypes), sort (stable, both
directions, NaN, signed zeros, padding to a power of two, batched rows, int dtypes, the
Tensor sort/argsort/topk API), top_k (a sort and a slice; on llvm a native selection: k
from 0 to n, dtypes, sorted rows, topk along each dim), and the inlined call-like
primitives (nested jit, checkpoint, custom_jvp, custom_vjp) under jit and jit(grad). The
llvm plan of each has no host step; custom_lin raises its TypeError when compiled.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fgrad
import fgrad.lower
from fgrad import Tensor, dtypes
from fgrad.core import prims as P
from fgrad.lower.kernel import program as program_lib
from fgrad.lower.llvm import runtime as llvm_runtime
from fgrad.lower.schedule.expand import expand
from fgrad.transforms.jit_prim import open_jaxpr

pytestmark = pytest.mark.backends
RNG = np.random.default_rng(11)
HALF = llvm_runtime.half_native()


def as_np(t: Any) -> np.ndarray:
    """A Tensor's data as a NumPy array."""
    return np.asarray(t.numpy())


def same(got: Any, want: np.ndarray) -> None:
    """Exactly equal: dtype, shape, values, NaN places and the sign of zeros."""
    got = as_np(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
    np.testing.assert_array_equal(got, want)
    if want.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def hosts_of(fn: Any, *args: Tensor) -> list[Any]:
    """The host steps of the llvm plan of `fn` at `args`."""
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(*args))
    return llvm_runtime.plan(jaxpr).schedule.hosts()


# ---------------------------------------------------------------------------- argmax/argmin


def arg_input(dtype: str) -> np.ndarray:
    """A (4, 5, 6) array with many ties (and NaNs in every float row of axis 2)."""
    x = RNG.integers(0, 3, (4, 5, 6))
    if dtype == "bool":
        return (x > 1).astype(np.bool_)
    if dtype in ("float32", "float16", "float64"):
        x = x.astype(dtype)
        x[0, :, 2] = np.nan
        x[1, 3, :] = np.nan
        x[2, 0, 1:] = np.nan
        return x
    return (x - 1).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int32", "int8",
                                   "uint8", "bool"])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_argmax_argmin(jit_backend: str, dtype: str, axis: int) -> None:
    x = arg_input(dtype)
    hi, lo = fgrad.jit(lambda t: (t.argmax(axis), t.argmin(axis)))(Tensor(x))
    same(hi, np.argmax(x, axis).astype(np.int32))
    same(lo, np.argmin(x, axis).astype(np.int32))


def test_argmax_int64_index_and_flat(jit_backend: str) -> None:
    x = arg_input("float32")
    out = fgrad.jit(lambda t: P.argmax_p.bind(t, axis=1, index_dtype=dtypes.int64))(Tensor(x))
    same(out, np.argmax(x, 1).astype(np.int64))
    same(fgrad.jit(lambda t: t.argmax())(Tensor(x)), np.asarray(np.argmax(x), np.int32))


# ---------------------------------------------------------------------------- cumulative

NP_CUM = {"cumsum": np.cumsum, "cumprod": np.cumprod, "cummax": np.maximum.accumulate,
          "cummin": np.minimum.accumulate}


def cum_reference(x: np.ndarray, kind: str, axis: int, reverse: bool) -> np.ndarray:
    """NumPy's running op (half precision accumulates in float32, bool as int)."""
    src = np.flip(x, axis) if reverse else x
    wide = src.astype(np.float32) if src.dtype == np.float16 else src
    with np.errstate(all="ignore"):
        out = NP_CUM[kind](wide, axis=axis).astype(x.dtype)
    return np.flip(out, axis) if reverse else out


def cum_input(shape: tuple[int, ...], dtype: str, kind: str) -> np.ndarray:
    """Well-scaled data: products stay near 1, sums of positive values."""
    if dtype == "bool":
        return RNG.random(shape) < (0.9 if kind in ("cumprod", "cummin") else 0.1)
    if np.dtype(dtype).kind in "iu":
        pool = [-1, 1, 2, 1, 1] if kind == "cumprod" else [-5, 3, 0, 7, -2, 1]
        return RNG.choice(pool, shape).astype(dtype)
    if kind == "cumprod":
        return RNG.uniform(0.98, 1.02, shape).astype(dtype)
    return RNG.uniform(0.5, 1.5, shape).astype(dtype)


def run_cum(x: np.ndarray, kind: str, axis: int, reverse: bool) -> Any:
    """The primitive under jit."""
    return fgrad.jit(lambda t: P.cumulative(t, axis, reverse, kind))(Tensor(x))


@pytest.mark.parametrize("kind", ["cumsum", "cumprod", "cummax", "cummin"])
@pytest.mark.parametrize("n", [1, 2, 3, 7, 1000])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_cumulative_lengths(jit_backend: str, kind: str, n: int, dtype: str) -> None:
    x = cum_input((n,), dtype, kind)
    for reverse in (False, True):
        got, want = as_np(run_cum(x, kind, 0, reverse)), cum_reference(x, kind, 0, reverse)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 0)


@pytest.mark.parametrize("kind", ["cumsum", "cumprod", "cummax", "cummin"])
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_axes(jit_backend: str, kind: str, axis: int, reverse: bool) -> None:
    x = cum_input((5, 9, 3), "float64", kind)
    np.testing.assert_allclose(as_np(run_cum(x, kind, axis, reverse)),
                               cum_reference(x, kind, axis, reverse), rtol=1e-12)
    y = cum_input((5, 9, 3), "int64", kind)
    same(run_cum(y, kind, axis, reverse), cum_reference(y, kind, axis, reverse))


@pytest.mark.parametrize("kind", ["cumsum", "cumprod", "cummax", "cummin"])
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "float16"])
def test_cumulative_small_dtypes(jit_backend: str, kind: str, dtype: str) -> None:
    x = cum_input((3, 40), dtype, kind)
    got, want = run_cum(x, kind, 1, False), cum_reference(x, kind, 1, False)
    if dtype == "float16":
        np.testing.assert_allclose(as_np(got).astype(np.float32), want.astype(np.float32),
                                   rtol=2e-3)
    else:
        same(got, want)  # integer sums and products wrap exactly as NumPy's cast does


def test_cumulative_nan_inf_and_signed_zero(jit_backend: str) -> None:
    x = np.array([-0.0, -0.0, 1.0, np.nan, 2.0, -np.inf, 3.0], np.float32)
    for kind in NP_CUM:
        same(run_cum(x, kind, 0, False), cum_reference(x, kind, 0, False))


def test_cumulative_tensor_api(jit_backend: str) -> None:
    x = RNG.integers(-4, 5, (6, 5)).astype(np.float32)
    total, (top, where) = fgrad.jit(lambda t: (t.cumsum(1), t.cummax(0)))(Tensor(x))
    np.testing.assert_allclose(as_np(total), np.cumsum(x, 1), rtol=1e-6)
    same(top, np.maximum.accumulate(x, 0))
    latest = np.array([[max(i for i in range(r + 1) if x[i, c] == top.numpy()[r, c])
                        for c in range(5)] for r in range(6)], np.int32)
    same(where, latest)


# ---------------------------------------------------------------------------- sort


def sort_reference(x: np.ndarray, descending: bool) -> tuple[np.ndarray, np.ndarray]:
    """Stable sort along the last axis, NaN largest, ties in original order both ways."""
    rank = np.unique(x, return_inverse=True)[1].reshape(x.shape)
    pos = np.broadcast_to(np.arange(x.shape[-1]), x.shape)
    idx = np.lexsort((pos, -rank if descending else rank), axis=-1)
    return np.take_along_axis(x, idx, -1), idx.astype(np.int32)


def sort_input(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Few distinct values (many ties); floats get NaNs and both signed zeros."""
    if dtype == "bool":
        return RNG.random(shape) < 0.5
    x = RNG.integers(-3, 4, shape)
    if np.dtype(dtype).kind == "u":
        x = x + 3
    x = x.astype(dtype)
    if x.dtype.kind == "f":
        flat = x.reshape(-1)
        flat[RNG.random(flat.size) < 0.15] = np.nan
        zeros = flat == 0
        flat[zeros] = np.where(RNG.random(int(zeros.sum())) < 0.5, -0.0, 0.0)
    return x


def check_sort(x: np.ndarray, descending: bool) -> None:
    """sort under jit equals the reference (values with signed zeros, and indices)."""
    values, indices = fgrad.jit(lambda t: P.sort(t, descending))(Tensor(x))
    want_values, want_indices = sort_reference(x, descending)
    same(indices, want_indices)
    same(values, want_values)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64, 100])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_lengths(jit_backend: str, n: int, descending: bool) -> None:
    check_sort(sort_input((3, n), "float32"), descending)


@pytest.mark.parametrize("dtype", ["int32", "int8", "uint8", "int64", "bool", "float16",
                                   "float64"])
def test_sort_dtypes(jit_backend: str, dtype: str) -> None:
    for descending in (False, True):
        check_sort(sort_input((2, 3, 11), dtype), descending)


def test_sort_long_rows(jit_backend: str) -> None:
    x = sort_input((2, 1000), "float32")
    x[1] = RNG.standard_normal(1000).astype(np.float32)
    check_sort(x, False)
    check_sort(x, True)


def test_sort_tensor_api(jit_backend: str) -> None:
    x = sort_input((6, 4, 5), "float32")

    def f(t: Tensor) -> tuple[Any, ...]:
        values, indices = t.sort(dim=0)
        top, top_idx = t.topk(3, dim=-1)
        return values, indices, t.argsort(dim=1, descending=True), top, top_idx

    values, indices, arg, top, top_idx = fgrad.jit(f)(Tensor(x))
    moved = np.moveaxis(x, 0, -1)
    want_v, want_i = sort_reference(moved, False)
    same(values, np.moveaxis(want_v, -1, 0))
    same(indices, np.moveaxis(want_i, -1, 0))
    same(arg, np.moveaxis(sort_reference(np.moveaxis(x, 1, -1), True)[1], -1, 1))
    want_top, want_top_idx = sort_reference(x, True)
    same(top, want_top[..., :3])
    same(top_idx, want_top_idx[..., :3])


# ---------------------------------------------------------------------------- top_k


def check_top_k(x: np.ndarray, k: int, descending: bool) -> None:
    """top_k under jit equals the head of the stable sort reference."""
    values, indices = fgrad.jit(lambda t: P.top_k(t, k, descending))(Tensor(x))
    want_values, want_indices = sort_reference(x, descending)
    same(indices, np.ascontiguousarray(want_indices[..., :k]))
    same(values, np.ascontiguousarray(want_values[..., :k]))


@pytest.mark.parametrize("n", [1, 5, 13, 100])
@pytest.mark.parametrize("descending", [False, True])
def test_top_k_lengths(jit_backend: str, n: int, descending: bool) -> None:
    x = sort_input((3, n), "float32")
    for k in sorted({0, 1, n // 2, n}):
        check_top_k(x, k, descending)


@pytest.mark.parametrize("dtype", ["int32", "int8", "uint8", "int64", "bool", "float16",
                                   "float64"])
def test_top_k_dtypes(jit_backend: str, dtype: str) -> None:
    for descending in (False, True):
        check_top_k(sort_input((2, 3, 40), dtype), 3, descending)


def test_top_k_sorted_rows(jit_backend: str) -> None:
    """Rows in and against the direction (on llvm every element enters the selection)."""
    row = np.sort(sort_input((300,), "float32"))
    x = np.stack([row, row[::-1]])
    for descending in (False, True):
        check_top_k(x, 4, descending)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_tensor_api_dims(jit_backend: str, dim: int, largest: bool) -> None:
    x = sort_input((6, 4, 5), "float32")
    values, indices = fgrad.jit(lambda t: t.topk(3, dim=dim, largest=largest))(Tensor(x))
    want_v, want_i = sort_reference(np.moveaxis(x, dim, -1), largest)
    same(values, np.ascontiguousarray(np.moveaxis(want_v[..., :3], -1, dim)))
    same(indices, np.ascontiguousarray(np.moveaxis(want_i[..., :3], -1, dim)))


# ---------------------------------------------------------------------------- call-like


@fgrad.custom_jvp
def soft_clip(x: Tensor) -> Tensor:
    """tanh with a custom derivative rule (doubled, so the rule is observable)."""
    return x.tanh()


@soft_clip.defjvp
def _soft_clip_jvp(primals: tuple, tangents: tuple) -> tuple[Tensor, Tensor]:
    (x,), (t,) = primals, tangents
    y = x.tanh()
    return y, 2 * (1 - y * y) * t


@fgrad.custom_vjp
def scaled_square(x: Tensor, w: Tensor) -> Tensor:
    """x * x * w with a reverse rule that triples the cotangent of x."""
    return x * x * w


def _sq_fwd(x: Tensor, w: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    return x * x * w, (x, w)


def _sq_bwd(res: tuple[Tensor, Tensor], ct: Tensor) -> tuple[Tensor, Tensor]:
    x, w = res
    return 3 * 2 * x * w * ct, x * x * ct


scaled_square.defvjp(_sq_fwd, _sq_bwd)
CONST = np.array([0.5, -1.0, 2.0, 1.5], np.float32)


def calls(x: Tensor) -> Tensor:
    """A nested jit, a checkpoint with a closed-over constant, custom_jvp and custom_vjp."""
    inner = fgrad.jit(lambda t: (t * 3).sin())
    ck = fgrad.checkpoint(lambda t: (t * Tensor(CONST)).exp())
    return (inner(x) + ck(x) + soft_clip(x) + scaled_square(x, x + 1)).sum()


def calls_np(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`calls` and its gradient (with the custom rules) in NumPy."""
    value = np.sin(3 * x) + np.exp(x * CONST) + np.tanh(x) + x * x * (x + 1)
    grad = 3 * np.cos(3 * x) + CONST * np.exp(x * CONST) + 2 * (1 - np.tanh(x) ** 2) \
        + 6 * x * (x + 1) + x * x
    return np.asarray(value.sum(), np.float32), grad.astype(np.float32)


def test_call_like_under_jit_and_jit_grad(jit_backend: str) -> None:
    x = np.array([0.3, -0.7, 1.1, 0.05], np.float32)
    want_value, want_grad = calls_np(x)
    np.testing.assert_allclose(as_np(fgrad.jit(calls)(Tensor(x))), want_value, rtol=1e-5)
    np.testing.assert_allclose(as_np(fgrad.jit(fgrad.grad(calls))(Tensor(x))), want_grad,
                               rtol=1e-5)


def test_nested_jit_twice_and_passthrough(jit_backend: str) -> None:
    inner = fgrad.jit(lambda a, b: (a, a * b, b))
    x, y = np.arange(4, dtype=np.float32), np.full(4, 2.0, np.float32)

    def outer(a: Tensor, b: Tensor) -> tuple[Tensor, ...]:
        p, q, r = inner(a, b)
        s, t, u = inner(q, r)
        return p, t, u, s.argmax()

    p, t, u, m = fgrad.jit(outer)(Tensor(x), Tensor(y))
    same(p, x)
    same(t, x * y * y)
    same(u, y)
    same(m, np.asarray(3, np.int32))


# ---------------------------------------------------------------------------- plans


PLANNED = {
    "argmax": lambda t: t.argmax(1), "argmin": lambda t: t.argmin(0),
    "cumsum": lambda t: t.cumsum(1), "cumprod": lambda t: t.cumprod(0),
    "cummax": lambda t: P.cumulative(t, 1, True, "cummax"),
    "cummin": lambda t: P.cumulative(t, 0, False, "cummin"),
    "sort": lambda t: P.sort(t, True), "topk": lambda t: t.topk(2),
    "calls": calls, "grad(calls)": fgrad.grad(calls),
}


@pytest.mark.parametrize("name", sorted(PLANNED))
def test_llvm_plan_has_no_host_steps(name: str) -> None:
    x = Tensor(RNG.standard_normal((3, 4)).astype(np.float32) if name not in (
        "calls", "grad(calls)") else np.ones(4, np.float32))
    assert hosts_of(PLANNED[name], x) == []


@pytest.mark.parametrize(("name", "n", "kernels"), [
    ("cumsum", 1000, 10), ("cummax", 8, 3), ("sort", 1024, 55), ("sort", 1000, 55)])
def test_one_kernel_per_scan_pass_and_sort_stage(name: str, n: int, kernels: int) -> None:
    """Passes and stages of the portable expansion (a backend without native library calls,
    e.g. opencl; llvm makes each one call: tests/lower/llvm/test_native_sequences.py) are
    stored, never merged into a kernel that recomputes them."""
    fn = (lambda t: t.sort()[0]) if name == "sort" else (lambda t: P.cumulative(
        t, 1, False, name))
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(Tensor(np.ones((4, n), np.float32))))
    program = program_lib.plan(jaxpr, native_linalg=False)
    assert len(program.kernels) == kernels and not program.schedule.hosts()


def test_expand_keeps_plain_jaxprs_and_user_names() -> None:
    x = Tensor(np.ones((3, 4), np.float32))
    plain, _ = open_jaxpr(fgrad.make_jaxpr(lambda t: (t * 2).sum(1))(x))
    assert expand(plain) is plain
    sorted_, _ = open_jaxpr(fgrad.make_jaxpr(lambda t: P.sort(t))(x))
    expanded = expand(sorted_)
    assert expanded.invars == sorted_.invars and expanded.outvars == sorted_.outvars
    assert {e.primitive.name for e in expanded.eqns} <= {
        "pad", "iota", "reshape", "rev", "lt", "eq", "is_nan", "not", "and", "or",
        "broadcast_in_dim", "select", "slice"}


def test_lowered_text_shows_the_expansion(jit_backend: str) -> None:
    if jit_backend == "numpy":
        pytest.skip("the numpy backend runs the impl; there is no schedule to print")
    text = fgrad.jit(lambda t: t.sort()[0]).lower(Tensor(np.ones(5, np.float32))).as_text()
    assert "sort[descending=False]" in text and "0 host steps" in text


def test_bfloat16_sort_argmax_and_cumsum_expand_natively(jit_backend: str) -> None:
    """bfloat16 expands like float16: sort compares the values, argmax picks the first
    maximum, cumsum accumulates in float32 and rounds once (as the NumPy impl does)."""
    import ml_dtypes
    raw = RNG.standard_normal((3, 40)).astype(np.float32)
    raw[0, 5] = np.nan
    x = raw.astype(ml_dtypes.bfloat16)
    t = Tensor(x)
    fn = lambda v: (P.sort(v)[0], v.argmax(1), v.cumsum(1))  # noqa: E731
    assert hosts_of(fn, t) == []
    got_sort, got_arg, got_sum = fgrad.jit(fn, backend=jit_backend)(t)
    wide = x.astype(np.float32)
    assert as_np(got_sort).dtype == as_np(got_sum).dtype == ml_dtypes.bfloat16
    rounded = lambda v: v.astype(ml_dtypes.bfloat16).astype(np.float32)  # noqa: E731
    equal = np.testing.assert_array_equal
    equal(as_np(got_sort).astype(np.float32), rounded(np.sort(wide, axis=1)))
    equal(as_np(got_arg), np.argmax(wide, axis=1))
    equal(as_np(got_sum).astype(np.float32), rounded(np.cumsum(wide, axis=1)))


def test_custom_lin_raises_its_error_when_compiled(jit_backend: str) -> None:
    if jit_backend == "numpy":
        pytest.skip("the numpy backend raises when it runs, not when it compiles")
    f = fgrad.jit(lambda x, t: fgrad.jvp(lambda a: scaled_square(a, a), (x,), (t,))[1])
    one = Tensor(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="forward-mode differentiation"):
        f(one, one)
