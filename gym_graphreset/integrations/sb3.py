"""Stable-Baselines3 adapter: a ``VecEnv`` over a same-step torch vector env.

SB3 speaks numpy and a list of per-env info dicts. :class:`SB3VecEnv` makes that conversion cheap: all
of a step's outputs (obs, reward, flags, ``final_obs``, episode statistics) are packed on the device and
cross to the host in **one** copy; info dicts are only filled for rows whose episode ended (a loop over
done rows in numpy, never over tensors). ``infos[i]["terminal_observation"]`` is the wrapper's
``final_obs`` row, ``"TimeLimit.truncated"`` is set on rows that were truncated and not terminated, and
``"episode"`` (``r``, ``l``, ``t``) feeds SB3's logger when the env has an ``EpisodeStatistics`` term.

Differences from SB3's ``DummyVecEnv``, by design: ``step()`` before ``reset()`` is refused (SB3's
``learn()`` resets first); ``set_options()`` takes one options dict for every index (the env is one
batch); ``render()`` is refused with a clear error; on a torch-batched env (no sub-envs) ``set_attr`` /
``env_method`` act on the batched env and refuse a subset of indices. Behind a Gymnasium ``SyncVectorEnv``
(numpy envs through ``NumpyToTorch``) the attribute API reaches each index's sub-env, as SB3 does.

Requires ``stable-baselines3`` (extra ``sb3``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices

from gym_graphreset.core.inputs import env_device

__all__ = ["SB3VecEnv"]


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The numpy dtype of a torch dtype (``torch.float64`` -> ``float64``)."""
    return torch.empty(0, dtype=dtype).numpy().dtype


class SB3VecEnv(VecEnv):
    """A Stable-Baselines3 ``VecEnv`` over a SAME_STEP torch ``VectorEnv`` (e.g. the wrapper).

    Args:
        env: Usually a :class:`~gym_graphreset.FixedShapeAutoresetVectorEnv`; any vector env whose
            ``metadata["autoreset_mode"]`` is SAME_STEP and whose step returns torch tensors with a
            full-width ``info["final_obs"]`` on done rows.
    """

    def __init__(self, env: VectorEnv) -> None:
        mode = env.metadata.get("autoreset_mode")
        if mode != AutoresetMode.SAME_STEP:
            raise ValueError(
                f"SB3VecEnv needs a SAME_STEP vector env (wrap it in FixedShapeAutoresetVectorEnv), got {mode}"
            )
        if not isinstance(env.single_observation_space, gym.spaces.Box):
            raise ValueError(f"SB3VecEnv supports Box observations, got {env.single_observation_space}")
        self.env = env
        self.device = env_device(env)
        super().__init__(env.num_envs, env.single_observation_space, env.single_action_space)
        self._actions: torch.Tensor | None = None
        self._obs_shape: tuple[int, ...] = tuple(env.single_observation_space.shape or ())
        self._obs_dim = int(np.prod(self._obs_shape))
        self._start = time.perf_counter()

    # ------------------------------------------------------------------ stepping

    def reset(self) -> np.ndarray:
        """Reset every env (with the seed set by :meth:`seed`, if any) and return numpy observations."""
        seed = self._seeds[0]
        options = self._batched_options()
        obs, _ = self.env.reset(seed=seed, options=options)
        self._reset_seeds()
        self._reset_options()
        host = obs.reshape(self.num_envs, -1).cpu().numpy()
        # A copy: on the CPU `.numpy()` is a view of the env's published buffer, which the ring rewrites
        # `published_buffer_depth` steps later (SB3 keeps the reset obs as `_last_obs`).
        return host.reshape(self.num_envs, *self._obs_shape).copy()

    def step_async(self, actions: np.ndarray) -> None:
        """Move the actions to the env's device with the action space's dtype."""
        space = self.action_space
        dtype = torch.float32 if isinstance(space, gym.spaces.Box) else torch.long
        expected = (self.num_envs, *(space.shape or ()))
        try:
            array = np.asarray(actions)
        except (TypeError, ValueError) as err:
            raise ValueError(f"actions must be an array of shape {expected}, got {type(actions).__name__}") from err
        if array.dtype.kind not in "biuf":
            raise ValueError(f"actions must be numeric (shape {expected}), got dtype {array.dtype}")
        if array.shape != expected and not (array.size == int(np.prod(expected)) and array.ndim <= 1):
            raise ValueError(f"actions must have shape {expected} (one row per env), got {array.shape}")
        if dtype == torch.long and array.dtype.kind not in "iu":
            raise ValueError(
                f"actions must have an integer dtype for a {type(space).__name__} action space (a cast would "
                f"truncate them silently), got {array.dtype}"
            )
        self._actions = torch.as_tensor(array.reshape(expected), device=self.device).to(dtype)

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Step on the device, then one device-to-host copy of everything SB3 needs."""
        if self._actions is None:
            raise RuntimeError("step_wait() called before step_async()")
        obs, reward, terminated, truncated, info = self.env.step(self._actions)
        n, d = self.num_envs, self._obs_dim
        final_obs = info.get("final_obs", obs)
        episode = info.get("episode")
        scalars = [reward.reshape(n, 1), terminated.reshape(n, 1), truncated.reshape(n, 1)]
        if episode is not None:
            scalars += [episode["r"].reshape(n, 1), episode["l"].reshape(n, 1)]
        columns = [
            obs.reshape(n, d),
            final_obs.reshape(n, d).to(obs.dtype),
            torch.cat([c.to(torch.float64) for c in scalars], dim=1),
        ]
        # Each column keeps its dtype (observations exact, as reset returns them: a float64 or int64
        # observation through float32 would round), packed as bytes for the one device-to-host copy.
        host = torch.cat([c.contiguous().view(torch.uint8).reshape(n, -1) for c in columns], dim=1).cpu().numpy()
        obs_dtype, width = _numpy_dtype(obs.dtype), d * obs.element_size()
        shape = self._obs_shape
        obs_np = host[:, :width].view(obs_dtype).reshape(n, *shape)
        final_np = host[:, width : 2 * width].view(obs_dtype).reshape(n, *shape)
        values = host[:, 2 * width :].view(np.float64)  # reward, terminated, truncated[, episode r, l]
        reward_np = values[:, 0].astype(np.float32)
        term_np, trunc_np = values[:, 1] > 0.5, values[:, 2] > 0.5
        dones = term_np | trunc_np
        infos: list[dict[str, Any]] = [{} for _ in range(n)]
        elapsed = round(time.perf_counter() - self._start, 6)
        for i in np.flatnonzero(dones):
            row: dict[str, Any] = {
                "terminal_observation": final_np[i],
                "TimeLimit.truncated": bool(trunc_np[i] and not term_np[i]),
            }
            if episode is not None:
                row["episode"] = {"r": float(values[i, 3]), "l": int(values[i, 4]), "t": elapsed}
            infos[i] = row
        return obs_np, reward_np, dones, infos

    def close(self) -> None:
        """Close the wrapped env."""
        self.env.close()

    # ------------------------------------------------------------------ the VecEnv attribute API

    def _indices(self, indices: VecEnvIndices) -> list[int]:
        return list(self._get_indices(indices))

    def _batched_options(self) -> dict[str, Any] | None:
        """The one options dict of the batched env: SB3 keeps one per index, so they must agree."""
        given = [o for o in self._options if o]
        if not given:
            return None
        if any(o != given[0] for o in given) or len(given) != self.num_envs:
            raise ValueError(
                "set_options() gave different options to different indices, but the batched env takes one "
                "options dict for all rows: pass one dict (set_options(options)), or a reset_mask inside it"
            )
        return dict(given[0])

    def _sub_envs(self) -> list[gym.Env] | None:
        """The per-index Gymnasium envs of a ``SyncVectorEnv`` at the bottom of the chain, if any."""
        env: Any = self.env
        while isinstance(env, gym.vector.VectorWrapper):
            env = env.env
        return list(env.envs) if isinstance(env, gym.vector.SyncVectorEnv) else None

    def _batched_attr(self, name: str) -> Any:
        """An attribute of the batched env: the first member of its wrapper chain that has it."""
        env: Any = self.env
        while True:
            if name in dir(env):
                return getattr(env, name)
            if not isinstance(env, gym.vector.VectorWrapper):
                raise AttributeError(
                    f"{type(self.env).__name__} (a batched torch env: no per-index sub-envs) and the envs it wraps "
                    f"have no attribute {name!r}"
                )
            env = env.env

    def _all_indices(self, indices: VecEnvIndices, what: str) -> None:
        if self._indices(indices) != list(range(self.num_envs)):
            raise ValueError(
                f"{what} on a subset of indices: {type(self.env).__name__} is one batched env with no per-index "
                "sub-envs; leave indices=None (it applies to every row)"
            )

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """Per index: the sub-env's attribute (``SyncVectorEnv`` inside), else the batched env's, repeated."""
        subs = self._sub_envs()
        if subs is not None:
            return [subs[i].get_wrapper_attr(attr_name) for i in self._indices(indices)]
        value = self._batched_attr(attr_name)
        return [value for _ in self._indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set the attribute on each indexed sub-env, or on the batched env (indices must then be all)."""
        subs = self._sub_envs()
        if subs is not None:
            for i in self._indices(indices):
                subs[i].set_wrapper_attr(attr_name, value)
            return
        self._all_indices(indices, "set_attr")
        env: Any = self.env
        while attr_name not in dir(env) and isinstance(env, gym.vector.VectorWrapper):
            env = env.env
        setattr(env if attr_name in dir(env) else self.env, attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        """Call the method on each indexed sub-env, or once on the batched env (result repeated per index)."""
        subs = self._sub_envs()
        if subs is not None:
            return [
                subs[i].get_wrapper_attr(method_name)(*method_args, **method_kwargs) for i in self._indices(indices)
            ]
        result = self._batched_attr(method_name)(*method_args, **method_kwargs)
        return [result for _ in self._indices(indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """Per index: whether the vector chain, or that index's sub-env chain, contains ``wrapper_class``."""
        env: Any = self.env
        in_chain = False
        while not in_chain:
            in_chain = isinstance(env, wrapper_class)
            if not isinstance(env, (gym.vector.VectorWrapper, gym.Wrapper)):
                break
            env = env.env
        subs = self._sub_envs()

        def wrapped(sub: Any) -> bool:
            while isinstance(sub, gym.Wrapper):
                if isinstance(sub, wrapper_class):
                    return True
                sub = sub.env
            return isinstance(sub, wrapper_class)

        return [in_chain or (subs is not None and wrapped(subs[i])) for i in self._indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        """One ``(h, w, 3)`` frame per rendered world, for SB3's ``VecEnv.render()`` and ``VecVideoRecorder``.

        The env must be built with ``render_mode="rgb_array"``; ``render_worlds=[0]`` films one world
        (SB3 tiles every frame it gets, and each is a CPU render).

        Raises:
            NotImplementedError: the env was built without ``render_mode="rgb_array"``.
        """
        if self.render_mode != "rgb_array":
            raise NotImplementedError(
                f"{type(self.env).__name__} does not render (render_mode={self.render_mode!r}): build the env with "
                'render_mode="rgb_array" (and render_worlds=[0] for one world) for SB3\'s render() and '
                "VecVideoRecorder"
            )
        frames = self.env.render()
        return [np.asarray(frame) for frame in frames] if frames is not None else [None] * self.num_envs

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Seed the next reset (the batched env derives every row's draws from one seed)."""
        return super().seed(seed)

    def _get_indices(self, indices: VecEnvIndices) -> Iterable[int]:
        return super()._get_indices(indices)
