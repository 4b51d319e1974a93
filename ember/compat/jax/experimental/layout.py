"""``jax.experimental.layout``: an array's memory layout with its sharding. ember's arrays are
row-major on one device: a ``Format`` records what it is given."""
from __future__ import annotations

from typing import Any


class Layout:
    def __init__(self, major_to_minor: Any = None, *args: Any, **kwargs: Any) -> None:
        self.major_to_minor = major_to_minor


class Format:
    def __init__(self, layout: Any = None, sharding: Any = None) -> None:
        self.layout, self.sharding = layout, sharding

    def __repr__(self) -> str:
        return f"Format({self.layout!r}, {self.sharding!r})"


__all__ = ["Format", "Layout"]
