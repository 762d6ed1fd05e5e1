"""Torch-native, sync-free vector wrappers that take a ResetSelection and work under graph capture.

Gymnasium's ``VectorObservationWrapper`` refuses SAME_STEP envs and its normalisers are numpy. These sit
*inside* :class:`~gym_graphreset.FixedShapeAutoresetVectorEnv` (between it and the inner env), so the
wrapper's ``final_obs`` is built from their output (normalised like every other observation), they are
participants in the reset negotiation, and their state is device tensors updated in place.

    env = FixedShapeAutoresetVectorEnv(NormalizeObservation(ClipAction(inner)), "masked")
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space

from gym_graphreset.core.buffers import tree_map
from gym_graphreset.core.inputs import check_real, env_device
from gym_graphreset.core.protocols import CheckSink
from gym_graphreset.core.selection import options_reset_mask
from gym_graphreset.core.validation import finite_rows

__all__ = [
    "ClipAction",
    "ClipObservation",
    "ClipReward",
    "NormalizeObservation",
    "NormalizeReward",
    "RescaleAction",
    "TransformObservation",
    "TransformReward",
]


def _box(space: spaces.Space, what: str) -> spaces.Box:
    if not isinstance(space, spaces.Box):
        raise ValueError(f"{what} needs a Box space, got {space}")
    return space


class _TorchVectorWrapper(VectorWrapper):
    """Shared pieces: selection-capable, capture-safe, device from the inner env."""

    supports_reset_selection = True
    supports_step_capture = True

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        self.device = env_device(env)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        """Forward the reset (a ResetSelection passes through untouched); transform the observation."""
        obs, info = self.env.reset(seed=seed, options=options)
        return self._observation(obs, update=False), info

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """Transform the action, step, transform the outputs."""
        obs, reward, terminated, truncated, info = self.env.step(self._action(actions))
        return (
            self._observation(obs, update=True),
            self._reward(reward, terminated | truncated),
            terminated,
            truncated,
            info,
        )

    def _observation(self, obs: torch.Tensor, update: bool) -> torch.Tensor:
        return obs

    def _action(self, actions: torch.Tensor) -> torch.Tensor:
        return actions

    def _reward(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        return reward


class NormalizeObservation(_TorchVectorWrapper):
    """Observations standardised by running mean/variance of the observations seen after each step.

    Non-finite observations (NaN or inf, which normalising and clipping would hide) are latched as
    ``normalize_observation_finite`` with their rows, whether statistics are updated or frozen, and
    whether they came from a step or a reset; their rows never update the statistics.

    Args:
        env: The inner env (Box observations).
        epsilon: Added to the variance.
        clip: Normalised observations are clipped to ``[-clip, clip]``.
        update: Whether statistics are updated (set ``False`` to freeze them for evaluation).
    """

    supports_reset_selection = True  # its reset is overridden below, forwarding the selection: re-declared

    def __init__(self, env: VectorEnv, epsilon: float = 1e-8, clip: float = 10.0, update: bool = True) -> None:
        super().__init__(env)
        epsilon = check_real("epsilon", epsilon, low=0.0, high=math.inf, low_open=True)
        clip = check_real("clip", clip, low=0.0, low_open=True)
        if not isinstance(update, bool):
            raise TypeError(f"`update` must be a bool, got {update!r}")
        shape = _box(env.single_observation_space, "NormalizeObservation").shape
        self.mean = torch.zeros(shape, dtype=torch.float64, device=self.device)
        self.var = torch.ones(shape, dtype=torch.float64, device=self.device)
        self.count = torch.full((), epsilon, dtype=torch.float64, device=self.device)
        self.epsilon, self.clip, self.update = epsilon, clip, update
        self.finite_rows = torch.ones(env.num_envs, dtype=torch.bool, device=self.device)  # since the last check
        self.single_observation_space = spaces.Box(-clip, clip, shape, np.float32)
        self.observation_space = batch_space(self.single_observation_space, env.num_envs)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        """Forward the reset; a full reset (no ``reset_mask``) forgets rows seen non-finite before it."""
        if (options or {}).get("reset_mask") is None:
            self.finite_rows.fill_(True)
        return super().reset(seed=seed, options=options)

    def _observation(self, obs: torch.Tensor, update: bool) -> torch.Tensor:
        finite = finite_rows(obs)
        self.finite_rows.logical_and_(finite)  # latched at the next check, frozen statistics or not
        if update and self.update:  # from finite rows only: one NaN row must not poison every row's statistics
            w = finite.to(torch.float64).unsqueeze(1)
            x = torch.where(finite.unsqueeze(1), obs.double(), 0.0)
            n = w.sum()
            batch_mean = x.sum(0) / n.clamp(min=1.0)
            batch_var = (w * (x - batch_mean).square()).sum(0) / n.clamp(min=1.0)
            delta, total = batch_mean - self.mean, self.count + n
            self.mean.add_(delta * n / total)
            self.var.copy_((self.var * self.count + batch_var * n + delta.square() * self.count * n / total) / total)
            self.count.copy_(total)
        out = (obs.double() - self.mean) / torch.sqrt(self.var + self.epsilon)
        return out.clamp(-self.clip, self.clip).to(obs.dtype)

    def add_checks(self, latch: CheckSink) -> None:
        """Latch the rows seen with NaN or inf observations since the last check (left out of the statistics)."""
        latch.require(
            self.finite_rows.clone(),  # a batched latch holds the tensor until its region ends
            "normalize_observation_finite",
            "NaN or inf observations (left out of the statistics)",
        )
        self.finite_rows.fill_(True)


class _RewardWrapper(_TorchVectorWrapper):
    """Changes rewards; keeps the reward it was given in ``raw_reward`` (a :class:`RewardTransform`)."""

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        self.raw_reward = torch.zeros(env.num_envs, dtype=torch.float32, device=self.device)

    def _reward(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        self.raw_reward.copy_(reward)
        return self._transform_reward(reward, done)

    def _transform_reward(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class TransformReward(_RewardWrapper):
    """Rewards mapped by ``fn`` (a torch function of the ``(num_envs,)`` reward tensor, no host read).

    Args:
        env: The inner env.
        fn: E.g. ``lambda r: r.clamp(-10, 10)``; it runs inside a captured step when the step is captured.
    """

    def __init__(self, env: VectorEnv, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__(env)
        if not callable(fn):
            raise TypeError(f"`fn` must be callable, got {type(fn).__name__}")
        self.fn = fn

    def _transform_reward(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        return self.fn(reward)


class ClipReward(_RewardWrapper):
    """Rewards clipped to ``[min_reward, max_reward]`` (CleanRL clips normalised rewards to +-10)."""

    def __init__(self, env: VectorEnv, min_reward: float | None = None, max_reward: float | None = None) -> None:
        super().__init__(env)
        min_reward = None if min_reward is None else check_real("min_reward", min_reward)
        max_reward = None if max_reward is None else check_real("max_reward", max_reward)
        if min_reward is None and max_reward is None:
            raise ValueError("ClipReward needs `min_reward` or `max_reward` (both None clips nothing)")
        if min_reward is not None and max_reward is not None and min_reward > max_reward:
            raise ValueError(f"`min_reward` must be <= `max_reward`, got {min_reward} and {max_reward}")
        self.min_reward, self.max_reward = min_reward, max_reward

    def _transform_reward(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        return reward.clamp(self.min_reward, self.max_reward)


class TransformObservation(_TorchVectorWrapper):
    """Observations mapped by ``fn`` (a torch function of the batch), with the resulting space.

    Args:
        env: The inner env.
        fn: E.g. ``lambda obs: obs.clamp(-10, 10)``; no host read (it may run inside a captured step).
        single_observation_space: The space of one transformed observation (default: the inner env's).
    """

    def __init__(
        self,
        env: VectorEnv,
        fn: Callable[[torch.Tensor], torch.Tensor],
        single_observation_space: spaces.Space | None = None,
    ) -> None:
        super().__init__(env)
        if not callable(fn):
            raise TypeError(f"`fn` must be callable, got {type(fn).__name__}")
        self.fn = fn
        if single_observation_space is not None:
            self.single_observation_space = single_observation_space
            self.observation_space = batch_space(single_observation_space, env.num_envs)

    def _observation(self, obs: torch.Tensor, update: bool) -> torch.Tensor:
        return self.fn(obs)


class NormalizeReward(_RewardWrapper):
    """Rewards divided by the running standard deviation of the discounted return (Gymnasium's rule).

    The per-row discounted return restarts on rows whose episode ended, with no host read.
    """

    supports_reset_selection = True  # its reset is overridden below with masked writes: re-declared

    def __init__(self, env: VectorEnv, gamma: float = 0.99, epsilon: float = 1e-8) -> None:
        super().__init__(env)
        self.gamma = check_real("gamma", gamma, low=0.0, high=1.0)
        self.epsilon = epsilon = check_real("epsilon", epsilon, low=0.0, low_open=True)
        self.returns = torch.zeros(env.num_envs, dtype=torch.float64, device=self.device)
        self.var = torch.ones((), dtype=torch.float64, device=self.device)
        self.mean = torch.zeros((), dtype=torch.float64, device=self.device)
        self.count = torch.full((), epsilon, dtype=torch.float64, device=self.device)
        self._all = torch.ones(env.num_envs, dtype=torch.bool, device=self.device)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        """Restart the discounted return of the reset rows (masked write)."""
        self.returns.masked_fill_(options_reset_mask(options, self._all), 0.0)
        return super().reset(seed=seed, options=options)

    def _transform_reward(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        self.returns.copy_(self.returns * self.gamma + reward.double())
        x = self.returns
        batch_mean, batch_var, n = x.mean(), x.var(unbiased=False), x.shape[0]
        delta, total = batch_mean - self.mean, self.count + n
        self.mean.add_(delta * n / total)
        self.var.copy_((self.var * self.count + batch_var * n + delta.square() * self.count * n / total) / total)
        self.count.copy_(total)
        self.returns.masked_fill_(done, 0.0)
        return (reward.double() / torch.sqrt(self.var + self.epsilon)).to(reward.dtype)


class ClipAction(_TorchVectorWrapper):
    """Actions clipped to the Box bounds of the action space."""

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        space = _box(env.single_action_space, "ClipAction")
        self.low = torch.as_tensor(space.low, dtype=torch.float32, device=self.device)
        self.high = torch.as_tensor(space.high, dtype=torch.float32, device=self.device)

    def _action(self, actions: torch.Tensor) -> torch.Tensor:
        return torch.clamp(actions, self.low.to(actions.dtype), self.high.to(actions.dtype))


class RescaleAction(_TorchVectorWrapper):
    """Actions in ``[min_action, max_action]`` mapped affinely onto the env's Box bounds (finite ones)."""

    def __init__(self, env: VectorEnv, min_action: float = -1.0, max_action: float = 1.0) -> None:
        super().__init__(env)
        min_action, max_action = check_real("min_action", min_action), check_real("max_action", max_action)
        if not min_action < max_action:
            raise ValueError(f"`min_action` must be < `max_action`, got {min_action} and {max_action}")
        space = _box(env.single_action_space, "RescaleAction")
        infinite = ~(np.isfinite(space.low) & np.isfinite(space.high))
        if infinite.any():
            bad = [int(i) for i in np.flatnonzero(infinite.reshape(-1))]
            raise ValueError(
                "RescaleAction maps actions onto the env's action bounds, which must be finite, but the "
                f"action space is unbounded in entries {bad} ({space}): every action would become NaN or "
                "inf; give the env a bounded Box action space, or scale the actions in the policy"
            )
        self.low = torch.as_tensor(space.low, dtype=torch.float32, device=self.device)
        self.high = torch.as_tensor(space.high, dtype=torch.float32, device=self.device)
        self.min_action, self.max_action = min_action, max_action
        self.single_action_space = spaces.Box(min_action, max_action, space.shape, np.float32)
        self.action_space = batch_space(self.single_action_space, env.num_envs)

    def _action(self, actions: torch.Tensor) -> torch.Tensor:
        unit = (actions - self.min_action) / (self.max_action - self.min_action)
        return self.low + unit * (self.high - self.low)


def _clipped_space(space: spaces.Space, low: float, high: float, where: str) -> spaces.Space:
    """``space`` with every Box leaf (of a Dict or Tuple too) bounded by ``[low, high]``."""
    if isinstance(space, spaces.Box):
        return spaces.Box(low, high, space.shape, np.float32)
    if isinstance(space, spaces.Dict):
        return spaces.Dict({k: _clipped_space(v, low, high, f"{where}[{k!r}]") for k, v in space.spaces.items()})
    if isinstance(space, spaces.Tuple):
        return spaces.Tuple(_clipped_space(v, low, high, f"{where}[{i}]") for i, v in enumerate(space.spaces))
    raise ValueError(f"ClipObservation needs Box observations (or a Dict or Tuple of them), got {space} at {where}")


class ClipObservation(_TorchVectorWrapper):
    """Observations clipped to ``[low, high]``: a Box, or every Box of a Dict or Tuple observation space."""

    def __init__(self, env: VectorEnv, low: float, high: float) -> None:
        super().__init__(env)
        low, high = check_real("low", low), check_real("high", high)
        if low > high:
            raise ValueError(f"`low` must be <= `high`, got {low} and {high}")
        self.low, self.high = low, high
        self.single_observation_space = _clipped_space(env.single_observation_space, low, high, "observation")
        self.observation_space = batch_space(self.single_observation_space, env.num_envs)

    def _observation(self, obs: Any, update: bool) -> Any:
        return tree_map(lambda t: t.clamp(self.low, self.high), obs)
