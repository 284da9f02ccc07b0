"""Fused GEMM epilogues on llvm: the elementwise kernel right after a gemm (bias, relu,
gelu, tanh, sigmoid, a residual add, a scale, a cast) runs inside the gemm's call on each
block of final rows. Checked against NumPy over shapes that take the whole, the row-split
and the several-column-block paths; the printed program shows one native call."""
from __future__ import annotations

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm.runtime import plan
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(7)
SHAPES = [(7, 31, 64), (64, 40, 2500), (256, 784, 512), (513, 129, 257)]


def _gelu(z: np.ndarray) -> np.ndarray:
    return 0.5 * z * (1 + np.tanh(0.7978845608 * (z + 0.044715 * z ** 3)))


EPILOGUES = {
    "bias_relu": (lambda x, w, b, r: (x @ w + b).relu(),
                  lambda x, w, b, r: np.maximum(x @ w + b, 0)),
    "bias_gelu": (lambda x, w, b, r: (x @ w + b).gelu(), lambda x, w, b, r: _gelu(x @ w + b)),
    "tanh_scale": (lambda x, w, b, r: (x @ w).tanh() * 0.5,
                   lambda x, w, b, r: np.tanh(x @ w) * 0.5),
    "sigmoid": (lambda x, w, b, r: (x @ w + b).sigmoid(),
                lambda x, w, b, r: 1 / (1 + np.exp(-(x @ w + b)))),
    "residual": (lambda x, w, b, r: x @ w + r, lambda x, w, b, r: x @ w + r),
    "residual_first": (lambda x, w, b, r: r + x @ w, lambda x, w, b, r: x @ w + r),
    "residual_relu": (lambda x, w, b, r: (r + x @ w).relu(),
                      lambda x, w, b, r: np.maximum(x @ w + r, 0)),
    "bias": (lambda x, w, b, r: b + x @ w, lambda x, w, b, r: x @ w + b),
    "relu": (lambda x, w, b, r: (x @ w).relu(), lambda x, w, b, r: np.maximum(x @ w, 0)),
    "cast_f16": (lambda x, w, b, r: (x @ w + b).cast("float16"),
                 lambda x, w, b, r: (x @ w + b).astype(np.float16)),
}


def _args(m: int, k: int, n: int) -> list[np.ndarray]:
    return [(RNG.standard_normal(s) / np.sqrt(k if i == 0 else 1)).astype(np.float32)
            for i, s in enumerate([(m, k), (k, n), (n,), (m, n)])]


@pytest.mark.parametrize("name", sorted(EPILOGUES))
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_fused_epilogue_matches_numpy(name, m, k, n):
    fn, ref = EPILOGUES[name]
    args = _args(m, k, n)
    closed = fgrad.make_jaxpr(fn)(*map(Tensor, args))
    jaxpr, _ = open_jaxpr(closed)
    assert plan(jaxpr).epilogues == {"g0": "k1"}
    out = fgrad.jit(fn, backend="llvm")(*map(Tensor, args)).numpy()
    want = ref(*[a.astype(np.float64) for a in args])
    tol = 2e-3 if name == "cast_f16" else 2e-4
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=tol, atol=tol)


REGISTER = {"bias_relu": "bias+relu", "bias": "bias", "relu": "relu", "residual": "residual",
            "residual_first": "residual", "residual_relu": "residual+relu"}


@pytest.mark.parametrize("name", sorted(EPILOGUES))
def test_register_epilogues_are_named_in_the_printout(name):
    """bias, relu, a residual (an (m, n) matrix added) and those with relu run in the
    micro-kernel's registers; the others through the driver's thunk."""
    text = fgrad.jit(EPILOGUES[name][0], backend="llvm").lower(
        *map(Tensor, _args(64, 32, 48))).as_text()
    line = next(t for t in text.splitlines() if t.startswith("g0 + k1: one native call"))
    if name in REGISTER:
        assert line.endswith(f"({REGISTER[name]} in registers)"), line
    else:
        assert "registers" not in line, line


@pytest.mark.parametrize("threads", ["1", "3"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("addend", ["bias", "residual"])
def test_register_epilogue_keeps_nan_threads_and_a_shared_product(monkeypatch, threads,
                                                                   dtype, shared, addend):
    """NaN through relu stays NaN (le then select, as the kernel); with `shared`, a later
    step reads the product too, so it is stored beside the epilogue's output. The residual
    (an (m, n) matrix, added first) is read at each tile's own elements (edge tiles: 300
    rows, 97 columns), on every row split."""
    monkeypatch.setenv("FGRAD_NUM_THREADS", threads)
    x, w, b, r = (a.astype(dtype) for a in _args(300, 600, 97))
    x[3, 5] = np.nan
    add = b if addend == "bias" else r

    def fn(x, w, add):
        y = x @ w
        out = (y + add).relu() if addend == "bias" else (add + y).relu()
        return (out, y * 2.0) if shared else out
    jitted = fgrad.jit(fn, backend="llvm")
    if not shared:   # (shared: one kernel writes both outputs, through the thunk)
        assert f"({addend}+relu in registers)" in jitted.lower(Tensor(x), Tensor(w),
                                                               Tensor(add)).as_text()
    got = jitted(Tensor(x), Tensor(w), Tensor(add))
    got = got if shared else (got,)
    z = x.astype(np.float64) @ w + add
    want = np.where(np.isnan(z), np.nan, np.maximum(z, 0))
    np.testing.assert_allclose(got[0].numpy(), want, rtol=1e-4, atol=1e-3)
    assert np.isnan(got[0].numpy()[3]).all()
    if shared:
        np.testing.assert_allclose(got[1].numpy(), 2 * (x.astype(np.float64) @ w),
                                   rtol=1e-4, atol=1e-3)


def test_one_native_call_in_the_printed_program():
    fn = EPILOGUES["bias_relu"][0]
    text = fgrad.jit(fn).lower(*map(Tensor, _args(64, 32, 16))).as_text()
    assert "g0 + k1: one native call" in text


@pytest.mark.parametrize("m,k,n", [(64, 32, 48), (256, 784, 512)])
def test_gemm_output_read_elsewhere_is_fused_and_kept(m, k, n):
    """Later readers of the product (here another gemm and the output itself, as W5's
    backward relu mask reads the pre-activation) still see the whole product."""
    def fn(x, w, b, r):
        y = x @ w
        return (y + b).relu(), y.T @ r, y
    args = _args(m, k, n)
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(*map(Tensor, args)))
    assert len(plan(jaxpr).epilogues) == 1
    relu, total, y = fgrad.jit(fn, backend="llvm")(*map(Tensor, args))
    x, w, b, r = (a.astype(np.float64) for a in args)
    tol = {"rtol": 1e-4, "atol": 1e-3}
    np.testing.assert_allclose(relu.numpy(), np.maximum(x @ w + b, 0), **tol)
    np.testing.assert_allclose(total.numpy(), (x @ w).T @ r, rtol=1e-4, atol=1e-2)
    np.testing.assert_allclose(y.numpy(), x @ w, **tol)


def test_transposed_output_is_computed_swapped_then_fused():
    """(x @ w).T is computed as w.T @ x.T, which the epilogue then reads in place."""
    fn = lambda x, w, b, r: (x @ w).T + r.T  # noqa: E731
    args = _args(40, 24, 40)
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(*map(Tensor, args)))
    assert plan(jaxpr).epilogues == {"g0": "k1"}
    x, w, _, r = args
    np.testing.assert_allclose(fgrad.jit(fn)(*map(Tensor, args)).numpy(), (x @ w).T + r.T,
                               rtol=1e-4, atol=1e-4)


def test_gradient_through_a_fused_layer_matches_numpy():
    x, w, b, _ = _args(96, 64, 80)

    def loss(w, b):
        return ((Tensor(x) @ w + b).relu() ** 2).sum()
    gw, gb = fgrad.jit(fgrad.grad(loss, argnums=(0, 1)))(Tensor(w), Tensor(b))
    z = x @ w + b
    dz = 2 * np.maximum(z, 0) * (z > 0)
    np.testing.assert_allclose(gw.numpy(), x.T @ dz, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(gb.numpy(), dz.sum(0), rtol=1e-3, atol=1e-3)


def test_openblas_path_keeps_separate_kernels():
    fn = EPILOGUES["bias_relu"][0]
    args = _args(64, 32, 16)
    with fgrad.config.override(gemm="openblas"):
        jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(*map(Tensor, args)))
        assert plan(jaxpr).epilogues == {}
        out = fgrad.jit(fn)(*map(Tensor, args)).numpy()
    x, w, b, _ = args
    np.testing.assert_allclose(out, np.maximum(x @ w + b, 0), rtol=1e-4, atol=1e-4)


def _call_plan(fn, *args):
    from fgrad.lower.kernel import call_plan
    program = plan(open_jaxpr(fgrad.make_jaxpr(fn)(*args))[0])
    return program, call_plan.from_program(program, lambda i, seg: ())


def test_a_product_only_its_register_epilogue_reads_has_no_buffer():
    """relu(x@W+b): the product is accumulated in the output, so the call has no
    intermediate block and takes the direct path (like x@W alone)."""
    from fgrad.lower.kernel import call_plan
    rng = np.random.default_rng(6)
    x, w = (Tensor(rng.standard_normal(s).astype(np.float32)) for s in ((96, 70), (70, 130)))
    b = Tensor(rng.standard_normal(130).astype(np.float32))
    fn = lambda x, w, b: (x @ w + b).relu()   # noqa: E731
    program, cplan = _call_plan(fn, x, w, b)
    assert program.unstored and not program.buffer_bytes
    assert call_plan.direct_form(cplan) is not None
    want = np.maximum(x.numpy() @ w.numpy() + b.numpy(), 0)
    np.testing.assert_allclose(fgrad.jit(fn)(x, w, b).numpy(), want, rtol=1e-4, atol=1e-4)


def test_a_product_read_elsewhere_keeps_its_buffer():
    rng = np.random.default_rng(7)
    x, w = (Tensor(rng.standard_normal(s).astype(np.float32)) for s in ((96, 70), (70, 130)))
    b = Tensor(rng.standard_normal(130).astype(np.float32))
    fn = lambda x, w, b: (x @ w + b).relu() * (x @ w).sum()   # noqa: E731
    program, _ = _call_plan(fn, x, w, b)
    assert not program.unstored
    p = x.numpy() @ w.numpy()
    want = np.maximum(p + b.numpy(), 0) * p.sum()
    np.testing.assert_allclose(fgrad.jit(fn)(x, w, b).numpy(), want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("name, in_registers", [("bias_relu", True), ("residual", True),
                                                ("bias_gelu", False)])
def test_a_register_epilogue_kernel_is_never_compiled(monkeypatch, name, in_registers):
    """A fused kernel that the micro-kernel computes in registers is called by no step, so
    it is not compiled (its LLVM time on every cold start); one run through the driver's
    thunk is."""
    from fgrad.lower.llvm import kernel_cache
    compiled: list[str] = []
    real = kernel_cache._object_code
    monkeypatch.setattr(kernel_cache, "_object_code", lambda text, level=None: compiled.append(
        text) or real(text, level))
    kernel_cache.clear_memory()
    monkeypatch.setenv("FGRAD_CACHE_DIR", "")   # no disk cache: everything compiles here
    m, k, n = 37, 29, 23
    x, w = RNG.standard_normal((m, k)).astype(np.float32), RNG.standard_normal((k, n))
    b, r = RNG.standard_normal(n), RNG.standard_normal((m, n))
    args = [x, w.astype(np.float32), b.astype(np.float32), r.astype(np.float32)]
    fn, ref = EPILOGUES[name]
    with fgrad.config.override(gemm="native"):
        got = fgrad.jit(fn, backend="llvm")(*map(Tensor, args))
    np.testing.assert_allclose(got.numpy(), ref(*args), rtol=1e-4, atol=1e-4)
    kernels = [t for t in compiled if 'ModuleID = "fgrad_kernel"' in t]
    assert len(kernels) == (0 if in_registers else 1)
