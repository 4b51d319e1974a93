"""What every pass shares: substitution of variables, recursion into sub-programs, effects.

Passes never mutate their input. They build new Jaxprs, sharing the Vars and
Eqns they leave unchanged; a Jaxpr a pass leaves unchanged comes back as the
same object. Sub-programs (bodies of ``jit`` calls and control flow) are
rewritten once per distinct object, so equations that shared a body before a
pass still share it afterwards (CSE compares bodies by identity).
"""
from __future__ import annotations

from typing import Callable

from ember.core.ir import Atom, ClosedJaxpr, Eqn, Jaxpr, Literal, Var


def used_vars(atoms: list) -> set[int]:
    """The ids of the variables among ``atoms`` (literals are not variables)."""
    return {id(a) for a in atoms if isinstance(a, Var)}


class Substitution:
    """Maps variables of the input program to the atoms that replace them."""

    def __init__(self) -> None:
        self._atoms: dict[int, Atom] = {}

    def bind(self, var: Var, atom: Atom) -> None:
        self._atoms[id(var)] = atom

    def __call__(self, atom: Atom) -> Atom:
        return atom if isinstance(atom, Literal) else self._atoms.get(id(atom), atom)

    def all(self, atoms: list) -> list:
        return [self(a) for a in atoms]

    def apply(self, eqn: Eqn) -> Eqn:
        """``eqn`` reading the substituted inputs (the same object if none changed)."""
        invars = self.all(eqn.invars)
        return eqn if all(a is b for a, b in zip(invars, eqn.invars)) else eqn.replace(invars=invars)


class SubprogramRewriter:
    """Applies a signature-preserving rewrite to the sub-programs held in equation params.

    ``rewrite(jaxpr, self) -> jaxpr`` must keep the sub-program's constvars,
    invars and output types, because the enclosing primitive binds them.
    """

    def __init__(self, rewrite: Callable[[Jaxpr, "SubprogramRewriter"], Jaxpr]) -> None:
        self._rewrite = rewrite
        self._done: dict[int, tuple] = {}  # id(original) -> (original, rewritten); keeps ids unique
        # a pass's own results per sub-program, kept with their programs (so ids stay unique): nested
        # calls n deep are then visited O(n) times, not O(n^2)
        self.memo: dict[tuple, tuple] = {}

    def __call__(self, eqn: Eqn) -> Eqn:
        """``eqn`` with its sub-programs rewritten (the same object if none changed)."""
        params = {k: self._param(v) for k, v in eqn.params.items()}
        if all(params[k] is v for k, v in eqn.params.items()):
            return eqn
        return eqn.replace(params=params)

    def _param(self, value):
        if isinstance(value, tuple) and any(isinstance(x, (ClosedJaxpr, Jaxpr)) for x in value):
            items = tuple(self._param(x) for x in value)
            return value if all(a is b for a, b in zip(items, value)) else items
        if not isinstance(value, (ClosedJaxpr, Jaxpr)):
            return value
        if id(value) not in self._done:
            self._done[id(value)] = (value, self._rewrite_program(value))
        return self._done[id(value)][1]

    def _rewrite_program(self, program: ClosedJaxpr | Jaxpr) -> ClosedJaxpr | Jaxpr:
        if isinstance(program, Jaxpr):
            return self._rewrite(program, self)
        jaxpr = self._rewrite(program.jaxpr, self)
        return program if jaxpr is program.jaxpr else ClosedJaxpr(jaxpr, program.consts)


def rebuild(jaxpr: Jaxpr, eqns: list[Eqn], outvars: list, constvars: list[Var] | None = None) -> Jaxpr:
    """A Jaxpr with the given parts, or ``jaxpr`` itself if every part is unchanged."""
    constvars = jaxpr.constvars if constvars is None else constvars
    unchanged = (_same(constvars, jaxpr.constvars) and _same(eqns, jaxpr.eqns)
                 and _same(outvars, jaxpr.outvars))
    return jaxpr if unchanged else Jaxpr(constvars, jaxpr.invars, eqns, outvars)


def on_closed(closed: ClosedJaxpr, rewrite: Callable[[Jaxpr, SubprogramRewriter], Jaxpr]) -> ClosedJaxpr:
    """Run a Jaxpr-level pass that keeps the consts on a whole ClosedJaxpr."""
    jaxpr = rewrite(closed.jaxpr, SubprogramRewriter(rewrite))
    return closed if jaxpr is closed.jaxpr else ClosedJaxpr(jaxpr, closed.consts)


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))
