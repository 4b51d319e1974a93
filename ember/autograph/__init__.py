"""autograph: Python control flow on traced values, converted (``jit(f, autograph=True)``).

``if`` / ``while`` / ``for`` / ``break`` / ``continue`` / ``return``, conditional expressions and
``and`` / ``or`` / ``not`` decide at run time: on Python values they run as Python, on traced
values they become ``lax.cond``, ``while_loop``, ``fori_loop`` or ``scan``. See docs/autograph.md.
"""
from ember.autograph.conversion import convert, converting, is_library
from ember.autograph.operators import Undefined, start_recording, stop_recording

__all__ = ["convert", "converting", "is_library", "Undefined", "start_recording", "stop_recording"]
