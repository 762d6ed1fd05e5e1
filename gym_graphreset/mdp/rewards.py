"""Reward terms: ``func(env, **params) -> (num_envs,)`` (or a class built once, called every step).

The env multiplies each by its weight and the step dt. Terms gated by an active command (foot terms) take
``command_name`` and ``command_threshold``: they are zero while the command is near zero.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

import torch

from gym_graphreset.managers.binding import FINITE, NON_NEGATIVE, POSITIVE, accepts, number, reads_sensors
from gym_graphreset.mdp import observations
from gym_graphreset.mdp.height_scan import RayCastSensor, terrain_normal
from gym_graphreset.mdp.math import active_command, quat_rotate_inverse
from gym_graphreset.mdp.sensors import ContactSensor
from gym_graphreset.mdp.terminations import contact_forces
from gym_graphreset.mdp.terrain_height import TerrainHeightSensor

if TYPE_CHECKING:
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = [
    "FootSwingHeight",
    "VariablePosture",
    "action_rate_l2",
    "angular_momentum_l2",
    "body_ang_vel_xy_l2",
    "feet_clearance",
    "feet_slip",
    "joint_pos_limits",
    "per_joint",
    "self_collision_cost",
    "soft_landing",
    "track_angular_velocity",
    "track_linear_velocity",
    "upright",
]


def per_joint(env: ManagerBasedEnv, values: float | Mapping[str, float], what: str) -> list[float]:
    """One value per action joint from a number or ``{regex: value}`` (the first matching pattern wins)."""
    if not isinstance(values, Mapping):
        return [float(values)] * len(env.joint_names)
    out = []
    for joint in env.joint_names:
        match = next((v for pattern, v in values.items() if re.fullmatch(pattern, joint)), None)
        if match is None:
            raise ValueError(f"{what}: no pattern of {list(values)} matches joint {joint!r}")
        out.append(float(match))
    return out


def _active(env: ManagerBasedEnv, command_name: str, threshold: float) -> torch.Tensor:
    return active_command(env.commands[command_name].command, threshold)


@accepts(std=POSITIVE)
def track_linear_velocity(env: ManagerBasedEnv, std: float, command_name: str) -> torch.Tensor:
    """``exp(-(|cmd_xy - v_xy|^2 + v_z^2) / std^2)`` in the base frame."""
    command, lin_vel_b = env.commands[command_name].command, observations.base_lin_vel(env)
    err = (command[:, :2] - lin_vel_b[:, :2]).square().sum(dim=1) + lin_vel_b[:, 2].square()
    return torch.exp(-err / std**2)


@accepts(std=POSITIVE)
def track_angular_velocity(env: ManagerBasedEnv, std: float, command_name: str) -> torch.Tensor:
    """``exp(-((cmd_wz - w_z)^2 + |w_xy|^2) / std^2)`` in the base frame."""
    command, ang_vel_b = env.commands[command_name].command, observations.base_ang_vel(env)
    err = (command[:, 2] - ang_vel_b[:, 2]).square() + ang_vel_b[:, :2].square().sum(dim=1)
    return torch.exp(-err / std**2)


@accepts(std=POSITIVE)
@reads_sensors(terrain_sensor_name=RayCastSensor)
def upright(
    env: ManagerBasedEnv, std: float, body: str | None = None, terrain_sensor_name: str | None = None
) -> torch.Tensor:
    """``exp(-|g_xy|^2 / std^2)`` of the projected gravity in the base's frame (or ``body``'s): 1 when level.

    With ``terrain_sensor_name`` (a height scan) the tilt is against the terrain's normal fitted to the scan
    (:func:`~gym_graphreset.mdp.height_scan.terrain_normal`) instead of gravity, as mjlab's rough Go1.
    """
    if terrain_sensor_name is None:
        gravity = (
            observations.projected_gravity(env) if body is None else observations.body_projected_gravity(env, body)
        )
    else:
        quat = env.base_quat if body is None else observations.body_quat(env, body)
        gravity = quat_rotate_inverse(quat, terrain_normal(env, terrain_sensor_name))
    return torch.exp(-gravity[:, :2].square().sum(dim=1) / std**2)


def body_ang_vel_xy_l2(env: ManagerBasedEnv, body: str) -> torch.Tensor:
    """``|w_xy|^2`` of a body's world-frame angular velocity (roll and pitch rates; yaw is free)."""
    return env.cvel[:, env.body_id(body), 0:2].square().sum(dim=1)


def angular_momentum_l2(env: ManagerBasedEnv, sensor_name: str) -> torch.Tensor:
    """``|L|^2`` of a ``subtreeangmom`` sensor: the whole body's angular momentum about its centre of mass."""
    return observations.builtin_sensor(env, sensor_name).square().sum(dim=1)


@accepts(force_threshold=NON_NEGATIVE)
@reads_sensors(sensor_name=ContactSensor)
def self_collision_cost(env: ManagerBasedEnv, sensor_name: str, force_threshold: float = 10.0) -> torch.Tensor:
    """The substeps in which a contact of ``sensor_name`` pushes harder than ``force_threshold`` [N] (mjlab's).

    ``sensor_name`` names a ``ContactSensorCfg`` of the task. Counted over the sensor's ``history_length``
    substeps (0 to ``history_length``); a sensor without history counts its last substep alone (0 or 1).
    """
    force = contact_forces(env, sensor_name, "self_collision_cost")  # (n, k, h, 3)
    return (torch.linalg.vector_norm(force, dim=-1) > force_threshold).any(dim=1).sum(dim=1).float()


def joint_pos_limits(env: ManagerBasedEnv) -> torch.Tensor:
    """How far the joints are outside their soft limits, summed."""
    joint_pos, soft_limits = env.qpos[:, env.joint_qpos_ids], env.soft_joint_limits
    below = (soft_limits[:, 0] - joint_pos).clamp(min=0.0)
    above = (joint_pos - soft_limits[:, 1]).clamp(min=0.0)
    return (below + above).sum(dim=1)


def action_rate_l2(env: ManagerBasedEnv) -> torch.Tensor:
    """``|a_t - a_{t-1}|^2``."""
    return (env.action - env.prev_action).square().sum(dim=1)


@accepts(target_height=FINITE, command_threshold=NON_NEGATIVE)
@reads_sensors(height_sensor_name=TerrainHeightSensor)
def feet_clearance(
    env: ManagerBasedEnv,
    sites: tuple[str, ...],
    target_height: float,
    command_name: str,
    command_threshold: float,
    height_sensor_name: str | None = None,
) -> torch.Tensor:
    """``sum_f |h_f - target| * |v_xy,f|`` while the command is active (``h``: see :func:`~.observations.feet`)."""
    height, vel = observations.feet(env, sites, height_sensor_name)
    clearance = ((height - target_height).abs() * torch.linalg.vector_norm(vel[..., :2], dim=-1)).sum(dim=1)
    return clearance * _active(env, command_name, command_threshold)


@accepts(command_threshold=NON_NEGATIVE)
@reads_sensors(sensor_name=ContactSensor)
def feet_slip(
    env: ManagerBasedEnv, sites: tuple[str, ...], sensor_name: str, command_name: str, command_threshold: float
) -> torch.Tensor:
    """``sum_f |v_xy,f|^2`` over feet in contact, while the command is active."""
    _, vel = observations.feet(env, sites)
    slip = (vel[..., :2].square().sum(dim=-1) * env.sensors[sensor_name].in_contact).sum(dim=1)
    return slip * _active(env, command_name, command_threshold)


@accepts(command_threshold=NON_NEGATIVE)
@reads_sensors(sensor_name=ContactSensor)
def soft_landing(env: ManagerBasedEnv, sensor_name: str, command_name: str, command_threshold: float) -> torch.Tensor:
    """``sum_f |F_f|`` over feet that touched down this step, while the command is active."""
    sensor = env.sensors[sensor_name]
    landing = (torch.linalg.vector_norm(sensor.force, dim=-1) * sensor.first_contact).sum(dim=1)
    return landing * _active(env, command_name, command_threshold)


@accepts(target_height=POSITIVE, command_threshold=NON_NEGATIVE)
@reads_sensors(sensor_name=ContactSensor, height_sensor_name=TerrainHeightSensor)
class FootSwingHeight:
    """``sum_f (peak_f / target - 1)^2`` at each touch-down: the swing's apex should reach ``target_height``.

    Keeps each foot's peak height since its lift-off (reset with the episode); heights as
    :func:`~gym_graphreset.mdp.observations.feet` reads them (``height_sensor_name``).
    """

    def __init__(
        self,
        env: ManagerBasedEnv,
        sites: tuple[str, ...],
        sensor_name: str,
        target_height: float,
        command_name: str,
        command_threshold: float,
        height_sensor_name: str | None = None,
    ) -> None:
        self.env, self.sites, self.sensor_name = env, sites, sensor_name
        self.height_sensor_name = height_sensor_name
        self.target, self.command_name, self.threshold = target_height, command_name, command_threshold
        self.peak_height = torch.zeros(env.num_envs, len(sites), device=env.device)

    def __call__(self) -> torch.Tensor:
        """This step's penalty."""
        sensor = self.env.sensors[self.sensor_name]
        touching = sensor.in_contact > 0
        height, _ = observations.feet(self.env, self.sites, self.height_sensor_name)
        self.peak_height.copy_(torch.where(touching, self.peak_height, torch.maximum(self.peak_height, height)))
        first = sensor.first_contact
        swing = ((self.peak_height / self.target - 1.0).square() * first).sum(dim=1)
        self.peak_height.copy_(torch.where(first > 0, 0.0, self.peak_height))
        return swing * _active(self.env, self.command_name, self.threshold)

    def reset(self, rows: torch.Tensor) -> None:
        """Forget the peaks of the rows of ``rows``."""
        self.peak_height.copy_(torch.where(rows.unsqueeze(1), 0.0, self.peak_height))


_PER_JOINT_STD = number(0.0, strict=True, per_joint=True)


@accepts(
    std_standing=_PER_JOINT_STD,
    std_walking=_PER_JOINT_STD,
    std_running=_PER_JOINT_STD,
    walking_threshold=NON_NEGATIVE,
    running_threshold=NON_NEGATIVE,
)
class VariablePosture:
    """``exp(-mean(dq^2 / s^2))`` with per-joint ``s`` picked by command speed (standing, walking, running).

    ``std_*`` are one number or ``{joint regex: std}``; the regime is chosen by ``|v_xy| + |w_z|`` of the
    command against ``walking_threshold`` and ``running_threshold``.
    """

    def __init__(
        self,
        env: ManagerBasedEnv,
        std_standing: float | Mapping[str, float],
        std_walking: float | Mapping[str, float],
        std_running: float | Mapping[str, float],
        walking_threshold: float,
        running_threshold: float,
        command_name: str,
    ) -> None:
        if walking_threshold > running_threshold:
            raise ValueError(
                f"VariablePosture: `walking_threshold` ({walking_threshold!r}) must be <= `running_threshold` "
                f"({running_threshold!r})"
            )
        rows = [per_joint(env, s, "VariablePosture") for s in (std_standing, std_walking, std_running)]
        self.env, self.command_name = env, command_name
        self.std = torch.tensor(rows, dtype=torch.float32, device=env.device)
        self.walking, self.running = walking_threshold, running_threshold

    def __call__(self) -> torch.Tensor:
        """This step's reward."""
        env = self.env
        rel = env.qpos[:, env.joint_qpos_ids] - env.default_joint_pos
        command = env.commands[self.command_name].command
        speed = torch.linalg.vector_norm(command[:, :2], dim=1) + command[:, 2].abs()
        regime = (speed >= self.walking).long() + (speed >= self.running).long()
        s = self.std[regime]  # (n, nj): the standing, walking or running stds by command speed
        return torch.exp(-(rel.square() / s.square()).mean(dim=1))
