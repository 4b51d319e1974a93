"""Arrays to and from files, strings and text: NumPy's functions, as JAX has them.

They run on the host, outside any trace: ``load`` and ``fromstring`` return ember arrays of
NumPy's values (canonicalized: float64 data is float32 with x64 off); ``save``, ``savez`` and the
printing functions are NumPy's own (they read an ember array through ``__array__``).
``fromiter`` and ``fromfile`` are refused, as in JAX: each consumes its iterator or file, a side
effect a traced function would perform once, when traced.
"""
from __future__ import annotations

import os
from typing import IO, Any

import numpy as np

from ember import dtypes
from ember.numpy.core import asarray

__all__ = ["array_repr", "array_str", "fromfile", "fromiter", "fromstring", "get_printoptions", "load",
           "printoptions", "save", "savez", "set_printoptions"]

# NumPy's, as in JAX (``jnp.save is np.save``): they need only an array's values.
array_repr, array_str, save, savez = np.array_repr, np.array_str, np.save, np.savez


def get_printoptions() -> dict[str, Any]:
    """NumPy's print options, which ember's array ``repr`` and ``str`` follow."""
    return np.get_printoptions()


def set_printoptions(*args: Any, **kwargs: Any) -> None:
    """Set NumPy's print options (``precision``, ``threshold``, ...), used by ember's ``repr`` too."""
    return np.set_printoptions(*args, **kwargs)


def printoptions(*args: Any, **kwargs: Any) -> Any:
    """A context manager setting NumPy's print options for its block (``np.printoptions``)."""
    return np.printoptions(*args, **kwargs)


def fromstring(string: str, dtype: Any = float, count: int = -1, *, sep: str) -> Any:
    """The numbers in the text ``string``, separated by ``sep`` (NumPy's parser), as an array."""
    return asarray(np.fromstring(string=string, dtype=dtype, count=count, sep=sep))


def load(file: IO[bytes] | str | os.PathLike[Any], *args: Any, **kwargs: Any) -> Any:
    """``np.load``, with an ``.npy`` array returned as an ember array; bfloat16 data (which NumPy
    saves as two-byte voids, 'V2') comes back as bfloat16. Other results (``.npz`` archives,
    object arrays, dtypes ember does not hold) are NumPy's, unchanged."""
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray):
        if out.dtype == "V2":
            out = out.view(dtypes.bfloat16)
        try:
            out = asarray(out)
        except (TypeError, AssertionError):  # (a dtype ember cannot hold)
            pass
    return out


def _refuse(name: str) -> NotImplementedError:
    return NotImplementedError(
        f"jnp.{name}() is not implemented because it may be non-pure and thus unsafe for use with JIT and other "
        f"JAX transformations. Consider using jnp.asarray(np.{name}(...)) instead, although care should be taken "
        f"if np.{name} is used within a jax transformations because of its potential side-effect of consuming the "
        f"{'iterable' if name == 'fromiter' else 'file'} object; for more information see "
        "https://docs.jax.dev/en/latest/notebooks/Common_Gotchas_in_JAX.html#pure-functions")


def fromiter(*args: Any, **kwargs: Any) -> Any:
    """Refused, as in JAX (it consumes its iterable): write ``jnp.asarray(np.fromiter(...))``."""
    raise _refuse("fromiter")


def fromfile(*args: Any, **kwargs: Any) -> Any:
    """Refused, as in JAX (it consumes its file): write ``jnp.asarray(np.fromfile(...))``."""
    raise _refuse("fromfile")
