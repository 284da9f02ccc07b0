"""Tests for fgrad.core.tree_util (pytree flattening, key paths, registration)."""
import collections
import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrad.core import tree_util as tu

Point = collections.namedtuple("Point", ["x", "y"])


class Box:
    """A user class registered with plain flatten/unflatten functions."""

    def __init__(self, a, b, label):
        self.a, self.b, self.label = a, b, label

    def __eq__(self, other):
        return isinstance(other, Box) and (self.a, self.b, self.label) == (
            other.a,
            other.b,
            other.label,
        )


tu.register_pytree_node(Box, lambda b: ((b.a, b.b), b.label), lambda lab, c: Box(*c, lab))


@dataclasses.dataclass(frozen=True)
class Linear:
    weight: object
    bias: object
    name: str = "linear"


tu.register_dataclass(Linear, data_fields=["weight", "bias"], meta_fields=["name"])


@tu.register_dataclass
@dataclasses.dataclass(frozen=True)
class Pair:
    first: object
    second: object


class Keyed:
    """A user class registered with explicit key entries."""

    def __init__(self, w, b):
        self.w, self.b = w, b


tu.register_pytree_with_keys(
    Keyed,
    lambda k: ([(tu.GetAttrKey("w"), k.w), (tu.GetAttrKey("b"), k.b)], None),
    lambda _, c: Keyed(*c),
)


# ----------------------------------------------------------------------------- round trips

ROUND_TRIP_CASES = [
    ((), [], 0),
    ([], [], 0),
    ({}, [], 0),
    (None, [], 0),
    (5, [5], 1),
    ((1, 2, 3), [1, 2, 3], 3),
    ([1, [2, [3, []]]], [1, 2, 3], 3),
    ({"b": 1, "a": 2}, [2, 1], 2),
    ((1, None, [None, 2]), [1, 2], 2),
    (Point(1, (2, 3)), [1, 2, 3], 3),
    (collections.OrderedDict([("b", 1), ("a", 2)]), [1, 2], 2),
    (Box([1, 2], 3, "lbl"), [1, 2, 3], 3),
    (Linear(1, (2, 3)), [1, 2, 3], 3),
    ({"z": ((), [{}], None), "y": [Point([], {})]}, [], 0),
]


@pytest.mark.parametrize("tree, leaves, n", ROUND_TRIP_CASES)
def test_round_trip(tree, leaves, n):
    got_leaves, treedef = tu.tree_flatten(tree)
    assert got_leaves == leaves
    assert treedef.num_leaves == n
    rebuilt = tu.tree_unflatten(treedef, got_leaves)
    assert rebuilt == tree
    assert type(rebuilt) is type(tree)
    assert tu.tree_structure(rebuilt) == treedef


def test_none_is_a_node_not_a_leaf():
    assert tu.tree_leaves([None, 1, None]) == [1]
    assert tu.tree_structure(None).num_leaves == 0
    assert tu.tree_structure(None) != tu.tree_structure(0)


def test_unregistered_subclasses_are_leaves():
    class MyList(list):
        pass

    class MyDict(dict):
        pass

    tree = [MyList([1, 2]), MyDict(a=1)]
    leaves = tu.tree_leaves(tree)
    assert len(leaves) == 2 and leaves[0] is tree[0] and leaves[1] is tree[1]


def test_dict_keys_are_sorted_and_rebuilt_sorted():
    tree = {"c": 3, "a": 1, "b": 2}
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == [1, 2, 3]
    rebuilt = tu.tree_unflatten(treedef, ["A", "B", "C"])
    assert list(rebuilt) == ["a", "b", "c"]
    assert rebuilt == {"a": "A", "b": "B", "c": "C"}
    assert tu.tree_structure({"a": 0, "b": 0}) == tu.tree_structure({"b": 1, "a": 1})


def test_ordered_dict_keeps_insertion_order():
    tree = collections.OrderedDict([("z", 1), ("a", 2)])
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == [1, 2]
    rebuilt = tu.tree_unflatten(treedef, [10, 20])
    assert type(rebuilt) is collections.OrderedDict
    assert list(rebuilt.items()) == [("z", 10), ("a", 20)]
    assert treedef != tu.tree_structure({"z": 1, "a": 2})


def test_defaultdict_sorted_keeps_factory():
    tree = collections.defaultdict(list, {"b": 1, "a": 2})
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == [2, 1]
    rebuilt = tu.tree_unflatten(treedef, [7, 8])
    assert type(rebuilt) is collections.defaultdict
    assert rebuilt.default_factory is list
    assert dict(rebuilt) == {"a": 7, "b": 8}
    assert rebuilt["missing"] == []


def test_namedtuple_rebuilt_as_same_type():
    treedef = tu.tree_structure(Point(1, 2))
    rebuilt = tu.tree_unflatten(treedef, ["u", "v"])
    assert type(rebuilt) is Point and rebuilt.x == "u" and rebuilt.y == "v"
    assert treedef != tu.tree_structure((1, 2))


def test_registered_class_aux_data_preserved():
    leaves, treedef = tu.tree_flatten(Box(1, [2, 3], "hello"))
    assert leaves == [1, 2, 3]
    rebuilt = tu.tree_unflatten(treedef, [4, 5, 6])
    assert rebuilt == Box(4, [5, 6], "hello")
    assert treedef != tu.tree_structure(Box(1, [2, 3], "other"))


def test_register_dataclass_frozen():
    leaves, treedef = tu.tree_flatten(Linear(weight=[1, 2], bias=3, name="fc"))
    assert leaves == [1, 2, 3]
    rebuilt = tu.tree_unflatten(treedef, [10, 20, 30])
    assert rebuilt == Linear(weight=[10, 20], bias=30, name="fc")
    assert treedef != tu.tree_structure(Linear(weight=[1, 2], bias=3, name="other"))


def test_register_dataclass_as_decorator_all_fields_are_data():
    assert tu.tree_leaves(Pair(1, (2, 3))) == [1, 2, 3]
    assert tu.tree_map(lambda x: x * 2, Pair(1, [2])) == Pair(2, [4])


def test_register_dataclass_static_metadata_and_validation():
    @dataclasses.dataclass
    class Cfg:
        value: object
        size: int = dataclasses.field(default=1, metadata={"static": True})

    tu.register_dataclass(Cfg)
    assert tu.tree_leaves(Cfg(5, 2)) == [5]
    assert tu.tree_unflatten(tu.tree_structure(Cfg(5, 2)), [9]) == Cfg(9, 2)

    @dataclasses.dataclass
    class Bad:
        a: int
        b: int

    with pytest.raises(ValueError):
        tu.register_dataclass(Bad, data_fields=["a"], meta_fields=["c"])
    with pytest.raises(TypeError):
        tu.register_dataclass(Box)


# ----------------------------------------------------------------------------- is_leaf


def test_is_leaf_stops_recursion():
    tree = {"a": (1, 2), "b": [(3, 4), 5]}
    leaves = tu.tree_leaves(tree, is_leaf=lambda x: isinstance(x, tuple))
    assert leaves == [(1, 2), (3, 4), 5]
    out = tu.tree_map(lambda t: sum(t) if isinstance(t, tuple) else t, tree,
                      is_leaf=lambda x: isinstance(x, tuple))
    assert out == {"a": 3, "b": [7, 5]}


def test_is_leaf_can_make_none_a_leaf():
    assert tu.tree_leaves([None, 1], is_leaf=lambda x: x is None) == [None, 1]


# ----------------------------------------------------------------------------- tree_map


def test_tree_map_single_and_multiple_trees():
    a = {"x": [1, 2], "y": (3, None)}
    b = {"x": [10, 20], "y": (30, None)}
    assert tu.tree_map(lambda u: u + 1, a) == {"x": [2, 3], "y": (4, None)}
    assert tu.tree_map(lambda u, v, w: u + v + w, a, b, b) == {"x": [21, 42], "y": (63, None)}


def test_tree_map_rest_may_have_deeper_structure():
    out = tu.tree_map(lambda u, v: (u, v), [1, 2], [[3, 4], {"k": 5}])
    assert out == [(1, [3, 4]), (2, {"k": 5})]


@pytest.mark.parametrize(
    "first, second",
    [
        ([1, 2], [1, 2, 3]),
        ([1, 2], (1, 2)),
        ({"a": 1}, {"b": 1}),
        ([1, [2]], [1, 2]),
        (None, 1),
        (Point(1, 2), (1, 2)),
        (Box(1, 2, "p"), Box(1, 2, "q")),
    ],
)
def test_tree_map_structure_mismatch(first, second):
    with pytest.raises(ValueError) as info:
        tu.tree_map(lambda u, v: u, first, second)
    message = str(info.value)
    assert repr(tu.tree_structure(first)) in message
    assert repr(tu.tree_structure(second)) in message


def test_tree_map_mismatch_reports_path():
    with pytest.raises(ValueError, match=r"\['a'\]\[1\]"):
        tu.tree_map(lambda u, v: u, {"a": [1, (2,)]}, {"a": [1, (2, 3)]})


def test_flatten_up_to():
    treedef = tu.tree_structure([0, {"a": 0}])
    assert treedef.flatten_up_to([(1, 2), {"a": [3]}]) == [(1, 2), [3]]


# ----------------------------------------------------------------------------- unflatten


@pytest.mark.parametrize("leaves", [[1], [1, 2, 3, 4], []])
def test_unflatten_wrong_leaf_count(leaves):
    treedef = tu.tree_structure((1, [2, 3]))
    with pytest.raises(ValueError, match=rf"expected 3, got {len(leaves)}"):
        tu.tree_unflatten(treedef, leaves)


def test_unflatten_accepts_iterators():
    treedef = tu.tree_structure([0, (0, 0)])
    assert tu.tree_unflatten(treedef, iter("abc")) == ["a", ("b", "c")]


# ----------------------------------------------------------------------------- PyTreeDef


def test_treedef_equality_and_hash():
    s1 = tu.tree_structure({"a": [1, 2], "b": None})
    s2 = tu.tree_structure({"b": None, "a": ["x", "y"]})
    s3 = tu.tree_structure({"a": [1, 2], "b": 3})
    s4 = tu.tree_structure({"a": (1, 2), "b": None})
    assert s1 == s2 and hash(s1) == hash(s2)
    assert s1 != s3 and s1 != s4
    cache = {s1: "first"}
    assert cache[s2] == "first"
    assert s3 not in cache and s4 not in cache
    assert len({s1, s2, s3, s4}) == 3


def test_treedef_distinguishes_container_types():
    structs = [tu.tree_structure(t) for t in ([1], (1,), {"0": 1}, Point(1, 2), 1)]
    assert len(set(structs)) == len(structs)


def test_treedef_is_frozen():
    treedef = tu.tree_structure([1, 2])
    with pytest.raises(AttributeError):
        treedef.num_leaves = 5
    with pytest.raises(AttributeError):
        treedef._children = ()


def test_treedef_repr():
    assert repr(tu.tree_structure((1, {"a": 2, "b": [3, None]}))) == (
        "PyTreeDef((*, {'a': *, 'b': [*, None]}))"
    )
    assert repr(tu.tree_structure(5)) == "PyTreeDef(*)"
    assert repr(tu.tree_structure((1,))) == "PyTreeDef((*,))"
    assert repr(tu.tree_structure(None)) == "PyTreeDef(None)"
    assert repr(tu.tree_structure(Point(1, [2]))) == "PyTreeDef(Point(x=*, y=[*]))"
    assert repr(tu.tree_structure(Box(1, 2, "t"))) == "PyTreeDef(CustomNode(Box['t'], [*, *]))"


# ----------------------------------------------------------------------------- key paths


def test_key_entry_strings():
    assert str(tu.SequenceKey(0)) == "[0]"
    assert str(tu.DictKey("a")) == "['a']"
    assert str(tu.GetAttrKey("w")) == ".w"
    assert str(tu.FlattenedIndexKey(2)) == "[<flat index 2>]"
    path = (tu.DictKey("layers"), tu.SequenceKey(0), tu.GetAttrKey("weight"))
    assert tu.keystr(path) == "['layers'][0].weight"
    assert tu.keystr(path, simple=True, separator="/") == "layers/0/weight"
    assert tu.keystr(()) == ""


def test_flatten_with_path_nested():
    tree = {
        "layers": [Linear(weight=1, bias=2), Point(x=3, y=(4,))],
        "box": Box(5, 6, "m"),
        "k": Keyed(7, 8),
    }
    pairs, treedef = tu.tree_flatten_with_path(tree)
    assert [(tu.keystr(p), v) for p, v in pairs] == [
        ("['box'][<flat index 0>]", 5),
        ("['box'][<flat index 1>]", 6),
        ("['k'].w", 7),
        ("['k'].b", 8),
        ("['layers'][0].weight", 1),
        ("['layers'][0].bias", 2),
        ("['layers'][1].x", 3),
        ("['layers'][1].y[0]", 4),
    ]
    assert treedef == tu.tree_structure(tree)
    assert [v for _, v in pairs] == tu.tree_leaves(tree)


def test_path_entries_are_typed():
    [(path, leaf)] = tu.tree_leaves_with_path({"a": [Point(0, None)]})
    assert leaf == 0
    assert path == (tu.DictKey("a"), tu.SequenceKey(0), tu.GetAttrKey("x"))


def test_ordered_and_default_dict_paths():
    od = collections.OrderedDict([("z", 1), ("a", 2)])
    dd = collections.defaultdict(int, {"z": 1, "a": 2})
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(od)] == ["['z']", "['a']"]
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(dd)] == ["['a']", "['z']"]


def test_tree_map_with_path():
    tree = {"w": [1, 2], "b": 3}
    other = {"w": [10, 20], "b": 30}
    out = tu.tree_map_with_path(lambda p, x, y: f"{tu.keystr(p)}={x + y}", tree, other)
    assert out == {"w": ["['w'][0]=11", "['w'][1]=22"], "b": "['b']=33"}
    with pytest.raises(ValueError):
        tu.tree_map_with_path(lambda p, x, y: x, tree, {"w": [1], "b": 3})


# ----------------------------------------------------------------------------- registry


def test_duplicate_registration_raises():
    class Fresh:
        pass

    tu.register_pytree_node(Fresh, lambda x: ((), None), lambda aux, c: Fresh())
    with pytest.raises(ValueError):
        tu.register_pytree_node(Fresh, lambda x: ((), None), lambda aux, c: Fresh())
    with pytest.raises(ValueError):
        tu.register_pytree_with_keys(Fresh, lambda x: ([], None), lambda aux, c: Fresh())
    with pytest.raises(ValueError):
        tu.register_pytree_node(list, lambda x: (x, None), lambda aux, c: list(c))
    with pytest.raises(ValueError):
        tu.register_dataclass(Linear)


def test_registration_needs_a_type():
    with pytest.raises(TypeError):
        tu.register_pytree_node(object(), lambda x: ((), None), lambda aux, c: None)


# ----------------------------------------------------------------------------- helpers


def test_tree_all_and_reduce():
    assert tu.tree_all([True, {"a": 1}, (2,)])
    assert not tu.tree_all([True, {"a": 0}])
    assert tu.tree_all([])
    assert tu.tree_reduce(lambda a, b: a + b, [1, (2, {"x": 3})]) == 6
    assert tu.tree_reduce(lambda a, b: a * b, {"a": 2, "b": [3]}, 10) == 60
    with pytest.raises(TypeError):
        tu.tree_reduce(lambda a, b: a + b, [])


# ----------------------------------------------------------------------------- property test

_keys = st.text(alphabet="abcdefgh", min_size=1, max_size=3)
_trees = st.recursive(
    st.integers(),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(_keys, children, max_size=4),
    ),
    max_leaves=25,
)


def _reference_leaves(tree):
    if isinstance(tree, (list, tuple)):
        return [leaf for child in tree for leaf in _reference_leaves(child)]
    if isinstance(tree, dict):
        return [leaf for k in sorted(tree) for leaf in _reference_leaves(tree[k])]
    return [tree]


@settings(max_examples=200, deadline=None)
@given(_trees)
def test_property_round_trip(tree):
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == _reference_leaves(tree)
    assert treedef.num_leaves == len(leaves)
    assert tu.tree_unflatten(treedef, leaves) == tree
    shifted = tu.tree_unflatten(treedef, [x + 1 for x in leaves])
    assert tu.tree_leaves(shifted) == [x + 1 for x in leaves]
    assert tu.tree_structure(shifted) == treedef
    assert tu.tree_map(lambda x: x + 1, tree) == shifted


@settings(max_examples=200, deadline=None)
@given(_trees, st.integers(min_value=0, max_value=3))
def test_property_leaves_are_the_flattened_leaves(tree, depth_cut):
    """tree_leaves collects leaves without a PyTreeDef: the same list as tree_flatten's,
    with custom nodes, None and an is_leaf that stops at some containers."""
    wrapped = [Box(tree, None, "l"), Point(tree, (None, tree)), Linear(tree, [tree])]

    def is_leaf(x):
        return isinstance(x, (list, dict)) and len(x) == depth_cut

    for t in (tree, wrapped):
        assert tu.tree_leaves(t) == tu.tree_flatten(t)[0]
        assert tu.tree_leaves(t, is_leaf=is_leaf) == tu.tree_flatten(t, is_leaf=is_leaf)[0]


def test_prefix_leaves_broadcasts_inner_values_and_rejects_other_structures():
    from fgrad.core.tree_util import prefix_leaves
    tree = {"a": (1, 2), "b": {"c": 3, "d": [4, 5, 6]}}
    assert prefix_leaves({"a": True, "b": {"c": False, "d": True}}, tree, "mask") == \
        [True, True, False, True, True, True]
    assert prefix_leaves({"a": "x", "b": "y"}, tree, "labels") == ["x", "x", "y", "y", "y", "y"]
    with pytest.raises(ValueError, match="labels: the pytree must have the structure"):
        prefix_leaves({"a": 1, "z": 2}, tree, "labels")


def test_a_type_registered_after_it_was_flattened_as_a_leaf_becomes_a_node():
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    pair = Pair(1, 2)
    assert tu.tree_leaves([pair]) == [pair]  # unregistered: a leaf (remembered)
    tu.register_pytree_node(Pair, lambda p: ((p.a, p.b), None),
                                   lambda _, c: Pair(*c))
    assert tu.tree_leaves([pair]) == [1, 2]
    rebuilt = tu.tree_map(lambda x: x * 10, pair)
    assert (rebuilt.a, rebuilt.b) == (10, 20)
