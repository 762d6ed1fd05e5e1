"""Observation terms: ``func(env, **params) -> (num_envs, k)``, full width, no host read.

Velocities are read at the base's free joint (``qpos[:, 0:7]``, ``qvel[:, 0:6]``: MuJoCo's free-joint
layout, linear velocity in the world frame, angular in the body frame). Values shared by several terms in a
step (the base velocities, the projected gravity) are computed once per step (``env.cached``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from gym_graphreset.managers.binding import reads_sensors
from gym_graphreset.managers.forward_passes import reads_forward
from gym_graphreset.mdp import math as mdp_math
from gym_graphreset.mdp.sensors import ContactSensor

if TYPE_CHECKING:
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = [
    "base_ang_vel",
    "base_lin_vel",
    "body_projected_gravity",
    "body_quat",
    "builtin_sensor",
    "contact_air_time",
    "contact_force_log",
    "contact_found",
    "feet",
    "generated_commands",
    "imu_lin_vel",
    "joint_pos_rel",
    "joint_vel",
    "last_action",
    "projected_gravity",
    "site_height",
]


@reads_forward()
def base_lin_vel(env: ManagerBasedEnv) -> torch.Tensor:
    """Linear velocity of the base origin in the base frame, ``(n, 3)``."""
    return env.cached("base_lin_vel", lambda: mdp_math.quat_rotate_inverse(env.base_quat, env.qvel[:, 0:3]))


@reads_forward()
def base_ang_vel(env: ManagerBasedEnv) -> torch.Tensor:
    """Angular velocity of the base in the base frame, ``(n, 3)``."""
    return env.qvel[:, 3:6]


@reads_forward()
def imu_lin_vel(env: ManagerBasedEnv, site: str) -> torch.Tensor:
    """Linear velocity at a site fixed to the base (e.g. an IMU), in the base frame, ``(n, 3)``."""
    offset = env.constant(("site_offset", site), lambda: env.site_offset(site))

    def compute() -> torch.Tensor:
        return base_lin_vel(env) + torch.linalg.cross(base_ang_vel(env), offset)

    return env.cached(f"imu_lin_vel:{site}", compute)


@reads_forward()
def projected_gravity(env: ManagerBasedEnv) -> torch.Tensor:
    """The unit gravity direction in the base frame, ``(n, 3)``."""
    return env.cached("projected_gravity", lambda: mdp_math.projected_gravity(env.base_quat))


@reads_forward()
def joint_pos_rel(env: ManagerBasedEnv, biased: bool = False) -> torch.Tensor:
    """Joint positions minus the default pose, ``(n, nj)``; ``biased`` adds the per-world encoder bias."""
    rel = env.qpos[:, env.joint_qpos_ids] - env.default_joint_pos
    return rel + env.encoder_bias if biased else rel


@reads_forward()
def joint_vel(env: ManagerBasedEnv) -> torch.Tensor:
    """Joint velocities, ``(n, nj)``."""
    return env.qvel[:, env.joint_dof_ids]


@reads_forward()
def last_action(env: ManagerBasedEnv) -> torch.Tensor:
    """This step's action (the policy's raw output), ``(n, action dim)``."""
    return env.action


@reads_forward()
def generated_commands(env: ManagerBasedEnv, command_name: str) -> torch.Tensor:
    """The command of ``command_name``, ``(n, k)``."""
    return env.commands[command_name].command


def feet(
    env: ManagerBasedEnv, sites: tuple[str, ...], height_sensor_name: str | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Heights ``(n, k)`` and world velocities ``(n, k, 3)`` of sites (cached per step).

    The heights are world z, or with ``height_sensor_name`` (a ``TerrainHeightSensorCfg`` over the same
    sites) each site's clearance above the terrain under it, as mjlab's foot terms read it on rough ground.
    """

    def compute() -> tuple[torch.Tensor, torch.Tensor]:
        from gym_graphreset.mdp.terrain_height import terrain_height

        ids, bodies = env.site_ids(sites), env.site_body_ids(sites)
        pos = env.site_xpos[:, ids]
        root = env.subtree_com[:, env.base_body_id].unsqueeze(1)
        height = pos[..., 2] if height_sensor_name is None else terrain_height(env, height_sensor_name)
        if height.shape != pos.shape[:2]:
            raise ValueError(
                f"feet: sensor {height_sensor_name!r} gives {height.shape[1]} heights for {len(sites)} sites"
            )
        return height, mdp_math.point_velocity(env.cvel[:, bodies], root, pos)

    return env.cached(("feet", sites, height_sensor_name), compute)


@reads_forward("kinematics")
def site_height(env: ManagerBasedEnv, sites: tuple[str, ...]) -> torch.Tensor:
    """World heights of sites, ``(n, k)``."""
    return env.site_xpos[:, env.site_ids(sites), 2]


@reads_forward("sensor_acc")
@reads_sensors(sensor_name=ContactSensor)
def contact_found(env: ManagerBasedEnv, sensor_name: str) -> torch.Tensor:
    """A contact sensor's contact flags, ``(n, k)``."""
    return env.sensors[sensor_name].in_contact


@reads_forward()
@reads_sensors(sensor_name=ContactSensor)
def contact_air_time(env: ManagerBasedEnv, sensor_name: str) -> torch.Tensor:
    """A contact sensor's air times [s], ``(n, k)``."""
    return env.sensors[sensor_name].air_time


@reads_forward("sensor_acc")
@reads_sensors(sensor_name=ContactSensor)
def contact_force_log(env: ManagerBasedEnv, sensor_name: str) -> torch.Tensor:
    """``sign(F) log(1 + |F|)`` of a contact sensor's net forces, flattened, ``(n, 3k)``."""
    force = env.sensors[sensor_name].force.flatten(1)
    return torch.sign(force) * torch.log1p(force.abs())


@reads_forward("sensor_pos", "sensor_vel", "sensor_acc")
def builtin_sensor(env: ManagerBasedEnv, sensor_name: str) -> torch.Tensor:
    """A MuJoCo sensor's values by name, ``(n, dim)`` (mjlab's ``builtin_sensor``; a view, no copy)."""

    def columns() -> slice:
        import mujoco

        sid = env._id(mujoco.mjtObj.mjOBJ_SENSOR, sensor_name, "builtin_sensor: `sensor_name`")
        adr = int(env.mjm.sensor_adr[sid])
        return slice(adr, adr + int(env.mjm.sensor_dim[sid]))

    return env.sensordata[:, env.constant(("sensor_columns", sensor_name), columns)]


@reads_forward("kinematics")
def body_quat(env: ManagerBasedEnv, body: str) -> torch.Tensor:
    """A body's world orientation ``(n, 4)`` (wxyz), a view of MuJoCo Warp's ``xquat``."""
    xquat = env.constant("xquat", lambda: env.runtime.wp.to_torch(env.d.xquat))
    return xquat[:, env.body_id(body)]


@reads_forward("kinematics")
def body_projected_gravity(env: ManagerBasedEnv, body: str) -> torch.Tensor:
    """The unit gravity direction in a body's frame, ``(n, 3)`` (from its world orientation ``xquat``)."""
    return env.cached(("body_projected_gravity", body), lambda: mdp_math.projected_gravity(body_quat(env, body)))
