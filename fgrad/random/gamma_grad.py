"""The reparameterization derivative of a gamma sample with respect to its shape `a`.

A sample x = F^-1(u; a) of Gamma(a, 1) moves with `a` at fixed u by implicit differentiation
of the regularized incomplete gamma function P(a, x) = u:

    dx/da = -(dP/da) / (dP/dx),    dP/dx = x^(a-1) e^-x / Gamma(a).

dP/da comes from the series of P (x <= 1 or x <= a) or the continued fraction of Q = 1 - P
(Cephes' igamc recurrences, otherwise), each differentiated term by term in `a`, as XLA's
`RandomGammaGrad` does. Dividing by the density analytically leaves no exp or lgamma:

    series:     d log(x)/da = -((log x - psi(a + 1)) S + dS/da) / a
    fraction:   d log(x)/da =    (log x - psi(a)) C + dC/da

with S = sum x^n / ((a + 1)...(a + n)) and C the fraction (Q = x^a e^-x C / Gamma(a)). Each
element iterates until its own terms stop changing it (then stays frozen), so the result does
not depend on the other elements. For large a the iterations would run into the hundreds;
above a = 1e3 (float32; 1e4 in float64) the Wilson-Hilferty approximation
x = a (1 - 1/(9a) + z / (3 sqrt a))^3 is differentiated at fixed z instead: its relative error
there (below 1e-5, resp. 3e-7, falling like 1/a^2) is no worse than the iterations' rounding.
"""
from __future__ import annotations

from fgrad.core.dtypes import DType, dtypes
from fgrad.core.tensor import Tensor
from fgrad.random import _util as U
from fgrad.transforms.control.while_loop import while_loop

_MAX_ITERS = 2000


def _scale(dtype: DType) -> tuple[float, float, float, float]:
    """(tolerance, rescale threshold, its inverse, large a) for the iterations in `dtype`.
    Above the large a, Wilson-Hilferty is as accurate as the iterations in that dtype."""
    if dtype == dtypes.float64:
        return 4e-16, 2.0 ** 52, 2.0 ** -52, 1e4
    return 2.5e-7, 2.0 ** 32, 2.0 ** -32, 1e3


def _wilson_hilferty(a: Tensor, x: Tensor) -> Tensor:
    """d x / d a at fixed z under x = a w^3, w = 1 - 1/(9a) + z / (3 sqrt a)."""
    w = (x / a) ** (1.0 / 3.0)
    z = (w - 1.0 + 1.0 / (9.0 * a)) * 3.0 * a.sqrt()
    dw = 1.0 / (9.0 * a * a) - z / (6.0 * a * a.sqrt())
    return w * w * w + 3.0 * a * w * w * dw


def _prepare(a: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
    """a and x detached, broadcast together, in the working dtype of x's dtype."""
    work = U.work_dtype(x.dtype)
    a, x = a.detach().cast(work), x.detach().cast(work)
    shape = U.broadcast_shapes(a.shape, x.shape)
    return U.full(a, shape), U.full(x, shape)


def gamma_sample_grad(a: Tensor, x: Tensor) -> Tensor:
    """dx/da of Gamma(a, 1) samples `x` at fixed CDF value (elementwise; a, x broadcast)."""
    a_w, x_w = _prepare(a, x)
    grad = x_w * _dlog_da(a_w, x_w, x_w.log())
    return (x_w == 0.0).where(0.0, grad).cast(x.dtype)


def log_gamma_sample_grad(a: Tensor, log_x: Tensor) -> Tensor:
    """d log(x)/da of Gamma(a, 1) samples given as their logs (no underflow for small a: when
    x itself underflows, the series part reduces to -(log x - psi(a + 1)) / a)."""
    a_w, log_w = _prepare(a, log_x)
    return _dlog_da(a_w, log_w.exp(), log_w).cast(log_x.dtype)


def _dlog_da(a: Tensor, x: Tensor, log_x: Tensor) -> Tensor:
    """d log(x)/da at fixed CDF value, from a, x and log x (all broadcast, working dtype)."""
    work = x.dtype
    tol, big, biginv, large_a = _scale(work)
    large = a > large_a
    a_it = large.where(1.0, a)  # the iterations see a small a where the approximation is used
    x_it = large.where(1.0, x)
    use_cf = (x_it > 1.0) & (x_it > a_it)
    zero = a_it * 0.0
    one = zero + 1.0

    # Series state: term t, its derivative dt, sums S, dS.  Fraction state (Cephes igamc):
    # y, z, c, p/q at steps k-2, k-1 with derivatives, and the current ratio ans, dans.
    q1 = (x_it + 2.0 - a_it) * x_it
    init = (zero, one, zero, one, zero,                         # n, t, dt, S, dS
            zero - a_it + 1.0, x_it - a_it + 2.0, zero,         # y, z, c
            one, zero, x_it, zero, x_it + 1.0, zero, q1, -x_it,  # pm2, dpm2, qm2, dqm2, ...
            (x_it + 1.0) / q1, (x_it + 1.0) * x_it / (q1 * q1),  # ans, dans
            (x_it <= 0.0) | x_it.isnan() | a_it.isnan() | (a_it <= 0.0))  # done

    def cond(state: tuple) -> Tensor:
        return (state[0].max() < float(_MAX_ITERS)) & ~state[-1].all()

    def body(state: tuple) -> tuple:
        (n, t, dt, s, ds, y, z, c, pm2, dpm2, qm2, dqm2, pm1, dpm1, qm1, dqm1, ans, dans,
         done) = state
        live = ~done
        # series step
        n1 = n + 1.0
        r = x_it / (a_it + n1)
        t1 = t * r
        dt1 = r * (dt - t / (a_it + n1))
        s1, ds1 = s + t1, ds + dt1
        s_conv = ((t1.abs() <= tol * s1.abs()) & (dt1.abs() <= tol * ds1.abs())) | (t1 == 0.0)
        # continued-fraction step (y and z decrease with a: dy = dz = -1)
        c1, y1, z1 = c + 1.0, y + 1.0, z + 2.0
        yc = y1 * c1
        pk = pm1 * z1 - pm2 * yc
        qk = qm1 * z1 - qm2 * yc
        dpk = dpm1 * z1 - pm1 - dpm2 * yc + pm2 * c1
        dqk = dqm1 * z1 - qm1 - dqm2 * yc + qm2 * c1
        ok = qk != 0.0
        safe_q = ok.where(qk, 1.0)
        r_cf = ok.where(pk / safe_q, ans)
        dr_cf = ok.where((dpk - r_cf * dqk) / safe_q, dans)
        cf_conv = ok & ((ans - r_cf).abs() <= tol * r_cf.abs()) & (
            (dans - dr_cf).abs() <= tol * dr_cf.abs())
        rescale = pk.abs() > big
        f = rescale.where(biginv, 1.0).cast(work)
        new = (n1, t1, dt1, s1, ds1, y1, z1, c1,
               pm1 * f, dpm1 * f, qm1 * f, dqm1 * f, pk * f, dpk * f, qk * f, dqk * f,
               r_cf, dr_cf)
        kept = tuple(live.where(v_new, v_old) for v_new, v_old in zip(new, state[:-1]))
        converged = use_cf.where(cf_conv, s_conv)
        return kept + (done | converged,)

    final = while_loop(cond, body, init)
    s, ds, ans, dans = final[3], final[4], final[16], final[17]
    log_x_it = large.where(0.0, log_x)
    series = -((log_x_it - U.digamma(a_it + 1.0)) * s + ds) / a_it
    fraction = (log_x_it - U.digamma(a_it)) * ans + dans
    grad = use_cf.where(fraction, series)
    return large.where(_wilson_hilferty(a, x) / x, grad)


__all__ = ["gamma_sample_grad", "log_gamma_sample_grad"]
