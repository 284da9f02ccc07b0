"""The index simplifier's folds of `k*(X % n) + k*n*B` (kernel/index.py `_fold_pair`): exact
on every loop iteration, checked by brute force, and a reshape of contiguous data back to
its flat offset whatever the shapes (a full sum of a 4-d array read through a
div/mod chain ran 8x slower than the same sum of a 2-d one)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from llvm_helpers import ix_value

import fgrad
from fgrad import Tensor
from fgrad.lower.kernel import index as ixa


def _atoms(e: ixa.Ix) -> int:
    return sum(1 + (_atoms(a.arg) if not isinstance(a, ixa.Sym) else 0) for a, _ in e.terms)


RESHAPES = [((64, 16384), (32, 32, 32, 32)), ((6, 20), (2, 3, 4, 5)), ((4, 30), (5, 4, 6)),
            ((12, 10), (3, 8, 5)), ((2, 60), (2, 3, 2, 10)), ((120,), (4, 5, 6))]


@pytest.mark.parametrize("outer,inner", RESHAPES)
def test_a_reshape_of_contiguous_data_reads_its_flat_offset(outer, inner) -> None:
    """Through the `FlatIndex` that delinearize returns, exactly; re-linearized from its
    plain axes, exact on every iteration (and affine again for the W4 step's sum)."""
    syms = tuple(ixa.Sym(f"i{a}", n) for a, n in enumerate(outer))
    flat = ixa.linearize(tuple(ixa.ix_sym(s) for s in syms), outer)
    axes = ixa.delinearize(flat, inner)
    assert ixa.linearize(axes, inner) == flat
    plain = ixa.linearize(tuple(axes), inner)
    if math.prod(outer) <= 4096:
        for values in itertools.product(*(range(n) for n in outer)):
            env = dict(zip(syms, values))
            assert ix_value(plain, env) == ix_value(flat, env), (str(plain), values)
    if inner == (32, 32, 32, 32):
        assert plain == flat, str(plain)


def test_nested_folds_are_exact_on_every_iteration() -> None:
    """k*(X % n) + k*n*B for B = Y % m and Y // e, with Y - X // n a sum of loop
    variables or not, X of either sign: the simplified sum equals the arithmetic."""
    rng = np.random.default_rng(5)
    i, j, t = ixa.Sym("i", 7), ixa.Sym("j", 9), ixa.Sym("t", 4)
    env_names = (i, j, t)
    for _ in range(400):
        ci, cj, c0 = (int(v) for v in rng.integers(-9, 10, 3))
        n, m, e, k = (int(v) for v in rng.integers(1, 7, 4))
        x = ixa.add(ixa.scale(ixa.ix_sym(i), ci), ixa.scale(ixa.ix_sym(j), cj),
                    ixa.ix_const(c0))
        y = ixa.add(ixa.floordiv(x, n), ixa.scale(ixa.ix_sym(t), int(rng.integers(-3, 4))))
        for b in (ixa.mod(y, m), ixa.floordiv(y, e), ixa.mod(ixa.ix_sym(j), m)):
            total = ixa.add(ixa.scale(ixa.mod(x, n), k), ixa.scale(b, k * n))
            lo, hi = ixa.ix_range(total)
            for values in itertools.product(range(7), range(9), range(4)):
                env = dict(zip(env_names, values))
                xv = ci * values[0] + cj * values[1] + c0
                want = k * (xv % n) + k * n * ix_value(b, env)
                got = ix_value(total, env)
                assert got == want and lo <= got <= hi, (str(total), values)


def test_folds_leave_fewer_atoms() -> None:
    i, j = ixa.Sym("i", 64), ixa.Sym("j", 16384)
    flat = ixa.add(ixa.scale(ixa.ix_sym(i), 16384), ixa.ix_sym(j))
    lo = ixa.mod(flat, 32)
    mid = ixa.mod(ixa.floordiv(flat, 32), 32)
    assert ixa.add(lo, ixa.scale(mid, 32)) == ixa.mod(ixa.ix_sym(j), 1024)
    unrelated = ixa.add(ixa.mod(ixa.ix_sym(i), 4),
                        ixa.scale(ixa.mod(ixa.floordiv(ixa.ix_sym(j), 3), 8), 4))
    assert len(unrelated.terms) == 2 and _atoms(unrelated) == 5   # Y - X // n holds a
    # division: left alone


def test_a_full_sum_of_a_4d_array_loads_contiguously() -> None:
    x = np.random.default_rng(0).standard_normal((8, 4, 16, 32)).astype(np.float32)
    f = fgrad.jit(lambda a: a.sum())
    text = f.lower(Tensor(x)).as_text()
    loads = [line for line in text.splitlines() if "= load a[" in line]
    assert loads and all("//" not in line and "%" not in line for line in loads), loads
    got = float(np.asarray(f(Tensor(x))))
    assert math.isclose(got, float(x.astype(np.float64).sum()), rel_tol=1e-5, abs_tol=1e-3)
