"""The fusion pass: which equations share a kernel, and that fused programs mean the same."""
from __future__ import annotations

import numpy as np
import pytest
from util import assert_allclose

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.reference import eval_closed
from ember.compiler import inline_calls
from ember.compiler.broadcasts import explicit_broadcasts
from ember.compiler.fusion import FUSIBLE, fuse, fusion_p
from ember.core.verify import check_jaxpr


def _fused(f, *args, **kwargs):
    # (as the compiler does first: jnp.where is a jit call; size-1 broadcasts become broadcast_in_dim)
    closed = explicit_broadcasts(inline_calls(ember.make_jaxpr(f)(*args)))
    fused = fuse(closed, **kwargs)
    check_jaxpr(fused)
    for want, got in zip(eval_closed(closed, *args), eval_closed(fused, *args)):
        assert_allclose(got, want)
    return fused


def _kernels(closed):
    return [e for e in closed.eqns if e.primitive is fusion_p]


def _primitives(kernel_eqn):
    return [e.primitive.name for e in kernel_eqn.params["jaxpr"].eqns]


def softmax(x):
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)


def layer_norm(x):
    centered = x - jnp.mean(x, axis=-1, keepdims=True)
    return centered * lax.rsqrt(jnp.mean(centered * centered, axis=-1, keepdims=True) + 1e-5)


def logsumexp(x):
    m = jnp.max(x, axis=-1)
    return m + jnp.log(jnp.sum(jnp.exp(x - m[:, None]), axis=-1))


X = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)


def test_elementwise_chain_with_scalars_is_one_kernel():
    fused = _fused(lambda x: 1.05 * jnp.where(x > 0, x, 1.67 * (jnp.exp(x) - 1)), X)
    assert [e.primitive for e in fused.eqns] == [fusion_p]
    assert "exp" in _primitives(fused.eqns[0]) and "select_n" in _primitives(fused.eqns[0])


@pytest.mark.parametrize("fn, reductions", [(softmax, 2), (layer_norm, 2), (logsumexp, 2)])
def test_row_wise_patterns_are_one_kernel(fn, reductions):
    """Reductions over the last axis broadcast back along it fuse with their producers and
    consumers: one kernel, which reads each row once per reduction plus once for the output."""
    fused = _fused(fn, X)
    (kernel,) = _kernels(fused)
    assert len(fused.eqns) == 1
    assert sum(name.startswith("reduce_") for name in _primitives(kernel)) == reductions


def test_broadcast_that_reuses_a_reduction_keeps_it_out():
    """A column sum spread over every row would be recomputed per row: it is materialized."""
    fused = _fused(lambda x: x - jnp.sum(x, axis=0), X)
    kernels = _kernels(fused)
    assert len(kernels) == 2
    assert _primitives(kernels[0]) == ["reduce_sum"]


def test_cheap_producers_fuse_under_reusing_broadcasts():
    fused = _fused(lambda x, v: x * (v * 2.0 + 1.0), X, np.arange(16, dtype=np.float32))
    assert len(_kernels(fused)) == 1


def test_program_outputs_end_kernels():
    fused = _fused(lambda x: (jnp.exp(x), jnp.exp(x) * 2.0), X)
    assert len(_kernels(fused)) >= 2
    outputs = {id(v) for v in fused.jaxpr.outvars}
    assert all(id(e.outvars[0]) in outputs or any(id(e.outvars[0]) in {id(a) for a in u.invars}
                                                  for u in fused.eqns) for e in fused.eqns)


def test_values_with_users_in_two_kernels_are_not_duplicated():
    def f(x):
        y = jnp.exp(x)
        return jnp.sum(y, axis=0), jnp.sum(y, axis=1)

    fused = _fused(f, X)
    exps = [k for k in _kernels(fused) if "exp" in _primitives(k)]
    assert len(exps) == 1


def test_the_predicate_decides():
    no_exp = _fused(lambda x: jnp.exp(x * 2.0) + 1.0, X,
                    can_fuse=lambda e: e.primitive in FUSIBLE and e.primitive.name != "exp")
    assert [e.primitive.name for e in no_exp.eqns] == ["fusion", "exp", "fusion"]


def test_index_remapping_and_iota_fuse():
    def f(x):
        y = jnp.concatenate([x[::2, ::-1], x[1::2]], axis=1).T
        return jnp.pad(y, ((1, 0), (0, 2))) + jnp.arange(6, dtype=jnp.float32)[None, :]

    fused = _fused(f, X)
    assert len(fused.eqns) == 1


def test_kernels_print_type_check_and_run_on_the_reference():
    fused = _fused(softmax, X)
    text = str(fused)
    assert "fusion[" in text and "reduce_max" in text
    (out,) = eval_closed(fused, X)
    shifted = np.exp(X - X.max(-1, keepdims=True))
    assert_allclose(out, shifted / shifted.sum(-1, keepdims=True))


def test_fusion_rule_checks_operand_types():
    fused = _fused(lambda x: x + 1.0, X)
    kernel = fused.eqns[0]
    with pytest.raises(TypeError, match="fusion"):
        fusion_p.bind(np.ones((3,), np.int32), **kernel.params)


def test_a_program_without_fusible_work_is_unchanged():
    closed = ember.make_jaxpr(lambda x: jnp.sort(x))(X)
    assert [e.primitive for e in fuse(closed).eqns] == [e.primitive for e in closed.eqns]
