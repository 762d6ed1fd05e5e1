"""Unitree Go1 velocity tracking: mjlab 1.6's ``Mjlab-Velocity-{Flat,Rough}-Unitree-Go1`` as task configs.

Flat: the shared velocity task (:func:`~gym_graphreset.tasks.velocity.velocity_env_cfg.velocity_task`) on
:data:`GO1`, with what mjlab's Go1 config changes: posture stds per joint and the feet's friction range.
Rough: the flat task with what mjlab's rough config adds
(:func:`~gym_graphreset.tasks.velocity.velocity_env_cfg.on_rough_terrain`: terrain, height scan, curriculum, spawn),
the body-group contact penalties, thigh-contact and out-of-bounds terminations in place of ``fell_over``, and
the rough solver budgets (``ccd_iterations=500``, ``njmax=1500``, ``nconmax=35``); ``docs/terrain.md`` lists what
differs. Edit either like any TaskCfg: ``go1_velocity_flat_cfg().replace_term("rewards", "upright", weight=2.0)``.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

from gym_graphreset import mdp
from gym_graphreset.assets.robot_model import RobotModel
from gym_graphreset.assets.robots.go1 import model as go1
from gym_graphreset.managers.task_cfg import TaskCfg
from gym_graphreset.managers.terms import RewardTerm, TerminationTerm
from gym_graphreset.tasks.velocity.velocity_env_cfg import (
    LeggedRobot,
    on_rough_terrain,
    robot_on_terrain,
    velocity_task,
)
from gym_graphreset.terrains import terrain_generator as terrains

__all__ = [
    "GO1",
    "GO1_ROUGH_TERRAIN",
    "REWARD_NAMES",
    "go1_rough_xml",
    "go1_velocity_flat_cfg",
    "go1_velocity_rough_cfg",
]

GO1 = LeggedRobot(
    model=RobotModel(go1.build_go1_xml),
    joint_names=go1.JOINT_NAMES,
    default_joint_pos={j: go1.default_joint_pos(j) for j in go1.JOINT_NAMES},
    action_scale=tuple(go1.ACTION_SCALE[j] for j in go1.JOINT_NAMES),
    base_body="trunk",
    init_base_height=go1.INIT_BASE_HEIGHT,
    imu_site="imu",
    foot_sites=go1.FOOT_NAMES,
    foot_geoms=tuple(f"{leg}_foot_collision" for leg in go1.FOOT_NAMES),
    foot_contact_sensors=tuple(f"{leg}_foot_contact" for leg in go1.FOOT_NAMES),
    com_body="trunk",
    njmax=go1.NJMAX,
)
"""The Go1 of this package's MJCF; on another file of it (mjlab's names): ``GO1.with_model(path)``."""
GO1_ROUGH_TERRAIN = replace(terrains.ROUGH_TERRAINS_CFG, geom_group=1)
"""mjlab's rough grid, in geom group 1: visible, and used by neither Go1 model (mjlab's meshes are group 2)."""


def go1_velocity_flat_cfg(model_xml: str | Path | None = None, *, keep_sensors: bool = False) -> TaskCfg:
    """Mjlab's Go1 flat velocity task, on :data:`GO1` or another file of it (see :meth:`LeggedRobot.with_model`)."""
    cfg = velocity_task(GO1.with_model(model_xml, keep_sensors=keep_sensors))
    calf = r".*_calf_joint"
    std = {"std_standing": {calf: 0.1, ".*": 0.05}, "std_walking": {calf: 0.6, ".*": 0.3}}
    pose = {**cfg.rewards["pose"].params, **std, "std_running": {calf: 0.6, ".*": 0.3}}
    cfg = cfg.replace_term("rewards", "pose", params=pose)
    friction = {**cfg.events["foot_friction"].params, "slide": (0.3, 1.5)}
    return cfg.replace_term("events", "foot_friction", params=friction)


def go1_velocity_rough_cfg(
    model_xml: str | Path | None = None,
    *,
    keep_sensors: bool = False,
    terrain: terrains.TerrainGeneratorCfg = GO1_ROUGH_TERRAIN,
) -> TaskCfg:
    """Mjlab's Go1 rough velocity task (``terrain``: the grid; default mjlab's rough set, 10 x 7 cells of 8 m)."""
    if not isinstance(terrain, terrains.TerrainGeneratorCfg):
        raise ValueError(f"`terrain` must be a TerrainGeneratorCfg, got {type(terrain).__name__}")
    flat = go1_velocity_flat_cfg(model_xml, keep_sensors=keep_sensors)
    groups = go1.body_contact_sensors(go1.build_go1_xml(model_xml, keep_sensors=keep_sensors))
    # mjlab keeps each collision sensor's force for every substep (history_length); no term reads their air time
    collision_sensor = partial(mdp.ContactSensorCfg, history_length=flat.decimation, air_time="step")
    contacts = {group: collision_sensor(names) for group, names in groups.items()}
    contacts["self_collision"] = collision_sensor(("self_collision",))
    rough = on_rough_terrain(
        flat,
        model=RobotModel(partial(go1_rough_xml, terrain=terrain), model_xml, keep_sensors),
        scan_body="trunk",
        geom_group=terrain.geom_group,
        terrain=terrains.TerrainCfg(terrain, max_init_level=5),
        feet=mdp.TerrainHeightSensorCfg(go1.FOOT_NAMES, radius=0.04, num_samples=4, geom_group=terrain.geom_group),
    )
    upright = {**rough.rewards["upright"].params, "terrain_sensor_name": "terrain_scan"}  # tilt against the ground
    collision = {"self_collisions": "self_collision", "shank_collision": "shank_ground_touch"}
    collision["trunk_head_collision"] = "trunk_ground_touch"
    penalties = {k: RewardTerm(mdp.self_collision_cost, -0.1, {"sensor_name": s}) for k, s in collision.items()}
    rough = rough.replace_term("rewards", "upright", params=upright)
    return replace(
        rough,
        rewards={**rough.rewards, **penalties},
        terminations={  # Go1's rough config ends on a thigh touching the ground instead of a fall
            "time_out": rough.terminations["time_out"],
            "out_of_terrain_bounds": rough.terminations["out_of_terrain_bounds"],
            "illegal_contact": TerminationTerm(mdp.illegal_contact, {"sensor_name": "thigh_ground_touch"}),
        },
        sensors={**rough.sensors, **contacts},
        njmax=1500,
        nconmax=35,
    )


def go1_rough_xml(
    model_xml: str | Path | None = None,
    *,
    keep_sensors: bool = False,
    terrain: terrains.TerrainGeneratorCfg = GO1_ROUGH_TERRAIN,
) -> str:
    """The Go1 model (``build_go1_xml``) on ``terrain``, with mjlab's rough contact sensors and 500 CCD iterations."""
    xml = go1.build_go1_xml(model_xml, keep_sensors=keep_sensors)
    spec = robot_on_terrain(xml, terrain, where="go1_rough_xml")
    go1.add_body_contact_sensors(spec, xml, against=terrains.TERRAIN_BODY)
    return str(spec.to_xml())


REWARD_NAMES = tuple(n for n, t in go1_velocity_flat_cfg().rewards.items() if t.weight != 0.0)
"""Reward terms in the order of ``info["reward_terms"]`` (mjlab's weight-0 terms are left out)."""
