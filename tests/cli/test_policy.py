"""``play``'s OpenGL backend on a machine without a display, and where ``--terrain`` puts its worlds."""

from __future__ import annotations

import argparse
import os
import sys

import pytest

from gym_graphreset.cli.policy import TerrainSpot, _terrain_spot, headless_gl


@pytest.mark.parametrize(
    ("env", "imported", "expected"),
    [
        ({}, False, "egl"),  # headless, nothing chosen: EGL, not GLFW (a GLFWError without a display)
        ({"DISPLAY": ":0"}, False, None),  # a display: MuJoCo's own default
        ({"WAYLAND_DISPLAY": "wayland-0"}, False, None),
        ({"MUJOCO_GL": "osmesa"}, False, "osmesa"),  # the user's choice stays
        ({}, True, None),  # MuJoCo already chose its backend at import: too late to set it
    ],
)
def test_headless_play_picks_egl_unless_told_otherwise(
    env: dict[str, str], imported: bool, expected: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a display and without ``MUJOCO_GL``, ``play`` sets ``MUJOCO_GL=egl`` before MuJoCo is imported."""
    # a copy of the environment, restored after the test (delenv of an unset name would not restore what is set)
    environ = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MUJOCO_GL")}
    monkeypatch.setattr(os, "environ", {**environ, **env})
    monkeypatch.setattr(sys, "platform", "linux")
    if imported:
        monkeypatch.setitem(sys.modules, "mujoco", sys.modules.get("mujoco") or object())  # type: ignore[arg-type]
    else:
        monkeypatch.delitem(sys.modules, "mujoco", raising=False)
    headless_gl()
    assert os.environ.get("MUJOCO_GL") == expected


ROUGH = "gym_graphreset/Go1-Velocity-Rough-v0"
ROUGH_NAMES = (
    "flat, pyramid_stairs, pyramid_stairs_inv, hf_pyramid_slope, hf_pyramid_slope_inv, random_rough, wave_terrain"
)


def _terrain_args(terrain: str | None = None, level: int | None = None) -> argparse.Namespace:
    return argparse.Namespace(terrain=terrain, terrain_level=level)


@pytest.mark.parametrize(
    ("env_id", "terrain", "level", "message"),
    [
        ("gym_graphreset/InvertedPendulum-v5", "flat", None, "need a task-layer env on a terrain grid; "),
        ("gym_graphreset/G1-Velocity-Flat-v0", None, 0, "has no terrain grid (a TerrainCfg among its sensors)"),
        (ROUGH, "stairs", None, f"--terrain must name one of {ROUGH}'s sub-terrains ({ROUGH_NAMES}), got 'stairs'"),
        (ROUGH, "flat", 10, f"--terrain-level must be in [0, 9] ({ROUGH}'s grid has 10 levels), got 10"),
        (ROUGH, None, -1, "--terrain-level must be in [0, 9]"),
    ],
)
def test_terrain_spot_refuses_what_the_task_cannot_place(
    env_id: str, terrain: str | None, level: int | None, message: str
) -> None:
    """``play --terrain`` / ``--terrain-level`` are checked against the task's grid before any env is built: an env
    off the task layer or without a grid, an unknown sub-terrain (the accepted ones listed) or a row outside the
    grid is refused by name."""
    spot = _terrain_spot(_terrain_args(terrain, level), env_id, {})
    assert isinstance(spot, str) and message in spot


def test_terrain_spot_finds_a_task_named_with_its_module() -> None:
    """``module:id`` (how the command line reaches a user's own task) is placed as its ``id`` is."""
    spot = _terrain_spot(_terrain_args("flat", 0), f"gym_graphreset:{ROUGH}", {})
    assert isinstance(spot, TerrainSpot) and (spot.column, spot.level) == (0, 0)


def test_terrain_spot_takes_the_hardest_row_by_default_and_drops_the_curriculum() -> None:
    """``--terrain`` alone: that column at the last row; ``--terrain-level`` alone: that row, each world keeping its
    column. Either takes out the curriculum terms that read the grid (and only those)."""
    from gym_graphreset.managers.registry import task_cfg

    spot = _terrain_spot(_terrain_args("pyramid_stairs"), ROUGH, {})
    assert isinstance(spot, TerrainSpot)
    assert (spot.grid, spot.column, spot.level, spot.dropped) == ("terrain", 1, 9, ("terrain_levels",))
    full = task_cfg(ROUGH)
    assert full is not None and "terrain_levels" in full.curriculum
    assert dict(spot.cfg.curriculum) == {k: t for k, t in full.curriculum.items() if k != "terrain_levels"}
    row = _terrain_spot(_terrain_args(level=2), ROUGH, {})
    assert isinstance(row, TerrainSpot) and (row.column, row.level) == (None, 2)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::gym_graphreset.tasks.UnwrappedStepWarning")  # resets by hand, on purpose
def test_worlds_placed_by_play_stay_on_their_cell_across_resets() -> None:
    """The Go1 rough env built as ``play --terrain pyramid_stairs --terrain-level 4`` builds it: every world spawns
    on that cell, and a reset after walking past half a cell (a level up under the curriculum) respawns it there."""
    import gymnasium as gym
    import torch

    spot = _terrain_spot(_terrain_args("pyramid_stairs", 4), ROUGH, {})
    assert isinstance(spot, TerrainSpot)
    env = gym.make_vec(ROUGH, 3, vectorization_mode="vector_entry_point", device="cpu", cfg=spot.cfg, **spot.env_kwargs)
    try:
        text = spot.place(env)
        assert text == (
            "play: every world on pyramid_stairs at level 4 of 0-9 (difficulty 0.44); "
            "the terrain curriculum (terrain_levels) is off"
        )
        state = env.sensors["terrain"]
        cell = state.cell_origins[4, 1]
        env.reset(seed=0)
        env.step(torch.zeros(env.action_space.shape))
        assert torch.allclose(env.qpos[:, 0:2], cell[0:2].expand(3, 2), atol=0.6)  # the spawn's own xy jitter
        qpos, qvel = env.state()
        qpos[:, 0] += 5.0  # past half of an 8 m cell: a level up under the curriculum
        env.set_state(qpos, qvel)
        env.reset(options={"reset_mask": torch.ones(3, dtype=torch.bool)})
        assert state.levels.tolist() == [4] * 3 and state.types.tolist() == [1] * 3
        assert torch.allclose(env.qpos[:, 0:2], cell[0:2].expand(3, 2), atol=0.6)
    finally:
        env.close()
