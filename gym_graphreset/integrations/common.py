"""What the trainer adapters share: the episode clock, observation groups, and device-side episode logs.

None of it reads the host: the adapters' steps stay sync-free on the masked presets (and under the
whole-step graph), whatever trainer sits on top.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Literal, Protocol, runtime_checkable

import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from gym_graphreset.core.autoreset_env import FixedShapeAutoresetVectorEnv
from gym_graphreset.core.inputs import env_device

__all__ = [
    "EpisodeClock",
    "EpisodeLog",
    "ResetMetricLog",
    "RewardTermLog",
    "autoreset_env",
    "check_same_step",
    "episode_clock",
    "observation_groups",
]


@runtime_checkable
class EpisodeClock(Protocol):
    """An env that counts each row's steps and truncates at a horizon (the library's envs do).

    Writing ``elapsed`` in place changes when rows truncate: that is how a trainer starts episodes at
    random lengths (rsl_rl's ``init_at_random_ep_len``).
    """

    elapsed: torch.Tensor
    """``(num_envs,)`` int64: steps in each row's current episode."""
    max_episode_steps: int
    """A row truncates once ``elapsed >= max_episode_steps``."""


def episode_clock(env: VectorEnv) -> EpisodeClock | None:
    """The first member of ``env``'s wrapper chain that is an :class:`EpisodeClock`, if any."""
    member: Any = env
    while True:
        if isinstance(member, EpisodeClock) and isinstance(member.elapsed, torch.Tensor):
            return member
        if not isinstance(member, VectorWrapper):
            return None
        member = member.env


def check_same_step(env: VectorEnv, adapter: str, min_ring_depth: int) -> None:
    """Refuse, by name, an env whose output this adapter cannot use as the trainer keeps it.

    Args:
        env: The env handed to the adapter.
        adapter: The adapter's name, for the messages.
        min_ring_depth: How many steps the trainer keeps a step's tensors (a persistent ring must hold them).
            The library's env is found through any wrapper chain (:func:`autoreset_env`).
    """
    mode = env.metadata.get("autoreset_mode")
    if mode != AutoresetMode.SAME_STEP:
        raise ValueError(
            f"{adapter} needs a SAME_STEP vector env (wrap it in FixedShapeAutoresetVectorEnv), got {mode}"
        )
    wrapper = autoreset_env(env, adapter)
    if (
        wrapper is not None
        and wrapper.config.persistent_buffers
        and wrapper.config.published_buffer_depth < min_ring_depth
    ):
        via = "" if wrapper is env else f" (found under {_chain_names(env, wrapper)})"
        raise ValueError(
            f"{adapter} keeps each step's tensors for {min_ring_depth} steps, but the env{via} publishes through a "
            f"ring of `published_buffer_depth={wrapper.config.published_buffer_depth}`; build it with "
            f"published_buffer_depth>={min_ring_depth}"
        )


def autoreset_env(env: VectorEnv, adapter: str) -> FixedShapeAutoresetVectorEnv | None:
    """The library's :class:`~gym_graphreset.FixedShapeAutoresetVectorEnv` in ``env``'s wrapper chain, if any.

    The chain is followed through Gymnasium ``VectorWrapper`` members (their declared ``env``). A member
    that is neither one nor the library's env but holds another vector env as ``env`` hides the rest of
    the chain: it is refused by name (wrap it as a ``VectorWrapper``, or hand the adapter the env below).

    Raises:
        ValueError: Such a member sits above the library's env, or where it may.
    """
    member: Any = env
    while not isinstance(member, FixedShapeAutoresetVectorEnv):
        if isinstance(member, VectorWrapper):
            member = member.env
            continue
        hidden = member.__dict__.get("env") if hasattr(member, "__dict__") else None
        if isinstance(hidden, VectorEnv):
            raise ValueError(
                f"{adapter} cannot see through {type(member).__name__} (a VectorEnv holding another vector env "
                "as `env` without being a gymnasium VectorWrapper), so it cannot check the ring depth of the "
                "env below it; make it a gymnasium.vector.VectorWrapper, or pass the env it wraps"
            )
        return None
    return member


def _chain_names(env: VectorEnv, bottom: VectorEnv) -> str:
    """``A -> B``: the wrappers between ``env`` and ``bottom``, outermost first."""
    names, member = [], env
    while member is not bottom and isinstance(member, VectorWrapper):
        names.append(type(member).__name__)
        member = member.env
    return " -> ".join(names)


def observation_groups(obs: Any, where: str) -> dict[str, torch.Tensor]:
    """``{"policy": obs}`` for a tensor; a dict of groups (which must hold ``"policy"``) as it is."""
    if isinstance(obs, torch.Tensor):
        return {"policy": obs}
    if isinstance(obs, dict) and "policy" in obs and all(isinstance(v, torch.Tensor) for v in obs.values()):
        return dict(obs)
    raise ValueError(
        f"{where} must be a tensor or a dict of tensors with a 'policy' group (and optionally 'critic'), got "
        f"{type(obs).__name__}" + (f" with keys {sorted(obs)}" if isinstance(obs, dict) else "")
    )


class EpisodeLog:
    """Mean return and length of the episodes that ended at a step, as 0-d tensors made on the device.

    Each step gives the means over that step's done rows; a step where no row ended repeats the last
    means (NaN before the first episode ends), so averaging the per-step values over an iteration weighs
    recent episodes without counting empty steps as zero. The exact means over the episodes that ended
    since the last :meth:`take_totals` (each episode counted once) are summed on the device too: a logger
    that reads once per iteration uses those (rsl_rl's
    :class:`~gym_graphreset.integrations.rsl_rl.DeviceEpisodeLogger` does). Returns come from the env's
    :class:`~gym_graphreset.EpisodeStatistics` term when it has one (``info["episode"]``: raw returns),
    else from the rewards the env returned, summed here. No host read, no full-width output.
    """

    def __init__(self, num_envs: int, device: torch.device) -> None:
        with torch.inference_mode(False):  # written every step, in any mode
            self.running_return = torch.zeros(num_envs, dtype=torch.float32, device=device)
            self.running_length = torch.zeros(num_envs, dtype=torch.float32, device=device)
            self.mean_return = torch.full((), float("nan"), dtype=torch.float32, device=device)
            self.mean_length = torch.full((), float("nan"), dtype=torch.float32, device=device)
            self.totals = torch.zeros(3, dtype=torch.float64, device=device)  # sum of returns, of lengths, count

    KEYS = ("Episode/mean_return", "Episode/mean_length")
    """The keys of the per-step means :meth:`update` returns."""

    def update(self, reward: torch.Tensor, done: torch.Tensor, info: dict[str, Any]) -> dict[str, torch.Tensor]:
        """Account for one step; return fresh 0-d tensors (a logger may keep each step's values)."""
        episode = info.get("episode")
        self.running_return.add_(reward.reshape(-1).to(torch.float32))
        self.running_length.add_(1.0)
        if isinstance(episode, dict) and "r" in episode and "l" in episode:
            returns, lengths = episode["r"].to(torch.float32), episode["l"].to(torch.float32)
        else:
            returns, lengths = self.running_return, self.running_length
        count = done.sum()
        some = count > 0
        denom = count.clamp(min=1).to(torch.float32)
        self.mean_return.copy_(torch.where(some, torch.where(done, returns, 0.0).sum() / denom, self.mean_return))
        self.mean_length.copy_(torch.where(some, torch.where(done, lengths, 0.0).sum() / denom, self.mean_length))
        ended = torch.stack((torch.where(done, returns, 0.0).sum(), torch.where(done, lengths, 0.0).sum(), count))
        self.totals += ended.to(torch.float64)
        self.running_return.masked_fill_(done, 0.0)
        self.running_length.masked_fill_(done, 0.0)
        return dict(zip(self.KEYS, (self.mean_return.clone(), self.mean_length.clone()), strict=True))

    def take_totals(self) -> torch.Tensor:
        """The episodes ended since the last call, as float64 ``(sum of returns, sum of lengths, count)``.

        A copy on the device (no host read); the totals restart from zero.
        """
        totals = self.totals.clone()
        self.totals.zero_()
        return totals


class RewardTermLog:
    """Per-term episode sums of an env that reports ``info["reward_terms"]`` (the Go1 task), on the device.

    Summarised as mjlab's ``Episode_Reward/<term>``: each weighted, dt-scaled term's episode sum divided by
    the **configured** maximum episode length in seconds (not the episode's own length). mjlab logs, at every
    step where some rows reset, the mean of that over the rows that reset, and rsl_rl's logger averages those
    per-step values over the steps of an iteration that had resets: :meth:`summary`'s default (``over="steps"``)
    is that. ``over="episodes"`` pools every finished episode instead (a step where many rows reset weighs
    more). ``add`` makes no host read; :meth:`summary` makes one.

    Args:
        names: The terms, in the order of ``info["reward_terms"]``'s columns.
        episode_seconds: The maximum episode length in seconds (``max_episode_steps * dt``).
        num_envs: Rows.
        device: Where ``info["reward_terms"]`` lives.
    """

    def __init__(self, names: tuple[str, ...], episode_seconds: float, num_envs: int, device: torch.device) -> None:
        if not episode_seconds > 0:
            raise ValueError(f"`episode_seconds` must be > 0, got {episode_seconds!r}")
        self.names = names
        self.episode_seconds = episode_seconds
        with torch.inference_mode(False):  # written every step, in any mode
            self.running = torch.zeros(num_envs, len(names), device=device)
            self.sums = torch.zeros(len(names), device=device)
            self.count = torch.zeros((), device=device)
            self.step_means = torch.zeros(len(names), device=device)
            """Sum, over the steps with resets, of each term's mean episode sum over that step's reset rows."""
            self.reset_steps = torch.zeros((), device=device)
            """Steps with at least one reset since the last clear."""

    @classmethod
    def for_env(cls, env: VectorEnv) -> RewardTermLog | None:
        """The log for a wrapped task-layer env (``env.env`` a ``ManagerBasedEnv``: Go1, G1...), else ``None``."""
        tasks = sys.modules.get(
            "gym_graphreset.managers.manager_based_env"
        )  # loaded if and only if a task-layer env was made
        if tasks is None or not isinstance(env, FixedShapeAutoresetVectorEnv):
            return None
        inner = env.env
        if not isinstance(inner, tasks.ManagerBasedEnv):
            return None
        return cls(inner.reward_names, inner.max_episode_steps * inner.dt, env.num_envs, env_device(env))

    def add(self, info: dict[str, Any], done: torch.Tensor) -> None:
        """Add a step's terms; move the finished episodes' sums into the totals (no host read).

        A log of no terms (``names=()``, for a task without ``info["reward_terms"]``) ignores the step.
        """
        if not self.names:
            return
        ended = done.reshape(-1, 1).to(self.running.dtype)
        self.running += info["reward_terms"]
        finished = (self.running * ended).sum(dim=0)
        n = ended.sum()
        self.sums += finished
        self.count += n
        self.step_means += finished / n.clamp(min=1.0)  # zero on a step without resets
        self.reset_steps += (n > 0).to(self.reset_steps.dtype)
        self.running *= 1.0 - ended

    def mjlab_means(self, clear: bool = True) -> torch.Tensor:
        """``(len(names),)`` mjlab's ``Episode_Reward/<term>`` since the last clear, on the device (no host read).

        The mean over the steps with resets of each step's mean over its reset rows, divided by the episode
        seconds; NaN where no row reset. ``clear`` zeroes these accumulators (not :meth:`summary`'s pooled ones).
        """
        means = torch.where(
            self.reset_steps > 0, self.step_means / self.reset_steps.clamp(min=1.0) / self.episode_seconds, math.nan
        )
        if clear:
            self.step_means.zero_()
            self.reset_steps.zero_()
        return means

    def summary(self, clear: bool = True, over: Literal["steps", "episodes"] = "steps") -> dict[str, float | None]:
        """Each term's episode sum per second of maximum episode (``None`` when no episode ended).

        ``over="steps"``: mjlab's aggregation (see the class docstring); ``"episodes"``: the mean over every
        finished episode. One host read; ``clear`` zeroes every total (so the next summary covers the
        episodes after this one).

        Raises:
            ValueError: ``over`` is neither.
        """
        if over not in ("steps", "episodes"):
            raise ValueError(f"`over` must be 'steps' or 'episodes', got {over!r}")
        total, steps = (self.count, self.sums) if over == "episodes" else (self.reset_steps, self.step_means)
        count, *sums = torch.cat((total.reshape(1), steps)).tolist()
        if clear:
            for t in (self.sums, self.count, self.step_means, self.reset_steps):
                t.zero_()
        return {n: (s / count / self.episode_seconds if count else None) for n, s in zip(self.names, sums, strict=True)}


class ResetMetricLog:
    """mjlab's reset-time ``Metrics/<command>/<key>`` and ``Curriculum/<term>/mean|max`` entries, on the device.

    At every step where some rows reset, mjlab's env logs (``ManagerBasedRlEnv._reset_idx``):

    - ``Metrics/<command>/<key>`` (``CommandTerm.reset``): the mean over the reset rows of the command's metric as
      its last update left it. A motion command overwrites its metrics at the end of every step, and the step
      that ends an episode resets the row before that update: the value logged is the one of the episode's
      last step but one. Here: each reset row's ``info["metrics"]["command/<command>/<key>"]`` of the step
      before. (An episode one step long is the exception: mjlab logs the value right after its reset, this
      log the last value of the row's episode before.)
    - ``Curriculum/<term>/mean`` and ``/max`` (mjlab's ``terrain_levels_vel``): the mean and the highest terrain
      level over every env once the step's reset rows moved level (here: the curriculum term's value after
      the step).

    rsl_rl's logger averages each entry over the steps of an iteration that had resets; :meth:`means` returns
    that average since the last clear. :meth:`add` and :meth:`means` make no host read.

    Args:
        metrics: The ``info["metrics"]`` keys to log (``"command/<command>/<key>"``), each a ``(num_envs,)`` value.
        curricula: The curriculum terms to log (``env.curriculum_manager.values[name]``: one level per env).
        values: Where the curricula's values live (the env's ``curriculum_manager.values``); needed with
            ``curricula``.
        num_envs: Rows.
        device: Where the values live.
    """

    def __init__(
        self,
        metrics: tuple[str, ...],
        curricula: tuple[str, ...],
        values: dict[str, torch.Tensor] | None,
        num_envs: int,
        device: torch.device,
    ) -> None:
        if curricula and values is None:
            raise ValueError(f"`values` (the curriculum values) is needed to log curricula {list(curricula)}")
        bad = [k for k in metrics if not k.startswith("command/") or k.count("/") != 2]
        if bad:
            raise ValueError(f"`metrics` must be info['metrics'] keys 'command/<command>/<key>', got {bad}")
        self.metrics, self.curricula, self.values = metrics, curricula, values or {}
        self.tags = tuple("Metrics/" + k.removeprefix("command/") for k in metrics) + tuple(
            f"Curriculum/{c}/{s}" for c in curricula for s in ("mean", "max")
        )
        """The mjlab tags of :meth:`means`, in order: the metrics, then each curriculum's mean and max."""
        with torch.inference_mode(False):  # written every step, in any mode
            self.previous = torch.zeros(num_envs, len(metrics), device=device)
            """Each row's metrics of the last step (the values a reset at the next step logs)."""
            self.sums = torch.zeros(len(self.tags), device=device)
            """Sum, over the steps with resets since the last clear, of each entry's value at that step."""
            self.reset_steps = torch.zeros((), device=device)
            """Steps with at least one reset since the last clear."""
        self._primed = False

    @classmethod
    def for_env(cls, env: VectorEnv) -> ResetMetricLog | None:
        """The log of a wrapped task-layer env: its commands' ``mjlab_metrics`` and its terrain curricula.

        ``None`` when the env is not a :class:`~gym_graphreset.FixedShapeAutoresetVectorEnv` over a
        ``ManagerBasedEnv`` or has nothing of the kind (a command logs the keys it lists in a class attribute
        ``mjlab_metrics``, as the motion command does; a curriculum term logs when its function is
        ``mdp.terrain_levels_vel``).
        """
        tasks = sys.modules.get("gym_graphreset.managers.manager_based_env")
        if tasks is None or not isinstance(env, FixedShapeAutoresetVectorEnv):
            return None
        inner = env.env
        if not isinstance(inner, tasks.ManagerBasedEnv):
            return None
        from gym_graphreset.mdp.terrain_levels import terrain_levels_vel

        metrics = tuple(
            f"command/{name}/{key}"
            for name, command in inner.commands.items()
            for key in getattr(type(command), "mjlab_metrics", ())
        )
        curricula = tuple(n for n, t in inner.cfg.curriculum.items() if t.func is terrain_levels_vel)
        if not metrics and not curricula:
            return None
        return cls(metrics, curricula, inner.curriculum_manager.values, env.num_envs, env_device(env))

    def add(self, info: dict[str, Any], done: torch.Tensor) -> None:
        """Account for one step (its ``info`` and done rows), after its resets (no host read)."""
        ended = done.reshape(-1, 1).to(self.previous.dtype)
        n = ended.sum()
        parts = []
        if self.metrics:
            now = torch.stack([info["metrics"][k].reshape(-1).to(self.previous.dtype) for k in self.metrics], dim=1)
            if not self._primed:  # the first step has no step before: its own values stand in
                self.previous.copy_(now)
                self._primed = True
            # a non-finite value of a row that does not end must not reach the mean (NaN x 0 is NaN)
            parts.append(torch.where(ended.bool(), self.previous, 0.0).sum(dim=0) / n.clamp(min=1.0))
            self.previous.copy_(now)
        for name in self.curricula:
            levels = self.values[name].to(self.sums.dtype)
            parts.append(torch.stack((levels.mean(), levels.max())))
        if parts:
            some = n > 0
            self.sums += torch.where(some, torch.cat(parts), 0.0)
            self.reset_steps += some.to(self.reset_steps.dtype)

    def means(self, clear: bool = True) -> dict[str, torch.Tensor]:
        """``{tag: 0-d tensor}``: each entry's mean over the steps with resets since the last clear (NaN if none).

        ``clear`` zeroes the sums (not the rows' last metrics). No host read.
        """
        means = torch.where(self.reset_steps > 0, self.sums / self.reset_steps.clamp(min=1.0), math.nan)
        if clear:
            self.sums.zero_()
            self.reset_steps.zero_()
        return {tag: means[i] for i, tag in enumerate(self.tags)}
