"""jit and vmap of a representative subset of fgrad.numpy / fgrad.scipy / fgrad.nn agree with
eager evaluation on every backend (numpy, llvm, opencl); fnp.asarray passes tracers through;
value-dependent shapes need size= under jit."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
import fgrad.scipy as fsp
from fgrad import Tensor

pytestmark = pytest.mark.backends
RNG = np.random.default_rng(7)
X = RNG.normal(size=(3, 4, 5)).astype(np.float32)
P = RNG.uniform(0.05, 0.95, size=(3, 4, 5)).astype(np.float32)

SUBSET: dict[str, Callable[[Tensor], Any]] = {
    "log1p-expm1": lambda x: fnp.log1p(fnp.abs(x)) + fnp.expm1(x),
    "logaddexp": lambda x: fnp.logaddexp(x, fnp.flip(x, -1)),
    "hypot-arctan2": lambda x: fnp.hypot(x, 2.0) + fnp.arctan2(x, fnp.roll(x, 1, -1)),
    "cbrt-sinc-log10": lambda x: fnp.cbrt(x) + fnp.sinc(x) + fnp.log10(fnp.abs(x) + 1),
    "mod-floor_divide": lambda x: fnp.mod(x * 3, 1.5) + fnp.floor_divide(x * 3, 1.5),
    "var-std-ddof": lambda x: fnp.var(x, axis=-1, ddof=1) + fnp.std(x, axis=(0, -1))[..., None],
    "median-quantile": lambda x: fnp.median(x, axis=-1).sum() + fnp.quantile(x, 0.25, axis=-2),
    "cumsum-argmax": lambda x: fnp.cumsum(x, axis=-2).sum(-1) + fnp.argmax(x, axis=-1),
    "nanmean-ptp": lambda x: fnp.nanmean(fnp.where(x > 1, fnp.nan, x), -1) + fnp.ptp(x, -1),
    "transpose-swapaxes": lambda x: fnp.transpose(x) + fnp.swapaxes(x, 0, -1),
    "split-repeat-tile": lambda x: fnp.concatenate(fnp.array_split(x, 2, -1), -1)
    + fnp.repeat(x, 2, -1)[..., ::2] + fnp.tile(x, (1, 2))[..., : x.shape[-1]]
    + fnp.sum(fnp.split(x[:, :4], [1, 3], -1)[1], -1, keepdims=True),
    "pad-modes": lambda x: fnp.pad(x, ((0, 0), (1, 1)), "reflect")[:, 1:-1]
    + fnp.pad(x, 1, "wrap")[1:-1, 1:-1] + fnp.pad(x, ((0, 0), (2, 0)), "edge")[:, 2:],
    "take-take_along_axis": lambda x: fnp.take(x, np.array([0, -1]), axis=-1).sum(-1)
    + fnp.take_along_axis(x, fnp.argsort(x, -1), -1)[..., 0],
    "einsum-tensordot-kron": lambda x: fnp.einsum("ij,kj->ik", x, x).sum(-1)
    + fnp.tensordot(x, x, ((0,), (0,))).sum() + fnp.kron(x, fnp.ones((1, 2))).sum(-1),
    "sort-searchsorted": lambda x: fnp.sort(x, axis=0)[0] + fnp.searchsorted(
        fnp.sort(x[0]), x[1]),
    "diag-trace-tri": lambda x: fnp.trace(x[:, :4]) + fnp.diagonal(fnp.triu(x), 1).sum()
    + fnp.diag(x[0]).sum(0),
    "linalg-norm-solve": lambda x: fnp.linalg.norm(x, axis=-1)
    + fnp.linalg.solve(x[:, :4] @ x[:, :4].T + 4 * fnp.eye(4), x[:, 0]).sum(),
    "special": lambda x: fsp.special.gammaln(fnp.abs(x) + 0.5) + fsp.special.digamma(
        fnp.abs(x) + 0.5) + fsp.special.erfinv(fnp.tanh(x)) + fsp.special.log_ndtr(x * 4),
    "logsumexp-b": lambda x: fsp.special.logsumexp(x, axis=-1, b=fnp.arange(1.0, 6.0)),
    "stats": lambda x: fsp.stats.norm.logcdf(x) + fsp.stats.t.logpdf(x, 3.0)
    + fsp.stats.norm.ppf(fnp.abs(fnp.tanh(x)) * 0.9 + 0.05),
    "nn": lambda x: fgrad.nn.gelu(x, approximate=False) + fgrad.nn.softplus(x * 30)
    + fgrad.nn.log_softmax(x) + fgrad.nn.standardize(x)
    + fnp.sum(fgrad.nn.one_hot(fnp.argmax(x, -1), 5), -1, keepdims=True),
    "unique-nonzero-size": lambda x: fnp.unique(fnp.round(x), size=6).sum()
    + fnp.nonzero(x > 0, size=7)[1].sum(),
}


def _close(a: Any, b: Any, tol: float = 2e-5) -> None:
    np.testing.assert_allclose(np.asarray(a.numpy(), np.float64),
                               np.asarray(b.numpy(), np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", list(SUBSET))
def test_jit_and_vmap_agree_with_eager(name: str, jit_backend: str) -> None:
    fn = SUBSET[name]
    per_example = [fn(Tensor(X[i])) for i in range(X.shape[0])]
    jitted = fgrad.jit(fn)(Tensor(X[0]))
    _close(jitted, per_example[0])
    batched = fgrad.jit(fgrad.vmap(fn))(Tensor(X))
    for i, want in enumerate(per_example):
        _close(batched[i], want)


def test_grad_under_jit_matches_eager_grad(jit_backend: str) -> None:
    def loss(x: Tensor) -> Tensor:
        return (fsp.special.logsumexp(x, axis=-1) + fnp.var(x, -1) + fsp.special.gammaln(
            fnp.abs(x) + 1).sum(-1) + fnp.linalg.norm(x, axis=-1)).sum()
    eager = fgrad.grad(loss)(Tensor(X))
    jitted = fgrad.jit(fgrad.grad(loss))(Tensor(X))
    _close(jitted, eager, 1e-4)


def test_asarray_passes_tracers_through(jit_backend: str) -> None:
    seen: list[Any] = []

    def f(x: Tensor) -> Tensor:
        y = fnp.asarray(x)
        seen.append(y is x)
        return fnp.array(y, dtype=fnp.float64).sum() + fnp.asarray([1.0, 2.0]).sum()
    out = fgrad.jit(f)(Tensor(P))
    assert seen == [True]
    np.testing.assert_allclose(out.numpy(), P.astype(np.float64).sum() + 3.0, rtol=1e-6)
    assert fgrad.vmap(lambda r: fnp.stack([fnp.asarray(r), r]).sum())(Tensor(P)).shape == (3,)


def test_value_dependent_shapes_need_size(jit_backend: str) -> None:
    with pytest.raises(TypeError, match="pass size=N"):
        fgrad.jit(lambda x: fnp.unique(x))(Tensor(P))
    with pytest.raises(TypeError, match="pass size=N"):
        fgrad.jit(lambda x: fnp.nonzero(x > 0.5)[0])(Tensor(P))
    x = np.array([3, 0, 1, 0, 2, 3], np.int32)
    got = fgrad.jit(lambda t: fnp.nonzero(t, size=5, fill_value=-1)[0])(Tensor(x))
    np.testing.assert_array_equal(got.numpy(), [0, 2, 4, 5, -1])
    got = fgrad.jit(lambda t: fnp.unique(t, size=5, fill_value=9))(Tensor(x))
    np.testing.assert_array_equal(got.numpy(), [0, 1, 2, 3, 9])
