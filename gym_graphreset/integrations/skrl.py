"""skrl adapter: a torch ``Wrapper`` over a same-step torch vector env, and a PPO with the right bootstrap.

- :class:`SkrlEnv`: skrl's env interface over the wrapper, on its device and in torch (skrl's own
  ``wrap_env`` picks a Gymnasium wrapper that converts actions to numpy, and its ``"isaaclab"`` flavour
  wants ``obs["policy"]``). Rewards and flags are ``(num_envs, 1)``; ``state()`` is the ``critic``
  group where the env returns one; ``infos`` adds ``final_observations`` / ``final_states`` (the last
  observation of every episode that ended, valid on done rows) and ``log`` (the mean return and length
  of the episodes that ended, 0-d device tensors: ``SequentialTrainer(cfg={"environment_info": "log"})``
  logs them). Its ``step`` makes no host read (on the masked presets and the whole-step graph).
- :class:`FinalObsPPO`: skrl's PPO whose time-limit bootstrap uses the **final** observation,
  ``r + gamma * V(s_final)`` on rows truncated and not terminated. skrl's own
  ``time_limit_bootstrap`` evaluates the *next* observation, which after an autoreset is the next
  episode's first. GAE's last value still comes from the observation the rollout continues from, and
  truncated rows are cut from GAE as skrl does.
- :func:`ppo_agent`: a :class:`FinalObsPPO` with skrl's Gaussian policy and value MLPs (the value MLP
  on the ``critic`` group where the env has one) and a rollout memory, so a training script stays a
  few lines.

skrl's trainer and agent read the host on their own each step where they log (``write_interval`` > 0:
``nonzero`` and ``.item()`` for episode rewards; ``environment_info``: one ``.item()`` per logged value);
set ``write_interval=0`` and leave ``environment_info`` unmatched for a rollout without host reads.

Requires ``skrl`` (extra ``skrl``; written against 2.1).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import VectorEnv
from skrl.agents.torch import Agent
from skrl.agents.torch.ppo import PPO
from skrl.envs.wrappers.torch.base import Wrapper
from skrl.memories.torch import RandomMemory
from skrl.utils.model_instantiators.torch import deterministic_model, gaussian_model

from gym_graphreset.core.inputs import env_device
from gym_graphreset.integrations.common import EpisodeLog, check_same_step, observation_groups

__all__ = ["FinalObsPPO", "SkrlEnv", "ppo_agent"]


def _flat(x: torch.Tensor, num_envs: int) -> torch.Tensor:
    return x.reshape(num_envs, -1)


class SkrlEnv(Wrapper):
    """skrl's single-agent torch env interface over a SAME_STEP torch vector env.

    The first :meth:`reset` resets the env (with ``seed``); later calls return the current observations
    (the env resets its own rows), as skrl's Isaac Lab wrapper does, so ``trainer.train()`` may be called
    again to continue.

    Args:
        env: Usually a :class:`~gym_graphreset.FixedShapeAutoresetVectorEnv` (any preset), with ``Box``
            observations (a tensor, or a dict of groups with ``policy`` and optionally ``critic``) and a
            ``Box`` or ``Discrete`` action space.
        seed: The seed of the first reset.
    """

    def __init__(self, env: VectorEnv, *, seed: int | None = None) -> None:
        check_same_step(env, "SkrlEnv", min_ring_depth=2)  # skrl records obs(t) after step t+1
        space = env.single_action_space
        if not isinstance(space, (gym.spaces.Box, gym.spaces.Discrete)):
            raise ValueError(f"SkrlEnv needs a Box or Discrete action space, got {space}")
        super().__init__(env)
        self._device = env_device(env)
        self._n = env.num_envs
        obs_space = env.single_observation_space
        groups = dict(obs_space.spaces) if isinstance(obs_space, gym.spaces.Dict) else {"policy": obs_space}
        if "policy" not in groups or not all(isinstance(s, gym.spaces.Box) for s in groups.values()):
            raise ValueError(
                "SkrlEnv needs a Box observation space, or a Dict of Box groups with 'policy' (and optionally "
                f"'critic'), got {obs_space}"
            )
        self._groups = groups
        self._seed = seed
        self._reset_once = True
        self._observations: torch.Tensor | None = None
        self._states: torch.Tensor | None = None
        self._log = EpisodeLog(self._n, self._device)

    @property
    def num_envs(self) -> int:
        """Rows of the batched env."""
        return self._n

    @property
    def observation_space(self) -> gym.Space:
        """One row's ``policy`` observation space."""
        return self._groups["policy"]

    @property
    def state_space(self) -> gym.Space | None:
        """One row's ``critic`` observation space, if the env has that group."""
        return self._groups.get("critic")

    @property
    def action_space(self) -> gym.Space:
        """One row's action space."""
        return self._env.single_action_space

    def _split(self, obs: Any, where: str) -> tuple[torch.Tensor, torch.Tensor | None]:
        groups = observation_groups(obs, where)
        critic = groups.get("critic")
        return _flat(groups["policy"], self._n), None if critic is None else _flat(critic, self._n)

    def reset(self) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset the env the first time (with ``seed``); afterwards, the current observations."""
        if self._reset_once:
            obs, info = self._env.reset(seed=self._seed)
            self._observations, self._states = self._split(obs, "the env's observation")
            self._reset_once = False
            return self._observations, info
        assert self._observations is not None
        return self._observations, {}

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, Any]:
        """Step the env: ``(obs, reward, terminated, truncated, infos)`` as skrl expects, no host read."""
        space = self.action_space
        if isinstance(space, gym.spaces.Discrete):
            actions = actions.reshape(self._n).to(torch.long)
        else:
            actions = actions.reshape(self._n, *(space.shape or ()))
        obs, reward, terminated, truncated, info = self._env.step(actions)
        self._observations, self._states = self._split(obs, "the env's observation")
        if "final_obs" in info:
            final_obs, final_states = self._split(info["final_obs"], 'info["final_obs"]')
        else:  # the selected-row path publishes it only on steps where a row ended
            final_obs, final_states = self._observations, self._states
        done = terminated | truncated
        infos = {
            **info,
            "final_observations": final_obs,
            "final_states": final_states,
            "log": self._log.update(reward, done, info),
        }
        return self._observations, reward.reshape(-1, 1), terminated.reshape(-1, 1), truncated.reshape(-1, 1), infos

    def state(self) -> torch.Tensor | None:
        """The ``critic`` group of the current observations (``None`` when the env has none)."""
        return self._states

    def render(self, *args: Any, **kwargs: Any) -> None:
        """The library's batched envs do not render."""
        return None

    def close(self) -> None:
        """Close the wrapped env."""
        self._env.close()


class FinalObsPPO(PPO):
    """skrl's PPO bootstrapping time-outs from the final observation (``infos["final_observations"]``).

    Only rows that were truncated and not terminated are bootstrapped (a row that did both ended in a
    terminal state: its return stops there), as the rsl_rl and SB3 adapters do.

    ``cfg.time_limit_bootstrap`` is turned on: it makes GAE cut the truncated rows (their next value is
    the reward's bootstrap, not the next episode's first value); the bootstrap itself is this class's.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cfg.time_limit_bootstrap = True

    def record_transition(
        self,
        *,
        observations: torch.Tensor,
        states: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        next_observations: torch.Tensor,
        next_states: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        infos: Any,
        timestep: int,
        timesteps: int,
    ) -> None:
        """Record the transition, time-out rows' rewards bootstrapped with ``V(final observation)``."""
        Agent.record_transition(  # skrl's episode tracking; PPO's own storing is below
            self,
            observations=observations,
            states=states,
            actions=actions,
            rewards=rewards,
            next_observations=next_observations,
            next_states=next_states,
            terminated=terminated,
            truncated=truncated,
            infos=infos,
            timestep=timestep,
            timesteps=timesteps,
        )
        if not self.training:
            return
        if not isinstance(infos, dict) or "final_observations" not in infos:
            raise ValueError("FinalObsPPO needs infos['final_observations'] (SkrlEnv provides it)")
        self._current_next_observations = next_observations  # GAE's last value: where the rollout continues
        self._current_next_states = next_states
        if self.cfg.rewards_shaper is not None:
            rewards = self.cfg.rewards_shaper(rewards, timestep, timesteps)
        with torch.no_grad(), torch.autocast(device_type=self._device_type, enabled=self.cfg.mixed_precision):
            inputs = {
                "observations": self._observation_preprocessor(infos["final_observations"]),
                "states": self._state_preprocessor(infos["final_states"]),
            }
            final_values, _ = self.value.act(inputs, role="value")
            final_values = self._value_preprocessor(final_values, inverse=True)
        time_outs = truncated & ~terminated  # a row that also terminated has no future to bootstrap
        rewards = rewards + self.cfg.discount_factor * final_values * time_outs
        self.memory.add_samples(
            observations=observations,
            states=states,
            actions=actions,
            rewards=rewards,
            terminated=terminated,
            truncated=truncated,
            log_prob=self._current_log_prob,
            values=self._current_values,
        )


def ppo_agent(env: SkrlEnv, *, hidden: tuple[int, ...] = (64, 64), activation: str = "elu", **cfg: Any) -> FinalObsPPO:
    """A :class:`FinalObsPPO` for ``env``: Gaussian policy and value MLPs, a rollout memory.

    The policy reads the ``policy`` group; the value network reads the ``critic`` group
    (:attr:`SkrlEnv.state_space`, skrl's states) when the env has one, else the ``policy`` group.

    Args:
        env: The adapted env (continuous actions).
        hidden: Hidden layer sizes of both MLPs.
        activation: Their activation (skrl's names: ``"elu"``, ``"relu"``, ``"tanh"``...).
        **cfg: skrl's ``PPO_CFG`` fields (``rollouts``, ``learning_epochs``, ``mini_batches``,
            ``learning_rate``, ...); ``rollouts`` (default 16) also sizes the memory.
    """
    if not isinstance(env.action_space, gym.spaces.Box):
        raise ValueError(f"ppo_agent builds a Gaussian policy: it needs a Box action space, got {env.action_space}")
    spaces = {"observation_space": env.observation_space, "state_space": env.state_space}
    device = env.device

    def net(source: str) -> list[dict[str, Any]]:
        return [{"name": "net", "input": source, "layers": list(hidden), "activations": activation}]

    critic_input = "OBSERVATIONS" if env.state_space is None else "STATES"  # the env's critic group, if any
    policy = gaussian_model(
        **spaces, action_space=env.action_space, device=device, network=net("OBSERVATIONS"), output="ACTIONS"
    )
    value = deterministic_model(
        **spaces, action_space=env.action_space, device=device, network=net(critic_input), output="ONE"
    )
    cfg.setdefault("rollouts", 16)
    memory = RandomMemory(memory_size=cfg["rollouts"], num_envs=env.num_envs, device=device)
    return FinalObsPPO(
        models={"policy": policy, "value": value},
        memory=memory,
        action_space=env.action_space,
        device=device,
        cfg=cfg,
        **spaces,
    )
