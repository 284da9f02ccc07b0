"""fgrad.scipy.optimize: `minimize` with BFGS, as jax.scipy.optimize (jittable, vmappable).

BFGS keeps a dense inverse-Hessian estimate H (so it suits problems of up to a few thousand
variables) and steps along -H g to a point that satisfies the strong Wolfe conditions
(sufficient decrease c1 = 1e-4, curvature c2 = 0.9; Nocedal & Wright, algorithms 3.5 and
3.6: a bracketing phase that doubles the step, then a zoom by safeguarded cubic
interpolation). Both loops are `fgrad.lax.while_loop`s, so the whole minimization traces
into one program under `jit` and batches under `vmap`. The first trial step of each line
search is min(1, 2.02 (f_k - f_k-1) / (g . p)) (1.01 / |g| on the first iteration), the
usual guess from the last decrease.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple

import numpy as np

from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor
from fgrad.numpy._base import asarray, float_of
from fgrad.transforms import value_and_grad
from fgrad.transforms.control.while_loop import while_loop

__all__ = ["OptimizeResults", "minimize"]

C1, C2 = 1e-4, 0.9            # the strong Wolfe constants
STATUS_CONVERGED, STATUS_MAXITER, STATUS_LINE_SEARCH_FAILED = 0, 1, 3


class OptimizeResults(NamedTuple):
    """The result of `minimize` (jax.scipy.optimize's fields).

    x: the solution; success: converged without a line-search failure; status: 0 converged,
    1 the iteration limit was reached, 3 a line search found no point satisfying the Wolfe
    conditions; fun, jac: f and its gradient at x; hess_inv: the inverse-Hessian estimate;
    nfev, njev: evaluations of f and of its gradient; nit: iterations."""

    x: Tensor
    success: Tensor
    status: Tensor
    fun: Tensor
    jac: Tensor
    hess_inv: Tensor
    nfev: Tensor
    njev: Tensor
    nit: Tensor


def minimize(fun: Callable[..., Any], x0: Any, args: tuple = (), *, method: str,
             tol: float | None = None, options: Mapping[str, Any] | None = None
             ) -> OptimizeResults:
    """Minimize the scalar `fun(x, *args)` over a 1-d `x` from `x0` (jax.scipy.optimize's
    signature). method: "BFGS". tol: the gradient tolerance (options' "gtol" wins; default
    1e-5). options: maxiter (default 200 * x0.size), gtol, norm (of the gradient for the
    convergence test; default inf), line_search_maxiter (default 30)."""
    if not isinstance(args, tuple):
        raise TypeError(f"minimize: args must be a tuple of extra arguments for fun, got "
                        f"{type(args).__name__}; wrap a single one as (value,)")
    if not isinstance(method, str) or method.lower() != "bfgs":
        raise ValueError(f"minimize: method {method!r} is not supported; use method='BFGS'")
    opts = dict(options or {})
    unknown = set(opts) - {"maxiter", "gtol", "norm", "line_search_maxiter"}
    if unknown:
        raise ValueError(f"minimize: unknown options {sorted(unknown)}; BFGS takes maxiter, "
                         f"gtol, norm and line_search_maxiter")
    x = float_of(asarray(x0))
    if x.ndim != 1:
        raise ValueError(f"minimize: x0 must be 1-d (shape (n,)), got shape {x.shape}; "
                         f"ravel it (fgrad.flatten_util.ravel_pytree for pytrees)")
    gtol = opts.get("gtol", 1e-5 if tol is None else tol)
    return _bfgs(lambda v: fun(v, *args), x, int(opts.get("maxiter", 200 * x.shape[0])),
                 float(gtol), opts.get("norm", np.inf),
                 int(opts.get("line_search_maxiter", 30)))


def _norm(g: Tensor, order: Any) -> Tensor:
    if order == np.inf:
        return g.abs().max()
    if order == -np.inf:
        return g.abs().min()
    return (g.abs() ** float(order)).sum() ** (1.0 / float(order))


def _evaluator(fun: Callable[[Tensor], Any], dtype: Any
               ) -> Callable[[Tensor], tuple[Tensor, Tensor]]:
    def scalar_fun(v: Tensor) -> Tensor:
        out = asarray(fun(v))
        if out.shape != ():
            raise TypeError(f"minimize: fun must return a scalar, got shape {out.shape}")
        return out.cast(dtype)
    grad_fn = value_and_grad(scalar_fun)

    def evaluate(v: Tensor) -> tuple[Tensor, Tensor]:
        f, g = grad_fn(v)
        return f, g.cast(dtype)
    return evaluate


def _bfgs(fun: Callable[[Tensor], Any], x0: Tensor, maxiter: int, gtol: float, order: Any,
          ls_maxiter: int) -> OptimizeResults:
    evaluate = _evaluator(fun, x0.dtype)
    f0, g0 = evaluate(x0)
    n, dt = x0.shape[0], x0.dtype
    eye = Tensor.eye(n, dtype=dt)
    zero_i = Tensor(0, dtype=dtypes.int32)
    init = (zero_i, x0, f0, g0, eye, f0 + _norm(g0, 2) / 2, Tensor(1, dtype=dtypes.int32),
            _norm(g0, order) < gtol, Tensor(False))

    def cond(state: tuple) -> Tensor:
        k, *_, converged, failed = state
        return (~converged) & (~failed) & (k < maxiter)

    def body(state: tuple) -> tuple:
        k, x, f, g, h, f_old, nfev, _, _ = state
        p = -(h @ g)
        step, f_new, g_new, evals, ok = _line_search(evaluate, x, f, g, p, f_old, ls_maxiter)
        s = step * p
        y = g_new - g
        rho = 1.0 / (y * s).sum()
        w = eye - rho * s[:, None] * y[None, :]
        h_new = w @ h @ w.T + rho * s[:, None] * s[None, :]
        h_new = rho.isfinite().where(h_new, h)
        return (k + 1, ok.where(x + s, x), ok.where(f_new, f), ok.where(g_new, g),
                ok.where(h_new, h), ok.where(f, f_old), nfev + evals,
                ok & (_norm(g_new, order) < gtol), ~ok)

    k, x, f, g, h, _, nfev, converged, failed = while_loop(cond, body, init)
    status = failed.where(STATUS_LINE_SEARCH_FAILED,
                          converged.where(STATUS_CONVERGED, STATUS_MAXITER)).cast(dtypes.int32)
    return OptimizeResults(x, converged & ~failed, status, f, g, h, nfev, nfev, k)


def _cubic_step(lo: tuple, hi: tuple) -> Tensor:
    """The minimizer of the cubic through (a, phi, dphi) at lo and hi, or their midpoint
    when that is not finite or lies within a tenth of the interval of either end."""
    a_lo, phi_lo, d_lo = lo
    a_hi, phi_hi, d_hi = hi
    width = a_hi - a_lo
    d1 = d_lo + d_hi - 3 * (phi_lo - phi_hi) / (a_lo - a_hi)
    d2 = (d1 * d1 - d_lo * d_hi).maximum(0).sqrt() * width.sign()
    a = a_hi - width * (d_hi + d2 - d1) / (d_hi - d_lo + 2 * d2)
    left, right = a_lo.minimum(a_hi), a_lo.maximum(a_hi)
    margin = 0.1 * width.abs()
    safe = a.isfinite() & (a > left + margin) & (a < right - margin)
    return safe.where(a, (a_lo + a_hi) / 2)


def _line_search(evaluate: Callable[[Tensor], tuple[Tensor, Tensor]], x: Tensor, f0: Tensor,
                 g0: Tensor, p: Tensor, f_old: Tensor, maxiter: int
                 ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(step, f, g at x + step p, evaluations, found) for a step meeting the strong Wolfe
    conditions; `found` is False when none was found in `maxiter` evaluations or p is not a
    descent direction."""
    d0 = (g0 * p).sum()
    guess = 2.02 * (f0 - f_old) / d0
    first = (guess.isfinite() & (guess > 0)).where(guess.minimum(1.0), 1.0).cast(x.dtype)
    zero = first * 0
    phase0 = (d0 < 0).where(0, 3).cast(dtypes.int32)   # 0 bracket, 1 zoom, 2 done, 3 failed
    # prev (bracketing) and lo / hi (zooming) are (step, phi, dphi) triples
    init = (Tensor(0, dtype=dtypes.int32), phase0, first, (zero, f0, d0), (zero, f0, d0),
            (zero, f0, d0), (zero, f0, g0))

    def cond(state: tuple) -> Tensor:
        i, phase = state[0], state[1]
        return (phase < 2) & (i < maxiter)

    def body(state: tuple) -> tuple:
        i, phase, trial, prev, lo, hi, best = state
        zooming = phase == 1
        a = zooming.where(_cubic_step(lo, hi), trial)
        phi, g = evaluate(x + a * p)
        d = (g * p).sum()
        here = (a, phi, d)
        no_decrease = (phi > f0 + C1 * a * d0) | (zooming.where(phi >= lo[1],
                                                                (i > 0) & (phi >= prev[1])))
        curved = d.abs() <= -C2 * d0
        done = (~no_decrease) & curved
        # bracketing: [prev, here] holds a Wolfe point when here fails to decrease, or
        # [here, prev] when the slope turned up; otherwise double the step
        to_zoom = (~zooming) & (~done) & (no_decrease | (d >= 0))
        flip = (~no_decrease) & (d >= 0)
        new_lo = _pick(zooming, _pick(no_decrease, lo, _pick(done, lo, here)),
                       _pick(flip, here, prev))
        new_hi = _pick(zooming, _pick(no_decrease, here,
                                      _pick(d * (hi[0] - lo[0]) >= 0, lo, hi)),
                       _pick(flip, prev, here))
        phase_new = done.where(2, (zooming | to_zoom).where(1, 0)).cast(dtypes.int32)
        new_best = _pick(done, (a, phi, g), best)
        return (i + 1, phase_new, 2 * a, _pick(zooming, prev, here), new_lo, new_hi,
                new_best)

    i, phase, _, _, _, _, best = while_loop(cond, body, init)
    return best[0], best[1], best[2], i, phase == 2


def _pick(flag: Tensor, a: tuple, b: tuple) -> tuple:
    """`a` where `flag`, else `b`, entry by entry."""
    return tuple(flag.where(u, v) for u, v in zip(a, b, strict=True))
