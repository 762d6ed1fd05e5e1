"""The task layer as a user meets it: their own robot and terms, every manager masked == selected, no host read.

The robot is a small two-legged box written here (a free base, two hinge legs with position actuators, foot
sites and contact sensors). On it: the shared velocity task, plus one term of every other kind the layer
offers (Gaussian noise, a delay and a history, an action delay, an effort-free extra reward, a metric, a
curriculum), added in one line each.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco_warp", reason="the task layer runs on MuJoCo Warp (the `mjwarp` extra)")

from gym_graphreset import FixedShapeAutoresetVectorEnv
from gym_graphreset.core.rng import counter_bits
from gym_graphreset.tasks import (
    CurriculumTerm,
    GaussianNoise,
    LeggedRobot,
    ManagerBasedEnv,
    MetricTerm,
    ObsTerm,
    RewardTerm,
    TaskCfg,
    TerminationTerm,
    mdp,
    velocity_task,
)
from gym_graphreset.testing import assert_masked_matches_selected, assert_no_host_reads

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

BIPED = """
<mujoco>
  <compiler angle="radian"/>
  <option timestep="0.005"/>
  <default><joint armature="0.01" damping="0.1"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 0.05"/>
    <body name="base" pos="0 0 0.35">
      <freejoint/>
      <geom type="box" size="0.12 0.08 0.04" mass="2"/>
      <site name="imu"/>
      <body name="left" pos="0 0.06 -0.04">
        <joint name="left_hip" axis="0 1 0" range="-1 1"/>
        <geom name="left_foot" type="capsule" fromto="0 0 0 0 0 -0.25" size="0.02" mass="0.3"/>
        <site name="left_sole" pos="0 0 -0.27"/>
      </body>
      <body name="right" pos="0 -0.06 -0.04">
        <joint name="right_hip" axis="0 1 0" range="-1 1"/>
        <geom name="right_foot" type="capsule" fromto="0 0 0 0 0 -0.25" size="0.02" mass="0.3"/>
        <site name="right_sole" pos="0 0 -0.27"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="left_hip" joint="left_hip" kp="20" kv="1"/>
    <position name="right_hip" joint="right_hip" kp="20" kv="1"/>
  </actuator>
  <sensor>
    <contact name="left_contact" geom1="left_foot" geom2="floor" data="found force" reduce="netforce"/>
    <contact name="right_contact" geom1="right_foot" geom2="floor" data="found force" reduce="netforce"/>
  </sensor>
</mujoco>
"""

ROBOT = LeggedRobot(
    model=BIPED,
    joint_names=("left_hip", "right_hip"),
    default_joint_pos={"left_hip": 0.1, "right_hip": -0.1},
    action_scale=(0.5, 0.5),
    base_body="base",
    init_base_height=0.35,
    imu_site="imu",
    foot_sites=("left_sole", "right_sole"),
    foot_geoms=("left_foot", "right_foot"),
    foot_contact_sensors=("left_contact", "right_contact"),
    com_body="base",
)


def alive(env: ManagerBasedEnv) -> torch.Tensor:
    """A user's own reward term: 1 per step."""
    return torch.ones(env.num_envs, device=env.device)


def base_height(env: ManagerBasedEnv) -> torch.Tensor:
    """A user's own metric."""
    return env.qpos[:, 2]


def user_task() -> TaskCfg:
    cfg = velocity_task(ROBOT)
    cfg = cfg.with_term("rewards", "alive", RewardTerm(alive, weight=0.5))  # one line per new term
    cfg = cfg.with_term("metrics", "base_height", MetricTerm(base_height))
    cfg = cfg.with_term(
        "curriculum",
        "upright_weight",
        CurriculumTerm(mdp.reward_weight_by_step, {"term": "upright", "stages": ((0, 1.0), (20, 0.5))}),
    )
    cfg = cfg.with_obs("policy", "gravity_history", ObsTerm(mdp.projected_gravity, history_length=3, delay=1))
    cfg = cfg.with_obs("policy", "noisy_height", ObsTerm(base_height_obs, noise=GaussianNoise(std=0.01)))
    cfg = cfg.replace_term("events", "push_robot", interval_range_s=(0.04, 0.1))
    cfg = cfg.replace_term("commands", "twist", resampling_time=(0.04, 0.12))
    actions = {"joint_pos": replace(cfg.actions["joint_pos"], delay=1, subtract_encoder_bias=True)}
    return replace(cfg, actions=actions)


def base_height_obs(env: ManagerBasedEnv) -> torch.Tensor:
    return env.qpos[:, 2:3]


N, HORIZON = 6, 12


def _factory(flags: dict[str, Any]) -> FixedShapeAutoresetVectorEnv:
    inner = ManagerBasedEnv(user_task(), N, device="cpu", max_episode_steps=HORIZON)
    return FixedShapeAutoresetVectorEnv(inner, **flags)


def _actions(steps: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [2.0 * torch.randn(N, 2, generator=gen) for _ in range(steps)]


@pytest.fixture(scope="module")
def env() -> ManagerBasedEnv:
    return ManagerBasedEnv(user_task(), N, device="cpu", max_episode_steps=HORIZON)


def test_the_user_task_is_built_as_declared(env: ManagerBasedEnv) -> None:
    layout = env.observation_layout["policy"]
    assert list(layout)[-2:] == ["gravity_history", "noisy_height"]
    assert layout["gravity_history"].stop - layout["gravity_history"].start == 9  # 3 steps x 3
    assert env.single_observation_space["policy"].shape == (layout["noisy_height"].stop,)
    assert "alive" in env.reward_names and env.termination_names == ("time_out", "fell_over")
    draws = env.describe()["draws"]
    assert draws["reset"]["events.reset_base"] == (0, 4)  # reset events first, then commands, then timers
    assert list(draws["step"])[:3] == ["commands.twist", "events.push_robot", "events.push_robot.timer"]
    for block in draws.values():  # within one block, no two terms share a word
        ordered = sorted(block.values())
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(ordered)), block


@pytest.mark.slow
def test_every_manager_is_masked_equal_to_selected() -> None:
    """Bit for bit over several episodes: resets, pushes, resamples, curriculum, delays and histories."""
    assert_masked_matches_selected(_factory, _actions(40), seed=5)


def test_masked_steps_make_no_host_read() -> None:
    env = _factory({"config": "masked"})
    env.reset(seed=1)
    actions = _actions(30)
    assert_no_host_reads(lambda: [env.step(a) for a in actions])


def test_reset_rows_restart_their_buffers_and_sums(env: ManagerBasedEnv) -> None:
    env.reset(seed=2)
    for a in _actions(5):
        _, _, _, _, info = env.step(a)
    assert (info["episode_reward_sums"] != 0).any()
    rows = torch.tensor([True, False, True, False, False, False])
    env.reset(options={"reset_mask": rows})
    sums = env.reward_manager.episode_sums
    assert (sums[rows] == 0).all() and (sums[~rows] != 0).any()
    assert (env.action[rows] == 0).all()
    assert env.curriculum_manager.values["upright_weight"].item() in (1.0, 0.5)


def test_position_targets_subtract_each_joint_s_own_encoder_bias() -> None:
    """Two action terms, each with its own scale: each target is offset + scale a - its joint's bias."""
    cfg = velocity_task(ROBOT)
    assert cfg.actions["joint_pos"].subtract_encoder_bias  # mjlab's action: the biased encoder's zero
    one = cfg.actions["joint_pos"]
    actions = {
        "right": replace(one, joint_names=("right_hip",), scale=(0.5,)),
        "left": replace(one, joint_names=("left_hip",), scale=(0.25,)),
    }
    env = ManagerBasedEnv(replace(cfg, actions=actions), N, device="cpu", max_episode_steps=HORIZON)
    env.reset(seed=4)
    assert env.joint_names == ("right_hip", "left_hip")  # action order
    bias = env.encoder_bias.clone()
    assert (bias[:, 0] != bias[:, 1]).all(), "the startup event draws a bias per joint"
    a = torch.tensor([[1.0, -2.0]]).expand(N, 2)  # action columns: right, then left
    env.action_manager.apply(a)
    right, left = env.mjm.actuator("right_hip").id, env.mjm.actuator("left_hip").id
    torch.testing.assert_close(env.ctrl[:, right], -0.1 + 0.5 * 1.0 - bias[:, 0])
    torch.testing.assert_close(env.ctrl[:, left], 0.1 + 0.25 * -2.0 - bias[:, 1])
    env.close()


def test_curriculum_changes_the_weight_on_the_device(env: ManagerBasedEnv) -> None:
    i = env.reward_names.index("upright")
    env.common_step.fill_(25)
    env.reset(seed=0)
    assert torch.isclose(env.reward_manager.weights[i], torch.tensor(0.5 * env.step_dt))


def _changed_after_declaring(term: RewardTerm, **params: Any) -> RewardTerm:
    """The term with ``params`` changed in its (mutable) params dict, past the declaration's check."""
    changed = replace(term, params=dict(term.params))
    changed.params.update(params)  # type: ignore[attr-defined]
    return changed


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda c: c.with_term("rewards", "bad", RewardTerm(alive, 1.0, {"nope": 1})),
            "takes no parameter(s) ['nope']",
        ),
        (
            lambda c: c.replace_term(
                "events", "foot_friction", params={**c.events["foot_friction"].params, "geoms": ("x",)}
            ),
            "no geom 'x'",
        ),
        (
            lambda c: c.with_obs("policy", "flat", ObsTerm(lambda env: env.qpos[:, 0])),
            "must return a (2, k) tensor, got (2,)",
        ),
        (
            lambda c: c.with_term("rewards", "upright", _changed_after_declaring(c.rewards["upright"], std=0.0)),
            "rewards['upright']: 'upright' param `std` must be a finite number > 0, got 0.0",
        ),
        (
            lambda c: c.with_term(
                "rewards", "pose", _changed_after_declaring(c.rewards["pose"], walking_threshold=2.0)
            ),
            "rewards['pose']: VariablePosture: `walking_threshold` (2.0) must be <= `running_threshold` (1.5)",
        ),
        (
            lambda c: c.with_term("rewards", "hit", RewardTerm(mdp.self_collision_cost, -1.0, {})),
            "rewards['hit']: 'self_collision_cost' needs parameter(s) ['sensor_name'] in its params",
        ),
        (
            lambda c: c.with_term("rewards", "hit", RewardTerm(mdp.self_collision_cost, -1.0, {"sensor_name": "x"})),
            "rewards['hit']: 'self_collision_cost' param `sensor_name`: the task has no sensor 'x'; "
            "its sensors: ['feet_contact']",
        ),
        (
            lambda c: c.with_term(
                "terminations", "hit", TerminationTerm(mdp.illegal_contact, {"sensor_name": "s"})
            ).with_term("sensors", "s", mdp.RayCastSensorCfg("base", geom_group=None)),
            "terminations['hit']: 'illegal_contact' param `sensor_name` names sensor 's', a RayCastSensor; "
            "it needs a ContactSensor",
        ),
    ],
    ids=[
        "unknown-param",
        "unknown-geom",
        "bad-obs-shape",
        "zero-std-at-bind",
        "posture-thresholds",
        "missing-param",
        "unknown-sensor",
        "wrong-kind-sensor",
    ],
)
def test_bad_terms_are_refused_by_name(change: Any, message: str) -> None:
    """Each is refused naming the term when the env is built."""
    with pytest.raises((ValueError, TypeError), match=re.escape(message)):
        ManagerBasedEnv(change(user_task()), 2, device="cpu")


def test_config_refuses_bad_values_by_field() -> None:
    with pytest.raises(ValueError, match=re.escape("`decimation` must be an int >= 1, got 0")):
        replace(user_task(), decimation=0)
    with pytest.raises(ValueError, match=re.escape("an 'interval' event needs `interval_range_s`")):
        user_task().replace_term("events", "push_robot", interval_range_s=None)
    with pytest.raises(KeyError, match="rewards has no term 'nope'"):
        user_task().without_term("rewards", "nope")


def test_named_streams_never_meet_the_task_s_blocks(env: ManagerBasedEnv) -> None:
    """``env.streams`` stays clear of the reset/step/startup blocks and of counter_normal's ``+ 1000`` of each."""
    blocks = {b.stream for b in (env.reset_block, env.step_block, env.startup_block)}
    taken = blocks | {s + 1000 for s in blocks}
    got = [env.streams(f"user_term{i}") for i in range(50)]
    assert env.streams("user_term0") == got[0]
    mine = got + [s + 1000 for s in got]
    assert len(set(mine)) == len(mine) and not taken & set(mine)
    assert env.describe()["streams"]["user_term3"] == got[3]
    words = {s: counter_bits(env.seed, env.env_ids, env.episode, 8, stream=s) for s in sorted(blocks) + got[:5]}
    for a, b in itertools.combinations(words, 2):  # different streams: different words on every row
        assert (words[a] != words[b]).any(dim=1).all(), (a, b)


def _startup_values(env: ManagerBasedEnv) -> dict[str, torch.Tensor]:
    """What the startup events drew: foot friction, base COM, encoder bias (one row per world)."""
    feet = env.geom_ids(ROBOT.foot_geoms)
    return {
        "friction": env.model_field("geom_friction")[:, feet].clone(),
        "com": env.model_field("body_ipos")[:, env.body_id(ROBOT.com_body)].clone(),
        "encoder_bias": env.encoder_bias.clone(),
    }


def test_seeded_partial_reset_redraws_startup_values_on_its_rows_only(env: ManagerBasedEnv) -> None:
    env.reset(seed=21)
    for a in _actions(3):
        env.step(a)
    before = _startup_values(env)
    rows = torch.tensor([True, False, False, True, False, True])
    env.reset(seed=22, options={"reset_mask": rows})
    after = _startup_values(env)
    for name in before:
        assert torch.equal(after[name][~rows], before[name][~rows]), f"{name} changed on rows outside the mask"
        changed = (after[name][rows] != before[name][rows]).flatten(1).any(dim=1)
        assert changed.all(), f"{name} was not redrawn on every row of the mask"


def test_obs_clip_and_group_clip_bound_the_observation_space(env: ManagerBasedEnv) -> None:
    assert np.isinf(env.single_observation_space["policy"].high).all()  # no clip: unbounded
    cfg = replace(user_task(), obs_clip=0.5)
    cfg = replace(cfg, observations={**cfg.observations, "critic": replace(cfg.observations["critic"], clip=0.25)})
    clipped = ManagerBasedEnv(cfg, 2, device="cpu", max_episode_steps=HORIZON)
    obs, _ = clipped.reset(seed=0)
    for a in _actions(3):
        obs, *_ = clipped.step(a[:2])
    for group, bound in (("policy", 0.5), ("critic", 0.25)):
        single = clipped.single_observation_space[group]
        assert (single.low == -bound).all() and (single.high == bound).all(), group
        batched = clipped.observation_space[group]
        assert batched.shape == (2, *single.shape) and (batched.high == bound).all(), group
        assert batched.contains(obs[group].numpy()), group
    clipped.close()


def _stepped(forward_before_obs: bool, steps: int = 12) -> tuple[ManagerBasedEnv, list[dict[str, torch.Tensor]]]:
    """The biped's velocity task stepped with fixed random actions; what each step returned."""
    env = ManagerBasedEnv(
        replace(velocity_task(ROBOT), forward_before_obs=forward_before_obs), 3, device="cpu", max_episode_steps=100
    )
    env.reset(seed=2)
    gen = torch.Generator().manual_seed(5)
    out = []
    for _ in range(steps):
        obs, reward, terminated, truncated, _info = env.step(0.3 * torch.randn(3, 2, generator=gen))
        out.append({**{k: v.clone() for k, v in obs.items()}, "reward": reward.clone(), "done": terminated | truncated})
    return env, out


def test_forward_before_obs_leaves_the_physics_and_refreshes_what_observations_read() -> None:
    """The forward pass changes no state, reward or flag (bit for bit on the CPU); the observations then read the
    state's own sites and contacts: the critic's foot heights are MuJoCo's ``mj_kinematics`` of the step's qpos,
    which the last substep's (the default) are not."""
    import mujoco

    plain, by_plain = _stepped(False)
    fresh, by_fresh = _stepped(True)
    assert torch.equal(plain.qpos, fresh.qpos) and torch.equal(plain.qvel, fresh.qvel)
    for a, b in zip(by_plain, by_fresh, strict=True):
        assert torch.equal(a["reward"], b["reward"]) and torch.equal(a["done"], b["done"])
        assert torch.equal(a["policy"], b["policy"])  # joint and base states: the same either way
    m, d = fresh.mjm, mujoco.MjData(fresh.mjm)
    feet = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, s) for s in ROBOT.foot_sites]
    heights = fresh.observation_layout["critic"]["foot_height"]
    for world in range(3):
        d.qpos[:] = fresh.qpos[world].numpy()
        mujoco.mj_kinematics(m, d)
        want = torch.tensor(d.site_xpos[feet, 2], dtype=torch.float32)
        torch.testing.assert_close(by_fresh[-1]["critic"][world, heights], want, atol=1e-5, rtol=0)
        assert not torch.allclose(by_plain[-1]["critic"][world, heights], want, atol=1e-5, rtol=0)
    feet_contact = fresh.sensors["feet_contact"]
    found = fresh.sensordata[:, feet_contact._cols].view(3, 2, 4)[..., 0] > 0
    assert torch.equal(feet_contact.in_contact, found.float())


def test_forward_before_obs_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match=re.escape("`forward_before_obs` must be a bool, got 'yes'")):
        replace(velocity_task(ROBOT), forward_before_obs="yes")  # type: ignore[arg-type]


@pytest.mark.slow
def test_forward_before_obs_is_masked_equal_to_selected_with_no_host_read() -> None:
    """The forward pass joins the masked step: bit for bit the selected path's, and no host read."""

    def factory(flags: dict[str, Any]) -> FixedShapeAutoresetVectorEnv:
        task = replace(user_task(), forward_before_obs=True)
        return FixedShapeAutoresetVectorEnv(ManagerBasedEnv(task, N, device="cpu", max_episode_steps=HORIZON), **flags)

    assert_masked_matches_selected(factory, _actions(25), seed=5)
    env = factory({"config": "masked"})
    env.reset(seed=1)
    actions = _actions(20)
    assert_no_host_reads(lambda: [env.step(a) for a in actions])


class _OldSensor:
    """A sensor written to the protocol before ``refresh``: ``update`` and ``reset`` only."""

    def update(self) -> None:
        pass

    def reset(self, rows: torch.Tensor) -> None:
        pass


class _OldSensorCfg:
    def build(self, env: ManagerBasedEnv) -> _OldSensor:
        return _OldSensor()


def test_forward_before_obs_refuses_a_sensor_without_refresh_when_built() -> None:
    """Refused at construction, naming the sensor, before any step could change the state; fine without the flag."""
    task = velocity_task(ROBOT).with_term("sensors", "old", _OldSensorCfg())
    ManagerBasedEnv(task, 2, device="cpu", max_episode_steps=10).close()
    with pytest.raises(TypeError, match=re.escape("sensors['old']: _OldSensor is not a SensorTerm")):
        ManagerBasedEnv(replace(task, forward_before_obs=True), 2, device="cpu", max_episode_steps=10)


@pytest.mark.parametrize("key", ["forward_before_obs", "obs_clip", "decimation"])
def test_a_task_field_given_to_the_env_names_where_it_goes(key: str) -> None:
    with pytest.raises(TypeError, match=re.escape(f"`{key}` is a field of the task, not an env argument")):
        ManagerBasedEnv(velocity_task(ROBOT), 2, device="cpu", **{key: True})


def test_a_joint_without_a_range_is_never_clamped() -> None:
    """An action joint the model gives no range has no soft limits: it starts at its default pose, not at 0."""
    model = BIPED.replace('<joint name="left_hip" axis="0 1 0" range="-1 1"/>', '<joint name="left_hip" axis="0 1 0"/>')
    env = ManagerBasedEnv(replace(user_task(), model=model), 2, device="cpu", max_episode_steps=HORIZON)
    inf = float("inf")
    assert env.soft_joint_limits[0].tolist() == [-inf, inf]
    assert torch.allclose(env.soft_joint_limits[1], torch.tensor([-1.0, 1.0]) * user_task().soft_joint_limit_factor)
    assert torch.allclose(env.qpos[:, env.joint_qpos_ids[0]], torch.tensor(0.1))  # the default pose, unclamped


@pytest.mark.parametrize(
    ("model", "default", "message"),
    [
        (BIPED, {"left_hip": 1.5}, r"TaskCfg.default_joint_pos\['left_hip'\]: the default position 1.5 is outside"),
        (BIPED.replace('<compiler angle="radian"/>', ""), {}, r"default_joint_pos\['left_hip'\].*in degrees"),
    ],
    ids=["outside", "range-in-degrees"],
)
def test_a_default_pose_outside_the_joint_range_is_refused(model: str, default: dict, message: str) -> None:
    """A default pose outside a joint's range is refused by name (it was clamped silently at every reset)."""
    cfg = replace(user_task(), model=model, default_joint_pos={**user_task().default_joint_pos, **default})
    with pytest.raises(ValueError, match=message):
        ManagerBasedEnv(cfg, 2, device="cpu", max_episode_steps=HORIZON)


def test_resets_after_the_physics_reset_read_nothing_cached_on_the_terminal_state(
    env: ManagerBasedEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Curricula run on the terminal state (phase ``reset``); the managers' resets after the physics reset run in
    a phase of their own (``new_state``), so a value a curriculum cached is computed again for them."""
    seen: list[tuple[str, int]] = []
    calls = iter(range(100))

    def probe(where: str) -> None:
        seen.append((where, env.cached("probe", lambda: next(calls))))

    curricula, recorders = env.curriculum_manager.reset, env.recorder_manager.reset
    monkeypatch.setattr(env.curriculum_manager, "reset", lambda mask: (probe("curricula"), curricula(mask)))
    monkeypatch.setattr(env.recorder_manager, "reset", lambda mask: (probe("recorders"), recorders(mask)))
    env.reset(seed=3)
    assert [where for where, _ in seen] == ["curricula", "recorders"]
    assert seen[0][1] != seen[1][1], "the recorders' reset read the value cached on the terminal state"


def test_a_reseeded_env_draws_what_a_fresh_env_of_that_seed_draws() -> None:
    """``reset(seed=2)`` of an env that ran under seed 1 then steps as a new env reset with seed 2 does, bit for
    bit: every draw block (reset events, commands, pushes, observation noise) starts from the new seed (their
    kept per-stream prefixes are refreshed)."""
    used, fresh = _factory({}), _factory({})
    actions = _actions(6)
    used.reset(seed=1)
    for action in actions:
        used.step(action)
    runs = []
    for env in (used, fresh):
        obs, _ = env.reset(seed=2)
        seen = [obs["policy"].clone()]
        for action in actions:
            obs, reward, *_ = env.step(action)
            seen += [obs["policy"].clone(), reward.clone()]
        runs.append(seen)
    assert all(torch.equal(a, b) for a, b in zip(*runs, strict=True))
