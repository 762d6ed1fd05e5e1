"""The G1 rough task: registration and the scan in both groups, masked = selected bitwise, no host read, the
fall termination kept beside the terrain's, spawn on the terrain, refused configs."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import gymnasium as gym
import pytest
import torch

from gym_graphreset import EpisodeStatistics, FixedShapeAutoresetVectorEnv, StepConfig
from gym_graphreset.tasks import TaskCfg
from gym_graphreset.tasks.velocity.config.g1 import (
    G1_ROUGH_TERRAIN,
    G1VelocityRoughEnv,
    g1_rough_xml,
    g1_velocity_rough_cfg,
)
from gym_graphreset.testing import assert_masked_matches_selected, assert_no_host_reads
from tests.conftest import MODES, needs_cuda, step_graph_canary

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
pytest.importorskip("mujoco_warp", reason="the rough task casts MuJoCo Warp rays")

N = 4
SCAN = 187
SMALL = replace(G1_ROUGH_TERRAIN, num_rows=3, border_width=1.0)
"""mjlab's rough set on 3 levels with a 1 m border: a small heightfield for the CPU."""
BUSY = (
    g1_velocity_rough_cfg(terrain=SMALL)
    .replace_term("events", "push_robot", interval_range_s=(0.02, 0.08))
    .replace_term("commands", "twist", resampling_time=(0.02, 0.1))
)


def _wrapped(flags: dict[str, Any], max_episode_steps: int = 4, cfg: TaskCfg = BUSY) -> FixedShapeAutoresetVectorEnv:
    inner = G1VelocityRoughEnv(N, device="cpu", max_episode_steps=max_episode_steps, cfg=cfg)
    return FixedShapeAutoresetVectorEnv(inner, reset_terms={"ep": EpisodeStatistics()}, **flags)


def _actions(steps: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(N, 29, generator=gen) for _ in range(steps)]


def test_registered_with_the_scan_and_the_fall_termination() -> None:
    """``gym.make_vec`` builds it; the scan follows the command in both groups; G1 keeps ``fell_over``."""
    assert gym.spec("gym_graphreset/G1-Velocity-Rough-v0").max_episode_steps == 1000
    env = gym.make_vec("gym_graphreset/G1-Velocity-Rough-v0", num_envs=N, device="cpu", terrain=SMALL).unwrapped
    assert isinstance(env, G1VelocityRoughEnv)
    assert env.observation_layout["policy"]["height_scan"] == slice(99, 99 + SCAN)
    assert env.observation_layout["critic"]["height_scan"] == slice(99, 99 + SCAN)
    assert list(env.cfg.terminations) == ["time_out", "fell_over", "out_of_terrain_bounds"]
    assert (env.cfg.njmax, env.cfg.nconmax, env.mjm.opt.ccd_iterations) == (1500, 70, 500)
    obs, _ = env.reset(seed=0)
    for _ in range(10):
        obs, _, terminated, _, _ = env.step(torch.zeros(N, 29))
    assert torch.isfinite(obs["critic"]).all() and not terminated.any()
    assert (env.in_contact.sum(dim=1) >= 1).all()  # standing on the terrain, not falling through it
    env.close()


@pytest.mark.parametrize("mode", ["masked", "masked_persistent"])
@pytest.mark.slow
def test_masked_matches_selected_bitwise(mode: str) -> None:
    """Short episodes on the terrain, pushes, resamples: both reset paths return identical bits."""
    assert_masked_matches_selected(_wrapped, _actions(8), config=MODES[mode]["config"])


def test_step_reads_nothing_on_the_host() -> None:
    """Steps with resets, spawns on the terrain and the scan make no host read of device data."""
    env = _wrapped(MODES["masked"], max_episode_steps=2)
    env.reset(seed=0)
    actions = _actions(4)
    env.step(actions[0])
    assert_no_host_reads(lambda: [env.step(a) for a in actions[1:]])


def test_feet_read_their_clearance_over_the_terrain() -> None:
    """mjlab's G1 foot height scan: a 0.03 m ring of 6 rays plus the centre under each foot site; ``upright``
    stays against gravity (mjlab's G1 gives it no terrain sensor)."""

    cfg = g1_velocity_rough_cfg(terrain=SMALL)
    feet = cfg.sensors["foot_height_scan"]
    assert (feet.sites, feet.radius, feet.num_samples) == (("left_foot", "right_foot"), 0.03, 6)
    assert cfg.rewards["foot_clearance"].params["height_sensor_name"] == "foot_height_scan"
    assert "terrain_sensor_name" not in cfg.rewards["upright"].params


def test_bad_configs_are_refused() -> None:
    """A terrain that is not a generator config, a terrain in the robot's geom group, cfg with terrain."""
    with pytest.raises(ValueError, match=re.escape("`terrain` must be a TerrainGeneratorCfg, got dict")):
        g1_velocity_rough_cfg(terrain={})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=re.escape("are in the terrain's geom group 3")):
        g1_rough_xml(terrain=replace(SMALL, geom_group=3))  # the collision geoms' group
    with pytest.raises(ValueError, match=re.escape("give `model_xml` / `keep_sensors` / `terrain` or `cfg`")):
        G1VelocityRoughEnv(1, device="cpu", cfg=BUSY, terrain=SMALL)


@pytest.mark.cuda
@needs_cuda
def test_step_graph_is_sync_free() -> None:
    """CUDA, 256 worlds on mjlab's full rough grid: the whole step (height scan and foot rays through their
    BVH, substep contact history) in one graph passes the sleep canary (compile is covered on flat G1)."""
    config = StepConfig.preset("step_graph", graph_warmup=2)
    env, canary = step_graph_canary(G1VelocityRoughEnv(256, device="cuda"), config, 29)
    print(f"\nG1 rough step graph: {canary}")
    assert env.graph is not None and env.graph.captured
    env.close()
