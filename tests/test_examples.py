"""The examples run through the public API: the PPO example learns InvertedPendulum on the CPU."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, load_example

_load = load_example


def test_ppo_cli_parses_flags() -> None:
    ppo = _load("ppo_continuous")
    args = ppo.parse_args(["--env-id", "gym_graphreset/Hopper-v5", "--num-envs", "8", "--cuda-graph", "false"])
    assert (args.env_id, args.num_envs, args.cuda_graph) == ("gym_graphreset/Hopper-v5", 8, False)


def test_ppo_help_describes_every_flag(capsys: Any) -> None:
    """``--help`` says what each flag is for, not only its default."""
    import dataclasses

    ppo = _load("ppo_continuous")
    assert set(ppo.HELP) == {f.name for f in dataclasses.fields(ppo.Args)}
    with pytest.raises(SystemExit):
        ppo.parse_args(["--help"])
    out = " ".join(capsys.readouterr().out.split())  # whatever the terminal's width
    assert "--learning-rate LEARNING_RATE Adam's learning rate (default: 0.0003)" in out


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_ppo_learns_inverted_pendulum(tmp_path: Path) -> None:
    """~40k env steps on the CPU: the mean episode return rises far above a random policy's (~5-10)."""
    ppo = _load("ppo_continuous")
    args = ppo.parse_args(
        [
            "--env-id",
            "gym_graphreset/InvertedPendulum-v5",
            "--num-envs",
            "64",
            "--total-timesteps",
            "40000",
            "--device",
            "cpu",
            "--num-steps",
            "32",
            "--num-minibatches",
            "4",
            "--update-epochs",
            "5",
            "--log-every",
            "2",
            "--out",
            str(tmp_path),
        ]
    )
    curve = ppo.train(args)
    returns = curve["mean_return"]
    assert returns[0] < 20 and returns[-1] > 50 and returns[-1] > 4 * returns[0], returns
    assert ppo.save_curve(curve, args).stat().st_size > 1000


@pytest.mark.slow
def test_ppo_runs_under_torchrun_with_ddp(tmp_path: Path) -> None:
    """Two CPU ranks (gloo): each steps its share of the population; DDP all-reduces the gradients."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR")}
    env["CUDA_VISIBLE_DEVICES"] = ""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(EXAMPLES / "ppo_continuous.py"),
        "--env-id",
        "gym_graphreset/InvertedPendulum-v5",
        "--num-envs",
        "8",
        "--total-timesteps",
        "512",
        "--num-steps",
        "16",
        "--num-minibatches",
        "2",
        "--update-epochs",
        "1",
        "--log-every",
        "1",
        "--device",
        "cpu",
        "--out",
        str(tmp_path),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("final mean return") == 1  # rank 0 reports
    assert (tmp_path / "ppo-InvertedPendulum-v5-8.png").exists()


# ---------------------------------------------------------------- bring your own env (examples/point_mass.py)

CPU_PRESETS = ["masked", "masked_persistent"]


@pytest.fixture(scope="module")
def point_mass():
    return _load("point_mass")


def _actions(n: int, steps: int, device: str = "cpu", scale: float = 1.0) -> list:
    import torch

    gen = torch.Generator(device=device).manual_seed(1)
    return [(torch.rand(n, 2, generator=gen, device=device) * 2 - 1) * scale for _ in range(steps)]


@pytest.mark.parametrize("mode", CPU_PRESETS)
def test_point_mass_masked_matches_selected(point_mass, mode: str) -> None:
    """Every returned tensor, the term's every-step info and the episode stats included, bit for bit."""
    from gym_graphreset.core.config import PRESETS
    from gym_graphreset.core.participants import release_inner_env
    from gym_graphreset.testing import assert_masked_matches_selected

    def factory(flags):
        env = point_mass.make_env(32, "selected")
        release_inner_env(env, env.env)  # its inner env is wrapped again below, with the flags under test
        return type(env)(env.env, reset_terms={"history": point_mass.ActionHistory(), "ep": _ep()}, **flags)

    assert_masked_matches_selected(factory, _actions(32, 300), config=PRESETS[mode])


def _ep():
    from gym_graphreset import EpisodeStatistics

    return EpisodeStatistics()


def test_point_mass_term_info_every_step_on_both_paths(point_mass) -> None:
    """An every-step term's info is there on every step of the selected path too (no KeyError)."""
    for mode in ("selected", "masked"):
        env = point_mass.make_env(4, mode)
        env.reset(seed=0)
        for a in _actions(4, 5):
            *_, info = env.step(a)
            assert info["action_history"][:, 0].equal(a)


def test_point_mass_masked_steps_make_no_host_read(point_mass) -> None:
    from gym_graphreset.testing import assert_no_host_reads, count_host_reads

    env = point_mass.make_env(64, "masked_persistent")
    env.validation_poll_interval = 1000
    env.reset(seed=0)
    actions = _actions(64, 50)
    assert_no_host_reads(lambda: [env.step(a) for a in actions])
    selected = point_mass.make_env(64, "selected")
    selected.reset(seed=0)
    n, where = count_host_reads(lambda: [selected.step(a) for a in actions])
    assert n >= 50 and any("reset_paths.py" in w for w in where)  # the detector does see the classic gate


def test_point_mass_capture_report_on_cpu_names_only_the_device(point_mass) -> None:
    env = point_mass.make_env(8, "masked_persistent")
    assert not env.capture_report("step").eligible_on_cuda  # host reads not checked: nothing claimed
    env.reset(seed=0)
    report = env.capture_report("step", check_host_reads=True)
    assert not report.eligible and report.eligible_on_cuda and set(report.reasons) == {"device"}
    roles = report.state["participants"]
    assert roles["PointMassVectorEnv"] == ["reset_selection", "step_capture", "add_checks"]
    assert roles["term 'history'"] == ["reset_selection", "reset", "bind", "on_step", "info", "add_checks"]
    assert not point_mass.make_env(8, "selected").capture_report("step").eligible_on_cuda  # flags missing


def test_point_mass_custom_check_latched_and_named(point_mass) -> None:
    """Out-of-space actions are latched by the term's own check and raised at the poll, by name."""
    from gym_graphreset import DeferredValidationError

    env = point_mass.make_env(8, "masked")
    env.reset(seed=0)
    env.step(_actions(8, 1, scale=3.0)[0])
    with pytest.raises(DeferredValidationError, match="action_history_in_space"):
        env.poll_finite_validation()


def test_point_mass_main_runs(point_mass, capsys) -> None:
    summary = point_mass.main(["--mode", "masked", "--num-envs", "16", "--steps", "250", "--device", "cpu"])
    assert summary["episodes"] > 0 and "capture of scope" in capsys.readouterr().out


@pytest.mark.cuda
@pytest.mark.skipif("not __import__('torch').cuda.is_available()", reason="needs a CUDA GPU (run on the GPU machine)")
def test_point_mass_step_graph_sync_free_and_matches_eager(point_mass) -> None:
    """On a GPU: the user's env and term captured with the whole step; the canary sees no sync."""
    from gym_graphreset.testing import assert_capture_matches_eager, assert_sync_free

    def factory(flags):
        return type(point_mass.make_env(1, "selected"))(
            point_mass.PointMassVectorEnv(1024, device="cuda"),
            reset_terms={"history": point_mass.ActionHistory(), "ep": _ep()},
            **flags,
        )

    actions = _actions(1024, 60, device="cuda")
    assert_capture_matches_eager(factory, actions, graph="step")
    env = point_mass.make_env(1024, "step_graph", device="cuda")
    env.validation_poll_interval = 10_000
    env.reset(seed=0)
    for a in actions[:10]:
        env.step(a)
    assert env.graph is not None and env.graph.captured
    result = assert_sync_free(lambda: env.step(actions[0]), device="cuda")
    print("point-mass step graph canary:", dict(result))


def _ppo_parts(ppo, device: str, *, capture: bool, compile: bool = False):
    """An agent, optimizer and filled storage for PPOUpdate, identical for every call with the same seed."""
    import torch

    args = ppo.parse_args(["--num-envs", "256", "--num-steps", "8", "--num-minibatches", "1", "--update-epochs", "2"])
    torch.manual_seed(0)
    agent = ppo.Agent(11, 3, (64, 64)).to(device)
    lr = torch.tensor(args.learning_rate, device=device) if capture else args.learning_rate
    optimizer = torch.optim.Adam(agent.parameters(), lr=lr, eps=1e-5, capturable=capture)
    store = ppo.Storage.empty(8, 256, 11, 3, torch.device(device))
    gen = torch.Generator(device=device).manual_seed(1)
    for buf in (store.obs, store.actions, store.logp, store.rewards, store.values, store.last_obs):
        buf.copy_(torch.randn(buf.shape, device=device, generator=gen))
    store.dones.copy_((torch.rand(store.dones.shape, device=device, generator=gen) < 0.1).float())
    return agent, ppo.PPOUpdate(agent, agent, optimizer, store, args, capture=capture, compile=compile)


def test_ppo_eager_update_is_deterministic_and_trains() -> None:
    """The update the CUDA test captures runs eagerly on the CPU: two same-seed runs agree, parameters move.

    It builds its parts like the CUDA test does, so a change of the example's API fails here, in CI.
    """
    import torch

    ppo = _load("ppo_continuous")
    first_agent, first = _ppo_parts(ppo, "cpu", capture=False)
    second_agent, second = _ppo_parts(ppo, "cpu", capture=False)
    before = {k: v.clone() for k, v in first_agent.state_dict().items()}
    for _ in range(2):
        first()
        second()
    for (name, a), b in zip(first_agent.state_dict().items(), second_agent.state_dict().values(), strict=True):
        torch.testing.assert_close(b, a, msg=f"{name} differs between two same-seed runs")
    assert not torch.equal(first_agent.state_dict()["actor.0.weight"], before["actor.0.weight"])


@pytest.mark.cuda
@pytest.mark.skipif("not __import__('torch').cuda.is_available()", reason="needs a CUDA GPU (run on the GPU machine)")
@pytest.mark.parametrize("compile", [False, True])
def test_ppo_captured_update_matches_eager(compile: bool) -> None:
    """The PPO update captured as one CUDA graph (optimizer step included) trains like the eager update.

    One minibatch per epoch, so the shuffle cannot change the loss: after the warm-up, the capture and a
    replay, the parameters equal the eager update's to float tolerance; and the replay is sync-free.
    """
    import torch

    from gym_graphreset.testing import assert_sync_free

    ppo = _load("ppo_continuous")
    eager_agent, eager = _ppo_parts(ppo, "cuda", capture=False)
    graph_agent, graphed = _ppo_parts(ppo, "cuda", capture=True, compile=compile)
    for _ in range(3):  # warm-up (eager, side stream), capture + replay, replay
        eager()
        graphed()
    torch.cuda.synchronize()
    assert graphed.graph is not None
    for (name, a), b in zip(eager_agent.state_dict().items(), graph_agent.state_dict().values(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=f"{name} differs after 3 updates")
    canary = assert_sync_free(graphed, device="cuda", steps=3)
    print(f"\nPPO update graph (compile={compile}) canary: {canary}")


@pytest.fixture(scope="module")
def own_robot() -> Any:
    pytest.importorskip("mujoco_warp", reason="the own-robot example runs on MuJoCo Warp (the `mjwarp` extra)")
    return _load("own_robot")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.slow
def test_own_robot_task_is_masked_equal_to_selected_with_no_host_read(own_robot: Any, capsys: Any) -> None:
    """The guide's check on the user's quadruped, own reward term included (it raises on any mismatch)."""
    own_robot.check(num_envs=4, steps=30)
    assert "bit for bit; no host read" in capsys.readouterr().out


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.slow
def test_own_robot_trains_plays_and_exports_by_its_module_id(own_robot: Any, tmp_path: Path, capsys: Any) -> None:
    """``module:id`` reaches the PPO example and the CLI; the policy changes; play and export run on it."""
    import torch

    from gym_graphreset.cli import main

    ppo = _load("ppo_continuous")
    env_id = f"own_robot:{own_robot.ENV_ID}"
    argv = ["--env-id", env_id, "--num-envs", "4", "--num-steps", "8", "--total-timesteps", str(4 * 8 * 2)]
    argv += ["--device", "cpu", "--num-minibatches", "2", "--update-epochs", "1", "--hidden-dims", "16,16"]
    argv += ["--out", str(tmp_path / "out"), "--save-dir", str(tmp_path / "ckpt"), "--save-every", "1"]
    ppo.train(ppo.parse_args(argv))
    first, second = (torch.load(tmp_path / "ckpt" / f"model_{i}.pt", weights_only=False)["agent"] for i in (1, 2))
    assert all(torch.isfinite(v).all() for v in second.values())
    assert any(not torch.equal(first[k], second[k]) for k in first), "the second update changed no weight"
    checkpoint = tmp_path / "ckpt" / "model_2.pt"
    assert main(["play", str(checkpoint), "--env-id", env_id, "--steps", "3", "--no-video", "--device", "cpu"]) == 0
    assert f"{env_id} x4, 3 steps of the deterministic policy" in capsys.readouterr().out
    assert main(["export", str(checkpoint), "--out", str(tmp_path / "exported"), "--formats", "torchscript"]) == 0
    assert (tmp_path / "exported" / "policy.pt").is_file()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.slow
def test_reach_arm_checks_trains_and_plays_with_one_observation_group(tmp_path: Path, capsys: Any) -> None:
    """The non-legged example: its own command, one observation group (a Box), through check, PPO and play."""
    pytest.importorskip("mujoco_warp", reason="the arm example runs on MuJoCo Warp (the `mjwarp` extra)")
    import torch

    from gym_graphreset.cli import main
    from gym_graphreset.testing import check_env

    arm = load_example("reach_arm")
    summary = check_env(lambda: arm.ManagerBasedEnv(arm.reach_task(), 4, device="cpu", max_episode_steps=20))
    assert "bit for bit" in summary
    ppo = load_example("ppo_continuous")
    env_id = f"reach_arm:{arm.ENV_ID}"
    argv = ["--env-id", env_id, "--num-envs", "4", "--num-steps", "8", "--total-timesteps", "64", "--device", "cpu"]
    argv += ["--num-minibatches", "2", "--update-epochs", "1", "--hidden-dims", "16,16"]
    argv += ["--out", str(tmp_path / "out"), "--save-dir", str(tmp_path / "ckpt"), "--save-every", "1"]
    ppo.train(ppo.parse_args(argv))
    checkpoint = tmp_path / "ckpt" / "model_2.pt"
    assert torch.load(checkpoint, weights_only=False)["policy"]["obs_dim"] == 8
    assert main(["play", str(checkpoint), "--steps", "3", "--no-video", "--device", "cpu"]) == 0
    assert f"{env_id} x4, 3 steps of the deterministic policy" in capsys.readouterr().out
