"""Tests for fgrad/core/methods/movement_ops.py (pad, roll, repeat, cat/stack/split/chunk, meshgrid,
triu/tril, interpolate) and the core movement methods, against NumPy and PyTorch fixtures
(tests/core/methods/fixtures/gen_movement_ops.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, dtypes
from fgrad.core.staging import eval_jaxpr

FIX = np.load(Path(__file__).parent / "fixtures" / "movement_ops.npz")
RNG = np.random.default_rng(1)
needs_grad = pytest.mark.skipif(not hasattr(fgrad, "grad"), reason="fgrad.grad not built yet")


def traced(fn, *args):
    """fn staged by make_jaxpr, then evaluated: the result a transformation would see."""
    closed = fgrad.make_jaxpr(fn)(*args)
    outs = eval_jaxpr(closed.jaxpr, closed.consts, [Tensor(a) for a in args])
    return outs[0] if len(outs) == 1 else outs


def jvp_fn():
    if hasattr(fgrad, "jvp"):
        return fgrad.jvp
    from fgrad.transforms.jvp import jvp
    return jvp


def check_adjoint(fn, x: np.ndarray, w: np.ndarray, grad: np.ndarray, rtol: float = 1e-6):
    """<w, J t> (fgrad's JVP) equals <J^T w, t> (PyTorch's gradient) for a random t."""
    t = RNG.standard_normal(x.shape).astype(x.dtype)
    _, out_dot = jvp_fn()(fn, (Tensor(x),), (Tensor(t),))
    lhs, rhs = float(np.sum(w * out_dot.numpy())), float(np.sum(grad * t))
    assert lhs == pytest.approx(rhs, rel=rtol, abs=rtol)


def fixture_cases(prefix: str) -> list[int]:
    return list(range(int(FIX[f"n_{prefix}"])))


# ---------------------------------------------------------------------------- pad

def per_axis(flat: tuple[int, ...], ndim: int) -> list:
    pairs: list = [None] * ndim
    for i in range(len(flat) // 2):
        pairs[ndim - 1 - i] = (flat[2 * i], flat[2 * i + 1])
    return pairs


def pad_case(i: int):
    f = FIX
    return (f[f"pad{i}_x"], tuple(int(p) for p in f[f"pad{i}_padding"]), str(f[f"pad{i}_mode"]),
            float(f[f"pad{i}_value"]))


@pytest.mark.parametrize("i", fixture_cases("pad"))
def test_pad_matches_torch(i):
    x, padding, mode, value = pad_case(i)
    want = FIX[f"pad{i}_out"]
    np.testing.assert_allclose(Tensor(x).pad(padding, mode, value).numpy(), want)
    pairs = per_axis(padding, x.ndim)
    np.testing.assert_allclose(Tensor(x).pad(pairs, mode=mode, value=value).numpy(), want)
    np.testing.assert_allclose(traced(lambda t: t.pad(padding, mode, value), x).numpy(), want)


@pytest.mark.parametrize("i", fixture_cases("pad"))
def test_pad_jvp_matches_torch_grad(i):
    x, padding, mode, value = pad_case(i)
    check_adjoint(lambda t: t.pad(padding, mode, value), x, FIX[f"pad{i}_w"],
                  FIX[f"pad{i}_grad"])


@needs_grad
@pytest.mark.parametrize("i", fixture_cases("pad"))
def test_pad_grad_matches_torch(i):
    x, padding, mode, value = pad_case(i)
    w = Tensor(FIX[f"pad{i}_w"])
    g = fgrad.grad(lambda t: (t.pad(padding, mode, value) * w).sum())(Tensor(x))
    np.testing.assert_allclose(g.numpy(), FIX[f"pad{i}_grad"], rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("dtype, value", [(dtypes.int32, 7), (dtypes.bool, True),
                                          (dtypes.float16, -1.5), (dtypes.int8, 2.0)])
def test_pad_constant_keeps_dtype(dtype, value):
    x = np.arange(6).reshape(2, 3).astype(dtype.np)
    out = Tensor(x).pad(((1, 0), (2, 1)), value=value)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), np.pad(x, ((1, 0), (2, 1)),
                                                      constant_values=np.asarray(value, x.dtype)))


def test_pad_empty_and_scalar():
    assert Tensor(3.0).pad(()).numpy() == 3.0
    z = np.zeros((0, 3))
    np.testing.assert_array_equal(Tensor(z).pad((1, 1, 2, 0), value=4).numpy(),
                                  np.pad(z, ((2, 0), (1, 1)), constant_values=4))
    np.testing.assert_array_equal(Tensor(z).pad((1, 1), mode="reflect").numpy(),
                                  np.pad(z, ((0, 0), (1, 1)), mode="reflect"))


@pytest.mark.parametrize("padding, mode, match", [
    ((1, 2, 3), "constant", "even number"),
    ((1, 1, 1, 1, 1, 1), "constant", "at most 4"),
    (((1, 1),), "constant", "one .before, after. pair"),
    (((1, 1, 1), None), "constant", "before, after"),
    ((3, 0), "reflect", "smaller than the size 3"),
    ((0, 4), "circular", "must not exceed the size 3"),
    ((-2, -2), "constant", "cannot crop 2 \\+ 2"),
    ((1, 1), "edge", "mode must be one of"),
])
def test_pad_errors(padding, mode, match):
    with pytest.raises(ValueError, match=match):
        Tensor(np.zeros((2, 3))).pad(padding, mode=mode)


def test_pad_replicate_empty_axis_error():
    with pytest.raises(ValueError, match="empty axis"):
        Tensor(np.zeros((2, 0))).pad((1, 0), mode="replicate")


# ---------------------------------------------------------------------------- roll / repeat

@pytest.mark.parametrize("shape, shifts, dims", [
    ((5,), 2, 0), ((5,), -7, 0), ((3, 4), 1, 0), ((3, 4), (1, -3), (0, 1)),
    ((3, 4), (2, 2), (1, 1)), ((2, 3, 4), 5, -1), ((3, 4), 5, None), ((0, 3), 1, 0),
    ((2, 0), 3, 1), ((), 3, None),
])
def test_roll_matches_numpy(shape, shifts, dims):
    x = RNG.standard_normal(shape)
    np.testing.assert_array_equal(Tensor(x).roll(shifts, dims).numpy(),
                                  np.roll(x, shifts, dims))


def test_roll_errors():
    with pytest.raises(ValueError, match="differ in length"):
        Tensor(np.zeros((2, 2))).roll((1, 2), 0)
    with pytest.raises(ValueError, match="without dims"):
        Tensor(np.zeros((2, 2))).roll((1, 2))


@pytest.mark.parametrize("shape, reps", [
    ((3,), (2,)), ((2, 3), (2, 3)), ((2, 3), (2, 1, 3)), ((2, 3), (0, 2)), ((), (3,)),
    ((), (2, 2)), ((0, 2), (3, 1)), ((2, 1, 3), (1, 4, 1)),
])
def test_repeat_matches_numpy_tile(shape, reps):
    x = RNG.standard_normal(shape)
    np.testing.assert_array_equal(Tensor(x).repeat(reps).numpy(), np.tile(x, reps))
    np.testing.assert_array_equal(Tensor(x).repeat(*reps).numpy(), np.tile(x, reps))


def test_repeat_errors():
    with pytest.raises(ValueError, match="at least 2"):
        Tensor(np.zeros((2, 2))).repeat(3)
    with pytest.raises(ValueError, match="non-negative"):
        Tensor(np.zeros(2)).repeat(-1)


@pytest.mark.parametrize("shape, repeats, dim", [
    ((4,), 3, 0), ((2, 3), 2, 1), ((2, 3), 2, -2), ((2, 3), 2, None), ((2, 3), 0, 1),
    ((), 3, None), ((2, 0, 3), 2, 1),
])
def test_repeat_interleave_matches_numpy(shape, repeats, dim):
    x = RNG.standard_normal(shape)
    np.testing.assert_array_equal(Tensor(x).repeat_interleave(repeats, dim).numpy(),
                                  np.repeat(x, repeats, dim))


def test_roll_repeat_jvp_are_the_same_linear_maps():
    x, t = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    jvp = jvp_fn()
    for fn, ref in [(lambda a: a.roll((1, 2), (0, 1)), lambda a: np.roll(a, (1, 2), (0, 1))),
                    (lambda a: a.repeat(2, 1, 2), lambda a: np.tile(a, (2, 1, 2))),
                    (lambda a: a.repeat_interleave(3, 0), lambda a: np.repeat(a, 3, 0))]:
        _, dot = jvp(fn, (Tensor(x),), (Tensor(t),))
        np.testing.assert_allclose(dot.numpy(), ref(t))


# ---------------------------------------------------------------------------- cat / stack

@pytest.mark.parametrize("shapes, dim", [
    ([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 0)], 1), ([(2, 3, 4)] * 3, -1),
    ([(0, 3), (2, 3)], 0), ([(5,)], 0),
])
def test_cat_matches_numpy(shapes, dim):
    xs = [RNG.standard_normal(s) for s in shapes]
    want = np.concatenate(xs, dim)
    ts = [Tensor(x) for x in xs]
    np.testing.assert_array_equal(ts[0].cat(*ts[1:], dim=dim).numpy(), want)
    np.testing.assert_array_equal(Tensor.cat(*ts, dim=dim).numpy(), want)


def test_cat_promotes_dtypes():
    out = Tensor([1, 2]).cat(Tensor([0.5]), Tensor([True]))
    assert out.dtype == dtypes.float32
    np.testing.assert_array_equal(out.numpy(), [1, 2, 0.5, 1])


def test_cat_errors_name_both_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(2, 4\)"):
        Tensor(np.zeros((2, 3))).cat(Tensor(np.zeros((2, 4))))
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(6,\)"):
        Tensor(np.zeros((2, 3))).cat(Tensor(np.zeros(6)))
    with pytest.raises(ValueError, match="0-d"):
        Tensor(1.0).cat(Tensor(2.0))


@pytest.mark.parametrize("shape, n, dim", [((2, 3), 3, 0), ((2, 3), 2, 2), ((2, 3), 2, -1),
                                           ((), 4, 0), ((0, 2), 2, 1)])
def test_stack_matches_numpy(shape, n, dim):
    xs = [RNG.standard_normal(shape) for _ in range(n)]
    ts = [Tensor(x) for x in xs]
    np.testing.assert_array_equal(Tensor.stack(*ts, dim=dim).numpy(), np.stack(xs, dim))


def test_stack_errors():
    with pytest.raises(ValueError, match=r"same shape, got \(2,\) and \(3,\)"):
        Tensor([1, 2]).stack(Tensor([1, 2, 3]))
    with pytest.raises(IndexError, match="out of range"):
        Tensor([1, 2]).stack(Tensor([1, 2]), dim=3)


def test_cat_stack_jvp():
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
    ta, tb = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
    _, dot = jvp_fn()(lambda x, y: x.cat(y, dim=1), (Tensor(a), Tensor(b)),
                      (Tensor(ta), Tensor(tb)))
    np.testing.assert_allclose(dot.numpy(), np.concatenate([ta, tb], 1))
    _, dot = jvp_fn()(lambda x, y: x.stack(y, dim=1), (Tensor(a), Tensor(b)),
                      (Tensor(ta), Tensor(tb)))
    np.testing.assert_allclose(dot.numpy(), np.stack([ta, tb], 1))


# ---------------------------------------------------------------------------- split / chunk

@pytest.mark.parametrize("n, sizes, want", [
    (7, 3, [3, 3, 1]), (6, 2, [2, 2, 2]), (6, 10, [6]), (0, 2, [0]), (6, [1, 0, 5], [1, 0, 5]),
])
def test_split(n, sizes, want):
    x = RNG.standard_normal((2, n))
    pieces = Tensor(x).split(sizes, dim=1)
    np.testing.assert_array_equal(np.concatenate([p.numpy() for p in pieces], 1), x)
    assert [p.shape[1] for p in pieces] == want


@pytest.mark.parametrize("n, chunks, want", [
    (5, 3, [2, 2, 1]), (6, 4, [2, 2, 2]), (6, 3, [2, 2, 2]), (2, 5, [1, 1]), (0, 3, [0, 0, 0]),
])
def test_chunk_matches_torch_semantics(n, chunks, want):
    x = RNG.standard_normal((n, 2))
    pieces = Tensor(x).chunk(chunks)
    assert [p.shape[0] for p in pieces] == want
    np.testing.assert_array_equal(np.concatenate([p.numpy() for p in pieces], 0), x)


def test_split_chunk_errors():
    x = Tensor(np.zeros((2, 5)))
    with pytest.raises(ValueError, match=r"add up\s+to 5"):
        x.split([2, 2], dim=1)
    with pytest.raises(ValueError, match="positive"):
        x.split(0)
    with pytest.raises(ValueError, match="positive"):
        x.chunk(0)


# ---------------------------------------------------------------------------- meshgrid / tri

@pytest.mark.parametrize("indexing", ["ij", "xy"])
@pytest.mark.parametrize("sizes", [(3, 4), (2, 3, 4), (5,), (0, 2)])
def test_meshgrid_matches_numpy(sizes, indexing):
    xs = [RNG.standard_normal(n) for n in sizes]
    got = Tensor(xs[0]).meshgrid(*[Tensor(x) for x in xs[1:]], indexing=indexing)
    for g, w in zip(got, np.meshgrid(*xs, indexing=indexing), strict=True):
        np.testing.assert_array_equal(g.numpy(), w)


def test_meshgrid_errors():
    with pytest.raises(ValueError, match="'ij' or 'xy'"):
        Tensor([1]).meshgrid(Tensor([2]), indexing="ji")
    with pytest.raises(ValueError, match="0-d or 1-d"):
        Tensor([[1]]).meshgrid(Tensor([2]))


@pytest.mark.parametrize("shape", [(3, 4), (4, 2), (2, 3, 4), (0, 3), (1, 1)])
@pytest.mark.parametrize("k", [-5, -1, 0, 1, 2, 6])
def test_triu_tril_match_numpy(shape, k):
    x = RNG.standard_normal(shape)
    np.testing.assert_array_equal(Tensor(x).triu(k).numpy(), np.triu(x, k))
    np.testing.assert_array_equal(Tensor(x).tril(diagonal=k).numpy(), np.tril(x, k))


def test_triu_tril_reference_examples_and_errors():
    t = Tensor([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]])
    a = np.arange(1, 13).reshape(3, 4)
    for k in (0, 1, -1):
        np.testing.assert_array_equal(t.triu(diagonal=k).numpy(), np.triu(a, k))
        np.testing.assert_array_equal(t.tril(diagonal=k).numpy(), np.tril(a, k))
    assert t.triu().dtype == dtypes.int32
    m = Tensor(np.ones((3, 3), bool)).tril(-1)
    assert m.dtype == dtypes.bool and m.numpy().sum() == 3
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        Tensor([1, 2]).triu()


# ---------------------------------------------------------------------------- interpolate

def interp_case(i: int):
    f = FIX
    return (f[f"interp{i}_x"], tuple(int(s) for s in f[f"interp{i}_size"]),
            str(f[f"interp{i}_mode"]), bool(f[f"interp{i}_align"]))


@pytest.mark.parametrize("i", fixture_cases("interp"))
def test_interpolate_matches_torch(i):
    x, size, mode, align = interp_case(i)
    got = Tensor(x).interpolate(size, mode=mode, align_corners=align)
    np.testing.assert_allclose(got.numpy(), FIX[f"interp{i}_out"], rtol=1e-5, atol=1e-6)
    got = traced(lambda t: t.interpolate(size, mode, align), x)
    np.testing.assert_allclose(got.numpy(), FIX[f"interp{i}_out"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("i", fixture_cases("interp"))
def test_interpolate_jvp_matches_torch_grad(i):
    x, size, mode, align = interp_case(i)
    check_adjoint(lambda t: t.interpolate(size, mode, align), x, FIX[f"interp{i}_w"],
                  FIX[f"interp{i}_grad"], rtol=1e-4)


@needs_grad
@pytest.mark.parametrize("i", fixture_cases("interp"))
def test_interpolate_grad_matches_torch(i):
    x, size, mode, align = interp_case(i)
    w = Tensor(FIX[f"interp{i}_w"])
    g = fgrad.grad(lambda t: (t.interpolate(size, mode, align) * w).sum())(Tensor(x))
    np.testing.assert_allclose(g.numpy(), FIX[f"interp{i}_grad"], rtol=1e-4, atol=1e-5)


def test_interpolate_reference_example_and_batch_axes():
    t = Tensor([[1, 2, 3, 4], [21, 22, 23, 24], [41, 42, 43, 44]])
    out = t.interpolate(size=(2, 3), mode="linear")
    assert out.dtype == dtypes.int32
    np.testing.assert_array_equal(out.numpy(), [[6, 7, 8], [36, 37, 38]])
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    one = Tensor(x).interpolate((7,), "nearest").numpy()
    np.testing.assert_array_equal(one, x[..., np.minimum(np.floor(np.arange(7) * (4 / 7)),
                                                         3).astype(int)])


@pytest.mark.parametrize("size, mode, align, match", [
    ((3,), "cubic", False, "mode must be one of"),
    ((3, 3, 3, 3), "linear", False, "trailing axes"),
    ((3,), "bilinear", False, "exactly 2"),
    ((0,), "nearest", False, "positive"),
    ((3,), "nearest", True, "align_corners"),
])
def test_interpolate_errors(size, mode, align, match):
    with pytest.raises(ValueError, match=match):
        Tensor(np.zeros((2, 3, 4))).interpolate(size, mode=mode, align_corners=align)


# ---------------------------------------------------------------------------- core movement

def test_core_movement_methods_match_numpy():
    x = RNG.standard_normal((2, 3, 4))
    t = Tensor(x)
    np.testing.assert_array_equal(t.reshape(-1, 4).numpy(), x.reshape(-1, 4))
    np.testing.assert_array_equal(t.reshape(None, 12).numpy(), x.reshape(2, 12))
    np.testing.assert_array_equal(t.reshape((4, 6)).numpy(), x.reshape(4, 6))
    np.testing.assert_array_equal(t[:, :1].expand(-1, 5, -1).numpy(),
                                  np.broadcast_to(x[:, :1], (2, 5, 4)))
    np.testing.assert_array_equal(t.expand(3, 2, 3, 4).numpy(),
                                  np.broadcast_to(x, (3, 2, 3, 4)))
    np.testing.assert_array_equal(t.permute(2, 0, 1).numpy(), x.transpose(2, 0, 1))
    np.testing.assert_array_equal(t.permute((-1, 0, 1)).numpy(), x.transpose(2, 0, 1))
    np.testing.assert_array_equal(t.transpose().numpy(), x.swapaxes(1, 0))
    np.testing.assert_array_equal(t.transpose(-1, 0).numpy(), x.swapaxes(-1, 0))
    np.testing.assert_array_equal(t.flip(0, -1).numpy(), np.flip(x, (0, 2)))
    np.testing.assert_array_equal(t.flip((1,)).numpy(), np.flip(x, 1))
    np.testing.assert_array_equal(t.shrink(((1, 2), None, (0, 3))).numpy(), x[1:2, :, 0:3])
    np.testing.assert_array_equal(t.flatten().numpy(), x.reshape(-1))
    np.testing.assert_array_equal(t.flatten(1).numpy(), x.reshape(2, 12))
    np.testing.assert_array_equal(t.flatten(0, 1).numpy(), x.reshape(6, 4))
    np.testing.assert_array_equal(t.unflatten(2, (2, 2)).numpy(), x.reshape(2, 3, 2, 2))
    np.testing.assert_array_equal(t.unflatten(-1, (2, -1)).numpy(), x.reshape(2, 3, 2, 2))


def test_core_squeeze_unsqueeze():
    x = RNG.standard_normal((1, 3, 1))
    t = Tensor(x)
    assert t.squeeze().shape == (3,)
    assert t.squeeze(0).shape == (3, 1)
    assert t.squeeze(1).shape == (1, 3, 1)
    assert t.squeeze(-1).shape == (1, 3)
    assert t.unsqueeze(0).shape == (1, 1, 3, 1)
    assert t.unsqueeze(-1).shape == (1, 3, 1, 1)
    assert t.unsqueeze(2).shape == (1, 3, 1, 1)
    assert Tensor(2.0).unsqueeze(0).shape == (1,)
    assert Tensor(2.0).flatten().shape == (1,)
    with pytest.raises(IndexError):
        t.unsqueeze(5)


@needs_grad
def test_roll_repeat_cat_stack_grads_are_transposed_maps():
    x, y = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 2))

    def grad_of(fn, w, *args):
        return fgrad.grad(lambda *a: (fn(*a) * Tensor(w)).sum(),
                          argnums=tuple(range(len(args))))(*[Tensor(a) for a in args])
    w = RNG.standard_normal((3, 4))
    (g,) = grad_of(lambda a: a.roll((1, -3), (0, 1)), w, x)
    np.testing.assert_allclose(g.numpy(), np.roll(w, (-1, 3), (0, 1)))
    w = RNG.standard_normal((2, 6, 8))
    (g,) = grad_of(lambda a: a.repeat(2, 2, 2), w, x)
    np.testing.assert_allclose(g.numpy(), w.reshape(2, 2, 3, 2, 4).sum((0, 1, 3)))
    w = RNG.standard_normal((3, 6))
    gx, gy = grad_of(lambda a, b: a.cat(b, dim=1), w, x, y)
    np.testing.assert_allclose(gx.numpy(), w[:, :4])
    np.testing.assert_allclose(gy.numpy(), w[:, 4:])
    w = RNG.standard_normal((3, 2, 4))
    ga, gb = grad_of(lambda a, b: Tensor.stack(a, b, dim=1), w, x, x * 2)
    np.testing.assert_allclose(ga.numpy(), w[:, 0])
    np.testing.assert_allclose(gb.numpy(), w[:, 1])


@pytest.mark.skipif(not hasattr(fgrad, "vmap"), reason="fgrad.vmap not built yet")
@pytest.mark.parametrize("fn", [
    lambda a: a.pad((1, 2, 0, 1), "reflect"), lambda a: a.pad(((1, 0), (2, 2)), "circular"),
    lambda a: a.pad((-1, 2), "replicate"), lambda a: a.roll(2, 1), lambda a: a.repeat(2, 1),
    lambda a: a.repeat_interleave(2, 0), lambda a: a.interpolate((4, 7)),
    lambda a: a.interpolate((2, 9), "nearest-exact"), lambda a: a.triu(1),
    lambda a: a.cat(a * 2, dim=1), lambda a: a.split(2, 1)[1], lambda a: a.chunk(2, 0)[0],
])
def test_ops_under_vmap_match_a_loop(fn):
    x = RNG.standard_normal((4, 3, 5))
    got = fgrad.vmap(fn)(Tensor(x)).numpy()
    np.testing.assert_allclose(got, np.stack([fn(Tensor(r)).numpy() for r in x]))
