"""``ember.random``: JAX's ``jax.random`` API, giving the same values for the same keys.

Keys are raw uint32 arrays of shape (2,), JAX's "legacy" keys, hashed with Threefry-2x32
in JAX's default (``jax_threefry_partitionable``) layout; batches of keys have shape
(..., 2). ``key(seed)`` returns the same raw key as ``PRNGKey(seed)`` rather than a typed
scalar key array: ember has no extended dtypes, and every function here takes raw keys.
So ``key_data`` and ``wrap_key_data`` check their argument and return it unchanged.

Keys are data: samplers are elementwise lax programs, so they run eagerly, under
``jit`` and ``vmap`` (``vmap(lambda k: normal(k, ()))(split(key, 8))``), and ``grad``
flows to parameters such as ``uniform``'s bounds (never to keys).

Keys, bits, integer draws, permutations and choices equal JAX's bit for bit, and so do
uniform floats in [0, 1) and the samplers built on them without further rounding
(bernoulli, categorical). Where more arithmetic follows, the last bit or two can differ:
transcendental functions (log, log1p, erf) round differently in ember and XLA, and for
``uniform`` with other bounds XLA's CPU backend fuses ``u * (maxval - minval) + minval``
into one fused multiply-add where ember rounds the product first. ``normal`` evaluates
erf_inv with XLA's float32 polynomial rather than ``lax.erf_inv`` so that it stays within
a few ulp of JAX (float64 uses ember's accurate ``lax.erf_inv``).
Not provided: ``multivariate_normal`` (ember has no Cholesky yet), the gamma family and
the other samplers of jax.random, and ``mode="highest"`` of ``gumbel``.
"""
from ember.random.distributions import (  # noqa: F401
    bernoulli, bits, categorical, choice, exponential, gumbel, laplace, logistic, normal, permutation,
    rademacher, randint, truncated_normal, uniform,
)
from ember.random.keys import PRNGKey, fold_in, key, key_data, split, wrap_key_data  # noqa: F401
