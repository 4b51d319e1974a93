"""Refs (``jax.new_ref``, ``jax.freeze``, ``jax.ref``): the examples of JAX's guide "Ref: mutable arrays
for data plumbing and memory control", run against ember and against JAX 0.10.2 with the same
assertions (values, reprs, types, exception classes and message gist), plus ember's jit cache
behaviour (a closed-over ref is read and written back at every call, never baked in)."""
from __future__ import annotations

import importlib
from types import SimpleNamespace

import numpy as np
import pytest

import ember
import ember.numpy as ejnp
from ember import lax as elax
from ember.compat.jax import ref as eref


def _load(which: str) -> SimpleNamespace:
    if which == "ember":
        return SimpleNamespace(name="ember", top=ember, jnp=ejnp, lax=elax, ref=eref)
    jax = pytest.importorskip("jax")
    return SimpleNamespace(name="jax", top=jax, jnp=importlib.import_module("jax.numpy"),
                           lax=importlib.import_module("jax.lax"), ref=importlib.import_module("jax.ref"))


@pytest.fixture(params=["ember", "jax"])
def api(request: pytest.FixtureRequest) -> SimpleNamespace:
    return _load(request.param)


def _raises(cls: type, fn, *fragments: str) -> str:
    with pytest.raises(Exception) as info:
        fn()
    assert type(info.value) is cls, f"{type(info.value).__name__}: {info.value}"
    for fragment in fragments:
        assert fragment in str(info.value), f"{fragment!r} not in {str(info.value)!r}"
    return str(info.value)


def test_closed_over_ref_in_jit(api):
    jax, jnp = api.top, api.jnp
    x_ref = jax.new_ref(jnp.zeros(3))

    @jax.jit
    def f():
        x_ref[1] += 1.

    assert repr(x_ref) == str(x_ref) == "Ref([0., 0., 0.], dtype=float32)"
    f()
    assert repr(x_ref) == "Ref([0., 1., 0.], dtype=float32)"  # the first call
    f()
    assert repr(x_ref) == "Ref([0., 2., 0.], dtype=float32)"  # the second (cached) call sees the first's write
    x_ref[...] = jnp.full(3, 5.)  # a write from outside between calls is seen too
    f()
    assert repr(x_ref) == "Ref([5., 6., 5.], dtype=float32)"


def test_grad_of_function_with_internal_ref(api):
    jax, jnp = api.top, api.jnp

    def g(x):
        x_ref = jax.new_ref(0.)
        x_ref[...] = jnp.sin(x)
        return x_ref[...]

    assert str(jax.grad(g)(1.0)) == "0.5403023"

    @jax.jit
    def pure2(x):
        ref = jax.new_ref(x)
        ref[...] = ref[...] + ref[...]
        return ref[...]

    assert float(pure2(3.0)) == 6.0
    assert float(jax.grad(pure2)(3.0)) == 2.0


def test_ref_arguments_to_jit(api):
    jax, jnp = api.top, api.jnp

    @jax.jit
    def f(r, x):
        r[...] += x

    r = jax.new_ref(jnp.zeros(3))
    f(r, jnp.ones(3))
    f(r, jnp.ones(3))
    assert repr(r) == "Ref([2., 2., 2.], dtype=float32)"
    other = jax.new_ref(jnp.arange(3.))
    f(other, jnp.ones(3))  # same signature, another ref: written back to that one
    assert repr(other) == "Ref([1., 2., 3.], dtype=float32)"
    assert repr(r) == "Ref([2., 2., 2.], dtype=float32)"

    @jax.jit
    def pt(d):
        d["a"][...] += 1

    tree = {"a": jax.new_ref(jnp.zeros(2))}
    pt(tree)
    pt(tree)
    assert repr(tree["a"]) == "Ref([2., 2.], dtype=float32)"

    @jax.jit
    def impure1(x_ref, y_ref):
        x_ref[...] = y_ref[...]

    a, b = jax.new_ref(jnp.zeros(2)), jax.new_ref(jnp.ones(2))
    impure1(a, b)
    assert repr(a) == "Ref([1., 1.], dtype=float32)"


def test_jit_of_closed_and_argument_refs_returns_values(api):
    jax, jnp = api.top, api.jnp
    y_ref = jax.new_ref(0)

    @jax.jit
    def impure2(x):
        y_ref[...] = x

    impure2(3)
    assert repr(y_ref) == "Ref(3, dtype=int32)"
    impure2(7)
    assert repr(y_ref) == "Ref(7, dtype=int32)"

    counter = jax.new_ref(jnp.float32(0))

    @jax.jit
    def step(x):
        counter[...] += 1.
        return x * counter[...]

    assert float(step(2.0)) == 2.0
    assert float(step(2.0)) == 4.0
    assert repr(counter) == "Ref(2., dtype=float32)"


def test_reprs_types_and_attributes(api):
    jax, jnp = api.top, api.jnp
    x_ref = jax.new_ref(jnp.zeros(3))
    assert str(jax.typeof(x_ref)) == "Ref{float32[3]}"
    assert str(x_ref.aval) == "Ref{float32[3]}"
    assert x_ref.shape == (3,) and x_ref.dtype == np.float32 and x_ref.ndim == 1 and x_ref.size == 3
    assert isinstance(x_ref, jax.Ref)
    assert str(jax.typeof(jax.new_ref(jnp.ones((2, 3), jnp.int32)))) == "Ref{int32[2,3]}"
    assert repr(jax.new_ref(1.0)) == "Ref(1., dtype=float32, weak_type=True)"
    i_ref = jax.new_ref(jnp.int32(0))
    i_ref[...] = 4
    assert repr(i_ref) == "Ref(4, dtype=int32)"
    m = jax.new_ref(jnp.arange(12.).reshape(3, 4))
    assert repr(m) == ("Ref([[ 0.,  1.,  2.,  3.],\n       [ 4.,  5.,  6.,  7.],\n"
                       "       [ 8.,  9., 10., 11.]], dtype=float32)")
    assert jax.tree_util.tree_leaves([x_ref, 1])[0] is x_ref  # a pytree leaf


def test_numpy_indexing(api):
    jax, jnp = api.top, api.jnp
    x_ref = jax.new_ref(jnp.arange(12.).reshape(3, 4))
    row = x_ref[0]
    x_ref[1] = row
    val = x_ref[1, 2]
    x_ref[2, 3] = val
    col = x_ref[:, 1]
    x_ref[0, :3] = col
    vals = x_ref[jnp.array([0, 0, 1]), jnp.array([1, 2, 3])]
    x_ref[jnp.array([1, 2, 1]), jnp.array([0, 0, 1])] = vals
    assert repr(row) == "Array([0., 1., 2., 3.], dtype=float32)"
    assert repr(vals) == "Array([1., 9., 3.], dtype=float32)"
    np.testing.assert_array_equal(np.asarray(x_ref[...]), [[1., 1., 9., 3.], [1., 3., 2., 3.], [9., 9., 10., 2.]])
    x_ref[:, 0] += 2.
    np.testing.assert_array_equal(np.asarray(x_ref[:, 0]), [3., 3., 11.])


def test_ref_module_functions(api):
    jax, jnp, ref = api.top, api.jnp, api.ref
    r = jax.new_ref(jnp.arange(5))
    assert repr(ref.get(r, slice(1, 3))) == "Array([1, 2], dtype=int32)"
    assert repr(r[1:3]) == "Array([1, 2], dtype=int32)"
    assert repr(r[...]) == "Array([0, 1, 2, 3, 4], dtype=int32)"
    z = jax.new_ref(jnp.zeros(5))
    ref.set(z, 1, 10.0)
    assert repr(z) == "Ref([ 0., 10.,  0.,  0.,  0.], dtype=float32)"
    s = jax.new_ref(jnp.arange(5.))
    assert repr(ref.swap(s, 2, 9.)) == "Array(2., dtype=float32)"
    assert repr(s) == "Ref([0., 1., 9., 3., 4.], dtype=float32)"
    ref.addupdate(s, ..., jnp.ones(5))
    assert repr(s) == "Ref([ 1.,  2., 10.,  4.,  5.], dtype=float32)"
    assert ref.freeze is jax.freeze and ref.new_ref is jax.new_ref and ref.Ref is jax.Ref


def test_freeze(api):
    jax, jnp = api.top, api.jnp
    r = jax.new_ref(jnp.arange(5))
    r[3] = 100
    assert repr(r) == "Ref([  0,   1,   2, 100,   4], dtype=int32)"
    assert repr(jax.freeze(r)) == "Array([  0,   1,   2, 100,   4], dtype=int32)"

    @jax.jit
    def ff(x):
        q = jax.new_ref(x)
        q[0] = 5.
        return jax.freeze(q)

    np.testing.assert_array_equal(np.asarray(ff(jnp.zeros(2))), [5., 0.])


def test_freeze_outside_jit_leaves_the_ref_usable(api):
    # JAX 0.10.2 evaluates freeze eagerly as a read: the ref can be read, written and frozen again.
    jax, jnp = api.top, api.jnp
    r = jax.new_ref(jnp.zeros(3))
    y = jax.freeze(r)
    np.testing.assert_array_equal(np.asarray(r[...] + 1), np.ones(3))
    r[...] = jnp.ones(3)
    np.testing.assert_array_equal(np.asarray(jax.freeze(r)), np.ones(3))
    np.testing.assert_array_equal(np.asarray(y), np.zeros(3))  # (the frozen value does not change)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda: r[...] + 1)()), 2 * np.ones(3))


def test_use_after_freeze_inside_jit_raises(api):
    jax, jnp = api.top, api.jnp

    def f(x):
        r = jax.new_ref(x)
        y = jax.freeze(r)
        return r[...] + y

    _raises(ValueError, lambda: jax.jit(f)(jnp.ones(2)), "`get` must be called on `Ref` types: float32[2]")


def test_errors(api):
    jax, jnp = api.top, api.jnp
    _raises(TypeError, lambda: jnp.sin(jax.new_ref(1.0)), "sin requires ndarray or scalar arguments")
    _raises(TypeError, lambda: jax.new_ref(1.0) + 1, "unsupported operand type(s) for +: 'Ref' and 'int'")
    x_ref = jax.new_ref(0.)

    @jax.jit
    def err1(x_ref):
        x_ref[...] = 5.
        return x_ref

    _raises(ValueError, lambda: err1(x_ref), "returned a mutable array reference of type Ref{float32[]}",
            "mutable array references cannot be returned", "passed in as the argument x_ref")
    _raises(ValueError, lambda: jax.jit(lambda x: jax.new_ref(x))(1.), "cannot be returned")

    @jax.jit
    def err2(x_ref, y_ref):
        ...

    _raises(ValueError, lambda: err2(x_ref, x_ref), "only one reference to a mutable array may be passed",
            "appeared at both x_ref and y_ref")
    err2(x_ref, jax.new_ref(1.))
    _raises(ValueError, lambda: err2(x_ref, x_ref), "only one reference")  # checked at cache hits too

    @jax.jit
    def err3(y_ref):
        y_ref[...] = x_ref[...]

    _raises(ValueError, lambda: err3(x_ref), "both closed over and passed as the argument y_ref")

    def err5(x):
        x_ref[...] = x

    _raises(Exception, lambda: jax.vmap(err5)(jnp.arange(3.)),
            "performing a set/swap operation with vmapped value on an unbatched array reference")
    r2 = jax.new_ref(jnp.arange(3))
    _raises(ValueError, lambda: r2.__setitem__(0, 3.7), "Invalid dtype for `swap`. Ref dtype: int32. "
            "Value dtype: float32.")
    _raises(ValueError, lambda: r2.__setitem__(..., jnp.zeros(4, jnp.int32)),
            "Invalid shape for `swap`. Ref shape: (3,). Expected shape: (3,). Value shape: (4,).")


def test_grad_plumbing(api):
    jax = api.top

    def err6(x, some_plumbing_ref):
        y = x + x
        some_plumbing_ref[...] += y
        return y

    def foo(x, some_plumbing_ref):
        y = x + x
        some_plumbing_ref[...] += jax.lax.stop_gradient(y)
        return y

    _raises(Exception, lambda: jax.grad(err6)(1., jax.new_ref(0.)),
            "performing a set/swap operation with a differentiated value on a non-differentiated array reference")
    plumb = jax.new_ref(0.)
    assert float(jax.grad(foo)(1., plumb)) == 2.0
    assert float(plumb[...]) == 2.0


def test_grad_of_returned_ref_is_type_error(api):
    jax = api.top
    _raises(TypeError, lambda: jax.grad(lambda x: jax.new_ref(x))(1.))


def test_refs_in_loops(api):
    jax, jnp = api.top, api.jnp
    acc = jax.new_ref(0.)

    @jax.jit
    def loop(xs):
        def body(i, c):
            acc[...] += xs[i]
            return c + 1
        return jax.lax.fori_loop(0, xs.shape[0], body, 0)

    assert int(loop(jnp.arange(4.))) == 4
    assert repr(acc) == "Ref(6., dtype=float32)"
    assert int(loop(jnp.arange(4.))) == 4
    assert repr(acc) == "Ref(12., dtype=float32)"

    stats = jax.new_ref(jnp.zeros(2))

    def step(c, x):
        stats[0] += x
        stats[1] += x * x
        return c + x, None

    carry, _ = jax.lax.scan(step, 0., jnp.arange(3.))
    assert float(carry) == 3.0
    assert repr(stats) == "Ref([3., 5.], dtype=float32)"

    n = jax.new_ref(0.)

    @jax.jit
    def dynamic(k):  # traced bounds: a while loop
        return jax.lax.fori_loop(0, k, lambda i, c: (n.__setitem__(..., n[...] + 1.), c)[1], 0.)

    dynamic(3)
    dynamic(4)
    assert float(n[...]) == 7.0

    w = jax.new_ref(1)

    def body(c):
        w[...] = w[...] * 3
        return c + 1

    assert int(jax.lax.while_loop(lambda c: c < 5, body, 0)) == 5
    assert int(w[...]) == 243


def test_while_loop_cond_reads_carried_ref():
    # (JAX 0.10.2 refuses this eagerly: the ref reaches its while as two arguments)
    w = ember.new_ref(1)

    def body(c):
        w[...] = w[...] * 3
        return c + 1

    assert int(elax.while_loop(lambda c: w[...] < 100, body, 0)) == 5
    assert int(w[...]) == 243


def test_foreach(api):
    jax, jnp = api.top, api.jnp

    def foreach(*args):
        def decorator(body):
            return jax.lax.scan(lambda _, elts: (None, body(*elts)), None, args)[1]
        return decorator

    r = jax.new_ref(0)
    xs = jnp.arange(10)

    @foreach(xs)
    def ys(x):
        r[...] += x
        return x * 2

    assert repr(r) == "Ref(45, dtype=int32)"
    assert str(ys) == "[ 0  2  4  6  8 10 12 14 16 18]"


def test_make_jaxpr_does_not_run(api):
    jax, jnp = api.top, api.jnp
    cr = jax.new_ref(jnp.zeros(3))

    def k(x):
        cr[1] += x
        return x

    jax.make_jaxpr(k)(1.)
    assert repr(cr) == "Ref([0., 0., 0.], dtype=float32)"


# --- ember only: the jit integration ------------------------------------------------------------------
def test_closed_over_ref_program_is_cached_and_never_fast_pathed():
    r = ember.new_ref(ejnp.zeros(()))

    @ember.jit
    def f(x):
        r[...] += x
        return x * 2

    x = ejnp.ones(())
    for _ in range(5):
        f(x)
    assert float(r[...]) == 5.0
    info = f.cache_info()
    assert info.traces == 1 and info.hits >= 4
    assert not f._cache.fast  # the dispatcher fast path would skip the write-back


def test_discharged_jaxpr_has_hidden_inputs_and_outputs():
    r = ember.new_ref(ejnp.zeros(3))

    def h(x):
        r[...] += x
        return r[...] * 2

    closed = ember.make_jaxpr(h)(ejnp.ones(3))
    assert len(closed.jaxpr.invars) == 2 and len(closed.jaxpr.outvars) == 2  # x, r's value / result, r's value
    np.testing.assert_array_equal(np.asarray(r[...]), np.zeros(3))


def test_nested_jit_and_grad_inside_jit():
    r = ember.new_ref(ejnp.zeros(()))

    @ember.jit
    def inner(x):
        r[...] += x

    @ember.jit
    def outer(x):
        inner(x)
        inner(x * 2)
        return r[...]

    assert float(outer(1.0)) == 3.0
    assert float(outer(1.0)) == 6.0
    inner(ejnp.ones(()))
    assert float(r[...]) == 7.0

    @ember.jit
    def pure_grad(x):
        def g(y):
            q = ember.new_ref(y)
            q[...] = q[...] * y
            return q[...]
        return ember.grad(g)(x)

    assert float(pure_grad(3.0)) == 6.0


def test_aot_lowering_refuses_refs():
    c = ember.new_ref(0.)
    _raises(NotImplementedError, lambda: ember.jit(lambda x: x[...]).lower(c), "Ref")


def test_refs_written_in_cond_and_switch(api):
    jax, jnp, lax = api.top, api.jnp, api.lax
    r = jax.new_ref(0.)
    lax.cond(True, lambda: r.__setitem__(..., 1.), lambda: r.__setitem__(..., 2.))
    assert repr(r[...]) == "Array(1., dtype=float32, weak_type=True)"
    lax.cond(False, lambda: r.__setitem__(..., 1.), lambda: r.__setitem__(..., 2.))
    assert float(r[...]) == 2.0
    jax.jit(lambda i: lax.switch(i, [lambda: r.__setitem__(..., 5.), lambda: r.__setitem__(..., 6.)]))(1)
    assert float(r[...]) == 6.0

    @jax.jit
    def local(x):
        q = jax.new_ref(x)
        lax.cond(x > 0, lambda: q.__setitem__(..., q[...] * 2), lambda: None)
        return q[...]

    assert float(local(1.)) == 2.0 and float(local(-1.)) == -1.0

    v = jax.new_ref(jnp.zeros(3))

    def g(x):
        y = lax.cond(x > 0, lambda: (v.__setitem__(1, x), x * 2)[1], lambda: (v.__setitem__(0, -x), x * 3)[1])
        return y + v[...]

    np.testing.assert_array_equal(np.asarray(jax.jit(g)(2.)), [4., 6., 4.])
    np.testing.assert_array_equal(np.asarray(g(-1.)), [-2., -1., -3.])
    np.testing.assert_array_equal(np.asarray(v[...]), [1., 2., 0.])

    count = jax.new_ref(0.)

    def body(i, c):
        lax.cond(i % 2 == 0, lambda: count.__setitem__(..., count[...] + 1.), lambda: None)
        return c

    jax.jit(lambda x: lax.fori_loop(0, 5, body, x))(0.)
    assert float(count[...]) == 3.0


def test_what_a_cond_writes_keeps_jaxs_weak_type(api):
    # The ref holds what branch 0 (cond's false_fun) gives it: the ref's own (weak) type if it writes nothing.
    jax, jnp, lax = api.top, api.jnp, api.lax
    reprs = []
    for write_false, initial, index in ((True, 0., None), (False, 0., None), (False, jnp.float32(0.), None),
                                        (True, 0., 1), (False, 0., 0)):
        r = jax.new_ref(initial)
        branches = [lambda: r.__setitem__(..., 2.) if write_false else None, lambda: r.__setitem__(..., 1.)]
        if index is None:
            lax.cond(True, branches[1], branches[0])
        else:
            jax.jit(lambda i: lax.switch(i, branches))(index)
        reprs.append(repr(r))
    assert reprs == ["Ref(1., dtype=float32)", "Ref(1., dtype=float32, weak_type=True)", "Ref(1., dtype=float32)",
                     "Ref(1., dtype=float32)", "Ref(0., dtype=float32, weak_type=True)"]


def test_refs_written_in_cond_under_grad_and_vmap_fail_as_in_jax(api):
    jax, jnp, lax = api.top, api.jnp, api.lax
    r = jax.new_ref(0.)

    def f(x):
        lax.cond(x > 0, lambda: r.__setitem__(..., x ** 2), lambda: None)
        return r[...]

    _raises(Exception, lambda: jax.grad(f)(3.), "performing a set/swap operation with a differentiated value on a "
            "non-differentiated array reference of type Ref{float32[]}")
    w = jax.new_ref(jnp.zeros(3))
    _raises(NotImplementedError, lambda: jax.vmap(lambda x: lax.cond(x[0] > 0, lambda: w.__setitem__(..., x),
                                                                    lambda: None))(jnp.ones((2, 3))),
            "State effect not supported in vmap-of-cond.")


def test_vmap_over_ref_arguments(api):
    jax, jnp = api.top, api.jnp
    rs = jax.new_ref(jnp.zeros((2, 3)))
    jax.vmap(lambda r, x: r.__setitem__(..., r[...] + x))(rs, jnp.ones((2, 3)))
    np.testing.assert_array_equal(np.asarray(rs[...]), np.ones((2, 3)))
    jax.jit(jax.vmap(lambda r, x: r.__setitem__(..., r[...] * 2 + x)))(rs, jnp.ones((2, 3)))
    np.testing.assert_array_equal(np.asarray(rs[...]), 3 * np.ones((2, 3)))
    ts = jax.new_ref(jnp.zeros((2, 3)))
    jax.vmap(lambda r, x: r.__setitem__(0, x))(ts, jnp.arange(2.))
    np.testing.assert_array_equal(np.asarray(ts[...]), [[0., 0., 0.], [1., 0., 0.]])
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda r: r[...].sum())(rs)), [9., 9.])
    u = jax.new_ref(jnp.zeros((3,)))
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda r, x: r[...] + x, in_axes=(None, 0))(u, jnp.ones((2, 3)))),
                                  np.ones((2, 3)))


def test_escaped_ref_is_invalid():
    box = []

    @ember.jit
    def f(x):
        box.append(ember.new_ref(x))
        return x

    f(1.0)
    _raises(ValueError, lambda: box[0][...], "no longer valid")
