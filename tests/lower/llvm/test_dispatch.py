"""The lean call path of one-segment llvm programs (fgrad.lower.llvm.dispatch), against NumPy:
repeated and changing arguments, scratch outputs, fallbacks, concurrent callers."""
from __future__ import annotations

import threading

import numpy as np

import fgrad
import fgrad.lower  # noqa: F401  (registers the llvm compiler)
from fgrad import Tensor


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

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
