"""A line search for the strong Wolfe conditions (Nocedal & Wright, *Numerical Optimization*,
algorithms 3.5 and 3.6), as one ``lax.while_loop`` so that it runs under jit.

The search has two phases in one loop, so each trip evaluates ``f`` once: *bracketing* tries
growing steps (the first from the previous decrease, then doubling) until one is acceptable or
an interval ``[lo, hi]`` known to hold an acceptable step is found; *zooming* then shrinks that
interval, trying the minimizer of a cubic (or quadratic) fitted to what is known, kept off the
interval's ends, else its midpoint.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import ember.numpy as jnp
from ember import dtypes, lax, tree_util
from ember.numpy.core import ensure_array, promote_dtypes_inexact
from ember.transforms.api import value_and_grad

_CUBIC_MARGIN = 0.2  # a cubic trial must lie this fraction of the interval inside it
_QUADRATIC_MARGIN = 0.1
_MAX_ZOOMS = 30


class LineSearchResults(NamedTuple):
    """The step ``a_k`` along the direction, ``f`` and its gradient there; ``status``: 0 found,
    1 the zoom failed (interval too small, or too many trials), 3 no bracket within ``maxiter``."""

    failed: Any
    nfev: Any
    ngev: Any
    a_k: Any
    f_k: Any
    g_k: Any
    status: Any


class _State(NamedTuple):
    zooming: Any
    done: Any
    failed: Any
    i: Any          # bracketing trials so far
    j: Any          # zoom trials so far
    nfev: Any
    # bracketing: the previous trial step
    a_prev: Any
    phi_prev: Any
    dphi_prev: Any
    g_prev: Any
    # zooming: lo has sufficient decrease and the lowest value seen; the step sought lies between
    # lo and hi; rec is the point dropped last (a third point for the cubic)
    a_lo: Any
    phi_lo: Any
    dphi_lo: Any
    g_lo: Any
    a_hi: Any
    phi_hi: Any
    dphi_hi: Any
    a_rec: Any
    phi_rec: Any
    # the step accepted
    a_star: Any
    phi_star: Any
    g_star: Any


def _cubic_minimizer(a: Any, fa: Any, fpa: Any, b: Any, fb: Any, c: Any, fc: Any) -> Any:
    """The local minimizer of the cubic through ``(a, fa)`` with slope ``fpa`` there, ``(b, fb)`` and
    ``(c, fc)``; NaN when there is none (the caller then falls back)."""
    db, dc = b - a, c - a
    rb, rc = fb - fa - fpa * db, fc - fa - fpa * dc
    det = db * db * dc * dc * (db - dc)
    cubic = (dc * dc * rb - db * db * rc) / det
    square = (db * db * db * rc - dc * dc * dc * rb) / det
    return a + (-square + jnp.sqrt(square * square - 3 * cubic * fpa)) / (3 * cubic)


def _quadratic_minimizer(a: Any, fa: Any, fpa: Any, b: Any, fb: Any) -> Any:
    """The minimizer of the parabola through ``(a, fa)`` with slope ``fpa`` there and ``(b, fb)``."""
    db = b - a
    curvature = (fb - fa - fpa * db) / (db * db)
    return a - fpa / (2 * curvature)


def line_search(f: Callable, xk: Any, pk: Any, old_fval: Any = None, old_old_fval: Any = None, gfk: Any = None,
                c1: float = 1e-4, c2: float = 0.9, maxiter: int = 20) -> LineSearchResults:
    """A step ``a`` along ``pk`` from ``xk`` with ``f(xk + a pk) <= f(xk) + c1 a slope`` and
    ``|slope at a| <= c2 |slope at 0|`` (``slope``: the directional derivative). ``old_fval`` and
    ``gfk`` (``f`` and its gradient at ``xk``) save an evaluation; ``old_old_fval`` (``f`` at the
    previous point) sets the first trial step to the one that repeats the last decrease."""
    xk, pk = promote_dtypes_inexact(ensure_array(xk), ensure_array(pk))
    real = dtypes.finfo(xk.dtype).dtype
    evaluate = value_and_grad(f)

    def along(a: Any) -> tuple[Any, Any, Any]:
        phi, g = evaluate(xk + a.astype(xk.dtype) * pk)
        return phi.astype(real), jnp.real(jnp.vdot(g, pk)).astype(real), g

    nfev = 0
    if old_fval is None or gfk is None:
        phi_0, dphi_0, gfk = along(jnp.zeros((), real))
        nfev = 1
    else:
        phi_0 = jnp.asarray(old_fval).astype(real)
        dphi_0 = jnp.real(jnp.vdot(gfk, pk)).astype(real)
    first = jnp.ones((), real)
    if old_old_fval is not None:  # the step that would repeat the last decrease, at most 1
        guess = 1.01 * 2 * (phi_0 - old_old_fval) / dphi_0
        first = jnp.where((guess > 0) & (guess < 1), guess, first).astype(real)
    width_floor = 1e-10 if dtypes.finfo(real).bits >= 64 else 1e-5
    zero = jnp.zeros((), real)

    def sufficient_decrease(a: Any, phi: Any) -> Any:
        return phi <= phi_0 + c1 * a * dphi_0

    def curvature(dphi: Any) -> Any:
        return jnp.abs(dphi) <= -c2 * dphi_0

    def trial(s: _State) -> Any:
        bracket_step = jnp.where(s.i == 0, first, 2 * s.a_prev)
        low, high = jnp.minimum(s.a_lo, s.a_hi), jnp.maximum(s.a_lo, s.a_hi)
        width = high - low
        cubic = _cubic_minimizer(s.a_lo, s.phi_lo, s.dphi_lo, s.a_hi, s.phi_hi, s.a_rec, s.phi_rec)
        quadratic = _quadratic_minimizer(s.a_lo, s.phi_lo, s.dphi_lo, s.a_hi, s.phi_hi)
        use_cubic = (s.j > 0) & (cubic > low + _CUBIC_MARGIN * width) & (cubic < high - _CUBIC_MARGIN * width)
        use_quadratic = (quadratic > low + _QUADRATIC_MARGIN * width) & (quadratic < high - _QUADRATIC_MARGIN * width)
        zoom_step = jnp.where(use_cubic, cubic, jnp.where(use_quadratic, quadratic, (low + high) / 2))
        return jnp.where(s.zooming, zoom_step, bracket_step)

    def bracket(s: _State, a: Any, phi: Any, dphi: Any, g: Any) -> _State:
        # [prev, a] holds a step when a lacks sufficient decrease or rises above prev; [a, prev]
        # when a has decreased but the slope there is already uphill.
        overshot = ~sufficient_decrease(a, phi) | ((phi >= s.phi_prev) & (s.i > 0))
        accept = ~overshot & curvature(dphi)
        uphill = ~overshot & ~accept & (dphi >= 0)
        zoom = overshot | uphill
        pick = lambda at_prev, at_a: jnp.where(overshot, at_prev, at_a)  # noqa: E731
        pick_hi = lambda at_prev, at_a: jnp.where(overshot, at_a, at_prev)  # noqa: E731
        a_lo, phi_lo, dphi_lo = pick(s.a_prev, a), pick(s.phi_prev, phi), pick(s.dphi_prev, dphi)
        g_lo = jnp.where(overshot, s.g_prev, g)
        a_hi, phi_hi, dphi_hi = pick_hi(s.a_prev, a), pick_hi(s.phi_prev, phi), pick_hi(s.dphi_prev, dphi)
        i = s.i + 1
        return s._replace(
            zooming=zoom, done=accept, failed=~zoom & ~accept & (i >= maxiter), i=i,
            a_prev=a, phi_prev=phi, dphi_prev=dphi, g_prev=g,
            a_lo=a_lo, phi_lo=phi_lo, dphi_lo=dphi_lo, g_lo=g_lo, a_hi=a_hi, phi_hi=phi_hi, dphi_hi=dphi_hi,
            a_rec=(a_lo + a_hi) / 2, phi_rec=(phi_lo + phi_hi) / 2,
            a_star=jnp.where(accept, a, s.a_star), phi_star=jnp.where(accept, phi, s.phi_star),
            g_star=jnp.where(accept, g, s.g_star))

    def zoom(s: _State, a: Any, phi: Any, dphi: Any, g: Any) -> _State:
        new_hi = ~sufficient_decrease(a, phi) | (phi >= s.phi_lo)
        accept = ~new_hi & curvature(dphi)
        new_lo = ~new_hi & ~accept
        flip = new_lo & (dphi * (s.a_hi - s.a_lo) >= 0)  # the slope at a points back past lo: old lo is hi
        a_hi = jnp.where(new_hi, a, jnp.where(flip, s.a_lo, s.a_hi))
        phi_hi = jnp.where(new_hi, phi, jnp.where(flip, s.phi_lo, s.phi_hi))
        dphi_hi = jnp.where(new_hi, dphi, jnp.where(flip, s.dphi_lo, s.dphi_hi))
        a_rec = jnp.where(new_hi | flip, s.a_hi, s.a_lo)
        phi_rec = jnp.where(new_hi | flip, s.phi_hi, s.phi_lo)
        a_lo = jnp.where(new_lo, a, s.a_lo)
        phi_lo = jnp.where(new_lo, phi, s.phi_lo)
        dphi_lo = jnp.where(new_lo, dphi, s.dphi_lo)
        g_lo = jnp.where(new_lo, g, s.g_lo)
        j = s.j + 1
        failed = ~accept & ((j >= _MAX_ZOOMS) | (jnp.abs(a_hi - a_lo) <= width_floor))
        return s._replace(
            done=accept, failed=failed, j=j, a_lo=a_lo, phi_lo=phi_lo, dphi_lo=dphi_lo, g_lo=g_lo,
            a_hi=a_hi, phi_hi=phi_hi, dphi_hi=dphi_hi, a_rec=a_rec, phi_rec=phi_rec,
            a_star=jnp.where(accept, a, s.a_star), phi_star=jnp.where(accept, phi, s.phi_star),
            g_star=jnp.where(accept, g, s.g_star))

    def body(s: _State) -> _State:
        a = trial(s)
        phi, dphi, g = along(a)
        s = s._replace(nfev=s.nfev + 1)
        after_bracket, after_zoom = bracket(s, a, phi, dphi, g), zoom(s, a, phi, dphi, g)
        return tree_util.tree_map(lambda z, b: jnp.where(s.zooming, z, b), after_zoom, after_bracket)

    false = jnp.zeros((), bool)
    state = _State(zooming=false, done=false, failed=false, i=jnp.zeros((), "int32"), j=jnp.zeros((), "int32"),
                   nfev=jnp.asarray(nfev, "int32"),
                   a_prev=zero, phi_prev=phi_0, dphi_prev=dphi_0, g_prev=gfk,
                   a_lo=zero, phi_lo=phi_0, dphi_lo=dphi_0, g_lo=gfk, a_hi=zero, phi_hi=phi_0, dphi_hi=dphi_0,
                   a_rec=zero, phi_rec=phi_0, a_star=zero, phi_star=phi_0, g_star=gfk)
    if maxiter > 0:
        state = lax.while_loop(lambda s: ~s.done & ~s.failed, body, state)
    failed = ~state.done
    # On failure, the best step found (lo: sufficient decrease and the lowest value), so a
    # minimizer that stops there still keeps the progress made.
    a_k = jnp.where(failed, state.a_lo, state.a_star)
    f_k = jnp.where(failed, state.phi_lo, state.phi_star)
    g_k = jnp.where(failed, state.g_lo, state.g_star)
    status = jnp.where(state.done, 0, jnp.where(state.zooming, 1, 3)).astype("int32")
    return LineSearchResults(failed=failed, nfev=state.nfev, ngev=state.nfev, a_k=a_k, f_k=f_k, g_k=g_k,
                             status=status)
