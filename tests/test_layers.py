"""The layer order of ember's rooms, held: every import points down.

A room is a subpackage of ``ember`` (``ember/core``, ``ember/lax``, ...) or a top-level module
(``ember/api.py``); ``ember/__init__.py`` is the room ``ember``, the package's public face. Every
ember import, at module level or inside a function, is an arrow from the importing room to the
imported one, and may only point to a room lower in ``LAYERS``. An import inside a function
(a lazy one) must say why on its line: it is for start-up time or an optional dependency, never
to dodge a cycle. ``docs/ARCHITECTURE.md`` lists the same order, and says why.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Bottom to top: a room may import the rooms before it, never those after it.
LAYERS = (
    "errors", "config", "version", "dtypes", "tree_util", "tree",  # leaves
    "jax_import",    # install_as_jax: a finder that imports ember's modules by name
    "core",          # avals, Primitive and its rule tables, tracers, the IR, Array, evaluation, call primitives
    "lax",           # every other primitive with its shape rule; control flow
    "compiler",      # passes over the IR and fusion
    "backends",      # the reference interpreter's rules, the CPU backend, the disk cache of code
    "runtime",       # executables, the jit cache, AOT stages
    "transforms",    # jvp, partial evaluation, transpose, vmap, custom rules, checkpoint
    "autograph",     # Python control flow on traced values, converted into lax's (jit(f, autograph=True))
    "api",           # jit, make_jaxpr, eval_shape
    "callbacks", "debug",                # host callbacks and their rules
    "numpy", "utilities",                # jnp; JAX's small top-level helpers (device_put, ...)
    "distributed",   # several processes over MPI: the global devices, the MPI transport of collectives
    "parallel",      # pmap and shard_map: one program per device, or a batched program
    "partition",     # jit with in_shardings: a program partitioned into one per device
    "sharding",      # jax.sharding: meshes, partition specs, shardings and reshard
    "random", "nn", "scipy",             # user libraries over jnp
    "example_libraries",                 # jax.example_libraries: stax and optimizers, over jnp and nn
    "test_util",     # jax.test_util: derivatives against finite differences
    "ember",         # the package: its public names
    "compat",        # JAX's module paths (the jax module while ember stands in for it)
    "run",           # python -m ember.run script.py: a JAX program with the switch on
    "demo",          # the tutorial, a user of the package
)
RANK = {room: i for i, room in enumerate(LAYERS)}
MAX_LAZY_IMPORTS = 5


class Arrow(NamedTuple):
    path: str
    line: int
    source: str
    target: str
    module: str
    lazy: bool
    commented: bool


def room_of(module: str, rooms: set[str]) -> str:
    """The room of a dotted module name inside ember (``ember.core.ir`` -> ``core``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in rooms else "ember"


def module_name(path: str) -> str:
    name = path[:-3].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def arrows(sources: dict[str, str]) -> list[Arrow]:
    """Every ember import in ``sources`` ({"ember/x/y.py": text}) as an arrow between rooms."""
    rooms = {p.split("/")[1].removesuffix(".py") for p in sources if p.count("/") >= 1} - {"__init__"}
    found = []
    for path, text in sorted(sources.items()):
        module = module_name(path)
        source = room_of(module, rooms)
        lines = text.splitlines()
        tree = ast.parse(text, filename=path)

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for target_module in imported_modules(child, module, path.endswith("__init__.py")):
                        if target_module == "ember" or target_module.startswith("ember."):
                            found.append(Arrow(path, child.lineno, source, room_of(target_module, rooms),
                                               target_module, in_function, "#" in lines[child.lineno - 1]))
                visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        visit(tree, False)
    return found


def imported_modules(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The modules an import statement names (``from ember import lax`` names ``ember.lax``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # relative: resolve against the importing module's package
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([node.module] if node.module else []))
    if base == "ember":
        return [f"ember.{alias.name}" for alias in node.names]
    return [base]


def violations(sources: dict[str, str]) -> list[str]:
    """What breaks the layer order, one readable line each (empty when all is well)."""
    problems = []
    found = arrows(sources)
    for room in sorted({a.source for a in found} | {a.target for a in found}):
        if room not in RANK:
            problems.append(f"room {room!r} is not in the layer order: add it to LAYERS in tests/test_layers.py "
                            "and to docs/ARCHITECTURE.md, at the height of what it imports")
    for a in found:
        if a.source == a.target or a.source not in RANK or a.target not in RANK:
            continue
        if RANK[a.target] > RANK[a.source]:
            problems.append(
                f"{a.path}:{a.line}: `{a.source}` imports {a.module}, but `{a.target}` is above `{a.source}` in "
                f"the layer order ({' < '.join(LAYERS)}). Move what {a.source} needs down to it (or lower), or "
                f"let `{a.target}` register into a table that `{a.source}` owns.")
    lazy = [a for a in found if a.lazy]
    for a in lazy:
        if not a.commented:
            problems.append(f"{a.path}:{a.line}: a function-local import of {a.module} without a comment saying why "
                            "it must be lazy (start-up time, an optional dependency); import it at the top instead")
    if len({(a.path, a.line) for a in lazy}) > MAX_LAZY_IMPORTS:
        listed = ", ".join(sorted({f"{a.path}:{a.line}" for a in lazy}))
        problems.append(f"{len(lazy)} function-local ember imports (at most {MAX_LAZY_IMPORTS}): {listed}")
    return problems


def package_sources() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text() for p in sorted((ROOT / "ember").rglob("*.py"))}


def test_imports_point_down_the_layer_order():
    problems = violations(package_sources())
    assert not problems, "\n".join(problems)


def test_every_room_has_a_place_in_the_order():
    rooms = {p.name.removesuffix(".py") for p in (ROOT / "ember").iterdir()
             if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()}
    assert rooms | {"ember"} == set(LAYERS)


def test_the_architecture_document_states_the_same_order():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    block = text.split("<!-- layers: top to bottom -->", 1)[1].split("```", 2)[1]
    stated = [name for line in block.splitlines() for name in re.findall(r"\b([a-z_]+)(?:/|\.py\b)", line)]
    assert list(reversed(stated)) == [room for room in LAYERS if room != "ember"]


# --- the checker itself catches what it must ------------------------------------------------------
GOOD = {
    "ember/__init__.py": "from ember.api import jit\n",
    "ember/core/__init__.py": "",
    "ember/core/ir.py": "from ember import dtypes\n",
    "ember/dtypes.py": "from ember.config import config\n",
    "ember/config.py": "",
    "ember/numpy/__init__.py": "from ember.core.ir import Jaxpr\nimport ember.lax\n",
    "ember/lax/__init__.py": "",
    "ember/api.py": "",
}


def test_the_checker_accepts_downward_imports():
    assert violations(GOOD) == []


def test_the_checker_names_file_line_and_rooms_of_an_upward_import():
    bad = {**GOOD, "ember/core/ir.py": "from ember import dtypes\nfrom ember.numpy import asarray\n"}
    problems = violations(bad)
    assert len(problems) == 1
    assert problems[0].startswith("ember/core/ir.py:2: `core` imports ember.numpy, but `numpy` is above `core`")


@pytest.mark.parametrize("statement", ["import ember.api", "from ember import api", "from .. import api",
                                       "from ember.api import jit"])
def test_the_checker_sees_every_spelling_of_an_import(statement):
    bad = {**GOOD, "ember/core/ir.py": f"def f():\n    {statement}  # start-up time\n"}
    problems = violations(bad)
    assert len(problems) == 1 and problems[0].startswith("ember/core/ir.py:2: `core` imports ember.api")


def test_the_checker_wants_a_reason_for_a_lazy_import():
    lazy = {**GOOD, "ember/numpy/__init__.py": "def f():\n    from ember.lax import add\n"}
    assert violations(lazy) == ["ember/numpy/__init__.py:2: a function-local import of ember.lax without a comment "
                                "saying why it must be lazy (start-up time, an optional dependency); import it at "
                                "the top instead"]
    reasoned = {**GOOD, "ember/numpy/__init__.py": "def f():\n    from ember.lax import add  # start-up time\n"}
    assert violations(reasoned) == []


def test_the_checker_limits_lazy_imports():
    body = "".join(f"def f{i}():\n    import ember.lax  # start-up time\n" for i in range(MAX_LAZY_IMPORTS + 1))
    problems = violations({**GOOD, "ember/numpy/__init__.py": body})
    assert len(problems) == 1 and problems[0].startswith(f"{MAX_LAZY_IMPORTS + 1} function-local ember imports")


def test_the_checker_asks_for_a_new_room_to_be_placed():
    problems = violations({**GOOD, "ember/mesh_tools.py": "from ember import core\n"})
    assert problems == ["room 'mesh_tools' is not in the layer order: add it to LAYERS in tests/test_layers.py and to "
                        "docs/ARCHITECTURE.md, at the height of what it imports"]
