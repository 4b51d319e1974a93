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
The samplers of ``samplers.py`` (gamma family, Poisson, binomial, multinomial, ...) split
keys as JAX does; their rejection loops run the same rounds as JAX's except where a
last-bit difference decides a test within rounding of its threshold.
Not provided: ``mode="highest"`` of ``gumbel``, typed key arrays (and so ``key_impl``
returns the name ``"threefry2x32"``), ``out_sharding`` arguments, and the gradients of
the gamma family with respect to their shape parameters.
"""
from ember.random.distributions import (  # noqa: F401
    bernoulli,
    bits,
    categorical,
    choice,
    exponential,
    gumbel,
    laplace,
    logistic,
    normal,
    permutation,
    rademacher,
    randint,
    truncated_normal,
    uniform,
)
from ember.random.keys import PRNGKey, fold_in, key, key_data, split, wrap_key_data  # noqa: F401
from ember.random.samplers import (  # noqa: F401
    ball,
    beta,
    binomial,
    cauchy,
    chisquare,
    clone,
    dirichlet,
    double_sided_maxwell,
    f,
    gamma,
    generalized_normal,
    geometric,
    key_impl,
    loggamma,
    lognormal,
    maxwell,
    multinomial,
    multivariate_normal,
    orthogonal,
    pareto,
    poisson,
    rayleigh,
    t,
    triangular,
    wald,
    weibull_min,
)
