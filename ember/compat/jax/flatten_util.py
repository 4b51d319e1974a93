"""``jax.flatten_util.ravel_pytree``: a pytree of arrays as one flat vector, and back."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import ember.numpy as jnp
from ember import dtypes, tree_util


def ravel_pytree(pytree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """(the leaves raveled and concatenated in one vector of their promoted dtype, the function
    that turns such a vector back into the pytree, each leaf in its own shape and dtype)."""
    leaves, treedef = tree_util.tree_flatten(pytree)
    shapes = [np.shape(leaf) for leaf in leaves]
    leaf_dtypes = [dtypes.result_type(leaf) for leaf in leaves]
    sizes = [int(np.prod(shape, dtype=np.int64)) for shape in shapes]
    if not leaves:
        flat = jnp.zeros(0, jnp.float32)
    else:
        common = dtypes.result_type(*leaf_dtypes)
        flat = jnp.concatenate([jnp.ravel(jnp.asarray(leaf)).astype(common) for leaf in leaves])
    ends = np.cumsum(sizes).tolist()

    def unravel(vector: Any) -> Any:
        if np.shape(vector) != (sum(sizes),):
            raise ValueError(f"The unravel function expected an array of shape {(sum(sizes),)}, "
                             f"got shape {np.shape(vector)}.")
        pieces = [vector[end - size:end].reshape(shape).astype(dtype)
                  for size, end, shape, dtype in zip(sizes, ends, shapes, leaf_dtypes)]
        return tree_util.tree_unflatten(treedef, pieces)
    return flat, unravel


__all__ = ["ravel_pytree"]
