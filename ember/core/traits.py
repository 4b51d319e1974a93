"""What kind of operation each primitive is: one trait record per primitive.

Passes, backends, cost models and transformations treat primitives by kind: fusion groups the
elementwise, index-remapping and reduction ones, recomputes only cheap ones under a broadcast and
keeps running reductions and scatters at a kernel's root; the CPU lowering keeps the value of a
transcendental function rather than computing it per read; reverse mode transposes the linear
ones; the cost model counts each kind's operations. Those sets are all read from here, and a
primitive is declared once, where it is defined (``declare``, or ``lax.base.primitive(name,
rule, family=..., ...)``), so that a new primitive cannot be half in a family.

A record (``Traits``) holds:

- ``family``: ``ELEMENTWISE`` (each output element a function of the operands' elements at its
  index), ``INDEX_REMAPPING`` (each output element is an operand element, or computed from its
  index alone: ``iota``), ``REDUCTION`` (over axes), ``CUMULATIVE`` (running reductions),
  ``SCATTER``, or ``OTHER`` (products, convolutions, control flow, calls, linear algebra, ...).
- ``linear``: linear in some operand: its jvp applies it to tangents, so reverse mode
  transposes it (it has a transpose rule).
- ``cheap``: cheap enough to compute again for every reuse of its value (fusion's broadcasts).
- ``transcendental``: a function computed by a math routine (range reduction, polynomials): tens
  of instructions per element, worth computing once; counted as such by the cost model.
- ``cost``: the equation's operations (``Cost``): by default one flop per output element (and a
  transcendental for a transcendental one), nothing for index remapping, one per operand
  element for reductions. Contractions count two flops per multiply-add (as XLA's cost analysis).

The families' members are live views (``members``): ``p in ELEMENTWISE`` reads the table.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator, NamedTuple

from ember.core.primitive import Primitive, RuleTable


class Family(enum.Enum):
    ELEMENTWISE = "elementwise"
    INDEX_REMAPPING = "index-remapping"
    REDUCTION = "reduction"
    CUMULATIVE = "cumulative"
    SCATTER = "scatter"
    OTHER = "other"


class Cost(NamedTuple):
    flops: float
    transcendentals: float = 0.0


def output_elements(eqn: Any) -> int:
    return sum(math.prod(v.aval.shape) for v in eqn.outvars if hasattr(v.aval, "shape"))


def operand_elements(eqn: Any) -> int:
    return sum(math.prod(a.aval.shape) for a in eqn.invars if hasattr(a.aval, "shape"))


def free(eqn: Any) -> Cost:
    """Data movement: no arithmetic."""
    return Cost(0.0)


def per_output_element(eqn: Any) -> Cost:
    return Cost(float(output_elements(eqn)))


def per_operand_element(eqn: Any) -> Cost:
    return Cost(float(operand_elements(eqn)))


def transcendental_per_output_element(eqn: Any) -> Cost:
    n = float(output_elements(eqn))
    return Cost(n, n)


@dataclass(frozen=True)
class Traits:
    family: Family = Family.OTHER
    linear: bool = False
    cheap: bool = False
    transcendental: bool = False
    cost: Callable[[Any], Cost] | None = None  # None: the family's default (``equation_cost``)


OTHER = Traits()  # a primitive that declares nothing (a user's primitive)

traits: RuleTable = RuleTable("traits")


def declare(p: Primitive, family: Family = Family.OTHER, *, linear: bool = False, cheap: bool | None = None,
            transcendental: bool = False, cost: Callable[[Any], Cost] | None = None) -> Primitive:
    """Record ``p``'s traits (once: a second record is an error). ``cheap`` defaults to True for
    index remapping, else False."""
    if cheap is None:
        cheap = family is Family.INDEX_REMAPPING
    traits[p] = Traits(family, linear, cheap, transcendental, cost)
    return p


def traits_of(p: Primitive) -> Traits:
    """``p``'s record (``OTHER``'s for a primitive that declared none)."""
    return traits.get(p, OTHER)


_DEFAULT_COST: dict[Family, Callable[[Any], Cost]] = {
    Family.ELEMENTWISE: per_output_element,
    Family.INDEX_REMAPPING: free,
    Family.REDUCTION: per_operand_element,
    Family.CUMULATIVE: per_operand_element,
    Family.SCATTER: per_output_element,
    Family.OTHER: per_output_element,
}


def equation_cost(eqn: Any) -> Cost:
    """The operations of one equation (its sub-programs not included: the caller walks them)."""
    t = traits.get(eqn.primitive, OTHER)
    if t.cost is not None:
        return t.cost(eqn)
    if t.transcendental:
        return transcendental_per_output_element(eqn)
    return _DEFAULT_COST[t.family](eqn)


class PrimitiveSet:
    """The primitives whose record satisfies ``test``, read live from the table (a set is kept
    and rebuilt when the table has changed)."""

    __slots__ = ("description", "_test", "_members", "_seen")

    def __init__(self, description: str, test: Callable[[Primitive, Traits], bool]) -> None:
        self.description = description
        self._test = test
        self._members: frozenset[Primitive] = frozenset()
        self._seen = -1

    def members(self) -> frozenset[Primitive]:
        version = traits.version
        if version != self._seen:
            self._members = frozenset(p for p, t in list(traits.items()) if self._test(p, t))
            self._seen = version
        return self._members

    def __contains__(self, p: object) -> bool:
        if self._seen != traits.version:  # (members() inlined: passes ask this per equation)
            self.members()
        return p in self._members

    def __iter__(self) -> Iterator[Primitive]:
        return iter(self.members())

    def __len__(self) -> int:
        return len(self.members())

    def __or__(self, other: Any) -> frozenset[Primitive]:
        return self.members() | frozenset(other)

    __ror__ = __or__

    def __sub__(self, other: Any) -> frozenset[Primitive]:
        return self.members() - frozenset(other)

    def __repr__(self) -> str:
        return f"<{self.description}: {', '.join(sorted(p.name for p in self.members()))}>"


def members(family: Family) -> PrimitiveSet:
    """The primitives of ``family`` (a live view)."""
    return PrimitiveSet(f"{family.value} primitives", lambda p, t: t.family is family)


def having(trait: str) -> PrimitiveSet:
    """The primitives whose record has ``trait`` (``"linear"``, ``"cheap"``, ``"transcendental"``) set."""
    if trait not in ("linear", "cheap", "transcendental"):
        raise ValueError(f"not a boolean trait: {trait!r} (linear, cheap or transcendental)")
    return PrimitiveSet(f"{trait} primitives", lambda p, t: getattr(t, trait))


ELEMENTWISE = members(Family.ELEMENTWISE)
INDEX_REMAPPING = members(Family.INDEX_REMAPPING)
REDUCTIONS = members(Family.REDUCTION)
CUMULATIVE = members(Family.CUMULATIVE)
SCATTERS = members(Family.SCATTER)
LINEAR = having("linear")
CHEAP = having("cheap")
TRANSCENDENTAL = having("transcendental")
