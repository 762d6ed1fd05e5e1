"""A torch-native batched CartPole: Gymnasium's CartPole-v1 dynamics, masked reset, counter-based draws.

Every state lives in persistent device tensors updated in place, and the step has no host read, so the
env can be stepped inside a captured CUDA graph (``supports_step_capture``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from gym_graphreset.core.inputs import check_device, check_env_counts, inner_actions
from gym_graphreset.core.rng import EpisodeKeys, counter_uniform
from gym_graphreset.core.selection import options_reset_mask

__all__ = ["CartPoleVectorEnv"]


class CartPoleVectorEnv(VectorEnv):
    """``num_envs`` CartPole-v1 systems stepped as one batch of torch tensors.

    Same dynamics, termination (``|x| > 2.4``, ``|theta| > 12`` deg), reward (1 per step) and reset distribution
    (uniform in [-0.05, 0.05]) as Gymnasium's ``CartPole-v1``; truncation after ``max_episode_steps``.
    Reset draws are a pure function of (seed, global env index, episode index).

    Args:
        num_envs: Batch size.
        device: Torch device of every buffer.
        max_episode_steps: Truncation horizon (500 as in CartPole-v1).
        global_env_offset: Global index of row 0 (several processes splitting one population).
        dtype: Dtype of the physics state, one of :attr:`supported_dtypes` (``torch.float32`` or
            ``torch.float64``, which reproduces Gymnasium's arithmetic); others are refused.
    """

    metadata = {"autoreset_mode": AutoresetMode.DISABLED, "render_modes": []}
    supports_reset_selection = True
    supports_step_capture = True
    supported_dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.float64)
    """Physics dtypes this env computes correctly (float16/bfloat16 cannot hold its reset draws)."""

    gravity = 9.8
    masscart = 1.0
    masspole = 0.1
    length = 0.5
    force_mag = 10.0
    tau = 0.02
    theta_threshold_radians = 12 * 2 * math.pi / 360
    x_threshold = 2.4

    def __init__(
        self,
        num_envs: int,
        *,
        device: torch.device | str = "cpu",
        max_episode_steps: int = 500,
        global_env_offset: int = 0,
        dtype: torch.dtype = torch.float32,
        render_mode: str | None = None,
    ) -> None:
        self.num_envs, self.max_episode_steps, global_env_offset = check_env_counts(
            num_envs, max_episode_steps, global_env_offset
        )
        if render_mode is not None:
            raise ValueError(f"CartPoleVectorEnv does not render, got render_mode={render_mode!r}")
        if dtype not in self.supported_dtypes:
            raise ValueError(
                f"`dtype` must be one of {type(self).__name__}.supported_dtypes {self.supported_dtypes} (the physics "
                f"state), got {dtype!r}"
            )
        self.device = check_device(device)
        self.render_mode = None
        high = np.array([self.x_threshold * 2, np.inf, self.theta_threshold_radians * 2, np.inf], dtype=np.float32)
        self.single_observation_space = spaces.Box(-high, high, dtype=np.float32)
        self.single_action_space = spaces.Discrete(2)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)

        dev = self.device
        self.state = torch.zeros(num_envs, 4, dtype=dtype, device=dev)
        self.elapsed = torch.zeros(num_envs, dtype=torch.long, device=dev)
        self.keys = EpisodeKeys(num_envs, dev, global_env_offset)
        self.seed, self.env_ids, self.episode = self.keys.seed, self.keys.env_ids, self.keys.episode
        self._all = torch.ones(num_envs, dtype=torch.bool, device=dev)

    def _obs(self) -> torch.Tensor:
        return self.state.to(torch.float32, copy=True)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset all rows, or the rows of ``options["reset_mask"]`` (mask, ids or ResetSelection)."""
        self.keys.reseed(seed)
        mask = options_reset_mask(options, self._all)
        self.keys.advance_(mask)
        draws = counter_uniform(self.seed, self.env_ids, self.episode, 4, low=-0.05, high=0.05, dtype=self.state.dtype)
        self.state.copy_(torch.where(mask.unsqueeze(1), draws, self.state))
        self.elapsed.masked_fill_(mask, 0)
        return self._obs(), {}

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Advance every row by one Euler step of ``tau`` seconds (``actions``: a tensor or a numpy array)."""
        actions = inner_actions(actions, self.device)
        if actions.shape != (self.num_envs,):
            raise ValueError(f"actions must have shape ({self.num_envs},), got {tuple(actions.shape)}")
        x, x_dot, theta, theta_dot = self.state.unbind(1)
        force = torch.where(actions.to(self.device) == 1, self.force_mag, -self.force_mag).to(self.state.dtype)
        total_mass = self.masspole + self.masscart
        polemass_length = self.masspole * self.length
        costheta, sintheta = torch.cos(theta), torch.sin(theta)
        temp = (force + polemass_length * theta_dot**2 * sintheta) / total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta**2 / total_mass)
        )
        xacc = temp - polemass_length * thetaacc * costheta / total_mass
        new_state = torch.stack(
            (
                x + self.tau * x_dot,
                x_dot + self.tau * xacc,
                theta + self.tau * theta_dot,
                theta_dot + self.tau * thetaacc,
            ),
            dim=1,
        )
        self.state.copy_(new_state)
        self.elapsed.add_(1)
        x, theta = self.state[:, 0], self.state[:, 2]
        terminated = (x.abs() > self.x_threshold) | (theta.abs() > self.theta_threshold_radians)
        truncated = self.elapsed >= self.max_episode_steps
        reward = torch.ones(self.num_envs, dtype=torch.float32, device=self.device)
        return self._obs(), reward, terminated, truncated, {}
