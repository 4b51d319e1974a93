"""Probability distributions (``jax.scipy.stats``): one module per distribution, each with the
functions of JAX's (``norm.logpdf(x, loc=0, scale=1)``, ...), written with ``ember.numpy``.

Arguments promote together to one floating dtype as in JAX (float32 by default, weak
Python scalars); out-of-support points give a density of 0 (log-density -inf).
"""
from ember.scipy.stats import (  # noqa: F401
    bernoulli,
    beta,
    betabinom,
    binom,
    cauchy,
    chi2,
    dirichlet,
    expon,
    gamma,
    geom,
    gumbel_l,
    gumbel_r,
    laplace,
    logistic,
    multinomial,
    multivariate_normal,
    nbinom,
    norm,
    pareto,
    poisson,
    t,
    uniform,
)
