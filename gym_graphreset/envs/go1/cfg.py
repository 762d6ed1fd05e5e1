"""The numbers of the Go1 velocity task: mjlab 1.6's ``Mjlab-Velocity-Flat-Unitree-Go1`` configuration.

:class:`Go1VelocityCfg` holds every command range, observation noise, reward weight and parameter,
termination angle and event range of :class:`~gym_graphreset.envs.go1.env.Go1VelocityFlatEnv`, and checks them on
construction; :data:`REWARD_NAMES` fixes the order of the reward terms in ``info["reward_terms"]``. Plain data,
no torch: the env turns these into device tensors once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["REWARD_NAMES", "Go1VelocityCfg"]

REWARD_NAMES = (
    "track_linear_velocity",
    "track_angular_velocity",
    "upright",
    "pose",
    "dof_pos_limits",
    "action_rate_l2",
    "foot_clearance",
    "foot_swing_height",
    "foot_slip",
    "soft_landing",
)
"""Reward terms in the order of ``info["reward_terms"]`` (mjlab's weight-0 terms are left out)."""


@dataclass(frozen=True)
class Go1VelocityCfg:
    """mjlab 1.6's ``Mjlab-Velocity-Flat-Unitree-Go1`` numbers (times in seconds, angles in radians)."""

    decimation: int = 4
    episode_length_s: float = 20.0
    # velocity command; the x and yaw-rate ranges widen with the env-step count (mjlab's command curriculum)
    velocity_stages: tuple[tuple[int, tuple[float, float], tuple[float, float]], ...] = (
        (0, (-1.0, 1.0), (-0.5, 0.5)),
        (5000 * 24, (-1.5, 2.0), (-0.7, 0.7)),
        (10000 * 24, (-2.0, 3.0), (-0.7, 0.7)),
    )
    """(first env step, lin_vel_x range, ang_vel_z range) of each stage."""
    lin_vel_y: tuple[float, float] = (-1.0, 1.0)
    heading_range: tuple[float, float] = (-math.pi, math.pi)
    resampling_time: tuple[float, float] = (3.0, 8.0)
    rel_standing_envs: float = 0.1
    rel_heading_envs: float = 0.3
    rel_forward_envs: float = 0.2
    forward_min_speed: float = 0.3
    heading_stiffness: float = 0.5
    # observation noise (uniform, additive)
    noise_lin_vel: float = 0.5
    noise_ang_vel: float = 0.2
    noise_gravity: float = 0.05
    noise_joint_pos: float = 0.01
    noise_joint_vel: float = 1.5
    # reward weights (mjlab multiplies each by the step dt) and parameters
    weights: dict[str, float] = field(
        default_factory=lambda: {
            "track_linear_velocity": 2.0,
            "track_angular_velocity": 2.0,
            "upright": 1.0,
            "pose": 1.0,
            "dof_pos_limits": -1.0,
            "action_rate_l2": -0.1,
            "foot_clearance": -2.0,
            "foot_swing_height": -0.25,
            "foot_slip": -0.1,
            "soft_landing": -1e-5,
        }
    )
    std_linear: float = math.sqrt(0.25)
    std_angular: float = math.sqrt(0.5)
    std_upright: float = math.sqrt(0.2)
    pose_std: tuple[tuple[float, float], ...] = ((0.05, 0.1), (0.3, 0.6), (0.3, 0.6))
    """(hip and thigh, calf) std for standing, walking, running."""
    walking_threshold: float = 0.05
    running_threshold: float = 1.5
    foot_target_height: float = 0.1
    foot_command_threshold: float = 0.05
    soft_joint_limit_factor: float = 0.9
    # terminations
    fall_angle: float = math.radians(70.0)
    # events
    reset_xy: float = 0.5
    reset_z: tuple[float, float] = (0.01, 0.05)
    reset_yaw: float = 3.14
    joint_position_range: tuple[float, float] = (0.0, 0.0)
    push_interval: tuple[float, float] = (1.0, 3.0)
    push_lin: tuple[float, float, float] = (0.5, 0.5, 0.4)
    push_ang: tuple[float, float, float] = (0.52, 0.52, 0.78)
    foot_friction_slide: tuple[float, float] = (0.3, 1.5)
    foot_friction_spin: tuple[float, float] = (1e-4, 2e-2)  # log-uniform
    foot_friction_roll: tuple[float, float] = (1e-5, 5e-3)  # log-uniform
    encoder_bias: float = 0.015
    base_com_offset: tuple[float, float, float] = (0.025, 0.025, 0.03)

    def __post_init__(self) -> None:
        steps = [stage[0] for stage in self.velocity_stages]
        if not steps or steps[0] != 0 or steps != sorted(steps):
            raise ValueError(f"`velocity_stages` must start at env step 0 and be sorted by step, got steps {steps}")
        if set(self.weights) != set(REWARD_NAMES):
            raise ValueError(f"`weights` must give exactly the terms {list(REWARD_NAMES)}, got {sorted(self.weights)}")
