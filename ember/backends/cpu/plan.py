"""A compiled program's plan: its steps over numbered buffers (slots), and where each buffer lives.

Plain data, decided without LLVM (this module imports none of the native backend's modules, and
tests/test_cpu_plan.py builds plans without LLVM): the code generator (``codegen``) makes the
steps, the runner (``runner``) runs them on the buffers planned here.

Slots: the program's constants come first (their values are in ``template``), then its inputs,
then every value that a step computes. A step is anything with ``ins`` (slot numbers, or NumPy
values for literals), ``outs`` (slot numbers) and ``planned``: whether it writes into buffers
that the program allocates for it (a view's output is its operand's buffer: not planned).

Buffers: outputs are fresh arrays each call (handed to the caller); temporaries share one arena
allocated per call, a block reused once the last step that reads it has run. An output may
instead be written into a donated input's buffer (``jit(..., donate_argnums=...)``) when that is
safe: the input is read by no later step, and by the producing step at most at the index of the
element being written (``pointwise_reads``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ember.core.avals import ShapedArray, consumed_donations
from ember.core.evaluation import to_numpy
from ember.core.ir import ClosedJaxpr, Var

ALIGNMENT = 64  # bytes: a cache line, and the widest vector (AVX-512)


class Step(Protocol):
    ins: list  # slot numbers, or NumPy values (literals)
    outs: list[int]
    planned: bool


@dataclass(eq=False)
class Plan:
    """The steps of a program and its buffers; ``finish`` decides memory and donation."""
    template: list[Any] = field(default_factory=list)  # per slot: a constant's array, else None
    slots: dict[int, int] = field(default_factory=dict)  # id of a variable -> its slot
    slot_avals: dict[int, ShapedArray] = field(default_factory=dict)
    constants: int = 0  # slots [0, constants) hold the program's constants
    in_slots: list[int] = field(default_factory=list)
    in_avals: list[ShapedArray] = field(default_factory=list)
    steps: list[Any] = field(default_factory=list)
    out_atoms: list[Any] = field(default_factory=list)  # slots, or NumPy values (literal outputs)
    pointwise_reads: dict[int, set[int]] = field(default_factory=dict)  # step -> slots it reads in place only
    # Decided by ``finish``:
    allocations: list[tuple[int, ShapedArray]] = field(default_factory=list)  # (slot, aval): fresh outputs
    arena_views: list[tuple[int, int, ShapedArray]] = field(default_factory=list)  # (slot, offset, aval)
    arena_bytes: int = 0
    reuses: list[tuple[int, int]] = field(default_factory=list)  # (output slot, donated input position)
    reused_inputs: frozenset[int] = frozenset()
    unusable_donations: list[ShapedArray] = field(default_factory=list)  # donated inputs no output takes
    kept_donations: frozenset[int] = frozenset()  # ... their positions: those arguments stay usable

    @classmethod
    def of(cls, closed: ClosedJaxpr) -> Plan:
        """A plan with the slots of ``closed``'s constants and inputs, and no steps yet."""
        plan, jaxpr = cls(), closed.jaxpr
        for v, c in zip(jaxpr.constvars, closed.consts):
            plan.slots[id(v)] = len(plan.template)
            plan.template.append(contiguous(to_numpy(c, v.aval), v.aval))
        plan.constants = len(plan.template)
        plan.in_slots = [plan.slot(v) for v in jaxpr.invars]
        plan.in_avals = [v.aval for v in jaxpr.invars]
        return plan

    def slot(self, v: Var) -> int:
        """The slot of variable ``v`` (a new one the first time)."""
        slot = self.slots.get(id(v))
        if slot is None:
            slot = self.slots[id(v)] = len(self.template)
            self.template.append(None)
            self.slot_avals[slot] = v.aval
        return slot

    def atom(self, a: Any) -> Any:
        """A step's operand: ``a``'s slot, or its value if it is a literal."""
        return self.slot(a) if isinstance(a, Var) else np.asarray(a.val, dtype=a.aval.dtype)

    def finish(self, outvars: list[Any], donated: frozenset[int] = frozenset()) -> None:
        """Set the outputs, then plan the buffers and which donated inputs outputs take."""
        self.out_atoms = [self.atom(a) for a in outvars]
        last_use = self.last_uses()
        self._plan_memory(last_use)
        self._plan_donation(consumed_donations(self.in_avals, [a.aval for a in outvars], donated), donated,
                            last_use)

    def last_uses(self) -> dict[int, int]:
        """The last step reading each slot; ``len(steps)`` for slots read by steps that may keep
        a view of them (steps that are not planned, and fallbacks: see ``planned``) and for
        program outputs."""
        end = len(self.steps)
        last_use: dict[int, int] = {s: end for s in self.out_atoms if isinstance(s, int)}
        for i, step in enumerate(self.steps):
            for s in step.ins:
                if isinstance(s, int):
                    last_use[s] = max(last_use.get(s, i), i) if step.planned else end
        return last_use

    def _plan_memory(self, last_use: dict[int, int]) -> None:
        """Outputs of planned steps: fresh arrays for program outputs, arena space for
        temporaries, reused once their last reader has run. Temporaries read by steps that
        may keep a view of them live to the end."""
        outputs = {s for s in self.out_atoms if isinstance(s, int)}
        dying: dict[int, list[int]] = {}
        for s, i in last_use.items():
            dying.setdefault(i, []).append(s)
        free: dict[int, list[int]] = {}  # block size -> offsets of free blocks
        blocks: dict[int, tuple[int, int]] = {}  # slot -> (offset, size)
        self.allocations, self.arena_views, self.arena_bytes = [], [], 0
        for i, step in enumerate(self.steps):
            for out in step.outs if step.planned else ():
                aval = self.slot_avals[out]
                if out in outputs:
                    self.allocations.append((out, aval))
                    continue
                size = aligned(aval.size * aval.dtype.itemsize)
                if free.get(size):
                    offset = free[size].pop()
                else:
                    offset, self.arena_bytes = self.arena_bytes, self.arena_bytes + size
                blocks[out] = (offset, size)
                self.arena_views.append((out, offset, aval))
            for s in dying.get(i, []):
                if s in blocks:
                    free.setdefault(blocks[s][1], []).append(blocks[s][0])

    def _plan_donation(self, consumed: frozenset[int], donated: frozenset[int], last_use: dict[int, int]) -> None:
        """``reuses``: (output slot, input position) pairs whose output may be written into the
        buffer of a donated input that the call deletes (``consumed``); ``unusable_donations``
        and ``kept_donations``: the avals and positions of the donated inputs it keeps."""
        producer = {out: i for i, step in enumerate(self.steps) if step.planned for out in step.outs}
        free_outputs = [slot for slot, _ in self.allocations]
        returned = {a for a in self.out_atoms if isinstance(a, int)}
        self.reuses = []
        for position in sorted(consumed):
            slot = self.in_slots[position]
            if slot in returned:
                continue
            fits = (out for out in free_outputs if self._may_write_over(out, slot, producer[out], last_use))
            out = next(fits, None)
            if out is not None:
                free_outputs.remove(out)
                self.reuses.append((out, position))
        self.reused_inputs = frozenset(position for _, position in self.reuses)
        self.kept_donations = donated - consumed
        self.unusable_donations = [self.in_avals[p] for p in sorted(self.kept_donations)]

    def _may_write_over(self, out: int, slot: int, step: int, last_use: dict[int, int]) -> bool:
        """Whether step ``step`` may write output ``out`` into input ``slot``'s buffer."""
        a, b = self.slot_avals[out], self.slot_avals[slot]
        if (a.shape, a.dtype) != (b.shape, b.dtype):
            return False
        last = last_use.get(slot, -1)
        return last < step or (last == step and slot in self.pointwise_reads.get(step, ()))

    def output_sources(self) -> list[tuple[str, Any]] | None:
        """Where each output comes from: ``("fresh", j)`` the ``j``-th fresh output buffer
        (``allocations``), ``("input", k)`` the ``k``-th argument itself, ``("constant", value)`` a
        literal or a constant of the program; None if an output is anything else (a view)."""
        fresh = {slot: j for j, (slot, _) in enumerate(self.allocations)}
        inputs = {slot: k for k, slot in enumerate(self.in_slots)}
        sources: list[tuple[str, Any]] = []
        for a in self.out_atoms:
            if not isinstance(a, int):
                sources.append(("constant", a))
            elif a in fresh:
                sources.append(("fresh", fresh[a]))
            elif a in inputs:
                sources.append(("input", inputs[a]))
            elif a < self.constants:
                sources.append(("constant", self.template[a]))
            else:
                return None
        return sources

    def __str__(self) -> str:
        """The steps, one a line, then where every buffer lives (``EMBER_DUMP_IR``)."""
        def atom(a: Any) -> str:
            return f"s{a}" if isinstance(a, int) else repr(a.item() if a.ndim == 0 else a.tolist())
        lines = [f"inputs {' '.join(map(atom, self.in_slots)) or '-'}; constants "
                 f"{' '.join(f's{s}' for s in range(self.constants)) or '-'}"]
        for i, step in enumerate(self.steps):
            kind = type(step).__name__.removesuffix("Step").lower() or "step"
            name = getattr(step, "name", "")
            lines.append(f"  {i}: {kind}{f' {name}' if name else ''}({', '.join(map(atom, step.ins))})"
                         f" -> {', '.join(map(atom, step.outs))}{'' if step.planned else '  (a view)'}")
        lines.append(f"outputs {', '.join(map(atom, self.out_atoms)) or '-'}")
        where = [f"s{slot} fresh {aval.str_short()}" for slot, aval in self.allocations]
        where += [f"s{slot} arena+{offset} {aval.str_short()}" for slot, offset, aval in self.arena_views]
        lines.append(f"buffers ({self.arena_bytes} arena bytes): {'; '.join(where) or '-'}")
        if self.reuses or self.unusable_donations:
            lines.append("donation: " + "; ".join(
                [f"s{out} into input {k}" for out, k in self.reuses]
                + [f"unusable {aval.str_short()}" for aval in self.unusable_donations]))
        return "\n".join(lines)


def aligned(nbytes: int) -> int:
    """``nbytes`` (at least 1) rounded up to ``ALIGNMENT``."""
    return -(-max(nbytes, 1) // ALIGNMENT) * ALIGNMENT


def contiguous(value: Any, aval: ShapedArray) -> np.ndarray:
    """A C-contiguous array of exactly ``aval``'s shape and dtype (kernels index it linearly)."""
    value = np.asarray(value)
    if value.dtype != aval.dtype:
        value = value.astype(aval.dtype)
    if value.shape != aval.shape:
        value = np.broadcast_to(value, aval.shape)
    return value if value.flags.c_contiguous else value.copy(order="C")
