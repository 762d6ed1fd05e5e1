"""The EnvPool baseline: same task, async send/recv, a sweep whose best is reported; a missing extra is a
one-line notice, never a crash."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gym_graphreset.bench.baselines import envpool_task, measure_envpool
from gym_graphreset.cli import main


def test_envpool_task_is_the_same_task() -> None:
    assert envpool_task("gym_graphreset/Ant-v5") == "Ant-v5" and envpool_task("HalfCheetah-v5") == "HalfCheetah-v5"


def test_batch_size_checked_by_name() -> None:
    with pytest.raises(ValueError, match=r"`batch_size` must be in \[1, num_envs=8\], got 9"):
        measure_envpool("CartPole-v1", 8, 9, 1)


def test_envpool_measures_transitions() -> None:
    pytest.importorskip("envpool", reason="EnvPool is the optional `envpool` extra")
    result = measure_envpool("CartPole-v1", 16, 8, 2, steps=50, warmup=5)
    assert result.mode == "envpool x16 b8 t2" and result.env_steps_per_s > 0 and result.extra["batch_size"] == 8


def test_cli_envpool_baseline_same_task(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("envpool", reason="EnvPool is the optional `envpool` extra")
    args = ["bench", "--device", "cpu", "--num-envs", "16", "--steps", "10", "--warmup", "1", "--modes", "masked"]
    assert (
        main([*args, "--out", str(tmp_path), "--no-progress", "--cpu-baseline", "envpool", "--envpool-envs", "8,16"])
        == 0
    )
    out = capsys.readouterr().out
    assert "x EnvPool's best on the same task" in out and "| envpool x16 b8 t" in out
    modes = [r["mode"] for r in json.loads((tmp_path / "bench-CartPole-v1-cpu.json").read_text())["results"]]
    assert sum(m.startswith("envpool") for m in modes) == 4  # 2 sizes x 2 batch sizes


def test_cli_without_envpool_skips_with_a_notice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "envpool", None)
    args = ["bench", "--device", "cpu", "--num-envs", "16", "--steps", "5", "--warmup", "1", "--modes", "masked"]
    assert main([*args, "--out", str(tmp_path), "--no-progress", "--cpu-baseline", "envpool"]) == 0
    assert "EnvPool is not installed (pip install 'gym_graphreset[envpool]'): skipped the EnvPool baseline" in (
        capsys.readouterr().out
    )


def test_unknown_cpu_baseline_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--device", "cpu", "--cpu-baseline", "brax"]) == 2
    assert "unknown --cpu-baseline ['brax']" in capsys.readouterr().err
