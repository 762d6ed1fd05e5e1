"""The package's layers are its folders: each imports only the folders below it, and modules import acyclically."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gym_graphreset"
BASE = {"core", "capture"}
ENGINE = BASE | {"envs.mjwarp"}
# Folder (or top-level module) -> the folders it may import besides its own. A folder not listed may import
# nothing of the package; a new folder must say where it sits.
ALLOWED: dict[str, set[str]] = {
    "core": {"capture"},  # the wrapper captures; capture builds on config, protocols, buffers
    "capture": {"core"},
    "testing": BASE,
    "envs.mjwarp": BASE,  # the engine adapter
    "envs": BASE,  # envs/cartpole.py, envs/__init__.py
    "envs.gym_mujoco": ENGINE,
    "tasks": ENGINE,  # the manager-based task layer on the engine
    "envs.go1": ENGINE | {"tasks"},
    "envs.g1": ENGINE | {"tasks"},
    "wrappers": BASE,
    "distributed": BASE,
    "integrations": BASE | {"wrappers"},
    "bench": BASE | {"testing", "envs", "envs.mjwarp", "envs.gym_mujoco", "envs.go1", "tasks"},
    "registration": {"envs", "envs.gym_mujoco", "envs.go1", "envs.g1", "tasks"},
    "cli": {"bench", "testing", "envs", "envs.mjwarp", "tasks", "registration", "integrations"} | BASE,
    "__main__": {"cli"},
    "_moved": set(),
    "__init__": BASE | {"registration", "_moved"},
}


def _folder(module: str) -> str:
    """``envs.go1.env`` -> ``envs.go1``; ``core.rng`` -> ``core``; ``cli`` -> ``cli``."""
    parts = module.split(".")
    if parts[0] == "envs" and len(parts) > 2:
        return f"envs.{parts[1]}"
    if parts[0] == "envs" and len(parts) == 2 and (PACKAGE / "envs" / parts[1]).is_dir():
        return f"envs.{parts[1]}"
    return parts[0]


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
