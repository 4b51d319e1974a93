"""``jax.extend.source_info_util``: libraries register their files as internal frames (kept
with ``jax._src.traceback_util``'s list)."""
from ember.compat.jax._src.traceback_util import register_exclusion  # noqa: F401
