"""Packaging: the wheel builds without deprecation warnings and carries its licence, SPDX expression and type marker;
the installed package is visible to mypy from a user's script outside the repository (the Makefile's editable install
is a path entry, which mypy reads, not an import hook, which it cannot)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_declares_an_spdx_licence_and_its_file() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert "Typing :: Typed" in project["classifiers"]


@pytest.mark.slow
def test_wheel_builds_without_deprecation_and_ships_licence_and_marker(tmp_path: Path) -> None:
    pytest.importorskip("setuptools", reason="building the wheel without isolation needs setuptools")
    source = tmp_path / "src"  # a copy: an in-tree build would leave build/ and *.egg-info in the clone
    shutil.copytree(ROOT / "gym_graphreset", source / "gym_graphreset", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    cmd = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), "."]
    result = subprocess.run(cmd, cwd=source, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    log = result.stdout + result.stderr
    assert "deprecated" not in log.lower(), [line for line in log.splitlines() if "deprecat" in line.lower()]
    (wheel,) = tmp_path.glob("gym_graphreset-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in metadata.splitlines()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "gym_graphreset/py.typed" in names


# Third-party packages are read as untyped, so the check takes seconds, not the ~30 s of analysing torch.
USER_MYPY_INI = """[mypy]
[mypy-torch.*,numpy.*,gymnasium.*,warp.*,mujoco.*,mujoco_warp.*,tqdm.*,scipy.*,matplotlib.*,tensordict.*]
follow_imports = skip
"""


@pytest.mark.slow
def test_mypy_finds_the_installed_package_from_outside_the_repo(tmp_path: Path) -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is in the `dev` extra")
    try:
        importlib.metadata.distribution("gym_graphreset")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("gym_graphreset is not installed (make install)")
    (tmp_path / "mypy.ini").write_text(USER_MYPY_INI)
    (tmp_path / "user.py").write_text(
        "from gym_graphreset import FixedShapeAutoresetVectorEnv\n\nwrong: int = FixedShapeAutoresetVectorEnv\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    cmd = [sys.executable, "-m", "mypy", "--no-incremental", "--python-executable", sys.executable, "user.py"]
    result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    out = result.stdout + result.stderr
    assert "import-not-found" not in out and "import-untyped" not in out, (
        "mypy cannot see the installed gym_graphreset (an editable install through an import hook?): reinstall with "
        f"`pip install -e . --config-settings editable_mode=compat`\n{out}"
    )
    # the package's own annotations are read: the wrong assignment is caught
    assert 'Incompatible types in assignment (expression has type "type[FixedShapeAutoresetVectorEnv]"' in out, out


def test_install_page_lists_every_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    page = (ROOT / "docs" / "install.md").read_text()
    missing = [extra for extra in extras if f"| `{extra}` |" not in page]
    assert not missing, f"docs/install.md's extras table lacks {missing}"


def test_ci_checks_style_and_types_before_the_tests() -> None:
    steps = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("make")]
    assert steps == ["make check", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    check = makefile.split("\ncheck:", 1)[1].split("\n\n", 1)[0]
    assert all(tool in check for tool in ("ruff check", "ruff format --check", "mypy")), check
    assert "\ntest-fast:" in makefile and "editable_mode=compat" in makefile
