"""The G1 velocity task as configuration: mjlab 1.6's ``Mjlab-Velocity-Flat-Unitree-G1`` on the task layer.

:func:`g1_velocity_flat_cfg` starts from the shared velocity task
(:func:`~gym_graphreset.tasks.velocity.velocity_env_cfg.velocity_task`) with the G1 robot (:func:`g1_robot`) and
changes what mjlab's G1 config changes: posture stds per joint group, the torso for the upright reward and the
centre-of-mass event, and three humanoid terms (torso roll/pitch rate, whole-body angular momentum, self collisions).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from gym_graphreset import mdp
from gym_graphreset.assets.robots.g1.model import (
    ACTION_SCALE,
    ANGMOM_SENSOR,
    DEFAULT_JOINT_POS,
    FOOT_CONTACT_SENSORS,
    FOOT_GEOMS,
    FOOT_SITES,
    INIT_BASE_HEIGHT,
    JOINT_NAMES,
    NJMAX,
    SELF_COLLISION_SENSOR,
    build_g1_xml,
)
from gym_graphreset.managers.task_cfg import TaskCfg
from gym_graphreset.managers.terms import RewardTerm
from gym_graphreset.tasks.velocity.velocity_env_cfg import LeggedRobot, velocity_task

__all__ = ["POSE_STD", "REWARD_NAMES", "g1_robot", "g1_velocity_flat_cfg"]

TORSO = "torso_link"

POSE_STD = {
    "standing": {".*": 0.05},
    "walking": {
        r".*hip_pitch.*": 0.3,
        r".*hip_roll.*": 0.15,
        r".*hip_yaw.*": 0.15,
        r".*knee.*": 0.35,
        r".*ankle_pitch.*": 0.25,
        r".*ankle_roll.*": 0.1,
        r".*waist_yaw.*": 0.2,
        r".*waist_roll.*": 0.08,
        r".*waist_pitch.*": 0.1,
        r".*shoulder_pitch.*": 0.15,
        r".*shoulder_roll.*": 0.15,
        r".*shoulder_yaw.*": 0.1,
        r".*elbow.*": 0.15,
        r".*wrist.*": 0.3,
    },
    "running": {
        r".*hip_pitch.*": 0.5,
        r".*hip_roll.*": 0.2,
        r".*hip_yaw.*": 0.2,
        r".*knee.*": 0.6,
        r".*ankle_pitch.*": 0.35,
        r".*ankle_roll.*": 0.15,
        r".*waist_yaw.*": 0.3,
        r".*waist_roll.*": 0.08,
        r".*waist_pitch.*": 0.2,
        r".*shoulder_pitch.*": 0.5,
        r".*shoulder_roll.*": 0.2,
        r".*shoulder_yaw.*": 0.15,
        r".*elbow.*": 0.35,
        r".*wrist.*": 0.3,
    },
}
"""The posture reward's std per joint group and regime (mjlab's G1 numbers): loose knees and hip pitch for
the stride, tight ankle roll and waist roll/pitch for balance, loose wrists."""


def g1_robot(model_xml: str | Path | None = None, *, keep_sensors: bool = False) -> LeggedRobot:
    """The G1 (this package's MJCF, or ``model_xml`` with mjlab's names) as the velocity task sees it.

    ``keep_sensors``: keep the model's own sensors (see :func:`~gym_graphreset.assets.robots.g1.model.build_g1_xml`).
    """
    if not isinstance(keep_sensors, bool):
        raise ValueError(f"`keep_sensors` must be a bool, got {keep_sensors!r}")
    return LeggedRobot(
        model=partial(build_g1_xml, model_xml, keep_sensors=keep_sensors),
        joint_names=JOINT_NAMES,
        default_joint_pos={j: DEFAULT_JOINT_POS.get(j, 0.0) for j in JOINT_NAMES},
        action_scale=tuple(ACTION_SCALE[j] for j in JOINT_NAMES),
        base_body="pelvis",
        init_base_height=INIT_BASE_HEIGHT,
        imu_site="imu_in_pelvis",
        foot_sites=FOOT_SITES,
        foot_geoms=FOOT_GEOMS,
        foot_contact_sensors=FOOT_CONTACT_SENSORS,
        com_body=TORSO,
        njmax=NJMAX,
    )


def g1_velocity_flat_cfg(model_xml: str | Path | None = None, *, keep_sensors: bool = False) -> TaskCfg:
    """Mjlab's G1 flat velocity task (on ``model_xml``: a G1 MJCF with mjlab's names; default: this package's).

    ``keep_sensors``: keep the model's own sensors (unread by the task; for like-for-like timing against mjlab).
    """
    cfg = velocity_task(g1_robot(model_xml, keep_sensors=keep_sensors))
    pose = cfg.rewards["pose"].params
    upright = cfg.rewards["upright"].params
    cfg = cfg.replace_term(
        "rewards",
        "pose",
        params={**pose, **{f"std_{regime}": std for regime, std in POSE_STD.items()}},
    ).replace_term("rewards", "upright", params={**upright, "body": TORSO})
    humanoid = {
        "body_ang_vel": RewardTerm(mdp.body_ang_vel_xy_l2, -0.05, {"body": TORSO}),
        "angular_momentum": RewardTerm(mdp.angular_momentum_l2, -0.02, {"sensor_name": ANGMOM_SENSOR}),
        "self_collisions": RewardTerm(
            mdp.self_collision_cost, -1.0, {"sensor_name": SELF_COLLISION_SENSOR, "force_threshold": 10.0}
        ),
    }
    for name, term in humanoid.items():
        cfg = cfg.with_term("rewards", name, term)
    return cfg.with_term("sensors", SELF_COLLISION_SENSOR, self_collision_sensor(cfg.decimation))


def self_collision_sensor(decimation: int) -> mdp.ContactSensorCfg:
    """The self-collision sensor, its force kept for every substep (mjlab's ``history_length``; no air time read)."""
    return mdp.ContactSensorCfg((SELF_COLLISION_SENSOR,), history_length=decimation, air_time="step")


REWARD_NAMES = tuple(n for n, t in g1_velocity_flat_cfg().rewards.items() if t.weight != 0.0)
"""Reward terms in the order of ``info["reward_terms"]`` (mjlab's weight-0 terms are left out)."""
