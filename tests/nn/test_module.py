"""fgrad.nn.Module: pytree behaviour, immutability, replace / tree_at, user subclasses."""
from __future__ import annotations

import copy
import itertools
from typing import ClassVar

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, nn
from fgrad.core import tree_util

pytestmark = pytest.mark.backends  # jit tests run per backend (conftest.py)


def _key(seed: int = 0) -> Tensor:
    return fgrad.random.key(seed)


class MLP(nn.Module):
    """Equinox style: fields assigned in __init__."""

    def __init__(self, sizes: list[int], *, key: Tensor) -> None:
        keys = fgrad.random.split(key, len(sizes) - 1)
        self.layers = [nn.Linear(a, b, key=keys[i])
                       for i, (a, b) in enumerate(itertools.pairwise(sizes))]
        self.sizes = sizes
        self.activation = Tensor.relu

    def __call__(self, x: Tensor) -> Tensor:
        for layer in self.layers[:-1]:
            x = self.activation(layer(x))
        return self.layers[-1](x)


class Affine(nn.Module):
    """Annotation style: __init__ generated from the fields."""

    scale: Tensor
    shift: Tensor
    name: str = "affine"
    kind: ClassVar[str] = "not a field"

    def __call__(self, x: Tensor) -> Tensor:
        return x * self.scale + self.shift


def _mlp() -> MLP:
    return MLP([3, 4, 2], key=_key(1))


# --------------------------------------------------------------------------- subclasses


def test_init_assignment_style_fields_and_state_dict_names():
    m = _mlp()
    assert list(vars(m)) == ["layers", "sizes", "activation"]
    assert m.sizes == (3, 4, 2)  # a list of static values is stored as a tuple
    paths = [tree_util.keystr(p) for p, _ in tree_util.tree_leaves_with_path(m)]
    assert paths == [".layers[0].weight", ".layers[0].bias", ".layers[1].weight",
                     ".layers[1].bias"]
    state = pytest.importorskip("fgrad.nn.state")
    assert list(state.get_state_dict(m)) == ["layers.0.weight", "layers.0.bias",
                                             "layers.1.weight", "layers.1.bias"]


def test_annotation_style_generated_init():
    a = Affine(Tensor([2.0]), shift=Tensor([1.0]))
    assert a.name == "affine" and list(vars(a)) == ["scale", "shift", "name"]
    np.testing.assert_allclose(a(Tensor([1.0, 3.0])).numpy(), [3.0, 7.0])
    assert Affine(Tensor([1.0]), Tensor([0.0]), "b").name == "b"
    assert "kind" not in vars(a)
    with pytest.raises(TypeError):
        Affine(Tensor([1.0]))  # shift is required
    with pytest.raises(TypeError):
        Affine(Tensor([1.0]), Tensor([0.0]), nme="typo")


def test_field_order_is_assignment_order():
    class Two(nn.Module):
        def __init__(self) -> None:
            self.b = Tensor([2.0])
            self.a = Tensor([1.0])

    assert [x.item() for x in tree_util.tree_leaves(Two())] == [2.0, 1.0]


def test_subclass_of_layer_calling_super_init_freezes_after_outer_init():
    class ScaledLinear(nn.Linear):
        def __init__(self, n: int, *, key: Tensor) -> None:
            super().__init__(n, n, key=key)
            self.gain = Tensor([3.0])  # must still be allowed here

        def __call__(self, x: Tensor) -> Tensor:
            return super().__call__(x) * self.gain

    m = ScaledLinear(2, key=_key())
    assert [tree_util.keystr(p) for p, _ in tree_util.tree_leaves_with_path(m)] == [
        ".weight", ".bias", ".gain"]
    with pytest.raises(nn.FrozenModuleError):
        m.gain = Tensor([1.0])


# --------------------------------------------------------------------------- immutability


def test_setattr_and_delattr_raise_and_mention_replace():
    m = nn.Linear(2, 3, key=_key())
    with pytest.raises(AttributeError, match=r"replace\(weight="):
        m.weight = Tensor.zeros(3, 2)
    with pytest.raises(AttributeError, match="replace"):
        m.new_field = 1
    with pytest.raises(AttributeError, match="immutable"):
        del m.bias


def test_replace_returns_new_module_and_keeps_original():
    m = nn.Linear(2, 3, key=_key())
    w = Tensor.ones(3, 2)
    m2 = m.replace(weight=w)
    assert m2.weight is w and m2.bias is m.bias and m.weight is not w
    assert type(m2) is nn.Linear
    with pytest.raises(nn.FrozenModuleError):
        m2.weight = m.weight
    with pytest.raises(TypeError, match="no field"):
        m.replace(wieght=w)


def test_replace_static_none_with_tensor_makes_it_a_child():
    m = nn.Linear(2, 3, bias=False, key=_key())
    assert len(tree_util.tree_leaves(m)) == 1
    m2 = m.replace(bias=Tensor.zeros(3))
    assert len(tree_util.tree_leaves(m2)) == 2


def test_static_fields_must_be_hashable():
    class Holder(nn.Module):
        def __init__(self, value: object) -> None:
            self.value = value

    assert Holder([1, [2, 3]]).value == (1, (2, 3))
    with pytest.raises(TypeError, match="hashable"):
        Holder({"a": 1})
    with pytest.raises(TypeError, match="Tensor"):
        Holder(np.zeros(3))
    hash(tree_util.tree_structure(Holder((1, "x"))))


# --------------------------------------------------------------------------- pytree


def test_flatten_unflatten_roundtrip_does_not_call_init():
    calls = []

    class Counted(nn.Module):
        def __init__(self) -> None:
            calls.append(1)
            self.w = Tensor([1.0, 2.0])
            self.eps = 0.5

    m = Counted()
    leaves, treedef = tree_util.tree_flatten(m)
    m2 = tree_util.tree_unflatten(treedef, [leaf * 2 for leaf in leaves])
    assert len(calls) == 1
    assert type(m2) is Counted and m2.eps == 0.5
    np.testing.assert_allclose(m2.w.numpy(), [2.0, 4.0])
    with pytest.raises(nn.FrozenModuleError):
        m2.eps = 1.0


def test_treedef_equality_depends_on_static_fields():
    a = nn.LayerNorm(3)
    b = nn.LayerNorm(3, eps=1e-3)
    assert tree_util.tree_structure(a) == tree_util.tree_structure(nn.LayerNorm(3))
    assert tree_util.tree_structure(a) != tree_util.tree_structure(b)


def test_tree_map_keeps_class_and_structure():
    m = _mlp()
    doubled = tree_util.tree_map(lambda x: x * 2, m)
    assert type(doubled) is MLP and doubled.sizes == m.sizes
    np.testing.assert_allclose(doubled.layers[1].bias.numpy(), 2 * m.layers[1].bias.numpy())
    shapes = tree_util.tree_map(lambda x: None, m)  # leaves replaced by non-Tensors
    assert tree_util.tree_structure(shapes) != tree_util.tree_structure(m)


def test_jit_of_function_taking_module():
    m = _mlp()
    x = Tensor(np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32))
    f = fgrad.jit(lambda model, x: model(x))
    np.testing.assert_allclose(f(m, x).numpy(), m(x).numpy(), rtol=1e-5, atol=1e-6)
    f(tree_util.tree_map(lambda t: t + 1, m), x)  # same structure: cache hit
    assert f.cache_info().misses == 1


def test_grad_with_respect_to_module_matches_numpy():
    m = nn.Linear(3, 2, key=_key())
    x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    ct = np.random.default_rng(2).standard_normal((4, 2)).astype(np.float32)
    g = fgrad.grad(lambda mod: (mod(Tensor(x)) * Tensor(ct)).sum())(m)
    assert type(g) is nn.Linear
    np.testing.assert_allclose(g.weight.numpy(), ct.T @ x, rtol=1e-5)
    np.testing.assert_allclose(g.bias.numpy(), ct.sum(0), rtol=1e-5)


def test_vmap_ensemble_created_over_keys():
    keys = fgrad.random.split(_key(3), 4)
    ensemble = fgrad.vmap(lambda k: nn.Linear(3, 2, key=k))(keys)
    assert type(ensemble) is nn.Linear and ensemble.weight.shape == (4, 2, 3)
    x = Tensor(np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32))
    ys = fgrad.vmap(lambda model, x: model(x), in_axes=(0, None))(ensemble, x)
    for i in range(4):
        single = nn.Linear(3, 2, key=keys[i])
        np.testing.assert_allclose(ensemble.weight.numpy()[i], single.weight.numpy())
        np.testing.assert_allclose(ys.numpy()[i], single(x).numpy(), rtol=1e-5, atol=1e-6)


def test_copy_keeps_module_frozen():
    m = nn.Linear(2, 2, key=_key())
    c = copy.copy(m)
    assert c.weight is m.weight
    with pytest.raises(nn.FrozenModuleError):
        c.weight = m.bias


# --------------------------------------------------------------------------- tree_at


def test_tree_at_replaces_leaf_submodule_and_several_nodes():
    m = _mlp()
    w = Tensor.zeros(4, 3)
    m2 = nn.tree_at(lambda t: t.layers[0].weight, m, replace=w)
    assert m2.layers[0].weight is w and m.layers[0].weight is not w
    assert m2.layers[1] is m.layers[1]  # untouched branches are shared
    new_layer = nn.Linear(4, 2, key=_key(9))
    m3 = nn.tree_at(lambda t: t.layers[1], m, replace=new_layer)
    assert m3.layers[1] is new_layer and m3.sizes == m.sizes
    b0, b1 = Tensor.ones(4), Tensor.ones(2)
    m4 = nn.tree_at(lambda t: (t.layers[0].bias, t.layers[1].bias), m, replace=(b0, b1))
    assert m4.layers[0].bias is b0 and m4.layers[1].bias is b1


def test_tree_at_replace_fn_and_errors():
    m = nn.Linear(2, 2, key=_key())
    m2 = nn.tree_at(lambda t: t.weight, m, replace_fn=lambda w: w * 0)
    np.testing.assert_allclose(m2.weight.numpy(), 0)
    with pytest.raises(ValueError, match="replace"):
        nn.tree_at(lambda t: t.eps, nn.LayerNorm(2), replace=1e-3)
    with pytest.raises(TypeError, match="exactly one"):
        nn.tree_at(lambda t: t.weight, m)
    with pytest.raises(ValueError, match="2 nodes"):
        nn.tree_at(lambda t: [t.weight, t.bias], m, replace=[m.bias])


def test_tree_at_on_plain_containers():
    tree = {"a": [Tensor([1.0]), Tensor([2.0])], "b": Tensor([3.0])}
    new = nn.tree_at(lambda t: t["a"][1], tree, replace=Tensor([5.0]))
    assert new["a"][1].item() == 5.0 and tree["a"][1].item() == 2.0
    assert new["b"] is tree["b"]
