"""dot_general on dtypes BLAS lacks (int, bool, float16) runs as one fused
multiply-and-reduce kernel under jit on every backend; checked against NumPy."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.core import prims as P
from fgrad.lower.llvm.runtime import plan

pytestmark = pytest.mark.backends

RNG = np.random.default_rng(3)
CASES = [  # lhs shape, rhs shape, dimension numbers, NumPy reference
    ((4, 6), (6, 5), (((1,), (0,)), ((), ())), lambda x, y: x @ y),
    ((6, 4), (5, 6), (((0,), (1,)), ((), ())), lambda x, y: x.T @ y.T),
    ((3, 4, 6), (3, 6, 2), (((2,), (1,)), ((0,), (0,))), lambda x, y: x @ y),
    ((5,), (5,), (((0,), (0,)), ((), ())), lambda x, y: x @ y),
    ((2, 3), (4,), (((), ()), ((), ())), lambda x, y: np.multiply.outer(x, y)),
]


def sample(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    if dtype == np.bool_:
        return RNG.random(shape) < 0.4
    return RNG.integers(-3, 4, shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, np.int64, np.bool_,
                                   np.float16])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_non_blas_dot_general_matches_numpy(jit_backend: str, dtype: Any, case: int) -> None:
    xs, ys, dn, ref = CASES[case]
    x, y = sample(xs, dtype), sample(ys, dtype)
    got = fgrad.jit(lambda a, b: P.dot_general(a, b, dn))(Tensor(x), Tensor(y))
    wide = np.int64 if dtype != np.float16 else np.float32
    want = ref(x.astype(wide), y.astype(wide))
    if dtype == np.bool_:
        want = want != 0
    np.testing.assert_array_equal(np.asarray(got.numpy()), want.astype(dtype))


def test_int_matmul_is_one_native_kernel() -> None:
    x, y = Tensor(sample((8, 16), np.int32)), Tensor(sample((16, 4), np.int32))
    jaxpr = fgrad.make_jaxpr(lambda a, b: a @ b + 1)(x, y).jaxpr
    sched = plan(jaxpr).schedule
    assert sched.hosts() == [] and len(sched.kernels()) <= 2
