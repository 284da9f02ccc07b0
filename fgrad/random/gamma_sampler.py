"""The gamma sampler: Marsaglia and Tsang's rejection method (2000), with JAX's draws.

As in JAX, element i of a draw of shape S gets its own key `split(key, prod(S))[i]` and runs
its own rejection loop on it (split the key in 3, redraw the normal until 1 + c x > 0, then one
uniform for the test), and a < 1 is boosted to a + 1 and multiplied by u ** (1 / a). Here the
loops run for every element at once: a `while_loop` over rounds in which the elements still
rejecting advance and the accepted ones stay frozen, so a sample depends only on its own key and
shape parameter, whatever the batch around it (eager, jit and vmap agree). Its reparameterized
derivative with respect to `a` comes from `fgrad.random.gamma_grad`.
"""
from __future__ import annotations

from typing import Any

from fgrad.core.dtypes import DType
from fgrad.core.tensor import Tensor
from fgrad.random import _util as U
from fgrad.transforms.control.while_loop import while_loop
from fgrad.transforms.custom import custom_jvp
from fgrad.random.gamma_grad import gamma_sample_grad, log_gamma_sample_grad

_SQUEEZE = 0.0331


def _normal_until_positive(first: tuple[U.Words, Tensor], c: Tensor, active: Tensor,
                           dtype: DType, work: DType) -> tuple[Tensor, Tensor]:
    """For each active element: draw x ~ N(0, 1), splitting its key each time, until
    v = 1 + c x > 0 (JAX's inner loop); returns (x, v). `first` is the first split's new key
    and the first normal draw (hashed by the caller together with other words)."""
    (k0, k1), x = first
    v = 1.0 + x * c

    def cond(state: tuple) -> Tensor:
        return (active & (state[3] <= 0.0)).any()

    def body(state: tuple) -> tuple:
        k0, k1, x, v = state
        todo = active & (v <= 0.0)
        nxt, sub = U.split_each((k0, k1), 2)
        xn = U.normal_each(sub, dtype).cast(work)
        k0, k1 = U.select_words(todo, nxt, (k0, k1))
        return k0, k1, todo.where(xn, x), todo.where(1.0 + xn * c, v)

    out = while_loop(cond, body, (k0, k1, x, v))
    return out[2], out[3]


def _rejects(d: Tensor, x2: Tensor, v3: Tensor, u: Tensor) -> Tensor:
    """JAX's loop condition: true while the candidate (x^2, v^3, u) is rejected (NaNs stop)."""
    return (u >= 1.0 - _SQUEEZE * (x2 * x2)) & (u.log() >= x2 * 0.5 + d * (1.0 - v3 + v3.log()))


def sample_gamma(key: Tensor, a: Tensor, log_space: bool) -> Tensor:
    """Gamma(a, 1) samples (their logs if `log_space`), one per element of `a`, whose dtype is
    the dtype of the result; float16/bfloat16 draw in their dtype and compute in float32."""
    dtype = a.dtype
    work = U.work_dtype(dtype)
    alpha = a.cast(work)
    boost = alpha >= 1.0
    alpha_b = boost.where(alpha, alpha + 1.0)
    d = alpha_b - 1.0 / 3.0
    c = (1.0 / 3.0) / d.sqrt()
    k, sub = U.split_each(U.element_keys(key, a.shape), 2)
    zero = alpha.isinf().where(0.0, alpha) * 0.0  # NaN where alpha is

    def cond(state: tuple) -> Tensor:
        return state[-1].any()

    def body(state: tuple) -> tuple:
        k0, k1, x2, v3, u, active = state
        nxt, xkey, ukey = U.split_each((k0, k1), 3)
        # JAX: split xkey for the first normal, and draw the test's uniform from ukey
        xnext, xsub, ubits = U.hash_each([(xkey, 0), (xkey, 1), (ukey, 0)])
        x0 = U.normal_each(xsub, dtype).cast(work)
        x, v = _normal_until_positive((xnext, x0), c, active, dtype, work)
        un = U.uniform_from_words(ubits, dtype).cast(work)
        x2n, v3n = x * x, v * v * v
        k0, k1 = U.select_words(active, nxt, (k0, k1))
        x2, v3, u = active.where(x2n, x2), active.where(v3n, v3), active.where(un, u)
        return k0, k1, x2, v3, u, active & _rejects(d, x2, v3, u)

    init = (k[0], k[1], zero, zero + 1.0, zero + 2.0, _rejects(d, zero, zero + 1.0, zero + 2.0))
    v3 = while_loop(cond, body, init)[3]
    if log_space:
        log_u = U.log1p(-U.uniform_each(sub, dtype)).cast(work)  # -exponential, as JAX
        log_boost = (boost | (log_u == 0.0)).where(0.0, log_u * (1.0 / alpha))
        out = d.log() + v3.log() + log_boost
    else:
        u = 1.0 - U.uniform_each(sub, dtype).cast(work)
        out = d * v3 * boost.where(1.0, u ** (1.0 / alpha))
    # JAX gives NaN for most a < 0 and arbitrary numbers for -2/3 < a < 0; here every a < 0
    # (and NaN) gives NaN.
    return (alpha < 0.0).where(float("nan"), out).cast(dtype)


def _gamma_fun(key: Tensor, a: Tensor) -> Tensor:
    return sample_gamma(key, a, log_space=False)


def _loggamma_fun(key: Tensor, a: Tensor) -> Tensor:
    return sample_gamma(key, a, log_space=True)


gamma_p = custom_jvp(_gamma_fun, nondiff_argnums=(0,))
loggamma_p = custom_jvp(_loggamma_fun, nondiff_argnums=(0,))


@gamma_p.defjvp
def _gamma_jvp(key: Tensor, primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    (a,), (a_dot,) = primals, tangents
    out = sample_gamma(key, a, log_space=False)
    return out, a_dot * gamma_sample_grad(a, out)


@loggamma_p.defjvp
def _loggamma_jvp(key: Tensor, primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    (a,), (a_dot,) = primals, tangents
    out = sample_gamma(key, a, log_space=True)
    return out, a_dot * log_gamma_sample_grad(a, out)


__all__ = ["gamma_p", "loggamma_p", "sample_gamma"]
