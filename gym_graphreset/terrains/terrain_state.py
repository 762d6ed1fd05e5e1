"""The terrain's per-env state on the device: levels, types and origins.

Built by :class:`~gym_graphreset.terrains.terrain_generator.TerrainCfg` (a task part in ``TaskCfg.sensors``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch

from gym_graphreset.terrains.checks import check_int

if TYPE_CHECKING:
    from gym_graphreset.managers.forward_passes import ForwardPass
    from gym_graphreset.terrains.terrain_generator import Terrain

__all__ = ["TerrainState"]


class TerrainState:
    """Per-env terrain levels, types and origins on the device (a task "sensor": nothing to update per step).

    ``first_env``: the global index of row 0 (``global_env_offset``): each row starts on the cell of its
    global index (:meth:`~gym_graphreset.terrains.terrain_generator.Terrain.env_origins`), whatever the world size.

    Attributes:
        terrain: The generated grid.
        levels, types: ``(n,)`` int64 each env's row and column.
        origins: ``(n, 3)`` each env's cell origin (reset events spawn relative to it).
        cell_origins: ``(num_rows, num_cols, 3)`` every cell's origin.
    """

    forward_passes: ClassVar[frozenset[ForwardPass]] = frozenset()
    """What :meth:`refresh` reads after a forward pass: nothing."""

    def __init__(
        self,
        terrain: Terrain,
        num_envs: int,
        device: torch.device | str,
        max_init_level: int | None,
        *,
        first_env: int = 0,
    ) -> None:
        self.terrain = terrain
        levels, types, origins = terrain.env_origins(num_envs, max_init_level, first_env=first_env)
        self.levels, self.types, self.origins = levels.to(device), types.to(device), origins.to(device)
        self.cell_origins = torch.as_tensor(terrain.origins, dtype=torch.float32, device=device)
        self.num_rows = terrain.cfg.num_rows
        self._flat = self.cell_origins.view(-1, 3)

    def move(self, rows: torch.Tensor, up: torch.Tensor, down: torch.Tensor, u: torch.Tensor) -> None:
        """On ``rows``: level +1 where ``up``, -1 where ``down``; past the top: a random level (``u`` in [0, 1)).

        mjlab's rule: a level below 0 is clipped to 0, one at or past the last row is redrawn uniformly among
        the rows (so solved envs keep sampling the whole grid). Full width, no host read.
        """
        step = up.long() - (down & ~up).long()
        new = self.levels + step
        redrawn = (u * self.num_rows).long().clamp(max=self.num_rows - 1)
        new = torch.where(new >= self.num_rows, redrawn, new.clamp(min=0))
        self.levels.copy_(torch.where(rows, new, self.levels))
        cell = self.levels * self.terrain.cfg.num_cols + self.types
        self.origins.copy_(self._flat.index_select(0, cell))

    def place(self, *, level: int | None = None, column: int | None = None) -> None:
        """Put every env on row ``level`` and/or column ``column`` (``None``: each env keeps its own).

        For a look at one cell (``play --terrain``): with the task's terrain curriculum still on, the next
        resets move the levels again. Refused, before anything changes, outside the grid.
        """
        check_int("TerrainState.place", "level", level, 0, self.num_rows - 1, optional=True)
        check_int("TerrainState.place", "column", column, 0, self.terrain.cfg.num_cols - 1, optional=True)
        if level is not None:
            self.levels.fill_(level)
        if column is not None:
            self.types.fill_(column)
        cell = self.levels * self.terrain.cfg.num_cols + self.types
        self.origins.copy_(self._flat.index_select(0, cell))

    def histogram(self) -> torch.Tensor:
        """``(num_rows,)`` the share of envs on each level (on the device)."""
        counts = torch.zeros(self.num_rows, device=self.levels.device)
        counts.index_add_(0, self.levels, torch.ones_like(self.levels, dtype=counts.dtype))
        return counts / self.levels.numel()

    def update(self) -> None:
        """Nothing per step (levels move at resets)."""

    def refresh(self) -> None:
        """Nothing: levels do not read the physics."""

    def reset(self, rows: torch.Tensor) -> None:
        """Nothing: the curriculum term moves levels (before the reset events read the origins)."""
