"""Gymnasium's 3-D MuJoCo v5 tasks on MuJoCo Warp: Ant and Humanoid (see :mod:`.tasks`)."""

from __future__ import annotations

import math
from typing import Any

import torch

from gym_graphreset.envs.gym_mujoco.base import LocomotionEnv, sq_sum
from gym_graphreset.envs.mjwarp import healthy_range

__all__ = ["AntEnv", "HumanoidEnv"]


class AntEnv(LocomotionEnv):
    """Ant-v5: forward velocity of the torso + healthy bonus - control and contact costs."""

    xml_file = "ant.xml"
    qvel_noise = "normal"
    needs_cfrc_ext = True
    refresh = "kinematics"  # the torso's xpos is the forward progress

    def __init__(
        self,
        num_envs: int,
        *,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 0.5,
        contact_cost_weight: float = 5e-4,
        healthy_reward: float = 1.0,
        main_body: int = 1,
        terminate_when_unhealthy: bool = True,
        healthy_z_range: tuple[float, float] = (0.2, 1.0),
        contact_force_range: tuple[float, float] = (-1.0, 1.0),
        reset_noise_scale: float = 0.1,
        exclude_current_positions_from_observation: bool = True,
        include_cfrc_ext_in_observation: bool = True,
        **kwargs: Any,
    ) -> None:
        self.forward_reward_weight = forward_reward_weight
        self.ctrl_cost_weight = ctrl_cost_weight
        self.contact_cost_weight = contact_cost_weight
        self.healthy_reward = healthy_reward
        self.main_body = main_body
        self.terminate_when_unhealthy = terminate_when_unhealthy
        self.healthy_z_range = healthy_z_range
        self.contact_force_range = contact_force_range
        self.reset_noise_scale = reset_noise_scale
        self._skip = 2 if exclude_current_positions_from_observation else 0
        self._cfrc = include_cfrc_ext_in_observation
        super().__init__(num_envs, nconmax=kwargs.pop("nconmax", 64), njmax=kwargs.pop("njmax", 192), **kwargs)

    def _progress(self) -> torch.Tensor:
        return self.xpos[:, self.main_body, :2].clone()

    def _contact_forces(self) -> torch.Tensor:
        return self.cfrc_ext.clamp(*self.contact_force_range)

    def _observe(self) -> torch.Tensor:
        parts = [self.qpos[:, self._skip :], self.qvel]
        if self._cfrc:
            parts.append(self._contact_forces()[:, 1:].flatten(1))
        return torch.cat(parts, dim=1)

    def _reward_terminated(self, before, after, action):
        healthy = (
            self.state_finite
            & (self.qpos[:, 2] >= self.healthy_z_range[0])
            & (self.qpos[:, 2] <= self.healthy_z_range[1])
        )
        reward = self.forward_reward_weight * self._forward_velocity(before, after)
        reward = reward + self.healthy_reward * healthy.float()
        reward = reward - self.ctrl_cost_weight * sq_sum(action)
        reward = reward - self.contact_cost_weight * sq_sum(self._contact_forces())
        terminated = ~healthy if self.terminate_when_unhealthy else torch.zeros_like(healthy)
        return reward, terminated


def _newton_solver(mjm: Any) -> None:
    import mujoco

    mjm.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON


class HumanoidEnv(LocomotionEnv):
    """Humanoid-v5: center-of-mass forward velocity + healthy bonus - control and contact costs.

    Gymnasium's ``humanoid.xml`` asks for the PGS solver, which MuJoCo Warp rejects; this env switches
    the model to the Newton solver (MuJoCo's default) and changes nothing else. Trajectories therefore
    differ slightly from Gymnasium's PGS ones (same constraints, different solver path).
    """

    xml_file = "humanoid.xml"
    needs_cfrc_ext = True
    refresh = "com"  # cinert and cvel are observed

    def __init__(
        self,
        num_envs: int,
        *,
        forward_reward_weight: float = 1.25,
        ctrl_cost_weight: float = 0.1,
        contact_cost_weight: float = 5e-7,
        contact_cost_range: tuple[float, float] = (-math.inf, 10.0),
        healthy_reward: float = 5.0,
        terminate_when_unhealthy: bool = True,
        healthy_z_range: tuple[float, float] = (1.0, 2.0),
        reset_noise_scale: float = 1e-2,
        exclude_current_positions_from_observation: bool = True,
        include_cinert_in_observation: bool = True,
        include_cvel_in_observation: bool = True,
        include_qfrc_actuator_in_observation: bool = True,
        include_cfrc_ext_in_observation: bool = True,
        **kwargs: Any,
    ) -> None:
        self.forward_reward_weight = forward_reward_weight
        self.ctrl_cost_weight = ctrl_cost_weight
        self.contact_cost_weight = contact_cost_weight
        self.contact_cost_range = contact_cost_range
        self.healthy_reward = healthy_reward
        self.terminate_when_unhealthy = terminate_when_unhealthy
        self.healthy_z_range = healthy_z_range
        self.reset_noise_scale = reset_noise_scale
        self._skip = 2 if exclude_current_positions_from_observation else 0
        self._include = (
            include_cinert_in_observation,
            include_cvel_in_observation,
            include_qfrc_actuator_in_observation,
            include_cfrc_ext_in_observation,
        )
        edits = kwargs.pop("model_edits", None)

        def model_edits(mjm: Any) -> None:
            _newton_solver(mjm)
            if edits is not None:
                edits(mjm)

        super().__init__(
            num_envs,
            nconmax=kwargs.pop("nconmax", 64),
            njmax=kwargs.pop("njmax", 256),
            model_edits=model_edits,
            **kwargs,
        )

    def _progress(self) -> torch.Tensor:
        com = (self.body_mass.view(1, -1, 1) * self.xipos).sum(dim=1) / self.body_mass.sum()
        return com[:, :2]

    def _observe(self) -> torch.Tensor:
        parts = [self.qpos[:, self._skip :], self.qvel]
        extra = (self.cinert[:, 1:], self.cvel[:, 1:], self.qfrc_actuator[:, 6:], self.cfrc_ext[:, 1:])
        parts += [x.flatten(1) for x, keep in zip(extra, self._include, strict=True) if keep]
        return torch.cat(parts, dim=1)

    def _reward_terminated(self, before, after, action):
        healthy = healthy_range(self.qpos[:, 2], *self.healthy_z_range)
        reward = self.forward_reward_weight * self._forward_velocity(before, after)
        reward = reward + self.healthy_reward * healthy.float()
        reward = reward - self.ctrl_cost_weight * sq_sum(self.ctrl)
        contact = (self.contact_cost_weight * sq_sum(self.cfrc_ext)).clamp(*self.contact_cost_range)
        reward = reward - contact
        terminated = ~healthy if self.terminate_when_unhealthy else torch.zeros_like(healthy)
        return reward, terminated
