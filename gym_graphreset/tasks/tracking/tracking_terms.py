"""Motion tracking terms (mjlab 1.6's ``tasks/tracking/mdp``): the robot's bodies against the clip's.

Observations, rewards and terminations of a :class:`~gym_graphreset.tasks.tracking.motion_command.MotionCommand`: in the
world frame (the anchor's position and orientation, the bodies' velocities) or relative to the anchor body
(the clip's body poses moved onto the robot's anchor position and heading, as mjlab's
``body_pos_relative_w``). Full width, no host read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from gym_graphreset.managers.binding import NON_NEGATIVE, POSITIVE, accepts, checked_by
from gym_graphreset.managers.forward_passes import reads_forward
from gym_graphreset.mdp.math import (
    projected_gravity,
    quat_conjugate,
    quat_error_magnitude,
    quat_mul,
    quat_rotate_inverse,
    rotation_columns,
)
from gym_graphreset.tasks.tracking.motion_command import MotionCommand, motion_command

if TYPE_CHECKING:
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = [
    "bad_anchor_ori",
    "bad_anchor_pos_z_only",
    "bad_motion_body_pos_z_only",
    "motion_anchor_ori_b",
    "motion_anchor_pos_b",
    "motion_body_ang_vel_error_exp",
    "motion_body_lin_vel_error_exp",
    "motion_end",
    "motion_global_anchor_orientation_error_exp",
    "motion_global_anchor_position_error_exp",
    "motion_relative_body_orientation_error_exp",
    "motion_relative_body_position_error_exp",
    "robot_body_ori_b",
    "robot_body_pos_b",
]


# ---------------------------------------------------------------------------------------------- observations


def _anchor_frames(command: MotionCommand) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    a = command.anchor
    pos, quat = command.robot_bodies()[:2]
    return pos[:, a], quat[:, a], command.motion_bodies("body_pos_w")[:, a], command.motion_bodies("body_quat_w")[:, a]


@reads_forward("kinematics", "com_vel")
def motion_anchor_pos_b(env: ManagerBasedEnv, command_name: str) -> torch.Tensor:
    """The clip's anchor position in the robot's anchor frame, ``(n, 3)``."""
    r_pos, r_quat, m_pos, _ = _anchor_frames(motion_command(env, command_name))
    return quat_rotate_inverse(r_quat, m_pos - r_pos)


@reads_forward("kinematics", "com_vel")
def motion_anchor_ori_b(env: ManagerBasedEnv, command_name: str) -> torch.Tensor:
    """The clip's anchor orientation in the robot's anchor frame, two rotation-matrix columns, ``(n, 6)``."""
    _, r_quat, _, m_quat = _anchor_frames(motion_command(env, command_name))
    return rotation_columns(quat_mul(quat_conjugate(r_quat), m_quat))


@reads_forward("kinematics", "com_vel")
def robot_body_pos_b(env: ManagerBasedEnv, command_name: str) -> torch.Tensor:
    """The robot's tracked bodies' positions in its anchor frame, flattened, ``(n, 3k)``."""
    command = motion_command(env, command_name)
    pos, quat = command.robot_bodies()[:2]
    a = command.anchor
    anchor_q = quat[:, a : a + 1].expand_as(quat)
    return quat_rotate_inverse(anchor_q, pos - pos[:, a : a + 1]).flatten(1)


@reads_forward("kinematics", "com_vel")
def robot_body_ori_b(env: ManagerBasedEnv, command_name: str) -> torch.Tensor:
    """The robot's tracked bodies' orientations in its anchor frame, two matrix columns each, ``(n, 6k)``."""
    command = motion_command(env, command_name)
    quat = command.robot_bodies()[1]
    a = command.anchor
    return rotation_columns(quat_mul(quat_conjugate(quat[:, a : a + 1].expand_as(quat)), quat)).flatten(1)


# ---------------------------------------------------------------------------------------------- rewards


def _exp(error: torch.Tensor, std: float) -> torch.Tensor:
    return torch.exp(-error / std**2)


@accepts(std=POSITIVE)
def motion_global_anchor_position_error_exp(env: ManagerBasedEnv, command_name: str, std: float) -> torch.Tensor:
    """``exp(-|p_anchor,clip - p_anchor,robot|^2 / std^2)`` in the world frame."""
    r_pos, _, m_pos, _ = _anchor_frames(motion_command(env, command_name))
    return _exp((m_pos - r_pos).square().sum(dim=-1), std)


@accepts(std=POSITIVE)
def motion_global_anchor_orientation_error_exp(env: ManagerBasedEnv, command_name: str, std: float) -> torch.Tensor:
    """``exp(-angle(q_anchor,clip, q_anchor,robot)^2 / std^2)``."""
    _, r_quat, _, m_quat = _anchor_frames(motion_command(env, command_name))
    return _exp(quat_error_magnitude(m_quat, r_quat).square(), std)


@accepts(std=POSITIVE)
def motion_relative_body_position_error_exp(env: ManagerBasedEnv, command_name: str, std: float) -> torch.Tensor:
    """``exp(-mean_b |p_b,clip (on the robot's anchor) - p_b,robot|^2 / std^2)``."""
    command = motion_command(env, command_name)
    return _exp((command.relative_bodies()[0] - command.robot_bodies()[0]).square().sum(-1).mean(-1), std)


@accepts(std=POSITIVE)
def motion_relative_body_orientation_error_exp(env: ManagerBasedEnv, command_name: str, std: float) -> torch.Tensor:
    """``exp(-mean_b angle(q_b,clip (on the robot's heading), q_b,robot)^2 / std^2)``."""
    command = motion_command(env, command_name)
    error = quat_error_magnitude(command.relative_bodies()[1], command.robot_bodies()[1]).square()
    return _exp(error.mean(-1), std)


@accepts(std=POSITIVE)
def motion_body_lin_vel_error_exp(env: ManagerBasedEnv, command_name: str, std: float) -> torch.Tensor:
    """``exp(-mean_b |v_b,clip - v_b,robot|^2 / std^2)``, world frame."""
    command = motion_command(env, command_name)
    error = (command.motion_bodies("body_lin_vel_w") - command.robot_bodies()[2]).square().sum(-1)
    return _exp(error.mean(-1), std)


@accepts(std=POSITIVE)
def motion_body_ang_vel_error_exp(env: ManagerBasedEnv, command_name: str, std: float) -> torch.Tensor:
    """``exp(-mean_b |w_b,clip - w_b,robot|^2 / std^2)``, world frame."""
    command = motion_command(env, command_name)
    error = (command.motion_bodies("body_ang_vel_w") - command.robot_bodies()[3]).square().sum(-1)
    return _exp(error.mean(-1), std)


# ---------------------------------------------------------------------------------------------- terminations


@accepts(threshold=NON_NEGATIVE)
def bad_anchor_pos_z_only(env: ManagerBasedEnv, command_name: str, threshold: float) -> torch.Tensor:
    """The anchor's height is off the clip's by more than ``threshold`` [m]."""
    r_pos, _, m_pos, _ = _anchor_frames(motion_command(env, command_name))
    return (m_pos[:, 2] - r_pos[:, 2]).abs() > threshold


@accepts(threshold=NON_NEGATIVE)
def bad_anchor_ori(env: ManagerBasedEnv, command_name: str, threshold: float) -> torch.Tensor:
    """The anchor's tilt differs from the clip's: gravity's z in the anchor frames differs by > ``threshold``."""
    _, r_quat, _, m_quat = _anchor_frames(motion_command(env, command_name))
    return (projected_gravity(m_quat)[:, 2] - projected_gravity(r_quat)[:, 2]).abs() > threshold


def _tracked_bodies(env: ManagerBasedEnv, command_name: str, body_names: tuple[str, ...], **_: object) -> None:
    """Refuse ``body_names`` the motion command does not track (checked when the env is built)."""
    tracked = motion_command(env, command_name).cfg.body_names
    if not (isinstance(body_names, tuple) and body_names and all(isinstance(b, str) for b in body_names)):
        raise ValueError(f"param `body_names` must be a non-empty tuple of tracked bodies, got {body_names!r}")
    if unknown := [b for b in body_names if b not in tracked]:
        raise ValueError(
            f"param `body_names`: {unknown} are not tracked by command {command_name!r}; it tracks {list(tracked)}"
        )


@accepts(threshold=NON_NEGATIVE)
@checked_by(_tracked_bodies)
def bad_motion_body_pos_z_only(
    env: ManagerBasedEnv, command_name: str, threshold: float, body_names: tuple[str, ...]
) -> torch.Tensor:
    """Any of ``body_names`` (tracked bodies) is off its relative clip height by more than ``threshold`` [m]."""
    command = motion_command(env, command_name)
    idx = env.constant(
        ("motion_bodies", command_name, body_names),
        lambda: torch.tensor([command.cfg.body_names.index(b) for b in body_names], device=env.device),
    )
    error = (command.relative_bodies()[0][:, idx, 2] - command.robot_bodies()[0][:, idx, 2]).abs()
    return (error > threshold).any(dim=-1)


def motion_end(env: ManagerBasedEnv, command_name: str) -> torch.Tensor:
    """The row reached the clip's last frame (a time-out: the episode ends with the motion)."""
    command = motion_command(env, command_name)
    return command.time_steps >= command.clip.num_frames - 1
