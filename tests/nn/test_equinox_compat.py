"""Equinox's API in fgrad.nn (`import fgrad.nn as eqx`): filters, filtered transformations,
`field`, single-example layers (`eqx.nn`), tree helpers and an Equinox-style training loop.

The expectations are written by hand from Equinox's documented semantics (equinox itself is
not a test dependency)."""
from __future__ import annotations

import io
import math
from typing import Any, Callable

import numpy as np
import pytest

import fgrad
import fgrad.nn as eqx
from fgrad import Tensor, optim
from fgrad.core import tree_util as tu


def _key(seed: int = 0) -> Tensor:
    return fgrad.random.key(seed)


def _np(x: Any) -> np.ndarray:
    return x.numpy() if isinstance(x, Tensor) else np.asarray(x)


# --------------------------------------------------------------------------- predicates


def test_array_predicates():
    values = [Tensor([1.0]), Tensor(np.int32([1])), np.ones(2), np.int64(3), np.float32(1),
              1.0, 1, True, 2j, "s", None, abs]
    assert [eqx.is_array(v) for v in values] == [True] * 5 + [False] * 7
    assert [eqx.is_inexact_array(v) for v in values] == \
        [True, False, True, False, True] + [False] * 7
    assert [eqx.is_array_like(v) for v in values] == [True] * 9 + [False] * 3
    assert [eqx.is_inexact_array_like(v) for v in values] == \
        [True, False, True, False, True, True, False, False, True, False, False, False]
    assert eqx.if_array(1)(np.ones(2)) == 1 and eqx.if_array(1)(2.0) is None


# --------------------------------------------------------------------------- filter / partition


def _tree() -> list[Any]:
    return [(Tensor([1.0, 2.0]), 1), "s", {"a": 2.0, "b": Tensor(np.int32([3]))}]


def _show(tree: Any) -> Any:
    return tu.tree_map(lambda x: ("T", _np(x).tolist()) if isinstance(x, Tensor) else x, tree)


def test_filter_with_predicates_prefixes_inverse_and_replace():
    t = _tree()
    assert _show(eqx.filter(t, eqx.is_array)) == \
        [(("T", [1.0, 2.0]), None), None, {"a": None, "b": ("T", [3])}]
    assert _show(eqx.filter(t, eqx.is_inexact_array, inverse=True)) == \
        [(None, 1), "s", {"a": 2.0, "b": ("T", [3])}]
    spec = [False, True, {"a": True, "b": eqx.is_inexact_array}]  # bools and callables
    assert _show(eqx.filter(t, spec, replace=0)) == [(0, 0), "s", {"a": 2.0, "b": 0}]
    leafy = eqx.filter({"x": (1, 2)}, lambda v: isinstance(v, tuple),
                       is_leaf=lambda v: isinstance(v, tuple))
    assert leafy == {"x": (1, 2)}
    with pytest.raises(ValueError, match="structure"):
        eqx.filter(t, [True, False])
    with pytest.raises(ValueError, match="bools or callables"):
        eqx.filter(t, "yes")


def test_partition_combine_round_trip_and_trainable_default():
    t = _tree()
    arrays, rest = eqx.partition(t, eqx.is_array)
    assert _show(arrays) == [(("T", [1.0, 2.0]), None), None, {"a": None, "b": ("T", [3])}]
    assert rest == [(None, 1), "s", {"a": 2.0, "b": None}]
    back = eqx.combine(arrays, rest)
    assert all(a is b for a, b in zip(tu.tree_leaves(back), tu.tree_leaves(t)))
    bn = {"bn": eqx.BatchNorm(2), "lin": eqx.Linear(2, 2, key=_key())}
    params, buffers = eqx.partition(bn)  # no filter_spec: fgrad's trainable mask
    assert params["bn"].running_mean is None and buffers["bn"].running_mean is not None


def test_partition_with_a_mask_shaped_like_a_callable_module():
    """A bool mask built from a model (a Module with __call__) is a prefix, not a predicate."""
    lin = eqx.nn.Linear(2, 3, key=_key())
    mask = eqx.tree_at(lambda m: m.weight, tu.tree_map(lambda _: False, lin), replace=True)
    assert callable(mask)
    only_w, rest = eqx.partition(lin, mask)
    assert only_w.weight is lin.weight and only_w.bias is None and rest.bias is lin.bias


# --------------------------------------------------------------------------- Module fields


class Scaled(eqx.Module):
    weight: Tensor
    table: Tensor = eqx.field(static=True)
    scale: float = eqx.field(converter=float, default=1)
    tags: tuple = eqx.field(default_factory=tuple)

    def __post_init__(self) -> None:
        self.checked = False

    def __check_init__(self) -> None:
        if self.scale < 0:
            raise ValueError("scale must be >= 0")


def test_field_static_converter_factory_and_init_hooks():
    m = Scaled(Tensor([1.0]), Tensor([5.0, 6.0]), scale=2)
    assert type(m.scale) is float and m.tags == () and m.checked is False
    assert len(tu.tree_leaves(m)) == 1  # the static Tensor is structure, not a leaf
    g = eqx.filter_grad(lambda s: (s.weight * s.table.sum()).sum())(m)
    assert g.weight.item() == 11.0 and g.table is m.table
    with pytest.raises(ValueError, match="scale"):
        Scaled(Tensor([1.0]), Tensor([1.0]), scale=-1)
    with pytest.raises(TypeError, match="default"):
        eqx.field(default=1, default_factory=list)


# --------------------------------------------------------------------------- filter_jit


def test_filter_jit_traces_arrays_and_keys_on_static_values():
    traces: list[Any] = []

    @eqx.filter_jit
    def f(x: Tensor, scale: float, fn: Callable[[Tensor], Tensor], name: str = "a") -> Any:
        traces.append((tuple(x.shape), scale, name))
        return fn(x) * scale, name, [scale, None]

    x3 = Tensor(np.array([-1.0, 2.0, -3.0], np.float32))
    y, name, extra = f(x3, 2.0, abs)
    np.testing.assert_allclose(y.numpy(), [2.0, 4.0, 6.0])
    assert name == "a" and extra == [2.0, None]  # non-array outputs pass through
    f(Tensor(np.array([1.0, 1.0, 1.0], np.float32)), 2.0, abs)  # new values: cache hit
    f(x3, scale=2.0, fn=abs)  # keyword form of the same call
    assert len(traces) == 1
    f(x3, 3.0, abs)  # a new static value
    f(Tensor(np.ones(4, np.float32)), 3.0, abs)  # a new shape
    f(x3, 3.0, abs, "b")
    f(x3, 3, abs)  # 3 == 3.0, but another type: fgrad retraces (Equinox would not)
    assert [t[1:] for t in traces] == [(2.0, "a"), (3.0, "a"), (3.0, "a"), (3.0, "b"), (3, "a")]
    assert f.cache_info().misses == 5
    assert "jaxpr" in f.lower(x3, 2.0, abs).as_text()
    with pytest.raises(TypeError, match="unhashable"):
        f(x3, 2.0, abs, {1})  # a set is a leaf, and cannot be part of a cache key


def test_filter_jit_on_modules_methods_and_donation():
    class Net(eqx.Module):
        lin: eqx.nn.Linear
        depth: int

        @eqx.filter_jit
        def __call__(self, x: Tensor) -> Tensor:
            for _ in range(self.depth):
                x = self.lin(x).tanh()
            return x

    a, b = Net(eqx.nn.Linear(3, 3, key=_key(1)), 2), Net(eqx.nn.Linear(3, 3, key=_key(2)), 2)
    x = Tensor(np.ones(3, np.float32))
    want = np.tanh(b.lin.weight.numpy() @ np.tanh(b.lin.weight.numpy() @ x.numpy()
                                                  + b.lin.bias.numpy()) + b.lin.bias.numpy())
    a(x)
    np.testing.assert_allclose(b(x).numpy(), want, rtol=1e-5)  # model arrays are traced
    assert Net.__call__.cache_info().misses == 1
    step = eqx.filter_jit(lambda m, g: eqx.apply_updates(m, g), donate="all")
    lin = eqx.nn.Linear(2, 2, key=_key())
    new = step(lin, tu.tree_map(lambda w: w * 0, lin))
    np.testing.assert_allclose(new.weight.numpy(), eqx.nn.Linear(2, 2, key=_key()).weight.numpy())
    with pytest.raises(RuntimeError, match="donated"):
        lin.weight.numpy()
    spare = eqx.filter_jit(lambda m, g: eqx.apply_updates(m, g), donate="all-except-first")
    lin = eqx.nn.Linear(2, 2, key=_key())
    zeros = tu.tree_map(lambda w: w * 0, lin)
    spare(lin, zeros)
    assert lin.weight.numpy().shape == (2, 2)
    with pytest.raises(RuntimeError, match="donated"):
        zeros.weight.numpy()
    with pytest.raises(ValueError, match="donate"):
        eqx.filter_jit(lambda x: x, donate="some")


# --------------------------------------------------------------------------- filter_grad


class Model(eqx.Module):
    """Equinox style: an int field and an activation function field besides the arrays."""

    mlp: eqx.nn.MLP
    steps: int
    activation: Callable[[Tensor], Tensor]
    counter: Tensor

    def __call__(self, x: Tensor) -> Tensor:
        for _ in range(self.steps):
            x = self.activation(x)
        return (self.mlp(x) ** 2).sum() * (self.counter + 1)


def _model() -> Model:
    mlp = eqx.nn.MLP(3, 2, 4, 1, activation=eqx.tanh, dtype="float64", key=_key(3))
    return Model(mlp, 2, eqx.softplus, Tensor(np.int32(1)))


def _finite_difference(fn: Callable[[Model], Tensor], model: Model) -> list[np.ndarray]:
    """Central differences for every float leaf of `model`."""
    leaves, treedef = tu.tree_flatten(model)
    out = []
    for i, leaf in enumerate(leaves):
        if not eqx.is_inexact_array(leaf):
            continue
        grad = np.zeros(leaf.shape)
        for idx in np.ndindex(*leaf.shape):
            vals = []
            for eps in (1e-6, -1e-6):
                bumped = leaf.numpy().copy()
                bumped[idx] += eps
                vals.append(fn(treedef.unflatten(leaves[:i] + [Tensor(bumped)]
                                                 + leaves[i + 1:])).item())
            grad[idx] = (vals[0] - vals[1]) / 2e-6
        out.append(grad)
    return out


def test_filter_grad_matches_finite_differences():
    model, x = _model(), Tensor(np.array([0.3, -0.2, 0.5]))
    loss = lambda m, x: m(x)  # noqa: E731
    grads = eqx.filter_grad(loss)(model, x)
    assert grads.counter is None  # integer array: not differentiated
    assert grads.steps == 2 and grads.activation is eqx.softplus  # static: structure
    got = [g for g in tu.tree_leaves(grads)]
    want = _finite_difference(lambda m: loss(m, x), model)
    assert len(got) == len(want) == 4
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-8)
    value, grads2 = eqx.filter_value_and_grad(loss)(model, x)
    assert value.item() == pytest.approx(loss(model, x).item())
    assert eqx.tree_equal(grads, grads2) is True

    @eqx.filter_value_and_grad(has_aux=True)
    def with_aux(m: Model, x: Tensor) -> tuple[Tensor, str]:
        return m(x), "aux"

    (v, aux), g3 = with_aux(model, x)
    assert aux == "aux" and eqx.tree_equal(g3, grads, rtol=1e-12) is True
    g4, aux4 = eqx.filter_grad(has_aux=True)(lambda m, x: (m(x), 7))(model, x)
    assert aux4 == 7 and eqx.tree_equal(g4, grads) is True


def test_filter_grad_through_filter_jit_and_numpy_leaves():
    model, x = _model(), Tensor(np.array([0.3, -0.2, 0.5]))
    eager = eqx.filter_grad(lambda m, x: m(x))(model, x)
    jitted = eqx.filter_jit(eqx.filter_grad(lambda m, x: m(x)))(model, x)
    assert eqx.tree_equal(eager, jitted, rtol=1e-10, atol=1e-12) is True
    g = eqx.filter_grad(lambda t: (t["w"] ** 2).sum())({"w": np.array([1.0, 2.0]), "n": 3})
    np.testing.assert_allclose(g["w"].numpy(), [2.0, 4.0])
    assert g["n"] is None


# --------------------------------------------------------------------------- filter_vmap


def test_filter_vmap_axes():
    mlp = eqx.nn.MLP(3, 2, 4, 1, key=_key(4))
    xs = Tensor(np.random.RandomState(0).randn(5, 3).astype(np.float32))
    ys = eqx.filter_vmap(mlp)(xs)  # the model's arrays are closed over, not mapped
    assert ys.shape == (5, 2)
    np.testing.assert_allclose(ys.numpy()[2], mlp(xs[2]).numpy(), rtol=1e-5, atol=1e-6)

    def f(model: Any, x: Tensor, scale: float) -> Any:
        return model(x) * scale, scale, x

    out, scale, same = eqx.filter_vmap(f, in_axes=(None, 0, None), out_axes=(1, None, 0))(
        mlp, xs, 2.0)
    assert out.shape == (2, 5) and scale == 2.0 and same.shape == (5, 3)
    np.testing.assert_allclose(out.numpy(), 2 * ys.numpy().T, rtol=1e-5)
    summed = eqx.filter_vmap(lambda a, b: a + b, in_axes=dict(b=1))(xs, xs.T)
    np.testing.assert_allclose(summed.numpy(), 2 * xs.numpy())
    assert eqx.filter_vmap(lambda: Tensor.ones(2), axis_size=4)().shape == (4, 2)
    nested = eqx.filter_vmap(eqx.filter_vmap(lambda v: v * 2))(xs)
    np.testing.assert_allclose(nested.numpy(), 2 * xs.numpy())
    keys = fgrad.random.split(_key(), 4)  # an ensemble: one Linear per key, stacked
    ensemble = eqx.filter_vmap(lambda k: eqx.nn.Linear(3, 2, key=k))(keys)
    assert tuple(ensemble.weight.shape) == (4, 2, 3) and ensemble.in_features == 3
    np.testing.assert_array_equal(ensemble.weight.numpy()[1],
                                  eqx.nn.Linear(3, 2, key=keys[1]).weight.numpy())
    assert eqx.filter_vmap(lambda m, x: m(x))(ensemble, xs[:4]).shape == (4, 2)
    with pytest.raises(ValueError, match="only arrays"):
        eqx.filter_vmap(lambda a, s: a * s, in_axes=0)(xs, 2.0)
    with pytest.raises(RuntimeError, match="keyword"):
        eqx.filter_vmap(lambda a: a)(a=xs)
    with pytest.raises(ValueError, match="out_axes=None"):
        eqx.filter_vmap(lambda a: a, out_axes=None)(xs)


# --------------------------------------------------------------------------- eqx.nn layers


def test_mlp_shapes_and_init_ranges():
    mlp = eqx.nn.MLP(5, 3, 16, 2, key=_key())
    assert [tuple(layer.weight.shape) for layer in mlp.layers] == [(16, 5), (16, 16), (3, 16)]
    for layer, fan_in in zip(mlp.layers, (5, 16, 16)):
        for p in (layer.weight, layer.bias):
            assert np.abs(p.numpy()).max() <= 1 / math.sqrt(fan_in)
            assert np.abs(p.numpy()).max() > 0.5 / math.sqrt(fan_in)
    assert mlp(Tensor(np.ones(5, np.float32))).shape == (3,)
    assert len(eqx.nn.MLP(2, 2, 8, 0, key=_key()).layers) == 1
    scalar = eqx.nn.MLP("scalar", "scalar", 4, 1, use_final_bias=False, key=_key())
    assert scalar(Tensor(np.float32(0.5))).shape == () and scalar.layers[-1].bias is None
    lin = eqx.nn.Linear(4, 2, key=_key(1))  # the weights of fgrad.nn.Linear(4, 2)
    np.testing.assert_allclose(lin.weight.numpy(), eqx.Linear(4, 2, key=_key(1)).weight.numpy(),
                               rtol=1e-6)


def test_single_example_layers():
    img = Tensor(np.random.RandomState(1).randn(3, 8, 8).astype(np.float32))
    conv = eqx.nn.Conv2d(3, 4, 3, padding="SAME", stride=2, key=_key())
    assert conv.bias is not None and tuple(conv.bias.shape) == (4, 1, 1)
    assert conv(img).shape == (4, 4, 4)
    ref = img.reshape(1, 3, 8, 8).conv2d(conv.weight, conv.bias.reshape(4), stride=2,
                                        padding=(0, 1, 0, 1))
    np.testing.assert_allclose(conv(img).numpy(), ref.numpy()[0], rtol=1e-5, atol=1e-6)
    assert eqx.nn.Conv2d(3, 4, 3, padding=1, padding_mode="REFLECT", key=_key())(img).shape \
        == (4, 8, 8)
    with pytest.raises(ValueError, match="rank 3"):
        conv(img.reshape(1, 3, 8, 8))
    norm = eqx.nn.LayerNorm(4)
    v = Tensor(np.array([1.0, 2.0, 3.0, 6.0], np.float32))
    want = (v.numpy() - 3.0) / np.sqrt(3.5 + 1e-5)
    np.testing.assert_allclose(norm(v).numpy(), want, rtol=1e-5)
    with pytest.raises(ValueError, match="filter_vmap"):
        norm(v.reshape(1, 4))
    drop = eqx.nn.Dropout(0.5)
    dropped = drop(Tensor(np.ones(100, np.float32)), key=_key())
    assert set(np.unique(dropped.numpy())) <= {0.0, 2.0}
    with pytest.raises(RuntimeError, match="key"):
        drop(v)
    assert drop(v, inference=True) is not None
    seq = eqx.nn.Sequential([eqx.nn.Linear(4, 4, key=_key()), eqx.nn.Lambda(eqx.relu),
                             eqx.nn.Dropout(0.5), eqx.tanh])
    assert seq(v, key=_key()).shape == (4,) and len(seq[:2]) == 2
    quiet = eqx.nn.inference_mode(seq)
    assert quiet.layers[2].inference and not seq.layers[2].inference
    np.testing.assert_allclose(quiet(v).numpy(), seq[:2](v).tanh().numpy())
    emb = eqx.nn.Embedding(6, 3, key=_key())
    np.testing.assert_array_equal(emb(Tensor(np.int32(2))).numpy(), emb.weight.numpy()[2])
    assert eqx.nn.Identity(1, a=2)(v) is v


# --------------------------------------------------------------------------- tree helpers


def test_tree_equal_apply_updates_and_serialisation():
    a = [1, Tensor([1.0, 2.0]), np.ones(2)]
    assert eqx.tree_equal(a, [1, Tensor([1.0, 2.0]), np.ones(2)]) is True
    assert eqx.tree_equal(a, [2, Tensor([1.0, 2.0]), np.ones(2)]) is False
    assert eqx.tree_equal(a, [1, Tensor([1.0, 2.5]), np.ones(2)]) is False
    assert eqx.tree_equal([np.ones(2)], [np.ones(2, np.float32)]) is False  # dtypes differ
    assert eqx.tree_equal([Tensor([1.0])], [Tensor([1.0 + 1e-7])], rtol=1e-5) is True
    assert eqx.tree_equal([1], [1.0]) is True and eqx.tree_equal([1], [1.0], typematch=True) \
        is False
    traced = fgrad.jit(lambda x, y: eqx.tree_equal(x, y))(Tensor([1.0]), Tensor([1.0]))
    assert isinstance(traced, Tensor) and bool(traced.item())
    params = {"w": Tensor([1.0, 2.0]), "n": Tensor(np.int32([3]))}
    new = eqx.apply_updates(params, {"w": Tensor([0.5, 0.5]), "n": None})
    np.testing.assert_allclose(new["w"].numpy(), [1.5, 2.5])
    assert new["n"] is params["n"]

    model = eqx.nn.MLP(3, 2, 4, 1, key=_key(5))
    buf = io.BytesIO()
    eqx.tree_serialise_leaves(buf, model)
    buf.seek(0)
    back = eqx.tree_deserialise_leaves(buf, eqx.nn.MLP(3, 2, 4, 1, key=_key(6)))
    assert eqx.tree_equal(back, model) is True
    buf.seek(0)
    with pytest.raises(RuntimeError, match="on disk"):
        eqx.tree_deserialise_leaves(buf, eqx.nn.MLP(3, 2, 5, 1, key=_key(6)))


# --------------------------------------------------------------------------- training loop


def test_equinox_style_training_loop_lowers_the_loss():
    rng = np.random.RandomState(0)
    xs = Tensor(rng.uniform(-1, 1, (64, 2)).astype(np.float32))
    ys = Tensor(np.sin(3 * xs.numpy()[:, :1]) * xs.numpy()[:, 1:])
    model = eqx.nn.MLP(2, 1, 16, 2, activation=eqx.tanh, key=_key(7))
    opt = optim.Adam(1e-2)
    opt_state = opt.init(eqx.filter(model, eqx.is_inexact_array))

    def loss_fn(model: eqx.nn.MLP, x: Tensor, y: Tensor) -> Tensor:
        pred = eqx.filter_vmap(model)(x)
        return ((pred - y) ** 2).mean()

    @eqx.filter_jit
    def make_step(model: eqx.nn.MLP, opt_state: Any, x: Tensor, y: Tensor) -> Any:
        loss, grads = eqx.filter_value_and_grad(loss_fn)(model, x, y)
        updates, opt_state = opt.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), opt_state, loss

    losses = []
    for _ in range(60):
        model, opt_state, loss = make_step(model, opt_state, xs, ys)
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0]
    assert make_step.cache_info().misses == 1
