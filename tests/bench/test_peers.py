"""GPU peers (mjlab) in their own interpreter: the JSON-line protocol, notices instead of crashes, the
comparison table, model variants through the CLI, and the training-curve format; all on the CPU, with
fake runner scripts standing in for mjlab."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import gymnasium as gym
import pytest

import gym_graphreset.bench.peers.compare as compare
from gym_graphreset.bench.peers.compare import (
    PeerConfig,
    PeerSkipped,
    Variant,
    comparison_table,
    load_results,
    parse_peer_output,
    parse_variant,
    run_peer,
    runner_path,
)
from gym_graphreset.bench.plotting import final_level, load_training_curve, plot_training_curves, time_to_reach
from gym_graphreset.bench.results import ModeResult
from gym_graphreset.cli import main

ROOT = Path(__file__).resolve().parents[2]
FAKE_RUNNER = """
import json, os, sys, time
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
mode = os.environ.get("FAKE_MODE", "ok")
print("[INFO] lots of peer chatter", flush=True)
print('{"peer": "someone-else", "num_envs": 1}')
if mode == "sleep":
    time.sleep(30)
if mode == "crash":
    print("Traceback ...\\nRuntimeError: CUDA out of memory", file=sys.stderr)
    raise SystemExit(1)
n = int(args["--num-envs"])
record = {"peer": "mjlab", "task": args.get("--task", "Mjlab-Velocity-Flat-Unitree-Go1"), "num_envs": n,
          "device": args["--device"], "steps": int(args["--steps"]), "warmup": int(args["--warmup"]),
          "ms_per_step": 50.0, "physics_ms": 8.0, "host_syncs_per_step": 65.0, "env_steps_per_s": n / 0.05,
          "peak_gpu_mem_mb": None, "model_xml": os.environ.get("FAKE_MODEL_XML"),
          "pythonpath": os.environ.get("PYTHONPATH"), "physics_states": args.get("--physics-states"),
          "motion_file": args.get("--motion-file")}
if mode == "partial":
    del record["physics_ms"]
record.update(json.loads(os.environ.get("FAKE_PATCH", "{}")))
print(json.dumps(record))
"""


@pytest.fixture
def fake_runner(tmp_path: Path) -> Path:
    """A stand-in for mjlab_runner.py: chatter, a foreign JSON line, then the peer's line (or a failure)."""
    path = tmp_path / "fake_runner.py"
    path.write_text(FAKE_RUNNER)
    return path


@pytest.fixture
def config() -> PeerConfig:
    return PeerConfig(python=sys.executable, device="cpu", timeout_s=20)


def _load_by_path(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parse_peer_output_takes_the_last_line_of_that_peer() -> None:
    """Chatter, malformed JSON and other peers' lines are skipped; the last matching line wins."""
    out = '[INFO] x\n{"peer": "mjlab", "n": 1}\n{not json\n{"peer": "other"}\n{"peer": "mjlab", "n": 2}\nbye\n'
    assert parse_peer_output(out) == {"peer": "mjlab", "n": 2}
    assert parse_peer_output("[INFO] nothing here\n{broken") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ours", Variant("ours")),
        ("mjlab-go1:model_xml=/a/go1.xml", Variant("mjlab-go1", {"model_xml": "/a/go1.xml"})),
        ("v: a=1 , b=x=y,", Variant("v", {"a": 1, "b": "x=y"})),
        ("v:f=0.5,t=true,F=False,s=1.5.2", Variant("v", {"f": 0.5, "t": True, "F": False, "s": "1.5.2"})),
    ],
)
def test_parse_variant(text: str, expected: Variant) -> None:
    assert parse_variant(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [(":model_xml=a", "`--variant` needs a label before ':'"), ("v:model_xml", "items must be key=value")],
)
def test_parse_variant_rejects_malformed(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_variant(text)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "brax"}, "`name` must be one of ['mjlab'], got 'brax'"),
        ({"timeout_s": 0}, "`timeout_s` must be > 0"),
        ({"physics_states": "idle"}, "`physics_states` must be 'step' or 'free', got 'idle'"),
    ],
)
def test_peer_config_validated(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        PeerConfig(**kwargs)


def test_run_peer_parses_the_runner_line(
    fake_runner: Path, config: PeerConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Arguments reach the runner, PYTHONPATH is replaced, the line becomes a ModeResult with extras."""
    monkeypatch.setenv("FAKE_MODE", "ok")
    cfg = PeerConfig(
        python=sys.executable,
        pythonpath="/peer/site",
        task="Some-Task",
        device="cpu",
        timeout_s=20,
        physics_states="free",
        motion_file="/clips/walk.npz",
    )
    result = run_peer(cfg, 256, steps=7, warmup=3, runner=fake_runner)
    assert isinstance(result, ModeResult)
    assert (result.mode, result.env_id, result.num_envs, result.steps) == ("mjlab", "Some-Task", 256, 7)
    assert result.env_steps_per_s == pytest.approx(256 / 0.05) and result.host_syncs_per_step == 65.0
    assert result.extra["physics_ms"] == 8.0 and result.extra["warmup"] == 3 and result.extra["engine"] == "mjlab"
    assert result.extra["pythonpath"] == "/peer/site" and result.extra["physics_states"] == "free"
    assert result.extra["motion_file"] == "/clips/walk.npz"


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"num_envs": 32}, "`num_envs` must be 64 (the run asked for), got 32"),
        ({"steps": 3}, "`steps` must be 7 (the run asked for), got 3"),
        ({"ms_per_step": float("nan")}, "`ms_per_step` must be a finite number > 0, got nan"),
        ({"ms_per_step": -50.0}, "`ms_per_step` must be a finite number > 0, got -50.0"),
        ({"env_steps_per_s": float("inf")}, "`env_steps_per_s` must be a finite number > 0, got inf"),
        ({"physics_ms": 0.0}, "`physics_ms` must be a finite number > 0, got 0.0"),
        ({"physics_ms": "8"}, "`physics_ms` must be a finite number > 0, got '8'"),
        ({"host_syncs_per_step": -1}, "`host_syncs_per_step` must be a finite number >= 0, got -1"),
        ({"peak_gpu_mem_mb": float("nan")}, "`peak_gpu_mem_mb` must be a finite number >= 0, got nan"),
    ],
)
def test_run_peer_refuses_a_record_of_another_size_or_with_bad_timings_by_field(
    fake_runner: Path,
    config: PeerConfig,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    patch: dict[str, Any],
    message: str,
) -> None:
    """A record that would put a wrong or non-finite number in the table is a notice naming the field."""
    monkeypatch.setenv("FAKE_PATCH", json.dumps(patch))
    result = run_peer(config, 64, steps=7, warmup=1, runner=fake_runner)
    assert isinstance(result, PeerSkipped) and result.reason == "failed"
    assert f"mjlab peer: x64 printed an unreadable result ({message}): skipped" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("mode", "reason", "notice"),
    [
        ("sleep", "timeout", "mjlab peer: x64 did not finish within 1 s (--peer-timeout): skipped"),
        ("crash", "failed", "mjlab peer: x64 failed (exit status 1: RuntimeError: CUDA out of memory): skipped"),
        ("partial", "failed", "mjlab peer: x64 printed an unreadable result (the peer's JSON line lacks"),
    ],
)
def test_run_peer_failures_are_notices(
    fake_runner: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    mode: str,
    reason: str,
    notice: str,
) -> None:
    """A hung, crashed or incomplete runner is a one-line notice and a PeerSkipped, not an exception."""
    monkeypatch.setenv("FAKE_MODE", mode)
    cfg = PeerConfig(python=sys.executable, device="cpu", timeout_s=1 if mode == "sleep" else 20)
    skipped = run_peer(cfg, 64, steps=1, warmup=0, runner=fake_runner)
    assert isinstance(skipped, PeerSkipped) and skipped.reason == reason
    assert notice in capsys.readouterr().out and skipped.message.startswith(notice[:20])


def test_missing_interpreter_is_a_notice(config: PeerConfig, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = PeerConfig(python="/no/such/python", device="cpu")
    skipped = run_peer(cfg, 64, steps=1, warmup=0)
    assert isinstance(skipped, PeerSkipped) and skipped.reason == "missing"
    assert "its interpreter '/no/such/python' was not found (--peer-python): skipped" in capsys.readouterr().out


def test_real_runner_without_mjlab_reports_missing(
    config: PeerConfig, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real runner in an interpreter without mjlab exits with a 'missing' line, read as a notice."""
    if importlib.util.find_spec("mjlab") is not None:
        pytest.skip("mjlab is importable here: the missing path cannot be exercised")
    skipped = run_peer(config, 8, steps=1, warmup=0)
    assert isinstance(skipped, PeerSkipped) and skipped.reason == "missing"
    assert "No module named 'mjlab'" in capsys.readouterr().out


def test_run_peer_rejects_bad_sizes(config: PeerConfig) -> None:
    with pytest.raises(ValueError, match=re.escape("need num_envs >= 1, steps >= 1, warmup >= 0; got 0, 5, 1")):
        run_peer(config, 0, steps=5, warmup=1)


def test_runner_imports_only_stdlib_torch_and_mjlab() -> None:
    """The runner runs in mjlab's interpreter by path: it must not import this library (nor anything else)."""
    tree = ast.parse(runner_path("mjlab").read_text())
    roots = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    roots |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert roots - sys.stdlib_module_names == {"torch", "mjlab"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--num-envs", "0"], "--num-envs must be >= 1, got 0"), (["--num-envs", "4", "--steps", "0"], "--steps")],
)
def test_runner_validates_arguments(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    runner = _load_by_path(runner_path("mjlab"), "mjlab_runner_under_test")
    with pytest.raises(SystemExit) as exit_info:
        runner.main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.fixture
def fake_mjlab(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """A stand-in ``mjlab`` package in ``sys.modules``; returns the log of env steps and physics substeps."""
    log: list[str] = []
    configs: list[Any] = []

    class Env:
        def __init__(self, cfg: Any, device: str) -> None:
            self.sim = SimpleNamespace(step=lambda: log.append("sim"))
            self.action_manager = SimpleNamespace(total_action_dim=3)

        def reset(self) -> None:
            log.append("reset")

        def step(self, action: Any) -> None:
            log.append("env")

    def load_env_cfg(task: str) -> Any:
        commands = {"motion": SimpleNamespace(motion_file="")} if "Tracking" in task else {}
        cfg = SimpleNamespace(scene=SimpleNamespace(num_envs=0), seed=None, decimation=2, commands=commands)
        configs.append(cfg)
        return cfg

    modules = {
        "mjlab": SimpleNamespace(__file__=str(tmp_path / "mjlab" / "__init__.py")),
        "mjlab.tasks": SimpleNamespace(),
        "mjlab.tasks.registry": SimpleNamespace(load_env_cfg=load_env_cfg),
        "mjlab.envs": SimpleNamespace(ManagerBasedRlEnv=Env),
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(Env, "configs", configs, raising=False)  # the cfgs built, for the motion-file test
    return log


@pytest.mark.parametrize("states", ["step", "free"])
def test_runner_times_physics_on_the_states_asked_for(fake_mjlab: list[str], states: str) -> None:
    """``step``: each timed block of ``decimation`` substeps follows an env step; ``free``: they run on alone."""
    runner = _load_by_path(runner_path("mjlab"), "mjlab_runner_under_test")
    record = runner.measure("Some-Task", 4, steps=3, warmup=1, device="cpu", seed=0, physics_states=states)
    assert record["physics_states"] == states
    head = ["reset"] + ["env"] * (1 + 3)  # the reset, the warm-up and the timed env steps
    assert fake_mjlab[: len(head)] == head
    block = ["env", "sim", "sim"] if states == "step" else ["sim", "sim"]  # decimation 2
    assert fake_mjlab[len(head) :] == block * (1 + 3)  # the physics' warm-up block, then the timed ones


def test_runner_sets_the_clip_of_a_tracking_task(fake_mjlab: list[str], tmp_path: Path) -> None:
    """``--motion-file`` lands in the task's motion command (resolved); refused by a task without one; required
    by a tracking task."""
    runner = _load_by_path(runner_path("mjlab"), "mjlab_runner_under_test")
    clip = tmp_path / "clip.npz"
    clip.touch()
    record = runner.measure("Mjlab-Tracking-Flat-Unitree-G1", 2, 1, 0, "cpu", 0, "free", motion_file=str(clip))
    configs = sys.modules["mjlab.envs"].ManagerBasedRlEnv.configs
    assert configs[-1].commands["motion"].motion_file == str(clip.resolve())
    assert record["motion_file"] == str(clip)
    with pytest.raises(ValueError, match="no motion command"):
        runner.measure("Mjlab-Velocity-Flat-Unitree-G1", 2, 1, 0, "cpu", 0, motion_file=str(clip))
    with pytest.raises(ValueError, match="give --motion-file"):
        runner.measure("Mjlab-Tracking-Flat-Unitree-G1", 2, 1, 0, "cpu", 0)


def test_runner_refuses_a_missing_clip(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    runner = _load_by_path(runner_path("mjlab"), "mjlab_runner_under_test")
    with pytest.raises(SystemExit) as exit_info:
        runner.main(["--num-envs", "4", "--motion-file", str(tmp_path / "none.npz")])
    assert exit_info.value.code == 2 and "--motion-file: no such file" in capsys.readouterr().err


def _result(mode: str, env_id: str, n: int, ms: float, **extra: Any) -> ModeResult:
    return ModeResult(mode, env_id, n, "cuda:0", 100, ms, n / ms * 1e3, 0.0, None, extra)


def test_comparison_table_marks_the_same_model_ratio(tmp_path: Path) -> None:
    """Ours' fastest mode per variant against the peer; only the variant loading the peer's file is 'same model'."""
    xml = tmp_path / "go1.xml"
    xml.touch()
    a, b = "Go1[ours-mjcf]", "Go1[mjlab-go1]"
    results = [
        _result("bare physics", a, 4096, 8.0),
        _result("selected", a, 4096, 40.0),
        _result("step graph", a, 4096, 10.0),
        _result("bare physics", b, 4096, 9.0),
        _result("step graph", b, 4096, 12.0, env_kwargs={"model_xml": str(xml)}),
        _result("mjlab", "Mjlab-Go1", 4096, 50.0, engine="mjlab", physics_ms=8.5, model_xml=str(xml)),
    ]
    table = comparison_table(results)
    assert "| ours | Go1[ours-mjcf] | 4096 | step graph | 409,600 | 10.00 | 8.00 | 1.25 | 0.00 | 5.00x |" in table
    assert (
        "| ours | Go1[mjlab-go1] | 4096 | step graph | 341,333 | 12.00 | 9.00 | 1.33 | 0.00 | 4.17x (same model) |"
        in (table)
    )
    assert "| mjlab | Mjlab-Go1 | 4096 | mjlab | 81,920 | 50.00 | 8.50 | 5.88 | 0.00 | - |" in table


def test_cli_rejects_bad_peer_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["bench", "--device", "cpu", "--num-envs", "8", "--steps", "1", "--modes", "masked", "--out", str(tmp_path)]
    assert main([*base, "--peer", "mjlab,brax"]) == 2
    assert "unknown --peer ['brax']; choose from ['mjlab']" in capsys.readouterr().err
    assert main([*base, "--variant", "a", "--variant", "a:x=1"]) == 2
    assert "`--variant` label 'a' given twice" in capsys.readouterr().err
    assert main([*base, "--variant", "a:x"]) == 2
    assert "items must be key=value" in capsys.readouterr().err
    (tmp_path / "go1.xml").write_text("<mujoco/>")
    assert main([*base, "--no-progress", "--variant", f"a:model_xml={tmp_path / 'go1.xml'}"]) == 2
    assert "`--variant a`: gym_graphreset/CartPole-v1 does not take ['model_xml']" in capsys.readouterr().err


CLI = ["bench", "--device", "cpu", "--num-envs", "8,16", "--steps", "2", "--warmup", "1", "--modes", "masked"]


def test_cli_missing_peer_is_one_notice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing interpreter: one notice (not one per size), exit status 0, ours kept in the JSON."""
    assert main([*CLI, "--out", str(tmp_path), "--no-progress", "--peer", "mjlab", "--peer-python", "/no/py"]) == 0
    out = capsys.readouterr().out
    assert out.count("mjlab peer: its interpreter '/no/py' was not found") == 1
    modes = [r["mode"] for r in json.loads((tmp_path / "bench-CartPole-v1-cpu.json").read_text())["results"]]
    assert modes == ["masked", "masked"]


def test_cli_variants_reach_the_constructor_and_peer_rows_are_saved(
    tmp_path: Path, fake_runner: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each --variant's key=value pairs are constructor kwargs; the peer's rows land in the JSON and table."""
    seen: list[dict[str, Any]] = []
    make_vec = gym.make_vec

    def recording_make_vec(env_id: str, **kwargs: Any) -> gym.vector.VectorEnv:
        seen.append({k: v for k, v in kwargs.items() if k not in ("num_envs", "vectorization_mode", "device")})
        kwargs.pop("model_xml", None)  # CartPole takes no model file: record it, then build the env
        return make_vec(env_id, **kwargs)

    monkeypatch.setattr(gym, "make_vec", recording_make_vec)
    monkeypatch.setattr(compare, "runner_path", lambda name: fake_runner)
    monkeypatch.setenv("FAKE_MODE", "ok")
    monkeypatch.setenv("FAKE_MODEL_XML", str(tmp_path / "go1.xml"))
    (tmp_path / "go1.xml").write_text("<mujoco/>")  # the model file of the variant must exist
    args = [*CLI, "--out", str(tmp_path), "--no-progress", "--peer", "mjlab", "--peer-python", sys.executable]
    assert main([*args, "--variant", "ours", "--variant", f"theirs:model_xml={tmp_path / 'go1.xml'}"]) == 0
    assert {"model_xml": str(tmp_path / "go1.xml")} in seen and {} in seen
    out = capsys.readouterr().out
    assert "x peer |" in out and "(same model)" in out
    results = load_results([tmp_path / "bench-CartPole-v1-cpu.json"])
    assert [r.num_envs for r in results if r.mode == "mjlab"] == [8, 16]
    theirs = [r for r in results if r.env_id == "gym_graphreset/CartPole-v1[theirs]"]
    assert theirs and all(r.extra["env_kwargs"] == {"model_xml": str(tmp_path / "go1.xml")} for r in theirs)
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "bench-CartPole-v1-cpu-vs-mjlab.png").stat().st_size > 0


def _curve(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"rows": rows}))
    return path


def test_training_curve_format_checked(tmp_path: Path) -> None:
    good = _curve(tmp_path / "a.json", [{"wall_s": 1.0, "env_steps": 10, "track_lin_vel": None, "episode_length": 3}])
    assert load_training_curve(good)[0]["env_steps"] == 10
    bad = _curve(tmp_path / "b.json", [{"wall_s": 1.0, "env_steps": 10}])
    with pytest.raises(ValueError, match=re.escape("row 0 lacks ['track_lin_vel', 'episode_length']")):
        load_training_curve(bad)
    (tmp_path / "c.json").write_text("[]")
    with pytest.raises(ValueError, match="expected a JSON object with a 'rows' list"):
        load_training_curve(tmp_path / "c.json")


def test_plot_training_curves_both_runs(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is the optional `plot` extra")
    rows = [{"wall_s": t, "env_steps": 100 * t, "track_lin_vel": 0.1 * t, "episode_length": 10 * t} for t in range(5)]
    runs = {"mjlab": _curve(tmp_path / "m.json", rows), "ours": _curve(tmp_path / "o.json", rows[::2])}
    assert plot_training_curves(runs, tmp_path / "curves.png", "Go1 flat: tracking vs wall-clock", reference="mjlab")
    assert (tmp_path / "curves.png").stat().st_size > 0
    with pytest.raises(ValueError, match=re.escape("`reference` must be one of ['mjlab', 'ours'], got 'brax'")):
        plot_training_curves(runs, tmp_path / "x.png", "t", reference="brax")


def test_final_level_and_time_to_reach() -> None:
    """The reference level is the mean of the last values; the time is the first row at or above it."""
    rows = [{"wall_s": 10.0 * i, "track_lin_vel": v} for i, v in enumerate([None, 0.1, 0.5, 0.4, 0.6])]
    assert final_level(rows, last=3) == pytest.approx(0.5)
    assert time_to_reach(rows, 0.5) == 20.0 and time_to_reach(rows, 0.7) is None
    assert final_level([{"wall_s": 0.0, "track_lin_vel": None}]) is None


def test_mjlab_train_budget_stops_after_the_iteration(tmp_path: Path) -> None:
    """mjlab_train.py's runner subclass calls back after each logged iteration and skips checkpoints."""
    train = _load_by_path(ROOT / "benchmarks" / "gpu" / "mjlab_train.py", "mjlab_train_under_test")

    class Logger:
        def log(self, **kw: Any) -> None:
            self.last = kw["it"]

    class Base:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.logger, self.saved = Logger(), []

        def learn(self, iterations: int) -> None:
            for it in range(iterations):
                self.logger.log(it=it)
            self.save("final.pt")

        def save(self, path: str, infos: Any = None) -> None:
            self.saved.append(path)

    seen: list[int] = []

    def on_iteration(runner: Any, it: int) -> None:
        seen.append(it)
        if it == 2:
            raise train.BudgetSpent

    runner = train._budgeted_runner(Base)(on_iteration=on_iteration)
    with pytest.raises(train.BudgetSpent):
        runner.learn(10)
    assert seen == [0, 1, 2] and runner.logger.last == 2
    runner.save("x.pt")
    assert runner.saved == []


def test_mjlab_train_validates_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    train = _load_by_path(ROOT / "benchmarks" / "gpu" / "mjlab_train.py", "mjlab_train_under_test")
    with pytest.raises(SystemExit) as exit_info:
        train.main(["--budget-s", "0"])
    assert exit_info.value.code == 2 and "--budget-s must be > 0, got 0.0" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name", ["vs_mjlab.sh", "go1_vs_mjlab.sh", "go1_ab.sh", "scale_sweep.sh", "peer_rounds.sh", "rounds_table.sh"]
)
def test_gpu_scripts_are_valid_bash(name: str) -> None:
    """The GPU scripts parse (bash -n); the comparison runs every prewarm and size under a timeout."""
    import subprocess

    script = ROOT / "benchmarks" / "gpu" / name
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True, check=False).returncode == 0
    if name == "vs_mjlab.sh":
        assert script.read_text().count("timeout ") >= 4


def test_vs_mjlab_refuses_an_unknown_robot(tmp_path: Path) -> None:
    """An unknown ``ROBOT`` stops before any work, naming the accepted values."""
    import subprocess

    script = ROOT / "benchmarks" / "gpu" / "vs_mjlab.sh"
    env = {"PATH": "/usr/bin:/bin", "OUT": str(tmp_path), "ROBOT": "h1"}
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 2 and "ROBOT must be go1, g1, go1-rough, g1-rough or g1-tracking, got h1" in done.stderr


@pytest.mark.parametrize(
    ("robots", "outputs", "message"),
    [("go1 h1", "1", "got h1"), ("  ", "1", "ROBOTS is empty"), ("go1", "yes", "OUTPUTS must be 1")],
)
def test_rounds_table_refuses_an_unknown_or_no_robot(tmp_path: Path, robots: str, outputs: str, message: str) -> None:
    """``rounds_table.sh`` checks every robot it is given, and ``OUTPUTS``, before running any of them."""
    import subprocess

    script = ROOT / "benchmarks" / "gpu" / "rounds_table.sh"
    env = {"PATH": "/usr/bin:/bin", "OUT": str(tmp_path), "ROBOTS": robots, "OUTPUTS": outputs}
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 2 and message in done.stderr
    assert not (tmp_path / "rounds.tgz").exists()


def test_rounds_table_packs_each_robots_output_and_passes_on_a_failure(tmp_path: Path) -> None:
    """Each robot runs in turn into its own folder of one archive; a robot that cannot run (here: no mjlab on
    ``MJ_PYTHONPATH``) makes the whole command's status non-zero, its message kept in the archive's log."""
    import subprocess
    import sys
    import tarfile

    script = ROOT / "benchmarks" / "gpu" / "rounds_table.sh"
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "OUT": str(tmp_path),
        "ROBOTS": "go1 g1-tracking",
        "MJ_PYTHONPATH": str(tmp_path / "nothing"),
    }
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    assert done.returncode == 2, done.stderr
    assert "go1: up to 275 s" in done.stdout and "g1-tracking: up to 275 s" in done.stdout
    with tarfile.open(tmp_path / "rounds.tgz") as archive:
        logs = {n: archive.extractfile(n).read().decode() for n in archive.getnames() if n.endswith("run.log")}  # type: ignore[union-attr]
    assert {Path(n).parts[0] for n in logs} == {"go1", "g1-tracking"}
    assert all("mjlab is not importable" in text for text in logs.values())
    assert (tmp_path / "rounds-table.md").read_text() == ""


def test_unbounded_actions_sampled_like_the_peer() -> None:
    """Our bench samples an unbounded Box in [-1, 1] (as the mjlab runner does); bounded sides stay as declared."""
    import numpy as np
    import torch

    from gym_graphreset.bench.runner import sample_actions

    inf = np.inf
    space = gym.spaces.Box(
        np.array([[-inf, -3, 0, 2, -inf]], np.float32), np.array([[inf, 3, inf, inf, -4]], np.float32)
    )
    actions = torch.stack(sample_actions(space, torch.device("cpu"), 256))
    assert torch.isfinite(actions).all()
    low, high = actions.amin(dim=(0, 1)), actions.amax(dim=(0, 1))
    assert (low >= torch.tensor([-1, -3, 0, 2, -6])).all() and (high <= torch.tensor([1, 3, 1, 4, -4])).all()
    assert (high - low > torch.tensor([1.8, 5.6, 0.9, 1.8, 1.8])).all()  # the whole range is used


def _timed(mode: str, env_id: str, n: int, steps_per_s: float, round_: int, **extra: Any) -> ModeResult:
    return ModeResult(
        mode=mode,
        env_id=env_id,
        num_envs=n,
        device="cuda:0",
        steps=100,
        ms_per_step=n / steps_per_s * 1e3,
        env_steps_per_s=steps_per_s,
        host_syncs_per_step=0.0,
        peak_gpu_mem_mb=None,
        extra={"round": round_, **extra},
    )


def test_rounds_pair_each_round_with_the_peer_of_the_same_round() -> None:
    """The ratio is taken within each round (ours / the peer's of that round), then summed up as median and
    range; each side's own figures likewise, over its rounds."""
    ours = [300e3, 330e3, 360e3]
    peer = [100e3, 150e3, 120e3]  # a drifting peer: 3.0x, 2.2x, 3.0x within rounds
    results = []
    for i in range(3):
        results.append(_timed("bare physics", "Go1", 4096, 400e3, i))
        results.append(_timed("step graph", "Go1", 4096, ours[i], i))
        results.append(_timed("mjlab", "Mjlab-Go1", 4096, peer[i], i, engine="mjlab", physics_ms=10.0 + i))
    rows = compare.rounds_rows(results)
    assert [(r.side, r.mode) for r in rows] == [("mjlab", "mjlab"), ("ours", "step graph")]
    mine = rows[1]
    assert mine.ratios == pytest.approx((3.0, 2.2, 3.0))
    assert compare.RoundsRow.spread(mine.ratios) == pytest.approx((3.0, 2.2, 3.0))
    assert rows[0].physics_ms == (10.0, 11.0, 12.0)
    table = compare.rounds_table(rows)
    assert "| ours | Go1 | 4096 | step graph | 3 | 330,000 (300,000-360,000) |" in table
    assert "3.00 (2.20-3.00)" in table


def _drifting_rounds(rounds: int = 3) -> list[ModeResult]:
    ours, peer = [300e3, 330e3, 360e3, 345e3], [100e3, 150e3, 120e3, 115e3]
    results = []
    for i in range(rounds):
        results.append(_timed("bare physics", "Go1", 4096, 400e3, i))
        results.append(_timed("step graph", "Go1", 4096, ours[i], i))
        results.append(_timed("mjlab", "Mjlab-Go1", 4096, peer[i], i, engine="mjlab", physics_ms=10.0 + i))
    return results


def test_peer_headline_sums_up_each_side_and_the_ratio_over_the_rounds() -> None:
    """The headline of a task is each side's median and range, the per-round ratio's, and each step over its own
    physics per round (ours: 4096 / 400k s = 10.24 ms of physics)."""
    head = compare.peer_headline(compare.rounds_rows(_drifting_rounds()), "Go1", "step graph", 4096)
    assert (head.rounds, head.ours, head.peer) == (3, (330e3, 300e3, 360e3), (120e3, 100e3, 150e3))
    assert head.ratio == pytest.approx((3.0, 2.2, 3.0))
    assert head.ours_over_physics == pytest.approx((400 / 330, 400 / 360, 400 / 300))
    assert (head.ours_host_syncs, head.peer_host_syncs) == (0.0, 0.0)
    peer_ms = [4096 / p * 1e3 for p in (100e3, 150e3, 120e3)]
    assert head.peer_over_physics == pytest.approx(
        compare.RoundsRow.spread([ms / f for ms, f in zip(peer_ms, (10.0, 11.0, 12.0), strict=True)])
    )


@pytest.mark.parametrize(
    ("env_id", "mode", "rounds", "match"),
    [
        (
            "Go1",
            "step graph+compile",
            3,
            "no rounds of ours for Go1 / step graph\\+compile x4096.*Go1 / step graph x4096",
        ),
        ("G1", "step graph", 3, "no rounds of ours for G1"),
        ("Go1", "step graph", 2, "2 paired rounds; a ratio needs at least 3 alternations"),
    ],
)
def test_peer_headline_refuses_what_is_not_a_ratio(env_id: str, mode: str, rounds: int, match: str) -> None:
    """A mode or task not measured, or fewer than three alternations, gives no headline: named, not guessed."""
    with pytest.raises(ValueError, match=match):
        compare.peer_headline(compare.rounds_rows(_drifting_rounds(rounds)), env_id, mode, 4096)


def test_plot_peer_headlines_writes_one_row_per_task(tmp_path: Path) -> None:
    """The first page's figure: a PNG with one row per task."""
    pytest.importorskip("matplotlib")
    from gym_graphreset.bench.plotting import plot_peer_headlines

    head = compare.peer_headline(compare.rounds_rows(_drifting_rounds()), "Go1", "step graph", 4096)
    path = tmp_path / "sub" / "peers.png"
    assert plot_peer_headlines({"Go1 flat": head, "Go1 again": head}, path, "ours against mjlab")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_rounds_keep_the_rounds_done_when_a_run_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped in its third round (a deadline, a lost machine) leaves the JSON of its first two rounds,
    which the rounds summary reads."""
    import json

    calls: list[int] = []

    def fake_ours(args: Any, device: Any, modes: Any, variants: Any, n: int) -> list[ModeResult]:
        calls.append(n)
        if len(calls) == 3:
            raise KeyboardInterrupt  # stopped midway through the third round
        return [ModeResult("selected", args.env_id, n, "cpu", 1, 1.0, 1000.0 * n, 0.0, None)]

    def fake_peer(config: Any, n: int, *, steps: int, warmup: int) -> ModeResult:
        return ModeResult(
            "mjlab", "Mjlab-Task", n, "cpu", steps, 1.0, 500.0 * n, 0.0, None, {"engine": "mjlab", "physics_ms": 1.0}
        )

    import gym_graphreset.cli.bench as bench_cli

    monkeypatch.setattr(bench_cli, "_measure_ours", fake_ours)
    monkeypatch.setattr(bench_cli, "run_peer", fake_peer)
    argv = ["bench", "--env-id", "gym_graphreset/CartPole-v1", "--num-envs", "8", "--steps", "2", "--modes"]
    argv += ["selected", "--peer", "mjlab", "--rounds", "3", "--out", str(tmp_path), "--device", "cpu"]
    with pytest.raises(KeyboardInterrupt):
        main(argv)
    kept = [ModeResult(**r) for r in json.loads((tmp_path / "bench-CartPole-v1-cpu.json").read_text())["results"]]
    assert sorted((r.extra["round"], r.mode) for r in kept) == [
        (0, "mjlab"),
        (0, "selected"),
        (1, "mjlab"),
        (1, "selected"),
    ]
    assert [row.ratios for row in compare.rounds_rows(kept) if row.side == "ours"] == [(2.0, 2.0)]


def test_rounds_refuse_results_without_a_round() -> None:
    """A result that carries no round cannot be paired: refused, naming it."""
    with pytest.raises(ValueError, match="without a round.*step graph x64"):
        compare.rounds_rows([ModeResult("step graph", "Go1", 64, "cpu", 1, 1.0, 64e3, 0.0, None)])


def test_bench_rounds_alternate_the_sides_and_write_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``bench --peer mjlab --rounds 3`` runs ours then the peer three times at each size (in that order) and
    writes the rounds table beside the JSON."""
    order: list[str] = []

    def fake_ours(args: Any, device: Any, modes: Any, variants: Any, n: int) -> list[ModeResult]:
        order.append(f"ours x{n}")
        return [ModeResult("selected", args.env_id, n, "cpu", 1, 1.0, 1000.0 * n, 0.0, None)]

    def fake_peer(config: Any, n: int, *, steps: int, warmup: int) -> ModeResult:
        order.append(f"peer x{n}")
        extra = {"engine": "mjlab", "physics_ms": 1.0}
        return ModeResult("mjlab", "Mjlab-Task", n, "cpu", steps, 1.0, 500.0 * n, 0.0, None, extra)

    import gym_graphreset.cli.bench as bench_cli

    monkeypatch.setattr(bench_cli, "_measure_ours", fake_ours)
    monkeypatch.setattr(bench_cli, "run_peer", fake_peer)
    argv = ["bench", "--env-id", "gym_graphreset/CartPole-v1", "--num-envs", "8,16", "--steps", "2"]
    argv += ["--modes", "selected", "--peer", "mjlab", "--rounds", "3", "--out", str(tmp_path), "--device", "cpu"]
    assert main(argv) == 0
    assert order == ["ours x8", "peer x8", "ours x16", "peer x16"] * 3
    summary = (tmp_path / "bench-CartPole-v1-cpu-rounds.md").read_text()
    assert "| ours | gym_graphreset/CartPole-v1 | 8 | selected | 3 |" in summary
    assert "2.00 (2.00-2.00)" in summary
    assert "median (min-max) over 3 alternated rounds" in capsys.readouterr().out


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    """A ``python3`` that prints its arguments (and a folder for the mjlab lookup): the command a GPU script runs,
    without running it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python3"
    fake.write_text('#!/bin/bash\nif [[ $1 == -c ]]; then echo /robots; else echo "ARGS $*"; fi\n')
    fake.chmod(0o755)
    return bin_dir


@pytest.mark.parametrize(
    ("outputs", "variants"),
    [("1", ["mjlab-work", "mjlab-outputs"]), ("0", ["mjlab-work"]), ("2", None)],
)
def test_peer_rounds_times_the_outputs_variant_unless_told_not_to(
    tmp_path: Path, fake_python: Path, outputs: str, variants: list[str] | None
) -> None:
    """``OUTPUTS=0`` leaves the reduced-forward variant out of the rounds (a shorter run); anything but 0 or 1 is
    refused before any work, naming the accepted values."""
    import re
    import subprocess

    script = ROOT / "benchmarks" / "gpu" / "peer_rounds.sh"
    env = {"PATH": f"{fake_python}:/usr/bin:/bin", "OUT": str(tmp_path / "out"), "OUTPUTS": outputs}
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    if variants is None:
        assert done.returncode == 2 and "OUTPUTS must be 1" in done.stderr and "got 2" in done.stderr
        return
    assert done.returncode == 0, done.stderr
    assert re.findall(r"--variant (mjlab-[a-z]+):", done.stdout) == variants
