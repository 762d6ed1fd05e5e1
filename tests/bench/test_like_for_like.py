"""The like-for-like training comparison (``benchmarks/gpu/like_for_like.sh`` and its plot): synthetic JSONs in
the schemas that ``mjlab_train.py``, ``rsl_rl_go1.py`` and the PPO example write (as the driver leaves them) are
found, summarised against mjlab's final level and drawn on two panels, for every task (flat Go1 and G1, G1
tracking with an error that falls, Go1 rough terrain levels); the driver (and its former name) refuses bad
settings before touching a GPU, and the checkpoints of its CPU runs play and export; ``mjlab_train.py`` seeds as
mjlab's train script does, gives a tracking task its clip, and reads each row's fields from the logged scalars."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from gym_graphreset.bench.training_plots import plot_training_comparison, summarize_training_comparison

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "benchmarks" / "gpu"
GO1_XML = "/opt/mjkit/site/mjlab/asset_zoo/robots/unitree_go1/xmls/go1.xml"


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(reach_s: float, end_s: float, level: float = 1.0, dt: float = 0.9) -> list[dict[str, Any]]:
    """Iterations every ``dt`` s: the first with no reset (null metrics), then a ramp to ``level`` at ``reach_s``.

    Each row also has the tracking and rough fields: ``error_body_pos`` falls from 0.5 to ``0.5 - 0.4 * level``
    (0.1 at ``level`` 1) as the ramp rises, ``error_anchor_pos`` is twice it, ``terrain_levels`` is 5x the ramp.
    """
    rows = []
    for it in range(int(end_s / dt)):
        wall = (it + 1) * dt
        value = None if it == 0 else min(level, level * wall / reach_s)
        rows.append(
            {
                "iteration": it,
                "wall_s": wall,
                "env_steps": (it + 1) * 24 * 4096,
                "track_lin_vel": value,
                "track_ang_vel": None if value is None else value / 2,
                "episode_length": None if value is None else 1000 * value,
                "error_body_pos": None if value is None else 0.5 - 0.4 * value,
                "error_anchor_pos": None if value is None else 2 * (0.5 - 0.4 * value),
                "error_body_rot": None,
                "error_joint_pos": None,
                "terrain_levels": None if value is None else 5 * value,
                "terrain_levels_max": None if value is None else 9.0,
            }
        )
    return rows


def _budget(rows: list[dict[str, Any]]) -> float:
    """The whole seconds of the last row's wall-clock: a budget the run spent (its last row at or past it)."""
    return float(int(rows[-1]["wall_s"]))


def _versions(gpu: str = "NVIDIA H200", rsl: str | None = "5.4.2") -> dict[str, Any]:
    versions = {"python": "3.12.3", "torch": "2.11.0+cu130", "gpu": gpu}
    return versions | ({"rsl-rl-lib": rsl} if rsl else {})


def _mjlab(seed: int, rows: list[dict[str, Any]], motion: str | None = None, **versions: Any) -> dict[str, Any]:
    """As ``mjlab_train.py`` writes it after spending its budget, then the driver's annotation."""
    for row in rows:
        row |= {"mean_reward": 1.0, "collect_s": 0.7, "learn_s": 0.1}
    v = _versions(**versions)
    return {
        "trainer": "mjlab + rsl_rl OnPolicyRunner (the task's own runner class and PPO config)",
        "task": "Mjlab-Velocity-Flat-Unitree-Go1",
        "model": "the task's own",
        "num_envs": 4096,
        "device": "cuda:0",
        "budget_s": _budget(rows),
        "max_iterations": 10000,
        "seed": seed,
        "versions": v,
        "rsl_rl_lib": v.get("rsl-rl-lib"),
        "rl_cfg": {"seed": seed},
        "fields": {},
        "rows": rows,
        "setup_s": 4.0,
        "stopped": "budget",
        "train_s": rows[-1]["wall_s"],
        "run": "mjlab",
        "exit_status": 0,
        "driver": "benchmarks/gpu/like_for_like.sh",
    } | ({"motion_file": "/x/g1_sway.npz", "motion_sha256": motion} if motion else {})


def _rsl_rl(
    run: str,
    seed: int,
    rows: list[dict[str, Any]],
    model_xml: str | None = GO1_XML,
    motion: str | None = None,
    **versions: Any,
) -> dict[str, Any]:
    """As ``rsl_rl_go1.py`` writes it after spending its budget, then the driver's annotation."""
    for row in rows:
        row |= {"track_lin_vel_episodes": row["track_lin_vel"], "track_ang_vel_episodes": None, "episodes": 10}
        row |= {"mean_reward": 1.0}
    v = _versions(**versions)
    return {
        "trainer": "rsl_rl OnPolicyRunner + PPO through gym_graphreset.integrations.rsl_rl (mjlab's Go1 PPO)",
        "task": "gym_graphreset/Go1-Velocity-Flat-v0",
        "model_xml": model_xml,
        "model_sha256": None if model_xml is None else "0" * 64,
        "algorithm": "finalobs" if run == "finalobs" else "ppo",
        "runner": "syncfree" if run == "syncfree" else "stock",
        "rsl_rl_lib": v.get("rsl-rl-lib"),
        "num_envs": 4096,
        "device": "cuda",
        "preset": "step_graph",
        "budget_s": _budget(rows),
        "seed": seed,
        "resumed_from": None,
        "versions": v,
        "rl_cfg": {"seed": seed},
        "fields": {},
        "rows": rows,
        "setup_s": 30.0,
        "stopped": "budget",
        "last_iteration": rows[-1]["iteration"],
        "train_s": rows[-1]["wall_s"],
        "env_steps_per_s": 4e5,
        "run": run,
        "exit_status": 0,
        "driver": "benchmarks/gpu/like_for_like.sh",
    } | ({"motion_file": "/x/g1_sway.npz", "motion_sha256": motion} if motion else {})


def _ppo_example(seed: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """As ``examples/ppo_continuous.py`` writes it (rows without ``iteration``), then the driver's annotation (its
    ``stopped`` from the example's exit status 0)."""
    budget = _budget(rows)
    rows = [{k: v for k, v in r.items() if k != "iteration"} | {"mean_return": 1.0} for r in rows]
    return {
        "trainer": "examples/ppo_continuous.py",
        "task": "gym_graphreset/Go1-Velocity-Flat-v0",
        "num_envs": 4096,
        "budget_s": budget,
        "model_xml": GO1_XML,
        "metric": "mjlab's Episode_Reward/<term>",
        "args": {"seed": seed},
        "rows": rows,
        "curve": {},
        "versions": _versions(rsl=None),
        "rsl_rl_lib": None,
        "keep_sensors": False,
        "forward_before_obs": "off",
        "stopped": "budget",
        "run": "ppo-example",
        "seed": seed,
        "exit_status": 0,
        "driver": "benchmarks/gpu/like_for_like.sh",
    }


def _write(folder: Path, record: dict[str, Any], task: str = "go1") -> Path:
    path = folder / f"{task}-l4l-{record['run']}-s{record['seed']}.json"
    path.write_text(json.dumps(record))
    return path


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """mjlab (2 seeds, final 1.0 at 240 s), stock (2 seeds, 1.0 at 120 s), FinalObsPPO, SyncFree, PPO example."""
    folder = tmp_path / "l4l"
    (folder / "call-2").mkdir(parents=True)  # the files of several calls, copied into one tree
    for seed in (42, 43):
        _write(folder, _mjlab(seed, _rows(reach_s=200.0, end_s=240.0)))
        _write(folder / "call-2", _rsl_rl("stock", seed, _rows(reach_s=120.0, end_s=240.0)))
    _write(folder, _rsl_rl("finalobs", 42, _rows(reach_s=60.0, end_s=240.0)))
    _write(folder, _rsl_rl("syncfree", 42, _rows(reach_s=90.0, end_s=240.0)))
    _write(folder, _ppo_example(42, _rows(reach_s=500.0, end_s=240.0)))  # never reaches 1.0
    (folder / "go1-l4l-stock-s42.log").write_text("not a JSON")
    return folder


def test_summary_times_each_run_against_mjlabs_final_level(results: Path) -> None:
    script = _load(GPU / "plot_like_for_like.py", "plot_like_for_like_under_test")
    found = script.find_runs([results])
    assert list(found) == ["mjlab", "stock", "finalobs", "syncfree", "ppo-example"]
    assert [len(paths) for paths in found.values()] == [2, 2, 1, 1, 1]
    summary = {row["label"]: row for row in summarize_training_comparison(found, reference="mjlab")}
    mjlab, stock = summary["mjlab"], summary["stock"]
    assert mjlab["final"] == pytest.approx(1.0) and mjlab["seeds"] == 2
    assert mjlab["wall_s"] == pytest.approx(239.4)  # the last row's: 266 iterations of 0.9 s
    assert stock["reached_s"] == [pytest.approx(120.6), pytest.approx(120.6)]  # the first row at >= 1.0
    assert stock["fraction"] == pytest.approx(120.6 / 239.4)
    assert summary["finalobs"]["fraction"] == pytest.approx(60.3 / 239.4)
    example = summary["ppo-example"]
    assert example["reached_s"] == [None] and example["fraction"] is None
    assert example["final"] == pytest.approx(239.4 / 500.0, rel=1e-2)
    no_reference = summarize_training_comparison(found, reference=None)
    assert all(row["reached_s"] is None and row["fraction"] is None for row in no_reference)


def test_warnings_name_what_is_not_like_for_like(tmp_path: Path) -> None:
    script = _load(GPU / "plot_like_for_like.py", "plot_like_for_like_under_test")
    rows = _rows(reach_s=100.0, end_s=20.0)
    _write(tmp_path, _mjlab(42, rows))
    _write(tmp_path, _rsl_rl("stock", 42, _rows(reach_s=100.0, end_s=20.0)))
    assert script.like_for_like_warnings(script.find_runs([tmp_path])) == []
    _write(tmp_path, _rsl_rl("stock", 43, _rows(reach_s=100.0, end_s=20.0), model_xml=None, gpu="NVIDIA H100"))
    _write(tmp_path, _rsl_rl("finalobs", 42, _rows(reach_s=100.0, end_s=20.0), rsl="5.5.1"))
    warnings = script.like_for_like_warnings(script.find_runs([tmp_path]))
    assert any(w.startswith("GPUs differ") and "NVIDIA H100" in w for w in warnings)
    assert any(w.startswith("rsl-rl-lib versions differ") and "5.5.1" in w for w in warnings)
    assert any("go1-l4l-stock-s43.json: not on mjlab's go1.xml" in w for w in warnings)


def test_each_robot_s_runs_are_found_apart_and_checked_against_its_model(tmp_path: Path) -> None:
    """G1 runs (``ROBOT=g1``) beside Go1's: each robot's alone, and a G1 run on go1.xml is flagged."""
    script = _load(GPU / "plot_like_for_like.py", "plot_like_for_like_under_test")
    g1_xml = GO1_XML.replace("go1", "g1")
    _write(tmp_path, _mjlab(42, _rows(reach_s=100.0, end_s=20.0)))
    _write(tmp_path, _mjlab(42, _rows(reach_s=100.0, end_s=20.0)), task="g1")
    _write(tmp_path, _rsl_rl("stock", 42, _rows(reach_s=100.0, end_s=20.0), model_xml=g1_xml), task="g1")
    _write(tmp_path, _rsl_rl("stock", 43, _rows(reach_s=100.0, end_s=20.0)), task="g1")  # on go1.xml
    _write(tmp_path, _mjlab(42, _rows(reach_s=100.0, end_s=20.0)), task="g1-tracking")  # another task
    g1 = script.find_runs([tmp_path], "g1")
    assert {run: [p.name for p in paths] for run, paths in g1.items()} == {
        "mjlab": ["g1-l4l-mjlab-s42.json"],
        "stock": ["g1-l4l-stock-s42.json", "g1-l4l-stock-s43.json"],
    }
    assert list(script.find_runs([tmp_path])) == ["mjlab"]  # Go1's
    assert script.like_for_like_warnings(g1, "g1") == [
        f"stock/g1-l4l-stock-s43.json: not on mjlab's g1.xml (model_xml={GO1_XML})"
    ]


def test_cli_draws_both_panels_and_writes_the_table(
    results: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib", reason="the plots need the `plot` extra (matplotlib)")
    import matplotlib.pyplot as plt

    script = _load(GPU / "plot_like_for_like.py", "plot_like_for_like_under_test")
    seen: list[tuple[str, list[str], int]] = []
    close = plt.close

    def record(fig: Any) -> None:
        for ax in fig.axes:
            legend = ax.get_legend()
            labels = [t.get_text() for t in legend.get_texts()] if legend is not None else []
            seen.append((ax.get_xlabel(), labels, len(ax.get_lines())))
        close(fig)

    monkeypatch.setattr(plt, "close", record)
    png = results / "fig" / "l4l.png"
    assert script.main([str(results), "--out", str(png)]) == 0
    assert png.stat().st_size > 0
    table = png.with_suffix(".md").read_text()
    assert "| ours: rsl_rl PPO + OnPolicyRunner | 2 | 1.000 | 239 |" in table and "| 0.50 |" in table
    assert "not reached" in table
    out = capsys.readouterr().out
    assert "WARNING" not in out and f"wrote {png}" in out
    (time_xlabel, _, time_lines), (steps_xlabel, labels, steps_lines) = seen  # the legend: under the bottom panel
    assert time_xlabel.startswith("wall-clock") and steps_xlabel == "env steps"
    assert "mjlab (2 seeds)" in labels
    assert (
        "ours: rsl_rl PPO + OnPolicyRunner (2 seeds): reached mjlab's final level at 0.50 of its wall-clock" in labels
    )
    assert "ours: PPO example (captured update) (1 seed): 0/1 seeds reached mjlab's final level" in labels
    assert any(label.startswith("mjlab's final level (1.000)") for label in labels)
    # 2 + 2 thin seed lines, 5 means, the reference level: on both panels
    assert time_lines == steps_lines == 4 + 5 + 1


def test_missing_matplotlib_skips_the_comparison_png(
    results: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    runs = {"mjlab": sorted(results.glob("go1-l4l-mjlab-*.json"))}
    with pytest.warns(UserWarning, match="matplotlib is not installed"):
        assert not plot_training_comparison(runs, results / "x.png")
    assert not (results / "x.png").exists()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RUN": "bogus"}, "RUN must be one of: mjlab stock finalobs syncfree fast ppo-example, got 'bogus'"),
        ({"RUN": "stock", "BUDGET_S": "560"}, "leaves no time for setup"),
        ({"RUN": "stock", "MODEL_XML": "/nonexistent/go1.xml", "MJ_PYTHONPATH": ""}, "no go1.xml"),
        ({"RUN": "stock", "TASK": "g1", "MODEL_XML": "/nonexistent/g1.xml", "MJ_PYTHONPATH": ""}, "no g1.xml"),
        ({"RUN": "stock", "TASK": "g1-tracking", "MODEL_XML": "/x/g1.xml", "MJ_PYTHONPATH": ""}, "no g1.xml"),
        ({"RUN": "stock", "TASK": "go1-rough", "MODEL_XML": "/x/go1.xml", "MJ_PYTHONPATH": ""}, "no go1.xml"),
        ({"RUN": "stock", "TASK": "h1"}, "TASK must be one of: go1 g1 g1-tracking go1-rough, got 'h1'"),
        ({"RUN": "stock", "TASK": "go1_rough"}, "TASK must be one of: go1 g1 g1-tracking go1-rough, got 'go1_rough'"),
        ({"RUN": "stock", "SAVE": "yes"}, "SAVE must be 0 or 1, got 'yes'"),
        (
            {"RUN": "stock", "FORWARD": "on"},
            "FORWARD must be one of: off declared full (MuJoCo Warp's forward before the observations), got 'on'",
        ),
        (
            {"RUN": "ppo-example", "FORWARD": "full"},
            "RUN=ppo-example trains the task as registered (the example takes no forward before the observations): "
            "leave FORWARD unset or set it to off, got FORWARD=full",
        ),
        (
            {"RUN": "ppo-example", "TASK": "g1-tracking"},
            "RUN=ppo-example trains TASK=go1 or g1 only (it logs no tracking errors or terrain levels), got "
            "TASK=g1-tracking",
        ),
        ({"RUN": "ppo-example", "TASK": "go1-rough"}, "RUN=ppo-example trains TASK=go1 or g1 only"),
        (
            {"RUN": "mjlab", "TASK": "g1-tracking", "MOTION": "/nonexistent/clip.npz"},
            "MOTION must be a clip file (mjlab's npz), got '/nonexistent/clip.npz'",
        ),
        (
            {"RUN": "stock", "TASK": "go1-rough", "MOTION": "clip.npz"},
            "MOTION is for TASK=g1-tracking (the clip to track), got TASK=go1-rough",
        ),
    ],
)
def test_driver_refuses_bad_settings_before_training(tmp_path: Path, env: dict[str, str], message: str) -> None:
    """Each bad setting stops the driver with status 2 before any training, its log naming what was wrong and
    what is accepted; no JSON is written."""
    script = GPU / "like_for_like.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    out = tmp_path / "out"
    run_env = {"PATH": "/usr/bin:/bin", "OUT": str(out), "WORK": str(tmp_path / "work"), **env}
    done = subprocess.run(["bash", str(script)], cwd=ROOT, env=run_env, capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    name = f"{env.get('TASK', 'go1')}-l4l-{env['RUN']}-s42"
    assert message in (out / f"{name}.log").read_text()
    assert not (out / f"{name}.json").exists()


def test_tracking_driver_gives_both_sides_the_shipped_clip_by_default(tmp_path: Path) -> None:
    """TASK=g1-tracking without MOTION names the library's clip (resolved) in its log, and goes on to look for
    mjlab's g1.xml."""
    out = tmp_path / "out"
    run_env = {"PATH": "/usr/bin:/bin", "OUT": str(out), "WORK": str(tmp_path / "w"), "MJ_PYTHONPATH": ""}
    run_env |= {"TASK": "g1-tracking", "RUN": "stock", "MODEL_XML": "/nonexistent/g1.xml"}
    done = subprocess.run(
        ["bash", str(GPU / "like_for_like.sh")], cwd=ROOT, env=run_env, capture_output=True, text=True
    )
    assert done.returncode == 2
    log = (out / "g1-tracking-l4l-stock-s42.log").read_text()
    clip = ROOT / "gym_graphreset" / "assets" / "robots" / "g1" / "motions" / "g1_sway.npz"
    assert f"task g1-tracking (Mjlab-Tracking-Flat-Unitree-G1 / gym_graphreset/G1-Tracking-Flat-v0, clip {clip})" in log
    assert "no g1.xml" in log


@pytest.mark.parametrize(
    ("env", "message", "log_name"),
    [
        ({"ROBOT": "h1"}, "ROBOT must be go1 or g1, got 'h1'", None),
        ({"TASK": "go1-rough"}, "go1_like_for_like.sh takes ROBOT (go1 or g1), not TASK", None),
        ({"ROBOT": "g1", "SAVE": "yes"}, "SAVE must be 0 or 1, got 'yes'", "g1-l4l-stock-s42.log"),
        ({}, "SAVE must be 0 or 1, got 'yes'", "go1-l4l-stock-s42.log"),
    ],
)
def test_former_driver_name_runs_the_flat_tasks(
    tmp_path: Path, env: dict[str, str], message: str, log_name: str | None
) -> None:
    """``go1_like_for_like.sh`` is ``like_for_like.sh`` with ``ROBOT`` for ``TASK``: the flat tasks only."""
    script = GPU / "go1_like_for_like.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    out = tmp_path / "out"
    run_env = {"PATH": "/usr/bin:/bin", "OUT": str(out), "WORK": str(tmp_path / "w"), "RUN": "stock", "SAVE": "yes"}
    run_env |= env
    done = subprocess.run(["bash", str(script)], cwd=ROOT, env=run_env, capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in (done.stderr if log_name is None else (out / log_name).read_text())


def test_mjlab_train_seeds_agent_and_env_as_mjlabs_train_script() -> None:
    train = _load(GPU / "mjlab_train.py", "mjlab_train_seed_under_test")
    env_cfg, rl_cfg = SimpleNamespace(seed=None), SimpleNamespace(seed=42)
    assert train.apply_seed(env_cfg, rl_cfg, None) == 42 and env_cfg.seed == rl_cfg.seed == 42
    assert train.apply_seed(env_cfg, rl_cfg, 7) == 7 and env_cfg.seed == rl_cfg.seed == 7
    assert train._parser().parse_args(["--seed", "3"]).seed == 3
    assert train._parser().parse_args([]).seed is None


def test_tracking_error_is_reached_from_above(tmp_path: Path) -> None:
    """G1 tracking's headline is an error: a run reaches mjlab's final level when its error falls to it or below."""
    script = _load(GPU / "plot_like_for_like.py", "plot_like_for_like_under_test")
    for seed in (42, 43):
        _write(tmp_path, _mjlab(seed, _rows(reach_s=200.0, end_s=240.0), motion="ab"), task="g1-tracking")
    _write(tmp_path, _rsl_rl("stock", 42, _rows(reach_s=100.0, end_s=240.0), motion="ab"), task="g1-tracking")
    _write(tmp_path, _rsl_rl("fast", 42, _rows(reach_s=900.0, end_s=240.0), motion="ab"), task="g1-tracking")
    found = script.find_runs([tmp_path], "g1-tracking")
    assert list(found) == ["mjlab", "stock", "fast"]
    task = script.TASKS["g1-tracking"]
    assert (task.key, task.higher_is_better, task.robot) == ("error_body_pos", False, "g1")
    summary = {r["label"]: r for r in summarize_training_comparison(found, "mjlab", task.key, task.higher_is_better)}
    assert summary["mjlab"]["final"] == pytest.approx(0.1)  # 0.5 - 0.4 once the ramp is at 1
    assert summary["stock"]["reached_s"] == [pytest.approx(100.8)]  # the first row at <= 0.1: 112 x 0.9 s
    assert summary["stock"]["fraction"] == pytest.approx(100.8 / 239.4)
    assert summary["fast"]["reached_s"] == [None] and summary["fast"]["fraction"] is None
    finals = script.final_values(found, task.also)
    assert finals["stock"]["error_anchor_pos"] == pytest.approx(0.2)
    assert finals["stock"]["error_body_rot"] is None  # never logged
    text = script.table(list(summary.values()), task.key, finals)
    header, _, *lines = text.splitlines()
    assert header.startswith("| run | seeds | final error_body_pos |")
    assert header.endswith(" final error_anchor_pos | final error_body_rot | final error_joint_pos |")
    assert lines[1].startswith("| stock | 1 | 0.100 | 239 |") and lines[1].endswith("| 0.200 | — | — |")
    # the episode lengths are not comparable (mjlab's: the last 100 episodes', and it resamples at the clip's end)
    assert "episode_length" not in task.also


def _cut(record: dict[str, Any], rows: int, exit_status: int | None) -> dict[str, Any]:
    """``record`` as a run stopped after ``rows`` iterations leaves it: no ``stopped`` nor what follows it; the
    driver's ``exit_status`` (``None``: a JSON from before the driver recorded it)."""
    cut = {k: v for k, v in record.items() if k not in ("stopped", "train_s", "last_iteration", "env_steps_per_s")}
    cut["rows"] = record["rows"][:rows]
    if exit_status is None:
        del cut["exit_status"]
    else:
        cut["exit_status"] = exit_status
    return cut


def test_runs_cut_short_before_their_budget_are_flagged(tmp_path: Path) -> None:
    """A run stopped by the driver's timeout (124) or killed (137), a JSON without ``stopped``, or a last row before
    the budget is named, mjlab's with what it does to "of mjlab's time"; a run that spent its budget is not, nor
    the PPO example's, whose rows come every few iterations."""
    script = _load(GPU / "plot_like_for_like.py", "plot_like_for_like_under_test")
    _write(tmp_path, _mjlab(42, _rows(reach_s=200.0, end_s=240.0)))
    _write(tmp_path, _rsl_rl("stock", 42, _rows(reach_s=120.0, end_s=240.0)))
    example = _ppo_example(42, _rows(reach_s=120.0, end_s=240.0))
    _write(tmp_path, example | {"rows": example["rows"][:-3]})  # its last iterations not logged: before the budget
    assert script.like_for_like_warnings(script.find_runs([tmp_path])) == []
    timed_out = _cut(_rsl_rl("stock", 43, _rows(reach_s=120.0, end_s=240.0)), 111, exit_status=124)
    killed = _cut(_mjlab(43, _rows(reach_s=200.0, end_s=240.0)), 150, exit_status=137)
    unannotated = _cut(_rsl_rl("fast", 42, _rows(reach_s=120.0, end_s=240.0)), 200, exit_status=None)
    capped = _rsl_rl("finalobs", 42, _rows(reach_s=120.0, end_s=240.0))
    capped |= {"rows": capped["rows"][:111], "stopped": "max_iterations"}
    for record in (timed_out, killed, unannotated, capped):
        _write(tmp_path, record)
    assert (
        script.cut_short(timed_out)
        == "its training exited with status 124 (timed out: the driver's timeout stopped it)"
    )
    assert script.like_for_like_warnings(script.find_runs([tmp_path])) == [
        "mjlab/go1-l4l-mjlab-s43.json: cut short before its budget, its training exited with status 137 (killed: "
        "still running 10 s after the timeout, or out of memory); it is mjlab's run: every \"of mjlab's time\" is "
        "measured against this cut curve",
        "stock/go1-l4l-stock-s43.json: cut short before its budget, its training exited with status 124 (timed out: "
        "the driver's timeout stopped it)",
        "finalobs/go1-l4l-finalobs-s42.json: cut short before its budget, its last row is at 100 s, before its "
        "budget of 239 s (stopped: max_iterations)",
        "fast/go1-l4l-fast-s42.json: cut short before its budget, its JSON has no `stopped`: the trainer was "
        "stopped before its training loop ended",
    ]


@pytest.mark.parametrize(
    ("status", "why"),
    [
        (124, r"timed out: still training when the \d+ s timeout sent TERM"),
        (137, r"killed: still running 10 s after the \d+ s timeout's TERM, or by the out-of-memory killer"),
    ],
)
def test_driver_explains_a_training_cut_short(tmp_path: Path, status: int, why: str) -> None:
    """A training stopped by the driver's timeout (124) or killed (137), here a stand-in for ``timeout`` that leaves
    a JSON without ``stopped`` and exits so: the log says what the status means, the JSON records it
    (``exit_status``), the run's summary line says CUT SHORT and the plot script warns."""
    record = tmp_path / "cut.json"
    record.write_text(json.dumps(_cut(_rsl_rl("stock", 42, _rows(reach_s=120.0, end_s=240.0)), 50, exit_status=0)))
    stub = tmp_path / "bin" / "timeout"
    stub.parent.mkdir()
    stub.write_text(
        f"#!{sys.executable}\nimport os, shutil, sys\nargs = sys.argv\n"
        "shutil.copy(os.environ['FAKE_RECORD'], os.path.join(args[args.index('--out') + 1], "
        "args[args.index('--name') + 1]))\nsys.exit(int(os.environ['FAKE_STATUS']))\n"
    )
    stub.chmod(0o755)
    out = tmp_path / "out"
    done, log = _run_driver(
        tmp_path, "<mujoco/>", first_on_path=stub.parent, RUN="stock", FAKE_RECORD=str(record), FAKE_STATUS=str(status)
    )
    assert done.returncode == 0 and log.rstrip().endswith("done"), log
    done_so_far = "the JSON holds the iterations done, without 'stopped': a run cut short before its budget"
    assert re.search(rf"training: exit status {status} \({why}; {done_so_far}\)", log), log
    assert f"go1 stock seed 42: 50 rows (CUT SHORT: exit status {status}, no 'stopped' in its JSON)" in log
    assert json.loads((out / "go1-l4l-stock-s42.json").read_text())["exit_status"] == status
    script = _load(GPU / "plot_like_for_like.py", "plot_like_for_like_under_test")
    (warning,) = script.like_for_like_warnings(script.find_runs([out]))
    assert warning.startswith(
        f"stock/go1-l4l-stock-s42.json: cut short before its budget, its training exited with status {status}"
    )


def test_tracking_runs_on_other_clips_are_flagged(tmp_path: Path) -> None:
    script = _load(GPU / "plot_like_for_like.py", "plot_like_for_like_under_test")
    g1_xml = GO1_XML.replace("go1", "g1")
    _write(tmp_path, _mjlab(42, _rows(reach_s=10.0, end_s=5.0), motion="aa"), task="g1-tracking")
    _write(tmp_path, _rsl_rl("stock", 42, _rows(reach_s=10.0, end_s=5.0), g1_xml, motion="aa"), task="g1-tracking")
    assert script.like_for_like_warnings(script.find_runs([tmp_path], "g1-tracking"), "g1-tracking") == []
    _write(tmp_path, _rsl_rl("stock", 43, _rows(reach_s=10.0, end_s=5.0), g1_xml, motion="bb"), task="g1-tracking")
    (warning,) = script.like_for_like_warnings(script.find_runs([tmp_path], "g1-tracking"), "g1-tracking")
    assert warning.startswith("clips (motion_sha256) differ:") and "stock/g1-tracking-l4l-stock-s43.json=bb" in warning


@pytest.mark.parametrize(
    ("task", "key", "robot_xml", "also"),
    [
        ("go1", "track_lin_vel", GO1_XML, ""),
        ("g1", "track_lin_vel", GO1_XML.replace("go1", "g1"), ""),
        (
            "g1-tracking",
            "error_body_pos",
            GO1_XML.replace("go1", "g1"),
            " final error_anchor_pos | final error_body_rot | final error_joint_pos |",
        ),
        ("go1-rough", "terrain_levels", GO1_XML, " final terrain_levels_max | final track_lin_vel |"),
    ],
)
def test_cli_draws_each_tasks_headline_metric(
    tmp_path: Path,
    task: str,
    key: str,
    robot_xml: str,
    also: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each task's JSONs (2 seeds a side) give a PNG whose panels draw its headline metric and a table of it."""
    pytest.importorskip("matplotlib", reason="the plots need the `plot` extra (matplotlib)")
    import matplotlib.pyplot as plt

    script = _load(GPU / "plot_like_for_like.py", "plot_like_for_like_under_test")
    motion = "cd" if task == "g1-tracking" else None
    for seed in (42, 43):
        _write(tmp_path, _mjlab(seed, _rows(reach_s=150.0, end_s=60.0), motion=motion), task=task)
        _write(tmp_path, _rsl_rl("stock", seed, _rows(reach_s=50.0, end_s=60.0), robot_xml, motion), task=task)
    ylabels: list[str] = []
    close = plt.close

    def record(fig: Any) -> None:
        ylabels.extend(ax.get_ylabel() for ax in fig.axes)
        close(fig)

    monkeypatch.setattr(plt, "close", record)
    png = tmp_path / "fig.png"
    assert script.main([str(tmp_path), "--task", task, "--out", str(png)]) == 0
    assert png.stat().st_size > 0
    table = png.with_suffix(".md").read_text()
    assert table.splitlines()[0].endswith(f"| of mjlab's time |{also}") and f"final {key} |" in table
    out = capsys.readouterr().out
    assert "WARNING" not in out and f"wrote {png}" in out
    assert ylabels == [script.TASKS[task].ylabel] * 2


def test_mjlab_train_reads_each_tasks_fields_from_the_logged_scalars() -> None:
    """A row holds each TAGS field (None where the task logs none), the Episode_Reward, Metrics and Curriculum
    scalars apart, and the timings; the tags are those rsl_rl_go1.py records under the same fields."""
    train = _load(GPU / "mjlab_train.py", "mjlab_train_fields_under_test")
    scalars = {
        "Episode_Reward/track_linear_velocity": 1.25,
        "Episode_Reward/motion_body_pos": 0.5,
        "Metrics/motion/error_body_pos": 0.08,
        "Metrics/motion/error_anchor_rot": 0.3,
        "Metrics/twist/error_vel_xy": 0.2,
        "Curriculum/terrain_levels/mean": 3.5,
        "Curriculum/terrain_levels/max": 9.0,
        "Curriculum/command_vel/lin_vel_x_max": 1.0,
        "Train/mean_episode_length": 480.0,
        "Train/mean_reward": 20.0,
        "Perf/collection_time": 0.7,
        "Perf/learning_time": 0.2,
        "Loss/value_function": 0.01,
    }
    row = train.row_from_scalars(3, 12.5, 24 * 4096, scalars)
    assert row == {
        "iteration": 3,
        "wall_s": 12.5,
        "env_steps": 4 * 24 * 4096,
        "track_lin_vel": 1.25,
        "track_ang_vel": None,
        "terrain_levels": 3.5,
        "terrain_levels_max": 9.0,
        "error_body_pos": 0.08,
        "error_body_rot": None,
        "error_anchor_pos": None,
        "error_anchor_rot": 0.3,
        "error_joint_pos": None,
        "error_joint_vel": None,
        "episode_length": 480.0,
        "mean_reward": 20.0,
        "episode_reward": {"Episode_Reward/track_linear_velocity": 1.25, "Episode_Reward/motion_body_pos": 0.5},
        "metrics": {
            "Metrics/motion/error_body_pos": 0.08,
            "Metrics/motion/error_anchor_rot": 0.3,
            "Metrics/twist/error_vel_xy": 0.2,
            "Curriculum/terrain_levels/mean": 3.5,
            "Curriculum/terrain_levels/max": 9.0,
            "Curriculum/command_vel/lin_vel_x_max": 1.0,
        },
        "collect_s": 0.7,
        "learn_s": 0.2,
    }


def test_mjlab_train_gives_a_tracking_task_its_clip(tmp_path: Path) -> None:
    """The clip goes to the motion command (resolved, with its SHA-256 recorded); a tracking task without one and
    a clip for a task without a motion command are refused by name."""
    import hashlib

    train = _load(GPU / "mjlab_train.py", "mjlab_train_motion_under_test")
    clip = tmp_path / "clip.npz"
    clip.write_bytes(b"frames")
    tracking = SimpleNamespace(commands={"motion": SimpleNamespace(motion_file="")})
    recorded = train.set_motion_file(tracking, "Mjlab-Tracking-Flat-Unitree-G1", clip)
    assert tracking.commands["motion"].motion_file == str(clip.resolve())
    assert recorded == {"motion_file": str(clip.resolve()), "motion_sha256": hashlib.sha256(b"frames").hexdigest()}
    with pytest.raises(ValueError, match="Mjlab-Tracking-Flat-Unitree-G1 tracks a clip: give --motion-file"):
        train.set_motion_file(tracking, "Mjlab-Tracking-Flat-Unitree-G1", None)
    velocity = SimpleNamespace(commands={"twist": object()})
    assert train.set_motion_file(velocity, "Mjlab-Velocity-Rough-Unitree-Go1", None) == {}
    with pytest.raises(ValueError, match="--motion-file given, but Mjlab-Velocity-Rough-Unitree-Go1 has no motion"):
        train.set_motion_file(velocity, "Mjlab-Velocity-Rough-Unitree-Go1", clip)


def test_mjlab_train_refuses_a_missing_clip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    train = _load(GPU / "mjlab_train.py", "mjlab_train_motion_under_test")
    with pytest.raises(SystemExit) as exit_info:
        train.main(["--motion-file", str(tmp_path / "none.npz")])
    assert exit_info.value.code == 2
    assert f"--motion-file must be a clip (mjlab's npz), got {tmp_path / 'none.npz'}" in capsys.readouterr().err


def _run_driver(
    tmp_path: Path, model: str, *, first_on_path: Path | None = None, **env: str
) -> tuple[subprocess.CompletedProcess[str], str]:
    """``like_for_like.sh`` with ``$OUT`` at ``tmp_path / "out"``, ``model`` as the robot's model file under mjlab's
    file name, an empty trainers site (this venv's rsl_rl on both sides of its version check), no mjlab, and
    ``env``'s variables (``RUN`` among them); the finished process and the run's log."""
    task = env.get("TASK", "go1")
    model_xml = tmp_path / f"{'g1' if task.startswith('g1') else 'go1'}.xml"
    model_xml.write_text(model)
    (tmp_path / "trainers").mkdir()
    out = tmp_path / "out"
    path = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    run_env = {
        "PATH": f"{first_on_path}:{path}" if first_on_path else path,
        "OUT": str(out),
        "WORK": str(tmp_path / "work"),
        "MJ_PYTHONPATH": "",
        "TRAINERS_SITE": str(tmp_path / "trainers"),
        "MODEL_XML": str(model_xml),
        **env,
    }
    done = subprocess.run(
        ["bash", str(GPU / "like_for_like.sh")], cwd=ROOT, env=run_env, capture_output=True, text=True
    )
    return done, (out / f"{task}-l4l-{env['RUN']}-s42.log").read_text()


def _run_driver_on_the_cpu(tmp_path: Path, task: str, run: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """:func:`_run_driver` with ``DEVICE=cpu``, 4 envs and a 1 s budget on the library's own model file of the robot
    (no sensors of its own)."""
    robot = "g1" if task.startswith("g1") else "go1"
    model = (ROOT / "gym_graphreset" / "assets" / "robots" / robot / f"{robot}.xml").read_text()
    home = os.environ.get("HOME", str(tmp_path))  # warp's kernel cache
    return _run_driver(tmp_path, model, HOME=home, TASK=task, RUN=run, DEVICE="cpu", NUM_ENVS="4", BUDGET_S="1")


HEADLINES = {"g1-tracking": "error_body_pos", "go1-rough": "terrain_levels"}
"""The tasks the driver runs end to end on the CPU, and each one's headline field."""
ENV_IDS = {
    "g1-tracking": "gym_graphreset/G1-Tracking-Flat-v0",
    "go1-rough": "gym_graphreset/Go1-Velocity-Rough-v0",
}
"""The driver's ``TASK`` -> this library's task id."""


@pytest.fixture(scope="module", params=list(HEADLINES))
def cpu_stock_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """:func:`_run_driver_on_the_cpu` with ``RUN=stock`` on each task, once for the tests that read it: its folder
    (``out/`` and the robot's model file), task, finished process and log."""
    pytest.importorskip("rsl_rl", reason="rsl-rl-lib is the optional `rsl_rl` extra")
    task = request.param
    folder = tmp_path_factory.mktemp(task)
    done, log = _run_driver_on_the_cpu(folder, task, "stock")
    model_xml = folder / f"{'g1' if task.startswith('g1') else 'go1'}.xml"
    return SimpleNamespace(folder=folder, task=task, done=done, log=log, model_xml=model_xml)


@pytest.mark.slow
def test_driver_runs_this_librarys_side_end_to_end_on_the_cpu(cpu_stock_run: SimpleNamespace) -> None:
    """``DEVICE=cpu``, 4 envs, a 1 s budget: the driver trains one iteration through ``rsl_rl_go1.py`` (this
    venv's rsl_rl on both sides of its version check) on a model file named as mjlab's, annotates the JSON
    with the run, seed, task and driver, keeps the final checkpoint, and its rows hold the task's headline
    field; the plot script then finds the run."""
    task, done, log, model_xml = cpu_stock_run.task, cpu_stock_run.done, cpu_stock_run.log, cpu_stock_run.model_xml
    out = cpu_stock_run.folder / "out"
    headline = HEADLINES[task]
    name = f"{task}-l4l-stock-s42"
    assert done.returncode == 0 and log.rstrip().endswith("done"), log
    assert "training: exit status 0" in log and "not like for like" not in log
    assert "run stock (forward before obs full, model sensors kept)" in log
    record = json.loads((out / f"{name}.json").read_text())
    assert (record["run"], record["seed"], record["like_for_like_task"]) == ("stock", 42, task)
    assert (record["forward_before_obs"], record["keep_sensors"]) == ("full", True)  # mjlab's work by default
    assert record["driver"] == "benchmarks/gpu/like_for_like.sh" and record["model_xml"] == str(model_xml)
    assert ("motion_sha256" in record) == (task == "g1-tracking")
    (row,) = record["rows"]
    assert headline in row and f"{task} stock seed 42: 1 rows" in log
    assert (out / f"{name}.ckpt" / "model_0.pt").is_file()
    script = _load(GPU / "plot_like_for_like.py", "plot_like_for_like_under_test")
    assert list(script.find_runs([out], task)) == ["stock"]
    assert record["exit_status"] == 0 and script.cut_short(record) is None  # it spent its budget


@pytest.mark.slow
def test_drivers_checkpoint_plays_and_exports(
    cpu_stock_run: SimpleNamespace,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The driver's final checkpoint records the task and the env it trained (the model file, its sensors kept,
    mjlab's whole forward before the observations; the package's clip as the task's default), so that ``play``
    rebuilds that env (the policy's observation and action widths match) and ``export`` writes and checks both
    formats. Where the recorded model file is not (another machine), ``play`` names it and ``--model-xml`` (and,
    tracking, ``--motion-file``) plays on the files given."""
    import gymnasium as gym
    import torch

    from gym_graphreset.assets.robots.g1.clip import G1_CLIP
    from gym_graphreset.cli import main

    task, model_xml = cpu_stock_run.task, cpu_stock_run.model_xml
    assert cpu_stock_run.done.returncode == 0, cpu_stock_run.log
    env_id = ENV_IDS[task]
    ckpt = cpu_stock_run.folder / "out" / f"{task}-l4l-stock-s42.ckpt" / "model_0.pt"
    infos = torch.load(ckpt, weights_only=False)["infos"]
    trained = {"model_xml": str(model_xml), "keep_sensors": True, "forward_before_obs": True, "forward_passes": "full"}
    assert (infos["env_id"], infos["env_kwargs"]) == (env_id, trained)
    made: list[tuple[str, dict[str, Any]]] = []
    make_vec = gym.make_vec

    def recording_make_vec(made_id: str, num_envs: int, **kwargs: Any) -> Any:
        made.append((made_id, kwargs))
        return make_vec(made_id, num_envs, **kwargs)

    monkeypatch.setattr(gym, "make_vec", recording_make_vec)
    play = ["play", str(ckpt), "--num-envs", "2", "--steps", "3", "--no-video", "--device", "cpu"]
    assert main(play) == 0
    assert f"{env_id} x2, 3 steps of the deterministic policy: " in capsys.readouterr().out
    ((made_id, kwargs),) = made
    assert made_id == env_id and {k: kwargs.get(k) for k in trained} == trained and "motion_file" not in kwargs

    exported = tmp_path / "exported"
    assert main(["export", str(ckpt), "--out", str(exported)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {exported / 'policy.pt'} (checked with torch.jit" in printed
    if importlib.util.find_spec("onnx") is None or importlib.util.find_spec("onnxscript") is None:
        assert "onnx is not installed" in printed and not (exported / "policy.onnx").exists()
    else:
        import onnx

        assert f"wrote {exported / 'policy.onnx'} (checked with " in printed
        meta = {p.key: p.value for p in onnx.load(str(exported / "policy.onnx")).metadata_props}
        assert (meta["env_id"], meta["trainer"]) == (env_id, "rsl_rl")

    elsewhere = tmp_path / "mjlab" / model_xml.name  # as on another machine: the recorded model file not there
    elsewhere.parent.mkdir()
    model_xml.rename(elsewhere)
    try:
        assert main(play) == 2
        assert f"was trained on the model file {str(model_xml)!r}, which is not here: pass --model-xml" in (
            capsys.readouterr().err
        )
        given = {"model_xml": str(elsewhere)} | ({"motion_file": str(G1_CLIP)} if task == "g1-tracking" else {})
        made.clear()
        assert main([*play, *(f"--{k.replace('_', '-')}={v}" for k, v in given.items())]) == 0
        assert f"{env_id} x2, 3 steps of the deterministic policy: " in capsys.readouterr().out
        ((_, kwargs),) = made
        assert {k: kwargs.get(k) for k in given} == given and kwargs["keep_sensors"] is True
    finally:
        elsewhere.rename(model_xml)  # the module's other tests read the run folder as the driver left it


@pytest.mark.slow
def test_driver_records_the_ppo_examples_run_with_the_versions(tmp_path: Path) -> None:
    """``RUN=ppo-example`` on the CPU: the driver copies the example's JSON out with the bench's versions
    (``gym_graphreset.bench.results.env_versions``) and its annotation: the task as registered (no forward before
    the observations, the model's sensors removed), no rsl-rl-lib."""
    done, log = _run_driver_on_the_cpu(tmp_path, "go1", "ppo-example")
    assert done.returncode == 0 and log.rstrip().endswith("done"), log
    assert "run ppo-example (the task as registered: no forward before obs, model sensors removed)" in log
    record = json.loads((tmp_path / "out" / "go1-l4l-ppo-example-s42.json").read_text())
    assert {"python", "torch", "gymnasium"} <= set(record["versions"]), record.get("versions")
    assert (record["run"], record["seed"], record["like_for_like_task"]) == ("ppo-example", 42, "go1")
    assert (record["rsl_rl_lib"], record["forward_before_obs"], record["keep_sensors"]) == (None, "off", False)
    assert (record["exit_status"], record["stopped"]) == (0, "budget")  # it exited at its time limit


@pytest.mark.slow
def test_driver_fails_when_the_run_wrote_no_record(tmp_path: Path) -> None:
    """A training that writes no JSON (here: a model file that does not parse) makes the driver's record step fail,
    and the driver exits with its status, saying so, instead of ending "done"."""
    pytest.importorskip("rsl_rl", reason="rsl-rl-lib is the optional `rsl_rl` extra")
    done, log = _run_driver(tmp_path, "not MJCF", RUN="stock", DEVICE="cpu")
    assert done.returncode == 1, log
    assert "training: exit status 1" in log and "the run wrote nothing" in log
    assert "recording the run failed (exit status 1, the error above)" in log and not log.rstrip().endswith("done")
