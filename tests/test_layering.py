"""The package's layers are its folders: each imports only the folders below it, and modules import acyclically."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gym_graphreset"
# The layers, bottom first: a folder (or top-level module) imports only folders of the layers below its own,
# never one beside it or above it. A new folder must say where it sits.
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
    tree = ast.parse(path.read_text())
    typing_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for n in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gym_graphreset."):
            found.add(node.module.removeprefix("gym_graphreset."))
        elif isinstance(node, ast.Import):
            found |= {
                a.name.removeprefix("gym_graphreset.") for a in node.names if a.name.startswith("gym_graphreset.")
            }
    return found


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
