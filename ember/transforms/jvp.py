"""Forward-mode differentiation: the JVP trace and the table of jvp rules.

A ``JVPTrace`` remembers the trace that was current when it was made (its
parent). Its tracers are (primal, tangent) pairs; every other value (arrays,
scalars, tracers of other traces) is a constant with a zero tangent. A rule
computes the primal and tangent outputs with lax functions *in the parent
trace*, so differentiation composes with staging (``jit``), partial evaluation
(``linearize``) and with itself (``grad(grad(f))``) without nesting levels.

``jvp_rules[p](primals, tangents, **params) -> (primal_out, tangent_out)``;
tangents may be symbolic ``Zero``s, and a rule is only called when at least one
of them is not.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Sequence

from ember import errors
from ember.core.array import Array, ensure_array
from ember.core.ir import ClosedJaxpr
from ember.core.primitive import Primitive, RuleTable
from ember.core.trace import Trace, Tracer, TraceTag, current_trace, set_current_trace, unexpected_tracer_error
from ember.lax.base import aval
from ember.transforms.programs import eval_closed_by_binding, merge_by, select_by, trace_program
from ember.transforms.tangents import (
    Zero,
    add_tangents,
    broadcast_to_shape,
    instantiate,
    is_differentiable,
    match_type,
)

jvp_rules: RuleTable = RuleTable("jvp_rules")


class JVPTracer(Tracer):
    """A value being differentiated: its primal and its tangent (never a symbolic zero).

    Both are kept as they were given (a Python or NumPy scalar stays one, as in JAX, so that a
    ``custom_jvp`` rule sees the caller's values and ``jvp`` can hand them back unchanged);
    a primitive applied to the tracer receives them as arrays (``JVPTrace.array_pair``)."""

    __slots__ = ("primal", "tangent")

    def __init__(self, trace: "JVPTrace", primal: Any, tangent: Any) -> None:
        super().__init__(trace, aval(primal))
        self.primal = primal
        self.tangent = tangent

    def __repr__(self) -> str:
        """JAX's: ``GradTracer`` under grad, vjp and linearize (whose tangents are being staged, as
        the unknowns of a partial evaluation), ``JVPTracer`` under jvp; values printed as ``str``."""
        if getattr(getattr(self.tangent, "_trace", None), "linearizes", False):
            return f"GradTracer(primal={self.primal!s}, typeof(tangent)={aval(self.tangent).str_short()})"
        return f"JVPTracer(primal={self.primal!s}, tangent={self.tangent!s})"

    # Python control flow on values works when the primal is concrete (eager
    # differentiation), and fails with the parent trace's error when it is traced. float(),
    # complex() and .tolist() refuse, as in JAX: they would drop the derivative of a real value.
    def _concrete_primal(self) -> Any:
        if not self._trace.alive:
            raise unexpected_tracer_error(self)
        return self.primal

    def __bool__(self) -> bool:
        return bool(self._concrete_primal())

    def __int__(self) -> int:
        return int(self._concrete_primal())

    def __index__(self) -> int:
        return operator.index(self._concrete_primal())

    def item(self, *args: Any) -> Any:
        return ensure_array(self._concrete_primal()).item(*args)


class JVPTrace(Trace):
    description = "differentiation (jvp)"
    requires_low = False

    def __init__(self, parent: Trace) -> None:
        self.parent = parent
        self.tag = TraceTag()

    def to_pair(self, x: Any) -> tuple[Any, Any]:
        """(primal, tangent) of any value: constants have a zero tangent."""
        if isinstance(x, JVPTracer) and x._trace is self:
            return x.primal, x.tangent
        if isinstance(x, Tracer) and not x._trace.alive:
            raise unexpected_tracer_error(x)
        return x, Zero(aval(x))

    def array_pair(self, x: Any) -> tuple[Any, Any]:
        """``to_pair``, with a primal or tangent kept as given (a Python scalar) made an array of the
        tracer's type: what primitives and their rules receive."""
        primal, tangent = self.to_pair(x)
        if isinstance(x, JVPTracer) and x._trace is self:
            if not isinstance(primal, (Array, Tracer)):
                primal = ensure_array(primal)
            if not isinstance(tangent, (Array, Tracer)):
                tangent = match_type(ensure_array(tangent), x.aval)
        return primal, tangent

    def new(self, primal: Any, tangent: Any) -> Any:
        """A tracer, or the primal itself when its tangent is zero (nothing to track)."""
        if isinstance(tangent, Zero) or not is_differentiable(aval(primal).dtype):
            return primal
        return JVPTracer(self, primal, tangent)

    def process_primitive(self, primitive: Primitive, args: tuple, params: dict) -> Any:
        primals, tangents = zip(*map(self.array_pair, args)) if args else ((), ())
        with set_current_trace(self.parent):
            if all(isinstance(t, Zero) for t in tangents):
                return primitive.bind(*primals, **params)
            rule = jvp_rules.get(primitive)
            if rule is None:
                raise NotImplementedError(
                    f"Differentiation rule for '{primitive.name}' not implemented: ember cannot compute "
                    f"derivatives through {primitive.name}. Wrap the computation in ember.custom_jvp / "
                    "custom_vjp to give it a derivative, or apply lax.stop_gradient to its inputs if "
                    "they should not be differentiated.")
            primal_out, tangent_out = rule(primals, tangents, **params)
        if primitive.multiple_results:
            return [self.new(p, t) for p, t in zip(primal_out, tangent_out)]
        return self.new(primal_out, tangent_out)

    def concretization_error(self, tracer: Tracer, what: str, error_type: type) -> Exception:
        if not self.alive:
            return unexpected_tracer_error(tracer)
        return error_type(
            f"Attempted {what} of an array of type {tracer.aval.str_short()} that is being differentiated, "
            f"at {errors.user_location()}.\n"
            "Fix: keep the computation in ember operations (jnp / lax), or apply lax.stop_gradient "
            "and convert outside the differentiated function.")


def jvp_flat(fun: Callable[..., Sequence[Any]], primals: Sequence[Any],
             tangents: Sequence[Any]) -> tuple[list, list]:
    """Run ``fun`` (flat inputs -> flat outputs) on (primal, tangent) pairs in the current trace."""
    trace = JVPTrace(current_trace())
    try:
        ins = [trace.new(p, t) for p, t in zip(primals, tangents)]
        with set_current_trace(trace):
            outs = fun(*ins)
        pairs = [trace.to_pair(o) for o in outs]
    finally:
        trace.alive = False
    return [p for p, _ in pairs], [t for _, t in pairs]


def jvp_of(fun: Callable[..., Any]) -> Callable:
    """A jvp rule that differentiates ``fun``, an implementation of a (single-result) primitive
    by other primitives: ``fun(*primals, **params)`` computes the primitive's output."""
    def rule(primals: tuple, tangents: tuple, **params: Any) -> tuple[Any, Any]:
        [out], [out_tangent] = jvp_flat(lambda *xs: [fun(*xs, **params)], primals, tangents)
        return out, out_tangent

    return rule


def jvp_jaxpr(closed: ClosedJaxpr, nonzeros: Sequence[bool],
              instantiate_outputs: Sequence[bool]) -> tuple[ClosedJaxpr, list, list[bool]]:
    """The program ``(primals, nonzero tangents) -> (primal outs, nonzero tangent outs)``.

    Returns it (const-free), its consts and which output tangents it computes:
    those that are not known to be zero, plus the ones ``instantiate_outputs`` asks
    for. Tangent outputs have exactly the types of their primals (loop carries need it).
    """
    in_avals = closed.in_avals
    tangent_avals = select_by(nonzeros, in_avals)
    out_nonzeros: list[list[bool]] = []

    def fun(*args: Any) -> list:
        primals, nonzero_tangents = args[:len(in_avals)], args[len(in_avals):]
        tangents = merge_by(nonzeros, nonzero_tangents, [Zero(a) for a, nz in zip(in_avals, nonzeros) if not nz])
        outs, out_tangents = jvp_flat(lambda *xs: eval_closed_by_binding(closed, *xs), primals, tangents)
        out_tangents = [match_type(instantiate(t) if inst else t, out_aval)
                        for t, inst, out_aval in zip(out_tangents, instantiate_outputs, closed.out_avals)]
        nonzero = [not isinstance(t, Zero) for t in out_tangents]
        out_nonzeros.append(nonzero)
        return list(outs) + select_by(nonzero, out_tangents)

    program, consts = trace_program(fun, list(in_avals) + tangent_avals, "jvp")
    return program, consts, out_nonzeros[0]


# --- rule builders -----------------------------------------------------------------------
def defjvp(p: Primitive, *partials: Callable | None) -> None:
    """Elementwise rule: ``partials[i](g, ans, *primals, **params)`` is the tangent contribution of
    operand ``i`` given its tangent ``g`` (None: operand ``i`` is not differentiable)."""
    def rule(primals: tuple, tangents: tuple, **params: Any) -> tuple[Any, Any]:
        ans = p.bind(*primals, **params)
        shape = aval(ans).shape
        out: Any = Zero(aval(ans))
        for partial, t in zip(partials, tangents):
            if partial is not None and not isinstance(t, Zero):
                out = add_tangents(out, broadcast_to_shape(partial(t, ans, *primals, **params), shape))
        return ans, out

    jvp_rules[p] = rule


def deflinear(p: Primitive, linear_operands: Sequence[int] | None = None) -> None:
    """The primitive is linear in the given operands (all by default); the others are
    parameters such as integer indices (never differentiated), which keep their primal values
    in the tangent computation."""
    def rule(primals: tuple, tangents: tuple, **params: Any) -> tuple[Any, Any]:
        linear = range(len(primals)) if linear_operands is None else linear_operands
        operands = [instantiate(tangents[i]) if i in linear else primals[i] for i in range(len(primals))]
        return p.bind(*primals, **params), p.bind(*operands, **params)

    jvp_rules[p] = rule


def defzero(*ps: Primitive) -> None:
    """Primitives whose outputs do not change under small input changes (comparisons,
    rounding, integer results): their tangents are zero."""
    def rule_for(p: Primitive) -> Callable:
        def rule(primals: tuple, tangents: tuple, **params: Any) -> tuple[Any, Any]:
            ans = p.bind(*primals, **params)
            return ans, ([Zero(aval(a)) for a in ans] if p.multiple_results else Zero(aval(ans)))
        return rule

    for p in ps:
        jvp_rules[p] = rule_for(p)

