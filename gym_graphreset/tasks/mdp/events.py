"""Event terms: ``func(env, rows, u, **params)``, masked writes on the rows of ``rows`` only.

``u`` holds the event's ``draws`` uniforms per row. Reset events write the new episode's initial state into
``env.initial_state`` (full-width proposals the engine writes on the reset rows); startup events write
per-world model fields (declared in the term's ``model_fields``); interval events act on the running
physics.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from gym_graphreset.tasks.binding import NON_NEGATIVE, accepts, interval, number
from gym_graphreset.tasks.mdp import math as M
from gym_graphreset.tasks.mdp.commands import span

if TYPE_CHECKING:
    from gym_graphreset.tasks.env import ManagerBasedEnv

__all__ = [
    "push_by_setting_velocity",
    "randomize_body_com",
    "randomize_encoder_bias",
    "randomize_geom_friction",
    "reset_joints_by_offset",
    "reset_root_state_uniform",
]


@accepts(xy=NON_NEGATIVE, z=interval(), yaw=NON_NEGATIVE)
def reset_root_state_uniform(
    env: ManagerBasedEnv,
    rows: torch.Tensor,
    u: torch.Tensor,
    xy: float,
    z: tuple[float, float],
    yaw: float,
) -> None:
    """Base position uniform within ``+-xy`` and ``z`` above the spawn height, yaw within ``+-yaw`` (4 draws)."""
    qpos = env.initial_state.qpos
    qpos[:, 0] = span(u[:, 0], -xy, xy)
    qpos[:, 1] = span(u[:, 1], -xy, xy)
    qpos[:, 2] = env.cfg.init_base_height + span(u[:, 2], *z)
    qpos[:, 3:7] = M.yaw_quat(span(u[:, 3], -yaw, yaw))


@accepts(position_range=interval())
def reset_joints_by_offset(
    env: ManagerBasedEnv, rows: torch.Tensor, u: torch.Tensor, position_range: tuple[float, float]
) -> None:
    """Joints at the default pose plus a uniform offset, clipped to the soft limits (one draw per joint)."""
    joints = env.default_joint_pos + span(u, *position_range)
    limits = env.soft_joint_limits
    env.initial_state.qpos[:, env.joint_qpos_ids] = torch.maximum(torch.minimum(joints, limits[:, 1]), limits[:, 0])


@accepts(slide=interval(0.0), spin=interval(0.0, strict=True), roll=interval(0.0, strict=True))
def randomize_geom_friction(
    env: ManagerBasedEnv,
    rows: torch.Tensor,
    u: torch.Tensor,
    geoms: tuple[str, ...],
    slide: tuple[float, float],
    spin: tuple[float, float],
    roll: tuple[float, float],
) -> None:
    """Friction of ``geoms`` (shared by them): slide uniform, spin and roll log-uniform (3 draws).

    Needs ``model_fields=("geom_friction",)`` on the event.
    """

    def log_uniform(x: torch.Tensor, r: tuple[float, float]) -> torch.Tensor:
        return torch.exp(span(x, math.log(r[0]), math.log(r[1])))

    mu = torch.stack((span(u[:, 0], *slide), log_uniform(u[:, 1], spin), log_uniform(u[:, 2], roll)), dim=1)
    field, base = env.model_field("geom_friction"), env.model_default("geom_friction")
    friction = base.expand(env.num_envs, -1, -1).clone()
    friction[:, env.geom_ids(geoms)] = mu.unsqueeze(1)
    field.copy_(torch.where(rows.view(-1, 1, 1), friction, field))


@accepts(bias=NON_NEGATIVE)
def randomize_encoder_bias(env: ManagerBasedEnv, rows: torch.Tensor, u: torch.Tensor, bias: float) -> None:
    """A per-world joint encoder bias uniform in ``+-bias`` (one draw per joint), in ``env.encoder_bias``."""
    env.encoder_bias.copy_(torch.where(rows.unsqueeze(1), span(u, -bias, bias), env.encoder_bias))


@accepts(offset=number(0.0, size=3))
def randomize_body_com(
    env: ManagerBasedEnv, rows: torch.Tensor, u: torch.Tensor, body: str, offset: tuple[float, float, float]
) -> None:
    """Shift ``body``'s centre of mass by up to ``+-offset`` per axis (3 draws).

    Needs ``model_fields=("body_ipos",)`` on the event.
    """
    field, base = env.model_field("body_ipos"), env.model_default("body_ipos")
    scale = env.constant(("com_offset", offset), lambda: torch.tensor(offset, dtype=torch.float32, device=env.device))
    ipos = base.expand(env.num_envs, -1, -1).clone()
    ipos[:, env.body_id(body)] += (2.0 * u - 1.0) * scale
    field.copy_(torch.where(rows.view(-1, 1, 1), ipos, field))


@accepts(linear=number(0.0, size=3), angular=number(0.0, size=3))
def push_by_setting_velocity(
    env: ManagerBasedEnv,
    rows: torch.Tensor,
    u: torch.Tensor,
    linear: tuple[float, float, float],
    angular: tuple[float, float, float],
) -> None:
    """Add a random base velocity (world frame, up to ``+-linear`` / ``+-angular``) on ``rows`` (6 draws)."""
    scale = env.constant(
        ("push", linear, angular), lambda: torch.tensor((*linear, *angular), dtype=torch.float32, device=env.device)
    )
    kick = (2.0 * u - 1.0) * scale
    lin, ang_w = kick[:, :3], kick[:, 3:]
    ang_b = M.quat_rotate_inverse(env.base_quat, ang_w)  # free-joint angular qvel is in the body frame
    r1 = rows.unsqueeze(1)
    env.qvel[:, 0:3].add_(torch.where(r1, lin, 0.0))
    env.qvel[:, 3:6].add_(torch.where(r1, ang_b, 0.0))
