"""fgrad.tree_util's and fgrad.tree's further JAX helpers (tree_transpose, tree_broadcast,
reduce_associative, flatten_one_level, treedef helpers, class registration, static fields,
default_registry) against what JAX 0.10.2 returns (tests/fixtures/tree_more_jax.json, made by
tests/fixtures/gen_tree_more_jax.py), and under jit / grad / vmap."""
from __future__ import annotations

import builtins
import collections
import dataclasses
import json
import operator
import pathlib

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import Tensor
from fgrad import tree_util as tu

FIXTURE = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "tree_more_jax.json"
CASES = json.loads(FIXTURE.read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["expr"][:60] for c in CASES])
def test_matches_jax(case):
    env = {"tu": fgrad.tree_util, "tree": fgrad.tree, "op": operator,
           "collections": collections}
    if "error" in case:
        with pytest.raises(getattr(builtins, case["error"])):
            eval(case["expr"], env)
    else:
        assert repr(eval(case["expr"], env)) == case["repr"]


def test_every_new_name_is_importable_from_fgrad_tree_util():
    names = ["register_pytree_node_class", "register_pytree_with_keys_class",
             "register_static", "all_leaves", "tree_transpose", "treedef_children",
             "treedef_is_leaf", "treedef_tuple", "flatten_one_level",
             "flatten_one_level_with_keys", "is_tree_node", "tree_broadcast",
             "tree_reduce_associative", "default_registry"]
    module = __import__("fgrad.tree_util", fromlist=names)
    for name in names:
        assert getattr(module, name) is getattr(fgrad.tree_util, name)
        assert name in fgrad.tree_util.__all__
    for name in ("broadcast", "reduce_associative", "static"):
        assert name in fgrad.tree.__all__ and callable(getattr(fgrad.tree, name))


@tu.register_pytree_node_class
class Affine:
    """A pytree class registered through its methods: (w, b) are children, act is static."""

    def __init__(self, w, b, act="id"):
        self.w, self.b, self.act = w, b, act

    def __call__(self, x):
        y = x * self.w + self.b
        return fnp.tanh(y) if self.act == "tanh" else y

    def tree_flatten(self):
        return (self.w, self.b), self.act

    @classmethod
    def tree_unflatten(cls, act, children):
        return cls(*children, act)


def test_register_pytree_node_class_under_jit_grad_vmap():
    m = Affine(Tensor(2.0), Tensor(0.5), "tanh")
    x = Tensor(0.3)
    leaves, treedef = tu.tree_flatten(m)
    assert len(leaves) == 2 and "CustomNode(Affine['tanh']" in repr(treedef)
    back = tu.tree_unflatten(treedef, leaves)
    assert (back.w, back.b, back.act) == (m.w, m.b, "tanh")
    out = fgrad.jit(lambda mod, v: mod(v))(m, x)
    assert abs(float(out) - np.tanh(2.0 * 0.3 + 0.5)) < 1e-6
    g = fgrad.grad(lambda mod: mod(x))(m)
    assert isinstance(g, Affine) and g.act == "tanh"
    s = 1 - np.tanh(1.1) ** 2
    assert abs(float(g.w) - 0.3 * s) < 1e-6 and abs(float(g.b) - s) < 1e-6
    batch = Affine(Tensor([1.0, 2.0, 3.0]), Tensor([0.0, 0.0, 1.0]))
    ys = fgrad.vmap(lambda mod: mod(Tensor(2.0)))(batch)
    np.testing.assert_allclose(ys.numpy(), [2.0, 4.0, 7.0])
    stacked = fgrad.vmap(lambda w: Affine(w, w * 2))(Tensor([1.0, 2.0]))
    assert isinstance(stacked, Affine)
    np.testing.assert_allclose(stacked.b.numpy(), [2.0, 4.0])


@tu.register_pytree_with_keys_class
class Named:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def tree_flatten_with_keys(self):
        return [(tu.GetAttrKey("a"), self.a), (tu.GetAttrKey("b"), self.b)], None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


def test_register_pytree_with_keys_class_paths_and_jit():
    tree = {"n": Named(Tensor(1.0), [Tensor(2.0)])}
    paths = [tu.keystr(p) for p, _ in tu.tree_flatten_with_path(tree)[0]]
    assert paths == ["['n'].a", "['n'].b[0]"]
    assert tu.tree_leaves(tree) == [tree["n"].a, tree["n"].b[0]]
    out = fgrad.jit(lambda t: t["n"].a + t["n"].b[0])(tree)
    assert float(out) == 3.0
    with pytest.raises(TypeError, match="tree_flatten_with_keys"):
        tu.register_pytree_with_keys_class(type("NoKeys", (), {"tree_unflatten": 1}))


def test_register_static_is_part_of_the_structure_under_jit():
    @tu.register_static
    class Mode(str):
        pass

    calls = []

    @fgrad.jit
    def f(x, mode):
        calls.append(str(mode))
        return x + 1 if mode == "add" else x - 1

    assert float(f(Tensor(1.0), Mode("add"))) == 2.0
    assert float(f(Tensor(1.0), Mode("sub"))) == 0.0
    assert float(f(Tensor(5.0), Mode("add"))) == 6.0
    assert calls == ["add", "sub"]  # one trace per static value
    assert len(tu.tree_leaves((Tensor(1.0), Mode("x")))) == 1
    with pytest.raises(TypeError, match="not hashable"):
        tu.register_static(type("Unhashable", (), {"__hash__": None}))
    with pytest.raises(TypeError, match="expects a class"):
        tu.register_static(Mode("not a class"))


def test_tree_static_with_register_dataclass():
    @dataclasses.dataclass
    class Op:
        x: object
        y: object
        op: str = fgrad.tree.static(default="add")

    fgrad.tree.register_dataclass(Op)
    m = Op(Tensor([1.0, 2.0]), Tensor([3.0, 4.0]))
    leaves, treedef = fgrad.tree.flatten(m)
    assert len(leaves) == 2 and "('add',)" in repr(treedef)
    out = fgrad.jit(lambda o: o.x + o.y if o.op == "add" else o.x - o.y)(m)
    np.testing.assert_allclose(out.numpy(), [4.0, 6.0])


def test_transpose_errors_are_type_and_value_errors():
    outer, inner = tu.tree_structure([0, 0]), tu.tree_structure((0, 0, 0))
    with pytest.raises(TypeError, match=r"PyTreeDef\(\[\(\*, \*\), \(\*, \*\)\]\)"):
        tu.tree_transpose(outer, inner, [(1, 2), (4, 5)])
    with pytest.raises(ValueError, match="inner structure"):
        tu.tree_transpose(outer, inner, [(1, 2), (4, 5)])
    # JAX pairs leaves by position only; fgrad also checks the structure
    with pytest.raises(TypeError, match="inner structure"):
        tu.tree_transpose(outer, inner, [(1, 2, 3), [4, 5, 6]])
    with pytest.raises(ValueError, match="non-empty outer tree"):
        tu.tree_transpose(tu.tree_structure([]), None, [])
    with pytest.raises(TypeError, match="expects a PyTreeDef"):
        tu.tree_transpose([0, 0], inner, [(1, 2, 3), (4, 5, 6)])
    assert tu.tree_transpose(tu.tree_structure([]), inner, []) == ([], [], [])


def test_transpose_of_tensors_under_jit():
    rows = [{"a": Tensor(1.0), "b": Tensor(2.0)}, {"a": Tensor(3.0), "b": Tensor(4.0)}]
    outer, inner = tu.tree_structure([0, 0]), tu.tree_structure({"a": 0, "b": 0})
    out = fgrad.jit(lambda r: tu.tree_transpose(outer, inner, r))(rows)
    assert [float(v) for v in out["a"]] == [1.0, 3.0] and [float(v) for v in out["b"]] == [2.0, 4.0]


def test_broadcast_and_reduce_associative_with_tensors():
    full = {"w": Tensor(np.ones((2, 3), np.float32)), "b": [Tensor(1.0), Tensor(2.0)]}
    scales = fgrad.tree.broadcast({"w": 0.5, "b": 2.0}, full)
    assert scales == {"w": 0.5, "b": [2.0, 2.0]}
    scaled = fgrad.tree.map(lambda s, x: s * x, scales, full)
    assert float(scaled["b"][1]) == 4.0
    total = fgrad.tree.reduce_associative(operator.add, fgrad.tree.map(lambda x: x.sum(), full))
    assert float(total) == 9.0
    with pytest.raises(ValueError, match="tree.broadcast: prefix_tree must be a prefix"):
        fgrad.tree.broadcast({"w": 1, "c": 2}, full)
    with pytest.raises(TypeError, match="pass identity="):
        fgrad.tree.reduce_associative(operator.add, {"a": None})


def test_other_bad_inputs_say_what_is_wrong():
    with pytest.raises(TypeError, match="treedef_tuple expects a PyTreeDef"):
        tu.treedef_tuple([tu.tree_structure(1), (1, 2)])
    with pytest.raises(TypeError, match="treedef_children expects a PyTreeDef"):
        tu.treedef_children([1])
    with pytest.raises(ValueError, match="can't tree-flatten type <class 'int'>"):
        tu.flatten_one_level(3)
    with pytest.raises(ValueError, match="want 3 leaves, got 2"):
        tu.tree_structure([1, (2, 3)]).walk(lambda k, d: k, None, [1, 2])
    with pytest.raises(TypeError, match="tree_unflatten method"):
        tu.register_pytree_node_class(type("Half", (), {"tree_flatten": lambda s: ((), None)}))


def test_walk_without_leaf_function_and_compose_unflatten():
    td = tu.tree_structure({"a": (1, 2), "b": None})
    assert td.walk(lambda kids, data: kids, None, [5, 6]) == ((5, 6), ())
    composed = tu.tree_structure([0, 0]).compose(tu.tree_structure((0, 0)))
    assert composed == tu.tree_structure([(1, 2), (3, 4)])
    assert composed.unflatten(range(4)) == [(0, 1), (2, 3)]


def test_default_registry_forwards_to_the_registry():
    reg = tu.default_registry
    assert reg.flatten({"a": 1, "b": (2,)}) == tu.tree_flatten({"a": 1, "b": (2,)})
    assert reg.flatten([1, (2,)], lambda x: isinstance(x, tuple))[0] == [1, (2,)]
    assert reg.flatten_one_level(3) is None and reg.flatten_one_level_with_keys(3) is None
    assert reg.flatten_one_level((1, 2)) == ((1, 2), None)
    assert reg.is_node(dict) and not reg.is_node(int)
    paths = [tu.keystr(p) for p, _ in reg.flatten_with_path({"k": [1]})[0]]
    assert paths == ["['k'][0]"]

    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    reg.register_node(Pair, lambda p: ((p.a, p.b), None), lambda _, c: Pair(*c))
    assert tu.is_tree_node(Pair) and tu.tree_leaves(Pair(1, [2])) == [1, 2]

    @dataclasses.dataclass
    class DC:
        x: int
        y: int

    reg.register_dataclass_node(DC, ["x"], ["y"])
    assert tu.tree_leaves(DC(1, 2)) == [1]
