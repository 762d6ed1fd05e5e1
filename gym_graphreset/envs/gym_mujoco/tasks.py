"""Gymnasium's MuJoCo v5 tasks on MuJoCo Warp.

Same assets, observations, rewards, terminations and reset-noise distributions as Gymnasium's ``*-v5``
classes, and the same constructor keyword names.

Differences, all deliberate: observations are float32 (Gymnasium: float64); physics runs in float32
on MuJoCo Warp; episodes truncate at ``max_episode_steps`` (1000) inside the env. Humanoid's XML asks
for the PGS solver, which MuJoCo Warp rejects: it runs with Newton (see :class:`HumanoidEnv`).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from gym_graphreset.core.rng import bits_to_uniform, counter_bits
from gym_graphreset.core.validation import finite_rows
from gym_graphreset.envs.gym_mujoco.base import LocomotionEnv, gymnasium_asset, sq_sum
from gym_graphreset.envs.gym_mujoco.bodies_3d import AntEnv, HumanoidEnv
from gym_graphreset.envs.mjwarp import healthy_range

__all__ = [
    "TASKS",
    "AntEnv",
    "HalfCheetahEnv",
    "HopperEnv",
    "HumanoidEnv",
    "InvertedDoublePendulumEnv",
    "InvertedPendulumEnv",
    "ReacherEnv",
    "SwimmerEnv",
    "Walker2dEnv",
    "gymnasium_asset",
]


class InvertedPendulumEnv(LocomotionEnv):
    """InvertedPendulum-v5: reward 1 while ``|pole angle| <= 0.2``."""

    xml_file = "inverted_pendulum.xml"
    default_frame_skip = 2

    def __init__(self, num_envs: int, *, reset_noise_scale: float = 0.01, **kwargs: Any) -> None:
        self.reset_noise_scale = reset_noise_scale
        super().__init__(num_envs, nconmax=kwargs.pop("nconmax", 4), njmax=kwargs.pop("njmax", 16), **kwargs)

    def _observe(self) -> torch.Tensor:
        return torch.cat((self.qpos, self.qvel), dim=1)

    def _reward_terminated(self, before, after, action):
        obs = self._observe()
        terminated = ~finite_rows(obs) | (obs[:, 1].abs() > 0.2)
        return (~terminated).float(), terminated


class InvertedDoublePendulumEnv(LocomotionEnv):
    """InvertedDoublePendulum-v5: alive bonus minus distance and velocity penalties; ends when y <= 1."""

    xml_file = "inverted_double_pendulum.xml"
    qvel_noise = "normal"
    refresh = "kinematics"  # the reward reads site_xpos

    def __init__(
        self, num_envs: int, *, healthy_reward: float = 10.0, reset_noise_scale: float = 0.1, **kwargs: Any
    ) -> None:
        self.healthy_reward = healthy_reward
        self.reset_noise_scale = reset_noise_scale
        super().__init__(num_envs, nconmax=kwargs.pop("nconmax", 4), njmax=kwargs.pop("njmax", 16), **kwargs)

    def _observe(self) -> torch.Tensor:
        return torch.cat(
            (
                self.qpos[:, :1],
                torch.sin(self.qpos[:, 1:]),
                torch.cos(self.qpos[:, 1:]),
                self.qvel.clamp(-10, 10),
                self.qfrc_constraint.clamp(-10, 10)[:, :1],
            ),
            dim=1,
        )

    def _reward_terminated(self, before, after, action):
        x, y = self.site_xpos[:, 0, 0], self.site_xpos[:, 0, 2]
        terminated = y <= 1
        v1, v2 = self.qvel[:, 1], self.qvel[:, 2]
        dist_penalty = 0.01 * x**2 + (y - 2) ** 2
        vel_penalty = 1e-3 * v1**2 + 5e-3 * v2**2
        alive = self.healthy_reward * (~terminated).float()
        return alive - dist_penalty - vel_penalty, terminated


class HalfCheetahEnv(LocomotionEnv):
    """HalfCheetah-v5: forward velocity minus control cost; never terminates."""

    xml_file = "half_cheetah.xml"
    qvel_noise = "normal"

    def __init__(
        self,
        num_envs: int,
        *,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 0.1,
        reset_noise_scale: float = 0.1,
        exclude_current_positions_from_observation: bool = True,
        **kwargs: Any,
    ) -> None:
        self.forward_reward_weight = forward_reward_weight
        self.ctrl_cost_weight = ctrl_cost_weight
        self.reset_noise_scale = reset_noise_scale
        self._skip = 1 if exclude_current_positions_from_observation else 0
        super().__init__(num_envs, nconmax=kwargs.pop("nconmax", 32), njmax=kwargs.pop("njmax", 96), **kwargs)

    def _observe(self) -> torch.Tensor:
        return torch.cat((self.qpos[:, self._skip :], self.qvel), dim=1)

    def _reward_terminated(self, before, after, action):
        reward = self.forward_reward_weight * self._forward_velocity(before, after)
        reward = reward - self.ctrl_cost_weight * sq_sum(action)
        return reward, torch.zeros_like(reward, dtype=torch.bool)


class _PlanarHealthyEnv(LocomotionEnv):
    """Hopper and Walker2d: healthy bonus, control cost, termination when unhealthy; clipped qvel."""

    healthy_z_range: tuple[float, float] = (0.0, math.inf)
    healthy_angle_range: tuple[float, float] = (-math.inf, math.inf)
    healthy_state_range: tuple[float, float] | None = None

    def __init__(
        self,
        num_envs: int,
        *,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 1e-3,
        healthy_reward: float = 1.0,
        terminate_when_unhealthy: bool = True,
        healthy_z_range: tuple[float, float] | None = None,
        healthy_angle_range: tuple[float, float] | None = None,
        reset_noise_scale: float = 5e-3,
        exclude_current_positions_from_observation: bool = True,
        **kwargs: Any,
    ) -> None:
        self.forward_reward_weight = forward_reward_weight
        self.ctrl_cost_weight = ctrl_cost_weight
        self.healthy_reward = healthy_reward
        self.terminate_when_unhealthy = terminate_when_unhealthy
        self.healthy_z_range = healthy_z_range or type(self).healthy_z_range
        self.healthy_angle_range = healthy_angle_range or type(self).healthy_angle_range
        self.reset_noise_scale = reset_noise_scale
        self._skip = 1 if exclude_current_positions_from_observation else 0
        super().__init__(num_envs, nconmax=kwargs.pop("nconmax", 32), njmax=kwargs.pop("njmax", 96), **kwargs)

    def _observe(self) -> torch.Tensor:
        return torch.cat((self.qpos[:, self._skip :], self.qvel.clamp(-10, 10)), dim=1)

    def is_healthy(self) -> torch.Tensor:
        """Per-world healthy flag (Gymnasium's ``is_healthy``)."""
        z, angle = self.qpos[:, 1], self.qpos[:, 2]
        ok = healthy_range(z, *self.healthy_z_range) & healthy_range(angle, *self.healthy_angle_range)
        if self.healthy_state_range is not None:
            state = torch.cat((self.qpos, self.qvel), dim=1)[:, 2:]
            ok &= healthy_range(state, *self.healthy_state_range).all(dim=1)
        return ok

    def _reward_terminated(self, before, after, action):
        healthy = self.is_healthy()
        reward = self.forward_reward_weight * self._forward_velocity(before, after)
        reward = reward + self.healthy_reward * healthy.float() - self.ctrl_cost_weight * sq_sum(action)
        terminated = ~healthy if self.terminate_when_unhealthy else torch.zeros_like(healthy)
        return reward, terminated


class HopperEnv(_PlanarHealthyEnv):
    """Hopper-v5."""

    xml_file = "hopper.xml"
    default_frame_skip = 4
    healthy_z_range = (0.7, math.inf)
    healthy_angle_range = (-0.2, 0.2)
    healthy_state_range = (-100.0, 100.0)


class Walker2dEnv(_PlanarHealthyEnv):
    """Walker2d-v5."""

    xml_file = "walker2d_v5.xml"
    default_frame_skip = 4
    healthy_z_range = (0.8, 2.0)
    healthy_angle_range = (-1.0, 1.0)


class ReacherEnv(LocomotionEnv):
    """Reacher-v5: a two-link arm reaching a random target; never terminates, truncates at 50 steps.

    The target is drawn uniformly in the disk of radius 0.2, as Gymnasium's rejection sampling from the
    square does, but with polar counter-based draws (``r = 0.2 sqrt(u)``): one pass, no host loop. Its own
    :meth:`_sample_initial_state` is declared (``initial_state_draws = "task"``): the fused reset writes
    those draws.
    """

    xml_file = "reacher.xml"
    default_frame_skip = 2
    initial_state_draws = "task"
    refresh = "kinematics"  # observation and reward read the fingertip's and target's xpos

    def __init__(
        self,
        num_envs: int,
        *,
        reward_dist_weight: float = 1.0,
        reward_control_weight: float = 1.0,
        max_episode_steps: int = 50,
        **kwargs: Any,
    ) -> None:
        self.reward_dist_weight = reward_dist_weight
        self.reward_control_weight = reward_control_weight
        super().__init__(
            num_envs,
            max_episode_steps=max_episode_steps,
            nconmax=kwargs.pop("nconmax", 4),
            njmax=kwargs.pop("njmax", 16),
            **kwargs,
        )

    def _sample_initial_state(self) -> tuple[torch.Tensor, torch.Tensor]:
        nq, nv = self.mjm.nq, self.mjm.nv
        bits = counter_bits(self.seed, self.env_ids, self.episode, nq + nv, stream=1)  # target words: r, angle
        qpos = self.init_qpos + bits_to_uniform(bits[:, :nq], -0.1, 0.1)
        radius = 0.2 * torch.sqrt(bits_to_uniform(bits[:, nq - 2]))
        angle = 2.0 * math.pi * bits_to_uniform(bits[:, nq - 1])
        qpos = torch.cat(
            (qpos[:, :-2], (radius * torch.cos(angle)).unsqueeze(1), (radius * torch.sin(angle)).unsqueeze(1)), 1
        )
        qvel = self.init_qvel + bits_to_uniform(bits[:, nq : nq + nv], -0.005, 0.005)
        return qpos, torch.cat((qvel[:, :-2], torch.zeros_like(qvel[:, -2:])), dim=1)

    @functools.cached_property
    def _bodies(self) -> tuple[int, int]:
        import mujoco

        return tuple(mujoco.mj_name2id(self.mjm, mujoco.mjtObj.mjOBJ_BODY, n) for n in ("fingertip", "target"))

    def _fingertip_to_target(self) -> torch.Tensor:
        fingertip, target = self._bodies
        return self.xpos[:, fingertip] - self.xpos[:, target]

    def _observe(self) -> torch.Tensor:
        theta = self.qpos[:, :2]
        vec = self._fingertip_to_target()
        return torch.cat((theta.cos(), theta.sin(), self.qpos[:, 2:], self.qvel[:, :2], vec[:, :2]), dim=1)

    def _reward_terminated(self, before, after, action):
        dist = self._fingertip_to_target().norm(dim=1)
        reward = -self.reward_dist_weight * dist - self.reward_control_weight * sq_sum(action)
        return reward, torch.zeros_like(dist, dtype=torch.bool)


class SwimmerEnv(LocomotionEnv):
    """Swimmer-v5: forward velocity minus a small control cost; never terminates."""

    xml_file = "swimmer.xml"
    default_frame_skip = 4

    def __init__(
        self,
        num_envs: int,
        *,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 1e-4,
        reset_noise_scale: float = 0.1,
        exclude_current_positions_from_observation: bool = True,
        **kwargs: Any,
    ) -> None:
        self.forward_reward_weight = forward_reward_weight
        self.ctrl_cost_weight = ctrl_cost_weight
        self.reset_noise_scale = reset_noise_scale
        self._skip = 2 if exclude_current_positions_from_observation else 0
        super().__init__(num_envs, nconmax=kwargs.pop("nconmax", 8), njmax=kwargs.pop("njmax", 32), **kwargs)

    def _observe(self) -> torch.Tensor:
        return torch.cat((self.qpos[:, self._skip :], self.qvel), dim=1)

    def _progress(self) -> torch.Tensor:
        return self.qpos[:, :2].clone()

    def _reward_terminated(self, before, after, action):
        reward = self.forward_reward_weight * self._forward_velocity(before, after)
        reward = reward - self.ctrl_cost_weight * sq_sum(action)
        return reward, torch.zeros_like(reward, dtype=torch.bool)


TASKS: dict[str, type[LocomotionEnv]] = {
    "InvertedPendulum-v5": InvertedPendulumEnv,
    "InvertedDoublePendulum-v5": InvertedDoublePendulumEnv,
    "HalfCheetah-v5": HalfCheetahEnv,
    "Hopper-v5": HopperEnv,
    "Walker2d-v5": Walker2dEnv,
    "Swimmer-v5": SwimmerEnv,
    "Reacher-v5": ReacherEnv,
    "Ant-v5": AntEnv,
    "Humanoid-v5": HumanoidEnv,
}
"""Gymnasium id (``"Ant-v5"``) -> the task class; registered as ``gym_graphreset/<id>``."""
