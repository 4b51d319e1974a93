"""The tracing core: IR, printer, type checker, constants, nested jit, leaked tracers."""
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.core.ir import Eqn, Jaxpr, Literal, Var
from ember.core.verify import IRTypeError, check_jaxpr


def test_printer_golden_selu():
    def selu(x, alpha=1.67, lmbda=1.05):
        return lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)

    text = str(ember.make_jaxpr(selu)(jnp.zeros(1000000)))
    assert text == (
        "{ lambda ; a:f32[1000000]. let\n"
        "    b:bool[1000000] = gt a 0.0:f32[]\n"
        "    c:f32[1000000] = exp a\n"
        "    d:f32[1000000] = mul 1.6699999570846558:f32[] c\n"
        "    e:f32[1000000] = sub d 1.6699999570846558:f32[]\n"
        "    f:f32[1000000] = jit[\n"  # (JAX 0.10 stages jnp.where as a named sub-program)
        "      name=_where\n"
        "      jaxpr={ lambda ; b:bool[1000000] a:f32[1000000] e:f32[1000000]. let\n"
        "          f:f32[1000000] = select_n b e a\n"
        "        in (f,) }\n"
        "    ] b a e\n"
        "    g:f32[1000000] = mul 1.0499999523162842:f32[] f\n"
        "  in (g,) }")


def test_printer_params_constvars_and_multiple_outputs():
    w = np.ones((2, 3), np.float32)

    def f(x):
        y = lax.reshape(x, (3, 2))
        return y, lax.convert_element_type(x, jnp.int32) + w.astype(np.int32)

    text = str(ember.make_jaxpr(f)(jnp.zeros((2, 3))))
    assert text.startswith("{ lambda a:i32[2,3]; b:f32[2,3]. let")
    assert "reshape[dimensions=None new_sizes=(3, 2) sharding=None] b" in text  # (JAX 0.10: keys sorted)
    assert "convert_element_type[new_dtype=int32 weak_type=False] b" in text
    assert text.endswith("in (c, e) }")


def test_variable_names_continue_past_z():
    def f(x):
        for _ in range(30):
            x = x + 1.0
        return x

    text = str(ember.make_jaxpr(f)(1.0))
    assert "ba:f32[] = add" in text


def test_closed_over_arrays_become_constvars_and_scalars_literals():
    big = jnp.arange(4.0)
    scale = 3.0

    closed = ember.make_jaxpr(lambda x: x * big + scale)(jnp.zeros(4))
    assert len(closed.consts) == 1 and closed.jaxpr.constvars[0].aval.shape == (4,)
    assert any(isinstance(a, Literal) and float(a.val) == 3.0 for e in closed.eqns for a in e.invars)


def test_nested_jit_is_a_call_equation_with_its_sub_program():
    @ember.jit
    def inner(x):
        return jnp.sin(x) * 2.0

    def outer(x):
        return inner(x) + 1.0

    closed = ember.make_jaxpr(outer)(jnp.ones(3))
    assert [e.primitive.name for e in closed.eqns] == ["jit", "add"]
    text = str(closed)
    assert "jit[\n      name=inner\n      jaxpr={ lambda ; a:f32[3]. let" in text and "sin" in text
    np.testing.assert_allclose(ember.jit(outer)(jnp.ones(3)), np.sin(np.ones(3, np.float32)) * 2 + 1, rtol=1e-6)


def test_nested_jit_closing_over_an_outer_tracer():
    def outer(x, y):
        @ember.jit
        def inner(z):
            return z + y  # y is a tracer of the outer trace

        return inner(x) * 2

    out = ember.jit(outer)(jnp.ones(3), jnp.full(3, 2.0))
    np.testing.assert_allclose(out, np.full(3, 6.0))


def test_type_checker_accepts_traced_programs_and_rejects_broken_ones():
    closed = ember.make_jaxpr(lambda x: jnp.exp(x) + 1.0)(jnp.ones(3))
    check_jaxpr(closed)
    j = closed.jaxpr
    bad_out = Jaxpr(j.constvars, j.invars, [e.replace(outvars=[Var(e.outvars[0].aval._replace(shape=(4,)))])
                                           for e in j.eqns[:1]], j.outvars)
    with pytest.raises(IRTypeError):
        check_jaxpr(bad_out)
    unbound = Jaxpr([], [], [Eqn(lax.elementwise.exp_p, [Var(j.invars[0].aval)], {},
                                 [Var(j.invars[0].aval)])], [])
    with pytest.raises(IRTypeError, match="used before it is defined"):
        check_jaxpr(unbound)


def test_leaked_tracer_is_an_unexpected_tracer_error():
    leaked = []

    @ember.jit
    def f(x):
        leaked.append(x)
        return x * 2

    f(jnp.ones(2))
    with pytest.raises(ember.errors.UnexpectedTracerError, match="escaped"):
        leaked[0] + 1
    with pytest.raises(ember.errors.UnexpectedTracerError):
        ember.jit(lambda y: y + leaked[0])(1.0)


@pytest.mark.parametrize("convert,error", [
    (bool, ember.errors.TracerBoolConversionError),
    (int, ember.errors.TracerIntegerConversionError),
    (float, ember.errors.ConcretizationTypeError),
    (lambda x: list(range(x)), ember.errors.TracerIntegerConversionError),
    (lambda x: [1, 2, 3][x], ember.errors.TracerIntegerConversionError),
    (np.asarray, ember.errors.TracerArrayConversionError),
])
def test_concretization_errors(convert, error):
    def f(x):
        convert(x)
        return x

    with pytest.raises(error) as info:
        ember.jit(f)(jnp.asarray(3))
    message = str(info.value)
    assert "argument `x` of `f`" in message
    # The innermost user line: the conversion itself (inside a lambda for some cases).
    assert "test_core.py" in message and ("convert(x)" in message or "lambda x:" in message)
    assert isinstance(info.value, TypeError)


def test_shape_from_a_traced_value_names_the_fix():
    def f(x, n):
        return jnp.zeros(n) + x

    # JAX's TypeError for a traced shape, with the tracer's explanation and fix
    with pytest.raises(TypeError, match="(?s)Shapes must be 1D sequences.*static_argnames=\\('n',\\)"):
        ember.jit(f)(1.0, 3)
    assert ember.jit(f, static_argnames="n")(1.0, 3).shape == (3,)


def test_elementwise_shape_mismatch_names_both_shapes():
    with pytest.raises(TypeError, match=r"\(3,\).*\(4,\)"):
        jnp.ones(3) + jnp.ones(4)
    with pytest.raises(TypeError, match=r"\(3,\).*\(4,\)"):
        ember.jit(lambda a, b: a * b)(jnp.ones(3), jnp.ones(4))
    with pytest.raises(TypeError, match="add requires operands of one dtype"):
        lax.add(jnp.ones(3, jnp.float32), jnp.ones(3, jnp.int32))


def test_array_methods_work_on_tracers():
    """Tracer attributes must not shadow array methods (x.var(), x.sum(), ...)."""
    def f(x):
        return x.var(), x.std(), x.mean(axis=0), x.sum(), x.T

    eager = f(jnp.arange(6.0).reshape(2, 3))
    jitted = ember.jit(f)(jnp.arange(6.0).reshape(2, 3))
    for a, b in zip(eager, jitted):
        np.testing.assert_allclose(a, b, rtol=1e-6)
