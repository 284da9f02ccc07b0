"""The lean call path of one-segment llvm programs (fgrad.lower.llvm.dispatch), against NumPy:
repeated and changing arguments, scratch outputs, fallbacks, concurrent callers; and the
arena call of programs with intermediates (one pool request per call)."""
from __future__ import annotations

import threading

import numpy as np

import fgrad
import fgrad.lower  # noqa: F401  (registers the llvm compiler)
from fgrad import Tensor
from fgrad.lower.llvm.buffer_pool import MIN_POOLED_BYTES, POOL
from fgrad.lower.llvm.dispatch import ArenaCall


def _run_on_threads(worker, count: int) -> None:
    """worker(k) for k in range(count), each on its own thread, all at once."""
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _executable(fn, *args):
    jitted = fgrad.jit(fn, backend="llvm")
    jitted(*args)
    run, _, _, frozen = next(iter(jitted._fast.values()))
    assert frozen, "a one-segment program should give jit its lean call"
    return jitted, run._general.__self__  # the LLVMExecutable the lean call belongs to


def test_small_programs_take_the_lean_path_and_return_fresh_outputs():
    x = Tensor(np.array([1.0, 2.0, 3.0], np.float32))
    f, exe = _executable(lambda a: a * 2 + 1, x)
    assert exe._lean is not None
    first = f(x)
    second = f(Tensor(np.array([5.0, 6.0, 7.0], np.float32)))
    np.testing.assert_array_equal(first.numpy(), [3, 5, 7])  # not overwritten by the 2nd call
    np.testing.assert_array_equal(second.numpy(), [11, 13, 15])
    assert not exe(x._data)[0].flags.writeable


def test_same_argument_object_with_new_contents_is_read_again():
    data = np.array([1.0, 2.0], np.float32)
    _, exe = _executable(lambda a, b: a - b, Tensor(data), Tensor(data))
    a, b = np.array([4.0, 8.0], np.float32), np.array([1.0, 1.0], np.float32)
    np.testing.assert_array_equal(exe(a, b)[0], [3, 7])
    a[:] = [10.0, 20.0]
    np.testing.assert_array_equal(exe(a, b)[0], [9, 19])
    np.testing.assert_array_equal(exe(b, a)[0], [-9, -19])


def test_arguments_needing_conversion_take_the_general_path():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    _, exe = _executable(lambda a: a + 1, Tensor(x[:, :2].copy()))
    strided = x[:, :2]
    assert not strided.flags.c_contiguous
    np.testing.assert_array_equal(exe(strided)[0], strided + 1)
    np.testing.assert_array_equal(exe([[1, 2], [3, 4], [5, 6]])[0], [[2, 3], [4, 5], [6, 7]])


def test_large_outputs_and_inputs():
    n = 1 << 14
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    _, exe = _executable(lambda a: a * a, Tensor(x))
    outs = [exe(x)[0] for _ in range(2)]
    assert outs[0] is not outs[1]
    np.testing.assert_allclose(outs[1], x * x, rtol=1e-6)


def test_concurrent_callers_get_their_own_results():
    _, exe = _executable(lambda a: a + 1, Tensor(np.zeros(4, np.float32)))
    errors = []

    def worker(k: int) -> None:
        x = np.full(4, k, np.float32)
        for _ in range(300):
            out = exe(x)[0]
            if not np.array_equal(out, x + 1):
                errors.append((k, out))

    _run_on_threads(worker, 4)
    assert not errors


# ------------------------------------------------------------ several steps: the arena call

def _mlp(a, w1, w2):
    hidden = (a @ w1).relu()
    return (hidden @ w2).tanh().sum(axis=0), a, hidden.max()


def _mlp_numpy(a, w1, w2):
    hidden = np.maximum(a @ w1, 0)
    return np.tanh(hidden @ w2).sum(axis=0), a, hidden.max()


def _arena_executable():
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((300, 200), (200, 256),
                                                                   (256, 40))]
    jitted = fgrad.jit(_mlp, backend="llvm")
    jitted(*[Tensor(a) for a in arrays])
    run, _, _, frozen = next(iter(jitted._fast.values()))
    assert frozen and isinstance(run, ArenaCall)
    return jitted, run, arrays


def test_programs_with_intermediates_take_one_arena_per_call():
    jitted, arena, arrays = _arena_executable()
    exe = arena._general.func.__self__
    assert len(exe.plan.block_bytes) >= 2 and sum(exe.plan.block_bytes) >= MIN_POOLED_BYTES
    before = POOL.stats.hits + POOL.stats.misses
    outs = arena(arrays)
    assert POOL.stats.hits + POOL.stats.misses == before + 1  # the arena; outputs are small
    general = exe._run(arrays, {})
    for got, same, want in zip(outs, general, _mlp_numpy(*arrays), strict=True):
        assert not got.flags.writeable
        np.testing.assert_array_equal(got, same)   # bit for bit the general path's result
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)
    frozen = arrays[0].copy()
    frozen.setflags(False)
    assert arena([frozen, *arrays[1:]])[1] is frozen  # a read-only input returned as it is


def test_arena_call_converts_arguments_and_keeps_earlier_outputs():
    jitted, arena, arrays = _arena_executable()
    first = jitted(*[Tensor(a) for a in arrays])
    doubled = [a * 2 for a in arrays]
    second = jitted(*[Tensor(a) for a in doubled])
    np.testing.assert_allclose(first[0].numpy(), _mlp_numpy(*arrays)[0], rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(second[0].numpy(), _mlp_numpy(*doubled)[0], rtol=2e-4,
                               atol=2e-4)
    as_float64 = [a.astype(np.float64) for a in arrays]   # converted on the way in
    np.testing.assert_allclose(arena(as_float64)[0], _mlp_numpy(*arrays)[0], rtol=2e-4,
                               atol=2e-4)


def test_concurrent_arena_callers_get_their_own_results():
    _, arena, arrays = _arena_executable()
    errors = []

    def worker(k: int) -> None:
        mine = [a * (1 + 0.25 * k) for a in arrays]
        want = _mlp_numpy(*mine)[0]
        for _ in range(30):
            got = arena(mine)[0]
            if not np.allclose(got, want, rtol=2e-4, atol=2e-4):
                errors.append(k)

    _run_on_threads(worker, 4)
    assert not errors
