"""``gym_graphreset/G1-Velocity-Rough-v0``: mjlab 1.6's ``Mjlab-Velocity-Rough-Unitree-G1`` on the task layer.

:func:`g1_velocity_rough_cfg` is the flat G1 task
(:func:`~gym_graphreset.tasks.velocity.config.g1.flat_env_cfg.g1_velocity_flat_cfg`)
with what mjlab's rough config adds (:func:`~gym_graphreset.tasks.velocity.velocity_env_cfg.on_rough_terrain`): the
generated terrain in the model, the pelvis's height scan in both observation groups, the terrain-level curriculum, the
spawn on each env's terrain cell and the out-of-bounds time-out; the fall termination stays (mjlab's G1 keeps
it), and the rough solver budgets (``ccd_iterations=500``, ``njmax=1500``, ``nconmax=70``) apply.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

from gym_graphreset import mdp
from gym_graphreset.assets.robots.g1.model import FOOT_SITES, build_g1_xml
from gym_graphreset.managers.task_cfg import TaskCfg
from gym_graphreset.tasks.velocity.config.g1.flat_env_cfg import g1_velocity_flat_cfg
from gym_graphreset.tasks.velocity.velocity_env import RoughVelocityEnv
from gym_graphreset.tasks.velocity.velocity_env_cfg import on_rough_terrain, robot_on_terrain
from gym_graphreset.terrains.terrain_generator import (
    ROUGH_TERRAINS_CFG,
    TerrainCfg,
    TerrainGeneratorCfg,
)

__all__ = ["G1_ROUGH_TERRAIN", "G1VelocityRoughEnv", "g1_rough_xml", "g1_velocity_rough_cfg"]

G1_ROUGH_TERRAIN = replace(ROUGH_TERRAINS_CFG, geom_group=1)
"""mjlab's rough grid, in geom group 1: visible, and used by neither G1 model (visuals 2, collisions 3)."""


def g1_rough_xml(
    model_xml: str | Path | None = None, *, keep_sensors: bool = False, terrain: TerrainGeneratorCfg = G1_ROUGH_TERRAIN
) -> str:
    """The G1 model (``build_g1_xml``) on ``terrain`` (its foot sensors read the terrain), 500 CCD iterations."""
    xml = build_g1_xml(model_xml, keep_sensors=keep_sensors)
    return robot_on_terrain(xml, terrain, where="g1_rough_xml").to_xml()


def g1_velocity_rough_cfg(
    model_xml: str | Path | None = None, *, keep_sensors: bool = False, terrain: TerrainGeneratorCfg = G1_ROUGH_TERRAIN
) -> TaskCfg:
    """Mjlab's G1 rough velocity task (``terrain``: the grid; default mjlab's rough set, 10 x 7 cells of 8 m)."""
    if not isinstance(terrain, TerrainGeneratorCfg):
        raise ValueError(f"`terrain` must be a TerrainGeneratorCfg, got {type(terrain).__name__}")
    rough = on_rough_terrain(
        g1_velocity_flat_cfg(model_xml, keep_sensors=keep_sensors),
        model=partial(g1_rough_xml, model_xml, keep_sensors=keep_sensors, terrain=terrain),
        scan_body="pelvis",
        geom_group=terrain.geom_group,
        terrain=TerrainCfg(terrain, max_init_level=5),
        feet=mdp.TerrainHeightSensorCfg(FOOT_SITES, radius=0.03, num_samples=6, geom_group=terrain.geom_group),
    )
    return replace(rough, njmax=1500, nconmax=70)


class G1VelocityRoughEnv(RoughVelocityEnv):
    """G1 velocity tracking on mjlab's rough terrain (see the module docstring).

    Args as :class:`~gym_graphreset.tasks.velocity.config.g1.flat_env.G1VelocityFlatEnv`, plus ``terrain`` (the grid;
    default :data:`G1_ROUGH_TERRAIN`).
    """

    make_cfg = staticmethod(g1_velocity_flat_cfg)
    make_rough_cfg = staticmethod(g1_velocity_rough_cfg)
