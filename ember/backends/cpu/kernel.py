"""Code generation of one fused kernel: a loop nest that computes each output element.

The kernel's output is computed element by element from an index into its
shape. Each equation of the kernel maps the index it is asked for to indices
of its operands: elementwise equations pass it on, index-remapping equations
(broadcast, transpose, reshape, slice, pad, ...) rewrite it, and reductions
loop over the reduced axes. Nothing is materialized between equations.

Every value is emitted at the shallowest loop level it depends on: a row's
maximum inside softmax depends on the row index only, so it is computed once
per row, before the loop over the row's elements (this is what makes row-wise
patterns take one pass over memory per reduction plus one for the output).
The innermost loop walks the output contiguously, so LLVM's loop vectorizer
turns it (and the reduction loops) into SIMD code. Where a pad or concatenation
along the last axis changes sides, that loop is split into pieces whose index
bounds are known (``_last_axis_pieces``), so each piece reads one side in place
rather than every side at clamped indices (gathers).

Evaluation is demand-driven, but not recursive: a rule asks for an operand by
yielding a ``Read``, and ``KernelBuilder.run`` evaluates the Reads on an explicit
stack of the rules waiting for them, in the order in which nested calls would, so
a kernel of a chain of ten thousand equations compiles as a short one does.

The generated function is ``void name(i8** buffers, i64 begin, i64 end)``:
``buffers`` holds the inputs then the output, and [begin, end) is the range of
the outermost output dimension to compute, so threads can share the work.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable

import numpy as np
from llvmlite import ir

from ember import dtypes
from ember.backends.cpu import lowering, vecmath
from ember.backends.cpu.complex_math import Cx
from ember.backends.cpu.index_rules import (
    REDUCTION_PRIMITIVES,
    dot_row,
    dot_row_layout,
    elementwise,
    index_rules,
    index_vector_entry,
    reduction_row,
)
from ember.backends.cpu.loops import Index, Loop, Reads, Region, Scalar, Scope, int_const
from ember.backends.cpu.lowering import I64, Emitter, const, register_type
from ember.backends.reference.dot import accumulation_dtype
from ember.core.ir import Jaxpr, Literal, Var
from ember.lax import elementwise as ew, indexing as ix, reductions as red, shapes as sh
from ember.lax.dot import dot_general_p
from ember.lax.indexing import GatherScatterMode

I8 = ir.IntType(8)

ROW_BYTES = 32 * 1024  # the largest row kept on the stack (rows stay in the L1 cache)

# The longest path of equations in one kernel (fusion starts another kernel beyond it). LLVM's
# time on a loop body grows faster than the body (quadratically for long chains: the loop
# vectorizer at O2, the expansion of selects at O0), so a chain of n equations compiles in kernels
# of this depth, in time linear in n. It is twice the depth at which code generation used to
# stop (it recursed per equation, to about 240), so kernels it could generate stay as they were
# (the test suite's programs have kernels of depth 19 at most).
MAX_DEPTH = 512
# The most products (``dot_general``) on one path of a kernel: a product inside another one's
# operand is computed once per element that the outer one reads it for, so nested products
# multiply their cost (and their code). Kernels had at most three in the test suite's programs.
MAX_PRODUCTS = 4


def _bounded(value: Scalar, bounds: tuple[int, int] | None) -> Scalar:
    value.bounds = bounds or None
    return value


class KernelBuilder:
    """Emits the LLVM function of one kernel into ``module``."""

    def __init__(self, module: ir.Module, name: str, jaxpr: Jaxpr, versioned: bool = False) -> None:
        """``versioned``: the kernel may compute a range twice (``build``)."""
        self.module, self.name, self.jaxpr, self.versioned = module, name, jaxpr, versioned
        self.operand_in_output = False  # a scatter's output buffer holds its operand already (a loop's carry)
        self.emitter = Emitter(module)
        self.defining = {id(v): e for e in jaxpr.eqns for v in e.outvars}
        self.row_vars = self._rows_to_materialize(jaxpr)
        self.shared_loop_var = None  # the loop over [begin, end) (of ``_split_dim``)
        self.scope: Scope | None = None  # where index arithmetic goes: the scope being evaluated
        params = [lowering.storage_type(v.aval.dtype).as_pointer() for v in jaxpr.invars + jaxpr.outvars]
        body_type = ir.FunctionType(ir.VoidType(), params + [I64, I64])
        self.fn = ir.Function(module, body_type, name=f"{name}_body")
        self.fn.linkage = "internal"
        self.fn.attributes.add("alwaysinline")
        self.fn.attributes.add("nounwind")
        for arg in self.fn.args[:len(params)]:
            arg.add_attribute("noalias")
        self.buffers = {id(v): arg for v, arg in zip(jaxpr.invars, self.fn.args)}
        self.allocas = ir.IRBuilder(self.fn.append_basic_block("allocas"))  # stack slots, for mem2reg
        self.entry = self.fn.append_basic_block("entry")

    # --- i64 arithmetic, folded when constant, emitted at the depth of its operands ---
    def _builder_at(self, depth: int) -> ir.IRBuilder:
        """The builder of loop level ``depth`` of the scope being evaluated."""
        assert self.scope is not None  # (set while a kernel's body is emitted)
        return self.scope.regions[depth].b

    def _emit(self, op: str, a: Scalar, b: Scalar) -> Scalar:
        depth = max(a.depth, b.depth)
        return Scalar(getattr(self._builder_at(depth), op)(a.value, b.value), depth)

    def add(self, a: Scalar, b: Scalar | int) -> Scalar:
        b = int_const(b) if isinstance(b, int) else b
        if a.const is not None and b.const is not None:
            return int_const(a.const + b.const)
        if a.const == 0 or b.const == 0:
            return b if a.const == 0 else a
        return _bounded(self._emit("add", a, b), a.bounds and b.bounds and
                        (a.bounds[0] + b.bounds[0], a.bounds[1] + b.bounds[1]))

    def mul(self, a: Scalar, n: int) -> Scalar:
        if a.const is not None:
            return int_const(a.const * n)
        if n in (0, 1):
            return a if n == 1 else int_const(0)
        return _bounded(self._emit("mul", a, int_const(n)), a.bounds and
                        (min(a.bounds[0] * n, a.bounds[1] * n), max(a.bounds[0] * n, a.bounds[1] * n)))

    def div(self, a: Scalar, n: int) -> Scalar:
        if a.const is not None:
            return int_const(a.const // n)
        return a if n == 1 else self._emit("udiv", a, int_const(n))

    def rem(self, a: Scalar, n: int) -> Scalar:
        if a.const is not None:
            return int_const(a.const % n)
        return int_const(0) if n == 1 else self._emit("urem", a, int_const(n))

    def sub(self, a: Scalar, b: Scalar) -> Scalar:
        if a.const is not None and b.const is not None:
            return int_const(a.const - b.const)
        return a if b.const == 0 else self._emit("sub", a, b)

    def sub_from(self, n: int, a: Scalar) -> Scalar:
        """``n - a``."""
        if a.const is not None:
            return int_const(n - a.const)
        return self._emit("sub", int_const(n), a)

    def div_signed(self, a: Scalar, n: int) -> Scalar:
        if a.const is not None:
            return int_const(int(a.const / n))
        return a if n == 1 else self._emit("sdiv", a, int_const(n))

    def rem_signed(self, a: Scalar, n: int) -> Scalar:
        if a.const is not None:
            return int_const(int(np.fmod(a.const, n)))
        return self._emit("srem", a, int_const(n))

    def known(self, op: str, a: Scalar, n: int) -> bool | None:
        """Whether ``a <op> n`` holds for every value ``a`` takes (``a.bounds``), fails for every
        one, or None: it depends (or the bounds are unknown). Emits nothing."""
        if a.bounds is None:
            return None
        low, high = a.bounds
        if op == "<":
            return True if high < n else False if low >= n else None
        if op == ">=":
            return True if low >= n else False if high < n else None
        return (low == n) if low == high else False if not low <= n <= high else None

    def compare(self, op: str, a: Scalar, n: int) -> Scalar:
        """An i1 ``a <op> n`` (signed); a constant where ``a``'s bounds decide it."""
        holds = self.known(op, a, n)
        if holds is not None:
            return Scalar(ir.Constant(lowering.I1, int(holds)), 0, int(holds))
        b = self._builder_at(a.depth)
        return Scalar(b.icmp_signed(op, a.value, ir.Constant(I64, n)), a.depth)

    def clamp(self, a: Scalar, n: int) -> Scalar:
        """``a`` clamped into [0, n): a safe index to read speculatively (``a`` itself where its
        bounds are inside)."""
        if a.const is not None:
            return int_const(min(max(a.const, 0), max(n - 1, 0)))
        if a.bounds is not None and a.bounds[0] >= 0 and a.bounds[1] <= n - 1:
            return a
        b = self._builder_at(a.depth)
        low = b.select(b.icmp_signed("<", a.value, ir.Constant(I64, 0)), ir.Constant(I64, 0), a.value)
        high = ir.Constant(I64, max(n - 1, 0))
        return Scalar(b.select(b.icmp_signed(">", low, high), high, low), a.depth)

    def select_all(self, conditions: list[Scalar], if_true: Scalar, if_false: Scalar, scope: Scope) -> Scalar:
        """``if_true`` where every condition holds, else ``if_false``."""
        conditions = [c for c in conditions if c.const != 1]
        if any(c.const == 0 for c in conditions):
            return if_false
        if not conditions:
            return if_true
        depth = max(c.depth for c in conditions + [if_true, if_false])
        b = scope.regions[depth].b
        cond = conditions[0].value
        for c in conditions[1:]:
            cond = b.and_(cond, c.value)
        return Scalar(b.select(cond, if_true.value, if_false.value), depth)

    def builder_at(self, depth: int, scope: Scope) -> ir.IRBuilder:
        return scope.regions[depth].b

    # --- evaluation of a variable at an index ---
    def value(self, atom: Any, index: Index, scope: Scope) -> Scalar:
        """``atom``'s element at ``index`` as a register value."""
        return self.run(self._element(atom, index, scope))

    def run(self, reads: Reads) -> Any:
        """The result of ``reads`` (a rule, or anything that yields Reads as rules do), each Read
        it yields evaluated, and each Read that evaluation yields, and so on: on an explicit stack
        of the computations waiting for an element, so that a chain of equations does not make
        Python recurse. The order is that of nested calls, so the code is the same."""
        stack = [reads]
        answer: Any = None
        error: BaseException | None = None
        while stack:
            try:
                read = stack[-1].send(answer) if error is None else stack[-1].throw(error)
            except StopIteration as done:
                stack.pop()
                answer, error = done.value, None
                continue
            except BaseException as raised:  # handed to the computation that asked, as a call would
                stack.pop()
                if not stack:
                    raise
                answer, error = None, raised
                continue
            stack.append(self._element(*read))
            answer = None
        return answer

    def _element(self, atom: Any, index: Index, scope: Scope) -> Reads:
        """``atom`` at ``index``: a literal, a value already emitted in ``scope``, or computed."""
        if isinstance(atom, Literal):
            return Scalar(const(atom.aval.dtype, np.asarray(atom.val).item()), 0)
        if atom.aval.shape == ():
            index = Index(self, (), [])
        key = (id(atom), index.key)
        hit = scope.lookup(key)
        if hit is not None:
            return hit
        saved, self.scope = self.scope, scope
        try:
            result = (yield from self._from_row(atom, index, scope)) if id(atom) in self.row_vars else None
            if result is None:
                result = yield from self._compute(atom, index, scope)
        finally:
            self.scope = saved
        scope.remember(key, result)
        return result

    def _compute(self, atom: Var, index: Index, scope: Scope) -> Reads:
        eqn = self.defining.get(id(atom))
        if eqn is None:
            return self._load(atom, index, scope)
        return (yield from index_rules.get(eqn.primitive, elementwise)(self, eqn, index, scope))

    # --- rows: values computed once per row into a stack buffer ---
    def _rows_to_materialize(self, jaxpr: Jaxpr) -> set[int]:
        """Variables worth computing a whole row at a time (when read along their last axis):
        products whose last axis is a column of the right operand, and reductions over leading
        axes (the row is then an accumulation of contiguous, vectorizable row updates, instead
        of one strided loop per element), and expensive values read more than once (softmax's
        exp, read by the sum and by the division), which would otherwise be computed per read."""
        uses: dict[int, int] = {}
        for e in jaxpr.eqns:
            for a in e.invars:
                uses[id(a)] = uses.get(id(a), 0) + 1
        rows = set()
        for e in jaxpr.eqns:
            out = e.outvars[0].aval
            if not out.shape or out.shape[-1] * 8 > ROW_BYTES or out.shape[-1] < 2:
                continue
            if e.primitive is dot_general_p and dot_row_layout(e) is not None:
                rows.add(id(e.outvars[0]))
            elif e.primitive in REDUCTION_PRIMITIVES and e.invars[0].aval.ndim - 1 not in e.params["axes"]:
                rows.add(id(e.outvars[0]))  # reduces leading axes: accumulate whole rows
            elif e.primitive in lowering.EXPENSIVE and uses.get(id(e.outvars[0]), 0) > 1:
                rows.add(id(e.outvars[0]))
        return rows

    def _from_row(self, atom: Var, index: Index, scope: Scope) -> Reads:
        """``atom`` at ``index`` read from its row buffer, if the row is invariant in the loop
        that walks the last axis (else None: the row would be recomputed per element)."""
        *outer, last = index.comps
        depth = max((c.depth for c in outer), default=0)
        if last.const is not None or depth >= last.depth:
            return None
        # Walked by the loop that threads share: compute only this thread's part of the row.
        partial = last.value is self.shared_loop_var
        key = ("row", id(atom), tuple(c.key for c in outer), partial)
        row = scope.lookup(key)
        if row is None:
            row = yield from self._materialize_row(atom, outer, depth, scope, partial)
            scope.remember(key, row)
        b = scope.regions[last.depth].b
        value = b.load(b.gep(row.value, [ir.Constant(I64, 0), last.value]))
        eqn = self.defining[id(atom)]
        self.emitter.b = b
        if eqn.primitive is dot_general_p:
            value = lowering.convert(self.emitter, value, accumulation_dtype(atom.aval.dtype), atom.aval.dtype)
        elif eqn.primitive in REDUCTION_PRIMITIVES:
            value = lowering.round_to(b, value, atom.aval.dtype)
        return Scalar(value, last.depth)

    def _materialize_row(self, atom: Var, outer: list[Scalar], depth: int, scope: Scope,
                         partial: bool) -> Reads:
        eqn = self.defining[id(atom)]
        n = atom.aval.shape[-1]
        is_dot = eqn.primitive is dot_general_p
        element = register_type(accumulation_dtype(atom.aval.dtype) if is_dot else atom.aval.dtype)
        row = self.alloca(ir.ArrayType(element, n))
        row.align = 64
        regions = scope.regions[:depth + 1]
        columns = (self.fn.args[-2], self.fn.args[-1]) if partial else (ir.Constant(I64, 0), ir.Constant(I64, n))
        if is_dot:
            yield from dot_row(self, eqn, outer, row, Scope(regions, scope), columns)
        elif eqn.primitive in REDUCTION_PRIMITIVES:
            yield from reduction_row(self, eqn, outer, row, Scope(regions, scope), columns)
        else:
            loop = Loop(self.fn, regions[-1], *columns, len(regions))
            inner = Scope(regions + [loop.inner], scope)
            value = yield from self._compute(atom, Index(self, atom.aval.shape, outer + [loop.index]), inner)
            b = loop.inner.b
            b.store(value.value, b.gep(row, [ir.Constant(I64, 0), loop.var]))
            loop.close()
        return Scalar(row, depth)

    def _load(self, var: Var, index: Index, scope: Scope) -> Scalar:
        offset = index.linear
        b = self.builder_at(offset.depth, scope)
        ptr = b.gep(self.buffers[id(var)], [offset.value])
        return Scalar(lowering.load(b, ptr, var.aval.dtype), offset.depth)

    def emit_op(self, depth: int, scope: Scope, fn: Callable[[], ir.Value]) -> Scalar:
        self.emitter.b = self.builder_at(depth, scope)
        return Scalar(fn(), depth)

    # --- the whole function ---
    @property
    def extent(self) -> int:
        """The size of the loop that [begin, end) ranges over (threads split it)."""
        shape = self.jaxpr.outvars[0].aval.shape
        root = self.jaxpr.eqns[-1] if self.jaxpr.eqns else None
        if root is not None and root.primitive in SCANS:
            shape = tuple(n for d, n in enumerate(shape) if d != root.params["axis"])
        if root is not None and root.primitive in SCATTERS:
            return 1  # one thread: updates may hit the same element
        if root is not None and root.primitive in SCANS:
            return shape[0] if shape else 1
        return shape[self._split_dim()] if shape else 1

    def _split_dim(self) -> int:
        """The output dimension whose loop ranges over [begin, end): the first of size above 1
        (leading dimensions of size 1 would leave threads nothing to share), short of tiled ones."""
        shape = self.jaxpr.outvars[0].aval.shape
        untiled = len(shape) - len(_tiled_dims(self.jaxpr))
        return next((d for d in range(untiled) if shape[d] != 1), 0)

    def build(self) -> ir.Function:
        """The kernel's function. A versioned elementwise kernel with trigonometric functions is
        generated twice: its loops first with ``vecmath``'s Cody-Waite reduction (a third of
        the cost), flagging arguments beyond its range; then, if any was flagged, with the exact
        reduction again over the same range (in a function of its own, not inlined). Where the
        output is an input's buffer (a donation), only the exact version runs."""
        if self.jaxpr.eqns and self.jaxpr.eqns[-1].primitive in SCANS:
            return self._build_scan(self.jaxpr.eqns[-1])
        if self.jaxpr.eqns and self.jaxpr.eqns[-1].primitive in SCATTERS:
            return self._build_scatter(self.jaxpr.eqns[-1])
        flags = []

        def record(b: ir.IRBuilder, flag: ir.Value) -> None:  # (an or over the loops: a reduction)
            slot = self.alloca(I8)
            self.allocas.store(ir.Constant(I8, 0), slot)
            flags.append(slot)
            b.store(b.or_(b.load(slot), b.zext(flag, I8)), slot)

        with vecmath.medium_reduction(record) if self.versioned else contextlib.nullcontext():
            b = self._build_loops()
        if not flags:
            b.ret_void()
            self.allocas.branch(self.entry)
            return self._wrapper()
        exact = KernelBuilder(self.module, f"{self.name}_exact", self.jaxpr)
        exact._build_loops().ret_void()
        exact.allocas.branch(exact.entry)
        # (not inlined: it rarely runs; but vectorized, as before, for arrays of large arguments)
        exact.fn.attributes.discard("alwaysinline")
        exact.fn.attributes.add("noinline")
        any_flag = b.load(flags[0])
        for slot in flags[1:]:
            any_flag = b.or_(any_flag, b.load(slot))
        with b.if_then(b.icmp_unsigned("!=", any_flag, ir.Constant(I8, 0)), likely=False):
            b.call(exact.fn, list(self.fn.args))
        b.ret_void()
        # (an input written over would be read again: then the exact version alone)
        a, i8p = self.allocas, I8.as_pointer()
        out = a.bitcast(self.fn.args[len(self.jaxpr.invars)], i8p)
        aliased = ir.Constant(ir.IntType(1), 0)
        for arg, v in zip(self.fn.args, self.jaxpr.invars):
            if v.aval.shape == self.jaxpr.outvars[0].aval.shape:
                aliased = a.or_(aliased, a.icmp_unsigned("==", a.bitcast(arg, i8p), out))
        alone = self.fn.append_basic_block("exact_alone")
        a.cbranch(aliased, alone, self.entry)
        only = ir.IRBuilder(alone)
        only.call(exact.fn, list(self.fn.args))
        only.ret_void()
        return self._wrapper()

    def _build_loops(self) -> ir.IRBuilder:
        """The loops of an elementwise kernel (or one with reductions, gathers, products) into
        ``self.fn``; returns the builder after them."""
        shape = self.jaxpr.outvars[0].aval.shape
        begin, end = self.fn.args[-2], self.fn.args[-1]
        regions = [Region(ir.IRBuilder(self.entry))]
        self.root_scope = self.scope = Scope(regions)
        loops = []

        def loop_over(start: ir.Value, stop: ir.Value, step: int = 1) -> Loop:
            loop = Loop(self.fn, regions[-1], start, stop, len(regions), step)
            loops.append(loop)
            regions.append(loop.inner)
            return loop

        split = self._split_dim()
        bounds = [(begin, end) if d == split else (ir.Constant(I64, 0), ir.Constant(I64, n))
                  for d, n in enumerate(shape)]
        tiled = _tiled_dims(self.jaxpr)
        pieces = [] if tiled or split == len(shape) - 1 else _last_axis_pieces(self.jaxpr)
        nested = len(shape) - len(tiled) - (1 if pieces else 0)
        comps = [loop_over(*bounds[d]).index for d in range(nested)]
        # Tiles of the last dimension outside those of the one before: a transposing kernel then
        # reads TILE rows of its input at a time from one end to the other (streams the hardware
        # prefetches), where it read one column strip of every row (2048x2048 x.T * 2 + 1:
        # 5.9-6.1 -> 2.8-3.9 ms).
        tiles = {d: loop_over(*bounds[d], TILE) for d in reversed(tiled)}
        self.shared_loop_var = tiles[split].var if split in tiles else loops[split].var if loops else None
        for d, tile in ((d, tiles[d]) for d in tiled):  # the loops within one tile
            b = regions[-1].b
            tile_end = b.add(tile.var, ir.Constant(I64, TILE))
            stop = bounds[d][1]
            comps.append(loop_over(tile.var, b.select(b.icmp_signed("<", tile_end, stop), tile_end, stop)).index)
        if not pieces:
            self._store_element(shape, comps, self.root_scope)
        for low, high in pieces:  # the last axis in pieces, one loop after the other
            scope = Scope(list(regions), self.root_scope)
            piece = Loop(self.fn, regions[-1], ir.Constant(I64, low), ir.Constant(I64, high), len(regions),
                         bounds=(low, high - 1))
            scope.regions.append(piece.inner)
            self._store_element(shape, comps + [piece.index], scope)
            piece.close()
        for loop in reversed(loops):
            loop.close()
        return regions[0].b

    def _store_element(self, shape: tuple[int, ...], comps: list[Scalar], scope: Scope) -> None:
        """The output's element at ``comps`` computed and stored, in the innermost region of ``scope``."""
        out = self.jaxpr.outvars[0]
        index = Index(self, shape, [int_const(0) if n == 1 and d else c for d, (n, c) in enumerate(zip(shape, comps))])
        result = self.value(out, index, scope)
        saved, self.scope = self.scope, scope
        offset = index.linear
        self.scope = saved
        b = scope.regions[-1].b
        # (Non-temporal stores for large outputs were measured 1.3-10x slower here: not used.)
        lowering.store(b, result.value, b.gep(self.fn.args[len(self.jaxpr.invars)], [offset.value]), out.aval.dtype)

    def _build_scan(self, root) -> ir.Function:
        """A running reduction (the kernel's root): loops over the other output dimensions, the
        first of them in [begin, end), then the scanned axis walked in order (backwards if
        ``reverse``) with the running value in a register, stored at every step (half types run
        in float32, each output rounded once, as the reference accumulates them)."""
        out, operand = self.jaxpr.outvars[0], root.invars[0]
        shape, dt = out.aval.shape, out.aval.dtype
        axis, n = root.params["axis"], out.aval.shape[root.params["axis"]]
        begin, end = self.fn.args[-2], self.fn.args[-1]
        regions = [Region(ir.IRBuilder(self.entry))]
        self.root_scope = self.scope = Scope(regions)
        loops: list[Loop] = []
        comps: dict[int, Scalar] = {}  # dimension -> the output index's component
        for i, d in enumerate(dd for dd in range(len(shape)) if dd != axis):
            bounds = (begin, end) if i == 0 else (ir.Constant(I64, 0), ir.Constant(I64, shape[d]))
            loops.append(Loop(self.fn, regions[-1], *bounds, len(regions)))
            regions.append(loops[-1].inner)
            comps[d] = int_const(0) if shape[d] == 1 and i else loops[-1].index
        if len(loops) == 0:  # a rank-1 scan: one call does it all (its [begin, end) is [0, 1))
            guard = Loop(self.fn, regions[-1], begin, end, len(regions))
            loops.append(guard)
            regions.append(guard.inner)
        running = self.alloca(register_type(dt))
        regions[-1].b.store(const(dt, SCANS[root.primitive](dt)), running)
        walk = Loop(self.fn, regions[-1], ir.Constant(I64, 0), ir.Constant(I64, n), len(regions))
        loops.append(walk)
        regions.append(walk.inner)
        b = walk.inner.b
        position = b.sub(ir.Constant(I64, n - 1), walk.var) if root.params["reverse"] else walk.var
        comps[axis] = Scalar(position, walk.index.depth)
        index = Index(self, shape, [comps[d] for d in range(len(shape))])
        x = self.value(operand, index, self.root_scope)
        self.emitter.b = b = regions[-1].b
        value = _scan_step(self.emitter, root.primitive, dt, b.load(running), x.value)
        b.store(value, running)
        lowering.store(b, value, b.gep(self.fn.args[len(self.jaxpr.invars)], [index.linear.value]), dt)
        for loop in reversed(loops):
            loop.close()
        regions[0].b.ret_void()
        self.allocas.branch(self.entry)
        return self._wrapper()

    def _build_scatter(self, root) -> ir.Function:
        """A scatter (the kernel's root): the operand copied into the output (unless it is there:
        ``operand_in_output``), then every update element combined into the element its window
        puts it at, in the reference's order (index batch, then window, row-major); windows that
        do not fit are clipped into the operand with mode "clip", else dropped."""
        out = self.jaxpr.outvars[0]
        operand, indices, updates = root.invars
        shape, dt = out.aval.shape, out.aval.dtype
        dn = root.params["dimension_numbers"]
        out_ptr = self.fn.args[len(self.jaxpr.invars)]
        regions = [Region(ir.IRBuilder(self.entry))]
        self.root_scope = self.scope = Scope(regions)
        if not self.operand_in_output:
            loops = self._loop_nest(regions, shape)
            index = Index(self, shape, [loop.index for loop in loops])
            value = self.value(operand, index, self.root_scope)
            b = regions[-1].b
            lowering.store(b, value.value, b.gep(out_ptr, [index.linear.value]), dt)
            for loop in reversed(loops):
                loop.close()
        # The updates, after the copy.
        regions = [regions[0]]
        self.scope = scope = Scope(regions)
        window_dims = list(dn.update_window_dims)
        batch_dims = [d for d in range(updates.aval.ndim) if d not in window_dims]
        loops = self._loop_nest(regions, [updates.aval.shape[d] for d in batch_dims + window_dims])
        at = dict(zip(batch_dims + window_dims, (loop.index for loop in loops)))
        batch = [at[d] for d in batch_dims]
        window_operand_dims = [d for d in range(len(shape))
                               if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims]
        window = dict(zip(window_operand_dims, (updates.aval.shape[d] for d in window_dims)))
        offsets = dict(zip(window_operand_dims, (at[d] for d in window_dims)))
        coords: list[Scalar] = [int_const(0)] * len(shape)
        conditions = []
        for j, d in enumerate(dn.scatter_dims_to_operand_dims):
            start = self.run(index_vector_entry(self, indices, batch, j, scope))
            fits = shape[d] - window.get(d, 1) + 1  # the starts at which the window fits
            if root.params["mode"] == GatherScatterMode.CLIP:
                start = self.clamp(start, fits)
            else:
                conditions += [self.compare(">=", start, 0), self.compare("<", start, fits)]
            coords[d] = start
        for operand_dim, indices_dim in zip(dn.operand_batching_dims, dn.scatter_indices_batching_dims):
            coords[operand_dim] = batch[indices_dim]
        coords = [self.add(c, offsets[d]) if d in offsets else c for d, c in enumerate(coords)]
        update = self.value(updates, Index(self, updates.aval.shape, [at[d] for d in range(updates.aval.ndim)]), scope)
        linear = Index(self, shape, coords).linear
        self.emitter.b = b = regions[-1].b
        conditions = [c for c in conditions if c.const != 1]
        if any(c.const == 0 for c in conditions):
            inside = ir.Constant(lowering.I1, 0)
        else:
            inside = ir.Constant(lowering.I1, 1)
            for c in conditions:
                inside = b.and_(inside, c.value)
        with b.if_then(inside):
            slot = b.gep(out_ptr, [linear.value])
            combined = _scatter_step(self.emitter, root.primitive, dt, lowering.load(b, slot, dt), update.value)
            lowering.store(b, combined, slot, dt)
        for loop in reversed(loops):
            loop.close()
        regions[0].b.ret_void()
        self.allocas.branch(self.entry)
        return self._wrapper()

    def _loop_nest(self, regions: list[Region], sizes) -> list[Loop]:
        """Loops over [0, n) for each of ``sizes``, nested in order, appended to ``regions``."""
        loops = []
        for n in sizes:
            loops.append(Loop(self.fn, regions[-1], ir.Constant(I64, 0), ir.Constant(I64, n), len(regions)))
            regions.append(loops[-1].inner)
        return loops

    def _wrapper(self) -> ir.Function:
        """``name(i8** buffers, i64 begin, i64 end)``: unpacks the buffers, calls the body (inlined)."""
        i8p = ir.IntType(8).as_pointer()
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [i8p.as_pointer(), I64, I64]), name=self.name)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        buffers, begin, end = fn.args
        args = []
        for k, param in enumerate(self.fn.args[:-2]):
            raw = b.load(b.gep(buffers, [ir.Constant(I64, k)]))
            args.append(b.bitcast(raw, param.type))
        b.call(self.fn, args + [begin, end])
        b.ret_void()
        return fn

    def alloca(self, ty: ir.Type) -> ir.Value:
        return self.allocas.alloca(ty)


def _scan_step(e: lowering.Emitter, p, dt: np.dtype, running: ir.Value, x: ir.Value) -> ir.Value:
    """One step of a running reduction, in order (no reassociation: the reference's bits)."""
    b = e.b
    if lowering.is_complex(dt) and p in (red.cumsum_p, red.cumprod_p):  # in order, as the reference
        c = Cx(b, lowering.register_type(lowering.part_dtype(dt)))
        op = c.add if p is red.cumsum_p else c.mul
        return lowering.pack(b, *op(lowering.unpack(b, running), lowering.unpack(b, x)))
    if p is red.cumsum_p:
        return b.fadd(running, x) if lowering.is_float(dt) else b.add(running, x)
    if p is red.cumprod_p:
        return b.fmul(running, x) if lowering.is_float(dt) else b.mul(running, x)
    return lowering.lower_rules[ew.max_p if p is red.cummax_p else ew.min_p](e, [dt, dt], dt, running, x)


def _scatter_step(e: lowering.Emitter, p, dt: np.dtype, current: ir.Value, update: ir.Value) -> ir.Value:
    """An element after one update of a scatter of kind ``p``."""
    if p is ix.scatter_p:
        return update
    rule = {ix.scatter_add_p: ew.add_p, ix.scatter_sub_p: ew.sub_p, ix.scatter_mul_p: ew.mul_p,
            ix.scatter_min_p: ew.min_p, ix.scatter_max_p: ew.max_p}[p]
    return lowering.lower_rules[rule](e, [dt, dt], dt, current, update)


# Running reductions that kernels compute natively, and their starting values.
SCANS = {red.cumsum_p: lambda dt: 0, red.cumprod_p: lambda dt: 1, red.cummax_p: dtypes.lowest,
         red.cummin_p: dtypes.highest}
SCATTERS = ix.SCATTERS


def is_view(fusion_eqn) -> bool:
    """A kernel that only reshapes (or squeezes) its input: the same bytes, so no code at all."""
    sub = fusion_eqn.params["jaxpr"].jaxpr
    return (len(sub.eqns) == 1 and sub.eqns[0].primitive in (sh.reshape_p, sh.squeeze_p)
            and isinstance(sub.eqns[0].invars[0], Var))


# Tiles of 16x16: each cache line read along a column is used 16 times. Measured on x.T * 2 + 1
# (2048x2048 float32, one thread): no tiles 30 ms; tiles of 8: 6.6 ms, 16: 6.2, 32: 8.4, 64: 7.9.
TILE = 16
UNTILED_BYTES = 16 * 1024  # the largest block of a transposing kernel's last two axes walked without tiles


# The most loops that the last axis is split into (``_last_axis_pieces``): each piece repeats the
# code of the kernel's innermost loop.
MAX_PIECES = 8


def _last_axis_pieces(jaxpr: Jaxpr) -> list[tuple[int, int]]:
    """The parts [low, high) of the output's last axis in which no pad or concatenation along
    that axis changes sides (the backward pass of a split: the gradients of the pieces padded
    and added): walked by one loop each, their index's bounds known, each such equation reads
    one side there, contiguously, instead of gathering every side's element at clamped indices
    and selecting one (what LLVM turns into gathers). [] where there is nothing to split."""
    out = jaxpr.outvars[0]
    if not isinstance(out, Var) or out.aval.ndim == 0:
        return []
    n = out.aval.shape[-1]
    defining = {id(v): e for e in jaxpr.eqns for v in e.outvars}
    breaks: set[int] = set()
    seen: set[tuple[int, int]] = set()
    work = [(out, 0)]  # a variable whose last index is the output's plus an offset
    while work:
        var, offset = work.pop()
        eqn = defining.get(id(var))
        if eqn is None or (id(var), offset) in seen:
            continue
        seen.add((id(var), offset))
        for operand, shift in _last_axis_operands(eqn, var, breaks, offset):
            work.append((operand, offset + shift))
        if len(breaks) >= MAX_PIECES * 2:
            return []
    cuts = sorted(b for b in breaks if 0 < b < n)
    if not cuts or len(cuts) >= MAX_PIECES:
        return []
    return list(zip([0] + cuts, cuts + [n]))


def _last_axis_operands(eqn: Any, var: Var, breaks: set[int], offset: int) -> list[tuple[Var, int]]:
    """The operands of ``eqn`` (which computes ``var``) read along their last axis at ``var``'s
    last index plus a constant, with that constant; the output's last indices (``var``'s minus
    ``offset``) at which ``eqn`` changes the operand it reads go into ``breaks``."""
    p, params, ndim = eqn.primitive, eqn.params, var.aval.ndim
    last = var.aval.shape[-1]
    if not eqn.invars:
        return []
    operand: Any = eqn.invars[0]
    if p is sh.pad_p:
        low, _, interior = params["padding_config"][-1]
        size = operand.aval.shape[-1]
        if interior:
            return []
        breaks.update((low - offset, low + size - offset))
        return [(operand, -low)] if isinstance(operand, Var) else []
    if p is sh.concatenate_p:
        if params["dimension"] != ndim - 1:
            return [(x, 0) for x in eqn.invars if isinstance(x, Var)]
        found, start = [], 0
        for x in eqn.invars:
            breaks.add(start - offset)
            if isinstance(x, Var):
                found.append((x, -start))
            start += x.aval.shape[-1]
        return found
    if p is sh.slice_p:
        strides = params["strides"]
        return [(operand, params["start_indices"][-1])] if not strides or strides[-1] == 1 else []
    if p is sh.broadcast_in_dim_p:
        keeps = operand.aval.ndim and params["broadcast_dimensions"][-1] == ndim - 1
        return [(operand, 0)] if keeps and operand.aval.shape[-1] == last and isinstance(operand, Var) else []
    if p in (sh.reshape_p, sh.squeeze_p):
        return [(operand, 0)] if operand.aval.ndim and operand.aval.shape[-1] == last else []
    if p is sh.transpose_p:
        return [(operand, 0)] if params["permutation"][-1] == ndim - 1 else []
    if p is sh.rev_p:
        return [(operand, 0)] if ndim - 1 not in params["dimensions"] else []
    if p in REDUCTION_PRIMITIVES and "axes" in params:
        kept = operand.aval.ndim - 1 not in params["axes"]
        return [(operand, 0)] if kept and operand.aval.shape[-1] == last else []
    if p in index_rules:  # (products, gathers, dynamic slices, iota, windows: not followed)
        return []
    return [(x, 0) for x in eqn.invars if isinstance(x, Var) and x.aval.shape == var.aval.shape]


def _tiled_dims(jaxpr: Jaxpr) -> tuple[int, ...]:
    """The last two output dimensions, walked in tiles, when the kernel transposes its last
    axis (reading along a column: one cache line per element without tiling). Kernels with
    reductions or products keep plain loops, so that row values stay hoisted. A block of the
    last two dimensions that fits in the L1 cache (``UNTILED_BYTES``) is read from there a
    column at a time as fast, and its loops compile in a fifth of the time (64x64 float32:
    15-25 ms of LLVM, not 60-160; a loop's hoisted matrix transposes are of that size)."""
    shape = jaxpr.outvars[0].aval.shape
    if len(shape) < 2 or min(shape[-2:]) < 4 * TILE:
        return ()
    if shape[-2] * shape[-1] * jaxpr.outvars[0].aval.dtype.itemsize <= UNTILED_BYTES:
        return ()
    transposes_last = any(e.primitive is sh.transpose_p and e.params["permutation"][-1] != len(shape) - 1
                          for e in jaxpr.eqns if e.outvars[0].aval.ndim == len(shape))
    accumulates = any(e.primitive in REDUCTION_PRIMITIVES or e.primitive is dot_general_p for e in jaxpr.eqns)
    return (len(shape) - 2, len(shape) - 1) if transposes_last and not accumulates else ()
