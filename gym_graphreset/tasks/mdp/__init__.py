"""The terms of manager-based tasks: observations, rewards, terminations, events, commands, sensors, curricula.

Import as ``from gym_graphreset.tasks import mdp`` and name terms as mjlab does (``mdp.base_lin_vel``,
``mdp.track_linear_velocity``...). The tensor math they share is :mod:`~gym_graphreset.tasks.mdp.math`.
"""

from gym_graphreset.tasks.mdp import math
from gym_graphreset.tasks.mdp.commands import VelocityCommand, VelocityCommandCfg
from gym_graphreset.tasks.mdp.curricula import reward_weight_by_step
from gym_graphreset.tasks.mdp.events import (
    push_by_setting_velocity,
    randomize_actuator_gains,
    randomize_body_com,
    randomize_body_mass,
    randomize_encoder_bias,
    randomize_geom_friction,
    reset_joints_by_offset,
    reset_root_state_uniform,
)
from gym_graphreset.tasks.mdp.height_scan import RayCastSensor, RayCastSensorCfg, height_scan
from gym_graphreset.tasks.mdp.observations import (
    base_ang_vel,
    base_lin_vel,
    contact_air_time,
    contact_force_log,
    contact_found,
    generated_commands,
    imu_lin_vel,
    joint_pos_rel,
    joint_vel,
    last_action,
    projected_gravity,
    site_height,
)
from gym_graphreset.tasks.mdp.recorders import (
    body_ang_vel_w,
    body_lin_vel_w,
    body_pos_w,
    body_quat_w,
    joint_positions,
    joint_velocities,
    motion_recorders,
    obs_group,
)
from gym_graphreset.tasks.mdp.rewards import (
    FootSwingHeight,
    VariablePosture,
    action_rate_l2,
    feet_clearance,
    feet_slip,
    joint_pos_limits,
    soft_landing,
    track_angular_velocity,
    track_linear_velocity,
    upright,
)
from gym_graphreset.tasks.mdp.sensors import ContactSensor, ContactSensorCfg
from gym_graphreset.tasks.mdp.terminations import (
    bad_orientation,
    illegal_contact,
    out_of_terrain_bounds,
    root_height_below,
    time_out,
)
from gym_graphreset.tasks.mdp.terrain_levels import reset_to_terrain_origin, terrain_level, terrain_levels_vel

__all__ = [
    "ContactSensor",
    "ContactSensorCfg",
    "FootSwingHeight",
    "RayCastSensor",
    "RayCastSensorCfg",
    "VariablePosture",
    "VelocityCommand",
    "VelocityCommandCfg",
    "action_rate_l2",
    "bad_orientation",
    "base_ang_vel",
    "base_lin_vel",
    "body_ang_vel_w",
    "body_lin_vel_w",
    "body_pos_w",
    "body_quat_w",
    "contact_air_time",
    "contact_force_log",
    "contact_found",
    "feet_clearance",
    "feet_slip",
    "generated_commands",
    "height_scan",
    "illegal_contact",
    "imu_lin_vel",
    "joint_pos_limits",
    "joint_pos_rel",
    "joint_positions",
    "joint_vel",
    "joint_velocities",
    "last_action",
    "math",
    "motion_recorders",
    "obs_group",
    "out_of_terrain_bounds",
    "projected_gravity",
    "push_by_setting_velocity",
    "randomize_actuator_gains",
    "randomize_body_com",
    "randomize_body_mass",
    "randomize_encoder_bias",
    "randomize_geom_friction",
    "reset_joints_by_offset",
    "reset_root_state_uniform",
    "reset_to_terrain_origin",
    "reward_weight_by_step",
    "root_height_below",
    "site_height",
    "soft_landing",
    "terrain_level",
    "terrain_levels_vel",
    "time_out",
    "track_angular_velocity",
    "track_linear_velocity",
    "upright",
]
