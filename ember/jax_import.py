"""``install_as_jax``: from the call on, ``import jax`` and every ``jax.*`` module resolve to ember.

Programs and libraries written against JAX then run on ember unchanged. A finder at the front of
``sys.meta_path`` answers every ``jax`` name:

- ``ALIASES`` maps JAX's modules whose API ember has under its own name to that module
  (``jax.numpy`` *is* ``ember.numpy``, so ``jax.numpy.linalg`` is ``ember.numpy.linalg``);
- every other name is looked up in ``ember.compat.jax``, the package that holds JAX's module
  paths (``jax`` itself, ``jax.typing``, ``jax.flatten_util``, ...) as ember's own code;
- a name in neither is not found (``ModuleNotFoundError``, as JAX gives for a module it does not
  have), and real JAX is never reached.

``jaxlib`` is blocked: it is JAX's compiled half, which cannot run with ember's ``jax``. Nothing
changes until ``install_as_jax`` is called; it refuses when JAX was imported before it (both
would then be in use, and arrays of one would reach the other). ``python -m ember.run
script.py`` runs a script with the switch on.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

ALIASES = {
    "jax.numpy": "ember.numpy",
    "jax.lax": "ember.lax",
    "jax.random": "ember.random",
    "jax.nn": "ember.nn",
    "jax.scipy": "ember.scipy",
    "jax.tree_util": "ember.tree_util",
    "jax.tree": "ember.tree",
    "jax.debug": "ember.debug",
    "jax.errors": "ember.errors",
    "jax.sharding": "ember.sharding",
    "jax.example_libraries": "ember.example_libraries",
    "jax.test_util": "ember.test_util",
}
COMPAT = "ember.compat.jax"


def _target(fullname: str) -> str | None:
    """The ember module that stands for JAX's ``fullname``, or None if there is none."""
    for alias, module in ALIASES.items():
        if fullname == alias or fullname.startswith(alias + "."):
            candidates = [module + fullname[len(alias):]]
            break
    else:
        candidates = [COMPAT + fullname[len("jax"):]]
    for candidate in candidates:
        if importlib.util.find_spec(candidate) is not None:
            return candidate
    return None


class _Loader(importlib.abc.Loader):
    """Loads a ``jax`` name as the ember module that stands for it (the same module object)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        pass  # (imported by create_module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec:
        root = fullname.partition(".")[0]
        if root == "jaxlib":
            raise ModuleNotFoundError(f"No module named {fullname!r}: jaxlib is blocked while ember stands in for "
                                      "jax (ember.install_as_jax())", name=fullname)
        if root != "jax":
            return None
        module = _target(fullname)
        if module is None:
            raise ModuleNotFoundError(f"No module named {fullname!r}: ember, standing in for jax, does not have it",
                                      name=fullname)
        spec = importlib.util.spec_from_loader(fullname, _Loader(module))
        if spec is not None and hasattr(sys.modules.get(module) or importlib.import_module(module), "__path__"):
            spec.submodule_search_locations = []  # (a package: its submodules are found here too)
        return spec


_FINDER = _Finder()


def install_as_jax() -> None:
    """Make ``import jax`` (and every ``jax.*`` module) resolve to ember for the rest of the
    process, and block ``jaxlib``. Calling it again does nothing; it raises ``RuntimeError``
    if JAX was imported already."""
    if _FINDER in sys.meta_path:
        return
    imported = sorted(name for name in sys.modules if name.partition(".")[0] in ("jax", "jaxlib"))
    if imported:
        raise RuntimeError(f"ember.install_as_jax(): JAX is imported already ({', '.join(imported[:3])}"
                           f"{', ...' if len(imported) > 3 else ''}); call it before anything imports jax "
                           "(first thing in the program, or run it with `python -m ember.run script.py`)")
    sys.meta_path.insert(0, _FINDER)
