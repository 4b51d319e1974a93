"""Calculus on sampled data: finite differences (``diff``, ``ediff1d``, ``gradient``), the
trapezoidal rule (``trapezoid``), piecewise-linear interpolation (``interp``) and phase
unwrapping (``unwrap``).

Samples lie along one axis; slicing that axis with static bounds keeps every result's
shape known while tracing, so all of these work under ``jit``, ``vmap`` and ``grad``.
"""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from ember import dtypes, lax
from ember.lax.base import canonical_axes
from ember.lax.reductions import static_axis
from ember.numpy.core import broadcast_to, ensure_array, promote_dtypes, promote_dtypes_inexact
from ember.numpy.index_functions import take
from ember.numpy.reductions import cumsum, sum as _sum
from ember.numpy.shape_ops import concatenate, moveaxis, ravel
from ember.numpy.sorting import searchsorted
from ember.numpy.static_args import static_int
from ember.numpy.ufuncs import abs, add, clip, divide, multiply, remainder, subtract, where

__all__ = ["diff", "ediff1d", "gradient", "interp", "trapezoid", "unwrap"]


def _along(x: Any, axis: int, start: int | None, stop: int | None) -> Any:
    """``x[start:stop]`` along ``axis`` (Python slice bounds)."""
    return lax.slice_in_dim(x, start, stop, axis=axis)


# --- differences ---------------------------------------------------------------------------------
def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Any:
    """The ``n``-th discrete difference ``a[1:] - a[:-1]`` along ``axis``, after joining
    ``prepend`` and ``append`` (scalars are broadcast to one slice). Booleans differ by ``!=``."""
    a = ensure_array(a)
    n = static_int(n, "n", "diff")
    axis = static_int(axis, "axis", "diff")
    if n == 0:
        return a
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n}")
    if a.ndim == 0:
        raise ValueError(f"diff requires input that is at least one dimensional; got a 0-d array {a.aval.str_short()}")
    axis = static_axis(axis, a.ndim)
    if prepend is not None or append is not None:
        before = [] if prepend is None else [_as_slice(prepend, a.shape, axis)]
        after = [] if append is None else [_as_slice(append, a.shape, axis)]
        a = concatenate(before + [a] + after, axis)
    difference = lax.ne if a.dtype == dtypes.bool_ else lax.sub
    for _ in range(n):
        a = difference(_along(a, axis, 1, None), _along(a, axis, None, -1))
    return a


def _as_slice(edge: Any, shape: tuple, axis: int) -> Any:
    """A scalar ``prepend`` / ``append`` as one slice along ``axis``; arrays are joined as given."""
    edge = ensure_array(edge)
    if edge.ndim:
        return edge
    return broadcast_to(edge, shape[:axis] + (1,) + shape[axis + 1:])


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Any:
    """Differences of consecutive elements of the flattened ``ary``, with ``to_begin`` and
    ``to_end`` (flattened, cast to ``ary``'s dtype) joined at the ends."""
    flat = ravel(ary)
    parts = [lax.sub(_along(flat, 0, 1, None), _along(flat, 0, None, -1))]
    if to_begin is not None:
        parts.insert(0, lax.convert_element_type(ravel(to_begin), flat.dtype))
    if to_end is not None:
        parts.append(lax.convert_element_type(ravel(to_end), flat.dtype))
    return concatenate(parts) if len(parts) > 1 else parts[0]


def gradient(f: Any, *varargs: Any, axis: int | Sequence[int] | None = None, edge_order: int | None = None) -> Any:
    """The gradient of sampled ``f``: central differences inside, one-sided ones at the edges.

    ``varargs`` is the spacing: nothing (unit spacing), one scalar or coordinate array for
    every axis, or one per axis. Returns one array for one axis, else a list (one per axis).
    Only first-order edges (``edge_order=1``) are available, as in JAX.
    """
    if edge_order not in (None, 1):
        raise NotImplementedError(f"jnp.gradient supports only edge_order=1, got edge_order={edge_order!r}")
    f, *spacing = promote_dtypes_inexact(f, *varargs)
    if axis is None:
        axes = tuple(range(f.ndim))
    else:
        given = (axis,) if not isinstance(axis, (tuple, list)) else axis
        axes = canonical_axes(tuple(static_int(ax, "axis", "gradient") for ax in given), f.ndim)
    if not axes:
        return []
    if min(f.shape[ax] for ax in axes) < 2:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at least 2 elements are "
                         f"required along each axis; got shape {f.shape} and axes {axes}.")
    if len(spacing) > 1 and len(spacing) != len(axes):
        raise TypeError(f"Invalid number of spacing arguments {len(spacing)} for axis={axis}: pass none, "
                        f"one, or one per axis ({len(axes)}).")
    spacing = spacing or [ensure_array(1.0)]
    if len(spacing) == 1:
        spacing = spacing * len(axes)
    grads = [_gradient_along(f, h, ax) for h, ax in zip(spacing, axes)]
    return grads[0] if len(grads) == 1 else grads


def _gradient_along(f: Any, h: Any, axis: int) -> Any:
    def part(x: Any, start: int | None, stop: int | None) -> Any:
        return _along(x, axis, start, stop)

    first_step = subtract(part(f, 1, 2), part(f, 0, 1))
    last_step = subtract(part(f, -1, None), part(f, -2, -1))
    if h.ndim == 0:
        inner = divide(subtract(part(f, 2, None), part(f, None, -2)), multiply(2, h))
        return concatenate([divide(first_step, h), inner, divide(last_step, h)], axis)
    if h.ndim != 1:
        raise ValueError(f"Spacing arrays must be 1D arrays or scalars; got shape {h.shape}.")
    if h.shape[0] != f.shape[axis]:
        raise ValueError("Spacing arrays must have the same length as the dimension along which the gradient is "
                         f"calculated; got {h.shape[0]} coordinates for axis {axis} of size {f.shape[axis]}.")
    x = lax.broadcast_in_dim(h, tuple(f.shape[axis] if d == axis else 1 for d in range(f.ndim)), (axis,))
    dx1 = subtract(part(x, 1, -1), part(x, 0, -2))  # the step before each interior point
    dx2 = subtract(part(x, 2, None), part(x, 1, -1))  # and after it
    # The second-order accurate central difference on an uneven grid.
    weight_before = divide(-dx2, multiply(dx1, add(dx1, dx2)))
    weight_here = divide(subtract(dx2, dx1), multiply(dx1, dx2))
    weight_after = divide(dx1, multiply(dx2, add(dx1, dx2)))
    inner = add(add(multiply(weight_before, part(f, 0, -2)), multiply(weight_here, part(f, 1, -1))),
                multiply(weight_after, part(f, 2, None)))
    first = divide(first_step, subtract(part(x, 1, 2), part(x, 0, 1)))
    last = divide(last_step, subtract(part(x, -1, None), part(x, -2, -1)))
    return concatenate([first, inner, last], axis)


# --- integration -----------------------------------------------------------------------------------
def trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Any:
    """The integral of ``y`` along ``axis`` by the trapezoidal rule, at sample points ``x``
    (1-D, or shaped like ``y``) or at spacing ``dx``."""
    axis = static_int(axis, "axis", "trapezoid")
    if x is None:
        (y,) = promote_dtypes_inexact(y)
        steps = ensure_array(dx)
        if steps.ndim:  # spacings that vary along the axis, aligned with y's trailing dims
            steps = moveaxis(lax.broadcast_to_rank(steps, y.ndim), axis, -1)
    else:
        y, x = promote_dtypes_inexact(y, x)
        steps = diff(x) if x.ndim == 1 else moveaxis(diff(x, axis=axis), axis, -1)
    y = moveaxis(y, axis, -1)
    heights = add(_along(y, -1, 1, None), _along(y, -1, None, -1))
    return multiply(0.5, _sum(multiply(steps, heights), -1))


# --- interpolation -------------------------------------------------------------------------------
def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None) -> Any:
    """Piecewise-linear interpolation of the points ``(xp, fp)`` (``xp`` increasing) at ``x``.

    Outside ``[xp[0], xp[-1]]`` the result is ``left`` / ``right`` (default: the end values of
    ``fp``), or the extension of the end segment for ``'extrapolate'``. With ``period``, the
    points repeat with that period (and ``xp`` may be in any order).
    """
    x, xp, fp = ensure_array(x), ensure_array(xp), ensure_array(fp)
    if xp.ndim != 1 or xp.shape != fp.shape:
        raise ValueError(f"xp and fp must be one-dimensional arrays of equal size; got shapes {xp.shape} and "
                         f"{fp.shape}")
    if xp.shape[0] == 0:
        raise ValueError("array of sample points is empty")
    x, xp = promote_dtypes_inexact(x, xp)
    (fp,) = promote_dtypes_inexact(fp)
    extrapolate_left, extrapolate_right = _extrapolates(left, "left"), _extrapolates(right, "right")
    if period is not None:
        x, xp, fp = _periodic(x, xp, fp, period)
    n = xp.shape[0]
    # The segment [xp[below], xp[above]] around each x; the end segments extend outwards.
    above = clip(searchsorted(xp, x, side="right"), 1, max(n - 1, 1))
    below = lax.sub(above, 1)
    x_below, f_below = take(xp, below, mode="clip"), take(fp, below, mode="clip")
    step = subtract(take(xp, above, mode="clip"), x_below)
    # Repeated sample points (and a single one) give a flat segment: no 0/0, no NaN gradient.
    flat = lax.eq(step, lax.convert_element_type(0, step.dtype))
    slope_part = multiply(divide(subtract(x, x_below), where(flat, 1, step)),
                          subtract(take(fp, above, mode="clip"), f_below))
    f = where(flat, f_below, add(f_below, slope_part))
    if period is None:
        if not extrapolate_left:
            f = where(x < xp[0], fp[0] if left is None else left, f)
        if not extrapolate_right:
            f = where(x > xp[-1], fp[-1] if right is None else right, f)
    return f


def _extrapolates(value: Any, name: str) -> bool:
    if not isinstance(value, str):
        return False
    if value != "extrapolate":
        raise ValueError(f"the only valid string value of `{name}` is 'extrapolate', but got: {value!r}")
    return True


def _periodic(x: Any, xp: Any, fp: Any, period: Any) -> tuple[Any, Any, Any]:
    """Points reduced to one period, sorted, with a wrapped-around point added at each end."""
    period = abs(ensure_array(period))
    if period.ndim:
        raise ValueError(f"period must be a scalar; got shape {period.shape}")
    x, xp = remainder(x, period), remainder(xp, period)
    xp, fp = lax.sort_key_val(xp, fp)
    xp = concatenate([subtract(_along(xp, 0, -1, None), period), xp, add(_along(xp, 0, None, 1), period)])
    fp = concatenate([_along(fp, 0, -1, None), fp, _along(fp, 0, None, 1)])
    return x, xp, fp


def unwrap(p: Any, discont: Any = None, axis: int = -1, period: Any = 2 * np.pi) -> Any:
    """``p`` with jumps between neighbours along ``axis`` larger than ``discont`` (default
    ``period / 2``) taken modulo ``period``: phase unwrapping. Integer phases stay integer (with
    an integer ``period``), as in JAX; complex phases are refused."""
    p, period = promote_dtypes(p, period)
    if dtypes.is_complex(p.dtype):
        raise ValueError("jnp.unwrap does not support complex inputs.")
    axis = canonical_axes(operator.index(axis), p.ndim)[0]
    if p.shape[axis] == 0:
        return p
    if discont is None:
        discont = period / 2
    interval = period // 2 if dtypes.is_integer(p.dtype) else period / 2
    dd = diff(p, axis=axis)
    ddmod = remainder(dd + interval, period) - interval
    ddmod = where((ddmod == -interval) & (dd > 0), interval, ddmod)
    correction = where(abs(dd) < discont, 0, ddmod - dd)
    return concatenate((_along(p, axis, 0, 1), _along(p, axis, 1, None) + cumsum(correction, axis=axis)), axis=axis)
