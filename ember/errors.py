"""The errors users see. Class names and bases follow JAX, so ``except TypeError``
catches the same things; messages name the user's line and the fix."""
from __future__ import annotations

import os
import sys
import traceback

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


class NonConcreteBooleanIndexError(IndexError):
    """Boolean-mask indexing needs a concrete mask, since the result's shape depends on it."""


def user_frame() -> traceback.FrameSummary | None:
    """The innermost stack frame that belongs to user code (not ember, not the stdlib)."""
    for frame in reversed(traceback.extract_stack(sys._getframe(1))):
        path = os.path.abspath(frame.filename)
        internal = path.startswith(_SKIP_DIRS) and path not in _USER_FILES_IN_PACKAGE
        if not internal and not frame.filename.startswith("<frozen"):
            return frame
    return None


def user_location() -> str:
    """``file.py:12 (in f)`` for the user's current line, with the line's text."""
    f = user_frame()
    if f is None:
        return "an unknown location"
    where = f"{f.filename}:{f.lineno} (in {f.name})"
    return f"{where}\n    {f.line.strip()}" if f.line else where
