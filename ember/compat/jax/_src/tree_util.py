"""``jax._src.tree_util``: JAX's private pytree names that libraries use (flax.nnx tests
``type(x) in _registry``)."""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import optree

from ember.tree_util import *  # noqa: F401,F403
from ember.tree_util import NAMESPACE

_NOT_LISTED = (optree.PyTreeKind.NAMEDTUPLE, optree.PyTreeKind.STRUCTSEQUENCE)  # (nodes by their base, as in JAX)


class _Registry(Mapping):
    """The node types of pytrees (the built-in containers and every registered class), read
    live from optree's registry of ember's namespace: ``type in _registry``."""

    def _entries(self) -> dict:
        return {cls: entry for cls, entry in optree.register_pytree_node.get(namespace=NAMESPACE).items()
                if entry.kind not in _NOT_LISTED}

    def __getitem__(self, cls: Any) -> Any:
        entry = optree.register_pytree_node.get(cls, namespace=NAMESPACE) if isinstance(cls, type) else None
        if entry is None or entry.kind in _NOT_LISTED:
            raise KeyError(cls)
        return entry

    def __contains__(self, cls: object) -> bool:
        try:
            self[cls]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[type]:
        return iter(self._entries())

    def __len__(self) -> int:
        return len(self._entries())


_registry = _Registry()
