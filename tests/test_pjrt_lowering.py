"""The StableHLO lowering, run on XLA's CPU plugin against the reference interpreter: every op
record (elementwise, with parameters, complex), control flow, transformations, contractions at
each precision, random numbers bit for bit, windows, sorts, FFT and linear algebra; and the
coverage of the primitive table (each primitive lowered or refused with a reason)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st
from hypothesis.extra import numpy as hnp
from op_records import BINARY_RECORDS, COMPLEX_PARAM_RECORDS, PARAM_RECORDS, UNARY_RECORDS, arrays, complex_arrays

import ember
import ember.numpy as jnp
from ember import dtypes, lax
from ember.backends.reference import eval_jaxpr, impl_rules
from ember.core.primitive import abstract_eval_rules, call_params

# The plugin the lowering runs on: XLA's CPU plugin here and in CI; EMBER_TEST_PJRT=tpu runs the same
# tests on a TPU machine (by hand: CI has none).
PLUGIN = os.environ.get("EMBER_TEST_PJRT", "xla_cpu")
if PLUGIN == "xla_cpu":
    pytest.importorskip("lammps_jax_pjrt_cpu",
                        reason="XLA's CPU PJRT plugin is not installed (pip install ember[pjrt-cpu])")

# A TPU's float32 products run as bfloat16 passes unless told otherwise, and its transcendental
# functions are less exact than a CPU's (JAX's on the chip miss the CPU's answers by the same
# amounts: benchmarks/pjrt.py's conformance table): there the programs run at "highest" matmul
# precision and floats compare within 2e-3.
ON_TPU = PLUGIN == "tpu"

from ember.backends.pjrt import lowering, program as pjrt  # noqa: E402
from ember.backends.pjrt.program import Program  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:ember.jit.*has been traced:RuntimeWarning")
FEW = settings(max_examples=3, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def on_plugin(fn, *args):
    """``fn`` traced, lowered, compiled and run on the plugin; and the reference's answer."""
    closed = ember.make_jaxpr(fn)(*args)
    values = [np.asarray(a) for a in args]
    with ember.default_matmul_precision("highest" if ON_TPU else None):
        got = Program(pjrt.client(PLUGIN), closed, "test")(*values)
    with np.errstate(all="ignore"):
        want = eval_jaxpr(closed.jaxpr, closed.consts, *values)
    return got, want


def assert_matches(got, want, rtol=None, name=""):
    assert len(got) == len(want), name
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, f"{name}: {g.dtype}{g.shape} != {w.dtype}{w.shape}"
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=name)
            continue
        tol = rtol or {np.dtype(np.float16): 2e-3, dtypes.bfloat16: 1.6e-2}.get(w.dtype, 2e-5)
        tol = max(tol, 2e-3) if ON_TPU else tol
        wide = np.complex128 if w.dtype.kind == "c" else np.float64
        np.testing.assert_allclose(g.astype(wide), w.astype(wide), rtol=tol, atol=tol, equal_nan=True, err_msg=name)


# --- the op records -----------------------------------------------------------------------------------------------
_LOOSE = {"lax.lgamma": 1e-4, "lax.digamma": 1e-4, "lax.erf_inv": 1e-4, "tan": 1e-4, "lax.tan": 1e-4}


def _draw(data, record, dtype, shape, first=True):
    if np.dtype(dtype).kind == "c":
        return data.draw(complex_arrays(dtype, shape, getattr(record, "complex_domain", (-10.0, 10.0)),
                                        record.specials))
    return data.draw(arrays(dtype, shape, record.domain, record.bit_patterns and first))


@pytest.mark.parametrize("record", UNARY_RECORDS + BINARY_RECORDS, ids=lambda r: r.name)
@FEW
@given(data=st.data())
def test_elementwise_records(record, data):
    dtype = data.draw(st.sampled_from(record.dtypes))
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=4))
    args = [_draw(data, record, dtype, shape, first=i == 0) for i in range(record.nargs)]
    if np.dtype(dtype).kind == "c":
        # On a branch cut, a part that is -0 picks the side: NumPy's (the reference's) and XLA's (JAX's,
        # which the lowering gives) differ there, e.g. arccos(2 - 0j) = +1.317j in NumPy, -1.317j in JAX.
        assume(not any(np.any((part == 0) & np.signbit(part)) for a in args for part in (a.real, a.imag)))
    if record.nonzero_divisor:
        args[1] = np.where(args[1] == 0, np.ones((), args[1].dtype), args[1])
    got, want = on_plugin(record.fn, *args)
    assert_matches(got, want, _LOOSE.get(record.name, record.tolerance), record.name)


@pytest.mark.parametrize("record", PARAM_RECORDS + COMPLEX_PARAM_RECORDS,
                         ids=[r.name for r in PARAM_RECORDS] + [f"{r.name} (complex)" for r in COMPLEX_PARAM_RECORDS])
@FEW
@given(data=st.data())
def test_param_records(record, data):
    dtype = data.draw(st.sampled_from(record.dtypes))
    shape = data.draw(hnp.array_shapes(min_dims=record.min_dims, max_dims=record.max_dims,
                                       min_side=max(record.min_side, 0), max_side=4))
    x = _draw(data, record, dtype, shape)
    operands, params = record.draw_args(data.draw, x)
    got, want = on_plugin(lambda *a: record.fn(*a, **params), x, *operands)
    assert_matches(got, want, name=record.name)


# --- coverage -------------------------------------------------------------------------------------------------------
def test_every_primitive_is_lowered_inlined_or_refused_with_a_reason():
    # ember's own primitives (tests run in this process before may have defined more of theirs)
    ours = [p for p in abstract_eval_rules if abstract_eval_rules._registrants.get(p, "?").startswith("ember.")]
    assert len(ours) > 100
    table = {}
    for p in ours:
        if p in lowering.lower_rules:
            table[p.name] = "lowered"
        elif p in call_params:
            table[p.name] = "inlined"
        else:
            reason = lowering.REFUSED.get(p) or lowering.REFUSED_BY_NAME.get(p.name)
            assert reason, f"{p.name} is neither lowered nor refused with a reason"
            table[p.name] = reason
    refused = sorted(n for n, v in table.items() if v not in ("lowered", "inlined"))
    assert len(table) == len(ours)
    # What is refused today (each with its reason in lowering.REFUSED): kept in step with the table.
    assert refused == sorted(["custom_vjp_lin", "debug_callback", "debug_print", "io_callback", "pure_callback"])


def test_a_refused_primitive_names_itself_and_the_reason():
    with pytest.raises(lowering.LoweringError, match=r"`pure_callback`: a host callback"):
        on_plugin(lambda a: ember.pure_callback(np.sin, ember.ShapeDtypeStruct((3,), np.float32), a),
                  np.ones(3, np.float32))


def test_a_platform_without_an_element_type_refuses_programs_holding_it():
    # XLA's TPU compiler has no complex128 (a program holding one aborts the process there): refused first
    with ember.config.override(enable_x64=True):
        inner = ember.make_jaxpr(lambda a: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 1j),
                                                          (0, a.astype(np.complex128))))(np.ones(2))
        plain = ember.make_jaxpr(lambda a: a * 2)(np.ones(2))
    why = pjrt.unsupported_dtype(inner.jaxpr, "tpu")
    assert why is not None and "complex128" in why and "TPU does not support" in why and "complex64" in why
    assert pjrt.unsupported_dtype(inner.jaxpr, "cpu") is None and pjrt.unsupported_dtype(plain.jaxpr, "tpu") is None


def test_collectives_are_lowered_over_an_axis_of_one_device_only():
    from ember.lax import parallel

    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    def program(x):
        return (lax.psum(x, "i"), lax.pmin(x, "i"), lax.all_gather(x, "i", tiled=True), lax.axis_index("i"),
                lax.ppermute(x, "i", [(0, 0)]), lax.ppermute(x, "i", []), lax.all_to_all(x, "i", 0, 1, tiled=True))

    with parallel.extend_axis_env([("i", 1, parallel.PMAP)]):  # (as pmap over one device binds it)
        closed = ember.make_jaxpr(program)(x)
        got = Program(pjrt.client(PLUGIN), closed, "test")(x)
    for g, w in zip(got, [x, x, x, np.int32(0), x, np.zeros_like(x), x]):
        np.testing.assert_array_equal(g, w)
    with parallel.extend_axis_env([("i", 2, parallel.PMAP)]):
        closed = ember.make_jaxpr(lambda x: lax.psum(x, "i"))(x)
        with pytest.raises(lowering.LoweringError, match=r"`psum` over the axis \('i',\), which has size 2: .*"
                                                         r"only over an axis of one device"):
            Program(pjrt.client(PLUGIN), closed, "test")
    with pytest.raises(lowering.LoweringError, match=r"`psum` over the axis \('i',\), which is not bound here"):
        Program(pjrt.client(PLUGIN), closed, "test")


def test_every_reference_rule_has_a_lowering_decision():
    for p in impl_rules:
        assert p in lowering.lower_rules or p in call_params or p in lowering.REFUSED or \
            p.name in lowering.REFUSED_BY_NAME, p.name


# --- programs ---------------------------------------------------------------------------------------------------------
X = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("fn", [
    lambda x: lax.fori_loop(0, 5, lambda i, c: c * 0.5 + i, x),
    lambda x: lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 1.1), (0, x))[1],
    lambda x: lax.scan(lambda c, r: (c + r, c * r), jnp.zeros(4), x),
    lambda x: lax.scan(lambda c, r: (c + r, (c, r.sum())), jnp.zeros(4), x, reverse=True),
    lambda x: lax.cond(x[0, 0] > 0, lambda: x + 1, lambda: x - 1),
    lambda x: lax.switch(jnp.int32(7), [lambda y: y, lambda y: y * 2, jnp.sin], x),
    lambda x: ember.grad(lambda y: jnp.sum(jnp.tanh(y) ** 2 * jnp.sin(y)))(x),
    lambda x: ember.vmap(lambda r: jnp.dot(r, r) + jnp.max(r))(x),
    lambda x: ember.jit(lambda y: ember.nn.softmax(y, axis=-1))(x),
    lambda x: ember.grad(lambda y: lax.scan(lambda c, r: (c * r, None), jnp.ones(4), y)[0].sum())(x),
    lambda x: ember.checkpoint(lambda y: jnp.exp(y).sum())(x),
    lambda x: ember.nn.gelu(x) + ember.nn.relu(x),
], ids=["fori_loop", "while_loop", "scan", "scan reverse", "cond", "switch clamped", "grad", "vmap", "jit call",
        "grad of scan", "checkpoint", "custom_jvp"])
def test_control_flow_and_transformations(fn):
    got, want = on_plugin(fn, X)
    assert_matches(got, want)


def test_dot_general_precision_in_the_text():
    closed = ember.make_jaxpr(lambda a, b: jnp.dot(a, b, precision=lax.Precision.HIGHEST))(X, X.T)
    assert "precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]" in \
        lowering.lower_module(closed)
    closed = ember.make_jaxpr(lambda a, b: a @ b)(X, X.T)
    assert "precision_config" not in lowering.lower_module(closed)
    # JAX's default_matmul_precision fills in products that give none (and only those).
    with ember.default_matmul_precision("float32"):
        text = lowering.lower_module(closed)
        assert "precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]" in text
        mixed = ember.make_jaxpr(lambda a, b: jnp.dot(a, b, precision="default") + a @ b)(X, X.T)
        text = lowering.lower_module(mixed)
        assert text.count("precision DEFAULT") == 2 and text.count("precision HIGHEST") == 2
    with pytest.raises(ValueError, match="jax_default_matmul_precision must be one of"):
        ember.config.update("jax_default_matmul_precision", "double")
    assert ember.config.default_matmul_precision is None
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 5, 7), np.float32), rng.standard_normal((2, 7, 3), np.float32)
    for precision in (None, "highest", ("default", "high")):
        got, want = on_plugin(lambda a, b: lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))), precision=precision),
                              a, b)
        assert_matches(got, want, 3e-2 if ON_TPU and isinstance(precision, tuple) else 1e-5)  # (bf16 passes)
    got, want = on_plugin(lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                                       preferred_element_type=np.float32),
                          a[0].astype(dtypes.bfloat16), b[0].astype(dtypes.bfloat16))
    assert_matches(got, want, 1e-5)


def test_random_numbers_are_bit_identical():
    def draw(seed):
        key = ember.random.PRNGKey(seed)
        k1, k2 = ember.random.split(key)
        return (ember.random.bits(k1, (5, 3)), ember.random.normal(k2, (7,)),
                ember.random.uniform(key, (4,)), ember.random.randint(k1, (6,), 0, 100))

    got, want = on_plugin(draw, np.uint32(42))
    for g, w in zip(got, want):
        if w.dtype.kind in "iu":
            np.testing.assert_array_equal(g, w)
    assert_matches(got, want)


def test_convolutions_windows_and_their_gradients():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 9, 9), np.float32)
    w = rng.standard_normal((4, 3, 3, 3), np.float32)

    def net(x, w):
        y = lax.conv_general_dilated(x, w, (2, 1), "SAME", rhs_dilation=(1, 2))
        y = lax.reduce_window(y, -np.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        return jnp.sum(lax.reduce_window(y, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 1, 1), "SAME") ** 2)

    got, want = on_plugin(lambda x, w: (net(x, w), *ember.grad(net, argnums=(0, 1))(x, w)), x, w)
    assert_matches(got, want, 1e-4)
    grouped = rng.standard_normal((6, 1, 3, 3), np.float32)
    got, want = on_plugin(lambda x: lax.conv_general_dilated(x, grouped, (1, 1), "VALID", feature_group_count=3,
                                                             dimension_numbers=("NCHW", "OIHW", "NHWC")),
                          x[:, :, :5, :5])
    assert_matches(got, want, 1e-4)


def test_sorts_argmax_and_cumulative_follow_jax_on_specials():
    x = np.array([3.0, -0.0, np.nan, 0.0, -np.inf, 1.0, np.nan, 3.0], np.float32)
    got, want = on_plugin(lambda x: (jnp.sort(x), jnp.argsort(x), jnp.argmax(x), jnp.argmin(x),
                                     lax.top_k(x, 3)[1], jnp.cumsum(x), lax.cummax(x, reverse=True),
                                     lax.cumlogsumexp(x[jnp.array([1, 3, 5, 0])])), x)
    assert_matches(got, want)
    ints = np.array([[3, 1, 2], [1, 1, 0]], np.int32)
    got, want = on_plugin(lambda a: (lax.sort((a[0], a[1]), num_keys=2), jnp.argmax(a, 0), jnp.cumprod(a, 1)), ints)
    assert_matches(got, want)


def test_gathers_and_scatters_in_each_mode():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    idx = np.array([0, 3, 5, -1], np.int32)
    got, want = on_plugin(lambda x, i: (x.at[i].get(mode="fill", fill_value=-1.0), x.at[i].get(mode="clip"),
                                        x.at[i].set(7.0, mode="drop"), x.at[i].add(1.0, mode="clip"),
                                        x.at[i, 1].multiply(2.0, mode="drop"), x.at[i % 4].max(5.0),
                                        x.at[i % 4].min(5.0), lax.dynamic_slice(x, (i[2], 1), (2, 2))), x, idx)
    assert_matches(got, want)


def test_fft_and_triangular_linear_algebra():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 4)).astype(np.float32)
    spd = a @ a.T + 4 * np.eye(4, dtype=np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    got, want = on_plugin(lambda m, b: (jnp.linalg.cholesky(m), lax.linalg.triangular_solve(
        m, b, left_side=True, lower=True), lax.linalg.triangular_solve(m, b.T, left_side=False, lower=False,
                                                                        transpose_a=True, unit_diagonal=True),
        jnp.fft.rfft(b[:, 0]), jnp.fft.ifft2(m.astype(np.complex64)), jnp.fft.irfft(b[:, 0], 6)), spd, b)
    assert_matches(got, want, 1e-4)


def test_constants_captured_by_the_program_are_parameters():
    table = np.arange(20, dtype=np.float32).reshape(4, 5)
    got, want = on_plugin(lambda x: x @ jnp.asarray(table) + 1, X)
    assert_matches(got, want)


@pytest.mark.parametrize("shape,dtype", [((4, 4), np.float32), ((2, 3, 5, 3), np.float32), ((3, 5), np.float32),
                                         ((3, 3), np.complex64)], ids=str)
def test_lu_and_what_is_built_on_it(shape, dtype):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(dtype)
    if dtype == np.complex64:
        x = x + 1j * rng.standard_normal(shape).astype(np.float32)
    got, want = on_plugin(lambda a: (*lax.linalg.lu(a), lax.linalg.lu_pivots_to_permutation(lax.linalg.lu(a)[1], 7)
                                     if a.shape[-2] <= 7 else a), x)
    assert_matches(got, want, 1e-4)
    singular = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 2.0], [1.0, 3.0, 0.0]], np.float32)
    got, want = on_plugin(lambda a: lax.linalg.lu(a), singular)
    assert_matches(got, want)


def test_solve_inverse_and_determinant():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 4, 4)).astype(np.float32) + 4 * np.eye(4, dtype=np.float32)
    b = rng.standard_normal((3, 4, 2)).astype(np.float32)
    got, want = on_plugin(lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.inv(a), jnp.linalg.det(a),
                                        jnp.linalg.slogdet(a)[1]), a, b)
    assert_matches(got, want, 1e-4)
    np.testing.assert_allclose(got[0], np.linalg.solve(a, b), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape,dtype", [((4, 4), np.float32), ((2, 5, 3), np.float32), ((3, 5), np.float32),
                                         ((4, 3), np.complex64)], ids=str)
def test_qr_geqrf_and_householder_product(shape, dtype):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(dtype)
    if dtype == np.complex64:
        x = x + 1j * rng.standard_normal(shape).astype(np.float32)
    x[..., 1, 0] = 0  # (a column already zero below a real diagonal entry would take the identity)
    k = min(shape[-2:])

    def decompositions(a):
        packed, taus = lax.linalg.geqrf(a)
        return (*jnp.linalg.qr(a), *jnp.linalg.qr(a, mode="complete"), packed, taus,
                lax.linalg.householder_product(packed[..., :k], taus))

    got, want = on_plugin(decompositions, x)
    assert_matches(got, want, 2e-4)
    zeros = np.zeros((3, 3), np.float32)
    zeros[0, 0] = 2.0
    got, want = on_plugin(lambda a: lax.linalg.geqrf(a), zeros)  # reflectors that are the identity (tau 0)
    assert_matches(got, want)


def _adjoint(a):
    return np.conj(np.swapaxes(a, -1, -2))


def _matrices(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape).astype(x.real.dtype)
    return x


@pytest.mark.parametrize("shape,lower,dtype", [((4, 4), True, np.float32), ((2, 6, 6), False, np.float32),
                                               ((1, 1), True, np.float32), ((2, 4, 4), True, np.complex64),
                                               ((3, 3), False, np.complex64)], ids=str)
def test_eigh_of_symmetric_and_hermitian_matrices(shape, lower, dtype):
    x = _matrices(shape, dtype, 6)
    got, want = on_plugin(lambda a: lax.linalg.eigh(a, lower=lower, symmetrize_input=False), x)
    (v, w), (v_ref, w_ref) = got, want
    assert v.dtype == x.dtype and w.dtype == np.float32
    np.testing.assert_allclose(w, w_ref, rtol=1e-5, atol=1e-5)  # ascending, as the reference's
    strict = np.tril(x, -1) if lower else np.triu(x, 1)
    diagonal = np.diagonal(x, 0, -2, -1).real[..., None] * np.eye(shape[-1])  # (its imaginary part is not read)
    hermitian = strict + _adjoint(strict) + diagonal
    np.testing.assert_allclose(v @ (w[..., None] * _adjoint(v)), hermitian, rtol=1e-5, atol=3e-5)
    eye = np.broadcast_to(np.eye(shape[-1]), v.shape)
    np.testing.assert_allclose(_adjoint(v) @ v, eye, atol=2e-6)
    np.testing.assert_allclose(np.abs(_adjoint(v) @ v_ref), eye, atol=1e-4)  # the reference's vectors, up to phase


@pytest.mark.parametrize("shape,dtype", [((5, 3), np.float32), ((2, 3, 6), np.float32), ((4, 4), np.float32),
                                         ((4, 3), np.complex64), ((2, 3, 4), np.complex64)], ids=str)
def test_svd_reduced_and_full(shape, dtype):
    x = _matrices(shape, dtype, 7)
    got, want = on_plugin(lambda a: (*jnp.linalg.svd(a, full_matrices=False), jnp.linalg.svd(a, compute_uv=False),
                                     jnp.linalg.norm(a, ord=2, axis=(-2, -1)), *jnp.linalg.svd(a)), x)
    (u, s, vh, s_only, norm2, u_full, s_full, vh_full), (u_ref, s_ref, _, s_only_ref, norm2_ref, *full_ref) = got, want
    assert [a.shape for a in (u_full, vh_full)] == [a.shape for a in (full_ref[0], full_ref[2])]
    for g, w in ((s, s_ref), (s_only, s_only_ref), (norm2, norm2_ref), (s_full, s_ref)):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)  # descending, as the reference's
    k = min(shape[-2:])
    np.testing.assert_allclose((u * s[..., None, :]) @ vh, x, rtol=1e-4, atol=3e-5)
    np.testing.assert_allclose((u_full[..., :k] * s[..., None, :]) @ vh_full[..., :k, :], x, rtol=1e-4, atol=3e-5)
    for q in (u, _adjoint(vh), u_full, _adjoint(vh_full)):
        columns = q.shape[-1]
        np.testing.assert_allclose(_adjoint(q) @ q, np.broadcast_to(np.eye(columns), q.shape[:-2] + (columns,) * 2),
                                   atol=3e-6)
    eye = np.broadcast_to(np.eye(k), s.shape + (k,))
    np.testing.assert_allclose(np.abs(_adjoint(u) @ u_ref), eye, atol=1e-4)  # the reference's vectors, up to phase


@pytest.mark.parametrize("shape,dtype", [((4, 4), np.float32), ((2, 5, 5), np.complex64), ((2, 2), np.float32),
                                         ((1, 1), np.float32)], ids=str)
def test_hessenberg_as_lapacks_gehrd(shape, dtype):
    x = _matrices(shape, dtype, 10)
    got, want = on_plugin(lambda a: lax.linalg.hessenberg(a), x)
    assert_matches(got, want, 1e-5)  # the packed form and the taus, as LAPACK's reflectors


@pytest.mark.parametrize("shape,dtype", [((4, 4), np.float32), ((2, 5, 3), np.complex64), ((3, 6), np.float32)],
                         ids=str)
def test_geqp3_and_qr_with_pivoting(shape, dtype):
    x = _matrices(shape, dtype, 11)
    got, want = on_plugin(lambda a: (*lax.linalg.geqp3(a), *lax.linalg.qr(a, pivoting=True, full_matrices=False)), x)
    assert_matches(got, want, 1e-5)  # LAPACK's column order and reflectors
    # Ties (rank 1, two columns of equal norm): the first pivot is defined (the first column of the
    # largest norm); after it the trailing columns are zero up to rounding, and which of them comes
    # next is the processor's rounding, not a rule. What is defined: A P = Q R, |diag R| does not
    # increase, and the first pivot.
    ties = np.array([[1, 2, 2], [1, 2, 2], [1, 2, 2]], np.float32)
    got, want = on_plugin(lambda a: (*lax.linalg.geqp3(a), lax.linalg.householder_product(*_packed(a))), ties)
    for a, pivots, _, q in (got, want):
        r = np.triu(a)
        np.testing.assert_allclose(q @ r, ties[:, pivots], atol=1e-5)
        assert pivots[0] == 1 and sorted(pivots) == [0, 1, 2]
        diagonal = np.abs(np.diagonal(r))
        assert np.all(diagonal[1:] <= diagonal[:-1] + 1e-5)


def _packed(a):
    """geqp3's reflectors and their scales (what ``householder_product`` takes)."""
    packed, _, taus = lax.linalg.geqp3(a)
    return packed, taus


def _matched(w, w_ref):
    """The positions of ``w_ref``'s eigenvalues in ``w`` (the iteration's order is not LAPACK's)."""
    order: list[int] = []
    for v in w_ref:  # (the nearest not taken yet: repeated eigenvalues each get one)
        distance = np.abs(w - v)
        distance[order] = np.inf
        order.append(int(np.argmin(distance)))
    return order


def test_eig_values_and_both_eigenvector_sets():
    x = _matrices((6, 5, 5), np.float32, 12)
    x[2, 1, 3] = np.nan  # (a matrix with NaN: all NaN, as JAX)
    x[3] = np.roll(np.eye(5), 1, axis=1)  # (hard cases: the cyclic shift, a nilpotent one, a huge scale)
    x[4] = np.eye(5, k=-1)
    x[5] *= 1e20
    got, want = on_plugin(lambda a: lax.linalg.eig(a), x)
    (w, vl, vr), (w_ref, vl_ref, vr_ref) = got, want
    assert w.dtype == vl.dtype == vr.dtype == np.complex64 and vr.shape == x.shape
    assert np.isnan(w[2]).all() and np.isnan(vr[2]).all() and np.isnan(vl[2]).all()
    for b in range(2):  # (real eigenvalues exactly real, with real vectors; the others in exact conjugate pairs)
        real = w[b].imag == 0
        assert real.any() and np.all(vr[b][:, real].imag == 0) and np.all(vl[b][:, real].imag == 0)
        np.testing.assert_array_equal(np.sort_complex(w[b][~real]), np.sort_complex(np.conj(w[b][~real])))
    for b in range(2):
        order = _matched(w[b], w_ref[b])
        np.testing.assert_allclose(w[b][order], w_ref[b], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(x[b] @ vr[b], vr[b] * w[b], atol=1e-5)
        np.testing.assert_allclose(_adjoint(vl[b]) @ x[b], w[b][:, None] * _adjoint(vl[b]), atol=1e-5)
        for v, v_ref in ((vr[b][:, order], vr_ref[b]), (vl[b][:, order], vl_ref[b])):
            np.testing.assert_allclose(np.linalg.norm(v, axis=0), 1, rtol=1e-6)
            largest = np.argmax(np.abs(v), axis=0)  # made real and positive, as LAPACK's geev
            assert np.all(v[largest, range(5)].real > 0) and np.all(v[largest, range(5)].imag == 0)
            np.testing.assert_allclose(np.abs(np.sum(np.conj(v) * v_ref, axis=0)), 1, atol=1e-5)  # (up to sign)
    for b in range(3, 6):  # (float32 LAPACK loses the huge one: float64 NumPy is the oracle)
        exact = np.linalg.eigvals(x[b].astype(np.float64))
        scale = np.abs(x[b]).max()
        np.testing.assert_allclose(w[b][_matched(w[b], exact)], exact, atol=2e-6 * scale)
        np.testing.assert_allclose(x[b] @ vr[b], vr[b] * w[b], atol=2e-6 * scale)
        np.testing.assert_allclose(np.linalg.norm(vr[b], axis=0), 1, rtol=1e-6)


def test_complex_schur_and_eig_in_float64(x64):
    x = _matrices((2, 4, 4), np.complex128, 14)
    got, want = on_plugin(lambda a: (*lax.linalg.schur(a), *lax.linalg.eig(a, compute_left_eigenvectors=False)), x)
    (t, z, w, vr), (t_ref, _, w_ref, _) = got, want
    assert t.dtype == z.dtype == w.dtype == vr.dtype == np.complex128
    np.testing.assert_allclose(z @ t @ _adjoint(z), x, atol=1e-13)
    np.testing.assert_allclose(_adjoint(z) @ z, np.broadcast_to(np.eye(4), x.shape), atol=1e-14)
    assert np.all(np.tril(t, -1) == 0)
    np.testing.assert_allclose(x @ vr, vr * w[:, None, :], atol=1e-13)
    for b in range(2):
        diagonal, diagonal_ref = np.diagonal(t[b]), np.diagonal(t_ref[b])
        np.testing.assert_allclose(diagonal[_matched(diagonal, diagonal_ref)], diagonal_ref, atol=1e-13)
        np.testing.assert_allclose(w[b][_matched(w[b], w_ref[b])], w_ref[b], atol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
def test_real_schur_is_quasi_triangular_in_standard_form(dtype, x64):
    n = 6
    q = np.linalg.qr(_matrices((n, n), np.float64, 17))[0]
    clusters = q @ np.diag([1.0, 1, 1, 2, 2, 3]) @ q.T  # (repeated eigenvalues: the shifts' polynomial is singular)
    x = np.concatenate([_matrices((3, n, n), dtype, 15), [np.roll(np.eye(n), 1, axis=1), np.eye(n, k=-1),
                                                          np.eye(n) * 2 + np.eye(n, k=1), clusters]]).astype(dtype)
    x[1] *= 1e20 if dtype == np.float32 else 1e200
    (t, z), _ = on_plugin(lambda a: lax.linalg.schur(a), x)
    assert t.dtype == z.dtype == dtype
    tol = 2e-6 if dtype == np.float32 else 1e-14
    for b in range(len(x)):
        scale = np.abs(x[b]).max()
        np.testing.assert_allclose(z[b] @ t[b] @ z[b].T, x[b], atol=tol * scale)
        np.testing.assert_allclose(z[b].T @ z[b], np.eye(n), atol=tol)
        assert np.all(np.tril(t[b], -2) == 0)
        sub = np.diagonal(t[b], -1)
        assert not np.any((sub[:-1] != 0) & (sub[1:] != 0))  # (blocks of at most 2 x 2)
        for i in np.flatnonzero(sub):  # each 2 x 2 block holds a complex pair, in LAPACK's standard form
            assert t[b, i, i] == t[b, i + 1, i + 1] and np.sign(t[b, i, i + 1]) * np.sign(t[b, i + 1, i]) < 0
        values = np.linalg.eigvals(t[b].astype(np.float64))
        exact = np.linalg.eigvals(x[b].astype(np.float64))
        np.testing.assert_allclose(values[_matched(values, exact)], exact, atol=tol * scale * 2)


def test_svd_and_eigh_of_huge_and_tiny_matrices():
    x = _matrices((2, 4, 3), np.float32, 16) * np.array([1e20, 1e-25], np.float32)[:, None, None]
    sym = (x[:, :3] + np.swapaxes(x[:, :3], -1, -2)) / 2  # (squares of these overflow, or underflow, in float32)
    (u, s, vh, w), _ = on_plugin(lambda a, h: (*jnp.linalg.svd(a, full_matrices=False), jnp.linalg.eigvalsh(h)),
                                 x, sym)
    for b in range(2):
        np.testing.assert_allclose(s[b], np.linalg.svd(x[b].astype(np.float64), compute_uv=False), rtol=1e-5)
        np.testing.assert_allclose(w[b], np.linalg.eigvalsh(sym[b].astype(np.float64)), rtol=1e-5,
                                   atol=1e-6 * np.abs(sym[b]).max())
        np.testing.assert_allclose((u[b] * s[b]) @ vh[b], x[b], rtol=1e-4, atol=1e-5 * np.abs(x[b]).max())


def test_svd_of_a_rank_deficient_matrix_keeps_u_orthonormal():
    x = np.random.default_rng(9).standard_normal((6, 2)).astype(np.float32)
    x = np.concatenate([x, 2 * x[:, :1]], axis=1)
    got, want = on_plugin(lambda a: jnp.linalg.svd(a, full_matrices=False), x)
    (u, s, vh), (_, s_ref, _) = got, want
    np.testing.assert_allclose(s, s_ref, atol=1e-5)
    np.testing.assert_allclose(u.T @ u, np.eye(3), atol=3e-6)  # (the zero singular value's column completed)
    np.testing.assert_allclose((u * s) @ vh, x, atol=3e-5)


# --- the incomplete gamma and beta functions ----------------------------------------------------------------------
def _gamma_beta_arguments(dtype):
    rng = np.random.default_rng(8)
    a = np.concatenate([rng.uniform(0.05, 30, 10), [0.0, 1.0, np.inf, -1.0, np.nan, 2.0, 500.0]]).astype(dtype)
    x = np.concatenate([rng.uniform(0, 40, 10), [2.0, 0.0, 3.0, 1.0, 1.0, np.inf, 480.0]]).astype(dtype)
    u = np.concatenate([rng.uniform(0, 1, 10), [0.0, 1.0, 0.5, 0.3, 0.2, 1.5, 0.999]]).astype(dtype)
    return a, x, u


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
def test_igamma_igammac_and_betainc_loops(dtype, x64):
    from scipy import special as sp

    a, x, u = _gamma_beta_arguments(dtype)
    b = x[::-1].copy()
    fns = {"P": lambda: lax.igamma(a, x), "I": lambda: lax.betainc(a, b, u)}
    if dtype == np.float32:  # (XLA takes about a second to compile each function's loops: float64 runs two)
        fns.update(Q=lambda: lax.igammac(a, x), dP=lambda: ember.grad(lambda x: lax.igamma(a, x).sum())(x))
    got, want = on_plugin(lambda a, x, b, u: [fn() for fn in fns.values()], a, x, b, u)
    assert_matches(got, want, 1e-12 if dtype == np.float64 else 1e-6)  # the reference's program, run by XLA
    got = dict(zip(fns, got))
    tol = 1e-11 if dtype == np.float64 else 2e-3 if ON_TPU else 5e-5
    with np.errstate(all="ignore"):
        interior = np.isfinite(a) & (a > 0) & np.isfinite(x) & (x > 0)
        np.testing.assert_allclose(got["P"][interior], sp.gammainc(a, x)[interior], rtol=tol, atol=tol)
        if "Q" in got:
            np.testing.assert_allclose(got["Q"][interior], sp.gammaincc(a, x)[interior], rtol=tol, atol=tol)
        inside = np.isfinite(a) & (a > 0) & np.isfinite(b) & (b > 0) & (u >= 0) & (u <= 1)
        np.testing.assert_allclose(got["I"][inside], sp.betainc(a, b, u)[inside], rtol=tol, atol=tol)
