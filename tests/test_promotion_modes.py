"""JAX's configuration of implicit promotion, held against JAX 0.10.2 in this process:
``jax_numpy_dtype_promotion`` ("standard" / "strict": a ``TypePromotionError`` with JAX's message
for every implicit promotion between types, a Python scalar joining its own kind or a wider one)
and ``jax_numpy_rank_promotion`` ("allow" / "warn" / "raise", for operands of different ranks),
set by ``config.update`` or by the ``jax.numpy_dtype_promotion`` / ``jax.numpy_rank_promotion``
context managers; and the same through ``install_as_jax()`` in a subprocess."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import ember
import ember.numpy as ejnp
from ember.compat import jax as compat

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SIDES = {"ember": SimpleNamespace(top=compat, jnp=ejnp, config=ember.config),
         "jax": SimpleNamespace(top=jax, jnp=jnp, config=jax.config)}

DTYPE_CASES = [
    "np_.ones(2, np_.int32) + 1.0", "np_.ones(2, np_.int32) + 1", "np_.ones(2) + 1", "np_.ones(2) * 2.0",
    "np_.ones(2, np_.int8) + np_.ones(2, np_.int16)", "np_.ones(2) + np_.ones(2, np_.int32)",
    "np_.ones(2, bool) + 1", "np_.ones(2, bool) & True", "np_.promote_types(np_.float32, np_.float16)",
    "np_.result_type(np_.int32, np_.float32)", "np_.ones(2, np_.float16) + np_.ones(2, np_.bfloat16)",
    "np_.ones(2, np_.float32) + 1j", "np_.ones(2, np_.complex64) + 1.0", "np_.ones(2, np_.uint8) + 1",
    "np_.arange(3.0) * np_.arange(3)", "np_.arange(3) / 2", "np_.sin(np_.arange(3))", "np_.sum(np_.arange(3))",
    "np_.where(np_.ones(2, bool), np_.ones(2), 0)", "np_.ones(2) ** 2", "np_.maximum(np_.ones(2), 0)",
    "np_.ones(2, np_.int32) == 1.5", "np_.ones(2, np_.int32) < np_.ones(2)",
]


def _outcome(side: SimpleNamespace, expr: str) -> tuple:
    try:
        value = eval(expr, {"np_": side.jnp})
    except Exception as e:  # (the exception's class name and its message, to compare)
        return type(e).__name__, str(e)
    return "ok", str(np.dtype(getattr(value, "dtype", value)))


@pytest.mark.parametrize("mode", ["standard", "strict"])
@pytest.mark.parametrize("expr", DTYPE_CASES)
def test_dtype_promotion_modes_match_jax(mode, expr):
    outcomes = {}
    for name, side in SIDES.items():
        with side.top.numpy_dtype_promotion(mode):
            outcomes[name] = _outcome(side, expr)
        assert side.config.jax_numpy_dtype_promotion == "standard"  # (restored on leaving the block)
    ours, theirs = outcomes["ember"], outcomes["jax"]
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "ok":
        assert ours == theirs
    else:  # (JAX lists the operands' types in no fixed order: the same names, the same text after them)
        (our_types, our_text), (their_types, their_text) = (m.split(" have ", 1) for m in (ours[1], theirs[1]))
        assert ours[0] == "TypePromotionError" and our_text == their_text, (ours, theirs)
        assert sorted(re.findall(r"\w+", our_types)) == sorted(re.findall(r"\w+", their_types)), (ours, theirs)


def test_strict_promotion_error_is_the_dtypes_type_promotion_error():
    with compat.numpy_dtype_promotion("strict"), pytest.raises(ember.dtypes.TypePromotionError) as info:
        ejnp.ones(2) + ejnp.ones(2, ejnp.int32)
    assert isinstance(info.value, ValueError) and compat.dtypes.TypePromotionError is ember.dtypes.TypePromotionError
    assert "when jax_numpy_dtype_promotion=strict" in str(info.value)


def test_strict_promotion_applies_inside_jit_and_the_cache_knows_the_mode():
    f = ember.jit(lambda x, y: x + y)
    x, y = ejnp.ones(2), ejnp.ones(2, ejnp.int32)
    assert f(x, y).dtype == np.float32  # (traced and cached under "standard")
    ember.config.update("jax_numpy_dtype_promotion", "strict")
    try:
        with pytest.raises(ember.dtypes.TypePromotionError):
            f(x, y)
    finally:
        ember.config.update("jax_numpy_dtype_promotion", "standard")
    assert f(x, y).dtype == np.float32


RANK_CASES = ["a + b", "a * b", "a / b", "a ** b", "a // b", "a % b", "a == b", "a < b", "np_.maximum(a, b)",
              "np_.logical_and(a > 0, b > 0)", "np_.arctan2(a, b)", "np_.hypot(a, b)", "np_.logaddexp(a, b)",
              "np_.float_power(a, b)", "np_.copysign(a, b)", "np_.nextafter(a, b)", "b + np_.ones(1)",
              "np_.ones((1, 3)) + a", "a + 1", "a + np_.float32(1)", "np_.where(b > 0, a, b)", "np_.dot(a, b.T)",
              "a @ b.T", "np_.left_shift(a.astype(int), b.astype(int))", "a.astype(int) & b.astype(int)"]


@pytest.mark.parametrize("mode", ["allow", "warn", "raise"])
@pytest.mark.parametrize("expr", RANK_CASES)
def test_rank_promotion_modes_match_jax(mode, expr):
    outcomes = {}
    for name, side in SIDES.items():
        scope = {"np_": side.jnp, "a": side.jnp.ones(3), "b": side.jnp.ones((2, 3))}
        with side.top.numpy_rank_promotion(mode), warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                shape = eval(expr, scope).shape
                outcomes[name] = ("ok", shape, [str(w.message) for w in seen if "rank promotion" in str(w.message)])
            except ValueError as e:
                outcomes[name] = ("ValueError", str(e))
        assert side.config.jax_numpy_rank_promotion == "allow"
    assert outcomes["ember"] == outcomes["jax"]


def test_bad_mode_values_are_refused_as_jax_refuses_them():
    for flag in ("jax_numpy_dtype_promotion", "jax_numpy_rank_promotion"):
        for side in SIDES.values():
            with pytest.raises(ValueError):
                side.config.update(flag, "sometimes")
        with pytest.raises(ValueError, match="must be one of"):
            ember.config.update(flag, "sometimes")


SWITCH = """
import warnings, jax, jax.numpy as jnp
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
assert jax.config.jax_numpy_dtype_promotion == "strict" and jax.numpy_rank_promotion.value == "raise"
try:
    jnp.ones(2) + jnp.ones(2, jnp.int32)
except jax.dtypes.TypePromotionError as e:
    assert "jax_numpy_dtype_promotion=strict" in str(e)
else:
    raise AssertionError("strict")
try:
    jnp.ones(3) + jnp.ones((2, 3))
except ValueError as e:
    assert "jax_numpy_rank_promotion='raise'" in str(e)
else:
    raise AssertionError("raise")
with jax.numpy_rank_promotion("allow"), jax.numpy_dtype_promotion("standard"):
    assert (jnp.ones(3) + jnp.ones((2, 3), jnp.int32)).shape == (2, 3)
with jax.numpy_rank_promotion("warn"), warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    jnp.ones(3) + jnp.ones((2, 3))
assert any("Following NumPy automatic rank promotion for add" in str(w.message) for w in seen)
print("ok")
"""


def test_the_modes_work_under_the_switch():
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", "import ember\nember.install_as_jax()\n" + SWITCH],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
