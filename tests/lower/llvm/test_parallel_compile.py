"""How a program compiles (fgrad.lower.llvm.kernel_cache, target, runtime): kernels and
library calls compile on several threads for real, small kernels compile lightly, gemm
drivers are cached units of their own, and the entry module only calls them."""
from __future__ import annotations

import concurrent.futures
import re
import threading
import time
from typing import Any

import llvmlite.binding as llvm
import numpy as np
import pytest

import fgrad
import fgrad.lower  # noqa: F401  (registers the llvm compiler)
from fgrad import Tensor
from fgrad.lower.llvm import kernel_cache
from fgrad.lower.llvm import runtime as llvm_runtime
from fgrad.lower.llvm import target as llvm_target
from fgrad.lower.llvm.gemm.driver import routine_texts
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(11)
HOLD_S = 20.0


def test_llvm_calls_of_a_compile_bypass_llvmlites_global_lock():
    # if llvmlite's internals change, compiles silently become serial again: notice it
    assert llvm_target._raw("LLVMPY_RunNewModulePassManager") is not None
    assert llvm_target._raw("LLVMPY_TargetMachineEmitToMemory") is not None


def test_threads_compile_the_same_objects_as_one_thread():
    texts = [text for _, text in routine_texts("float32")] * 2
    alone = [kernel_cache._object_code(t, 1) for t in texts]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        together = list(pool.map(lambda t: kernel_cache._object_code(t, 1), texts))
    assert together == alone


def test_a_compile_runs_while_another_thread_holds_llvmlites_lock():
    (_, text), *_ = routine_texts("float32")
    context = llvm.create_context()
    module = llvm.parse_assembly(text, context=context)
    machine = llvm_target.new_machine()
    tuning = llvm.create_pipeline_tuning_options(speed_level=1)
    builder_ready = threading.Event()
    release = threading.Event()

    def hold_lock() -> None:
        with llvm.ffi.lib._lock:
            builder_ready.set()
            release.wait(HOLD_S)

    holder = threading.Thread(target=hold_lock)
    # the pass builder is made under the lock; the two long calls are not
    builder = llvm.create_pass_builder(machine, tuning)
    manager = builder.getModulePassManager()
    holder.start()
    builder_ready.wait(30)
    start = time.monotonic()
    try:
        llvm_target._raw("LLVMPY_RunNewModulePassManager")(manager, module, builder)
        took = time.monotonic() - start
    finally:
        release.set()
        holder.join()
    assert took < HOLD_S / 2   # it did not wait for the holder to let go


def _plan(fn: Any, *args: Any) -> Any:
    return llvm_runtime.plan(open_jaxpr(fgrad.make_jaxpr(fn)(*args))[0])


def _record_levels(monkeypatch: Any) -> list[Any]:
    """The speed level of every unit compiled from now on (no cache, memory or disk)."""
    levels: list[Any] = []
    real = kernel_cache._object_code
    monkeypatch.setattr(kernel_cache, "_object_code",
                        lambda text, level=None: levels.append(level) or real(text, level))
    kernel_cache.clear_memory()
    monkeypatch.setenv("FGRAD_CACHE_DIR", "")
    return levels


def test_small_kernels_compile_lightly_and_large_ones_at_o3(monkeypatch: Any):
    levels = _record_levels(monkeypatch)
    small = Tensor(RNG.standard_normal(kernel_cache.LIGHT_WORK).astype(np.float32))
    large = Tensor(RNG.standard_normal(kernel_cache.LIGHT_WORK + 1).astype(np.float32))
    for x in (small, large):
        program = _plan(lambda a: (a * 3.5).tanh(), x)
        kernel_cache.compile_kernels(program.kernels, llvm_runtime.cache_key)
    assert levels == [kernel_cache.LIGHT, None]
    for x in (small, large):   # and both compute the same thing
        got = fgrad.jit(lambda a: (a * 3.5).tanh())(x).numpy()
        np.testing.assert_allclose(got, np.tanh(x.numpy() * np.float32(3.5)), rtol=2e-6,
                                   atol=1e-7)


def test_row_kernels_over_short_rows_compile_without_vectorizers(monkeypatch: Any):
    """A log_softmax over 10 classes (rows shorter than two vectors) compiles at the SHORT
    level (no vectorizers); over 512 it vectorizes; over 10 classes but too many rows it
    vectorizes too."""
    levels = _record_levels(monkeypatch)
    shapes = [(256, 10), (64, 512), (kernel_cache.SHORT_LOOP_WORK // 10 + 64, 10)]
    xs = [Tensor(RNG.standard_normal(s).astype(np.float32)) for s in shapes]
    for x in xs:
        program = _plan(lambda a: a.log_softmax(-1), x)
        assert len(program.kernels) == 1
        kernel_cache.compile_kernels(program.kernels, llvm_runtime.cache_key)
    assert levels == [kernel_cache.SHORT, None, None]
    for x in xs:
        got = fgrad.jit(lambda a: a.log_softmax(-1))(x).numpy()
        a = x.numpy().astype(np.float64)
        want = a - a.max(-1, keepdims=True)
        want -= np.log(np.exp(want).sum(-1, keepdims=True))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fused", [False, True])
def test_gemm_drivers_are_cached_units_and_the_entry_only_calls(fused: bool):
    a = Tensor(RNG.standard_normal((40, 30)).astype(np.float32))
    w = Tensor(RNG.standard_normal((30, 20)).astype(np.float32))
    b = Tensor(RNG.standard_normal(20).astype(np.float32))
    fn = (lambda a, w, b: (a @ w + b).relu()) if fused else (lambda a, w, b: a @ w)
    program = _plan(fn, a, w, b)
    compiled, _ = kernel_cache.compile_kernels(
        program.kernels, llvm_runtime.cache_key, (), program.library_calls,
        program.epilogues)
    assert set(program.library_calls) <= set(compiled)
    entry = str(llvm_runtime.module_ir(program, {n: (k.symbol, k.function_type)
                                                 for n, k in compiled.items()}))
    defined = re.findall(r'^define .*@"([^"]+)"', entry, flags=re.M)
    assert defined and all(name.startswith("seg") for name in defined)
    assert "fma" not in entry and "phi" not in entry   # no loop, no arithmetic of its own
    got = fgrad.jit(fn)(a, w, b).numpy()
    want = a.numpy() @ w.numpy()
    if fused:
        want = np.maximum(want + b.numpy(), 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_short_rows_keep_their_values_in_registers():
    """The SHORT level selects instructions fully: the 10-class log_softmax's loops do not
    store each value to the stack and load it back as fast instruction selection does."""
    x = Tensor(RNG.standard_normal((256, 10)).astype(np.float32))
    (kernel,) = _plan(lambda a: a.log_softmax(-1), x).kernels
    text, _ = kernel_cache._kernel_text(kernel)
    spills = {level: len(re.findall(r"\(%rsp\)", kernel_cache.assembly_of(text, level)))
              for level in (kernel_cache.LIGHT, kernel_cache.SHORT)}
    assert spills[kernel_cache.SHORT] * 3 < spills[kernel_cache.LIGHT] * 2, spills


def test_entry_module_is_prepared_while_the_kernels_compile(monkeypatch: Any):
    """`meanwhile` runs once every kernel is handed to the compile threads and before any
    is waited for: it sees the symbols the entry declares while kernels are unfinished."""
    kernel_cache.clear_memory()
    monkeypatch.setenv("FGRAD_CACHE_DIR", "")
    release = threading.Event()
    finished: list[int] = []
    real = kernel_cache._object_code

    def held(text: str, level: Any = None) -> bytes:
        release.wait(HOLD_S)
        obj = real(text, level)
        finished.append(1)
        return obj
    monkeypatch.setattr(kernel_cache, "_object_code", held)
    x = Tensor(RNG.standard_normal((64, 300)).astype(np.float32))
    program = _plan(lambda a: (a.exp() * 2).sum(-1) + a.tanh().max(-1), x)
    monkeypatch.setattr(kernel_cache, "_workers", lambda jobs: 2)   # a 1-CPU runner too
    seen: list[dict[str, Any]] = []

    def meanwhile(symbols: dict[str, Any]) -> None:
        assert not finished            # nothing compiled yet: it overlaps the compiles
        seen.append(symbols)
        release.set()
    compiled, _ = kernel_cache.compile_kernels(program.kernels, llvm_runtime.cache_key,
                                               meanwhile=meanwhile)
    assert len(finished) == len(program.kernels)
    assert seen == [{name: (k.symbol, k.function_type) for name, k in compiled.items()}]


def test_a_program_links_its_entry_compiled_beside_the_kernels(monkeypatch: Any):
    monkeypatch.setenv("FGRAD_CACHE_DIR", "")
    kernel_cache.clear_memory()
    llvm_runtime.clear_memory_cache()
    x = Tensor(RNG.standard_normal((33, 70)).astype(np.float32))
    fn = fgrad.jit(lambda a: (a * 1.5).exp().sum(0) - a.min(0))
    want = np.exp(x.numpy() * np.float32(1.5)).sum(0) - x.numpy().min(0)
    np.testing.assert_allclose(fn(x).numpy(), want, rtol=1e-5)
    llvm_runtime.clear_memory_cache()     # the entry comes back from memory or is rebuilt
    fn2 = fgrad.jit(lambda a: (a * 1.5).exp().sum(0) - a.min(0))
    np.testing.assert_allclose(fn2(x).numpy(), want, rtol=1e-5)
