"""One population split over ranks with ``torch.distributed`` (``torchrun``), world-size independent.

Each rank builds its share from the standard variables (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``):
device ``cuda:LOCAL_RANK`` (the CPU without CUDA), ``num_envs`` rows, and
``global_env_offset = RANK * num_envs``. With counter-based reset draws, global env ``i`` then has the
same trajectory whatever the world size. Polls and episode statistics go through one collective each,
only at the poll (``FixedShapeAutoresetVectorEnv(process_group=True)``, ``EpisodeStatistics.summary``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["RankInfo", "init_distributed", "make_rank_env", "rank_info"]


@dataclass(frozen=True)
class RankInfo:
    """Where this process sits in the population."""

    rank: int
    local_rank: int
    world_size: int
    device: torch.device
    num_envs: int
    global_env_offset: int

    @property
    def total_envs(self) -> int:
        """Rows over all ranks."""
        return self.num_envs * self.world_size


def rank_info(num_envs: int, *, device: str | torch.device | None = None) -> RankInfo:
    """This rank's share: ``num_envs`` rows at ``global_env_offset = RANK * num_envs``.

    Args:
        num_envs: Rows per rank.
        device: Override the device (default ``cuda:LOCAL_RANK`` when CUDA is available, else ``cpu``).
    """
    rank, local_rank = int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    if not 0 <= rank < world_size:
        raise ValueError(f"RANK must be in [0, WORLD_SIZE={world_size}), got {rank}")
    if num_envs < 1:
        raise ValueError(f"`num_envs` (per rank) must be >= 1, got {num_envs}")
    if device is None:
        device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    return RankInfo(rank, local_rank, world_size, torch.device(device), num_envs, rank * num_envs)


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
    """``gymnasium.make_vec`` of this rank's share (device and ``global_env_offset`` filled in)."""
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
