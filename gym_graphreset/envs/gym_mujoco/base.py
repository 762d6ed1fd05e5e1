"""What every Gymnasium MuJoCo v5 task on MuJoCo Warp shares: Gymnasium's assets and the locomotion base."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from gym_graphreset.envs.mjwarp import MJWarpVectorEnv

__all__ = ["LocomotionEnv", "gymnasium_asset", "sq_sum"]


def gymnasium_asset(name: str) -> Path:
    """Path of an XML asset shipped inside the installed ``gymnasium`` package."""
    import gymnasium.envs.mujoco

    path = Path(gymnasium.envs.mujoco.__file__).parent / "assets" / name
    if not path.exists():
        raise FileNotFoundError(f"gymnasium ships no MuJoCo asset {name!r} (looked at {path})")
    return path


def sq_sum(x: torch.Tensor) -> torch.Tensor:
    """Per-row sum of squares over every dim but the first (control and contact costs)."""
    return x.square().flatten(1).sum(dim=1)


class LocomotionEnv(MJWarpVectorEnv):
    """Shared pieces: forward reward from the change of :meth:`_progress`, control cost, healthy bonus."""

    xml_file = ""
    refresh = "none"  # qpos/qvel observations need no derived field after a reset
    default_frame_skip = 5

    def __init__(
        self, num_envs: int, *, xml_file: str | None = None, frame_skip: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(
            gymnasium_asset(xml_file or self.xml_file),
            num_envs,
            frame_skip=self.default_frame_skip if frame_skip is None else frame_skip,
            **kwargs,
        )

    def _forward_velocity(self, before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
        return (after[:, 0] - before[:, 0]) / self.dt
