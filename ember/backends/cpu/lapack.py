"""Decompositions and triangular solves on LAPACK and BLAS: LU (``getrf``), Cholesky (``potrf``),
triangular solves (``trsm``), QR (``geqrf``, ``orgqr``), symmetric eigenproblems (``syevd``) and
singular values (``gesdd``).

Where they come from: SciPy's ``scipy.linalg.cython_lapack`` and ``cython_blas`` publish the
LAPACK and BLAS that SciPy itself links (OpenBLAS in its wheels) as C function pointers, the
route Numba takes. It is a well-kept, tested LAPACK with one documented ABI (Fortran: every
argument by reference), installed from the package registries with SciPy (a runtime dependency
for this reason); NumPy's own LAPACK has no public entry points. SciPy's modules are imported
when a program first needs them (they take about 0.45 s).

Row-major buffers are LAPACK's column-major matrices transposed, which the calls use instead of
copying: ``trsm`` solves the transposed system (the side and the triangle swap), ``potrf`` of
the upper triangle of ``x``'s transpose is ``x``'s lower Cholesky factor, ``syevd`` of a
symmetric matrix reads the other triangle, and the SVD of ``x``'s transpose is ``x``'s with
``u`` and ``vh`` exchanged and transposed, which is how column-major ``u`` and ``vt`` read
row-major. ``getrf`` and ``geqrf`` need ``x`` in column-major order (row pivoting or Householder
reflections of rows are not those of columns): one copy in and one out. Results follow the
reference rules (``backends/reference/linalg.py``, which call the same routines through NumPy
or write them out): LU leaves a zero pivot unscaled and singular systems give IEEE inf / NaN, as
LAPACK does; a matrix that is not positive definite, and an eigensolver or SVD that does not
converge, give NaN, as JAX.

Matrices smaller than ``MIN_SIZE`` stay on the reference, which handles a whole batch at once
in NumPy: one call per matrix would cost more there.
"""
from __future__ import annotations

import ctypes
import functools
from typing import Any, Callable

import numpy as np

from ember import dtypes
from ember.core.ir import Eqn
from ember.lax import linalg

MIN_SIZE = 16

_INT, _CHAR = ctypes.POINTER(ctypes.c_int), ctypes.c_char_p
_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d"}
_SCALAR = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}


@functools.cache
def _routine(name: str, argtypes: tuple) -> Callable:
    """SciPy's LAPACK / BLAS routine ``name`` as a ctypes function (void, arguments by reference)."""
    # Imported here, when a program first calls LAPACK: importing SciPy's linalg takes ~0.45 s.
    from scipy.linalg import cython_blas, cython_lapack
    capsule = cython_lapack.__pyx_capi__.get(name) or cython_blas.__pyx_capi__[name]
    # (prototypes of our own: ctypes.pythonapi's are shared with every other user of ctypes)
    get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
    get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", ctypes.pythonapi))
    return ctypes.CFUNCTYPE(None, *argtypes)(get_pointer(capsule, get_name(capsule)))


def _int(n: int) -> Any:
    return ctypes.byref(ctypes.c_int(n))


def _matrices(x: np.ndarray) -> np.ndarray:
    return x.reshape((-1,) + x.shape[-2:])


# --- the rules: (eqn) -> a function of the operands' arrays returning the list of outputs ------------
def _lu(eqn: Eqn) -> Callable:
    dtype = eqn.invars[0].aval.dtype
    getrf = _routine(_PREFIX[dtype] + "getrf", (_INT, _INT, ctypes.c_void_p, _INT, ctypes.c_void_p, _INT))
    # (n, a, lda, k1, k2, ipiv, incx): getrf's row interchanges applied to a column of row numbers
    # give the permutation (exact in float64), in one call rather than a Python loop over pivots
    laswp = _routine("dlaswp", (_INT, ctypes.c_void_p, _INT, _INT, _INT, ctypes.c_void_p, _INT))

    def run(x: np.ndarray) -> list[np.ndarray]:
        *batch, m, n = x.shape
        k = min(m, n)
        lu = np.empty(x.shape, dtype)
        pivots = np.empty((*batch, k), np.int32)
        permutation = np.empty((*batch, m), np.int32)
        info = ctypes.c_int(0)
        rows = np.empty(m, np.float64)
        for a, out, piv, perm in zip(_matrices(x), _matrices(lu), pivots.reshape(-1, k), permutation.reshape(-1, m)):
            column_major = np.asfortranarray(a)
            getrf(_int(m), _int(n), column_major.ctypes.data, _int(m), piv.ctypes.data, ctypes.byref(info))
            out[...] = column_major  # (info > 0: a zero pivot, left unscaled)
            rows[...] = np.arange(m)
            if k:
                laswp(_int(1), rows.ctypes.data, _int(m), _int(1), _int(k), piv.ctypes.data, _int(1))
            perm[...] = rows
            piv -= 1  # (LAPACK's pivots count from 1)
        return [lu, pivots, permutation]
    return run


def _cholesky(eqn: Eqn) -> Callable:
    dtype = eqn.invars[0].aval.dtype
    potrf = _routine(_PREFIX[dtype] + "potrf", (_CHAR, _INT, ctypes.c_void_p, _INT, _INT))

    def run(x: np.ndarray) -> list[np.ndarray]:
        n = x.shape[-1]
        out = np.array(x, dtype, order="C")
        lower = np.tri(n, dtype=bool)
        info = ctypes.c_int(0)
        for a in _matrices(out):
            potrf(b"U", _int(n), a.ctypes.data, _int(n), ctypes.byref(info))  # x's lower factor, in place
            a[...] = np.where(lower, a if info.value == 0 else np.nan, 0)
        return [out]
    return run


def _triangular_solve(eqn: Eqn) -> Callable:
    dtype = eqn.invars[0].aval.dtype
    scalar = _SCALAR[dtype]
    trsm = _routine(_PREFIX[dtype] + "trsm", (_CHAR, _CHAR, _CHAR, _CHAR, _INT, _INT, ctypes.POINTER(scalar),
                                              ctypes.c_void_p, _INT, ctypes.c_void_p, _INT))
    p = eqn.params
    # The transposed system of the column-major views: the side and the triangle swap.
    side = b"R" if p["left_side"] else b"L"
    uplo = b"U" if p["lower"] else b"L"
    trans = b"T" if p["transpose_a"] else b"N"
    diag = b"U" if p["unit_diagonal"] else b"N"

    def run(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
        out = np.array(b, dtype, order="C")
        if out.size == 0:
            return [out]
        rows, cols = b.shape[-2:]
        m = a.shape[-1]
        one = ctypes.byref(scalar(1.0))
        for t, x in zip(_matrices(np.ascontiguousarray(a)), _matrices(out)):
            # x (rows x cols, row-major) is a cols x rows column-major matrix
            trsm(side, uplo, trans, diag, _int(cols), _int(rows), one, t.ctypes.data, _int(m), x.ctypes.data,
                 _int(cols))
        return [out]
    return run


def _workspace(query: Callable[[Any, Any], None], scalar: type) -> tuple[np.ndarray, int]:
    """The work array that a routine asks for in its workspace query (``lwork = -1``)."""
    size = scalar(0)
    query(ctypes.byref(size), _int(-1))
    lwork = max(1, int(size.value))
    return np.empty(lwork, np.dtype(scalar)), lwork


def _qr(eqn: Eqn) -> Callable:
    dtype = eqn.invars[0].aval.dtype
    scalar, prefix = _SCALAR[dtype], _PREFIX[dtype]
    # (m, n, a, lda, tau, work, lwork, info) / (m, n, k, a, lda, tau, work, lwork, info)
    geqrf = _routine(prefix + "geqrf", (_INT, _INT, ctypes.c_void_p, _INT, ctypes.c_void_p, ctypes.c_void_p, _INT,
                                        _INT))
    orgqr = _routine(prefix + "orgqr", (_INT, _INT, _INT, ctypes.c_void_p, _INT, ctypes.c_void_p, ctypes.c_void_p,
                                        _INT, _INT))
    full = eqn.params["full_matrices"]

    def run(x: np.ndarray) -> list[np.ndarray]:
        *batch, m, n = x.shape
        k = min(m, n)
        rows = m if full else k
        q = np.empty((*batch, m, rows), dtype)
        r = np.empty((*batch, rows, n), dtype)
        info = ctypes.c_int(0)
        tau = np.empty(max(k, 1), dtype)
        # the reflectors in an m x max(n, rows) column-major array, which orgqr then turns into q
        work_area = np.empty((max(n, rows), m), dtype)  # (row-major: its transpose, column-major)
        reflectors = work_area.ctypes.data
        # one workspace for every matrix: the queries depend on the shapes alone
        work_r, lwork_r = _workspace(lambda size, query: geqrf(_int(m), _int(n), reflectors, _int(m), tau.ctypes.data,
                                                               size, query, ctypes.byref(info)), scalar)
        work_q, lwork_q = _workspace(lambda size, query: orgqr(_int(m), _int(rows), _int(k), reflectors, _int(m),
                                                               tau.ctypes.data, size, query, ctypes.byref(info)),
                                     scalar)
        for a, q_out, r_out in zip(_matrices(x), _matrices(q), _matrices(r)):
            work_area[n:] = 0
            work_area[:n] = a.T
            geqrf(_int(m), _int(n), reflectors, _int(m), tau.ctypes.data, work_r.ctypes.data, _int(lwork_r),
                  ctypes.byref(info))
            r_out[...] = np.triu(work_area[:n].T[:rows])
            orgqr(_int(m), _int(rows), _int(k), reflectors, _int(m), tau.ctypes.data, work_q.ctypes.data,
                  _int(lwork_q), ctypes.byref(info))
            q_out[...] = work_area[:rows].T
        return [q, r]
    return run


def _eigh(eqn: Eqn) -> Callable:
    dtype = eqn.invars[0].aval.dtype
    scalar = _SCALAR[dtype]
    # (jobz, uplo, n, a, lda, w, work, lwork, iwork, liwork, info)
    syevd = _routine(_PREFIX[dtype] + "syevd", (_CHAR, _CHAR, _INT, ctypes.c_void_p, _INT, ctypes.c_void_p,
                                                ctypes.c_void_p, _INT, ctypes.c_void_p, _INT, _INT))
    uplo = b"U" if eqn.params["lower"] else b"L"  # x's lower triangle is its transpose's upper one

    def run(x: np.ndarray) -> list[np.ndarray]:
        n = x.shape[-1]
        vectors = np.array(x, dtype, order="C")
        values = np.empty(x.shape[:-1], dtype)
        info = ctypes.c_int(0)
        size, isize = scalar(0), ctypes.c_int(0)
        syevd(b"V", uplo, _int(n), vectors.ctypes.data, _int(n), values.ctypes.data, ctypes.byref(size), _int(-1),
              ctypes.byref(isize), _int(-1), ctypes.byref(info))
        work, iwork = np.empty(max(1, int(size.value)), dtype), np.empty(max(1, isize.value), np.int32)
        for v, w in zip(_matrices(vectors), values.reshape(-1, n)):
            syevd(b"V", uplo, _int(n), v.ctypes.data, _int(n), w.ctypes.data, work.ctypes.data, _int(work.size),
                  iwork.ctypes.data, _int(iwork.size), ctypes.byref(info))
            if info.value:
                v[...], w[...] = np.nan, np.nan
            else:
                v[...] = v.T.copy()  # column-major eigenvectors: the columns of v
        return [vectors, values]
    return run


def _svd(eqn: Eqn) -> Callable:
    dtype = eqn.invars[0].aval.dtype
    scalar = _SCALAR[dtype]
    # (jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, iwork, info)
    gesdd = _routine(_PREFIX[dtype] + "gesdd", (_CHAR, _INT, _INT, ctypes.c_void_p, _INT, ctypes.c_void_p,
                                                ctypes.c_void_p, _INT, ctypes.c_void_p, _INT, ctypes.c_void_p, _INT,
                                                ctypes.c_void_p, _INT))
    full, compute_uv = eqn.params["full_matrices"], eqn.params["compute_uv"]
    jobz = (b"A" if full else b"S") if compute_uv else b"N"

    def run(x: np.ndarray) -> list[np.ndarray]:
        *batch, m, n = x.shape
        k = min(m, n)
        # x row-major is x.T (n x m) column-major: its u (n x n or n x k) is vh, its vt u.
        a_all = np.array(x, dtype, order="C")
        s = np.empty((*batch, k), dtype)
        u_cols, vh_rows = (m, n) if full else (k, k)
        u = np.empty((*batch, m, u_cols), dtype)
        vh = np.empty((*batch, vh_rows, n), dtype)
        iwork = np.empty(8 * k, np.int32)
        info = ctypes.c_int(0)
        ld_u, ld_vt = max(n, 1), max(u_cols, 1)

        def call(a, s_out, u_out, vh_out, work, lwork):
            gesdd(jobz, _int(n), _int(m), a, _int(n), s_out, vh_out, _int(ld_u), u_out, _int(ld_vt), work, lwork,
                  iwork.ctypes.data, ctypes.byref(info))
        size = scalar(0)
        call(a_all.ctypes.data, s.ctypes.data, u.ctypes.data, vh.ctypes.data, ctypes.byref(size), _int(-1))
        work = np.empty(max(1, int(size.value)), dtype)
        for a, s_out, u_out, vh_out in zip(_matrices(a_all), s.reshape(-1, k), _matrices(u), _matrices(vh)):
            call(a.ctypes.data, s_out.ctypes.data, u_out.ctypes.data, vh_out.ctypes.data, work.ctypes.data,
                 _int(work.size))
            if info.value:
                s_out[...], u_out[...], vh_out[...] = np.nan, np.nan, np.nan
        return [u, s, vh] if compute_uv else [s]
    return run


native_rules: dict[Any, Callable[[Eqn], Callable]] = {
    linalg.qr_p: _qr,
    linalg.eigh_p: _eigh,
    linalg.svd_p: _svd,
    linalg.lu_p: _lu,
    linalg.cholesky_p: _cholesky,
    linalg.triangular_solve_p: _triangular_solve,
}


def lowers(eqn: Eqn) -> bool:
    """Whether ``eqn`` runs on LAPACK here: a rule, float32 / float64, matrices of ``MIN_SIZE``."""
    if eqn.primitive not in native_rules:
        return False
    x = eqn.invars[0].aval
    return x.dtype in (dtypes.float32, dtypes.float64) and min(x.shape[-2:]) >= MIN_SIZE and _scipy_available()


@functools.cache
def _scipy_available() -> bool:
    try:
        _routine("sgetrf", (_INT, _INT, ctypes.c_void_p, _INT, ctypes.c_void_p, _INT))
    except ImportError:
        return False
    return True
