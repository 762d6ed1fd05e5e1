"""Reset terms: per-row state that must be reset with the env, run after the inner env's reset.

The contract is :class:`~gym_graphreset.core.protocols.ResetTerm`: ``reset(rows)`` and optional hooks
(``bind``, ``on_step(step)``, ``info()``, ``clear_published()``, ``add_checks(checks)``), no-ops in the
base class. :class:`EpisodeStatistics` is the library's own term and an example of one.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from gym_graphreset.core.inputs import MAX_NUM_ENVS, check_positive_int
from gym_graphreset.core.protocols import ResetTerm, Rows, StepData
from gym_graphreset.core.selection import fill_rows_, reset_selection_capable

__all__ = ["EpisodeStatistics", "ResetTerm"]


@reset_selection_capable
class EpisodeStatistics(ResetTerm):
    """Torch-native, sync-free episode return and length, like Gymnasium's RecordEpisodeStatistics.

    ``info["episode"] = {"r": returns, "l": lengths}`` holds, on rows whose episode ended this step,
    the finished episode's return and length (0 elsewhere); ``info["_episode"]`` is that done mask.

    Returns are **raw** by default: the rewards before any reward-transforming wrapper in the chain
    (``NormalizeReward``, ``ClipReward``...; :class:`~gym_graphreset.core.protocols.RewardTransform`), wherever
    this term sits, so the logged returns are the task's. The entries are also in ``info["final_info"]``,
    masked to the done rows, where CleanRL's SAME_STEP scripts read them.

    Args:
        num_envs: Batch size; taken from the env at ``bind`` when omitted.
        device: Device; taken from the env at ``bind`` when omitted.
        rewards: ``"raw"`` (default) or ``"wrapped"`` (the rewards the wrapper returns).
    """

    def __init__(
        self,
        num_envs: int | None = None,
        device: torch.device | str | None = None,
        rewards: Literal["raw", "wrapped"] = "raw",
    ) -> None:
        if rewards not in ("raw", "wrapped"):
            raise ValueError(f"`rewards` must be 'raw' or 'wrapped', got {rewards!r}")
        self.rewards = rewards
        self._allocated = False
        if num_envs is not None:
            self._allocate(
                check_positive_int("num_envs", num_envs, maximum=MAX_NUM_ENVS), torch.device(device or "cpu")
            )

    def _allocate(self, num_envs: int, device: torch.device) -> None:
        self.running_return = torch.zeros(num_envs, dtype=torch.float32, device=device)
        self.running_length = torch.zeros(num_envs, dtype=torch.long, device=device)
        self.episode_return = torch.zeros(num_envs, dtype=torch.float32, device=device)
        self.episode_length = torch.zeros(num_envs, dtype=torch.long, device=device)
        self.done = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.totals = torch.zeros(3, dtype=torch.float64, device=device)  # sum r, sum l, episodes
        self._zeros = (self.episode_return.new_zeros(()), self.episode_length.new_zeros(()))  # `where` into `out=`
        self._allocated = True

    def bind(self, env: Any) -> None:
        """Allocate buffers for ``env``'s batch size and device (if not done in ``__init__``)."""
        if not self._allocated:
            self._allocate(env.num_envs, torch.device(env.device))
        elif self.running_return.shape[0] != env.num_envs or self.running_return.device != torch.device(env.device):
            raise ValueError(
                f"EpisodeStatistics was built for num_envs={self.running_return.shape[0]} on "
                f"{self.running_return.device}, but the env has num_envs={env.num_envs} on {env.device}; "
                "leave num_envs/device out to take the env's"
            )

    def on_step(self, step: StepData) -> None:
        """Accumulate this step; publish finished episodes (no host read)."""
        self.running_return.add_((step.raw_reward if self.rewards == "raw" else step.reward).to(torch.float32))
        self.running_length.add_(1)
        self.done.copy_(step.done)
        torch.where(self.done, self.running_return, self._zeros[0], out=self.episode_return)
        torch.where(self.done, self.running_length, self._zeros[1], out=self.episode_length)
        self.totals.add_(torch.stack((self.episode_return.sum(), self.episode_length.sum(), self.done.sum())).double())

    def reset(self, rows: Rows) -> None:
        """Zero the running sums of the selected rows."""
        fill_rows_(self.running_return, rows, 0.0)
        fill_rows_(self.running_length, rows, 0)

    def clear_published(self) -> None:
        """Forget published episodes (a full reset starts fresh)."""
        self.done.fill_(False)
        self.episode_return.zero_()
        self.episode_length.zero_()

    def summary(self, group: Any = None, clear: bool = True) -> dict[str, float]:
        """Mean return and length of the episodes finished since the last summary, and their count.

        One host read; with ``group`` (``True`` for the default ``torch.distributed`` group) the totals
        are all-reduced first, so every rank gets the population's numbers (one collective).
        """
        totals = self.totals.clone()
        if group is not None and group is not False:
            import torch.distributed as dist

            dist.all_reduce(totals, group=None if group is True else group)
        r, length, n = totals.tolist()
        if clear:
            self.totals.zero_()
        return {
            "episodes": n,
            "mean_return": r / n if n else float("nan"),
            "mean_length": length / n if n else float("nan"),
        }

    def info(self) -> dict[str, Any]:
        """The info entries for this step."""
        return {"episode": {"r": self.episode_return, "l": self.episode_length}, "_episode": self.done}
