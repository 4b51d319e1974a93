"""The errors users see. Class names and bases follow JAX, so ``except TypeError``
catches the same things; messages name the user's line and the fix."""
from __future__ import annotations

import functools
import os
import sys
import traceback
import types
from typing import Any, Callable, TypeVar

_EMBER_DIR = os.path.dirname(os.path.abspath(__file__))
_SKIP_DIRS = (_EMBER_DIR, os.path.dirname(os.__file__))
# Files inside the package that are user-level programs, not library internals.
_USER_FILES_IN_PACKAGE = (os.path.join(_EMBER_DIR, "demo.py"),)


class JAXTypeError(TypeError):
    """Base of ember's type errors (named as in JAX for drop-in ``except`` clauses)."""


class ConcretizationTypeError(JAXTypeError):
    """A concrete Python value was needed from a traced (abstract) value."""


class TracerBoolConversionError(ConcretizationTypeError):
    """``bool()`` / ``if`` / ``while`` on a traced value."""


class TracerIntegerConversionError(JAXTypeError):
    """``int()`` / ``__index__`` on a traced value (e.g. used as a shape or a Python index)."""


class TracerArrayConversionError(JAXTypeError):
    """``np.asarray`` on a traced value."""


class UnexpectedTracerError(Exception):
    """A tracer escaped the function that was being traced and was used later."""


class JAXIndexError(IndexError):
    """Base of ember's index errors (named as in JAX)."""


class NonConcreteBooleanIndexError(JAXIndexError):
    """Boolean-mask indexing needs a concrete mask, since the result's shape depends on it."""


class KeyReuseError(JAXTypeError):
    """A PRNG key used twice where key-reuse checking asks for each key to be used once."""


class JaxprTypeError(TypeError):
    """A program (jaxpr) that is not well typed (``ember.core.verify``'s checks)."""


class JaxRuntimeError(RuntimeError):
    """An error raised while a compiled program runs (JAX's runtime errors)."""


class DeletedArrayError(RuntimeError, ValueError):
    """An Array used after it was deleted (``delete()``, or donated to a jitted function).

    JAX raises a RuntimeError for it, except where a jitted call's compiled fast path meets a
    donated argument, which raises a ValueError (XLA's "Buffer has been deleted or donated"). One
    class that is both lets code written against either ``except`` catch it wherever it is raised."""


class AutographError(JAXTypeError):
    """Python control flow that autograph (``jit(f, autograph=True)``) cannot convert keeping
    Python's meaning; the message names the variable and the user's line."""


class UndefinedVariableError(AutographError):
    """A variable that a traced ``if`` assigns in one branch only, or a traced loop assigns
    without a value before it, read after the statement."""


class LoopVariableTypeError(AutographError):
    """A variable of a loop with a traced condition changes shape, dtype or Python value between
    iterations (a compiled loop carries one type)."""


class ReturnInTracedLoopError(AutographError):
    """A ``return`` inside a loop whose condition is traced."""


class ListAppendInTracedLoopError(AutographError):
    """A Python list made before a loop with a traced condition, appended to inside it."""


class TracedPrintError(AutographError):
    """``print`` of a traced value inside a converted branch or loop body (it would print once,
    while tracing, not when the program runs)."""


class InconclusiveDimensionOperation(Exception):
    """A comparison of symbolic dimensions that cannot be decided (JAX's shape polymorphism;
    ember's shapes are concrete, so it is never raised by ember itself)."""


def user_frame() -> traceback.FrameSummary | None:
    """The innermost stack frame that belongs to user code (not ember, not the stdlib)."""
    for frame in reversed(traceback.extract_stack(sys._getframe(1))):
        path = os.path.abspath(frame.filename)
        internal = path.startswith(_SKIP_DIRS) and path not in _USER_FILES_IN_PACKAGE
        if not internal and not frame.filename.startswith("<frozen"):
            return frame
    return None


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes ``warnings.warn``, called by the caller of this function,
    point at the user's line (the innermost frame outside ember and the stdlib)."""
    return _user_frame(sys._getframe(1))[0]


def _user_frame(frame: types.FrameType | None) -> tuple[int, types.FrameType | None]:
    """(the ``stacklevel`` of the user's frame counted from ``frame``, 1 if there is none; the
    outermost ember frame below it, None if there is none or no user frame)."""
    level, outermost = 1, None
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not (path.startswith(_SKIP_DIRS) and path not in _USER_FILES_IN_PACKAGE) \
                and not frame.f_code.co_filename.startswith("<frozen"):
            return level, outermost
        if path.startswith(_EMBER_DIR + os.sep):
            outermost = frame
        frame, level = frame.f_back, level + 1
    return 1, None


# Frames of ember's generic wrappers, which do not name the function the user called.
_WRAPPER_NAMES = frozenset({"call", "wrapper", "inner", "op", "f", "checked", "entry_point", "__call__"})
# Of those, the ones that hold the function they wrap as ``fn`` (``numpy.arraylike``'s guard) or
# ``fun`` (``api_boundary``'s entry point): that function is the one called.
_WRAPPED = {"checked": "fn", "entry_point": "fun"}


def user_call() -> tuple[int, str]:
    """(``user_stacklevel()``, as the caller of this function would get it; the name of the
    ember function the user's line called, for messages that say where a request came from, as
    JAX's: "" where no frame tells it). The name is the outermost ember frame's (``zeros``), or,
    where that is a wrapper that holds the function it wraps, that function's (``jnp.sum`` behind
    its argument guard, ``Array.astype`` behind its entry point)."""
    level, outermost = _user_frame(sys._getframe(1))
    if outermost is None:
        return level, ""
    name = outermost.f_code.co_name
    if name in _WRAPPED:
        name = getattr(outermost.f_locals.get(_WRAPPED[name]), "__name__", "")
    if name.startswith("_") and not name.startswith("__"):  # (an entry point's own function: ``_astype``)
        name = name[1:]
    return level, "" if name.startswith(("_", "<")) or name in _WRAPPER_NAMES else name


def user_location() -> str:
    """``file.py:12 (in f)`` for the user's current line, with the line's text."""
    f = user_frame()
    if f is None:
        return "an unknown location"
    where = f"{f.filename}:{f.lineno} (in {f.name})"
    return f"{where}\n    {f.line.strip()}" if f.line else where


# --- traceback filtering: errors raised below an API entry point show the user's frames only ---
FILTERED_NOTE = ("--------------------\nFor simplicity, ember has removed its internal frames from the traceback of "
                 "this exception. Set EMBER_TRACEBACK_FILTERING=off to include them.")
_BOUNDARIES: set = set()  # the code objects of entry points (jit calls, transformations' wrappers)
F = TypeVar("F", bound=Callable)


def traceback_filtering() -> bool:
    """Whether entry points filter tracebacks (``EMBER_TRACEBACK_FILTERING=off`` shows every frame)."""
    return os.environ.get("EMBER_TRACEBACK_FILTERING", "auto").lower() not in ("off", "0", "false", "no")


def _internal(code: types.CodeType) -> bool:
    path = os.path.abspath(code.co_filename)
    return path.startswith(_EMBER_DIR + os.sep) and path not in _USER_FILES_IN_PACKAGE


def filter_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` without ember's own frames (the user's frames, and other libraries', stay)."""
    kept = []
    while tb is not None:
        if not _internal(tb.tb_frame.f_code):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for entry in reversed(kept):
        out = types.TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out


def register_boundary(code: types.CodeType) -> None:
    """Mark a function's code as an entry point (for ``filter_at_boundary``'s nesting test)."""
    _BOUNDARIES.add(code)


def filter_at_boundary(e: BaseException, frame: types.FrameType | None) -> None:
    """Called from an entry point's ``except`` block (then re-raise with a bare ``raise``): drop
    ember's frames from ``e``'s traceback, unless an enclosing entry point on the stack above
    ``frame`` (the entry point's own frame) will do it, as JAX's ``api_boundary`` does."""
    if getattr(e, "_ember_filtered", False) or not traceback_filtering():
        return
    outer = frame.f_back if frame is not None else None
    while outer is not None:
        if outer.f_code in _BOUNDARIES:
            return  # the outermost entry point filters (it sees the whole stack below it)
        outer = outer.f_back
    try:
        e._ember_filtered = True  # type: ignore[attr-defined]  # (a mark: filtered once, at the outermost boundary)
    except AttributeError:  # (an exception type without a __dict__)
        return
    e.with_traceback(filter_traceback(e.__traceback__))
    if hasattr(e, "add_note"):
        e.add_note(FILTERED_NOTE)


def api_boundary(fun: F) -> F:
    """``fun`` as an entry point: exceptions leave it with ember's frames filtered out. The entry
    point is transparent: it wraps what ``fun`` wraps, if anything."""
    def entry_point(*args: Any, **kwargs: Any) -> Any:
        try:
            return fun(*args, **kwargs)
        except Exception as e:
            filter_at_boundary(e, sys._getframe())
            raise
    register_boundary(entry_point.__code__)
    functools.update_wrapper(entry_point, fun)
    entry_point.__wrapped__ = getattr(fun, "__wrapped__", fun)  # type: ignore[attr-defined]
    return entry_point  # type: ignore[return-value]


def function_name(fun: Any, default: str | None = None) -> str:
    """``fun.__name__`` where it is a string; else ``default``, or the name of ``fun``'s type (a
    callable object may have no name, or one that is not a string)."""
    name = getattr(fun, "__name__", None)
    return name if isinstance(name, str) else default or type(fun).__name__


def wraps(fun: Any) -> Callable[[F], F]:
    """``functools.wraps`` as JAX's transformations apply it: name, qualified name, module,
    docstring and ``__wrapped__`` of ``fun`` (those it has, that are strings where Python needs
    one), and its attributes, except those the wrapper sets itself (so ``jit(jit(f))`` keeps its
    own state)."""
    def decorate(wrapper: F) -> F:
        for name in functools.WRAPPER_ASSIGNMENTS:
            try:
                setattr(wrapper, name, getattr(fun, name))
            except (AttributeError, TypeError):  # (absent, or not a string: a callable object's __name__ = None)
                pass
        wrapper.__wrapped__ = fun  # type: ignore[attr-defined]
        for name, value in getattr(fun, "__dict__", {}).items():
            wrapper.__dict__.setdefault(name, value)
        return wrapper
    return decorate
