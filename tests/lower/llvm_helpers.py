"""Shared helpers of the llvm backend tests: schedules, native runs, comparisons."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import fgrad
import fgrad.lower  # noqa: F401  (registers the llvm compiler)
from fgrad import Tensor
from fgrad.core import prims
from fgrad.lower.llvm.runtime import half_native
from fgrad.lower.schedule.partition import Schedule, schedule
from fgrad.transforms.jit_prim import open_jaxpr

HALF = half_native()  # float16 kernels need F16C; elsewhere float16 runs as host steps
needs_half = pytest.mark.skipif(not HALF, reason="this CPU has no F16C")


def sched_of(fn: Callable[..., Any], *args: Any) -> Schedule:
    """The llvm schedule of `fn` traced at `args`."""
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(*args))
    return schedule(jaxpr, HALF)


def llvm(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` jitted with the llvm backend."""
    return fgrad.jit(fn, backend="llvm")(*args)


def assert_native(fn: Callable[..., Any], *args: Any) -> Schedule:
    """The schedule of `fn`, asserting that it has no host steps."""
    s = sched_of(fn, *args)
    assert not s.hosts(), str(s)
    return s


def dot_eqn(fn: Callable[..., Any], *arrays: np.ndarray) -> tuple[Any, Any]:
    """(closed jaxpr, its one dot_general equation) of `fn` traced at `arrays`."""
    closed = fgrad.make_jaxpr(fn)(*[Tensor(a) for a in arrays])
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "dot_general"]
    return closed, eqn


PRODUCT_TOL = {np.float32: 3e-5, np.float64: 1e-12}


def check_product(got: Tensor, want: np.ndarray, k: int, dtype: type) -> None:
    """A product's result against its float64 reference, relative to its largest entry,
    with room growing with the contraction depth k."""
    err = np.abs(got.numpy().astype(np.float64) - want).max() / max(np.abs(want).max(), 1.0)
    assert err < PRODUCT_TOL[dtype] * max(1.0, k / 64), err


def close(got: Any, want: np.ndarray, rtol: float = 1e-6, atol: float = 0.0) -> None:
    """Same dtype and shape, values within tolerance (NaNs in the same places)."""
    got = got.numpy() if isinstance(got, Tensor) else np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                               atol=atol, equal_nan=True)


def w1(x: Tensor) -> Tensor:
    """The W1 elementwise chain."""
    return (x * 1.5 + 0.5).tanh() * x.sigmoid() + (-x * x).exp()


def w1_numpy(x: np.ndarray) -> np.ndarray:
    """W1 in NumPy."""
    return np.tanh(x * 1.5 + 0.5) * (1 / (1 + np.exp(-x))) + np.exp(-x * x)


MOVEMENT_STEPS = ("reshape", "permute", "slice", "flip", "pad", "expand", "math", "sum", "max",
                  "cat")


def random_program(rng: np.random.Generator, steps: tuple[str, ...] = MOVEMENT_STEPS,
                   length: int = 6) -> Callable[[Tensor], Tensor]:
    """A random chain of movement, elementwise and reduction ops on one Tensor (the same
    chain on every backend, so results can be compared with the numpy backend's)."""
    chosen = [str(s) for s in rng.choice(list(steps), length)]

    def program(t: Tensor) -> Tensor:
        for step in chosen:
            t = _apply_step(step, t, np.random.default_rng(len(t.shape) * 7 + t.numel()))
        return t
    return program


def _apply_step(step: str, t: Tensor, rng: np.random.Generator) -> Tensor:
    shape = t.shape
    if step == "reshape" and t.numel() % 2 == 0:
        return t.reshape(2, -1) if len(shape) != 2 else t.reshape(-1)
    if step == "permute" and len(shape) > 1:
        return t.permute(*[int(a) for a in rng.permutation(len(shape))])
    if step == "slice" and shape and shape[0] > 1:
        return t[1::2] if rng.integers(2) else t[::-1][1:]
    if step == "flip" and shape:
        return t.flip(len(shape) - 1)
    if step == "pad" and shape:
        return prims.pad(t, tuple((int(rng.integers(-1, 3)) if d > 1 else 1, 1,
                                   int(rng.integers(0, 2))) for d in shape), 0.5)
    if step == "expand":
        return t.reshape(*shape, 1).expand(*shape, 3)
    if step == "math":  # clipped: chained exps would amplify 1-ulp differences past 1e-5
        return (t.clip(-2, 2) * 1.5).exp() - t
    if step == "sum" and len(shape) > 1:
        return t.sum(int(rng.integers(len(shape))), keepdim=bool(rng.integers(2)))
    if step == "max" and len(shape) > 1:
        return t.max(int(rng.integers(len(shape))))
    if step == "cat" and shape:
        return t.cat(t * 2, dim=len(shape) - 1)
    return t + 1


def ix_value(e: Any, env: dict) -> int:
    """The integer an index expression (`fgrad.lower.kernel.index.Ix`) takes when each loop
    variable has the value `env` gives it: floor division and modulo as Python's."""
    from fgrad.lower.kernel import index as ixa
    total = e.const
    for atom, c in e.terms:
        if isinstance(atom, ixa.Sym):
            v = env[atom]
        else:
            inner = ix_value(atom.arg, env)
            v = (inner // atom.d if isinstance(atom, ixa.Div) else inner % atom.d
                 if isinstance(atom, ixa.Mod) else min(max(inner, 0), atom.hi))
        total += c * v
    return total
