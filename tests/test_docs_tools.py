"""The scripts in docs/tools that draw the pages' pictures: each runs and draws what the package holds now."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from tests import test_layering

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gym_graphreset"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _script(name: str) -> ModuleType:
    """``docs/tools/<name>.py`` (a script folder, not a package), imported by path as ``docs_tools_<name>``."""
    spec = importlib.util.spec_from_file_location(f"docs_tools_{name}", ROOT / "docs" / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def draw_layers() -> ModuleType:
    pytest.importorskip("matplotlib", reason="the picture needs matplotlib (the `plot` or `dev` extra)")
    return _script("draw_layers")


@pytest.fixture(scope="module")
def layering(draw_layers: ModuleType) -> Any:
    """What the picture draws, read through the layering test module this run imported."""
    return draw_layers.read_layering(test_layering)


def test_layer_picture_draws_every_folder_in_its_layer(
    draw_layers: ModuleType, layering: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The script writes a PNG whose bands are the test's ``LAYERS``, holding every folder of the package.

    A new subpackage or top-level module that no layer names fails here (and in tests/test_layering.py).
    """
    png = tmp_path / "layers.png"
    draw_layers.main(["--out", str(png)])
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    assert png.stat().st_size <= 200_000, f"{png.stat().st_size} bytes: the page's pictures stay under 200 KB"
    # what the run drew, as it prints it: "layer  2: distributed.py (1), envs/ (17), ..." (top layer first)
    printed = {
        int(number): {label.rsplit(" (", 1)[0] for label in labels.split(", ")}
        for number, labels in re.findall(r"^layer +(\d+): (.*)$", capsys.readouterr().out, re.M)
    }
    bands = [printed[i] for i in range(len(printed))]
    assert bands == [{f.label for f in band} for band in layering.bands]
    assert [{f.name for f in band} for band in layering.bands] == test_layering.LAYERS  # one source, bottom first
    on_disk = {f"{p.parent.name}/" for p in PACKAGE.glob("*/__init__.py")} | {p.name for p in PACKAGE.glob("*.py")}
    assert set().union(*bands) == on_disk
    counts = {f.name: f.modules for band in layering.bands for f in band}
    assert counts["core"] == len(list((PACKAGE / "core").rglob("*.py"))) and counts["wrappers"] == 1


def test_layer_picture_draws_the_imports_between_folders(layering: Any) -> None:
    """The arrows are the imports the layering test reads: ``from gym_graphreset import mdp`` in tasks counts."""
    layer = layering.layer()
    assert all(layer[target] < layer[source] for source, target in layering.imports)  # every arrow downward
    assert layering.imports["core", "capture"] >= 1 and layering.imports["__main__", "cli"] == 1
    statements = sum(
        1
        for path in (PACKAGE / "tasks").rglob("*.py")
        for module in test_layering._import_statements(path)
        if module.split(".")[0] == "mdp"
    )
    assert layering.imports["tasks", "mdp"] == statements > 0


def test_layer_picture_refuses_a_folder_without_a_layer(draw_layers: ModuleType) -> None:
    """A folder that no layer names has no place in the picture: the script says which, and where to add it."""
    without_cli = SimpleNamespace(**vars(test_layering))
    without_cli.LAYERS = [layer - {"cli"} for layer in test_layering.LAYERS]
    with pytest.raises(ValueError, match=r"\['cli'\] in no layer: add each to LAYERS in tests/test_layering.py"):
        draw_layers.read_layering(without_cli)


def test_layer_picture_draws_an_upward_import_too(draw_layers: ModuleType, layering: Any, tmp_path: Path) -> None:
    """An import the layering refuses is still drawn (red, dashed), not dropped: the picture shows the breach."""
    breached = draw_layers.Layering(
        layering.bands, {**layering.imports, ("capture", "cli"): 1, ("envs", "wrappers"): 2}
    )
    png = tmp_path / "breached.png"
    draw_layers.draw(breached, png)
    assert png.read_bytes()[:8] == PNG_SIGNATURE
