"""Test-suite settings: every traced program is type-checked; hypothesis is kept quick."""
import atexit
import os
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import ember

ember.config.update("check_ir", True)
# The suite (and the processes it starts) never touch the user's disk cache: a private one.
os.environ["EMBER_CACHE_DIR"] = _disk_cache = tempfile.mkdtemp(prefix="ember-test-cache-")
atexit.register(shutil.rmtree, _disk_cache, ignore_errors=True)
# Tests build fresh functions and new signatures on purpose; the warnings about that are
# tested where they are the subject (tests/test_cache.py).
ember.config.update("jit_churn_warning_threshold", 0)
ember.config.update("retrace_warning_threshold", 0)
# Differential tests of native code must run native code: a tiered program's first calls run on
# the reference interpreter, which would compare the reference with itself. Tiering is tested
# where it is the subject (tests/test_tiers.py), where it is turned back on.
os.environ["EMBER_TIERED_COMPILATION"] = "0"  # (the processes the suite starts, too)
ember.config.update("tiered_compilation", False)
# Differential tests must also compile what they run: a program that another test (or another
# worker) kept whole on disk would be loaded, not compiled. Whole programs on disk are tested where
# they are the subject (tests/test_program_cache.py), where they are turned back on.
os.environ["EMBER_PERSISTENT_PROGRAM_CACHE"] = "0"
ember.config.update("persistent_program_cache", False)

settings.register_profile(
    "ember", max_examples=int(os.environ.get("EMBER_HYPOTHESIS_EXAMPLES", "25")), deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("ember")


@pytest.fixture
def x64():
    """Run a test with 64-bit types on."""
    with ember.config.override(enable_x64=True):
        yield


@pytest.fixture(params=[False, True], ids=["x32", "x64"])
def x64_both(request):
    """Run a test twice, with 64-bit types off and on, in ember and JAX together."""
    jax = pytest.importorskip("jax")
    with ember.config.override(enable_x64=request.param), jax.enable_x64(request.param):
        yield request.param


@pytest.fixture
def rng():
    return np.random.default_rng(0)
