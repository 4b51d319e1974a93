"""``ember.compiler``: passes over the IR and the pipeline that runs them.

``optimize(ember.make_jaxpr(f)(x))`` returns the optimized program; see
``ember.compiler.pipeline`` for the stages, switching them off and printing them.
"""
from ember.compiler.cse import eliminate_common_subexpressions  # noqa: F401
from ember.compiler.dce import eliminate_dead_code  # noqa: F401
from ember.compiler.fold import MAX_FOLDED_ELEMENTS, fold_constants  # noqa: F401
from ember.compiler.inline import inline_calls  # noqa: F401
from ember.compiler.pipeline import PIPELINE, optimize  # noqa: F401
from ember.compiler.simplify import simplify  # noqa: F401
from ember.core.primitive import EFFECTFUL  # noqa: F401  (the primitives that passes keep as they are)
