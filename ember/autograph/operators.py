"""What converted code calls at run time (the ``ag__`` module of the generated source).

Each statement decides when it runs: a condition that is a Python value (a number, a static
argument, a shape) takes Python's own road, exactly as unconverted code would; a traced one
becomes ``lax.cond``, ``while_loop``, ``fori_loop`` or ``scan``, the variables the statement
assigns being the branches' outputs or the loop's carry. Generated functions take and return the
tuple of the variables they assign (no ``nonlocal``), so the helpers here see every value.
"""
from __future__ import annotations

import builtins
import threading
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ember import errors, tree_util
from ember.core.array import Array
from ember.core.avals import ShapedArray
from ember.core.staging import DebugInfo, trace_to_jaxpr
from ember.core.trace import Tracer
from ember.lax import control_flow
from ember.lax.base import aval
from ember.lax.creation import full
from ember.lax.elementwise import (
    add,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    convert_element_type,
    gt,
    lt,
    mul,
    ne,
    select,
)
from ember.transforms.programs import eval_closed_by_binding

_ARRAY_TYPES = (Tracer, Array, np.ndarray, np.generic, bool, int, float, complex)
RETURN_SLOT = "ag__retval"  # the variable that holds a function's return value (see the converter)


# --- variables without a value ------------------------------------------------------------------
class Undefined:
    """The value of a variable that has none: not yet assigned, or assigned on some paths of a
    traced statement only. Any use of it raises, naming the variable and why it has no value;
    keeping it does not, so a temporary of one branch that nothing reads later costs nothing."""

    __slots__ = ("_name", "_why")

    def __init__(self, name: str, why: str = "") -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_why", why)

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        name, why = object.__getattribute__(self, "_name"), object.__getattribute__(self, "_why")
        here = errors.user_location()
        if not why:
            raise errors.UndefinedVariableError(
                f"local variable '{name}' is read at {here}\nbefore any value is assigned to it.")
        raise errors.UndefinedVariableError(
            f"variable '{name}' is read at {here}\nbut it has no value there: {why}.")

    def __getattr__(self, attr: str) -> Any:
        return self._fail()

    def __repr__(self) -> str:
        return f"<undefined {object.__getattribute__(self, '_name')}>"

    __setattr__ = __bool__ = __len__ = __iter__ = __index__ = __int__ = __float__ = __complex__ = _fail
    __call__ = __getitem__ = __setitem__ = __contains__ = __array__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _fail
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __matmul__ = __rmatmul__ = _fail
    __neg__ = __pos__ = __abs__ = __invert__ = __lt__ = __le__ = __gt__ = __ge__ = _fail
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __lshift__ = __rshift__ = _fail
    __eq__ = __ne__ = _fail
    __hash__ = None  # type: ignore[assignment]


def is_undefined(x: Any) -> bool:
    return type(x) is Undefined


# --- what the current conversion is doing (per thread) ------------------------------------------
class _State(threading.local):
    def __init__(self) -> None:
        self.traced_bodies: list[frozenset[int]] = []  # one per traced branch or loop body being traced:
        # the ids of the Python lists made before it (loops only) that it must not append to
        self.events: list[list[str]] = []  # what was converted, for log_compiles (one list per jit being traced)


_state = _State()


class _TracingBody:
    """While a traced branch or loop body is traced: ``print`` of a tracer and appends to the
    loop's outer lists are refused there."""

    def __init__(self, outer_lists: frozenset[int] = frozenset()) -> None:
        self.outer_lists = outer_lists

    def __enter__(self) -> None:
        _state.traced_bodies.append(self.outer_lists)

    def __exit__(self, *exc: Any) -> None:
        _state.traced_bodies.pop()


def record(statement: str, where: str, became: str) -> None:
    if _state.events:
        _state.events[-1].append(f"{statement} at {where} -> {became}")


def start_recording() -> list[str]:
    """Collect what each statement became during a trace (``log_compiles``); returns the list. A
    jit traced inside it (nested) collects its own, until its ``stop_recording``."""
    events: list[str] = []
    _state.events.append(events)
    return events


def stop_recording() -> None:
    _state.events.pop()


# --- values ----------------------------------------------------------------------------------------
def is_traced(x: Any) -> bool:
    return isinstance(x, Tracer)


def _truth(x: Any) -> Any:
    """A traced value as a boolean (nonzero is true), for ``and`` / ``or`` / ``not``."""
    a = aval(x)
    return x if a.dtype == np.bool_ else ne(x, convert_element_type(0, a.dtype))


def _is_array(x: Any) -> bool:
    return isinstance(x, _ARRAY_TYPES)


class _Value(NamedTuple):
    """A variable's value as a statement's output: its pytree, which leaves are arrays (passed
    through the program) and the others (kept as Python values)."""

    tree: Any
    arrays: list        # the array leaves
    statics: list       # (position, value) of the other leaves
    avals: list

    def python_scalars(self) -> list | None:
        """The array leaves if all are Python scalars, else None."""
        if all(type(x) in (bool, int, float, complex) for x in self.arrays):
            return self.arrays
        return None


def _value(x: Any) -> _Value | Undefined:
    if type(x) is Undefined:
        return x
    leaves, tree = tree_util.tree_flatten(x)
    arrays, statics = [], []
    for i, leaf in enumerate(leaves):
        if type(leaf) is Undefined:
            return leaf
        if _is_array(leaf):
            arrays.append(leaf)
        else:
            statics.append((i, leaf))
    return _Value(tree, arrays, statics, [aval(a) for a in arrays])


def _rebuild(v: _Value, arrays: Sequence[Any]) -> Any:
    leaves: list[Any] = [None] * (len(v.arrays) + len(v.statics))
    it = iter(arrays)
    static = dict(v.statics)
    for i in range(len(leaves)):
        leaves[i] = static[i] if i in static else next(it)
    return tree_util.tree_unflatten(v.tree, leaves)


def _same_static(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(type(a) is type(b) and a == b)
    except Exception:
        return False


def _describe(v: _Value) -> str:
    if not v.statics and len(v.arrays) == 1 and v.tree == tree_util.tree_structure(0):
        return aval(v.arrays[0]).str_short()
    try:
        return repr(_rebuild(v, [_Short(a.str_short()) for a in v.avals]))
    except Exception:
        return "a Python value"


class _Short(str):
    __repr__ = str.__str__


# --- if ---------------------------------------------------------------------------------------------
def if_stmt(cond: Any, true_fn: Callable, false_fn: Callable, state: tuple, names: tuple, where: str,
            kind: str = "if") -> tuple:
    """``if cond:`` over the variables ``names`` (their values ``state``): Python's ``if`` when
    ``cond`` is a Python value, else ``lax.cond`` with the variables as the branches' outputs.
    ``kind`` names the statement in the log: an ``if`` of the user's, or one the converter made
    (the rest of a block after a ``break``, ``continue`` or ``return``)."""
    if not is_traced(cond):
        return true_fn(*state) if cond else false_fn(*state)
    record(kind, where, "cond")
    return _traced_if(cond, true_fn, false_fn, state, names, where, kind)


def if_exp(cond: Any, true_fn: Callable, false_fn: Callable, where: str) -> Any:
    """``a if cond else b``."""
    if not is_traced(cond):
        return true_fn() if cond else false_fn()
    record("conditional expression", where, "cond")
    [out] = _traced_if(cond, true_fn, false_fn, (), ("<the expression's value>",), where, "conditional expression")
    if type(out) is Undefined:
        out._fail()
    return out


def _traced_if(cond: Any, true_fn: Callable, false_fn: Callable, state: tuple, names: tuple, where: str,
               what: str) -> tuple:
    """Trace each branch once into a program, reconcile their outputs variable by variable, and
    bind one ``cond`` that replays the programs."""
    programs, values = [], []
    for fn in (true_fn, false_fn):
        box: list = []

        def flat(fn: Callable = fn, box: list = box) -> list:
            with _TracingBody():
                out = fn(*state)
            if not isinstance(out, tuple):
                out = (out,)
            vals = [_value(x) for x in out]
            box.append(vals)
            return [a for v in vals if type(v) is _Value for a in v.arrays]

        programs.append(trace_to_jaxpr(flat, [], DebugInfo("autograph", f"the {what} at {where}", [])))
        values.append(box[0])
    # For each variable: where its leaves come from in each branch's program ("out", k) or a fill.
    plans: list[list] = [[], []]
    results: list[Any] = []
    offsets = [0, 0]
    for name, t, f in zip(names, *values):
        both = (t, f)
        defined = [type(v) is _Value for v in both]
        if not any(defined):
            results.append(t)
            continue
        if not all(defined):
            k = defined.index(True)
            v = both[k]
            offsets[k] += len(v.arrays)
            if name.startswith(RETURN_SLOT):  # (the flag beside it says which branch returned)
                for b in (0, 1):
                    plans[b] += [("out", offsets[b] - len(v.arrays) + j, None) if b == k else ("zeros", a, None)
                                 for j, a in enumerate(v.avals)]
                results.append(("arrays", v))
                continue
            branch = "true" if k == 0 else "false"
            other = "false" if k == 0 else "true"
            results.append(Undefined(name, f"the {what} at {where} has a traced condition and assigns it in its "
                                           f"{branch} branch only (the {other} branch leaves it without a value). "
                                           f"Fix: assign '{name}' before the {what}, or in both branches"))
            continue
        mismatch = _mismatch(t, f)
        offsets[0] += len(t.arrays)
        offsets[1] += len(f.arrays)
        if mismatch:
            results.append(Undefined(name, f"the {what} at {where} has a traced condition, and its branches give "
                                           f"'{name}' {mismatch}; a traced branch must give each variable one "
                                           "type (structure, shape and dtype)"))
            continue
        ts, fs = t.python_scalars(), f.python_scalars()
        if ts is not None and fs is not None and all(_same_static(a, b) for a, b in zip(ts, fs)):
            results.append(("python", t))  # (equal Python values in both branches stay Python values)
            continue
        targets = [None if x.dtype == y.dtype else (y.dtype if x.weak_type and not y.weak_type else x.dtype
                                                      if y.weak_type and not x.weak_type else
                                                      np.promote_types(x.dtype, y.dtype))
                   for x, y in zip(t.avals, f.avals)]
        for b, v in enumerate(both):
            plans[b] += [("out", offsets[b] - len(v.arrays) + j, targets[j]) for j in range(len(v.arrays))]
        results.append(("arrays", t))

    def replay(k: int) -> Callable[[], list]:
        def branch() -> list:
            outs = eval_closed_by_binding(programs[k])
            return [(outs[src] if dtype is None else convert_element_type(outs[src], dtype)) if kind == "out"
                    else full(src.shape, 0, src.dtype) for kind, src, dtype in plans[k]]
        return branch

    if not any(p.jaxpr.eqns for p in programs):
        outs = _select(cond, replay(0)(), replay(1)())  # (branches that only choose values: no cond)
    else:
        outs = control_flow.cond(cond, replay(0), replay(1))
    it = iter(outs)
    final = []
    for r in results:
        if type(r) is tuple and r[0] == "arrays":
            final.append(_rebuild(r[1], [next(it) for _ in r[1].arrays]))
        elif type(r) is tuple and r[0] == "python":
            final.append(_rebuild(r[1], r[1].arrays))
        else:
            final.append(r)
    return tuple(final)


def _select(cond: Any, on_true: list, on_false: list) -> list:
    """``on_true[k] if cond else on_false[k]`` for each k, as selects."""
    pred = _truth(cond)
    outs = []
    for t, f in zip(on_true, on_false):
        a, b = aval(t), aval(f)
        dtype = a.dtype if a.dtype == b.dtype or b.weak_type and not a.weak_type else \
            b.dtype if a.weak_type and not b.weak_type else np.promote_types(a.dtype, b.dtype)
        weak = a.weak_type and b.weak_type
        outs.append(select(pred, convert_element_type(t, dtype, weak), convert_element_type(f, dtype, weak)))
    return outs


def _mismatch(a: _Value, b: _Value) -> str:
    """How two values of a variable differ in type, or "" when one program output can hold both."""
    if a.tree != b.tree or [i for i, _ in a.statics] != [i for i, _ in b.statics] \
            or not all(_same_static(x, y) for (_, x), (_, y) in zip(a.statics, b.statics)):
        return f"different Python values ({_describe(a)} vs {_describe(b)})"
    for x, y in zip(a.avals, b.avals):
        if x.shape != y.shape:
            return f"different shapes ({x.str_short()} vs {y.str_short()})"
        if x.dtype != y.dtype and not (x.weak_type or y.weak_type):
            return f"different dtypes ({x.str_short()} vs {y.str_short()})"
    return ""


# --- and / or / not --------------------------------------------------------------------------------
def and_(*thunks: Callable[[], Any]) -> Any:
    """``a and b and ...``: Python's when the values are Python values; a traced operand makes the
    result a traced boolean (the later operands are then evaluated too)."""
    value = thunks[0]()
    for thunk in thunks[1:]:
        if not is_traced(value):
            if not value:
                return value
            value = thunk()
        else:
            other = thunk()
            value = bitwise_and(_truth(value), _truth(other) if is_traced(other) else bool(other))
    return value


def or_(*thunks: Callable[[], Any]) -> Any:
    """``a or b or ...``, as ``and_``."""
    value = thunks[0]()
    for thunk in thunks[1:]:
        if not is_traced(value):
            if value:
                return value
            value = thunk()
        else:
            other = thunk()
            value = bitwise_or(_truth(value), _truth(other) if is_traced(other) else bool(other))
    return value


def not_(x: Any) -> Any:
    """``not x``."""
    return bitwise_not(_truth(x)) if is_traced(x) else not x


# --- loops -----------------------------------------------------------------------------------------
class TracedRange(NamedTuple):
    """``range(start, stop, step)`` with a traced bound: a loop over it becomes a ``while_loop``."""

    start: Any
    stop: Any
    step: Any


def range_(range_fn: Any, *args: Any) -> Any:
    """``range(...)``: the builtin's result, or a TracedRange when a bound is traced."""
    if range_fn is not builtins.range or not any(is_traced(a) for a in args):
        return range_fn(*args)
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], 1) if len(args) == 2 else args
    return TracedRange(start, stop, step)


class _LoopOptions(NamedTuple):
    names: tuple
    where: str
    brk: str | None           # the variable a ``break`` sets
    returns: str | None       # where a ``return`` inside the loop is
    outer_lists: tuple        # (name, getter) of the lists appended to inside that the loop did not make


# Errors after which a loop over a concrete range or array runs as Python instead (its body needs a
# Python value where the program gives an array: an index into a Python list, a slice bound, a shape,
# a list that grows): Python's meaning, as if autograph were off.
# (A genuine error raises again when the loop runs as Python.)
_NEEDS_PYTHON = (errors.ConcretizationTypeError, errors.TracerIntegerConversionError,
                 errors.TracerArrayConversionError, errors.AutographError, IndexError, TypeError, ValueError)


def while_stmt(test: Callable, body: Callable, state: tuple, names: tuple, where: str, brk: str | None = None,
               returns: str | None = None, outer_lists: tuple = ()) -> tuple:
    """``while test: body``: Python's loop while the test gives Python values; from the first
    traced test on, a ``lax.while_loop`` carrying the variables ``names``."""
    opts = _LoopOptions(names, where, brk, returns, outer_lists)
    while True:
        c = _probe(test, state)
        if c is _TRACED:
            break
        if not c:
            return state
        state = body(*state)
    _refuse_return(opts, "its condition is traced")
    record("while", where, "while_loop")
    return _traced_while(test, body, state, opts)


_TRACED = object()


def _probe(test: Callable, state: tuple) -> Any:
    """The loop test's Python value, or _TRACED; a traced test is evaluated in a throwaway trace,
    so that the program holds only the loop's own copy of it."""
    box: list = []

    def flat() -> list:
        box.append(test(*state))
        return []

    trace_to_jaxpr(flat, [], DebugInfo("autograph", "a loop condition", []))
    return _TRACED if is_traced(box[0]) else box[0]


def _refuse_return(opts: _LoopOptions, why: str) -> None:
    if opts.returns:
        raise errors.ReturnInTracedLoopError(
            f"the loop at {opts.where} holds a `return` (at {opts.returns}), but {why}: a compiled loop cannot "
            "leave the function in the middle. Fix: set a result variable and `break` (the loop's condition "
            "then stops it), and return after the loop.")


class _Carry:
    """The variables of a traced loop as its carry: the array leaves of those with a value when it
    starts; those without (temporaries of the body) stay out and are Undefined after it."""

    def __init__(self, state: tuple, opts: _LoopOptions) -> None:
        self.opts = opts
        self.values = [_value(x) for x in state]
        self.init = [a for v in self.values if type(v) is _Value for a in v.arrays]

    def state(self, leaves: Sequence[Any]) -> tuple:
        it = iter(leaves)
        return tuple(_rebuild(v, [next(it) for _ in v.arrays]) if type(v) is _Value else v for v in self.values)

    def leaves(self, state: tuple) -> list:
        """The body's new values as carry leaves, checked against the carry's types."""
        out = []
        for name, old, new in zip(self.opts.names, self.values, state):
            if type(old) is not _Value:
                continue
            v = _value(new)
            if type(v) is not _Value:
                raise errors.UndefinedVariableError(
                    f"the loop at {self.opts.where} has a traced condition, and its body leaves '{name}' without a "
                    "value. Fix: assign it on every path through the body.")
            bad = _mismatch(old, v)
            if bad:
                raise errors.LoopVariableTypeError(
                    f"the loop at {self.opts.where} has a traced condition, so it carries '{name}' with one type, "
                    f"but '{name}' enters the loop as {_describe(old)} and its body makes it {_describe(v)}: "
                    f"{bad}. Fix: keep '{name}''s shape and dtype fixed (pad to a fixed size, cast with "
                    ".astype), or make the condition a Python value.")
            out += [convert_element_type(x, a.dtype) if b.weak_type and not a.weak_type and b.dtype != a.dtype else x
                    for x, a, b in zip(v.arrays, old.avals, v.avals)]
        return out

    def result(self, leaves: Sequence[Any], why: str) -> tuple:
        state = self.state(leaves)
        return tuple(Undefined(name, f"it is assigned only inside the loop at {self.opts.where}, which {why}, so "
                                     f"it may run zero times. Fix: assign '{name}' before the loop")
                     if type(v) is Undefined and not name.startswith("ag__") else v
                     for name, v in zip(self.opts.names, state))


def _outer_lists(opts: _LoopOptions) -> frozenset[int]:
    ids = set()
    for _, getter in opts.outer_lists:
        try:
            x = getter()
        except NameError:
            continue
        if isinstance(x, list):
            ids.add(id(x))
    return frozenset(ids)


def _traced_while(test: Callable, body: Callable, state: tuple, opts: _LoopOptions) -> tuple:
    carry = _Carry(state, opts)
    lists = _outer_lists(opts)

    def cond_fun(leaves: list) -> Any:
        c = test(*carry.state(leaves))
        return _truth(c) if is_traced(c) else np.bool_(bool(c))

    def body_fun(leaves: list) -> list:
        with _TracingBody(lists):
            return carry.leaves(body(*carry.state(leaves)))

    out = control_flow.while_loop(cond_fun, body_fun, carry.init)
    return carry.result(out, "has a traced condition")


def for_stmt(iterable: Any, body: Callable, state: tuple, names: tuple, where: str, brk: str | None = None,
             returns: str | None = None, outer_lists: tuple = ()) -> tuple:
    """``for target in iterable: body``. Over a range with a traced bound: a ``while_loop``. Over a
    concrete range or a traced array, when the body works on traced values: ``fori_loop`` /
    ``scan`` (one copy of the body in the program, reverse-differentiable), unless the body needs
    the item as a Python value, when it runs as Python. Otherwise Python's loop."""
    opts = _LoopOptions(names, where, brk, returns, outer_lists)
    if type(iterable) is TracedRange:  # (its test stops it after a break)
        _refuse_return(opts, "its range has a traced bound")
        record("for", where, "while_loop (traced range)")
        return _for_traced_range(iterable, body, state, opts)
    touches_traced = _touches_traced(iterable, body, state)
    if brk:  # every later iteration under `if not break flag` (a cond once the flag is traced)
        body = _skipped_after_break(body, names.index(brk), names, where)
    if not returns and (type(iterable) is range or (is_traced(iterable) and aval(iterable).ndim >= 1)) \
            and touches_traced:
        try:
            out = _for_compiled(iterable, body, state, opts)
        except _NEEDS_PYTHON:
            record("for", where, "Python (the body needs Python values)")
        else:
            record("for", where, "fori_loop" if type(iterable) is range else "scan")
            return out
    brk_index = names.index(brk) if brk else -1
    for item in iterable:
        state = body(item, *state)
        if brk_index >= 0 and not is_traced(state[brk_index]) and state[brk_index]:
            break
    return state


def _skipped_after_break(body: Callable, flag: int, names: tuple, where: str) -> Callable:
    def guarded(item: Any, *state: Any) -> tuple:
        return if_stmt(not_(state[flag]), lambda *s: body(item, *s), lambda *s: s, state, names, where,
                       "the code after a break")
    return guarded


def _touches_traced(iterable: Any, body: Callable, state: tuple) -> bool:
    """Whether the loop's variables or the values its body reads from around it are traced."""
    if is_traced(iterable) or any(isinstance(x, Tracer) for x in tree_util.tree_leaves(state)):
        return True
    for cell in body.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # (an empty cell)
            continue
        if isinstance(value, Tracer) or (isinstance(value, (tuple, list, dict)) and
                                         any(isinstance(x, Tracer) for x in tree_util.tree_leaves(value))):
            return True
    return False


def _for_compiled(iterable: Any, body: Callable, state: tuple, opts: _LoopOptions) -> tuple:
    lists = _outer_lists(opts)
    if type(iterable) is range:
        if not len(iterable):
            return state
        item_aval = ShapedArray((), np.dtype(np.int32), True)
    else:
        a = aval(iterable)
        item_aval = ShapedArray(a.shape[1:], a.dtype, a.weak_type)
    state = _with_body_temporaries(body, state, item_aval, lists)
    carry = _Carry(state, opts)
    if type(iterable) is range:
        r = iterable

        def step(k: Any, leaves: list) -> list:
            item = k if (r.start, r.step) == (0, 1) else add(r.start, mul(k, r.step))
            with _TracingBody(lists):
                return carry.leaves(body(item, *carry.state(leaves)))

        out = control_flow.fori_loop(0, len(r), step, carry.init)
    else:
        def scan_step(leaves: list, item: Any) -> tuple:
            with _TracingBody(lists):
                return carry.leaves(body(item, *carry.state(leaves))), None

        out, _ = control_flow.scan(scan_step, carry.init, iterable)
    return carry.result(out, "is compiled as a loop")


def _with_body_temporaries(body: Callable, state: tuple, item_aval: ShapedArray, lists: frozenset[int]) -> tuple:
    """``state`` with the variables that first get a value in the body (the target, temporaries)
    given zeros of the type the body gives them: a loop of known, nonzero length assigns them
    before any read, and carried they keep Python's meaning after the loop (the last value)."""
    if not any(type(x) is Undefined for x in state):
        return state
    box: list = []

    def first_iteration(item: Any) -> list:
        with _TracingBody(lists):
            box.append([_value(x) for x in body(item, *state)])
        return []

    trace_to_jaxpr(first_iteration, [item_aval], DebugInfo("autograph", "a loop body", ["item"]))
    return tuple(_rebuild(v, [full(a.shape, 0, a.dtype) for a in v.avals])
                 if type(x) is Undefined and type(v) is _Value else x for x, v in zip(state, box[0]))


def _for_traced_range(r: TracedRange, body: Callable, state: tuple, opts: _LoopOptions) -> tuple:
    names = ("ag__index",) + opts.names
    inner = opts._replace(names=names)
    brk = opts.brk

    def test(i: Any, *s: Any) -> Any:
        going = r.step > 0 if not is_traced(r.step) else None
        if going is None:
            more = bitwise_or(bitwise_and(gt(r.step, 0), lt(i, r.stop)), bitwise_and(lt(r.step, 0), gt(i, r.stop)))
        else:
            more = lt(i, r.stop) if going else gt(i, r.stop)
        if brk:
            return and_(lambda: not_(s[opts.names.index(brk)]), lambda: more)
        return more

    def step(i: Any, *s: Any) -> tuple:
        return (add(i, r.step),) + tuple(body(i, *s))

    start = r.start
    out = _traced_while(test, step, (start,) + tuple(state), inner)
    return out[1:]


# --- calls -------------------------------------------------------------------------------------------
def checked_print(*args: Any, **kwargs: Any) -> None:
    """``print``, refused for a traced value inside a traced branch or loop body."""
    if _state.traced_bodies and any(isinstance(x, Tracer) for x in tree_util.tree_leaves(list(args))):
        raise errors.TracedPrintError(
            f"print of a traced value at {errors.user_location()}\ninside a branch or loop that is compiled "
            "(its condition is traced): Python's print runs once, while tracing, and shows no value. Fix: "
            "use ember.debug.print('x = {}', x), which prints each time the program runs.")
    builtins.print(*args, **kwargs)


def list_method(obj: Any, method: str, name: str) -> Any:
    """``name.append`` (``extend``, ``insert``), refused on a list made before a traced loop that is
    being traced."""
    if type(obj) is list and any(id(obj) in frame for frame in _state.traced_bodies):
        raise errors.ListAppendInTracedLoopError(
            f"'{name}.{method}' at {errors.user_location()}\nappends to the Python list '{name}' inside a loop that "
            f"is compiled (its condition is traced): the body is traced once, so the list would get one traced "
            f"value, not one per iteration. Fix: write into an array made before the loop "
            f"({name} = {name}.at[i].set(value)), or use lax.scan, which stacks a value per iteration.")
    return getattr(obj, method)


def ret(value: Any) -> Any:
    """A ``return``'s value, refused where it (or an item of the tuple, list or dict returned) has
    none: the error names the user's ``return`` line, not the jit that reads it later."""
    if type(value) is Undefined:
        value._fail()
    if type(value) in (tuple, list):
        for x in value:
            if type(x) is Undefined:
                x._fail()
    elif type(value) is dict:
        for x in value.values():
            if type(x) is Undefined:
                x._fail()
    return value


def final_return(did_return: Any, value: Any, where: str) -> Any:
    """The function's result when it returns inside a statement and may fall off its end."""
    if not is_traced(did_return):
        return ret(value) if did_return else None
    raise errors.UndefinedVariableError(
        f"the function at {where} returns a value on some paths and none (falls off its end) on others, "
        "chosen by a traced condition; a compiled function returns one type. Fix: end it with a `return`.")


def returned(did_return: Any, value: Any, last: Callable[[], Any], where: str) -> Any:
    """The result of a function that returns inside a statement and at its end: the earlier value
    where a return ran, else the last ``return``'s."""
    if not is_traced(did_return):
        return ret(value) if did_return else ret(last())
    [out] = _traced_if(did_return, lambda: value, last, (), (RETURN_SLOT,), where, "return")
    if type(out) is Undefined:
        out._fail()
    return out
