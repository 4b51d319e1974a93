"""``ember.scipy``: the parts of ``jax.scipy`` that JAX programs commonly use (special
functions, probability distributions, SciPy-style linear algebra, cosine transforms,
integration, convolution, vector quantization, interpolation on grids, minimization,
iterative linear solvers), written with ``ember.numpy`` and ``ember.lax`` only, so they work
eagerly and under jit and vmap (and grad, except through the minimizer's and solvers' loops)."""
from ember.scipy import cluster, fft, integrate, linalg, ndimage, optimize, signal, sparse, special, stats  # noqa: F401
