"""The package's layers are its folders: each imports only the folders below it, and modules import acyclically."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gym_graphreset"
# The layers, bottom first: a folder (or top-level module) imports only folders of the layers below its own,
# never one beside it or above it. A new folder must say where it sits. docs/tools/draw_layers.py reads this list
# and the import scan below to draw docs/img/layers.png (`make figures` redraws it).
LAYERS: list[set[str]] = [
    {"capture"},  # CUDA-graph capture, torch.compile, host-read counting: no other part of the package
    {"core"},  # the wrapper
    {"envs", "wrappers", "distributed", "testing"},  # the engine (MuJoCo Warp, Gymnasium MuJoCo, CartPole), tools
    {"assets", "terrains"},  # robot models and clips; terrain generation
    {"managers"},  # the task framework: ManagerBasedEnv, its managers, term configs and contracts
    {"mdp"},  # the terms
    {"tasks"},  # task families and their robot configs
    {"registration"},  # the Gymnasium ids
    {"bench", "integrations"},
    {"cli"},
    {"__init__", "__main__"},
]
LAYER = {folder: i for i, layer in enumerate(LAYERS) for folder in layer}
ALLOWED: dict[str, set[str]] = {folder: {f for f, j in LAYER.items() if j < i} for folder, i in LAYER.items()}


def _folder(module: str) -> str:
    """``tasks.velocity.config.go1`` -> ``tasks``; ``core.rng`` -> ``core``; ``cli`` -> ``cli``."""
    return module.split(".")[0]


def _module(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


def _imports(path: Path) -> set[str]:
    """Modules of the package imported at run time (imports under ``if TYPE_CHECKING:`` are annotations only)."""
    return set(_import_statements(path))


def _import_statements(path: Path) -> list[str]:
    """The package's modules each run-time import statement of ``path`` names, once per statement and module.

    ``from gym_graphreset.core.rng import EpisodeKeys`` names ``core.rng``; ``from gym_graphreset import mdp``
    names ``mdp`` (a folder or top-level module), and a name of the package's own (``from gym_graphreset import
    __version__``, ``import gym_graphreset``) its ``__init__``. Imports under ``if TYPE_CHECKING:`` are
    annotations only. docs/tools/draw_layers.py counts these to draw the imports between folders.
    """
    tree = ast.parse(path.read_text())
    typing_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for n in ast.walk(node)
    }
    found: list[str] = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "gym_graphreset":
            found += sorted({a.name if _is_part(a.name) else "__init__" for a in node.names})
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gym_graphreset."):
            found.append(node.module.removeprefix("gym_graphreset."))
        elif isinstance(node, ast.Import):
            found += [
                a.name.removeprefix("gym_graphreset.") if a.name != "gym_graphreset" else "__init__"
                for a in node.names
                if a.name == "gym_graphreset" or a.name.startswith("gym_graphreset.")
            ]
    return found


def _is_part(name: str) -> bool:
    """Whether ``name`` is one of the package's folders or top-level modules (not a name its ``__init__`` holds)."""
    return (PACKAGE / name / "__init__.py").is_file() or (PACKAGE / f"{name}.py").is_file()


GRAPH = {_module(p): _imports(p) for p in PACKAGE.rglob("*.py")}


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_follow_the_folder_rules(module: str) -> None:
    """Each folder imports only the folders below it (``ALLOWED``): the layers are the folders."""
    folder = _folder(module)
    assert folder in ALLOWED, f"{module}: folder {folder!r} has no rule in ALLOWED"
    bad = sorted(m for m in GRAPH[module] if _folder(m) != folder and _folder(m) not in ALLOWED[folder])
    assert not bad, f"{module} ({folder}) imports {bad}; {folder} may import {sorted(ALLOWED[folder])}"


def test_import_graph_is_acyclic() -> None:
    """No module imports itself back, through any chain (within a folder too)."""
    state: dict[str, int] = {}

    def visit(module: str, stack: list[str]) -> None:
        if state.get(module) == 2:
            return
        if state.get(module) == 1:
            raise AssertionError("import cycle: " + " -> ".join([*stack[stack.index(module) :], module]))
        state[module] = 1
        for dep in sorted(GRAPH.get(module, ())):
            if dep in GRAPH:
                visit(dep, [*stack, module])
        state[module] = 2

    for module in sorted(GRAPH):
        visit(module, [])
