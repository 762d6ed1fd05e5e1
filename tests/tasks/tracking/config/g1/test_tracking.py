"""The G1 tracking task: registration and groups, masked = selected bitwise (the adaptive sampler's state too),
no host read, a noise-free reset puts the robot exactly on the clip, the sampler follows failures, the clip's
end truncates, a user's clip (recorded or cut) runs, refusals, a PPO smoke run."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv
from gym_graphreset.assets.robots.g1.clip import G1_CLIP
from gym_graphreset.tasks import TaskCfg
from gym_graphreset.tasks.tracking.config.g1.flat_env_cfg import G1TrackingFlatEnv, g1_tracking_flat_cfg
from gym_graphreset.tasks.tracking.motion_command import MotionCommandCfg
from gym_graphreset.testing import (
    assert_declared_forward_matches_full,
    assert_masked_matches_selected,
    assert_no_host_reads,
)
from tests.conftest import MODES, needs_cuda, step_graph_canary

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
N = 4
NJ = 29
ZERO6 = ((0.0, 0.0),) * 6
BUSY = g1_tracking_flat_cfg().replace_term("events", "push_robot", interval_range_s=(0.02, 0.08))
"""Pushes every few steps, so that a short rollout exercises them."""


def _exact(cfg: TaskCfg, **command: Any) -> TaskCfg:
    """``cfg`` with no start noise (pose, velocity, joints) and the command's fields replaced."""
    motion = cfg.commands["motion"]
    assert isinstance(motion, MotionCommandCfg)
    fields = {"pose_range": ZERO6, "velocity_range": ZERO6, "joint_position_range": (0.0, 0.0), **command}
    return replace(cfg, commands={"motion": replace(motion, **fields)})


def _actions(steps: int, scale: float = 0.5) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(N, NJ, generator=gen) * scale for _ in range(steps)]


def test_registered_with_mjlabs_groups_and_terms() -> None:
    """``gym.make_vec`` builds it: 10 s episodes, 160 policy / 286 critic columns, mjlab's nine rewards."""
    assert gym.spec("gym_graphreset/G1-Tracking-Flat-v0").max_episode_steps == 500
    env = gym.make_vec("gym_graphreset/G1-Tracking-Flat-v0", num_envs=2, device="cpu")
    assert isinstance(env, G1TrackingFlatEnv) and env.max_episode_steps == 500
    assert env.single_observation_space["policy"].shape == (160,)
    assert env.single_observation_space["critic"].shape == (286,)
    assert env.observation_layout["critic"]["body_ori"] == slice(109, 193)  # 14 bodies x 6
    assert env.reward_names[:2] == ("motion_global_root_pos", "motion_global_root_ori")
    assert len(env.reward_names) == 9 and env.motion.bin_count == 7  # 301 frames at 50 Hz: 1 s bins
    env.close()


def test_masked_matches_selected_bitwise_including_the_sampler() -> None:
    """Short episodes, pushes, failures: identical bits at every step, and identical frames and bins after."""
    made: list[FixedShapeAutoresetVectorEnv] = []

    def factory(flags: dict[str, Any]) -> FixedShapeAutoresetVectorEnv:
        inner = G1TrackingFlatEnv(N, device="cpu", max_episode_steps=4, cfg=BUSY)
        made.append(FixedShapeAutoresetVectorEnv(inner, reset_terms={"ep": EpisodeStatistics()}, **flags))
        return made[-1]

    assert_masked_matches_selected(factory, _actions(10, scale=2.0), config=MODES["masked"]["config"])
    first, second = (m.env.motion for m in made[-2:])
    assert torch.equal(first.time_steps, second.time_steps)
    assert torch.equal(first.bin_failed_count, second.bin_failed_count)
    assert torch.equal(first.current_bin_failed, second.current_bin_failed)


def test_step_reads_nothing_on_the_host() -> None:
    """Steps with failures, resets through the sampler and pushes make no host read of device data."""
    env = FixedShapeAutoresetVectorEnv(G1TrackingFlatEnv(N, device="cpu", max_episode_steps=2, cfg=BUSY), "masked")
    env.reset(seed=0)
    actions = _actions(5, scale=2.0)
    env.step(actions[0])
    assert_no_host_reads(lambda: [env.step(a) for a in actions[1:]])


def test_noise_free_reset_puts_the_robot_on_the_clip() -> None:
    """Without start noise the robot's tracked bodies are the clip's (the clip is this model's kinematics)."""
    env = G1TrackingFlatEnv(N, device="cpu", cfg=_exact(g1_tracking_flat_cfg()))
    env.reset(seed=4)
    motion = env.motion
    frames = motion.time_steps
    assert torch.allclose(env.qpos[:, 7:], motion.clip.joint_pos[frames].clamp(*env.soft_joint_limits.T), atol=1e-6)
    metrics = motion.metrics()
    assert (metrics["error_body_pos"] < 1e-4).all() and (metrics["error_anchor_rot"] < 1e-3).all()
    assert (metrics["error_body_lin_vel"] < 1e-3).all()


def test_adaptive_sampling_follows_failures() -> None:
    """Failures counted in one bin draw most start frames into it; the distribution is normalised and logged."""
    env = G1TrackingFlatEnv(64, device="cpu", cfg=_exact(g1_tracking_flat_cfg()))
    motion = env.motion
    motion.bin_failed_count.zero_()
    motion.bin_failed_count[3] = 1.0
    p = motion.sampling_probabilities()
    assert p.sum().item() == pytest.approx(1.0) and p.argmax().item() == 3 and p[3] > 0.9
    env.reset(seed=1)
    in_bin = (motion.current_bins() == 3).float().mean().item()
    assert in_bin > 0.8
    metrics = motion.metrics()
    assert metrics["sampling_top1_prob"][0] == pytest.approx(p[3].item())
    assert metrics["sampling_top1_bin"][0] == pytest.approx(3 / motion.bin_count)
    assert metrics["sampling_entropy"][0] < 0.5


@pytest.mark.slow
def test_failures_are_counted_in_their_bins() -> None:
    """Episodes that fail (not time out) add to their bin's count; the per-step average moves toward them."""
    env = FixedShapeAutoresetVectorEnv(G1TrackingFlatEnv(8, device="cpu", cfg=BUSY), "masked")
    env.reset(seed=0)
    failed = torch.zeros(8, dtype=torch.bool)
    for _ in range(40):
        _, _, terminated, _, _ = env.step(torch.zeros(8, NJ))
        failed |= terminated
    motion = env.env.motion
    assert failed.any() and motion.bin_failed_count.sum() > 0


def test_a_failure_is_counted_once_when_its_row_is_reset_again() -> None:
    """A failed episode adds one to its bin, also when its row is reset a second time before the next step."""
    env = G1TrackingFlatEnv(2, device="cpu", cfg=_exact(g1_tracking_flat_cfg()))
    env.step(torch.zeros(2, NJ))
    tm = env.termination_manager
    failure = int((~tm.time_out).nonzero()[0, 0])
    tm.flags.zero_()
    tm.flags[0, failure] = True
    env.motion.current_bin_failed.zero_()
    mask = torch.tensor([True, False])
    env.reset(options={"reset_mask": mask})
    env.reset(options={"reset_mask": mask})
    assert env.motion.current_bin_failed.sum().item() == 1.0


def test_the_clips_end_truncates_and_a_users_clip_runs(tmp_path: Path) -> None:
    """A 10-frame user clip (cut from the shipped one): episodes starting at frame 0 time out at its end."""
    data = dict(np.load(G1_CLIP))
    short = tmp_path / "short.npz"
    np.savez(short, **{k: v if k == "fps" else v[:10] for k, v in data.items()})
    cfg = _exact(g1_tracking_flat_cfg(short), sampling_mode="start")
    env = FixedShapeAutoresetVectorEnv(G1TrackingFlatEnv(N, device="cpu", cfg=cfg), "masked")
    env.reset(seed=0)
    for step in range(10):  # frames 0 to 9: the step on the last frame ends the episode
        _, _, terminated, truncated, _ = env.step(torch.zeros(N, NJ))
        assert not terminated.any()
        assert bool(truncated.all()) == (step == 9), step
    assert (env.env.motion.time_steps == 0).all()  # reset to the start frame


def test_bad_configs_are_refused(tmp_path: Path) -> None:
    """No reset event, a clip of another robot, bad command settings, cfg with other arguments."""
    cfg = g1_tracking_flat_cfg()
    no_event = replace(cfg, events={k: v for k, v in cfg.events.items() if k != "reset_to_motion"})
    with pytest.raises(ValueError, match=re.escape("needs a reset event `reset_to_motion_frame`")):
        G1TrackingFlatEnv(1, device="cpu", cfg=no_event)
    other = tmp_path / "go1.npz"
    arrays = {k: v[:, :12] if k.startswith("joint") else v for k, v in np.load(G1_CLIP).items()}
    np.savez(other, **arrays)
    with pytest.raises(ValueError, match=re.escape("'joint_pos' must have shape (frames, 29)")):
        G1TrackingFlatEnv(1, device="cpu", motion_file=other)
    with pytest.raises(ValueError, match=re.escape("`anchor_body` 'head' must be one of `body_names`")):
        MotionCommandCfg(G1_CLIP, anchor_body="head", body_names=("pelvis",))
    with pytest.raises(ValueError, match=re.escape("`sampling_mode` must be 'adaptive', 'uniform' or 'start'")):
        MotionCommandCfg(G1_CLIP, anchor_body="pelvis", body_names=("pelvis",), sampling_mode="random")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=re.escape("give `motion_file` / `model_xml` / `keep_sensors` or `cfg`")):
        G1TrackingFlatEnv(1, device="cpu", motion_file=G1_CLIP, cfg=cfg)


def test_an_untracked_body_of_a_term_is_refused_when_the_env_is_built() -> None:
    """``bad_motion_body_pos_z_only`` naming a body the command does not track fails at construction, by term."""
    cfg = g1_tracking_flat_cfg()
    params = {**cfg.terminations["ee_body_pos"].params, "body_names": ("left_ankle_roll_link", "head")}
    cfg = cfg.replace_term("terminations", "ee_body_pos", params=params)
    with pytest.raises(ValueError, match=re.escape("terminations['ee_body_pos']: 'bad_motion_body_pos_z_only': param")):
        G1TrackingFlatEnv(1, device="cpu", cfg=cfg)


@pytest.mark.slow
def test_ppo_example_trains_on_tracking(tmp_path: Path) -> None:
    """The PPO example runs a few updates on the tracking task and logs its first reward term."""
    from tests.conftest import load_example

    ppo = load_example("ppo_continuous")
    argv = ["--env-id", "gym_graphreset/G1-Tracking-Flat-v0", "--num-envs", "4", "--num-steps", "6"]
    argv += ["--total-timesteps", "48", "--update-epochs", "1", "--num-minibatches", "2", "--hidden-dims", "32,32"]
    args = ppo.parse_args(
        [*argv, "--device", "cpu", "--max-episode-steps", "8", "--log-every", "1", "--out", str(tmp_path)]
    )
    curve = ppo.train(args)
    assert len(curve["seconds"]) >= 1
    assert all(0 < x <= 0.5 for x in curve["motion_global_root_pos"])  # weight 0.5 x dt per step / seconds


@pytest.mark.cuda
@needs_cuda
def test_step_graph_is_sync_free() -> None:
    """CUDA: the whole tracking step (sampler, resets, terms) in one graph passes the sleep canary."""
    from gym_graphreset import StepConfig

    config = StepConfig.preset("step_graph", graph_warmup=2)
    inner = G1TrackingFlatEnv(1024, device="cuda", max_episode_steps=20)
    env, canary = step_graph_canary(inner, config, NJ)
    print(f"\nG1 tracking step graph: {canary}")
    assert env.graph is not None and env.graph.captured
    env.close()


@pytest.mark.cuda
@needs_cuda
def test_reset_graph_is_captured_once() -> None:
    """CUDA, ``graph="reset"``: the reset body is captured once and replayed, the eager step between replays
    replacing none of the buffers it holds (no capture per step), and it agrees with ``masked`` (atomics in
    the contact solver: not bitwise, so per-step means)."""
    n, horizon = 256, 5
    actions = [torch.randn(n, NJ, generator=torch.Generator().manual_seed(k)).cuda() * 0.3 for k in range(16)]
    means = {}
    for preset in ("masked", "reset_graph"):
        env = FixedShapeAutoresetVectorEnv(G1TrackingFlatEnv(n, device="cuda", max_episode_steps=horizon), preset)
        env.reset(seed=0)
        means[preset] = torch.stack([env.step(a)[1].mean() for a in actions])
        if preset == "reset_graph":
            graph = env.graph
            assert graph is not None and graph.captures == 1 and graph.replays >= 10
            print(f"\nG1 tracking reset graph: {graph.captures} capture, {graph.replays} replays")
        env.close()
    torch.testing.assert_close(means["reset_graph"], means["masked"], atol=0.05, rtol=0.05)


def test_declared_forward_equals_the_full_forward() -> None:
    """Tracking reads poses and body velocities only: the forward before the observations is kinematics and the
    centre-of-mass passes (no collision, no solver, no sensor), and gives the full forward's observations,
    rewards, flags and info (the command's tracking errors) bit for bit over resets and pushes."""
    made: list[G1TrackingFlatEnv] = []

    def factory(mode: Any) -> FixedShapeAutoresetVectorEnv:
        task = replace(BUSY, forward_before_obs=True, forward_passes=mode)
        made.append(G1TrackingFlatEnv(N, device="cpu", max_episode_steps=4, cfg=task))
        return FixedShapeAutoresetVectorEnv(made[-1], reset_terms={"ep": EpisodeStatistics()}, **MODES["masked"])

    assert_declared_forward_matches_full(factory, _actions(10, scale=2.0), seed=2)
    assert made[-1].forward_plan.passes == ("kinematics", "com_pos", "com_vel")
    assert made[-1].forward_plan.refreshed == ()  # the self-collision sensor keeps the physics' values
