"""The IR: a small, statically typed SSA program and its pretty-printer.

``Jaxpr(constvars, invars, eqns, outvars)``; each ``Eqn`` applies a primitive
to variables and literals, with metadata in keyword ``params``. The printed
form matches JAX's, which users already know how to read::

    { lambda ; a:f32[3]. let b:f32[3] = exp a; c:f32[3] = mul b 2.0:f32[] in (c,) }
"""
from __future__ import annotations

import collections
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
        return pp_toplevel(self)

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
        self.count = 0  # (names given; a jit body's aliases of its caller's names take none)
        self.used: list[set[int]] = []  # per program being printed: the variables it reads
        self.shared: dict[int, str] = {}  # sub-programs printed once, before the program, by name

    def binder(self, v: Var) -> str:
        """An equation's output: ``_`` (taking no name) when its program never reads it, as JAX prints."""
        if id(v) not in self.names and self.used and id(v) not in self.used[-1]:
            self.names[id(v)] = "_"
        return self(v)

    def __call__(self, v: Var) -> str:
        key = id(v)
        if key not in self.names:
            self.names[key] = _encode_name(self.count)
            self.count += 1
        return self.names[key]


def _format_literal(lit: Literal) -> str:
    v = np.asarray(lit.val)
    if v.dtype == np.bool_:
        s = str(bool(v))
    elif v.dtype.kind in "iu":
        s = str(int(v))
    elif v.dtype.kind == "c":
        s = repr(complex(v))
    else:
        s = repr(float(v))
    return f"{s}:{lit.aval.str_short()}"


# JAX's printer lays a group out on one line when it fits in this many columns, and breaks it
# (one equation, or one parameter, per line) when it does not.
WIDTH = 80


def _fits(column: int, text: str) -> bool:
    return "\n" not in text and column + len(text) <= WIDTH


def _pp_atom(a, namer: _Namer) -> str:
    return _format_literal(a) if isinstance(a, Literal) else namer(a)


def _pp_binder(v: Var, namer: _Namer) -> str:
    return f"{namer(v)}:{v.aval.str_short()}"


def _dot_numbers(numbers: Any) -> str:
    (lc, rc), (lb, rb) = numbers
    return f"(({list(lc)}, {list(rc)}), ({list(lb)}, {list(rb)}))"


def _displayed_params(eqn: Eqn) -> dict:
    """The parameters as JAX prints them: ``name`` first, the rest sorted by key; the few that
    ember spells differently, or that JAX prints and ember does not have (shardings), in JAX's
    form; parameters JAX does not print (broadcast_in_dim's shape) left out."""
    params, name = dict(eqn.params), eqn.primitive.name
    if name == "broadcast_in_dim":
        params.pop("shape", None)
        params.pop("sharding", None)
        if tuple(params.get("broadcast_dimensions", ())) == ():
            params.pop("broadcast_dimensions", None)
    elif name in ("reduce_sum", "dot_general"):
        if name == "dot_general":
            params["dimension_numbers"] = _Verbatim(_dot_numbers(params["dimension_numbers"]))
            if params.get("precision") is None:
                params.pop("precision", None)
            if params.get("preferred_element_type") is None:
                params["preferred_element_type"] = eqn.outvars[0].aval.dtype
        else:
            params.setdefault("out_sharding", None)
    elif name in ("reshape", "iota"):
        params.setdefault("sharding", None)
    elif name == "remat2" and type(params.get("policy")).__name__ == "function":  # (JAX: the address masked)
        params["policy"] = _Verbatim(f"<function {params['policy'].__qualname__} at 0xXXXXXXXXXXXX>")
    elif name in ("argmax", "argmin") and "axis" in params:
        params["axes"] = (params.pop("axis"),)
    first = {"name": params.pop("name")} if "name" in params else {}
    return {**first, **dict(sorted(params.items()))}


class _Verbatim(str):
    """A parameter shown as this text."""


def _pp_param(v: Any, namer: _Namer, column: int, prefix: int = 0) -> str:
    if isinstance(v, ClosedJaxpr):
        v = v.jaxpr
    if isinstance(v, Jaxpr):
        return namer.shared.get(id(v)) or pp_jaxpr(v, namer, column, prefix)
    if isinstance(v, tuple) and v and all(isinstance(x, (ClosedJaxpr, Jaxpr)) for x in v):
        inner = "".join(" " * (column + 2) + _pp_param(x, namer, column + 2) + "\n" for x in v)
        return "(\n" + inner + " " * column + ")"
    if isinstance(v, np.dtype):
        return str(v) if v.name != "bfloat16" else "bfloat16"
    if callable(v) and hasattr(v, "__name__"):
        return v.__name__
    return str(v)


def _name_jit_body(eqn: Eqn, namer: _Namer) -> None:
    """A ``jit`` body's inputs and outputs take the names of the equation's (as JAX prints it)."""
    body = eqn.params.get("jaxpr")
    body = body.jaxpr if isinstance(body, ClosedJaxpr) else body
    if not isinstance(body, Jaxpr):
        return
    for inner, outer in zip(body.invars, eqn.invars):
        if isinstance(outer, Var):
            namer.names.setdefault(id(inner), namer(outer))
    for inner, outer in zip(body.outvars, eqn.outvars):
        if isinstance(inner, Var) and id(inner) not in namer.names:
            namer.names[id(inner)] = namer(outer)


def pp_eqn(eqn: Eqn, namer: _Namer, column: int) -> str:
    """One equation starting at ``column``: its outputs are named before its parameters'
    sub-programs, as in JAX."""
    outs = " ".join(f"{namer.binder(v)}:{v.aval.str_short()}" for v in eqn.outvars)
    if eqn.primitive.name == "jit":
        _name_jit_body(eqn, namer)
    ins = " ".join(_pp_atom(a, namer) for a in eqn.invars)
    lead = f"{outs} = " if outs else ""  # (JAX: no '=' without outputs)
    params = _displayed_params(eqn)
    if not params:
        return f"{lead}{eqn.primitive.name} {ins}".rstrip()
    start = column + len(lead) + len(eqn.primitive.name) + 1
    texts = {k: _pp_param(v, namer, column + 2, len(k) + 1) for k, v in params.items()}
    flat = f"{lead}{eqn.primitive.name}[{' '.join(f'{k}={t}' for k, t in texts.items())}] {ins}".rstrip()
    if _fits(column, flat) and start < WIDTH:
        return flat
    pad = " " * (column + 2)
    lines = "".join(f"\n{pad}{k}={t}" for k, t in texts.items())
    return f"{lead}{eqn.primitive.name}[{lines}\n{' ' * column}] {ins}".rstrip()


def _shared_subprograms(top: Jaxpr) -> list[tuple[str, Jaxpr]]:
    """The sub-programs JAX prints first, as ``let name = { ... } in``: those reached more than
    once (a jitted function called twice with the same types is one program) or longer than 10
    equations, named by the ``name`` of the first equation that calls them (else ``jaxpr``), a
    count appended to repeated names; in the order a breadth-first walk first reaches them."""
    counts: dict[int, int] = {}
    programs: dict[int, Jaxpr] = {}
    names: dict[int, str] = {}
    queue = collections.deque([top])
    while queue:
        jaxpr = queue.popleft()
        key = id(jaxpr)
        programs[key] = jaxpr
        counts[key] = counts.get(key, 0) + 1 + (jaxpr is not top and len(jaxpr.eqns) > 10)
        for eqn in jaxpr.eqns:
            name = eqn.params.get("name")
            for sub in subjaxprs(eqn.params):
                queue.append(sub)
                if isinstance(name, str):
                    names.setdefault(id(sub), name.strip("<>"))
    taken: dict[str, int] = {}
    shared = []
    for key, count in counts.items():
        if count == 1:
            continue
        name = names.get(key, "jaxpr")
        seen = taken.get(name, 0)
        taken[name] = seen + 1
        if seen:
            name += str(seen)
            taken[name] = taken.get(name, 0) + 1
        shared.append((name, programs[key]))
    return shared


def pp_toplevel(jaxpr: Jaxpr) -> str:
    """A program as ``make_jaxpr`` prints it: its shared sub-programs first, then itself."""
    namer = _Namer()
    shared = _shared_subprograms(jaxpr)
    namer.shared = {id(sub): name for name, sub in shared}
    texts = [f"let {name} = {pp_jaxpr(sub, namer, 0, len(name) + 7)} in\n" for name, sub in shared]
    return "".join(texts) + pp_jaxpr(jaxpr, namer, 0)


def pp_jaxpr(jaxpr: Jaxpr, namer: _Namer, column: int, prefix: int = 0) -> str:
    """A program whose text starts at ``column`` (after ``prefix`` characters on that line): on
    one line if it fits, else one equation per line."""
    consts = " ".join(_pp_binder(v, namer) for v in jaxpr.constvars)
    ins = " ".join(_pp_binder(v, namer) for v in jaxpr.invars)
    namer.used.append({id(a) for e in jaxpr.eqns for a in e.invars if isinstance(a, Var)}
                      | {id(a) for a in jaxpr.outvars if isinstance(a, Var)})
    try:
        eqns = [pp_eqn(e, namer, column + 4) for e in jaxpr.eqns]
    finally:
        namer.used.pop()
    outs = ", ".join(_pp_atom(a, namer) for a in jaxpr.outvars)
    outs = f"({outs},)" if len(jaxpr.outvars) == 1 else f"({outs})"
    flat = f"{{ lambda {consts}; {ins}. let {'; '.join(eqns)} in {outs} }}"
    if _fits(column + prefix, flat):
        return flat
    pad = " " * (column + 4)
    body = "".join(f"\n{pad}{e}" for e in eqns)
    return f"{{ lambda {consts}; {ins}. let{body}\n{' ' * (column + 2)}in {outs} }}"
