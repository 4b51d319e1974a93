"""ember.scipy.linalg's special matrices and the decompositions built on Schur / Hessenberg forms:
against SciPy (values) and JAX (dtypes, shapes, batching), eagerly and under jit. Needs SciPy."""
import numpy as np
import pytest

import ember
from ember.scipy import linalg as sla
from tests.util import assert_allclose, check_eager_and_jit

scipy_linalg = pytest.importorskip("scipy.linalg")


# --- special matrices ----------------------------------------------------------------------------------------
# (name, array arguments, static arguments): each against SciPy, in float32 / int32 / complex64.
CONSTRUCTORS = [
    ("toeplitz", (np.array([1.0, 2.5, -3.0]),), ()),
    ("toeplitz", (np.array([1.0, 2.0, 3j]), np.array([9.0, 5.0, 4.0, 1.0])), ()),
    ("toeplitz", (np.array([1.0, 2j, 3.0]),), ()),
    ("circulant", (np.array([1.0, 2.0, 3.0, 7.0]),), ()),
    ("hankel", (np.array([1.0, 2.0, 3.0]),), ()),
    ("hankel", (np.array([1.0, 2.0, 3.0]), np.array([7.0, 8.0, 9.0, 10.0])), ()),
    ("companion", (np.array([2.0, 3.0, 4.0, -1.0]),), ()),
    ("leslie", (np.array([0.1, 2.0, 1.0, 0.5]), np.array([0.2, 0.8, 0.7])), ()),
    ("fiedler", (np.array([1.0, 4.0, 12.0, 45.0]),), ()),
    ("fiedler_companion", (np.array([1.0, -16.0, 86.0, -176.0, 105.0]),), ()),
    ("fiedler_companion", (np.array([2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]),), ()),
    ("fiedler_companion", (np.array([2.0, 3.0]),), ()),
    ("convolution_matrix", (np.array([1.0, 2.0, 3.0]),), (4, "full")),
    ("convolution_matrix", (np.array([1.0, 2.0, 3.0]),), (4, "same")),
    ("convolution_matrix", (np.array([1.0, 2.0, 3.0, 4.0, 5.0]),), (3, "same")),
    ("convolution_matrix", (np.array([1.0, 2.0, 3.0, 4.0]),), (6, "valid")),
    ("convolution_matrix", (np.array([1.0, 2.0, 3.0, 4.0]),), (2, "valid")),
]


BY_NAME = {f.__name__: f for f in (sla.toeplitz, sla.circulant, sla.hankel, sla.companion, sla.leslie, sla.fiedler,
                                   sla.fiedler_companion, sla.convolution_matrix)}


@pytest.mark.parametrize("name,arrays,static", CONSTRUCTORS, ids=lambda v: v if isinstance(v, str) else "")
def test_matrix_constructors_match_scipy(name, arrays, static):
    expected = getattr(scipy_linalg, name)(*arrays, *static)
    expected = expected.astype(np.complex64 if np.iscomplexobj(expected) else np.float32)
    check_eager_and_jit(lambda *a: BY_NAME[name](*a, *static), *arrays, expected=expected,
                        rtol=1e-6, atol=1e-6)


def test_sla_toeplitz_hankel_circulant_keep_integers_and_batch():
    c, r = np.array([[1, 2, 3], [4, 5, 6]], np.int32), np.array([7, 8, 9, 10], np.int32)
    for fn, args in ((sla.toeplitz, (c, r)), (sla.hankel, (c, r)), (sla.circulant, (c,))):
        got = fn(*args)
        assert got.dtype == np.int32
        reference = getattr(scipy_linalg, fn.__name__)
        assert_allclose(got, np.stack([reference(row, *args[1:]) for row in c]).astype(np.int32))
    batch = np.arange(1.0, 7.0).reshape(2, 3)
    for fn in (sla.companion, sla.fiedler, sla.fiedler_companion):
        reference = getattr(scipy_linalg, fn.__name__)
        assert_allclose(fn(batch), np.stack([reference(row) for row in batch]).astype(np.float32), rtol=1e-6)
    assert_allclose(sla.leslie(np.ones((2, 3)), np.array([0.5, 0.25])),
                    np.stack([scipy_linalg.leslie(np.ones(3), [0.5, 0.25])] * 2).astype(np.float32))
    assert_allclose(sla.convolution_matrix(batch, 2),
                    np.stack([scipy_linalg.convolution_matrix(row, 2) for row in batch]).astype(np.float32))


def test_sla_block_diag_matches_scipy():
    blocks = (np.ones((2, 2), np.float32), np.array([1, 2, 3], np.int32), 5)
    check_eager_and_jit(sla.block_diag, *blocks[:2],
                        expected=scipy_linalg.block_diag(*blocks[:2]).astype(np.float32))
    assert_allclose(sla.block_diag(*blocks), scipy_linalg.block_diag(*blocks).astype(np.float32))
    assert_allclose(sla.block_diag(np.array([[1j]]), 2.0), scipy_linalg.block_diag([[1j]], 2.0).astype(np.complex64))
    assert sla.block_diag().shape == (1, 0)
    with pytest.raises(ValueError, match="at most 2 dimensions"):
        sla.block_diag(np.ones((2, 2, 2)))


@pytest.mark.parametrize("n", [0, 1, 4, 6])
def test_sla_fixed_matrices_match_scipy(n):
    assert_allclose(sla.hilbert(n), scipy_linalg.hilbert(n).astype(np.float32))
    assert_allclose(sla.invhilbert(n), scipy_linalg.invhilbert(n).astype(np.float32), rtol=1e-6)
    for kind in ("symmetric", "lower", "upper"):
        assert_allclose(sla.pascal(n, kind), scipy_linalg.pascal(n, kind).astype(np.float32))
        assert_allclose(sla.invpascal(n, kind), scipy_linalg.invpascal(n, kind).astype(np.float32))
    assert_allclose(sla.pascal(n), scipy_linalg.pascal(n).astype(np.float32))
    if n:
        for full in (False, True):
            assert_allclose(sla.helmert(n, full), scipy_linalg.helmert(n, full).astype(np.float32), rtol=1e-6)
        for scale in (None, "sqrtn", "n"):
            assert_allclose(sla.dft(n, scale), scipy_linalg.dft(n, scale).astype(np.complex64), rtol=1e-6, atol=1e-6)
    with ember.config.override(enable_x64=True):
        assert_allclose(sla.invhilbert(n), scipy_linalg.invhilbert(n), rtol=1e-12)
        assert sla.dft(n).dtype == np.complex128 and sla.hilbert(n).dtype == np.float64


def test_sla_hadamard_and_errors_as_jax():
    for n in (1, 2, 8):
        assert_allclose(sla.hadamard(n), scipy_linalg.hadamard(n).astype(np.int32))
    assert_allclose(sla.hadamard(4, np.float32), scipy_linalg.hadamard(4).astype(np.float32))
    with pytest.raises(ValueError, match="positive power of 2; got 3"):
        sla.hadamard(3)
    with pytest.raises(ValueError, match="complex floating-point"):
        sla.dft(3, dtype=np.float32)
    with pytest.raises(ValueError, match="scale must be None"):
        sla.dft(3, "foo")
    with pytest.raises(ValueError, match="Expected kind"):
        sla.pascal(3, "foo")
    with pytest.raises(ValueError, match="at least 2"):
        sla.companion(np.array([2.0]))
    with pytest.raises(ValueError, match="mode must be one of"):
        sla.convolution_matrix(np.ones(3), 2, "foo")
    with pytest.raises(ValueError, match="positive integer"):
        sla.convolution_matrix(np.ones(3), 0)


def test_sla_special_matrices_against_jax():
    jsla = pytest.importorskip("jax.scipy.linalg")
    cases = [("block_diag", (np.ones((2, 2)), np.array([1, 2, 3]), 5)), ("toeplitz", (np.array([1, 2j, 3]),)),
             ("hankel", (np.array([1, 2, 3]), np.array([7, 8]))), ("companion", (np.array([2, 3, 4]),)),
             ("hilbert", (3,)), ("pascal", (4, "lower")), ("helmert", (4, True)), ("hadamard", (4,)),
             ("dft", (3, "sqrtn")), ("fiedler", (np.array([1, 4, 12]),)), ("leslie", (np.array([1, 2]), np.array([3]))),
             ("fiedler_companion", (np.array([[1.0, 3, 4], [1, 2, 3]]),)),
             ("convolution_matrix", (np.array([1.0, 2, 3]), 4, "same"))]
    for name, args in cases:
        ours, theirs = getattr(sla, name)(*args), getattr(jsla, name)(*args)
        assert_allclose(ours, np.asarray(theirs), rtol=1e-4, atol=1e-4)  # (JAX's pascal is rounded)


# --- schur, hessenberg, polar --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_sla_schur_hessenberg_polar_match_scipy(dtype):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 4, 4)) + (1j * rng.normal(size=(2, 4, 4)) if dtype == np.complex64 else 0)
    x = x.astype(dtype)
    adjoint = lambda m: np.conj(np.swapaxes(np.asarray(m), -1, -2))  # noqa: E731
    for output in ("real", "complex"):
        t, z = check_eager_and_jit(lambda m: sla.schur(m, output=output), x[0], rtol=1e-5, atol=1e-5)
        assert_allclose(np.asarray(z) @ np.asarray(t) @ adjoint(z), x[0], check_dtype=False, rtol=1e-4, atol=1e-4)
        t_expected, _ = scipy_linalg.schur(x[0], output=output)
        assert t.dtype == t_expected.dtype
        if output == "complex":  # (the eigenvalues on the diagonal; their order may differ)
            assert_allclose(np.sort_complex(np.diag(t)), np.sort_complex(np.diag(t_expected)), rtol=1e-4, atol=1e-4)
    h, q = check_eager_and_jit(lambda m: sla.hessenberg(m, calc_q=True), x[0], rtol=1e-5, atol=1e-5)
    h_expected, q_expected = scipy_linalg.hessenberg(x[0], calc_q=True)
    assert_allclose(h, h_expected, rtol=1e-4, atol=1e-4)
    assert_allclose(q, q_expected, rtol=1e-4, atol=1e-4)
    assert_allclose(ember.vmap(sla.hessenberg)(x)[1], scipy_linalg.hessenberg(x[1]), rtol=1e-4, atol=1e-4)
    for side in ("right", "left"):
        u, p = check_eager_and_jit(lambda m: sla.polar(m, side), x[0], rtol=1e-5, atol=1e-5)
        u_expected, p_expected = scipy_linalg.polar(x[0], side)
        assert_allclose(u, u_expected, rtol=1e-4, atol=1e-4)
        assert_allclose(p, p_expected, rtol=1e-4, atol=1e-4)
        u_batch, _ = ember.vmap(lambda m: sla.polar(m, side))(x)
        assert_allclose(u_batch[1], scipy_linalg.polar(x[1], side)[0], rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="'real' or 'complex'"):
        sla.schur(x[0], output="foo")


# --- matrix functions, Sylvester, Frechet derivative, qr_multiply -------------------------------------------
def _random(rng, shape, dtype):
    x = rng.normal(size=shape) + (1j * rng.normal(size=shape) if np.issubdtype(dtype, np.complexfloating) else 0)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_sla_sqrtm_funm_rsf2csf_match_scipy_and_jax(dtype):
    jsla = pytest.importorskip("jax.scipy.linalg")
    rng = np.random.default_rng(1)
    x = _random(rng, (2, 4, 4), dtype)
    x64 = x[0].astype(np.complex128)
    # (shifted off the negative real axis, where the principal root's branch depends on a zero's sign)
    shifted = x + 4 * np.eye(4, dtype=dtype)
    root = check_eager_and_jit(sla.sqrtm, shifted[0], rtol=1e-5, atol=1e-5)
    assert root.dtype == np.asarray(jsla.sqrtm(shifted[0])).dtype == np.complex64
    assert_allclose(root, scipy_linalg.sqrtm(shifted[0].astype(np.complex128)).astype(np.complex64),
                    rtol=1e-4, atol=1e-4)
    assert_allclose(root, np.asarray(jsla.sqrtm(shifted[0])), rtol=1e-4, atol=1e-4)
    assert_allclose(np.asarray(root) @ np.asarray(root), shifted[0], check_dtype=False, rtol=1e-4, atol=1e-4)
    assert_allclose(ember.vmap(sla.sqrtm)(shifted)[1],
                    scipy_linalg.sqrtm(shifted[1].astype(np.complex128)).astype(np.complex64), rtol=1e-4, atol=1e-4)
    squared = np.asarray(sla.sqrtm(x[0]))
    assert_allclose(squared @ squared, x[0], check_dtype=False, rtol=1e-4, atol=1e-4)
    with pytest.raises(NotImplementedError, match="Blocked"):
        sla.sqrtm(x[0], blocksize=2)

    f = check_eager_and_jit(lambda m: sla.funm(m, lambda v: ember.numpy.sin(v) + 2 * ember.numpy.cos(v)), x[0],
                            rtol=1e-5, atol=1e-5)
    expected = scipy_linalg.funm(x64, lambda v: np.sin(v) + 2 * np.cos(v))
    assert_allclose(f, expected.astype(np.complex64), rtol=1e-4, atol=1e-4)
    f_exp, err = sla.funm(x[0], ember.numpy.exp, disp=False)
    assert_allclose(f_exp, scipy_linalg.expm(x64).astype(np.complex64), rtol=1e-4, atol=1e-4)
    _, jax_err = jsla.funm(x[0], __import__("jax").numpy.exp, disp=False)
    assert_allclose(err, np.asarray(jax_err), rtol=1e-3)
    with pytest.raises(ValueError, match="expected square"):
        sla.funm(x, ember.numpy.exp)

    if dtype == np.float32:  # rsf2csf reads SciPy's real Schur form
        t, z = scipy_linalg.schur(x[0].astype(np.float64))
        t_expected, z_expected = scipy_linalg.rsf2csf(t, z)
        tc, zc = check_eager_and_jit(sla.rsf2csf, t.astype(np.float32), z.astype(np.float32), rtol=1e-6, atol=1e-6)
        assert_allclose(tc, t_expected.astype(np.complex64), rtol=1e-5, atol=1e-5)
        assert_allclose(zc, z_expected.astype(np.complex64), rtol=1e-5, atol=1e-5)
        jt, _ = jsla.rsf2csf(t.astype(np.float32), z.astype(np.float32))
        assert_allclose(tc, np.asarray(jt), rtol=1e-5, atol=1e-5)
        ts, zs = scipy_linalg.schur(x[1].astype(np.float64))
        batch_t, _ = ember.vmap(sla.rsf2csf)(np.stack([t, ts]).astype(np.float32), np.stack([z, zs]).astype(np.float32))
        assert_allclose(batch_t[1], scipy_linalg.rsf2csf(ts, zs)[0].astype(np.complex64), rtol=1e-5, atol=1e-5)
        with pytest.raises(ValueError, match="shapes must match"):
            sla.rsf2csf(t, z[:3, :3])


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_sla_solve_sylvester_matches_scipy_and_jax(dtype):
    jsla = pytest.importorskip("jax.scipy.linalg")
    rng = np.random.default_rng(2)
    a, b, c = _random(rng, (2, 4, 4), dtype), _random(rng, (2, 3, 3), dtype), _random(rng, (2, 4, 3), dtype)
    for method in ("schur", "eigen"):
        x = check_eager_and_jit(lambda *m: sla.solve_sylvester(*m, method=method), a[0], b[0], c[0],
                                rtol=1e-5, atol=1e-5)
        assert x.dtype == np.asarray(jsla.solve_sylvester(a[0], b[0], c[0], method=method)).dtype == dtype
        expected = scipy_linalg.solve_sylvester(*(m.astype(np.complex128) for m in (a[0], b[0], c[0])))
        assert_allclose(x, expected.astype(dtype) if dtype == np.complex64 else expected.real.astype(dtype),
                        rtol=1e-3, atol=1e-4)
    batched = ember.vmap(sla.solve_sylvester)(a, b, c)
    assert_allclose(batched, sla.solve_sylvester(a, b, c), rtol=1e-5, atol=1e-5)
    assert_allclose(np.asarray(a[1]) @ np.asarray(batched[1]) + np.asarray(batched[1]) @ b[1], c[1],
                    rtol=1e-4, atol=1e-4)
    singular = sla.solve_sylvester(np.eye(2, dtype=dtype), -np.eye(2, dtype=dtype), np.ones((2, 2), dtype))
    assert np.isnan(np.asarray(singular)).all()
    with pytest.raises(ValueError, match="Incompatible shapes"):
        sla.solve_sylvester(a[0], b[0], c[0].T)
    with pytest.raises(ValueError, match="Unrecognized method"):
        sla.solve_sylvester(a[0], b[0], c[0], method="foo")


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_sla_expm_frechet_matches_scipy_and_jax(dtype):
    jsla = pytest.importorskip("jax.scipy.linalg")
    rng = np.random.default_rng(3)
    a, e = _random(rng, (2, 3, 3), dtype), _random(rng, (2, 3, 3), dtype)
    expm_a, frechet = check_eager_and_jit(sla.expm_frechet, a[0], e[0], rtol=1e-5, atol=1e-5)
    wide = np.complex128 if dtype == np.complex64 else np.float64
    expm_expected, frechet_expected = scipy_linalg.expm_frechet(a[0].astype(wide), e[0].astype(wide))
    assert_allclose(expm_a, expm_expected.astype(dtype), rtol=1e-4, atol=1e-4)
    assert_allclose(frechet, frechet_expected.astype(dtype), rtol=1e-4, atol=1e-4)
    assert_allclose(frechet, np.asarray(jsla.expm_frechet(a[0], e[0])[1]), rtol=1e-4, atol=1e-4)
    only = ember.vmap(lambda m, d: sla.expm_frechet(m, d, compute_expm=False))(a, e)
    assert_allclose(only[1], scipy_linalg.expm_frechet(a[1].astype(wide), e[1].astype(wide))[1].astype(dtype),
                    rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="same shape"):
        sla.expm_frechet(a[0], e[0, :2, :2])


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
def test_sla_qr_multiply_matches_scipy_and_jax(dtype, shape):
    jsla = pytest.importorskip("jax.scipy.linalg")
    rng = np.random.default_rng(4)
    a = _random(rng, shape, dtype)
    k = min(shape)
    for mode, c in (("left", _random(rng, (k, 2), dtype)), ("right", _random(rng, (2, shape[0]), dtype)),
                    ("left", _random(rng, (k,), dtype)), ("right", _random(rng, (shape[0],), dtype))):
        for pivoting in (False, True):
            for conjugate in (False, True):
                got = check_eager_and_jit(lambda a_, c_: sla.qr_multiply(a_, c_, mode, pivoting, conjugate), a, c,
                                          rtol=1e-5, atol=1e-5)
                expected = scipy_linalg.qr_multiply(a, c, mode, pivoting, conjugate)
                theirs = jsla.qr_multiply(a, c, mode, pivoting, conjugate)
                for ours, want, jax_value in zip(got, expected, theirs):
                    assert_allclose(ours, np.asarray(want).astype(np.asarray(ours).dtype), rtol=1e-4, atol=1e-4)
                    assert_allclose(ours, np.asarray(jax_value), rtol=1e-4, atol=1e-4)
    batch = _random(rng, (2,) + shape, dtype)
    c = _random(rng, (2, 3, shape[0]), dtype)
    product, r = ember.vmap(sla.qr_multiply)(batch, c)
    assert_allclose(product[1], scipy_linalg.qr_multiply(batch[1], c[1])[0].astype(dtype), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="mode must be"):
        sla.qr_multiply(a, c[0], mode="foo")
    with pytest.raises(ValueError, match="not compatible for c @ Q"):
        sla.qr_multiply(a, np.ones((2, shape[0] + 1)))


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_sla_eigh_tridiagonal_matches_scipy_and_jax(dtype):
    jsla = pytest.importorskip("jax.scipy.linalg")
    rng = np.random.default_rng(5)
    d = rng.normal(size=5).astype(dtype)
    e = _random(rng, (4,), dtype)
    d = d.real.astype(dtype)
    dense = np.diag(d) + np.diag(e, 1) + np.diag(np.conj(e), -1)
    expected = np.linalg.eigvalsh(dense.astype(np.complex128)).astype(np.float32)
    w = check_eager_and_jit(lambda a, b: sla.eigh_tridiagonal(a, b, eigvals_only=True), d, e, rtol=1e-5, atol=1e-5)
    assert_allclose(w, expected, rtol=1e-4, atol=1e-4)
    assert_allclose(w, np.asarray(jsla.eigh_tridiagonal(d, e, eigvals_only=True)), rtol=1e-4, atol=1e-4)
    if dtype == np.float32:
        assert_allclose(w, scipy_linalg.eigh_tridiagonal(d, e, eigvals_only=True), rtol=1e-4, atol=1e-4)
    w_sel, v = check_eager_and_jit(lambda a, b: sla.eigh_tridiagonal(a, b, select="i", select_range=(1, 3)), d, e,
                                   rtol=1e-5, atol=1e-5)
    jw, jv = jsla.eigh_tridiagonal(d, e, select="i", select_range=(1, 3))
    assert v.shape == np.asarray(jv).shape == (5, 3) and v.dtype == np.asarray(jv).dtype
    assert_allclose(w_sel, expected[1:4], rtol=1e-4, atol=1e-4)
    v = np.asarray(v)
    assert_allclose(dense @ v, v * np.asarray(w_sel)[None, :], check_dtype=False, rtol=1e-4, atol=1e-4)
    assert_allclose(np.abs(np.vdot(v[:, 0], np.asarray(jv)[:, 0])), np.float32(1), rtol=1e-3)  # (one up to phase)
    assert_allclose(sla.eigh_tridiagonal(d[:1], e[:0], eigvals_only=True), d[:1].real.astype(np.float32))
    with pytest.raises(NotImplementedError, match="select='v'"):
        sla.eigh_tridiagonal(d, e, select="v", select_range=(0.0, 1.0))
    with pytest.raises(ValueError, match="empty index range"):
        sla.eigh_tridiagonal(d, e, select="i", select_range=(3, 1))
    with pytest.raises(TypeError, match="same dtype"):
        sla.eigh_tridiagonal(np.ones(5, np.float32), np.ones(4, np.complex64))
