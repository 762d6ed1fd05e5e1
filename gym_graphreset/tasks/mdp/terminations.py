"""Termination terms: ``func(env, **params) -> (num_envs,)`` bool; time-outs are declared ``time_out=True``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from gym_graphreset.tasks.binding import FINITE, NON_NEGATIVE, accepts
from gym_graphreset.tasks.mdp import observations as O

if TYPE_CHECKING:
    from gym_graphreset.tasks.env import ManagerBasedEnv

__all__ = ["bad_orientation", "root_height_below", "time_out"]


def time_out(env: ManagerBasedEnv) -> torch.Tensor:
    """The episode reached its horizon (declare it with ``time_out=True``: a truncation)."""
    return env.elapsed >= env.max_episode_steps


@accepts(limit_angle=NON_NEGATIVE)
def bad_orientation(env: ManagerBasedEnv, limit_angle: float) -> torch.Tensor:
    """The base tilted more than ``limit_angle`` [rad] from upright."""
    gravity = O.projected_gravity(env)
    return torch.acos((-gravity[:, 2]).clamp(-1.0, 1.0)) > limit_angle


@accepts(minimum_height=FINITE)
def root_height_below(env: ManagerBasedEnv, minimum_height: float) -> torch.Tensor:
    """The base fell below ``minimum_height`` [m]."""
    return env.qpos[:, 2] < minimum_height
