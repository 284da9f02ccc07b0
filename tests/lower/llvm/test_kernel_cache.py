"""Object code per kernel (fgrad.lower.llvm.kernel_cache): a second program reuses a kernel
compiled for the first, from memory and from disk; compile time is logged at INFO."""
from __future__ import annotations

import dataclasses
import logging
import os
import re
from typing import Any

import numpy as np
import pytest

import fgrad
import fgrad.lower  # noqa: F401  (registers the llvm compiler)
from fgrad import Tensor
from fgrad.lower.llvm import kernel_cache
from fgrad.lower.llvm import runtime as llvm_runtime
from fgrad.lower.llvm.gemm.driver import routine_texts
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(7)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _delta(before: dict[str, int]) -> dict[str, int]:
    return {k: kernel_cache.stats[k] - before.get(k, 0)
            for k in ("memory_hits", "disk_hits", "builds")}


def _scale(tag: float) -> Any:
    return lambda x: (x * tag).softmax(axis=1)


def test_a_second_program_reuses_a_kernel_from_memory(tmp_path: Any, monkeypatch: Any):
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    x = RNG.standard_normal((37, 53)).astype(np.float32)
    before = dict(kernel_cache.stats)
    first = fgrad.jit(_scale(1.75), backend="llvm")(Tensor(x)).numpy()
    assert _delta(before)["builds"] >= 1
    np.testing.assert_allclose(first, _softmax(x * np.float32(1.75)), rtol=1e-5, atol=1e-7)
    before = dict(kernel_cache.stats)
    both = fgrad.jit(lambda x: (_scale(1.75)(x), x.sum(axis=0)), backend="llvm")(Tensor(x))
    assert _delta(before)["memory_hits"] >= 1
    np.testing.assert_allclose(both[0].numpy(), first, rtol=1e-6)
    np.testing.assert_allclose(both[1].numpy(), x.sum(axis=0), rtol=1e-5, atol=1e-5)


def test_a_kernel_comes_back_from_disk_for_another_program(tmp_path: Any, monkeypatch: Any):
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    x = RNG.standard_normal((29, 61)).astype(np.float32)
    fgrad.jit(_scale(2.25), backend="llvm")(Tensor(x))
    assert os.listdir(tmp_path / kernel_cache.FOLDER)
    llvm_runtime.clear_memory_cache()
    before = dict(kernel_cache.stats)
    got = fgrad.jit(lambda x: (_scale(2.25)(x), x.max(axis=0)), backend="llvm")(Tensor(x))
    delta = _delta(before)
    assert delta["disk_hits"] >= 1 and delta["memory_hits"] == 0
    np.testing.assert_allclose(got[0].numpy(), _softmax(x * np.float32(2.25)), rtol=1e-5,
                               atol=1e-7)
    np.testing.assert_array_equal(got[1].numpy(), x.max(axis=0))


def test_identical_kernels_share_one_symbol_whatever_their_names():
    x = Tensor(RNG.standard_normal((8, 16)).astype(np.float32))
    jaxpr = fgrad.make_jaxpr(lambda a: a.exp().sum(axis=1))(x)
    (kernel,) = llvm_runtime.plan(open_jaxpr(jaxpr)[0]).kernels
    twin = dataclasses.replace(kernel, name="another_name")
    jaxpr = fgrad.make_jaxpr(lambda a: a.exp().max(axis=1))(x)
    (other,) = llvm_runtime.plan(open_jaxpr(jaxpr)[0]).kernels
    compiled, _ = kernel_cache.compile_kernels([kernel, twin], llvm_runtime.cache_key)
    assert compiled[kernel.name].symbol == compiled["another_name"].symbol
    assert other.name == kernel.name  # the same name, another loop nest: another symbol
    changed, _ = kernel_cache.compile_kernels([other], llvm_runtime.cache_key)
    assert changed[other.name].symbol != compiled[kernel.name].symbol


def test_compile_time_is_logged_at_info(caplog: Any, tmp_path: Any, monkeypatch: Any):
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    with caplog.at_level(logging.INFO, logger="fgrad.compile"):
        fgrad.jit(lambda x: (x * 3.5).tanh(), backend="llvm")(Tensor(np.ones(5, np.float32)))
    lines = [r.getMessage() for r in caplog.records if r.name == "fgrad.compile"]
    assert lines and "kernels" in lines[-1] and " ms" in lines[-1]


def test_a_cached_kernel_or_library_call_is_not_even_rendered(tmp_path: Any, monkeypatch: Any):
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    x = RNG.standard_normal((23, 41)).astype(np.float32)
    w = RNG.standard_normal((41, 19)).astype(np.float32)

    def fn(t: Tensor, v: Tensor) -> Any:
        return (t * 3.25).softmax(axis=1) + t.sum(axis=0), (t @ v).relu(), t.sort(1)[0]
    first = [o.numpy() for o in fgrad.jit(fn, backend="llvm")(Tensor(x), Tensor(w))]
    llvm_runtime.clear_memory_cache()   # as a new process: only the disk cache is left
    rendered: list[str] = []
    real_kernel, real_library = kernel_cache._kernel_text, kernel_cache._library_text
    monkeypatch.setattr(kernel_cache, "_kernel_text",
                        lambda k: rendered.append(k.name) or real_kernel(k))
    monkeypatch.setattr(kernel_cache, "_library_text",
                        lambda *a: rendered.append("library") or real_library(*a))
    again = fgrad.jit(fn, backend="llvm")(Tensor(x), Tensor(w))   # a new program
    assert rendered == [], rendered
    for got, want in zip(again, first, strict=True):
        np.testing.assert_array_equal(got.numpy(), want)


def test_equal_library_calls_of_a_program_are_rendered_once(tmp_path: Any, monkeypatch: Any):
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    kernel_cache.clear_memory()
    a, b, c = (RNG.standard_normal((37, 37)).astype(np.float32) for _ in range(3))
    rendered: list[int] = []
    real_library = kernel_cache._library_text
    monkeypatch.setattr(kernel_cache, "_library_text",
                        lambda *args: rendered.append(1) or real_library(*args))
    # three products of the same sizes and layout, each with the same fused epilogue:
    # one key, one render, one unit
    got = fgrad.jit(lambda a, b, c: ((a @ b) * 2.0, (b @ c) * 2.0, (c @ a) * 2.0),
                    backend="llvm")(Tensor(a), Tensor(b), Tensor(c))
    assert len(rendered) == 1, rendered
    for out, want in zip(got, ((a @ b) * 2, (b @ c) * 2, (c @ a) * 2), strict=True):
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


def test_a_damaged_signature_entry_reads_as_a_miss(tmp_path: Any, monkeypatch: Any):
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    signatures = kernel_cache.signatures
    from llvmlite import ir
    ftype = ir.FunctionType(ir.VoidType(), [ir.FloatType().as_pointer(), ir.IntType(64)])
    signatures.store("k1", ftype)
    kernel_cache.clear_memory()
    assert str(signatures.load("k1")) == str(ftype)
    from fgrad.lower.llvm import disk_cache
    for junk in (b"float**", b"struct*", b"float*,,i64", b"\xff"):
        disk_cache.store("k2", junk, signatures.FOLDER)
        kernel_cache.clear_memory()
        assert signatures.load("k2") is None


def test_kernel_keys_tell_apart_what_the_llvm_text_would():
    x = Tensor(RNG.standard_normal((8, 16)).astype(np.float32))
    programs = [fgrad.make_jaxpr(f)(x) for f in (
        lambda a: a * 2.0, lambda a: a * 2.5, lambda a: (a * 2.0).exp(), lambda a: a.exp() * 2.0,
        lambda a: a.sum(axis=0), lambda a: a.sum(axis=1), lambda a: a.max(axis=1))]
    kernels = [k for j in programs for k in llvm_runtime.plan(open_jaxpr(j)[0]).kernels]
    keys = {kernel_cache._kernel_key(k, llvm_runtime.cache_key)[0] for k in kernels}
    texts = {kernel_cache._kernel_text(k)[0] for k in kernels}
    assert len(keys) == len(texts) == len(kernels)
    for k in kernels:   # the declared type without rendering is the rendered one
        assert kernel_cache.kernel_function_type(k) == kernel_cache._kernel_text(k)[1]


WARM_PROBE = """
import numpy as np, fgrad
import fgrad.scipy.linalg as sl
from fgrad import Tensor
rng = np.random.default_rng(0)
a = rng.standard_normal((40, 40)); spd = a @ a.T + 40 * np.eye(40)
x = rng.standard_normal((300, 200)).astype(np.float32)
w = rng.standard_normal((200, 100)).astype(np.float32)
with fgrad.config.override(gemm="openblas"):
    blas = fgrad.jit(lambda p, q: (p @ q, (p @ q).relu()))(Tensor(x), Tensor(w))
native = fgrad.jit(lambda p, q: ((p @ q) * 2).tanh())(Tensor(x), Tensor(w))
sort = fgrad.jit(lambda p: p.sort(1)[0].cumsum(1))(Tensor(x))
def linalg(s):
    c = s.cholesky()
    return (c, sl.lu_factor(s)[0], s.qr()[1], s.svd()[1],
            sl.solve_triangular(c, s, lower=True))
got = [t.numpy() for t in fgrad.jit(linalg)(Tensor(spd))]
np.testing.assert_allclose(blas[0].numpy(), x @ w, rtol=1e-4, atol=1e-3)
np.testing.assert_allclose(native.numpy(), np.tanh((x @ w) * 2), rtol=1e-4, atol=1e-4)
np.testing.assert_allclose(sort.numpy(), np.sort(x, 1).cumsum(1), rtol=1e-5, atol=1e-4)
chol = np.linalg.cholesky(spd)
np.testing.assert_allclose(got[0], chol, rtol=1e-10, atol=1e-10)
np.testing.assert_allclose(np.abs(got[2]), np.abs(np.linalg.qr(spd)[1]), rtol=1e-8, atol=1e-8)
np.testing.assert_allclose(got[3], np.linalg.svd(spd)[1], rtol=1e-10)
np.testing.assert_allclose(got[4], np.linalg.solve(chol, spd), rtol=1e-8, atol=1e-8)
print("ok")
"""


def test_a_fresh_process_runs_library_calls_from_a_warm_cache(tmp_path: Any):
    """Library calls linked from cached object code, never rendered in this process, still
    find their BLAS/LAPACK symbols (a missing symbol would crash at call time)."""
    from tests.subprocess_probe import run_probe
    env = {"FGRAD_CACHE_DIR": str(tmp_path)}
    assert run_probe(WARM_PROBE, env=env).strip() == "ok"          # cold: compiles, caches
    assert os.listdir(tmp_path / kernel_cache.FOLDER)
    assert run_probe(WARM_PROBE, env=env).strip() == "ok"          # warm: nothing rendered


def test_prefetched_routines_are_compiled_once(tmp_path: Any, monkeypatch: Any):
    """A cold program with a matmul starts compiling the shared GEMM routines before it is
    planned; the batch of its kernels then takes them instead of compiling them again."""
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    kernel_cache.clear_memory()
    built: list[str] = []
    real = kernel_cache._object_code
    monkeypatch.setattr(kernel_cache, "_object_code",
                        lambda text, level=None: built.append(text) or real(text, level))
    prefetched: list[int] = []
    real_prefetch = kernel_cache.prefetch
    monkeypatch.setattr(kernel_cache, "prefetch", lambda texts, *a: prefetched.append(
        len(texts)) or real_prefetch(texts, *a))
    monkeypatch.setattr(llvm_runtime, "_STAGED_PREFETCHED", {"float32"})   # the staging hook's
    x = RNG.standard_normal((37, 29)).astype(np.float32)
    w = RNG.standard_normal((29, 11)).astype(np.float32)
    with fgrad.config.override(gemm="native"):
        got = fgrad.jit(lambda a, b: (a @ b).tanh(), backend="llvm")(Tensor(x), Tensor(w))
    np.testing.assert_allclose(got.numpy(), np.tanh(x @ w), rtol=1e-5, atol=1e-6)
    assert prefetched == [1] * len(routine_texts("float32"))   # one part at a time
    assert len(built) == len(set(built))                       # nothing compiled twice
    assert sum(bool(re.search(r'define void @"fgrad_gemm\d+_f32_\w+_micro"', text))
               for text in built) == 1


def test_a_staged_matmul_starts_the_gemm_routines_while_tracing(tmp_path: Any,
                                                               monkeypatch: Any):
    """The llvm backend's staging hook: the first float32 matmul a trace stages hands
    every shared GEMM routine to the compile thread at once (before the trace ends, so
    before any planning); later ones, and a trace under another default backend, hand
    none; the program then compiles each routine once and computes the product."""
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    kernel_cache.clear_memory()
    monkeypatch.setattr(llvm_runtime, "_STAGED_PREFETCHED", set())
    handed: list[str] = []
    real_prefetch = kernel_cache.prefetch
    monkeypatch.setattr(kernel_cache, "prefetch", lambda units, *a: handed.extend(
        t for t, _ in units) or real_prefetch(units, *a))
    x = Tensor(RNG.standard_normal((37, 29)).astype(np.float32))
    w = Tensor(RNG.standard_normal((29, 11)).astype(np.float32))
    with fgrad.config.override(backend="numpy"):
        fgrad.make_jaxpr(lambda a, b: a @ b)(x, w)
    assert handed == []
    with fgrad.config.override(gemm="native"):
        fgrad.make_jaxpr(lambda a, b: (a @ b) @ b.T)(x, w)
        assert len(handed) == len(routine_texts("float32"))
        assert any(re.search(r'define void @"fgrad_gemm\d+_f32_\w+_micro"', t) for t in handed)
        handed.clear()
        fgrad.make_jaxpr(lambda a, b: a @ b)(x, w)
        assert handed == []
        got = fgrad.jit(lambda a, b: a @ b, backend="llvm")(x, w)
    np.testing.assert_allclose(got.numpy(), x.numpy() @ w.numpy(), rtol=1e-5, atol=1e-6)


def test_kernels_that_differ_only_in_shapes_and_names_compile_once():
    """Adam's update of a 600x500 and a 500x600 matrix: one flat loop over the same number
    of elements each, the same machine code; one key, one symbol, both results right."""
    a = RNG.standard_normal((600, 500)).astype(np.float32)
    b = RNG.standard_normal((500, 600)).astype(np.float32)
    update = lambda p: p - 0.01 * p / ((p * p).sqrt() + 1e-8)  # noqa: E731
    jaxpr = fgrad.make_jaxpr(lambda p, q: (update(p), update(q)))(Tensor(a), Tensor(b))
    kernels = llvm_runtime.plan(open_jaxpr(jaxpr)[0]).kernels
    assert len(kernels) == 2 and kernels[0].params[0].shape != kernels[1].params[0].shape
    assert kernels[0].params[0].name != kernels[1].params[0].name
    keys = {kernel_cache._kernel_key(k, llvm_runtime.cache_key)[0] for k in kernels}
    compiled, _ = kernel_cache.compile_kernels(kernels, llvm_runtime.cache_key)
    assert len(keys) == 1 and len({c.symbol for c in compiled.values()}) == 1
    got = fgrad.jit(lambda p, q: (update(p), update(q)))(Tensor(a), Tensor(b))
    for out, x in zip(got, (a, b)):
        np.testing.assert_allclose(out.numpy(), x - 0.01 * x / (np.abs(x) + 1e-8), rtol=1e-5,
                                   atol=1e-6)


def test_kernels_alike_but_for_the_split_loop_extent_are_compiled_once(tmp_path: Any,
                                                                        monkeypatch: Any):
    """Adam's update of a 784x512 and a 512x512 matrix: their keys differ (the extents of
    the loop threads split), their LLVM text does not (same_code.py). One program compiles
    one of them and copies it under the other's symbol; the copy runs right, from memory
    and, after the memory is cleared, from disk."""
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    a = RNG.standard_normal((784, 512)).astype(np.float32)
    b = RNG.standard_normal((512, 512)).astype(np.float32)
    # constants of its own: no other test's kernel has this text
    update = lambda p: p - 0.0125 * p / ((p * p).sqrt() + 3e-8)  # noqa: E731
    jaxpr = fgrad.make_jaxpr(lambda p, q: (update(p), update(q)))(Tensor(a), Tensor(b))
    kernels = llvm_runtime.plan(open_jaxpr(jaxpr)[0]).kernels
    keys = {kernel_cache._kernel_key(k, llvm_runtime.cache_key)[0] for k in kernels}
    assert len(kernels) == 2 and len(keys) == 2

    def run_and_check() -> None:
        got = fgrad.jit(lambda p, q: (update(p), update(q)))(Tensor(a), Tensor(b))
        for out, x in zip(got, (a, b)):
            np.testing.assert_allclose(out.numpy(), x - 0.0125 * x / (np.abs(x) + 3e-8),
                                       rtol=1e-5, atol=1e-6)
    before = dict(kernel_cache.stats)
    compiled, _ = kernel_cache.compile_kernels(kernels, llvm_runtime.cache_key)
    assert len({c.symbol for c in compiled.values()}) == 2
    assert kernel_cache.stats["builds"] - before.get("builds", 0) == 1
    assert kernel_cache.stats["same_code"] - before.get("same_code", 0) == 1
    run_and_check()
    llvm_runtime.clear_memory_cache()
    before = dict(kernel_cache.stats)
    run_and_check()
    assert kernel_cache.stats["builds"] == before.get("builds", 0)


def test_kernels_start_compiling_while_the_program_is_planned(tmp_path: Any,
                                                              monkeypatch: Any):
    """Kernels that planning will not change are handed to the prefetch thread as they are
    built (rendered once, compiled once); a kernel a matmul may take as its epilogue waits."""
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    handed, rendered, built = [], [], []
    prefetch, render = kernel_cache.prefetch_kernel, kernel_cache._kernel_text
    build = kernel_cache._built_and_stored
    monkeypatch.setattr(kernel_cache, "_built_and_stored",
                        lambda key, *a: (built.append(key), build(key, *a))[1])
    monkeypatch.setattr(kernel_cache, "prefetch_kernel",
                        lambda k, key_of: (handed.append(k.name), prefetch(k, key_of)))
    monkeypatch.setattr(kernel_cache, "_kernel_text",
                        lambda k: (rendered.append(k.name), render(k))[1])
    x = RNG.standard_normal((48, 40)).astype(np.float32)
    w = RNG.standard_normal((40, 24)).astype(np.float32)

    def step(x: Tensor, w: Tensor) -> Any:
        h = ((x * 0.5).exp() @ w).tanh()   # exp: before the matmul; tanh: its epilogue
        return h.sum(axis=0), (x * x).max(axis=1)
    got = fgrad.jit(step, backend="llvm")(Tensor(x), Tensor(w))
    want = np.tanh(np.exp(x * np.float32(0.5)) @ w)
    np.testing.assert_allclose(got[0].numpy(), want.sum(axis=0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[1].numpy(), (x * x).max(axis=1), rtol=1e-6)
    program = llvm_runtime.plan(open_jaxpr(fgrad.make_jaxpr(step)(Tensor(x), Tensor(w)))[0])
    assert 1 <= len(handed) < len(program.kernels)
    assert sorted(rendered) == sorted(set(rendered)) and set(handed) <= set(rendered)
    assert sorted(built) == sorted(set(built)) and len(built) >= len(rendered)  # once each


def test_compiles_switch_threads_quickly_and_give_the_interval_back():
    """Nested and concurrent compiles share one change; the last to leave restores it."""
    import sys
    import threading

    from fgrad.lower.llvm import target
    saved = sys.getswitchinterval()
    entered, leave = threading.Event(), threading.Event()

    def other_compile() -> None:
        with target.quick_thread_switches():
            entered.set()
            leave.wait(10)
    with target.quick_thread_switches():
        assert sys.getswitchinterval() == target.COMPILE_SWITCH_INTERVAL
        thread = threading.Thread(target=other_compile)
        thread.start()
        entered.wait(10)
        with target.quick_thread_switches():
            pass
        assert sys.getswitchinterval() == target.COMPILE_SWITCH_INTERVAL
    assert sys.getswitchinterval() == target.COMPILE_SWITCH_INTERVAL   # the other one runs
    leave.set()
    thread.join(10)
    assert sys.getswitchinterval() == saved


def test_same_code_claims_the_first_key_and_renames_only_a_matching_symbol():
    from fgrad.lower.llvm import same_code
    text = "define void @\"fgrad_kernel\"() { ret void }  ; a text no other test compiles"
    assert same_code.claim(text, 2, "first") == "first"
    assert same_code.claim(text, 2, "second") == "first"
    assert same_code.claim(text, None, "other level") == "other level"
    old, new = "fgk_" + "a" * 32, "fgk_" + "b" * 32
    obj = b"\x7fELF..." + old.encode() + b"\0rest"
    assert same_code.renamed(obj, old, new) == b"\x7fELF..." + new.encode() + b"\0rest"
    with pytest.raises(ValueError):
        same_code.renamed(obj, new, old)          # not in the object
    with pytest.raises(ValueError):
        same_code.renamed(obj, old, new + "x")    # the string table would move
