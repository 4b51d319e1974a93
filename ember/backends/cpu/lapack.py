"""Decompositions and triangular solves on LAPACK and BLAS, called from generated code: LU
(``getrf``), Cholesky (``potrf``), triangular solves (``trsm``), QR (``geqrf``, ``orgqr`` /
``ungqr``), symmetric and Hermitian eigenproblems (``syevd`` / ``heevd``) and singular values
(``gesdd``), of real and complex matrices.

Where they come from: SciPy's ``scipy.linalg.cython_lapack`` and ``cython_blas`` publish the
LAPACK and BLAS that SciPy itself links (OpenBLAS in its wheels) as C function pointers, the
route Numba takes. It is a well-kept, tested LAPACK with one documented ABI (Fortran: every
argument by reference), installed from the package registries with SciPy (a runtime dependency
for this reason); NumPy's own LAPACK has no public entry points. SciPy's modules are imported
when a program first needs them (they take about 0.45 s).

How they are called: each equation is one LLVM function (``LapackFunction``) that loops over
the batch's matrices and calls the routines through a table of their addresses, which it gets
as its last buffer (``routine_table``), as native loops call the products: its code holds no
address, so the compile workers and the disk cache work for it, and a program of kernels and
LAPACK calls runs in one native call (``entry``). The layout copies, the masks of the
triangular factors and the NaNs of failed factorizations are loops of the same function; the
workspaces that the routines ask for (asked when the function is generated) lie in its scratch
area.

Row-major buffers are LAPACK's column-major matrices transposed, which the calls use instead of
copying: ``trsm`` solves the transposed system (the side and the triangle swap), and ``potrf``
of the upper triangle of ``x``'s transpose is ``x``'s lower Cholesky factor. ``getrf`` and
``geqrf`` need ``x`` in column-major order (row pivoting or Householder reflections of rows are
not those of columns): one transposing copy in and one out. ``syevd`` and ``gesdd``, which
overwrite their input, get a column-major copy too, so that their eigen- and singular vectors
have the signs that NumPy's (the reference's) and JAX's have: the same routine on the same
matrix (the transposed problem gives vectors of other signs). Results follow the reference
rules (``backends/reference/linalg.py``, which call the same routines through NumPy or write
them out): LU leaves a zero pivot unscaled and singular systems give
IEEE inf / NaN, as LAPACK does; a matrix that is not positive definite, and an eigensolver or
SVD that does not converge, give NaN, as JAX.

Matrices of every size take this path: over batches of 2000 matrices of 2x2 to 12x12 it takes
0.16-1.0x the reference's time (NumPy's batched linear algebra), and over 16x16 0.13x
(Cholesky) to 0.9x (eigh). Empty matrices stay on the reference (LAPACK rejects a leading
dimension of 0); so do other dtypes (half precision, integers: the reference promotes them).

Complex matrices (complex64 / complex128: pairs of floats, LAPACK's layout) take the same path:
LU (``cgetrf`` / ``zgetrf``), Cholesky (``potrf``: of the transposed view, which is the
conjugate of a Hermitian matrix, so the factor comes out right), triangular solves (``trsm``,
where ``a^H`` of the transposed view is its ``"C"``; a conjugate without a transpose has no
``trsm`` flag and stays on the reference), QR (``geqrf`` and ``ungqr``, complex's ``orgqr``),
eigh (``heevd``, with a real workspace ``rwork`` besides ``work`` and ``iwork``) and SVD
(``gesdd``, with an ``rwork`` of the length its documentation gives for ``jobz``): the same
column-major copies as the real ones (never a conjugate), so that QR's reflectors, the
eigenvectors' and singular vectors' phases are NumPy's. Their eigen- and singular values are
real (float32 for complex64): those outputs, and their copies, have the real type
(``copy`` takes its elements' type from its destination). ``eig`` (``geev``), real or
complex, runs on the reference rules, which call SciPy's LAPACK.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import math
from collections.abc import Iterator
from typing import Any, Callable

import numpy as np
from llvmlite import ir

from ember import dtypes
from ember.backends.cpu.lowering import F32, F64, I1, I8, I32, I64, Loops, memcpy, transposed
from ember.core.ir import Eqn
from ember.lax import linalg

I8P = ir.IntType(8).as_pointer()
C64, C128 = ir.LiteralStructType([F32, F32]), ir.LiteralStructType([F64, F64])  # (re, im), as LAPACK lays them
_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d", np.dtype(np.complex64): "c",
           np.dtype(np.complex128): "z"}
_ELEMENT = {np.dtype(np.float32): F32, np.dtype(np.float64): F64, np.dtype(np.complex64): C64,
            np.dtype(np.complex128): C128}
_NAMES = {str(F32): "float", str(F64): "double", str(C64): "c64", str(C128): "c128"}


def _bytes(element: ir.Type) -> int:
    return {str(F64): 8, str(I64): 8, str(C64): 8, str(C128): 16}.get(str(element), 4)


def _constant(element: ir.Type, value: float) -> ir.Constant:
    """``value`` as an element: a complex one has ``value`` as its real part and 0 as its imaginary."""
    if isinstance(element, ir.LiteralStructType):
        part = element.elements[0]
        return ir.Constant(element, [ir.Constant(part, value), ir.Constant(part, math.nan if math.isnan(value)
                                                                          else 0.0)])
    return ir.Constant(element, value)


def _tiles(loops: Loops, rows: tuple[ir.Value, ir.Value], cols: tuple[ir.Value, ir.Value],
           body: Callable[[ir.Value, ir.Value], None]) -> None:
    """``body(i, j)`` over ``range(*rows) x range(*cols)`` in tiles of ``_COPY_TILE`` x ``_COPY_TILE``:
    a strided copy then touches ``_COPY_TILE`` lines on each side, not a line per element."""
    b = loops.b

    def end(first: ir.Value, stop: ir.Value) -> ir.Value:
        return loops.min(b.add(first, ir.Constant(I64, _COPY_TILE)), stop)

    loops.loop(*rows, _COPY_TILE, lambda i0: loops.loop(*cols, _COPY_TILE, lambda j0: loops.loop(
        i0, end(i0, rows[1]), 1, lambda i: loops.loop(j0, end(j0, cols[1]), 1, lambda j: body(i, j)))))


def _transpose(loops: Loops, dst: ir.Value, src: ir.Value, rows: ir.Value, cols: ir.Value, src_row: ir.Value,
               dst_col: ir.Value, width: int) -> None:
    """``dst[i + j * dst_col] = src[i * src_row + j]``: whole ``width x width`` tiles as ``width``
    vectors of a row each, transposed in registers (``transposed``), the edges element by element.
    (LU's two transposing copies of a 512 x 512 float32 matrix took half as long as getrf's
    products element by element.)"""
    b = loops.b
    bits = ir.IntType(8 * _VECTOR_BYTES // width)
    vector = ir.VectorType(bits, width).as_pointer()
    src, dst = b.bitcast(src, bits.as_pointer()), b.bitcast(dst, bits.as_pointer())
    whole_rows, whole_cols = (b.sub(n, b.urem(n, ir.Constant(I64, width))) for n in (rows, cols))
    offset = lambda first, r: b.add(first, ir.Constant(I64, r))  # noqa: E731

    def tile(i0: ir.Value, j0: ir.Value) -> None:
        lines = [b.load(b.bitcast(b.gep(src, [b.add(b.mul(offset(i0, r), src_row), j0)]), vector), align=1)
                 for r in range(width)]
        for k, line in enumerate(transposed(b, lines, _VECTOR_BYTES // width)):
            b.store(line, b.bitcast(b.gep(dst, [b.add(b.mul(offset(j0, k), dst_col), i0)]), vector), align=1)

    def element(i: ir.Value, j: ir.Value) -> None:
        b.store(b.load(b.gep(src, [b.add(b.mul(i, src_row), j)])), b.gep(dst, [b.add(b.mul(j, dst_col), i)]))

    zero = ir.Constant(I64, 0)
    loops.loop(zero, whole_rows, width, lambda i0: loops.loop(zero, whole_cols, width, lambda j0: tile(i0, j0)))
    _tiles(loops, (zero, whole_rows), (whole_cols, cols), element)
    _tiles(loops, (whole_rows, rows), (zero, cols), element)


_PTR = ctypes.c_void_p
_KEEP = {"all": 0, "upper": 1, "lower": 2}
_COPY_TILE = 16  # elements: a 64-byte line of float32
_VECTOR_BYTES = 64  # a transposed tile's rows: an AVX-512 register, two AVX2 ones


@functools.cache
def address(name: str) -> int:
    """The address of SciPy's LAPACK / BLAS routine ``name``."""
    # Imported here, when a program first calls LAPACK: importing SciPy's linalg takes ~0.45 s.
    from scipy.linalg import cython_blas, cython_lapack
    capsule = cython_lapack.__pyx_capi__.get(name) or cython_blas.__pyx_capi__[name]
    # (prototypes of our own: ctypes.pythonapi's are shared with every other user of ctypes)
    get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
    get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", ctypes.pythonapi))
    return get_pointer(capsule, get_name(capsule))


def _query(name: str, *args: Any) -> None:
    """Call ``name`` from Python (its workspace query): every argument a pointer."""
    ctypes.CFUNCTYPE(None, *[_PTR] * len(args))(address(name))(*args)


def _ref(value: int | bytes) -> Any:
    return ctypes.byref(ctypes.c_char(value) if isinstance(value, bytes) else ctypes.c_int(value))


def _workspace(name: str, dtype: np.dtype, args: Callable[[Any, Any], list]) -> int:
    """The work array's length that ``name`` asks for when ``args(size, lwork=-1)`` query it."""
    size = np.zeros(1, dtype)
    _query(name, *args(size.ctypes.data, _ref(-1)))
    return _size(size)


def _size(size: np.ndarray) -> int:
    """The length a workspace query wrote at ``size[0]`` (of a complex work array: its real part).
    Single precision holds integers exactly up to 2^24 only: a larger one may have been rounded
    down, so the next float up is taken."""
    value = size[0].real
    if value >= 2 ** 24 and value.dtype == np.float32:
        value = np.nextafter(value, np.float32(np.inf))
    return max(1, math.ceil(float(value)))


# --- the generated function ----------------------------------------------------------------------
class LapackFunction:
    """The LLVM function ``name`` that computes ``eqn`` (``lowers(eqn)``): ``void(i8** buffers,
    i64, i64)``, the buffers being the operands, the outputs, a scratch area of
    ``scratch_bytes`` (64-byte aligned) and the table of ``routines(eqn)``."""

    def __init__(self, module: ir.Module, name: str, eqn: Eqn) -> None:
        self.fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I8P.as_pointer(), I64, I64]), name=name)
        self.allocas = ir.IRBuilder(self.fn.append_basic_block("allocas"))
        entry = self.fn.append_basic_block("entry")
        self.b = ir.IRBuilder(entry)
        count = len(eqn.invars) + len(eqn.outvars) + 2
        pointers = [self.b.load(self.b.gep(self.fn.args[0], [ir.Constant(I64, i)])) for i in range(count)]
        self.table = self.b.bitcast(pointers.pop(), I8P.as_pointer())
        self.scratch = pointers.pop()
        self.element = _ELEMENT[eqn.invars[0].aval.dtype]
        typed = [self.b.bitcast(p, (I32 if v.aval.dtype == np.int32 else _ELEMENT[v.aval.dtype]).as_pointer())
                 for p, v in zip(pointers, [*eqn.invars, *eqn.outvars])]
        self.ins, self.outs = typed[:len(eqn.invars)], typed[len(eqn.invars):]
        self.real = self.element.elements[0] if isinstance(self.element, ir.LiteralStructType) else self.element
        self.scratch_bytes = 0
        self.info = self.allocas.alloca(I32)
        self._constants: dict[tuple, ir.Value] = {}
        _EMITTERS[eqn.primitive](self, eqn)
        self.b.ret_void()
        self.allocas.branch(entry)

    # --- what the emitters use ---
    def space(self, count: int, element: ir.Type | None = None) -> ir.Value:
        """``count`` elements (of the matrices' type by default) in the scratch area."""
        element = element or self.element
        offset = self.scratch_bytes
        self.scratch_bytes += -(-count * _bytes(element) // 64) * 64
        return self.b.bitcast(self.b.gep(self.scratch, [ir.Constant(I64, offset)]), element.as_pointer())

    def ref(self, value: int | float | bytes, element: ir.Type = I32) -> ir.Value:
        """A pointer to a constant argument (Fortran passes every argument by reference)."""
        key = (value, str(element))
        if key not in self._constants:
            if isinstance(value, bytes):
                element, value = I8, value[0]
            slot = self._constants[key] = self.allocas.alloca(element)
            self.allocas.store(_constant(element, value) if isinstance(value, float) else ir.Constant(element, value),
                               slot)
        return self._constants[key]

    def matrix(self, base: ir.Value, index: ir.Value, size: int) -> ir.Value:
        """The ``index``-th of the ``size``-element matrices at ``base``."""
        return self.b.gep(base, [self.b.mul(index, ir.Constant(I64, size))])

    @contextlib.contextmanager
    def loop(self, count: int) -> Iterator[ir.Value]:
        """A loop over ``[0, count)``: the body is the code emitted inside the ``with``."""
        before = self.b.block
        header, body, done = (self.fn.append_basic_block(n) for n in ("loop", "body", "done"))
        self.b.branch(header)
        self.b.position_at_end(header)
        index = self.b.phi(I64)
        index.add_incoming(ir.Constant(I64, 0), before)
        self.b.cbranch(self.b.icmp_signed("<", index, ir.Constant(I64, count)), body, done)
        self.b.position_at_end(body)
        yield index
        index.add_incoming(self.b.add(index, ir.Constant(I64, 1)), self.b.block)
        self.b.branch(header)
        self.b.position_at_end(done)

    def copy(self, dst: ir.Value, src: ir.Value, rows: int, cols: int, dst_strides: tuple[int, int],
             src_strides: tuple[int, int], keep: str = "all", nan_if: ir.Value | None = None) -> None:
        """``dst[i, j] = src[i, j]`` over a ``rows x cols`` matrix (strides in elements); zero
        outside the triangle ``keep`` ("upper": j >= i, "lower": j <= i), NaN inside it where
        ``nan_if`` holds. ``dst`` may be ``src``: the copy then masks in place. The elements are
        ``dst``'s type (the real values of complex decompositions have their own). (One function
        of the module does every strided copy: LLVM takes 0.2-0.5 s to optimize copies of
        constant shapes, which it unrolls, and the time of the calls is not in the copies.)"""
        i64 = lambda n: ir.Constant(I64, n)  # noqa: E731
        element = dst.type.pointee
        if keep == "all" and nan_if is None and dst_strides == src_strides == (cols, 1) and dst is not src:
            size = rows * cols * _bytes(element)
            self.b.call(memcpy(self.fn.module), [self.b.bitcast(dst, I8P), self.b.bitcast(src, I8P), i64(size),
                                                 ir.Constant(I1, 0)])
            return
        nan = nan_if if nan_if is not None else ir.Constant(I1, 0)
        self.b.call(self._copy_function(element), [dst, src, i64(rows), i64(cols), *map(i64, dst_strides),
                                                   *map(i64, src_strides), ir.Constant(I32, _KEEP[keep]), nan])

    def _copy_function(self, element: ir.Type) -> ir.Function:
        module = self.fn.module
        name = f"ember_lapack_copy_{_NAMES[str(element)]}"
        if name in module.globals:
            return module.globals[name]
        pointer = element.as_pointer()
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [pointer, pointer, *[I64] * 6, I32, I1]), name)
        fn.attributes.add("noinline")  # (and external: LLVM would otherwise specialize it for its constants)
        dst, src, rows, cols, dst_row, dst_col, src_row, src_col, keep, nan_if = fn.args
        loops = Loops(fn)
        b = loops.b
        zero = ir.Constant(I64, 0)

        def source(i: ir.Value, j: ir.Value) -> ir.Value:
            return b.load(b.gep(src, [b.add(b.mul(i, src_row), b.mul(j, src_col))]))

        def store(value: ir.Value, i: ir.Value, j: ir.Value) -> None:
            b.store(value, b.gep(dst, [b.add(b.mul(i, dst_row), b.mul(j, dst_col))]))

        def masked(i: ir.Value, j: ir.Value) -> None:
            value = b.select(nan_if, _constant(element, math.nan), source(i, j))
            upper = b.and_(b.icmp_signed("==", keep, ir.Constant(I32, _KEEP["upper"])), b.icmp_signed("<", j, i))
            lower = b.and_(b.icmp_signed("==", keep, ir.Constant(I32, _KEEP["lower"])), b.icmp_signed(">", j, i))
            store(b.select(b.or_(upper, lower), _constant(element, 0.0), value), i, j)

        plain = b.and_(b.icmp_signed("==", keep, ir.Constant(I32, _KEEP["all"])), b.not_(nan_if))
        if _bytes(element) in (4, 8):
            # A transpose (one side's rows, the other's columns contiguous) goes by whole tiles in
            # registers. The second form is the first with the matrix's two axes swapped.
            is_one = lambda x: b.icmp_signed("==", x, ir.Constant(I64, 1))  # noqa: E731
            rows_first = b.and_(is_one(src_col), is_one(dst_row))
            columns_first = b.and_(is_one(src_row), is_one(dst_col))
            with b.if_then(b.and_(plain, b.or_(rows_first, columns_first))):
                swap = b.not_(rows_first)
                _transpose(loops, dst, src, b.select(swap, cols, rows), b.select(swap, rows, cols),
                           b.select(swap, src_col, src_row), b.select(swap, dst_row, dst_col),
                           _VECTOR_BYTES // _bytes(element))
                b.ret_void()
        # Other copies in tiles; a plain one (no mask, no NaN) without the selects.
        with b.if_else(plain) as (then, otherwise):
            with then:
                _tiles(loops, (zero, rows), (zero, cols), lambda i, j: store(source(i, j), i, j))
            with otherwise:
                _tiles(loops, (zero, rows), (zero, cols), masked)
        b.ret_void()
        return fn

    def fill(self, dst: ir.Value, count: int, value: float) -> None:
        with self.loop(count) as i:
            self.b.store(_constant(self.element, value), self.b.gep(dst, [i]))

    def call(self, slot: int, args: list[ir.Value]) -> None:
        """Call the routine at ``slot`` of the table (a void function of pointers)."""
        signature = ir.FunctionType(ir.VoidType(), [I8P] * len(args))
        routine = self.b.bitcast(self.b.load(self.b.gep(self.table, [ir.Constant(I64, slot)])),
                                 signature.as_pointer())
        self.b.call(routine, [self.b.bitcast(a, I8P) for a in args])

    def failed(self) -> ir.Value:
        """Whether the last call reported an error (``info != 0``)."""
        return self.b.icmp_signed("!=", self.b.load(self.info), ir.Constant(I32, 0))


def _batch(shape: tuple) -> int:
    return math.prod(shape[:-2])


# --- the emitters: (function, eqn) -------------------------------------------------------------------
def _lu(f: LapackFunction, eqn: Eqn) -> None:
    shape = eqn.invars[0].aval.shape
    m, n = shape[-2:]
    k = min(m, n)
    [x], [lu, pivots, permutation] = f.ins, f.outs
    column_major, rows = f.space(m * n), f.space(m, F64)
    b = f.b
    with f.loop(_batch(shape)) as index:
        pivot = f.matrix(pivots, index, k)
        f.copy(column_major, f.matrix(x, index, m * n), m, n, (1, m), (n, 1))
        f.call(0, [f.ref(m), f.ref(n), column_major, f.ref(m), pivot, f.info])  # (info > 0: a zero pivot, unscaled)
        f.copy(f.matrix(lu, index, m * n), column_major, m, n, (n, 1), (1, m))
        # getrf's row interchanges applied to a column of row numbers give the permutation (exact
        # in float64): one laswp (n, a, lda, k1, k2, ipiv, incx) rather than a loop over the pivots
        with f.loop(m) as i:
            b.store(b.sitofp(i, F64), b.gep(rows, [i]))
        f.call(1, [f.ref(1), rows, f.ref(m), f.ref(1), f.ref(k), pivot, f.ref(1)])
        perm = f.matrix(permutation, index, m)
        with f.loop(m) as i:
            b.store(b.fptosi(b.load(b.gep(rows, [i])), I32), b.gep(perm, [i]))
        with f.loop(k) as i:  # LAPACK's pivots count from 1
            at = b.gep(pivot, [i])
            b.store(b.sub(b.load(at), ir.Constant(I32, 1)), at)


def _cholesky(f: LapackFunction, eqn: Eqn) -> None:
    shape = eqn.invars[0].aval.shape
    n = shape[-1]
    with f.loop(_batch(shape)) as index:
        a, out = f.matrix(f.ins[0], index, n * n), f.matrix(f.outs[0], index, n * n)
        f.copy(out, a, n, n, (n, 1), (n, 1))
        f.call(0, [f.ref(b"U"), f.ref(n), out, f.ref(n), f.info])  # x's lower factor, in place
        f.copy(out, out, n, n, (n, 1), (n, 1), keep="lower", nan_if=f.failed())


def _triangular_solve(f: LapackFunction, eqn: Eqn) -> None:
    a_shape, shape = eqn.invars[0].aval.shape, eqn.invars[1].aval.shape
    m = a_shape[-1]
    rows, cols = shape[-2:]
    if not math.prod(shape):
        return
    p = eqn.params
    # The transposed system of the column-major views: the side and the triangle swap.
    # (a^H's transpose is the conjugate of the column-major view's transpose: trsm's "C")
    op = (b"C" if p["conjugate_a"] else b"T") if p["transpose_a"] else b"N"
    flags = [f.ref(b"R" if p["left_side"] else b"L"), f.ref(b"U" if p["lower"] else b"L"), f.ref(op),
             f.ref(b"U" if p["unit_diagonal"] else b"N")]
    one = f.ref(1.0, f.element)
    with f.loop(_batch(shape)) as index:
        out = f.matrix(f.outs[0], index, rows * cols)
        f.copy(out, f.matrix(f.ins[1], index, rows * cols), rows, cols, (cols, 1), (cols, 1))
        # x (rows x cols, row-major) is a cols x rows column-major matrix
        f.call(0, [*flags, f.ref(cols), f.ref(rows), one, f.matrix(f.ins[0], index, m * m), f.ref(m), out,
                   f.ref(cols)])


def _qr(f: LapackFunction, eqn: Eqn) -> None:
    x = eqn.invars[0].aval
    m, n = x.shape[-2:]
    k = min(m, n)
    rows = m if eqn.params["full_matrices"] else k
    width = max(n, rows)
    geqrf, orgqr = routines(eqn)  # (complex: ungqr, the same arguments)
    # The reflectors in an m x width column-major array, which orgqr then turns into q.
    area, tau = np.empty((width, m), x.dtype), np.empty(max(k, 1), x.dtype)
    lwork_r = _workspace(geqrf, x.dtype, lambda size, query: [
        _ref(m), _ref(n), area.ctypes.data, _ref(m), tau.ctypes.data, size, query, _ref(0)])
    lwork_q = _workspace(orgqr, x.dtype, lambda size, query: [
        _ref(m), _ref(rows), _ref(k), area.ctypes.data, _ref(m), tau.ctypes.data, size, query, _ref(0)])
    reflectors, tau, work_r, work_q = f.space(width * m), f.space(max(k, 1)), f.space(lwork_r), f.space(lwork_q)
    [a], [q, r] = f.ins, f.outs
    with f.loop(_batch(x.shape)) as index:
        if width > n:
            f.fill(f.b.gep(reflectors, [ir.Constant(I64, n * m)]), (width - n) * m, 0.0)
        f.copy(reflectors, f.matrix(a, index, m * n), m, n, (1, m), (n, 1))
        f.call(0, [f.ref(m), f.ref(n), reflectors, f.ref(m), tau, work_r, f.ref(lwork_r), f.info])
        f.copy(f.matrix(r, index, rows * n), reflectors, rows, n, (n, 1), (1, m), keep="upper")
        f.call(1, [f.ref(m), f.ref(rows), f.ref(k), reflectors, f.ref(m), tau, work_q, f.ref(lwork_q), f.info])
        f.copy(f.matrix(q, index, m * rows), reflectors, m, rows, (rows, 1), (1, m))


def _real_dtype(dtype: np.dtype) -> np.dtype:
    return np.finfo(dtype).dtype  # (float32 for complex64, float64 for complex128; a real dtype itself)


def _eigh(f: LapackFunction, eqn: Eqn) -> None:
    x = eqn.invars[0].aval
    n = x.shape[-1]
    uplo = b"L" if eqn.params["lower"] else b"U"
    complex_ = dtypes.is_complex(x.dtype)
    # syevd (jobz, uplo, n, a, lda, w, work, lwork, iwork, liwork, info); heevd has a real
    # workspace (rwork, lrwork) before iwork. The documented minimums (jobz "V", n > 1) bound the
    # queried sizes from below.
    size, rsize, isize = np.zeros(1, x.dtype), np.zeros(1, _real_dtype(x.dtype)), np.zeros(1, np.int32)
    dummy, w_dummy = np.empty((n, n + 1), x.dtype), np.empty(n, _real_dtype(x.dtype))
    real_query = [rsize.ctypes.data, _ref(-1)] if complex_ else []
    _query(routines(eqn)[0], _ref(b"V"), _ref(uplo), _ref(n), dummy.ctypes.data, _ref(n), w_dummy.ctypes.data,
           size.ctypes.data, _ref(-1), *real_query, isize.ctypes.data, _ref(-1), _ref(0))
    lwork = max(_size(size), 2 * n + n * n if complex_ else 1 + 6 * n + 2 * n * n)
    lrwork, liwork = max(_size(rsize), 1 + 5 * n + 2 * n * n), max(_size(isize), 3 + 5 * n)
    matrix, work, iwork = f.space(n * n), f.space(lwork), f.space(liwork, I32)
    real_work = [f.space(lrwork, f.real), f.ref(lrwork)] if complex_ else []
    [a], [vectors, values] = f.ins, f.outs
    with f.loop(_batch(x.shape)) as index:
        w = f.matrix(values, index, n)
        f.copy(matrix, f.matrix(a, index, n * n), n, n, (1, n), (n, 1))
        f.call(0, [f.ref(b"V"), f.ref(uplo), f.ref(n), matrix, f.ref(n), w, work, f.ref(lwork), *real_work, iwork,
                   f.ref(liwork), f.info])
        failed = f.failed()
        # column-major eigenvectors: the columns of the result
        f.copy(f.matrix(vectors, index, n * n), matrix, n, n, (n, 1), (1, n), nan_if=failed)
        f.copy(w, w, 1, n, (0, 1), (0, 1), nan_if=failed)


def _svd(f: LapackFunction, eqn: Eqn) -> None:
    x = eqn.invars[0].aval
    m, n = x.shape[-2:]
    k, most = min(m, n), max(m, n)
    full, compute_uv = eqn.params["full_matrices"], eqn.params["compute_uv"]
    complex_ = dtypes.is_complex(x.dtype)
    jobz = (b"A" if full else b"S") if compute_uv else b"N"
    u_cols, vh_rows = (m, n) if full else (k, k)
    # gesdd (jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, iwork, info); the complex one has
    # a real workspace (rwork) before iwork, of the length its documentation gives (no query):
    # 7 min(m, n) for jobz "N" (LAPACK before 3.7 reads that many; 5 since), else
    # max(5 mn^2 + 5 mn, 2 mx mn + 2 mn^2 + mn).
    lrwork = 7 * k if not compute_uv else max(5 * k * k + 5 * k, 2 * most * k + 2 * k * k + k)
    dummy, size, iwork = np.empty(most ** 2 + 1, x.dtype), np.zeros(1, x.dtype), np.empty(8 * k, np.int32)
    s_dummy, rwork = np.empty(k, _real_dtype(x.dtype)), np.empty(lrwork if complex_ else 0, _real_dtype(x.dtype))
    _query(routines(eqn)[0], _ref(jobz), _ref(m), _ref(n), dummy.ctypes.data, _ref(m), s_dummy.ctypes.data,
           dummy.ctypes.data, _ref(m), dummy.ctypes.data, _ref(vh_rows), size.ctypes.data, _ref(-1),
           *([rwork.ctypes.data] if complex_ else []), iwork.ctypes.data, _ref(0))
    lwork = _size(size)
    if complex_:  # (at least the documented minimums, for jobz "N", "S" and "A")
        lwork = max(lwork, {b"N": 2 * k + most, b"S": k * k + 3 * k, b"A": k * k + 2 * k + most}[jobz])
    a, work, iwork = f.space(m * n), f.space(lwork), f.space(8 * k, I32)
    real_work = [f.space(lrwork, f.real)] if complex_ else []
    u, vt = (f.space(m * u_cols), f.space(vh_rows * n)) if compute_uv else (a, a)  # (else not referenced)
    with f.loop(_batch(x.shape)) as index:
        s = f.matrix(f.outs[1] if compute_uv else f.outs[0], index, k)
        f.copy(a, f.matrix(f.ins[0], index, m * n), m, n, (1, m), (n, 1))
        f.call(0, [f.ref(jobz), f.ref(m), f.ref(n), a, f.ref(m), s, u, f.ref(m), vt, f.ref(vh_rows), work,
                   f.ref(lwork), *real_work, iwork, f.info])
        failed = f.failed()
        f.copy(s, s, 1, k, (0, 1), (0, 1), nan_if=failed)
        if compute_uv:  # (vt holds v^H, for complex matrices too)
            f.copy(f.matrix(f.outs[0], index, m * u_cols), u, m, u_cols, (u_cols, 1), (1, m), nan_if=failed)
            f.copy(f.matrix(f.outs[2], index, vh_rows * n), vt, vh_rows, n, (n, 1), (1, vh_rows), nan_if=failed)


_EMITTERS: dict[Any, Callable[[LapackFunction, Eqn], None]] = {
    linalg.lu_p: _lu,
    linalg.cholesky_p: _cholesky,
    linalg.triangular_solve_p: _triangular_solve,
    linalg.qr_p: _qr,
    linalg.eigh_p: _eigh,
    linalg.svd_p: _svd,
}
# ("{}": the dtype's prefix; LU's permutation is computed in float64 whatever the dtype)
_ROUTINES = {
    linalg.lu_p: ("{}getrf", "dlaswp"),
    linalg.cholesky_p: ("{}potrf",),
    linalg.triangular_solve_p: ("{}trsm",),
    linalg.qr_p: ("{}geqrf", "{}orgqr"),
    linalg.eigh_p: ("{}syevd",),
    linalg.svd_p: ("{}gesdd",),
}


# the complex routines whose names are not the real ones' with another prefix
_COMPLEX_NAMES = {"{}orgqr": "{}ungqr", "{}syevd": "{}heevd"}


def routines(eqn: Eqn) -> tuple[str, ...]:
    """The names of the routines that ``eqn``'s function calls, in its table's order."""
    dtype = eqn.invars[0].aval.dtype
    names = _ROUTINES[eqn.primitive]
    if dtypes.is_complex(dtype):
        names = tuple(_COMPLEX_NAMES.get(name, name) for name in names)
    return tuple(name.format(_PREFIX[dtype]) for name in names)


_tables: dict[tuple[str, ...], ctypes.Array] = {}


def routine_table(eqn: Eqn) -> int:
    """The address of the table of ``routines(eqn)`` (kept for the process's life)."""
    names = routines(eqn)
    if names not in _tables:
        _tables[names] = (ctypes.c_void_p * len(names))(*map(address, names))
    return ctypes.addressof(_tables[names])


def lowers(eqn: Eqn) -> bool:
    """Whether ``eqn`` runs on LAPACK here: a rule, float32 / float64 / complex64 / complex128,
    matrices that are not empty (and no triangular solve with a conjugate that is not transposed)."""
    if eqn.primitive not in _EMITTERS:
        return False
    x = eqn.invars[0].aval
    if x.dtype not in _PREFIX:
        return False
    # trsm has no conjugate-without-transpose (the transposed view would need it)
    if eqn.params.get("conjugate_a") and not eqn.params["transpose_a"]:
        return False
    return min(x.shape[-2:]) > 0 and _scipy_available()


@functools.cache
def _scipy_available() -> bool:
    try:
        address("sgetrf")
    except ImportError:
        return False
    return True
