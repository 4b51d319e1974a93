"""Loop nests for generated kernels: index arithmetic that knows which loops it depends on.

A ``Scalar`` is an LLVM value with the depth of the innermost loop it depends
on (0: none; Python ints are folded), and where known the range of its values (an index in a
loop over a known part of an axis: comparisons and clamps on it fold). Code for a value goes into the ``Region``
of that depth, the straight-line code of one loop level just before its inner
loop, so everything is computed in the outermost loop where it can be: the
same thing as loop-invariant code motion, done while generating the code.
A ``Scope`` lists the regions of one loop nest (reductions open nested scopes
that share the outer regions) and remembers what was already computed where.
A ``Read`` is how code generation asks for an operand's element without calling
itself: the rules are generators that yield Reads, which the kernel evaluates on
an explicit stack (``KernelBuilder.run``), so a chain of equations may be as long
as a program is.
"""
from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from llvmlite import ir

from ember.backends.cpu.lowering import I64

if TYPE_CHECKING:
    from ember.backends.cpu.kernel import KernelBuilder


class Scalar:
    """An i64 (or element) value and the loop depth it depends on (0: none). Python ints fold.
    ``bounds``: the least and greatest value an i64 takes, where known (None: unknown)."""

    __slots__ = ("value", "depth", "const", "bounds")

    def __init__(self, value: ir.Value | None, depth: int, const_value: int | None = None,
                 bounds: tuple[int, int] | None = None) -> None:
        self.value = value
        self.depth = depth
        self.const = const_value
        self.bounds = (const_value, const_value) if const_value is not None else bounds

    @property
    def key(self) -> Any:
        return self.const if self.const is not None else id(self.value)


def int_const(n: int) -> Scalar:
    return Scalar(ir.Constant(I64, n), 0, n)


class Index:
    """An index into an array of ``shape``, by components, by row-major linear offset, or both."""

    def __init__(self, kernel: "KernelBuilder", shape: tuple, comps: list[Scalar] | None = None,
                 linear: Scalar | None = None) -> None:
        self.kernel, self.shape = kernel, shape
        self._comps, self._linear = comps, linear

    @property
    def comps(self) -> list[Scalar]:
        if self._comps is None:
            linear = self._linear
            assert linear is not None  # (an Index has its components, its offset, or both)
            k, comps = self.kernel, []
            strides = [int(np.prod(self.shape[d + 1:], dtype=np.int64)) for d in range(len(self.shape))]
            for d, (n, stride) in enumerate(zip(self.shape, strides)):
                if n == 1:
                    comps.append(int_const(0))
                else:  # the leading component needs no remainder: the offset is in bounds
                    q = k.div(linear, stride)
                    comps.append(q if d == 0 else k.rem(q, n))
            self._comps = comps
        return self._comps

    @property
    def linear(self) -> Scalar:
        if self._linear is None:
            k, acc = self.kernel, int_const(0)
            for c, n in zip(self.comps, self.shape):
                acc = k.add(k.mul(acc, n), c)
            self._linear = acc
        return self._linear

    @property
    def known(self) -> tuple[list[Scalar] | None, Scalar | None]:
        """The components and the linear offset, each None unless computed already."""
        return self._comps, self._linear

    @property
    def key(self) -> Any:
        if self._comps is not None:
            return tuple(c.key for c in self._comps)
        return ("linear", self.linear.key)  # (known: there are no components)


# --- loop nests ------------------------------------------------------------------------------------
class Region:
    """The code of one loop level: an IRBuilder whose position moves as loops are closed."""

    def __init__(self, builder: ir.IRBuilder) -> None:
        self.b = builder


class Loop:
    def __init__(self, fn: ir.Function, region: Region, start: ir.Value, stop: ir.Value, depth: int,
                 step: int = 1, bounds: tuple[int, int] | None = None) -> None:
        """``bounds``: the least and greatest index the loop can take, where the caller knows them."""
        self.region = region
        self.start, self.stop, self.step = start, stop, step
        self.header = fn.append_basic_block("loop")
        self.body = fn.append_basic_block("body")
        self.latch = fn.append_basic_block("next")
        self.exit = fn.append_basic_block("done")
        b = ir.IRBuilder(self.header)
        self.var = b.phi(I64)
        b.cbranch(b.icmp_signed("<", self.var, stop), self.body, self.exit)
        self.index = Scalar(self.var, depth, bounds=bounds)
        self.inner = Region(ir.IRBuilder(self.body))

    def close(self) -> None:
        """Branch into the loop from its region, out of it from its body; the region continues after."""
        self.var.add_incoming(self.start, self.region.b.block)
        self.region.b.branch(self.header)
        self.inner.b.branch(self.latch)
        b = ir.IRBuilder(self.latch)
        self.var.add_incoming(b.add(self.var, ir.Constant(I64, self.step)), self.latch)
        b.branch(self.header)
        self.region.b = ir.IRBuilder(self.exit)


class Scope:
    """Regions by loop depth, and the values already emitted at indices (per loop nest)."""

    def __init__(self, regions: list[Region], parent: "Scope | None" = None) -> None:
        self.regions = regions
        self.parent = parent
        self.base = len(regions) - 1  # depths up to here are shared with the parent
        self.memo: dict[Any, Scalar] = {}

    def lookup(self, key: Any) -> Scalar | None:
        scope: Scope | None = self
        while scope is not None:
            hit = scope.memo.get(key)
            if hit is not None:
                return hit
            scope = scope.parent
        return None

    def remember(self, key: Any, value: Scalar) -> None:
        scope = self
        while scope.parent is not None and value.depth <= scope.parent_depth:
            scope = scope.parent
        scope.memo[key] = value

    @property
    def parent_depth(self) -> int:
        return self.base


class Read(NamedTuple):
    """A request that a rule yields: the element of ``atom`` at ``index``, evaluated in
    ``scope``. The kernel sends the element (a ``Scalar``) back into the rule."""
    atom: Any
    index: Index  # type: ignore[assignment]  # (the field shadows tuple.index, which no Read needs)
    scope: Scope


# A computation that yields Reads and returns its result (a Scalar, for the rules).
Reads = Generator[Read, Scalar, Any]
