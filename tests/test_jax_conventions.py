"""Behaviours where ember follows a JAX convention that libraries' own tests rely on, each
compared with JAX 0.10.2 itself: reduce_window's init values, what jvp returns for Python scalars,
the attributes of transformed functions, exceptions raised inside callbacks, how often a custom
rule is traced, the legacy cond signature, fori_loop's bounds and deep static recursion."""
from __future__ import annotations

import re

import jax
import jax.numpy as jax_jnp
import numpy as np
import pytest

import ember
from ember import lax


# --- reduce_window with any init value JAX takes ----------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.uint8])
@pytest.mark.parametrize("name,init", [("max", -np.inf), ("max", 3), ("min", np.inf), ("min", 2), ("add", 1),
                                       ("add", 0), ("max", -2.5)])
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_reduce_window_init_values_as_jax(dtype, name, init, padding) -> None:
    x = np.arange(12).reshape(3, 4).astype(dtype)
    try:
        theirs = jax.lax.reduce_window(jax_jnp.asarray(x), init, getattr(jax.lax, name), (2, 2), (1, 1), padding)
    except TypeError as refusal:  # an init value of another dtype that is not the identity
        with pytest.raises(TypeError, match=re.escape(str(refusal).split(".")[0])):
            lax.reduce_window(x, init, getattr(lax, name), (2, 2), (1, 1), padding)
        return
    ours = lax.reduce_window(x, init, getattr(lax, name), (2, 2), (1, 1), padding)
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


def test_reduce_window_takes_a_traced_init_value() -> None:
    x = np.arange(6.0, dtype=np.float32)
    f = lambda x, init: lax.reduce_window(x, init, lax.max, (2,), (1,), "SAME")  # noqa: E731
    np.testing.assert_array_equal(ember.jit(f)(x, 2.0), jax.jit(lambda x, i: jax.lax.reduce_window(
        x, i, jax.lax.max, (2,), (1,), "SAME"))(x, 2.0))


# --- transformed functions carry the wrapped function's identity, as functools.wraps gives it -------
def _documented(x, y=1):
    """The function's own docstring."""
    return x * y


_documented.marker = "kept"


@pytest.mark.parametrize("name", ["jit", "vmap", "grad", "value_and_grad", "jacfwd", "jacrev", "checkpoint",
                                  "custom_jvp", "custom_vjp"])
def test_transformations_wrap_the_function_as_jax(name) -> None:
    ours, theirs = getattr(ember, name)(_documented), getattr(jax, name)(_documented)
    for attribute in ("__name__", "__qualname__", "__module__", "marker"):
        assert getattr(ours, attribute) == getattr(theirs, attribute), attribute
    assert ours.__wrapped__ is theirs.__wrapped__ is _documented
    if name not in ("vmap", "grad", "value_and_grad", "jacfwd", "jacrev"):  # (JAX writes its own docstring there)
        assert ours.__doc__ == theirs.__doc__


def test_jit_of_jit_keeps_its_own_state() -> None:
    inner = ember.jit(_documented)
    outer = ember.jit(inner, static_argnums=1)
    assert outer.__wrapped__ is inner and outer._cache is not inner._cache
    assert int(outer(3, 2)) == 6 and outer.marker == "kept"
