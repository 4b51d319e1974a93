"""The IR type checker: every equation's outputs agree with its shape/dtype rule.

Run after tracing when ``config.check_ir`` is set (the test suite sets it) and
after every compiler pass in tests.
"""
from __future__ import annotations

from ember.core.ir import ClosedJaxpr, Jaxpr, Literal, Var, subjaxprs
from ember.core.primitive import abstract_eval_rules
from ember.errors import JaxprTypeError


class IRTypeError(JaxprTypeError):
    """The IR is malformed: a variable is unbound or a type disagrees with its rule."""


def check_jaxpr(jaxpr: Jaxpr | ClosedJaxpr) -> None:
    if isinstance(jaxpr, ClosedJaxpr):
        if len(jaxpr.consts) != len(jaxpr.jaxpr.constvars):
            raise IRTypeError("ClosedJaxpr has a different number of consts and constvars")
        jaxpr = jaxpr.jaxpr
    defined: set[int] = set()

    def bind(v: Var, where: str) -> None:
        if not isinstance(v, Var):
            raise IRTypeError(f"{where}: binder {v!r} is not a Var")
        if id(v) in defined:
            raise IRTypeError(f"{where}: variable {v!r} is bound twice (not SSA)")
        defined.add(id(v))

    def read(a, where: str) -> None:
        if isinstance(a, Literal):
            if a.aval.shape != ():
                raise IRTypeError(f"{where}: literal {a!r} is not a scalar")
        elif id(a) not in defined:
            raise IRTypeError(f"{where}: variable {a!r} is used before it is defined")

    for v in jaxpr.constvars:
        bind(v, "constvars")
    for v in jaxpr.invars:
        bind(v, "invars")
    for i, eqn in enumerate(jaxpr.eqns):
        where = f"equation {i} ({eqn.primitive.name})"
        for a in eqn.invars:
            read(a, where)
        for sub in subjaxprs(eqn.params):
            check_jaxpr(sub)
        rule = abstract_eval_rules.get(eqn.primitive)
        if rule is None:
            raise IRTypeError(f"{where}: primitive has no shape/dtype rule")
        out = rule(*(a.aval for a in eqn.invars), **eqn.params)
        expected = out if eqn.primitive.multiple_results else [out]
        got = [v.aval for v in eqn.outvars]
        if list(expected) != got:
            raise IRTypeError(f"{where}: outputs typed {got}, but the rule gives {list(expected)}")
        for v in eqn.outvars:
            bind(v, where)
    for a in jaxpr.outvars:
        read(a, "outvars")
