"""Concurrent jitted calls (issue 18, item 2): one trace and one compile per signature, and
the llvm thread pool never returns while a worker is still inside a part."""
import ctypes
import gc
import threading
import time

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm.pool import NativePool, native_pool_supported
from fgrad.lower.llvm.threads import PART_ENTRY, ThreadPool, new_state
from fgrad.transforms import executables
from subprocess_probe import run_probe


PART_CALLBACK = PART_ENTRY  # a Python function as a part's entry (ctypes callback)
POOLS = [ThreadPool] + ([NativePool] if native_pool_supported() else [])


@pytest.mark.parametrize("make_pool", POOLS, ids=lambda p: p.__name__)
def test_pool_run_waits_for_every_worker_that_entered(make_pool):
    """Thread 0 returns while a worker is still inside the part: `run` must wait for it
    (the entry is a ctypes callback, so the native pool's workers call Python here)."""
    pool, lock = make_pool(), threading.Lock()
    inside, entered, leftover = [0], threading.Event(), []

    def entry(table, thread, state):
        if thread == 0:
            entered.wait(2.0)  # make sure a worker is inside before thread 0 finishes
            return
        with lock:
            inside[0] += 1
        entered.set()
        time.sleep(0.05)
        with lock:
            inside[0] -= 1

    callback = PART_CALLBACK(entry)
    address = ctypes.cast(callback, ctypes.c_void_p).value
    for _ in range(20):
        entered.clear()
        pool.run(callback, address, (ctypes.c_void_p * 1)(), new_state(1, 4), 4)
        with lock:
            leftover.append(inside[0])
    assert leftover == [0] * 20


def test_concurrent_first_calls_trace_and_compile_once(monkeypatch):
    compiled = []
    original = executables.COMPILERS.get("llvm") or (
        __import__("fgrad.lower") and executables.COMPILERS["llvm"])

    def counting(jaxpr):
        compiled.append(jaxpr)
        time.sleep(0.05)  # widen the window in which other threads arrive
        return original(jaxpr)

    monkeypatch.setitem(executables.COMPILERS, "llvm", counting)
    f = fgrad.jit(lambda a: (a * 3.0).exp() - a, backend="llvm")
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    barrier, outs = threading.Barrier(12), [None] * 12

    def call(i):
        barrier.wait()
        outs[i] = f(Tensor(x)).numpy()

    threads = [threading.Thread(target=call, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(compiled) == 1 and f.cache_info().misses == 1
    for out in outs:
        np.testing.assert_allclose(out, np.exp(x * 3) - x, rtol=1e-5)


STRESS = """
    import sys, threading, numpy as np, fgrad
    from fgrad import Tensor
    rounds, nthreads = {rounds}, 12
    x = np.random.default_rng(0).standard_normal((600, 600)).astype(np.float32)
    wrong = 0
    for r in range(rounds):
        f = fgrad.jit(lambda a, r=r: (a * (0.1 * r + 0.5)).tanh().sum(axis=1) + a[:, 0])
        barrier, outs = threading.Barrier(nthreads), [None] * nthreads
        def work(i):
            barrier.wait()
            outs[i] = f(Tensor(x)).numpy()
        ts = [threading.Thread(target=work, args=(i,)) for i in range(nthreads)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        ref = np.tanh(x * (0.1 * r + 0.5)).sum(axis=1) + x[:, 0]
        wrong += sum(o is None or not np.allclose(o, ref, rtol=1e-4, atol=1e-4) for o in outs)
        del f, outs
        if r % 3 == 2:
            fgrad.clear_caches()
    print("wrong", wrong)
"""


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_threaded_jit_stress(backend):
    """12 threads at once on each of several new jitted functions (large enough to use the
    llvm thread pool), with functions dropped and caches cleared between rounds."""
    out = run_probe(STRESS.format(rounds=6), env={
        "FGRAD_BACKEND": backend, "FGRAD_NUM_THREADS": "4", "FGRAD_CACHE_DIR": "0"})
    assert out.split() == ["wrong", "0"]


EXIT_WHILE_SPINNING = """
    import numpy as np, fgrad
    from fgrad.lower.llvm import pool
    pool.SPIN_CYCLES = 1 << 40   # the worker spins in the pool's code until the process ends
    pool.SHORT_SPIN_CYCLES = 1 << 40   # also when it sees contention (a busy test machine)
    f = fgrad.jit(lambda a: (a * 1.5).tanh() + a, backend="llvm")
    x = np.linspace(-1, 1, 1 << 20, dtype=np.float32)
    for _ in range(3):
        y = f(fgrad.Tensor(x))
    print("ok", float(y.numpy()[-1]))
"""


@pytest.mark.skipif(not native_pool_supported(), reason="no native pool on this host")
def test_the_process_exits_cleanly_while_a_worker_spins():
    """At exit the workers leave the pool's code before the interpreter frees anything (the
    compiled pool and the control blocks are never freed either)."""
    env = {"FGRAD_NUM_THREADS": "2", "FGRAD_CACHE_DIR": "0"}
    for _ in range(2):
        out = run_probe(EXIT_WHILE_SPINNING, env=env)
        assert out.split()[0] == "ok" and abs(float(out.split()[1]) - (np.tanh(1.5) + 1)) < 1e-5


@pytest.mark.skipif(not native_pool_supported(), reason="no native pool on this host")
def test_a_dropped_pool_stops_its_workers():
    pool = NativePool()
    calls = []
    callback = PART_CALLBACK(lambda table, thread, state: calls.append(thread))
    pool.run(callback, ctypes.cast(callback, ctypes.c_void_p).value,
             (ctypes.c_void_p * 1)(), new_state(1, 3), 3)
    workers = list(pool._workers)
    assert len(workers) == 2 and 0 in calls
    del pool
    gc.collect()
    for worker in workers:
        worker.join(timeout=5.0)
        assert not worker.is_alive()


FORKED = """
    import os, numpy as np, fgrad
    f = fgrad.jit(lambda a: (a * 1.5).tanh() + a, backend="llvm")
    x = np.linspace(-1, 1, 1 << 20, dtype=np.float32)
    want = np.tanh(x * np.float32(1.5)) + x
    assert np.allclose(f(fgrad.Tensor(x)).numpy(), want, atol=1e-6)
    pid = os.fork()
    if pid == 0:   # the child has none of its parent's workers: the pool starts its own
        ok = np.allclose(f(fgrad.Tensor(x)).numpy(), want, atol=1e-6)
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    assert np.allclose(f(fgrad.Tensor(x)).numpy(), want, atol=1e-6)
    print("child", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork here")
def test_a_forked_child_runs_parallel_parts():
    out = run_probe(FORKED, env={"FGRAD_NUM_THREADS": "2", "FGRAD_CACHE_DIR": "0"})
    assert out.split() == ["child", "0"]


def test_llvmlite_escape_table_is_full_before_background_threads_start():
    """llvmlite fills its string-escape table on first use; a thread printing a module while
    another fills it saw a half-filled table (KeyError in CI: the pool's code built on a
    background thread while the caller printed its first kernel). Importing the llvm
    backend must fill it on the importing thread."""
    code = """
        from llvmlite.ir import values
        import fgrad.lower.llvm.pool, fgrad.lower.llvm.kernel_cache
        table = values._escape_string.__defaults__[0]
        print(len(table), table[ord("l")])
    """
    assert run_probe(code).split() == ["256", "l"]
