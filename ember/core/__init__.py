"""The tracing core: abstract values, primitives, tracers, the IR and staging.
Independent of the NumPy API and of the backends."""
