"""Native loops: ``while``, ``scan`` (and so ``fori_loop``) and ``cond`` compiled into one LLVM function.

A control-flow equation lowers natively when, after fusion, every equation of
its sub-programs is a kernel (or again a natively lowerable control-flow
equation). The loop is then machine code: each iteration calls the kernels'
functions, which LLVM inlines, so a scalar ``fori_loop`` keeps its carry in a
register and runs as one tight loop.

Products too large to fuse (``codegen.SMALL_DOT``) call the blocked product (``gemm``) on their
operands' buffers as they are (``dot.gemm_layout``: strides, no copies), through a table of
function pointers that the loop receives (``function_table``: ``gemm.FUNCTION_TABLE``'s entries,
then the LAPACK routines that its decompositions call, ``lapack.LapackFunction`` functions of
the same module), so the loop's code does not depend on where the product or LAPACK was loaded
and a loop compiled by a worker or kept on disk links to nothing.

Anything else in a body (a sort, a host callback, an operation without native code) is a host
call: the loop calls, through the same table, a Python function that runs the equation's
reference rule on the buffers (``HostCalls``), so the loop stays native around it instead of
running on the reference interpreter as a whole. A host call costs a few microseconds; an
exception it raises stops the rest of the loop's host calls and is raised when the loop returns.

Buffers: small values (at most ``STACK_BYTES``) live on the stack, where LLVM
promotes scalars to registers; larger ones get space in a scratch area that
the caller allocates (its size is known when compiling). A small carry is copied back
after every iteration, once all new values are computed, so a body that swaps its
carries is correct. A larger carry has two buffers that trade roles every iteration:
the equation that computes its next value writes it into the one this iteration does
not read (``_carry_buffers``); the first iteration reads the initial value in place, and
the loop's output is one of the two, so nothing is copied in, back or out. A scan's
stacked outputs are written row by row by the equations that compute them. A carry whose new
value is the old one with a window replaced (``lax.dynamic_update_slice``, ``x.at[i].set(v)``
and the other scatters) is updated in its own buffer where nothing reads the old value after
the update (``_in_place_updates``: the update is moved after what reads it): the window is
written, not the whole carry (a fori_loop filling 1000 rows of 64: 4.6 ms -> 47 us). Nothing is
allocated per iteration.

The function is ``void name(i8** buffers, i64, i64)`` like a kernel:
``buffers`` holds the operands, then the outputs, then the scratch area, then the address of
the function table.
"""
from __future__ import annotations

import ctypes
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from llvmlite import ir

from ember import dtypes
from ember.backends.cpu import dot, gemm, kernel, lapack, lowering
from ember.backends.cpu.lowering import I8, I64
from ember.compiler.fusion import fuse, fusion_p
from ember.core.evaluation import impl_rules
from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr, Literal, Var
from ember.core.primitive import higher_order
from ember.lax import control_flow as cf, elementwise as ew, shapes as sh
from ember.lax.dot import dot_general_p

STACK_BYTES = 256
CONTROL_FLOW = (cf.while_p, cf.scan_p, cf.cond_p)
I8P = I8.as_pointer()


def _sub_programs(eqn: Eqn) -> list[ClosedJaxpr]:
    p = eqn.params
    if eqn.primitive is cf.while_p:
        return [p["cond_jaxpr"], p["body_jaxpr"]]
    if eqn.primitive is cf.scan_p:
        return [p["jaxpr"]]
    return list(p["branches"])


def _has_float8(jaxpr: Jaxpr) -> bool:
    """Whether a value of ``jaxpr`` (sub-programs included) has a float8 type."""
    for e in jaxpr.eqns:
        if any(getattr(a, "aval", None) is not None and a.aval.dtype in dtypes.FLOAT8 for a in e.invars + e.outvars):
            return True
        if e.primitive in CONTROL_FLOW and any(_has_float8(c.jaxpr) for c in _sub_programs(e)):
            return True
    return False


def prepare(eqn: Eqn, can_fuse: Callable[[Eqn], bool]) -> list[ClosedJaxpr] | None:
    """The fused sub-programs of a control-flow equation, if they all lower natively; else None."""
    if _has_float8(Jaxpr([], [], [eqn], [])):
        return None  # (float8 values: the loop runs on the reference interpreter)
    prepared = []
    for closed in _sub_programs(eqn):
        if closed.consts:
            return None
        # (in-place updates are kept out of kernels, their operand being the carry's buffer, and
        # last in the body, after whatever else reads the carry's value before the update)
        updates = _in_place_updates(closed.jaxpr, _carried(eqn), can_fuse, False) if closed is _body(eqn) else {}
        if updates:
            body = closed.jaxpr
            order = [e for e in body.eqns if id(e) not in updates] + [e for e in body.eqns if id(e) in updates]
            closed = ClosedJaxpr(Jaxpr(body.constvars, body.invars, order, body.outvars), closed.consts)
        fusible = can_fuse if not updates else (lambda e: id(e) not in updates and can_fuse(e))
        fused = fuse(closed, fusible, kernel.MAX_DEPTH, kernel.MAX_PRODUCTS)
        for inner in fused.jaxpr.eqns:
            if inner.primitive in CONTROL_FLOW:
                if prepare(inner, can_fuse) is None:
                    return None
            elif inner.primitive is dot_general_p:
                if dot.gemm_layout(inner) is None:
                    return None
            elif inner.primitive is sh.dynamic_update_slice_p:
                continue  # (in place, or a copy and the window: ``emit_update``)
            elif inner.primitive in kernel.SCATTERS and can_fuse(inner):
                continue  # (a kernel of its own, in place or not: ``emit_scatter``)
            elif inner.primitive is not fusion_p and not lapack.lowers(inner) and not is_host_call(inner):
                return None
        prepared.append(fused)
    return prepared


def _body(eqn: Eqn) -> ClosedJaxpr | None:
    """The body of a loop (None for a conditional)."""
    if eqn.primitive is cf.while_p:
        return eqn.params["body_jaxpr"]
    return eqn.params["jaxpr"] if eqn.primitive is cf.scan_p else None


def _carried(eqn: Eqn) -> list[tuple[int, int]]:
    """A loop body's (input position, output position) pairs of its carries."""
    p = eqn.params
    if eqn.primitive is cf.while_p:
        return [(p["body_nconsts"] + j, j) for j in range(len(eqn.outvars))]
    if eqn.primitive is cf.scan_p:
        return [(p["num_consts"] + j, j) for j in range(p["num_carry"])]
    return []


def _in_place_updates(body: Jaxpr, carried: Sequence[tuple[int, int]],
                      can_fuse: Callable[[Eqn], bool], in_order: bool = True) -> dict[int, Var]:
    """A loop body's updates of a window of a carry, ``carry_out = dynamic_update_slice(carry_in,
    update, *starts)``, that write the window into the carry's own buffer instead of copying the
    whole carry each iteration (a fori_loop filling an array row by row): the update's equation,
    by ``id``, mapped to the carry's input variable. Only where nothing but the carry's output
    reads the new value, and whatever else reads the carry comes before the update and is no
    view of its buffer (the body runs in order: ``a.at[i].set(a[i - 1] * 2)`` reads the row first;
    ``in_order`` False: the updates that could be moved after those readers, as ``prepare`` does).
    A scatter (``x.at[i].set(v)``) is one where it is a kernel (``can_fuse``): its kernel then
    skips the copy of its operand."""
    readers: dict[int, list[int]] = {}
    uses: dict[int, int] = {}
    for i, e in enumerate(body.eqns):
        for a in e.invars:
            readers.setdefault(id(a), []).append(i)
            uses[id(a)] = uses.get(id(a), 0) + 1
    for a in body.outvars:
        uses[id(a)] = uses.get(id(a), 0) + 1
    producers = {id(v): (i, e) for i, e in enumerate(body.eqns) for v in e.outvars}
    outputs = {id(a) for a in body.outvars}
    found: dict[int, Var] = {}
    for position, out_position in carried:
        carry, result = body.invars[position], body.outvars[out_position]
        i, update = producers.get(id(result), (-1, None))
        if update is None or update.primitive not in _UPDATES or update.invars[0] is not carry or \
                any(a is carry for a in update.invars[1:]) or uses[id(result)] != 1 or id(carry) in outputs:
            continue
        if update.primitive is not sh.dynamic_update_slice_p and not can_fuse(update):
            continue
        others = [j for j in readers[id(carry)] if j != i]
        if in_order and any(j > i for j in others) or any(
                body.eqns[j].primitive in _VIEWS or body.eqns[j].primitive is fusion_p and kernel.is_view(body.eqns[j])
                for j in others):
            continue
        found[id(update)] = carry
    return found


_VIEWS = (sh.reshape_p, sh.squeeze_p)  # (unfused, they are views too once fused)
_UPDATES = (sh.dynamic_update_slice_p, *kernel.SCATTERS)  # (``x.at[i].set(v)`` is a scatter)


def is_host_call(eqn: Eqn) -> bool:
    """Whether a loop runs ``eqn`` by calling its reference rule (no native code, no sub-programs)."""
    return eqn.primitive in impl_rules and eqn.primitive not in higher_order and eqn.primitive not in CONTROL_FLOW


def library_routines(eqn: Eqn) -> list[tuple[str, ...]]:
    """The routine tuples (``lapack.routines``) of the decompositions in a control-flow
    equation, nested ones included, sorted: their order in the loop's function table."""
    found = set()
    for closed in _sub_programs(eqn):
        for inner in closed.jaxpr.eqns:
            if lapack.lowers(inner):
                found.add(lapack.routines(inner))
            elif inner.primitive in CONTROL_FLOW:
                found.update(library_routines(inner))
    return sorted(found)


_tables: dict[tuple[str, ...], ctypes.Array] = {}  # (kept for the process's life)


HOST_SIGNATURE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p))


class HostCalls:
    """The Python functions a loop's host calls call, in a function table of their own: gemm's
    entries, the LAPACK routines, then these (``address``). ``check`` raises what one raised."""

    def __init__(self, eqn: Eqn, host_eqns: tuple) -> None:
        self.errors: list[BaseException] = []
        self.functions = [HOST_SIGNATURE(host_function(e, self.errors)) for e in host_eqns]
        gemm.function_table(product_functions(eqn))
        names = [name for group in library_routines(eqn) for name in group]
        self.table = (ctypes.c_void_p * (len(gemm.FUNCTION_TABLE) + len(names) + len(self.functions)))(
            *gemm.FUNCTION_TABLE[:], *[lapack.address(name) for name in names],
            *[ctypes.cast(f, ctypes.c_void_p).value for f in self.functions])
        self.address = ctypes.addressof(self.table)

    def check(self) -> None:
        if self.errors:
            error = self.errors[0]
            self.errors.clear()
            raise error


def host_function(eqn: Eqn, errors: list) -> Callable[[Any], None]:
    """``run(pointers)``: the reference rule of ``eqn`` on the buffers at ``pointers`` (its
    operands, then its outputs); an exception is kept in ``errors``, and then nothing runs."""
    rule, params, multiple = impl_rules[eqn.primitive], eqn.params, eqn.primitive.multiple_results
    in_avals, out_avals = [a.aval for a in eqn.invars], [v.aval for v in eqn.outvars]

    def view(address: int, aval: Any) -> np.ndarray:
        nbytes = aval.size * aval.dtype.itemsize
        if not nbytes:
            return np.empty(aval.shape, aval.dtype)
        return np.frombuffer((ctypes.c_char * nbytes).from_address(address), aval.dtype).reshape(aval.shape)

    def run(pointers: Any) -> None:
        if errors:
            return
        try:
            args = [view(pointers[i], a).copy() for i, a in enumerate(in_avals)]  # (the rule may keep them)
            with np.errstate(all="ignore"):
                results = rule(*args, **params)
            for k, (value, a) in enumerate(zip(results if multiple else (results,), out_avals)):
                value = np.asarray(value)
                np.copyto(view(pointers[len(in_avals) + k], a),
                          np.broadcast_to(value if value.dtype == a.dtype else value.astype(a.dtype), a.shape))
        except BaseException as error:  # (a ctypes callback cannot raise: the loop's caller does)
            errors.append(error)
    return run


def function_table(eqn: Eqn) -> int:
    """The address of the function table of a control-flow equation's loop without host calls:
    ``gemm``'s, or a copy of its entries followed by the LAPACK routines (``library_routines``)."""
    table = gemm.function_table(product_functions(eqn))
    names = tuple(name for group in library_routines(eqn) for name in group)
    if not names:
        return table
    if names not in _tables:
        _tables[names] = (ctypes.c_void_p * (len(gemm.FUNCTION_TABLE) + len(names)))()
    combined = _tables[names]
    combined[:len(gemm.FUNCTION_TABLE)] = gemm.FUNCTION_TABLE[:]  # (entries are only ever filled in)
    combined[len(gemm.FUNCTION_TABLE):] = [lapack.address(name) for name in names]
    return ctypes.addressof(combined)


def product_functions(eqn: Eqn) -> set[tuple[np.dtype, bool]]:
    """The products that a control-flow equation's loop calls: ``gemm``'s (dtype, skinny) pairs."""
    found = set()
    for closed in _sub_programs(eqn):
        for inner in closed.jaxpr.eqns:
            if inner.primitive is dot_general_p and dot.on_gemm(inner):
                dtype, layout = inner.outvars[0].aval.dtype, dot.gemm_layout(inner)
                found.add((dtype, layout is not None and gemm.is_skinny(layout, dtype)))
            elif inner.primitive in CONTROL_FLOW:
                found |= product_functions(inner)
    return found


def _accumulations(body: Jaxpr, carried: Sequence[tuple[int, int]]) -> dict[int, tuple[Var, float]]:
    """A loop body's accumulations ``carry_out = carry_in + c * product`` (``c`` a literal, or
    -1 for ``carry - product``: an SGD step, a gradient's sum), which the product can do in the
    carry's buffer (gemm's ``C += alpha * A @ B``), so that neither the sum kernel nor the copy
    back runs: the product and the sum's kernel, by ``id``, mapped to (the carry's input
    variable, ``c``). Only where nothing else reads the product or the sum, and the carry is
    read by nothing after the product (the body runs in order: an SGD step's forward pass reads
    the weights before their gradient's product updates them)."""
    uses: dict[int, int] = {}
    for atom in [a for e in body.eqns for a in e.invars] + list(body.outvars):
        uses[id(atom)] = uses.get(id(atom), 0) + 1
    producers = {id(v): e for e in body.eqns for v in e.outvars}
    order = {id(e): i for i, e in enumerate(body.eqns)}
    readers: dict[int, list[int]] = {}
    for i, e in enumerate(body.eqns):
        for a in e.invars:
            readers.setdefault(id(a), []).append(i)
    outputs = {id(a) for a in body.outvars}
    found: dict[int, tuple[Var, float]] = {}
    for position, out_position in carried:
        carry, result = body.invars[position], body.outvars[out_position]
        kernel_eqn = producers.get(id(result))
        if kernel_eqn is None or kernel_eqn.primitive is not fusion_p or len(kernel_eqn.invars) != 2 or \
                uses[id(result)] != 1 or id(carry) in outputs or carry not in kernel_eqn.invars:
            continue
        other = kernel_eqn.invars[1] if kernel_eqn.invars[0] is carry else kernel_eqn.invars[0]
        product = producers.get(id(other))
        if product is None or product.primitive is not dot_general_p or uses[id(other)] != 1 or \
                product.outvars[0].aval.strip_weak_type() != carry.aval.strip_weak_type() or \
                dot.gemm_layout(product) is None or \
                any(i >= order[id(product)] and i != order[id(kernel_eqn)] for i in readers[id(carry)]):
            continue
        sub = kernel_eqn.params["jaxpr"].jaxpr
        inner = dict(zip(map(id, kernel_eqn.invars), sub.invars))
        scale = _scaled_sum(sub, inner[id(carry)], inner[id(other)])
        if scale is not None:
            found[id(product)] = found[id(kernel_eqn)] = (carry, scale)
    return found


def _accumulated_carries(body: Jaxpr, carried: Sequence[tuple[int, int]], can_fuse: Callable[[Eqn], bool]) -> set[int]:
    """The output positions of the carries that ``body`` updates in their own buffer
    (``_accumulations``, ``_in_place_updates``)."""
    targets = {id(carry) for carry, _ in _accumulations(body, carried).values()}
    targets |= {id(carry) for carry in _in_place_updates(body, carried, can_fuse).values()}
    return {out for position, out in carried if id(body.invars[position]) in targets}


@dataclass(eq=False)
class _Carry:
    """A loop carry's buffers: ``start`` is read by the first iteration (the initial value, or a
    copy of it), ``other`` is written by it (None: a small carry, always in ``start``); ``spare``
    takes the initial value's turn once that is read (None: ``start`` is writable); ``out`` is
    the loop's output. ``current_phi``, ``other_phi``: the header's phis of the two roles."""
    nbytes: int
    start: ir.Value
    other: ir.Value | None
    spare: ir.Value | None
    out: ir.Value
    current_phi: Any = None
    other_phi: Any = None


def _scaled_sum(sub: Jaxpr, carry: Var, product: Var) -> float | None:
    """``c`` if the kernel ``sub`` computes ``carry + c * product`` (``carry - product``: -1;
    ``carry +- literal * product``), elementwise in one type; else None."""
    eqns = sub.eqns
    last = eqns[-1] if eqns else None
    if last is None or last.outvars[0] is not sub.outvars[0] or last.primitive not in (ew.add_p, ew.sub_p):
        return None
    sign = -1.0 if last.primitive is ew.sub_p else 1.0
    if len(eqns) == 1:
        terms, scale = list(last.invars), 1.0
    elif len(eqns) == 2 and eqns[0].primitive is ew.mul_p:
        factors = eqns[0].invars
        literal = next((a for a in factors if isinstance(a, Literal) and a.aval.shape == ()), None)
        if literal is None or product not in factors:
            return None
        scaled = eqns[0].outvars[0]
        terms, scale = [product if a is scaled else a for a in last.invars], float(np.asarray(literal.val))
    else:
        return None
    if terms == [carry, product]:
        return sign * scale
    if terms == [product, carry] and sign == 1.0:
        return scale
    return None


def _nbytes(v: Any) -> int:
    return v.aval.size * v.aval.dtype.itemsize


class LoopFunction:
    """Emits the LLVM function of one control-flow equation (and whatever it nests)."""

    def __init__(self, module: ir.Module, name: str, eqn: Eqn, can_fuse: Callable[[Eqn], bool],
                 subs: list[ClosedJaxpr]) -> None:
        """``subs``: the equation's sub-programs as ``prepare`` returned them."""
        self.module, self.can_fuse = module, can_fuse
        self.name = name
        self.kernel_names = itertools.count()  # per function: the same program gives the same IR
        self.fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I8P.as_pointer(), I64, I64]), name=name)
        self.allocas = ir.IRBuilder(self.fn.append_basic_block("allocas"))
        entry = self.fn.append_basic_block("entry")
        self.b = ir.IRBuilder(entry)
        self.scratch_bytes = 0
        buffers = self.fn.args[0]
        pointers = [self.b.load(self.b.gep(buffers, [ir.Constant(I64, i)]))
                    for i in range(len(eqn.invars) + len(eqn.outvars) + 2)]
        self.products = self.b.bitcast(pointers.pop(), I8P.as_pointer())  # the function table
        self.products_called = 0
        self.library_offsets: dict[tuple[str, ...], int] = {}  # where each routine tuple's entries start
        offset = len(gemm.FUNCTION_TABLE)
        for group in library_routines(eqn):
            self.library_offsets[group] = offset
            offset += len(group)
        self.host_base = offset  # the host calls' entries follow, in the order of ``host_calls``
        self.host_calls: list[Eqn] = []
        self.scratch = pointers[-1]
        env = {}
        for v, ptr in zip(eqn.invars, pointers):
            if isinstance(v, Var):
                env[id(v)] = ptr
        outs = pointers[len(eqn.invars):-1]
        self.emit_control_flow(eqn, env, outs, subs)
        self.b.ret_void()
        self.allocas.branch(entry)

    # --- buffers ---
    def buffer(self, nbytes: int) -> ir.Value:
        """Space for a value: on the stack if small, else in the scratch area (64-byte aligned)."""
        if nbytes <= STACK_BYTES:
            slot = self.allocas.alloca(ir.ArrayType(I8, max(nbytes, 1)))
            slot.align = 64
            return self.allocas.bitcast(slot, I8P)
        offset = self.scratch_bytes
        self.scratch_bytes += -(-nbytes // 64) * 64
        return self.b.gep(self.scratch, [ir.Constant(I64, offset)])

    def copy(self, dst: ir.Value, src: ir.Value, nbytes: int) -> None:
        if nbytes == 0:
            return
        self.b.call(lowering.memcpy(self.module), [dst, src, ir.Constant(I64, nbytes), ir.Constant(lowering.I1, 0)])

    def atom(self, a: Any, env: dict) -> ir.Value:
        """A pointer to an operand's value; literals are stored into a stack slot first."""
        if isinstance(a, Var):
            return env[id(a)]
        slot = self.buffer(a.aval.dtype.itemsize)
        typed = self.b.bitcast(slot, lowering.storage_type(a.aval.dtype).as_pointer())
        lowering.store(self.b, lowering.const(a.aval.dtype, np.asarray(a.val).item()), typed, a.aval.dtype)
        return slot

    # --- blocks of equations ---
    def emit_block(self, jaxpr: Jaxpr, env: dict, carried: Sequence[tuple[int, int]] = (),
                   destinations: dict[int, ir.Value] | None = None) -> list[ir.Value]:
        """Run the equations of ``jaxpr`` (its inputs bound in ``env``); pointers to its outputs.
        ``carried``: (input position, output position) pairs of a loop body's carries, whose
        ``carry + product`` is accumulated in the carry's own buffer (``_accumulations``).
        ``destinations``: where the equation that computes an output variable (by ``id``) writes
        it, instead of a buffer of its own (``_destinations``: a scan's slice of its stacked
        output, a carry's next buffer)."""
        into = _accumulations(jaxpr, carried)
        updates = _in_place_updates(jaxpr, carried, self.can_fuse)
        destinations = destinations or {}

        def space(v: Var) -> ir.Value:
            return destinations[id(v)] if id(v) in destinations else self.buffer(_nbytes(v))

        for eqn in jaxpr.eqns:
            target = into.get(id(eqn))
            if target is not None:  # the product added to its carry, or the addition done by it
                carry, scale = target
                outs = [env[id(carry)]]
                if eqn.primitive is dot_general_p:
                    self.emit_product(eqn, env, outs[0], accumulate=scale)
            elif id(eqn) in updates or eqn.primitive is sh.dynamic_update_slice_p or \
                    eqn.primitive in kernel.SCATTERS and self.can_fuse(eqn):  # (in place: into the carry's buffer)
                outs = [env[id(updates[id(eqn)])]] if id(eqn) in updates else [space(eqn.outvars[0])]
                if eqn.primitive is sh.dynamic_update_slice_p:
                    self.emit_update(eqn, env, outs[0], in_place=id(eqn) in updates)
                else:
                    self.emit_kernel(_kernel_of(eqn), env, outs[0], operand_in_output=id(eqn) in updates)
            elif eqn.primitive in CONTROL_FLOW:
                outs = [space(v) for v in eqn.outvars]
                self.emit_control_flow(eqn, env, outs)
            elif eqn.primitive is dot_general_p:
                outs = [space(eqn.outvars[0])]
                self.emit_product(eqn, env, outs[0])
            elif lapack.lowers(eqn):
                outs = [space(v) for v in eqn.outvars]
                self.emit_library_call(eqn, env, outs)
            elif is_host_call(eqn):
                outs = [space(v) for v in eqn.outvars]
                self.emit_host_call(eqn, env, outs)
            elif kernel.is_view(eqn):
                outs = [env[id(eqn.invars[0])]]
            else:
                outs = [space(eqn.outvars[0])]
                self.emit_kernel(eqn, env, outs[0])
            for v, ptr in zip(eqn.outvars, outs):
                env[id(v)] = ptr
        return [self.atom(a, env) for a in jaxpr.outvars]

    def emit_kernel(self, eqn: Eqn, env: dict, out: ir.Value, operand_in_output: bool = False) -> None:
        """A fusion equation's kernel; ``operand_in_output``: a scatter's, whose output holds its operand."""
        sub = eqn.params["jaxpr"].jaxpr
        builder = kernel.KernelBuilder(self.module, f"{self.name}_k{next(self.kernel_names)}", sub)
        builder.operand_in_output = operand_in_output
        builder.build()
        params = builder.fn.args
        args = [self.b.bitcast(env[id(v)], p.type) for v, p in zip(eqn.invars, params)]
        args.append(self.b.bitcast(out, params[len(eqn.invars)].type))
        self.b.call(builder.fn, args + [ir.Constant(I64, 0), ir.Constant(I64, builder.extent)])

    def emit_update(self, eqn: Eqn, env: dict, out: ir.Value, in_place: bool) -> None:
        """``dynamic_update_slice``: the update's window copied into ``out``, which holds the
        operand already (``in_place``: the carry's buffer), or into a copy of the operand."""
        operand, update, *starts = eqn.invars
        shape, window, dtype = operand.aval.shape, update.aval.shape, operand.aval.dtype
        if not in_place:
            self.copy(out, self.atom(operand, env), _nbytes(operand))
        if not update.aval.size:
            return
        e = _emitter(self.module, self.b)
        begins = []
        for start, n, k in zip(starts, shape, window):
            raw = lowering.load(self.b, self.b.bitcast(self.atom(start, env), lowering.storage_type(
                start.aval.dtype).as_pointer()), start.aval.dtype)
            begin = lowering.convert(e, raw, start.aval.dtype, np.dtype(np.int64))
            low = self.b.select(self.b.icmp_signed("<", begin, ir.Constant(I64, 0)), ir.Constant(I64, 0), begin)
            high = ir.Constant(I64, n - k)  # (clamped into [0, n - k], as the reference does)
            begins.append(self.b.select(self.b.icmp_signed(">", low, high), high, low))
        source = self.atom(update, env)
        itemsize = dtype.itemsize
        run = (window[-1] if window else 1) * itemsize  # bytes of one contiguous row of the window

        def rows(depth: int, offset: ir.Value, source_offset: ir.Value) -> None:
            """Copy the window's rows under the leading indices so far (element offsets)."""
            if depth >= len(window) - 1:
                last = begins[-1] if window else ir.Constant(I64, 0)
                at = self.b.mul(self.b.add(offset, last), ir.Constant(I64, itemsize))
                self.b.call(lowering.memcpy(self.module), [
                    self.b.gep(out, [at]), self.b.gep(source, [self.b.mul(source_offset, ir.Constant(I64, itemsize))]),
                    ir.Constant(I64, run), ir.Constant(lowering.I1, 0)])
                return
            def row(index: ir.Value) -> None:
                at = self.b.add(begins[depth], index)
                rows(depth + 1, self.b.mul(self.b.add(offset, at), ir.Constant(I64, shape[depth + 1])),
                     self.b.mul(self.b.add(source_offset, index), ir.Constant(I64, window[depth + 1])))

            lowering.counted_loop(self.fn, self.b, ir.Constant(I64, 0), ir.Constant(I64, window[depth]), 1, row)

        rows(0, ir.Constant(I64, 0), ir.Constant(I64, 0))

    def emit_library_call(self, eqn: Eqn, env: dict, outs: list[ir.Value]) -> None:
        """A decomposition: its LAPACK function (generated into this module), given its
        workspace here and its routines' part of the function table."""
        function = lapack.LapackFunction(self.module, f"{self.name}_l{next(self.kernel_names)}", eqn)
        table = self.b.gep(self.products, [ir.Constant(I64, self.library_offsets[lapack.routines(eqn)])])
        buffers = [self.atom(a, env) for a in eqn.invars] + outs
        buffers += [self.buffer(function.scratch_bytes), self.b.bitcast(table, I8P)]
        self.b.call(function.fn, [self.pointer_array(buffers), ir.Constant(I64, 0), ir.Constant(I64, 1)])

    def emit_host_call(self, eqn: Eqn, env: dict, outs: list[ir.Value]) -> None:
        """Call the Python function of ``eqn`` (``HostCalls``) with its operands' and outputs' buffers."""
        slot = self.host_base + len(self.host_calls)
        self.host_calls.append(eqn)
        args = self.pointer_array([self.atom(a, env) for a in eqn.invars] + outs)
        signature = ir.FunctionType(ir.VoidType(), [I8P.as_pointer()])
        function = self.b.bitcast(self.b.load(self.b.gep(self.products, [ir.Constant(I64, slot)])),
                                  signature.as_pointer())
        self.b.call(function, [args])

    def pointer_array(self, pointers: list[ir.Value]) -> ir.Value:
        """An ``i8**`` to a stack array holding ``pointers`` (the buffers argument of a call)."""
        array = self.allocas.alloca(ir.ArrayType(I8P, max(len(pointers), 1)))
        for i, pointer in enumerate(pointers):
            self.b.store(pointer, self.b.gep(array, [ir.Constant(I64, 0), ir.Constant(I64, i)]))
        return self.b.bitcast(array, I8P.as_pointer())

    def emit_product(self, eqn: Eqn, env: dict, out: ir.Value, accumulate: float | None = None) -> None:
        """``gemm`` on the operands' buffers, split over a team when large, or zeros for an empty
        sum; ``accumulate``: ``out += accumulate * product`` (nothing for an empty sum)."""
        layout = dot.gemm_layout(eqn)
        assert layout is not None  # (loops call gemm on the products that have a layout: ``dot.gemm_layout``)
        batch, m, n, k = layout[:4]
        if k == 0 and accumulate is not None:
            return
        if k == 0:
            nbytes = _nbytes(eqn.outvars[0])
            if nbytes:
                memset = self.module.globals.get("llvm.memset.p0.i64") or ir.Function(
                    self.module, ir.FunctionType(ir.VoidType(), [I8P, I8, I64, lowering.I1]), "llvm.memset.p0.i64")
                self.b.call(memset, [out, ir.Constant(I8, 0), ir.Constant(I64, nbytes), ir.Constant(lowering.I1, 0)])
            return
        if batch * m * n == 0:
            return
        dtype = eqn.outvars[0].aval.dtype
        by_columns, extent = gemm.split(m, n, dtype)
        params = ir.GlobalVariable(self.module, ir.ArrayType(I64, 15), f"{self.name}_product{self.products_called}")
        self.products_called += 1
        scale = [1, gemm.alpha_bits(accumulate)] if accumulate is not None else [0, gemm.ALPHA_ONE]
        params.initializer = ir.Constant(ir.ArrayType(I64, 15), [*layout, by_columns, *scale])
        params.global_constant = True
        params.linkage = "private"
        args = self.pointer_array([self.atom(a, env) for a in eqn.invars] + [out, self.b.bitcast(params, I8P)])
        signature = ir.FunctionType(ir.VoidType(), [I8P.as_pointer(), I64, I64])
        index = gemm.TABLE_INDEX[dtype, gemm.is_skinny(layout, dtype)]
        product = self.b.bitcast(self.b.load(self.b.gep(self.products, [ir.Constant(I64, index)])),
                                 signature.as_pointer())
        if batch * m * n * k < gemm.PARALLEL_MIN_MULTIPLY_ADDS or (not by_columns and m < 2 * gemm.MR):
            self.b.call(product, [args, ir.Constant(I64, 0), ir.Constant(I64, extent)])
            return
        # rows or columns split over an OpenMP team (one piece per thread), where there is one
        runner_type = ir.FunctionType(ir.VoidType(), [signature.as_pointer(), I8P.as_pointer(), I64, I64, I64, I64])
        runner = self.b.load(self.b.gep(self.products, [ir.Constant(I64, gemm.TEAM_RUNNER)]))
        team = self.b.ptrtoint(self.b.load(self.b.gep(self.products, [ir.Constant(I64, gemm.THREADS)])), I64)
        with self.b.if_else(self.b.icmp_unsigned("==", runner, ir.Constant(I8P, None))) as (alone, together):
            with alone:
                self.b.call(product, [args, ir.Constant(I64, 0), ir.Constant(I64, extent)])
            with together:
                self.b.call(self.b.bitcast(runner, runner_type.as_pointer()),
                            [product, args, ir.Constant(I64, 0), ir.Constant(I64, extent), team, ir.Constant(I64, 1)])

    def emit_control_flow(self, eqn: Eqn, env: dict, outs: list[ir.Value],
                          subs: list[ClosedJaxpr] | None = None) -> None:
        subs = subs or prepare(eqn, self.can_fuse)
        operands = [self.atom(a, env) for a in eqn.invars]
        {cf.while_p: self._while, cf.scan_p: self._scan, cf.cond_p: self._cond}[eqn.primitive](
            eqn, subs, operands, outs)

    def _bind(self, jaxpr: Jaxpr, pointers: list[ir.Value]) -> dict:
        return {id(v): p for v, p in zip(jaxpr.invars, pointers)}

    def _carry_buffers(self, avals: list, inits: list[ir.Value], outs: list[ir.Value], in_place: set[int],
                       last_into_out: bool) -> list[_Carry]:
        """Each carry's buffers. A small one: one stack slot (registers), holding a copy of its
        initial value. A larger one: two buffers that trade roles every iteration
        (``_carry_phis``), the body writing the next value into the one it does not read; the
        first iteration reads the initial value where it is, and the carry's output is one of
        the two (the last iteration's when ``last_into_out``), so neither end copies. A larger
        carry that the body updates in place (``in_place``: an accumulation, a window) starts
        from a copy of its initial value in its output, and stays there."""
        carries = []
        for k, (a, init, out) in enumerate(zip(avals, inits, outs)):
            nbytes = a.size * a.dtype.itemsize
            if nbytes <= STACK_BYTES:
                first = self.buffer(nbytes)
                self.copy(first, init, nbytes)
                carries.append(_Carry(nbytes, first, None, None, out))
            elif k in in_place:
                with self.b.if_then(self.b.icmp_unsigned("!=", init, out)):  # (equal: a donated initial value)
                    self.copy(out, init, nbytes)
                carries.append(_Carry(nbytes, out, self.buffer(nbytes), None, out))
            else:
                scratch = self.buffer(nbytes)
                written_first, spare = (out, scratch) if last_into_out else (scratch, out)
                carries.append(_Carry(nbytes, init, written_first, spare, out))
        return carries

    def _carry_phis(self, carries: list[_Carry], before: ir.Block) -> tuple[list[ir.Value], list[ir.Value | None]]:
        """At the top of a loop's header: the buffer each carry is read from in this iteration
        and the one its next value goes to (phis, for carries of two buffers)."""
        current: list[ir.Value] = []
        others: list[ir.Value | None] = []
        for c in carries:
            if c.other is None:
                current.append(c.start)
                others.append(None)
                continue
            c.current_phi, c.other_phi = self.b.phi(I8P), self.b.phi(I8P)
            c.current_phi.add_incoming(c.start, before)
            c.other_phi.add_incoming(c.other, before)
            current.append(c.current_phi)
            others.append(c.other_phi)
        return current, others

    @staticmethod
    def _destinations(body: Jaxpr, targets: Sequence[tuple[int, ir.Value | None]]) -> dict[int, ir.Value]:
        """Where the equations of ``body`` write its outputs: (output position, buffer) pairs,
        for outputs that an equation of the body computes, each variable once."""
        computed = {id(v) for e in body.eqns for v in e.outvars}
        found: dict[int, ir.Value] = {}
        for position, target in targets:
            v = body.outvars[position]
            if target is not None and id(v) in computed and id(v) not in found:
                found[id(v)] = target
        return found

    def _update_carries(self, carries: list[_Carry], new: list[ir.Value]) -> None:
        """Each carry takes its ``new`` value, as one simultaneous assignment, at the end of the
        body: a carry of two buffers reads on from the one its value is in (copied into its
        other buffer, unless it is there or unchanged: nothing is written that this iteration
        reads; the buffer read first, when it is the initial value's, is not written: the spare
        takes its turn); a small carry is copied back (by way of a temporary where it takes
        another one's value)."""
        block = None
        for c, ptr in zip(carries, new):
            if c.other is None:
                continue
            current, other = c.current_phi, c.other_phi
            if ptr is current:
                following = (current, other)
            else:
                if ptr is not other:
                    self.copy(other, ptr, c.nbytes)
                if c.spare is not None:  # (the initial value's buffer is read, never written)
                    current = self.b.select(self.b.icmp_unsigned("==", current, c.start), c.spare, current)
                following = (other, current)
            block = self.b.block
            c.current_phi.add_incoming(following[0], block)
            c.other_phi.add_incoming(following[1], block)
        small = [(c, ptr) for c, ptr in zip(carries, new) if c.other is None]
        staged = []
        for c, ptr in small:
            if any(ptr is d.start for d, _ in small if d is not c):  # the body passes another carry through
                temp = self.buffer(c.nbytes)
                self.copy(temp, ptr, c.nbytes)
                ptr = temp
            staged.append(ptr)
        for (c, _), src in zip(small, staged):
            if c.start is not src:
                self.copy(c.start, src, c.nbytes)
        assert block is None or block is self.b.block  # (copies add no blocks: the phis' edge is this one)

    def _carry_outputs(self, carries: list[_Carry], current: list[ir.Value]) -> None:
        """After the loop: each carry's value into its output, unless it is there already."""
        for c, ptr in zip(carries, current):
            if c.spare is None and c.start is not c.out:
                self.copy(c.out, ptr, c.nbytes)
                continue
            with self.b.if_then(self.b.icmp_unsigned("!=", ptr, c.out)):
                self.copy(c.out, ptr, c.nbytes)

    def _loop_blocks(self) -> tuple[ir.Block, ir.Block, ir.Block]:
        return (self.fn.append_basic_block("loop"), self.fn.append_basic_block("body"),
                self.fn.append_basic_block("done"))

    def _while(self, eqn: Eqn, subs, operands, outs) -> None:
        cond, body = subs
        n_cond, n_body = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
        cond_consts, body_consts = operands[:n_cond], operands[n_cond:n_cond + n_body]
        avals = [v.aval for v in eqn.outvars]
        carried = [(n_body + j, j) for j in range(len(avals))]
        pairs = self._carry_buffers(avals, operands[n_cond + n_body:], outs,
                                    _accumulated_carries(body.jaxpr, carried, self.can_fuse), True)
        header, body_block, done = self._loop_blocks()
        before = self.b.block
        self.b.branch(header)
        self.b = ir.IRBuilder(header)
        carries, others = self._carry_phis(pairs, before)
        predicate = self.emit_block(cond.jaxpr, self._bind(cond.jaxpr, cond_consts + carries))[0]
        go_on = self.b.icmp_unsigned("!=", self.b.load(predicate), ir.Constant(I8, 0))
        self.b.cbranch(go_on, body_block, done)
        self.b = ir.IRBuilder(body_block)
        new = self.emit_block(body.jaxpr, self._bind(body.jaxpr, body_consts + carries), carried,
                              self._destinations(body.jaxpr, list(enumerate(others))))
        self._update_carries(pairs, new)
        self.b.branch(header)
        self.b = ir.IRBuilder(done)
        self._carry_outputs(pairs, carries)

    def _scan(self, eqn: Eqn, subs, operands, outs) -> None:
        (body,) = subs
        p = eqn.params
        n_consts, n_carry, length = p["num_consts"], p["num_carry"], p["length"]
        consts, xs = operands[:n_consts], operands[n_consts + n_carry:]
        carry_avals = [v.aval for v in eqn.outvars[:n_carry]]
        carried = [(n_consts + j, j) for j in range(n_carry)]
        pairs = self._carry_buffers(carry_avals, operands[n_consts:n_consts + n_carry], outs[:n_carry],
                                    _accumulated_carries(body.jaxpr, carried, self.can_fuse), length % 2 == 1)
        x_bytes = [_nbytes(v) // max(length, 1) for v in eqn.invars[n_consts + n_carry:]]
        y_bytes = [_nbytes(v) // max(length, 1) for v in eqn.outvars[n_carry:]]
        header, body_block, done = self._loop_blocks()
        before = self.b.block
        self.b.branch(header)
        self.b = ir.IRBuilder(header)
        i = self.b.phi(I64)
        i.add_incoming(ir.Constant(I64, 0), before)
        carries, others = self._carry_phis(pairs, before)
        self.b.cbranch(self.b.icmp_signed("<", i, ir.Constant(I64, length)), body_block, done)
        self.b = ir.IRBuilder(body_block)
        step = self.b.sub(ir.Constant(I64, length - 1), i) if p["reverse"] else i
        slices = [self.b.gep(x, [self.b.mul(step, ir.Constant(I64, nb))]) for x, nb in zip(xs, x_bytes)]
        ys = [self.b.gep(y_out, [self.b.mul(step, ir.Constant(I64, nb))]) for y_out, nb in zip(outs[n_carry:], y_bytes)]
        # (each stacked output's row written in place by the equation that computes it)
        targets = list(enumerate(others)) + [(n_carry + j, y) for j, y in enumerate(ys)]
        new = self.emit_block(body.jaxpr, self._bind(body.jaxpr, consts + carries + slices), carried,
                              self._destinations(body.jaxpr, targets))
        for y_row, y, nb in zip(ys, new[n_carry:], y_bytes):
            if y is not y_row:
                self.copy(y_row, y, nb)
        self._update_carries(pairs, new[:n_carry])
        i.add_incoming(self.b.add(i, ir.Constant(I64, 1)), self.b.block)
        self.b.branch(header)
        self.b = ir.IRBuilder(done)
        self._carry_outputs(pairs, carries)

    def _cond(self, eqn: Eqn, subs, operands, outs) -> None:
        index_aval = eqn.invars[0].aval
        raw = lowering.load(self.b, self.b.bitcast(operands[0], lowering.storage_type(index_aval.dtype).as_pointer()),
                            index_aval.dtype)
        index = lowering.convert(_emitter(self.module, self.b), raw, index_aval.dtype, np.dtype(np.int64))
        done = self.fn.append_basic_block("merge")
        blocks = [self.fn.append_basic_block(f"branch{k}") for k in range(len(subs))]
        # As the reference: an index out of range selects the last branch.
        switch = self.b.switch(index, blocks[-1])
        for k, block in enumerate(blocks[:-1]):
            switch.add_case(ir.Constant(I64, k), block)
        for branch, block in zip(subs, blocks):
            self.b = ir.IRBuilder(block)
            results = self.emit_block(branch.jaxpr, self._bind(branch.jaxpr, operands[1:]))
            for dst, src, v in zip(outs, results, eqn.outvars):
                self.copy(dst, src, _nbytes(v))
            self.b.branch(done)
        self.b = ir.IRBuilder(done)


def _kernel_of(eqn: Eqn) -> Eqn:
    """A fusion equation of ``eqn`` alone (a scatter that was kept out of kernels)."""
    inputs = list({id(a): a for a in eqn.invars if isinstance(a, Var)}.values())
    fresh = {id(v): Var(v.aval) for v in inputs}
    inner = eqn.replace(invars=[fresh[id(a)] if isinstance(a, Var) else a for a in eqn.invars],
                        outvars=[Var(v.aval) for v in eqn.outvars])
    sub = Jaxpr([], [fresh[id(v)] for v in inputs], [inner], list(inner.outvars))
    return Eqn(fusion_p, inputs, {"jaxpr": ClosedJaxpr(sub, []), "name": eqn.primitive.name}, list(eqn.outvars))


def _emitter(module: ir.Module, b: ir.IRBuilder) -> lowering.Emitter:
    e = lowering.Emitter(module)
    e.b = b
    return e
