"""Runtime objects: Array, executables and caches."""
