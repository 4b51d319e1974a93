"""Typed PRNG keys (``random.key``, dtype ``key<fry>``) next to raw ``PRNGKey`` arrays, held
against JAX 0.10.2: reprs, shapes, key data, indexing and shape methods, ``issubdtype``, the
errors of arithmetic and of bad keys and seeds, every sampler's values for typed and raw keys,
and keys through ``jit``, ``vmap``, ``scan``, ``fori_loop``, ``cond``, ``grad`` and ``vjp``.

Cases that run the same program under both libraries take the ``api`` fixture; the rest compare
ember's result with JAX's directly."""
from __future__ import annotations

import copy
import importlib
import pickle
import re
from types import SimpleNamespace

import numpy as np
import pytest

import ember
import ember.numpy as ejnp
from ember import dtypes as edtypes, lax as elax, random as erandom
from ember.random.prng import PRNGKeyArray


def _load(which: str) -> SimpleNamespace:
    if which == "ember":
        return SimpleNamespace(name="ember", top=ember, jnp=ejnp, lax=elax, random=erandom, dtypes=edtypes,
                               tree_util=ember.tree_util)
    jax = pytest.importorskip("jax")
    return SimpleNamespace(name="jax", top=jax, jnp=importlib.import_module("jax.numpy"),
                           lax=importlib.import_module("jax.lax"), random=importlib.import_module("jax.random"),
                           dtypes=importlib.import_module("jax.dtypes"), tree_util=jax.tree_util)


@pytest.fixture(params=["ember", "jax"])
def api(request: pytest.FixtureRequest) -> SimpleNamespace:
    return _load(request.param)


@pytest.fixture(scope="module")
def jx() -> SimpleNamespace:
    return _load("jax")


def _error(fn) -> tuple[type, str]:
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value), str(info.value)


def _same_keys(ours, theirs) -> None:
    """Typed keys of equal shape, dtype name, data and repr."""
    assert isinstance(ours, PRNGKeyArray)
    assert ours.shape == theirs.shape and str(ours.dtype) == str(theirs.dtype) == "key<fry>"
    np.testing.assert_array_equal(np.asarray(erandom.key_data(ours)), np.asarray(_jax_key_data(theirs)))
    assert repr(ours) == repr(theirs)


def _jax_key_data(k):
    import jax.random

    return jax.random.key_data(k)


# --- making keys ---------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, -1, 7, 2**31, 2**40 + 5, np.int32(-5), np.uint32(4_000_000_000), True],
                         ids=repr)
def test_key_of_a_seed_is_a_scalar_typed_key_as_in_jax(jx, seed):
    k = erandom.key(seed)
    _same_keys(k, jx.random.key(seed))
    assert k.shape == () and k.ndim == 0 and k.size == 1 and k.itemsize == 8 and k.nbytes == 8
    np.testing.assert_array_equal(np.asarray(erandom.key_data(k)), np.asarray(erandom.PRNGKey(seed)))


def test_repr_of_the_zero_key_is_jax_s():
    assert repr(erandom.key(0)) == "Array((), dtype=key<fry>) overlaying:\n[0 0]"
    assert str(erandom.key(0)) == repr(erandom.key(0)) == format(erandom.key(0))


def test_prng_key_still_returns_raw_uint32_2(jx):
    raw = erandom.PRNGKey(3)
    assert type(raw) is ember.Array and raw.dtype == np.uint32 and raw.shape == (2,)
    assert repr(raw) == repr(jx.random.PRNGKey(3))


def test_impl_names(api):
    assert api.random.key_data(api.random.key(0, impl="threefry2x32")).shape == (2,)
    data = api.jnp.array([1, 2], api.jnp.uint32)
    assert api.random.wrap_key_data(data, impl="threefry2x32").shape == ()
    cls, message = _error(lambda: api.random.key(0, impl="foo"))
    assert cls is ValueError and message.startswith('unrecognized PRNG implementation "foo". Did you mean one of:')


def test_philox_implementations_are_refused_clearly():
    for impl in ("philox4x32", "philox2x32", "threefry4x32"):
        with pytest.raises(ValueError, match=f"the '{impl}' PRNG implementation is not available in ember.random, "
                                             "which implements 'threefry2x32', 'rbg', 'unsafe_rbg'"):
            erandom.key(0, impl=impl)
    with pytest.raises(TypeError, match=r"uint32 key data of shape \(\.\.\., 4\) for the rbg implementation"):
        erandom.wrap_key_data(np.zeros(2, np.uint32), impl="rbg")


def test_bad_seeds(api):
    assert _error(lambda: api.random.key(1.5))[0] is TypeError
    assert _error(lambda: api.random.key(api.jnp.array(1.0)))[0] is TypeError
    cls, message = _error(lambda: api.random.key(api.jnp.array([1, 2])))
    assert cls is TypeError and "key accepts a scalar seed, but was given an array of shape (2,) != ()" in message
    assert _error(lambda: api.random.key(2**64))[0] is OverflowError
    assert _error(lambda: api.random.key("a"))[0] is TypeError


# --- key data --------------------------------------------------------------------------------------
def test_key_data_and_wrap_key_data(jx):
    keys = erandom.split(erandom.key(0), (2, 3))
    data = erandom.key_data(keys)
    assert type(data) is ember.Array and data.dtype == np.uint32 and data.shape == (2, 3, 2)
    np.testing.assert_array_equal(np.asarray(data), np.asarray(jx.random.key_data(jx.random.split(jx.random.key(0),
                                                                                              (2, 3)))))
    _same_keys(erandom.wrap_key_data(data), jx.random.wrap_key_data(jx.jnp.asarray(np.asarray(data))))
    _same_keys(erandom.wrap_key_data(np.array([1, 2], np.uint32)),
               jx.random.wrap_key_data(jx.jnp.array([1, 2], jx.jnp.uint32)))
    raw = erandom.PRNGKey(0)
    assert erandom.key_data(raw) is raw  # a raw key is its own data, as JAX accepts it
    assert erandom.key_impl(keys) == erandom.key_impl(raw) == jx.random.key_impl(jx.random.key(0)) == "threefry2x32"


def test_wrap_key_data_refuses_what_is_not_key_data(api):
    for bad in (api.jnp.array([1, 2, 3], api.jnp.uint32), api.jnp.array([1.0, 2.0]), api.random.key(0)):
        assert _error(lambda: api.random.wrap_key_data(bad))[0] is TypeError


# --- dtypes ----------------------------------------------------------------------------------------------
def test_issubdtype_knows_key_dtypes(api):
    k = api.random.key(0)
    d = api.dtypes
    assert api.jnp.issubdtype(k.dtype, d.prng_key) and d.issubdtype(k.dtype, d.prng_key)
    assert api.jnp.issubdtype(k.dtype, d.extended) and api.jnp.issubdtype(k.dtype, np.generic)
    assert api.jnp.issubdtype(k.dtype, k.dtype) and d.issubdtype(d.prng_key, d.extended)
    for other in (np.integer, np.unsignedinteger, np.floating, np.number):
        assert not api.jnp.issubdtype(k.dtype, other)
    assert not api.jnp.issubdtype(api.jnp.uint32, d.prng_key)
    assert not api.jnp.issubdtype(api.random.PRNGKey(0).dtype, d.prng_key)
    assert api.jnp.issubdtype(api.jnp.bfloat16, np.floating) and api.jnp.issubdtype(np.int32, np.integer)


def test_key_dtype_object(api):
    k = api.random.key(0)
    assert str(k.dtype) == repr(k.dtype) == k.dtype.name == "key<fry>"
    assert k.dtype == api.random.key(1).dtype and hash(k.dtype) == hash(api.random.key(1).dtype)
    assert k.dtype != api.jnp.uint32 and k.dtype.type is api.dtypes.prng_key and k.dtype.itemsize == 8
    cls, message = _error(lambda: np.dtype(k.dtype))
    assert cls is TypeError and message == "Cannot interpret 'key<fry>' as a data type"


def test_a_key_array_is_an_array(api):
    k = api.random.key(0)
    assert repr(api.top.typeof(api.random.split(k, 4))) == "ShapedArray(key<fry>[4])"
    assert api.jnp.shape(api.random.split(k, 4)) == (4,) and api.jnp.ndim(k) == 0
    assert isinstance(k, api.top.Array) and isinstance(api.random.split(k), api.top.Array)
    assert not isinstance(api.random.key(0).dtype, np.dtype)


# --- splitting, folding, indexing, shape methods --------------------------------------------------------
def test_split_fold_in_and_clone(jx):
    k, j = erandom.key(0), jx.random.key(0)
    _same_keys(erandom.split(k), jx.random.split(j))
    _same_keys(erandom.split(k, 3), jx.random.split(j, 3))
    _same_keys(erandom.split(k, (2, 3)), jx.random.split(j, (2, 3)))
    _same_keys(erandom.split(k, 0), jx.random.split(j, 0))
    _same_keys(erandom.fold_in(k, 3), jx.random.fold_in(j, 3))
    _same_keys(erandom.fold_in(erandom.split(k)[1], 2**32 - 1), jx.random.fold_in(jx.random.split(j)[1], 2**32 - 1))
    _same_keys(erandom.clone(k), jx.random.clone(j))
    raw = erandom.PRNGKey(0)
    assert type(erandom.split(raw)) is ember.Array and erandom.split(raw).shape == (2, 2)
    assert type(erandom.fold_in(raw, 3)) is ember.Array
    np.testing.assert_array_equal(np.asarray(erandom.split(raw)), np.asarray(erandom.key_data(erandom.split(k))))


def test_unpacking_iteration_and_len(jx):
    k1, k2 = erandom.split(erandom.key(0))
    j1, j2 = jx.random.split(jx.random.key(0))
    _same_keys(k1, j1)
    _same_keys(k2, j2)
    ks, js = erandom.split(erandom.key(0), 3), jx.random.split(jx.random.key(0), 3)
    assert len(ks) == len(js) == 3
    for a, b in zip(list(ks), list(js)):
        _same_keys(a, b)
    with pytest.raises(TypeError):
        len(erandom.key(0))
    with pytest.raises(TypeError):
        iter(erandom.key(0))


@pytest.mark.parametrize("index", [0, 1, -1, 5, slice(1, None), slice(None, None, -2), (None,), (0, None),
                                   (Ellipsis, 0), (Ellipsis,), ()], ids=repr)
def test_indexing(jx, index):
    ks = erandom.split(erandom.key(0), 6)
    js = jx.random.split(jx.random.key(0), 6)
    _same_keys(ks[index], js[index])


def test_indexing_with_arrays(jx):
    ks, js = erandom.split(erandom.key(0), (2, 3)), jx.random.split(jx.random.key(0), (2, 3))
    _same_keys(ks[ejnp.array([1, 0])], js[jx.jnp.array([1, 0])])
    _same_keys(ks[1, ejnp.array([0, 2])], js[1, jx.jnp.array([0, 2])])
    _same_keys(ks[np.array([True, False])], js[np.array([True, False])])
    _same_keys(ks[ejnp.int32(1)], js[jx.jnp.int32(1)])
    _same_keys(erandom.key(0)[()], jx.random.key(0)[()])


def test_too_many_indices(api):
    ks = api.random.split(api.random.key(0), 4)
    assert _error(lambda: ks[0, 0]) == (IndexError, "Too many indices: array is 1-dimensional, but 2 were indexed")
    assert _error(lambda: api.random.key(0)[0]) == (
        IndexError, "Too many indices: array is 0-dimensional, but 1 were indexed")


@pytest.mark.parametrize("method", [
    lambda ks: ks.reshape(3, 2), lambda ks: ks.reshape((2, 3)), lambda ks: ks.reshape(-1), lambda ks: ks.reshape(3, -1),
    lambda ks: ks.reshape(1, 6, 1), lambda ks: ks.ravel(), lambda ks: ks.flatten(), lambda ks: ks.T,
    lambda ks: ks.transpose(), lambda ks: ks.transpose(1, 0), lambda ks: ks.transpose((1, 0)),
    lambda ks: ks.swapaxes(0, 1), lambda ks: ks.reshape(1, 6).squeeze(), lambda ks: ks.reshape(1, 6).squeeze(0),
    lambda ks: ks[:, :1].squeeze(-1), lambda ks: ks.copy(), lambda ks: +ks, lambda ks: ks.block_until_ready(),
    lambda ks: ks[0, 0].reshape(1), lambda ks: ks[0, 0].T,
])
def test_shape_methods(jx, method):
    _same_keys(method(erandom.split(erandom.key(0), (2, 3))), method(jx.random.split(jx.random.key(0), (2, 3))))


def test_shape_method_errors(api):
    ks = api.random.split(api.random.key(0), 4)
    assert _error(lambda: api.random.key(0).reshape(2)) == (
        TypeError, "cannot reshape array of shape () (size 1) into shape 2 (size 2)")
    assert _error(lambda: ks.squeeze(0)) == (
        ValueError, "cannot select an axis to squeeze out which has size not equal to one, got shape=(4,) and "
                    "dimensions=(0,)")


def test_at_set_and_get(jx):
    ks, js = erandom.split(erandom.key(0), 4), jx.random.split(jx.random.key(0), 4)
    _same_keys(ks.at[1].set(erandom.key(0)), js.at[1].set(jx.random.key(0)))
    _same_keys(ks.at[1:3].set(erandom.key(5)), js.at[1:3].set(jx.random.key(5)))
    _same_keys(ks.at[2].get(), js.at[2].get())


def test_key_equality(api):
    k, ks = api.random.key(0), api.random.split(api.random.key(0), 4)
    assert bool(k == api.random.key(0)) and not bool(k != api.random.key(0)) and not bool(k == api.random.key(1))
    np.testing.assert_array_equal(np.asarray(ks == ks[0]), [True, False, False, False])
    np.testing.assert_array_equal(np.asarray(k == ks), [False] * 4)
    np.testing.assert_array_equal(np.asarray(ks != ks), [False] * 4)
    assert (ks == ks).dtype == np.bool_


def test_pickle_and_copy():
    ks = erandom.split(erandom.key(0), 3)
    for copied in (pickle.loads(pickle.dumps(ks)), copy.deepcopy(ks), copy.copy(ks)):
        assert isinstance(copied, PRNGKeyArray) and repr(copied) == repr(ks)


# --- errors ----------------------------------------------------------------------------------------------
ERROR_CASES = {
    "add": lambda a, k: k + 1, "radd": lambda a, k: 1 + k, "sub": lambda a, k: k - 1, "mul": lambda a, k: k * 2,
    "div": lambda a, k: k / 2, "floordiv": lambda a, k: k // 2, "mod": lambda a, k: k % 2,
    "pow": lambda a, k: k ** 2, "and": lambda a, k: k & 1, "or": lambda a, k: k | 1, "xor": lambda a, k: k ^ 1,
    "lshift": lambda a, k: k << 1, "rshift": lambda a, k: k >> 1, "float": lambda a, k: k + 1.0,
    "array": lambda a, k: k + a.jnp.ones(3), "numpy scalar": lambda a, k: np.float32(1) + k,
    "divmod": lambda a, k: divmod(k, 2), "key + key": lambda a, k: k + k,
    "neg": lambda a, k: -k, "invert": lambda a, k: ~k, "abs": lambda a, k: abs(k),
    "lt": lambda a, k: k < k, "le": lambda a, k: k <= k, "gt": lambda a, k: k > k, "ge": lambda a, k: k >= 1,
    "eq raw": lambda a, k: k == a.random.PRNGKey(0), "bool": lambda a, k: bool(k), "hash": lambda a, k: hash(k),
    "float()": lambda a, k: float(k), "int()": lambda a, k: int(k), "np.asarray": lambda a, k: np.asarray(k),
    "sum": lambda a, k: k.sum(), "astype": lambda a, k: k.astype(np.uint32), "mean": lambda a, k: k.mean(),
    "item": lambda a, k: k.item(), "view": lambda a, k: k.view(np.uint32), "jnp.sum": lambda a, k: a.jnp.sum(k),
    "weak_type": lambda a, k: k.weak_type, "tolist": lambda a, k: k.tolist(),
    "split batched": lambda a, k: a.random.split(a.random.split(k, 3)),
    "normal batched": lambda a, k: a.random.normal(a.random.split(k, 3)),
    "fold_in batched": lambda a, k: a.random.fold_in(a.random.split(k, 3), 1),
    "fold_in overflow": lambda a, k: a.random.fold_in(k, 2**32),
}


@pytest.mark.parametrize("case", list(ERROR_CASES), ids=str)
def test_errors_are_jax_s(jx, case):
    ours = _error(lambda: ERROR_CASES[case](_load("ember"), erandom.key(0)))
    theirs = _error(lambda: ERROR_CASES[case](jx, jx.random.key(0)))
    assert ours[0] is theirs[0], (ours, theirs)
    if case != "fold_in overflow":
        assert ours[1] == theirs[1]


def test_a_wrong_raw_key_still_names_uint32_2():
    with pytest.raises(TypeError, match=re.escape("a uint32[2] array") + ".*" + re.escape("got uint32[3]")):
        erandom.normal(ejnp.zeros(3, ejnp.uint32))
    with pytest.raises(ValueError, match=r"normal accepts a single key.*shape \(4, 2\)"):
        erandom.normal(erandom.split(erandom.PRNGKey(0), 4))


# --- samplers: typed and raw keys give the same values (and JAX's) --------------------------------------
P = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
SAMPLERS = {
    "bits": lambda r, k: r.bits(k, (3,)),
    "uniform": lambda r, k: r.uniform(k, (3,)),
    "uniform bounds": lambda r, k: r.uniform(k, (3,), minval=-2.0, maxval=5.0),
    "normal": lambda r, k: r.normal(k, (3,)),
    "normal complex": lambda r, k: r.normal(k, (3,), np.complex64),
    "truncated_normal": lambda r, k: r.truncated_normal(k, -1.0, 2.0, (3,)),
    "randint": lambda r, k: r.randint(k, (5,), 0, 10),
    "bernoulli": lambda r, k: r.bernoulli(k, 0.3, (5,)),
    "categorical": lambda r, k: r.categorical(k, np.log(P), shape=(5,)),
    "permutation": lambda r, k: r.permutation(k, 8),
    "permutation array": lambda r, k: r.permutation(k, np.arange(6).reshape(3, 2), axis=1, independent=True),
    "choice": lambda r, k: r.choice(k, 10, (3,)),
    "choice weighted": lambda r, k: r.choice(k, 4, (3,), replace=False, p=P),
    "exponential": lambda r, k: r.exponential(k, (3,)),
    "laplace": lambda r, k: r.laplace(k, (3,)),
    "logistic": lambda r, k: r.logistic(k, (3,)),
    "gumbel": lambda r, k: r.gumbel(k, (3,)),
    "rademacher": lambda r, k: r.rademacher(k, (5,)),
    "cauchy": lambda r, k: r.cauchy(k, (3,)),
    "lognormal": lambda r, k: r.lognormal(k, 0.5, (3,)),
    "pareto": lambda r, k: r.pareto(k, 2.0, (3,)),
    "weibull_min": lambda r, k: r.weibull_min(k, 1.0, 2.0, (3,)),
    "rayleigh": lambda r, k: r.rayleigh(k, 1.5, (3,)),
    "maxwell": lambda r, k: r.maxwell(k, (3,)),
    "double_sided_maxwell": lambda r, k: r.double_sided_maxwell(k, 0.0, 1.0, (3,)),
    "geometric": lambda r, k: r.geometric(k, 0.3, (3,)),
    "triangular": lambda r, k: r.triangular(k, 0.0, 0.3, 1.0, (3,)),
    "wald": lambda r, k: r.wald(k, 1.0, (3,)),
    "gamma": lambda r, k: r.gamma(k, 2.5, (3,)),
    "loggamma": lambda r, k: r.loggamma(k, 0.5, (3,)),
    "beta": lambda r, k: r.beta(k, 2.0, 3.0, (3,)),
    "dirichlet": lambda r, k: r.dirichlet(k, np.array([1.0, 2.0, 3.0], np.float32), (2,)),
    "chisquare": lambda r, k: r.chisquare(k, 3.0, (3,)),
    "f": lambda r, k: r.f(k, 3.0, 5.0, (3,)),
    "t": lambda r, k: r.t(k, 4.0, (3,)),
    "generalized_normal": lambda r, k: r.generalized_normal(k, 1.5, (3,)),
    "ball": lambda r, k: r.ball(k, 3, shape=(2,)),
    "poisson": lambda r, k: r.poisson(k, 3.0, (4,)),
    "poisson large": lambda r, k: r.poisson(k, 40.0, (4,)),
    "binomial": lambda r, k: r.binomial(k, 10.0, 0.3, (4,)),
    "multinomial": lambda r, k: r.multinomial(k, 10.0, P),
    "multivariate_normal": lambda r, k: r.multivariate_normal(k, np.zeros(2, np.float32), np.eye(2, dtype=np.float32),
                                                              (3,)),
    "orthogonal": lambda r, k: r.orthogonal(k, 3),
}
# Exact in ember and XLA alike (no transcendental rounding after the bits).
EXACT = {"bits", "uniform", "randint", "bernoulli", "categorical", "permutation", "permutation array", "choice",
         "choice weighted", "rademacher"}


@pytest.mark.parametrize("name", list(SAMPLERS), ids=str)
def test_every_sampler_gives_the_same_values_for_typed_and_raw_keys(name):
    typed = SAMPLERS[name](erandom, erandom.key(42))
    raw = SAMPLERS[name](erandom, erandom.PRNGKey(42))
    assert typed.dtype == raw.dtype and typed.shape == raw.shape
    np.testing.assert_array_equal(np.asarray(typed), np.asarray(raw))


@pytest.mark.parametrize("name", sorted(EXACT), ids=str)
def test_exact_samplers_equal_jax_for_typed_keys(jx, name):
    ours = SAMPLERS[name](erandom, erandom.key(42))
    theirs = SAMPLERS[name](jx.random, jx.random.key(42))
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_public_samplers_are_all_covered():
    public = {n for n in dir(erandom) if not n.startswith("_") and callable(getattr(erandom, n))}
    not_samplers = {"PRNGKey", "key", "key_data", "wrap_key_data", "split", "fold_in", "clone",
                    "key_impl", "key_dtype"}
    covered = {n.split()[0] for n in SAMPLERS}
    assert public - not_samplers - covered == set()


# --- transformations ---------------------------------------------------------------------------------------
def test_jit_takes_and_returns_typed_keys_and_caches_them_apart_from_raw_keys(jx):
    traces = []

    def f(k):
        traces.append(type(k).__name__)
        return k, erandom.split(k), erandom.normal(k, (2,))

    jf = ember.jit(f)
    k, ks, x = jf(erandom.key(0))
    j, js, y = jx.top.jit(lambda k: (k, jx.random.split(k), jx.random.normal(k, (2,))))(jx.random.key(0))
    _same_keys(k, j)
    _same_keys(ks, js)
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6)
    jf(erandom.key(1))
    assert len(traces) == 1
    raw, raw_split, raw_x = jf(erandom.PRNGKey(0))
    assert len(traces) == 2 and type(raw) is ember.Array and raw_split.shape == (2, 2)
    np.testing.assert_array_equal(np.asarray(raw_x), np.asarray(x))
    jf(erandom.split(erandom.key(0), 2)[0])
    assert len(traces) == 2


def test_jit_makes_keys_from_traced_seeds(jx):
    _same_keys(ember.jit(erandom.key)(3), jx.top.jit(jx.random.key)(3))
    _same_keys(ember.jit(lambda s: erandom.key(s))(ejnp.int32(3)), jx.top.jit(lambda s: jx.random.key(s))(3))


def test_traced_keys_show_their_key_type(api):
    seen = []

    def f(k):
        seen.append((repr(k), k.shape, str(k.dtype), isinstance(k, api.top.Array)))
        return k

    api.top.jit(f)(api.random.key(0))
    assert seen[-1] == ("JitTracer(key<fry>[])", (), "key<fry>", True)
    api.top.vmap(f)(api.random.split(api.random.key(0), 4))
    assert seen[-1][1:] == ((), "key<fry>", True) and "key<fry>[]" in seen[-1][0]


def test_vmap_over_keys_and_seeds(jx):
    ours = ember.vmap(lambda k: erandom.normal(k, (2,)))(erandom.split(erandom.key(0), 4))
    theirs = jx.top.vmap(lambda k: jx.random.normal(k, (2,)))(jx.random.split(jx.random.key(0), 4))
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6)
    _same_keys(ember.vmap(erandom.key)(ejnp.arange(3)), jx.top.vmap(jx.random.key)(jx.jnp.arange(3)))
    _same_keys(ember.vmap(erandom.split)(erandom.split(erandom.key(0), 4)),
               jx.top.vmap(jx.random.split)(jx.random.split(jx.random.key(0), 4)))
    _same_keys(ember.vmap(lambda k: k, out_axes=1)(erandom.split(erandom.key(0), (2, 3))),
               jx.top.vmap(lambda k: k, out_axes=1)(jx.random.split(jx.random.key(0), (2, 3))))
    ours = ember.vmap(lambda k: erandom.randint(k, (3,), 0, 100))(erandom.split(erandom.key(0), 4))
    theirs = jx.top.vmap(lambda k: jx.random.randint(k, (3,), 0, 100))(jx.random.split(jx.random.key(0), 4))
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_scan_and_fori_loop_carry_keys(jx):
    def body(random):
        return lambda c, _: (random.split(c)[0], random.uniform(c))

    (k, xs), (j, ys) = (elax.scan(body(erandom), erandom.key(0), None, length=3),
                        jx.lax.scan(body(jx.random), jx.random.key(0), None, length=3))
    _same_keys(k, j)
    np.testing.assert_array_equal(np.asarray(xs), np.asarray(ys))
    _, xs = elax.scan(lambda c, k: (c, erandom.bits(k)), 0, erandom.split(erandom.key(0), 4))
    _, ys = jx.lax.scan(lambda c, k: (c, jx.random.bits(k)), 0, jx.random.split(jx.random.key(0), 4))
    np.testing.assert_array_equal(np.asarray(xs), np.asarray(ys))
    _same_keys(elax.fori_loop(0, 3, lambda i, c: erandom.fold_in(c, i), erandom.key(0)),
               jx.lax.fori_loop(0, 3, lambda i, c: jx.random.fold_in(c, i), jx.random.key(0)))
    _same_keys(elax.cond(True, lambda: erandom.key(0), lambda: erandom.key(1)),
               jx.lax.cond(True, lambda: jx.random.key(0), lambda: jx.random.key(1)))
    _same_keys(ember.jit(lambda ks: ks[1])(erandom.split(erandom.key(0), 3)),
               jx.top.jit(lambda ks: ks[1])(jx.random.split(jx.random.key(0), 3)))


def test_grad_with_a_key_argument(api):
    def loss(x, k):
        return x * api.random.uniform(k)

    k = api.random.key(0)
    g = api.top.grad(loss)(2.0, k)
    assert np.asarray(g) == np.asarray(api.random.uniform(k))
    cls, message = _error(lambda: api.top.grad(lambda k: 1.0)(k))
    assert cls is TypeError and message.startswith("grad requires real- or complex-valued inputs")
    cls, _ = _error(lambda: api.top.value_and_grad(lambda p: p["w"] * api.random.uniform(p["k"]))({"w": 1.0, "k": k}))
    assert cls is TypeError
    gx, gk = api.top.grad(loss, argnums=(0, 1), allow_int=True)(2.0, k)
    assert np.asarray(gk).dtype == api.dtypes.float0 and np.asarray(gk).shape == ()
    (ct,) = api.top.vjp(lambda k: api.random.uniform(k), k)[1](1.0)
    assert np.asarray(ct).dtype == api.dtypes.float0 and np.asarray(ct).shape == ()
    raw_ct = api.top.grad(loss, argnums=(0, 1), allow_int=True)(2.0, api.random.PRNGKey(0))[1]
    assert np.asarray(raw_ct).shape == (2,)


def test_eval_shape_of_keys():
    out = ember.eval_shape(erandom.split, erandom.key(0))
    assert out.shape == (2,) and str(out.dtype) == "key<fry>"
    assert repr(out) == "ShapeDtypeStruct(shape=(2,), dtype=key<fry>)"


def test_device_put_and_tree_map_keep_keys():
    ks = erandom.split(erandom.key(0), 3)
    for out in (ember.device_put(ks), ember.block_until_ready(ks), ember.tree_util.tree_map(lambda x: x, ks)):
        assert isinstance(out, PRNGKeyArray) and repr(out) == repr(ks)


def test_key_arrays_are_pytree_leaves(api):
    k = api.random.key(0)
    ks = api.random.split(k, 3)
    assert api.tree_util.tree_map(lambda x: x.shape, {"k": k, "w": api.jnp.ones(2)}) == {"k": (), "w": (2,)}
    assert [str(d) for d in api.tree_util.tree_map(lambda x: x.dtype, [k])] == ["key<fry>"]
    (leaf,) = api.tree_util.tree_leaves(ks)
    assert leaf is ks and leaf.shape == (3,)
    assert api.tree_util.treedef_is_leaf(api.tree_util.tree_structure(k))
    leaves, tree = api.tree_util.tree_flatten((k, 1.0))
    assert leaves[0] is k and tree.num_leaves == 2
    assert api.tree_util.all_leaves([k, ks])
    ((path, _),), _ = api.tree_util.tree_flatten_with_path({"k": k})
    assert api.tree_util.keystr(path) == "['k']"
    shapes = api.tree_util.tree_map(lambda x: x[0] if x.ndim else x, {"k": ks})
    assert shapes["k"].shape == ()
    # A function mapped over a tree holding keys sees keys, also while jit traces it.
    seen = []
    api.top.jit(lambda d: api.tree_util.tree_map(lambda x: seen.append(str(x.dtype)) or x, d))({"k": k})
    assert seen == ["key<fry>"]


def test_keys_through_transformations_as_leaves(api):
    k = api.random.key(0)
    ks = api.random.split(k, 3)
    out = api.top.vmap(lambda k: api.random.split(k), out_axes=-1)(ks)
    assert out.shape == (2, 3) and str(out.dtype) == "key<fry>"
    assert api.top.vmap(lambda k: api.random.normal(k), in_axes=-1)(ks).shape == (3,)
    grads = api.top.grad(lambda p: p["w"].sum(), allow_int=True)({"k": k, "w": api.jnp.ones(2)})
    assert np.asarray(grads["k"]).dtype == api.dtypes.float0 and np.asarray(grads["k"]).shape == ()
    cls, message = _error(lambda: api.top.grad(lambda p: p["w"].sum())({"k": k, "w": api.jnp.ones(2)}))
    assert cls is TypeError and "but got key<fry>. If you want to use Boolean- or integer-valued inputs" in message
    primals, tangents = api.top.jvp(lambda k, x: (k, x * 2), (k, 1.0), (np.zeros((), api.dtypes.float0), 1.0))
    assert str(primals[0].dtype) == "key<fry>" and np.asarray(tangents[0]).dtype == api.dtypes.float0
    (ct_k, ct_x) = api.top.vjp(lambda k, x: x * 2, k, 1.0)[1](1.0)
    assert np.asarray(ct_k).shape == () and float(ct_x) == 2.0
    carry, ys = api.lax.scan(lambda c, _: (api.random.split(c)[0], api.random.normal(c)), k, None, length=3)
    assert str(carry.dtype) == "key<fry>" and ys.shape == (3,)
    assert str(api.lax.stop_gradient({"k": k})["k"].dtype) == "key<fry>"
    assert str(api.top.device_put(k, api.top.devices()[0]).dtype) == "key<fry>"


def test_shape_dtype_structs_of_keys(api):
    k = api.random.key(0)
    spec = api.top.ShapeDtypeStruct((), k.dtype)
    assert repr(api.top.ShapeDtypeStruct((2,), k.dtype)) == "ShapeDtypeStruct(shape=(2,), dtype=key<fry>)"
    for out in (api.top.eval_shape(api.random.split, spec), api.top.eval_shape(api.random.split, k),
                api.top.jit(api.random.split).trace(spec).out_info, api.top.jit(api.random.split).eval_shape(spec)):
        assert repr(out) == "ShapeDtypeStruct(shape=(2,), dtype=key<fry>)"
    assert repr(api.top.eval_shape(lambda d: d, {"k": spec})) == "{'k': ShapeDtypeStruct(shape=(), dtype=key<fry>)}"


# --- the rbg and unsafe_rbg implementations ---------------------------------------------------------
RBG_CASES = {
    "PRNGKey": lambda a, k, impl: a.random.PRNGKey(42, impl=impl),
    "key_data": lambda a, k, impl: a.random.key_data(k),
    "split": lambda a, k, impl: a.random.key_data(a.random.split(k, 3)),
    "split shape": lambda a, k, impl: a.random.key_data(a.random.split(k, (2, 2))),
    "fold_in": lambda a, k, impl: a.random.key_data(a.random.fold_in(k, 7)),
    "bits": lambda a, k, impl: a.random.bits(k, (5,)),
    "bits uint8": lambda a, k, impl: a.random.bits(k, (5,), a.jnp.uint8),
    "bits uint16": lambda a, k, impl: a.random.bits(k, (2, 3), a.jnp.uint16),
    "uniform": lambda a, k, impl: a.random.uniform(k, (4,)),
    "normal": lambda a, k, impl: a.random.normal(k, (4,)),
    "randint": lambda a, k, impl: a.random.randint(k, (4,), 0, 100),
    "permutation": lambda a, k, impl: a.random.permutation(k, 6),
    "jit split": lambda a, k, impl: a.random.key_data(a.top.jit(lambda k: a.random.split(k))(k)),
    "vmap uniform": lambda a, k, impl: a.top.vmap(lambda k: a.random.uniform(k))(a.random.split(k, 3)),
    "vmap bits": lambda a, k, impl: a.top.vmap(lambda k: a.random.bits(k, (2,)))(a.random.split(k, 3)),
    "wrap_key_data": lambda a, k, impl: a.random.key_data(
        a.random.wrap_key_data(a.jnp.array([1, 2, 3, 4], a.jnp.uint32), impl=impl)),
}


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
@pytest.mark.parametrize("case", list(RBG_CASES), ids=str)
def test_rbg_keys_draw_as_jax_does(jx, impl, case):
    ours = RBG_CASES[case](_load("ember"), erandom.key(42, impl=impl), impl)
    theirs = RBG_CASES[case](jx, jx.random.key(42, impl=impl), impl)
    assert np.asarray(ours).dtype == np.asarray(theirs).dtype
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_eager_rbg_draws_compile_their_loops_once():
    """A loop drawing rbg bits holds the bits' custom_vmap rule: each call must give the same rule
    object, or the loop's program is new to the eager cache on every call (it compiled each time)."""
    from ember.runtime import eager

    k = erandom.key(42, impl="unsafe_rbg")
    first = [np.asarray(erandom.gamma(k, 2.0, (3,))) for _ in range(2)]  # (the second call compiles the loops)
    compiles = eager.cache_info().compiles
    again = np.asarray(erandom.gamma(k, 2.0, (3,)))
    assert eager.cache_info().compiles == compiles
    np.testing.assert_array_equal(again, first[1])


@pytest.mark.parametrize("impl,tag", [("rbg", "rbg"), ("unsafe_rbg", "urbg")])
def test_rbg_key_types_and_names(api, impl, tag):
    k = api.random.key(42, impl=impl)
    assert str(k.dtype) == f"key<{tag}>" and k.dtype.itemsize == 16 and k.shape == () and k.nbytes == 16
    assert repr(k) == f"Array((), dtype=key<{tag}>) overlaying:\n[ 0 42  0 42]"
    assert api.random.key_impl(k) == impl and api.random.key_impl(api.random.PRNGKey(0)) == "threefry2x32"
    assert api.random.key_dtype(impl) == k.dtype and str(api.random.key_dtype()) == "key<fry>"
    assert str(api.random.key(0, impl=k.dtype).dtype) == f"key<{tag}>"
    assert repr(api.top.eval_shape(api.random.split, k)) == f"ShapeDtypeStruct(shape=(2,), dtype=key<{tag}>)"
    assert api.random.gamma(k, 2.0, (3,)).shape == (3,)
    cls, _ = _error(lambda: api.random.normal(api.jnp.zeros(4, api.jnp.uint32)))  # a raw key is Threefry's
    assert cls is TypeError


def test_the_bit_generator_is_xlas_philox_on_the_cpu(jx):
    from ember.random import rbg

    rng = np.random.default_rng(0)
    keys = [rng.integers(0, 2**32, 4, dtype=np.uint64).astype(np.uint32) for _ in range(6)]
    keys += [np.array([0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 7], np.uint32),  # (counter carries into the key words)
             np.array([5, 6, 0xFFFFFFFF, 0xFFFFFFFF], np.uint32)]
    for key in keys:
        for n in (1, 4, 9):
            for width, dtype in ((8, np.uint8), (16, np.uint16), (32, np.uint32)):
                _, want = jx.lax.rng_bit_generator(jx.jnp.asarray(key), (n,), dtype=dtype)
                np.testing.assert_array_equal(np.asarray(rbg.bit_generator(ejnp.asarray(key), width, (n,))),
                                              np.asarray(want))


# --- running as jax -------------------------------------------------------------------------------------
def test_jax_random_and_dtypes_expose_the_names():
    from ember.compat import jax as compat_jax

    assert compat_jax.random is erandom and compat_jax.dtypes.prng_key is edtypes.prng_key
    for name in ("key", "key_data", "wrap_key_data", "key_impl", "PRNGKey"):
        assert callable(getattr(compat_jax.random, name))
    assert compat_jax.dtypes.prng_key is edtypes.prng_key and compat_jax.dtypes.issubdtype is edtypes.issubdtype


# --- jnp functions that move, join and select keys --------------------------------------------------
JOINING_CASES = {
    "stack": lambda a, ks: a.jnp.stack([ks[0], ks[1]]),
    "stack axis -1": lambda a, ks: a.jnp.stack([ks, ks[::-1]], axis=-1),
    "concatenate": lambda a, ks: a.jnp.concatenate([ks, ks[:2]]),
    "concatenate None": lambda a, ks: a.jnp.concatenate([ks.reshape(2, 2), ks], axis=None),
    "where": lambda a, ks: a.jnp.where(a.jnp.array([True, False, True, False]), ks, ks[::-1]),
    "where scalar": lambda a, ks: a.jnp.where(False, ks[0], ks[1]),
    "broadcast_to": lambda a, ks: a.jnp.broadcast_to(ks[2], (3, 2)),
    "expand_dims": lambda a, ks: a.jnp.expand_dims(ks, (0, -1)),
    "under jit": lambda a, ks: a.top.jit(lambda k: a.jnp.stack([k, a.random.split(k)[1]]))(ks[0]),
}


@pytest.mark.parametrize("case", list(JOINING_CASES), ids=str)
def test_jnp_joins_and_selects_keys_as_jax_does(jx, case):
    ours = JOINING_CASES[case](_load("ember"), erandom.split(erandom.key(3), 4))
    theirs = JOINING_CASES[case](jx, jx.random.split(jx.random.key(3), 4))
    _same_keys(ours, theirs)


def test_the_argument_guard_skips_the_key_path_only_for_types_that_are_never_keys():
    """``jnp``'s guard calls a key-taking function (``where``, ``stack``, ...) without its key
    path when every argument is of a ``_FAST`` type: none of them may be a key array."""
    from ember.numpy import arraylike, keys
    assert arraylike._FAST <= keys._NEVER_KEYS | {np.ndarray}
    k = erandom.key(0)
    assert type(k) not in arraylike._FAST


def test_keys_and_other_arrays_do_not_join(api):
    k = api.random.key(0)
    for fn in (lambda: api.jnp.stack([k, api.jnp.zeros(())]), lambda: api.jnp.where(True, k, api.jnp.zeros(()))):
        with pytest.raises(ValueError, match="dtype=key<fry> is not a valid dtype for JAX type promotion"):
            fn()


def test_astype_of_a_key_array_to_its_own_type_keeps_it_and_refuses_others() -> None:
    """optax's MultiSteps casts every state leaf back to its dtype (``jnp.astype(where(...), st.dtype)``),
    key arrays included: the same key type is the array itself; any other conversion either way is
    JAX's ValueError."""
    k, k2 = ember.random.key(0), ember.random.key(1)
    chosen = ejnp.where(False, k, k2)
    for out in (ejnp.astype(chosen, k.dtype), ember.jit(lambda k: ejnp.astype(k, k.dtype))(chosen)):
        assert out.dtype == k.dtype
        np.testing.assert_array_equal(ember.random.key_data(out), ember.random.key_data(k2))
    with pytest.raises(ValueError, match="Cannot convert_element_type from key<fry> to float32"):
        ejnp.astype(k, ejnp.float32)
    with pytest.raises(ValueError, match="Cannot convert_element_type from float32 to key<fry>"):
        ejnp.astype(ejnp.ones(2), k.dtype)
