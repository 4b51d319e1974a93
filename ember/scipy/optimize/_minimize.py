"""``minimize``: SciPy's entry point to the minimizers, gradients by ``ember.grad``."""
from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple

import ember.numpy as jnp
from ember.scipy.optimize._bfgs import minimize_bfgs

__all__ = ["OptimizeResults", "minimize"]


class OptimizeResults(NamedTuple):
    """What ``minimize`` found: the point ``x``, ``fun`` and its gradient ``jac`` there, the
    inverse-Hessian estimate ``hess_inv``; ``success`` (converged, no line search failure),
    ``status`` (0 converged, 1 too many iterations, 2 or more: the line search failed), and the
    counts of iterations ``nit`` and of evaluations of ``fun`` (``nfev``) and its gradient (``njev``)."""

    x: Any
    success: Any
    status: Any
    fun: Any
    jac: Any
    hess_inv: Any
    nfev: Any
    njev: Any
    nit: Any


def minimize(fun: Callable, x0: Any, args: tuple = (), *, method: str, tol: float | None = None,
             options: Mapping[str, Any] | None = None) -> OptimizeResults:
    """The minimum of ``fun(x, *args)`` (a real scalar) from the 1-D ``x0``, by ``method``
    ``"BFGS"`` (options ``maxiter``, ``norm``, ``gtol``, ``line_search_maxiter``). Runs under jit;
    ``tol`` is accepted and ignored, as in JAX (use ``options={"gtol": ...}``)."""
    if not isinstance(args, tuple):
        raise TypeError(f"args argument to jax.scipy.optimize.minimize must be a tuple, got {args}")
    options = dict(options or {})

    def objective(x: Any) -> Any:
        return fun(x, *args)

    if method.lower() == "bfgs":
        found = minimize_bfgs(objective, x0, **options)
        return OptimizeResults(x=found.x_k, success=found.converged & jnp.logical_not(found.failed),
                               status=found.status, fun=found.f_k, jac=found.g_k, hess_inv=found.H_k,
                               nfev=found.nfev, njev=found.ngev, nit=found.k)
    raise ValueError(f"Method {method} not recognized")
