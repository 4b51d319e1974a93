"""Contractions: lax.dot_general and friends, jnp's products, einsum (and einsum_path, against JAX),
diagonals, triangles, norms.

Values are compared with NumPy (computed in float64, so float32 results get a
tolerance that grows with the contraction length), eagerly and under jit.
"""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st
from jax_oracle import jjnp

import ember
import ember.numpy as jnp
from ember import lax
from tests.util import assert_allclose, check_eager_and_jit

LETTERS = "abcdefgh"


def contraction_tol(k: int) -> dict:
    """float32 tolerance for sums of ``k`` products of values in [-1, 1]."""
    return dict(rtol=1e-5, atol=2e-7 * max(k, 1) + 1e-6)


def rand(rng, shape, dtype=np.float32):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-5 if np.dtype(dtype).kind == "i" else 0, 6, size=shape).astype(dtype)
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) < 0.5
    return rng.uniform(-1, 1, size=shape).astype(dtype)


def f64(*arrays):
    return [np.asarray(a, np.float64) for a in arrays]


def reference(np_fn, *arrays, **kwargs):
    """``np_fn`` evaluated in float64, rounded to float32."""
    return np.asarray(np_fn(*f64(*arrays), **kwargs)).astype(np.float32)


# --- lax.dot_general --------------------------------------------------------------------------
DOT_GENERAL_CASES = [
    # lhs shape, rhs shape, dimension numbers, einsum spec
    ((2, 3), (3, 4), (((1,), (0,)), ((), ())), "ij,jk->ik"),
    ((3, 2), (3, 4), (((0,), (0,)), ((), ())), "ji,jk->ik"),
    ((5, 2, 3), (5, 3, 4), (((2,), (1,)), ((0,), (0,))), "bij,bjk->bik"),
    ((3, 5, 2), (4, 3, 5), (((0,), (1,)), ((1,), (2,))), "jbi,kjb->bik"),
    ((2, 3, 4), (4, 3, 5), (((1, 2), (1, 0)), ((), ())), "ijk,kjl->il"),
    ((2,), (3,), (((), ()), ((), ())), "i,j->ij"),
    ((2, 3), (2, 3), (((0, 1), (0, 1)), ((), ())), "ij,ij->"),
    ((4, 2, 3), (4, 2, 3), (((), ()), ((0, 1, 2), (0, 1, 2))), "bij,bij->bij"),
    ((2, 0), (0, 3), (((1,), (0,)), ((), ())), "ij,jk->ik"),
]


@pytest.mark.parametrize("lhs_shape, rhs_shape, numbers, spec", DOT_GENERAL_CASES)
def test_dot_general_matches_einsum(rng, lhs_shape, rhs_shape, numbers, spec):
    lhs, rhs = rand(rng, lhs_shape), rand(rng, rhs_shape)
    expected = np.einsum(spec, *f64(lhs, rhs)).astype(np.float32)
    check_eager_and_jit(lambda a, b: lax.dot_general(a, b, numbers), lhs, rhs, expected=expected,
                        **contraction_tol(8))


@st.composite
def dot_general_problems(draw):
    """Random batch / contracting / free dimensions, each operand's dimensions in random order."""
    batch, contract = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    lhs_free, rhs_free = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    sizes = draw(st.lists(st.integers(1, 4), min_size=8, max_size=8))
    names = iter(LETTERS)
    b, c = [next(names) for _ in range(batch)], [next(names) for _ in range(contract)]
    lf, rf = [next(names) for _ in range(lhs_free)], [next(names) for _ in range(rhs_free)]
    lhs_labels = draw(st.permutations(b + c + lf))
    rhs_labels = draw(st.permutations(b + c + rf))
    size = dict(zip(LETTERS, sizes))
    numbers = ((tuple(lhs_labels.index(x) for x in c), tuple(rhs_labels.index(x) for x in c)),
               (tuple(lhs_labels.index(x) for x in b), tuple(rhs_labels.index(x) for x in b)))
    # Result: batch dims (in dimension_numbers order), then each operand's free dims in its own order.
    free = [x for x in lhs_labels if x in lf] + [x for x in rhs_labels if x in rf]
    spec = f"{''.join(lhs_labels)},{''.join(rhs_labels)}->{''.join(b + free)}"
    return ([size[x] for x in lhs_labels], [size[x] for x in rhs_labels], numbers, spec,
            int(np.prod([size[x] for x in c])))


@given(dot_general_problems(), st.integers(0, 2 ** 31 - 1))
def test_dot_general_random_dimension_numbers(problem, seed):
    lhs_shape, rhs_shape, numbers, spec, k = problem
    rng = np.random.default_rng(seed)
    lhs, rhs = rand(rng, lhs_shape), rand(rng, rhs_shape)
    expected = np.einsum(spec, *f64(lhs, rhs)).astype(np.float32)
    check_eager_and_jit(lambda a, b: lax.dot_general(a, b, numbers), lhs, rhs, expected=expected,
                        **contraction_tol(k))


def test_dot_general_half_precision_accumulates_in_float32():
    # A float16 running sum of 4096 ones would stall at 2048.
    ones = np.ones(4096, np.float16)
    for dtype in (np.float16, ml_dtypes.bfloat16):
        out = lax.dot_general(ones.astype(dtype), ones.astype(dtype), (((0,), (0,)), ((), ())))
        assert out.dtype == np.dtype(dtype) and float(out) == 4096.0
        wide = lax.dot_general(ones.astype(dtype), ones.astype(dtype), (((0,), (0,)), ((), ())),
                               preferred_element_type=np.float32)
        assert wide.dtype == np.float32 and float(wide) == 4096.0


def test_dot_general_integers_accumulate_in_the_result_type(rng):
    lhs = rng.integers(-128, 128, size=(3, 50)).astype(np.int8)
    rhs = rng.integers(-128, 128, size=(50, 2)).astype(np.int8)
    exact = lhs.astype(np.int64) @ rhs.astype(np.int64)
    numbers = (((1,), (0,)), ((), ()))
    wide = check_eager_and_jit(lambda a, b: lax.dot_general(a, b, numbers, preferred_element_type=np.int32),
                               lhs, rhs, expected=exact.astype(np.int32))
    assert wide.dtype == np.int32
    wrapped = check_eager_and_jit(lambda a, b: lax.dot_general(a, b, numbers), lhs, rhs,
                                  expected=exact.astype(np.int8))  # two's complement wrap-around
    assert wrapped.dtype == np.int8
    as_float = lax.dot_general(lhs, rhs, numbers, preferred_element_type=np.float32)
    assert_allclose(as_float, exact.astype(np.float32))


def test_dot_general_booleans_compute_any_of_and(rng):
    lhs, rhs = rand(rng, (4, 6), np.bool_), rand(rng, (6, 3), np.bool_)
    expected = (lhs.astype(int) @ rhs.astype(int)) > 0
    check_eager_and_jit(lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ()))), lhs, rhs, expected=expected)


def test_dot_general_weak_type_and_preferred_type():
    numbers = (((), ()), ((), ()))
    weak = lax.dot_general(jnp.asarray(2.0), jnp.asarray(3.0), numbers)
    assert weak.weak_type and weak.dtype == np.float32
    strong = lax.dot_general(jnp.asarray(2.0), jnp.ones((), np.float32), numbers)
    assert not strong.weak_type
    preferred = lax.dot_general(jnp.asarray(2.0), jnp.asarray(3.0), numbers, preferred_element_type=np.float64)
    assert preferred.dtype == np.float32 and not preferred.weak_type  # float64 canonicalizes with x64 off


def test_dot_general_ir_and_params():
    text = str(ember.make_jaxpr(lambda a, b: lax.dot_general(a, b, [[[1], [0]], [[], []]],
                                                             preferred_element_type=np.float32))(
        np.ones((2, 3), np.float16), np.ones((3, 4), np.float16)))
    assert "f32[2,4] = dot_general[\n      dimension_numbers=(([1], [0]), ([], []))\n      " \
        "preferred_element_type=float32\n    ]" in text  # (as JAX 0.10 prints it: lists, and no precision=None)


@pytest.mark.parametrize("lhs_shape, rhs_shape, numbers, error, message", [
    ((2, 3), (2, 3), (((1,), (0,)), ((), ())), TypeError, "contracting dimensions of equal sizes, got (3,) and (2,)"),
    ((2, 3, 4), (3, 4, 5), (((2,), (1,)), ((0,), (0,))), TypeError, "batch dimensions of equal sizes"),
    ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), ())), TypeError, "as many lhs as rhs batch"),
    ((2, 3), (3, 4), (((2,), (0,)), ((), ())), TypeError, "out of range"),
    ((2, 3), (3, 4), (((-1,), (0,)), ((), ())), TypeError, "out of range"),
    ((2, 3), (3, 3), (((1, 1), (0, 1)), ((), ())), TypeError, "must be distinct"),
    ((2, 3), (3, 4), "bad", TypeError, "dimension_numbers must be"),
])
def test_dot_general_errors(lhs_shape, rhs_shape, numbers, error, message):
    with pytest.raises(error) as info:
        lax.dot_general(np.ones(lhs_shape, np.float32), np.ones(rhs_shape, np.float32), numbers)
    assert message in str(info.value)
    if "equal sizes" in message:
        assert str(lhs_shape) in str(info.value) and str(rhs_shape) in str(info.value)


def test_dot_general_dtype_errors():
    numbers = (((0,), (0,)), ((), ()))
    # Mixed operand dtypes compute in the more precise one (JAX's rule): float32 x int32 is float32.
    mixed = lax.dot_general(np.ones(3, np.float32), np.arange(3, dtype=np.int32), numbers)
    assert mixed.dtype == np.float32 and float(mixed) == 3.0
    with pytest.raises(TypeError, match="not floating"):
        lax.dot_general(np.ones(3, np.float32), np.ones(3, np.float32), numbers, preferred_element_type=np.int32)
    with pytest.raises(TypeError, match="narrower"):
        lax.dot_general(np.ones(3, np.int32), np.ones(3, np.int32), numbers, preferred_element_type=np.int8)


def test_lax_dot_and_batch_matmul(rng):
    m, v, b1, b2 = rand(rng, (3, 4)), rand(rng, (4,)), rand(rng, (2, 3, 4)), rand(rng, (2, 4, 5))
    assert_allclose(lax.dot(m, v), m @ v, **contraction_tol(4))
    assert_allclose(lax.dot(v, v), v @ v, **contraction_tol(4))
    assert_allclose(lax.dot(m, m.T), m @ m.T, **contraction_tol(4))
    assert_allclose(lax.dot(b1, b2, dimension_numbers=(((2,), (1,)), ((0,), (0,)))), b1 @ b2, **contraction_tol(4))
    check_eager_and_jit(lax.batch_matmul, b1, b2, expected=b1 @ b2, **contraction_tol(4))
    with pytest.raises(ValueError, match=r"\(2, 3, 4\) and \(4, 5\)"):
        lax.dot(b1, b2[0])
    with pytest.raises(ValueError, match="one rank"):
        lax.batch_matmul(b1, b2[0])


# --- jnp products ------------------------------------------------------------------------------
@pytest.mark.parametrize("a_shape, b_shape", [
    ((), ()), ((), (3,)), ((2, 3), ()), ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
    ((2, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((2, 2, 3), (5, 3, 4)), ((3,), (2, 3, 4)),
])
def test_dot_matches_numpy(rng, a_shape, b_shape):
    a, b = rand(rng, a_shape), rand(rng, b_shape)
    check_eager_and_jit(jnp.dot, a, b, expected=np.dot(*f64(a, b)).astype(np.float32), **contraction_tol(3))


@st.composite
def matmul_shapes(draw):
    """Broadcast-compatible batch shapes (some dims 1 or missing on one side), 1-D operands too."""
    batch = draw(st.lists(st.integers(1, 3), max_size=3))
    a_batch = [draw(st.sampled_from([n, 1])) for n in batch]
    b_batch = [draw(st.sampled_from([n, 1])) for n in batch]
    a_batch = a_batch[draw(st.integers(0, len(batch))):]
    b_batch = b_batch[draw(st.integers(0, len(batch))):]
    m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
    a_shape = (k,) if draw(st.booleans()) and not a_batch else tuple(a_batch) + (m, k)
    b_shape = (k,) if draw(st.booleans()) and not b_batch else tuple(b_batch) + (k, n)
    return a_shape, b_shape


@given(matmul_shapes(), st.integers(0, 2 ** 31 - 1))
def test_matmul_broadcasting_matches_numpy(shapes, seed):
    rng = np.random.default_rng(seed)
    a, b = rand(rng, shapes[0]), rand(rng, shapes[1])
    expected = np.matmul(*f64(a, b)).astype(np.float32)
    check_eager_and_jit(jnp.matmul, a, b, expected=expected, **contraction_tol(4))
    check_eager_and_jit(lambda x, y: x @ y, jnp.asarray(a), jnp.asarray(b), expected=expected,
                        **contraction_tol(4))


def test_matmul_broadcasting_lowers_to_one_dot_general_without_copies():
    closed = ember.make_jaxpr(jnp.matmul)(np.ones((5, 1, 2, 3), np.float32), np.ones((4, 3, 6), np.float32))
    names = [e.primitive.name for e in closed.eqns]
    assert names.count("dot_general") == 1 and "broadcast_in_dim" not in names
    assert closed.jaxpr.outvars[0].aval.shape == (5, 4, 2, 6)


@pytest.mark.parametrize("a_dtype, b_dtype, result", [
    (np.int32, np.float32, np.float32), (np.int8, np.int16, np.int16), (np.float16, np.float32, np.float32),
    (np.bool_, np.bool_, np.bool_), (np.uint8, np.int8, np.int16), (ml_dtypes.bfloat16, np.float16, np.float32),
])
def test_products_promote_as_jax(rng, a_dtype, b_dtype, result):
    a, b = rand(rng, (2, 3), a_dtype), rand(rng, (3, 2), b_dtype)
    expected = np.matmul(*f64(a, b))
    if result == np.bool_:
        expected = expected > 0
    for fn in (jnp.dot, jnp.matmul, lambda x, y: jnp.tensordot(x, y, 1), lambda x, y: jnp.einsum("ij,jk", x, y)):
        out = check_eager_and_jit(fn, a, b)
        assert_allclose(out, expected.astype(result), dtype=result, rtol=1e-2, atol=1e-2)


def test_products_with_python_scalars_keep_weak_types():
    x = jnp.ones(3, np.int32)
    assert jnp.dot(2.0, x).dtype == np.float32 and jnp.dot(2.0, x).weak_type
    assert jnp.dot(2, x).dtype == np.int32 and not jnp.dot(2, x).weak_type
    assert jnp.inner(jnp.ones(3, np.float16), 2.0).dtype == np.float16
    assert jnp.outer(2.0, 3.0).shape == (1, 1) and jnp.outer(2.0, 3.0).weak_type


def test_preferred_element_type(rng):
    a, b = rand(rng, (2, 3), np.int8), rand(rng, (3, 2), np.int8)
    calls = [(jnp.dot, b), (jnp.matmul, b), (jnp.inner, b.T),
             (lambda x, y, **kw: jnp.einsum("ij,kj->ik", x, y, **kw), b.T)]
    for fn, y in calls:
        out = fn(a, y, preferred_element_type=np.float32)
        assert out.dtype == np.float32
        assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32))
    assert jnp.dot(2, jnp.ones(3, np.int8), preferred_element_type=np.int32).dtype == np.int32


@pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors:DeprecationWarning")  # NumPy's, in the oracle
def test_vdot_inner_outer_tensordot_vecdot_kron_cross(rng):
    a, b = rand(rng, (2, 3, 4)), rand(rng, (3, 4, 5))
    tol = contraction_tol(12)
    check_eager_and_jit(jnp.vdot, a, a, expected=reference(np.vdot, a, a), **tol)
    check_eager_and_jit(jnp.inner, a, b[:, :, 0], expected=reference(np.inner, a, b[:, :, 0]), **tol)
    check_eager_and_jit(jnp.outer, a[0], b[0], expected=reference(np.outer, a[0], b[0]))
    check_eager_and_jit(jnp.tensordot, a, b, expected=reference(np.tensordot, a, b), **tol)
    check_eager_and_jit(lambda x, z: jnp.tensordot(x, z, 1), a, b[0],
                        expected=reference(np.tensordot, a, b[0], axes=1), **tol)
    for axes in (0, ([1, 2], [0, 1]), ((-1,), (1,)), (2, 1)):
        check_eager_and_jit(lambda x, z: jnp.tensordot(x, z, axes), a, b,
                            expected=reference(np.tensordot, a, b, axes=axes), **tol)
    check_eager_and_jit(jnp.vecdot, a, a[0, 0], expected=reference(np.vecdot, a, a[0, 0]), **tol)
    check_eager_and_jit(lambda x, y: jnp.vecdot(x, y, axis=0), a[:, 0], a[:, 1, :1],
                        expected=reference(np.vecdot, a[:, 0], a[:, 1, :1], axis=0), **tol)
    check_eager_and_jit(jnp.kron, a[0], b[0, :2], expected=reference(np.kron, a[0], b[0, :2]))
    check_eager_and_jit(jnp.kron, a[0, 0], b[0], expected=reference(np.kron, a[0, 0], b[0]))
    u, v = rand(rng, (4, 3)), rand(rng, (4, 3))
    check_eager_and_jit(jnp.cross, u, v, expected=reference(np.cross, u, v), **tol)
    check_eager_and_jit(jnp.cross, u[:, :2], v, expected=reference(np.cross, u[:, :2], v), **tol)
    check_eager_and_jit(jnp.cross, u[:, :2], v[:, :2], expected=reference(np.cross, u[:, :2], v[:, :2]), **tol)
    check_eager_and_jit(lambda x, y: jnp.cross(x, y, axis=0), u.T, v.T,
                        expected=reference(np.cross, u.T, v.T, axis=0), **tol)


@pytest.mark.parametrize("fn, a_shape, b_shape", [
    (jnp.dot, (2, 3), (2, 3)), (jnp.matmul, (2, 3), (2, 3)), (jnp.matmul, (4, 2, 3), (4,)),
    (lambda a, b: a @ b, (3,), (4,)), (jnp.inner, (2, 3), (3, 2)), (jnp.vdot, (2, 3), (4,)),
    (jnp.tensordot, (2, 3), (3, 2)), (lambda a, b: jnp.tensordot(a, b, 1), (2, 3), (4, 5)),
    (jnp.vecdot, (2, 3), (2, 4)),
])
def test_product_shape_mismatch_is_a_type_error_naming_both_shapes(fn, a_shape, b_shape):
    with pytest.raises(TypeError) as info:
        fn(jnp.ones(a_shape), jnp.ones(b_shape))
    assert str(a_shape) in str(info.value) and str(b_shape) in str(info.value)
    with pytest.raises(TypeError):
        ember.jit(fn)(jnp.ones(a_shape), jnp.ones(b_shape))


def test_product_argument_errors():
    with pytest.raises(ValueError, match="operand 0 must have ndim at least 1"):
        jnp.matmul(1.0, jnp.ones(3))
    with pytest.raises(TypeError, match="do not broadcast"):
        jnp.matmul(jnp.ones((2, 3, 4)), jnp.ones((3, 4, 5)))
    with pytest.raises(ValueError, match="axes=3"):
        jnp.tensordot(jnp.ones((2, 3)), jnp.ones((3, 2)), 3)
    with pytest.raises(TypeError, match="equal lengths"):
        jnp.tensordot(jnp.ones((2, 3)), jnp.ones((3, 2)), ([0, 1], [0]))
    with pytest.raises(ValueError, match="2 or 3 components"):
        jnp.cross(jnp.ones(4), jnp.ones(3))


# --- einsum -----------------------------------------------------------------------------------
EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ij->j", [(2, 3)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iij->j", [(3, 3, 2)]),
    ("ijij->ij", [(2, 3, 2, 3)]),
    ("i,j->ij", [(2,), (3,)]),
    ("i,i", [(4,), (4,)]),
    (",i->i", [(), (3,)]),
    ("ba", [(2, 3)]),
    ("aB", [(2, 3)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("...ij,jk", [(2, 3, 4), (4, 5)]),
    ("i...,i...", [(2, 3), (2,)]),
    ("...i->i", [(2, 3)]),
    ("ij,ij->ij", [(1, 3), (2, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ab,bc,cd,de->ae", [(2, 9), (9, 1), (1, 8), (8, 3)]),
    ("ij,jk,ki->", [(2, 3), (3, 4), (4, 2)]),
    ("ijk,jl,lk->il", [(2, 3, 4), (3, 5), (5, 4)]),
    ("ij,kl->", [(2, 3), (4, 5)]),
    ("ijk,ikl,ilm->ijm", [(2, 3, 4), (2, 4, 2), (2, 2, 3)]),
]


@pytest.mark.parametrize("spec, shapes", EINSUM_CASES)
def test_einsum_matches_numpy(rng, spec, shapes):
    operands = [rand(rng, s) for s in shapes]
    reference_spec = spec.replace("...i->i", "...i->...i") if spec == "...i->i" else spec
    expected = np.einsum(reference_spec, *f64(*operands))
    if spec == "...i->i":  # JAX sums over an ellipsis left out of the output; NumPy refuses
        expected = expected.reshape(-1, expected.shape[-1]).sum(0)
    check_eager_and_jit(lambda *xs: jnp.einsum(spec, *xs), *operands, expected=expected.astype(np.float32),
                        **contraction_tol(50))


@st.composite
def einsum_problems(draw):
    """1-4 operands over a small alphabet with random output labels and broadcast dimensions."""
    count = draw(st.integers(1, 4))
    alphabet = "abcdef"
    sizes = dict(zip(alphabet, draw(st.lists(st.integers(1, 3), min_size=6, max_size=6))))
    terms = [draw(st.lists(st.sampled_from(alphabet), min_size=0, max_size=3)) for _ in range(count)]
    used = sorted({c for t in terms for c in t})
    output = draw(st.permutations(used))[:draw(st.integers(0, len(used)))]
    spec = ",".join("".join(t) for t in terms) + "->" + "".join(output)

    def size(term, label):  # sometimes 1, broadcasting against the label's size elsewhere
        return 1 if term.count(label) == 1 and draw(st.integers(0, 4)) == 0 else sizes[label]

    return spec, [tuple(size(t, c) for c in t) for t in terms]


@given(einsum_problems(), st.integers(0, 2 ** 31 - 1), st.sampled_from(["auto", "greedy", False]))
def test_einsum_random_specs(problem, seed, optimize):
    spec, shapes = problem
    rng = np.random.default_rng(seed)
    operands = [rand(rng, s) for s in shapes]
    expected = np.einsum(spec, *f64(*operands)).astype(np.float32)
    out = check_eager_and_jit(lambda *xs: jnp.einsum(spec, *xs, optimize=optimize), *operands)
    assert_allclose(out, expected, **contraction_tol(100))


def test_einsum_forms_and_paths(rng):
    x, y, z = rand(rng, (2, 3)), rand(rng, (3, 4)), rand(rng, (4, 5))
    expected = x @ y @ z
    tol = contraction_tol(12)
    assert_allclose(jnp.einsum(x, [0, 1], y, [1, 2], z, [2, 3], [0, 3]), expected, **tol)
    assert_allclose(jnp.einsum(x, [Ellipsis, 1], y, [1, 2]), x @ y, **tol)
    path = np.einsum_path("ij,jk,kl->il", x, y, z, optimize="greedy")[0]
    assert_allclose(jnp.einsum("ij,jk,kl->il", x, y, z, optimize=path), expected, **tol)
    assert_allclose(jnp.einsum("ij,jk,kl->il", x, y, z, optimize=[(1, 2), (0, 1)]), expected, **tol)
    assert_allclose(jnp.einsum("i j , j k -> i k", x, y), x @ y, **tol)


def test_einsum_dtypes(rng):
    a, b = rand(rng, (2, 3), np.int8), rand(rng, (3,), np.int8)
    assert jnp.einsum("ij,j->i", a, b).dtype == np.int8
    assert jnp.einsum("ij,j", a, b.astype(np.float32)).dtype == np.float32
    three = jnp.einsum("ij,j,j->i", a, b, b, preferred_element_type=np.int32)
    assert three.dtype == np.int32
    assert_allclose(three, (a.astype(np.int32) * b * b).sum(1).astype(np.int32))
    assert jnp.einsum("i->", b, preferred_element_type=np.int32).dtype == np.int32
    mask = rand(rng, (3, 4), np.bool_)
    assert_allclose(jnp.einsum("ij->i", mask), mask.any(1))
    assert_allclose(jnp.einsum("ij,jk->ik", mask, mask.T), (mask.astype(int) @ mask.T.astype(int)) > 0)
    half = jnp.einsum("ij->", np.ones((64, 64), np.float16))
    assert half.dtype == np.float16 and float(half) == 4096.0


@pytest.mark.parametrize("spec, shapes, message", [
    ("ij,jk", [(2, 3)], "name 2 operands, but 1"),
    ("ijk", [(2, 3)], "does not match operand 0"),
    ("ij->k", [(2, 3)], "'k' does not appear"),
    ("ij->ii", [(2, 2)], "more than once"),
    ("ij,jk", [(2, 3), (4, 5)], "label 'j' has size"),
    ("ii", [(2, 3)], "label 'i' has size"),
    ("ii", [(1, 3)], "equal sizes"),
    ("i1", [(2, 3)], "invalid subscript"),
    ("i->i->i", [(2,)], "more than one '->'"),
])
def test_einsum_errors(spec, shapes, message):
    with pytest.raises(ValueError, match=message):
        jnp.einsum(spec, *[np.ones(s, np.float32) for s in shapes])


# --- diagonals, triangles, trace ----------------------------------------------------------------
@pytest.mark.parametrize("shape, offset, axis1, axis2", [
    ((3, 3), 0, 0, 1), ((3, 4), 1, 0, 1), ((4, 3), -2, 0, 1), ((3, 4), 5, 0, 1), ((3, 4), -3, 0, 1),
    ((2, 3, 4), 0, 1, 2), ((2, 3, 4), 1, 2, 0), ((2, 3, 4), -1, -1, -3), ((0, 3), 0, 0, 1),
])
def test_diagonal_and_trace(rng, shape, offset, axis1, axis2):
    a = rand(rng, shape)
    check_eager_and_jit(lambda x: jnp.diagonal(x, offset, axis1, axis2), a,
                        expected=np.diagonal(a, offset, axis1, axis2))
    check_eager_and_jit(lambda x: jnp.trace(x, offset, axis1, axis2), a,
                        expected=np.trace(a, offset, axis1, axis2).astype(np.float32), **contraction_tol(4))
    assert_allclose(a.diagonal(offset, axis1, axis2), np.diagonal(a, offset, axis1, axis2))


def test_trace_dtypes():
    assert jnp.trace(np.ones((3, 3), np.int8)).dtype == np.int32
    assert jnp.trace(np.ones((3, 3), np.bool_)).dtype == np.int32
    assert jnp.trace(np.ones((3, 3), np.float16)).dtype == np.float16
    assert jnp.trace(np.ones((3, 3)), dtype=np.float16).dtype == np.float16


@pytest.mark.parametrize("k", [-3, -1, 0, 1, 2])
def test_diag_tril_triu(rng, k):
    v, m = rand(rng, (3,)), rand(rng, (2, 3, 4))
    check_eager_and_jit(lambda x: jnp.diag(x, k), v, expected=np.diag(v, k))
    check_eager_and_jit(lambda x: jnp.diag(x, k), m[0], expected=np.diag(m[0], k))
    check_eager_and_jit(lambda x: jnp.tril(x, k), m, expected=np.tril(m, k))
    check_eager_and_jit(lambda x: jnp.triu(x, k), m, expected=np.triu(m, k))
    assert_allclose(jnp.diag(np.zeros(0, np.int32), k), np.diag(np.zeros(0, np.int32), k))
    assert_allclose(jnp.tril(np.ones((3, 3), np.bool_), k), np.tril(np.ones((3, 3), np.bool_), k))


def test_diagonal_errors():
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        jnp.diagonal(jnp.ones(3))
    with pytest.raises(ValueError, match="must differ"):
        jnp.diagonal(jnp.ones((2, 2)), 0, 1, -1)
    with pytest.raises(ValueError, match="1-D or 2-D"):
        jnp.diag(jnp.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        jnp.tril(jnp.ones(3))
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.trace(jnp.ones((2, 2)), axis1=2)


# --- norms ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("ord", [None, 2, 1, np.inf, -np.inf, 0, 3, 0.5])
@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, False), (-1, True), ((1,), False)])
def test_vector_norms(rng, ord, axis, keepdims):
    x = rand(rng, (3, 4))
    if axis is None:
        x = x[0]
    expected = np.linalg.norm(x.astype(np.float64), ord, axis, keepdims).astype(np.float32)
    check_eager_and_jit(lambda v: jnp.linalg.norm(v, ord, axis, keepdims), x, expected=expected, rtol=1e-5)


@pytest.mark.parametrize("ord", [None, "fro", 1, -1, np.inf, -np.inf])
@pytest.mark.parametrize("axis, keepdims", [(None, False), ((0, 1), True), ((2, 0), False), ((-1, -2), True)])
def test_matrix_norms(rng, ord, axis, keepdims):
    x = rand(rng, (3, 4, 5))
    if axis is None:
        x = x[0]
    expected = np.linalg.norm(x.astype(np.float64), ord, axis, keepdims).astype(np.float32)
    check_eager_and_jit(lambda v: jnp.linalg.norm(v, ord, axis, keepdims), x, expected=expected, rtol=1e-5)


def test_norm_dtypes_helpers_and_errors(rng):
    x = rand(rng, (2, 3, 4))
    assert_allclose(jnp.linalg.norm(x), np.linalg.norm(x.ravel()).astype(np.float32), rtol=1e-5)
    assert jnp.linalg.norm(np.arange(3)).dtype == np.float32
    assert jnp.linalg.norm(np.ones(3, np.float16)).dtype == np.float16
    assert_allclose(jnp.linalg.vector_norm(x, ord=1), np.abs(x).sum(dtype=np.float64).astype(np.float32),
                    rtol=1e-5)
    assert_allclose(jnp.linalg.matrix_norm(x), np.linalg.norm(x, axis=(-2, -1)), rtol=1e-5)
    assert_allclose(jnp.linalg.matmul(x, x.swapaxes(1, 2)), x @ x.swapaxes(1, 2), **contraction_tol(4))
    with pytest.raises(ValueError, match="Improper number of axes"):
        jnp.linalg.norm(x, axis=(0, 1, 2))
    with pytest.raises(ValueError, match="Invalid order 'fro' for vector norm"):
        jnp.linalg.norm(x[0, 0], "fro")
    with pytest.raises(ValueError, match="Invalid order '3' for matrix norm"):
        jnp.linalg.norm(x[0], 3)
    with pytest.raises(ValueError, match="1-D or 2-D"):
        jnp.linalg.norm(x, 1)
    assert not hasattr(jnp, "norm")


def test_against_jax_when_available(rng):
    jax = pytest.importorskip("jax")
    jax_numpy = jax.numpy
    a, b = rand(rng, (2, 1, 3, 4)), rand(rng, (5, 4, 2))
    for name, y, kwargs in (("matmul", b, {}), ("dot", b, {}), ("tensordot", b[0], dict(axes=1)),
                            ("inner", b.swapaxes(-1, -2), {})):
        ours, theirs = getattr(jnp, name)(a, y, **kwargs), getattr(jax_numpy, name)(a, y, **kwargs)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        assert_allclose(ours, np.asarray(theirs), **contraction_tol(4))
    spec = "...ij,jk->...ki"
    assert_allclose(jnp.einsum(spec, a, b[0]), np.asarray(jax_numpy.einsum(spec, a, b[0])), **contraction_tol(4))


# --- the native blocked product (ember/backends/cpu/gemm.py) on transposed and strided operands ------
def _gemm_compiled(dtype):
    """Wait for the native product of ``dtype`` (compiled in the background; until then products
    use NumPy's matmul), so that the products below run on it."""
    from ember.backends.cpu import gemm

    dtype = np.dtype(dtype)
    for skinny in (False, True):  # (the blocked product and the narrow one)
        gemm.warm_up(dtype, skinny).wait()
    return gemm


def _product_tol(dtype, k):
    return contraction_tol(k) if np.dtype(dtype) == np.float32 else dict(rtol=1e-12, atol=1e-12 * max(k, 1))


# M, K, N: not multiples of the tile (6 rows x 16 or 32 columns), of a block of A (144 rows) or of
# a block's depth (K = 400 and 1000 are cut into equal blocks), and ones; narrow products (N at
# most a vector's lanes: gemm's skinny path, in half-width vectors up to half of them), with rows
# that do and do not fill its tiles of 12 and 8 rows
PRODUCT_SIZES = [(150, 400, 70), (13, 1000, 47), (300, 9, 33), (1, 64, 40), (40, 64, 1), (70, 1, 33), (7, 5, 3),
                 (9, 3000, 8), (72, 300, 16), (37, 100, 12), (25, 9, 5)]
TRANSPOSES = {
    "A @ B": lambda a, b: a @ b,
    "A.T @ B": lambda a, b: a.T @ b,
    "A @ B.T": lambda a, b: a @ b.T,
    "A.T @ B.T": lambda a, b: a.T @ b.T,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("form", list(TRANSPOSES))
@pytest.mark.parametrize("m, k, n", PRODUCT_SIZES)
def test_native_product_of_transposed_operands(rng, x64, dtype, form, m, k, n):
    _gemm_compiled(dtype)
    fn = TRANSPOSES[form]
    a = rand(rng, (k, m) if form.startswith("A.T") else (m, k), dtype)
    b = rand(rng, (n, k) if form.endswith("B.T") else (k, n), dtype)
    expected = fn(*f64(a, b)).astype(dtype)
    check_eager_and_jit(fn, a, b, expected=expected, **_product_tol(dtype, k))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_product_of_sliced_and_batched_operands(rng, x64, dtype):
    _gemm_compiled(dtype)
    tol = _product_tol(dtype, 400)
    a, b = rand(rng, (301, 820), dtype), rand(rng, (400, 211), dtype)
    # slices and strided slices, inside the program and as NumPy views given to it
    sliced = lambda x, y: x[1::2, 10:410] @ y[:, ::3]  # noqa: E731
    check_eager_and_jit(sliced, a, b, expected=sliced(*f64(a, b)).astype(dtype), **tol)
    plain = lambda x, y: x @ y  # noqa: E731
    for x, y in ((a[1::2, 10:410], b[:, ::3]), (a[::2, :400:1].T.T, b[::-1, 5:]), (a[:200, :800].T[::2].T, b)):
        check_eager_and_jit(plain, x, y, expected=plain(*f64(x, y)).astype(dtype), **tol)
    # batches with transposed operands, one of them a strided view of a larger buffer
    p, q = rand(rng, (3, 400, 50), dtype), rand(rng, (3, 70, 400), dtype)
    for spec, x, y in (("bkm,bnk->bmn", p, q), ("bkm,bkn->bmn", p, q.transpose(0, 2, 1)),
                       ("kbm,bnk->bmn", p.transpose(1, 0, 2), q), ("bmk,bkn->bnm", p.transpose(0, 2, 1)[:, ::2], q.mT),
                       ("bkm,bnk->bmn", rand(rng, (3, 1, 50), dtype), rand(rng, (3, 70, 1), dtype))):
        fn = lambda u, v, spec=spec: jnp.einsum(spec, u, v)  # noqa: E731
        check_eager_and_jit(fn, x, y, expected=np.einsum(spec, *f64(x, y)).astype(dtype), **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_product_called_on_any_strides_accumulating(rng, dtype):
    """``gemm`` itself on strided NumPy views (no copies), one thread and several, storing and
    accumulating (``C += alpha * A @ B``, as loops' accumulators use it)."""
    gemm = _gemm_compiled(dtype)
    size = np.dtype(dtype).itemsize
    for m, k, n in PRODUCT_SIZES + [(289, 777, 100)]:
        big_a, big_b = rand(rng, (2, 2 * k + 1, 3 * m + 2), dtype), rand(rng, (2, 2 * n + 3, k + 4), dtype)
        views = [
            (rand(rng, (2, m, k), dtype), rand(rng, (2, k, n), dtype)),  # contiguous
            # A.T and B.T, strided
            (big_a[:, 1::2, :m].transpose(0, 2, 1), big_b[:, 1:2 * n:2, 2:k + 2].transpose(0, 2, 1)),
            (big_a[:, :k, :3 * m:3].transpose(0, 2, 1), rand(rng, (2, k, 2 * n), dtype)[:, :, ::2]),  # columns strided
            (rand(rng, (2, m, 2 * k), dtype)[:, :, 1::2], big_b[:, :n, :k].transpose(0, 2, 1)),  # k strided
        ]
        for a, b in views:
            assert a.shape == (2, m, k) and b.shape == (2, k, n)
            want = a.astype(np.float64) @ b.astype(np.float64)
            tol = _product_tol(dtype, k)
            for parts in (1, 2, 3):
                out = np.full((2, m, n), np.nan, dtype)
                gemm.matmul(a, b, out, parts)
                np.testing.assert_allclose(out, want, **tol)
                by_columns, extent = gemm.split(m, n, dtype) if parts > 1 else (0, m)
                start = rand(rng, (2, m, n), dtype)
                out = start.copy()
                params = np.array([2, m, n, k, *(s // size for s in a.strides), *(s // size for s in b.strides),
                                   out.strides[0] // size, out.strides[1] // size, by_columns, 1,
                                   gemm.alpha_bits(-0.5)], np.int64)
                gemm.run(np.dtype(dtype), (a, b, out), params, extent, parts)
                np.testing.assert_allclose(out, start - 0.5 * want, **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, n", [(200, 700), (700, 200)], ids=["wide", "tall"])
def test_native_product_in_several_pieces_a_thread_equals_one_thread(rng, x64, dtype, m, n):
    """A product split over a team in several pieces a thread (taken by whichever thread is free:
    panels of columns of a wide product, blocks of rows of a tall one) computes every element as
    one thread does, bit for bit."""
    gemm = _gemm_compiled(dtype)
    k = 256
    by_columns, extent = gemm.split(m, n, dtype)
    assert by_columns == (n >= m)
    assert gemm.pieces_per_thread(m * n * k, extent, by_columns, 2) >= 2
    a, b = rand(rng, (1, m, k), dtype), rand(rng, (1, k, n), dtype)
    alone, shared = np.empty((1, m, n), dtype), np.full((1, m, n), np.nan, dtype)
    gemm.matmul(a, b, alone, 1)
    gemm.matmul(a, b, shared, 2)
    np.testing.assert_array_equal(shared, alone)
    np.testing.assert_allclose(alone, a.astype(np.float64) @ b.astype(np.float64), **_product_tol(dtype, k))
    x, y = (rand(rng, (m, k), dtype), rand(rng, (k, n), dtype))  # jitted: the dispatcher's team
    check_eager_and_jit(lambda u, v: u @ v, x, y, expected=(x.astype(np.float64) @ y).astype(dtype),
                        **_product_tol(dtype, k))


def test_pieces_a_thread_of_a_product():
    from ember.backends.cpu import gemm

    assert gemm.pieces_per_thread(10**12, 16, 1, 1) == 1  # one thread: one piece
    assert gemm.pieces_per_thread(512**3, 16, 1, 2) == 8  # 512^3 by columns: one panel a piece
    assert gemm.pieces_per_thread(256**3, 8, 1, 2) == 4  # 256^3 too (its second thread starts late)
    assert gemm.pieces_per_thread(10**12, 4 * gemm.PIECE_MIN_PANELS, 1, 2) == 2  # none narrower
    assert gemm.pieces_per_thread(10**12, 4 * gemm.MC, 0, 2) == 2  # nor shorter than a block of A
    assert gemm.pieces_per_thread(3 * gemm.PIECE_MIN_MULTIPLY_ADDS, 1000, 1, 2) == 1  # each worth a split
    assert gemm.pieces_per_thread(10**15, 10**6, 1, 2) == gemm.MOST_PIECES_PER_THREAD


# --- einsum_path, against JAX ----------------------------------------------------------------------
@pytest.mark.parametrize("optimize", ["auto", "greedy", "optimal", True, False])
@pytest.mark.parametrize("subscripts,shapes", [("ij,jk,kl", [(2, 3), (3, 100), (100, 5)]), ("ij,jk", [(2, 3), (3, 4)]),
                                               ("ii", [(3, 3)]), ("ab,bc,cd,de->ae", [(2, 8), (8, 3), (3, 9), (9, 2)])])
def test_einsum_path_matches_jax(subscripts, shapes, optimize):
    operands = [np.ones(s, np.float32) for s in shapes]
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
    x, y, z = np.ones((2, 3), np.float32), np.ones((3, 100), np.float32), np.ones((100, 5), np.float32)
    check_eager_and_jit(f, x, y, z, expected=np.einsum("ij,jk,kl", x, y, z))
    assert seen[0] == seen[1] == [(1, 2), (0, 1)]
