"""The terrain curriculum (mjlab's ``terrain_levels_vel``), the spawn on a terrain cell and the level terms.

The terrain is a :class:`~gym_graphreset.terrains.terrain_generator.TerrainCfg` in ``TaskCfg.sensors`` (default name
``"terrain"``): it keeps each env's level (row), type (column) and cell origin on the device.

- :func:`terrain_levels_vel` (a curriculum term) moves levels at each reset, through the reset mask;
- :func:`reset_to_terrain_origin` (a reset event) spawns on the cell: it runs after the other reset events
  (``reset_root_state_uniform``...) wherever it is listed;
- :func:`terrain_level` (a metric term) puts each env's level into ``info["metrics"]`` every step, so the
  level distribution is in ``info`` (its histogram:
  :meth:`~gym_graphreset.terrains.terrain_state.TerrainState.histogram`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from gym_graphreset.core.rng import bits_to_uniform, prefixed_bits
from gym_graphreset.managers.binding import reads_sensors, runs_after_reset_events
from gym_graphreset.terrains.terrain_state import TerrainState

if TYPE_CHECKING:
    from gym_graphreset.managers.manager_based_env import ManagerBasedEnv

__all__ = ["reset_to_terrain_origin", "terrain_level", "terrain_levels_vel", "terrain_state"]


def terrain_state(env: ManagerBasedEnv, terrain_name: str = "terrain") -> TerrainState:
    """The terrain part ``terrain_name`` of ``env`` (a ``TerrainCfg`` sensor)."""
    state = env.sensors.get(terrain_name)
    if not isinstance(state, TerrainState):
        raise TypeError(
            f"the task has no terrain {terrain_name!r}: put a TerrainCfg in TaskCfg.sensors[{terrain_name!r}] "
            f"(sensors: {list(env.sensors)})"
        )
    return state


@reads_sensors(terrain_name=TerrainState)
def terrain_levels_vel(
    env: ManagerBasedEnv, rows: torch.Tensor, command_name: str = "twist", terrain_name: str = "terrain"
) -> torch.Tensor:
    """The terrain curriculum (mjlab's rule) at a reset, on ``rows``: up a level past half a cell walked.

    ``distance = |base xy - cell origin xy|`` at the end of the episode; up if ``distance > size_x / 2``, else
    down if ``distance < |command xy| * horizon / 2``, the horizon being the env's episode length in seconds
    (``max_episode_steps * step_dt``: ``episode_length_s`` unless the env was given another
    ``max_episode_steps``). A level past the last row is redrawn uniformly (a counter-based draw keyed by the
    ending episode), a level below 0 stays 0. Levels do not move at the first reset (before any env step).
    Everything is masked on the device: no host read.
    ``command_name`` must name a velocity command (at least 2 wide: ``(vx, vy, ...)``); another is refused
    when the env is built.

    Returns:
        ``(n,)`` float, every env's level after the move (kept in ``env.curriculum_manager.values``).
    """
    state = terrain_state(env, terrain_name)
    distance = torch.linalg.vector_norm(env.qpos[:, 0:2] - state.origins[:, 0:2], dim=1)
    command = env.commands[command_name].command
    if command.dim() != 2 or command.shape[1] < 2:  # metadata only: the first reset (the constructor's) refuses
        raise ValueError(
            f"terrain_levels_vel: command {command_name!r} is {tuple(command.shape[1:])} wide per env; "
            "it reads the command's first two columns as the commanded (vx, vy) speed, so it needs a velocity "
            "command (e.g. mdp.VelocityCommandCfg, 3 wide): pass `command_name` of one, or write a level rule "
            "of your own for this command"
        )
    started = env.common_step > 0
    up = (distance > 0.5 * state.terrain.cfg.size[0]) & started
    horizon_s = env.max_episode_steps * env.step_dt  # the env's own horizon (``max_episode_steps`` may differ)
    wanted = torch.linalg.vector_norm(command[:, 0:2], dim=1) * horizon_s * 0.5
    down = (distance < wanted) & ~up & started
    stream = env.constant(
        ("terrain_levels_stream", terrain_name), lambda: env.streams(f"terrain_levels.{terrain_name}")
    )
    u = bits_to_uniform(prefixed_bits(env.keys.prefix(stream), env.episode, 1))[:, 0]  # counter_uniform's draw
    state.move(rows, up, down, u)
    return state.levels.to(torch.float32)


@reads_sensors(terrain_name=TerrainState)
@runs_after_reset_events
def reset_to_terrain_origin(
    env: ManagerBasedEnv, rows: torch.Tensor, u: torch.Tensor, terrain_name: str = "terrain"
) -> None:
    """Shift the proposed base position by each env's cell origin.

    It runs after every other reset event whatever the order of ``TaskCfg.events``, so the pose
    ``reset_root_state_uniform`` drew is the one shifted (listed first, it would be overwritten).
    """
    state = terrain_state(env, terrain_name)
    env.initial_state.qpos[:, 0:3] += state.origins


@reads_sensors(terrain_name=TerrainState)
def terrain_level(env: ManagerBasedEnv, terrain_name: str = "terrain") -> torch.Tensor:
    """Each env's terrain level, ``(n,)`` float (a metric: its episode mean is the level)."""
    return terrain_state(env, terrain_name).levels.to(torch.float32)
