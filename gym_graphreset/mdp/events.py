"""Event terms: ``func(env, rows, u, **params)``, masked writes on the rows of ``rows`` only.

``u`` holds the event's ``draws`` uniforms per row. Reset events write the new episode's initial state into
``env.initial_state`` (full-width proposals the engine writes on the reset rows); startup events write
per-world model fields (declared in the term's ``model_fields``); interval events act on the running
physics.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import torch

from gym_graphreset.managers.binding import NON_NEGATIVE, Accepts, accepts, interval, number
from gym_graphreset.managers.draws import span
from gym_graphreset.mdp.math import quat_rotate_inverse, yaw_quat

if TYPE_CHECKING:
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = [
    "Operation",
    "push_by_setting_velocity",
    "randomize_actuator_gains",
    "randomize_body_com",
    "randomize_body_mass",
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
    """Base position uniform within ``+-xy`` and ``z`` above the spawn height, yaw within ``+-yaw`` (4 draws).

    The spawn height is ``TaskCfg.init_base_height``, the base's height above the ground: one at or below 0
    (left at its default 0) is refused, as the robot would start in the ground, in penetration.
    """
    _need_draws(u, 4, "reset_root_state_uniform")
    if env.cfg.init_base_height <= 0.0:
        raise ValueError(
            f"reset_root_state_uniform: TaskCfg.init_base_height is {env.cfg.init_base_height:g}, so the base "
            f"spawns at {env.cfg.init_base_height:g} + z {tuple(z)} m, in the ground: the robot would start in "
            "penetration (its contacts overflow nconmax and the physics blows up); set "
            "TaskCfg.init_base_height to the base's standing height above the ground"
        )
    qpos = env.initial_state.qpos
    qpos[:, 0] = span(u[:, 0], -xy, xy)
    qpos[:, 1] = span(u[:, 1], -xy, xy)
    qpos[:, 2] = env.cfg.init_base_height + span(u[:, 2], *z)
    qpos[:, 3:7] = yaw_quat(span(u[:, 3], -yaw, yaw))


@accepts(position_range=interval())
def reset_joints_by_offset(
    env: ManagerBasedEnv, rows: torch.Tensor, u: torch.Tensor, position_range: tuple[float, float]
) -> None:
    """Joints at the default pose plus a uniform offset, clipped to the soft limits (one draw per joint)."""
    _need_draws(u, env.default_joint_pos.shape[-1], "reset_joints_by_offset")
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
    _need_draws(u, 3, "randomize_geom_friction")

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
    _need_draws(u, env.encoder_bias.shape[1], "randomize_encoder_bias")
    env.encoder_bias.copy_(torch.where(rows.unsqueeze(1), span(u, -bias, bias), env.encoder_bias))


@accepts(offset=number(0.0, size=3))
def randomize_body_com(
    env: ManagerBasedEnv, rows: torch.Tensor, u: torch.Tensor, body: str, offset: tuple[float, float, float]
) -> None:
    """Shift ``body``'s centre of mass by up to ``+-offset`` per axis (3 draws).

    Needs ``model_fields=("body_ipos",)`` on the event; a startup event with ``recompute="set_const"`` also
    updates the constants derived from the COM (inverse weights: contact softness), as mjlab does.
    """
    _need_draws(u, 3, "randomize_body_com")
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
    _need_draws(u, 6, "push_by_setting_velocity")
    scale = env.constant(
        ("push", linear, angular), lambda: torch.tensor((*linear, *angular), dtype=torch.float32, device=env.device)
    )
    kick = (2.0 * u - 1.0) * scale
    lin, ang_w = kick[:, :3], kick[:, 3:]
    ang_b = quat_rotate_inverse(env.base_quat, ang_w)  # free-joint angular qvel is in the body frame
    r1 = rows.unsqueeze(1)
    env.qvel[:, 0:3].add_(torch.where(r1, lin, 0.0))
    env.qvel[:, 3:6].add_(torch.where(r1, ang_b, 0.0))


Operation = Literal["scale", "add", "abs"]
"""How a drawn value meets the model's: multiplies it, is added to it, or replaces it (mjlab's operations)."""
_OPERATIONS = ("scale", "add", "abs")
_OPERATION = Accepts(f"one of {list(_OPERATIONS)}", lambda v: v in _OPERATIONS)


def _apply(base: torch.Tensor, drawn: torch.Tensor, operation: Operation) -> torch.Tensor:
    """``base`` changed by ``drawn`` as ``operation`` says."""
    if operation == "scale":
        return base * drawn
    if operation == "add":
        return base + drawn
    return drawn


def _need_draws(u: torch.Tensor, need: int, func: str) -> None:
    if u.shape[1] != need:
        raise ValueError(f"{func}: its EventTerm needs `draws={need}`, got draws={u.shape[1]}")


def _positive_result(rng: tuple[float, float], operation: Operation, func: str, what: str) -> None:
    if operation in ("scale", "abs") and rng[0] <= 0.0:
        raise ValueError(f"{func}: with operation={operation!r}, `{what}` must have low > 0, got {rng!r}")


@accepts(mass_range=interval(), operation=_OPERATION)
def randomize_body_mass(
    env: ManagerBasedEnv,
    rows: torch.Tensor,
    u: torch.Tensor,
    bodies: tuple[str, ...],
    mass_range: tuple[float, float],
    operation: Operation = "scale",
) -> None:
    """Mass of each of ``bodies`` drawn from ``mass_range`` per world (one draw per body), mjlab's operations.

    The subtree masses are recomputed from the new masses (MuJoCo Warp's subtree centre of mass reads them),
    in any mode; inertia keeps the model's values. The inverse weights follow the new masses in a startup
    event with ``recompute="set_const"`` (mjlab's ``dr.body_mass``); otherwise they keep the model's.
    Needs ``model_fields=("body_mass", "body_subtreemass")`` and ``draws=len(bodies)`` on the event.
    """
    _need_draws(u, len(bodies), "randomize_body_mass")
    _positive_result(mass_range, operation, "randomize_body_mass", "mass_range")
    ids = env.constant(("body_ids", bodies), lambda: torch.tensor([env.body_id(b) for b in bodies], device=env.device))

    def subtree_matrix() -> torch.Tensor:
        """``s[b, j] = 1`` where body ``j`` is in ``b``'s subtree (``b`` itself or a descendant)."""
        parent = env.mjm.body_parentid
        s = torch.zeros(env.mjm.nbody, env.mjm.nbody)
        for j in range(env.mjm.nbody):
            b = j
            while True:
                s[b, j] = 1.0
                if b == 0:
                    break
                b = int(parent[b])
        return s.to(env.device)

    subtree = env.constant("body_subtree_matrix", subtree_matrix)
    field, base = env.model_field("body_mass"), env.model_default("body_mass")
    mass = base.expand(env.num_envs, -1).clone()
    mass[:, ids] = _apply(base[ids], span(u, *mass_range), operation).to(mass.dtype)
    field.copy_(torch.where(rows.unsqueeze(1), mass, field))
    subtreemass = env.model_field("body_subtreemass")
    subtreemass.copy_(torch.where(rows.unsqueeze(1), (field @ subtree.T).to(subtreemass.dtype), subtreemass))


@accepts(stiffness_range=interval(), damping_range=interval(), operation=_OPERATION)
def randomize_actuator_gains(
    env: ManagerBasedEnv,
    rows: torch.Tensor,
    u: torch.Tensor,
    joint_names: tuple[str, ...],
    stiffness_range: tuple[float, float],
    damping_range: tuple[float, float],
    operation: Operation = "scale",
) -> None:
    """Stiffness ``kp`` and damping ``kv`` of the position actuators of ``joint_names``, per world.

    Draws ``kp`` for each joint, then ``kv`` (``draws=2 * len(joint_names)``) and writes them as a MuJoCo
    position actuator holds them: ``gainprm[0] = kp``, ``biasprm[1] = -kp``, ``biasprm[2] = -kv``.
    Needs ``model_fields=("actuator_gainprm", "actuator_biasprm")`` on the event.
    """
    k = len(joint_names)
    _need_draws(u, 2 * k, "randomize_actuator_gains")
    _positive_result(stiffness_range, operation, "randomize_actuator_gains", "stiffness_range")

    def actuators() -> torch.Tensor:
        import mujoco

        ids = env.actuator_ids(joint_names, "randomize_actuator_gains: `joint_names`")
        m = env.mjm
        for a, j in zip(ids, joint_names, strict=True):
            position = (
                int(m.actuator_gaintype[a]) == mujoco.mjtGain.mjGAIN_FIXED
                and int(m.actuator_biastype[a]) == mujoco.mjtBias.mjBIAS_AFFINE
                and m.actuator_biasprm[a, 1] == -m.actuator_gainprm[a, 0]
            )
            if not position:
                raise ValueError(
                    f"randomize_actuator_gains: `joint_names` must name joints driven by position actuators "
                    f"(gainprm[0] = kp, biasprm[1] = -kp, biasprm[2] = -kv); {j!r}'s actuator is not one"
                )
        return torch.tensor(ids, device=env.device)

    ids = env.constant(("position_actuators", joint_names), actuators)
    gain, gain0 = env.model_field("actuator_gainprm"), env.model_default("actuator_gainprm")
    bias, bias0 = env.model_field("actuator_biasprm"), env.model_default("actuator_biasprm")
    kp = _apply(gain0[ids, 0], span(u[:, :k], *stiffness_range), operation)
    kv = _apply(-bias0[ids, 2], span(u[:, k:], *damping_range), operation)
    new_gain, new_bias = gain0.expand(env.num_envs, -1, -1).clone(), bias0.expand(env.num_envs, -1, -1).clone()
    new_gain[:, ids, 0] = kp.to(new_gain.dtype)
    new_bias[:, ids, 1] = (-kp).to(new_bias.dtype)
    new_bias[:, ids, 2] = (-kv).to(new_bias.dtype)
    r = rows.view(-1, 1, 1)
    gain.copy_(torch.where(r, new_gain, gain))
    bias.copy_(torch.where(r, new_bias, bias))
