"""Program transformations: forward-mode differentiation (jvp), partial evaluation
(linearize) and transposition (vjp / grad), each a trace or a rewrite of the IR.

The public functions live in ``ember.transforms.api`` (re-exported by ``ember``);
the per-primitive rules in ``ember.transforms.rules``. This package module imports
nothing, so ``ember.lax`` can take ``stop_gradient`` from it while it initializes.
"""
