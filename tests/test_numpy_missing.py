"""Differential tests against JAX (and NumPy) for the jnp names ember added last: the polynomial
functions, sort_complex, unwrap, histogram2d / histogramdd, einsum_path, printing and I/O, the
scalar type aliases and sub-byte dtypes, and jnp.ufunc / frompyfunc. Eagerly and under jit where
the function is traceable; x64 off and on."""
import contextlib
import io as _io

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ember
import ember.numpy as jnp
from ember.errors import ConcretizationTypeError
from tests.util import assert_allclose, check_eager_and_jit

jax = pytest.importorskip("jax")
jjnp = pytest.importorskip("jax.numpy")

F32 = np.float32
rng = np.random.default_rng(0)


@contextlib.contextmanager
def _x64(on: bool):
    with ember.config.override(enable_x64=on), jax.enable_x64(on):
        yield


@pytest.fixture(params=[False, True], ids=["x32", "x64"])
def x64_both(request):
    """x64 off and on, in ember and JAX together."""
    with _x64(request.param):
        yield request.param


def _same(ours, theirs, **tol):
    """ember's result against JAX's: tree structure, dtypes, shapes and values."""
    ours_leaves = ember.tree_util.tree_leaves(ours)
    theirs_leaves = jax.tree_util.tree_leaves(theirs)
    assert len(ours_leaves) == len(theirs_leaves)
    for o, t in zip(ours_leaves, theirs_leaves):
        t = np.asarray(t)
        assert_allclose(o, t, dtype=t.dtype, **tol)


def _both(name, *args, jit=True, tol=None, **kwargs):
    """``jnp.<name>(*args)`` in ember (eagerly, and under jit unless ``jit=False``) against JAX."""
    tol = tol or {}
    theirs = getattr(jjnp, name)(*(jjnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args), **kwargs)
    fn = getattr(jnp, name)
    ours = fn(*args, **kwargs)
    _same(ours, theirs, **tol)
    if jit:
        arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]

        def traced(*xs):
            full = list(args)
            for i, x in zip(arrays, xs):
                full[i] = x
            return fn(*full, **kwargs)
        _same(ember.jit(traced)(*[args[i] for i in arrays]), theirs, **tol)
    return ours


# --- polynomials -------------------------------------------------------------------------------
P3 = np.array([2.0, -3.0, 0.5, 1.0], F32)
P2 = np.array([1.0, 4.0, -2.0], F32)
PI = np.array([3, 0, -1, 2], np.int32)


@pytest.mark.parametrize("name", ["polyadd", "polysub", "polymul"])
@pytest.mark.parametrize("a,b", [(P3, P2), (P2, P3), (PI, P2), (PI, PI[:2])])
def test_poly_arithmetic_matches_jax(x64_both, name, a, b):
    _both(name, a, b, tol=dict(rtol=1e-5, atol=1e-5))


def test_polymul_trims_leading_zeros_like_jax():
    a, b = np.array([0.0, 0.0, 1.0, 2.0], F32), np.array([0.0, 3.0], F32)
    _both("polymul", a, b, jit=False, trim_leading_zeros=True)
    _both("polymul", np.zeros(0, F32), b)


@pytest.mark.parametrize("u,v", [(P3, P2), (np.array([1.0, -6, 11, -6], F32), np.array([1.0, -1], F32)),
                                 (P2, P3), (PI, np.array([2, 1], np.int32))])
def test_polydiv_matches_jax(x64_both, u, v):
    q, r = _both("polydiv", u, v, tol=dict(rtol=1e-5, atol=1e-5))
    if len(u) >= len(v):  # NumPy's quotient too (its remainder is trimmed)
        assert_allclose(q, np.polydiv(u, v)[0], check_dtype=False, rtol=1e-5, atol=1e-5)
    _both("polydiv", u, v, jit=False, trim_leading_zeros=True, tol=dict(rtol=1e-5, atol=1e-5))


def test_polydiv_inverts_polymul():
    q, r = jnp.polydiv(jnp.polymul(P3, P2), P2)
    assert_allclose(q, P3, rtol=1e-5, atol=1e-5)
    assert_allclose(r, np.zeros(6, F32), atol=1e-5)
    q, r = ember.jit(jnp.polydiv)(np.array([1.0, 0.0, -1.0], F32), np.array([1.0, 1.0], F32))
    assert_allclose(q, np.array([1.0, -1.0], F32))
    assert_allclose(r, np.zeros(3, F32))


@pytest.mark.parametrize("m", [0, 1, 2, 5])
def test_polyder_matches_jax_and_numpy(x64_both, m):
    for p in (P3, PI):
        out = _both("polyder", p, m=m)
        assert_allclose(out, np.polyder(p, m) if m else p, check_dtype=False, rtol=1e-5)


@pytest.mark.parametrize("m,k", [(0, None), (1, None), (2, 3.0), (2, np.array([1.0, -2.0], F32)), (1, 2)])
def test_polyint_matches_jax_and_numpy(x64_both, m, k):
    out = _both("polyint", P3, m=m, k=k) if k is None or not isinstance(k, np.ndarray) else _both("polyint", P3, m, k)
    assert_allclose(out, np.polyint(P3, m, 0 if k is None else k), check_dtype=False, rtol=1e-5)


def test_polyder_polyint_refuse_bad_orders():
    for fn, jfn in ((jnp.polyder, jjnp.polyder), (jnp.polyint, jjnp.polyint)):
        for bad in (-1,):
            with pytest.raises(ValueError):
                jfn(jjnp.asarray(P3), bad)
            with pytest.raises(ValueError):
                fn(P3, bad)
    with pytest.raises(ValueError, match="k must be a scalar"):
        jnp.polyint(P3, 2, np.ones(3, F32))
    with pytest.raises(ConcretizationTypeError):
        ember.jit(lambda p, m: jnp.polyder(p, m))(P3, 1)


@pytest.mark.parametrize("zeros", [np.array([1.0, 2.0, -3.0], F32), np.array([0.5], F32),
                                   np.array([1, 2], np.int32), np.zeros(0, F32)])
def test_poly_matches_jax_and_numpy(x64_both, zeros):
    out = _both("poly", zeros)
    assert_allclose(out, np.poly(zeros), check_dtype=False, rtol=1e-5)


def test_poly_of_square_matrix_is_complex_like_jax():
    a = np.array([[1.0, 2.0], [3.0, 4.0]], F32)
    out = _both("poly", a, tol=dict(rtol=1e-4, atol=1e-4))
    assert_allclose(out.real, np.poly(a), check_dtype=False, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="1d or non-empty square"):
        jnp.poly(np.ones((2, 3), F32))


def _sorted_roots(r):
    r = np.asarray(r)
    return r[np.lexsort((r.imag, r.real))]


@pytest.mark.parametrize("p", [np.array([1.0, -6.0, 11.0, -6.0], F32), np.array([0.0, 0.0, 1.0, -3.0, 2.0], F32),
                               np.array([1.0, 0.0, 1.0], F32), np.array([2, -4], np.int32), np.array([3.0], F32)])
def test_roots_match_jax_and_numpy(x64_both, p):
    ours = jnp.roots(p)
    theirs = np.asarray(jjnp.roots(jjnp.asarray(p)))
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_allclose(_sorted_roots(ours), _sorted_roots(theirs), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(_sorted_roots(ours), _sorted_roots(np.roots(p)), rtol=1e-4, atol=1e-4)


def test_roots_without_stripping_is_traceable_and_pads_with_nan():
    p = np.array([0.0, 0.0, 1.0, -3.0, 2.0], F32)
    theirs = np.asarray(jjnp.roots(jjnp.asarray(p), strip_zeros=False))
    for ours in (jnp.roots(p, strip_zeros=False), ember.jit(lambda p: jnp.roots(p, strip_zeros=False))(p)):
        ours = np.asarray(ours)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape == (4,)
        assert np.isnan(ours[2:]).all() and np.isnan(theirs[2:]).all()
        np.testing.assert_allclose(_sorted_roots(ours[:2]), [1.0, 2.0], rtol=1e-5)
    with pytest.raises(ConcretizationTypeError):
        ember.jit(jnp.roots)(p)
    with pytest.raises(ValueError, match="rank-1"):
        jnp.roots(np.ones((2, 2), F32))


X = np.linspace(-1.0, 2.0, 12).astype(F32)
Y = (0.5 * X ** 3 - X + 2.0 + 0.01 * rng.normal(size=12)).astype(F32)


@pytest.mark.parametrize("deg", [0, 1, 3])
def test_polyfit_matches_jax_and_numpy(x64_both, deg):
    x = X.astype(np.float64) if x64_both else X
    y = Y.astype(np.float64) if x64_both else Y
    tol = dict(rtol=1e-3, atol=1e-3)
    out = _both("polyfit", x, y, deg, tol=tol)
    assert_allclose(out, np.polyfit(X.astype(np.float64), Y.astype(np.float64), deg), check_dtype=False, **tol)
    w = np.linspace(0.5, 1.5, 12).astype(x.dtype)
    _both("polyfit", x, y, deg, w=w, tol=tol)
    y2 = np.stack([y, 2 * y], axis=1)
    _both("polyfit", x, y2, deg, tol=tol)
    _both("polyfit", x, y, deg, cov=True, tol=dict(rtol=2e-2, atol=2e-3))
    _both("polyfit", x, y2, deg, cov="unscaled", tol=dict(rtol=2e-2, atol=2e-3))
    c, resid, rank, s, rcond = jnp.polyfit(x, y, deg, full=True)
    jc, jresid, jrank, js, jrcond = jjnp.polyfit(x, y, deg, full=True)
    assert int(rank) == int(jrank) and rcond.dtype == jrcond.dtype
    assert_allclose(s, np.asarray(js), rtol=1e-4, atol=1e-5)
    assert_allclose(resid, np.asarray(jresid), rtol=2e-2, atol=1e-4)


def test_polyfit_errors_match_jax():
    for fn, arr in ((jnp.polyfit, np.asarray), (jjnp.polyfit, jjnp.asarray)):
        with pytest.raises(ValueError, match="deg >= 0"):
            fn(arr(X), arr(Y), -1)
        with pytest.raises(TypeError, match="same length"):
            fn(arr(X), arr(Y[:5]), 1)
        with pytest.raises(TypeError, match="1D vector"):
            fn(arr(np.ones((2, 2), F32)), arr(np.ones(2, F32)), 1)


@given(st.lists(st.floats(-4, 4, width=32), min_size=1, max_size=6),
       st.lists(st.floats(-4, 4, width=32), min_size=1, max_size=6))
def test_poly_arithmetic_hypothesis(a, b):
    a, b = np.array(a, F32), np.array(b, F32)
    tol = dict(rtol=1e-4, atol=1e-4)
    assert_allclose(jnp.polyadd(a, b), np.polyadd(a, b), **tol) if len(a) != len(b) or True else None
    assert_allclose(jnp.polysub(a, b), jjnp.polysub(a, b), **tol)
    assert_allclose(jnp.polymul(a, b), np.asarray(jjnp.polymul(a, b)), **tol)
    assert_allclose(ember.jit(jnp.polymul)(a, b), np.convolve(a, b), **tol)
    assert_allclose(jnp.polyder(a), np.asarray(jjnp.polyder(a)), **tol)
    assert_allclose(jnp.polyint(a), np.asarray(jjnp.polyint(a)), **tol)


# --- sort_complex, unwrap ----------------------------------------------------------------------
@pytest.mark.parametrize("a", [np.array([3.0, 1.0, 2.0], F32), np.array([[5, 3, 4], [6, 9, 2]], np.int32),
                               np.array([1 + 2j, 3 - 1j, 2 + 4j, 2 + 3j], np.complex64), np.array([True, False])])
def test_sort_complex_matches_jax(x64_both, a):
    out = _both("sort_complex", a)
    assert_allclose(out, np.sort_complex(a).astype(out.dtype), check_dtype=False)


def test_sort_complex_refuses_scalars_like_jax():
    with pytest.raises(ValueError, match="out of bounds"):
        jjnp.sort_complex(jjnp.asarray(2.0))
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.sort_complex(np.array(2.0, F32))


@pytest.mark.parametrize("kwargs", [{}, {"discont": 4.0}, {"period": 6.0}, {"axis": 0}, {"axis": 1, "period": 5}])
def test_unwrap_matches_jax_and_numpy(x64_both, kwargs):
    p = np.cumsum(rng.uniform(-4, 4, size=(4, 7)), axis=1).astype(F32)
    out = _both("unwrap", p, tol=dict(rtol=1e-5, atol=1e-4), **kwargs)
    assert_allclose(out, np.unwrap(p, **kwargs), check_dtype=False, rtol=1e-4, atol=1e-4)


def test_unwrap_integers_and_errors_match_jax():
    p = np.array([0, 5, 2, 9, 1, 14], np.int32)
    _both("unwrap", p, period=6)
    assert_allclose(jnp.unwrap(p, period=6), np.unwrap(p, period=6), check_dtype=False)
    _both("unwrap", np.zeros((2, 0), F32))
    with pytest.raises(ValueError, match="complex"):
        jnp.unwrap(np.ones(3, np.complex64))


@given(st.lists(st.floats(-10, 10, width=32), min_size=1, max_size=12))
def test_unwrap_hypothesis(values):
    p = np.array(values, F32)
    assert_allclose(jnp.unwrap(p), np.asarray(jjnp.unwrap(p)), rtol=1e-5, atol=1e-4)


# --- histograms --------------------------------------------------------------------------------
HX = rng.normal(size=40).astype(F32)
HY = rng.uniform(-2, 2, size=40).astype(F32)
HW = rng.uniform(0, 1, size=40).astype(F32)


@pytest.mark.parametrize("kwargs", [{}, {"bins": 4}, {"bins": (3, 5)}, {"bins": np.linspace(-2, 2, 6)},
                                    {"bins": 3, "range": [(-1, 1), (-2, 2)]}, {"weights": HW},
                                    {"bins": 4, "density": True}, {"weights": HW, "density": True}])
def test_histogram2d_matches_jax_and_numpy(x64_both, kwargs):
    theirs = jjnp.histogram2d(HX, HY, **kwargs)
    ours = jnp.histogram2d(HX, HY, **kwargs)
    _same(ours, theirs, rtol=1e-5, atol=1e-5)
    _same(ember.jit(lambda x, y: jnp.histogram2d(x, y, **kwargs))(HX, HY), theirs, rtol=1e-5, atol=1e-5)
    expected = np.histogram2d(HX, HY, **kwargs)
    for o, e in zip(ours, expected):
        assert_allclose(o, e, check_dtype=False, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs", [{}, {"bins": [2, 3, 4]}, {"range": [None, (-1, 1), None], "bins": 3},
                                    {"weights": HW, "density": True}])
def test_histogramdd_matches_jax_and_numpy(x64_both, kwargs):
    sample = np.stack([HX, HY, HX * HY], axis=1)
    theirs = jjnp.histogramdd(sample, **kwargs)
    _same(jnp.histogramdd(sample, **kwargs), theirs, rtol=1e-5, atol=1e-5)
    _same(ember.jit(lambda s: jnp.histogramdd(s, **kwargs))(sample), theirs, rtol=1e-5, atol=1e-5)
    hist, edges = np.histogramdd(sample, **kwargs)
    assert_allclose(jnp.histogramdd(sample, **kwargs)[0], hist, check_dtype=False, rtol=1e-5, atol=1e-5)


def test_histogramdd_errors_match_jax():
    sample = np.ones((4, 2), F32)
    for fn, arr in ((jnp.histogramdd, np.asarray), (jjnp.histogramdd, jjnp.asarray)):
        with pytest.raises(ValueError, match="one weight for each sample"):
            fn(arr(sample), weights=arr(np.ones(3, F32)))
        with pytest.raises(ValueError, match="a bin for each dimension"):
            fn(arr(sample), bins=[2, 3, 4])
        with pytest.raises(ValueError, match="range must be a sequence"):
            fn(arr(sample), range=[(0, 1)])


@given(st.integers(0, 2 ** 31), st.integers(1, 30), st.integers(1, 6), st.integers(1, 6))
def test_histogram2d_hypothesis(seed, n, bx, by):
    # (explicit edges: ember's linspace may round an interior edge one ulp away from JAX's)
    r = np.random.default_rng(seed)
    x, y = r.normal(size=n).astype(F32), r.normal(size=n).astype(F32)
    bins = [np.linspace(-2, 2, bx + 1).astype(F32), np.linspace(-2.5, 1.5, by + 1).astype(F32)]
    ours, theirs = jnp.histogram2d(x, y, bins=bins), jjnp.histogram2d(x, y, bins=bins)
    _same(ours, theirs)
    assert_allclose(ours[0], np.histogram2d(x, y, bins=bins)[0], check_dtype=False)


# --- einsum_path -------------------------------------------------------------------------------
@pytest.mark.parametrize("optimize", ["auto", "greedy", "optimal", True, False])
@pytest.mark.parametrize("subscripts,shapes", [("ij,jk,kl", [(2, 3), (3, 100), (100, 5)]), ("ij,jk", [(2, 3), (3, 4)]),
                                               ("ii", [(3, 3)]), ("ab,bc,cd,de->ae", [(2, 8), (8, 3), (3, 9), (9, 2)])])
def test_einsum_path_matches_jax(subscripts, shapes, optimize):
    operands = [np.ones(s, F32) for s in shapes]
    path, info = jnp.einsum_path(subscripts, *operands, optimize=optimize)
    assert path == jjnp.einsum_path(subscripts, *operands, optimize=optimize)[0]
    assert isinstance(info, str) and "Complete contraction" in info
    out = jnp.einsum(subscripts, *operands, optimize=path if len(operands) > 1 else "auto")
    assert_allclose(out, np.einsum(subscripts, *operands), rtol=1e-5)


def test_einsum_path_reads_shapes_of_traced_operands():
    seen = []

    def f(x, y, z):
        seen.append(jnp.einsum_path("ij,jk,kl", x, y, z)[0])
        return jnp.einsum("ij,jk,kl", x, y, z, optimize=seen[-1])
    x, y, z = np.ones((2, 3), F32), np.ones((3, 100), F32), np.ones((100, 5), F32)
    check_eager_and_jit(f, x, y, z, expected=np.einsum("ij,jk,kl", x, y, z))
    assert seen[0] == seen[1] == [(1, 2), (0, 1)]


# --- printing and I/O --------------------------------------------------------------------------
def test_array_repr_and_str_are_numpys():
    a = jnp.arange(4.0)
    assert jnp.array_repr(a) == "Array([0., 1., 2., 3.], dtype=float32)"
    assert jnp.array_str(a) == np.array_str(np.arange(4.0, dtype=F32)) == jjnp.array_str(jjnp.arange(4.0))
    assert jnp.array_repr(a, precision=2) == np.array_repr(np.asarray(a), precision=2).replace("array", "Array")


def test_printoptions_are_numpys():
    before = jnp.get_printoptions()
    assert before == np.get_printoptions() == jjnp.get_printoptions()
    with jnp.printoptions(precision=2):
        assert jnp.get_printoptions()["precision"] == 2
        assert "3.14" in repr(jnp.asarray([np.pi])) and "3.142" not in repr(jnp.asarray([np.pi]))
    assert jnp.get_printoptions() == before
    try:
        jnp.set_printoptions(threshold=5)
        assert np.get_printoptions()["threshold"] == 5
    finally:
        jnp.set_printoptions(**before)
    assert jnp.get_printoptions() == before


def test_fromstring_matches_jax(x64_both):
    _both("fromstring", "1 2 3.5", jit=False, sep=" ")
    _both("fromstring", "1,2,3", np.int32, jit=False, sep=",")
    _both("fromstring", "1,2,3,4", float, 2, jit=False, sep=",")


def test_fromstring_parses_text():
    assert_allclose(jnp.fromstring("1 2 3.5", sep=" "), np.array([1.0, 2.0, 3.5], F32))
    assert_allclose(jnp.fromstring("4;5", dtype=np.int32, sep=";"), np.array([4, 5], np.int32))


def test_fromiter_and_fromfile_are_refused_like_jax(tmp_path):
    with pytest.raises(NotImplementedError, match="np.fromiter"):
        jnp.fromiter(iter([1, 2]), float)
    with pytest.raises(NotImplementedError, match="np.fromfile"):
        jnp.fromfile(tmp_path / "none.bin")
    for name in ("fromiter", "fromfile"):
        with pytest.raises(NotImplementedError, match=f"jnp.{name}") as ours:
            getattr(jnp, name)(iter([1, 2]), float)
        with pytest.raises(NotImplementedError) as theirs:
            getattr(jjnp, name)(iter([1, 2]), float)
        assert str(ours.value) == str(theirs.value)


def test_save_load_savez_round_trip(tmp_path, x64_both):
    a = jnp.arange(6.0).reshape(2, 3)
    jnp.save(tmp_path / "a.npy", a)
    back = jnp.load(tmp_path / "a.npy")
    _same(back, jjnp.load(tmp_path / "a.npy"))
    assert isinstance(back, ember.Array) and back.dtype == (np.float64 if x64_both else np.float32)
    b = jnp.asarray([1.5, -2.0], jnp.bfloat16)
    buffer = _io.BytesIO()
    jnp.save(buffer, b)
    buffer.seek(0)
    loaded = jnp.load(buffer)
    assert loaded.dtype == jnp.bfloat16 and np.asarray(loaded).astype(F32).tolist() == [1.5, -2.0]
    jnp.savez(tmp_path / "z.npz", a=a, b=np.arange(3))
    with jnp.load(tmp_path / "z.npz") as archive:  # (NumPy's NpzFile, as JAX returns it)
        np.testing.assert_array_equal(archive["a"], np.asarray(a))
        np.testing.assert_array_equal(archive["b"], np.arange(3))
    np.save(tmp_path / "big.npy", np.arange(3, dtype=np.float64))
    _same(jnp.load(tmp_path / "big.npy"), jjnp.load(tmp_path / "big.npy"))


# --- scalar types and dtypes -------------------------------------------------------------------
ALIASES = ["single", "double", "csingle", "cdouble", "float_", "int_", "uint"]
NARROW = ["int4", "uint4", "int2", "uint2", "int1", "uint1", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"]


@pytest.mark.parametrize("name", ALIASES)
def test_scalar_aliases_match_jax(x64_both, name):
    ours, theirs = getattr(jnp, name), getattr(jjnp, name)
    assert np.dtype(ours) == np.dtype(theirs)
    assert ours is getattr(jnp, np.dtype(theirs).name)  # (the same class, as in JAX)
    value = 1.5 if np.dtype(theirs).kind in "fc" else 3
    _same(ours(value), theirs(value))
    _same(jnp.zeros(2, ours), jjnp.zeros(2, theirs))


def test_object_is_numpys():
    assert jnp.object_ is np.object_ is jjnp.object_
    assert not jnp.issubdtype(jnp.float32, jnp.object_)


@pytest.mark.parametrize("name", NARROW)
def test_narrow_dtypes_exist_as_dtypes(name):
    ours, theirs = getattr(jnp, name), getattr(jjnp, name)
    dt = np.dtype(getattr(ml_dtypes, name))
    assert np.dtype(ours) == np.dtype(theirs) == dt and ours.dtype == dt
    assert ours == dt.type and ember.dtypes.dtype(name) == dt
    kind = jnp.integer if name.startswith(("int", "uint")) else jnp.floating
    assert jnp.issubdtype(ours, kind) == jjnp.issubdtype(theirs, kind) is True
    assert jnp.issubdtype(ours, jnp.number) and not jnp.issubdtype(ours, jnp.complexfloating)
    if kind is jnp.integer:
        assert (jnp.iinfo(ours).min, jnp.iinfo(ours).max) == (jjnp.iinfo(theirs).min, jjnp.iinfo(theirs).max)
        signed = jnp.signedinteger if name.startswith("int") else jnp.unsignedinteger
        assert jnp.issubdtype(ours, signed) == jjnp.issubdtype(theirs, signed) is True
    else:
        assert float(jnp.finfo(ours).max) == float(jjnp.finfo(theirs).max)
    # ember holds no arrays of them: making one says so, naming the dtype.
    for make in (lambda: jnp.zeros(3, ours), lambda: ours(1), lambda: jnp.asarray(np.zeros(2, dt)),
                 lambda: jnp.zeros(3, name)):
        with pytest.raises(TypeError, match=f"dtype {name}"):
            make()


# --- ufunc / frompyfunc ------------------------------------------------------------------------
def _muladd(a, b):
    return a * b + 1


def _pair(make):
    """The same ufunc, from ember and from JAX."""
    return make(jnp), make(jjnp)


def test_ufunc_attributes_match_jax():
    ours, theirs = _pair(lambda m: m.frompyfunc(_muladd, 2, 1, identity=0))
    for attribute in ("nin", "nout", "nargs", "identity", "__name__"):
        assert getattr(ours, attribute) == getattr(theirs, attribute)
    assert repr(ours) == repr(theirs) == "<jnp.ufunc '_muladd'>"
    assert isinstance(ours, jnp.ufunc)
    again = jnp.frompyfunc(_muladd, 2, 1, identity=0)
    assert ours == again and hash(ours) == hash(again)
    assert ours != jnp.frompyfunc(_muladd, 2, 1)
    with pytest.raises(AttributeError):
        ours.nin = 3
    named = jnp.ufunc(_muladd, 2, 1, name="muladd", nargs=3)
    assert named.__name__ == "muladd" and named.nargs == 3


A = np.arange(12, dtype=F32).reshape(3, 4) / 4
AI = np.arange(12, dtype=np.int32).reshape(3, 4) % 5


def _method_both(method, *args, ours_ufunc=None, theirs_ufunc=None, jit=True, **kwargs):
    ours_ufunc = ours_ufunc or jnp.frompyfunc(_muladd, 2, 1)
    theirs_ufunc = theirs_ufunc or jjnp.frompyfunc(_muladd, 2, 1)
    theirs = getattr(theirs_ufunc, method)(*args, **kwargs)
    ours = getattr(ours_ufunc, method)(*args, **kwargs)
    _same(ours, theirs, rtol=1e-5, atol=1e-5)
    if jit:
        _same(ember.jit(lambda *a: getattr(ours_ufunc, method)(*a, **kwargs))(*args), theirs, rtol=1e-5, atol=1e-5)


def test_ufunc_call_matches_jax(x64_both):
    _method_both("__call__", A, A[0])
    _method_both("__call__", AI, 2)
    unary_ours, unary_theirs = _pair(lambda m: m.frompyfunc(lambda x: m.sin(x) * 2, 1, 1))
    _method_both("__call__", A, ours_ufunc=unary_ours, theirs_ufunc=unary_theirs)
    two_ours, two_theirs = _pair(lambda m: m.frompyfunc(lambda x, y: (x + y, x - y), 2, 2))
    _method_both("__call__", A, A.T[:1].T, ours_ufunc=two_ours, theirs_ufunc=two_theirs)
    with pytest.raises(NotImplementedError, match="out argument"):
        jnp.frompyfunc(_muladd, 2, 1)(A, A, out=A)
    with pytest.raises(TypeError, match="_muladd requires ndarray or scalar"):
        jnp.frompyfunc(_muladd, 2, 1)([1.0], A)


@pytest.mark.parametrize("kwargs", [{}, {"axis": 1}, {"axis": None}, {"axis": -1, "keepdims": True},
                                    {"axis": None, "keepdims": True}, {"initial": 2.0}, {"dtype": np.float32},
                                    {"axis": 1, "initial": 1.0, "where": A > 0.5}])
def test_ufunc_reduce_matches_jax(x64_both, kwargs):
    _method_both("reduce", A, **kwargs)
    if "where" not in kwargs and "initial" not in kwargs:
        _method_both("reduce", AI, **kwargs)


def test_ufunc_reduce_identity_and_errors_match_jax():
    add_ours, add_theirs = _pair(lambda m: m.frompyfunc(m.add, 2, 1, identity=0))
    _method_both("reduce", np.zeros((0, 3), F32), ours_ufunc=add_ours, theirs_ufunc=add_theirs)
    _method_both("reduce", A, ours_ufunc=add_ours, theirs_ufunc=add_theirs, where=A > 1)
    assert_allclose(add_ours.reduce(A, axis=0), A.sum(0), rtol=1e-6)
    f = jnp.frompyfunc(_muladd, 2, 1)
    with pytest.raises(ValueError, match="no identity"):
        f.reduce(np.zeros((0, 3), F32))
    with pytest.raises(ValueError, match="specify 'initial'"):
        f.reduce(A, where=A > 1)
    with pytest.raises(ValueError, match="dtype=bool"):
        add_ours.reduce(A, where=A)
    with pytest.raises(ValueError, match="binary ufuncs"):
        jnp.frompyfunc(jnp.sin, 1, 1).reduce(A)
    with pytest.raises(ValueError, match="single value"):
        jnp.frompyfunc(lambda a, b: (a, b), 2, 2).reduce(A)


@pytest.mark.parametrize("kwargs", [{}, {"axis": 1}, {"axis": -1, "dtype": np.float32}])
def test_ufunc_accumulate_matches_jax(x64_both, kwargs):
    _method_both("accumulate", A, **kwargs)
    _method_both("accumulate", AI, **kwargs)
    _method_both("accumulate", np.zeros((0, 2), F32), **kwargs)


def test_ufunc_at_matches_jax(x64_both):
    a = np.arange(6, dtype=F32)
    _method_both("at", a, np.array([0, 0, 3]), 2.0, inplace=False)
    _method_both("at", a, np.array([[1, 1], [5, 0]]), np.array([[2.0, 3.0], [1.0, 0.5]], F32), inplace=False)
    _method_both("at", A, (np.array([0, 2, 0]), np.array([1, 1, 1])), 3.0, inplace=False)
    # (JAX's jitted ``at`` refuses slices in the index; ember's applies the function per index)
    b = np.array([[1.0, 2.0, 3.0], [0.5, 1.0, 2.0]], F32)
    sliced = jnp.frompyfunc(_muladd, 2, 1).at(A, (slice(None), np.array([0, 0])), b, inplace=False)
    expected = A.copy()
    for row in b:
        expected[:, 0] = expected[:, 0] * row + 1
    assert_allclose(sliced, expected)
    _method_both("at", A, (1, 2), 4.0, inplace=False)
    neg_ours, neg_theirs = _pair(lambda m: m.frompyfunc(lambda x: -x, 1, 1))
    _method_both("at", a, np.array([1, 1, 2]), inplace=False, ours_ufunc=neg_ours, theirs_ufunc=neg_theirs)
    with pytest.raises(NotImplementedError, match="inplace=False"):
        jnp.frompyfunc(_muladd, 2, 1).at(a, np.array([0]), 1.0)
    with pytest.raises(TypeError, match="non-tuple sequence"):
        jnp.frompyfunc(_muladd, 2, 1).at(A, [np.array([0]), np.array([1])], 1.0, inplace=False)


@pytest.mark.parametrize("indices", [np.array([0, 3, 4]), np.array([0, 2, 1, 5]), np.array([5])])
def test_ufunc_reduceat_matches_jax_and_numpy(x64_both, indices):
    a = np.arange(1, 7, dtype=F32)
    _method_both("reduceat", a, indices)
    _method_both("reduceat", np.tile(a, (2, 1)), indices, axis=1)
    add = jnp.frompyfunc(jnp.add, 2, 1, identity=0)
    assert_allclose(add.reduceat(a, indices), np.add.reduceat(a, indices), rtol=1e-6)


def test_ufunc_outer_matches_jax_and_numpy(x64_both):
    _method_both("outer", A, np.arange(3, dtype=F32))
    _method_both("outer", AI[0], AI[:, 0])
    mul = jnp.frompyfunc(jnp.multiply, 2, 1)
    assert_allclose(mul.outer(A, A[0]), np.multiply.outer(A, A[0]), rtol=1e-6)
    with pytest.raises(ValueError, match="binary ufuncs"):
        jnp.frompyfunc(jnp.sin, 1, 1).outer(A, A)


@given(st.integers(1, 5), st.integers(1, 5), st.integers(0, 1))
def test_ufunc_reduce_accumulate_hypothesis(n, m, axis):
    a = rng.normal(size=(n, m)).astype(F32)
    ours, theirs = jnp.frompyfunc(jnp.maximum, 2, 1), jjnp.frompyfunc(jjnp.maximum, 2, 1)
    _same(ours.reduce(a, axis=axis), theirs.reduce(a, axis=axis))
    assert_allclose(ours.reduce(a, axis=axis), a.max(axis))
    _same(ours.accumulate(a, axis=axis), theirs.accumulate(a, axis=axis))
    assert_allclose(ours.accumulate(a, axis=axis), np.maximum.accumulate(a, axis=axis))
