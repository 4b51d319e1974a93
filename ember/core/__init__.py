"""The tracing core: abstract values, primitives, tracers, the IR and staging.
Independent of the NumPy API and of the backends."""

from ember.core import evaluation  # noqa: F401  (installs the evaluator of eager operations)
