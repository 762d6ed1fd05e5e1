"""``gym-graphreset train``: the run folder, config overrides reaching the env and rsl_rl, resume, budgets, and
``play`` finding the task from the run folder (Go1 on the CPU at tiny sizes)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from gym_graphreset.cli import main
from gym_graphreset.cli.train import with_learner
from gym_graphreset.integrations.rsl_rl_cfg import ALGORITHMS, RslRlRunnerCfg, mjlab_ppo_cfg

pytest.importorskip("rsl_rl", reason="train runs rsl_rl (the `rsl_rl` extra)")
pytest.importorskip("tyro", reason="train parses its flags with tyro (the `rsl_rl` extra)")
pytest.importorskip("mujoco_warp", reason="Go1 runs on MuJoCo Warp (the `mjwarp` extra)")

TASK = "Go1-Velocity-Flat-v0"
TINY = [
    "--device",
    "cpu",
    "--num-envs",
    "4",
    "--agent.num-steps-per-env",
    "4",
    "--agent.actor.hidden-dims",
    "8",
    "--agent.critic.hidden-dims",
    "8",
    "--agent.algorithm.num-mini-batches",
    "2",
    "--agent.algorithm.num-learning-epochs",
    "1",
]
"""A Go1 run small enough for the CPU (seconds per iteration once the kernels are compiled)."""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two iterations of Go1 with a fixed learning rate of 3e-4 and 10 s episodes; what the env was built with."""
    import gymnasium as gym

    folder = tmp_path_factory.mktemp("train") / "run"
    made: list[dict[str, Any]] = []
    make_vec = gym.make_vec

    def recording_make_vec(env_id: str, *args: Any, **kwargs: Any) -> Any:
        made.append(dict(kwargs))
        return make_vec(env_id, *args, **kwargs)

    overrides = ["--agent.algorithm.learning-rate", "3e-4", "--agent.algorithm.schedule", "fixed"]
    overrides += ["--env.episode-length-s", "10", "--agent.max-iterations", "2", "--run-dir", str(folder)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gym, "make_vec", recording_make_vec)
        status = main(["train", TASK, *TINY, *overrides])
    return {"status": status, "folder": folder, "made": made}


@pytest.mark.slow
def test_train_writes_the_run_folder_once(run: dict[str, Any]) -> None:
    """The run folder holds the resolved config, each checkpoint once (the periodic one at iteration 0 and the
    last), TensorBoard scalars and the ONNX policy; the checkpoints name the task."""
    folder: Path = run["folder"]
    assert run["status"] == 0
    assert sorted(p.name for p in folder.glob("model_*.pt")) == ["model_0.pt", "model_1.pt"]
    assert list(folder.glob("events.out.tfevents.*"))
    onnx = pytest.importorskip("onnx")
    onnx.checker.check_model(onnx.load(str(folder / "policy.onnx")))
    config = json.loads((folder / "config.json").read_text())
    assert config["task"] == f"gym_graphreset/{TASK}" and config["train"]["device"] == "cpu"
    ckpt = torch.load(folder / "model_1.pt", weights_only=False)
    assert ckpt["iter"] == 1 and ckpt["infos"]["env_id"] == f"gym_graphreset/{TASK}"


@pytest.mark.slow
def test_checkpoints_and_onnx_carry_the_deployment_data(run: dict[str, Any]) -> None:
    """Every checkpoint records what a robot deployment needs, and the ONNX file carries it as metadata
    (mjlab's keys): Go1's 12 joints in action order with their gains, its default pose, the policy's terms."""
    folder: Path = run["folder"]
    deployment = torch.load(folder / "model_1.pt", weights_only=False)["infos"]["deployment"]
    assert len(deployment["joint_names"]) == 12 and deployment["joint_names"][0].endswith("hip_joint")
    assert all(k > 0 for k in deployment["joint_stiffness"]) and len(deployment["default_joint_pos"]) == 12
    assert deployment["observation_groups"] == ["policy"] and "base_ang_vel" in deployment["observation_names"]
    onnx = pytest.importorskip("onnx")
    meta = {p.key: p.value for p in onnx.load(str(folder / "policy.onnx")).metadata_props}
    assert meta["env_id"] == f"gym_graphreset/{TASK}" and meta["act_dim"] == "12"
    assert meta["joint_names"].split(",") == deployment["joint_names"]
    assert [float(v) for v in meta["joint_stiffness"].split(",")] == deployment["joint_stiffness"]


@pytest.mark.slow
def test_overrides_reach_the_env_and_the_learner(run: dict[str, Any]) -> None:
    """``--env.episode-length-s`` is the task config the env is built with; ``--agent.algorithm.learning-rate``
    is the optimiser's; both are in the resolved config."""
    config = json.loads((run["folder"] / "config.json").read_text())
    assert config["env"]["episode_length_s"] == 10.0 and config["agent"]["algorithm"]["learning_rate"] == 3e-4
    assert [m["cfg"].episode_length_s for m in run["made"]] == [10.0]
    ckpt = torch.load(run["folder"] / "model_1.pt", weights_only=False)
    assert {g["lr"] for g in ckpt["optimizer_state_dict"]["param_groups"]} == {3e-4}
    assert ckpt["infos"]["rl_cfg"]["actor"]["hidden_dims"] == [8]


@pytest.mark.slow
def test_resume_counts_on_and_a_time_budget_reports_its_own_total(
    run: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--resume <run folder>`` goes on from its last checkpoint's next iteration; under ``--max-time`` rsl_rl's
    console counts the iterations the budget leaves (here one), not the 10 000 of the iteration budget."""
    capsys.readouterr()
    again = tmp_path / "again"
    argv = ["train", TASK, *TINY, "--resume", str(run["folder"]), "--run-dir", str(again), "--max-time", "1e-6"]
    assert main([*argv, "--no-onnx"]) == 0
    out = capsys.readouterr().out
    assert f"resumed from {run['folder'] / 'model_1.pt'}: iterations count on from 2" in out
    assert "Learning iteration 2/3" in out and "/10002" not in out
    assert sorted(p.name for p in again.glob("model_*.pt")) == ["model_2.pt"]
    assert torch.load(again / "model_2.pt", weights_only=False)["iter"] == 2


@pytest.mark.slow
def test_play_finds_the_task_from_the_run_folder(run: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """``play --checkpoint <run folder>`` plays its last checkpoint on the task it was trained on."""
    capsys.readouterr()
    argv = ["play", "--checkpoint", str(run["folder"]), "--num-envs", "2", "--steps", "3", "--no-video"]
    assert main([*argv, "--device", "cpu"]) == 0
    assert f"gym_graphreset/{TASK} x2, 3 steps of the deterministic policy" in capsys.readouterr().out


def test_train_help_lists_the_task_and_learner_fields(capsys: pytest.CaptureFixture[str]) -> None:
    """``train <task> --help`` lists every field of the task config and of the learner as flags."""
    with pytest.raises(SystemExit) as exit_info:
        main(["train", TASK, "--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    for flag in ("--env.episode-length-s", "--env.rewards.upright.weight", "--agent.algorithm.learning-rate"):
        assert flag in out, flag
    for flag in ("--max-time", "--resume", "--run-dir", "--num-envs", "--device"):
        assert flag in out, flag


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "train needs a task first, e.g. Go1-Velocity-Flat-v0"),
        (["Nope-v0"], "the task must be a registered env id (or module:id), got 'Nope-v0'"),
        ([TASK, "--num-envs", "0"], "--num-envs must be >= 1, got 0"),
        ([TASK, "--agent.max-iterations", "0"], "--agent.max-iterations must be >= 1, got 0"),
        ([TASK, "--max-time", "-1"], "--max-time must be a finite number of seconds > 0, got -1.0"),
        ([TASK, "--device", "gpu"], "--device must be cuda, cuda:N, cpu or auto, got 'gpu'"),
        ([TASK, "--resume", "/no/such/run"], "--resume '/no/such/run' is neither a checkpoint file nor a run folder"),
        (
            [TASK, "--learner", "fast", "--agent.algorithm.class-name", "my_lab:MyPPO"],
            "--learner fast replaces rsl_rl's PPO or FinalObsPPO with FastPPO, but --agent.algorithm.class-name is "
            "'my_lab:MyPPO': leave one of them out",
        ),
    ],
)
def test_train_refuses_bad_settings_by_name_before_building(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad task or setting is a usage error naming the flag, before any env is built or folder written."""
    monkeypatch.chdir(tmp_path)
    assert main(["train", *argv]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_train_refuses_a_run_folder_with_checkpoints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ``--run-dir`` that already holds checkpoints is refused (they would be mixed or overwritten)."""
    (tmp_path / "model_3.pt").write_bytes(b"")
    assert main(["train", TASK, "--device", "cpu", "--run-dir", str(tmp_path)]) == 2
    assert f"--run-dir {str(tmp_path)!r} already holds checkpoints" in capsys.readouterr().err


def test_train_refuses_an_unknown_learner(capsys: pytest.CaptureFixture[str]) -> None:
    """``--learner`` takes ``stock`` or ``fast``; anything else is a usage error naming the flag and the choices."""
    with pytest.raises(SystemExit) as exit_info:
        main(["train", TASK, "--learner", "turbo"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert "--learner" in err and "turbo" in err and "fast" in err


@pytest.mark.parametrize("class_name", [ALGORITHMS["ppo"], ALGORITHMS["finalobs"]])
def test_fast_learner_selects_fast_ppo(class_name: str) -> None:
    """``--learner fast`` swaps rsl_rl's PPO or FinalObsPPO for FastPPO and keeps every other setting;
    ``--learner stock`` keeps the algorithm given; an unknown learner name is refused by name."""
    agent = mjlab_ppo_cfg(f"gym_graphreset/{TASK}")
    agent.algorithm.class_name = class_name
    fast = with_learner(agent, "fast")
    assert isinstance(fast, RslRlRunnerCfg) and fast.algorithm.class_name == ALGORITHMS["fast"]
    assert dataclasses.replace(fast.algorithm, class_name=class_name) == agent.algorithm
    assert with_learner(agent, "stock") is agent
    assert with_learner(agent, "turbo") == "--learner must be 'stock' or 'fast', got 'turbo'"


@pytest.mark.slow
def test_train_with_the_fast_learner(tmp_path: Path) -> None:
    """``--learner fast`` trains with FastPPO: the resolved config and the checkpoint's ``rl_cfg`` name it, and the
    checkpoint's learning rate is a float (stock's format)."""
    folder = tmp_path / "fast"
    argv = ["train", TASK, *TINY, "--learner", "fast", "--agent.max-iterations", "1", "--run-dir", str(folder)]
    assert main([*argv, "--no-onnx"]) == 0
    config = json.loads((folder / "config.json").read_text())
    assert config["train"]["learner"] == "fast" and config["agent"]["algorithm"]["class_name"] == ALGORITHMS["fast"]
    ckpt = torch.load(folder / "model_0.pt", weights_only=False)
    assert ckpt["infos"]["rl_cfg"]["algorithm"]["class_name"] == ALGORITHMS["fast"]
    assert {type(g["lr"]) for g in ckpt["optimizer_state_dict"]["param_groups"]} == {float}
