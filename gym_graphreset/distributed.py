"""One population split over ranks with ``torch.distributed`` (``torchrun``), world-size independent.

Each rank builds its share from the standard variables (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``):
device ``cuda:LOCAL_RANK`` (the CPU without CUDA), ``num_envs`` rows (ranks may hold different
numbers), and ``global_env_offset`` = the rows of the ranks before it (all-gathered). With counter-based
reset draws, global env ``i`` then has the same trajectory whatever the world size. Polls and episode
statistics go through one collective each, only at the poll
(``FixedShapeAutoresetVectorEnv(process_group=True)``, ``EpisodeStatistics.summary``).

Polls are collectives: every rank must pass the same ``process_group`` and poll settings and step,
reset and close together. A rank whose step or reset raised tells the others at its next poll or in
``close()``, and settings that differ are named at the first poll; both raise
:class:`~gym_graphreset.core.polling.CrossRankError` on the ranks that must stop, naming the rank.
A rank that passes ``process_group=None`` while the others pass a group takes no part in any poll and
cannot be told from a slow one: the others' polls fail when it exits (``poll_collective``) or wait.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import torch

__all__ = ["RankInfo", "init_distributed", "make_rank_env", "rank_info"]


@dataclass(frozen=True)
class RankInfo:
    """Where this process sits in the population (``envs_per_rank``: every rank's ``num_envs``, by rank)."""

    rank: int
    local_rank: int
    world_size: int
    device: torch.device
    num_envs: int
    global_env_offset: int
    envs_per_rank: tuple[int, ...]

    @property
    def total_envs(self) -> int:
        """Rows over all ranks."""
        return sum(self.envs_per_rank)


def rank_info(num_envs: int, *, device: str | torch.device | None = None) -> RankInfo:
    """This rank's share: ``num_envs`` rows at ``global_env_offset`` = the rows of ranks ``0 .. RANK-1``.

    With ``torch.distributed`` initialised (``init_distributed()``) and more than one rank, every rank's
    ``num_envs`` is all-gathered (one collective: call it on every rank) and the offset is their exclusive
    prefix sum, so uneven shares (3 rows on rank 0, 5 on rank 1) get distinct global env ids. Without an
    initialised group the other ranks' counts cannot be known: every rank is taken to hold ``num_envs``
    (``RANK * num_envs``), so initialise first when shares may differ.

    Args:
        num_envs: This rank's rows.
        device: Override the device (default ``cuda:LOCAL_RANK`` when CUDA is available, else ``cpu``).

    Raises:
        ValueError: ``RANK`` outside ``[0, WORLD_SIZE)``, ``num_envs < 1``, or the group's size or this
            process's rank in it disagreeing with ``WORLD_SIZE``/``RANK``.
    """
    rank, local_rank = int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    if not 0 <= rank < world_size:
        raise ValueError(f"RANK must be in [0, WORLD_SIZE={world_size}), got {rank}")
    if isinstance(num_envs, bool) or not isinstance(num_envs, Integral) or num_envs < 1:
        raise ValueError(f"`num_envs` (per rank) must be an int >= 1, got {num_envs!r}")
    num_envs = int(num_envs)
    if device is None:
        device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    counts = _envs_per_rank(num_envs, rank, world_size)
    return RankInfo(rank, local_rank, world_size, torch.device(device), num_envs, sum(counts[:rank]), counts)


def _envs_per_rank(num_envs: int, rank: int, world_size: int) -> tuple[int, ...]:
    """Every rank's ``num_envs``: all-gathered from an initialised group, else ``num_envs`` for each."""
    import torch.distributed as dist

    if world_size == 1 or not (dist.is_available() and dist.is_initialized()):
        return (num_envs,) * world_size
    if (dist.get_world_size(), dist.get_rank()) != (world_size, rank):
        raise ValueError(
            f"the default process group has {dist.get_world_size()} ranks with this process as rank "
            f"{dist.get_rank()}, but WORLD_SIZE={world_size} and RANK={rank}"
        )
    gathered: list[Any] = [None] * world_size
    dist.all_gather_object(gathered, num_envs)
    return tuple(int(n) for n in gathered)


def init_distributed(backend: str | None = None) -> bool:
    """Initialise the default process group from torchrun's variables (NCCL on CUDA, gloo on the CPU).

    Returns whether a multi-process group is active (``False`` for a plain single-process run).
    """
    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", 1)) == 1 and "MASTER_ADDR" not in os.environ:
        return False
    if not dist.is_initialized():
        backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        dist.init_process_group(backend)
    return True


def make_rank_env(env_id: str, num_envs: int, **kwargs: Any) -> Any:
    """``gymnasium.make_vec`` of this rank's share (device and ``global_env_offset`` filled in).

    Calls :func:`rank_info`, so with an initialised group it is a collective: call it on every rank.
    """
    import gymnasium as gym

    info = rank_info(num_envs, device=kwargs.pop("device", None))
    return gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode="vector_entry_point",
        device=info.device,
        global_env_offset=info.global_env_offset,
        **kwargs,
    )
