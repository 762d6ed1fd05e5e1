"""The G1 velocity task: registration and groups, masked = selected bitwise, no host read, the model's gains,
collisions and sensors, the humanoid reward terms against MuJoCo C, standing still, mjlab's g1.xml (when
installed), refusals, a PPO smoke run, and (CUDA) the captured step's sync canary."""

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
from gym_graphreset.assets.robots.g1.model import (
    ACTION_SCALE,
    ANGMOM_SENSOR,
    DEFAULT_JOINT_POS,
    FOOT_CONTACT_SENSORS,
    FOOT_GEOMS,
    JOINT_NAMES,
    SELF_COLLISION_SENSOR,
    build_g1_xml,
    joint_gains,
)
from gym_graphreset.tasks import TaskCfg
from gym_graphreset.tasks.velocity.config.g1 import REWARD_NAMES, G1VelocityFlatEnv, g1_velocity_flat_cfg
from gym_graphreset.testing import (
    assert_declared_forward_matches_full,
    assert_masked_matches_selected,
    assert_no_host_reads,
)
from tests.conftest import MODES, needs_cuda, step_graph_canary

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
N = 4
NJ = 29
BUSY = (
    g1_velocity_flat_cfg()
    .replace_term("events", "push_robot", interval_range_s=(0.02, 0.08))
    .replace_term("commands", "twist", resampling_time=(0.02, 0.1))
)
"""Pushes and command resamples every few steps, so that a short rollout exercises them."""


def _wrapped(flags: dict[str, Any], max_episode_steps: int = 5, cfg: TaskCfg = BUSY) -> FixedShapeAutoresetVectorEnv:
    inner = G1VelocityFlatEnv(N, device="cpu", max_episode_steps=max_episode_steps, cfg=cfg)
    return FixedShapeAutoresetVectorEnv(inner, reset_terms={"ep": EpisodeStatistics()}, **flags)


def _actions(steps: int, scale: float = 1.0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(N, NJ, generator=gen) * scale for _ in range(steps)]


@pytest.fixture(scope="module")
def env() -> FixedShapeAutoresetVectorEnv:
    """One masked env of the task as registered (a new model's first warp compile is slow)."""
    return _wrapped(MODES["masked"], max_episode_steps=1000, cfg=g1_velocity_flat_cfg())


def test_registered_with_mjlab_horizon_and_groups() -> None:
    """``gym.make_vec`` builds the task: 20 s of 20 ms steps, 29 actions, mjlab's 99 / 111 observation columns."""
    assert gym.spec("gym_graphreset/G1-Velocity-Flat-v0").max_episode_steps == 1000
    inner = gym.make_vec("gym_graphreset/G1-Velocity-Flat-v0", num_envs=2, device="cpu")
    assert isinstance(inner, G1VelocityFlatEnv) and inner.max_episode_steps == 1000
    assert math.isclose(inner.dt, 0.02) and inner.frame_skip == 4
    assert inner.single_action_space.shape == (NJ,)
    assert inner.single_observation_space["policy"].shape == (99,)
    assert inner.single_observation_space["critic"].shape == (111,)
    layout = inner.observation_layout
    assert layout["policy"]["command"] == slice(96, 99)
    assert layout["critic"]["foot_contact_forces"] == slice(105, 111)
    assert inner.reward_names == REWARD_NAMES
    assert {"body_ang_vel", "angular_momentum", "self_collisions"} <= set(REWARD_NAMES)
    inner.close()


@pytest.mark.parametrize("mode", ["masked", pytest.param("masked_persistent", marks=pytest.mark.slow)])
def test_masked_matches_selected_bitwise(mode: str) -> None:
    """Short episodes, pushes, resamples: both reset paths return identical bits at every step."""
    assert_masked_matches_selected(_wrapped, _actions(10), config=MODES[mode]["config"])


def test_step_and_reset_read_nothing_on_the_host() -> None:
    """A step with resets and pushes makes no host read of device data (the capture premise)."""
    env = _wrapped(MODES["masked"], max_episode_steps=2)
    env.reset(seed=0)
    actions = _actions(5)
    env.step(actions[0])
    assert_no_host_reads(lambda: [env.step(a) for a in actions[1:]])


@pytest.mark.slow
def test_stands_with_zero_actions(env: FixedShapeAutoresetVectorEnv) -> None:
    """Holding the default pose for 1 s: no fall, pelvis near its spawn height, on its feet, no self-contact."""
    inner = env.env
    env.reset(seed=1)
    for _ in range(50):
        _, _, terminated, _, _ = env.step(torch.zeros(N, NJ))
        assert not terminated.any()
    assert ((inner.qpos[:, 2] > 0.65) & (inner.qpos[:, 2] < 0.85)).all()
    assert (inner.in_contact.sum(dim=1) >= 1).all()  # on its feet (it sways: a foot may lift)
    terms = env.step(torch.zeros(N, NJ))[4]["reward_terms"]
    assert (terms[:, REWARD_NAMES.index("self_collisions")] == 0).all()  # the default pose touches nothing


def test_humanoid_terms_equal_mujoco_c(env: FixedShapeAutoresetVectorEnv) -> None:
    """On a moving state, the angular-momentum, torso-rate and torso-upright terms equal MuJoCo C's values."""
    import mujoco
    import mujoco_warp as mjw

    from gym_graphreset import mdp

    inner = env.env
    env.reset(seed=2)
    for a in _actions(6, scale=2.0):
        env.step(a)
    mjw.forward(inner.m, inner.d)  # derived fields of the current state (a step leaves those of its last substep)
    inner.invalidate()
    m = mujoco.MjModel.from_xml_string(build_g1_xml())
    d = mujoco.MjData(m)
    torso = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
    angmom = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, ANGMOM_SENSOR)
    adr = m.sensor_adr[angmom]
    expected: dict[str, list[float]] = {"momentum": [], "rate": [], "upright": []}
    ipos = inner.model_field("body_ipos")  # the startup event moved each world's torso centre of mass
    for row in range(N):
        m.body_ipos[:] = ipos[row].double().numpy()
        d.qpos[:], d.qvel[:] = inner.qpos[row].double().numpy(), inner.qvel[row].double().numpy()
        mujoco.mj_forward(m, d)
        expected["momentum"].append(float(np.square(d.sensordata[adr : adr + 3]).sum()))
        expected["rate"].append(float(np.square(d.cvel[torso, 0:2]).sum()))
        gravity = np.zeros(3)
        mujoco.mju_rotVecQuat(gravity, np.array([0.0, 0.0, -1.0]), d.xquat[torso] * np.array([1, -1, -1, -1]))
        expected["upright"].append(math.exp(-np.square(gravity[:2]).sum() / 0.2))
    got = {
        "momentum": mdp.angular_momentum_l2(inner, ANGMOM_SENSOR),
        "rate": mdp.body_ang_vel_xy_l2(inner, "torso_link"),
        "upright": mdp.upright(inner, math.sqrt(0.2), body="torso_link"),
    }
    for name, values in expected.items():
        assert torch.allclose(got[name].double(), torch.tensor(values, dtype=torch.float64), rtol=1e-3, atol=1e-4), name
    assert max(expected["rate"]) > 1e-3 and max(expected["momentum"]) > 1e-3  # the state moves
    terms = g1_velocity_flat_cfg().rewards
    assert (terms["body_ang_vel"].weight, terms["angular_momentum"].weight, terms["self_collisions"].weight) == (
        -0.05,
        -0.02,
        -1.0,
    )


def test_model_has_mjlabs_actuators_collisions_and_sensors() -> None:
    """Gains from 10 Hz / damping ratio 2 on each motor's reflected inertia (doubled where two motors drive a
    joint); the soles collide with condim 3 and friction 0.6; the task's four sensors are the only ones."""
    import mujoco

    m = mujoco.MjModel.from_xml_string(build_g1_xml())
    assert m.nu == NJ and m.nq == 7 + NJ and not m.actuator_ctrllimited.any()
    armature_5020 = 0.139e-4 * 16.0**2 + 0.017e-4 * 4.5**2 + 0.169e-4  # stages (1 + 46/18)(1 + 56/16) = 16
    omega = 20 * math.pi
    for joint, armature, effort in [
        ("left_elbow_joint", armature_5020, 25.0),
        ("left_ankle_pitch_joint", 2 * armature_5020, 50.0),
        ("waist_roll_joint", 2 * armature_5020, 50.0),
        ("left_knee_joint", 0.489e-4 * 22.5**2 + 0.109e-4 * 25 + 0.738e-4, 139.0),
    ]:
        a = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, joint)
        j = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, joint)
        assert math.isclose(m.dof_armature[m.jnt_dofadr[j]], armature, rel_tol=1e-5)
        assert math.isclose(m.actuator_gainprm[a, 0], armature * omega**2, rel_tol=1e-5)
        assert math.isclose(-m.actuator_biasprm[a, 2], 4 * armature * omega, rel_tol=1e-5)
        assert math.isclose(m.actuator_forcerange[a, 1], effort)
        assert math.isclose(ACTION_SCALE[joint], 0.25 * effort / (armature * omega**2), rel_tol=1e-5)
    assert joint_gains("left_elbow_joint") == joint_gains("right_shoulder_roll_joint")
    soles = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, g) for g in FOOT_GEOMS]
    assert (m.geom_condim[soles] == 3).all() and (m.geom_priority[soles] == 1).all()
    assert np.allclose(m.geom_friction[soles, 0], 0.6)
    shin = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "left_shin_collision")
    assert m.geom_condim[shin] == 1 and m.geom_contype[shin] == 1
    visual = [
        g
        for g in range(m.ngeom)
        if not (mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or "").endswith(("_collision", "floor"))
    ]
    assert visual and (m.geom_contype[visual] == 0).all() and (m.geom_conaffinity[visual] == 0).all()
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SENSOR, s) for s in range(m.nsensor)]
    assert names == [*FOOT_CONTACT_SENSORS, SELF_COLLISION_SENSOR, ANGMOM_SENSOR]
    assert m.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL and math.isclose(m.opt.timestep, 0.005)
    assert set(DEFAULT_JOINT_POS) <= set(JOINT_NAMES)


def _mjlab_g1_xml() -> Path | None:
    spec = importlib.util.find_spec("mjlab")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "asset_zoo" / "robots" / "unitree_g1" / "xmls" / "g1.xml"
    return path if path.is_file() else None


@pytest.mark.skipif(_mjlab_g1_xml() is None, reason="mjlab is not installed (its g1.xml is the same-model variant)")
def test_mjlab_g1_xml_gets_the_same_settings() -> None:
    """mjlab's meshes-and-capsules G1 loads with the same actuators and stands on MuJoCo Warp; keep_sensors
    keeps its five sensors and reuses its angular-momentum sensor."""
    import mujoco

    ours = mujoco.MjModel.from_xml_string(build_g1_xml())
    m = mujoco.MjModel.from_xml_string(build_g1_xml(_mjlab_g1_xml()))
    assert np.allclose(m.actuator_gainprm[:, :3], ours.actuator_gainprm[:, :3])
    assert np.allclose(m.dof_armature, ours.dof_armature)
    kept = mujoco.MjModel.from_xml_string(build_g1_xml(_mjlab_g1_xml(), keep_sensors=True))
    assert kept.nsensor == 5 + 3
    env = G1VelocityFlatEnv(2, device="cpu", model_xml=_mjlab_g1_xml())
    env.reset(seed=0)
    for _ in range(25):
        terminated = env.step(torch.zeros(2, NJ))[2]
    assert (env.qpos[:, 2] > 0.65).all() and not terminated.any() and (env.in_contact == 1).all()


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    """A missing file, an MJCF without G1's names, a clashing sensor, cfg with model_xml: errors naming them."""
    with pytest.raises(FileNotFoundError, match=re.escape("`model_xml` must be an MJCF file")):
        build_g1_xml(tmp_path / "nope.xml")
    other = tmp_path / "ball.xml"
    other.write_text("<mujoco><worldbody><body><freejoint/><geom size='.1'/></body></worldbody></mujoco>")
    with pytest.raises(ValueError, match=re.escape("must be a 29-DoF G1 MJCF with mjlab's names; it lacks")):
        build_g1_xml(other)
    src = (Path(build_g1_xml.__code__.co_filename).parent / "g1.xml").read_text()  # the shipped model, beside it
    clash = tmp_path / "clash.xml"
    clash.write_text(
        src.replace("</mujoco>", '<sensor><gyro name="self_collision" site="imu_in_pelvis"/></sensor></mujoco>')
    )
    with pytest.raises(ValueError, match=re.escape("has sensors named ['self_collision']")):
        build_g1_xml(clash, keep_sensors=True)
    assert build_g1_xml(clash)  # without keep_sensors the model's own sensors are dropped
    with pytest.raises(ValueError, match=re.escape("give `model_xml` or `cfg`, not both")):
        G1VelocityFlatEnv(1, device="cpu", model_xml=other, cfg=g1_velocity_flat_cfg())
    with pytest.raises(ValueError, match=re.escape("use g1_velocity_flat_cfg(model_xml, keep_sensors=True)")):
        G1VelocityFlatEnv(1, device="cpu", keep_sensors=True, cfg=g1_velocity_flat_cfg())
    with pytest.raises(ValueError, match=re.escape("`keep_sensors` must be a bool, got 'yes'")):
        build_g1_xml(keep_sensors="yes")  # type: ignore[arg-type]


@pytest.mark.slow
def test_ppo_example_trains_g1(tmp_path: Path) -> None:
    """The PPO example's mjlab-g1 preset runs a few updates on the humanoid and logs finite tracking."""
    from tests.conftest import load_example

    ppo = load_example("ppo_continuous")
    argv = ["--preset", "mjlab-g1", "--num-envs", "4", "--num-steps", "6", "--total-timesteps", "48"]
    argv += ["--update-epochs", "1", "--num-minibatches", "2", "--hidden-dims", "32,32", "--device", "cpu"]
    args = ppo.parse_args([*argv, "--max-episode-steps", "4", "--log-every", "1", "--out", str(tmp_path)])
    assert args.env_id == "gym_graphreset/G1-Velocity-Flat-v0"
    curve = ppo.train(args)
    assert len(curve["seconds"]) >= 1
    assert all(0 < x <= 2.0 for x in curve["track_linear_velocity"])


@pytest.mark.cuda
@needs_cuda
def test_step_graph_is_sync_free() -> None:
    """CUDA: the whole G1 step (compiled) in one graph passes the sleep canary; the compile report is ok."""
    config = StepConfig.preset("step_graph", graph_warmup=2, compile="inductor")
    inner = G1VelocityFlatEnv(1024, device="cuda")
    env, canary = step_graph_canary(inner, config, NJ)
    print(f"\nG1 step graph + compile: {canary}")
    assert env.graph is not None and env.graph.captured
    assert env.capture_report().state["compile"]["ok"]
    env.close()


@pytest.mark.slow
def test_declared_forward_equals_the_full_forward() -> None:
    """The forward before the observations reduced to the passes the task declares: observations, rewards, flags
    and info bit for bit the full forward's over resets and pushes (no sensor stage but the contacts')."""
    made: list[G1VelocityFlatEnv] = []

    def factory(mode: Any) -> FixedShapeAutoresetVectorEnv:
        env = _wrapped(MODES["masked"], cfg=dataclasses.replace(BUSY, forward_before_obs=True, forward_passes=mode))
        made.append(env.env)
        return env

    assert_declared_forward_matches_full(factory, _actions(12, scale=2.0), seed=2)
    plan = made[-1].describe()["forward"]
    assert not plan["full"] and "sensor_pos" not in plan["passes"] and "sensor_acc" in plan["passes"]
