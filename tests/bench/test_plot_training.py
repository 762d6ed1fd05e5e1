"""``benchmarks/gpu/plot_training.py``: one training JSON (as ``rsl_rl_go1.py`` writes it) drawn against env steps,
with the terrain panel only where the run has terrain levels; bad arguments refused by name; no matplotlib is a
notice, not a crash."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "gpu" / "plot_training.py")


def _rows(levels: bool) -> list[dict[str, Any]]:
    return [
        {
            "iteration": i,
            "wall_s": 1.0 + i,
            "env_steps": 98_304 * (i + 1),
            "track_lin_vel": None,
            "episode_length": None if i == 0 else 10.0 * i,
            "episode_reward": {"Episode_Reward/motion_body_pos": 0.01 * i, "Episode_Reward/action_rate": -0.1},
            "terrain_level": {"mean": 0.1 * i, "max": float(i)} if levels else None,
        }
        for i in range(5)
    ]


@pytest.mark.parametrize("levels", [False, True])
def test_writes_the_figure(script: ModuleType, tmp_path: Path, levels: bool) -> None:
    """A PNG beside the JSON (three panels with terrain levels, two without)."""
    pytest.importorskip("matplotlib")
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"rows": _rows(levels)}))
    assert script.main([str(path)]) == 0
    assert path.with_suffix(".png").stat().st_size > 0
    from PIL import Image

    width = Image.open(path.with_suffix(".png")).size[0]
    assert width == pytest.approx(110 * 5.0 * (3 if levels else 2), abs=2)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "not JSON"),
        ('{"iterations": []}', "expected a 'rows' list"),
        ('{"rows": [1, 2]}', "row 0 is a int"),
        ('{"rows": [{"wall_s": 1}]}', "lacks"),
    ],
)
def test_refuses_bad_files_by_name(
    script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    """A file that is not a training curve is a one-line error naming what is wrong, not a traceback."""
    path = tmp_path / "run.json"
    path.write_text(content)
    with pytest.raises(SystemExit):
        script.main([str(path)])
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("env_steps", None, "'env_steps' must be a number"),
        ("episode_length", "30", "'episode_length' must be a number or null"),
        ("episode_reward", {"Episode_Reward/a": "x"}, "'episode_reward' must be null or an object of numbers"),
        ("terrain_level", 3, "'terrain_level' must be null or an object of numbers"),
    ],
)
def test_refuses_bad_values_naming_row_and_field(
    script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: Any, message: str
) -> None:
    """A value the panels cannot draw is refused naming its row and field."""
    rows = _rows(False)
    rows[2][field] = value
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"rows": rows}))
    with pytest.raises(SystemExit):
        script.main([str(path)])
    assert f"row 2: {message}" in capsys.readouterr().err


def test_refuses_bad_arguments(script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing JSON, a non-positive or infinite --dt and an --out in a missing folder are refused by name."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"rows": _rows(False)}))
    for argv, what in (
        ([str(tmp_path / "none.json")], "no such JSON"),
        ([str(path), "--dt", "0"], "--dt"),
        ([str(path), "--dt", "inf"], "--dt"),
        ([str(path), "--out", str(tmp_path / "nodir" / "x.png")], "--out"),
    ):
        with pytest.raises(SystemExit):
            script.main(argv)
        assert what in capsys.readouterr().err


def test_nothing_to_draw_is_said(script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rows with no value to draw: a notice and exit status 1, no empty figure."""
    pytest.importorskip("matplotlib")
    rows = [{**r, "episode_length": None, "episode_reward": {}, "terrain_level": None} for r in _rows(False)]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"rows": rows}))
    assert script.main([str(path)]) == 1
    assert "nothing to draw" in capsys.readouterr().out
    assert not path.with_suffix(".png").exists()


def test_without_matplotlib_prints_a_notice(
    script: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The optional extra missing: one line and exit 0, no figure."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"rows": _rows(False)}))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert script.main([str(path)]) == 0
    assert "matplotlib is not installed" in capsys.readouterr().out
    assert not path.with_suffix(".png").exists()
