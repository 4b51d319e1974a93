"""Evaluation on NumPy values: the table of reference implementations and the environment
loop that runs a program with them.

``impl_rules[p](*numpy_arrays, **params)`` returns NumPy arrays; the reference
backend (``ember.backends.reference``) fills the table, one module per primitive
family. The loop lives here, in the core, because everything above needs it:
eager operations (``apply_primitive``, called by the eval trace), constant folding
in the compiler, and every backend for what it does not compile.
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Sequence

import numpy as np

from ember import dtypes
from ember.config import config
from ember.core.array import Array
from ember.core.avals import ShapedArray, aval_of_value
from ember.core.ir import ClosedJaxpr, Jaxpr, Literal
from ember.core.primitive import Primitive, RuleTable, abstract_eval_rules
from ember.core.trace import EvalTrace

# Filled by ``ember.backends.reference``: one module per primitive family.
impl_rules: RuleTable = RuleTable("impl_rules")


def to_numpy(x: Any, a: ShapedArray) -> np.ndarray:
    """The NumPy value of an argument. Arrays share their (read-only) buffer; anything
    else is copied, so results never alias a buffer the caller can still write."""
    value = getattr(x, "_value", None)
    if value is not None:
        return value
    arr = np.array(x, dtype=a.dtype if type(x) in (bool, int, float, complex) else None)
    return arr if arr.dtype == a.dtype else dtypes.convert_values(arr, a.dtype)


# NumPy's floating-point error state is a context variable; an eager operation sets it to "ignore"
# directly, as ``np.errstate`` does, without building the state each call (a third of the time of
# an operation on a small array). (NumPy's private names; ``np.errstate`` where they are missing.)
try:
    from numpy._core._ufunc_config import (  # type: ignore[attr-defined]  # (private: not in NumPy's stubs)
        _extobj_contextvar,
        _make_extobj,
    )
    _IGNORE_ERRORS: Any = _make_extobj(all="ignore")
    _set_errors, _reset_errors = _extobj_contextvar.set, _extobj_contextvar.reset
except ImportError:  # pragma: no cover  (a NumPy without them)
    _IGNORE_ERRORS = None

Runner = Callable[[Sequence[np.ndarray], dict], Any]


def plain_rule(rule: Callable) -> Callable:
    """Mark a rule that is its own eager call: ``runner``'s plain function, its params bound, run
    under NumPy's ignored error state set directly (a third of ``np.errstate``'s cost on a small
    array) and its result wrapped as it comes when it is already what an Array holds."""
    rule.plain = lambda avals, params: functools.partial(rule, **params) if params else rule  # type: ignore[attr-defined]
    return rule


def runner(p: Primitive, avals: Sequence[ShapedArray], params: dict) -> Runner:
    """An eager call of ``p[params]`` on NumPy values of the types ``avals``, made once per
    signature: the shape rule runs here (its errors are the call's), the call is then the NumPy
    rule and the result's Array (or list of Arrays). It is called with the values and the call's
    params (equal to ``params``).

    A rule whose work beyond one NumPy function depends only on the operands' types and the params
    (half types computed in float32, its own error state) offers that function of the values through
    ``plain(avals, params)``; a NumPy ufunc is its own. When such a function's first result is
    already what the Array holds (a fresh C-contiguous array of the result's dtype and shape: it is
    for same-typed operands), later calls wrap its results as they come; other results are converted
    (``as_type``) each call."""
    out = abstract_eval_rules[p](*avals, **params)
    rule = impl_rules[p]
    plain = getattr(rule, "plain", None)
    fn = plain(avals, params) if plain is not None else None
    if fn is None and isinstance(rule, np.ufunc) and not params:
        fn = rule
    if p.multiple_results and fn is not None:
        return _plain_results(fn, out)
    if fn is None:
        fn = rule
        def run(values: Sequence[np.ndarray], params: dict) -> Any:
            vals = _ignoring_errors(fn, values, params)
            if p.multiple_results:
                return [Array(as_type(v, o), o) for v, o in zip(vals, out)]
            return Array(as_type(vals, out), out)
        return run

    # What fn's results are, learned on the first call: EXACT, an Array's buffer as they come; SCALAR,
    # a NumPy scalar of the result's dtype (a whole reduction); OTHER, anything else (``as_type``).
    # (A result of two dimensions or more is checked each call: NumPy lays a ufunc's result out as
    # its operands are, and an Array made from a NumPy array may be in Fortran order.)
    kind: str | None = None
    laid_out = len(out.shape) > 1

    def run_plain(values: Sequence[np.ndarray], params: dict) -> Any:
        nonlocal kind
        if _IGNORE_ERRORS is None:  # pragma: no cover
            with np.errstate(all="ignore"):
                v = fn(*values)
        else:
            token = _set_errors(_IGNORE_ERRORS)
            try:
                v = fn(*values)
            finally:
                _reset_errors(token)
        if kind is _EXACT and not (laid_out and not v.flags.c_contiguous) or kind is _SCALAR:
            if kind is _SCALAR:
                v = _as_ndarray(v)
            v.setflags(False)  # (write=False: Arrays are immutable; the constructor's checks known to pass)
            array = _new_array(Array)
            array._value, array.aval = v, out
            return array
        if kind is None:
            kind = _result_kind(v, out)
        return Array(as_type(v, out), out)
    return run_plain


def _plain_results(fn: Callable, out: Sequence[ShapedArray]) -> Runner:
    """``runner``'s call of a plain function of several results (a sort's): as ``run_plain``, its
    results wrapped as they come once the first call showed each is what its Array holds."""
    exact: bool | None = None
    laid_out = any(len(o.shape) > 1 for o in out)

    def run_plain_results(values: Sequence[np.ndarray], params: dict) -> Any:
        nonlocal exact
        vals = _ignoring_errors(fn, values, {})  # (``fn`` has its params bound)
        if exact and not (laid_out and not all(v.flags.c_contiguous for v in vals)):
            arrays = []
            for v, o in zip(vals, out):
                v.setflags(False)  # (write=False: Arrays are immutable)
                array = _new_array(Array)
                array._value, array.aval = v, o
                arrays.append(array)
            return arrays
        if exact is None:
            exact = all(_result_kind(v, o) is _EXACT for v, o in zip(vals, out))
        return [Array(as_type(v, o), o) for v, o in zip(vals, out)]
    return run_plain_results


_EXACT, _SCALAR, _OTHER = "exact", "scalar", "other"
_as_ndarray = np.asarray
_new_array = object.__new__


def _result_kind(v: Any, out: ShapedArray) -> str:
    """A 0-d result is a SCALAR whether it came as a NumPy scalar or a 0-d array: one function can
    give either from call to call (a ufunc gives scalars, ``np.where`` arrays: ``_max``'s zero fix)."""
    if out.shape == () and isinstance(v, (np.generic, np.ndarray)) and v.shape == () and v.dtype == out.dtype:
        return _SCALAR
    if type(v) is np.ndarray:
        return _EXACT if v.dtype == out.dtype and v.shape == out.shape and v.flags.c_contiguous \
            and v.flags.owndata else _OTHER
    return _OTHER


def _ignoring_errors(fn: Callable, values: Sequence[np.ndarray], params: dict) -> Any:
    """``fn(*values, **params)`` with NumPy's floating-point errors ignored: IEEE results (inf, NaN)
    are the defined semantics. (The error state set directly, as ``run_plain`` sets it.)"""
    if _IGNORE_ERRORS is None:  # pragma: no cover
        with np.errstate(all="ignore"):
            return fn(*values, **params)
    token = _set_errors(_IGNORE_ERRORS)
    try:
        return fn(*values, **params)
    finally:
        _reset_errors(token)


# The runners of recent eager signatures: the primitive, the argument types and the (hashable)
# params. Emptied when the config changes (a shape rule may read it, e.g. ``enable_x64``).
_runners: dict[tuple, Runner] = {}
RUNNERS_KEPT = 4096


def signature(p: Primitive, avals: Sequence[ShapedArray], params: dict) -> tuple:
    """The key of an eager call's runner (hashing it raises TypeError for an unhashable param)."""
    return (p, *avals, *params.items()) if params else (p, *avals)


def cached_runner(p: Primitive, avals: Sequence[ShapedArray], params: dict) -> Runner:
    """``runner`` for this signature, made on its first call and kept (unless a param is not hashable)."""
    key = signature(p, avals, params)
    try:
        run = _runners.get(key)
    except TypeError:  # a param that is not hashable (an array): made each time
        return runner(p, avals, params)
    if run is None:
        run = runner(p, avals, params)
        if len(_runners) >= RUNNERS_KEPT:
            _runners.clear()
        _runners[key] = run
    return run


def apply_primitive(p: Primitive, args: Sequence[Any], params: dict) -> Any:
    """Eager evaluation: check types with the shape rule, run the impl, wrap as Arrays."""
    avals = [aval_of_value(a) for a in args]
    results = cached_runner(p, avals, params)([to_numpy(x, a) for x, a in zip(args, avals)], params)
    if config.debug_nans or config.debug_infs:
        check_invalid_values(p.name, [r._value for r in results] if p.multiple_results else [results._value])
    return results


def check_invalid_values(where: str, values: Sequence[np.ndarray]) -> None:
    """``debug_nans`` / ``debug_infs``: a FloatingPointError naming the operation (as JAX's eager
    check does) when an inexact result holds a NaN (or an infinity)."""
    for v in values:
        if not dtypes.is_inexact(v.dtype):
            continue
        wide = v.astype(np.complex128 if dtypes.is_complex(v.dtype) else np.float64)
        if config.debug_nans and np.isnan(wide).any():
            raise FloatingPointError(f"invalid value (nan) encountered in {where}")
        if config.debug_infs and np.isinf(wide).any():
            raise FloatingPointError(f"invalid value (inf) encountered in {where}")


EvalTrace.apply = staticmethod(apply_primitive)
config.on_update(lambda _name: _runners.clear())


def as_type(v: Any, a: ShapedArray) -> np.ndarray:
    """``v`` as a private, C-contiguous NumPy array of the type ``a``."""
    v = np.asarray(v)
    if v.dtype != a.dtype:
        v = v.astype(a.dtype)
    if v.shape != a.shape:  # rank-0 results of broadcasting rules, e.g. select_n with scalar cases
        v = np.broadcast_to(v, a.shape)
    if not v.flags.owndata or not v.flags.c_contiguous:
        v = np.array(v, order="C")  # a private, contiguous copy (also of views of inputs)
    return v


class _BetweenEquations(threading.local):
    """A function that ``eval_jaxpr`` calls before each equation it runs on this thread, sub-programs
    included, or None. A tiered program's reference call sets it (``runtime/tiers.py``): it hands the
    interpreter to the native compile, and stops the call by raising once the native code is ready."""
    hook: Callable[[], None] | None = None


between_equations = _BetweenEquations()


def eval_jaxpr(jaxpr: Jaxpr, consts: Sequence[Any], *args: Any) -> list[np.ndarray]:
    """Run a program on NumPy values: the environment loop every IR consumer shares."""
    env: dict[int, Any] = {}
    hook = between_equations.hook

    def read(a: Any) -> Any:
        return np.asarray(a.val) if isinstance(a, Literal) else env[id(a)]

    for v, x in zip(jaxpr.constvars, consts):
        env[id(v)] = to_numpy(x, v.aval)
    for v, x in zip(jaxpr.invars, args):
        env[id(v)] = x
    with np.errstate(all="ignore"):  # IEEE results (inf, NaN) are the defined semantics
        for eqn in jaxpr.eqns:
            if hook is not None:
                hook()
            outs = impl_rules[eqn.primitive](*map(read, eqn.invars), **eqn.params)
            if not eqn.primitive.multiple_results:
                outs = (outs,)
            for v, o in zip(eqn.outvars, outs):
                o = np.asarray(o)
                env[id(v)] = o if o.dtype == v.aval.dtype else o.astype(v.aval.dtype)
    return [as_type(read(a), a.aval) for a in jaxpr.outvars]


def eval_closed(closed: ClosedJaxpr, *args: Any) -> list[np.ndarray]:
    return eval_jaxpr(closed.jaxpr, closed.consts, *args)
