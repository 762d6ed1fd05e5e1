"""``gym_graphreset/G1-Tracking-Flat-v0``: mjlab 1.6's ``Mjlab-Tracking-Flat-Unitree-G1`` on the task layer.

The G1 tracks a reference clip (BeyondMimic): its command is the clip's joint state at each row's frame,
start frames are drawn by adaptive, failure-weighted sampling, and rewards compare 14 tracked bodies with the
clip's (:mod:`gym_graphreset.tasks.tracking.motion_command`). :func:`g1_tracking_flat_cfg` is mjlab's tracking config
with its G1 settings; the clip defaults to the package's own (:data:`~gym_graphreset.assets.robots.g1.clip.G1_CLIP`),
and any clip of this robot in mjlab's ``.npz`` format at 50 Hz can be given as ``motion_file``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gym_graphreset import mdp
from gym_graphreset.assets.robot_model import RobotModel
from gym_graphreset.assets.robots.g1.clip import G1_CLIP
from gym_graphreset.assets.robots.g1.model import (
    ACTION_SCALE,
    DEFAULT_JOINT_POS,
    FOOT_GEOMS,
    JOINT_NAMES,
    SELF_COLLISION_SENSOR,
    build_g1_xml,
)
from gym_graphreset.managers.task_cfg import TaskCfg
from gym_graphreset.managers.task_env import TaskEnv
from gym_graphreset.managers.terms import (
    EventTerm,
    JointPositionAction,
    ObsGroup,
    ObsTerm,
    RewardTerm,
    TerminationTerm,
    UniformNoise,
)
from gym_graphreset.tasks.tracking import tracking_terms
from gym_graphreset.tasks.tracking.motion_command import (
    MotionCommand,
    MotionCommandCfg,
    reset_draws,
    reset_to_motion_frame,
)
from gym_graphreset.tasks.velocity.config.g1.env_cfgs import TORSO, self_collision_sensor

__all__ = ["TRACKED_BODIES", "G1TrackingFlatEnv", "g1_tracking_flat_cfg"]

TRACKED_BODIES = (
    "pelvis",
    "left_hip_roll_link",
    "left_knee_link",
    "left_ankle_roll_link",
    "right_hip_roll_link",
    "right_knee_link",
    "right_ankle_roll_link",
    "torso_link",
    "left_shoulder_roll_link",
    "left_elbow_link",
    "left_wrist_yaw_link",
    "right_shoulder_roll_link",
    "right_elbow_link",
    "right_wrist_yaw_link",
)
"""The bodies the rewards compare with the clip (mjlab's G1 list); the anchor is ``torso_link``."""
END_EFFECTORS = ("left_ankle_roll_link", "right_ankle_roll_link", "left_wrist_yaw_link", "right_wrist_yaw_link")
PUSH = {"linear": (0.5, 0.5, 0.2), "angular": (0.52, 0.52, 0.78)}


def g1_tracking_flat_cfg(
    motion_file: str | Path = G1_CLIP, model_xml: str | Path | None = None, *, keep_sensors: bool = False
) -> TaskCfg:
    """Mjlab's G1 flat tracking task on ``motion_file`` (a clip of this robot at 50 Hz; default the package's).

    ``model_xml``, ``keep_sensors``: another MJCF file of the G1 (see
    :class:`~gym_graphreset.assets.robot_model.RobotModel`).
    """
    motion = "motion"
    cmd = {"command_name": motion}

    def noisy(func: Any, noise: float, **params: object) -> ObsTerm:
        return ObsTerm(func, params=params, noise=UniformNoise(-noise, noise))

    policy = {
        "command": ObsTerm(mdp.generated_commands, params=cmd),
        "motion_anchor_pos_b": noisy(tracking_terms.motion_anchor_pos_b, 0.25, **cmd),
        "motion_anchor_ori_b": noisy(tracking_terms.motion_anchor_ori_b, 0.05, **cmd),
        "base_lin_vel": noisy(mdp.imu_lin_vel, 0.5, site="imu_in_pelvis"),
        "base_ang_vel": noisy(mdp.base_ang_vel, 0.2),
        "joint_pos": noisy(mdp.joint_pos_rel, 0.01, biased=True),
        "joint_vel": noisy(mdp.joint_vel, 0.5),
        "actions": ObsTerm(mdp.last_action),
    }
    critic = {
        "command": policy["command"],
        "motion_anchor_pos_b": ObsTerm(tracking_terms.motion_anchor_pos_b, params=cmd),
        "motion_anchor_ori_b": ObsTerm(tracking_terms.motion_anchor_ori_b, params=cmd),
        "body_pos": ObsTerm(tracking_terms.robot_body_pos_b, params=cmd),
        "body_ori": ObsTerm(tracking_terms.robot_body_ori_b, params=cmd),
        "base_lin_vel": ObsTerm(mdp.imu_lin_vel, params={"site": "imu_in_pelvis"}),
        "base_ang_vel": ObsTerm(mdp.base_ang_vel),
        "joint_pos": ObsTerm(mdp.joint_pos_rel),
        "joint_vel": ObsTerm(mdp.joint_vel),
        "actions": ObsTerm(mdp.last_action),
    }
    rewards = {
        "motion_global_root_pos": RewardTerm(
            tracking_terms.motion_global_anchor_position_error_exp, 0.5, {**cmd, "std": 0.3}
        ),
        "motion_global_root_ori": RewardTerm(
            tracking_terms.motion_global_anchor_orientation_error_exp, 0.5, {**cmd, "std": 0.4}
        ),
        "motion_body_pos": RewardTerm(tracking_terms.motion_relative_body_position_error_exp, 1.0, {**cmd, "std": 0.3}),
        "motion_body_ori": RewardTerm(
            tracking_terms.motion_relative_body_orientation_error_exp, 1.0, {**cmd, "std": 0.4}
        ),
        "motion_body_lin_vel": RewardTerm(tracking_terms.motion_body_lin_vel_error_exp, 1.0, {**cmd, "std": 1.0}),
        "motion_body_ang_vel": RewardTerm(tracking_terms.motion_body_ang_vel_error_exp, 1.0, {**cmd, "std": 3.14}),
        "action_rate_l2": RewardTerm(mdp.action_rate_l2, -0.1),
        "joint_limit": RewardTerm(mdp.joint_pos_limits, -10.0),
        "self_collisions": RewardTerm(
            mdp.self_collision_cost, -10.0, {"sensor_name": SELF_COLLISION_SENSOR, "force_threshold": 10.0}
        ),
    }
    return TaskCfg(
        model=RobotModel(build_g1_xml, model_xml, keep_sensors),
        decimation=4,
        episode_length_s=10.0,
        actions={
            "joint_pos": JointPositionAction(
                JOINT_NAMES, scale=tuple(ACTION_SCALE[j] for j in JOINT_NAMES), subtract_encoder_bias=True
            )
        },
        observations={"policy": ObsGroup(policy), "critic": ObsGroup(critic, enable_corruption=False)},
        rewards=rewards,
        terminations={
            "time_out": TerminationTerm(mdp.time_out, time_out=True),
            "motion_end": TerminationTerm(tracking_terms.motion_end, cmd, time_out=True),
            "anchor_pos": TerminationTerm(tracking_terms.bad_anchor_pos_z_only, {**cmd, "threshold": 0.25}),
            "anchor_ori": TerminationTerm(tracking_terms.bad_anchor_ori, {**cmd, "threshold": 0.8}),
            "ee_body_pos": TerminationTerm(
                tracking_terms.bad_motion_body_pos_z_only, {**cmd, "threshold": 0.25, "body_names": END_EFFECTORS}
            ),
        },
        events={
            "reset_to_motion": EventTerm(reset_to_motion_frame, "reset", cmd, draws=reset_draws(len(JOINT_NAMES))),
            "push_robot": EventTerm(
                mdp.push_by_setting_velocity, "interval", PUSH, draws=6, interval_range_s=(1.0, 3.0)
            ),
            "base_com": EventTerm(
                mdp.randomize_body_com,
                "startup",
                {"body": TORSO, "offset": (0.025, 0.05, 0.05)},
                draws=3,
                model_fields=("body_ipos",),
                recompute="set_const",  # mjlab's body_com_offset recomputes the derived constants
            ),
            "encoder_bias": EventTerm(mdp.randomize_encoder_bias, "startup", {"bias": 0.01}, draws=len(JOINT_NAMES)),
            "foot_friction": EventTerm(
                mdp.randomize_geom_friction,
                "startup",
                {"geoms": FOOT_GEOMS, "slide": (0.3, 1.2), "spin": (1e-4, 2e-2), "roll": (1e-5, 5e-3)},
                draws=3,
                model_fields=("geom_friction",),
            ),
        },
        commands={
            motion: MotionCommandCfg(
                motion_file=motion_file,
                anchor_body=TORSO,
                body_names=TRACKED_BODIES,
                pose_range=((-0.05, 0.05), (-0.05, 0.05), (-0.01, 0.01), (-0.1, 0.1), (-0.1, 0.1), (-0.2, 0.2)),
                velocity_range=((-0.5, 0.5), (-0.5, 0.5), (-0.2, 0.2), (-0.52, 0.52), (-0.52, 0.52), (-0.78, 0.78)),
                joint_position_range=(-0.1, 0.1),
            )
        },
        sensors={SELF_COLLISION_SENSOR: self_collision_sensor(decimation=4)},
        default_joint_pos={j: DEFAULT_JOINT_POS.get(j, 0.0) for j in JOINT_NAMES},
        soft_joint_limit_factor=0.9,
        base_body="pelvis",
        init_base_height=0.76,
        refresh="com",  # the critic reads body poses, the metrics body velocities, right after a reset
        njmax=250,
        nconmax=35,
    )


class G1TrackingFlatEnv(TaskEnv):
    """``gym_graphreset/G1-Tracking-Flat-v0``: ``G1TrackingFlatEnv(n, motion_file=..., model_xml=..., cfg=...)``.

    Adds the motion command at hand (:attr:`motion`).
    """

    env_id = "gym_graphreset/G1-Tracking-Flat-v0"

    @property
    def motion(self) -> MotionCommand:
        """The motion command (frames, the sampler's bins)."""
        command = self.commands["motion"]
        assert isinstance(command, MotionCommand)
        return command
