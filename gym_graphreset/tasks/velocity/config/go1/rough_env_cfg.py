"""``gym_graphreset/Go1-Velocity-Rough-v0``: mjlab 1.6's ``Mjlab-Velocity-Rough-Unitree-Go1`` on the task layer.

:func:`go1_velocity_rough_cfg` is the flat Go1 task
(:func:`~gym_graphreset.tasks.velocity.config.go1.flat_env_cfg.go1_velocity_flat_cfg`)
with what mjlab's rough config adds: the generated terrain in the model, the trunk's height scan in both
observation groups, the terrain-level curriculum, the spawn on each env's terrain cell, the body-group
contact penalties, the thigh-contact and out-of-bounds terminations in place of ``fell_over``, and the rough
solver budgets (``ccd_iterations=500``, ``njmax=1500``, ``nconmax=35``). ``docs/terrain.md`` lists what differs.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from gym_graphreset import mdp
from gym_graphreset.assets.robots.go1.model import FOOT_NAMES, LEGS, build_go1_xml
from gym_graphreset.managers.task_cfg import TaskCfg
from gym_graphreset.managers.terms import (
    RewardTerm,
    TerminationTerm,
)
from gym_graphreset.mdp.terminations import illegal_contact
from gym_graphreset.tasks.velocity.config.go1.flat_env_cfg import go1_velocity_flat_cfg
from gym_graphreset.tasks.velocity.velocity_env import RoughVelocityEnv
from gym_graphreset.tasks.velocity.velocity_env_cfg import on_rough_terrain, robot_on_terrain
from gym_graphreset.terrains.terrain_generator import (
    ROUGH_TERRAINS_CFG,
    TERRAIN_BODY,
    TerrainCfg,
    TerrainGeneratorCfg,
)

__all__ = ["GO1_ROUGH_TERRAIN", "Go1VelocityRoughEnv", "go1_rough_xml", "go1_velocity_rough_cfg"]

GO1_ROUGH_TERRAIN = replace(ROUGH_TERRAINS_CFG, geom_group=1)
"""mjlab's rough grid, in geom group 1: visible, and used by neither Go1 model (mjlab's meshes are group 2)."""

CONTACT_GROUPS = {
    "thigh_ground_touch": r"{leg}_thigh_collision\d*",
    "shank_ground_touch": r"{leg}_calf_collision\d*",
    "trunk_ground_touch": r"(trunk|head)_collision",
}
"""mjlab's per-body-group contact sensors against the terrain: one MuJoCo contact sensor per matching geom."""


def go1_rough_xml(
    model_xml: str | Path | None = None, *, keep_sensors: bool = False, terrain: TerrainGeneratorCfg = GO1_ROUGH_TERRAIN
) -> str:
    """The Go1 model (``build_go1_xml``) on ``terrain``, with mjlab's rough contact sensors and 500 CCD iterations."""
    import mujoco

    xml = build_go1_xml(model_xml, keep_sensors=keep_sensors)
    names = [g.name for g in mujoco.MjSpec.from_string(xml).geoms if g.name]
    spec = robot_on_terrain(xml, terrain, where="go1_rough_xml")

    def sensor(
        name: str, kind: Any, obj: str, ref: Any = mujoco.mjtObj.mjOBJ_BODY, ref_name: str = TERRAIN_BODY
    ) -> None:
        s = spec.add_sensor(name=name, type=mujoco.mjtSensor.mjSENS_CONTACT)
        s.objtype, s.objname, s.reftype, s.refname = kind, obj, ref, ref_name
        s.intprm[:3] = [3, 0, 1]  # found|force, no reduction, one slot: the first contact (mjlab's reduce="none")

    for group, pattern in CONTACT_GROUPS.items():
        for geom in contact_geoms(names, pattern):
            sensor(f"{group}/{geom}", mujoco.mjtObj.mjOBJ_GEOM, geom)
    subtree = mujoco.mjtObj.mjOBJ_XBODY  # the trunk's subtree against itself: self-collisions
    sensor("self_collision", subtree, "trunk", subtree, "trunk")
    return spec.to_xml()


def contact_geoms(names: list[str], pattern: str) -> list[str]:
    """The geoms of ``names`` matching ``pattern`` (``{leg}`` runs over the legs), in model order."""
    regex = re.compile("|".join(f"(?:{pattern.format(leg=leg)})" for leg in LEGS))
    return [n for n in names if regex.fullmatch(n)]


def go1_velocity_rough_cfg(
    model_xml: str | Path | None = None, *, keep_sensors: bool = False, terrain: TerrainGeneratorCfg = GO1_ROUGH_TERRAIN
) -> TaskCfg:
    """Mjlab's Go1 rough velocity task (``terrain``: the grid; default mjlab's rough set, 10 x 7 cells of 8 m)."""
    import mujoco

    if not isinstance(terrain, TerrainGeneratorCfg):
        raise ValueError(f"`terrain` must be a TerrainGeneratorCfg, got {type(terrain).__name__}")
    flat = go1_velocity_flat_cfg(model_xml, keep_sensors=keep_sensors)
    names = [g.name for g in mujoco.MjSpec.from_string(build_go1_xml(model_xml, keep_sensors=keep_sensors)).geoms]
    # mjlab keeps each collision sensor's force for every substep (history_length); no term reads their air time
    collision_sensor = partial(mdp.ContactSensorCfg, history_length=flat.decimation, air_time="step")
    contacts = {
        g: collision_sensor(tuple(f"{g}/{n}" for n in contact_geoms(names, p))) for g, p in CONTACT_GROUPS.items()
    }
    contacts["self_collision"] = collision_sensor(("self_collision",))
    collision = {"self_collisions": "self_collision", "shank_collision": "shank_ground_touch"}
    collision["trunk_head_collision"] = "trunk_ground_touch"
    rough = on_rough_terrain(
        flat,
        model=partial(go1_rough_xml, model_xml, keep_sensors=keep_sensors, terrain=terrain),
        scan_body="trunk",
        geom_group=terrain.geom_group,
        terrain=TerrainCfg(terrain, max_init_level=5),
        feet=mdp.TerrainHeightSensorCfg(FOOT_NAMES, radius=0.04, num_samples=4, geom_group=terrain.geom_group),
    )
    upright = {**rough.rewards["upright"].params, "terrain_sensor_name": "terrain_scan"}  # tilt against the ground
    rough = rough.replace_term("rewards", "upright", params=upright)
    return replace(
        rough,
        rewards={
            **rough.rewards,
            **{k: RewardTerm(mdp.self_collision_cost, -0.1, {"sensor_name": s}) for k, s in collision.items()},
        },
        terminations={  # Go1's rough config ends on a thigh touching the ground instead of a fall
            "time_out": rough.terminations["time_out"],
            "out_of_terrain_bounds": rough.terminations["out_of_terrain_bounds"],
            "illegal_contact": TerminationTerm(illegal_contact, {"sensor_name": "thigh_ground_touch"}),
        },
        sensors={**rough.sensors, **contacts},
        njmax=1500,
        nconmax=35,
    )


class Go1VelocityRoughEnv(RoughVelocityEnv):
    """Go1 velocity tracking on mjlab's rough terrain (see the module docstring).

    Args as :class:`~gym_graphreset.tasks.velocity.config.go1.flat_env.Go1VelocityFlatEnv`, plus ``terrain`` (the grid;
    default :data:`GO1_ROUGH_TERRAIN`).
    """

    make_cfg = staticmethod(go1_velocity_flat_cfg)
    make_rough_cfg = staticmethod(go1_velocity_rough_cfg)
