"""The Go1 rough task: registration, the scan in both groups, masked = selected bitwise, no host read, the
terrain curriculum on a scripted reset, refused configs, and (CUDA) the whole step captured with the scan."""

from __future__ import annotations

import re
from dataclasses import replace
from functools import partial
from typing import Any

import gymnasium as gym
import pytest
import torch

from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv, StepConfig
from gym_graphreset.mdp.rewards import self_collision_cost
from gym_graphreset.mdp.terminations import illegal_contact, out_of_terrain_bounds
from gym_graphreset.tasks import RewardTerm, TaskCfg
from gym_graphreset.tasks.velocity.config.go1 import (
    GO1_ROUGH_TERRAIN,
    Go1VelocityRoughEnv,
    go1_rough_xml,
    go1_velocity_rough_cfg,
)
from gym_graphreset.testing import assert_masked_matches_selected, assert_no_host_reads
from tests.conftest import MODES, needs_cuda
from tests.tasks.velocity.config.go1.test_env import _mjlab_go1_xml

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
pytest.importorskip("mujoco_warp", reason="the rough task casts MuJoCo Warp rays")

N = 4
SCAN = 187
SMALL = replace(GO1_ROUGH_TERRAIN, num_rows=3, border_width=1.0)
"""mjlab's rough set on 3 levels with a 1 m border: a small heightfield for the CPU."""
BUSY = (
    go1_velocity_rough_cfg(terrain=SMALL)
    .replace_term("events", "push_robot", interval_range_s=(0.02, 0.08))
    .replace_term("commands", "twist", resampling_time=(0.02, 0.1))
)


def _wrapped(flags: dict[str, Any], max_episode_steps: int = 4, cfg: TaskCfg = BUSY) -> FixedShapeAutoresetVectorEnv:
    inner = Go1VelocityRoughEnv(N, device="cpu", max_episode_steps=max_episode_steps, cfg=cfg)
    return FixedShapeAutoresetVectorEnv(inner, reset_terms={"ep": EpisodeStatistics()}, **flags)


def _actions(steps: int, n: int = N, device: str = "cpu", scale: float = 1.0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [(torch.randn(n, 12, generator=gen) * scale).to(device) for _ in range(steps)]


@pytest.mark.slow
def test_registered_steps_with_the_scan_in_both_groups() -> None:
    """``gym.make_vec`` builds it; the scan (187 rays) follows the command in policy and critic; obs finite."""
    assert gym.spec("gym_graphreset/Go1-Velocity-Rough-v0").max_episode_steps == 1000
    env = gym.make_vec("gym_graphreset/Go1-Velocity-Rough-v0", num_envs=N, device="cpu", terrain=SMALL).unwrapped
    assert isinstance(env, Go1VelocityRoughEnv)
    layout = env.observation_layout
    assert layout["policy"]["height_scan"] == slice(48, 48 + SCAN)
    assert layout["critic"]["height_scan"] == slice(48, 48 + SCAN)  # mjlab's order: after the command
    assert list(layout["critic"])[-4:] == ["foot_height", "foot_air_time", "foot_contact", "foot_contact_forces"]
    obs, _ = env.reset(seed=0)
    assert obs["policy"].shape == (N, 48 + SCAN) and obs["critic"].shape == (N, 72 + SCAN)
    standing = obs["critic"][:, layout["critic"]["height_scan"]] * 5.0  # scale 1/5
    assert bool(
        (standing.median(dim=1).values - env.qpos[:, 2] + env.sensors["terrain"].origins[:, 2]).abs().max() < 0.2
    )
    for a in _actions(3):
        obs, reward, *_ = env.step(a)
        assert all(bool(torch.isfinite(v).all()) for v in obs.values()) and bool(torch.isfinite(reward).all())
    names = set(env.termination_names)
    assert names == {"time_out", "out_of_terrain_bounds", "illegal_contact"}  # fell_over is mjlab-flat only
    assert {"self_collisions", "shank_collision", "trunk_head_collision"} <= set(env.reward_names)
    assert env.cfg.njmax == 1500 and env.cfg.nconmax == 35 and env.mjm.opt.ccd_iterations == 500
    env.close()


@pytest.mark.parametrize("mode", ["masked", "masked_persistent"])
@pytest.mark.slow
def test_masked_matches_selected_bitwise(mode: str) -> None:
    """Every manager (curriculum, spawn on the cell and scan included) masked = selected over 3 episodes."""
    assert_masked_matches_selected(_wrapped, _actions(10), config=MODES[mode]["config"])


def test_masked_steps_make_no_host_read() -> None:
    """Masked steps with resets (curriculum, spawn, scan after the reset) read nothing on the host."""
    env = _wrapped(MODES["masked"], max_episode_steps=2)
    env.reset(seed=0)
    actions = _actions(4)
    env.step(actions[0])
    assert_no_host_reads(lambda: [env.step(a) for a in actions[1:]])
    env.close()


def test_terrain_curriculum_moves_levels_at_reset() -> None:
    """Env 0 walked 5 m (> 4 m: up), env 1 0.1 m of a 1 m/s command (down), env 2 1 m of none (stays), env 3
    is not reset; the reset rows respawn on their new cells and the levels reach ``info["metrics"]``."""
    env = Go1VelocityRoughEnv(N, device="cpu", terrain=SMALL)
    env.reset(seed=0)
    env.step(torch.zeros(N, 12))
    state = env.sensors["terrain"]
    state.levels.copy_(torch.tensor([1, 1, 1, 2]))
    state.move(torch.zeros(N, dtype=torch.bool), *(torch.zeros(N, dtype=torch.bool),) * 2, torch.zeros(N))
    qpos, qvel = env.state()
    qpos[:, 0:2] = state.origins[:, 0:2] + torch.tensor([[5.0, 0.0], [0.1, 0.0], [0.0, 1.0], [5.0, 0.0]])
    env.set_state(qpos, qvel)
    env.command.copy_(torch.tensor([[0.0, 0, 0], [1.0, 0, 0], [0.0, 0, 0], [0.0, 0, 0]]))
    env.reset(options={"reset_mask": torch.tensor([True, True, True, False])})
    assert state.levels.tolist() == [2, 0, 1, 2]
    assert torch.equal(env.curriculum_manager.values["terrain_levels"], state.levels.float())
    assert bool(((env.qpos[:3, 0:2] - state.origins[:3, 0:2]).abs() <= 0.5 + 1e-5).all())  # reset_base: +-0.5 m
    _, _, _, _, info = env.step(torch.zeros(N, 12))
    assert torch.allclose(info["metrics"]["terrain_level"][:3], state.levels[:3].float())


def test_rough_terminations_and_contact_cost() -> None:
    """Out of the grid (3 x 8 m + 1 m border, less 0.3 m) truncates; a thigh force over 10 N at any substep
    terminates; the collision cost counts the substeps."""
    env = Go1VelocityRoughEnv(N, device="cpu", terrain=SMALL)
    env.reset(seed=0)
    qpos, qvel = env.state()
    qpos[0, 0], qpos[1, 1] = 12.0, -29.0  # x limit 12.7, y limit 28.7
    env.set_state(qpos, qvel)
    assert out_of_terrain_bounds(env).tolist() == [False, True, False, False]
    thighs = env.sensors["thigh_ground_touch"]
    assert thighs.force_history is not None and thighs.force_history.shape[2] == 4  # mjlab's history_length
    thighs.force_history[2, 1, 0] = torch.tensor([0.0, 0.0, 11.0])  # the step's first substep only
    assert illegal_contact(env, "thigh_ground_touch").tolist() == [False, False, True, False]
    thighs.force_history[2, 3, 2] = torch.tensor([12.0, 0.0, 0.0])  # another thigh, the third substep
    assert self_collision_cost(env, "thigh_ground_touch").tolist() == [0.0, 0.0, 2.0, 0.0]  # substeps counted
    assert self_collision_cost(env, "thigh_ground_touch", force_threshold=20.0).tolist() == [0.0] * N


def test_feet_and_upright_read_the_terrain_as_mjlab_s_rough_go1() -> None:
    """The foot terms read each foot's clearance over the terrain (a 0.04 m ring of 4 rays plus the centre, per
    foot site); ``upright`` tilts against the normal fitted to the height scan; both ray sensors cast as mjlab's
    ``sense()``; the self and ground collision sensors keep 4 substeps of force."""
    from gym_graphreset import mdp

    cfg = go1_velocity_rough_cfg(terrain=SMALL)
    feet = cfg.sensors["foot_height_scan"]
    group = SMALL.geom_group  # the terrain's
    assert feet == mdp.TerrainHeightSensorCfg(
        ("FR", "FL", "RR", "RL"), radius=0.04, num_samples=4, geom_group=group, cast="before_obs"
    )
    assert cfg.sensors["terrain_scan"].cast == "before_obs"  # mjlab's sense(): once per observation
    for name in ("foot_clearance", "foot_swing_height"):
        assert cfg.rewards[name].params["height_sensor_name"] == "foot_height_scan"
    assert cfg.observations["critic"].terms["foot_height"].func is mdp.terrain_height
    assert cfg.rewards["upright"].params["terrain_sensor_name"] == "terrain_scan"
    histories = {k: s.history_length for k, s in cfg.sensors.items() if isinstance(s, mdp.ContactSensorCfg)}
    assert histories == {
        "feet_contact": 0,
        "thigh_ground_touch": 4,
        "shank_ground_touch": 4,
        "trunk_ground_touch": 4,
        "self_collision": 4,
    }
    env = Go1VelocityRoughEnv(N, device="cpu", terrain=SMALL)
    env.reset(seed=0)
    env.step(torch.zeros(N, 12))
    clearance, site_z = mdp.terrain_height(env, "foot_height_scan"), env.site_xpos[:, env.site_ids(feet.sites), 2]
    assert bool((clearance <= site_z + 0.3).all()) and bool((clearance >= 0.0).all())  # terrain under the feet


def test_bad_config_is_refused_by_name() -> None:
    """A wrong terrain, a terrain in the robot's geom group, a bad param and cfg with model_xml name the culprit."""
    with pytest.raises(ValueError, match=re.escape("`terrain` must be a TerrainGeneratorCfg, got dict")):
        go1_velocity_rough_cfg(terrain={})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=re.escape("in the terrain's geom group 0")):
        go1_rough_xml(terrain=replace(SMALL, geom_group=0))  # this package's Go1 geoms are group 0
    with pytest.raises(ValueError, match="self_collision_cost.*`force_threshold`.*-1"):
        RewardTerm(self_collision_cost, -0.1, {"sensor_name": "self_collision", "force_threshold": -1.0})
    with pytest.raises(ValueError, match="not both"):
        Go1VelocityRoughEnv(1, cfg=BUSY, terrain=SMALL, device="cpu")


@pytest.mark.skipif(_mjlab_go1_xml() is None, reason="mjlab is not installed (its go1.xml is the same-model variant)")
def test_mjlab_go1_xml_with_its_sensors_steps() -> None:
    """mjlab's ``go1.xml`` (3 thigh and 2 calf capsules a leg, its 5 sensors kept) on the rough grid."""
    env = Go1VelocityRoughEnv(2, model_xml=_mjlab_go1_xml(), keep_sensors=True, terrain=SMALL, device="cpu")
    assert env.sensors["thigh_ground_touch"].k == 12 and env.sensors["shank_ground_touch"].k == 8
    env.reset(seed=0)
    obs, *_ = env.step(torch.zeros(2, 12))
    assert bool(torch.isfinite(obs["critic"]).all())


@pytest.mark.cuda
@needs_cuda
def test_step_graph_captures_the_scan_matches_eager_and_is_sync_free() -> None:
    """CUDA, 64 worlds on mjlab's full rough grid: the whole step captured; the scan moves inside the replayed
    graph; replay agrees with the eager run over 20 steps (contacts sum by atomics, so not bitwise: per-world
    medians and means); the sleep canary sees no sync."""
    from gym_graphreset.testing import assert_sync_free

    n = 64

    def make(config: StepConfig) -> FixedShapeAutoresetVectorEnv:
        inner = Go1VelocityRoughEnv(n, device="cuda")
        return FixedShapeAutoresetVectorEnv(
            inner, reset_terms={"ep": EpisodeStatistics()}, config=config, validation_poll_interval=10_000
        )

    actions = _actions(20, n, "cuda", scale=0.5)
    runs = {}
    for name, config in {
        "eager": StepConfig.preset("masked_persistent"),
        "graph": StepConfig.preset("step_graph", graph_warmup=2),
    }.items():
        env = make(config)
        env.reset(seed=0)
        scan = slice(48, 48 + SCAN)  # the critic layout (checked on the CPU)
        out = []
        for a in actions:
            obs, reward, *_ = env.step(a)
            out.append((obs["critic"].clone(), obs["critic"][:, scan].clone(), reward.clone()))
        runs[name] = out
        if name == "graph":
            assert env.graph is not None and env.graph.captured
            canary = assert_sync_free(partial(env.step, actions[0]), device="cuda", steps=4)
            print(f"\nGo1 rough step graph: {canary}")
        env.close()
    graph, eager = runs["graph"], runs["eager"]
    for t in range(4, len(actions)):  # replays (warm-up 2, then capture)
        assert not torch.equal(graph[t][1], graph[t - 1][1]), f"the scan did not change from step {t - 1} to {t}"
    for t, ((og, sg, rg), (oe, se, re_)) in enumerate(zip(graph, eager, strict=True)):
        assert bool(torch.isfinite(og).all()), f"step {t}: non-finite obs in the replay"
        world = (og - oe).abs().amax(dim=1)
        assert float(world.median()) < 1e-2, f"step {t}: median world obs diff {float(world.median()):.3g}"
        assert abs(float(sg.mean() - se.mean())) < 1e-2, f"step {t}: mean scan differs"
        assert abs(float(rg.mean() - re_.mean())) < 0.05 * float(re_.abs().mean()) + 1e-3, f"step {t}: mean reward"


@pytest.mark.slow
def test_compiled_step_breaks_only_at_declared_boundaries() -> None:
    """The rough step compiles bitwise equal to the step as written (a tracing backend), breaking only at warp
    calls and the one ray cast before the observation terms: no break in a loop, no recompile per term."""
    from gym_graphreset.capture.compiling import declared_boundaries
    from gym_graphreset.testing import assert_compiled_matches_uncompiled

    def factory(flags: dict[str, Any]) -> FixedShapeAutoresetVectorEnv:
        inner = Go1VelocityRoughEnv(N, device="cpu", max_episode_steps=4, cfg=BUSY)
        return FixedShapeAutoresetVectorEnv(inner, **flags)

    torch._dynamo.reset()  # a fresh compile: no verdict carried over from an earlier env of this process
    report = assert_compiled_matches_uncompiled(factory, _actions(8), config="masked", backend="aot_eager")
    assert report["ok"] and not report["graph_breaks"] and not report["recompiles"]
    assert "Sensors.cast_for_observation" in report["declared_breaks"]
    assert set(report["declared_breaks"]) <= declared_boundaries()
