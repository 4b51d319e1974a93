"""Which ``jnp`` arguments must be arrays or scalars, as JAX's ``check_arraylike`` has it.

JAX refuses Python lists and tuples where an array is expected (``jnp.sum([1, 2, 3])`` is a
TypeError: ``sum requires ndarray or scalar arguments, got <class 'list'> at position 0.``), so
that a list is never converted, element by element, on every call; ``jnp.array`` / ``jnp.asarray``
convert them. ``ARRAYLIKE_ARGS`` lists, per public function, the arguments JAX checks, in the
order in which it counts positions; ``guard`` wraps the functions of a namespace with the check
(``ember.numpy`` and ``ember.numpy.linalg`` apply it to themselves). ember's modules call each
other's functions directly, unguarded.

A spec is one or more groups separated by ``|``; the positions of each group count from 0 (JAX
checks those arguments in separate calls). In a group, ``name:`` first names the function as
the message does (JAX's name for an alias: ``abs`` reports ``absolute``); ``*param`` counts each
element of a sequence (or of ``*args``) as one position; ``a/b`` is one position for either of two
spellings of an argument; a group starting with ``?`` also accepts None and says so. An argument
left at its default, or None where its default is None, is not checked.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, NamedTuple

import numpy as np

from ember.core.array import Array
from ember.core.trace import Tracer

__all__ = ["ARRAYLIKE_ARGS", "LINALG_ARRAYLIKE_ARGS", "check_arraylike", "guard", "is_arraylike"]

_UNARY = """abs:absolute absolute acos acosh arccos arccosh arcsin arcsinh arctan arctanh asin asinh atan atanh
    bitwise_count bitwise_invert bitwise_not cbrt ceil conj:conjugate conjugate cos cosh deg2rad degrees:rad2deg exp
    exp2 expm1 fabs floor frexp i0 imag invert iscomplex:imag isfinite isinf isnan isneginf isposinf isreal:imag log
    log10 log1p log2 logical_not
    modf negative positive rad2deg radians:deg2rad real reciprocal rint sign signbit sin sinc sinh spacing sqrt square
    tan tanh trunc"""
_BINARY = """add arctan2 atan2 bitwise_and bitwise_left_shift bitwise_or bitwise_right_shift:right_shift bitwise_xor
    copysign divide:true_divide divmod equal float_power floor_divide fmax fmin fmod gcd greater greater_equal
    heaviside hypot lcm ldexp left_shift less less_equal logaddexp logaddexp2 logical_and logical_or logical_xor
    maximum minimum mod:remainder multiply nextafter not_equal pow:power power remainder right_shift subtract
    true_divide"""
_REDUCTIONS = "all any max min sum prod mean nansum nanprod nanmean nanmax nanmin"

ARRAYLIKE_ARGS: dict[str, str] = {
    **{n.split(":")[0]: (n.split(":")[1] + ": x" if ":" in n else "x") for n in _UNARY.split()},
    **{n.split(":")[0]: (n.split(":")[1] + ": x1 x2" if ":" in n else "x1 x2") for n in _BINARY.split()},
    **{n: "a | where" for n in _REDUCTIONS.split()},
    "amax": "max: a | where", "amin": "min: a | where",
    "std": "a | where | mean", "var": "a | where | mean", "nanstd": "a | where", "nanvar": "a | where",
    **{n: "a" for n in """argmax argmin nanargmax nanargmin cumsum cumprod nancumsum nancumprod count_nonzero ptp
        median nanmedian argsort sort argpartition partition argwhere nonzero flatnonzero round copy diagonal trace
        expand_dims moveaxis rollaxis swapaxes packbits unpackbits ravel reshape resize roll squeeze
        transpose permute_dims apply_over_axes""".split()},
    **{n: "x" for n in """cumulative_sum cumulative_prod matrix_transpose nan_to_num unstack vander unique_all
        unique_counts unique_inverse unique_values astype bincount""".split()},
    **{n: "m" for n in "flip fliplr flipud rot90 tril triu".split()},
    **{n: "ary" for n in "array_split split hsplit vsplit dsplit".split()},
    **{n: "*arys" for n in "atleast_1d atleast_2d atleast_3d".split()},
    **{n: "*arrays" for n in "concatenate concat stack".split()},
    **{n: "*tup" for n in "column_stack dstack hstack vstack".split()},
    **{n: "a b" for n in "allclose isclose cross dot inner outer kron matmul tensordot vdot".split()},
    **{n: "x1 x2" for n in "matvec vecmat".split()},
    **{n: "ar1 ar2" for n in "intersect1d setdiff1d setxor1d union1d".split()},
    **{n: "arr" for n in "diag_indices_from tril_indices_from triu_indices_from apply_along_axis".split()},
    **{n: "a q" for n in "quantile nanquantile percentile nanpercentile".split()},
    "around": "round: a", "piecewise": "x", "diag": "v", "diagflat": "v", "unique": "ar", "trim_zeros": "filt",
    "pad": "array", "tile": "A", "where": "condition x y", "average": "a weights",
    "clip": "arr | maximum: min | minimum: max",  # (JAX checks arr, then maximum(min, arr), minimum(max, arr))
    "append": "arr values", "broadcast_arrays": "*args", "broadcast_to": "x", "choose": "a *choices",
    "compress": "condition a fill_value", "extract": "condition arr fill_value", "convolve": "a v",
    "correlate": "a v", "corrcoef": "x y", "cov": "m y | fweights | aweights", "delete": "arr obj",
    "insert": "arr obj values", "diff": "a | prepend | append", "digitize": "x bins", "vecdot": "jnp.vecdot: x1 x2",
    "ediff1d": "ary | to_end | to_begin", "einsum": "*operands", "full": "fill_value", "full_like": "~a fill_value",
    "empty_like": "~prototype", "ones_like": "~a", "zeros_like": "~a",
    "histogram": "a bins weights", "histogram_bin_edges": "a bins", "interp": "x xp fp",
    "isin": "element test_elements", "ix_": "ix: *args", "lexsort": "*keys", "linspace": "start stop",
    "logspace": "start stop", "geomspace": "start stop", "gradient": "f", "meshgrid": "*xi",
    "place": "arr mask vals", "put": "a ind v", "put_along_axis": "arr indices values", "fill_diagonal": "a val",
    "polyval": "p x", "repeat": "a repeats", "searchsorted": "a v", "select": "*condlist *choicelist default",
    "take": "a indices", "take_along_axis": "arr indices", "trapezoid": "y x", "unravel_index": "indices",
    "ravel_multi_index": "*multi_index", "arange": "?start stop step",
    **{n: "a1 a2" for n in "polyadd polysub polymul".split()},
    "polydiv": "u v", "polyder": "p", "polyint": "p k", "polyfit": "x y w", "roots": "p", "poly": "seq_of_zeros",
    "sort_complex": "a", "unwrap": "p", "histogram2d": "x y", "histogramdd": "sample weights",
}

# ``jnp.linalg``: JAX names these ``jnp.linalg.<name>`` in its messages.
LINALG_ARRAYLIKE_ARGS: dict[str, str] = {
    **{n: "a" for n in "cholesky det eigh eigvalsh inv matrix_power pinv qr slogdet svd".split()},
    **{n: "x" for n in "diagonal matrix_norm matrix_transpose norm svdvals trace vector_norm".split()},
    **{n: "a b" for n in "lstsq matmul solve".split()},
    **{n: "x1 x2" for n in "cross outer tensordot".split()},
    "matrix_rank": "M", "vecdot": "x1 x2",
}

_SCALARS = (bool, int, float, complex)
_FAST = {Array, bool, int, float, complex, np.ndarray}


def is_arraylike(x: Any) -> bool:
    """JAX's rule: an array (ember's, a tracer, NumPy's), a scalar, or an object with ``__jax_array__``."""
    return type(x) in _FAST or isinstance(x, (Array, Tracer, np.ndarray, np.generic, *_SCALARS)) \
        or getattr(x, "__jax_array__", None) is not None or np.isscalar(x)


def check_arraylike(fun_name: str, *args: Any, none_ok: bool = False) -> None:
    """A TypeError in JAX's words for the first argument that is not array-like (None allowed with ``none_ok``)."""
    for pos, x in enumerate(args):
        if not (is_arraylike(x) or (none_ok and x is None)):
            raise _error(fun_name, x, pos, none_ok)


def _error(fun_name: str, x: Any, pos: int, none_ok: bool) -> TypeError:
    kinds = "ndarray, scalar, or None" if none_ok else "ndarray or scalar"
    return TypeError(f"{fun_name} requires {kinds} arguments, got {type(x)} at position {pos}.")


class _Slot(NamedTuple):
    """One checked argument: where to find it in a call, and how to read it."""
    names: tuple[str, ...]       # its spellings, as keywords
    index: int | None            # its position in ``*args`` (None: keyword-only); VAR_POSITIONAL: where they start
    varargs: bool                # the function's ``*args`` itself
    sequence: bool               # count each element (``*param``)
    none_skipped: bool           # None is its default, so None means "not given"
    shaped: bool                 # (``~param``) also anything with ``shape`` and ``dtype``, as the
                                 # ``*_like`` functions take a ShapeDtypeStruct in JAX


def _slots(fn: Callable, group: str) -> list[_Slot]:
    params = inspect.signature(fn).parameters
    positional = [p.name for p in params.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    slots = []
    for token in group.split():
        sequence, shaped = token.startswith("*"), token.startswith("~")
        names = tuple(token.lstrip("*~").split("/"))
        for n in names:
            if n not in params:
                raise ValueError(f"arraylike spec of {fn.__name__}: no parameter {n!r}")
        p = params[names[0]]
        varargs = p.kind is p.VAR_POSITIONAL
        index = positional.index(names[0]) if names[0] in positional else None
        slots.append(_Slot(names, index, varargs, sequence or varargs, p.default is None, shaped))
    return slots


def _parse(spec: str, default_name: str) -> list[tuple[str, bool, str]]:
    """(message name, None allowed, parameters) per group."""
    groups = []
    for group in spec.split("|"):
        group = group.strip()
        none_ok = group.startswith("?")
        group = group.lstrip("?")
        name, _, params = group.rpartition(":")
        groups.append((name.strip() or default_name, none_ok, params))
    return groups


def _interleaved_einsum(args: tuple, kwargs: dict) -> tuple | None:
    """The operands of ``einsum(op0, sublist0, op1, sublist1, ..., [out_sublist])``, whose sublists are
    lists (None for the usual ``einsum(subscripts, *operands)``)."""
    if isinstance(args[0] if args else kwargs.get("subscripts"), str):
        return None
    return args[0:len(args) - len(args) % 2:2]


_OPERANDS = {"einsum": _interleaved_einsum}  # the arguments to check when a call's form is not the spec's


def _checked(fn: Callable, spec: str, default_name: str) -> Callable:
    groups = [(name, none_ok, _slots(fn, params)) for name, none_ok, params in _parse(spec, default_name)]
    operands = _OPERANDS.get(fn.__name__)
    # A function that also takes PRNG key arrays (``keys.take_keys``) runs as it is when no operand
    # is one: none of the ``_FAST`` types is.
    plain = getattr(fn, "without_keys", fn)

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        for x in args:  # the common call: only arrays and scalars, nothing to look up
            if type(x) not in _FAST:
                break
        else:
            if not kwargs:
                return plain(*args)
            for x in kwargs.values():
                if type(x) not in _FAST:
                    break
            else:
                return plain(*args, **kwargs)
        if operands is not None:
            values = operands(args, kwargs)
            if values is not None:
                check_arraylike(groups[0][0], *values)
                return fn(*args, **kwargs)
        n_args = len(args)
        for name, none_ok, slots in groups:
            pos = 0
            for names, index, varargs, sequence, none_skipped, shaped in slots:
                if varargs:
                    values = args[index:]
                else:
                    if index is not None and index < n_args:
                        value = args[index]
                    else:
                        value = _ABSENT
                        for n in names:
                            if n in kwargs:
                                value = kwargs[n]
                                break
                    if value is _ABSENT or (none_skipped and value is None):
                        pos += 1
                        continue
                    values = value if sequence and type(value) in (list, tuple) else (value,)
                for x in values:
                    if type(x) not in _FAST and not (is_arraylike(x) or (none_ok and x is None)) \
                            and not (names[0] == "obj" and isinstance(x, slice)) \
                            and not (shaped and hasattr(x, "shape") and hasattr(x, "dtype")):  # (obj: delete, insert)
                        raise _error(name, x, pos, none_ok)
                    pos += 1
        return fn(*args, **kwargs)

    return checked


_ABSENT = object()


def guard(namespace: dict[str, Any], specs: dict[str, str], prefix: str = "") -> None:
    """Replace each function of ``namespace`` that ``specs`` names by one that checks its arguments
    first; its messages name it ``prefix + name`` (unless the spec names it)."""
    for name, spec in specs.items():
        namespace[name] = _checked(namespace[name], spec, prefix + name)
