"""Sample inputs for every registered primitive, used by test_primitive_rules.py.

`SAMPLES[name](rng)` returns a list of `Case`s: NumPy arguments plus the primitive's params.
Shapes and params are fixed per case; only the values depend on `rng`, so calling a
generator with several rngs gives per-example inputs for the batching check. Control-flow,
jit and custom-rule primitives are sampled through their public API (`from_public`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

import fgrad
from fgrad import Tensor, dtypes, lax
from fgrad.core.ir import Literal

F64 = np.float64


@dataclass
class Case:
    """One sample: arguments, params, and how to check it.

    `linear`: groups of argument positions in which the primitive is (jointly) linear, for
    the transpose check; None means "every float argument at once" for linear primitives and
    () means "this case is not linear". `eps`/`tol`: finite-difference step and tolerance.
    """

    args: list[np.ndarray]
    params: dict[str, Any] = field(default_factory=dict)
    linear: tuple[tuple[int, ...], ...] | None = None
    eps: float = 1e-6
    tol: float = 1e-6


Gen = Callable[[np.random.Generator], list[Case]]

# Primitives whose JVP is identically zero / undefined: their rule must return None tangents.
NONDIFF = {"and", "or", "xor", "not", "shift_left", "shift_right", "eq", "ne", "lt", "le",
           "gt", "ge", "is_nan", "sign", "floor", "ceil", "round", "argmax", "argmin", "iota",
           "bitcast_convert_type", "stop_gradient"}

# Primitives the table does not sample, with the test that covers them instead.
SKIPS = {
    "custom_lin": "only appears inside the linearization of a custom_vjp function (its impl "
                  "raises by design); covered by tests/transforms/test_autodiff.py::"
                  "test_custom_vjp_* and test_custom_vjp_forward_mode_error",
    "debug_callback": "has no outputs (a host callback); its eager, jit per backend, vmap, "
                      "grad and scan behaviour is covered by tests/transforms/test_debug.py",
    "collective": "only meaningful inside vmap(axis_name=...); values, gradients, jit and "
                  "nesting against JAX in tests/transforms/test_collectives.py",
    "checkpoint_name": "an identity tag; covered by tests/transforms/test_remat_policies.py",
    "pure_callback": "calls a user's Python function (its JVP raises by design); eager, jit, "
                     "vmap methods and the grad error are covered by "
                     "tests/transforms/test_jax_api_extras.py",
}

# Primitives whose JVP must raise (by design): (exception type, message fragment).
# Forward mode of a custom_vjp function is an error; see
# tests/transforms/test_autodiff.py::test_custom_vjp_forward_mode_error.
JVP_RAISES = {"custom_vjp_call": (TypeError, "custom_jvp")}


def normal(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.normal(size=shape).astype(F64)


def positive(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(0.5, 2.0, size=shape).astype(F64)


def away_from_zero(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (rng.uniform(0.3, 1.5, size=shape) * rng.choice([-1, 1], size=shape)).astype(F64)


def distinct(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Values with gaps of at least 0.1, so max/min/sort never tie under perturbation."""
    n = int(np.prod(shape))
    vals = rng.permutation(n) * 0.3 + rng.uniform(0, 0.1, size=n)
    return (vals - vals.mean()).reshape(shape).astype(F64)


def from_public(name: str, fn: Callable[..., Any], *args: np.ndarray) -> tuple[list, dict]:
    """Stage `fn(*args)` with make_jaxpr, run it eagerly up to the first `name` equation,
    and return that equation's input values and params."""
    tensors = [Tensor(a) for a in args]
    closed = fgrad.make_jaxpr(fn)(*tensors)
    env = {id(v): c for v, c in zip(closed.jaxpr.constvars, closed.consts, strict=True)}
    env.update({id(v): t for v, t in zip(closed.jaxpr.invars, tensors, strict=True)})

    def read(a: Any) -> Any:
        if isinstance(a, Literal):
            return Tensor(np.asarray(a.val, dtype=a.aval.dtype.np))
        return env[id(a)]

    for eqn in closed.jaxpr.eqns:
        vals = [read(a) for a in eqn.inputs]
        if eqn.primitive.name == name:
            return [np.asarray(v.numpy()) for v in vals], dict(eqn.params)
        outs = eqn.primitive.bind(*vals, **eqn.params)
        outs = outs if eqn.primitive.multiple_results else [outs]
        env.update({id(v): o for v, o in zip(eqn.outvars, outs, strict=True)})
    raise AssertionError(f"{fn} did not bind {name}")


def public_case(name: str, fn: Callable[..., Any], *args: np.ndarray, **kw: Any) -> Case:
    vals, params = from_public(name, fn, *args)
    return Case(vals, params, **kw)


# ---------------------------------------------------------------------------- elementwise

def _unary(make: Callable[..., np.ndarray], **kw: Any) -> Gen:
    return lambda rng: [Case([make(rng, 2, 3)], **kw)]


def _binary(make_x: Callable[..., np.ndarray], make_y: Callable[..., np.ndarray],
            **kw: Any) -> Gen:
    return lambda rng: [Case([make_x(rng, 2, 3), make_y(rng, 2, 3)], **kw)]


def _ints(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(-20, 20, size=shape).astype(np.int32)


def _bools(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.random(size=shape) < 0.5


def _shifts(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(0, 5, size=shape).astype(np.int32)


def _rem_x(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """x = (k + f) * 1.7 with f in [0.2, 0.8]: far from fmod's jumps when y is near 1.7."""
    k = rng.integers(-2, 3, size=shape)
    return ((k + rng.uniform(0.2, 0.8, size=shape)) * 1.7).astype(F64)


def _rem_y(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (1.7 + rng.uniform(-0.01, 0.01, size=shape)).astype(F64)


def _half_away(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (rng.integers(-3, 3, size=shape) + rng.uniform(0.1, 0.4, size=shape)).astype(F64)


def _bitwise(rng: np.random.Generator) -> list[Case]:
    return [Case([_ints(rng, 2, 3), _ints(rng, 2, 3)]),
            Case([_bools(rng, 2, 3), _bools(rng, 2, 3)])]


def _compare(rng: np.random.Generator) -> list[Case]:
    x = distinct(rng, 2, 3)
    y = np.where(rng.random((2, 3)) < 0.3, x, distinct(rng, 2, 3))
    return [Case([x, y]), Case([_ints(rng, 2, 3), _ints(rng, 2, 3)])]


def _minmax(rng: np.random.Generator) -> list[Case]:
    x = distinct(rng, 2, 3)
    return [Case([x, x + away_from_zero(rng, 2, 3) * 0.5])]


ELEMENTWISE: dict[str, Gen] = {
    "neg": _unary(normal), "exp": _unary(normal), "log": _unary(positive),
    "sin": _unary(normal), "cos": _unary(normal),
    "tan": lambda rng: [Case([rng.uniform(-1, 1, (2, 3))])],
    "tanh": _unary(normal), "logistic": _unary(normal), "sqrt": _unary(positive),
    "rsqrt": _unary(positive), "log1p": _unary(positive), "expm1": _unary(normal),
    "erf": _unary(normal), "abs": _unary(away_from_zero), "sign": _unary(away_from_zero),
    "floor": _unary(_half_away), "ceil": _unary(_half_away), "round": _unary(_half_away),
    "is_nan": lambda rng: [Case([np.where(_bools(rng, 2, 3), np.nan, normal(rng, 2, 3))])],
    "stop_gradient": _unary(normal),
    "not": lambda rng: [Case([_ints(rng, 2, 3)]), Case([_bools(rng, 2, 3)])],
    "add": _binary(normal, normal), "sub": _binary(normal, normal),
    "mul": _binary(normal, normal, linear=((0,), (1,))),
    "safe_mul": lambda rng: [Case([normal(rng, 2, 3) * (rng.random((2, 3)) < 0.7),
                                   normal(rng, 2, 3)], linear=((0,), (1,)))],
    "div": _binary(normal, away_from_zero, linear=((0,),)),
    "rem": _binary(_rem_x, _rem_y),
    "pow": _binary(positive, normal),
    "max": _minmax, "min": _minmax,
    "atan2": _binary(away_from_zero, away_from_zero),
    "and": _bitwise, "or": _bitwise, "xor": _bitwise,
    "shift_left": _binary(_ints, _shifts), "shift_right": _binary(_ints, _shifts),
    "eq": _compare, "ne": _compare, "lt": _compare, "le": _compare, "gt": _compare,
    "ge": _compare,
    "select": lambda rng: [Case([_bools(rng, 2, 3), normal(rng, 2, 3), normal(rng, 2, 3)])],
    "convert_element_type": lambda rng: [
        Case([normal(rng, 2, 3)], dict(new_dtype=dtypes.float32), eps=1e-2, tol=1e-5),
        Case([normal(rng, 2, 3).astype(np.float32)], dict(new_dtype=dtypes.float64),
             eps=1e-2, tol=1e-5)],
    "bitcast_convert_type": lambda rng: [
        Case([normal(rng, 2, 3).astype(np.float32)], dict(new_dtype=dtypes.int32))],
}


# ---------------------------------------------------------------------------- structural

def _pad(rng: np.random.Generator) -> list[Case]:
    return [Case([normal(rng, 3, 4)], dict(config=((1, 2, 1), (0, -1, 0)), value=0.0)),
            Case([normal(rng, 2, 3)], dict(config=((-1, 1, 0), (2, 0, 2)), value=0.0))]


def _concat(rng: np.random.Generator) -> list[Case]:
    return [Case([normal(rng, 2, 3), normal(rng, 1, 3), normal(rng, 2, 3)],
                 dict(dimension=0))]


def _dot(rng: np.random.Generator) -> list[Case]:
    both = ((0,), (1,))
    return [Case([normal(rng, 2, 3), normal(rng, 3, 4)],
                 dict(dimension_numbers=(((1,), (0,)), ((), ()))), linear=both),
            Case([normal(rng, 2, 4, 3), normal(rng, 2, 3, 5)],
                 dict(dimension_numbers=(((2,), (1,)), ((0,), (0,)))), linear=both),
            Case([normal(rng, 3, 2), normal(rng, 3)],
                 dict(dimension_numbers=(((0,), (0,)), ((), ()))), linear=both)]


STRUCTURAL: dict[str, Gen] = {
    "reshape": lambda rng: [Case([normal(rng, 2, 3)], dict(new_shape=(3, 2))),
                            Case([normal(rng, 1)], dict(new_shape=()))],
    "broadcast_in_dim": lambda rng: [
        Case([normal(rng, 3)], dict(shape=(2, 3), broadcast_dimensions=(1,))),
        Case([normal(rng, 1, 3)], dict(shape=(2, 4, 3), broadcast_dimensions=(0, 2))),
        Case([normal(rng)], dict(shape=(2,), broadcast_dimensions=()))],
    "transpose": lambda rng: [Case([normal(rng, 2, 3, 4)], dict(permutation=(2, 0, 1)))],
    "pad": _pad,
    "slice": lambda rng: [Case([normal(rng, 4, 5)],
                               dict(start=(1, 0), limit=(4, 5), strides=(2, 2)))],
    "rev": lambda rng: [Case([normal(rng, 2, 3)], dict(dimensions=(0, 1)))],
    "concatenate": _concat,
    "dot_general": _dot,
    "iota": lambda rng: [Case([], dict(dtype=dtypes.int32, shape=(2, 3), dimension=1))],
    "conv_patches": lambda rng: [
        Case([normal(rng, 2, 3, 5, 6)], dict(kernel=(3, 2), stride=(2, 1), dilation=(1, 2),
                                            padding=((1, 1), (0, 2)))),
        Case([normal(rng, 3, 7)], dict(kernel=(3,), stride=(1,), dilation=(1,),
                                      padding=((-1, 2),))),
    ],
    "conv_patches_transpose": lambda rng: [
        Case([normal(rng, 2, 3, 6, 3, 6)], dict(kernel=(3, 2), stride=(2, 1), dilation=(1, 2),
                                               padding=((1, 1), (0, 2)), spatial=(5, 6))),
        Case([normal(rng, 3, 3, 6)], dict(kernel=(3,), stride=(1,), dilation=(1,),
                                         padding=((-1, 2),), spatial=(7,))),
    ],
}


# ---------------------------------------------------------------------------- reductions

def _with_a_zero(x: np.ndarray) -> np.ndarray:
    x = np.array(x)
    x.flat[1] = 0.0
    return x


def _reduce(make: Callable[..., np.ndarray]) -> Gen:
    return lambda rng: [Case([make(rng, 2, 3)], dict(axes=(1,))),
                        Case([make(rng, 2, 3, 2)], dict(axes=(0, 2)))]


def _cumulative(make: Callable[..., np.ndarray]) -> Gen:
    return lambda rng: [Case([make(rng, 2, 4)], dict(axis=1, reverse=False)),
                        Case([make(rng, 3, 2)], dict(axis=0, reverse=True))]


REDUCTIONS: dict[str, Gen] = {
    "reduce_sum": _reduce(normal), "reduce_max": _reduce(distinct),
    "reduce_min": _reduce(distinct),
    "reduce_prod": lambda rng: _reduce(away_from_zero)(rng) + [
        Case([_with_a_zero(away_from_zero(rng, 2, 3))], dict(axes=(1,)))],
    "argmax": lambda rng: [Case([distinct(rng, 2, 3)], dict(axis=1, index_dtype=dtypes.int32))],
    "argmin": lambda rng: [Case([distinct(rng, 2, 3)], dict(axis=0, index_dtype=dtypes.int32))],
    "cumsum": _cumulative(normal),
    "cumprod": lambda rng: _cumulative(away_from_zero)(rng) + [
        Case([_with_a_zero(away_from_zero(rng, 2, 4))], dict(axis=1, reverse=False)),
        Case([_with_a_zero(away_from_zero(rng, 2, 4))], dict(axis=1, reverse=True))],
    "cummax": _cumulative(distinct), "cummin": _cumulative(distinct),
    "sort": lambda rng: [Case([distinct(rng, 2, 5)], dict(descending=False)),
                         Case([distinct(rng, 3, 4)], dict(descending=True))],
    "top_k": lambda rng: [Case([distinct(rng, 2, 5)], dict(k=3, descending=True)),
                          Case([distinct(rng, 3, 4)], dict(k=1, descending=False)),
                          Case([distinct(rng, 2, 3)], dict(k=3, descending=False))],
}


# ---------------------------------------------------------------------------- indexing

def _idx(rng: np.random.Generator, n: int, *shape: int) -> np.ndarray:
    return rng.integers(0, n, size=shape).astype(np.int32)


def _scatter(rng: np.random.Generator) -> list[Case]:
    rows = rng.permutation(4)[:2].astype(np.int32)
    cases = [Case([normal(rng, 4, 3), _idx(rng, 4, 3), normal(rng, 3, 3)], dict(mode="add"),
                  linear=((0, 2),)),
             Case([normal(rng, 4, 3), rows, normal(rng, 2, 3)], dict(mode="set"),
                  linear=((0, 2),)),
             Case([away_from_zero(rng, 4, 3), _idx(rng, 4, 3), away_from_zero(rng, 3, 3)],
                  dict(mode="mul"), linear=())]
    for mode in ("max", "min"):
        vals = distinct(rng, 7, 3)
        cases.append(Case([vals[:4], rows, vals[4:6]], dict(mode=mode), linear=()))
    return cases


INDEXING: dict[str, Gen] = {
    "gather": lambda rng: [Case([normal(rng, 4, 3), _idx(rng, 4, 2)], linear=((0,),)),
                           Case([normal(rng, 5), _idx(rng, 5, 2, 3)], linear=((0,),))],
    "scatter": _scatter,
}


# ---------------------------------------------------------------------------- linalg

def _general(rng: np.random.Generator, m: int, n: int) -> np.ndarray:
    return normal(rng, m, n) + 3 * np.eye(m, n)


def _spd(rng: np.random.Generator, n: int) -> np.ndarray:
    a = normal(rng, n, n)
    return a @ a.T + n * np.eye(n)


def _distinct_singular(rng: np.random.Generator, m: int, n: int) -> np.ndarray:
    q1, _ = np.linalg.qr(normal(rng, m, m))
    q2, _ = np.linalg.qr(normal(rng, n, n))
    k = min(m, n)
    s = np.diag(np.arange(k, 0, -1) + 0.5 + rng.uniform(0, 0.2, k))
    return q1[:, :k] @ s @ q2[:k, :]


LINALG: dict[str, Gen] = {
    "cholesky": lambda rng: [Case([_spd(rng, 3)], tol=1e-5)],
    "triangular_solve": lambda rng: [
        Case([_general(rng, 3, 3), normal(rng, 3, 2)],
             dict(lower=True, transpose_a=False, unit_diagonal=False), linear=((1,),)),
        Case([_general(rng, 3, 3), normal(rng, 3, 2)],
             dict(lower=False, transpose_a=True, unit_diagonal=True), linear=((1,),))],
    "lu": lambda rng: [Case([_general(rng, 3, 3)], tol=1e-5)],
    "qr": lambda rng: [Case([_general(rng, 4, 3)], dict(full_matrices=False), tol=1e-5),
                       Case([_general(rng, 3, 3)], dict(full_matrices=True), tol=1e-5)],
    "svd": lambda rng: [Case([_distinct_singular(rng, 4, 3)], dict(full_matrices=False),
                             tol=1e-5)],
    "eigh": lambda rng: [Case([_distinct_singular(rng, 3, 3) + _distinct_singular(rng, 3, 3).T],
                              tol=1e-5)],
}


# ---------------------------------------------------------------------------- public API

def _cond(rng: np.random.Generator) -> list[Case]:
    p, x, y = rng.random() < 0.5, normal(rng, 3), normal(rng, 3)
    lin = public_case("cond", lambda p, a, b: lax.cond(
        p, lambda u, v: u * 2.0 + v, lambda u, v: u - v.flip(0) * 3.0, a, b), p, x, y)
    nonlin = public_case("cond", lambda p, a, b: lax.cond(
        p, lambda u, v: (u.sin() * v, v), lambda u, v: (u * u, v.exp()), a, b), p, x, y)
    idx = np.int32(rng.integers(0, 3))
    switch = public_case("cond", lambda i, a: lax.switch(
        i, [lambda u: u.sin(), lambda u: u * u, lambda u: -u.exp()], a), idx, x)
    return [lin, _nonlinear(nonlin), _nonlinear(switch)]


def _nonlinear(case: Case) -> Case:
    case.linear = ()
    return case


def _scan(rng: np.random.Generator) -> list[Case]:
    c, xs = normal(rng, 2), normal(rng, 4, 2)
    lin = public_case("scan", lambda c, xs: lax.scan(
        lambda k, x: (k * 0.5 + x, k * 2.0 - x), c, xs), c, xs)
    nonlin = public_case("scan", lambda c, xs: lax.scan(
        lambda k, x: (k * x.sin() + 0.1, (k * k, x.cos())), c, xs, reverse=True), c, xs)
    return [lin, _nonlinear(nonlin)]


def _while(rng: np.random.Generator) -> list[Case]:
    i0, x = np.int32(rng.integers(0, 3)), rng.uniform(-1, 1, 2)
    case = public_case("while", lambda i, x: lax.while_loop(
        lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * 0.9 + s[1].sin() * 0.2), (i, x)), i0, x)
    return [case]


def _jit(rng: np.random.Generator) -> list[Case]:
    x, y = normal(rng, 3), normal(rng, 3)
    lin = public_case("jit", fgrad.jit(lambda a, b: a * 2.0 - b.flip(0)), x, y)
    nonlin = public_case("jit", fgrad.jit(lambda a, b: (a.sin() * b, a.exp())), x, y)
    return [lin, _nonlinear(nonlin)]


def _checkpoint(rng: np.random.Generator) -> list[Case]:
    x = normal(rng, 3)
    lin = public_case("checkpoint", fgrad.checkpoint(lambda a: a * 3.0 + a.flip(0)), x)
    nonlin = public_case("checkpoint", fgrad.checkpoint(lambda a: a.sin().exp()), x)
    return [lin, _nonlinear(nonlin)]


@fgrad.custom_jvp
def _softplus(x: Tensor) -> Tensor:
    return (x.exp() + 1).log()


@_softplus.defjvp
def _softplus_jvp(primals: tuple, tangents: tuple) -> tuple:
    (x,), (t,) = primals, tangents
    return _softplus(x), t * x.sigmoid()


@fgrad.custom_vjp
def _cube(x: Tensor) -> Tensor:
    return x * x * x


_cube.defvjp(lambda x: (x * x * x, x), lambda x, ct: (ct * 3 * x * x,))


PUBLIC: dict[str, Gen] = {
    "cond": _cond, "scan": _scan, "while": _while, "jit": _jit, "checkpoint": _checkpoint,
    "custom_jvp_call": lambda rng: [public_case("custom_jvp_call", _softplus,
                                                normal(rng, 3))],
    "custom_vjp_call": lambda rng: [public_case("custom_vjp_call", _cube, normal(rng, 3))],
}

SAMPLES: dict[str, Gen] = {**ELEMENTWISE, **STRUCTURAL, **REDUCTIONS, **INDEXING, **LINALG,
                           **PUBLIC}
from prim_samples_distributed import COLLECTIVES  # noqa: E402  (it imports Case from here)
SAMPLES.update(COLLECTIVES)
