"""The package's import graph is acyclic and layered: the core never imports the envs, integrations or tools."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gym_graphreset"
# Lower layers never import higher ones; modules of a layer may import each other (acyclically).
LAYERS: list[set[str]] = [
    {"selection", "rng", "buffers", "host_transitions", "validation", "config", "compiling", "dynamo_records"},
    {"protocols", "graph"},
    {"participants", "inputs", "terms"},
    {"executors"},
    {"same_step"},
    {"masked_path"},
    {"stepping", "failures"},
    {"wrapper"},
    {"rollouts", "host_syncs"},
    {
        "wrappers",
        "distributed",
        "testing",
        "baselines",
        "peers",
        "host_reads",
        "bench",
        "bench_results",
        "plotting",
        "rendering",
        "cli",
        "registration",
        "__init__",
        "__main__",
        "envs",
        "integrations",
    },
]


def _module(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gym_graphreset."):
            found.add(node.module.removeprefix("gym_graphreset."))
        elif isinstance(node, ast.Import):
            found |= {
                a.name.removeprefix("gym_graphreset.") for a in node.names if a.name.startswith("gym_graphreset.")
            }
    return found


GRAPH = {_module(p): _imports(p) for p in PACKAGE.rglob("*.py")}


def _layer(module: str) -> int:
    top = module.split(".")[0]
    return next(i for i, layer in enumerate(LAYERS) if top in layer)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_only_lower_or_same_layers(module: str) -> None:
    upward = [m for m in GRAPH[module] if _layer(m) > _layer(module)]
    assert not upward, f"{module} (layer {_layer(module)}) imports higher layers: {upward}"


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
