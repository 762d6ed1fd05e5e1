"""Recorder terms: ``func(env, **params)`` -> ``(num_envs, ...)``, one frame per reset and per step.

Any observation term records too (``mdp.last_action``: the action that led to the frame, zeros at a reset
frame); :func:`obs_group` records a whole observation group as the env returned it.

:func:`motion_recorders` is the preset of mjlab's motion ``.npz`` (``joint_pos``, ``joint_vel``,
``body_pos_w``, ``body_quat_w``, ``body_lin_vel_w``, ``body_ang_vel_w``), bodies chosen by name, so a trained
policy's rollout exports as a clip a motion-tracking task reads
(:meth:`~gym_graphreset.managers.recorder_manager.RecorderManager.export_motion`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from gym_graphreset.managers.forward_passes import reads_forward
from gym_graphreset.managers.terms import RecorderTerm

if TYPE_CHECKING:
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = [
    "body_ang_vel_w",
    "body_lin_vel_w",
    "body_pos_w",
    "body_quat_w",
    "joint_positions",
    "joint_velocities",
    "motion_recorders",
    "obs_group",
]


@reads_forward()
def obs_group(env: ManagerBasedEnv, group: str) -> torch.Tensor:
    """The observation group ``group`` the env returned last, ``(n, k)`` (a dict group's terms concatenated)."""
    if group not in env.last_obs:
        raise ValueError(f"obs_group: `group` must be one of {list(env.last_obs)}, got {group!r}")
    value = env.last_obs[group]
    return torch.cat(list(value.values()), dim=1) if isinstance(value, dict) else value


def _joint_columns(env: ManagerBasedEnv, joint_names: tuple[str, ...] | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``qpos`` and ``qvel`` columns of hinge or slide joints (``None``: the action joints)."""
    if joint_names is None:
        return env.joint_qpos_ids, env.joint_dof_ids

    def compute() -> tuple[torch.Tensor, torch.Tensor]:
        import mujoco

        qpos, dof = [], []
        for j in joint_names:
            jid = env._id(mujoco.mjtObj.mjOBJ_JOINT, j, "recorders: `joint_names`")
            if int(env.mjm.jnt_type[jid]) not in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
                raise ValueError(f"recorders: `joint_names` must name hinge or slide joints, {j!r} is neither")
            qpos.append(int(env.mjm.jnt_qposadr[jid]))
            dof.append(int(env.mjm.jnt_dofadr[jid]))
        return torch.tensor(qpos, device=env.device), torch.tensor(dof, device=env.device)

    return env.constant(("recorder_joints", joint_names), compute)


@reads_forward()
def joint_positions(env: ManagerBasedEnv, joint_names: tuple[str, ...] | None = None) -> torch.Tensor:
    """Joint positions (absolute), ``(n, k)``; ``joint_names=None``: the action joints in action order."""
    return env.qpos[:, _joint_columns(env, joint_names)[0]]


@reads_forward()
def joint_velocities(env: ManagerBasedEnv, joint_names: tuple[str, ...] | None = None) -> torch.Tensor:
    """Joint velocities, ``(n, k)``; ``joint_names=None``: the action joints in action order."""
    return env.qvel[:, _joint_columns(env, joint_names)[1]]


def _bodies(env: ManagerBasedEnv, body_names: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """The bodies' ids and their kinematic trees' root bodies, ``(k,)`` each."""

    def compute() -> tuple[torch.Tensor, torch.Tensor]:
        if not (isinstance(body_names, tuple) and body_names and all(isinstance(b, str) for b in body_names)):
            raise ValueError(f"recorders: `body_names` must be a non-empty tuple of body names, got {body_names!r}")
        ids = [env.body_id(b) for b in body_names]
        roots = [int(env.mjm.body_rootid[i]) for i in ids]
        return torch.tensor(ids, device=env.device), torch.tensor(roots, device=env.device)

    return env.constant(("recorder_bodies", body_names), compute)


def _needs(env: ManagerBasedEnv, refresh: tuple[str, ...], what: str) -> None:
    """Refuse a task whose reset frame would hold stale derived fields."""
    if env.refresh not in refresh:
        raise ValueError(
            f"recorders: {what} at a reset frame needs `TaskCfg.refresh` in {list(refresh)}, got {env.refresh!r}"
        )


@reads_forward("kinematics")
def body_pos_w(env: ManagerBasedEnv, body_names: tuple[str, ...]) -> torch.Tensor:
    """Body frame origins in the world frame, ``(n, k, 3)``."""
    _needs(env, ("kinematics", "com"), "body_pos_w")
    return env.xpos[:, _bodies(env, body_names)[0]]


@reads_forward("kinematics")
def body_quat_w(env: ManagerBasedEnv, body_names: tuple[str, ...]) -> torch.Tensor:
    """Body orientations in the world frame, ``(n, k, 4)`` (w, x, y, z)."""
    _needs(env, ("kinematics", "com"), "body_quat_w")
    xquat = env.constant("xquat", lambda: env.runtime.wp.to_torch(env.d.xquat))
    return xquat[:, _bodies(env, body_names)[0]]


def _body_vel_w(env: ManagerBasedEnv, body_names: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """(linear velocity of the body origins, angular velocity), world frame, ``(n, k, 3)`` each.

    MuJoCo's ``cvel`` is (angular, linear) at the subtree centre of mass of the body's root, in world axes:
    the origin's linear velocity is ``lin - ang x (subtree_com[root] - xpos)`` (mjlab's conversion).
    """
    ids, roots = _bodies(env, body_names)
    cvel = env.cvel[:, ids]
    ang, lin = cvel[..., 0:3], cvel[..., 3:6]
    offset = env.subtree_com[:, roots] - env.xpos[:, ids]
    return lin - torch.linalg.cross(ang, offset, dim=-1), ang


@reads_forward("com_vel")
def body_lin_vel_w(env: ManagerBasedEnv, body_names: tuple[str, ...]) -> torch.Tensor:
    """Linear velocities of the body origins in the world frame, ``(n, k, 3)`` (needs ``refresh="com"``)."""
    _needs(env, ("com",), "body_lin_vel_w")
    return _body_vel_w(env, body_names)[0]


@reads_forward("com_vel")
def body_ang_vel_w(env: ManagerBasedEnv, body_names: tuple[str, ...]) -> torch.Tensor:
    """Angular velocities of the bodies in the world frame, ``(n, k, 3)`` (needs ``refresh="com"``)."""
    _needs(env, ("com",), "body_ang_vel_w")
    return _body_vel_w(env, body_names)[1]


def motion_recorders(
    body_names: tuple[str, ...], joint_names: tuple[str, ...] | None = None
) -> dict[str, RecorderTerm]:
    """The recorders of mjlab's motion ``.npz``: joints (default: the action joints) and bodies by name.

    Use as ``replace(cfg, recorders=mdp.motion_recorders(("base", ...)), refresh="com")`` (a reset frame's
    body velocities need the centre-of-mass refresh), then ``env.recorder_manager.export_motion(path)``.
    """
    joints = {"joint_names": joint_names}
    bodies = {"body_names": tuple(body_names)}
    return {
        "joint_pos": RecorderTerm(joint_positions, joints),
        "joint_vel": RecorderTerm(joint_velocities, joints),
        "body_pos_w": RecorderTerm(body_pos_w, bodies),
        "body_quat_w": RecorderTerm(body_quat_w, bodies),
        "body_lin_vel_w": RecorderTerm(body_lin_vel_w, bodies),
        "body_ang_vel_w": RecorderTerm(body_ang_vel_w, bodies),
    }
