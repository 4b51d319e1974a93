"""Probability distributions (``jax.scipy.stats``): one module per distribution, each with the
functions of JAX's (``norm.logpdf(x, loc=0, scale=1)``, ...), written with ``ember.numpy``.

Arguments promote together to one floating dtype as in JAX (float32 by default, weak
Python scalars); out-of-support points give a density of 0 (log-density -inf).
"""
from ember.scipy.stats import bernoulli, expon, laplace, logistic, multivariate_normal, norm, poisson, t, uniform  # noqa: F401
