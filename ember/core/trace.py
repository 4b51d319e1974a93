"""Tracers and the current-trace context.

Dispatch is by context: ``Primitive.bind`` hands the operation to the trace
that is current (``set_current_trace``). The default is the eval trace, which
runs primitives eagerly on the reference backend. A trace that is finished is
marked dead; its tracers then refuse to be used (``UnexpectedTracerError``).
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ember import errors
from ember.core.avals import AvalProperties, ShapedArray


class TraceTag:
    """Names the tracers of one transformation (JAX's ``TraceTag``): libraries tell whether a
    tracer is a trace's by ``tracer._trace.tag is trace.tag``."""

    __slots__ = ("__weakref__",)


class Trace:
    """Interprets primitives applied to its tracers.

    ``parent_trace``, ``tag``, ``main`` and ``requires_low`` are the attributes of JAX's traces
    that libraries read: the trace this one runs inside, the transformation's tag (traces that
    transform have one), the tag again (JAX's older name), and whether it takes only low-level
    types (a transformation takes any)."""

    alive = True
    # A description used in messages, e.g. "jit-compiled function `f`".
    description = "a trace"
    parent: "Trace | None" = None
    requires_low = True

    @property
    def parent_trace(self) -> "Trace | None":
        return self.parent

    @property
    def main(self) -> "TraceTag | None":
        return getattr(self, "tag", None)

    def process_primitive(self, primitive, args: tuple, params: dict) -> Any:
        raise NotImplementedError

    def concretization_error(self, tracer: "Tracer", what: str, error_type: type) -> Exception:
        return error_type(f"{what} of a traced value.")


class Tracer(AvalProperties):
    """Stands in for an array while a function is traced.

    Operators and array methods are attached by ``ember.numpy`` (they are the
    same functions users call); converting to a Python value is refused with an
    error that says which argument made the value traced and how to fix it.
    """

    __slots__ = ("_trace", "aval")
    __array_priority__ = 1000

    def __init__(self, trace: Trace, aval: ShapedArray) -> None:
        self._trace = trace
        self.aval = aval

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object (a 0-d traced array)")
        return self.shape[0]

    def __iter__(self) -> Iterator[Any]:
        if not self.shape:
            raise TypeError("iteration over a 0-d traced array")
        return (self[i] for i in range(self.shape[0]))

    def __bool__(self) -> bool:
        raise self._trace.concretization_error(self, "boolean conversion (if, while, and/or, bool())",
                                               errors.TracerBoolConversionError)

    def __int__(self) -> int:
        raise self._trace.concretization_error(self, "integer conversion (int())", errors.TracerIntegerConversionError)

    def __index__(self) -> int:
        raise self._trace.concretization_error(
            self, "use as a Python integer (an index, a shape or a range bound)", errors.TracerIntegerConversionError)

    def __float__(self) -> float:
        raise self._trace.concretization_error(self, "float conversion (float())", errors.ConcretizationTypeError)

    def __complex__(self) -> complex:
        raise self._trace.concretization_error(self, "complex()", errors.ConcretizationTypeError)

    def item(self, *args: Any) -> Any:
        raise self._trace.concretization_error(self, ".item()", errors.ConcretizationTypeError)

    def tolist(self) -> Any:
        raise self._trace.concretization_error(self, ".tolist()", errors.ConcretizationTypeError)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise self._trace.concretization_error(
            self, "conversion to a NumPy array (np.asarray / np.array)", errors.TracerArrayConversionError)

    __hash__ = None  # type: ignore[assignment]  # arrays are unhashable, as in JAX

    def __repr__(self) -> str:
        return f"Traced<{self.aval}>with<{type(self._trace).__name__}>"


def type_text(aval: Any) -> str:
    """A value's type as JAX's tracer reprs show it: ``float32[2,3]``, ``~float32[]`` (weak)."""
    return f"{'~' if aval.weak_type else ''}{aval.dtype.name}[{','.join(map(str, aval.shape))}]"


class _TraceState(threading.local):
    def __init__(self) -> None:
        self.trace: Trace = EvalTrace()


class EvalTrace(Trace):
    """Runs each primitive at once with its reference implementation (eager mode).

    The evaluator is ``ember.core.evaluation.apply_primitive``, which installs itself here as
    ``EvalTrace.apply`` when it loads (``ember.core`` loads it with the package): it reads the
    rule tables of ``ember.core.primitive``, whose ``bind`` needs this module.
    """

    description = "eager evaluation"
    apply: Callable[[Any, Sequence[Any], dict], Any]

    def process_primitive(self, primitive, args: tuple, params: dict) -> Any:
        for a in args:
            if isinstance(a, Tracer):
                raise unexpected_tracer_error(a)
        return self.apply(primitive, args, params)


_state = _TraceState()


def current_trace() -> Trace:
    return _state.trace


@contextlib.contextmanager
def set_current_trace(trace: Trace) -> Iterator[Trace]:
    previous = _state.trace
    _state.trace = trace
    try:
        yield trace
    finally:
        _state.trace = previous


def is_tracing() -> bool:
    return not isinstance(_state.trace, EvalTrace)


def unexpected_tracer_error(tracer: Tracer) -> errors.UnexpectedTracerError:
    return errors.UnexpectedTracerError(
        f"Encountered an unexpected tracer {tracer!r}, created while tracing "
        f"{tracer._trace.description}, which has finished. A traced value escaped its function, "
        "for example by being stored in a global, an outer list or an attribute, and was used later.\n"
        f"It was used at {errors.user_location()}\n"
        "Fix: return the value from the function instead of storing it, or pass it in as an argument.")
