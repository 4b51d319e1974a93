"""Where PJRT plugins are found: environment variables, then the packages that ship them.

Found without importing anything (a package's directory is located with ``importlib.util.find_spec``),
so looking costs no start-up time and loads no library; a plugin loads when its backend is first used.

- ``EMBER_PJRT_PLUGIN``: a library path, or ``name:path`` pairs separated by commas (names: the
  backend each becomes, such as ``tpu``).
- ``PJRT_NAMES_AND_LIBRARY_PATHS``: JAX's variable of the same form (``name:path,name:path``).
- ``TPU_LIBRARY_PATH``: libtpu's path, as JAX reads it.
- Packages: ``libtpu`` (``libtpu/libtpu.so``: ``pip install ember[tpu]``), the registries' JAX plugin
  packages (``jax_plugins.xla_cuda12`` / ``xla_cuda13``: ``xla_cuda_plugin.so``;
  ``jax_plugins.xla_rocm7``: ``xla_rocm_plugin.so``), and XLA's CPU plugin from
  ``lammps-jax-pjrt-cpu`` (``pip install ember[pjrt-cpu]``), which becomes the backend ``xla_cpu``.
"""
from __future__ import annotations

import importlib.util
import os
from typing import NamedTuple


class PluginSpec(NamedTuple):
    """A plugin found: the backend name it becomes, the library, and where it was found."""

    name: str
    path: str
    source: str

    @property
    def accelerator(self) -> bool:
        """Whether it drives an accelerator (a default backend when found) rather than the host."""
        return self.name != XLA_CPU


XLA_CPU = "xla_cpu"

# (backend name, package, library file inside the package's directory)
PACKAGES = (
    ("tpu", "libtpu", "libtpu.so"),
    ("cuda", "jax_plugins.xla_cuda13", "xla_cuda_plugin.so"),
    ("cuda", "jax_plugins.xla_cuda12", "xla_cuda_plugin.so"),
    ("rocm", "jax_plugins.xla_rocm7", "xla_rocm_plugin.so"),
    (XLA_CPU, "lammps_jax_pjrt_cpu", "pjrt_c_api_cpu_plugin.so"),
)


def _package_dir(package: str) -> str | None:
    """The directory of ``package`` without importing it (its parent, a namespace package, is)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def name_for_path(path: str) -> str:
    """The backend name of a plugin given by path alone: by the platform its file name says."""
    base = os.path.basename(path).lower()
    for word, name in (("tpu", "tpu"), ("cuda", "cuda"), ("rocm", "rocm"), ("cpu", XLA_CPU)):
        if word in base:
            return name
    return "pjrt"


def parse_pairs(value: str, variable: str) -> list[PluginSpec]:
    """``name:path,name:path`` (or a lone path) from an environment variable."""
    out = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        name, sep, path = item.partition(":")
        if not sep or os.sep in name:  # a lone path (which may hold no colon at all)
            name, path = name_for_path(item), item
        out.append(PluginSpec(name.strip(), path.strip(), variable))
    return out


def find_plugins(environ: dict[str, str] | None = None) -> dict[str, PluginSpec]:
    """Every plugin found, by backend name; an environment variable's plugin wins over a package's
    of the same name. Paths that do not exist are left out (a stale variable is not an error
    until that backend is asked for by name)."""
    env = os.environ if environ is None else environ
    found: dict[str, PluginSpec] = {}
    for variable in ("EMBER_PJRT_PLUGIN", "PJRT_NAMES_AND_LIBRARY_PATHS"):
        for spec in parse_pairs(env.get(variable, ""), variable):
            if os.path.isfile(spec.path):
                found.setdefault(spec.name, spec)
    tpu = env.get("TPU_LIBRARY_PATH")
    if tpu and os.path.isfile(tpu):
        found.setdefault("tpu", PluginSpec("tpu", tpu, "TPU_LIBRARY_PATH"))
    for name, package, library in PACKAGES:
        if name in found:
            continue
        directory = _package_dir(package)
        if directory is None:
            continue
        path = os.path.join(directory, library)
        if os.path.isfile(path):
            found[name] = PluginSpec(name, path, f"package {package}")
    return found
