"""``ember.debug``: print and inspect values inside jitted and transformed functions (JAX's ``jax.debug``).

A Python ``print`` in a jitted function runs once, while tracing, and shows tracers.
``ember.debug.print`` and ``ember.debug.callback`` instead run when the program runs,
with the values it computed: at every call of a jitted function, at every iteration
of a loop body, once per example under ``vmap`` (in order), and with the primal values
under differentiation. Eagerly they run at once. The compiler never removes or merges
them, and they run in program order (so every callback is "ordered").
"""
from __future__ import annotations

import cmd
import inspect
import os
import pprint
import string
import sys
import traceback
from typing import IO, Any, Callable, NamedTuple

import numpy as np

from ember import lax, tree_util
from ember.callbacks import debug_callback, is_array_leaf, stage_debug_callback
from ember.core.array import Array
from ember.core.avals import ShapedArray
from ember.core.evaluation import impl_rules
from ember.core.ir import Verbatim, print_rules
from ember.core.primitive import EFFECTFUL, REPLAYABLE, Primitive, abstract_eval_rules
from ember.core.trace import Tracer
from ember.core.traits import declare
from ember.transforms.batching import batching_rules
from ember.transforms.jvp import jvp_rules
from ember.transforms.partial_eval import partial_eval_jaxpr_custom_rules
from ember.transforms.rules.calls import debug_effect_partial_eval_custom

__all__ = ["breakpoint", "callback", "print"]


def callback(callback: Callable[..., Any] | None = None, *args: Any, ordered: bool = False,
             partitioned: bool = False, **kwargs: Any) -> Callable[..., None] | None:
    """Call ``callback(*args, **kwargs)`` when the program runs; array leaves arrive as ``ember.Array``.

    Also in JAX's two-call form, ``callback(ordered=True)(fn, *args)``. ``ordered`` and
    ``partitioned`` are accepted for JAX compatibility; ember runs callbacks in program
    order on one device, so neither changes anything.
    """
    if callback is not None:
        stage_debug_callback(callback, args, kwargs, ordered, partitioned)
        return None
    if args or kwargs:
        raise TypeError(f"debug.callback received unexpected arguments in the two-call form: {args=} {kwargs=}")
    return lambda fn, *args, **kwargs: stage_debug_callback(fn, args, kwargs, ordered, partitioned)


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
        leaves, tree = tree_util.flatten_for_trace((args, kwargs))
        dynamic = [is_array_leaf(x) for x in leaves]
        debug_print_p.bind(*(x for x, d in zip(leaves, dynamic) if d), fmt=fmt, has_placeholders=has_placeholders,
                           in_tree=tree, static_args=tuple((i, x) for i, (x, d) in enumerate(zip(leaves, dynamic))
                                                           if not d),
                           np_printoptions=tuple(np.get_printoptions().items()), ordered=bool(ordered),
                           partitioned=bool(partitioned), logging_record=None)

    if fmt is not None:
        debug_print(fmt, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError(f"debug.print received unexpected arguments in the two-call form: {args=} {kwargs=}")
    return debug_print


# --- debug_print: the primitive of ``print`` -----------------------------------------------------------
# JAX's: the format and what it needs are params (so programs show them), the values its operands.
# Like ``debug_callback`` it has no outputs and an effect: it runs at every call of a program, once
# per example under vmap, with the primal values under differentiation, and again in a checkpoint's
# recomputation; its rules are debug_callback's.
def _debug_print_rule(*avals: ShapedArray, **params: Any) -> list:
    return []


debug_print_p = Primitive("debug_print", multiple_results=True)
abstract_eval_rules[debug_print_p] = _debug_print_rule
declare(debug_print_p)
EFFECTFUL.add(debug_print_p)
REPLAYABLE.add(debug_print_p)


def _debug_print_impl(*values: Any, fmt: str, has_placeholders: bool, in_tree: Any, static_args: tuple,
                      np_printoptions: tuple, ordered: bool, partitioned: bool, logging_record: Any) -> list:
    arrays, statics = iter(Array(np.array(v)) for v in values), dict(static_args)
    leaves = [statics[i] if i in statics else next(arrays) for i in range(in_tree.num_leaves)]
    args, kwargs = tree_util.tree_unflatten(in_tree, leaves)
    with np.printoptions(**dict(np_printoptions)):
        msg = fmt.format(*args, **kwargs) if has_placeholders else " ".join((fmt, *map(str, args)))
    sys.stdout.write(msg + "\n")
    return []


def _debug_print_jvp(primals: tuple, tangents: tuple, **params: Any) -> tuple[list, list]:
    debug_print_p.bind(*primals, **params)
    return [], []


def _debug_print_batch(axis_size: int, values: Any, dims: Any, **params: Any) -> tuple[list, list]:
    for i in range(axis_size):
        debug_print_p.bind(*[x if d is None else lax.index_in_dim(x, i, d, keepdims=False)
                             for x, d in zip(values, dims)], **params)
    return [], []


impl_rules[debug_print_p] = _debug_print_impl
jvp_rules[debug_print_p] = _debug_print_jvp
batching_rules[debug_print_p] = _debug_print_batch
partial_eval_jaxpr_custom_rules[debug_print_p] = debug_effect_partial_eval_custom


def _debug_print_params(eqn: Any) -> dict:
    params = dict(eqn.params)
    params["in_tree"] = Verbatim(tree_util.treedef_repr(params["in_tree"]))
    return dict(sorted(params.items()))


print_rules[debug_print_p] = _debug_print_params


# --- breakpoint ------------------------------------------------------------------------------------------
class _Frame(NamedTuple):
    """A Python frame as the debugger shows it: where it is, its source, its variables."""
    filename: str
    lineno: int
    source: list  # the lines of its function (or module), without line ends
    offset: int | None  # the current line's index in ``source``
    globals: dict
    locals: dict


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _frame_of(info: inspect.FrameInfo, values: dict) -> _Frame:
    try:
        lines, start = inspect.getsourcelines(info.frame)
        start = max(start, 1)
        source, offset = "".join(lines).split("\n"), info.lineno - start  # (JAX's: a last, empty line)
    except (OSError, TypeError):
        source, offset = [], None
    return _Frame(info.filename, info.lineno, source, offset if source else None, info.frame.f_globals, values)


class _Debugger(cmd.Cmd):
    """JAX's command-line debugger (``jdb``): inspect the frames of a breakpoint with the values
    the program computed; ``c`` continues the program."""

    prompt = "(jdb) "
    intro = "Entering jdb:"

    def __init__(self, frames: list, stdin: IO[str] | None = None, stdout: IO[str] | None = None) -> None:
        super().__init__(stdin=stdin, stdout=stdout)
        self.use_rawinput = stdin is None and sys.stdin.isatty()
        if not self.use_rawinput and stdin is None:
            self.stdin = sys.stdin
        self.frames, self.index = frames, 0

    def _show(self, text: str) -> None:
        self.stdout.write(text + "\n")

    def _evaluate(self, expression: str) -> Any:
        frame = self.frames[self.index]
        return eval(expression, {}, {**frame.globals, **frame.locals})

    def _report(self, expression: str, format: Callable[[Any], str]) -> None:
        try:
            self._show(format(self._evaluate(expression)))
        except Exception:  # (as a debugger does: the error is shown, the session goes on)
            self._show("*** " + traceback.format_exception_only(*sys.exc_info()[:2])[-1].strip())

    def default(self, line: str) -> None:
        self._report(line, repr)

    def emptyline(self) -> None:
        pass

    def do_p(self, arg: str) -> None:
        """p expression: print the expression's value in the current frame."""
        self._report(arg, repr)

    def do_pp(self, arg: str) -> None:
        """pp expression: pretty-print the expression's value in the current frame."""
        self._report(arg, pprint.pformat)

    def _context(self, around: int) -> None:
        frame = self.frames[self.index]
        shown = [f"> {frame.filename}({frame.lineno})"]
        if frame.offset is not None:
            for i, line in enumerate(frame.source):
                if frame.offset - 1 - around <= i <= frame.offset + around:
                    shown.append(("->  " if i == frame.offset else "    ") + line)
        self._show("\n".join(shown))

    def do_up(self, arg: str) -> None:
        """u(p): move to the calling frame."""
        if self.index == len(self.frames) - 1:
            self._show("At topmost frame.")
        else:
            self.index += 1
        self._context(2)

    def do_down(self, arg: str) -> None:
        """d(own): move to the called frame."""
        if self.index == 0:
            self._show("At bottommost frame.")
        else:
            self.index -= 1
        self._context(2)

    def do_list(self, arg: str) -> None:
        """l(ist): the source around the current line."""
        self._context(5)

    def do_where(self, arg: str) -> None:
        """w(here), bt: the frames, the most recent last."""
        shown = ["Traceback:"]
        for frame in reversed(self.frames):
            shown.append(f'  File "{frame.filename}", line {frame.lineno}')
            shown.append("    " + frame.source[frame.offset].strip() if frame.offset is not None else "    <no source>")
        self._show("\n".join(shown))

    def do_continue(self, arg: str) -> bool:
        """c(ont(inue)): continue the program."""
        return True

    def do_quit(self, arg: str) -> None:
        """q(uit), exit: end the program."""
        sys.exit(0)

    do_u, do_d, do_l, do_w, do_bt = do_up, do_down, do_list, do_where, do_where
    do_c = do_cont = do_continue
    do_q = do_exit = do_EOF = do_quit


_DEBUGGERS = {"cli": lambda frames: _Debugger(frames).cmdloop()}


def breakpoint(*, backend: str | None = None, filter_frames: bool = True, num_frames: int | None = None,
               ordered: bool = False, token: Any = None, **kwargs: Any) -> Any:
    """Stop the program here when it runs and open a debugger (``jdb``, as JAX's) on the calling
    frames, whose array variables hold the values the program computed (under ``jit``, at every
    call; eagerly, at once). ``filter_frames`` leaves out ember's own frames; ``num_frames``
    keeps that many; ``token`` (returned unchanged) makes it run once that value is computed."""
    if backend is not None and backend not in _DEBUGGERS:
        raise ValueError(f"Debugger backend {backend!r} is not available; the available backends are "
                         f"{sorted(_DEBUGGERS)}")
    infos = inspect.stack(context=0)[1:]
    if filter_frames:
        infos = [i for i in infos if not os.path.abspath(i.filename).startswith(_PACKAGE)]
    if num_frames is not None:
        infos = infos[:num_frames]
    dynamic: list = []  # the arrays among the frames' variables: the callback's operands
    layouts = []
    for info in infos:
        static, traced = {}, {}
        for name, value in info.frame.f_locals.items():
            try:
                leaves, tree = tree_util.flatten_for_trace(value)
            except Exception:  # (an object that is not a pytree: shown as it is)
                static[name] = value
                continue
            if any(isinstance(x, (Tracer, Array)) for x in leaves):
                traced[name] = (tree, len(dynamic), len(leaves))
                dynamic.extend(leaves)
            else:
                static[name] = value
        layouts.append((info, static, traced))
    del infos
    token_leaves = tree_util.tree_leaves(token)

    def enter(*values: Any) -> None:
        frames = []
        for info, static, traced in layouts:
            named = dict(static)
            for name, (tree, start, count) in traced.items():
                named[name] = tree_util.tree_unflatten(tree, list(values[start:start + count]))
            frames.append(_frame_of(info, named))
        _DEBUGGERS[backend or "cli"](frames)

    enter.__name__ = "breakpoint"
    debug_callback(enter, *dynamic, *token_leaves)
    return token
