"""Unitree G1 velocity tracking: mjlab 1.6's ``Mjlab-Velocity-{Flat,Rough}-Unitree-G1`` as task configs.

Flat: the shared velocity task (:func:`~gym_graphreset.tasks.velocity.velocity_env_cfg.velocity_task`) on
:data:`G1`, with what mjlab's G1 config changes: posture stds per joint group, the torso for the upright reward
and the centre-of-mass event, and three humanoid terms (torso roll/pitch rate, whole-body angular momentum,
self collisions). Rough: the flat task with what mjlab's rough config adds
(:func:`~gym_graphreset.tasks.velocity.velocity_env_cfg.on_rough_terrain`: terrain, pelvis height scan,
curriculum, spawn, out-of-bounds time-out); the fall termination stays (mjlab's G1 keeps it), and the rough
solver budgets (``ccd_iterations=500``, ``njmax=1500``, ``nconmax=70``) apply.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

from gym_graphreset import mdp
from gym_graphreset.assets.robot_model import RobotModel
from gym_graphreset.assets.robots.g1 import model as g1
from gym_graphreset.managers.task_cfg import TaskCfg
from gym_graphreset.managers.terms import RewardTerm
from gym_graphreset.tasks.velocity.velocity_env_cfg import (
    LeggedRobot,
    on_rough_terrain,
    robot_on_terrain,
    velocity_task,
)
from gym_graphreset.terrains import terrain_generator as terrains

__all__ = [
    "G1",
    "G1_ROUGH_TERRAIN",
    "POSE_STD",
    "REWARD_NAMES",
    "TORSO",
    "g1_rough_xml",
    "g1_velocity_flat_cfg",
    "g1_velocity_rough_cfg",
    "self_collision_sensor",
]

TORSO = "torso_link"
"""The body of the upright reward, the COM event and the torso-rate term (and the tracking task's anchor)."""
G1 = LeggedRobot(
    model=RobotModel(g1.build_g1_xml),
    joint_names=g1.JOINT_NAMES,
    default_joint_pos={j: g1.DEFAULT_JOINT_POS.get(j, 0.0) for j in g1.JOINT_NAMES},
    action_scale=tuple(g1.ACTION_SCALE[j] for j in g1.JOINT_NAMES),
    base_body="pelvis",
    init_base_height=g1.INIT_BASE_HEIGHT,
    imu_site="imu_in_pelvis",
    foot_sites=g1.FOOT_SITES,
    foot_geoms=g1.FOOT_GEOMS,
    foot_contact_sensors=g1.FOOT_CONTACT_SENSORS,
    com_body=TORSO,
    njmax=g1.NJMAX,
)
"""The G1 of this package's MJCF; on another file of it (29 DoF, mjlab's names): ``G1.with_model(path)``."""
G1_ROUGH_TERRAIN = replace(terrains.ROUGH_TERRAINS_CFG, geom_group=1)
"""mjlab's rough grid, in geom group 1: visible, and used by neither G1 model (visuals 2, collisions 3)."""
_GROUPS: tuple[str, ...] = (
    "hip_pitch",
    "hip_roll",
    "hip_yaw",
    "knee",
    "ankle_pitch",
    "ankle_roll",
    "waist_yaw",
    "waist_roll",
)
_GROUPS += ("waist_pitch", "shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist")
_WALKING = (0.3, 0.15, 0.15, 0.35, 0.25, 0.1, 0.2, 0.08, 0.1, 0.15, 0.15, 0.1, 0.15, 0.3)
_RUNNING = (0.5, 0.2, 0.2, 0.6, 0.35, 0.15, 0.3, 0.08, 0.2, 0.5, 0.2, 0.15, 0.35, 0.3)
POSE_STD = {
    "standing": {".*": 0.05},
    "walking": {rf".*{g}.*": s for g, s in zip(_GROUPS, _WALKING, strict=True)},
    "running": {rf".*{g}.*": s for g, s in zip(_GROUPS, _RUNNING, strict=True)},
}
"""The posture reward's std per joint group and regime (mjlab's G1 numbers): loose knees and hip pitch for
the stride, tight ankle roll and waist roll/pitch for balance, loose wrists."""


def g1_velocity_flat_cfg(model_xml: str | Path | None = None, *, keep_sensors: bool = False) -> TaskCfg:
    """Mjlab's G1 flat velocity task, on :data:`G1` or another file of it (see :meth:`LeggedRobot.with_model`)."""
    cfg = velocity_task(G1.with_model(model_xml, keep_sensors=keep_sensors))
    pose = {**cfg.rewards["pose"].params, **{f"std_{regime}": std for regime, std in POSE_STD.items()}}
    cfg = cfg.replace_term("rewards", "pose", params=pose)
    cfg = cfg.replace_term("rewards", "upright", params={**cfg.rewards["upright"].params, "body": TORSO})
    collisions = {"sensor_name": g1.SELF_COLLISION_SENSOR, "force_threshold": 10.0}
    humanoid = {
        "body_ang_vel": RewardTerm(mdp.body_ang_vel_xy_l2, -0.05, {"body": TORSO}),
        "angular_momentum": RewardTerm(mdp.angular_momentum_l2, -0.02, {"sensor_name": g1.ANGMOM_SENSOR}),
        "self_collisions": RewardTerm(mdp.self_collision_cost, -1.0, collisions),
    }
    for name, term in humanoid.items():
        cfg = cfg.with_term("rewards", name, term)
    return cfg.with_term("sensors", g1.SELF_COLLISION_SENSOR, self_collision_sensor(cfg.decimation))


def self_collision_sensor(decimation: int) -> mdp.ContactSensorCfg:
    """The self-collision sensor, its force kept for every substep (mjlab's ``history_length``; no air time read)."""
    return mdp.ContactSensorCfg((g1.SELF_COLLISION_SENSOR,), history_length=decimation, air_time="step")


def g1_velocity_rough_cfg(
    model_xml: str | Path | None = None,
    *,
    keep_sensors: bool = False,
    terrain: terrains.TerrainGeneratorCfg = G1_ROUGH_TERRAIN,
) -> TaskCfg:
    """Mjlab's G1 rough velocity task (``terrain``: the grid; default mjlab's rough set, 10 x 7 cells of 8 m)."""
    if not isinstance(terrain, terrains.TerrainGeneratorCfg):
        raise ValueError(f"`terrain` must be a TerrainGeneratorCfg, got {type(terrain).__name__}")
    rough = on_rough_terrain(
        g1_velocity_flat_cfg(model_xml, keep_sensors=keep_sensors),
        model=RobotModel(partial(g1_rough_xml, terrain=terrain), model_xml, keep_sensors),
        scan_body="pelvis",
        geom_group=terrain.geom_group,
        terrain=terrains.TerrainCfg(terrain, max_init_level=5),
        feet=mdp.TerrainHeightSensorCfg(g1.FOOT_SITES, radius=0.03, num_samples=6, geom_group=terrain.geom_group),
    )
    return replace(rough, njmax=1500, nconmax=70)


def g1_rough_xml(
    model_xml: str | Path | None = None,
    *,
    keep_sensors: bool = False,
    terrain: terrains.TerrainGeneratorCfg = G1_ROUGH_TERRAIN,
) -> str:
    """The G1 model (``build_g1_xml``) on ``terrain`` (its foot sensors read the terrain), 500 CCD iterations."""
    xml = g1.build_g1_xml(model_xml, keep_sensors=keep_sensors)
    return str(robot_on_terrain(xml, terrain, where="g1_rough_xml").to_xml())


REWARD_NAMES = tuple(n for n, t in g1_velocity_flat_cfg().rewards.items() if t.weight != 0.0)
"""Reward terms in the order of ``info["reward_terms"]`` (mjlab's weight-0 terms are left out)."""
