"""``gym-graphreset profile``: runs on the CPU by default, and draws its plot only over several batch sizes."""

from __future__ import annotations

from pathlib import Path

import pytest

from gym_graphreset.cli import main

ARGS = ["profile", "--device", "cpu", "--env-id", "gym_graphreset/CartPole-v1", "--steps", "2", "--warmup", "1"]


def test_profile_on_the_cpu_defaults_to_a_mode_that_runs_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no ``--mode`` the CPU profiles ``masked+persistent`` (the step graph needs CUDA); with one batch size
    it writes the JSON and says why there is no plot instead of drawing an empty one."""
    assert main([*ARGS, "--num-envs", "8", "--out", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "masked+persistent" in out and "one batch size: no plot" in out
    assert "warp's CPU kernels (the physics) are not timed" in out
    assert [p.name for p in tmp_path.iterdir()] == ["profile-CartPole-v1-cpu.json"]


def test_profile_plots_several_batch_sizes(tmp_path: Path) -> None:
    """Over two batch sizes the plot of time per env step against batch size is written."""
    pytest.importorskip("matplotlib")
    assert main([*ARGS, "--num-envs", "8,16", "--out", str(tmp_path), "--no-progress"]) == 0
    assert (tmp_path / "profile-CartPole-v1-cpu.png").stat().st_size > 1000
