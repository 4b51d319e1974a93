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
