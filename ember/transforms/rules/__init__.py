"""The jvp, partial-evaluation and transpose rules, one module per primitive family.
Importing this package registers them all."""
from ember.transforms.rules import (  # noqa: F401
    calls,
    control_flow,
    convolution,
    dot,
    elementwise,
    fft,
    indexing,
    linalg,
    parallel,
    reductions,
    shapes,
)
