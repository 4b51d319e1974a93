"""``ember.tree``: the short pytree API (``ember.tree.map`` etc.), as ``jax.tree``."""
from ember.tree_util import (  # noqa: F401
    tree_flatten as flatten,
    tree_flatten_with_path as flatten_with_path,
    tree_leaves as leaves,
    tree_map as map,
    tree_reduce as reduce,
    tree_structure as structure,
    tree_unflatten as unflatten,
)
