"""``ember.debug``: print and inspect values inside jitted and transformed functions (JAX's ``jax.debug``).

A Python ``print`` in a jitted function runs once, while tracing, and shows tracers.
``ember.debug.print`` and ``ember.debug.callback`` instead run when the program runs,
with the values it computed: at every call of a jitted function, at every iteration
of a loop body, once per example under ``vmap`` (in order), and with the primal values
under differentiation. Eagerly they run at once. The compiler never removes or merges
them, and they run in program order (so every callback is "ordered").
"""
from __future__ import annotations

import string
import sys
from typing import Any, Callable

import numpy as np

from ember.callbacks import debug_callback

__all__ = ["callback", "print"]


def callback(callback: Callable[..., Any] | None = None, *args: Any, ordered: bool = False,
             partitioned: bool = False, **kwargs: Any) -> Callable[..., None] | None:
    """Call ``callback(*args, **kwargs)`` when the program runs; array leaves arrive as ``ember.Array``.

    Also in JAX's two-call form, ``callback(ordered=True)(fn, *args)``. ``ordered`` and
    ``partitioned`` are accepted for JAX compatibility; ember runs callbacks in program
    order on one device, so neither changes anything.
    """
    if callback is not None:
        debug_callback(callback, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError(f"debug.callback received unexpected arguments in the two-call form: {args=} {kwargs=}")
    return debug_callback


class _FormatChecker(string.Formatter):
    """Checks a format string against its arguments without formatting (values are not known yet)."""

    def format_field(self, value: Any, format_spec: str) -> str:
        return ""

    def check_unused_args(self, used_args: set, args: tuple, kwargs: dict) -> None:
        unused_args = [arg for i, arg in enumerate(args) if i not in used_args]
        unused_kwargs = [k for k in kwargs if k not in used_args]
        if unused_args:
            raise ValueError(f"Unused positional arguments to `ember.debug.print`: {unused_args}")
        if unused_kwargs:
            raise ValueError(f"Unused keyword arguments to `ember.debug.print`: {unused_kwargs}. You may be passing "
                             "an f-string (i.e, `f\"{x}\"`) into `ember.debug.print` and instead should pass in a "
                             "regular string.")


_format_checker = _FormatChecker()


def print(fmt: str | None = None, *args: Any, ordered: bool = False, partitioned: bool = False,
          skip_format_check: bool = False, **kwargs: Any) -> Callable[..., None] | None:
    """Print ``fmt.format(*args, **kwargs)`` with the values the program computes, when it runs.

    Formatting is delayed, so pass values as arguments rather than in an f-string:
    ``ember.debug.print("x = {x}", x=x)``. NumPy's print options in effect at the call are
    the ones used. With ``skip_format_check`` and no placeholders in ``fmt``, the arguments
    are printed after it, separated by spaces. Also in the two-call form ``print(ordered=True)(fmt, ...)``.
    """
    def debug_print(fmt: str, *args: Any, **kwargs: Any) -> None:
        if not skip_format_check:
            _format_checker.format(fmt, *args, **kwargs)
        has_placeholders = any(field is not None for _, field, _, _ in string.Formatter().parse(fmt))
        options = np.get_printoptions()

        def format_and_print(*values: Any, **named: Any) -> None:
            with np.printoptions(**options):
                msg = fmt.format(*values, **named) if has_placeholders else " ".join((fmt, *map(str, values)))
            sys.stdout.write(msg + "\n")

        format_and_print.__name__ = "debug_print"
        debug_callback(format_and_print, *args, **kwargs)

    if fmt is not None:
        debug_print(fmt, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError(f"debug.print received unexpected arguments in the two-call form: {args=} {kwargs=}")
    return debug_print
