"""BFGS (Nocedal & Wright, *Numerical Optimization*, algorithm 6.1): a quasi-Newton method
that keeps an estimate ``H`` of the inverse Hessian, steps along ``-H g`` by a strong Wolfe
line search, and updates ``H`` from the step and the change of gradient. One
``lax.while_loop``, so it runs under jit and vmap."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

import ember.numpy as jnp
from ember import lax
from ember.numpy.core import ensure_array, promote_dtypes_inexact
from ember.scipy.optimize._line_search import line_search
from ember.transforms.api import value_and_grad


class BFGSResults(NamedTuple):
    """The state of the search; ``status``: 0 converged, 1 ``maxiter`` reached, ``2 + s`` the line
    search failed with status ``s``, -1 otherwise."""

    converged: Any
    failed: Any
    k: Any
    nfev: Any
    ngev: Any
    x_k: Any
    f_k: Any
    g_k: Any
    H_k: Any
    old_old_fval: Any
    status: Any
    line_search_status: Any


def minimize_bfgs(fun: Callable, x0: Any, maxiter: int | None = None, norm: Any = np.inf, gtol: float = 1e-5,
                  line_search_maxiter: int = 10) -> BFGSResults:
    """Minimize ``fun`` from the 1-D ``x0`` until the ``norm`` (an order for ``jnp.linalg.norm``)
    of the gradient is below ``gtol``, for at most ``maxiter`` iterations (default ``200 * n``)."""
    x0 = promote_dtypes_inexact(ensure_array(x0))[0]
    if x0.ndim != 1:
        raise ValueError(f"minimize: x0 must be a 1-D array, got shape {x0.shape}")
    if maxiter is None:
        maxiter = x0.size * 200
    n = x0.shape[0]
    f_0, g_0 = value_and_grad(fun)(x0)
    int32 = lambda v: jnp.asarray(v, "int32")  # noqa: E731
    state = BFGSResults(
        converged=jnp.linalg.norm(g_0, ord=norm) < gtol, failed=jnp.zeros((), bool), k=int32(0), nfev=int32(1),
        ngev=int32(1), x_k=x0, f_k=f_0, g_k=g_0, H_k=jnp.eye(n, dtype=x0.dtype),
        # a previous value that makes the first trial step 1.01 / |g_0| (a step of about unit length)
        old_old_fval=f_0 + jnp.linalg.norm(g_0) / 2, status=int32(0), line_search_status=int32(0))

    def keep_going(s: BFGSResults) -> Any:
        return ~s.converged & ~s.failed & (s.k < maxiter)

    def step(s: BFGSResults) -> BFGSResults:
        direction = -(s.H_k @ s.g_k)
        found = line_search(fun, s.x_k, direction, old_fval=s.f_k, old_old_fval=s.old_old_fval, gfk=s.g_k,
                            maxiter=line_search_maxiter)
        move = found.a_k.astype(x0.dtype) * direction
        change = found.g_k - s.g_k
        rho = 1 / jnp.vdot(change, move)
        # H+ = (I - rho s y^T) H (I - rho y s^T) + rho s s^T, expanded to outer products (O(n^2)).
        h_change = s.H_k @ change
        change_h = change @ s.H_k
        updated = (s.H_k - rho * (jnp.outer(move, change_h) + jnp.outer(h_change, move))
                   + (rho * rho * jnp.vdot(change, h_change) + rho) * jnp.outer(move, move))
        # A zero (or non-finite) curvature y.s says nothing about the Hessian: keep the estimate.
        hessian_inv = jnp.where(jnp.isfinite(rho), updated, s.H_k)
        return s._replace(
            converged=jnp.linalg.norm(found.g_k, ord=norm) < gtol, failed=found.failed, k=s.k + 1,
            nfev=s.nfev + found.nfev, ngev=s.ngev + found.ngev, x_k=s.x_k + move, f_k=found.f_k.astype(f_0.dtype),
            g_k=found.g_k, H_k=hessian_inv, old_old_fval=s.f_k, line_search_status=found.status)

    state = lax.while_loop(keep_going, step, state)
    status = jnp.where(state.converged, 0,
                       jnp.where(state.k == maxiter, 1, jnp.where(state.failed, 2 + state.line_search_status, -1)))
    return state._replace(status=status.astype("int32"))
