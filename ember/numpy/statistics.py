"""Counting and co-variation: ``bincount``, ``digitize``, ``histogram``, ``histogram_bin_edges``,
``cov`` and ``corrcoef``.

Counts are scatter-adds into a zero array whose length must be static: ``bincount`` under
``jit`` needs ``length=``, and ``histogram`` needs ``bins`` as a Python int or an array of
edges, as in JAX.
"""
from __future__ import annotations

import builtins
import math
from typing import Any, Sequence

import numpy as np

from ember import dtypes, lax
from ember.numpy.core import asarray, ensure_array, promote_dtypes_inexact
from ember.numpy.creation import full, linspace, ones_like, zeros
from ember.numpy.index_functions import ravel_multi_index
from ember.numpy.linalg import diag, dot
from ember.numpy.reductions import average, max as _max, min as _min, sum as _sum
from ember.numpy.shape_ops import atleast_2d, concatenate, ravel, reshape, squeeze, stack
from ember.numpy.sorting import searchsorted
from ember.numpy.static_args import static_bool, static_int, static_value
from ember.numpy.ufuncs import abs, add, clip, conj, divide, greater_equal, imag, multiply, real, sqrt, subtract, where

__all__ = ["bincount", "corrcoef", "cov", "digitize", "histogram", "histogram2d", "histogram_bin_edges", "histogramdd"]


# --- counting ----------------------------------------------------------------------------------
def bincount(x: Any, weights: Any = None, minlength: int = 0, *, length: int | None = None) -> Any:
    """How often each value ``0, 1, ...`` occurs in the 1-D integer array ``x`` (with
    ``weights``: their sum per value).

    The result has ``length`` entries if given (larger values are dropped), else
    ``max(minlength, x.max() + 1)``, which needs a concrete ``x``: under ``jit`` pass ``length``.
    Negative values count as 0, as in JAX.
    """
    x = ensure_array(x)
    if x.dtype == dtypes.bool_:
        x = lax.convert_element_type(x, dtypes.int32)
    if x.dtype not in dtypes.INTEGER:
        raise TypeError(f"x argument to bincount must have an integer type; got {x.dtype}")
    if x.ndim != 1:
        raise ValueError(f"only 1-dimensional input supported; got x of shape {x.shape}")
    minlength = static_int(minlength, "minlength", "bincount")
    if minlength < 0:
        raise ValueError(f"minlength must not be negative, got {minlength}")
    if length is None:
        largest = static_value(
            x, lambda v: int(np.max(np.asarray(v))) if v.size else -1, "x", "bincount",
            "without `length` the result's length depends on the values of x; pass a static length=N")
        length = max(minlength, largest + 1)
    else:
        length = static_int(length, "length", "bincount")
    if weights is None:
        weights = np.array(1, dtype=dtypes.default_int_dtype())
    else:
        weights = ensure_array(weights)
        if weights.shape != x.shape:
            raise ValueError(f"weights must have the same shape as x; got {weights.shape} and {x.shape}")
    counts = zeros(length, ensure_array(weights).dtype)
    return counts.at[clip(x, 0)].add(weights, mode="drop")


def digitize(x: Any, bins: Any, right: bool = False, *, method: str | None = None) -> Any:
    """The index of the bin of each ``x``: ``i`` with ``bins[i-1] <= x < bins[i]`` for increasing
    ``bins`` (``<`` and ``<=`` swap with ``right``), also for decreasing ``bins``.
    ``method`` is passed to ``searchsorted``."""
    x, bins = ensure_array(x), ensure_array(bins)
    right = static_bool(right, "right", "digitize")
    if bins.ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got shape {bins.shape}")
    n = bins.shape[0]
    if n == 0:
        return full(x.shape, 0, dtypes.int32)
    side = "left" if right else "right"
    options = {} if method is None else {"method": method}
    increasing = searchsorted(bins, x, side=side, **options)
    decreasing = subtract(n, searchsorted(lax.rev(bins, (0,)), x, side=side, **options))
    return where(greater_equal(bins[-1], bins[0]), increasing, decreasing)  # (complex bins: lexicographic)


# --- histograms ----------------------------------------------------------------------------------
def histogram_bin_edges(a: Any, bins: Any = 10, range: Sequence[Any] | None = None, weights: Any = None) -> Any:
    """The edges of ``histogram``'s bins: ``bins`` itself if it is 1-D, else ``bins + 1``
    evenly spaced edges over ``range`` (default: ``a``'s min and max; an empty range is
    widened by 0.5 on each side). ``weights`` is unused (no string ``bins``)."""
    del weights  # NumPy uses it only for string bins, which are not supported
    if isinstance(bins, str):
        raise NotImplementedError(f"string values for `bins` are not implemented, got {bins!r}")
    a = ensure_array(a)
    dtype = dtypes.to_inexact_dtype(a.dtype)
    if np.ndim(bins) == 1:
        return asarray(bins, dtype)
    count = static_int(bins, "bins", "histogram_bin_edges")
    if count < 1:
        raise ValueError(f"`bins` must be positive, when an integer; got {count}")
    low, high = (_min(a), _max(a)) if range is None else _range(range, dtype)
    low, high = (lax.convert_element_type(v, dtype) for v in (low, high))
    empty = lax.eq(low, high)
    low, high = where(empty, subtract(low, 0.5), low), where(empty, add(high, 0.5), high)
    return linspace(low, high, count + 1, dtype=dtype)


def _range(range: Sequence[Any], dtype: np.dtype) -> tuple[Any, Any]:
    limits = asarray(range, dtype)
    if np.shape(limits) != (2,):
        raise ValueError(f"`range` must be either None or a sequence of two scalars, got {range!r}")
    return limits[0], limits[1]


def histogram(a: Any, bins: Any = 10, range: Sequence[Any] | None = None, weights: Any = None,
              density: bool | None = None) -> tuple[Any, Any]:
    """``(counts, edges)``: how many elements of ``a`` (or how much ``weights``) fall in each bin.

    Bins are half-open ``[edge, next edge)`` except the last, which includes its right edge;
    values outside the edges are not counted. ``density`` divides by the total and the bin
    widths, so the result integrates to 1.
    """
    if weights is None:
        (a,) = promote_dtypes_inexact(a)
        weights = ones_like(a)
    else:
        a, weights = ensure_array(a), ensure_array(weights)
        if a.shape != weights.shape:
            raise ValueError(f"weights should have the same shape as a; got {weights.shape} and {a.shape}")
        a, weights = promote_dtypes_inexact(a, weights)
    edges = histogram_bin_edges(a, bins, range)
    values, weights = ravel(a), ravel(weights)
    # Bin i + 1 holds edges[i] <= value < edges[i + 1]; index 0 (below the first edge) is cut
    # off, and an index past the end (above the last edge) is dropped by the scatter.
    index = searchsorted(edges, values, side="right")
    num_edges = edges.shape[0]
    index = where(lax.eq(values, edges[-1]), num_edges - 1, index)
    counts = zeros(num_edges, weights.dtype).at[index].add(weights, mode="drop")
    counts = lax.slice_in_dim(counts, 1, None)
    if static_bool(density, "density", "histogram"):
        widths = subtract(lax.slice_in_dim(edges, 1, None), lax.slice_in_dim(edges, 0, -1))
        counts = divide(divide(counts, widths), _sum(counts))
    return counts, edges


def histogramdd(sample: Any, bins: Any = 10, range: Sequence[Any] | None = None, weights: Any = None,
                density: bool | None = None) -> tuple[Any, list[Any]]:
    """``(counts, edges per dimension)`` of the ``N`` points of ``D`` dimensions in ``sample``
    (N, D): ``histogram``'s bins in each dimension (``bins`` an int or edges, or one per
    dimension; ``range`` a pair or None per dimension), counted on a D-dimensional grid. Counts
    are integers without ``weights``, as JAX's (its ``bincount``)."""
    if weights is None:
        sample, = promote_dtypes_inexact(sample)
    else:
        sample, weights = ensure_array(sample), ensure_array(weights)
        if weights.shape != sample.shape[:1]:
            raise ValueError("should have one weight for each sample.")
        sample, weights = promote_dtypes_inexact(sample, weights)
    if sample.ndim != 2:
        raise ValueError(f"histogramdd needs a 2-D sample (N points, D dimensions), got shape {sample.shape}")
    n, d = sample.shape
    if range is not None and (len(range) != d or any(r is not None and np.shape(r)[0] != 2 for r in range)):
        raise ValueError(f"For sample.shape={(n, d)}, range must be a sequence of {d} pairs or Nones; got {range=}")
    try:
        bins_per_dimension = list(bins)
    except TypeError:  # (one bin count for every dimension)
        bins_per_dimension = d * [bins]
    else:
        if len(bins_per_dimension) != d:
            raise ValueError("should be a bin for each dimension.")
    indices, edges = [], []
    for i in builtins.range(d):
        column = sample[:, i]
        e = histogram_bin_edges(column, bins_per_dimension[i], None if range is None else range[i], weights)
        index = searchsorted(e, column, side="right")
        indices.append(where(lax.eq(column, e[-1]), index - 1, index))  # (the last bin includes its right edge)
        edges.append(e)
    nbins = tuple(e.shape[0] + 1 for e in edges)  # (one under, one over: cut off below)
    flat = ravel_multi_index(tuple(indices), nbins, mode="clip")
    hist = reshape(bincount(flat, weights, length=math.prod(nbins)), nbins)
    hist = hist[(slice(1, -1),) * d]
    if static_bool(density, "density", "histogramdd"):
        hist = hist.astype(sample.dtype)
        hist = hist / hist.sum()
        for i, e in enumerate(edges):  # (divide by each dimension's bin widths, broadcast along it)
            hist = hist / reshape(subtract(e[1:], e[:-1]), tuple(-1 if j == i else 1 for j in builtins.range(d)))
    return hist, edges


def histogram2d(x: Any, y: Any, bins: Any = 10, range: Sequence[Any] | None = None, weights: Any = None,
                density: bool | None = None) -> tuple[Any, Any, Any]:
    """``(counts, x edges, y edges)``: ``histogramdd`` of the points ``(x[i], y[i])``; ``bins`` is
    an int, one array of edges for both, or a pair (ints or edges) for x and y."""
    x, y = ensure_array(x), ensure_array(y)
    try:
        count = len(bins)
    except TypeError:
        count = 1
    if count not in (1, 2):
        bins = [asarray(bins), asarray(bins)]
    hist, edges = histogramdd(stack(promote_dtypes_inexact(x, y), axis=1), bins, range, weights, density)
    return hist, edges[0], edges[1]


# --- covariance --------------------------------------------------------------------------------
def cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: int | None = None,
        fweights: Any = None, aweights: Any = None, dtype: Any = None) -> Any:
    """The covariance matrix of the variables in the rows of ``m`` (columns if not ``rowvar``),
    with those of ``y`` appended.

    Normalized by ``N - 1`` (``N`` with ``bias``, ``N - ddof`` with ``ddof``). ``fweights``
    (integer repeat counts) and ``aweights`` (relative importances) weight the observations;
    negative weights count by their magnitude (NumPy raises). A single variable gives a scalar.
    """
    if y is None:
        (m,) = promote_dtypes_inexact(m)
    else:
        m, y = promote_dtypes_inexact(m, y)
        if y.ndim > 2:
            raise ValueError(f"y has more than 2 dimensions; got shape {y.shape}")
    if m.ndim > 2:
        raise ValueError(f"m has more than 2 dimensions; got shape {m.shape}")
    if dtype is not None and not dtypes.is_inexact(dtypes.canonicalize_dtype(dtype)):
        raise ValueError(f"cov: dtype must be a subclass of float or complex; got dtype={dtype}")
    observations = _variables_in_rows(m, rowvar)
    if observations.shape[0] == 0:
        return zeros((0, 0), observations.dtype)
    if y is not None:
        observations = concatenate([observations, _variables_in_rows(y, rowvar)], 0)
    num_variables, num_observations = observations.shape
    if num_observations == 0:
        return full(() if num_variables == 1 else (num_variables,) * 2, np.nan, observations.dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    weights = _observation_weights(fweights, aweights, num_observations)
    if dtype is not None:
        observations = lax.convert_element_type(observations, dtype)
        weights = None if weights is None else lax.convert_element_type(weights, dtype)
    mean, weight_sums = average(observations, axis=1, weights=weights, returned=True)
    weight_sum = weight_sums[0]
    if weights is None:
        normalizer = num_observations - ddof
    elif ddof == 0:
        normalizer = weight_sum
    elif aweights is None:
        normalizer = subtract(weight_sum, ddof)
    else:
        # Reliability weights: N_eff - ddof * sum(w * a) / sum(w) (NumPy's normalization).
        normalizer = subtract(weight_sum, divide(multiply(ddof, _sum(multiply(weights, abs(aweights)))), weight_sum))
    centered = subtract(observations, lax.expand_dims(mean, (1,)))
    weighted = centered if weights is None else multiply(centered, weights)
    # Complex variables: E[(x - mean x) conj(y - mean y)], Hermitian as in NumPy.
    return squeeze(divide(dot(weighted, conj(lax.transpose(centered, (1, 0)))), normalizer))


def _variables_in_rows(x: Any, rowvar: bool) -> Any:
    """``x`` as a (variables, observations) matrix; a 1-D ``x`` is one variable."""
    rows = atleast_2d(x)
    return rows if rowvar or x.ndim < 2 else lax.transpose(rows, (1, 0))


def _observation_weights(fweights: Any, aweights: Any, num_observations: int) -> Any:
    """The product of the magnitudes of the weights given, or None."""
    weights = None
    for name, given in (("fweights", fweights), ("aweights", aweights)):
        if given is None:
            continue
        given = ensure_array(given)
        if given.ndim > 1:
            raise RuntimeError(f"cannot handle multidimensional {name}; got shape {given.shape}")
        if given.shape[0] != num_observations:
            raise RuntimeError(f"incompatible numbers of samples and {name}: {num_observations} observations, "
                               f"{given.shape[0]} weights")
        if name == "fweights" and given.dtype not in dtypes.INTEGER:
            raise TypeError(f"fweights must be integer; got dtype {given.dtype}")
        weights = abs(given) if weights is None else multiply(weights, abs(given))
    return weights


def corrcoef(x: Any, y: Any = None, rowvar: bool = True, dtype: Any = None) -> Any:
    """Pearson correlation coefficients: ``cov`` normalized by the standard deviations, clipped
    to ``[-1, 1]``. A single variable gives ``c / c`` (1, or NaN for a constant variable)."""
    if dtype is not None and not dtypes.is_inexact(dtypes.canonicalize_dtype(dtype)):
        raise ValueError(f"corrcoef: dtype must be a subclass of float or complex; got dtype={dtype}")
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return divide(c, c)
    deviations = sqrt(real(diag(c)))  # (the diagonal of a complex covariance is real)
    c = divide(divide(c, lax.expand_dims(deviations, (1,))), lax.expand_dims(deviations, (0,)))
    if dtypes.is_complex(c.dtype):  # each part clipped, as NumPy and JAX
        return lax.complex(clip(real(c), -1, 1), clip(imag(c), -1, 1))
    return clip(c, -1, 1)
