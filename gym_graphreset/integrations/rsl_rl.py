"""rsl_rl adapter: a ``rsl_rl.env.VecEnv`` over a same-step torch vector env, and what training needs.

- :class:`RslRlVecEnv`: observations as a ``TensorDict`` of groups (``policy``, and ``critic`` where the
  env returns one); ``extras["time_outs"]`` = truncated and not terminated; ``extras["final_obs"]``, the
  groups of the last observation of every episode that ended (valid on done rows), for time-out
  bootstrapping; ``episode_length_buf``, a writable view of the env's step counter, so
  ``runner.learn(..., init_at_random_ep_len=True)`` really starts episodes at random lengths;
  ``extras["log"]``, the mean return and length of the episodes that ended, as 0-d device tensors, and
  with ``episode_reward_every`` (for a task with ``info["reward_terms"]``, Go1) mjlab's
  ``Episode_Reward/<term>`` (:func:`episode_reward_extras`) and, for a task that has them, its
  ``Metrics/<command>/<key>`` (motion tracking) and ``Curriculum/<term>/mean|max`` (terrain levels;
  :class:`~gym_graphreset.integrations.common.ResetMetricLog`). Its ``step`` makes no host read (on the
  masked presets and the whole-step graph).
- :class:`FinalObsPPO`: rsl_rl's PPO, bootstrapping time-outs from the value of the **final**
  observation, ``r + gamma * V(s_final)``, where stock PPO uses ``V(s_t)``, the observation before the
  step. Select it in the runner config: ``cfg["algorithm"]["class_name"] =
  "gym_graphreset.integrations.rsl_rl:FinalObsPPO"``.
- :class:`SyncFreeOnPolicyRunner`: rsl_rl's ``OnPolicyRunner`` without its per-step host reads. Stock,
  each rollout step reads the host for its NaN check (one ``.any()`` per observation group, the rewards
  and the dones) and, with a log directory, in its logger (``nonzero`` and two ``.cpu()`` copies of the
  finished episodes). This runner turns the NaN check off unless the config sets ``check_for_nan`` (the
  wrapper already latches non-finite observations and rewards on the device and raises them at its next
  poll) and sums finished episodes on the device, read once per iteration when it logs.

Requires ``rsl-rl-lib`` (extra ``rsl_rl``; written against 5.5, also tested with 5.4).
"""

from __future__ import annotations

import math
import sys
import warnings
from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import VectorEnv
from rsl_rl.algorithms import PPO
from rsl_rl.env import VecEnv
from rsl_rl.runners import OnPolicyRunner
from rsl_rl.utils.logger import Logger
from tensordict import TensorDict

from gym_graphreset.core.inputs import env_device
from gym_graphreset.integrations.common import (
    EpisodeClock,
    EpisodeLog,
    ResetMetricLog,
    RewardTermLog,
    check_same_step,
    episode_clock,
    observation_groups,
)

__all__ = [
    "DeviceEpisodeLogger",
    "FinalObsPPO",
    "RslRlVecEnv",
    "StepLog",
    "SyncFreeOnPolicyRunner",
    "episode_reward_extras",
]


class StepLog(dict[str, Any]):
    """``extras["log"]`` of one step: a dict whose NaN entries are left out when it is read as a mapping.

    A per-step mean is NaN while nothing it averages has happened yet (``/episode/mean_return`` before
    the first episode ends). Deciding that in the step would read the host, so the dict keeps the 0-d
    device tensors and decides when it is read as a mapping (iterated, ``in``-tested, ``keys()``,
    ``items()``): rsl_rl's logger does that once per iteration, when it logs (its step already read the
    host), so it never logs NaN. Indexing gives the value as it is (NaN included).
    """

    _nan: set[str] | None = None

    def _hidden(self) -> set[str]:
        """The keys of NaN 0-d entries: one host read of them all, the first time the dict is read as a mapping."""
        if self._nan is None:
            entries = {k: v for k, v in dict.items(self) if isinstance(v, torch.Tensor) and v.dim() == 0}
            entries = {k: v for k, v in entries.items() if v.is_floating_point()}
            nan = torch.stack([v.isnan() for v in entries.values()]).tolist() if entries else []
            self._nan = {k for k, is_nan in zip(entries, nan, strict=True) if is_nan}
        return self._nan

    def __setitem__(self, key: str, value: Any) -> None:
        dict.__setitem__(self, key, value)
        if self._nan is not None:  # the value written is shown (rsl_rl's logger rewrites each as a 1-d tensor)
            self._nan.discard(key)

    def update(self, *args: Any, **kwargs: Any) -> None:
        """As ``dict.update``; NaN entries are found again at the next read."""
        dict.update(self, *args, **kwargs)
        self._nan = None

    def __ior__(self, other: Any) -> StepLog:  # type: ignore[override,misc]
        self.update(other)
        return self

    def __iter__(self) -> Any:
        hidden = self._hidden()
        return iter([k for k in dict.__iter__(self) if k not in hidden])

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) and key not in self._hidden()

    def __len__(self) -> int:
        return len(list(iter(self)))

    def keys(self) -> Any:
        """The keys whose values are not NaN."""
        return list(iter(self))

    def items(self) -> Any:
        """The entries whose values are not NaN."""
        return [(k, dict.__getitem__(self, k)) for k in iter(self)]

    def values(self) -> Any:
        """The values that are not NaN."""
        return [dict.__getitem__(self, k) for k in iter(self)]


def episode_reward_extras(log: RewardTermLog, clear: bool = True) -> dict[str, torch.Tensor]:
    """The ``Episode_Reward/<term>`` entries of mjlab for ``extras["log"]``, from a reward-term log.

    ``log`` is a :class:`~gym_graphreset.integrations.common.RewardTermLog`.

    Each is a 0-d device tensor: the mean, over the steps with resets since the last clear, of that step's
    mean over its reset rows of the term's weighted, dt-scaled episode sum divided by the configured episode
    length in seconds (:meth:`~gym_graphreset.integrations.common.RewardTermLog.mjlab_means`); NaN when no
    row reset. rsl_rl's logger averages the values it is handed in an iteration, so handing it one such value
    per iteration (at its last step) logs exactly what mjlab's env and logger log together. No host read.
    """
    means = log.mjlab_means(clear=clear)
    return {f"Episode_Reward/{name}": means[i] for i, name in enumerate(log.names)}


def _warn_if_stepped(env: VectorEnv) -> None:
    """Warn when the task env under ``env`` has stepped: the reset at construction would judge every episode."""
    tasks = sys.modules.get("gym_graphreset.managers.manager_based_env")  # loaded if a task-layer env was made
    task = env.unwrapped
    if tasks is not None and isinstance(task, tasks.ManagerBasedEnv) and (stepped := int(task.common_step)) > 0:
        warnings.warn(
            f"RslRlVecEnv resets {type(task).__name__}, which has stepped {stepped} times: that reset ends every "
            "row's episode and reset-time rules judge them (the terrain curriculum lowers nearly every level). "
            "Wrap the env before stepping it, or write its `common_step` back to 0 after a warm-up "
            "(`env.unwrapped.common_step.zero_()`)",
            UserWarning,
            stacklevel=3,
        )


class RslRlVecEnv(VecEnv):
    """An ``rsl_rl.env.VecEnv`` over a SAME_STEP torch vector env with a ``Box`` action space.

    The env is reset at construction (rsl_rl asks for observations before the first step). On a task env
    that has already stepped (a warm-up, say) that reset ends every row's episode, and reset-time rules judge
    those episodes: the terrain curriculum lowers nearly every level. Such an env is warned about: wrap the
    env before stepping it, or write the task env's ``common_step`` back to 0 after the warm-up (levels do not
    move at a reset at step 0).

    Args:
        env: Usually a :class:`~gym_graphreset.FixedShapeAutoresetVectorEnv` (any preset). Its observation
            is a tensor (the ``policy`` group) or a dict of groups with ``policy`` (and e.g. ``critic``).
        seed: The seed of the first reset.
        max_episode_length: The horizon rsl_rl reads; default the env's ``max_episode_steps`` (its
            :class:`~gym_graphreset.integrations.common.EpisodeClock`), which a value given must equal.
            Required when the env has none.
        episode_reward_every: Every this many steps, ``extras["log"]`` also carries mjlab's
            ``Episode_Reward/<term>`` over those steps (:func:`episode_reward_extras`), and the task's
            ``Metrics/<command>/<key>`` and ``Curriculum/<term>/mean|max`` where it has them
            (:class:`~gym_graphreset.integrations.common.ResetMetricLog`). Set it to the runner's
            ``num_steps_per_env``: each logged iteration then gets mjlab's value of that iteration. Needs a
            task with reward terms (Go1, wrapped in :class:`~gym_graphreset.FixedShapeAutoresetVectorEnv`).

    Attributes:
        reward_terms: The per-term episode sums (a :class:`~gym_graphreset.integrations.common.RewardTermLog`)
            when ``episode_reward_every`` is set, else ``None``.
        reset_metrics: The task's reset-time metrics and curricula (a
            :class:`~gym_graphreset.integrations.common.ResetMetricLog`) when ``episode_reward_every`` is set
            and the task has some, else ``None``.
        episode_reward: The ``Episode_Reward/<term>`` entries last put in ``extras["log"]`` (empty before).
        mjlab_log: Every mjlab entry last put in ``extras["log"]``: ``Episode_Reward/<term>``, then
            ``Metrics/...`` and ``Curriculum/...`` (empty before).
    """

    def __init__(
        self,
        env: VectorEnv,
        *,
        seed: int | None = None,
        max_episode_length: int | None = None,
        episode_reward_every: int | None = None,
    ) -> None:
        check_same_step(env, "RslRlVecEnv", min_ring_depth=2)  # PPO stores obs(t) after step t+1
        if episode_reward_every is not None and episode_reward_every < 1:
            raise ValueError(f"`episode_reward_every` must be None or >= 1, got {episode_reward_every!r}")
        self.reward_terms = RewardTermLog.for_env(env) if episode_reward_every is not None else None
        if episode_reward_every is not None and self.reward_terms is None:
            raise ValueError(
                "`episode_reward_every` needs a task that reports info['reward_terms'] (Go1-Velocity-Flat-v0 in "
                f"FixedShapeAutoresetVectorEnv), got {type(env).__name__}"
            )
        self.reset_metrics = ResetMetricLog.for_env(env) if episode_reward_every is not None else None
        self.episode_reward_every = episode_reward_every
        self.episode_reward: dict[str, torch.Tensor] = {}
        self.mjlab_log: dict[str, torch.Tensor] = {}
        self._steps = 0
        space = env.single_action_space
        if not isinstance(space, gym.spaces.Box):
            raise ValueError(f"RslRlVecEnv needs a Box action space (rsl_rl's policies are continuous), got {space}")
        self.env = env
        self.num_envs = env.num_envs
        self.device = env_device(env)
        self.action_shape = tuple(space.shape or ())
        self.num_actions = math.prod(self.action_shape)
        self.clock = episode_clock(env)
        self.max_episode_length = _check_horizon(max_episode_length, self.clock)
        self.cfg: dict[str, Any] = {"env": type(env).__name__, "num_envs": self.num_envs}
        self.log = EpisodeLog(self.num_envs, self.device)
        _warn_if_stepped(env)
        obs, _ = env.reset(seed=seed)
        self._obs = self._groups(obs, "the env's observation")
        self.info: dict[str, Any] = {}
        """The env's ``info`` of the last step (e.g. ``info["reward_terms"]``), valid until the next step."""

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """``(num_envs,)`` int64: each row's steps in its episode (the env's own counter, when it has one)."""
        if self.clock is None:
            raise AttributeError(
                "the env has no episode clock (`elapsed` and `max_episode_steps`), so its episode lengths cannot "
                "be read or randomised; do not pass init_at_random_ep_len=True"
            )
        return self.clock.elapsed

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        """Write each row's step count in place (rsl_rl assigns a random one to spread episode ends).

        The counts must be integers in ``[0, max_episode_length]`` (checked with one host read).
        """
        buf = self.episode_length_buf
        if not isinstance(value, torch.Tensor) or value.shape != buf.shape:
            raise ValueError(
                f"`episode_length_buf` must be a tensor of shape {tuple(buf.shape)}, got "
                f"{getattr(value, 'shape', type(value).__name__)}"
            )
        if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
            raise ValueError(f"`episode_length_buf` must hold integer step counts, got dtype {value.dtype}")
        horizon = self.max_episode_length
        low, high = (int(v) for v in torch.stack((value.min(), value.max())).tolist())  # host read: set once
        if low < 0 or high > horizon:
            raise ValueError(
                f"`episode_length_buf` values must lie in [0, max_episode_length={horizon}] (steps into the "
                f"episode), got values in [{low}, {high}]"
            )
        buf.copy_(value)

    def _groups(self, obs: Any, where: str) -> TensorDict:
        return TensorDict(observation_groups(obs, where), batch_size=[self.num_envs], device=self.device)

    def get_observations(self) -> TensorDict:
        """The observation groups of the last reset or step."""
        return self._obs

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step the env: ``(obs groups, rewards, dones, extras)`` with no host read of the adapter's own."""
        obs, reward, terminated, truncated, info = self.env.step(actions.reshape(self.num_envs, *self.action_shape))
        self.info = info
        dones = terminated | truncated
        self._obs = self._groups(obs, "the env's observation")
        final = self._groups(info["final_obs"], 'info["final_obs"]') if "final_obs" in info else self._obs
        extras = {
            "time_outs": truncated & ~terminated,
            "final_obs": final,
            "log": StepLog(self.log.update(reward, dones, info)),
        }
        if self.reward_terms is not None and self.episode_reward_every is not None:
            self.reward_terms.add(info, dones)
            if self.reset_metrics is not None:
                self.reset_metrics.add(info, dones)
            self._steps += 1  # a Python counter: no host read
            if self._steps % self.episode_reward_every == 0:
                self.episode_reward = episode_reward_extras(self.reward_terms)
                self.mjlab_log = dict(self.episode_reward)
                if self.reset_metrics is not None:
                    self.mjlab_log |= self.reset_metrics.means()
                extras["log"] |= self.mjlab_log
        return self._obs, reward, dones, extras

    def close(self) -> None:
        """Close the wrapped env."""
        self.env.close()


def _check_horizon(max_episode_length: Any, clock: EpisodeClock | None) -> int:
    """``max_episode_length`` checked against the env's own horizon (its clock's), or the clock's."""
    if max_episode_length is None:
        if clock is None:
            raise ValueError(
                "RslRlVecEnv needs `max_episode_length`: the env has no episode clock (an `elapsed` step counter "
                "and `max_episode_steps`, as the library's envs have)"
            )
        return clock.max_episode_steps
    if isinstance(max_episode_length, bool) or not isinstance(max_episode_length, int) or max_episode_length < 1:
        raise ValueError(f"`max_episode_length` must be an int >= 1, got {max_episode_length!r}")
    if clock is not None and max_episode_length != clock.max_episode_steps:
        raise ValueError(
            f"`max_episode_length={max_episode_length}` but the env truncates at max_episode_steps="
            f"{clock.max_episode_steps} (its episode clock); leave it out, or pass {clock.max_episode_steps}"
        )
    return max_episode_length


class FinalObsPPO(PPO):
    """PPO that bootstraps time-outs from the final observation: ``r + gamma * V(s_final)`` on those rows.

    Stock rsl_rl adds ``gamma * V(s_t)``, the value of the observation *before* the step, as a stand-in
    for the unseen next state. With a same-step env the true last observation is there
    (``extras["final_obs"]``, from :class:`RslRlVecEnv`), so this uses it. GAE is unchanged: the rollout
    continues from the observation the env returned (the next episode's first on done rows), and a done
    row's next value is masked out as before.
    """

    def __init__(self, actor: Any, critic: Any, storage: Any, **kwargs: Any) -> None:
        if critic.is_recurrent:
            raise ValueError(
                "FinalObsPPO evaluates the critic on final observations outside the rollout's sequence, "
                "which a recurrent critic cannot do; use rsl_rl's PPO"
            )
        super().__init__(actor, critic, storage, **kwargs)

    def process_env_step(
        self, obs: TensorDict, rewards: torch.Tensor, dones: torch.Tensor, extras: dict[str, Any]
    ) -> None:
        """Record the step with time-out rewards bootstrapped from ``V(final_obs)``."""
        if "time_outs" not in extras or "final_obs" not in extras:
            raise ValueError(
                "FinalObsPPO needs extras['time_outs'] and extras['final_obs'] (RslRlVecEnv provides both), "
                f"got keys {sorted(extras)}"
            )
        time_outs = extras["time_outs"].to(self.device)
        final_values = self.critic(extras["final_obs"].to(self.device)).detach().reshape(-1)
        rewards = rewards + self.gamma * final_values * time_outs
        super().process_env_step(obs, rewards, dones, {k: v for k, v in extras.items() if k != "time_outs"})


class DeviceEpisodeLogger(Logger):
    """rsl_rl's logger, summing finished episodes on the device: no host read per step, one per iteration.

    "Mean reward" and "Mean episode length" are those of the episodes that ended in the logged iteration
    (stock: the last 100 episodes). With RND (intrinsic rewards) it falls back to the stock per-step path.

    Args:
        *args: rsl_rl's ``Logger`` arguments.
        episode_log: The adapter's :class:`~gym_graphreset.integrations.common.EpisodeLog`
            (``RslRlVecEnv.log``). Its ``extras["log"]`` keys (``Episode/mean_return``,
            ``Episode/mean_length``) are then logged as the means over the episodes that ended in the
            iteration, each episode counted once, and left out of an iteration where none ended. The
            stock logger averages the per-step values over the iteration's steps instead: a step where
            no row ended repeats the last means, so an episode counts once per step until the next one
            ends (the steps before the first episode ends are left out: :class:`StepLog`).
        **kwargs: rsl_rl's ``Logger`` keyword arguments.
    """

    def __init__(self, *args: Any, episode_log: EpisodeLog | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.finished = torch.zeros(3, dtype=torch.float64, device=self.device)  # sum of returns, of lengths, count
        self.episode_log = episode_log
        if episode_log is not None:
            episode_log.take_totals()  # count the episodes that end from here on

    def process_env_step(
        self,
        rewards: torch.Tensor,
        dones: torch.Tensor,
        extras: dict,
        intrinsic_rewards: torch.Tensor | None = None,
    ) -> None:
        """Accumulate the step on the device."""
        if self.writer is None:
            return
        if intrinsic_rewards is not None:
            super().process_env_step(rewards, dones, extras, intrinsic_rewards)
            return
        if "episode" in extras:
            self.ep_extras.append(extras["episode"])
        elif "log" in extras:
            keys = () if self.episode_log is None else self.episode_log.KEYS  # logged exactly, per iteration
            rest = StepLog({k: v for k, v in dict.items(extras["log"]) if k not in keys})  # read at log time
            if dict.__len__(rest):
                self.ep_extras.append(rest)
        self.cur_reward_sum += rewards
        self.cur_episode_length += 1
        done = dones.reshape(-1) > 0
        ended = torch.stack(
            (
                torch.where(done, self.cur_reward_sum, 0.0).sum(),
                torch.where(done, self.cur_episode_length, 0.0).sum(),
                done.sum(),
            )
        )
        self.finished += ended.to(torch.float64)
        self.cur_reward_sum.masked_fill_(done, 0.0)
        self.cur_episode_length.masked_fill_(done, 0.0)

    def log(self, *args: Any, **kwargs: Any) -> None:
        """Read the iteration's finished episodes (one host read), then log as rsl_rl does."""
        if self.writer is not None and not self.cfg["algorithm"].get("rnd_cfg"):
            log = self.episode_log
            logged = self.finished[:0] if log is None else log.take_totals().to(self.finished.device)
            values = torch.cat((logged, self.finished)).tolist()  # the one host read of the iteration
            returns, lengths, count = values[-3:]
            self.finished.zero_()
            if count:
                self.rewbuffer.clear()
                self.lenbuffer.clear()
                self.rewbuffer.append(returns / count)
                self.lenbuffer.append(lengths / count)
            if log is not None and values[2]:  # no episode ended: the keys are left out, as rsl_rl skips them
                means = (values[0] / values[2], values[1] / values[2])
                self.ep_extras.append(dict(zip(log.KEYS, map(torch.tensor, means), strict=True)))
        super().log(*args, **kwargs)


class SyncFreeOnPolicyRunner(OnPolicyRunner):
    """rsl_rl's ``OnPolicyRunner`` whose rollout steps make no host read (see the module docstring).

    Same arguments as ``OnPolicyRunner``. ``train_cfg["check_for_nan"]`` defaults to ``False`` here (the
    wrapper's deferred validation already checks observations and rewards on the device); set it to
    ``True`` for rsl_rl's per-step check. The default goes into a copy: the caller's ``train_cfg`` is not
    changed (a stock ``OnPolicyRunner`` built from it later keeps rsl_rl's check). :meth:`learn` called again
    continues the iteration count (stock rsl_rl leaves ``current_learning_iteration`` at the last iteration
    run, so ``learn(1)`` in a loop would run, log and save iteration 0 every time).
    """

    def __init__(self, env: VecEnv, train_cfg: dict, log_dir: str | None = None, device: str = "cpu") -> None:
        train_cfg = {"check_for_nan": False, **train_cfg}
        super().__init__(env, train_cfg, log_dir=log_dir, device=device)
        self.logger = DeviceEpisodeLogger(
            log_dir=log_dir,
            cfg=self.cfg,
            env_cfg=self.env.cfg,
            num_envs=self.env.num_envs,
            is_distributed=self.is_distributed,
            gpu_world_size=self.gpu_world_size,
            gpu_global_rank=self.gpu_global_rank,
            device=self.device,
            episode_log=env.log if isinstance(env, RslRlVecEnv) else None,
        )

    def learn(self, num_learning_iterations: int, init_at_random_ep_len: bool = False) -> None:
        """rsl_rl's ``learn``; afterwards ``current_learning_iteration`` is the next iteration to run."""
        start: int = self.current_learning_iteration  # type: ignore[has-type]  # rsl_rl's untyped attribute
        super().learn(num_learning_iterations, init_at_random_ep_len=init_at_random_ep_len)
        if num_learning_iterations > 0:
            self.current_learning_iteration = start + num_learning_iterations
