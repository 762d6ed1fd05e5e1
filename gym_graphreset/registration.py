"""Registration of the ``gym_graphreset/<Task>`` ids with Gymnasium (vector entry points only)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

__all__ = ["register_envs"]


def _make_cartpole(num_envs: int = 1, **kwargs: Any) -> Any:
    from gym_graphreset.envs.cartpole import CartPoleVectorEnv

    return CartPoleVectorEnv(num_envs, **kwargs)


def register_envs() -> None:
    """Register every env id once (idempotent)."""
    if "gym_graphreset/CartPole-v1" not in gym.registry:
        gym.register(
            id="gym_graphreset/CartPole-v1",
            vector_entry_point=_make_cartpole,
            max_episode_steps=500,
            reward_threshold=475.0,
        )
