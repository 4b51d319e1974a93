"""``jax.ops``, ``jax.image``, ``jax.dlpack``, ``jax.custom_batching`` and the top-level
``closure_convert``, ``linear_transpose`` and ``custom_gradient``, against real JAX in this
process: values, gradients (against ``jax.grad``), ``vmap`` and ``jit``. Ember's side is called
through ``ember`` and ``ember.compat.jax`` directly (the switch, ``install_as_jax``, is never
turned on here: real JAX is the oracle)."""
from __future__ import annotations

import functools
import inspect

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ember
import ember.numpy as ejnp
from ember.compat import jax as compat
from ember.compat.jax import custom_batching, dlpack, image, ops

jax = pytest.importorskip("jax")
jnp = jax.numpy
import jax.custom_batching  # noqa: E402
import jax.dlpack  # noqa: E402
import jax.image  # noqa: E402
import jax.ops  # noqa: E402

SEGMENT_OPS = ["segment_sum", "segment_prod", "segment_max", "segment_min"]


def close(got, want, rtol=1e-5, atol=1e-5):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def trees_close(got, want, **kw):
    got_leaves, got_tree = ember.tree_util.tree_flatten(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    assert len(got_leaves) == len(want_leaves), (got_tree, want_tree)
    for g, w in zip(got_leaves, want_leaves):
        close(g, w, **kw)


# --- the modules have JAX's names and signatures --------------------------------------------------------
@pytest.mark.parametrize("name", ["ops", "image", "dlpack", "custom_batching"])
def test_modules_have_jaxs_public_names_and_signatures(name):
    ours, theirs = getattr(compat, name), getattr(jax, name)
    public = [n for n in dir(theirs) if not n.startswith("_")]
    assert public and all(hasattr(ours, n) for n in public), [n for n in public if not hasattr(ours, n)]
    for n in public:
        if inspect.isfunction(getattr(theirs, n)):
            want = list(inspect.signature(getattr(theirs, n)).parameters)
            assert list(inspect.signature(getattr(ours, n)).parameters) == want, n


@pytest.mark.parametrize("name", ["closure_convert", "linear_transpose", "custom_gradient"])
def test_top_level_functions_are_embers_and_leave_missing(name):
    assert name in compat.FROM_EMBER and name not in compat.MISSING
    assert getattr(compat, name) is getattr(ember, name)
    want = list(inspect.signature(getattr(jax, name)).parameters)
    assert list(inspect.signature(getattr(ember, name)).parameters) == want
    for module in ("ops", "image", "dlpack", "custom_batching"):
        assert module not in compat.MISSING and module in dir(compat)


# --- jax.ops ------------------------------------------------------------------------------------------
DATA = np.random.default_rng(0).standard_normal((9, 3)).astype(np.float32)
IDS = np.array([0, 2, 2, -1, 5, 1, 0, 3, 2], np.int32)  # (-1 and 5 fall outside 4 segments: dropped)


@pytest.mark.parametrize("op", SEGMENT_OPS)
@pytest.mark.parametrize("kwargs", [
    dict(num_segments=4), dict(), dict(num_segments=7), dict(num_segments=4, bucket_size=2),
    dict(num_segments=4, bucket_size=4), dict(num_segments=4, mode="clip"), dict(num_segments=4, mode="drop"),
    dict(num_segments=0),
])
def test_segment_ops_match_jax(op, kwargs):
    close(getattr(ops, op)(DATA, IDS, **kwargs), getattr(jax.ops, op)(DATA, IDS, **kwargs))


@pytest.mark.parametrize("op", SEGMENT_OPS)
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.bool_, np.float16])
def test_segment_ops_keep_the_dtype_and_fill_empty_segments_with_the_identity(op, dtype):
    data = (np.arange(12).reshape(6, 2) % 3).astype(dtype)
    ids = np.array([0, 0, 1, 3, 3, 3])  # (segment 2 is empty)
    if op == "segment_sum" and dtype == np.bool_ or op == "segment_prod" and dtype == np.bool_:
        with pytest.raises(TypeError):
            getattr(jax.ops, op)(data, ids, 4)
        with pytest.raises(TypeError):
            getattr(ops, op)(data, ids, 4)
        return
    close(getattr(ops, op)(data, ids, 4), getattr(jax.ops, op)(data, ids, 4), rtol=1e-3)


def test_segment_sum_sorted_and_unique_hints_do_not_change_correct_answers():
    ids = np.array([0, 1, 2, 4])
    data = np.arange(4.0, dtype=np.float32)
    for kw in (dict(indices_are_sorted=True), dict(unique_indices=True), dict(indices_are_sorted=True,
                                                                              unique_indices=True)):
        close(ops.segment_sum(data, ids, 5, **kw), jax.ops.segment_sum(data, ids, 5, **kw))


@pytest.mark.parametrize("op", ["segment_sum", "segment_max", "segment_min"])
def test_segment_gradients_match_jax(op):
    data = DATA.copy()
    data[4, 1] = data[6, 1]  # (a tie: max / min share the gradient as JAX does)
    weights = np.arange(12.0, dtype=np.float32).reshape(4, 3)

    def loss(lib_ops, d):
        return (getattr(lib_ops, op)(d, IDS, 4) * weights).sum()

    close(ember.grad(functools.partial(loss, ops))(data), jax.grad(functools.partial(loss, jax.ops))(data))
    close(ember.jit(ember.grad(functools.partial(loss, ops)))(data),
          jax.grad(functools.partial(loss, jax.ops))(data))


def test_segment_prod_gradient_needs_unique_indices_as_in_jax():
    ids = np.array([0, 2, 1, 3])
    data = np.array([[1.5, -2.0], [0.5, 3.0], [2.0, 2.0], [-1.0, 4.0]], np.float32)

    def loss(lib_ops, d, **kw):
        return lib_ops.segment_prod(d, ids, 4, **kw).sum()

    close(ember.grad(lambda d: loss(ops, d, unique_indices=True))(data),
          jax.grad(lambda d: loss(jax.ops, d, unique_indices=True))(data))
    with pytest.raises(NotImplementedError):
        jax.grad(lambda d: loss(jax.ops, d))(data)
    with pytest.raises(NotImplementedError):
        ember.grad(lambda d: loss(ops, d))(data)


@pytest.mark.parametrize("op", SEGMENT_OPS)
def test_segment_ops_jvp_matches_jax(op):
    tangent = np.ones_like(DATA)
    got = ember.jvp(lambda d: getattr(ops, op)(d, IDS, 4, unique_indices=op == "segment_prod"), (DATA,),
                    (tangent,))
    want = jax.jvp(lambda d: getattr(jax.ops, op)(d, IDS, 4, unique_indices=op == "segment_prod"), (DATA,),
                   (tangent,))
    if op == "segment_prod":  # (the ids are not unique: only the values are defined, as in JAX)
        close(got[0], want[0])
        return
    trees_close(got, want)


@pytest.mark.parametrize("op", SEGMENT_OPS)
def test_segment_ops_vmap_over_data_and_ids(op):
    rng = np.random.default_rng(1)
    data = rng.standard_normal((3, 9, 2)).astype(np.float32)
    ids = rng.integers(-1, 5, (3, 9)).astype(np.int32)
    close(ember.vmap(lambda d: getattr(ops, op)(d, IDS, 4))(data),
          jax.vmap(lambda d: getattr(jax.ops, op)(d, IDS, 4))(data))
    close(ember.vmap(lambda d, i: getattr(ops, op)(d, i, 4))(data, ids),
          jax.vmap(lambda d, i: getattr(jax.ops, op)(d, i, 4))(data, ids))
    close(ember.vmap(lambda i: getattr(ops, op)(DATA, i, 4))(ids[:, :9]),
          jax.vmap(lambda i: getattr(jax.ops, op)(DATA, i, 4))(ids[:, :9]))


def test_segment_sum_under_jit_needs_a_static_num_segments():
    data, ids = np.arange(5), np.array([0, 0, 1, 1, 2])
    close(ember.jit(ops.segment_sum, static_argnums=2)(data, ids, 3),
          jax.jit(jax.ops.segment_sum, static_argnums=2)(data, ids, 3))
    close(ember.jit(lambda d, i: ops.segment_max(d, i, num_segments=3, bucket_size=2))(DATA[:5], ids),
          jax.jit(lambda d, i: jax.ops.segment_max(d, i, num_segments=3, bucket_size=2))(DATA[:5], ids))
    with pytest.raises(ember.errors.ConcretizationTypeError):
        ember.jit(ops.segment_sum)(data, ids)
    with pytest.raises(ValueError, match="non-negative"):
        ops.segment_sum(data, ids, -1)


@given(st.integers(1, 12), st.integers(0, 6), st.integers(0, 2), st.sampled_from(SEGMENT_OPS),
       st.one_of(st.none(), st.integers(1, 5)), st.integers(0, 2 ** 31 - 1))
def test_segment_ops_match_jax_on_random_inputs(n, num_segments, trailing, op, bucket_size, seed):
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((n,) + (2,) * trailing).astype(np.float32)
    ids = rng.integers(-1, num_segments + 2, n).astype(np.int32)
    kw = dict(num_segments=num_segments, bucket_size=bucket_size)
    close(getattr(ops, op)(data, ids, **kw), getattr(jax.ops, op)(data, ids, **kw), rtol=1e-4)


# --- jax.image ----------------------------------------------------------------------------------------
ALIASES = {"bilinear": "linear", "trilinear": "linear", "triangle": "linear", "bicubic": "cubic", "tricubic": "cubic"}
METHODS = ["nearest", "linear", "cubic", "lanczos3", "lanczos5", "cubic-pytorch", "area"]  # (one name of each)
IMAGE = np.random.default_rng(2).standard_normal((2, 7, 5, 3)).astype(np.float32)


@pytest.mark.parametrize("alias", ALIASES)
def test_resize_method_aliases_are_their_method(alias):
    assert jax.image.ResizeMethod.from_string(alias) == jax.image.ResizeMethod.from_string(ALIASES[alias])
    assert image.ResizeMethod.from_string(alias) == image.ResizeMethod.from_string(ALIASES[alias])
    for antialias in (True, False):
        got = image.resize(IMAGE, (2, 14, 3, 3), alias, antialias=antialias)
        want = image.resize(IMAGE, (2, 14, 3, 3), ALIASES[alias], antialias=antialias)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


RESIZES = [(method, shape, antialias) for method in METHODS
           for shape in [(2, 14, 3, 3), (2, 3, 11, 3), (2, 7, 5, 3), (2, 1, 20, 3), (4, 7, 2, 1)]
           for antialias in (True, False)]


@pytest.fixture(scope="module")
def jax_resizes():
    """JAX's results of every ``RESIZES`` case, computed by one jitted program (70 programs
    compiled one by one took three times as long)."""
    outs = jax.jit(lambda x: [jax.image.resize(x, s, m, antialias=a) for m, s, a in RESIZES])(IMAGE)
    return dict(zip(RESIZES, outs))


@pytest.mark.parametrize("case", RESIZES, ids=str)
def test_resize_matches_jax(case, jax_resizes):
    method, shape, antialias = case
    close(image.resize(IMAGE, shape, method, antialias=antialias), jax_resizes[case], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("method", ["nearest", "linear", "cubic", "lanczos3"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float16, np.bool_])
def test_resize_dtypes_match_jax(method, dtype):
    if dtype == np.bool_ and method != "nearest":
        pytest.skip("(JAX resizes booleans as floats too; the values are the same, covered by uint8)")
    x = (np.random.default_rng(3).integers(0, 200, (6, 5)) % (2 if dtype == np.bool_ else 200)).astype(dtype)
    close(image.resize(x, (9, 3), method), jax.image.resize(x, (9, 3), method), rtol=2e-3, atol=1e-2)


def test_resize_method_enum_matches_jax():
    assert [(m.name, m.value) for m in image.ResizeMethod] == [(m.name, m.value) for m in jax.image.ResizeMethod]
    for name in METHODS + list(ALIASES):
        assert image.ResizeMethod.from_string(name).name == jax.image.ResizeMethod.from_string(name).name
    close(image.resize(IMAGE, (2, 4, 9, 3), image.ResizeMethod.LANCZOS3),
          jax.image.resize(IMAGE, (2, 4, 9, 3), jax.image.ResizeMethod.LANCZOS3), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="Unknown resize method"):
        image.resize(IMAGE, (2, 4, 9, 3), "bogus")
    with pytest.raises(ValueError, match="shape must have length"):
        image.resize(IMAGE, (4, 9), "linear")


WARPS = [([1.3, 0.6], [0.5, -0.2], (1, 2), (2, 9, 4, 3)), ([2.0], [0.0], (1,), (2, 14, 5, 3)),
         ([0.45], [1.25], (-2,), (2, 7, 3, 3))]
WARP_METHODS = ["linear", "cubic", "lanczos5", "cubic-pytorch", "area"]


def _warp_args(warp, method):
    scale, translation, dims, shape = warp
    return shape, dims, np.array(scale, np.float32), np.array(translation, np.float32), method


@pytest.fixture(scope="module")
def jax_warps():
    """JAX's ``scale_and_translate`` of every method, antialias and ``WARPS`` case, computed by one
    jitted program (the warps' scales and translations are its constants)."""
    cases = [(m, a, i) for m in WARP_METHODS for a in (True, False) for i in range(len(WARPS))]
    outs = jax.jit(lambda x: [jax.image.scale_and_translate(x, *_warp_args(WARPS[i], m), antialias=a)
                              for m, a, i in cases])(IMAGE)
    return dict(zip(cases, outs))


@pytest.mark.parametrize("method", WARP_METHODS)
@pytest.mark.parametrize("antialias", [True, False])
def test_scale_and_translate_matches_jax(method, antialias, jax_warps):
    for i, warp in enumerate(WARPS):
        close(image.scale_and_translate(IMAGE, *_warp_args(warp, method), antialias=antialias),
              jax_warps[method, antialias, i], rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="Nearest neighbor"):
        image.scale_and_translate(IMAGE, IMAGE.shape, (1,), np.ones(1), np.zeros(1), "nearest")


@pytest.mark.parametrize("method", ["linear", "cubic", "lanczos3"])
def test_resize_gradients_match_jax(method):
    weights = np.random.default_rng(4).standard_normal((2, 4, 9, 3)).astype(np.float32)

    def loss(lib_image, x):
        return (lib_image.resize(x, (2, 4, 9, 3), method) * weights).sum()

    close(ember.grad(functools.partial(loss, image))(IMAGE), jax.grad(functools.partial(loss, jax.image))(IMAGE),
          rtol=1e-4, atol=1e-5)


def test_scale_and_translate_gradients_with_respect_to_the_warp_match_jax():
    def loss(lib_image, x, scale, translation):
        return (lib_image.scale_and_translate(x, (2, 9, 4, 3), (1, 2), scale, translation, "cubic") ** 2).sum()

    warp = (np.array([1.3, 0.7], np.float32), np.array([0.4, -0.3], np.float32))
    trees_close(ember.grad(functools.partial(loss, image), argnums=(0, 1, 2))(IMAGE, *warp),
                jax.grad(functools.partial(loss, jax.image), argnums=(0, 1, 2))(IMAGE, *warp), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("method", ["nearest", "linear", "lanczos3"])
def test_resize_under_vmap_and_jit_matches_jax(method):
    close(ember.vmap(lambda x: image.resize(x, (3, 8, 2), method))(IMAGE),
          jax.vmap(lambda x: jax.image.resize(x, (3, 8, 2), method))(IMAGE), rtol=1e-4, atol=1e-5)
    close(ember.jit(lambda x: image.resize(x, (2, 3, 8, 3), method))(IMAGE),
          jax.image.resize(IMAGE, (2, 3, 8, 3), method), rtol=1e-4, atol=1e-5)
    scales = np.array([[1.5], [0.8]], np.float32)  # (the warp batched: traced scales)
    close(ember.jit(ember.vmap(lambda s: image.scale_and_translate(IMAGE[0], (9, 5, 3), (0,), s, np.zeros(1),
                                                                   "linear")))(scales),
          jax.vmap(lambda s: jax.image.scale_and_translate(IMAGE[0], (9, 5, 3), (0,), s, np.zeros(1),
                                                           "linear"))(scales), rtol=1e-4, atol=1e-5)


@given(st.lists(st.integers(1, 7), min_size=1, max_size=3), st.lists(st.integers(1, 9), min_size=3, max_size=3),
       st.sampled_from(METHODS), st.booleans(), st.integers(0, 2 ** 31 - 1))
def test_resize_matches_jax_on_random_shapes(in_shape, out_sizes, method, antialias, seed):
    x = np.random.default_rng(seed).standard_normal(in_shape).astype(np.float32)
    shape = tuple(out_sizes[:len(in_shape)])
    close(image.resize(x, shape, method, antialias=antialias), jax.image.resize(x, shape, method,
                                                                                antialias=antialias),
          rtol=1e-4, atol=1e-5)


# --- jax.dlpack ---------------------------------------------------------------------------------------
def test_from_dlpack_takes_numpy_and_jax_buffers():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = dlpack.from_dlpack(x)
    assert isinstance(got, ember.Array)
    close(got, jax.dlpack.from_dlpack(x))
    close(dlpack.from_dlpack(jnp.asarray(x)), x)
    assert np.asarray(dlpack.from_dlpack(np.arange(3, dtype=np.complex64))).dtype == np.complex64
    shared = dlpack.from_dlpack(x, copy=False)
    close(shared, x)
    close(dlpack.from_dlpack(x, device=ember.devices()[0]), x)
    back = np.from_dlpack(got)  # (the other way: ember arrays have __dlpack__)
    close(back, x)


def test_is_supported_dtype_matches_jax():
    for dtype in [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.float16,
                  np.float32, np.float64, np.complex64, np.complex128, np.bool_, jnp.bfloat16, "float32",
                  jnp.float8_e4m3fn, jnp.int4, np.str_, np.object_]:
        assert dlpack.is_supported_dtype(dtype) == jax.dlpack.is_supported_dtype(dtype), dtype
    for lib in (dlpack, jax.dlpack):
        with pytest.raises(TypeError):
            lib.is_supported_dtype(None)


# --- linear_transpose -----------------------------------------------------------------------------------
MATRIX = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)


@pytest.mark.parametrize("case", ["scalar", "matmul", "pytree", "constant-work", "complex", "slice"])
def test_linear_transpose_matches_jax(case):
    if case == "scalar":
        f = lambda lib, x, y: 0.5 * x - 0.5 * y  # noqa: E731
        primals = (np.float32(1), np.float32(2))
        ct = np.float32(1.0)
    elif case == "matmul":
        f = lambda lib, x: lib.numpy.dot(MATRIX, x)  # noqa: E731
        primals = (np.ones(4, np.float32),)
        ct = np.arange(3.0, dtype=np.float32)
    elif case == "pytree":
        f = lambda lib, p: {"s": p["a"].sum() * 2.0, "t": (p["a"][:2] + p["b"], -p["b"])}  # noqa: E731
        primals = ({"a": np.ones(3, np.float32), "b": np.ones(2, np.float32)},)
        ct = {"s": np.float32(3), "t": (np.array([1, 2], np.float32), np.array([4, 5], np.float32))}
    elif case == "constant-work":  # (non-linear work on constants, then linear in x)
        f = lambda lib, x: lib.numpy.exp(lib.numpy.arange(4.0)) * x  # noqa: E731
        primals = (np.ones(4, np.float32),)
        ct = np.ones(4, np.float32)
    elif case == "complex":
        f = lambda lib, x: (1 + 2j) * x  # noqa: E731
        primals = (np.ones(2, np.complex64),)
        ct = np.array([1 + 1j, 2 - 1j], np.complex64)
    else:
        f = lambda lib, x: x[1:3] * 3.0  # noqa: E731
        primals = (np.ones(5, np.float32),)
        ct = np.array([1.0, 2.0], np.float32)
    ours = ember.linear_transpose(functools.partial(f, ember), *primals)
    theirs = jax.linear_transpose(functools.partial(f, jax), *primals)
    trees_close(ours(ct), theirs(ct))
    trees_close(ember.jit(ours)(ct), theirs(ct))


def test_linear_transpose_takes_shape_dtype_structs_and_checks_like_jax():
    scalar = ember.ShapeDtypeStruct((), np.float32)
    f_t = ember.linear_transpose(lambda x, y: 0.5 * x - 0.5 * y, scalar, scalar)
    out = f_t(1.0)
    assert isinstance(out, tuple) and len(out) == 2
    trees_close(out, jax.linear_transpose(lambda x, y: 0.5 * x - 0.5 * y, jax.ShapeDtypeStruct((), np.float32),
                                          jax.ShapeDtypeStruct((), np.float32))(1.0))
    with pytest.raises(TypeError, match="linear_transpose only supports"):
        ember.linear_transpose(lambda x: x.astype(np.float32), np.ones(2, np.int32))
    with pytest.raises(TypeError, match="cotangent tree does not match"):
        f_t((1.0, 2.0))
    with pytest.raises(TypeError, match="cotangent type does not match"):
        f_t(np.ones(3, np.float32))
    with pytest.raises(NotImplementedError):
        ember.linear_transpose(lambda x: x, scalar, reduce_axes=("i",))


def test_linear_transpose_under_vmap_matches_jax():
    cts = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    ours = ember.linear_transpose(lambda x: ejnp.dot(MATRIX, x), np.ones(4, np.float32))
    theirs = jax.linear_transpose(lambda x: jnp.dot(MATRIX, x), np.ones(4, np.float32))
    trees_close(ember.vmap(ours)(cts), jax.vmap(theirs)(cts))


# --- custom_gradient ------------------------------------------------------------------------------------
def test_custom_gradient_matches_jax():
    def make(lib):
        @lib.custom_gradient
        def f(x):
            return x ** 2, lambda g: (g * x,)  # (not the true derivative, 2x: the rule wins)

        @lib.custom_gradient
        def h(x, y):
            return x * y, lambda g: (g * y, g * x * 10.0)

        return f, h

    (f, h), (jf, jh) = make(ember), make(jax)
    close(f(3.0), jf(3.0))
    close(ember.grad(f)(3.0), jax.grad(jf)(3.0))
    close(ember.jit(ember.grad(f))(3.0), jax.grad(jf)(3.0))
    xs = np.arange(4.0, dtype=np.float32)
    close(ember.vmap(ember.grad(f))(xs), jax.vmap(jax.grad(jf))(xs))
    trees_close(ember.grad(h, argnums=(0, 1))(3.0, 4.0), jax.grad(jh, argnums=(0, 1))(3.0, 4.0))
    trees_close(ember.grad(lambda x: h(ejnp.sin(x), x))(0.5), jax.grad(lambda x: jh(jnp.sin(x), x))(0.5))


def test_custom_gradient_with_pytrees_matches_jax():
    def make(lib, as_tuple=True):
        @lib.custom_gradient
        def f(p):
            out = {"u": lib.numpy.sin(p["a"]) * p["b"], "v": p["a"] * 3.0}
            rule = lambda g: {"a": g["u"] + g["v"], "b": -g["u"]}  # noqa: E731
            return out, ((lambda g: (rule(g),)) if as_tuple else rule)

        return f

    f, jf = make(ember), make(jax)
    p = {"a": np.array([0.5, 1.0], np.float32), "b": np.array([2.0, -1.0], np.float32)}
    trees_close(f(p), jf(p))

    def loss(fun, lib, p):
        out = fun(p)
        return (out["u"] * lib.numpy.array([1.0, 2.0]) + out["v"]).sum()

    trees_close(ember.grad(functools.partial(loss, f, ember))(p), jax.grad(functools.partial(loss, jf, jax))(p))
    for lib in (ember, jax):  # (a rule must return a tuple, one cotangent per argument, unless it is a leaf)
        with pytest.raises(TypeError):
            lib.grad(functools.partial(loss, make(lib, as_tuple=False), lib))(p)


# --- closure_convert -------------------------------------------------------------------------------------
def _minimizer(lib):
    """JAX's closure_convert example: a custom_vjp solver whose objective closes over parameters."""
    def solve(objective, x0, *args):
        x = x0
        for _ in range(40):
            x = x - 0.1 * lib.grad(objective)(x, *args)
        return x

    @functools.partial(lib.custom_vjp, nondiff_argnums=(0,))
    def _minimize(objective, x0, *args):
        return solve(objective, x0, *args)

    def fwd(objective, x0, *args):
        x = _minimize(objective, x0, *args)
        return x, (x, args)

    def bwd(objective, res, g):
        x, args = res
        hess = lib.grad(lib.grad(objective))(x, *args)
        _, pull = lib.vjp(lambda *a: lib.grad(objective)(x, *a), *args)
        return (lib.numpy.zeros_like(x), *[-c for c in pull(g / hess)])

    _minimize.defvjp(fwd, bwd)

    def minimize(objective, x0):
        converted, hoisted = lib.closure_convert(objective, x0)
        return _minimize(converted, x0, *hoisted)

    return minimize


def test_closure_convert_hoists_what_differentiation_reaches_as_jax_does():
    minimize, jminimize = _minimizer(ember), _minimizer(jax)

    def outer(lib, minimize, c):
        return minimize(lambda x: (x - c) ** 2 + lib.numpy.sin(x) * 0.1, 0.0)  # argmin moves with c

    close(outer(ember, minimize, 1.5), outer(jax, jminimize, 1.5), rtol=1e-4)
    close(ember.grad(functools.partial(outer, ember, minimize))(1.5),
          jax.grad(functools.partial(outer, jax, jminimize))(1.5), rtol=1e-4)
    close(ember.jit(ember.grad(functools.partial(outer, ember, minimize)))(1.5),
          jax.grad(functools.partial(outer, jax, jminimize))(1.5), rtol=1e-4)


def test_closure_convert_hoists_only_perturbed_values():
    for lib, numpy in ((ember, ejnp), (jax, jnp)):
        concrete = numpy.arange(3.0)
        converted, hoisted = lib.closure_convert(lambda x: x * concrete, np.ones(3, np.float32))
        assert hoisted == []
        close(converted(np.ones(3, np.float32)), np.arange(3.0, dtype=np.float32))
    counts = []
    for lib in (ember, jax):
        def f(w, lib=lib):
            n = lib.numpy.arange(3)  # (an integer value: never hoisted)
            converted, hoisted = lib.closure_convert(lambda x: x * w + n, np.ones(3, np.float32))
            counts.append(len(hoisted))
            return converted(np.ones(3, np.float32), *hoisted).sum()
        counts.append(float(lib.grad(f)(2.0)))
    assert counts[0] == counts[2] == 1 and counts[1] == counts[3] == 3.0
    converted, hoisted = ember.closure_convert(lambda x: x, (np.ones(2), np.ones(2)))
    with pytest.raises(TypeError, match="same Pytree structure"):
        converted(np.ones(2))


# --- custom_batching --------------------------------------------------------------------------------------
def _batching(lib):
    return custom_batching if lib is ember else jax.custom_batching


def _custom_vmapped(lib, record=None):
    @_batching(lib).custom_vmap
    def f(x, y):
        return lib.numpy.sin(x) + y

    @f.def_vmap
    def rule(axis_size, in_batched, xs, ys):
        if record is not None:
            record.append((axis_size, list(in_batched)))
        return lib.numpy.cos(xs) * 2.0 + ys, any(in_batched)  # (visibly not f batched)

    return f


XS = np.linspace(-1, 1, 5).astype(np.float32)


def test_programs_holding_a_custom_vmap_call_or_its_jvp_have_one_fingerprint():
    """A program refers to the call's rule by identity: each trace (of the call, and of its jvp) must
    give the same rule object, or an eager loop holding it is a new program on every call."""
    from ember.runtime import compile_cache

    f = _custom_vmapped(ember)
    for g in (lambda x: f(x, x), lambda x: ember.jvp(lambda v: f(v, v), (x,), (x,))):
        keys = {compile_cache.fingerprint(ember.make_jaxpr(g)(XS))[0] for _ in range(2)}
        assert len(keys) == 1


@pytest.mark.parametrize("in_axes", [0, (0, None), (None, 0), (1, 0)])
def test_custom_vmap_runs_the_rule_as_jax(in_axes):
    ys = np.arange(5.0, dtype=np.float32)
    args = (XS, ys) if in_axes != (1, 0) else (np.stack([XS, XS], 0), np.stack([ys, ys], 1))
    if in_axes == (None, 0):
        args = (np.float32(0.3), ys)
    if in_axes == (0, None):
        args = (XS, np.float32(0.3))
    got_log, want_log = [], []
    f, jf = _custom_vmapped(ember, got_log), _custom_vmapped(jax, want_log)
    close(ember.vmap(f, in_axes)(*args), jax.vmap(jf, in_axes)(*args))
    close(ember.vmap(ember.jit(f), in_axes)(*args), jax.vmap(jf, in_axes)(*args))
    close(ember.jit(ember.vmap(f, in_axes))(*args), jax.vmap(jf, in_axes)(*args))
    assert got_log[0] == want_log[0]
    close(f(0.5, 1.0), jf(0.5, 1.0))  # (unbatched: the function itself)
    close(ember.jit(f)(0.5, 1.0), jf(0.5, 1.0))


def test_custom_vmap_nested_vmap_matches_jax():
    f, jf = _custom_vmapped(ember), _custom_vmapped(jax)
    xs = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    close(ember.vmap(ember.vmap(f))(xs, xs), jax.vmap(jax.vmap(jf))(xs, xs))
    close(ember.vmap(ember.vmap(f, (0, None)), (None, 0))(xs[0], xs[1]),
          jax.vmap(jax.vmap(jf, (0, None)), (None, 0))(xs[0], xs[1]))


@pytest.mark.parametrize("batched", ["both", "primal", "tangent"])
def test_custom_vmap_forward_mode_and_vmap_of_it_match_jax(batched):
    f, jf = _custom_vmapped(ember), _custom_vmapped(jax)
    trees_close(ember.jvp(f, (0.5, 1.0), (1.0, 0.0)), jax.jvp(jf, (0.5, 1.0), (1.0, 0.0)))
    ts = np.arange(5.0, dtype=np.float32)
    if batched == "both":
        fun = lambda lib, g, x, t: lib.jvp(g, (x, 1.0), (t, 1.0))  # noqa: E731
        args = (XS, ts)
    elif batched == "primal":
        fun = lambda lib, g, x: lib.jvp(g, (x, 1.0), (np.float32(2.0), np.float32(0.0)))  # noqa: E731
        args = (XS,)
    else:
        fun = lambda lib, g, t: lib.jvp(g, (np.float32(0.5), 1.0), (t, np.float32(0.0)))  # noqa: E731
        args = (ts,)
    trees_close(ember.vmap(functools.partial(fun, ember, f))(*args), jax.vmap(functools.partial(fun, jax, jf))(*args))
    trees_close(ember.jit(ember.vmap(functools.partial(fun, ember, f)))(*args),
                jax.vmap(functools.partial(fun, jax, jf))(*args))


def test_custom_vmap_has_no_reverse_mode_as_in_jax_but_custom_vjp_around_it_does():
    f, jf = _custom_vmapped(ember), _custom_vmapped(jax)
    with pytest.raises(ValueError, match="Linearization failed"):
        jax.grad(jf)(0.5, 1.0)
    with pytest.raises(ValueError, match="Linearization failed"):
        ember.grad(f)(0.5, 1.0)

    def make(lib):  # (JAX's documented combination: custom_vjp outside)
        @lib.custom_vjp
        @_batching(lib).custom_vmap
        def g(x, y):
            return lib.numpy.sin(x) * y

        @g.def_vmap
        def g_vmap_rule(axis_size, in_batched, xs, ys):
            return lib.numpy.cos(xs) * ys, True

        def g_fwd(x, y):
            return g(x, y), (lib.numpy.cos(x), lib.numpy.sin(x), y)

        def g_bwd(res, gr):
            cos_x, sin_x, y = res
            return (cos_x * gr * y, sin_x * gr)

        g.defvjp(g_fwd, g_bwd)
        return g

    g, jg = make(ember), make(jax)
    close(ember.vmap(g)(np.zeros(3, np.float32), np.ones(3, np.float32)),
          jax.vmap(jg)(np.zeros(3, np.float32), np.ones(3, np.float32)))
    trees_close(ember.grad(g, argnums=(0, 1))(0.3, 2.0), jax.grad(jg, argnums=(0, 1))(0.3, 2.0))
    close(ember.vmap(ember.grad(g))(XS, XS), jax.vmap(jax.grad(jg))(XS, XS))


def test_custom_vmap_errors_match_jax():
    for lib in (ember, jax):
        f = _batching(lib).custom_vmap(lambda x: x * 2)
        with pytest.raises(AttributeError, match="No batching rule defined"):
            f(1.0)

        @_batching(lib).custom_vmap
        def g(x):
            return (x, x)

        @g.def_vmap
        def bad_rule(axis_size, in_batched, xs):
            return (xs, xs), True  # (a single flag for two outputs)

        with pytest.raises(ValueError, match="structure of output value and output batching specification"):
            lib.vmap(g)(XS)


def test_custom_vmap_with_pytrees_and_keywords_matches_jax():
    def make(lib, module):
        @module.custom_vmap
        def f(p, scale=2.0):
            return {"out": p["a"] * scale + p["b"]}

        @f.def_vmap
        def rule(axis_size, in_batched, p, scale):
            assert set(in_batched[0]) == {"a", "b"}
            out = lib.numpy.multiply(p["a"], scale) - p["b"]  # (JAX hands the rule numpy arrays as they came)
            return {"out": out}, {"out": in_batched[0]["a"] or in_batched[0]["b"]}

        return f

    f, jf = make(ember, custom_batching), make(jax, jax.custom_batching)
    p = {"a": XS, "b": np.float32(1.0)}
    close(ember.vmap(lambda a: f({"a": a, "b": 1.0}, scale=3.0)["out"])(XS),
          jax.vmap(lambda a: jf({"a": a, "b": 1.0}, scale=3.0)["out"])(XS))
    trees_close(f(p), jf(p))


def test_sequential_vmap_matches_jax():
    def make(lib, module):
        calls = []

        @module.sequential_vmap
        def f(x, y):
            calls.append(1)
            return lib.numpy.sum(x) * y + 1.0

        return f

    f, jf = make(ember, custom_batching), make(jax, jax.custom_batching)
    xs = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    close(ember.vmap(f)(xs, np.arange(3.0, dtype=np.float32)), jax.vmap(jf)(xs, np.arange(3.0, dtype=np.float32)))
    close(ember.vmap(f, (0, None))(xs, np.float32(2.0)), jax.vmap(jf, (0, None))(xs, np.float32(2.0)))
    close(ember.vmap(f, (None, 0))(xs[0], np.arange(3.0, dtype=np.float32)),
          jax.vmap(jf, (None, 0))(xs[0], np.arange(3.0, dtype=np.float32)))
    close(ember.jit(ember.vmap(f))(xs, np.ones(3, np.float32)), jax.jit(jax.vmap(jf))(xs, np.ones(3, np.float32)))
    jaxpr = str(ember.make_jaxpr(ember.vmap(f))(xs, np.ones(3, np.float32)))
    assert "scan" in jaxpr  # (a loop over the examples, as JAX's lax.map)


@given(st.integers(1, 6), st.sampled_from([0, 1]), st.integers(0, 2 ** 31 - 1))
def test_custom_vmap_rule_results_match_jax_on_random_batches(size, axis, seed):
    x = np.random.default_rng(seed).standard_normal((size, 3) if axis == 0 else (3, size)).astype(np.float32)
    f, jf = _custom_vmapped(ember), _custom_vmapped(jax)
    close(ember.vmap(f, (axis, None))(x, np.float32(0.5)), jax.vmap(jf, (axis, None))(x, np.float32(0.5)))


# --- small names of jax.errors, jax.stages, jax.tree_util, jax.dtypes, jax.custom_derivatives and jax -----
def test_error_classes_have_jaxs_bases():
    import jax.errors

    for name in ("JAXIndexError", "NonConcreteBooleanIndexError", "KeyReuseError", "JaxprTypeError", "JaxRuntimeError",
                 "InconclusiveDimensionOperation", "ConcretizationTypeError", "TracerBoolConversionError"):
        ours, theirs = getattr(ember.errors, name), getattr(jax.errors, name)
        want = [c.__name__ for c in theirs.__mro__ if not c.__name__.startswith("_")]
        assert [c.__name__ for c in ours.__mro__] == want, name
    from ember.core.verify import IRTypeError

    assert issubclass(IRTypeError, ember.errors.JaxprTypeError)  # (ember's IR checker raises one)


def test_traced_args_info_is_jaxs():
    def f(x, y):
        return x

    got = ember.jit(f, donate_argnums=1).trace(ejnp.ones(3), 2.0).args_info
    want = jax.jit(f, donate_argnums=1).trace(jnp.ones(3), 2.0).args_info
    (a, b), _ = got
    (c, d), _ = want
    assert (a.shape, a.dtype, a.donated, b.shape, b.dtype, b.donated) == (c.shape, c.dtype, c.donated, d.shape,
                                                                           d.dtype, d.donated)
    assert type(a) is compat.stages.ArgInfo


@pytest.mark.parametrize("typ", [list, tuple, dict, type(None), int, float, np.ndarray, functools.partial])
def test_is_tree_node_is_jaxs(typ):
    assert ember.tree_util.is_tree_node(typ) == jax.tree_util.is_tree_node(typ)


def test_dtype_bits_and_scalar_types_are_jaxs():
    import ml_dtypes

    for t in (np.float32, ml_dtypes.int4, ml_dtypes.uint2, ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e4m3fn, np.bool_,
              np.complex64, np.int8, ml_dtypes.bfloat16):
        assert ember.dtypes.itemsize_bits(t) == jax.dtypes.itemsize_bits(t), t
    for x in (1.0, 2, True, 1 + 2j, np.ones(2, np.int8), np.ones(2, np.float16)):
        assert ember.dtypes.scalar_type_of(x) is jax.dtypes.scalar_type_of(x), x


def test_zero_from_primal_and_custom_derivative_names():
    from jax.custom_derivatives import zero_from_primal

    ours = compat.custom_derivatives.zero_from_primal({"a": ejnp.ones(2), "b": 3})
    theirs = zero_from_primal({"a": jnp.ones(2), "b": 3})
    np.testing.assert_array_equal(ours["a"], theirs["a"])
    assert ours["b"].dtype == theirs["b"].dtype and ours["b"].shape == theirs["b"].shape == ()
    assert compat.custom_derivatives.zero_from_primal(1.0, symbolic_zeros=True).aval.shape == ()
    assert compat.custom_derivatives.closure_convert is ember.closure_convert
    assert compat.custom_derivatives.custom_gradient is ember.custom_gradient


def test_config_states_versions_and_process_indices():
    assert compat.version.__version__ == jax.version.__version__ == compat.__version__
    assert compat.process_indices() == jax.process_indices() and compat.host_ids() == [0]
    for name in ("debug_nans", "debug_infs", "enable_x64", "log_compiles", "explain_cache_misses", "enable_checks"):
        assert name not in compat.MISSING and hasattr(jax, name)
        assert compat.__dict__[name].value == getattr(ember.config, "check_ir" if name == "enable_checks" else name)
    with compat.enable_x64(True):
        assert ejnp.ones(2, ejnp.float64).dtype == np.float64 and compat.enable_x64.value is True
    assert compat.enable_x64.value is False
    with compat.debug_nans(True), pytest.raises(FloatingPointError, match="encountered in log"):
        ejnp.log(-1.0)


# --- what ember lacks of JAX's modules is listed exactly (and the README's list is generated) -----------
CHECKED_MODULES = [
    "jax.lax", "jax.lax.linalg", "jax.numpy", "jax.numpy.linalg", "jax.numpy.fft", "jax.nn", "jax.nn.initializers",
    "jax.random", "jax.scipy", "jax.scipy.special", "jax.scipy.linalg", "jax.scipy.stats", "jax.scipy.stats.norm",
    "jax.tree_util", "jax.tree", "jax.debug", "jax.experimental", "jax.dtypes", "jax.image", "jax.ops",
    "jax.custom_derivatives", "jax.custom_batching", "jax.sharding", "jax.stages", "jax.typing", "jax.flatten_util",
    "jax.ad_checkpoint", "jax.test_util", "jax.errors", "jax.dlpack", "jax.example_libraries.stax",
    "jax.scipy.signal", "jax.scipy.optimize", "jax.scipy.ndimage", "jax.scipy.integrate", "jax.scipy.sparse",
    "jax.scipy.fft", "jax.scipy.interpolate", "jax.scipy.spatial", "jax.scipy.cluster", "jax.experimental.ode",
    "jax.experimental.sparse", "jax.profiler",
]


def _public(module) -> list[str]:
    names = []
    for name in dir(module):
        if name.startswith("_") or name.endswith("_p"):
            continue
        try:
            value = getattr(module, name)
        except Exception:  # (a deprecated name that raises when used)
            continue
        if not inspect.ismodule(value):
            names.append(name)
    return names


def test_the_missing_names_of_jaxs_modules_are_listed_exactly():
    import importlib
    import pathlib
    import pprint

    from ember import jax_import

    modules, names = [], {}
    for name in CHECKED_MODULES:
        theirs = importlib.import_module(name)
        target = jax_import._target(name)
        if target is None:
            modules.append(name)
            continue
        ours = importlib.import_module(target)
        missing = tuple(sorted(n for n in _public(theirs) if not hasattr(ours, n)))
        if missing:
            names[name] = missing
    assert tuple(sorted(modules)) == compat.MISSING_MODULES, f"MISSING_MODULES should be {tuple(sorted(modules))}"
    assert names == compat.MISSING_IN_MODULES, "MISSING_IN_MODULES should be:\n" + pprint.pformat(names, width=116)
    readme = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
    listed = readme.split("<!-- missing-jax-module-names -->\n")[1].split("\n  <!-- /missing-jax-module-names -->")[0]
    assert listed == compat.missing_in_modules_markdown(), (
        "README.md's list is out of date; replace it with:\n" + compat.missing_in_modules_markdown())
