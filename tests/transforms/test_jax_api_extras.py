"""JAX's smaller top-level API in fgrad: jacobian, linear_transpose, closure_convert,
device_get / local_devices / default_backend, pure_callback (eager, jit on every backend,
vmap methods, the gradient error), named_scope, ensure_compile_time_eval, fgrad.typing and
fgrad.tree_util.Partial."""
from __future__ import annotations

import functools
import operator
import typing

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import Tensor, lax
from fgrad.tree_util import Partial

R = np.random.default_rng(3)
A = R.standard_normal((3, 4))
X = R.standard_normal(4)
F32 = fgrad.dtypes.float32
SDS = fgrad.ShapeDtypeStruct


def close(got, want, tol=1e-6):
    got = got.numpy() if isinstance(got, Tensor) else np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# ---------------------------------------------------------------------------- jacobian

def test_jacobian_is_jacrev():
    def f(x, y):
        return fnp.sin(Tensor(A) @ x) * y, (x ** 2).sum()

    x, y = Tensor(X), Tensor(np.float64(1.5))
    for argnums in (0, (0, 1)):
        got = fgrad.jacobian(f, argnums=argnums, has_aux=True)(x, y)
        want = fgrad.jacrev(f, argnums=argnums, has_aux=True)(x, y)
        fwd = fgrad.jacfwd(f, argnums=argnums, has_aux=True)(x, y)
        for g, w, v in zip(fgrad.tree.leaves(got), fgrad.tree.leaves(want),
                           fgrad.tree.leaves(fwd)):
            close(g, w.numpy())
            close(g, v.numpy())
    close(fgrad.jacobian(f, has_aux=True)(x, y)[0], np.cos(A @ X)[:, None] * A * 1.5)


# ---------------------------------------------------------------------------- linear_transpose

def _matrix_of(f, n):
    return np.stack([f(Tensor(e)).numpy() for e in np.eye(n)], axis=1)


def test_linear_transpose_is_the_transposed_matrix():
    def f(x):
        return Tensor(A) @ x + 2.0 * fnp.flip(x)[:3] - fnp.cumsum(x)[1:]

    m = _matrix_of(f, 4)                       # (3, 4)
    ct = R.standard_normal(3)
    (got,) = fgrad.linear_transpose(f, Tensor(X))(Tensor(ct))
    close(got, m.T @ ct, 1e-12)
    # primals may be ShapeDtypeStructs; jit around the transposed function works too
    f_t = fgrad.linear_transpose(f, SDS((4,), fgrad.dtypes.float64))
    close(fgrad.jit(f_t)(Tensor(ct))[0], m.T @ ct, 1e-12)


def test_linear_transpose_of_pytrees_and_its_errors():
    def f(d):
        return {"s": d["a"].sum() * 3.0, "v": d["b"][::-1] - d["a"][:2]}

    primal = {"a": Tensor(np.zeros(3, np.float32)), "b": Tensor(np.zeros(2, np.float32))}
    f_t = fgrad.linear_transpose(f, primal)
    (got,) = f_t({"s": 2.0, "v": Tensor(np.float32([1.0, 5.0]))})
    close(got["a"], np.float32([6 - 1, 6 - 5, 6]))
    close(got["b"], np.float32([5.0, 1.0]))
    with pytest.raises(TypeError, match="does not match"):
        f_t({"s": 2.0})
    with pytest.raises(TypeError, match="expected f32\\[2\\]"):
        f_t({"s": 2.0, "v": Tensor(np.ones(3, np.float32))})
    with pytest.raises(TypeError, match="float -> float"):
        fgrad.linear_transpose(lambda i: i * 2, Tensor(np.int32(1)))
    with pytest.raises(TypeError, match="not linear.*`mul`"):
        fgrad.linear_transpose(lambda v: v * v, Tensor(X))
    with pytest.raises(TypeError, match="not linear.*`sin`"):
        fgrad.linear_transpose(lambda v: fnp.sin(v) * 2.0, Tensor(X))


# ---------------------------------------------------------------------------- closure_convert

def test_closure_convert_hoists_traced_closures():
    x = Tensor(X)

    def loss(w):
        def model(v):
            return fnp.tanh(v * w).sum()
        converted, consts = fgrad.closure_convert(model, x)
        assert len(consts) == 1                        # w, traced by grad
        return converted(x, *consts)

    want = fgrad.grad(lambda w: fnp.tanh(x * w).sum())(Tensor(np.float64(0.7)))
    close(fgrad.grad(loss)(Tensor(np.float64(0.7))), want.numpy())
    close(fgrad.jit(fgrad.grad(loss))(Tensor(np.float64(0.7))), want.numpy())
    # concrete closed-over values stay in the closure, as in JAX
    w = Tensor(np.float64(2.0))
    converted, consts = fgrad.closure_convert(lambda v: {"y": v * w}, x)
    assert consts == []
    close(converted(Tensor(X * 3))["y"], X * 6)
    with pytest.raises(TypeError, match="tree"):
        converted((x, x))


def test_closure_convert_inside_custom_vjp():
    @functools.partial(fgrad.custom_vjp, nondiff_argnums=(0,))
    def apply(f, x, *consts):
        return f(x, *consts)

    def fwd(f, x, *consts):
        return f(x, *consts), (x, consts)

    def bwd(f, res, g):
        x, consts = res
        _, pull = fgrad.vjp(f, x, *consts)
        return pull(g)

    apply.defvjp(fwd, bwd)

    def loss(w):
        f, consts = fgrad.closure_convert(lambda v: fnp.sin(v * w), Tensor(X))
        return apply(f, Tensor(X), *consts).sum()

    close(fgrad.grad(loss)(Tensor(np.float64(1.3))), (np.cos(X * 1.3) * X).sum(), 1e-10)


# ---------------------------------------------------------------------------- devices

def test_device_get_local_devices_default_backend():
    tree = {"t": Tensor(np.float32([1, 2])), "n": np.arange(2), "p": 3, "s": "x"}
    got = fgrad.device_get(tree)
    assert type(got["t"]) is np.ndarray and got["t"].dtype == np.float32
    assert got["n"] is tree["n"] and got["p"] == 3 and got["s"] == "x"
    assert fgrad.local_devices() == fgrad.devices()
    assert fgrad.local_devices(backend="cpu") == ["CPU"]
    assert fgrad.default_backend() in ("llvm", "opencl", "numpy")
    with pytest.raises(ValueError, match="unknown backend"):
        fgrad.local_devices(backend="tpu")
    with pytest.raises(fgrad.ConcretizationError):
        fgrad.jit(lambda v: fgrad.device_get(v))(Tensor(1.0))


# ---------------------------------------------------------------------------- pure_callback

def _sin_host(x):
    assert isinstance(x, np.ndarray)
    return np.sin(x)


def _via_callback(x):
    y = fgrad.pure_callback(_sin_host, SDS(x.shape, x.dtype), x)
    return y * 2 + 1


@pytest.mark.backends
def test_pure_callback_eager_and_jit(jit_backend):
    x = R.standard_normal((2, 3)).astype(np.float32)
    close(_via_callback(Tensor(x)), np.sin(x) * 2 + 1, 1e-6)
    close(fgrad.jit(_via_callback)(Tensor(x)), np.sin(x) * 2 + 1, 1e-6)

    def loop(v):  # inside a scan body, under jit
        return lax.scan(lambda c, r: (c + _via_callback(r).sum(), None), np.float32(0), v)[0]
    close(fgrad.jit(loop)(Tensor(x)), (np.sin(x) * 2 + 1).sum(), 1e-5)


def test_pure_callback_pytrees_kwargs_and_dtypes():
    def host(a, scale, *, offset):
        return {"sum": np.float64(a.sum() * scale + offset), "rows": a.max(axis=1)}

    x = R.standard_normal((3, 2)).astype(np.float32)
    out = fgrad.pure_callback(host, {"sum": SDS((), F32), "rows": SDS((3,), F32)},
                              Tensor(x), 2.0, offset=np.float32(1))
    assert out["sum"].dtype == F32          # results are cast to the declared dtype
    close(out["sum"], x.sum() * 2 + 1, 1e-5)
    close(out["rows"], x.max(axis=1))
    with pytest.raises(ValueError, match="returned shape"):
        fgrad.pure_callback(lambda a: np.zeros(4), SDS((3,), F32), Tensor(x[:, 0]))
    with pytest.raises(TypeError, match="declares"):
        fgrad.pure_callback(lambda a: [a, a], [SDS((3,), F32)], Tensor(x[:, 0]))
    with pytest.raises(ValueError, match="allowed methods"):
        fgrad.pure_callback(np.sin, SDS((), F32), 1.0, vmap_method="loop")
    with pytest.raises(TypeError, match="shape and a dtype"):
        fgrad.pure_callback(np.sin, (3,), 1.0)


@pytest.mark.parametrize("method", ["sequential", "sequential_unrolled", "expand_dims",
                                    "broadcast_all", "legacy_vectorized"])
def test_pure_callback_vmap_methods(method):
    xs = R.standard_normal((4, 3)).astype(np.float32)
    y = R.standard_normal(3).astype(np.float32)
    seen = []

    def host(a, b):
        seen.append((a.shape, b.shape))
        return (a * b).sum(-1).astype(np.float32)

    def f(a):
        return fgrad.pure_callback(host, SDS((), F32), a, Tensor(y), vmap_method=method)

    close(fgrad.vmap(f)(Tensor(xs)), (xs * y).sum(-1), 1e-5)
    expected = {"sequential": [((3,), (3,))] * 4, "sequential_unrolled": [((3,), (3,))] * 4,
                "expand_dims": [((4, 3), (1, 3))], "broadcast_all": [((4, 3), (4, 3))],
                "legacy_vectorized": [((4, 3), (3,))]}[method]
    assert seen == expected
    close(fgrad.jit(fgrad.vmap(f))(Tensor(xs)), (xs * y).sum(-1), 1e-5)


def test_pure_callback_errors_under_vmap_and_grad():
    def f(a):
        return fgrad.pure_callback(np.sin, SDS((), F32), a)

    with pytest.raises(NotImplementedError, match="vmap_method"):
        fgrad.vmap(f)(Tensor(np.ones(3, np.float32)))
    with pytest.raises(ValueError, match="do not support JVP.*custom_jvp"):
        fgrad.grad(f)(Tensor(1.0))
    # values that are not differentiated may go through it under grad
    g = fgrad.grad(lambda a, b: a * f(b))(Tensor(2.0), Tensor(0.5))
    close(g, np.sin(np.float32(0.5)))


# ---------------------------------------------------------------------------- contexts

def test_named_scope_is_a_checked_no_op():
    @fgrad.jit
    def f(x):
        with fgrad.named_scope("layer1"):
            return x * 2

    close(f(Tensor(X)), X * 2)
    with pytest.raises(TypeError, match="must be a string"):
        with fgrad.named_scope(3):  # type: ignore[arg-type]
            pass


def test_ensure_compile_time_eval_makes_concrete_work_eager_under_jit():
    def f(x):
        with fgrad.ensure_compile_time_eval():
            n = int(fnp.arange(4).sum())           # concrete at trace time: 6
            y = x * 2                              # traced values are staged as usual
        return y + n

    close(fgrad.jit(f)(Tensor(X)), X * 2 + 6)
    jaxpr = str(fgrad.make_jaxpr(f)(Tensor(X)))
    assert "reduce_sum" not in jaxpr and "iota" not in jaxpr and "mul" in jaxpr

    @fgrad.jit
    def without(x):
        return x + int(fnp.arange(4).sum())

    with pytest.raises(fgrad.ConcretizationError):
        without(Tensor(X))
    with fgrad.ensure_compile_time_eval():          # eager already: nothing changes
        close(fgrad.jit(lambda v: v * 3)(Tensor(X)), X * 3)


# ---------------------------------------------------------------------------- typing, Partial

def test_typing_names():
    from fgrad.typing import ArrayLike, DTypeLike

    def scale(x: ArrayLike, dtype: DTypeLike = "float32") -> fgrad.Array:
        return fnp.asarray(x, dtype=dtype) * 2

    close(scale([1.0, 2.0]), np.float32([2, 4]))
    assert Tensor in typing.get_args(ArrayLike) and np.ndarray in typing.get_args(ArrayLike)
    assert fgrad.dtypes.float32.__class__ in typing.get_args(DTypeLike)
    assert fgrad.typing is __import__("fgrad.typing").typing


def test_tree_util_partial_is_a_pytree():
    p = Partial(operator.mul, Tensor(2.0))
    assert p(Tensor(3.0)).item() == 6.0
    assert fgrad.tree.leaves(p) == [p.args[0]]
    assert fgrad.jit(lambda g, v: g(v))(p, Tensor(3.0)).item() == 6.0
    scaled = fgrad.tree.map(lambda t: t * 10, p)
    assert isinstance(scaled, Partial) and scaled.func is operator.mul
    assert scaled(Tensor(1.0)).item() == 20.0
    kw = Partial(lambda a, *, b: a - b, b=Tensor(1.0))
    assert fgrad.tree.leaves(kw)[0].item() == 1.0
    assert fgrad.jit(lambda g: g(Tensor(5.0)))(kw).item() == 4.0
    # a partial of a partial stays one static function (its own args are not leaves)
    inner = functools.partial(operator.add, 1.0)
    pp = Partial(inner, Tensor(5.0))
    assert fgrad.tree.leaves(pp) == [pp.args[0]] and pp().item() == 6.0
    assert pp.func.func is operator.add
    # returned from a jitted function
    out = fgrad.jit(lambda v: Partial(operator.add, v * 2))(Tensor(1.0))
    assert isinstance(out, Partial) and out(Tensor(1.0)).item() == 3.0


def test_jit_takes_jaxs_hints_and_donate_argnames() -> None:
    f = fgrad.jit(lambda x, y: x + 1, keep_unused=True, inline=True)
    np.testing.assert_array_equal(f(np.ones(2, np.float32), np.zeros(3)).numpy(), [2, 2])
    g = fgrad.jit(lambda x, y: x * 2 + y, donate_argnames="x")
    x = fgrad.Tensor(np.ones(3, np.float32))
    np.testing.assert_array_equal(g(x, 1.0).numpy(), [3, 3, 3])
    with pytest.raises(RuntimeError):
        x.numpy()   # donated: any later use raises
    with pytest.raises(ValueError, match="not parameters"):
        fgrad.jit(lambda x: x, donate_argnames="z")
