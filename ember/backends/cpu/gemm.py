"""A native matrix product: ``C[b] = A[b] @ B[b]`` for float32 / float64 with any strides.

The blocked algorithm of GotoBLAS / BLIS: a block of at most ``KC`` rows (K is cut into
equal blocks) and ``NC`` columns of B is packed into a contiguous buffer (panels of ``NV``
vectors' width, zero-padded); for each block of ``MC`` rows of A, each panel of B (which
stays in L1) meets every ``MR``-row micro-panel of the block of A (which stays in L2), and a
register-blocked micro-kernel computes an ``MR`` x ``NV`` vector tile of C, keeping it in
registers for the whole depth of the block (each step: ``NV`` vector loads of B, ``MR``
broadcasts of A, ``MR * NV`` fused multiply-adds).

A is packed too (``pack_a``: micro-panels of ``MR`` rows, the ``MR`` values of one k adjacent,
zero-padded) where its rows are not contiguous (its k stride is not 1: ``x.T @ g``, a weight
gradient), so that the kernel's loads of A are sequential rather than one cache line (and
page) per k; where A's rows are contiguous it is read in place, packing it did not pay (see
``MC``). The packing buffers are on the function's stack: each thread has its own.

One function per element type, compiled once per process:
``void gemm(i8** args, i64 begin, i64 end)`` with ``args`` = (A, B, C,
i64 params[14]: batch, M, N, K, then the element strides of A (batch, row, k),
B (batch, k, col) and C (batch, row), then whether [begin, end) counts panels of
columns (``panel_columns`` wide) rather than rows, then whether to add the product
to C (``C += alpha * A @ B``, for a loop's accumulator) rather than store it, then
alpha (a float64's bits)); it computes those rows (or columns) of every batch, so
threads can share them. Columns of C are contiguous.
Threads share the columns of a wide product (``split``): each packs only
its part of B, where sharing the rows would have every thread pack all of it (each
packs the rows of A it needs either way).
"""
from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence

import numpy as np
from llvmlite import ir

from ember.backends.cpu import jit, threads
from ember.backends.cpu.entry import data_pointer
from ember.backends.cpu.lowering import F32, F64, I64, Loops, transposed
from ember.core.background import Job, background

# Tile shapes measured (float32, one thread, 512^3 / 1024^3), AVX-512 (znver5): 6 rows x 2
# vectors 1.29 / 9.18 ms, 8x2 1.21 / 9.20, 12x2 1.29 / 9.35, 4x4 1.29 / 9.46: about 220 GFLOP/s,
# three quarters of the FMA peak, whatever the shape; 6x2 compiles fastest (100 ms, once per
# process and dtype). AVX2 (znver3, 16 vector registers): 64-byte vectors (two registers each)
# spill the 6x2 tile: 26-30 GFLOP/s on 512^3, 1024^3, 256x784x512 and 65536x288x64 (a
# convolution's patches); 32-byte vectors 42-49, and 50-63 with KC 384 (4x2, 8x1 and 3x4 tiles:
# 31-58, noisy).
MR = 6  # rows of a C tile
NV = 2  # vectors per row of a C tile
NC = 256  # columns of B in a packed block
if "+avx512f" in jit.host_features():
    VECTOR_BYTES = 64  # one AVX-512 register
    KC = {4: 384, 8: 256}  # by itemsize: the most rows of B in a packed block (K is split evenly)
else:
    VECTOR_BYTES = 32  # one AVX2 register
    KC = {4: 384, 8: 384}
# Rows of A in a block (packed, or read in place). Measured on znver5 (1 MB L2, 48 KB L1d per
# core; 2 cores shared with other work, so each figure is a median over interleaved rounds),
# ember.jit against jax.jit, float32 unless noted, before (A read in place, rows outside /
# panels inside, KC 256 cut as 256 + 256 + ... + rest) -> after (this design, MC 144):
#   x.T @ g  2048x256 by 2048x512  1.32 -> 0.90     x @ w  2048x256 by 256x512  1.16 -> 1.02
#   g @ w.T  2048x512 by 512x256   1.13 -> 0.80     512^3  1.09 -> 1.05    1024^3  1.17 -> 1.09
#   65536x288 @ 288x64 (conv)      1.66 -> 1.37     float64 512^3          0.96 -> 0.84
# (new / old, same rounds: 0.68, 0.86, 0.82, 0.92, 0.79, 0.78, 0.86). Packing A always cost
# the products with contiguous rows of A: conv 1.3-1.5x, g @ w.T 1.1-1.2x the time of reading
# it in place (a scalar transposing copy, against N = 64 or 256 columns to spread it over);
# MC 48 / 96 / 144 / 240 were within the noise of each other (144: 216 KB of A and 384 KB of
# B in float32); panels of B outside (BLIS's order) beat micro-panels of A outside by 5-25% on
# 1024^3 and conv. KC 384 (float32) leaves K = 288 one block: conv 0.62x of KC 256's time.
MC = 144
# Products with at most one vector's width of columns (N <= lanes) whose B rows are contiguous, the
# few output channels of a small convolution and its weight gradient (``x.T @ g``, K the batch's
# pixels), skip the blocked algorithm (``skinny``): a tile of ``SKINNY_ROWS`` rows keeps one vector
# of C per row in registers for the whole depth, reading B rows with a masked load and A in place.
# The blocked path pads such a B to a panel of NV vectors (N = 8 of 32 float32 columns: 3/4 of its
# multiply-adds wasted) and packs it once per depth block.
# Rows of a tile (accumulators plus B's vector within the vector registers); where A's rows are
# not adjacent (column stride 1), each row needs a pointer of its own: fewer, within the 16
# general registers (12 spilled pointers reloaded from the stack on every k).
SKINNY_ROWS = 12 if VECTOR_BYTES == 64 else 6
SKINNY_STRIDED_ROWS = 8 if VECTOR_BYTES == 64 else 6


def _c(n: int) -> ir.Constant:
    return ir.Constant(I64, n)


def _build(module: ir.Module, element: ir.Type, itemsize: int, skinny: bool = False) -> None:
    """``gemm`` (the blocked algorithm) or, ``skinny``, ``gemm_skinny`` (see ``SKINNY_ROWS``): two
    functions with one signature, compiled apart, so that programs without narrow products do
    not wait for the second one's code (it took gemm's compile from 170 to 280 ms)."""
    lanes = VECTOR_BYTES // itemsize
    nr = NV * lanes
    kc_most = KC[itemsize]
    assert NC % nr == 0, "the packed block holds whole panels"
    assert MC % MR == 0, "the packed block of A holds whole micro-panels"
    vec = ir.VectorType(element, lanes)
    ptr = element.as_pointer()
    i8pp = ir.IntType(8).as_pointer().as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8pp, I64, I64]), name=_name(skinny))
    fma_vec = ir.Function(module, ir.FunctionType(vec, [vec, vec, vec]), f"llvm.fma.v{lanes}{_suffix(element)}")
    g = Loops(fn)
    b = g.b
    buffers, begin, end = fn.args
    a_ptr, b_ptr, c_ptr = (b.bitcast(b.load(b.gep(buffers, [_c(k)])), ptr) for k in range(3))
    params = b.bitcast(b.load(b.gep(buffers, [_c(3)])), I64.as_pointer())
    (batch, m, n, k_total, a_sb, a_sm, a_sk, b_sb, b_sk, b_sn, c_sb, c_sm, by_columns, accumulate, alpha) = (
        b.load(b.gep(params, [_c(i)])) for i in range(15))
    overwrite = b.icmp_signed("==", accumulate, _c(0))
    alpha = b.bitcast(alpha, F64)
    alpha = alpha if element == F64 else b.fptrunc(alpha, element)
    alpha_vec = b.shuffle_vector(b.insert_element(ir.Constant(vec, ir.Undefined), alpha, _c(0)),
                                 ir.Constant(vec, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), lanes),
                                                                             [0] * lanes))
    by_columns = b.icmp_signed("!=", by_columns, _c(0))
    row_begin = b.select(by_columns, _c(0), begin)
    row_end = b.select(by_columns, m, end)
    col_begin = b.select(by_columns, b.mul(begin, _c(nr)), _c(0))
    col_end = b.select(by_columns, g.min(b.mul(end, _c(nr)), n), n)
    # K in equal blocks of at most KC (288 = 144 + 144, not 256 + 32: a thin last block costs a
    # pass over C for little work)
    depth_blocks = b.sdiv(b.add(k_total, _c(kc_most - 1)), _c(kc_most))
    depth_blocks = b.select(b.icmp_signed("<", depth_blocks, _c(1)), _c(1), depth_blocks)
    depth_step = b.sdiv(b.add(k_total, b.sub(depth_blocks, _c(1))), depth_blocks)
    depth_step = b.select(b.icmp_signed("<", depth_step, _c(1)), _c(1), depth_step)
    # The packing buffers live on this call's stack, so each thread has its own.
    packed = b.alloca(ir.ArrayType(element, kc_most * NC))  # a block of B
    packed.align = 64
    packed = b.bitcast(packed, ptr)
    packed_a = b.alloca(ir.ArrayType(element, kc_most * MC))  # a block of A
    packed_a.align = 64
    packed_a = b.bitcast(packed_a, ptr)
    # A is packed where its rows are not contiguous (see MC), else read where it lies.
    pack_a_here = b.icmp_signed("!=", a_sk, _c(1))
    tile = b.alloca(ir.ArrayType(element, MR * nr))  # an edge tile before its partial store
    tile.align = 64
    tile = b.bitcast(tile, ptr)
    zero = ir.Constant(element, 0.0)

    def at(base, *offsets):
        total = offsets[0]
        for o in offsets[1:]:
            total = g.b.add(total, o)
        return g.b.gep(base, [total])

    def skinny_batch(bi, width):
        """C[rows, :N] of batch ``bi`` for N <= ``width`` (a vector's lanes, or half of them), in
        tiles of rows that each accumulate their whole depth in registers (see ``SKINNY_ROWS``)."""
        wvec = ir.VectorType(element, width)
        wfma = module.globals.get(f"llvm.fma.v{width}{_suffix(element)}") or ir.Function(
            module, ir.FunctionType(wvec, [wvec, wvec, wvec]), f"llvm.fma.v{width}{_suffix(element)}")
        mask_type = ir.VectorType(ir.IntType(1), width)
        load_name, store_name = (f"llvm.masked.{op}.v{width}{_suffix(element)}.p0" for op in ("load", "store"))
        masked_load = module.globals.get(load_name) or ir.Function(
            module, ir.FunctionType(wvec, [ptr, ir.IntType(32), mask_type, wvec]), load_name)
        masked_store = module.globals.get(store_name) or ir.Function(
            module, ir.FunctionType(ir.VoidType(), [wvec, ptr, ir.IntType(32), mask_type]), store_name)

        def splat(value, vector_type=wvec):
            return g.b.shuffle_vector(g.b.insert_element(ir.Constant(vector_type, ir.Undefined), value, _c(0)),
                                      ir.Constant(vector_type, ir.Undefined),
                                      ir.Constant(ir.VectorType(ir.IntType(32), width), [0] * width))

        a_b = at(a_ptr, g.b.mul(bi, a_sb))
        b_b = at(b_ptr, g.b.mul(bi, b_sb))
        c_b = at(c_ptr, g.b.mul(bi, c_sb))
        lane_index = ir.Constant(ir.VectorType(I64, width), list(range(width)))
        columns = g.b.icmp_signed("<", lane_index, splat(n, ir.VectorType(I64, width)))
        zeros = ir.Constant(wvec, [0.0] * width)
        scale = splat(alpha)
        align = ir.Constant(ir.IntType(32), itemsize)

        def tile(i0, count, adjacent):
            """Rows i0 .. i0 + count: ``adjacent`` (A's column stride is 1 and all rows exist) reads
            them at constant offsets from one pointer, else each from its own (the missing rows of
            the last tile read the last row again and are not stored)."""
            if adjacent:
                a_rows = [at(a_b, g.b.add(i0, _c(r))) for r in range(count)]
            else:
                last = g.b.sub(row_end, _c(1))
                a_rows = [at(a_b, g.b.mul(g.min(g.b.add(i0, _c(r)), last), a_sm)) for r in range(count)]
            before = g.b.block
            header, body, done = (fn.append_basic_block(name) for name in ("sk", "sk_body", "sk_done"))
            g.b.branch(header)
            g.b.position_at_end(header)
            kk = g.b.phi(I64)
            kk.add_incoming(_c(0), before)
            accs = [g.b.phi(wvec) for _ in range(count)]
            for acc in accs:
                acc.add_incoming(zeros, before)
            g.b.cbranch(g.b.icmp_signed("<", kk, k_total), body, done)
            g.b.position_at_end(body)
            b_vec = g.b.call(masked_load, [at(b_b, g.b.mul(kk, b_sk)), align, columns, zeros])
            a_offset = g.b.mul(kk, a_sk)
            for r, acc in enumerate(accs):
                acc.add_incoming(g.b.call(wfma, [splat(g.b.load(at(a_rows[r], a_offset))), b_vec, acc]), body)
            kk.add_incoming(g.b.add(kk, _c(1)), body)
            g.b.branch(header)
            g.b.position_at_end(done)
            for r, acc in enumerate(accs):
                def store(r=r, acc=acc):
                    slot = at(c_b, g.b.mul(g.b.add(i0, _c(r)), c_sm))
                    old = g.b.call(masked_load, [slot, align, columns, zeros])
                    value = g.b.select(overwrite, acc, g.b.call(wfma, [acc, scale, old]))
                    g.b.call(masked_store, [value, slot, align, columns])
                if adjacent:
                    store()
                else:
                    g.if_then(g.b.icmp_signed("<", g.b.add(i0, _c(r)), row_end), store)

        # whole tiles of adjacent rows, then the rest (all of it where A's rows are not adjacent)
        adjacent = g.b.icmp_signed("==", a_sm, _c(1))
        whole = g.b.select(adjacent, g.b.mul(g.b.sdiv(g.b.sub(row_end, row_begin), _c(SKINNY_ROWS)),
                                             _c(SKINNY_ROWS)), _c(0))
        rest = g.b.add(row_begin, whole)
        g.loop(row_begin, rest, SKINNY_ROWS, lambda i0: tile(i0, SKINNY_ROWS, True))
        g.loop(rest, row_end, SKINNY_STRIDED_ROWS, lambda i0: tile(i0, SKINNY_STRIDED_ROWS, False))

    def per_batch(bi):
        a_b = at(a_ptr, g.b.mul(bi, a_sb))
        b_b = at(b_ptr, g.b.mul(bi, b_sb))
        c_b = at(c_ptr, g.b.mul(bi, c_sb))

        def per_column_block(jc):
            nc = g.min(_c(NC), g.b.sub(col_end, jc))

            def per_depth_block(pc):
                kc = g.min(depth_step, g.b.sub(k_total, pc))
                pack_b(b_b, jc, pc, nc, kc)
                first = g.b.and_(g.b.icmp_signed("==", pc, _c(0)), overwrite)

                def per_row_block(ic):
                    mc = g.min(_c(MC), g.b.sub(row_end, ic))
                    g.if_then(pack_a_here, lambda: pack_a(a_b, ic, pc, mc, kc))

                    def tile_at(ir_, jr):
                        micro_tile(a_b, c_b, g.b.add(ic, ir_), g.b.sub(mc, ir_), ir_, pc, jc, jr, nc, kc, first)

                    # each panel of B (in L1) against the whole block of A (in L2)
                    g.loop(_c(0), nc, nr, lambda jr: g.loop(_c(0), mc, MR, lambda ir_: tile_at(ir_, jr)))

                g.loop(row_begin, row_end, MC, per_row_block)

            g.loop(_c(0), k_total, depth_step, per_depth_block)

        g.loop(col_begin, col_end, NC, per_column_block)

    def pack_b(b_b, jc, pc, nc, kc):
        """packed[p][k][c] = B[pc + k, jc + p*NR + c], zero beyond the last column: row by row
        (whole vectors) where B's rows are contiguous, else column by column (whole panels of
        columns contiguous in k by tiles transposed in registers)."""
        b_block = at(b_b, g.b.mul(pc, b_sk), g.b.mul(jc, b_sn))

        def rows_contiguous():
            def per_k(kk):
                row = at(b_block, g.b.mul(kk, b_sk))

                def per_panel(p0):
                    source = at(row, p0)
                    target = at(packed, g.b.mul(p0, kc), g.b.mul(kk, _c(nr)))
                    whole = g.b.icmp_signed("<=", g.b.add(p0, _c(nr)), nc)

                    def copy_whole():
                        for h in range(NV):
                            value = g.b.load(g.b.bitcast(at(source, _c(h * lanes)), vec.as_pointer()), align=itemsize)
                            g.b.store(value, g.b.bitcast(at(target, _c(h * lanes)), vec.as_pointer()), align=itemsize)

                    def copy_part():
                        def per_col(c):
                            inside = g.b.icmp_signed("<", g.b.add(p0, c), nc)
                            value = g.b.load(at(source, g.b.select(inside, c, _c(0))))
                            g.b.store(g.b.select(inside, value, zero), at(target, c))

                        g.loop(_c(0), _c(nr), 1, per_col)

                    g.if_then(whole, copy_whole)
                    g.if_then(g.b.not_(whole), copy_part)

                g.loop(_c(0), nc, nr, per_panel)

            g.loop(_c(0), kc, 1, per_k)

        def by_column():
            def per_panel(p0):
                panel = at(packed, g.b.mul(p0, kc))
                # Whole panels of B's columns contiguous in k (``g @ w.T``): lanes x lanes tiles
                # transposed in registers (element by element, these copies held ember's
                # 256x512 @ (512x512).T at 1.21x JAX's time); the rest of k, and a last panel
                # cut by the block's edge, element by element.
                whole = g.b.and_(g.b.icmp_signed("==", b_sk, _c(1)), g.b.icmp_signed("<=", g.b.add(p0, _c(nr)), nc))
                tiled = g.b.select(whole, g.b.sub(kc, g.b.urem(kc, _c(lanes))), _c(0))

                def per_tile(k0):
                    for h in range(NV):
                        lines = [g.b.load(g.b.bitcast(at(b_block, g.b.mul(g.b.add(p0, _c(h * lanes + t)), b_sn), k0),
                                                      vec.as_pointer()), align=itemsize) for t in range(lanes)]
                        for u, line in enumerate(transposed(g.b, lines, itemsize)):
                            target = at(panel, g.b.mul(g.b.add(k0, _c(u)), _c(nr)), _c(h * lanes))
                            g.b.store(line, g.b.bitcast(target, vec.as_pointer()), align=itemsize)

                g.loop(_c(0), tiled, lanes, per_tile)

                def per_col(c):
                    col = g.b.add(p0, c)
                    inside = g.b.icmp_signed("<", col, nc)
                    source = at(b_block, g.b.mul(g.b.select(inside, col, _c(0)), b_sn))

                    def per_k(kk):
                        value = g.b.load(at(source, g.b.mul(kk, b_sk)))
                        g.b.store(g.b.select(inside, value, zero), at(panel, g.b.mul(kk, _c(nr)), c))

                    g.loop(tiled, kc, 1, per_k)

                g.loop(_c(0), _c(nr), 1, per_col)

            g.loop(_c(0), nc, nr, per_panel)

        contiguous = g.b.icmp_signed("==", b_sn, _c(1))
        g.if_then(contiguous, rows_contiguous)
        g.if_then(g.b.not_(contiguous), by_column)

    def pack_a(a_b, ic, pc, mc, kc):
        """packed_a[p][k][r] = A[ic + p*MR + r, pc + k], zero beyond the last row: micro-panels of
        MR rows, the MR values of one k adjacent, so that the micro-kernel reads them in order.
        (Only A whose rows are not contiguous is packed: k by k, whole micro-panels' columns at
        once where A's columns are contiguous.)"""
        a_block = at(a_b, g.b.mul(pc, a_sk), g.b.mul(ic, a_sm))
        mr_vec = ir.VectorType(element, MR)
        columns_contiguous = g.b.icmp_signed("==", a_sm, _c(1))

        def per_k(kk):
            column = at(a_block, g.b.mul(kk, a_sk))

            def per_panel(p0):
                target = at(packed_a, g.b.mul(p0, kc), g.b.mul(kk, _c(MR)))
                whole = g.b.and_(columns_contiguous, g.b.icmp_signed("<=", g.b.add(p0, _c(MR)), mc))

                def copy_whole():
                    value = g.b.load(g.b.bitcast(at(column, p0), mr_vec.as_pointer()), align=itemsize)
                    g.b.store(value, g.b.bitcast(target, mr_vec.as_pointer()), align=itemsize)

                def copy_part():
                    def per_row(r):
                        row = g.b.add(p0, r)
                        inside = g.b.icmp_signed("<", row, mc)
                        value = g.b.load(at(column, g.b.mul(g.b.select(inside, row, _c(0)), a_sm)))
                        g.b.store(g.b.select(inside, value, zero), at(target, r))

                    g.loop(_c(0), _c(MR), 1, per_row)

                g.if_then(whole, copy_whole)
                g.if_then(g.b.not_(whole), copy_part)

            g.loop(_c(0), mc, MR, per_panel)

        g.loop(_c(0), kc, 1, per_k)

    def micro_tile(a_b, c_b, i0, rows_left, ir_, pc, jc, jr, nc, kc, first):
        """C[i0 : i0 + MR, jc + jr : jc + jr + NR] from rows i0.. of A (the micro-panel at row ``ir_``
        of the packed block, or A itself) and the panel of B at column ``jr``; only ``rows_left``
        rows where fewer (A read in place: the last row again for the missing ones)."""
        panel = at(packed, g.b.mul(jr, kc))
        a_panel = at(packed_a, g.b.mul(ir_, kc))
        last = g.b.sub(g.min(_c(MR), rows_left), _c(1))
        a_rows = [g.b.select(pack_a_here, at(a_panel, _c(r)),
                             at(a_b, g.b.mul(pc, a_sk), g.b.mul(g.b.add(i0, g.min(_c(r), last)), a_sm)))
                  for r in range(MR)]
        a_step = g.b.select(pack_a_here, _c(MR), a_sk)
        before = g.b.block
        header = fn.append_basic_block("k")
        body = fn.append_basic_block("k_body")
        done = fn.append_basic_block("k_done")
        g.b.branch(header)
        g.b.position_at_end(header)
        kk = g.b.phi(I64)
        kk.add_incoming(_c(0), before)
        accs = [[g.b.phi(vec) for _ in range(NV)] for _ in range(MR)]
        for row in accs:
            for acc in row:
                acc.add_incoming(ir.Constant(vec, [0.0] * lanes), before)
        g.b.cbranch(g.b.icmp_signed("<", kk, kc), body, done)
        g.b.position_at_end(body)
        b_row = at(panel, g.b.mul(kk, _c(nr)))
        b_vecs = [g.b.load(g.b.bitcast(at(b_row, _c(h * lanes)), vec.as_pointer()), align=itemsize)
                  for h in range(NV)]
        a_offset = g.b.mul(kk, a_step)
        for r, row in enumerate(accs):
            a = g.b.load(at(a_rows[r], a_offset))
            splat = g.b.shuffle_vector(g.b.insert_element(ir.Constant(vec, ir.Undefined), a, _c(0)),
                                       ir.Constant(vec, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), lanes),
                                                                                   [0] * lanes))
            for h, acc in enumerate(row):
                acc.add_incoming(g.b.call(fma_vec, [splat, b_vecs[h], acc]), body)
        kk.add_incoming(g.b.add(kk, _c(1)), body)
        g.b.branch(header)
        g.b.position_at_end(done)
        cols = g.min(_c(nr), g.b.sub(nc, jr))
        rows = g.min(_c(MR), rows_left)
        col0 = g.b.add(jc, jr)
        whole = g.b.and_(g.b.icmp_signed("==", cols, _c(nr)), g.b.icmp_signed("==", rows, _c(MR)))

        def store_whole():
            for r, row in enumerate(accs):
                c_row = at(c_b, g.b.mul(g.b.add(i0, _c(r)), c_sm), col0)
                for h, acc in enumerate(row):
                    slot = g.b.bitcast(at(c_row, _c(h * lanes)), vec.as_pointer())
                    old = g.b.load(slot, align=itemsize)
                    g.b.store(g.b.select(first, acc, g.b.call(fma_vec, [acc, alpha_vec, old])), slot,
                              align=itemsize)

        def store_part():
            for r, row in enumerate(accs):
                for h, acc in enumerate(row):
                    g.b.store(acc, g.b.bitcast(at(tile, _c(r * nr + h * lanes)), vec.as_pointer()), align=itemsize)

            def copy_row(r):
                c_row = at(c_b, g.b.mul(g.b.add(i0, r), c_sm), col0)
                t_row = at(tile, g.b.mul(r, _c(nr)))

                def copy(c):
                    value = g.b.load(at(t_row, c))
                    slot = at(c_row, c)
                    g.b.store(g.b.select(first, value, g.b.fadd(g.b.load(slot), g.b.fmul(value, alpha))), slot)

                g.loop(_c(0), cols, 1, copy)

            g.loop(_c(0), rows, 1, copy_row)

        g.if_then(whole, store_whole)
        g.if_then(g.b.not_(whole), store_part)

    if skinny:
        # Half-width vectors for at most half a vector's columns where vectors are 64 bytes: AMD's
        # cores (znver4) run a 64-byte FMA as two 32-byte ones, so 8 float32 columns take half the
        # time in 32-byte vectors; on cores with two 64-byte FMA units the count of FMAs is the same.
        half = g.b.icmp_signed("<=", n, _c(lanes // 2)) if VECTOR_BYTES == 64 else ir.Constant(ir.IntType(1), 0)
        g.if_then(half, lambda: g.loop(_c(0), batch, 1, lambda bi: skinny_batch(bi, lanes // 2)))
        g.if_then(g.b.not_(half), lambda: g.loop(_c(0), batch, 1, lambda bi: skinny_batch(bi, lanes)))
    else:
        g.loop(_c(0), batch, 1, per_batch)
    g.b.ret_void()


def _suffix(element: ir.Type) -> str:
    return "f32" if element == F32 else "f64"


def _name(skinny: bool) -> str:
    return "gemm_skinny" if skinny else "gemm"


def is_skinny(params: Sequence[int] | np.ndarray, dtype: np.dtype) -> bool:
    """Whether the product of ``dtype`` that ``params`` (gemm's parameters, or their first 12)
    describe is a narrow one, for ``gemm_skinny``: at most one vector's width of columns, whose
    rows of B are contiguous."""
    return int(params[2]) <= VECTOR_BYTES // np.dtype(dtype).itemsize and int(params[9]) == 1


@functools.cache
def gemm_function(dtype: np.dtype, skinny: bool = False) -> tuple[jit.CompiledModule, jit.NativeFunction]:
    """The compiled product for ``dtype`` (float32 or float64), blocked or ``skinny``: the module
    and the function."""
    module = jit.new_module(f"{_name(skinny)}_{dtype.name}")
    element, itemsize = (F32, 4) if dtype == np.float32 else (F64, 8)
    _build(module, element, itemsize, skinny)
    compiled = jit.compile_module(module)
    return compiled, compiled.kernel(_name(skinny))


# What native loops need to call the products (``control_flow``): the products for float32 and
# float64, the OpenMP team runner (``threads``; 0 without OpenMP), the number of threads, and the
# narrow products for float32 and float64. A loop gets this table's address as its last buffer, so
# its code does not depend on addresses. Entries are filled (``function_table``) before any loop
# that calls them runs.
FUNCTION_TABLE = (ctypes.c_void_p * 6)()
TABLE_INDEX = {(np.dtype(np.float32), False): 0, (np.dtype(np.float64), False): 1,
               (np.dtype(np.float32), True): 4, (np.dtype(np.float64), True): 5}
TEAM_RUNNER, THREADS = 2, 3
# A product in a loop is split over the threads from this many multiply-adds (a team costs ~10 us).
PARALLEL_MIN_MULTIPLY_ADDS = 1 << 22


def function_table(needed: set[tuple[np.dtype, bool]] | frozenset = frozenset()) -> int:
    """The address of ``FUNCTION_TABLE``, with the products ``needed`` ((dtype, skinny) pairs) compiled."""
    for dtype, skinny in needed:
        index = TABLE_INDEX[dtype, skinny]
        if not FUNCTION_TABLE[index]:
            FUNCTION_TABLE[index] = ctypes.cast(gemm_function(dtype, skinny)[1], ctypes.c_void_p).value
    if needed and not FUNCTION_TABLE[THREADS]:
        if threads.openmp_available():
            FUNCTION_TABLE[TEAM_RUNNER] = threads.team_runner_address()
        FUNCTION_TABLE[THREADS] = threads.thread_count()
    return ctypes.addressof(FUNCTION_TABLE)


def warm_up(dtype: np.dtype, skinny: bool = False) -> Job:
    """The background job that compiles the product for ``dtype`` (blocked or ``skinny``), started
    now if it was not: once per process."""
    dtype = np.dtype(dtype)
    return background.submit(f"cpu: compile the {'skinny' if skinny else 'blocked'} {dtype.name} product",
                             gemm_function, dtype, skinny)


def ready(dtype: np.dtype, skinny: bool = False) -> bool:
    """Whether the product for ``dtype`` (blocked or ``skinny``) is compiled. Compiling one takes
    about 100-200 ms, once per process; the first call asks for it in the background and
    meanwhile uses NumPy's matmul."""
    return warm_up(dtype, skinny).done


def alpha_bits(alpha: float) -> int:
    """``alpha`` as gemm's last parameter: the bits of a float64, as a signed 64-bit integer."""
    return int(np.array(alpha, np.float64).view(np.int64))


ALPHA_ONE = alpha_bits(1.0)


def panel_columns(dtype: np.dtype) -> int:
    """The columns of one packed panel of B (``NV`` vectors)."""
    return NV * VECTOR_BYTES // np.dtype(dtype).itemsize


# A product split over a team is cut into up to MOST_PIECES_PER_THREAD pieces a thread (each taken
# from a shared counter by the next free thread), each of at least PIECE_MIN_MULTIPLY_ADDS (~20 us
# on one core) and of PIECE_MIN_PANELS panels of columns (a piece of columns packs only its own
# part of B, and reads all of A once per block of it) or, split by rows, of at least one block of
# A (each piece of rows packs all of B). One piece a thread left a product waiting on the slower
# thread whenever the cores were shared: ember/JAX on 2 busy cores (interleaved rounds, one run),
# 512^3 0.96 with one piece a thread, 0.90 with 8; 1024^3 1.05 and 0.98. And a team's second
# thread starts some 35-50 us late (it sleeps: ``threads``), a sixth of a 256^3 product: in pieces
# of one panel the first thread takes over what the second has not reached. Measured on 2 busy
# cores (Xeon, AVX-512), eager 256^3 float32, both executables in one process, single calls
# interleaved (1500 each, six runs), 8 pieces of one panel against 2 of four: medians 361/409,
# 221/235, 362/393, 228/260, 218/216, 495/543 us, means and tenth percentiles lower in every run;
# 512^3 (direct calls) in 16 pieces of one panel against 8 of two: medians 2172/2220, 2774/2829 us.
PIECE_MIN_MULTIPLY_ADDS = 1 << 21
PIECE_MIN_PANELS = 1
MOST_PIECES_PER_THREAD = 8


def pieces_per_thread(multiply_adds: int, extent: int, by_columns: int, parts: int) -> int:
    """How many pieces a thread of a team of ``parts`` takes on average of a product of
    ``multiply_adds`` split over ``extent`` panels of columns (``by_columns``) or rows."""
    if parts <= 1:
        return 1
    by_size = extent // ((PIECE_MIN_PANELS if by_columns else MC) * parts)
    by_work = multiply_adds // (PIECE_MIN_MULTIPLY_ADDS * parts)
    return max(1, min(MOST_PIECES_PER_THREAD, by_size, by_work))


def split(m: int, n: int, dtype: np.dtype) -> tuple[int, int]:
    """(the by-columns flag, the extent of [begin, end)) for threads sharing an m x n product:
    the columns' panels of a product at least as wide as tall, else the rows."""
    panels = -(-n // panel_columns(dtype))
    return (1, panels) if n >= m and panels >= 2 else (0, m)


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray, parts: int = 1) -> None:
    """``out = a @ b`` for 3-d ``a`` [batch, M, K], ``b`` [batch, K, N] and a C-contiguous ``out``
    [batch, M, N], the rows or the columns (``split``) shared by ``parts`` threads."""
    size = out.dtype.itemsize
    by_columns, extent = split(a.shape[1], b.shape[2], out.dtype) if parts > 1 else (0, a.shape[1])
    params = np.array([a.shape[0], a.shape[1], b.shape[2], a.shape[2], *(s // size for s in a.strides),
                       *(s // size for s in b.strides), out.strides[0] // size, out.strides[1] // size, by_columns,
                       0, ALPHA_ONE], np.int64)
    run(out.dtype, (a, b, out), params, extent, parts)


def run(dtype: np.dtype, arrays: tuple, params: np.ndarray, extent: int, parts: int = 1) -> None:
    """The product of ``arrays`` (A, B, C, whose data ``params`` describes) over [0, ``extent``)
    (rows, or panels of columns: ``params[12]``), shared by ``parts`` threads."""
    _, fn = gemm_function(np.dtype(dtype), is_skinny(params, dtype))
    pointers = (ctypes.c_void_p * 4)(*[data_pointer(x) for x in arrays], params.ctypes.data)
    if parts == 1:
        fn(pointers, 0, extent)
    elif threads.openmp_available():
        multiply_adds = int(params[0]) * int(params[1]) * int(params[2]) * int(params[3])
        threads.run_team(fn, pointers, extent, parts,
                         pieces_per_thread=pieces_per_thread(multiply_adds, extent, int(params[12]), parts))
    else:
        threads.run_split(fn, pointers, extent, parts)
