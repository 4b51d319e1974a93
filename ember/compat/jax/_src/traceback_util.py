"""``jax._src.traceback_util``: libraries register their own files as internal frames, to be
left out of tracebacks; ember keeps the list (its tracebacks show the user's frames as they are)."""
from __future__ import annotations

from typing import Callable

_exclusions: list[str] = []


def register_exclusion(path: str) -> None:
    _exclusions.append(path)


def include_frame(frame: object) -> bool:
    filename = getattr(getattr(frame, "f_code", None), "co_filename", "") or getattr(frame, "filename", "")
    return not any(filename.startswith(path) for path in _exclusions)


def api_boundary(fun: Callable) -> Callable:
    return fun
