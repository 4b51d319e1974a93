"""Packages that stand for other projects' module paths, in ember's own code (see ``jax``)."""
