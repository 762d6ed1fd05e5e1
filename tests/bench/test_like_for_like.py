"""The like-for-like Go1 training comparison (``benchmarks/gpu/go1_like_for_like.sh`` and its plot): synthetic
JSONs in the schemas that ``mjlab_train.py``, ``rsl_rl_go1.py`` and the PPO example write (as the driver leaves
them) are found, summarised against mjlab's final level and drawn on two panels; the driver refuses bad
settings before touching a GPU; ``mjlab_train.py --seed`` seeds as mjlab's train script does."""

from __future__ import annotations

import importlib.util
import json
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
    """Iterations every ``dt`` s: the first with no reset (null metric), then a ramp to ``level`` at ``reach_s``."""
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
            }
        )
    return rows


def _versions(gpu: str = "NVIDIA H200", rsl: str | None = "5.4.2") -> dict[str, Any]:
    versions = {"python": "3.12.3", "torch": "2.11.0+cu130", "gpu": gpu}
    return versions | ({"rsl-rl-lib": rsl} if rsl else {})


def _mjlab(seed: int, rows: list[dict[str, Any]], **versions: Any) -> dict[str, Any]:
    """As ``mjlab_train.py`` writes it, then the driver's annotation."""
    for row in rows:
        row |= {"mean_reward": 1.0, "collect_s": 0.7, "learn_s": 0.1}
    v = _versions(**versions)
    return {
        "trainer": "mjlab + rsl_rl OnPolicyRunner (the task's own runner class and PPO config)",
        "task": "Mjlab-Velocity-Flat-Unitree-Go1",
        "model": "the task's own",
        "num_envs": 4096,
        "device": "cuda:0",
        "budget_s": 240.0,
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
        "driver": "benchmarks/gpu/go1_like_for_like.sh",
    }


def _rsl_rl(run: str, seed: int, rows: list[dict[str, Any]], model_xml: str | None = GO1_XML, **versions: Any) -> dict:
    """As ``rsl_rl_go1.py`` writes it, then the driver's annotation."""
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
        "budget_s": 240.0,
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
        "driver": "benchmarks/gpu/go1_like_for_like.sh",
    }


def _ppo_example(seed: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """As ``examples/ppo_continuous.py`` writes it (rows without ``iteration``), then the driver's annotation."""
    rows = [{k: v for k, v in r.items() if k != "iteration"} | {"mean_return": 1.0} for r in rows]
    return {
        "trainer": "examples/ppo_continuous.py",
        "task": "gym_graphreset/Go1-Velocity-Flat-v0",
        "num_envs": 4096,
        "budget_s": 240.0,
        "model_xml": GO1_XML,
        "metric": "mjlab's Episode_Reward/<term>",
        "args": {"seed": seed},
        "rows": rows,
        "curve": {},
        "versions": _versions(rsl=None),
        "rsl_rl_lib": None,
        "run": "ppo-example",
        "seed": seed,
        "driver": "benchmarks/gpu/go1_like_for_like.sh",
    }


def _write(folder: Path, record: dict[str, Any], robot: str = "go1") -> Path:
    path = folder / f"{robot}-l4l-{record['run']}-s{record['seed']}.json"
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
    _write(tmp_path, _mjlab(42, _rows(reach_s=100.0, end_s=20.0)), robot="g1")
    _write(tmp_path, _rsl_rl("stock", 42, _rows(reach_s=100.0, end_s=20.0), model_xml=g1_xml), robot="g1")
    _write(tmp_path, _rsl_rl("stock", 43, _rows(reach_s=100.0, end_s=20.0)), robot="g1")  # on go1.xml
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
        ({"RUN": "bogus"}, "RUN must be one of"),
        ({"RUN": "stock", "BUDGET_S": "560"}, "leaves no time for setup"),
        ({"RUN": "stock", "MODEL_XML": "/nonexistent/go1.xml", "MJ_PYTHONPATH": ""}, "no go1.xml"),
        ({"RUN": "stock", "ROBOT": "g1", "MODEL_XML": "/nonexistent/g1.xml", "MJ_PYTHONPATH": ""}, "no g1.xml"),
        ({"RUN": "stock", "ROBOT": "h1"}, "ROBOT must be go1 or g1, got 'h1'"),
        ({"RUN": "stock", "SAVE": "yes"}, "SAVE must be 0 or 1, got 'yes'"),
    ],
)
def test_driver_refuses_bad_settings_before_training(tmp_path: Path, env: dict[str, str], message: str) -> None:
    script = GPU / "go1_like_for_like.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    out = tmp_path / "out"
    run_env = {"PATH": "/usr/bin:/bin", "OUT": str(out), "WORK": str(tmp_path / "work"), **env}
    done = subprocess.run(["bash", str(script)], cwd=ROOT, env=run_env, capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    name = f"{env.get('ROBOT', 'go1')}-l4l-{env['RUN']}-s42"
    assert message in (out / f"{name}.log").read_text()
    assert not (out / f"{name}.json").exists()


def test_mjlab_train_seeds_agent_and_env_as_mjlabs_train_script() -> None:
    train = _load(GPU / "mjlab_train.py", "mjlab_train_seed_under_test")
    env_cfg, rl_cfg = SimpleNamespace(seed=None), SimpleNamespace(seed=42)
    assert train.apply_seed(env_cfg, rl_cfg, None) == 42 and env_cfg.seed == rl_cfg.seed == 42
    assert train.apply_seed(env_cfg, rl_cfg, 7) == 7 and env_cfg.seed == rl_cfg.seed == 7
    assert train._parser().parse_args(["--seed", "3"]).seed == 3
    assert train._parser().parse_args([]).seed is None
