"""Termination terms: ``func(env, **params) -> (num_envs,)`` bool; time-outs are declared ``time_out=True``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from gym_graphreset.managers.binding import FINITE, NON_NEGATIVE, accepts, reads_sensors, time_out_term
from gym_graphreset.mdp.observations import projected_gravity
from gym_graphreset.mdp.sensors import ContactSensor
from gym_graphreset.terrains.terrain_state import TerrainState

if TYPE_CHECKING:
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = ["bad_orientation", "illegal_contact", "out_of_terrain_bounds", "root_height_below", "time_out"]


@time_out_term
def time_out(env: ManagerBasedEnv) -> torch.Tensor:
    """The episode reached its horizon (declared ``time_out=True``: a truncation; refused without)."""
    return env.elapsed >= env.max_episode_steps


@accepts(limit_angle=NON_NEGATIVE)
def bad_orientation(env: ManagerBasedEnv, limit_angle: float) -> torch.Tensor:
    """The base tilted more than ``limit_angle`` [rad] from upright."""
    gravity = projected_gravity(env)
    return torch.acos((-gravity[:, 2]).clamp(-1.0, 1.0)) > limit_angle


@accepts(minimum_height=FINITE)
def root_height_below(env: ManagerBasedEnv, minimum_height: float) -> torch.Tensor:
    """The base fell below ``minimum_height`` [m]."""
    return env.qpos[:, 2] < minimum_height


@accepts(force_threshold=NON_NEGATIVE)
@reads_sensors(sensor_name=ContactSensor)
def illegal_contact(env: ManagerBasedEnv, sensor_name: str, force_threshold: float = 10.0) -> torch.Tensor:
    """Any contact of sensor ``sensor_name`` (a ``ContactSensorCfg``) pushes harder than ``force_threshold`` [N].

    With the sensor's ``history_length`` (as mjlab declares it) any of those substeps counts; without, the
    step's last substep.
    """
    force = contact_forces(env, sensor_name, "illegal_contact")
    return (torch.linalg.vector_norm(force, dim=-1) > force_threshold).flatten(1).any(dim=1)


def contact_forces(env: ManagerBasedEnv, sensor_name: str, where: str) -> torch.Tensor:
    """A ``ContactSensor``'s forces, ``(n, k, h, 3)``: its ``force_history``, or its last force (``h = 1``)."""
    sensor = env.sensors[sensor_name]
    if not isinstance(sensor, ContactSensor):
        raise TypeError(f"{where}: sensor {sensor_name!r} is a {type(sensor).__name__}, not a ContactSensor")
    return sensor.force.unsqueeze(2) if sensor.force_history is None else sensor.force_history


@accepts(margin=NON_NEGATIVE)
@reads_sensors(terrain_name=TerrainState)
def out_of_terrain_bounds(env: ManagerBasedEnv, margin: float = 0.3, terrain_name: str = "terrain") -> torch.Tensor:
    """The base left the generated grid and its border, less ``margin`` [m] (mjlab's; declare ``time_out=True``)."""
    from gym_graphreset.mdp.terrain_levels import terrain_state

    cfg = terrain_state(env, terrain_name).terrain.cfg
    half_x = max(0.0, 0.5 * cfg.num_rows * cfg.size[0] + cfg.border_width - margin)
    half_y = max(0.0, 0.5 * cfg.num_cols * cfg.size[1] + cfg.border_width - margin)
    xy = env.qpos[:, 0:2]
    return (xy[:, 0].abs() > half_x) | (xy[:, 1].abs() > half_y)
