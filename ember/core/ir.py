"""The IR: a small, statically typed SSA program and its pretty-printer.

``Jaxpr(constvars, invars, eqns, outvars)``; each ``Eqn`` applies a primitive
to variables and literals, with metadata in keyword ``params``. The printed
form matches JAX's, which users already know how to read::

    { lambda ; a:f32[3]. let b:f32[3] = exp a; c:f32[3] = mul b 2.0:f32[] in (c,) }
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from ember.core.avals import ShapedArray
from ember.core.primitive import EFFECTFUL, Primitive


class Var:
    """An SSA variable. Identity is the object; names are assigned when printing."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray) -> None:
        self.aval = aval

    def __repr__(self) -> str:
        return f"Var({self.aval.str_short()})"


class Literal:
    """A scalar constant written inline in the program (``2.0:f32[]``)."""

    __slots__ = ("val", "aval")

    def __init__(self, val: Any, aval: ShapedArray) -> None:
        self.val = val
        self.aval = aval

    def __repr__(self) -> str:
        return f"Literal({_format_literal(self)})"


Atom = Var | Literal


class Eqn:
    """``outvars = primitive[params] invars``."""

    __slots__ = ("primitive", "invars", "params", "outvars")

    def __init__(self, primitive: Primitive, invars: list, params: dict, outvars: list[Var]) -> None:
        self.primitive = primitive
        self.invars = invars
        self.params = params
        self.outvars = outvars

    def replace(self, **changes: Any) -> "Eqn":
        fields = {k: getattr(self, k) for k in self.__slots__}
        fields.update(changes)
        return Eqn(**fields)

    def __repr__(self) -> str:
        return pp_eqn(self, _Namer(), 0)


class Jaxpr:
    """A typed SSA program. ``constvars`` are bound to arrays the program closes over."""

    __slots__ = ("constvars", "invars", "eqns", "outvars")

    def __init__(self, constvars: list[Var], invars: list[Var], eqns: list[Eqn], outvars: list) -> None:
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.eqns = list(eqns)
        self.outvars = list(outvars)

    @property
    def in_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.invars]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.outvars]

    def __str__(self) -> str:
        return pp_jaxpr(self, _Namer(), 0)

    __repr__ = __str__


class ClosedJaxpr:
    """A Jaxpr together with the values of its constvars."""

    __slots__ = ("jaxpr", "consts")

    def __init__(self, jaxpr: Jaxpr, consts: list) -> None:
        assert len(jaxpr.constvars) == len(consts)
        self.jaxpr = jaxpr
        self.consts = list(consts)

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)

    def __str__(self) -> str:
        return str(self.jaxpr)

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle) -> None:  # IPython
        p.text(str(self))


def subjaxprs(params: dict) -> Iterator[Jaxpr]:
    """Every sub-program held in an equation's params (for checkers and passes)."""
    for v in params.values():
        for item in v if isinstance(v, tuple) else (v,):
            if isinstance(item, ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, Jaxpr):
                yield item


def count_eqns(jaxpr: Jaxpr) -> int:
    """Equations, those of sub-programs included (what code generation walks)."""
    total, stack = 0, [jaxpr]
    while stack:
        j = stack.pop()
        total += len(j.eqns)
        for eqn in j.eqns:
            stack.extend(subjaxprs(eqn.params))
    return total


def is_effectful(eqn: Eqn) -> bool:
    """Whether the equation, or any equation in its sub-programs, has an effect."""
    return eqn.primitive in EFFECTFUL or any(
        is_effectful(inner) for sub in subjaxprs(eqn.params) for inner in sub.eqns)


# --- pretty-printing -----------------------------------------------------------

def _encode_name(n: int) -> str:
    """0 -> a, 25 -> z, 26 -> ba, ... (JAX's variable naming)."""
    s = ""
    while True:
        s = chr(ord("a") + n % 26) + s
        n //= 26
        if n == 0:
            return s


class _Namer:
    def __init__(self) -> None:
        self.names: dict[int, str] = {}

    def __call__(self, v: Var) -> str:
        key = id(v)
        if key not in self.names:
            self.names[key] = _encode_name(len(self.names))
        return self.names[key]


def _format_literal(lit: Literal) -> str:
    v = np.asarray(lit.val)
    if v.dtype == np.bool_:
        s = str(bool(v))
    elif v.dtype.kind in "iu":
        s = str(int(v))
    else:
        s = repr(float(v))
    return f"{s}:{lit.aval.str_short()}"


def _pp_atom(a, namer: _Namer) -> str:
    return _format_literal(a) if isinstance(a, Literal) else namer(a)


def _pp_binder(v: Var, namer: _Namer) -> str:
    return f"{namer(v)}:{v.aval.str_short()}"


def _pp_param(v: Any, namer: _Namer, indent: int) -> str:
    if isinstance(v, ClosedJaxpr):
        return pp_jaxpr(v.jaxpr, namer, indent + 4)
    if isinstance(v, Jaxpr):
        return pp_jaxpr(v, namer, indent + 4)
    if isinstance(v, tuple) and v and all(isinstance(x, (ClosedJaxpr, Jaxpr)) for x in v):
        return "(\n" + "".join(" " * (indent + 4) + _pp_param(x, namer, indent) + "\n" for x in v) + " " * indent + ")"
    if isinstance(v, np.dtype):
        return str(v) if v.name != "bfloat16" else "bfloat16"
    if callable(v) and hasattr(v, "__name__"):
        return v.__name__
    return str(v)


def pp_eqn(eqn: Eqn, namer: _Namer, indent: int) -> str:
    ins = " ".join(_pp_atom(a, namer) for a in eqn.invars)
    params = " ".join(f"{k}={_pp_param(v, namer, indent)}" for k, v in eqn.params.items())
    head = eqn.primitive.name + (f"[{params}]" if params else "")
    outs = " ".join(_pp_binder(v, namer) for v in eqn.outvars)
    return f"{outs} = {head} {ins}".rstrip() if outs else f"{head} {ins}".rstrip()  # (JAX: no '=' without outputs)


def pp_jaxpr(jaxpr: Jaxpr, namer: _Namer, indent: int) -> str:
    consts = " ".join(_pp_binder(v, namer) for v in jaxpr.constvars)
    ins = " ".join(_pp_binder(v, namer) for v in jaxpr.invars)
    pad = " " * (indent + 4)
    body = "".join(f"\n{pad}{pp_eqn(e, namer, indent + 4)}" for e in jaxpr.eqns)
    outs = ", ".join(_pp_atom(a, namer) for a in jaxpr.outvars)
    outs = f"({outs},)" if len(jaxpr.outvars) == 1 else f"({outs})"
    if not jaxpr.eqns:
        return f"{{ lambda {consts}; {ins}. let  in {outs} }}"
    return f"{{ lambda {consts}; {ins}. let{body}\n{' ' * (indent + 2)}in {outs} }}"
