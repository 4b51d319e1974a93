"""``ember.scipy``: the parts of ``jax.scipy`` that JAX programs commonly use (special
functions, probability distributions, SciPy-style linear algebra, cosine transforms,
integration, convolution, vector quantization, interpolation on grids, minimization), written with
``ember.numpy`` and ``ember.lax`` only, so they work eagerly and under jit, vmap and grad."""
from ember.scipy import cluster, fft, integrate, linalg, ndimage, optimize, signal, special, stats  # noqa: F401
