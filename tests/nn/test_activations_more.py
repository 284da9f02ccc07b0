"""jax.nn's newer functions in fgrad.nn (mish, squareplus, sparse_plus, sparse_sigmoid,
identity, tanh, log1mexp, logmeanexp) against NumPy formulas, softmax/log_softmax with
where= against a NumPy masked reference (fully masked slices, broadcast masks, several
axes), standardize's where=/algorithm=, float32, jit and gradients."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
import scipy.special as ss

import fgrad
from fgrad import Tensor, nn

X = np.concatenate([np.linspace(-6, 6, 25), [-50.0, 50.0, 0.0, -0.5, 0.5, 1e-3]])
RNG = np.random.default_rng(5)


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(x, 0.0)


REFS: list[tuple[str, Callable[..., Any], Callable[..., Any], np.ndarray]] = [
    ("mish", nn.mish, lambda x: x * np.tanh(_softplus(x)), X),
    ("squareplus", nn.squareplus, lambda x: (x + np.sqrt(x * x + 4)) / 2, X),
    ("squareplus-b", lambda x: nn.squareplus(x, 0.5), lambda x: (x + np.sqrt(x * x + 0.5)) / 2,
     X),
    ("sparse_plus", nn.sparse_plus,
     lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4)), X),
    ("sparse_sigmoid", nn.sparse_sigmoid, lambda x: np.clip(x + 1, 0, 2) / 2, X),
    ("identity", nn.identity, lambda x: x, X),
    ("tanh", nn.tanh, np.tanh, X),
    ("log1mexp", nn.log1mexp, lambda x: np.log(-np.expm1(-x)), np.abs(X) + 1e-2),
]


@pytest.mark.parametrize("name,fn,ref,x", REFS, ids=[r[0] for r in REFS])
def test_values_and_gradients(name: str, fn: Any, ref: Any, x: np.ndarray) -> None:
    np.testing.assert_allclose(fn(x).numpy(), ref(x), rtol=1e-12, atol=1e-12)
    small = fn(x.astype(np.float32))
    assert small.dtype == fgrad.dtypes.float32
    np.testing.assert_allclose(small.numpy(), ref(x.astype(np.float32).astype(np.float64)),
                               rtol=2e-6, atol=2e-6)
    smooth = x[np.abs(np.abs(x) - 1) > 1e-3] if name.startswith("sparse") else x
    grad = fgrad.grad(lambda t: fn(t).sum())(Tensor(smooth)).numpy()
    fd = (ref(smooth + 1e-6) - ref(smooth - 1e-6)) / 2e-6
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)


def test_dtypes() -> None:
    assert nn.tanh(np.array([1, 2])).dtype == fgrad.dtypes.float32
    assert nn.identity(np.array([1, 2], np.int32)).dtype == fgrad.dtypes.int32


def _masked_softmax(x: np.ndarray, mask: np.ndarray, axis: Any) -> tuple[np.ndarray,
                                                                         np.ndarray]:
    """(softmax, log_softmax) over the unmasked entries: 0 / -inf where masked, and for
    a slice with no unmasked entry."""
    m = np.broadcast_to(mask, x.shape)
    hidden = np.where(m, x, -np.inf)
    peak = np.max(hidden, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    e = np.where(m, np.exp(hidden - peak), 0.0)
    total = e.sum(axis=axis, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        soft = np.where(m, e / total, 0.0)
        log = np.where(m, hidden - peak - np.log(total), -np.inf)
    return soft, log


A = RNG.normal(size=(3, 4, 5)) * 3
MASK = RNG.uniform(size=A.shape) > 0.4
MASK[0, 0, :] = False   # a fully masked slice along the last axis
MASKS = [("full", MASK), ("row-broadcast", RNG.uniform(size=(4, 1)) > 0.3),
         ("all-true", np.ones((5,), bool)), ("ints", MASK.astype(np.int32))]


@pytest.mark.parametrize("axis", [-1, 0, (0, 2)], ids=str)
@pytest.mark.parametrize("label,mask", MASKS, ids=[m[0] for m in MASKS])
def test_softmax_where(axis: Any, label: str, mask: np.ndarray) -> None:
    soft, log = _masked_softmax(A, mask.astype(bool), axis)
    np.testing.assert_allclose(nn.softmax(A, axis=axis, where=mask).numpy(), soft,
                               rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(nn.log_softmax(A, axis=axis, where=mask).numpy(), log,
                               rtol=1e-12)
    if label == "all-true":   # an all-True mask is no mask
        np.testing.assert_allclose(nn.softmax(A, axis=axis, where=mask).numpy(),
                                   ss.softmax(A, axis=axis), rtol=1e-12)
    small = nn.softmax(A.astype(np.float32), axis=axis, where=mask)
    assert small.dtype == fgrad.dtypes.float32


def test_softmax_where_gradients_and_jit() -> None:
    w = RNG.normal(size=A.shape)
    m = np.broadcast_to(MASK, A.shape)

    def ref_loss(x: np.ndarray) -> float:
        soft, log = _masked_softmax(x, MASK, -1)
        return float(np.sum(soft * w) + np.sum(np.where(m, log, 0.0) * w))

    def loss(t: Any) -> Any:
        soft = nn.softmax(t, where=MASK)
        log = nn.log_softmax(t, where=MASK)
        return (soft * Tensor(w)).sum() + (Tensor(m).where(log, 0.0) * Tensor(w)).sum()
    grad = fgrad.grad(loss)(Tensor(A)).numpy()
    fd = np.zeros_like(A)
    for idx in np.ndindex(A.shape):
        hi, lo = A.copy(), A.copy()
        hi[idx] += 1e-6
        lo[idx] -= 1e-6
        fd[idx] = (ref_loss(hi) - ref_loss(lo)) / 2e-6
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)
    assert np.all(grad[~m] == 0) and np.isfinite(grad).all()
    jitted = fgrad.jit(lambda t, k: nn.softmax(t, axis=1, where=k))
    np.testing.assert_allclose(jitted(A, MASK).numpy(), _masked_softmax(A, MASK, 1)[0],
                               rtol=1e-12, atol=1e-15)


def test_softmax_without_where_is_unchanged() -> None:
    np.testing.assert_allclose(nn.softmax(A, axis=(0, 1)).numpy(), ss.softmax(A, axis=(0, 1)),
                               rtol=1e-12)
    np.testing.assert_allclose(nn.log_softmax(A).numpy(), ss.log_softmax(A, axis=-1),
                               rtol=1e-12)


@pytest.mark.parametrize("axis,keepdims", [(None, False), (-1, False), ((0, 1), True)])
def test_logmeanexp(axis: Any, keepdims: bool) -> None:
    want = ss.logsumexp(A, axis=axis, keepdims=keepdims) - np.log(
        np.prod([A.shape[a] for a in ((0, 1, 2) if axis is None else np.atleast_1d(axis))]))
    np.testing.assert_allclose(nn.logmeanexp(A, axis=axis, keepdims=keepdims).numpy(), want,
                               rtol=1e-12)
    masked = np.where(MASK, A, -np.inf)
    count = np.sum(MASK, axis=axis, keepdims=keepdims)
    with np.errstate(divide="ignore", invalid="ignore"):
        want_m = ss.logsumexp(masked, axis=axis, keepdims=keepdims) - np.log(count)
    got = nn.logmeanexp(A, axis=axis, where=MASK, keepdims=keepdims).numpy()
    np.testing.assert_allclose(got[np.isfinite(want_m)], want_m[np.isfinite(want_m)],
                               rtol=1e-12)
    assert np.isnan(got[~np.isfinite(want_m)]).all()   # an empty slice: nan, as in JAX


@pytest.mark.parametrize("algorithm", ["fast", "stable"])
def test_standardize(algorithm: str) -> None:
    x = RNG.normal(size=(4, 6)) * 3 + 1
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(nn.standardize(x, algorithm=algorithm).numpy(),
                               (x - mu) / np.sqrt(var + 1e-5), rtol=1e-10)
    mask = RNG.uniform(size=x.shape) > 0.3
    mask[:, 0] = True
    got = nn.standardize(x, axis=-1, where=mask, algorithm=algorithm).numpy()
    for r in range(4):
        v = x[r][mask[r]]
        np.testing.assert_allclose(got[r][mask[r]], (v - v.mean()) / np.sqrt(v.var() + 1e-5),
                                   rtol=1e-10)
    np.testing.assert_allclose(nn.standardize(x, mean=0.5, variance=2.0, epsilon=0.1).numpy(),
                               (x - 0.5) / np.sqrt(2.1), rtol=1e-14)
    constant = nn.standardize(np.full((2, 3), 1e4, np.float32)).numpy()   # var clipped at 0
    assert np.all(constant == 0)
    with pytest.raises(ValueError, match="algorithm"):
        nn.standardize(x, algorithm="exact")


def test_exported() -> None:
    import fgrad.nn.functions as functions
    for name in ("mish", "squareplus", "sparse_plus", "sparse_sigmoid", "identity", "tanh",
                 "log1mexp", "logmeanexp", "softmax", "log_softmax", "standardize"):
        assert name in functions.__all__ and name in nn.__all__, name
        assert getattr(nn, name) is getattr(functions, name)
