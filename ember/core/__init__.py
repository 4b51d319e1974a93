"""The tracing core: abstract values, primitives and their rule tables, tracers, the IR, the
concrete ``Array``, the evaluator of eager operations, the call primitives, staging and the IR
checker. It imports only the leaves (``dtypes``, ``config``, ``errors``): every layer above
builds on it (see ``docs/ARCHITECTURE.md``)."""

from ember.core import evaluation  # noqa: F401  (installs the evaluator of eager operations)
