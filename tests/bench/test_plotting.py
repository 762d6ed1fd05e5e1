"""The benchmark plots: only same-task CPU baselines are drawn, one size gives one panel, learning curves are
drawn with every run visible, and a missing matplotlib skips the PNG with a notice."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gym_graphreset.bench.plotting import plot_curves, plot_results, plot_soak, same_task
from gym_graphreset.bench.results import ModeResult

pytest.importorskip("matplotlib", reason="the plots need the `plot` extra (matplotlib)")


def _result(mode: str, env_id: str, num_envs: int, ms: float) -> ModeResult:
    return ModeResult(mode, env_id, num_envs, "cuda:0", 10, ms, num_envs / ms * 1e3, 0.0, None)


@pytest.mark.parametrize(
    ("gpu", "cpu", "same"),
    [("gym_graphreset/Ant-v5", "Ant-v5", True), ("gym_graphreset/ResetHeavyHalfCheetah-v0", "Ant-v5", False)],
)
def test_same_task_compares_task_names(gpu: str, cpu: str, same: bool) -> None:
    assert same_task(gpu, cpu) is same


def _drawn_labels(monkeypatch: pytest.MonkeyPatch, results: list[ModeResult], path: Path) -> list[list[str]]:
    """Each panel's legend labels, read from the figure before it is closed."""
    import matplotlib.pyplot as plt

    seen: list[list[str]] = []
    close = plt.close

    def record(fig: object) -> None:
        seen.extend([t.get_text() for t in ax.get_legend().get_texts()] for ax in fig.axes)  # type: ignore[attr-defined]
        close(fig)

    monkeypatch.setattr(plt, "close", record)
    assert plot_results(results, path, "title")
    assert path.exists()
    return seen


def test_cross_task_baseline_is_not_drawn(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A CPU engine that ran another task (Ant next to reset-heavy HalfCheetah) gets no line."""
    heavy = "gym_graphreset/ResetHeavyHalfCheetah-v0"
    results = [_result(m, heavy, n, ms) for n in (512, 4096) for m, ms in (("selected", 18.0), ("step graph", 4.0))]
    results += [
        _result("gymnasium async x64", "Ant-v5", 64, 5.4),
        _result("envpool x64 b32 t16", "HalfCheetah-v5", 64, 0.1),
    ]
    bars, lines = _drawn_labels(monkeypatch, results, tmp_path / "heavy.png")
    assert bars == ["selected", "step graph"]
    assert not any("CPU" in label for label in lines)


def test_same_task_baseline_is_drawn_and_one_size_is_one_panel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ant = "gym_graphreset/Ant-v5"
    results = [_result(m, ant, n, ms) for n in (512, 4096) for m, ms in (("selected", 16.0), ("step graph", 14.0))]
    results.append(_result("envpool x256 b128 t16", "Ant-v5", 256, 2.9))
    _, lines = _drawn_labels(monkeypatch, results, tmp_path / "ant.png")
    assert any(label.startswith("CPU, best: envpool x256 b128 t16") for label in lines)
    one_size = [r for r in results if r.num_envs == 4096]
    assert len(_drawn_labels(monkeypatch, one_size, tmp_path / "one.png")) == 1


def test_curves_draw_every_run(tmp_path: Path) -> None:
    curve = {"env_steps": [1.0, 2.0], "seconds": [0.5, 1.0], "mean_return": [0.0, 1.0]}
    assert plot_curves({"eager update": curve, "captured update": curve}, tmp_path / "ppo.png", "PPO")
    assert (tmp_path / "ppo.png").stat().st_size > 0


def test_soak_plot_draws_the_windows(tmp_path: Path) -> None:
    windows = [{"step": 1000.0 * i, "ms_per_step": 3.15} for i in range(1, 4)]
    assert plot_soak(windows, tmp_path / "soak.png", "soak")
    assert (tmp_path / "soak.png").stat().st_size > 0


def test_missing_matplotlib_skips_the_png(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the extra the PNG is skipped with a warning; nothing raises."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.warns(UserWarning, match="matplotlib is not installed"):
        assert not plot_results([_result("selected", "gym_graphreset/Ant-v5", 8, 1.0)], tmp_path / "x.png", "t")
    assert not (tmp_path / "x.png").exists()
