"""TorchRL adapter: ``GymWrapper`` over a same-step torch vector env, safe whatever TorchRL keeps.

TorchRL's ``rollout()`` and its collectors keep references to every step's tensors until the rollout is
stacked. The wrapper's persistent presets publish through a ring of ``published_buffer_depth`` slots, so
a rollout longer than the ring would read overwritten slots: wrong ``observation``,
``("next", "observation")`` and flags, silently. :func:`torchrl_env` puts :class:`PublishedCopies`
between TorchRL and the env: every step's outputs (and the ``final_obs`` TorchRL reads on done rows) are
copied once, on the device, where TorchRL stores them. That is one obs-sized copy per step, with no host
read, and it holds on every preset, the whole-step graph included.

Requires ``torchrl`` (extra ``torchrl``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from gym_graphreset.core.buffers import tree_map
from gym_graphreset.core.inputs import env_device

__all__ = ["PublishedCopies", "torchrl_env"]


class PublishedCopies(VectorWrapper):
    """Return copies of every tensor the env returns (step and reset), so a consumer may keep them.

    Args:
        env: A SAME_STEP torch vector env (usually a :class:`~gym_graphreset.FixedShapeAutoresetVectorEnv`).
    """

    def __init__(self, env: VectorEnv) -> None:
        mode = env.metadata.get("autoreset_mode")
        if mode != AutoresetMode.SAME_STEP:
            raise ValueError(
                f"torchrl_env needs a SAME_STEP vector env (wrap it in FixedShapeAutoresetVectorEnv), got {mode}"
            )
        super().__init__(env)
        self.device = env_device(env)

    @property
    def autoreset_mode(self) -> AutoresetMode:
        """``AutoresetMode.SAME_STEP`` (TorchRL's ``GymWrapper`` reads this attribute)."""
        return AutoresetMode.SAME_STEP

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the env; copies of its outputs."""
        return tree_map(torch.clone, self.env.reset(seed=seed, options=options))

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step the env; copies of its outputs (``final_obs`` included)."""
        return tree_map(torch.clone, self.env.step(actions))


def torchrl_env(env: VectorEnv, **gym_wrapper_kwargs: Any) -> Any:
    """A TorchRL ``GymWrapper`` over ``env`` that stays correct whatever TorchRL keeps.

    Args:
        env: A SAME_STEP torch vector env, usually :class:`~gym_graphreset.FixedShapeAutoresetVectorEnv`
            (on any preset).
        **gym_wrapper_kwargs: Passed to ``torchrl.envs.GymWrapper``. Defaults: ``device`` = the env's,
            ``convert_actions_to_numpy=False`` (the env takes torch tensors on its device) and, for a
            ``Discrete`` action space, ``categorical_action_encoding=True`` (integer actions, not one-hot).
    """
    from torchrl.envs import GymWrapper

    kwargs: dict[str, Any] = {"device": env_device(env), "convert_actions_to_numpy": False}
    if isinstance(env.single_action_space, gym.spaces.Discrete):
        kwargs["categorical_action_encoding"] = True
    kwargs.update(gym_wrapper_kwargs)
    return GymWrapper(PublishedCopies(env), **kwargs)
