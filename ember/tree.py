"""``ember.tree``: the short pytree API (``ember.tree.map`` etc.), as ``jax.tree``."""
import dataclasses
from typing import Any

from ember.tree_util import (
    tree_all as all,
    tree_broadcast as broadcast,
    tree_flatten as flatten,
    tree_flatten_with_path as flatten_with_path,
    tree_leaves as leaves,
    tree_leaves_with_path as leaves_with_path,
    tree_map as map,
    tree_map_with_path as map_with_path,
    tree_reduce as reduce,
    tree_reduce_associative as reduce_associative,
    tree_structure as structure,
    tree_transpose as transpose,
    tree_unflatten as unflatten,
)

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path", "map", "map_with_path",
           "reduce", "reduce_associative", "static", "structure", "transpose", "unflatten"]


def static(**kwargs: Any) -> Any:
    """``dataclasses.field(**kwargs)`` marked ``metadata={'static': True}``: a field that
    ``ember.tree_util.register_dataclass`` makes static aux data instead of a child."""
    kwargs["metadata"] = {**kwargs.get("metadata", {}), "static": True}
    return dataclasses.field(**kwargs)
