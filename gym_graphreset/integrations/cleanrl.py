"""CleanRL drop-in: the env stack of CleanRL's ``ppo_continuous_action.py``, batched on one device.

CleanRL builds each sub-env as ``FlattenObservation → RecordEpisodeStatistics → ClipAction →
NormalizeObservation → clip obs to ±10 → NormalizeReward(gamma) → clip reward to ±10`` inside a
``SyncVectorEnv(autoreset_mode=SAME_STEP)``. :func:`make_envs` builds the same stack from this library's
torch wrappers around a batched env, under :class:`~gym_graphreset.FixedShapeAutoresetVectorEnv`, so the
script's loop runs with a handful of changed lines (``docs/cleanrl.md``): episode statistics are raw
returns in ``infos["final_info"]["episode"]``, where the script reads them.
"""

from __future__ import annotations

import gymnasium as gym
import torch

from gym_graphreset.core.autoreset_env import FixedShapeAutoresetVectorEnv
from gym_graphreset.core.config import PresetName
from gym_graphreset.core.terms import EpisodeStatistics
from gym_graphreset.wrappers import ClipAction, ClipObservation, ClipReward, NormalizeObservation, NormalizeReward

__all__ = ["make_envs"]


def make_envs(
    env_id: str,
    num_envs: int,
    device: torch.device | str,
    gamma: float = 0.99,
    mode: PresetName | None = None,
) -> FixedShapeAutoresetVectorEnv:
    """CleanRL's continuous-control env stack over ``num_envs`` rows of ``env_id`` on ``device``.

    Args:
        env_id: A registered id with a vector entry point, e.g. ``"gym_graphreset/HalfCheetah-v5"``.
        num_envs: Rows.
        device: Where the env runs (and its tensors live).
        gamma: The discount of ``NormalizeReward`` (the script's ``args.gamma``).
        mode: A preset; default ``"step_graph"`` on CUDA, ``"masked_persistent"`` elsewhere.
    """
    device = torch.device(device)
    inner = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", device=device)
    stack = ClipReward(
        NormalizeReward(ClipObservation(NormalizeObservation(ClipAction(inner)), -10.0, 10.0), gamma=gamma),
        -10.0,
        10.0,
    )
    mode = mode or ("step_graph" if device.type == "cuda" else "masked_persistent")
    return FixedShapeAutoresetVectorEnv(stack, mode, reset_terms={"episode": EpisodeStatistics()})
