"""How each equation of a kernel computes its element at an index (the kernel's rule table).

``index_rules[p](kernel, eqn, index, scope)`` computes the value of ``eqn``'s
output at ``index``, asking the kernel for operand values at the indices it
needs: elementwise rules at the same index, index-remapping rules (broadcast,
reshape, transpose, slice, pad, concatenate, ...) at rewritten indices, and
reductions and products in loops over the reduced (contracted) axes. The
``*_row`` functions compute a whole output row at once, for the kernel's row
buffers (see ``KernelBuilder._rows_to_materialize``).

A rule is a generator: it asks for an operand's element by yielding a ``Read``
(``x = yield Read(atom, index, scope)``) and returns its Scalar. It never calls the
kernel to evaluate an operand: the kernel runs the rules on an explicit stack, in
the order in which calls would run them, so that the length of a chain of
equations is not bounded by Python's recursion limit.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from llvmlite import ir

from ember import dtypes
from ember.backends.cpu import lowering
from ember.backends.cpu.complex_math import Cx
from ember.backends.cpu.loops import Index, Loop, Read, Reads, Region, Scalar, Scope, int_const
from ember.backends.cpu.lowering import I64, Emitter, const, register_type
from ember.backends.reference.dot import accumulation_dtype  # (bool counts in int32, half precision in float32)
from ember.backends.reference.indexing import default_fill_value
from ember.core.primitive import Primitive, RuleTable
from ember.lax import elementwise as ew, indexing as ix, reductions as red, shapes as sh
from ember.lax.convolution import sliding_windows_p
from ember.lax.dot import dot_general_p

if TYPE_CHECKING:
    from ember.backends.cpu.kernel import KernelBuilder
    from ember.core.ir import Var

IndexRule = Callable[["KernelBuilder", Any, Index, Scope], Reads]
index_rules: RuleTable = RuleTable("index_rules")


# --- elementwise ---------------------------------------------------------------------------------------
def elementwise(k: KernelBuilder, eqn, index: Index, scope: Scope) -> Reads:
    args = []
    for a in eqn.invars:
        args.append((yield Read(a, index, scope)))
    return _apply(k, eqn, args, scope)


def _apply(k: KernelBuilder, eqn, args: list[Scalar], scope: Scope) -> Scalar:
    """``eqn``'s lowering rule on its operands' values, emitted at the depth of the deepest."""
    depth = max((a.depth for a in args), default=0)
    in_dts = [a.aval.dtype for a in eqn.invars]
    rule = lowering.lower_rules[eqn.primitive]
    return k.emit_op(depth, scope, lambda: rule(k.emitter, in_dts, eqn.outvars[0].aval.dtype,
                                                *(a.value for a in args), **eqn.params))


def _divide(k: KernelBuilder, eqn, index: Index, scope: Scope) -> Reads:
    """A float32 / float64 division by a value computed in an outer loop of the dividend's (a
    row's, like softmax's sum) multiplies by that value's reciprocal, computed once there, as XLA
    does for a division by a broadcast (JAX's bits; within an ulp of the quotient): a vector
    division costs 5-10 multiplies (znver4: softmax 4096x1024 in 0.92 of the time). Divisions by
    literals and by values that do not depend on a loop divide."""
    x = yield Read(eqn.invars[0], index, scope)
    y = yield Read(eqn.invars[1], index, scope)
    dt = eqn.outvars[0].aval.dtype
    if not (0 < y.depth < x.depth and dt in (dtypes.float32, dtypes.float64)
            and all(a.aval.dtype == dt for a in eqn.invars)):
        return _apply(k, eqn, [x, y], scope)
    e = k.emitter
    reciprocal = k.emit_op(y.depth, scope, lambda: e.b.fdiv(const(dt, 1.0), y.value))
    return k.emit_op(x.depth, scope, lambda: e.b.fmul(x.value, reciprocal.value))


def _iota(k: KernelBuilder, eqn, index: Index, scope: Scope) -> Reads:
    yield from ()  # (reads no operand)
    c = index.comps[eqn.params["dimension"]]
    dt = eqn.params["dtype"]
    if c.const is not None:
        return Scalar(const(dt, c.const), 0)
    return k.emit_op(c.depth, scope, lambda: lowering.convert(k.emitter, c.value, dtypes.int64, dt))


# --- index remapping ------------------------------------------------------------------------------------
def _operand_at(k: KernelBuilder, eqn, index: Index, scope: Scope, comps: list[Scalar] | None = None,
                linear: Scalar | None = None) -> Reads:
    operand = eqn.invars[0]
    return (yield Read(operand, Index(k, operand.aval.shape, comps, linear), scope))


def _broadcast_in_dim(k, eqn, index, scope):
    shape = eqn.invars[0].aval.shape
    comps = [int_const(0) if n == 1 else index.comps[d] for n, d in zip(shape, eqn.params["broadcast_dimensions"])]
    return (yield from _operand_at(k, eqn, index, scope, comps))


def _reshape(k, eqn, index, scope):
    comps, linear = index.known
    if comps is not None:
        comps = _reshaped_comps(k, comps, index.shape, eqn.invars[0].aval.shape)
    if comps is None and linear is None:
        linear = index.linear  # (the same offset in both shapes)
    return (yield from _operand_at(k, eqn, index, scope, comps, linear))


def _reshaped_comps(k: KernelBuilder, comps: list[Scalar], shape: tuple, to: tuple) -> list[Scalar] | None:
    """The components of the same element in the reshape of ``shape`` to ``to``, group by group:
    the shortest runs of dimensions of the two shapes with equal products (size-1 dimensions are
    index 0). A dimension that is its own group keeps its component, so a value that depends on
    the outer loops only stays out of the inner ones (through a linear offset every component
    would depend on the innermost loop)."""
    if 0 in shape:
        return None
    src = [d for d, n in enumerate(shape) if n != 1]
    dst = [d for d, n in enumerate(to) if n != 1]
    out = [int_const(0)] * len(to)
    i = j = 0
    while i < len(src):
        group, parts = [src[i]], [dst[j]]
        size, part_size = shape[src[i]], to[dst[j]]
        i, j = i + 1, j + 1
        while size != part_size:
            if size < part_size:
                group.append(src[i])
                size, i = size * shape[src[i]], i + 1
            else:
                parts.append(dst[j])
                part_size, j = part_size * to[dst[j]], j + 1
        if len(group) == 1 and len(parts) == 1:
            out[parts[0]] = comps[group[0]]
            continue
        offset = int_const(0)
        for d in group:
            offset = k.add(k.mul(offset, shape[d]), comps[d])
        for n, d in enumerate(parts):
            size //= to[d]
            q = k.div(offset, size)
            out[d] = q if n == 0 else k.rem(q, to[d])
    return out


def _squeeze(k, eqn, index, scope):
    comps = list(index.comps)
    for d in eqn.params["dimensions"]:
        comps.insert(d, int_const(0))
    return (yield from _operand_at(k, eqn, index, scope, comps))


def _transpose(k, eqn, index, scope):
    perm = eqn.params["permutation"]
    by_dim = dict(zip(perm, index.comps))  # the operand's dimension -> its component
    return (yield from _operand_at(k, eqn, index, scope, [by_dim[d] for d in range(len(perm))]))


def _rev(k, eqn, index, scope):
    shape = eqn.invars[0].aval.shape
    comps = [k.sub_from(n - 1, c) if d in eqn.params["dimensions"] else c
             for d, (c, n) in enumerate(zip(index.comps, shape))]
    return (yield from _operand_at(k, eqn, index, scope, comps))


def _slice(k, eqn, index, scope):
    p = eqn.params
    strides = p["strides"] or (1,) * len(p["start_indices"])
    comps = [k.add(k.mul(c, st), lo) for c, st, lo in zip(index.comps, strides, p["start_indices"])]
    return (yield from _operand_at(k, eqn, index, scope, comps))


def _pad(k, eqn, index, scope):
    """In bounds where (i - lo) is a multiple of (interior + 1) inside the operand; else the pad value."""
    operand, pad_value = eqn.invars
    comps, conditions = [], []
    for c, (lo, _, interior), n in zip(index.comps, eqn.params["padding_config"], operand.aval.shape):
        shifted = k.add(c, -lo)
        step = interior + 1
        src = k.div_signed(shifted, step)
        conditions += [k.compare(">=", shifted, 0), k.compare("<", src, n)]
        if step > 1:
            conditions.append(k.compare("==", k.rem_signed(shifted, step), 0))
        comps.append(k.clamp(src, n))
    fill = yield Read(pad_value, Index(k, (), []), scope)
    if any(c.const == 0 for c in conditions):  # (known to be in the padding: nothing to read)
        return fill
    inside = yield from _operand_at(k, eqn, index, scope, comps)
    return k.select_all(conditions, inside, fill, scope)


def _sliding_windows(k, eqn, index, scope):
    """Element ``[p..., w...]`` is the operand's ``[p * stride + w * dilation]``."""
    p = eqn.params
    n = eqn.invars[0].aval.ndim
    comps = [k.add(k.mul(index.comps[d], stride), k.mul(index.comps[n + d], dilation))
             for d, (stride, dilation) in enumerate(zip(p["window_strides"], p["window_dilation"]))]
    return (yield from _operand_at(k, eqn, index, scope, comps))


def _concatenate(k, eqn, index, scope):
    dim = eqn.params["dimension"]
    c = index.comps[dim]
    starts = np.cumsum([0] + [x.aval.shape[dim] for x in eqn.invars]).tolist()
    pieces = []
    for x, offset, stop in zip(eqn.invars, starts, starts[1:]):
        if k.known("<", c, offset) or k.known(">=", c, stop) or (x is not eqn.invars[-1] and offset == stop):
            continue  # (where ``c`` is known to fall outside the piece: an index of a split loop)
        comps = list(index.comps)
        comps[dim] = k.clamp(k.add(c, -offset), stop - offset)
        pieces.append((offset, (yield Read(x, Index(k, x.aval.shape, comps), scope))))
    out = pieces[0][1]
    for start, piece in pieces[1:]:
        out = k.select_all([k.compare(">=", c, start)], piece, out, scope)
    return out


def _start(k: "KernelBuilder", atom, n: int, size: int, scope: Scope) -> Reads:
    """A traced start index, clamped into [0, n - size] as the reference clamps it."""
    value = yield Read(atom, Index(k, (), []), scope)
    dt = atom.aval.dtype
    wide = k.emit_op(value.depth, scope, lambda: lowering.convert(k.emitter, value.value, dt, np.dtype(np.int64)))
    return k.clamp(wide, n - size + 1)


def _dynamic_slice(k, eqn, index, scope):
    operand, *starts = eqn.invars
    sizes = eqn.params["slice_sizes"]
    comps = []
    for c, s, n, size in zip(index.comps, starts, operand.aval.shape, sizes):
        comps.append(k.add(c, (yield from _start(k, s, n, size, scope))))
    return (yield from _operand_at(k, eqn, index, scope, comps))


def index_vector_entry(k: KernelBuilder, indices: Var, batch: list[Scalar], j: int, scope: Scope) -> Reads:
    """Entry ``j`` of the index vector at position ``batch`` of a gather's or scatter's indices
    (the vector is their last dimension), as an i64."""
    value = yield Read(indices, Index(k, indices.aval.shape, batch + [int_const(j)]), scope)
    return k.emit_op(value.depth, scope, lambda: lowering.convert(
        k.emitter, value.value, indices.aval.dtype, np.dtype(np.int64)))


def _gather(k, eqn, index, scope):
    """The operand at the window start read from ``indices`` (clamped so the window fits) plus
    the offset within the window; in "fill" mode, the fill value where the window does not fit."""
    operand, indices = eqn.invars
    dn, sizes = eqn.params["dimension_numbers"], eqn.params["slice_sizes"]
    shape = operand.aval.shape
    batch = [c for d, c in enumerate(index.comps) if d not in dn.offset_dims]
    starts: list[Scalar] = [int_const(0)] * len(shape)
    conditions = []
    for j, d in enumerate(dn.start_index_map):
        start = yield from index_vector_entry(k, indices, batch, j, scope)
        fits = shape[d] - sizes[d] + 1  # the number of starts at which the window fits
        conditions += [k.compare(">=", start, 0), k.compare("<", start, fits)]
        starts[d] = k.clamp(start, fits)
    for operand_dim, indices_dim in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
        starts[operand_dim] = batch[indices_dim]
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    window_dims = [d for d in range(len(shape)) if d not in dropped]
    comps = list(starts)
    for d, out_dim in zip(window_dims, dn.offset_dims):
        comps[d] = k.add(starts[d], index.comps[out_dim])
    inside = yield Read(operand, Index(k, shape, comps), scope)
    if eqn.params["mode"] != ix.GatherScatterMode.FILL_OR_DROP:
        return inside
    fill = eqn.params["fill_value"]
    dt = operand.aval.dtype
    fill = Scalar(const(dt, default_fill_value(dt) if fill is None else fill), 0)
    return k.select_all(conditions, inside, fill, scope)


def _dynamic_update_slice(k, eqn, index, scope):
    """The update where the index falls inside its window, else the operand."""
    operand, update, *starts = eqn.invars
    window, conditions = [], []
    for c, s, n, size in zip(index.comps, starts, operand.aval.shape, update.aval.shape):
        offset = k.sub(c, (yield from _start(k, s, n, size, scope)))
        conditions += [k.compare(">=", offset, 0), k.compare("<", offset, size)]
        window.append(k.clamp(offset, size))
    inside = yield Read(update, Index(k, update.aval.shape, window), scope)
    return k.select_all(conditions, inside, (yield Read(operand, index, scope)), scope)


# --- reductions -------------------------------------------------------------------------------------------
def _accumulate(k: KernelBuilder, index: Index, scope: Scope, sizes: list[int], acc_type: ir.Type,
                init: ir.Value, step: Callable[[list[Scalar], Scope, ir.Value], Reads]) -> Reads:
    """A loop nest over ``sizes`` at the depth of ``index`` (so it runs once per value of the
    loops it depends on), folding ``acc = step(loop indices, scope, acc)`` in a stack slot
    (which LLVM promotes to a register, and vectorizes where the fold may be reassociated);
    ``step`` reads operands as rules do."""
    depth = max((c.depth for c in index.comps), default=0)
    acc = k.alloca(acc_type)
    scope.regions[depth].b.store(init, acc)
    regions = scope.regions[:depth + 1]
    inner = Scope(regions, scope)
    loops, indices = [], []
    for n in sizes:
        loop = Loop(k.fn, regions[-1], ir.Constant(I64, 0), ir.Constant(I64, n), len(regions))
        loops.append(loop)
        regions.append(loop.inner)
        indices.append(int_const(0) if n == 1 else loop.index)
    body_value = yield from step(indices, inner, acc)
    regions[-1].b.store(body_value, acc)
    for loop in reversed(loops):
        loop.close()
    return Scalar(scope.regions[depth].b.load(acc), depth)


def _reduction(k: KernelBuilder, eqn, index: Index, scope: Scope) -> Reads:
    operand = eqn.invars[0]
    shape, axes = operand.aval.shape, eqn.params["axes"]
    dt = operand.aval.dtype
    if eqn.primitive in (red.reduce_max_p, red.reduce_min_p) and dt in (dtypes.float32, dtypes.float64):
        return (yield from _float_extremum(k, eqn, index, scope))

    def step(loop_indices: list[Scalar], inner: Scope, acc: ir.Value) -> Reads:
        reduced, kept = iter(loop_indices), iter(index.comps)
        comps = [next(reduced) if d in axes else next(kept) for d in range(len(shape))]
        element = yield Read(operand, Index(k, shape, comps), inner)
        b = k.emitter.b = inner.regions[-1].b
        return _combine(k.emitter, eqn.primitive, dt, b.load(acc), element.value)

    total = yield from _accumulate(k, index, scope, [shape[d] for d in axes], register_type(dt),
                                   const(dt, _initial_value(eqn.primitive, dt)), step)
    b = scope.regions[total.depth].b
    return Scalar(lowering.round_to(b, total.value, dt), total.depth)


def _float_extremum(k: KernelBuilder, eqn, index: Index, scope: Scope) -> Reads:
    """A float32 / float64 max (min) reduction, IEEE 754-2019's maximum (minimum) of the elements
    (NaN if any is NaN, +0 above -0) as ``llvm.maximum`` folds it, in three reductions that each
    take one instruction an element where ``llvm.maximum`` takes six (x86 without AVX10.2): the
    maximum ignoring NaN and the sign of zero (``maxnum`` with those assumed away: the plain max
    instruction), the largest magnitude's bits (above infinity's only for a NaN) and the smallest
    bits (0 only for +0; for min, of the bits with the sign flipped: 0 only for -0). A NaN among
    the elements gives NaN (and only the first fold's value was then unspecified); a zero result
    takes its sign from whether a +0 (-0) was there."""
    operand = eqn.invars[0]
    shape, axes = operand.aval.shape, eqn.params["axes"]
    dt = operand.aval.dtype
    largest = eqn.primitive is red.reduce_max_p
    ft = register_type(dt)
    bits = ir.IntType(dt.itemsize * 8)
    sign = 1 << (bits.width - 1)
    infinity = int(np.array(np.inf, dt).view(f"u{dt.itemsize}"))
    depth = max((c.depth for c in index.comps), default=0)
    outer = scope.regions[depth].b
    magnitude, smallest = k.alloca(bits), k.alloca(bits)
    outer.store(ir.Constant(bits, 0), magnitude)
    outer.store(ir.Constant(bits, -1), smallest)  # (all bits set: the largest unsigned)
    e = k.emitter

    def step(loop_indices: list[Scalar], inner: Scope, acc: ir.Value) -> Reads:
        reduced, kept = iter(loop_indices), iter(index.comps)
        comps = [next(reduced) if d in axes else next(kept) for d in range(len(shape))]
        x = (yield Read(operand, Index(k, shape, comps), inner)).value
        b = e.b = inner.regions[-1].b
        i = b.bitcast(x, bits)
        b.store(e.call("llvm.umax", [b.load(magnitude), b.and_(i, ir.Constant(bits, sign - 1))]), magnitude)
        b.store(e.call("llvm.umin", [b.load(smallest), i if largest else b.xor(i, ir.Constant(bits, sign))]), smallest)
        fold = e.intrinsic(f"llvm.{'maxnum' if largest else 'minnum'}.{'f32' if dt == dtypes.float32 else 'f64'}",
                           ft, [ft, ft])
        return b.call(fold, [b.load(acc), x], fastmath=("nnan", "nsz"))

    total = yield from _accumulate(k, index, scope, [shape[d] for d in axes], ft,
                                   const(dt, _initial_value(eqn.primitive, dt)), step)
    b = e.b = scope.regions[total.depth].b
    signed_zero = b.select(b.icmp_unsigned("==", b.load(smallest), ir.Constant(bits, 0)),
                           const(dt, 0.0 if largest else -0.0), const(dt, -0.0 if largest else 0.0))
    value = b.select(b.fcmp_ordered("==", total.value, const(dt, 0.0)), signed_zero, total.value)
    nan = b.icmp_unsigned(">", b.load(magnitude), ir.Constant(bits, infinity))
    return Scalar(b.select(nan, const(dt, np.nan), value), total.depth)


def _arg_reduction(k: KernelBuilder, eqn, index: Index, scope: Scope) -> Reads:
    """argmax / argmin: a loop over the reduced axis keeping the best value and its position.
    A later element wins only if strictly better, so ties keep the first; a NaN beats any number
    (both primitives pick the first NaN), as the reference does."""
    operand = eqn.invars[0]
    shape, axis, dt = operand.aval.shape, eqn.params["axis"], operand.aval.dtype
    largest = eqn.primitive is red.argmax_p
    floating = lowering.is_float(dt)
    if floating:
        start = -np.inf if largest else np.inf
    elif dt == dtypes.bool_:
        start = not largest
    else:
        info = np.iinfo(dt)
        start = info.min if largest else info.max
    depth = max((c.depth for c in index.comps), default=0)
    best, where = k.alloca(register_type(dt)), k.alloca(I64)
    outer = scope.regions[depth].b
    outer.store(const(dt, start), best)
    outer.store(ir.Constant(I64, 0), where)
    regions = scope.regions[:depth + 1]
    inner = Scope(regions, scope)
    loop = Loop(k.fn, regions[-1], ir.Constant(I64, 0), ir.Constant(I64, shape[axis]), len(regions))
    regions.append(loop.inner)
    kept = iter(index.comps)
    comps = [loop.index if d == axis else next(kept) for d in range(len(shape))]
    x = (yield Read(operand, Index(k, shape, comps), inner)).value
    b = loop.inner.b
    current = b.load(best)
    if floating:
        better = b.or_(b.fcmp_ordered(">" if largest else "<", x, current),
                       b.and_(b.fcmp_unordered("uno", x, x), b.fcmp_ordered("ord", current, current)))
    else:
        compare = b.icmp_signed if lowering.is_signed(dt) else b.icmp_unsigned
        better = compare(">" if largest else "<", x, current)
    b.store(b.select(better, x, current), best)
    b.store(b.select(better, loop.var, b.load(where)), where)
    loop.close()
    position = scope.regions[depth].b.load(where)
    out_type = register_type(eqn.params["index_dtype"])
    return Scalar(scope.regions[depth].b.trunc(position, out_type) if out_type.width < 64 else position, depth)


def _dot_general(k: KernelBuilder, eqn, index: Index, scope: Scope) -> Reads:
    """``sum_k lhs[batch, free, k] * rhs[batch, k, free]`` as a loop over the contracted dimensions."""
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
    lhs, rhs = eqn.invars
    out_dt = eqn.outvars[0].aval.dtype
    acc_dt = accumulation_dtype(out_dt)
    lhs_free = [d for d in range(lhs.aval.ndim) if d not in lhs_contract + lhs_batch]
    rhs_free = [d for d in range(rhs.aval.ndim) if d not in rhs_contract + rhs_batch]
    out = list(index.comps)
    batch, out = out[:len(lhs_batch)], out[len(lhs_batch):]
    lhs_out, rhs_out = out[:len(lhs_free)], out[len(lhs_free):]

    def operand_index(x, batch_dims, free_dims, contract_dims, free_comps, contracted) -> Index:
        comps = {d: c for dims, values in ((batch_dims, batch), (free_dims, free_comps), (contract_dims, contracted))
                 for d, c in zip(dims, values)}
        return Index(k, x.aval.shape, [comps[d] for d in range(x.aval.ndim)])

    def step(contracted: list[Scalar], inner: Scope, acc: ir.Value) -> Reads:
        a = yield Read(lhs, operand_index(lhs, lhs_batch, lhs_free, lhs_contract, lhs_out, contracted), inner)
        c = yield Read(rhs, operand_index(rhs, rhs_batch, rhs_free, rhs_contract, rhs_out, contracted), inner)
        e = k.emitter
        e.b = inner.regions[-1].b
        a, c = (lowering.convert(e, v.value, x.aval.dtype, acc_dt) for v, x in ((a, lhs), (c, rhs)))
        if lowering.is_complex(acc_dt):
            return complex_multiply_add(e, acc_dt, e.b.load(acc), a, c)
        if lowering.is_float(acc_dt):
            return e.b.fadd(e.b.load(acc), e.b.fmul(a, c), flags=("reassoc", "contract"))
        return e.b.add(e.b.load(acc), e.b.mul(a, c))

    total = yield from _accumulate(k, index, scope, [lhs.aval.shape[d] for d in lhs_contract],
                                   register_type(acc_dt), const(acc_dt, 0), step)
    e = k.emitter
    e.b = scope.regions[total.depth].b
    return Scalar(lowering.convert(e, total.value, acc_dt, out_dt), total.depth)


def _initial_value(p: Primitive, dt: np.dtype) -> Any:
    floating = lowering.is_float(dt)
    if p is red.reduce_sum_p or p is red.reduce_or_p or p is red.reduce_xor_p:
        return 0
    if p is red.reduce_prod_p:
        return 1
    if p is red.reduce_and_p:
        return -1 if dt != dtypes.bool_ else 1
    if dt == dtypes.bool_:
        return p is red.reduce_min_p
    if floating or lowering.is_complex(dt):  # (complex: -inf + 0j, inf + 0j, as XLA)
        return -np.inf if p is red.reduce_max_p else np.inf
    info = np.iinfo(dt)
    return info.min if p is red.reduce_max_p else info.max


def _combine(e: Emitter, p: Primitive, dt: np.dtype, acc: ir.Value, x: ir.Value) -> ir.Value:
    b = e.b
    if lowering.is_complex(dt) and p in (red.reduce_max_p, red.reduce_min_p):  # in order (``program``)
        return lowering.lower_rules[lowering.ew.max_p if p is red.reduce_max_p else lowering.ew.min_p](
            e, [dt, dt], dt, acc, x)
    if lowering.is_complex(dt):  # sums and products
        return complex_multiply_add(e, dt, acc, x, None) if p is red.reduce_sum_p else \
            complex_product(e, dt, acc, x, ("reassoc",))
    floating = lowering.is_float(dt)
    # Sums and products may be reassociated (vectorized into partial sums), as XLA does.
    if p is red.reduce_sum_p:
        return b.fadd(acc, x, flags=("reassoc",)) if floating else b.add(acc, x)
    if p is red.reduce_prod_p:
        return b.fmul(acc, x, flags=("reassoc",)) if floating else b.mul(acc, x)
    if p is red.reduce_max_p:
        return lowering.lower_rules[lowering.ew.max_p](e, [dt], dt, acc, x)
    if p is red.reduce_min_p:
        return lowering.lower_rules[lowering.ew.min_p](e, [dt], dt, acc, x)
    return {red.reduce_and_p: b.and_, red.reduce_or_p: b.or_, red.reduce_xor_p: b.xor}[p](acc, x)


def complex_product(e: Emitter, dt: np.dtype, x: ir.Value, y: ir.Value, flags=()) -> ir.Value:
    c = Cx(e.b, register_type(lowering.part_dtype(dt)))
    return lowering.pack(e.b, *c.mul(lowering.unpack(e.b, x), lowering.unpack(e.b, y), flags))


def complex_multiply_add(e: Emitter, dt: np.dtype, acc: ir.Value, a: ir.Value, c: ir.Value | None) -> ir.Value:
    """``acc + a * c`` (``acc + a`` if ``c`` is None), reassociable: a product's or a sum's step."""
    b = e.b
    cx = Cx(b, register_type(lowering.part_dtype(dt)))
    flags = ("reassoc", "contract")
    term = lowering.unpack(b, a) if c is None else cx.mul(lowering.unpack(b, a), lowering.unpack(b, c), flags)
    return lowering.pack(b, *cx.add(lowering.unpack(b, acc), term, flags))


def dot_row_layout(eqn) -> tuple | None:
    """(lhs free dims, rhs free dims) when the product's last axis is the right operand's last,
    contiguous axis (so a row of the product is a sum of contiguous rows of rhs); else None."""
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
    lhs, rhs = (a.aval for a in eqn.invars)
    lhs_free = [d for d in range(lhs.ndim) if d not in lhs_contract + lhs_batch]
    rhs_free = [d for d in range(rhs.ndim) if d not in rhs_contract + rhs_batch]
    if not rhs_free or rhs_free[-1] != rhs.ndim - 1:
        return None
    return lhs_free, rhs_free


def _row_loops(k: KernelBuilder, scope: Scope) -> tuple[list[Region], Callable[..., Loop]]:
    """Regions of a row computation, and a function opening loops in them."""
    regions = list(scope.regions)

    def loop_over(start: ir.Value, stop: ir.Value) -> Loop:
        loop = Loop(k.fn, regions[-1], start, stop, len(regions))
        regions.append(loop.inner)
        return loop

    return regions, loop_over


def reduction_row(k: KernelBuilder, eqn, outer: list[Scalar], row: ir.Value, scope: Scope,
                  columns: tuple) -> Reads:
    """row[t] = reduce over the leading axes of operand[.., t]: initialize the row, then fold in
    one contiguous operand row per index of the reduced axes (the inner loop vectorizes)."""
    operand = eqn.invars[0]
    shape, axes = operand.aval.shape, eqn.params["axes"]
    dt = operand.aval.dtype
    regions, loop_over = _row_loops(k, scope)
    init = loop_over(*columns)
    b = init.inner.b
    b.store(const(dt, _initial_value(eqn.primitive, dt)), b.gep(row, [ir.Constant(I64, 0), init.var]))
    init.close()
    regions.pop()
    reduced = [loop_over(ir.Constant(I64, 0), ir.Constant(I64, shape[d])) for d in axes]
    cols = loop_over(*columns)
    kept, by_axis = iter(outer), dict(zip(axes, reduced))
    comps = [(int_const(0) if shape[d] == 1 else by_axis[d].index) if d in by_axis else next(kept)
             for d in range(len(shape) - 1)] + [cols.index]
    element = yield Read(operand, Index(k, shape, comps), Scope(list(regions), scope))
    e = k.emitter
    e.b = cols.inner.b
    slot = e.b.gep(row, [ir.Constant(I64, 0), cols.var])
    e.b.store(_combine(e, eqn.primitive, dt, e.b.load(slot), element.value), slot)
    cols.close()
    for loop in reversed(reduced):
        loop.close()


def dot_row(k: KernelBuilder, eqn, outer: list[Scalar], row: ir.Value, scope: Scope, columns: tuple) -> Reads:
    """row[t] = sum_c lhs[.., c] * rhs[.., c, .., t]: zero the row, then for each contracted index
    add a scaled row of rhs (the inner loop is contiguous and vectorizes)."""
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
    lhs, rhs = eqn.invars
    layout = dot_row_layout(eqn)
    assert layout is not None  # (products are computed by rows only where they have the layout)
    lhs_free, rhs_free = layout
    acc_dt = accumulation_dtype(eqn.outvars[0].aval.dtype)
    batch, rest = outer[:len(lhs_batch)], outer[len(lhs_batch):]
    lhs_out, rhs_out = rest[:len(lhs_free)], rest[len(lhs_free):]
    regions, loop_over = _row_loops(k, scope)
    zero = loop_over(*columns)
    zero.inner.b.store(const(acc_dt, 0), zero.inner.b.gep(row, [ir.Constant(I64, 0), zero.var]))
    zero.close()
    regions.pop()
    contracted = [loop_over(ir.Constant(I64, 0), ir.Constant(I64, lhs.aval.shape[d])) for d in lhs_contract]
    c_index = [int_const(0) if lhs.aval.shape[d] == 1 else loop.index for d, loop in zip(lhs_contract, contracted)]

    def comps(x, batch_dims, free_dims, free_values, contract_dims, *last: Scalar) -> list[Scalar]:
        """The components of an index into ``x``, ending with ``last`` (those of its last dimensions)."""
        comps = {d: c for dims, values in ((batch_dims, batch), (free_dims, free_values), (contract_dims, c_index))
                 for d, c in zip(dims, values)}
        return [comps[d] for d in range(x.aval.ndim - len(last))] + list(last)

    inner = Scope(list(regions), scope)
    a = yield Read(lhs, Index(k, lhs.aval.shape, comps(lhs, lhs_batch, lhs_free, lhs_out, lhs_contract)), inner)
    k.emitter.b = inner.regions[a.depth].b
    a_value = lowering.convert(k.emitter, a.value, lhs.aval.dtype, acc_dt)
    cols = loop_over(*columns)
    inner = Scope(list(regions), scope)
    r_comps = comps(rhs, rhs_batch, rhs_free[:-1], rhs_out, rhs_contract, cols.index)  # (rhs_free ends with the last)
    r = yield Read(rhs, Index(k, rhs.aval.shape, r_comps), inner)
    e = k.emitter
    e.b = cols.inner.b
    slot = e.b.gep(row, [ir.Constant(I64, 0), cols.var])
    if lowering.is_complex(acc_dt):
        e.b.store(complex_multiply_add(e, acc_dt, e.b.load(slot), a_value,
                                       lowering.convert(e, r.value, rhs.aval.dtype, acc_dt)), slot)
        cols.close()
        for loop in reversed(contracted):
            loop.close()
        return
    product_ = (e.b.fmul if lowering.is_float(acc_dt) else e.b.mul)(
        a_value, lowering.convert(e, r.value, rhs.aval.dtype, acc_dt))
    total = (e.b.fadd(e.b.load(slot), product_, flags=("contract",)) if lowering.is_float(acc_dt)
             else e.b.add(e.b.load(slot), product_))
    e.b.store(total, slot)
    cols.close()
    for loop in reversed(contracted):
        loop.close()


REDUCTION_PRIMITIVES = red.REDUCTIONS  # (the reduction family: core/traits.py)

index_rules.update({
    ew.div_p: _divide, sh.iota_p: _iota, sh.broadcast_in_dim_p: _broadcast_in_dim, sh.reshape_p: _reshape,
    sh.squeeze_p: _squeeze, sh.transpose_p: _transpose, sh.rev_p: _rev, sh.slice_p: _slice, sh.pad_p: _pad,
    sh.concatenate_p: _concatenate, sliding_windows_p: _sliding_windows, sh.dynamic_slice_p: _dynamic_slice,
    sh.dynamic_update_slice_p: _dynamic_update_slice, dot_general_p: _dot_general, ix.gather_p: _gather,
    **{p: _reduction for p in REDUCTION_PRIMITIVES}, red.argmax_p: _arg_reduction, red.argmin_p: _arg_reduction,
})
