"""The Go1 velocity task: registration, observation groups, masked = selected bitwise, terminations,
command resampling, the model settings, and (CUDA) the captured step's sync canary and compile report."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv, StepConfig
from gym_graphreset.assets.robots.go1.model import (
    ACTION_SCALE,
    GO1_XML,
    JOINT_NAMES,
    build_go1_xml,
    default_joint_pos,
)
from gym_graphreset.bench.plotting import load_training_curve
from gym_graphreset.mdp import VelocityCommandCfg
from gym_graphreset.tasks import TaskCfg
from gym_graphreset.tasks.velocity.config.go1 import GO1, REWARD_NAMES, Go1VelocityFlatEnv, go1_velocity_flat_cfg
from gym_graphreset.testing import assert_declared_forward_matches_full, assert_masked_matches_selected
from tests.conftest import MODES, needs_cuda, step_graph_canary

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
N = 8


BUSY = (
    go1_velocity_flat_cfg()
    .replace_term("events", "push_robot", interval_range_s=(0.02, 0.08))
    .replace_term("commands", "twist", resampling_time=(0.02, 0.1))
)
"""Pushes and command resamples every few steps, so that a short rollout exercises them."""


def _wrapped(flags: dict[str, Any], max_episode_steps: int = 6, cfg: TaskCfg = BUSY) -> FixedShapeAutoresetVectorEnv:
    inner = Go1VelocityFlatEnv(N, device="cpu", max_episode_steps=max_episode_steps, cfg=cfg)
    return FixedShapeAutoresetVectorEnv(inner, reset_terms={"ep": EpisodeStatistics()}, **flags)


@pytest.fixture(scope="module")
def env() -> FixedShapeAutoresetVectorEnv:
    """One masked env for the module (a new model's first warp compile is slow)."""
    return _wrapped(MODES["masked"], max_episode_steps=1000, cfg=go1_velocity_flat_cfg())


def _actions(steps: int, scale: float = 1.5) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(N, 12, generator=gen) * scale for _ in range(steps)]


def test_registered_with_mjlab_horizon_and_groups() -> None:
    """``gym.make_vec`` builds the task; the spec's horizon is 20 s of 20 ms steps; two obs groups."""
    spec = gym.spec("gym_graphreset/Go1-Velocity-Flat-v0")
    assert spec.max_episode_steps == 1000
    inner = gym.make_vec("gym_graphreset/Go1-Velocity-Flat-v0", num_envs=2, device="cpu")
    assert isinstance(inner, Go1VelocityFlatEnv) and inner.max_episode_steps == 1000
    assert math.isclose(inner.dt, 0.02) and inner.frame_skip == 4
    assert inner.single_observation_space["policy"].shape == (48,)
    assert inner.single_observation_space["critic"].shape == (72,)
    assert inner.single_action_space.shape == (12,)
    obs, _ = inner.reset(seed=1)
    assert obs["policy"].shape == (2, 48) and obs["critic"].shape == (2, 72)


def test_policy_is_noisy_and_critic_is_clean(env: FixedShapeAutoresetVectorEnv) -> None:
    """Critic columns equal the noise-free values; policy columns differ by at most the noise bound."""
    inner = env.env
    obs, _ = env.reset(seed=3)
    policy, critic = obs["policy"], obs["critic"]
    q = inner.qpos
    joint_rel = q[:, 7:19] - inner.default_joint_pos
    assert torch.equal(critic[:, 9:21], joint_rel)  # unbiased joints
    assert torch.allclose(critic[:, 6:9], torch.tensor([0.0, 0.0, -1.0]).expand(N, 3), atol=1e-6)  # level spawn
    bound = torch.tensor([0.5] * 3 + [0.2] * 3 + [0.05] * 3 + [0.01 + 0.015] * 12 + [1.5] * 12)
    diff = (policy[:, :33] - critic[:, :33]).abs()
    assert (diff <= bound + 1e-5).all() and (diff > 0).any()
    assert torch.equal(policy[:, 33:], critic[:, 33:48])  # last action and command are exact
    assert torch.equal(critic[:, 48:52], inner.site_xpos[:, inner.site_ids(("FR", "FL", "RR", "RL")), 2])


@pytest.mark.parametrize("mode", ["masked", pytest.param("masked_persistent", marks=pytest.mark.slow)])
def test_masked_matches_selected_bitwise(mode: str) -> None:
    """Short episodes, pushes, resamples: both reset paths return identical bits at every step."""
    assert_masked_matches_selected(_wrapped, _actions(14), config=MODES[mode]["config"])


def test_busy_config_pushes_and_resamples_within_a_rollout() -> None:
    """The bitwise test's config exercises the interval terms: every row is pushed and re-armed."""
    env = _wrapped(MODES["masked"], max_episode_steps=100)
    inner = env.env
    env.reset(seed=0)
    push0, cmd0 = inner.push_time_left.clone(), inner.command_time_left.clone()
    for _ in range(5):  # 0.1 s: longer than the longest busy interval
        env.step(torch.zeros(N, 12))
    assert (inner.push_time_left > push0 - 0.1 + 1e-4).all() and (inner.push_time_left > 0).all()
    assert (inner.command_time_left > cmd0 - 0.1 + 1e-4).all()


def test_fall_terminates_and_time_out_truncates() -> None:
    """Upside down is terminated (not truncated) and reset at once; the horizon truncates."""
    env = _wrapped(MODES["masked"], max_episode_steps=3)
    inner = env.env
    env.reset(seed=0)
    qpos, qvel = inner.state()
    qpos[0, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0])  # rolled over by pi
    mask = torch.zeros(N, dtype=torch.bool)
    mask[0] = True
    inner.set_state(qpos, qvel, env_ids=mask)
    episode = inner.episode.clone()
    _, _, terminated, truncated, info = env.step(torch.zeros(N, 12))
    assert terminated[0] and not terminated[1:].any() and not truncated.any()
    assert info["_final_obs"][0] and info["final_obs"]["critic"][0, 8] > 0.9  # gravity points up in the body
    assert inner.episode[0] == episode[0] + 1 and torch.equal(inner.episode[1:], episode[1:])
    for _ in range(2):
        _, _, terminated, truncated, _ = env.step(torch.zeros(N, 12))
    assert truncated[1:].all() and not truncated[0] and not terminated.any()


def test_non_finite_state_is_latched_with_its_world() -> None:
    """Go1's own step records the finite state as the base env's does: a NaN world is named by the check."""
    from gym_graphreset import DeferredValidationError

    env = _wrapped(MODES["masked"])
    inner = env.env
    env.reset(seed=0)
    qpos, qvel = inner.state()
    qvel[2, 6] = float("nan")
    inner.set_state(qpos, qvel)
    env.step(torch.zeros(N, 12))
    with pytest.raises(DeferredValidationError, match=r"mjwarp_finite_state: .*\(first failed at step 0, row 2\)"):
        env.poll_finite_validation()


def test_commands_resample_on_their_timer(env: FixedShapeAutoresetVectorEnv) -> None:
    """Rows whose timer runs out draw a new command and a new 3-8 s timer; the others count down."""
    inner = env.env
    env.reset(seed=5)
    inner.command_time_left[:2] = 0.01
    left, heading, cmd = inner.command_time_left.clone(), inner.is_heading.clone(), inner.command.clone()
    env.step(torch.zeros(N, 12))
    assert ((inner.command_time_left[:2] >= 3.0 - 1e-6) & (inner.command_time_left[:2] < 8.0)).all()
    assert torch.allclose(inner.command_time_left[2:], left[2:] - 0.02)
    free = ~inner.is_standing[2:] & ~heading[2:]
    assert torch.equal(inner.command[2:][free], cmd[2:][free])  # nothing resampled on these rows
    assert not torch.equal(inner.command[:2], cmd[:2])
    lo = torch.tensor([-1.0, -1.0, -0.5])
    assert ((inner.command >= lo - 1e-6) & (inner.command <= -lo + 1e-6)).all()
    assert (inner.command[inner.is_standing] == 0).all()


def test_command_curriculum_widens_ranges_by_env_step(env: FixedShapeAutoresetVectorEnv) -> None:
    """mjlab's stages: x in (-1, 1) / wz in (-0.5, 0.5), then (-1.5, 2) / (-0.7, 0.7) at 120k, (-2, 3) at 240k."""
    inner = env.env
    saved = inner.common_step.clone()
    try:
        for step, want in ((0, [-1.0, 1.0, -0.5, 0.5]), (120_000, [-1.5, 2.0, -0.7, 0.7]), (10**6, [-2, 3, -0.7, 0.7])):
            inner.common_step.fill_(step)
            assert torch.allclose(inner.command_ranges(), torch.tensor(want, dtype=torch.float32))
        env.reset(seed=11)
        assert (inner.command[:, 0] <= 3.0).all() and (inner.command[:, 0] > -2.0).all()
    finally:
        inner.common_step.copy_(saved)


def test_rewards_are_mjlabs_terms_weighted_by_dt(env: FixedShapeAutoresetVectorEnv) -> None:
    """``info["reward_terms"]`` sums to the reward; tracking terms are positive and bounded by weight x dt."""
    env.reset(seed=7)
    _, reward, *_, info = env.step(torch.zeros(N, 12))
    terms = info["reward_terms"]
    assert terms.shape == (N, len(REWARD_NAMES))
    assert torch.allclose(terms.sum(dim=1), reward)
    track = terms[:, REWARD_NAMES.index("track_linear_velocity")]
    assert ((track > 0) & (track <= 2.0 * 0.02)).all()
    assert (terms[:, REWARD_NAMES.index("action_rate_l2")] == 0).all()  # zero action after a reset


def test_model_has_mjlabs_actuators_and_collisions() -> None:
    """PD gains from 10 Hz / damping ratio 2 on the reflected inertia; only ``*_collision`` geoms collide."""
    import mujoco

    m = mujoco.MjModel.from_xml_string(build_go1_xml())
    assert m.nu == 12 and m.nsensordata == 16 and not m.actuator_ctrllimited.any()
    knee = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, "FR_calf_joint")
    arm = 0.000111842 * 81
    assert math.isclose(m.actuator_gainprm[knee, 0], arm * (20 * math.pi) ** 2, rel_tol=1e-6)
    assert math.isclose(ACTION_SCALE["FR_calf_joint"], 0.25 * 35.55 / m.actuator_gainprm[knee, 0], rel_tol=1e-6)
    feet = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, f"{leg}_foot_collision") for leg in ("FR", "RL")]
    assert (m.geom_condim[feet] == 6).all() and (m.geom_priority[feet] == 1).all()
    assert m.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC and math.isclose(m.opt.timestep, 0.005)


def _mjlab_go1_xml() -> Path | None:
    spec = importlib.util.find_spec("mjlab")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "asset_zoo" / "robots" / "unitree_go1" / "xmls" / "go1.xml"
    return path if path.is_file() else None


@pytest.mark.skipif(_mjlab_go1_xml() is None, reason="mjlab is not installed (its go1.xml is the same-model variant)")
def test_mjlab_go1_xml_gets_the_same_settings() -> None:
    """mjlab's own meshes-and-capsules Go1 loads with the same actuators and stands, on MuJoCo C and Warp."""
    import mujoco

    ours = mujoco.MjModel.from_xml_string(build_go1_xml())
    m = mujoco.MjModel.from_xml_string(build_go1_xml(_mjlab_go1_xml()))
    assert np.allclose(m.actuator_gainprm[:, :3], ours.actuator_gainprm[:, :3])
    assert np.allclose(m.dof_armature, ours.dof_armature)
    d = mujoco.MjData(m)
    d.qpos[2] = 0.3
    d.qpos[7:19] = [default_joint_pos(j) for j in JOINT_NAMES]
    d.ctrl[:] = d.qpos[7:19]
    for _ in range(200):
        mujoco.mj_step(m, d)
    assert d.qpos[2] > 0.2  # standing, not collapsed
    env = Go1VelocityFlatEnv(2, device="cpu", model_xml=_mjlab_go1_xml())  # and on MuJoCo Warp
    env.reset(seed=0)
    for _ in range(20):
        terminated = env.step(torch.zeros(2, 12))[2]
    assert (env.qpos[:, 2] > 0.2).all() and not terminated.any() and (env.in_contact == 1).all()


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    """A missing file, an MJCF without Go1's names, a bad clip or config: clear errors naming the argument."""
    with pytest.raises(FileNotFoundError, match=re.escape("`model_xml` must be an MJCF file")):
        build_go1_xml(tmp_path / "nope.xml")
    other = tmp_path / "ball.xml"
    other.write_text("<mujoco><worldbody><body><freejoint/><geom size='.1'/></body></worldbody></mujoco>")
    with pytest.raises(ValueError, match=re.escape("must be a Go1 MJCF with mjlab's names")):
        build_go1_xml(other)
    with pytest.raises(ValueError, match="obs_clip"):
        Go1VelocityFlatEnv(1, device="cpu", obs_clip=-1.0)
    with pytest.raises(ValueError, match=re.escape("`velocity_stages` must start at env step 0")):
        VelocityCommandCfg(velocity_stages=((10, (-1.0, 1.0), (-0.5, 0.5)),))
    with pytest.raises(ValueError, match=re.escape("`decimation` must be an int >= 1, got 0")):
        dataclasses.replace(go1_velocity_flat_cfg(), decimation=0)
    with pytest.raises(ValueError, match=re.escape("`max_episode_steps` must be None or an int >= 1, got 0")):
        Go1VelocityFlatEnv(1, device="cpu", max_episode_steps=0)


@pytest.mark.slow
def test_compiled_step_matches_the_step_as_written() -> None:
    """``compile_step`` traces every Go1 term (a tracing backend: bitwise equal), breaking only at warp calls."""
    from gym_graphreset.capture.compiling import declared_boundaries
    from gym_graphreset.testing import assert_compiled_matches_uncompiled

    report = assert_compiled_matches_uncompiled(
        _wrapped, _actions(8), config=MODES["masked"]["config"], backend="aot_eager"
    )
    assert report["ok"] and not report["graph_breaks"] and not report["recompiles"]
    assert set(report["declared_breaks"]) <= declared_boundaries()


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("compile_step", [False, True])
def test_step_graph_is_sync_free_and_compile_step_reports_ok(compile_step: bool) -> None:
    """CUDA: the whole Go1 step in one graph passes the sleep canary; ``compile_step`` reports ok."""
    config = StepConfig.preset("step_graph", graph_warmup=2, compile="inductor" if compile_step else None)
    env, canary = step_graph_canary(Go1VelocityFlatEnv(1024, device="cuda"), config, 12)
    print(f"\nGo1 step graph, compile_step={compile_step}: {canary}")
    assert env.graph is not None and env.graph.captured
    if compile_step:
        report = env.capture_report().state["compile"]
        print(f"Go1 compile report: {report}")
        assert report["ok"]
    env.close()


@pytest.mark.cuda
@needs_cuda
def test_step_graph_with_forward_before_obs_is_sync_free() -> None:
    """CUDA: mjlab's forward pass before the observations joins the captured step; the sleep canary sees no sync
    (the forward and the contact sensors' refresh run inside the graph)."""
    config = StepConfig.preset("step_graph", graph_warmup=2)
    env, canary = step_graph_canary(Go1VelocityFlatEnv(1024, device="cuda", forward_before_obs=True), config, 12)
    print(f"\nGo1 step graph with forward_before_obs: {canary}")
    assert env.graph is not None and env.graph.captured
    env.close()


@pytest.mark.slow
def test_ppo_example_trains_go1_and_logs_tracking(tmp_path: Path) -> None:
    """The PPO example's mjlab-go1 preset runs (asymmetric critic, adaptive lr) and writes the tracking curve."""
    import json

    from tests.conftest import load_example

    ppo = load_example("ppo_continuous")
    argv = ["--preset", "mjlab-go1", "--num-envs", "8", "--num-steps", "8", "--total-timesteps", "128"]
    argv += ["--update-epochs", "1", "--num-minibatches", "2", "--hidden-dims", "32,32", "--device", "cpu"]
    args = ppo.parse_args([*argv, "--max-episode-steps", "6", "--log-every", "1", "--out", str(tmp_path)])
    assert (args.env_id, args.desired_kl, args.ent_coef) == ("gym_graphreset/Go1-Velocity-Flat-v0", 0.01, 0.01)
    curve = ppo.train(args)
    path = ppo.save_json(curve, args)
    logged = json.loads(path.read_text())["curve"]
    rows = load_training_curve(path)  # the format mjlab's training run is compared in
    assert [r["track_lin_vel"] for r in rows] == logged["track_linear_velocity"]
    assert len(logged["seconds"]) >= 1 and len(logged["track_linear_velocity"]) == len(logged["seconds"])
    assert all(0 < x <= 2.0 for x in logged["track_linear_velocity"])  # weight 2 x dt per step / horizon in s
    assert all(0 < x <= 6 for x in logged["mean_episode_length"])
    assert ppo.save_curve(curve, args).exists()  # with the tracking panel when matplotlib is there


@pytest.fixture(scope="module")
def clipped() -> Go1VelocityFlatEnv:
    """A bare Go1 env (no wrapper) with ``obs_clip``: partial resets and the space's bounds."""
    return Go1VelocityFlatEnv(4, device="cpu", obs_clip=2.0)


def _startup_values(env: Go1VelocityFlatEnv) -> dict[str, torch.Tensor]:
    """What Go1's startup events drew per world: foot friction, trunk COM, joint encoder bias."""
    feet = env.geom_ids(GO1.foot_geoms)
    return {
        "friction": env.model_field("geom_friction")[:, feet].clone(),
        "com": env.model_field("body_ipos")[:, env.body_id(GO1.com_body)].clone(),
        "encoder_bias": env.encoder_bias.clone(),
    }


def test_seeded_partial_reset_leaves_startup_values_of_running_rows(clipped: Go1VelocityFlatEnv) -> None:
    clipped.reset(seed=1)
    for a in _actions(3):
        clipped.step(a[:4])
    before = _startup_values(clipped)
    rows = torch.tensor([False, True, False, True])
    clipped.reset(seed=2, options={"reset_mask": rows})
    after = _startup_values(clipped)
    for name in before:
        assert torch.equal(after[name][~rows], before[name][~rows]), f"{name} redrawn on mid-episode rows"
        assert (after[name][rows] != before[name][rows]).flatten(1).any(dim=1).all(), f"{name} kept on reset rows"


def test_obs_clip_bounds_the_observation_space(clipped: Go1VelocityFlatEnv) -> None:
    obs, _ = clipped.reset(seed=0)
    for a in _actions(2, scale=5.0):
        obs, *_ = clipped.step(a[:4])
    for group in ("policy", "critic"):
        single, batched = clipped.single_observation_space[group], clipped.observation_space[group]
        assert (single.low == -2.0).all() and (single.high == 2.0).all(), group
        assert (batched.high == 2.0).all() and batched.contains(obs[group].numpy()), group
        assert obs[group].abs().max() <= 2.0


KEPT_SENSORS = """  <sensor>
    <framequat name="orientation" objtype="site" objname="imu"/>
    <gyro name="angular-velocity" site="imu"/>
    <velocimeter name="linear-velocity" site="imu"/>
    <accelerometer name="linear-acceleration" site="imu"/>
    <framezaxis name="upvector" objtype="site" objname="imu"/>
  </sensor>
</mujoco>"""
"""Five own sensors of every stage at the IMU, as mjlab's go1.xml has (its file is not shipped here)."""


@pytest.mark.slow
def test_declared_forward_equals_mjlabs_full_forward_with_kept_sensors(tmp_path: Path) -> None:
    """mjlab's work (kept sensors, the forward before the observations): the passes the task declares give the
    observations, rewards, flags and info of the full forward bit for bit, over resets, without the position and
    velocity sensor stages (the contact sensors' forces need the rest)."""
    xml = tmp_path / "go1_sensors.xml"
    xml.write_text(GO1_XML.read_text().replace("</mujoco>", KEPT_SENSORS))
    cfg = go1_velocity_flat_cfg(xml, keep_sensors=True).replace_term(
        "events", "push_robot", interval_range_s=(0.02, 0.08)
    )
    made: list[Go1VelocityFlatEnv] = []

    def factory(mode: Any) -> FixedShapeAutoresetVectorEnv:
        task = dataclasses.replace(cfg, forward_before_obs=True, forward_passes=mode)
        made.append(Go1VelocityFlatEnv(N, device="cpu", max_episode_steps=5, cfg=task))
        return FixedShapeAutoresetVectorEnv(made[-1], reset_terms={"ep": EpisodeStatistics()}, **MODES["masked"])

    assert_declared_forward_matches_full(factory, _actions(12), seed=2)
    plan = made[-1].describe()["forward"]
    assert not plan["full"] and "sensor_pos" not in plan["passes"] and "sensor_vel" not in plan["passes"]
    assert plan["refreshed_sensors"] == ["feet_contact"] and made[0].describe()["forward"]["full"]
