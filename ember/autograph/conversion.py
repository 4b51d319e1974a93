"""Converting a function: find its source, rewrite it (``transformer``), compile it under the
user's file name, and make a function of the result with the original's globals, closure cells
and defaults.

The conversion works on source (``inspect``'s way: ``linecache`` and ``ast``), not on bytecode:
the syntax tree holds the statements and their blocks as Python wrote them (bytecode has only
jumps, which differ between Python versions), and compiling the rewritten tree with the original
file name and line numbers makes tracebacks and messages point at the user's own lines.

Each code object is converted once (``_conversions``); a function made of it (a closure, a
method's function, a ``functools.partial``'s) is rebuilt from the converted code with its own
cells, which costs a microsecond. The library's own code (ember, NumPy, anything installed in
site-packages, the standard library) is never converted.
"""
from __future__ import annotations

import ast
import contextlib
import copy
import functools
import inspect
import linecache
import os
import site
import sys
import sysconfig
import threading
import types
import warnings
import weakref
from typing import Any, Callable, Iterator

from ember import errors
from ember.autograph import operators
from ember.autograph.transformer import ControlFlow, is_generator
from ember.core.caches import register_cache
from ember.transforms import user_functions

_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _library_dirs() -> tuple[str, ...]:
    paths = {_EMBER_DIR + os.sep}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            paths.add(os.path.abspath(path) + os.sep)
    try:
        paths.update(os.path.abspath(p) + os.sep for p in site.getsitepackages())
    except AttributeError:  # (some virtual environments' site module)
        pass
    return tuple(sorted(paths))


_LIBRARY_DIRS = _library_dirs()


def is_library(filename: str) -> bool:
    """Whether code from ``filename`` belongs to a library (never converted)."""
    if filename.startswith("<"):
        return False
    path = os.path.abspath(filename)
    return path.startswith(_LIBRARY_DIRS) or f"{os.sep}site-packages{os.sep}" in path \
        or f"{os.sep}dist-packages{os.sep}" in path


# --- the cache of conversions --------------------------------------------------------------------
_NOT_CONVERTED = object()
_conversions: dict[types.CodeType, Any] = {}  # original code -> converted code, or _NOT_CONVERTED
_converted_codes: set[types.CodeType] = set()  # every code object that conversion made
_lock = threading.Lock()
_parsed: dict[str, tuple[int, int, ast.Module | None]] = {}


def _clear() -> None:
    with _lock:
        _conversions.clear()
        _parsed.clear()
        _functions.clear()


register_cache("autograph: converted functions, per code object", _clear, lambda: len(_conversions))


# --- finding the source ------------------------------------------------------------------------
def _parse(filename: str) -> ast.Module | None:
    lines = linecache.getlines(filename)
    if not lines:
        return None
    key = (id(lines), len(lines))
    cached = _parsed.get(filename)
    if cached is not None and cached[:2] == key:
        return cached[2]
    try:
        tree: ast.Module | None = ast.parse("".join(lines), filename)
    except SyntaxError:
        tree = None
    _parsed[filename] = (*key, tree)
    return tree


def _parse_block(code: types.CodeType) -> ast.FunctionDef | None:
    """The ``def`` at the code's first line, parsed alone (a file of many functions need not be
    parsed whole): its lines and columns are the file's."""
    lines = linecache.getlines(code.co_filename)
    first = code.co_firstlineno
    if not lines or first > len(lines):
        return None
    try:
        block = inspect.getblock(lines[first - 1:])
    except Exception:  # (the tokenizer's errors on a block it cannot end)
        return None
    indented = block[0][:1].isspace()
    text = "".join((["if 1:\n"] if indented else []) + block)  # (an indented block keeps its columns)
    try:
        tree = ast.parse(text, code.co_filename)
    except SyntaxError:
        return None
    ast.increment_lineno(tree, first - 1 - (1 if indented else 0))
    node = tree.body[0].body[0] if indented and isinstance(tree.body[0], ast.If) else tree.body[0]
    return node if isinstance(node, ast.FunctionDef) and node.name == code.co_name else None


def _find(code: types.CodeType) -> ast.FunctionDef | ast.Lambda | None:
    """The syntax tree of the function whose code is ``code``, or None when it cannot be told."""
    if code.co_name != "<lambda>":
        block = _parse_block(code)
        if block is not None:
            return block
    tree = _parse(code.co_filename)
    if tree is None:
        return None
    found: list[Any] = []
    if code.co_name == "<lambda>":
        params = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
        for node in ast.walk(tree):
            if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno:
                a = node.args
                if [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)] == params:
                    found.append(node)
    else:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == code.co_name \
                    and min([node.lineno] + [d.lineno for d in node.decorator_list]) == code.co_firstlineno:
                found.append(node)
    return found[0] if len(found) == 1 else None


# --- compiling the converted tree ----------------------------------------------------------------
def _compile(code: types.CodeType, node: ast.FunctionDef | ast.Lambda) -> types.CodeType:
    node = copy.deepcopy(node)
    if isinstance(node, ast.Lambda):
        body: list[ast.stmt] = [ast.copy_location(ast.Return(value=node.body), node.body)]
        fdef = ast.FunctionDef(name="ag__converted", args=node.args, body=body, decorator_list=[], returns=None,
                               type_comment=None)
        ast.copy_location(fdef, node)
    else:
        fdef = node
        fdef.name, fdef.decorator_list, fdef.returns = "ag__converted", [], None
    for a in (*fdef.args.posonlyargs, *fdef.args.args, *fdef.args.kwonlyargs, fdef.args.vararg, fdef.args.kwarg):
        if a is not None:
            a.annotation = None
    # (defaults are the original function's: the factory below is compiled, never run)
    fdef.args.defaults = [ast.Constant(value=None) for _ in fdef.args.defaults]
    fdef.args.kw_defaults = [None if d is None else ast.Constant(value=None) for d in fdef.args.kw_defaults]
    fdef = ControlFlow(code.co_filename).visit(fdef)
    params = ["ag__", *code.co_freevars]
    factory = ast.FunctionDef(
        name="ag__factory", args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params], vararg=None,
                                               kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=[fdef, ast.Return(value=ast.Name(id="ag__converted", ctx=ast.Load()))], decorator_list=[],
        returns=None, type_comment=None)
    ast.copy_location(factory, fdef)
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    compiled = compile(module, code.co_filename, "exec", dont_inherit=True)
    factory_code = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in factory_code.co_consts if isinstance(c, types.CodeType) and c.co_name == "ag__converted")
    return _renamed(inner, code.co_name, getattr(code, "co_qualname", code.co_name))


def _renamed(c: types.CodeType, name: str, qualname: str) -> types.CodeType:
    """``c`` and the code nested in it with the user's function's name where the converter named
    them (tracebacks show ``in f``), each recorded as converted."""
    consts = tuple(_renamed(k, name, qualname) if isinstance(k, types.CodeType) else k for k in c.co_consts)
    own = c.co_name.startswith("ag__")
    out = c.replace(co_consts=consts, co_name=name if own else c.co_name)
    if hasattr(c, "co_qualname"):  # (Python 3.11 on)
        new_qualname = c.co_qualname.replace("ag__factory.<locals>.ag__converted", qualname, 1)
        replace: Any = out.replace  # (co_qualname: Python 3.11's, unknown to the 3.10 stubs)
        out = replace(co_qualname=qualname if own else new_qualname)
    _converted_codes.add(out)
    return out


def _warn_unconverted(fun: Callable, why: str) -> None:
    code = getattr(fun, "__code__", None)
    where = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
    warnings.warn(f"ember autograph: {getattr(fun, '__qualname__', fun)!s}{where} runs unconverted: {why}. Python "
                  "control flow on traced values in it fails as it does without autograph.",
                  stacklevel=errors.user_stacklevel())


def _conversion(fun: types.FunctionType) -> Any:
    code = fun.__code__
    entry = _conversions.get(code)
    if entry is not None:
        return entry
    why = ""  # (why a user's function runs unconverted: warned once)
    with _lock:
        entry = _conversions.get(code)
        if entry is not None:
            return entry
        if is_library(code.co_filename) or code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE
                                                            | inspect.CO_ASYNC_GENERATOR):
            entry = _NOT_CONVERTED  # (generators and coroutines run as they are iterated or awaited)
        else:
            node = _find(code)
            if node is None:
                entry = _NOT_CONVERTED
                why = "its source is not available (a REPL line, `exec`, or code made at run time)"
            elif isinstance(node, ast.FunctionDef) and is_generator(node):
                entry = _NOT_CONVERTED
            else:
                try:
                    entry = _compile(code, node)
                except Exception as e:  # (a construct the converter does not handle: run it as it is)
                    entry, why = _NOT_CONVERTED, f"it could not be converted ({type(e).__name__}: {e})"
        _conversions[code] = entry
    if why:
        _warn_unconverted(fun, why)
    return entry


# The converted function of each function object: one object per original, so that what keys a
# cache by the function (a jit given it inside converted code) sees the same function every time.
_functions: "weakref.WeakKeyDictionary[types.FunctionType, types.FunctionType]" = weakref.WeakKeyDictionary()


def _function(fun: types.FunctionType) -> Callable:
    code = fun.__code__
    if code in _converted_codes:
        return fun
    new = _functions.get(fun)
    if new is not None:
        return new
    converted = _conversion(fun)
    if converted is _NOT_CONVERTED:
        return fun
    cells = dict(zip(code.co_freevars, fun.__closure__ or ()))
    closure = tuple(_AG_CELL if name == "ag__" else cells[name] for name in converted.co_freevars)
    new = types.FunctionType(converted, fun.__globals__, fun.__name__, fun.__defaults__, closure)
    new.__kwdefaults__ = fun.__kwdefaults__
    new.__dict__.update(fun.__dict__)  # (no reference back to ``fun``: the cache's key must be free to go)
    new.__qualname__ = fun.__qualname__
    _functions[fun] = new
    return new


def argument(x: Any) -> Any:
    """An argument of a call in converted code: a user function given to another function (``grad(loss)``,
    ``lax.scan(body, ...)``, ``vmap(f)``) is converted, since what calls it is not converted code."""
    t = type(x)
    if t is types.FunctionType or t is types.MethodType or t is functools.partial:
        return call(x)
    return x


def call(f: Any) -> Any:
    """``f`` as a converted call calls it: a user function (or method, ``functools.partial`` of
    one, callable object) converted; ``print`` checked; anything else as it is."""
    t = type(f)
    if t is types.FunctionType:
        return _function(f)
    if t is types.BuiltinFunctionType:
        return operators.checked_print if f is print else f
    if t is types.MethodType:
        inner = call(f.__func__)
        return f if inner is f.__func__ else types.MethodType(inner, f.__self__)
    if t is functools.partial:
        inner = call(f.func)
        return f if inner is f.func else functools.partial(inner, *f.args, **f.keywords)
    if not isinstance(f, type):
        method = t.__dict__.get("__call__") if t.__module__ != "builtins" else None
        if type(method) is types.FunctionType and not is_library(method.__code__.co_filename):
            return types.MethodType(_function(method), f)
    return f


_warned_compiled: set[tuple[str, str]] = set()


def _compiled_outside_libraries(fun: Any) -> bool:
    """Whether ``fun`` is a C function (or other compiled callable) of a module outside the
    libraries: one that has no Python source to convert."""
    if isinstance(fun, (types.FunctionType, types.MethodType, functools.partial, type)):
        return False
    module = sys.modules.get(getattr(fun, "__module__", None) or "")
    path = getattr(module, "__file__", None)
    return isinstance(path, str) and not is_library(path)


class _Converting(threading.local):
    """Whether the innermost ``jit`` trace of this thread converts (a stack: jits nest)."""

    def __init__(self) -> None:
        self.stack: list[bool] = []


_converting = _Converting()


@contextlib.contextmanager
def converting(on: bool) -> Iterator[None]:
    """Within: the ``jit`` trace being made converts (``on``) or not; the functions that
    transformations trace meanwhile (``grad(f)``'s ``f``) are converted as it says."""
    _converting.stack.append(on)
    try:
        yield
    finally:
        _converting.stack.pop()


def _traced_by_a_transformation(fun: Any) -> Any:
    stack = _converting.stack
    return call(fun) if stack and stack[-1] else fun


user_functions.register(_traced_by_a_transformation)


def convert(fun: Callable) -> Callable:
    """``fun`` with Python control flow on traced values converted (``jit(f, autograph=True)``
    traces this). Functions that cannot be converted come back as they are, with a warning."""
    converted = call(fun)
    if converted is fun and _compiled_outside_libraries(fun):
        key = (getattr(fun, "__module__", ""), getattr(fun, "__qualname__", repr(fun)))
        if key not in _warned_compiled:
            _warned_compiled.add(key)
            _warn_unconverted(fun, "it is a compiled (C) function, which has no Python source")
    return converted


ag__ = types.SimpleNamespace(
    call=call, if_stmt=operators.if_stmt, if_exp=operators.if_exp, while_stmt=operators.while_stmt,
    for_stmt=operators.for_stmt, range_=operators.range_, and_=operators.and_, or_=operators.or_,
    not_=operators.not_, Undefined=operators.Undefined, list_method=operators.list_method,
    returned=operators.returned, final_return=operators.final_return, ret=operators.ret, arg=argument)
_AG_CELL = types.CellType(ag__)

