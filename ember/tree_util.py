"""Pytrees: a thin layer over optree, with JAX's conventions (None is an empty tree)."""
from __future__ import annotations

import functools
from typing import Any, Callable

import optree

NAMESPACE = "ember"
PyTreeDef = optree.PyTreeSpec


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, PyTreeDef]:
    return optree.tree_flatten(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def tree_unflatten(treedef: PyTreeDef, leaves: Any) -> Any:
    return optree.tree_unflatten(treedef, leaves)


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list:
    return optree.tree_leaves(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    return optree.tree_structure(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def tree_map(f: Callable, tree: Any, *rest: Any, is_leaf: Callable[[Any], bool] | None = None) -> Any:
    return optree.tree_map(f, tree, *rest, is_leaf=is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def tree_flatten_with_path(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, PyTreeDef]:
    paths, leaves, treedef = optree.tree_flatten_with_path(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)
    return list(zip(paths, leaves)), treedef


_NO_INITIALIZER = object()


def tree_reduce(f: Callable, tree: Any, initializer: Any = _NO_INITIALIZER) -> Any:
    leaves = tree_leaves(tree)
    if initializer is _NO_INITIALIZER:
        return functools.reduce(f, leaves)
    return functools.reduce(f, leaves, initializer)


def register_pytree_node(cls: type, flatten_func: Callable, unflatten_func: Callable) -> None:
    """JAX's signature: ``flatten(x) -> (children, aux)``, ``unflatten(aux, children) -> x``."""
    optree.register_pytree_node(cls, flatten_func, lambda aux, children: unflatten_func(aux, children),
                                namespace=NAMESPACE)


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: the class defines ``tree_flatten`` and classmethod ``tree_unflatten``."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def keystr(path: tuple) -> str:
    """``('a', 0)`` -> ``['a'][0]``: how argument paths appear in error messages."""
    return "".join(f"[{k!r}]" for k in path)


all_leaves = optree.all_leaves
