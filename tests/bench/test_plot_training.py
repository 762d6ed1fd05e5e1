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


def test_refuses_bad_arguments(script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing JSON and a non-positive --dt are refused by name."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"rows": _rows(False)}))
    for argv, what in (([str(tmp_path / "none.json")], "no such JSON"), ([str(path), "--dt", "0"], "--dt")):
        with pytest.raises(SystemExit):
            script.main(argv)
        assert what in capsys.readouterr().err


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
