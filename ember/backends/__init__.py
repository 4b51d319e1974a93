"""Backends: the NumPy reference interpreter (``reference``: the rule tables that define every
primitive) and the native CPU backend (``cpu``: LLVM kernels, BLAS, native loops, and the
reference for whatever it does not lower), with the disk cache of compiled code. The
executables that run them are ``ember.runtime.executable``'s."""
