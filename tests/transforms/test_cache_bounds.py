"""Compiled programs are freed with their function, bounded per function, and dropped by
`clear_cache` / `fgrad.clear_caches()` (issue 18, item 4)."""
import gc
import weakref

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm import runtime as llvm_runtime
from fgrad.transforms.jit_prim import open_jaxpr


def programs_of(jitted):
    """Weak references to the compiled executables a jitted function holds."""
    refs = []
    for closed, _ in jitted._cache.values():
        for exe in open_jaxpr(closed)[0].__dict__.get("_fgrad_executables", (None, {}))[1].values():
            refs.append(weakref.ref(exe))
    return refs


def new_jitted(tag):
    return fgrad.jit(lambda a: (a * tag).sin() + tag, backend="llvm")


X = np.linspace(-1, 1, 16, dtype=np.float32)


def test_a_dropped_function_frees_its_programs():
    f = new_jitted(1.5)
    np.testing.assert_allclose(f(Tensor(X)).numpy(), np.sin(X * 1.5) + 1.5, rtol=1e-6)
    refs = programs_of(f)
    assert len(refs) == 1 and refs[0]() is not None
    del f
    gc.collect()
    assert refs[0]() is None


def test_clear_cache_frees_programs():
    f = new_jitted(2.5)
    f(Tensor(X))
    refs = programs_of(f)
    f.clear_cache()
    gc.collect()
    assert [r() for r in refs] == [None]
    np.testing.assert_allclose(f(Tensor(X)).numpy(), np.sin(X * 2.5) + 2.5, rtol=1e-6)


def test_signatures_per_function_are_bounded_lru(monkeypatch):
    monkeypatch.setenv("FGRAD_JIT_CACHE_SIZE", "4")
    f = new_jitted(3.5)
    first = None
    for n in range(1, 11):
        f(Tensor(np.ones(n, np.float32)))
        if n == 1:
            first = programs_of(f)[0]
        f(Tensor(np.ones(2, np.float32)))  # keep n=2 recently used
    gc.collect()
    assert len(f._cache) == 4 and len(f._fast) <= 4
    assert first() is None  # n=1 was evicted, and its program freed
    misses = f.cache_info().misses
    f(Tensor(np.ones(2, np.float32)))
    assert f.cache_info().misses == misses  # still cached
    out = f(Tensor(np.ones(1, np.float32))).numpy()  # retraced, still right
    assert f.cache_info().misses == misses + 1
    np.testing.assert_allclose(out, np.sin(np.float32(3.5)) + 3.5, rtol=1e-6)


def test_clear_caches_drops_every_program_and_engine():
    fs = [new_jitted(4.5 + i) for i in range(3)]
    for f in fs:
        f(Tensor(X))
    refs = [r for f in fs for r in programs_of(f)]
    assert len(llvm_runtime._ENGINES) > 0
    fgrad.clear_caches()
    assert [r() for r in refs] == [None] * 3
    assert len(llvm_runtime._ENGINES) == 0
    for i, f in enumerate(fs):
        np.testing.assert_allclose(f(Tensor(X)).numpy(), np.sin(X * (4.5 + i)) + 4.5 + i,
                                   rtol=1e-6)


def test_cache_size_flag_is_checked(monkeypatch):
    monkeypatch.setenv("FGRAD_JIT_CACHE_SIZE", "lots")
    with pytest.raises(ValueError, match="FGRAD_JIT_CACHE_SIZE"):
        new_jitted(9.0)(Tensor(X))
