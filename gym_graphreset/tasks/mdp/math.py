"""The tensor math under the task terms: rotations, velocities and the reward kernels, as plain batched torch.

No host read, no branching on data: every function takes full-width ``(num_envs, ...)`` tensors and
returns one value per row, so a term is
the same code eagerly, masked, and inside a captured CUDA graph. Quaternions are MuJoCo's ``(w, x, y, z)``.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "active_command",
    "feet_clearance",
    "feet_slip",
    "heading",
    "joint_pos_limits",
    "point_velocity",
    "projected_gravity",
    "quat_rotate",
    "quat_rotate_inverse",
    "soft_landing",
    "track_angular_velocity",
    "track_linear_velocity",
    "upright",
    "variable_posture",
    "wrap_to_pi",
    "yaw_quat",
]


def quat_rotate(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate ``v`` ``(n, 3)`` by the unit quaternions ``q`` ``(n, 4)`` (body to world)."""
    w, u = q[:, :1], q[:, 1:]
    t = 2.0 * torch.linalg.cross(u, v)
    return v + w * t + torch.linalg.cross(u, t)


def quat_rotate_inverse(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate ``v`` ``(n, 3)`` by the inverse of ``q`` (world to body)."""
    w, u = q[:, :1], q[:, 1:]
    t = 2.0 * torch.linalg.cross(u, v)
    return v - w * t + torch.linalg.cross(u, t)


def yaw_quat(yaw: torch.Tensor) -> torch.Tensor:
    """Quaternions of a rotation by ``yaw`` ``(n,)`` about the world z axis."""
    half = 0.5 * yaw
    zero = torch.zeros_like(yaw)
    return torch.stack((torch.cos(half), zero, zero, torch.sin(half)), dim=1)


def projected_gravity(q: torch.Tensor) -> torch.Tensor:
    """The unit gravity direction in the body frame, ``(n, 3)``."""
    down = torch.zeros(q.shape[0], 3, dtype=q.dtype, device=q.device)
    down[:, 2] = -1.0
    return quat_rotate_inverse(q, down)


def heading(q: torch.Tensor) -> torch.Tensor:
    """Yaw of the body's forward (x) axis in the world, ``(n,)``."""
    fwd = torch.zeros(q.shape[0], 3, dtype=q.dtype, device=q.device)
    fwd[:, 0] = 1.0
    f = quat_rotate(q, fwd)
    return torch.atan2(f[:, 1], f[:, 0])


def wrap_to_pi(x: torch.Tensor) -> torch.Tensor:
    """Angles wrapped into ``[-pi, pi)``."""
    return torch.remainder(x + math.pi, 2.0 * math.pi) - math.pi


def point_velocity(cvel: torch.Tensor, subtree_com: torch.Tensor, point: torch.Tensor) -> torch.Tensor:
    """World linear velocity of points fixed to bodies from MuJoCo's ``cvel`` rows ``(n, k, 6)``.

    ``cvel`` is ``[angular, linear]`` with the linear part taken at the root's subtree centre of mass
    ``subtree_com`` ``(n, 1, 3)``; ``point`` is ``(n, k, 3)`` in the world.
    """
    ang, lin = cvel[..., :3], cvel[..., 3:]
    return lin + torch.linalg.cross(ang, point - subtree_com, dim=-1)


def active_command(command: torch.Tensor, threshold: float) -> torch.Tensor:
    """1.0 where ``|v_xy| + |w_z|`` of the command exceeds ``threshold``, else 0.0."""
    total = torch.linalg.vector_norm(command[:, :2], dim=1) + command[:, 2].abs()
    return (total > threshold).float()


def track_linear_velocity(command: torch.Tensor, lin_vel_b: torch.Tensor, std: float) -> torch.Tensor:
    """``exp(-(|cmd_xy - v_xy|^2 + v_z^2) / std^2)`` (body frame; the commanded v_z is zero)."""
    err = (command[:, :2] - lin_vel_b[:, :2]).square().sum(dim=1) + lin_vel_b[:, 2].square()
    return torch.exp(-err / std**2)


def track_angular_velocity(command: torch.Tensor, ang_vel_b: torch.Tensor, std: float) -> torch.Tensor:
    """``exp(-((cmd_wz - w_z)^2 + |w_xy|^2) / std^2)`` (body frame)."""
    err = (command[:, 2] - ang_vel_b[:, 2]).square() + ang_vel_b[:, :2].square().sum(dim=1)
    return torch.exp(-err / std**2)


def upright(gravity_b: torch.Tensor, std: float) -> torch.Tensor:
    """``exp(-|g_xy|^2 / std^2)`` of the projected gravity: 1 when level."""
    return torch.exp(-gravity_b[:, :2].square().sum(dim=1) / std**2)


def variable_posture(
    joint_pos_rel: torch.Tensor,
    command: torch.Tensor,
    std: torch.Tensor,
    walking_threshold: float,
    running_threshold: float,
) -> torch.Tensor:
    """``exp(-mean(dq^2 / s^2))`` with per-joint ``s`` picked by command speed.

    ``std`` is ``(3, nj)``: rows for standing, walking and running, chosen by ``|v_xy| + |w_z|`` against
    the two thresholds.
    """
    speed = torch.linalg.vector_norm(command[:, :2], dim=1) + command[:, 2].abs()
    regime = (speed >= walking_threshold).long() + (speed >= running_threshold).long()
    s = std[regime]
    return torch.exp(-(joint_pos_rel.square() / s.square()).mean(dim=1))


def joint_pos_limits(joint_pos: torch.Tensor, soft_limits: torch.Tensor) -> torch.Tensor:
    """Sum over joints of how far each is outside its soft limits ``(nj, 2)``."""
    below = (soft_limits[:, 0] - joint_pos).clamp(min=0.0)
    above = (joint_pos - soft_limits[:, 1]).clamp(min=0.0)
    return (below + above).sum(dim=1)


def feet_clearance(foot_height: torch.Tensor, foot_vel_w: torch.Tensor, target: float) -> torch.Tensor:
    """``sum_f |h_f - target| * |v_xy,f|``: swing feet should pass at ``target`` height."""
    return ((foot_height - target).abs() * torch.linalg.vector_norm(foot_vel_w[..., :2], dim=-1)).sum(dim=1)


def feet_slip(in_contact: torch.Tensor, foot_vel_w: torch.Tensor) -> torch.Tensor:
    """``sum_f |v_xy,f|^2`` over feet in contact."""
    return (foot_vel_w[..., :2].square().sum(dim=-1) * in_contact).sum(dim=1)


def soft_landing(force: torch.Tensor, first_contact: torch.Tensor) -> torch.Tensor:
    """``sum_f |F_f|`` over feet that touched down this step."""
    return (torch.linalg.vector_norm(force, dim=-1) * first_contact).sum(dim=1)
