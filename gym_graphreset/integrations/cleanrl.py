"""CleanRL drop-in: the env stack of CleanRL's ``ppo_continuous_action.py``, batched on one device.

CleanRL builds each sub-env as ``FlattenObservation → RecordEpisodeStatistics → ClipAction →
NormalizeObservation → clip obs to ±10 → NormalizeReward(gamma) → clip reward to ±10`` inside a
``SyncVectorEnv(autoreset_mode=SAME_STEP)``. :func:`make_envs` builds the same stack from this library's
torch wrappers around a batched env, under :class:`~gym_graphreset.FixedShapeAutoresetVectorEnv`, so the
script's loop runs with a handful of changed lines (``docs/cleanrl.md``): episode statistics are raw
returns in ``infos["final_info"]["episode"]``, where the script reads them.
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import torch

from gym_graphreset.core.autoreset_env import FixedShapeAutoresetVectorEnv
from gym_graphreset.core.config import PresetName
from gym_graphreset.core.terms import EpisodeStatistics
from gym_graphreset.wrappers import ClipAction, ClipObservation, ClipReward, NormalizeObservation, NormalizeReward

__all__ = ["make_envs"]


class _WorldZeroFrames(gym.vector.VectorWrapper):
    """World 0's frame in every row's place, so only world 0 is rendered (``render_worlds=[0]``).

    ``RecordVideo`` asks for one frame per env and films the first (``record_first_only``).
    """

    def render(self) -> Any:
        """World 0's frame, ``num_envs`` times (the same array, not copies)."""
        (frame,) = self.env.render() or (None,)
        return [frame] * self.num_envs


def make_envs(
    env_id: str,
    num_envs: int,
    device: torch.device | str,
    gamma: float = 0.99,
    mode: PresetName | None = None,
    *,
    capture_video: bool = False,
    run_name: str = "run",
) -> gym.vector.VectorEnv:
    """CleanRL's continuous-control env stack over ``num_envs`` rows of ``env_id`` on ``device``.

    Args:
        env_id: A registered id with a vector entry point, e.g. ``"gym_graphreset/HalfCheetah-v5"``.
        num_envs: Rows.
        device: Where the env runs (and its tensors live).
        gamma: The discount of ``NormalizeReward`` (the script's ``args.gamma``).
        mode: A preset; default ``"step_graph"`` on CUDA, ``"masked_persistent"`` elsewhere.
        capture_video: The script's ``--capture-video``: world 0 is rendered and filmed into
            ``videos/<run_name>`` by Gymnasium's ``RecordVideo`` (its default episode trigger), outside the
            captured step. Needs an env with an ``rgb_array`` render mode (the MuJoCo Warp tasks).
        run_name: The script's ``run_name`` (the video folder).

    Returns:
        The :class:`~gym_graphreset.FixedShapeAutoresetVectorEnv`, inside ``RecordVideo`` with ``capture_video``.
    """
    device = torch.device(device)
    render: dict[str, Any] = {"render_mode": "rgb_array", "render_worlds": [0]} if capture_video else {}
    try:
        inner = gym.make_vec(
            env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", device=device, **render
        )
    except TypeError as exc:
        if not capture_video:
            raise
        raise ValueError(f"capture_video: {env_id} cannot render (no render_mode='rgb_array'): {exc}") from exc
    stack = ClipReward(
        NormalizeReward(ClipObservation(NormalizeObservation(ClipAction(inner)), -10.0, 10.0), gamma=gamma),
        -10.0,
        10.0,
    )
    mode = mode or ("step_graph" if device.type == "cuda" else "masked_persistent")
    env = FixedShapeAutoresetVectorEnv(stack, mode, reset_terms={"episode": EpisodeStatistics()})
    if not capture_video:
        return env
    from gymnasium.error import DependencyNotInstalled
    from gymnasium.wrappers.vector import RecordVideo

    try:
        return RecordVideo(_WorldZeroFrames(env), f"videos/{run_name}", record_first_only=True)
    except DependencyNotInstalled as exc:  # moviepy: the run goes on without its videos
        warnings.warn(f"capture_video: no video is recorded ({exc})", stacklevel=2)
        return env
