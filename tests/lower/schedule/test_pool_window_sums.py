"""Average pools add their window's slices (`conv_ops.window_sums`), so a window of more
than 16 taps (a ResNet head's `avg_pool2d(7)`, a 3x3x3 pool) is one native kernel, not a
concatenate of one operand per tap run on the host. References: NumPy loops over the
windows, and finite differences of NumPy's result for the gradient.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import fgrad
from fgrad import Tensor

RNG = np.random.default_rng(5)

# (x shape, kernel, stride, padding per axis, count_include_pad)
CASES = [
    ((2, 3, 7, 7), (7, 7), (7, 7), (0, 0), True),
    ((2, 2, 9, 8), (5, 5), (2, 1), (2, 1), False),
    ((1, 2, 4, 5, 6), (3, 3, 3), (1, 2, 1), (1, 0, 1), False),
]


def _reference(x: np.ndarray, kernel: Any, stride: Any, pads: Any, with_pad: bool
               ) -> np.ndarray:
    n = len(kernel)
    grow = ((0, 0),) * (x.ndim - n) + tuple((p, p) for p in pads)
    xp = np.pad(x.astype(np.float64), grow)
    ones = np.pad(np.ones(x.shape[-n:]), tuple((p, p) for p in pads))
    out_shape = tuple((s + 2 * p - k) // st + 1
                      for s, p, k, st in zip(x.shape[-n:], pads, kernel, stride))
    out = np.zeros(x.shape[:-n] + out_shape)
    for pos in itertools.product(*(range(m) for m in out_shape)):
        window = tuple(slice(i * st, i * st + k) for i, st, k in zip(pos, stride, kernel))
        total = xp[(Ellipsis,) + window].sum(axis=tuple(range(-n, 0)))
        count = np.prod(kernel) if with_pad else ones[window].sum()
        out[(Ellipsis,) + pos] = total / count
    return out


@pytest.mark.backends
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}k{c[1]}")
def test_large_average_pools_are_native_and_right(case: Any, jit_backend: str) -> None:
    xs, kernel, stride, pads, with_pad = case
    x = RNG.standard_normal(xs).astype(np.float32)

    def pool(t: Tensor) -> Tensor:
        return t.avg_pool2d(kernel, stride=stride, padding=pads, count_include_pad=with_pad)

    want = _reference(x, kernel, stride, pads, with_pad)
    got = fgrad.jit(pool)(Tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    weights = RNG.standard_normal(want.shape)
    grad = fgrad.jit(fgrad.grad(lambda t: (pool(t) * Tensor(weights.astype(np.float32))).sum()))
    gx = grad(Tensor(x)).numpy()
    # the pool is linear: its gradient is the finite difference of the reference along x
    direction = RNG.standard_normal(xs)
    step = (_reference(x + direction, kernel, stride, pads, with_pad) - want)
    np.testing.assert_allclose((gx * direction).sum(), (step * weights).sum(), rtol=1e-4)
    if jit_backend != "numpy":
        text = fgrad.jit(pool).lower(Tensor(x)).as_text()
        assert " 0 host steps" in text and "concatenate" not in text.split("# kernel IR")[0]
