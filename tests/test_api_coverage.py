"""Every public function of ember.numpy, ember.lax and ember.nn is exercised by some test
(named as ``jnp.NAME`` / ``lax.NAME`` / ``nn.NAME`` in a test file), so none ships untested."""
import pathlib
import re
import types

import pytest

import ember.numpy as jnp
from ember import lax, nn

TEST_SOURCE = "\n".join(p.read_text() for p in pathlib.Path(__file__).parent.glob("*.py"))


def _public_functions(module):
    for name in dir(module):
        value = getattr(module, name)
        if name.startswith("_") or isinstance(value, (type, types.ModuleType)) or not callable(value):
            continue
        yield name


@pytest.mark.parametrize("prefix,module", [("jnp", jnp), ("lax", lax), ("nn", nn)])
def test_every_public_function_is_tested(prefix, module):
    named = set(re.findall(rf"\b{prefix}\.(\w+)", TEST_SOURCE))  # (one pass: a search per name took seconds)
    untested = [n for n in _public_functions(module) if n not in named]
    assert not untested, f"public {prefix} functions no test calls: {untested}"
