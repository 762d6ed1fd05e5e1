"""TorchRL adapter: ``GymWrapper`` over a same-step torch vector env, safe whatever TorchRL keeps.

TorchRL's ``rollout()`` and its collectors keep references to every step's tensors until the rollout is
stacked. The wrapper's persistent presets publish through a ring of ``published_buffer_depth`` slots, so
a rollout longer than the ring would read overwritten slots: wrong ``observation``,
``("next", "observation")`` and flags, silently. :func:`torchrl_env` puts :class:`PublishedCopies`
between TorchRL and the env: every step's outputs (and the ``final_obs`` TorchRL reads on done rows) are
copied once, on the device, where TorchRL stores them. That is one obs-sized copy per step, with no host
read, and it holds on every preset, the whole-step graph included.

It also hands TorchRL the ``info`` in the form TorchRL's info reader takes (flat tensors): a nested entry
such as :class:`~gym_graphreset.core.terms.EpisodeStatistics`' ``info["episode"] = {"r": ..., "l": ...}``
becomes ``info["episode_r"]`` and ``info["episode_l"]`` (in ``info["final_info"]`` too, where TorchRL reads
a done row's values), so a rollout holds them at ``("next", "episode_r")`` and ``("next", "episode_l")``.

Requires ``torchrl`` (extra ``torchrl``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from gym_graphreset.core.buffers import tree_map
from gym_graphreset.core.inputs import env_device

__all__ = ["PublishedCopies", "torchrl_env", "torchrl_info"]


def torchrl_info(info: dict[str, Any]) -> dict[str, Any]:
    """``info`` as TorchRL's info reader takes it: nested dicts flattened, ``final_info``'s too.

    A nested entry ``{"episode": {"r": r, "l": l}}`` becomes ``{"episode_r": r, "episode_l": l}`` (names
    joined with ``_``, at any depth). ``final_info`` stays a dict, flattened the same way: TorchRL's
    terminal reader takes a done row's info entries from it.

    Args:
        info: An info dict of a SAME_STEP vector env.

    Returns:
        A new dict (the tensors themselves, not copies).

    Raises:
        ValueError: If two entries flatten to the same name.

    Example:
        >>> import torch
        >>> episode = {"r": torch.zeros(2), "l": torch.ones(2)}
        >>> info = {"episode": episode, "_episode": torch.ones(2, dtype=bool)}
        >>> flat = torchrl_info({**info, "final_info": dict(info)})
        >>> sorted(flat)
        ['_episode', 'episode_l', 'episode_r', 'final_info']
        >>> sorted(flat["final_info"])
        ['_episode', 'episode_l', 'episode_r']
    """

    def put(flat: dict[str, Any], prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, sub in value.items():
                put(flat, f"{prefix}_{key}", sub)
            return
        if prefix in flat:
            raise ValueError(f"torchrl_env: two info entries flatten to the same name {prefix!r}; rename one")
        flat[prefix] = value

    def flatten(entries: dict[str, Any]) -> dict[str, Any]:
        flat: dict[str, Any] = {}
        for key, value in entries.items():
            put(flat, key, value)
        return flat

    out = flatten({k: v for k, v in info.items() if k != "final_info"})
    if "final_info" in info:
        out["final_info"] = flatten(info["final_info"])
    return out


def _observation_groups(space: gym.Space[Any]) -> tuple[str, ...]:
    """The group names of a ``Dict`` observation space (``()`` for one array), each group one ``Box``.

    Raises:
        ValueError: A group that is itself a ``Dict`` (a task group with ``concatenate=False``): TorchRL's
            terminal reader takes one array per key, so that group's final observation would be lost.
    """
    if not isinstance(space, gym.spaces.Dict):
        return ()
    nested = [name for name, sub in space.spaces.items() if isinstance(sub, gym.spaces.Dict)]
    if nested:
        raise ValueError(
            f"torchrl_env: observation group(s) {nested} are dicts of terms (concatenate=False); TorchRL reads a "
            "done row's final observation as one array per group, so declare them with concatenate=True"
        )
    return tuple(space.spaces)


class PublishedCopies(VectorWrapper):
    """Return copies of every tensor the env returns (step and reset), so a consumer may keep them.

    The ``info`` is also given in TorchRL's form (:func:`torchrl_info`).

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
        self.groups = _observation_groups(env.single_observation_space)

    @property
    def autoreset_mode(self) -> AutoresetMode:
        """``AutoresetMode.SAME_STEP`` (TorchRL's ``GymWrapper`` reads this attribute)."""
        return AutoresetMode.SAME_STEP

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the env; copies of its outputs, the info flattened (:func:`torchrl_info`)."""
        obs, info = tree_map(torch.clone, self.env.reset(seed=seed, options=options))
        return obs, torchrl_info(info)

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step the env; copies of its outputs (``final_obs`` included), the info flattened (:func:`torchrl_info`).

        With observation groups (a ``Dict`` space) each group's final observation is handed to TorchRL's
        terminal reader under the group's own name in ``final_info`` (the reader looks a ``Dict``
        observation's final values up by key; under ``final_obs`` it would find none and put zeros in
        ``("next", group)`` on done rows).
        """
        obs, reward, terminated, truncated, info = tree_map(torch.clone, self.env.step(actions))
        if self.groups and "final_obs" in info:
            final_obs = info.pop("final_obs")
            final_info = dict(info.get("final_info", {}))
            for group in self.groups:
                if group in final_info:
                    raise ValueError(
                        f"torchrl_env: observation group {group!r} has the name of an info entry; rename one "
                        "(TorchRL reads a group's final observation from the info entry of its name)"
                    )
                final_info[group] = final_obs[group]
            info["final_info"] = final_info
        return obs, reward, terminated, truncated, torchrl_info(info)


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
