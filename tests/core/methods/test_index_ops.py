"""Tests for fgrad/core/methods/index_ops.py (gather, scatter, scatter_reduce, masked_fill,
masked_select, nonzero, one_hot, sort/argsort/topk) and the sort primitive, against NumPy and
PyTorch fixtures (tests/core/methods/fixtures/gen_movement_ops.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, dtypes
from fgrad.core.prims.sort import sort_p, top_k, top_k_p
from fgrad.core.staging import eval_jaxpr

FIX = np.load(Path(__file__).parent / "fixtures" / "movement_ops.npz")
RNG = np.random.default_rng(2)
needs_grad = pytest.mark.skipif(not hasattr(fgrad, "grad"), reason="fgrad.grad not built yet")
needs_vmap = pytest.mark.skipif(not hasattr(fgrad, "vmap"), reason="fgrad.vmap not built yet")


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


def np_scatter(x, dim, idx, src, op):
    """PyTorch's scatter written as the loop its documentation gives."""
    out = np.array(x)
    for p in np.ndindex(*idx.shape):
        q = p[:dim] + (idx[p],) + p[dim + 1:]
        value = src[p] if isinstance(src, np.ndarray) else src
        out[q] = value if op is None else (out[q] + value if op == "add" else out[q] * value)
    return out


# ---------------------------------------------------------------------------- gather

@pytest.mark.parametrize("shape, dim, ishape", [
    ((5,), 0, (7,)), ((3, 4), 1, (3, 6)), ((3, 4), 0, (2, 3)), ((2, 3, 4), -1, (2, 2, 5)),
    ((2, 3, 4), 1, (1, 0, 2)), ((), 0, ()),
])
def test_gather_matches_numpy(shape, dim, ishape):
    x = RNG.standard_normal(shape)
    n = shape[dim] if shape else 1
    idx = RNG.integers(0, n, ishape)
    cut = x[tuple(slice(0, i) if a != dim % max(len(shape), 1) else slice(None)
                  for a, i in enumerate(ishape))]
    want = np.take_along_axis(cut, idx, dim) if shape else x
    np.testing.assert_array_equal(Tensor(x).gather(dim, Tensor(idx)).numpy(), want)
    np.testing.assert_array_equal(traced(lambda a, b: a.gather(dim, b), x, idx).numpy(), want)


def test_gather_errors():
    x = Tensor(np.zeros((2, 3)))
    with pytest.raises(IndexError, match="index 3 is out of bounds for dim 1 with size 3"):
        x.gather(1, Tensor([[0, 3]]))
    with pytest.raises(IndexError, match="index -1"):
        x.gather(0, Tensor([[-1]]))
    with pytest.raises(ValueError, match="same\\s+number of dims"):
        x.gather(1, Tensor([0, 1]))
    with pytest.raises(ValueError, match="no larger sizes"):
        x.gather(1, Tensor([[0], [1], [0]]))
    with pytest.raises(TypeError, match="integer"):
        x.gather(1, Tensor([[0.0]]))


@needs_grad
def test_gather_grad_accumulates_repeated_indices():
    x = RNG.standard_normal((3, 4))
    idx = np.array([[0, 0, 3], [1, 1, 1], [2, 0, 2]])
    w = RNG.standard_normal((3, 3))
    g = fgrad.grad(lambda t: (t.gather(1, Tensor(idx)) * Tensor(w)).sum())(Tensor(x))
    want = np.zeros_like(x)
    for r, c in np.ndindex(*idx.shape):
        want[r, idx[r, c]] += w[r, c]
    np.testing.assert_allclose(g.numpy(), want)


# ---------------------------------------------------------------------------- scatter

def test_scatter_reference_examples():
    src = Tensor.arange(1, 11).reshape(2, 5)
    out = Tensor.zeros(3, 5, dtype=src.dtype).scatter(0, Tensor([[0, 1, 2, 0]]), src)
    np.testing.assert_array_equal(out.numpy(), [[1, 0, 0, 4, 0], [0, 2, 0, 0, 0],
                                                [0, 0, 3, 0, 0]])
    out = Tensor.zeros(3, 5, dtype=src.dtype).scatter(1, Tensor([[0, 1, 2], [0, 1, 4]]), src)
    np.testing.assert_array_equal(out.numpy(), [[1, 2, 3, 0, 0], [6, 7, 0, 0, 8],
                                                [0, 0, 0, 0, 0]])
    out = Tensor.full((2, 4), 2.0).scatter(1, Tensor([[2], [3]]), 1.23, reduce="multiply")
    np.testing.assert_allclose(out.numpy(), [[2, 2, 2.46, 2], [2, 2, 2, 2.46]], rtol=1e-6)
    out = Tensor.full((2, 4), 2.0).scatter(1, Tensor([[2], [3]]), 1.23, reduce="add")
    np.testing.assert_allclose(out.numpy(), [[2, 2, 3.23, 2], [2, 2, 2, 3.23]], rtol=1e-6)


@pytest.mark.parametrize("reduce", [None, "add", "multiply"])
@pytest.mark.parametrize("shape, dim, ishape", [((4, 5), 0, (3, 5)), ((4, 5), 1, (2, 9)),
                                                ((2, 3, 4), 2, (2, 2, 3)), ((3,), 0, (0,))])
def test_scatter_matches_loop(shape, dim, ishape, reduce):
    x = RNG.standard_normal(shape)
    src = RNG.standard_normal(tuple(s + 1 for s in ishape))
    if reduce is None:  # distinct targets, so the result does not depend on write order
        idx = np.argsort(RNG.random(ishape[:dim] + (shape[dim],) + ishape[dim + 1:]),
                         axis=dim)[tuple(slice(0, s) for s in ishape)]
    else:
        idx = RNG.integers(0, shape[dim], ishape)
    want = np_scatter(x, dim, idx, src, {"multiply": "mul"}.get(reduce, reduce))
    got = Tensor(x).scatter(dim, Tensor(idx), Tensor(src), reduce)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    got = traced(lambda a, i, s: a.scatter(dim, i, s, reduce), x, idx, src)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


def test_scatter_errors():
    x = Tensor(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="reduce must be None, 'add' or 'multiply'"):
        x.scatter(0, Tensor([[0]]), 1.0, reduce="sum")
    with pytest.raises(IndexError, match="index 2 is out of bounds for dim 0"):
        x.scatter(0, Tensor([[2]]), 1.0)
    with pytest.raises(ValueError, match="src of shape"):
        x.scatter(0, Tensor([[0, 1]]), Tensor([1.0]))


def scatter_case(i: int):
    f = FIX
    return f[f"scat{i}_x"], int(f[f"scat{i}_dim"]), f[f"scat{i}_idx"], f[f"scat{i}_src"]


REDUCTIONS = [(i, r, inc) for i in range(int(FIX["n_scatter"]))
              for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)]


@pytest.mark.parametrize("i, reduce, include_self", REDUCTIONS)
def test_scatter_reduce_matches_torch(i, reduce, include_self):
    x, dim, idx, src = scatter_case(i)
    key = f"scat{i}_{reduce}_{int(include_self)}"
    got = Tensor(x).scatter_reduce(dim, Tensor(idx), Tensor(src), reduce, include_self)
    np.testing.assert_allclose(got.numpy(), FIX[key], rtol=1e-10)
    xi, srci = FIX[f"scat{i}_xi"], FIX[f"scat{i}_srci"]
    got = Tensor(xi).scatter_reduce(dim, Tensor(idx), Tensor(srci), reduce,
                                    include_self=include_self)
    np.testing.assert_array_equal(got.numpy(), FIX[key + "_int"])


@needs_grad
@pytest.mark.parametrize("i, reduce, include_self", REDUCTIONS)
def test_scatter_reduce_grad_matches_torch(i, reduce, include_self):
    x, dim, idx, src = scatter_case(i)
    key = f"scat{i}_{reduce}_{int(include_self)}"
    w = Tensor(FIX[key + "_w"])

    def loss(a, s):
        return (a.scatter_reduce(dim, Tensor(idx), s, reduce, include_self) * w).sum()
    gx, gs = fgrad.grad(loss, argnums=(0, 1))(Tensor(x), Tensor(src))
    np.testing.assert_allclose(gx.numpy(), FIX[key + "_gx"], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(gs.numpy(), FIX[key + "_gsrc"], rtol=1e-8, atol=1e-10)


def test_scatter_reduce_reference_examples():
    src = Tensor.arange(1, 11).cast(dtypes.float).reshape(2, 5)
    index = Tensor([[0, 0, 0, 0, 0], [0, 0, 0, 0, 0]])
    ones = Tensor.ones(1, 5, dtype=src.dtype)
    np.testing.assert_array_equal(ones.scatter_reduce(0, index, src, reduce="sum").numpy(),
                                  [[8, 10, 12, 14, 16]])
    np.testing.assert_array_equal(ones.scatter_reduce(0, index, src, reduce="prod").numpy(),
                                  [[6, 14, 24, 36, 50]])
    got = ones.scatter_reduce(0, index, src, reduce="mean", include_self=False)
    np.testing.assert_array_equal(got.numpy(), [[3.5, 4.5, 5.5, 6.5, 7.5]])
    base = Tensor([[-10, 20, 0, 5, 10]], dtype=src.dtype)
    np.testing.assert_array_equal(base.scatter_reduce(0, index, src, reduce="amax").numpy(),
                                  [[6, 20, 8, 9, 10]])
    np.testing.assert_array_equal(base.scatter_reduce(0, index, src, reduce="amin").numpy(),
                                  [[-10, 2, 0, 4, 5]])
    with pytest.raises(ValueError, match="reduce must be one of"):
        base.scatter_reduce(0, index, src, reduce="max")


@needs_grad
def test_scatter_add_grad():
    x, src = RNG.standard_normal((3, 4)), RNG.standard_normal((2, 4))
    idx = np.array([[0, 2, 2, 1], [0, 0, 2, 1]])
    w = RNG.standard_normal((3, 4))
    gx, gs = fgrad.grad(lambda a, s: (a.scatter(0, Tensor(idx), s, reduce="add")
                                      * Tensor(w)).sum(), argnums=(0, 1))(Tensor(x),
                                                                          Tensor(src))
    np.testing.assert_allclose(gx.numpy(), w)
    np.testing.assert_allclose(gs.numpy(), np.take_along_axis(w, idx, 0))


# ---------------------------------------------------------------------------- masks

@pytest.mark.parametrize("shape, mshape", [((2, 3), (2, 3)), ((2, 3), (3,)), ((4,), (1,)),
                                           ((), ()), ((0, 2), (2,))])
def test_masked_fill_matches_numpy(shape, mshape):
    x = RNG.standard_normal(shape)
    m = RNG.random(mshape) < 0.5
    np.testing.assert_array_equal(Tensor(x).masked_fill(Tensor(m), -7).numpy(),
                                  np.where(m, -7, x))
    v = RNG.standard_normal(shape[-1:])
    np.testing.assert_array_equal(Tensor(x).masked_fill(Tensor(m), Tensor(v)).numpy(),
                                  np.where(m, v, x))


def test_masked_fill_reference_examples_and_errors():
    t = Tensor([1, 2, 3, 4, 5])
    mask = Tensor([True, False, True, False, False])
    np.testing.assert_array_equal(t.masked_fill(mask, -12).numpy(), [-12, 2, -12, 4, 5])
    out = t.masked_fill(mask, Tensor([-1, -2, -3, -4, -5]))
    np.testing.assert_array_equal(out.numpy(), [-1, 2, -3, 4, 5])
    assert t.masked_fill(mask, 2.7).dtype == dtypes.int32
    with pytest.raises(TypeError, match="bool Tensor"):
        t.masked_fill(Tensor([1, 0, 1, 0, 0]), 0)
    with pytest.raises(ValueError, match=r"mask of shape \(2,\) does not broadcast"):
        t.masked_fill(Tensor([True, False]), 0)


@pytest.mark.parametrize("shape, mshape", [((3, 3), (3, 3)), ((2, 3), (3,)), ((5,), (5,)),
                                           ((0,), (0,)), ((), ())])
def test_masked_select_matches_numpy(shape, mshape):
    x = RNG.standard_normal(shape)
    m = RNG.random(mshape) < 0.5
    want = np.broadcast_to(x, np.broadcast_shapes(x.shape, m.shape))[
        np.broadcast_to(m, np.broadcast_shapes(x.shape, m.shape))]
    np.testing.assert_array_equal(Tensor(x).masked_select(Tensor(m)).numpy(), want)
    for size in (0, want.size + 2, max(want.size - 1, 0)):
        got = traced(lambda a, b: a.masked_select(b, size=size, fill_value=9.5), x, m)
        padded = np.concatenate([want, np.full(max(size - want.size, 0), 9.5)])[:size]
        np.testing.assert_array_equal(got.numpy(), padded)


def test_masked_select_reference_example_and_tracing():
    t = Tensor([[0, 1, 2], [3, 4, 5], [6, 7, 8]])
    mask = Tensor([[True, False, True], [False, True, False], [False, False, True]])
    np.testing.assert_array_equal(t.masked_select(mask).numpy(), [0, 2, 4, 8])
    with pytest.raises(ValueError, match="pass size=N"):
        fgrad.make_jaxpr(lambda a, m: a.masked_select(m))(t, mask)
    got = traced(lambda a: a.masked_select(mask), t.numpy())  # concrete mask: size is known
    np.testing.assert_array_equal(got.numpy(), [0, 2, 4, 8])
    with pytest.raises(TypeError, match="bool Tensor"):
        t.masked_select(t)


@needs_grad
def test_masked_select_grad():
    x = RNG.standard_normal((3, 4))
    m = RNG.random((3, 4)) < 0.5
    w = RNG.standard_normal(6)
    g = fgrad.grad(lambda a: (a.masked_select(Tensor(m), size=6) * Tensor(w)).sum())(Tensor(x))
    want = np.zeros(x.size)
    k = min(int(m.sum()), 6)
    want[np.flatnonzero(m)[:k]] = w[:k]
    np.testing.assert_allclose(g.numpy(), want.reshape(x.shape))


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 2), (0, 3), ()])
def test_nonzero_matches_numpy(shape):
    x = RNG.integers(0, 3, shape) * (RNG.random(shape) < 0.5)
    want = np.argwhere(x)
    got = Tensor(x).nonzero()
    assert got.dtype == dtypes.int32
    np.testing.assert_array_equal(got.numpy(), want.reshape(want.shape[0], len(shape)))
    for size in (want.shape[0] + 3, max(want.shape[0] - 1, 0)):
        got = traced(lambda a: a.nonzero(size=size), x)
        padded = np.concatenate([want, np.full((3, len(shape)), -1)])[:size]
        np.testing.assert_array_equal(got.numpy(), padded.reshape(size, len(shape)))


def test_nonzero_reference_examples_and_tracing():
    np.testing.assert_array_equal(Tensor([1, 0, 2, 0, 3]).nonzero().numpy(), [[0], [2], [4]])
    np.testing.assert_array_equal(Tensor([[1, 0], [0, 2]]).nonzero().numpy(), [[0, 0], [1, 1]])
    np.testing.assert_array_equal(Tensor([True, False]).nonzero(size=2, fill_value=7).numpy(),
                                  [[0], [7]])
    with pytest.raises(ValueError, match="nonzero: .*pass size=N"):
        fgrad.make_jaxpr(lambda a: a.nonzero())(Tensor([1, 0]))


@needs_vmap
def test_masked_select_and_nonzero_under_vmap():
    x = RNG.integers(0, 2, (4, 6))
    got = fgrad.vmap(lambda r: r.nonzero(size=6, fill_value=-1))(Tensor(x))
    for row, g in zip(x, got.numpy(), strict=True):
        nz = np.flatnonzero(row)
        np.testing.assert_array_equal(g[:, 0], np.concatenate([nz, -np.ones(6 - nz.size)]))
    vals = fgrad.vmap(lambda r: r.masked_select(r > 0, size=6))(Tensor(x * 3))
    for row, g in zip(x * 3, vals.numpy(), strict=True):
        sel = row[row > 0]
        np.testing.assert_array_equal(g, np.concatenate([sel, np.zeros(6 - sel.size)]))


# ---------------------------------------------------------------------------- one_hot

@pytest.mark.parametrize("shape, classes", [((5,), 5), ((2, 3), 7), ((0,), 3), ((), 4)])
def test_one_hot_matches_numpy(shape, classes):
    x = RNG.integers(0, classes, shape)
    got = Tensor(x).one_hot(classes)
    assert got.dtype == dtypes.int32
    np.testing.assert_array_equal(got.numpy(), np.eye(classes, dtype=np.int32)[x])
    if x.size:
        np.testing.assert_array_equal(Tensor(x).one_hot().numpy(),
                                      np.eye(x.max() + 1, dtype=np.int32)[x])


def test_one_hot_reference_example_and_errors():
    np.testing.assert_array_equal(Tensor([0, 1, 3, 3, 4]).one_hot(5).numpy(),
                                  np.eye(5, dtype=int)[[0, 1, 3, 3, 4]])
    got = traced(lambda a: a.one_hot(4), np.array([3, 0]))
    np.testing.assert_array_equal(got.numpy(), [[0, 0, 0, 1], [1, 0, 0, 0]])
    with pytest.raises(ValueError, match="pass num_classes"):
        fgrad.make_jaxpr(lambda a: a.one_hot())(Tensor([1, 2]))
    with pytest.raises(TypeError, match="integer"):
        Tensor([1.0]).one_hot(3)
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        Tensor([0, 3]).one_hot(3)
    with pytest.raises(ValueError, match="empty"):
        Tensor(np.zeros(0, np.int32)).one_hot()


# ---------------------------------------------------------------------------- sort / topk

@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_matches_torch_with_ties_and_nan(dim, descending):
    x = FIX["sort_x"]
    key = f"sort_{dim}_{int(descending)}"
    values, indices = Tensor(x).sort(dim=dim, descending=descending)
    np.testing.assert_array_equal(values.numpy(), FIX[key + "_v"])
    np.testing.assert_array_equal(indices.numpy(), FIX[key + "_i"])
    assert indices.dtype == dtypes.int32
    np.testing.assert_array_equal(Tensor(x).argsort(dim, descending).numpy(), FIX[key + "_i"])
    values, indices = traced(lambda a: a.sort(dim, descending), x)
    np.testing.assert_array_equal(indices.numpy(), FIX[key + "_i"])


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.bool_, np.float16, np.int64])
@pytest.mark.parametrize("shape, dim", [((9,), 0), ((3, 7), 0), ((2, 3, 5), -1), ((4, 0), 1)])
def test_sort_is_stable_for_every_dtype(dtype, shape, dim):
    x = RNG.integers(0, 3, shape).astype(dtype)
    for descending in (False, True):
        key = -x.astype(np.int64) if descending else x
        want_i = np.argsort(key, axis=dim, kind="stable")
        values, indices = Tensor(x).sort(dim, descending)
        np.testing.assert_array_equal(indices.numpy(), want_i)
        np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, want_i, dim))


def test_sort_reference_examples_and_scalar():
    t = Tensor([[0.1, 0.5, 1.2, 3.4, 2.1], [2.2, 1.9, 0.3, 4.5, 0.8]])
    values, indices = t.sort(dim=1, descending=True)
    np.testing.assert_allclose(values.numpy(), [[3.4, 2.1, 1.2, 0.5, 0.1],
                                                [4.5, 2.2, 1.9, 0.8, 0.3]])
    np.testing.assert_array_equal(indices.numpy(), [[3, 4, 2, 1, 0], [3, 0, 1, 4, 2]])
    np.testing.assert_array_equal(Tensor([[2, 3, 4, 1], [1, 4, 3, 2]]).argsort().numpy(),
                                  [[3, 0, 1, 2], [0, 3, 2, 1]])
    values, indices = t.topk(2, dim=1)
    np.testing.assert_allclose(values.numpy(), [[3.4, 2.1], [4.5, 2.2]])
    np.testing.assert_array_equal(indices.numpy(), [[3, 4], [3, 0]])
    values, indices = Tensor(2.5).sort()
    assert values.item() == 2.5 and indices.item() == 0 and indices.shape == ()


@pytest.mark.parametrize("k, dim, largest", [(3, 1, True), (3, 1, False), (0, 0, True),
                                             (3, 0, False), (9, -1, True)])
def test_topk_is_the_head_of_a_stable_sort(k, dim, largest):
    x = FIX["sort_x"][:, :9]
    values, indices = Tensor(x).topk(k, dim=dim, largest=largest)
    v, i = FIX[f"sort_{dim % 2}_{int(largest)}_v"], FIX[f"sort_{dim % 2}_{int(largest)}_i"]
    cut = tuple(slice(0, k) if a == dim % 2 else slice(None) for a in range(2))
    np.testing.assert_array_equal(values.numpy(), v[cut])
    np.testing.assert_array_equal(indices.numpy(), i[cut])


def test_topk_errors():
    with pytest.raises(ValueError, match="k=4 is out of range for dim -1 of size 3"):
        Tensor([1, 2, 3]).topk(4)
    with pytest.raises(TypeError, match="expected an int"):
        Tensor([1, 2, 3]).topk(1.5)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_jvp_and_grad_match_torch(descending):
    x, w = FIX["sortgrad_x"], FIX["sortgrad_w"]
    grad = FIX[f"sortgrad_{int(descending)}"]
    t = RNG.standard_normal(x.shape)
    _, dot = jvp_fn()(lambda a: a.sort(0, descending)[0], (Tensor(x),), (Tensor(t),))
    assert float(np.sum(w * dot.numpy())) == pytest.approx(float(np.sum(grad * t)))
    if hasattr(fgrad, "grad"):
        g = fgrad.grad(lambda a: (a.sort(0, descending)[0] * Tensor(w)).sum())(Tensor(x))
        np.testing.assert_allclose(g.numpy(), grad)


@needs_grad
def test_topk_grad_flows_to_selected_entries():
    x = RNG.standard_normal((3, 5))
    g = fgrad.grad(lambda a: a.topk(2, dim=1)[0].sum())(Tensor(x))
    want = np.zeros_like(x)
    np.put_along_axis(want, np.argsort(-x, axis=1)[:, :2], 1.0, axis=1)
    np.testing.assert_array_equal(g.numpy(), want)


@needs_vmap
@pytest.mark.parametrize("in_axis", [0, 1])
def test_sort_batch_rule_matches_loop(in_axis):
    x = RNG.integers(0, 4, (3, 5)).astype(np.float32)
    values, indices = fgrad.vmap(lambda r: r.sort(descending=True), in_axes=in_axis)(Tensor(x))
    rows = x if in_axis == 0 else x.T
    for r, v, i in zip(rows, values.numpy(), indices.numpy(), strict=True):
        want = np.argsort(-r, kind="stable")
        np.testing.assert_array_equal(i, want)
        np.testing.assert_array_equal(v, r[want])


def test_sort_primitive_rules():
    from fgrad.core.ir import ShapedArray
    outs = sort_p.abstract_eval(ShapedArray((2, 3), dtypes.float16), descending=False)
    assert [o.shape for o in outs] == [(2, 3), (2, 3)]
    assert [o.dtype for o in outs] == [dtypes.float16, dtypes.int32]
    with pytest.raises(ValueError, match="sort: the operand must have at least one axis"):
        sort_p.abstract_eval(ShapedArray((), dtypes.float32), descending=False)
    for rule in ("abstract_eval", "impl", "jvp", "batch"):
        assert sort_p.rule(rule) is not None


def test_top_k_primitive_rules():
    from fgrad.core.ir import ShapedArray
    outs = top_k_p.abstract_eval(ShapedArray((2, 3, 7), dtypes.bfloat16), k=4, descending=True)
    assert [o.shape for o in outs] == [(2, 3, 4), (2, 3, 4)]
    assert [o.dtype for o in outs] == [dtypes.bfloat16, dtypes.int32]
    with pytest.raises(ValueError, match=r"top_k: the operand must have at least one axis.*"
                                         r"reshape a 0-d Tensor to \(1,\)"):
        top_k_p.abstract_eval(ShapedArray((), dtypes.float32), k=0, descending=True)
    with pytest.raises(ValueError, match=r"top_k: k=8 is out of range for an operand of shape "
                                         r"\(2, 7\).*pass 0 <= k <= 7"):
        top_k_p.abstract_eval(ShapedArray((2, 7), dtypes.float32), k=8, descending=True)
    with pytest.raises(ValueError, match="top_k: k=-1 is out of range"):
        top_k_p.abstract_eval(ShapedArray((7,), dtypes.float32), k=-1, descending=False)
    with pytest.raises(ValueError, match="top_k: k must be an int, got float"):
        top_k(Tensor([1.0, 2.0]), 1.5)
    for rule in ("abstract_eval", "impl", "jvp", "batch"):
        assert top_k_p.rule(rule) is not None


@pytest.mark.parametrize("descending", [False, True])
def test_top_k_impl_is_the_head_of_numpy_stable_argsort(descending):
    x = RNG.integers(-2, 3, (3, 4, 11)).astype(np.float32)
    x[0, 0, ::3] = np.nan
    x[1, 2, :4] = [-0.0, 0.0, -0.0, 0.0]
    values, indices = top_k(Tensor(x), 5, descending)
    key = np.where(np.isnan(x), np.inf, x) + 0.0   # NaN largest (x has no inf), -0.0 as 0.0
    want = np.argsort(-key if descending else key, axis=-1, kind="stable")[..., :5]
    np.testing.assert_array_equal(indices.numpy(), want)
    np.testing.assert_array_equal(np.signbit(values.numpy()),
                                  np.signbit(np.take_along_axis(x, want, -1)))


@needs_grad
@pytest.mark.parametrize("backend", [None, "llvm"])
def test_topk_grad_matches_finite_differences(backend):
    """d/dx sum(w * topk(x).values), eager and under jit, against central differences."""
    import fgrad.lower  # noqa: F401  (the llvm compiler)
    x = RNG.permutation(60).reshape(4, 15) * 0.5 + RNG.uniform(0, 0.1, (4, 15))
    w = RNG.standard_normal((4, 3))

    def loss(a):
        return (a.topk(3, dim=1)[0] * Tensor(w)).sum()
    grad = fgrad.grad(loss)
    g = (fgrad.jit(grad, backend=backend) if backend else grad)(Tensor(x)).numpy()
    eps, fd = 1e-4, np.zeros_like(x)
    for p in np.ndindex(*x.shape):
        up, down = x.copy(), x.copy()
        up[p] += eps
        down[p] -= eps
        fd[p] = (loss(Tensor(up)).item() - loss(Tensor(down)).item()) / (2 * eps)
    np.testing.assert_allclose(g, fd, atol=1e-6)


@needs_vmap
@pytest.mark.parametrize("in_axis", [0, 1])
def test_topk_batch_rule_matches_loop(in_axis):
    x = RNG.integers(0, 4, (3, 6)).astype(np.float32)
    eager = fgrad.vmap(lambda r: r.topk(2, largest=False), in_axes=in_axis)
    jitted = fgrad.jit(fgrad.vmap(lambda r: r.topk(2), in_axes=in_axis), backend="llvm")
    for fn, largest in ((eager, False), (jitted, True)):
        values, indices = fn(Tensor(x))
        rows = x if in_axis == 0 else x.T
        for r, v, i in zip(rows, values.numpy(), indices.numpy(), strict=True):
            want = np.argsort(-r if largest else r, kind="stable")[:2]
            np.testing.assert_array_equal(i, want)
            np.testing.assert_array_equal(v, r[want])


@pytest.mark.parametrize("jitted", [False, True])
def test_lax_top_k_matches_numpy_largest_first(jitted):
    """fgrad.lax.top_k (JAX's signature): the k largest along the last axis, ties in
    original order, NaN largest; against NumPy's stable argsort of the negated keys."""
    x = np.array([[3.0, 1.0, np.nan, 3.0, 2.0], [0.0, -1.0, 5.0, 5.0, -0.0]], np.float32)
    fn = fgrad.jit(lambda a: fgrad.lax.top_k(a, 3)) if jitted else \
        (lambda a: fgrad.lax.top_k(a, 3))
    values, indices = fn(Tensor(x) if jitted else x)
    keys = np.where(np.isnan(x), -np.inf, -x)
    want = np.argsort(keys, axis=-1, kind="stable")[:, :3]
    np.testing.assert_array_equal(indices.numpy(), want)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, want, -1))
    assert indices.numpy().dtype == np.int32
