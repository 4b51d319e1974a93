"""``jax.ref``: mutable array references (``Ref``), as ember has them (``ember.lax.refs``, docs/refs.md)."""
from __future__ import annotations

from ember.lax.refs import AbstractRef, Ref, addupdate, freeze, get, new_ref, set, swap

__all__ = ["AbstractRef", "Ref", "addupdate", "freeze", "get", "new_ref", "set", "swap"]
