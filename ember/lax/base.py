"""Shared helpers for defining primitives and their shape/dtype rules."""
from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from ember import dtypes
from ember.core.avals import ShapedArray, aval_of_value
from ember.core.primitive import Primitive, abstract_eval_rules
from ember.core.trace import Tracer
from ember.core.traits import Cost, Family, declare
from ember.errors import JAXTypeError


def primitive(name: str, rule: Callable, multiple_results: bool = False, family: Family = Family.OTHER, *,
              linear: bool = False, cheap: bool | None = None, transcendental: bool = False,
              cost: Callable[[Any], Cost] | None = None, keep_results: bool = False) -> Primitive:
    """A new primitive with its shape/dtype rule and its traits (``core/traits.py``) registered.
    ``keep_results``: the rule's results are kept (``kept_results``)."""
    p = Primitive(name, multiple_results)
    abstract_eval_rules[p] = kept_results(rule) if keep_results else rule
    return declare(p, family, linear=linear, cheap=cheap, transcendental=transcendental, cost=cost)


_RESULTS_KEPT = 512  # per rule


def kept_results(rule: Callable[..., ShapedArray]) -> Callable[..., ShapedArray]:
    """``rule``, its results kept by operand types and params: for a rule of one result that is a
    function of them alone, the same for params that compare equal (an elementwise rule took 3 us
    and ``dot_general``'s 6-9, against 0.2-0.3 for the lookup; a trace calls the rule for each
    equation). Errors are not kept: bad types raise each time."""
    results: dict[Any, ShapedArray] = {}

    def kept(*avals: ShapedArray, **params: Any) -> ShapedArray:
        key = (avals, *params.items()) if params else avals
        try:
            out = results.get(key)
        except TypeError:  # (a param that cannot be hashed)
            return rule(*avals, **params)
        if out is None:
            out = rule(*avals, **params)
            if len(results) >= _RESULTS_KEPT:
                results.clear()
            results[key] = out
        return out
    kept.__name__, kept.__doc__ = getattr(rule, "__name__", "rule"), rule.__doc__
    return kept


def aval(x: Any) -> ShapedArray:
    return x.aval if isinstance(x, Tracer) else aval_of_value(x)


def is_python_scalar(x: Any) -> bool:
    return type(x) in (bool, int, float, complex)


def canonical_axes(axes: Any, ndim: int, name: str = "axis") -> tuple[int, ...]:
    """Normalize an int / sequence of ints (negative allowed) to sorted-free positive axes."""
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < max(ndim, 1) or (ndim == 0 and a not in (0, -1)):
            raise ValueError(f"{name} {a} is out of bounds for an array of dimension {ndim}")
        out.append(a % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated {name} in {tuple(axes)}")
    return tuple(out)


def check_dtype(name: str, dt: np.dtype, allowed: str) -> None:
    """``allowed``: any of 'b' (bool), 'i' (int), 'u' (uint), 'f' (float), 'c' (complex)."""
    kind = ("b" if dt == dtypes.bool_ else "i" if dt in dtypes.SIGNED else "u" if dt in dtypes.UNSIGNED
            else "c" if dt in dtypes.COMPLEX else "f")
    if kind not in allowed:
        names = {"b": "bool", "i": "signed integer", "u": "unsigned integer", "f": "floating", "c": "complex"}
        want = " or ".join(names[k] for k in allowed)
        raise TypeError(f"{name} does not accept dtype {dt}; it needs {want} operands")


def concrete_dims(shape: Any) -> tuple[int, ...]:
    """The integers of a shape given as an int or a sequence of ints, negative ones kept (for the
    caller to judge). A traced or float entry is JAX's TypeError, with the tracer's own advice."""
    if isinstance(shape, (int, float, np.integer, np.floating)) or getattr(shape, "ndim", None) == 0:
        shape = (shape,)
    shown = shape if isinstance(shape, list) else tuple(shape)
    try:
        return tuple(operator.index(d) for d in shape)
    except JAXTypeError as e:  # a traced value
        raise TypeError(f"Shapes must be 1D sequences of concrete values of integer type, got "
                        f"{shown!r}.\n{e}") from None
    except TypeError:
        if isinstance(shape, (tuple, list)) and any(isinstance(d, (float, np.floating)) for d in shape):
            raise TypeError(f"Shapes must be 1D sequences of concrete values of integer type, got "
                            f"{shown!r}.") from None
        raise


def shape_tuple(shape: Any, what: str = "shape") -> tuple[int, ...]:
    """A static shape from an int or sequence of ints (refuses traced values clearly)."""
    try:
        out = concrete_dims(shape)
    except TypeError as e:
        if str(e).startswith("Shapes must be"):
            raise
        raise TypeError(f"{what} must be a sequence of integers, got {shape!r}") from None
    if any(d < 0 for d in out):
        raise ValueError(f"{what} {out} has a negative dimension")
    return out


operator_index = operator.index
