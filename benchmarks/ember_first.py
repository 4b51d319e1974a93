"""A pytest plugin that makes ``import jax`` resolve to ember before a suite imports anything:
``pytest -p benchmarks.ember_first --pyargs optax`` (``benchmarks/library_suite.py``). pytest loads
``-p`` plugins early, in xdist's workers too."""
import ember

ember.install_as_jax()
