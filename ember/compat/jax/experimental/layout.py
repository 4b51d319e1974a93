"""``jax.experimental.layout``: an array's memory layout with its sharding (``Array.format``)."""
from ember.core.sharding import Format, Layout

__all__ = ["Format", "Layout"]
