"""The pytree API beyond flatten/map: key paths, Partial, registration helpers, transposes and
reductions, against JAX's tree_util when JAX is installed and against spelled-out values always."""
from __future__ import annotations

import collections
import dataclasses
import operator

import numpy as np
import pytest

import ember
from ember import tree_util as tu

Point = collections.namedtuple("Point", "x y")


class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b


tu.register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda _, children: Pair(*children))


def _tree():
    return {"a": [1, (2, None)], "n": Point(3, 4), "p": Pair(5, 6),
            "o": collections.OrderedDict(z=7), "d": collections.defaultdict(int, {"q": 8})}


EXPECTED_PATHS = [
    ("['a'][0]", "a/0"), ("['a'][1][0]", "a/1/0"), ("['d']['q']", "d/q"), ("['n'].x", "n/x"), ("['n'].y", "n/y"),
    ("['o']['z']", "o/z"), ("['p'][<flat index 0>]", "p/0"), ("['p'][<flat index 1>]", "p/1"),
]


def test_key_paths_and_keystr():
    with_paths = tu.tree_leaves_with_path(_tree())
    assert [leaf for _, leaf in with_paths] == [1, 2, 8, 3, 4, 7, 5, 6]
    assert [(tu.keystr(p), tu.keystr(p, simple=True, separator="/")) for p, _ in with_paths] == EXPECTED_PATHS
    assert with_paths[0][0] == (tu.DictKey("a"), tu.SequenceKey(0))
    assert with_paths[3][0] == (tu.DictKey("n"), tu.GetAttrKey("x"))
    assert with_paths[6][0] == (tu.DictKey("p"), tu.FlattenedIndexKey(0))
    assert tu.keystr(("a", 0)) == "['a'][0]"  # raw optree keys still print


def test_key_paths_match_jax():
    jtu = pytest.importorskip("jax").tree_util
    jtu.register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda _, children: Pair(*children))
    ours = [(tu.keystr(p), leaf) for p, leaf in tu.tree_flatten_with_path(_tree())[0]]
    theirs = [(jtu.keystr(p), leaf) for p, leaf in jtu.tree_flatten_with_path(_tree())[0]]
    assert ours == theirs


def test_map_with_path():
    tree = {"w": np.float32(1), "b": [np.float32(2), None]}
    out = tu.tree_map_with_path(lambda p, x, y: (tu.keystr(p), x + y), tree, tree)
    assert out == {"w": ("['w']", 2), "b": [("['b'][0]", 4), None]}
    assert ember.tree.map_with_path(lambda p, x: len(p), {"a": [0, 0]}) == {"a": [2, 2]}
    assert [tu.keystr(p) for p, _ in ember.tree.leaves_with_path([0, {"k": 1}])] == ["[0]", "[1]['k']"]


def test_partial_is_a_pytree_and_a_jit_argument():
    scale = tu.Partial(operator.mul, np.float32(3))
    assert tu.tree_leaves(scale) == [np.float32(3)]
    apply = ember.jit(lambda fn, x: fn(x))
    np.testing.assert_allclose(np.asarray(apply(scale, np.float32(2))), 6)
    np.testing.assert_allclose(np.asarray(apply(tu.Partial(operator.mul, np.float32(5)), np.float32(2))), 10)
    returned = ember.jit(lambda s: tu.Partial(operator.add, s))(np.float32(1))
    assert isinstance(returned, tu.Partial) and float(returned(np.float32(2))) == 3
    keyword = tu.Partial(lambda x, *, k: x * k, k=np.float32(4))
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(keyword)] == ["[<flat index 1>]['k']"]


def test_tree_all_and_reduce_associative():
    assert tu.tree_all([True, None, {"a": 1}]) and not ember.tree.all([True, (0,)]) and tu.tree_all([])
    assert tu.tree_reduce_associative(operator.add, [1, [2, 3], {"a": 4, "b": 5}]) == 15
    # balanced pairing, as in JAX: ((a, b), (c, d)), e
    assert ember.tree.reduce_associative(lambda a, b: f"({a}{b})", list("abcde")) == "(((ab)(cd))e)"
    assert tu.tree_reduce_associative(operator.add, [], identity=0) == 0
    with pytest.raises(TypeError, match="identity="):
        tu.tree_reduce_associative(operator.add, [None])


def test_transpose_and_broadcast():
    outer, inner = tu.tree_structure([0, 0, 0]), tu.tree_structure({"x": 0, "y": 0})
    rows = [{"x": i, "y": -i} for i in range(3)]
    expected = {"x": [0, 1, 2], "y": [0, -1, -2]}
    assert tu.tree_transpose(outer, inner, rows) == expected
    assert ember.tree.transpose(outer, None, rows) == expected
    assert tu.tree_broadcast([1, {"a": 2}], [(1, 2), {"a": [3, 4]}]) == [(1, 1), {"a": [2, 2]}]
    assert ember.tree.broadcast(0, {"a": 1, "b": (2, 3)}) == {"a": 0, "b": (0, 0)}


def test_treedef_helpers():
    treedef = tu.tree_structure({"a": 1, "b": [2, 3]})
    assert tu.treedef_children(treedef) == [tu.tree_structure(1), tu.tree_structure([2, 3])]
    assert tu.treedef_is_leaf(tu.tree_structure(1)) and tu.treedef_is_leaf(tu.tree_structure(None))
    assert not tu.treedef_is_leaf(treedef)
    assert tu.treedef_tuple([tu.tree_structure(1), tu.tree_structure([1, 2])]) == tu.tree_structure((1, [1, 2]))
    assert tu.flatten_one_level({"a": 1, "b": [2]})[0] == [1, [2]]
    assert tu.flatten_one_level_with_keys([None, 2])[0] == [(tu.SequenceKey(0), None), (tu.SequenceKey(1), 2)]
    with pytest.raises(ValueError):
        tu.flatten_one_level(1)


def test_register_dataclass_explicit_and_inferred():
    @dataclasses.dataclass
    class Layer:
        w: object
        name: str

    tu.register_dataclass(Layer, data_fields=["w"], meta_fields=["name"])
    layer = Layer(np.float32(2), "dense")
    leaves, treedef = tu.tree_flatten(layer)
    assert leaves == [2] and tu.tree_unflatten(treedef, [5]) == Layer(5, "dense")
    assert tu.keystr(tu.tree_leaves_with_path(layer)[0][0]) == ".w"
    assert float(ember.jit(lambda l: l.w * 2 if l.name == "dense" else l.w)(layer)) == 4

    @tu.register_dataclass
    @dataclasses.dataclass
    class Inferred:
        x: object
        tag: str = ember.tree.static(default="t")

    assert tu.tree_leaves(Inferred(1)) == [1]
    assert tu.tree_structure(Inferred(1)) != tu.tree_structure(Inferred(1, tag="u"))
    with pytest.raises(ValueError, match="init fields"):
        tu.register_dataclass(Layer, data_fields=["w"], meta_fields=[])
    with pytest.raises(TypeError, match="not a dataclass"):
        tu.register_dataclass(Pair)


def test_register_static_and_with_keys():
    @tu.register_static
    class Config:
        def __init__(self, depth):
            self.depth = depth

        def __hash__(self):
            return hash(self.depth)

        def __eq__(self, other):
            return isinstance(other, Config) and other.depth == self.depth

    assert tu.tree_leaves([Config(2), 1]) == [1]
    assert int(ember.jit(lambda c, x: x * c.depth)(Config(3), np.int32(2))) == 6

    @tu.register_pytree_with_keys_class
    class Box:
        def __init__(self, lo, hi):
            self.lo, self.hi = lo, hi

        def tree_flatten_with_keys(self):
            return ((tu.GetAttrKey("lo"), self.lo), (tu.GetAttrKey("hi"), self.hi)), None

        @classmethod
        def tree_unflatten(cls, _, children):
            return cls(*children)

    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(Box(1, 2))] == [".lo", ".hi"]
    assert tu.tree_map(lambda x: x * 10, Box(1, 2)).hi == 20


def test_keyed_registration_with_a_flatten_func_flattens_with_it_and_names_paths_with_the_keyed_one():
    """As JAX: ``flatten_func`` for flattening (equinox's is the fast one), the keyed function
    for key paths only; both give one structure."""
    calls = []

    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    def keyed(p):
        calls.append("keyed")
        return ((tu.GetAttrKey("a"), p.a), (tu.GetAttrKey("b"), p.b)), "aux"

    def plain(p):
        calls.append("plain")
        return (p.a, p.b), "aux"

    tu.register_pytree_with_keys(Pair, keyed, lambda aux, children: Pair(*children), plain)
    tree = {"p": Pair(1, [2, 3]), "q": 4}
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == [1, 2, 3, 4] and calls == ["plain"]
    assert tu.tree_map(lambda x: x + 1, tree)["p"].b == [3, 4] and "keyed" not in calls
    calls.clear()
    with_paths, path_treedef = tu.tree_flatten_with_path(tree)
    assert [tu.keystr(p) for p, _ in with_paths] == ["['p'].a", "['p'].b[0]", "['p'].b[1]", "['q']"]
    assert "keyed" in calls and path_treedef == treedef
    assert tu.tree_unflatten(path_treedef, [5, 6, 7, 8])["p"].b == [6, 7]
    assert int(ember.jit(lambda t: t["p"].a + t["q"])(tree)) == 5
