"""Eager composite functions replayed: traced once per signature, then run equation by equation on the
eager engine, without the Python that built them.

A library function called eagerly (a sampler of ``ember.random`` is ~170 operations, most of them
Threefry's integer rounds) spends most of its time in the layers above each primitive: argument
checks, dtype promotion, scalar conversion, broadcasting, ``bind``. Those decide only the
program's shape, which is the same on every call with arguments of the same types. ``replayed``
keeps, for each signature (the argument types, the tree structure and the static values), the
program traced once, and runs it by handing each equation to the eager engine
(``EvalTrace.apply``, where ``runtime.eager`` decides reference or native code for each
operation). Each operation sees the same primitive, operand types and params as in an op-by-op
call, so a replay computes the same bits as the function run directly.

A signature's first call runs the function directly (a one-off call, such as an initializer's for
each parameter shape, pays no trace); the second traces it and replays. Functions that do not
trace (a value-dependent Python branch, outputs other than arrays) run directly from then on.

Once a replay's calls have taken as long as compiling it is estimated to take (``PAYBACK``, the
ski-rental rule: a hot loop gets there, a test calling a shape a few times
does not), native code takes over, compiled in the background and shared with equal programs. How
much of the program it takes is the function's choice:

- ``exact=True`` (the samplers, ``split``, ``fold_in``): each run of *exact* equations (integer and
  bit operations, data movement, the IEEE operations that round once: ``_exact``) becomes one
  native executable. Native code computes those with the reference's bits, so the values do not
  change when it takes over (a sampler's Threefry rounds and its polynomial become two native calls
  around one ``log1p``). Transcendental functions stay eager operations: their native code rounds
  apart from NumPy's, and a key's draws would change between its calls.
- ``exact=False`` (the ``jnp`` and ``nn`` functions that JAX runs compiled, ``numpy.staging``'s
  ``STAGED`` and ``REPLAYED``, and ``nn.softmax``): the whole program becomes one executable, as
  ``jit`` compiles it, so an eager ``log_softmax`` is one native call, as JAX's is one XLA call. Its
  transcendental functions and reductions then round as the native code does (values equal to
  rounding, as an eager large operation's from its second call, and as a tiered ``jit``'s once
  native).
"""
from __future__ import annotations

import functools
import logging
import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Sequence

import numpy as np

from ember import dtypes, errors
from ember.backends import registry
from ember.backends.cpu_backend import CpuBackend
from ember.backends.protocols import DECLINED, Executable
from ember.config import config
from ember.core.array import Array
from ember.core.caches import register_cache
from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr, Literal, Var, count_eqns
from ember.core.primitive import Primitive
from ember.core.staging import DebugInfo, trace_to_jaxpr
from ember.core.trace import EvalTrace, Tracer, current_trace
from ember.lax import elementwise as ew, shapes as sh
from ember.runtime import compile_cache, tiers
from ember.runtime.eager import native_now
from ember.tree_util import flatten_for_trace, tree_unflatten

logger = logging.getLogger("ember")

# Signatures kept per process (all replayed functions together), in order of recent use.
PROGRAMS_KEPT = 1024

_DIRECT = object()  # a signature that does not trace: it runs directly
_programs: OrderedDict[tuple, Any] = OrderedDict()
_seen_once: OrderedDict[tuple, bool] = OrderedDict()  # signatures called once: their next call traces
_lock = threading.Lock()
_counts = {"replays": 0, "traces": 0}
_generation = 0  # (counts ``clear_replays``)


class _NotReplayable(Exception):
    pass


class _Tracing(threading.local):
    active = False


_tracing = _Tracing()


def tracing_for_replay() -> bool:
    """Whether this thread is tracing a function for a replay: library functions that stage
    themselves as ``jit`` calls under a trace (``numpy.staging``) run inline then, as they do
    eagerly, so that the program holds the operations the direct call runs (a ``jit`` equation
    would run compiled, with native math's bits)."""
    return _tracing.active


# --- which equations native code computes with the reference's bits ---------------------------------
# Integer and bit operations (integer division and remainder included), moves of data, and the IEEE
# operations that round once (add, multiply, divide, square root, conversions between float widths)
# compute the same bits in NumPy and in the native code (whose simplifications are exact:
# ``compiler.simplify``); transcendental functions
# (log1p, exp, erf_inv ...), integer powers, reductions and products do not. Half types and complex
# numbers are left out (the reference rounds some of their operations through float32).
_EXACT_ANY_TYPE: frozenset[Primitive] = frozenset({
    ew.add_p, ew.sub_p, ew.mul_p, ew.neg_p, ew.abs_p, ew.max_p, ew.min_p, ew.select_n_p, ew.clamp_p,
    ew.eq_p, ew.ne_p, ew.lt_p, ew.le_p, ew.gt_p, ew.ge_p, ew.and_p, ew.or_p, ew.xor_p, ew.not_p,
    ew.shift_left_p, ew.shift_right_logical_p, ew.shift_right_arithmetic_p, ew.population_count_p,
    ew.bitcast_convert_type_p,
    sh.broadcast_in_dim_p, sh.reshape_p, sh.squeeze_p, sh.transpose_p, sh.rev_p, sh.slice_p,
    sh.concatenate_p, sh.iota_p})
_EXACT_FLOAT: frozenset[Primitive] = frozenset({ew.sqrt_p, ew.floor_p, ew.ceil_p})
_EXACT_DTYPES = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float32, np.float64))
# Segments of fewer equations stay steps of the replay (a native call costs about what a few
# reference operations on small arrays do).
MIN_SEGMENT_EQNS = 4
# A replay turns its exact runs of equations into native code once its calls have taken this many
# times the estimated compile time of its program (``tiers.compile_ms`` times ``WARM_COMPILE_SHARE``).
PAYBACK = 1.0
# The cost model's compile estimate is of a program compiled cold (``benchmarks/compile_time.py``'s,
# each in a process with no kernel compiled); a replayed function's program, small and compiled in a
# running process whose kernels it mostly shares, takes about a fifth of it: 16 ``jnp`` / ``nn``
# functions of an 8x10 float32 array, compiled whole one after another, took 147 ms in all against
# 700 estimated (5-26 ms each; the matrix product and ``log_softmax`` the longest).
WARM_COMPILE_SHARE = 0.25


def _exact(eqn: Eqn) -> bool:
    p = eqn.primitive
    avals = [a.aval for a in (*eqn.invars, *eqn.outvars)]
    if not all(a.dtype in _EXACT_DTYPES for a in avals):
        return False
    if p in _EXACT_ANY_TYPE:
        return True
    if p is ew.convert_element_type_p:  # (float to integer is defined by the reference's rules)
        return not (dtypes.is_floating(avals[0].dtype) and not dtypes.is_floating(avals[-1].dtype))
    if p is ew.div_p:  # (integers: C division, with XLA's x / 0 == -1 and MIN / -1 == MIN on both sides)
        return True
    if p is ew.rem_p:  # (x % 0 == x on both sides; a float remainder is left to the reference)
        return not dtypes.is_floating(avals[-1].dtype)
    return p in _EXACT_FLOAT


class _Replay:
    """A traced program as a list of steps over one list of values (``env``): the arguments, then
    the constants and literals (fixed), then each equation's results. A step is an equation
    (``(primitive, params, ins, outs)``), handed to the eager engine, or once the calls have paid
    for it (``PAYBACK``) a run of exact equations compiled into one executable
    (``(executable, None, ins, outs)``); ``eqn_steps`` keep the equations, for calls that must run
    each on the reference (the debug checks, the reference backend)."""

    __slots__ = ("closed", "n_args", "plan", "eqn_plan", "out_tree", "spent", "compile_s", "single_out",
                 "exact", "whole", "fast", "asks_fast", "_slot")

    def __init__(self, closed: ClosedJaxpr, out_tree: Any, exact: bool) -> None:
        jaxpr = closed.jaxpr
        self.closed, self.n_args, self.exact = closed, len(jaxpr.invars), exact
        self.whole: Executable | None = None  # the program as one executable, once compiled whole
        # The whole executable's fast runner (``Executable.fast_runner``: on the CPU, one call of the
        # native dispatcher, as jit's hit path makes), once it has one; ``asks_fast`` until it is
        # known to get none. (The replay's key holds the config's codegen flags, the backend and the
        # debug checks among them: what ``native_now`` reads cannot change under it.)
        self.fast: Callable[[Any], Any] | None = None  # (takes the list of Arrays as the tuple it is typed for)
        self.asks_fast = True
        self.spent = 0.0
        # (None once compiled, or for a program too small for a segment: a whole program compiles
        # whatever its size, since one operation's reference rule can be many NumPy calls)
        self.compile_s: float | None = tiers.compile_ms(jaxpr) * WARM_COMPILE_SHARE / 1e3 \
            if not exact or count_eqns(jaxpr) >= MIN_SEGMENT_EQNS else None
        slot = {id(v): i for i, v in enumerate(jaxpr.invars)}
        template: list[Any] = [None] * self.n_args
        for v, c in zip(jaxpr.constvars, closed.consts):
            slot[id(v)] = len(template)
            template.append(c if isinstance(c, Array) else Array(c, v.aval))
        for a in (*(a for eqn in jaxpr.eqns for a in eqn.invars), *jaxpr.outvars):
            if isinstance(a, Literal):  # (an Array of the literal's type, as the eager call made it)
                slot[id(a)] = len(template)
                template.append(Array(a.val, a.aval))
        steps: list[tuple[Any, Any, list[int], Any]] = []
        n = len(template)
        for eqn in jaxpr.eqns:
            ins = [slot[id(a)] for a in eqn.invars]
            outs = list(range(n, n + len(eqn.outvars)))
            for v, o in zip(eqn.outvars, outs):
                slot[id(v)] = o
            n += len(outs)
            steps.append((eqn.primitive, eqn.params, ins, outs if eqn.primitive.multiple_results else outs[0]))
        template.extend([None] * (n - len(template)))
        self.out_tree, self._slot = out_tree, slot
        # (the steps, the env they run on, the slots of the outputs): read once by a call, so a
        # thread that compiles the segments meanwhile changes all three at once
        self.plan = self.eqn_plan = (steps, template, [slot[id(a)] for a in jaxpr.outvars])
        self.single_out = out_tree.num_nodes == 1  # (one Array: no tree to rebuild)

    @property
    def steps(self) -> list[tuple]:
        return self.plan[0]

    @property
    def eqn_steps(self) -> list[tuple]:
        return self.eqn_plan[0]

    def __call__(self, args: list[Array]) -> Any:
        fast = self.fast
        if fast is not None:
            result = fast(args)
            if result is not DECLINED:
                return result
        whole = self.whole
        if whole is not None and native_now():
            if self.asks_fast:
                self.fast = whole.fast_runner(self.out_tree)
                self.asks_fast = self.fast is None and whole.fast_runner_pending
                if not self.asks_fast and self.fast is None and whole.interpreted:
                    # (its native program runs the reference's rules from Python, a sort's: the
                    # replay's own steps do that with less around them)
                    self.whole = None
            return tree_unflatten(self.out_tree, whole(*args))
        plan, start = self.plan, 0.0
        if self.compile_s is not None:  # (not compiled yet: the calls count their time until they pay)
            if self.spent >= PAYBACK * self.compile_s and native_now():
                self.compile_s = None
                plan = self.plan = self._compile_segments()
                if self.whole is not None:
                    return tree_unflatten(self.out_tree, self.whole(*args))
            else:
                start = time.perf_counter()
        elif plan is not self.eqn_plan and not native_now():
            plan = self.eqn_plan
        steps, template, outs_at = plan
        env = template.copy()
        env[:self.n_args] = args
        apply = EvalTrace.apply
        for p, params, ins, outs in steps:
            if params is None:  # (a native segment)
                for o, r in zip(outs, p(*[env[i] for i in ins])):
                    env[o] = r
                continue
            result = apply(p, [env[i] for i in ins], params)
            if type(outs) is int:
                env[outs] = result
            else:
                for o, r in zip(outs, result):
                    env[o] = r
        if start:
            self.spent += time.perf_counter() - start
        if self.single_out:
            return env[outs_at[0]]
        return tree_unflatten(self.out_tree, [env[i] for i in outs_at])

    def _compile_segments(self) -> tuple[list[tuple], list[Any], list[int]]:
        """The steps, with each run of at least ``MIN_SEGMENT_EQNS`` exact equations as one executable
        (shared with equal programs, tiered: both tiers compute the reference's bits, so calls give
        the same values before and after); or, where the function is not ``exact``, the eager steps
        kept for the debug checks, with the whole program compiled as ``self.whole``."""
        if not self.exact:  # (the whole program, as jit compiles it)
            self.whole = _compiled(self.closed)
            if self.whole is not None:
                return self.eqn_plan
        jaxpr, slot = self.closed.jaxpr, self._slot
        # Where each variable is read last: by an equation (its index) or by the program's outputs.
        last_read: dict[int, int] = {}
        for i, eqn in enumerate(jaxpr.eqns):
            for a in eqn.invars:
                if isinstance(a, Var):
                    last_read[id(a)] = i
        for a in jaxpr.outvars:
            if isinstance(a, Var):
                last_read[id(a)] = len(jaxpr.eqns)
        steps: list[tuple] = []
        run: list[int] = []

        def close_run() -> None:
            segment = self._segment([jaxpr.eqns[i] for i in run], run[-1], last_read, slot) \
                if len(run) >= MIN_SEGMENT_EQNS else None
            steps.extend([segment] if segment is not None else [self.eqn_steps[i] for i in run])
            run.clear()

        for i, eqn in enumerate(jaxpr.eqns):
            if not self.exact or _exact(eqn):
                run.append(i)
                continue
            if run:
                close_run()
            steps.append(self.eqn_steps[i])
        if run:
            close_run()
        return self._compacted(steps)

    def _compacted(self, steps: list[tuple]) -> tuple[list[tuple], list[Any], list[int]]:
        """The plan of ``steps`` renumbered over the slots they use, the arguments first (a call
        copies its env: a sampler's program has ~250 slots, its compiled steps use a few)."""
        used = list(range(self.n_args))
        renumbered = {i: i for i in used}

        def at(i: int) -> int:
            j = renumbered.get(i)
            if j is None:
                j = renumbered[i] = len(used)
                used.append(i)
            return j

        _, template, outs_at = self.eqn_plan
        renumbered_steps = [(p, params, [at(i) for i in ins], at(outs) if type(outs) is int else [at(o) for o in outs])
                            for p, params, ins, outs in steps]
        renumbered_outs = [at(i) for i in outs_at]
        return renumbered_steps, [template[i] for i in used], renumbered_outs

    def _segment(self, eqns: list[Eqn], last: int, last_read: dict[int, int], slot: dict[int, int]) -> tuple | None:
        defined = {id(v) for eqn in eqns for v in eqn.outvars}
        invars: dict[int, Var] = {}
        for eqn in eqns:
            for a in eqn.invars:
                if isinstance(a, Var) and id(a) not in defined:
                    invars.setdefault(id(a), a)
        outvars = [v for eqn in eqns for v in eqn.outvars if last_read.get(id(v), -1) > last]
        if not outvars:
            return None
        executable = _compiled(ClosedJaxpr(Jaxpr([], list(invars.values()), eqns, outvars), []))
        if executable is None:
            return None
        return (executable, None, [slot[i] for i in invars], [slot[id(v)] for v in outvars])


def _compiled(closed: ClosedJaxpr) -> Executable | None:
    """The shared executable of a segment, or None where it does not compile (its equations go on
    running one by one)."""
    try:
        return compile_cache.compile_shared(closed, "eager_replay", _compile)[0]
    except Exception as e:
        logger.debug("eager replay: a segment of %d equations did not compile (%s: %s)", len(closed.jaxpr.eqns),
                     type(e).__name__, e)
        return None


def _compile(closed: ClosedJaxpr, name: str, donated: frozenset[int]) -> Executable:
    """A segment's executable: tiered whatever its size where tiering is on (the call that brings a
    replay to native code does not wait for a compile; the quick tier computes the reference's
    values)."""
    if config.tiered_compilation and isinstance(registry.get(), CpuBackend):
        return tiers.TieredExecutable(closed, name)
    return tiers.compile_jaxpr(closed, name, donated)


def replayed(fun: Callable | None = None, *, exact: bool = True) -> Any:
    """``fun`` (a pure function of arrays and hashable static values, returning arrays) whose eager
    calls after a signature's first replay its traced program (see the module docstring). Calls
    under a trace, with an unhashable argument (a NumPy array) or under ``disable_jit`` (which asks
    for the Python to run, to step through it) run ``fun`` directly.

    ``exact=True`` (a sampler: a key's draws are its bits) compiles only the exact runs of
    equations; ``exact=False`` (a ``jnp`` function JAX jits) lets the whole program become native
    code once it pays, whose transcendental functions and reductions round as ``jit``'s do: as an
    eager large operation does from its second call, its values may change in the last bits when
    the native code takes over."""
    if fun is None:
        return lambda f: replayed(f, exact=exact)

    # The last replayed call of positional Arrays and plain values: (the number of arguments, the
    # config's codegen key, ``_generation``, the signature's leaves, the replay). A loop calling the
    # function with one signature finds its replay here by comparing the leaves (the same types are
    # mostly the same objects), without hashing the key (0.7-1.2 us of a 6 us ``jnp.take``).
    last: list[Any] = [None]

    @functools.wraps(fun)
    def call(*args: Any, **kwargs: Any) -> Any:
        if type(current_trace()) is not EvalTrace or config.disable_jit:  # (disable_jit: the code runs, for pdb)
            return fun(*args, **kwargs)
        leaves = [*args, *kwargs.values()] if kwargs else args
        arrays, statics = _signature(leaves, plain_only=True)
        if statics is not None:  # (Arrays and plain values: no tree to flatten)
            if not kwargs:
                recent = last[0]
                if recent is not None and recent[0] == len(args) and recent[1] is config.codegen_key() \
                        and recent[2] == _generation and recent[3] == statics:
                    _counts["replays"] += 1
                    return recent[4](arrays)
            tree: Any = (_PLAIN_CALL, len(args), *kwargs)
        else:
            # Other arguments are flattened as the transformations flatten them: a typed key array
            # is a node over its data (an argument of the program), its implementation static.
            leaves, tree = flatten_for_trace((args, kwargs))
            arrays, statics = _signature(leaves, plain_only=False)
        try:
            key = (fun, tree, config.codegen_key(), *statics)
            entry = _programs.get(key)
        except TypeError:  # (an unhashable argument: a list, a NumPy array)
            return fun(*args, **kwargs)
        if entry is None:
            if _seen_once.pop(key, None) is None:  # (a first call: noted apart, so that a loop of
                with _lock:                         # new static values does not push programs out)
                    _seen_once[key] = True
                    if len(_seen_once) > PROGRAMS_KEPT:
                        _seen_once.popitem(last=False)
                return fun(*args, **kwargs)
            entry = _trace(fun, leaves, tree, arrays, exact)
            _remember(key, entry)
            if entry is _DIRECT:
                return fun(*args, **kwargs)
        elif entry is _DIRECT:
            return fun(*args, **kwargs)
        else:
            try:
                _programs.move_to_end(key)
            except KeyError:  # (dropped meanwhile by another thread)
                pass
        if not kwargs and type(tree) is tuple and tree[0] is _PLAIN_CALL:
            last[0] = (len(args), key[2], _generation, statics, entry)
        _counts["replays"] += 1
        return entry(arrays)
    call.eager_replay = True  # type: ignore[attr-defined]  # (``numpy.array_methods.use_staged`` asks)
    return call


_PLAIN_CALL = object()  # (a call's tree: its positional count and keyword names, when all are plain)
_PLAIN = frozenset({int, float, bool, str, type(None), type, np.dtype})


def _signature(leaves: Any, plain_only: bool) -> tuple[list[Array], Any]:
    """The Arrays among ``leaves`` and the signature's leaves (an Array's type, a static value's
    ``_static_key``). With ``plain_only``, ``statics`` is None unless each leaf is an Array, a plain
    hashable value or a tuple of ints (a shape or axes): the commonest call, whose arguments need
    no tree flatten."""
    arrays, statics = [], []
    for x in leaves:
        t = type(x)
        if t is Array:
            arrays.append(x)
            statics.append(x.aval)
        elif plain_only and not (t in _PLAIN or (t is tuple and all(type(d) is int for d in x))
                                 or isinstance(x, np.dtype)):
            return arrays, None
        else:
            statics.append(_static_key(x))
    return arrays, statics


def _static_key(x: Any) -> Any:
    """A static argument as part of a signature: its type too (``1``, ``1.0`` and ``True`` are equal
    keys of a dict, but not the same argument), and a float's bits (``-0.0 == 0.0``)."""
    if type(x) is float:
        return float, x.hex()
    if type(x) is complex:
        return complex, x.real.hex(), x.imag.hex()
    if isinstance(x, np.generic):
        return type(x), x.tobytes()
    return type(x), x


def _remember(key: tuple, entry: Any) -> None:
    with _lock:
        _programs[key] = entry
        if len(_programs) > PROGRAMS_KEPT:
            _programs.popitem(last=False)


def _trace(fun: Callable, leaves: Sequence[Any], tree: Any, arrays: list[Array], exact: bool) -> Any:
    """The replay of ``fun`` on arguments of these types, or ``_DIRECT`` where it does not trace."""
    array_slots = [i for i, x in enumerate(leaves) if type(x) is Array]
    out_trees: list[Any] = []

    def flat(*tracers: Any) -> list[Any]:
        filled = list(leaves)
        for i, t in zip(array_slots, tracers):
            filled[i] = t
        if type(tree) is tuple and tree[0] is _PLAIN_CALL:
            n, names = tree[1], tree[2:]
            args, kwargs = tuple(filled[:n]), dict(zip(names, filled[n:]))
        else:
            args, kwargs = tree_unflatten(tree, filled)
        outs, out_tree = flatten_for_trace(fun(*args, **kwargs))
        if not all(isinstance(o, Tracer) for o in outs):
            raise _NotReplayable  # (an output that is not an array of the program: a constant, a Python value)
        out_trees.append(out_tree)
        return outs

    previous, _tracing.active = _tracing.active, True
    try:
        closed = trace_to_jaxpr(flat, [a.aval for a in arrays],
                                DebugInfo("eager replay", errors.function_name(fun, "fun"),
                                          [f"arg{i}" for i in range(len(arrays))], static_hint=False))
    except Exception as e:  # (a Python branch on a value, an output that is not an array, ...)
        # The function runs directly, whatever stopped the trace: the direct call is the definition
        # of what it computes, and raises its own errors.
        logger.debug("eager replay: %s runs directly (%s: %s)", getattr(fun, "__qualname__", fun), type(e).__name__, e)
        return _DIRECT
    finally:
        _tracing.active = previous
    _counts["traces"] += 1
    return _Replay(closed, out_trees[0], exact)


def replay_info() -> dict[str, int]:
    """Eager calls that replayed a traced program, programs traced, and signatures held."""
    return {**_counts, "currsize": len(_programs)}


def clear_replays() -> None:
    """Forget every replayed program (``ember.clear_caches``) and reset the counts."""
    global _generation
    with _lock:
        _generation += 1  # (each replayed function's last call: forgotten too)
        _programs.clear()
        _seen_once.clear()
        for k in _counts:
            _counts[k] = 0


register_cache("eager: replayed programs of composite functions (samplers)", clear_replays, lambda: len(_programs))

