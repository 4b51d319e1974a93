"""Eager operations on native code: what runs when a primitive is bound outside any trace.

Outside ``jit`` and the transformations, ``Primitive.bind`` applies each operation at once
(``core.trace.EvalTrace``). The reference interpreter (``core.evaluation.apply_primitive``)
defines what every operation computes and runs whatever is not worth compiling; this module,
which installs ``apply`` as ``EvalTrace.apply`` when it loads, decides where compiled code pays:

- **Programs**: control flow (``scan``, ``while``, ``cond``: ``lax.scan``, ``fori_loop``,
  ``map``, ``while_loop``, ``switch`` ...) and ``jit`` calls bound eagerly (``associative_scan``
  binds one) hold a whole sub-program, which the reference interpreter would run one equation
  at a time, from Python, once per iteration. An eager call of one is the one-equation program
  ``outs = p[params](*args)``, compiled once and cached on its fingerprint
  (``core.fingerprint``): the equation, its sub-programs and the arguments' types. A loop body
  closes over values as operands (``lax.control_flow``), so a new closure of the same code with
  other captured values traces to the same program: the body is traced again on each call
  (cheap), and compiled once. A ``jit`` function called in the body is inlined into the loop.
  A one-off program that would run on the reference interpreter faster than it compiles
  (``runtime.tiers``' cost model) runs there; when it comes again it compiles, tiered (its calls
  run on the reference until the native code is ready).
- **Large operations** (``KERNELS``: transcendental functions, reductions and matrix products on
  arrays of ``KERNEL_MIN_ELEMENTS`` elements and more) run native code, vectorized and split over
  threads, that beats NumPy's; cached by the primitive, the argument types and the params. A
  signature's first call runs on the reference, so that code calling many shapes once each (a
  test suite, an initializer) pays no compile; when it comes again it compiles as above.
- **Small float32 tanh** (``LOOPS``), whose reference rule is many NumPy calls, runs one native
  loop compiled once per process for every shape (the reference's bits).
- Everything else (small arrays, cheap elementwise operations that NumPy runs as fast) runs on the
  reference interpreter. A signature of Arrays seen before (the primitive, the argument types and
  the params) is one dictionary lookup away from its runner (``core.evaluation.runner``: the shape
  rule ran once, the call is the NumPy function and the result's Array), ``_references``.

The reference backend (``config.backend = "reference"``), ``debug_nans`` and ``debug_infs`` keep every eager operation
on the reference interpreter (the NaN check names the operation that made the NaN).
"""
from __future__ import annotations

import logging
import math
import operator
import threading
import time
from collections import OrderedDict
from typing import Any, NamedTuple, Sequence

import numpy as np

from ember.backends import registry
from ember.backends.cpu_backend import CpuBackend
from ember.backends.protocols import Executable, SplitBuffers
from ember.backends.reference.executable import ReferenceBackend
from ember.config import config
from ember.core.array import Array
from ember.core.avals import ShapedArray, aval_of_value
from ember.core.background import background
from ember.core.caches import register_cache
from ember.core.calls import jit_p
from ember.core.evaluation import RUNNERS_KEPT, apply_primitive, cached_runner, signature
from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr, Var
from ember.core.primitive import Primitive, abstract_eval_rules
from ember.core.trace import EvalTrace, current_trace
from ember.lax import elementwise as ew
from ember.lax.control_flow import cond_p, scan_p, while_p
from ember.lax.dot import dot_general_p
from ember.lax.reductions import REDUCTIONS
from ember.runtime import compile_cache, tiers

logger = logging.getLogger("ember")

# Primitives that hold a whole program, compiled once per fingerprint when they run eagerly.
PROGRAMS: frozenset[Primitive] = frozenset({scan_p, while_p, cond_p, jit_p})


class EagerCacheInfo(NamedTuple):
    """Eager programs: calls that ran compiled code, compiles (of new executables, including the
    ones an equal ``jit`` program shared), calls that ran on the reference interpreter, and the
    programs held."""

    native_calls: int
    compiles: int
    reference_calls: int
    currsize: int


class _Program:
    """What the cache knows of one eager program: how often it came, and its executable once
    compiled (and the objects its fingerprint refers to by identity, kept alive with it)."""

    __slots__ = ("executable", "sightings", "refs")

    def __init__(self, refs: list) -> None:
        self.executable: Any = None
        self.sightings = 0
        self.refs = refs


_programs: OrderedDict[str, _Program] = OrderedDict()
_lock = threading.Lock()
_counts = {"native": 0, "compiles": 0, "reference": 0}


# The runners (``core.evaluation.runner``, or a ``LOOPS`` runner) of the signatures (the primitive,
# the Arrays' types, the params) that run on the reference interpreter whatever the backend (or a
# native loop of the reference's bits): an eager call of one is a dictionary lookup, the NumPy
# function (or the loop) and the result's Array. Signatures that may run native code
# (programs, large operations), the debug checks and arguments other than Arrays take ``_apply``.
# Emptied when the config changes.
_references: dict[tuple, Any] = {}
_aval = operator.attrgetter("aval")
# The executables of the large operations (``_run_kernel``) compiled for a signature of Arrays (the
# same key): a call of one is a dictionary lookup and the executable's call. Emptied when the config
# changes (the backend, the debug checks), and a signature leaves it when ``_programs`` drops it
# (calls found here skip ``_seen``: they do not move it up ``_programs``' order of recent use).
_kernels: dict[Any, Executable] = {}


def apply(p: Primitive, args: Sequence[Any], params: dict) -> Any:
    """``EvalTrace.apply``: one eager operation, on native code where it pays."""
    if SplitBuffers.made and _split(args):
        return _over_devices(p, args, params)
    try:  # (written out for one and two operands, the commonest)
        if len(args) == 2:
            a, b = args
            run = _references[(p, a.aval, b.aval, *params.items()) if params else (p, a.aval, b.aval)]
            values: Any = (a._value, b._value)
        elif len(args) == 1:
            a = args[0]
            run = _references[(p, a.aval, *params.items()) if params else (p, a.aval)]
            values = (a._value,)
        else:
            run = _references[(p, *map(_aval, args), *params.items()) if params else (p, *map(_aval, args))]
            values = [a._value for a in args]
    except (KeyError, TypeError, AttributeError):  # (new, unhashable params, not all Arrays)
        run = None  # (outside the handler: the general path's errors carry no KeyError as context)
    if run is None:
        return _apply(p, args, params)
    return run(values, params)


def _split(args: Sequence[Any]) -> bool:
    """Whether an operand is an Array split over several devices (its buffer says how)."""
    return any(type(a) is Array and getattr(a._device, "sharding", None) is not None for a in args)


def _over_devices(p: Primitive, args: Sequence[Any], params: dict) -> Any:
    """An eager operation on an Array split over devices: computation follows the data, as in JAX.
    The one-equation program runs compiled over the mesh of its split operands (the backend's
    executable takes split arguments so: ``SplitArgument``), the others replicated there, and the
    results stay split as XLA's partitioner chooses, where the host would gather them whole."""
    avals = [aval_of_value(a) for a in args]
    closed = _one_equation(p, avals, params)
    key, refs = compile_cache.fingerprint(closed)
    program, executable = _seen(key, refs)
    if executable is None:
        executable = program.executable = _compile(p, closed, avals, again=False)
    _counts["native"] += 1
    outs = executable(*args)
    return outs if p.multiple_results else outs[0]


# Elementwise operations whose eager call may take Arrays that NumPy broadcasts
# (``apply_broadcasting``; the ones ``jnp``'s arithmetic, comparisons, bitwise functions and
# ``where`` bind): their reference rules compute element by element with NumPy functions, which
# broadcast (``tests/test_eager_fast_path.py`` holds each against the call on broadcast operands).
BROADCASTING: frozenset[Primitive] = frozenset({
    ew.add_p, ew.sub_p, ew.mul_p, ew.div_p, ew.max_p, ew.min_p, ew.atan2_p, ew.nextafter_p, ew.and_p, ew.or_p,
    ew.xor_p, ew.eq_p, ew.ne_p, ew.lt_p, ew.le_p, ew.gt_p, ew.ge_p, ew.select_n_p})
# The runners of the broadcasting calls (``apply_broadcasting``) by the primitive and the operands'
# types, or None where such a call takes the general path. Emptied when the config changes.
_broadcasting: dict[tuple, Any] = {}
_NO_PARAMS: dict = {}


def apply_seen(p: Primitive | None, a: Array, b: Array) -> Array | None:
    """An eager call of ``p`` (no params) on two Arrays whose signature already runs on the
    reference (``_references``: small, the shape rule passed, no debug check), without the layers
    between a ``jnp`` function and ``apply`` (the ``lax`` function, ``bind``: a microsecond of a
    5 us ``x + y``); None for any other signature, inside a trace, or for no ``p`` (the caller binds)."""
    if p is None or type(current_trace()) is not EvalTrace or SplitBuffers.made and _split((a, b)):
        return None
    run = _references.get((p, a.aval, b.aval))
    return None if run is None else run((a._value, b._value), _NO_PARAMS)


def apply_seen_one(p: Primitive | None, a: Array, params: dict = _NO_PARAMS) -> Array | None:
    """``apply_seen`` of one operand (and ``params``: a reduction's axes)."""
    if p is None or type(current_trace()) is not EvalTrace or SplitBuffers.made and _split((a,)):
        return None
    run = _references.get((p, a.aval, *params.items()) if params else (p, a.aval))
    return None if run is None else run((a._value,), params)


def apply_broadcasting(p: Primitive, args: tuple[Array, ...], shape: tuple[int, ...]) -> Array | None:
    """An eager call of the elementwise ``p`` on Arrays whose shapes NumPy broadcasts to ``shape``
    (``x - x.mean(0)``, ``x + b``, ``where(c, x, 0.0)``): one call of the reference rule, which
    broadcasts, where binding ``p`` needs each broadcast operand made first, a call of its own (3-4
    us of a 10 us ``x + v`` on (8, 10) and (10,)). The same values as that: the rule computes each
    element from the same operands. None (the caller broadcasts and binds) inside a trace, where the
    result has ``KERNEL_MIN_ELEMENTS`` elements or more (native code computes those), with the
    debug checks on, and for other primitives."""
    if type(current_trace()) is not EvalTrace or SplitBuffers.made and _split(args):
        return None
    key = (p, args[0].aval, args[1].aval) if len(args) == 2 else (p, *[a.aval for a in args])
    try:
        run = _broadcasting[key]
    except KeyError:
        run = None
        if p in BROADCASTING and math.prod(shape) < KERNEL_MIN_ELEMENTS and not (config.debug_nans or
                                                                                config.debug_infs):
            try:
                run = cached_runner(p, [ShapedArray(shape, a.aval.dtype, a.aval.weak_type) for a in args],
                                    _NO_PARAMS)
            except Exception:  # noqa: BLE001  (types the shape rule refuses: the general path raises its error)
                run = None
        if len(_broadcasting) >= RUNNERS_KEPT:
            _broadcasting.clear()
        _broadcasting[key] = run
    if run is None:
        return None
    return run([a._value for a in args], _NO_PARAMS)


def _apply(p: Primitive, args: Sequence[Any], params: dict) -> Any:
    if p in KERNELS:
        try:
            executable = _kernels.get((p, *map(_aval, args), *params.items()))
        except (TypeError, AttributeError):  # (unhashable params, not all Arrays)
            executable = None
        if executable is not None:
            _counts["native"] += 1
            outs = executable(*args)
            return outs if p.multiple_results else outs[0]
    if p in PROGRAMS:
        if native_now():
            return _run_program(p, args, params)
    elif p in KERNELS and _large(p, args):
        if native_now():
            return _run_kernel(p, args, params)
    elif not (config.debug_nans or config.debug_infs) and all(type(a) is Array for a in args):
        avals = [a.aval for a in args]
        try:
            key = signature(p, avals, params)
            hash(key)
        except TypeError:
            return apply_primitive(p, args, params)
        run = _loop_runner(p, avals) if p in LOOPS else None
        if run is _COMPILING:  # (not kept: the signature takes the loop once it is compiled)
            return apply_primitive(p, args, params)
        run = run or cached_runner(p, avals, params)
        if len(_references) >= RUNNERS_KEPT:
            _references.clear()
        _references[key] = run
        return run([a._value for a in args], params)
    return apply_primitive(p, args, params)


# --- small float32 operations whose reference rule is many NumPy calls ------------------------------
# float32 tanh is XLA's rational approximation (``reference.elementwise._tanh``), some 20 NumPy calls:
# 80 us on 100 elements where JAX takes 12. On arrays below KERNEL_MIN_ELEMENTS its eager calls run
# the native loop of the same function instead (``vecmath``: what jit's code computes, the
# reference's bits), one loop for every shape (``vecmath_kernels.Kernel.apply``), compiled once per
# process in the background when the first such call comes (that call, and those until the loop is
# ready, run on the reference).
LOOPS: dict[Primitive, str] = {ew.tanh_p: "tanh"}
_COMPILING = object()  # (``_loop_runner``: the loop is not ready yet)


def _loop_runner(p: Primitive, avals: list[ShapedArray]) -> Any:
    """The runner of a ``LOOPS`` call of one float32 operand on its native loop, ``_COMPILING``
    while the loop compiles, or None where the reference runs (other dtypes, the reference
    backend, a loop that failed to compile)."""
    if len(avals) != 1 or avals[0].dtype != np.float32 or not native_now():
        return None
    job = background.submit(f"eager: compile the float32 {LOOPS[p]} loop", CpuBackend.elementwise_loop, LOOPS[p],
                            np.float32)
    if not job.done:
        return _COMPILING
    if job.result is None:
        return None
    loop, out, new = job.result, abstract_eval_rules[p](*avals), Array.__new__

    def run(values: Sequence[np.ndarray], params: dict) -> Array:
        result = new(Array)
        result._value, result.aval = loop(values[0]), out
        return result
    return run


def native_now() -> bool:
    return not (config.debug_nans or config.debug_infs) and not isinstance(registry.get(), ReferenceBackend)


def _seen(key: Any, refs: list) -> tuple[_Program, Any]:
    """The cache's record of the program ``key`` (made now if new), counted as seen once more, and
    its executable (None if not compiled yet)."""
    with _lock:
        program = _programs.get(key)
        if program is None:
            program = _programs[key] = _Program(refs)
            while len(_programs) > max(int(config.jit_cache_max_entries), 1):
                _kernels.pop(_programs.popitem(last=False)[0], None)
        else:
            _programs.move_to_end(key)
        program.sightings += 1
        return program, program.executable


def _on_reference(p: Primitive, args: Sequence[Any], params: dict, avals: list[ShapedArray], why: str) -> Any:
    _counts["reference"] += 1
    if config.log_compiles:
        logger.warning("ember: ran eager %s for (%s) on the reference interpreter (%s); it compiles if it comes "
                       "again", p.name, _format(avals), why)
    return apply_primitive(p, args, params)


def _run_program(p: Primitive, args: Sequence[Any], params: dict) -> list:
    avals = [aval_of_value(a) for a in args]
    closed = _one_equation(p, avals, params)
    key, refs = compile_cache.fingerprint(closed)
    program, executable = _seen(key, refs)
    if executable is None:
        if program.sightings == 1 and tiers.reference_ms(closed.jaxpr) < tiers.compile_ms(closed.jaxpr):
            return _on_reference(p, args, params, avals, "cheaper than compiling it")  # a one-off
        executable = program.executable = _compile(p, closed, avals, again=program.sightings > 1)
    _counts["native"] += 1
    return executable(*args)


# --- single operations on large arrays ---------------------------------------------------------------
# Operations whose native code beats NumPy's on large arrays: transcendental functions (vectorized
# and split over threads), reductions (vectorized, in several partial sums), matrix products, and
# selects and IEEE arithmetic (split over threads; the same bits as NumPy's).
KERNELS: frozenset[Primitive] = frozenset({
    ew.exp_p, ew.exp2_p, ew.expm1_p, ew.log_p, ew.log1p_p, ew.tanh_p, ew.logistic_p, ew.sin_p, ew.cos_p,
    ew.tan_p, ew.sinh_p, ew.cosh_p, ew.asin_p, ew.acos_p, ew.atan_p, ew.asinh_p, ew.acosh_p, ew.atanh_p,
    ew.atan2_p, ew.pow_p, ew.erf_p, ew.erfc_p, ew.erf_inv_p, ew.cbrt_p,
    ew.select_n_p, ew.add_p, ew.sub_p, ew.mul_p, ew.div_p, ew.max_p, ew.min_p, ew.neg_p, ew.abs_p,
    ew.gt_p, ew.ge_p, ew.lt_p, ew.le_p, ew.eq_p, ew.ne_p,
    *REDUCTIONS, dot_general_p})
# From this many elements of an operand (of each operand, for a product) an eager operation that
# comes again runs native code; a first call, and calls on smaller arrays, run on the reference.
KERNEL_MIN_ELEMENTS = 1 << 16
PRODUCT_MIN_ELEMENTS = 1 << 14


def _large(p: Primitive, args: Sequence[Any]) -> bool:
    if p is dot_general_p:
        return min(getattr(a, "size", 0) for a in args) >= PRODUCT_MIN_ELEMENTS
    for a in args:  # (asked on every eager call of these: an Array's NumPy value says its size fastest)
        if getattr(getattr(a, "_value", a), "size", 0) >= KERNEL_MIN_ELEMENTS:
            return True
    return False


def _run_kernel(p: Primitive, args: Sequence[Any], params: dict) -> Any:
    """A single operation on large arrays: on the reference the first time its signature comes (a
    one-off pays no compile), then compiled (tiered when tiering is on) and cached by the
    primitive, the argument types and the params."""
    avals = [aval_of_value(a) for a in args]
    key = (p, *avals, *params.items())
    try:
        program, executable = _seen(key, [])
    except TypeError:  # a param that is not hashable: the reference
        return apply_primitive(p, args, params)
    if executable is None:
        if program.sightings == 1:
            return _on_reference(p, args, params, avals, "its first call")
        executable = program.executable = _compile(p, _one_equation(p, avals, params), avals, again=True)
    _kernels[key] = executable
    _counts["native"] += 1
    outs = executable(*args)
    return outs if p.multiple_results else outs[0]


def _one_equation(p: Primitive, avals: list[ShapedArray], params: dict) -> ClosedJaxpr:
    """The program ``outs = p[params](*args)`` for arguments of the types ``avals``."""
    outs = abstract_eval_rules[p](*avals, **params)
    invars = [Var(a) for a in avals]
    outvars = [Var(a) for a in (outs if p.multiple_results else [outs])]
    return ClosedJaxpr(Jaxpr([], invars, [Eqn(p, invars, params, outvars)], outvars), [])


def _compile(p: Primitive, closed: ClosedJaxpr, avals: list[ShapedArray], again: bool) -> Executable:
    """The executable of an eager program. A program that comes again although it runs faster on
    the reference interpreter than it compiles is tiered: its calls run there until the native
    code, compiled in the background, is ready."""
    name = f"eager_{p.name}"
    start = time.perf_counter()

    def build(closed: ClosedJaxpr, name: str, donated: frozenset[int]) -> Executable:
        if again and config.tiered_compilation and isinstance(registry.get(), CpuBackend) \
                and tiers.reference_ms(closed.jaxpr) < tiers.compile_ms(closed.jaxpr):
            return tiers.TieredExecutable(closed, name)
        return tiers.compile_jaxpr(closed, name, donated)

    executable, built = compile_cache.compile_shared(closed, name, build)
    if built:
        _counts["compiles"] += 1
    if config.log_compiles:
        how = {"tiered": "tiered (its calls run on the reference interpreter until the native code, compiling "
                         "in the background, is ready)", "disk": "loaded from the disk cache",
               "disk program": "loaded whole from the disk cache"}
        what = how.get(executable.code, "compiled") if built else "reused the executable of an " \
            "equal program"
        logger.warning("ember: eager %s for (%s): %s in %.1f ms", p.name, _format(avals), what,
                       (time.perf_counter() - start) * 1e3)
    return executable


def _format(avals: Sequence[ShapedArray]) -> str:
    return ", ".join(a.str_short(weak=True) for a in avals)


def cache_info() -> EagerCacheInfo:
    """Counts of the eager programs' calls and compiles since the process started (or ``clear``)."""
    return EagerCacheInfo(_counts["native"], _counts["compiles"], _counts["reference"], len(_programs))


def clear() -> None:
    """Forget every eager program (``ember.clear_caches``) and reset the counts."""
    with _lock:
        _programs.clear()
        _references.clear()
        _kernels.clear()
        _broadcasting.clear()
        for k in _counts:
            _counts[k] = 0


register_cache("eager: programs of control flow and calls run outside jit", clear, lambda: len(_programs))


EvalTrace.apply = staticmethod(apply)
def _forget_signatures(_name: str) -> None:
    _references.clear()
    _kernels.clear()
    _broadcasting.clear()


config.on_update(_forget_signatures)
