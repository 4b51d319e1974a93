"""Pytrees: a thin layer over optree, with JAX's conventions (None is an empty tree, key paths
made of ``DictKey`` / ``SequenceKey`` / ``GetAttrKey`` / ``FlattenedIndexKey`` entries, dicts
flattened and rebuilt in sorted key order)."""
from __future__ import annotations

import collections
import ctypes
import dataclasses
import functools
import warnings
from typing import Any, Callable, Hashable, Iterable, Sequence, TypeVar, Union, cast

import numpy as np
import optree

from ember import dtypes

NAMESPACE = "ember"
# Types registered with a flatten function of their own besides a keyed one (JAX's
# ``register_pytree_with_keys(..., flatten_func=...)``) flatten with the plain one, as in JAX, and
# with the keyed one only for key paths: optree holds one function a type and namespace, so the
# keyed ones live in a second namespace (``_register``), which ``tree_flatten_with_path`` uses.
PATH_NAMESPACE = "ember.paths"
_KEYED_ONLY_FOR_PATHS: set[type] = set()
PyTreeDef = optree.PyTreeSpec
T = TypeVar("T")


# --- key paths ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class DictKey:
    """The path entry of a mapping's value: ``['key']``."""
    key: Hashable

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """The path entry of a list or tuple element: ``[idx]``."""
    idx: int

    def __str__(self) -> str:
        return f"[{self.idx}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """The path entry of an attribute (namedtuple field, dataclass field): ``.name``."""
    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    """The path entry of a custom node's child when its flatten function names no keys."""
    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


KeyEntry = Union[DictKey, SequenceKey, GetAttrKey, FlattenedIndexKey, Any]
KeyPath = tuple  # tuple[KeyEntry, ...]
_KEY_TYPES = (DictKey, SequenceKey, GetAttrKey, FlattenedIndexKey)
_MAPPING_KINDS = {optree.PyTreeKind.DICT, optree.PyTreeKind.ORDEREDDICT, optree.PyTreeKind.DEFAULTDICT}


def _key_entry(entry: optree.PyTreeEntry) -> KeyEntry:
    """optree's accessor entry as the key JAX would put in the path."""
    if isinstance(entry.entry, _KEY_TYPES):  # given by register_pytree_with_keys / register_dataclass
        return entry.entry
    if entry.kind in _MAPPING_KINDS:
        return DictKey(entry.entry)
    if entry.kind == optree.PyTreeKind.NAMEDTUPLE:
        return GetAttrKey(entry.type._fields[entry.entry])  # type: ignore[attr-defined]  # (a namedtuple type)
    if entry.kind == optree.PyTreeKind.CUSTOM:
        return FlattenedIndexKey(entry.entry)
    return SequenceKey(entry.entry)


def _simple_key(key: KeyEntry) -> str:
    """The bare key, index or attribute name."""
    return str(getattr(key, dataclasses.fields(key)[0].name)) if isinstance(key, _KEY_TYPES) else str(key)


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """``(DictKey('a'), SequenceKey(0))`` -> ``['a'][0]`` (``a/0`` with ``simple=True,
    separator='/'``): how argument paths appear in error messages. Raw optree keys (``'a'``,
    ``0``) print as ``['a']`` and ``[0]``."""
    if simple:
        return separator.join(_simple_key(k) for k in keys)
    return separator.join(str(k) if isinstance(k, _KEY_TYPES) else f"[{k!r}]" for k in keys)


# --- dict key order ----------------------------------------------------------------------------
# JAX flattens a dict (or defaultdict) in sorted key order and rebuilds it with its keys in that
# order. optree flattens in sorted order too, but its structures rebuild the insertion order and
# fall back to another order for keys that do not sort. So every dict is checked as optree
# visits it (the ``is_leaf`` hook below), and a structure with an unsorted dict is remade with
# sorted ones (``sorted_treedef``).
_SORTED_MAPPINGS = (dict, collections.defaultdict)
_UNSORTABLE = "Comparator raised exception while sorting pytree dictionary keys."


def _sorted_keys(keys: list, kind: type | None) -> list:
    """``sorted(keys)``, failing as JAX fails: ValueError for a dict (its C++ comparator), the
    comparison's own TypeError for a defaultdict (sorted in Python)."""
    try:
        return sorted(keys)
    except TypeError as e:
        if kind is collections.defaultdict:
            raise
        raise ValueError(_UNSORTABLE) from e


class _KeyOrder:
    """optree's ``is_leaf`` hook: the user's ``is_leaf``, array nodes (``register_array_node``) as
    leaves unless ``arrays_as_nodes`` (the transformations' view), and a check of each dict's keys on
    the way (raising for keys that do not sort; ``unsorted`` set when some dict's order is not sorted)."""

    __slots__ = ("is_leaf", "unsorted", "arrays_as_leaves")

    def __init__(self, is_leaf: Callable[[Any], bool] | None, arrays_as_nodes: bool = False) -> None:
        self.is_leaf, self.unsorted, self.arrays_as_leaves = is_leaf, False, not arrays_as_nodes

    def __call__(self, node: Any) -> bool:
        if self.is_leaf is not None and self.is_leaf(node):
            return True
        kind = type(node)
        if kind in _ARRAY_NODES and self.arrays_as_leaves:
            return True
        if kind in _SORTED_MAPPINGS and len(node) > 1:
            keys = list(node)
            if keys != _sorted_keys(keys, kind):
                self.unsorted = True
        return False


_MAPPING_TREESPEC_KINDS = {optree.PyTreeKind.DICT, optree.PyTreeKind.DEFAULTDICT}


def _sorted_node(node: PyTreeDef) -> PyTreeDef:
    """A one-level structure, a dict one remade with its keys inserted in sorted order."""
    if node.kind not in _MAPPING_TREESPEC_KINDS or node.num_children < 2:
        return node
    keys = _sorted_keys(node.entries(), node.type)
    leaf = optree.treespec_leaf(none_is_leaf=node.none_is_leaf, namespace=node.namespace)
    children = dict.fromkeys(keys, leaf)
    if node.kind == optree.PyTreeKind.DICT:
        return optree.treespec_dict(children, none_is_leaf=node.none_is_leaf, namespace=node.namespace)
    factory: Any = node.unflatten([None] * node.num_children).default_factory  # (a defaultdict's)
    return optree.treespec_defaultdict(factory, children, none_is_leaf=node.none_is_leaf, namespace=node.namespace)


def sorted_treedef(treedef: PyTreeDef) -> PyTreeDef:
    """``treedef`` (an equal structure) whose dicts unflatten with sorted keys, as JAX's do; raises
    as JAX does for dict keys that do not sort. For a structure from raw ``optree`` (``jit``'s
    argument structure is one: it is only a cache key until a trace unflattens it)."""
    return treedef.transform(f_node=_sorted_node)


def _flatten(tree: Any, is_leaf: Callable[[Any], bool] | None, arrays_as_nodes: bool = False
             ) -> tuple[list, PyTreeDef]:
    hook = _KeyOrder(is_leaf, arrays_as_nodes)
    leaves, treedef = optree.tree_flatten(tree, hook, none_is_leaf=False, namespace=NAMESPACE)
    return leaves, sorted_treedef(treedef) if hook.unsorted else treedef


# --- array nodes: leaves to the user, nodes to the transformations ------------------------------------
# A typed PRNG key array is a leaf, as in JAX (``tree_leaves(key)`` is ``[key]``), but ember traces
# its uint32 data: the transformations (jit, vmap, grad, control flow, custom rules) flatten with
# the ``*_for_trace`` functions below, which see such a type as a node over the arrays it holds
# (one child each, so the two views have the same number of leaves, in the same order), and
# rebuild it around what comes out.
_ARRAY_NODES: set[type] = set()


def register_array_node(cls: type, flatten: Callable, unflatten: Callable) -> None:
    """``cls`` as a leaf of the user's trees and, for the transformations, a node whose one child
    is an array (``flatten(x) -> ((array,), aux)``, ``unflatten(aux, (array,)) -> x``)."""
    register_pytree_node(cls, flatten, unflatten)
    _ARRAY_NODES.add(cls)


def is_array_node(x: Any) -> bool:
    """Whether ``x`` is a leaf to the user that the transformations see as a node (a key array)."""
    return type(x) in _ARRAY_NODES


def flatten_for_trace(tree: Any) -> tuple[list, PyTreeDef]:
    """``tree_flatten`` as the transformations flatten what they trace: array nodes (typed key
    arrays) are nodes over their arrays, so every leaf is an array or a Python scalar."""
    return _flatten(tree, None, True)


def leaves_for_trace(tree: Any) -> list:
    return _flatten(tree, None, True)[0]


def structure_for_trace(tree: Any) -> PyTreeDef:
    return _flatten(tree, None, True)[1]


def map_for_trace(f: Callable, tree: Any, *rest: Any) -> Any:
    """``tree_map`` over the leaves ``flatten_for_trace`` gives (a key array's data)."""
    leaves, treedef = _flatten(tree, None, True)
    others = [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten(map(f, leaves, *others))


def flatten_for_key(tree: Any) -> tuple[list, PyTreeDef]:
    """``tree_flatten`` without the dict checks, for a call's cache key (``jit`` dispatch): its
    structure equals the sorted one, but must go through ``sorted_treedef`` before unflattening."""
    return optree.tree_flatten(tree, none_is_leaf=False, namespace=NAMESPACE)


# --- flatten / unflatten -----------------------------------------------------------------------
def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, PyTreeDef]:
    """``(leaves, treedef)``: dicts in sorted key order (unflattened with sorted keys)."""
    return _flatten(tree, is_leaf)


def tree_unflatten(treedef: PyTreeDef, leaves: Any) -> Any:
    return optree.tree_unflatten(treedef, leaves)


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list:
    return optree.tree_leaves(tree, _KeyOrder(is_leaf), none_is_leaf=False, namespace=NAMESPACE)


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    return _flatten(tree, is_leaf)[1]


def tree_flatten_with_path(tree: Any, is_leaf: Callable[[Any], bool] | None = None
                           ) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """``([(key_path, leaf), ...], treedef)`` with JAX's key entries."""
    hook = _KeyOrder(is_leaf)
    namespace = PATH_NAMESPACE if _KEYED_ONLY_FOR_PATHS else NAMESPACE
    accessors, leaves, treedef = optree.tree_flatten_with_accessor(tree, hook, none_is_leaf=False,
                                                                  namespace=namespace)
    paths = [tuple(_key_entry(entry) for entry in accessor) for accessor in accessors]
    if namespace != NAMESPACE:  # ember's structure (the path namespace's is not its equal)
        treedef = optree.tree_structure(tree, hook, none_is_leaf=False, namespace=NAMESPACE)
    return list(zip(paths, leaves)), sorted_treedef(treedef) if hook.unsorted else treedef


def tree_leaves_with_path(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[tuple[KeyPath, Any]]:
    return tree_flatten_with_path(tree, is_leaf)[0]


def flatten_one_level(tree: Any) -> tuple[list, Hashable]:
    """``(children, aux_data)`` of the root node; a leaf raises ValueError."""
    children, aux_data, _, _ = optree.tree_flatten_one_level(tree, _KeyOrder(None), none_is_leaf=False,
                                                             namespace=NAMESPACE)
    return children, aux_data


def flatten_one_level_with_keys(tree: Any) -> tuple[list[tuple[KeyEntry, Any]], Hashable]:
    """``([(key, child), ...], aux_data)`` of the root node; a leaf raises ValueError."""
    children, aux_data = flatten_one_level(tree)
    with_paths, _ = tree_flatten_with_path(tree, lambda node: node is not tree)  # the children are leaves
    return [(path[0], child) for (path, _), child in zip(with_paths, children)], aux_data


# --- maps and reductions -----------------------------------------------------------------------
def tree_map(f: Callable, tree: Any, *rest: Any, is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``f(leaf, *other_leaves)`` at every leaf of ``tree``, in ``tree``'s structure (dicts with
    sorted keys); ``rest`` must have that structure (or be trees with it as a prefix)."""
    leaves, treedef = _flatten(tree, is_leaf)
    others = [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten(map(f, leaves, *others))


def tree_map_with_path(f: Callable, tree: Any, *rest: Any, is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``f(key_path, leaf, *other_leaves)`` at every leaf of ``tree``; ``rest`` must have
    ``tree``'s structure (or be trees with it as a prefix)."""
    with_paths, treedef = tree_flatten_with_path(tree, is_leaf)
    others = [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten([f(path, leaf, *more) for (path, leaf), *more in zip(with_paths, *others)])


_NO_INITIALIZER = object()


def tree_reduce(f: Callable, tree: Any, initializer: Any = _NO_INITIALIZER,
                is_leaf: Callable[[Any], bool] | None = None) -> Any:
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INITIALIZER:
        return functools.reduce(f, leaves)
    return functools.reduce(f, leaves, initializer)


def tree_reduce_associative(operation: Callable[[T, T], T], tree: Any, *, identity: Any = _NO_INITIALIZER,
                            is_leaf: Callable[[Any], bool] | None = None) -> T:
    """Reduces the leaves pairwise in a balanced tree (depth log n), as JAX does, which is
    only the sequential result if ``operation`` is associative."""
    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is _NO_INITIALIZER:
            raise TypeError("tree_reduce_associative: the tree has no leaves; pass identity= to reduce an "
                            "empty tree.")
        return identity
    while len(leaves) > 1:
        paired = [operation(a, b) for a, b in zip(leaves[::2], leaves[1::2])]
        leaves = paired + leaves[-1:] if len(leaves) % 2 else paired
    return leaves[0]


def tree_all(tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    return all(tree_leaves(tree, is_leaf))


# --- structures --------------------------------------------------------------------------------
def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None, pytree_to_transpose: Any) -> Any:
    """Turns an outer tree of inner trees into an inner tree of outer trees; ``inner_treedef``
    None takes the structure of the first inner tree."""
    if inner_treedef is None:
        inner_treedef = tree_structure(outer_treedef.flatten_up_to(pytree_to_transpose)[0])
    return optree.tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose)


def tree_broadcast(prefix_tree: Any, full_tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``prefix_tree`` with each of its leaves repeated over the subtree of ``full_tree`` there
    (in ``full_tree``'s structure, dicts with sorted keys)."""
    treedef = tree_structure(full_tree, is_leaf)
    return treedef.unflatten(optree.broadcast_prefix(prefix_tree, full_tree, _KeyOrder(is_leaf), none_is_leaf=False,
                                                     namespace=NAMESPACE))


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """True for a leaf, and for None (a node without children), as in JAX."""
    return treedef.num_nodes == 1


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    return optree.treespec_children(treedef)


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    return optree.treespec_tuple(list(treedefs), none_is_leaf=False, namespace=NAMESPACE)


def all_leaves(iterable: Iterable, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every item of ``iterable`` is a leaf (a key array is one)."""
    return optree.all_leaves(iterable, _KeyOrder(is_leaf), none_is_leaf=False, namespace=NAMESPACE)


# --- registering node types --------------------------------------------------------------------
def _register(cls: type, flatten: Callable, unflatten: Callable, flatten_for_paths: Callable | None = None) -> None:
    """``cls`` as a node in both namespaces (``PATH_NAMESPACE``'s flattens with
    ``flatten_for_paths`` where given). A namedtuple class registered this way gets these
    functions, silently, as in JAX (optree warns that namedtuples are nodes already)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is a subclass of `collections.namedtuple`", category=UserWarning)
        optree.register_pytree_node(cls, flatten, unflatten, namespace=NAMESPACE)
        optree.register_pytree_node(cls, flatten_for_paths or flatten, unflatten, namespace=PATH_NAMESPACE)
    if flatten_for_paths is not None:
        _KEYED_ONLY_FOR_PATHS.add(cls)


def is_tree_node(typ: type) -> bool:
    """Whether instances of ``typ`` are pytree nodes (built in, or registered), not leaves."""
    if not isinstance(typ, type):
        raise TypeError(f"is_tree_node takes a type, got {typ!r}")
    return optree.register_pytree_node.get(typ, namespace=NAMESPACE) is not None


def register_pytree_node(cls: type, flatten_func: Callable, unflatten_func: Callable) -> None:
    """JAX's signature: ``flatten(x) -> (children, aux)``, ``unflatten(aux, children) -> x``."""
    _register(cls, flatten_func, lambda aux, children: unflatten_func(aux, children))


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: the class defines ``tree_flatten`` and classmethod ``tree_unflatten``."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cast(Any, cls).tree_unflatten)
    return cls


def register_pytree_with_keys(nodetype: type, flatten_with_keys: Callable, unflatten_func: Callable,
                              flatten_func: Callable | None = None) -> None:
    """Like ``register_pytree_node``, but ``flatten_with_keys(x) -> ([(key, child), ...], aux)``
    names each child's path entry. Given ``flatten_func`` too, plain flattening calls that one
    and only key paths the keyed one, as in JAX (equinox's modules flatten about twice as fast)."""
    def keyed(x: Any) -> tuple:
        key_children, aux = flatten_with_keys(x)
        keys, children = zip(*key_children) if key_children else ((), ())
        return children, aux, keys
    unflatten = lambda aux, children: unflatten_func(aux, children)
    if flatten_func is None:
        _register(nodetype, keyed, unflatten)
    else:
        _register(nodetype, flatten_func, unflatten, keyed)


def register_pytree_with_keys_class(cls: type) -> type:
    """Class decorator: the class defines ``tree_flatten_with_keys`` and classmethod ``tree_unflatten``."""
    register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(), cast(Any, cls).tree_unflatten)
    return cls


def register_dataclass(nodetype: type, data_fields: Sequence[str] | None = None,
                       meta_fields: Sequence[str] | None = None, drop_fields: Sequence[str] = ()) -> type:
    """Registers a class whose ``data_fields`` are children and ``meta_fields`` static (hashable)
    aux data, rebuilt with ``nodetype(**fields)``. For a dataclass the fields may be omitted:
    fields with ``metadata={'static': True}`` are meta, the other ``init`` fields data.
    Returns ``nodetype``, so it also works as a decorator."""
    if data_fields is None and meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(f"register_dataclass: {nodetype.__name__} is not a dataclass; pass data_fields "
                            "and meta_fields to register another class.")
        fields = [f for f in dataclasses.fields(nodetype) if f.init and f.name not in drop_fields]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
    elif data_fields is None or meta_fields is None:
        raise TypeError("register_dataclass: pass both data_fields and meta_fields, or neither (for a "
                        "dataclass, to infer them from its fields).")
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    if dataclasses.is_dataclass(nodetype):
        init_fields = {f.name for f in dataclasses.fields(nodetype) if f.init} - set(drop_fields)
        if init_fields != set(data_fields) | set(meta_fields):
            raise ValueError(f"register_dataclass: data_fields {list(data_fields)} and meta_fields "
                             f"{list(meta_fields)} must name exactly the init fields of {nodetype.__name__} "
                             f"(less drop_fields): {sorted(init_fields)}.")

    keys = tuple(map(GetAttrKey, data_fields))

    def flatten(x: Any) -> tuple:
        children = tuple(getattr(x, name) for name in data_fields)
        return children, tuple(getattr(x, name) for name in meta_fields), keys

    def unflatten(meta: tuple, children: Iterable) -> Any:
        return nodetype(**dict(zip(meta_fields, meta)), **dict(zip(data_fields, children)))

    _register(nodetype, flatten, unflatten)
    return nodetype


def register_static(cls: type) -> type:
    """Registers ``cls`` as a node without children: instances travel as (hashable) static
    data, e.g. through ``jit``, never as leaves. Returns ``cls``, so it works as a decorator."""
    _register(cls, lambda x: ((), x), lambda x, _: x)
    return cls


# --- printing ----------------------------------------------------------------------------------
def treedef_repr(treedef: PyTreeDef) -> str:
    """JAX's text for a structure: ``PyTreeDef({'a': *, 'b': (*, None)})``, a namedtuple as
    ``CustomNode(namedtuple[Point], [*, *])``, an OrderedDict or a registered class as
    ``CustomNode(Name[aux data], [children])``."""
    return f"PyTreeDef({treedef.walk([0] * treedef.num_leaves, _node_text, lambda _: '*')})"


def _node_text(node_type: type, data: Any, children: tuple) -> str:
    inner = ", ".join(children)
    if node_type is type(None):
        return "None"
    if node_type is tuple:
        return f"({inner},)" if len(children) == 1 else f"({inner})"
    if node_type is list:
        return f"[{inner}]"
    if node_type is dict:
        return "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(data, children)) + "}"
    if node_type is collections.OrderedDict:
        data = tuple(data)
    elif node_type is collections.defaultdict:
        data = (data[0], tuple(data[1]))
    elif isinstance(data, type) and issubclass(node_type, tuple) and hasattr(node_type, "_fields"):
        return f"CustomNode(namedtuple[{node_type.__name__}], [{inner}])"
    return f"CustomNode({node_type.__name__}[{data}], [{inner}])"


def _print_as_jax(cls: Any) -> None:  # (Any: it patches a slot of a C type)
    """Make ``repr`` of optree's structures JAX's (``treedef_repr``) rather than optree's
    ``PyTreeSpec(...)``, for the structures ember builds (optree's own namespaces keep optree's).

    ember's ``PyTreeDef`` *is* optree's C type, so that flattening returns it with no wrapper
    (``jit`` keys its caches on it at every call) and structures built by ember and by optree
    compare equal. The type's attributes are read-only (an immutable C type): its flag is lifted
    for the one assignment and set again. Where the type's layout is not the one expected
    (another Python build), nothing changes and structures print as optree prints them. (A
    structure of built-in containers only is in optree's default namespace, "": those print JAX's
    way in the whole process once ember is imported, whoever built them.)"""
    immutable = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE
    stable = ~(1 << 19)  # (less Py_TPFLAGS_VALID_VERSION_TAG, which an attribute lookup may set)
    known: tuple[type, ...] = (int, str, tuple, dict, type, cls)
    probes = [(t, t.__flags__ & stable) for t in known]
    for offset in range(3 * ctypes.sizeof(ctypes.c_void_p), 64 * ctypes.sizeof(ctypes.c_void_p),
                        ctypes.sizeof(ctypes.c_ulong)):
        if all(ctypes.c_ulong.from_address(id(t) + offset).value & stable == f for t, f in probes):
            break
    else:
        return
    flags = ctypes.c_ulong.from_address(id(cls) + offset)
    if not flags.value & immutable:
        return
    optree_repr = cls.__repr__
    ours = {"", NAMESPACE, PATH_NAMESPACE}

    def __repr__(self: PyTreeDef) -> str:
        return treedef_repr(self) if self.namespace in ours else optree_repr(self)

    flags.value &= ~immutable
    try:
        cls.__repr__ = __repr__
    finally:
        flags.value |= immutable


_print_as_jax(PyTreeDef)


class Partial(functools.partial):
    """A ``functools.partial`` that is a pytree: the bound arguments are its leaves and the
    function its static structure, so it can be passed to (and returned from) ``jit``-compiled
    functions, e.g. as a callback argument."""


register_pytree_node(Partial, lambda p: ((p.args, p.keywords), p.func),
                     lambda func, children: Partial(func, *children[0], **children[1]))


# --- float0 arrays: structure to the transformations ------------------------------------------------
class _Float0Array:
    """A float0 array among a traced function's arguments or results. float0 arrays hold no data,
    so ``jit`` carries them in the structure (their shape), not as values of the program, and the
    structure rebuilds them as NumPy arrays, as JAX returns them."""

    __slots__ = ("shape",)

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape


def is_float0_array(x: Any) -> bool:
    """Whether ``x`` is a float0 array (always a NumPy one)."""
    return type(x) is np.ndarray and x.dtype == dtypes.float0


register_pytree_node(_Float0Array, lambda x: ((), x.shape), lambda shape, _: dtypes.float0_zeros(shape))


def float0_as_structure(tree: Any) -> Any:
    """``tree`` with its float0 arrays made part of its structure (itself when it has none)."""
    if not any(map(is_float0_array, tree_leaves(tree))):
        return tree
    return tree_map(lambda x: _Float0Array(x.shape) if is_float0_array(x) else x, tree)


def has_float0_leaf(leaves: Iterable[Any]) -> bool:
    """Whether any of ``leaves`` is a float0 array (which ``float0_as_structure`` takes out)."""
    return any(map(is_float0_array, leaves))
