"""``jax.api_util``: flattening a wrapped function's pytree arguments and results."""
from __future__ import annotations

from typing import Any

from ember import tree_util
from ember.compat.jax.extend.linear_util import Store, WrappedFun


def flatten_fun_nokwargs(fun: WrappedFun, in_tree: Any) -> tuple[WrappedFun, Store]:
    """``fun`` as a function of the leaves of its positional arguments (of structure
    ``in_tree``) returning the leaves of its result; the store gets the result's structure."""
    out_tree = Store()

    def flat(*leaves: Any) -> list:
        args = tree_util.tree_unflatten(in_tree, list(leaves))
        out_leaves, tree = tree_util.tree_flatten(fun.call_wrapped(*args))
        out_tree.store(tree)
        return out_leaves
    return WrappedFun(flat, debug_info=fun.debug_info), out_tree


def flatten_fun(fun: WrappedFun, in_tree: Any) -> tuple[WrappedFun, Store]:
    """As ``flatten_fun_nokwargs``, ``in_tree`` the structure of ``(args, kwargs)``."""
    out_tree = Store()

    def flat(*leaves: Any) -> list:
        args, kwargs = tree_util.tree_unflatten(in_tree, list(leaves))
        out_leaves, tree = tree_util.tree_flatten(fun.call_wrapped(*args, **kwargs))
        out_tree.store(tree)
        return out_leaves
    return WrappedFun(flat, debug_info=fun.debug_info), out_tree


__all__ = ["flatten_fun", "flatten_fun_nokwargs"]
