"""The llvm runtime's memory and compile caches: the buffer pool, donate_argnums, and the
in-memory and on-disk caches of compiled code.

References are NumPy; tests check pointers, pool counters and cache counters, never time.
"""
from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from typing import Any

import numpy as np
import pytest
from llvm_helpers import w1, w1_numpy

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm import disk_cache
from fgrad.lower.llvm import runtime as llvm_runtime
from fgrad.lower.llvm.buffer_pool import (MIN_POOLED_BYTES, POOL, BufferPool, aligned_empty,
                                          exclusively_owned, size_class)
from fgrad.lower.llvm.runtime import compile_stats, plan
from fgrad.lower.kernel import call_plan
from fgrad.lower.kernel.program import Program
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(0)
N = MIN_POOLED_BYTES // 4  # float32 elements: large enough for jit outputs to be pooled
SMALL = 1 << 16  # bytes: the pooled size of the unit tests' own pools


def ptr(t: Tensor) -> int:
    """The address of a Tensor's data."""
    return np.asarray(t).ctypes.data


def big(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(N).astype(np.float32)


# ---------------------------------------------------------------------------- pool


def test_size_class_rounds_up_by_at_most_an_eighth() -> None:
    for n in [1, 4095, 4097, 65536, 65537, 100_000, 1 << 24, 3 * (1 << 22) + 5]:
        c = size_class(n)
        assert c >= n and c % 4096 == 0 and c <= max(n * 9 // 8, 4096) + 4096


def test_block_returns_only_after_every_view_dies() -> None:
    pool = BufferPool(min_bytes=SMALL)
    a = pool.array((N,), np.float32)
    first = a.ctypes.data
    view = a[10:20]
    del a
    gc.collect()
    b = pool.array((N,), np.float32)
    assert b.ctypes.data != first  # a view still holds the first block
    del view
    c = pool.array((N,), np.float32)
    assert c.ctypes.data == first and pool.stats.hits == 1
    assert not c.flags.writeable and c.ctypes.data % 64 == 0


def test_small_requests_bypass_the_pool() -> None:
    pool = BufferPool()
    a = pool.array((4,), np.float32)
    assert a.shape == (4,) and not a.flags.writeable
    assert pool.take(100).nbytes == 100
    assert pool.stats.hits == pool.stats.misses == 0


def test_pool_keeps_at_most_its_limit() -> None:
    cap = size_class(SMALL)
    pool = BufferPool(limit_bytes=2 * cap, min_bytes=SMALL)
    blocks = [pool.take(SMALL) for _ in range(3)]
    for b in blocks:
        pool.give(b)
    assert pool.stats.cached_bytes == 2 * cap and pool.stats.evictions == 1
    again = pool.take(SMALL)
    assert again is blocks[2]  # the most recently freed block comes back first
    pool.clear()
    assert pool.stats.cached_bytes == 0


def test_pool_never_hands_one_block_to_two_threads() -> None:
    pool = BufferPool(limit_bytes=1 << 22, min_bytes=SMALL)
    in_use: set[int] = set()
    lock = threading.Lock()
    errors: list[str] = []

    def work() -> None:
        for i in range(300):
            block = pool.take(SMALL * (1 + i % 3))
            with lock:
                if block.ctypes.data in in_use:
                    errors.append("block handed out twice")
                in_use.add(block.ctypes.data)
            with lock:
                in_use.discard(block.ctypes.data)
            pool.give(block)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and pool.stats.hits > 0


def test_jit_outputs_come_from_the_pool_and_go_back() -> None:
    x = big()
    jf = fgrad.jit(w1, backend="llvm")
    first = jf(Tensor(x))
    np.testing.assert_allclose(first.numpy(), w1_numpy(x), rtol=2e-6, atol=1e-6)
    address = ptr(first)
    del first
    hits = POOL.stats.hits
    second = jf(Tensor(x))
    assert ptr(second) == address and POOL.stats.hits > hits


def test_a_kept_output_is_never_overwritten() -> None:
    jf = fgrad.jit(lambda x: (x * 2).exp(), backend="llvm")
    x0, x1 = big(0), big(1)
    kept = np.asarray(jf(Tensor(x0)))[::3]  # only a view survives
    for _ in range(3):
        jf(Tensor(x1))
    np.testing.assert_allclose(kept, np.exp(x0 * 2)[::3], rtol=1e-6)


def test_intermediates_are_pooled_and_results_stay_right() -> None:
    def f(x: Tensor) -> Tensor:
        s = x.reshape(N, 2).sum(axis=1)  # an intermediate large enough to be pooled
        return s / s.max()

    x = RNG.standard_normal(2 * N).astype(np.float32)
    jf = fgrad.jit(f, backend="llvm")
    s = x.reshape(N, 2).sum(axis=1)
    for _ in range(3):
        misses = POOL.stats.misses
        np.testing.assert_allclose(jf(Tensor(x)).numpy(), s / s.max(), rtol=1e-5)
    assert POOL.stats.misses == misses  # intermediate and output blocks were reused


# ---------------------------------------------------------------------------- donation


def scale_by_max(x: Tensor, y: Tensor) -> Tensor:
    """x is last read by the max kernel, before the product's kernel writes the output."""
    return y * x.max()


def fresh_output(x: np.ndarray) -> Tensor:
    """A Tensor that an fgrad call produced (pooled, referenced by nothing else)."""
    return fgrad.jit(lambda a: a * 1.0 + 0.0, backend="llvm")(Tensor(x))


def test_alias_plan_needs_the_input_dead_before_the_write() -> None:
    x, y = Tensor(big(0)), Tensor(big(1))
    later = donations(plan(open_jaxpr(fgrad.make_jaxpr(scale_by_max)(x, y))[0]))
    assert [ins for _, ins in later] == [(0,)]  # x may host the output; y may not
    assert donations(plan(open_jaxpr(fgrad.make_jaxpr(w1)(x))[0])) == ()


def donations(program: Program) -> tuple:
    """The program's donation plan: (output value, input positions) pairs."""
    return call_plan.from_program(program, lambda i, seg: (("seg0", 1, False),)).donations


def test_donated_input_buffer_becomes_the_output() -> None:
    x_np, y_np = big(0), big(1)
    x = fresh_output(x_np)
    address = ptr(x)
    out = fgrad.jit(scale_by_max, backend="llvm", donate_argnums=0)(x, Tensor(y_np))
    assert ptr(out) == address
    np.testing.assert_allclose(out.numpy(), y_np * x_np.max(), rtol=1e-6)


@pytest.mark.parametrize("backend", ["numpy", "llvm"])
def test_a_donated_tensor_raises_when_used(backend: str) -> None:
    x = fresh_output(big(0))
    jf = fgrad.jit(scale_by_max, backend=backend, donate_argnums=(0,))
    y = Tensor(big(1))
    jf(x, y)
    for use in (lambda: x + 1, lambda: x.numpy(), lambda: jf(x, y), lambda: x.shape):
        with pytest.raises(RuntimeError, match="has been donated"):
            use()
    assert np.isfinite(y.numpy()).all()  # the other argument is untouched


def test_donation_skips_arrays_that_something_else_holds() -> None:
    x_np, y_np = big(0), big(1)
    jf = fgrad.jit(scale_by_max, backend="llvm", donate_argnums=0)
    x = fresh_output(x_np)
    held = np.asarray(x)  # the very array
    out = jf(x, Tensor(y_np))
    assert out.numpy().ctypes.data != held.ctypes.data and ptr(out) != held.ctypes.data
    np.testing.assert_array_equal(held, x_np)
    x = fresh_output(x_np)
    view = np.asarray(x)[5:]  # a view of its block
    out = jf(x, Tensor(y_np))
    np.testing.assert_array_equal(view, x_np[5:])
    np.testing.assert_allclose(out.numpy(), y_np * x_np.max(), rtol=1e-6)


def test_donation_within_one_kernel_copies_and_is_right() -> None:
    x_np = big(0)
    x = fresh_output(x_np)
    address = ptr(x)
    out = fgrad.jit(w1, backend="llvm", donate_argnums=0)(x)
    assert ptr(out) != address
    np.testing.assert_allclose(out.numpy(), w1_numpy(x_np), rtol=2e-6, atol=1e-6)


def test_donating_a_pytree_consumes_every_leaf() -> None:
    def step(p: dict, g: dict) -> dict:
        return {k: p[k] - 0.1 * g[k] for k in p}

    p = {"a": Tensor(big(0)), "b": Tensor(big(1))}
    g = {"a": Tensor(big(2)), "b": Tensor(big(3))}
    new = fgrad.jit(step, backend="llvm", donate_argnums=0)(p, g)
    np.testing.assert_allclose(new["b"].numpy(), big(1) - np.float32(0.1) * big(3), rtol=1e-6)
    for leaf in p.values():
        with pytest.raises(RuntimeError, match="donated"):
            leaf.numpy()
    assert g["a"].numpy().shape == (N,)


def test_donation_is_ignored_under_transformations() -> None:
    jf = fgrad.jit(lambda x: (x * x).sum(), backend="llvm", donate_argnums=0)
    x = Tensor(np.arange(4, dtype=np.float32))
    np.testing.assert_allclose(fgrad.grad(jf)(x).numpy(), 2 * np.arange(4))
    np.testing.assert_allclose(x.numpy(), np.arange(4))


def test_static_and_donated_argument_is_an_error() -> None:
    with pytest.raises(ValueError, match="both static and donated"):
        fgrad.jit(lambda x, n: x * n, static_argnums=1, donate_argnums=(0, 1))


# ---------------------------------------------------------------------------- compile cache


def test_entry_header_detects_damage() -> None:
    payload = bytes(range(256)) * 7
    entry = disk_cache.encode(payload)
    assert disk_cache.decode(entry) == payload
    flipped = bytearray(entry)
    flipped[-100] ^= 1
    for bad in (entry[:-1], entry[:10], bytes(flipped), b"XXXXXXXX" + entry[8:]):
        assert disk_cache.decode(bytes(bad)) is None


def _unique_fn(tag: float) -> Any:
    """A function whose program no other test compiles (so its IR is new)."""
    return lambda x: (x * tag).sin() + tag


def _compile_and_check(tag: float) -> None:
    x = RNG.standard_normal(100).astype(np.float32)
    got = fgrad.jit(_unique_fn(tag), backend="llvm")(Tensor(x)).numpy()
    np.testing.assert_allclose(got, np.sin(x * np.float32(tag)) + np.float32(tag),
                               rtol=1e-5, atol=1e-6)


def _delta(before: dict[str, int]) -> dict[str, int]:
    return {k: compile_stats[k] - before.get(k, 0) for k in ("memory_hits", "disk_hits",
                                                              "builds", "program_hits")}


def _entries(folder: Any) -> list[str]:
    path = os.path.join(str(folder), "llvm")
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def test_disk_cache_hit_after_a_restart(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    before = dict(compile_stats)
    _compile_and_check(1.25)
    assert _delta(before) == {"memory_hits": 0, "disk_hits": 0, "builds": 1, "program_hits": 0}
    assert len(_entries(tmp_path)) == 1
    _compile_and_check(1.25)  # another jaxpr, identical program: loaded whole, its engine kept
    assert _delta(before) == {"memory_hits": 0, "disk_hits": 0, "builds": 1, "program_hits": 1}
    llvm_runtime.clear_memory_cache()
    _compile_and_check(1.25)  # as a new process: the record and the objects from disk
    assert _delta(before) == {"memory_hits": 0, "disk_hits": 0, "builds": 1, "program_hits": 2}
    shutil.rmtree(os.path.join(str(tmp_path), llvm_runtime.PROGRAMS))
    llvm_runtime.clear_memory_cache()
    _compile_and_check(1.25)  # no record: planned again, the entry's object code from disk
    assert _delta(before) == {"memory_hits": 0, "disk_hits": 1, "builds": 1, "program_hits": 2}


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_a_damaged_entry_is_rebuilt(tmp_path: Any, monkeypatch: Any, damage: str) -> None:
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    llvm_runtime.clear_memory_cache()
    _compile_and_check(2.5)
    (name,) = _entries(tmp_path)
    path = os.path.join(str(tmp_path), "llvm", name)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
    data = {"truncate": data[:len(data) // 2], "flip": data, "empty": b""}[damage]
    with open(path, "wb") as f:
        f.write(bytes(data))
    llvm_runtime.clear_memory_cache()
    before = dict(compile_stats)
    _compile_and_check(2.5)
    assert _delta(before) == {"memory_hits": 0, "disk_hits": 0, "builds": 1, "program_hits": 0}
    with open(path, "rb") as f:
        assert disk_cache.decode(f.read(), name[:-4]) is not None  # rewritten whole


@pytest.mark.parametrize("setting", ["0", ""])
def test_disk_cache_can_be_turned_off(tmp_path: Any, monkeypatch: Any, setting: str) -> None:
    monkeypatch.setenv("FGRAD_CACHE_DIR", setting)
    monkeypatch.chdir(tmp_path)
    llvm_runtime.clear_memory_cache()
    before = dict(compile_stats)
    _compile_and_check(3.75)
    llvm_runtime.clear_memory_cache()
    _compile_and_check(3.75)
    assert _delta(before) == {"memory_hits": 0, "disk_hits": 0, "builds": 2, "program_hits": 0}
    assert os.listdir(tmp_path) == []


def test_an_unwritable_cache_dir_only_warns(tmp_path: Any, monkeypatch: Any) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(blocker / "cache"))
    llvm_runtime.clear_memory_cache()
    with pytest.warns(RuntimeWarning, match="cannot write the compile cache"):
        _compile_and_check(4.5)


def test_a_new_process_loads_from_disk(tmp_path: Any) -> None:
    script = textwrap.dedent("""
        import numpy as np, fgrad
        from fgrad.lower.llvm.runtime import compile_stats
        x = np.linspace(-3, 3, 1000, dtype=np.float32)
        f = fgrad.jit(lambda x: (x * 1.5 + 0.5).tanh() * x.sigmoid(), backend="llvm")
        want = np.tanh(x * 1.5 + 0.5) / (1 + np.exp(-x))
        np.testing.assert_allclose(f(fgrad.Tensor(x)).numpy(), want, rtol=1e-5, atol=1e-6)
        print(compile_stats["builds"], compile_stats["disk_hits"], compile_stats["program_hits"])
    """)
    env = dict(os.environ, FGRAD_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, check=True).stdout.split() for _ in range(2)]
    assert runs == [["1", "0", "0"], ["0", "0", "1"]]  # the second: the whole program loaded


def test_the_least_recently_used_entries_are_pruned(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(disk_cache, "MAX_ENTRIES", 8)
    for i in range(8):
        disk_cache.store(f"k{i}", b"x" * i)
        os.utime(os.path.join(str(tmp_path), "llvm", f"k{i}.fgo"), (i, i))
    assert disk_cache.load("k0") == b""  # a hit makes k0 the most recently used
    disk_cache.store("k8", b"new")
    left = _entries(tmp_path)
    assert len(left) == 6 and "k0.fgo" in left and "k1.fgo" not in left


def test_outputs_below_the_pooled_size_are_plain_numpy_arrays() -> None:
    small = MIN_POOLED_BYTES // 8  # float32 elements: half the pooled size
    out = fgrad.jit(lambda x: x * 2, backend="llvm")(Tensor(np.ones(small, np.float32)))
    data = np.asarray(out)
    assert data.base is None or type(data.base) is np.ndarray  # no pool lease behind it
    assert not data.flags.writeable and np.all(data == 2)


def test_small_outputs_are_aligned_and_can_be_donated() -> None:
    arr, address = aligned_empty((3, 5), np.dtype(np.float32))
    assert address % 64 == 0 and arr.ctypes.data == address and arr.flags.writeable
    assert exclusively_owned(arr, 1)
    view = arr[1:]
    assert not exclusively_owned(arr, 1)  # a view reaches its memory
    del view
    x_np, y_np = (np.random.default_rng(i).standard_normal(1 << 12).astype(np.float32)
                  for i in range(2))
    x = fresh_output(x_np)  # 16 KiB: a plain (unpooled) array, the copy of a scratch one
    address = ptr(x)
    out = fgrad.jit(scale_by_max, backend="llvm", donate_argnums=0)(x, Tensor(y_np))
    assert ptr(out) == address
    np.testing.assert_allclose(out.numpy(), y_np * x_np.max(), rtol=1e-6)
