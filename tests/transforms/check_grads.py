"""`check_grads`: numerical checks of forward and reverse mode (as in autograd and JAX).

`check_grads(f, args, order=2, modes=("fwd", "rev"))` converts the float leaves of `args`
(a tuple of pytrees) to float64 and checks, along random directions:
- fwd: `fgrad.jvp` against central finite differences of `f` (run eagerly in float64);
- rev: `<u, df(v)>` (finite differences) against `<vjp(u), v>`, and, when fwd is checked too,
  `<u, jvp(v)>` against `<vjp(u), v>` to near machine precision;
- order > 1: the same checks applied to the jvp and vjp functions themselves, so second
  derivatives (jvp of jvp, jvp/vjp of vjp) are checked as well.
Integer leaves are held fixed (their tangents are zero).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

import fgrad
from fgrad import Tensor
from fgrad.core import tree_util


def _is_float(x: Any) -> bool:
    return isinstance(x, Tensor) and x.dtype.is_float


def to_float64(tree: Any) -> Any:
    """Every leaf as a Tensor; float leaves (and Python floats) become float64."""
    def conv(x: Any) -> Tensor:
        arr = np.asarray(x.numpy() if isinstance(x, Tensor) else x)
        return Tensor(arr.astype(np.float64)) if arr.dtype.kind == "f" else Tensor(arr)
    return tree_util.tree_map(conv, tree)


def random_like(tree: Any, rng: np.random.Generator) -> Any:
    """Random normal float leaves, zeros (of the leaf's dtype) elsewhere."""
    def rand(x: Tensor) -> Tensor:
        if _is_float(x):
            return Tensor(rng.normal(size=x.shape).astype(x.dtype.np))
        return Tensor(np.zeros(x.shape, x.dtype.np))
    return tree_util.tree_map(rand, tree)


def axpy(a: float, x: Any, y: Any) -> Any:
    """`a * x + y` on the float leaves; integer leaves of `y` are kept."""
    return tree_util.tree_map(lambda xi, yi: Tensor(a * xi.numpy() + yi.numpy())
                              if _is_float(yi) else yi, x, y)


def vdot(x: Any, y: Any) -> float:
    """Sum of elementwise products over all float leaves."""
    total = 0.0
    for a, b in zip(tree_util.tree_leaves(x), tree_util.tree_leaves(y), strict=True):
        if _is_float(b):
            total += float(np.sum(a.numpy().astype(np.float64) * b.numpy()))
    return total


def numerical_jvp(f: Callable[..., Any], args: tuple, tangents: tuple, eps: float) -> Any:
    """Central difference (f(args + eps t) - f(args - eps t)) / 2 eps, leafwise."""
    plus = f(*axpy(eps, tangents, args))
    minus = f(*axpy(-eps, tangents, args))
    return tree_util.tree_map(lambda p, m: Tensor((p.numpy() - m.numpy()) / (2 * eps))
                              if _is_float(p) else Tensor(np.zeros(p.shape)), plus, minus)


def _assert_trees_close(got: Any, want: Any, rtol: float, atol: float, what: str) -> None:
    g_leaves, g_tree = tree_util.tree_flatten(got)
    w_leaves, w_tree = tree_util.tree_flatten(want)
    assert g_tree == w_tree, f"{what}: structure {g_tree} != {w_tree}"
    for i, (g, w) in enumerate(zip(g_leaves, w_leaves, strict=True)):
        np.testing.assert_allclose(np.asarray(g.numpy(), np.float64), w.numpy(), rtol=rtol,
                                   atol=atol, err_msg=f"{what}, output leaf {i}")


def check_jvp(f: Callable[..., Any], args: tuple, rng: np.random.Generator, eps: float,
              rtol: float, atol: float) -> None:
    """fgrad.jvp(f) against finite differences along a random direction."""
    tangents = random_like(args, rng)
    _, out_dot = fgrad.jvp(f, args, tangents)
    expected = numerical_jvp(f, args, tangents, eps)
    _assert_trees_close(out_dot, expected, rtol, atol, "jvp vs finite differences")


def check_vjp(f: Callable[..., Any], args: tuple, rng: np.random.Generator, eps: float,
              rtol: float, atol: float, with_jvp: bool) -> None:
    """<u, J v> (finite differences, and jvp) against <vjp(u), v>."""
    out, vjp_fn = fgrad.vjp(f, *args)
    u = random_like(out, rng)
    v = random_like(args, rng)
    ct = vjp_fn(u)
    assert len(ct) == len(args), "vjp_fn must return one cotangent per argument"
    rev = vdot(ct, v)
    fd = vdot(u, numerical_jvp(f, args, v, eps))
    np.testing.assert_allclose(rev, fd, rtol=rtol, atol=atol,
                               err_msg="<vjp(u), v> vs <u, finite-difference J v>")
    if with_jvp:
        fwd = vdot(u, fgrad.jvp(f, args, v)[1])
        np.testing.assert_allclose(rev, fwd, rtol=1e-9, atol=1e-9,
                                   err_msg="<vjp(u), v> vs <u, jvp(v)>")


def check_grads(f: Callable[..., Any], args: Sequence[Any], order: int = 2,
                modes: Sequence[str] = ("fwd", "rev"), eps: float = 1e-6,
                rtol: float = 1e-5, atol: float = 1e-5, seed: int = 0) -> None:
    """Check f's derivatives numerically up to `order` in the given modes (see module doc)."""
    unknown = set(modes) - {"fwd", "rev"}
    if unknown:
        raise ValueError(f"check_grads: unknown modes {sorted(unknown)}; use 'fwd'/'rev'")
    args = tuple(to_float64(tuple(args)))
    rng = np.random.default_rng(seed)
    n = len(args)
    if "fwd" in modes:
        check_jvp(f, args, rng, eps, rtol, atol)
        if order > 1:
            tangents = random_like(args, rng)

            def f_jvp(*a_and_t: Any) -> Any:
                return fgrad.jvp(f, a_and_t[:n], a_and_t[n:])[1]
            check_grads(f_jvp, args + tuple(tangents), order - 1, modes, eps, rtol, atol,
                        seed + 1)
    if "rev" in modes:
        check_vjp(f, args, rng, eps, rtol, atol, with_jvp="fwd" in modes)
        if order > 1:
            u = random_like(f(*args), rng)

            def f_vjp(*a_and_u: Any) -> Any:
                return fgrad.vjp(f, *a_and_u[:n])[1](a_and_u[n])
            check_grads(f_vjp, args + (u,), order - 1, modes, eps, rtol, atol, seed + 2)


__all__ = ["check_grads", "check_jvp", "check_vjp", "numerical_jvp", "random_like",
           "to_float64", "vdot"]
