"""The version of ember (a leaf: the disk cache keys compiled code by it)."""
__version__ = "0.2.0"
