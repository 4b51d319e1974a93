"""The IR: a small, statically typed SSA program and its pretty-printer.

``Jaxpr(constvars, invars, eqns, outvars)``; each ``Eqn`` applies a primitive
to variables and literals, with metadata in keyword ``params``. The printed
form matches JAX's, which users already know how to read::

    { lambda ; a:f32[3]. let b:f32[3] = exp a; c:f32[3] = mul b 2.0:f32[] in (c,) }
"""
from __future__ import annotations

import collections
import re
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from ember.core import pretty as pp
from ember.core.avals import ShapedArray
from ember.core.primitive import EFFECTFUL, REPLAYABLE, Primitive, RuleTable


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
    """``outvars = primitive[params] invars``. ``source``: where the user's code made it
    (``file:line:column (function)``), recorded only where it is asked for (``saved_residuals``)."""

    __slots__ = ("primitive", "invars", "params", "outvars", "source")

    def __init__(self, primitive: Primitive, invars: list, params: dict, outvars: list[Var],
                 source: str | None = None) -> None:
        self.primitive = primitive
        self.invars = invars
        self.params = params
        self.outvars = outvars
        self.source = source

    def replace(self, **changes: Any) -> "Eqn":
        fields = {k: getattr(self, k) for k in self.__slots__}
        fields.update(changes)
        return Eqn(**fields)

    def __repr__(self) -> str:
        return pp_eqn(self)


class Jaxpr:
    """A typed SSA program. ``constvars`` are bound to arrays the program closes over."""

    __slots__ = ("constvars", "invars", "eqns", "outvars", "facts")

    def __init__(self, constvars: list[Var], invars: list[Var], eqns: list[Eqn], outvars: list) -> None:
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.eqns = list(eqns)
        self.outvars = list(outvars)
        # What passes found out about this program, kept with it since a program is not changed once
        # built ("effects": ``_effects``; "live": dead-code elimination has nothing to remove). A call
        # nested n deep would otherwise be searched again at each of the n levels.
        self.facts: dict[str, Any] = {}

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
    return eqn.primitive in EFFECTFUL or any(_effects(sub)[0] for sub in subjaxprs(eqn.params))


def is_replayable(eqn: Eqn) -> bool:
    """Whether every effect of the equation (sub-programs included) may run again (``REPLAYABLE``)."""
    return (eqn.primitive not in EFFECTFUL or eqn.primitive in REPLAYABLE) and all(
        _effects(sub)[1] for sub in subjaxprs(eqn.params))


def _effects(jaxpr: Jaxpr) -> tuple[bool, bool]:
    """(whether any equation of ``jaxpr`` is effectful, whether all are replayable), remembered."""
    effects = jaxpr.facts.get("effects")
    if effects is None:
        effects = jaxpr.facts["effects"] = (any(map(is_effectful, jaxpr.eqns)), all(map(is_replayable, jaxpr.eqns)))
    return effects


# --- pretty-printing -----------------------------------------------------------
# The printed form is JAX 0.10's, character for character: the same document (groups, breaks and
# nesting, ``ember.core.pretty``) laid out in 80 columns, the same names and the same parameters.

# A primitive's parameters as JAX prints them, where they differ from its params (other names,
# values JAX shows and ember keeps elsewhere): ``rule(eqn) -> {name: value}`` in the order printed.
# The layer that gives the primitive its meaning registers it (``custom_jvp_call``: transforms).
print_rules: RuleTable = RuleTable("print_rules")


def _encode_name(n: int) -> str:
    """0 -> a, 25 -> z, 26 -> ba, ... (JAX's variable naming)."""
    s = ""
    while True:
        s = chr(ord("a") + n % 26) + s
        n //= 26
        if n == 0:
            return s


class _Namer:
    """Variable names, given in the order the printer first meets each variable."""

    def __init__(self, dropped: dict[int, str] | None = None, reserved: Iterable[str] = ()) -> None:
        self.names: dict[int, str] = dict(dropped or {})
        self.reserved = set(reserved)  # (names of the programs printed first: no variable takes one)
        self.count = 0
        self.shared: dict[int, str] = {}  # sub-programs printed once, before the program, by name

    def __call__(self, v: Var) -> str:
        key = id(v)
        name = self.names.get(key)
        if name is None:
            while True:
                name = _encode_name(self.count)
                self.count += 1
                if name not in self.reserved:
                    break
            self.names[key] = name
        return name

    def alias(self, inner: Sequence, outer: Sequence) -> None:
        """Name each of ``inner`` (a called program's variables) as the one of ``outer`` it stands
        for, each outer variable at most once (JAX's suggested names for a ``jit`` body)."""
        if len(inner) != len(outer):
            return
        taken: set[int] = set()
        for i, o in zip(inner, outer):
            if isinstance(o, Var) and isinstance(i, Var) and id(o) not in taken and id(i) not in self.names:
                taken.add(id(o))
                self.names[id(i)] = self(o)


def _dropped(jaxpr: "Jaxpr") -> dict[int, str]:
    """The top-level program's equation outputs that nothing reads: printed ``_``, taking no name."""
    names: dict[int, str] = {}
    used = {id(a) for a in jaxpr.outvars if isinstance(a, Var)}
    for eqn in reversed(jaxpr.eqns):
        for v in eqn.outvars:
            if id(v) not in used:
                names[id(v)] = "_"
        used.update(id(a) for a in eqn.invars if isinstance(a, Var))
    return names


def _format_literal(lit: Literal) -> str:
    v = np.asarray(lit.val)
    if v.dtype == np.bool_:
        s = str(bool(v))
    elif v.dtype.kind in "iu":
        s = str(int(v))
    elif v.dtype.kind == "c":
        s = str(complex(v))
    elif lit.aval.weak_type and v.dtype in (np.float32, np.float64) and np.isfinite(v):
        # A weakly typed constant is the Python number the program was written with, which JAX
        # keeps and prints: the shortest decimal that reads back as this value (0.1, not 0.1000000015).
        s = str(float(np.format_float_positional(v[()], unique=True, trim="0")))
    else:
        s = str(float(v))
    return f"{s}:{lit.aval.str_short()}"


# JAX's printer lays a group out on one line when it fits in this many columns (``ember.core.pretty``).
WIDTH = 80


def _dot_numbers(numbers: Any) -> str:
    (lc, rc), (lb, rb) = numbers
    return f"(({list(lc)}, {list(rc)}), ({list(lb)}, {list(rb)}))"


def _displayed_params(eqn: Eqn) -> dict:
    """The parameters as JAX prints them: ``name`` first, the rest sorted by key; the few that
    ember spells differently, or that JAX prints and ember does not have (shardings), in JAX's
    form; parameters JAX does not print (broadcast_in_dim's shape) left out."""
    rule = print_rules.get(eqn.primitive)
    if rule is not None:
        return rule(eqn)
    params, name = dict(eqn.params), eqn.primitive.name
    if name == "broadcast_in_dim":
        params.pop("shape", None)
        params.pop("sharding", None)
        if tuple(params.get("broadcast_dimensions", ())) == ():
            params.pop("broadcast_dimensions", None)
    elif name in ("reduce_sum", "dot_general"):
        if name == "dot_general":
            params["dimension_numbers"] = Verbatim(_dot_numbers(params["dimension_numbers"]))
            if params.get("precision") is None:
                params.pop("precision", None)
            if params.get("preferred_element_type") is None:
                params.pop("preferred_element_type", None)
        else:
            params.setdefault("out_sharding", None)
    elif name in ("reshape", "iota"):
        params.setdefault("sharding", None)
    elif name == "remat2" and type(params.get("policy")).__name__ == "function":
        params["policy"] = Verbatim(f"<function {params['policy'].__qualname__} at 0x{'X' * 12}>")
    elif name in ("argmax", "argmin") and "axis" in params:
        params["axes"] = (params.pop("axis"),)
    elif name.startswith("scatter") and name[7:] in _SCATTER_COMBINERS:
        params["update_consts"] = ()
        params["update_jaxpr"] = _update_jaxpr(name[8:], eqn.invars[0].aval.dtype) if name != "scatter" else None
    return name_first(params)


# The scatters' ``update_jaxpr`` as JAX shows it: how an update combines with the operand.
_SCATTER_COMBINERS = {"": "", "-add": "add", "-sub": "sub", "-mul": "mul", "-min": "min", "-max": "max"}


def _update_jaxpr(combiner: str, dtype: np.dtype) -> Jaxpr:
    scalar = ShapedArray((), dtype)
    x, y, out = Var(scalar), Var(scalar), Var(scalar)
    return Jaxpr([], [x, y], [Eqn(Primitive(combiner), [x, y], {}, [out])], [out])  # (shown, never run)


def name_first(params: dict) -> dict:
    """JAX's order: ``name`` first, then the others sorted by key."""
    first = {"name": params.pop("name")} if "name" in params else {}
    return {**first, **dict(sorted(params.items()))}


class Verbatim(str):
    """A parameter shown as this text."""


_ADDRESS = re.compile(r" at 0x([0-9a-fA-F]+)")


def _param_doc(v: Any, namer: _Namer) -> pp.Doc:
    if isinstance(v, (ClosedJaxpr, Jaxpr)):
        return _jaxpr_doc(v, namer)
    if type(v) is tuple and all(isinstance(x, (ClosedJaxpr, Jaxpr)) for x in v):
        inner = pp.join(pp.brk(), [_jaxpr_doc(x, namer) for x in v])
        return pp.group(pp.concat([pp.nest(2, pp.concat([pp.text("("), pp.brk(""), inner])),
                                   pp.brk(""), pp.text(")")]))
    if isinstance(v, frozenset):
        return pp.text(f"frozenset({{{', '.join(repr(e) for e in sorted(v))}}})")
    if isinstance(v, np.dtype) and v.name == "bfloat16":
        return pp.text("bfloat16")
    # (addresses masked as JAX masks them: the text of a program does not change from run to run)
    return pp.text(_ADDRESS.sub(lambda m: " at 0x" + "X" * len(m.group(1)), str(v)))


def _vars_doc(atoms: Sequence, namer: _Namer, separator: str = "", types: bool = False) -> pp.Doc:
    """Variables (and literals) separated by spaces that break only where the line is full."""
    items = []
    for a in atoms:
        if isinstance(a, Literal):
            items.append(pp.text(_format_literal(a)))
        else:
            items.append(pp.text(f"{namer(a)}:{a.aval.str_short()}" if types else namer(a)))
    return pp.nest(2, pp.group(pp.join(pp.text(separator) + pp.group(pp.brk()), items)))


def _eqn_doc(eqn: Eqn, namer: _Namer) -> pp.Doc:
    """``outs = primitive[params] ins``: the outputs are named first, then the parameters'
    sub-programs, then the operands, as in JAX."""
    params = _displayed_params(eqn)
    if eqn.primitive.name == "jit":
        body = eqn.params.get("jaxpr")
        body = body.jaxpr if isinstance(body, ClosedJaxpr) else body
        if isinstance(body, Jaxpr) and id(body) not in namer.shared:
            namer.alias(body.invars, eqn.invars)
            namer.alias(body.outvars, eqn.outvars)
    lhs = _vars_doc(eqn.outvars, namer, types=True)
    if params:
        pairs = [pp.text(f"{k}=") + _param_doc(v, namer) for k, v in params.items()]
        brackets = pp.group(pp.concat([pp.nest(2, pp.concat([pp.text("["), pp.brk(""), pp.join(pp.brk(), pairs)])),
                                       pp.brk(""), pp.text("]")]))
    else:
        brackets = pp.nil()
    rhs = [pp.text(eqn.primitive.name), brackets, pp.text(" ") + _vars_doc(eqn.invars, namer)]
    return pp.concat([lhs, pp.text(" = "), *rhs] if eqn.outvars else rhs)


def _jaxpr_doc(jaxpr: Jaxpr | ClosedJaxpr, namer: _Namer) -> pp.Doc:
    jaxpr = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    shared = namer.shared.get(id(jaxpr))
    return pp.text(shared) if shared is not None else _skeleton(jaxpr, namer)


def _skeleton(jaxpr: Jaxpr, namer: _Namer) -> pp.Doc:
    """``{ lambda consts; ins. let eqns in outs }``: on one line if it fits, else an equation a line."""
    consts = _vars_doc(jaxpr.constvars, namer, types=True)
    ins = _vars_doc(jaxpr.invars, namer, types=True)
    eqns = pp.join(pp.brk("; "), [_eqn_doc(e, namer) for e in jaxpr.eqns])
    outs = pp.concat([pp.text("("), _vars_doc(jaxpr.outvars, namer, separator=","),
                      pp.text(",)" if len(jaxpr.outvars) == 1 else ")")])
    return pp.group(pp.nest(2, pp.concat([
        pp.text("{ lambda "), consts, pp.text("; "), ins, pp.text(". let"),
        pp.nest(2, pp.brk() + eqns), pp.brk(), pp.text("in "), outs])) + pp.text(" }"))


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
            for sub in subjaxprs(_displayed_params(eqn)):  # (the programs printed: not add_any's body)
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
    shared = _shared_subprograms(jaxpr)
    namer = _Namer(_dropped(jaxpr), reserved=[name for name, _ in shared])
    namer.shared = {id(sub): name for name, sub in shared}
    docs = [pp.concat([pp.text(f"let {name} = "), _skeleton(sub, namer), pp.text(" in"), pp.brk()])
            for name, sub in shared]
    docs.append(_skeleton(jaxpr, namer))
    return pp.layout(pp.concat(docs), WIDTH)


def pp_eqn(eqn: Eqn) -> str:
    """One equation, as JAX prints it on its own."""
    return pp.layout(_eqn_doc(eqn, _Namer()), WIDTH)
