"""``ember.random``: JAX's ``jax.random`` API, giving the same values for the same keys.

Two kinds of keys, as in JAX, hashed with Threefry-2x32 in JAX's default
(``jax_threefry_partitionable``) layout, and taken by every function here:

- ``PRNGKey(seed)`` gives a raw uint32 array of shape (2,), JAX's "legacy" key; batches of raw
  keys have shape (..., 2), and ``split``/``fold_in`` of a raw key give raw keys.
- ``key(seed)`` gives a typed key array (``PRNGKeyArray``, ``ember.random.prng``): shape (),
  dtype ``key<fry>`` (``jnp.issubdtype(k.dtype, jax.dtypes.prng_key)``), repr
  ``Array((), dtype=key<fry>) overlaying:\n[0 0]``, over the same words. ``split`` gives typed
  keys of shape ``num``; ``key_data`` gives the uint32 words (shape ``k.shape + (2,)``) and
  ``wrap_key_data`` wraps them. Samplers give the same values for ``key(s)`` as for ``PRNGKey(s)``.

Design of typed keys. ``PRNGKeyArray`` holds its raw uint32 data and its implementation
(``ember.random.impls``). It is a pytree *leaf*, as in JAX, and to ember's transformations an
*array node* over its data (``ember.tree_util.register_array_node``): ``jit`` (whose cache sees the
node type, so typed and raw keys trace apart), ``vmap``, ``scan``, ``fori_loop``, ``cond``,
``grad`` (float0 cotangents of the key's shape), ``vjp`` and ``eval_shape`` (ShapeDtypeStructs of
key dtype, in and out) carry keys with no change to ember's tracing. It derives from
``ember.Array``, so ``isinstance(k, jax.Array)`` holds as in JAX, and overrides every method and
operator: arithmetic, ordering and NumPy conversion raise JAX's errors; indexing, iteration,
``reshape``/``ravel``/``squeeze``/``transpose``/``.T``, ``.at[i].set(keys)``, and ``==``/``!=``
between keys work as in JAX. Left different from JAX:

- ``jnp.stack``, ``jnp.concatenate``, ``jnp.where``, ``jnp.broadcast_to`` and ``jnp.expand_dims``
  take keys as in JAX (``ember.numpy.keys``); other ``jax.numpy`` functions and ``lax``
  operations that JAX lets take keys (``jnp.zeros_like``, ``lax.select``, ...) raise TypeError
  (mostly "Cannot interpret 'key<fry>' as a data type"): use the key methods, or
  ``wrap_key_data(f(key_data(k)))``. (``lax.full_like``, ``jnp.shape``, ``jnp.ndim``,
  ``jnp.ravel`` and ``jax.typeof(k)``, ``ShapedArray(key<fry>[])``, do work.)

Implementations: Threefry-2x32 (the default), and ``rbg`` / ``unsafe_rbg`` (``key(s, impl="rbg")``,
dtype ``key<rbg>`` / ``key<urbg>``, four words a key; ``ember.random.rbg``), whose bits equal JAX's
on the CPU (XLA's Philox bit generator), also under ``vmap``, where, as in JAX, the first key of
a batch draws for all of it. JAX's other names (``philox4x32``, ...) raise ValueError. A raw key
is always of the default implementation; ``key_impl`` names a key's, ``key_dtype`` gives its dtype.

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
Not provided: ``mode="highest"`` of ``gumbel``, ``out_sharding`` arguments, and the gradients
of the gamma family with respect to their shape parameters.
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
from ember.random.keys import (  # noqa: F401
    PRNGKey,
    fold_in,
    key,
    key_data,
    key_dtype,
    sampler as _sampler,
    split,
    wrap_key_data,
)
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

# The samplers as entry points: a raw key given to one is always of the default implementation
# (``ember.random.keys.sampler``); inside, samplers call each other on the raw data of the key given.
for _name in ("bits", "categorical", "choice", "exponential", "gumbel", "laplace", "logistic", "normal",
              "permutation", "rademacher", "randint", "truncated_normal", "uniform", "ball", "beta", "binomial",
              "cauchy", "chisquare", "dirichlet", "double_sided_maxwell", "f", "gamma", "generalized_normal",
              "geometric", "loggamma", "lognormal", "maxwell", "multinomial", "multivariate_normal", "orthogonal",
              "pareto", "poisson", "rayleigh", "t", "triangular", "wald", "weibull_min", "bernoulli"):
    globals()[_name] = _sampler(globals()[_name])
del _name, _sampler
