"""Offscreen frames of one world and their GIF: shapes, motion, bad input, and a skip without OpenGL."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from gym_graphreset import FixedShapeAutoresetVectorEnv
from gym_graphreset.envs.cartpole import CartPoleVectorEnv
from gym_graphreset.envs.mjwarp.rendering import RenderUnavailable, render_frames, save_gif


@pytest.fixture(scope="module")
def pendulum() -> Any:
    from gym_graphreset.envs.gym_mujoco.tasks import InvertedPendulumEnv

    return FixedShapeAutoresetVectorEnv(InvertedPendulumEnv(2, device="cpu"), "masked")


def _frames(env: Any, steps: int, **kwargs: Any) -> list[np.ndarray]:
    try:
        return render_frames(env, lambda obs: torch.full((2, 1), 3.0), steps, width=64, height=48, **kwargs)
    except RenderUnavailable as exc:
        pytest.skip(f"no OpenGL context on this machine: {exc}")


def test_frames_show_the_world_moving(pendulum: Any) -> None:
    """One frame per step after the reset's, RGB uint8 at the asked size; a pushed cart changes the picture."""
    frames = _frames(pendulum, 6)
    assert len(frames) == 7
    assert all(f.shape == (48, 64, 3) and f.dtype == np.uint8 for f in frames)
    assert frames[0].std() > 0  # not a blank image
    assert not np.array_equal(frames[0], frames[-1])


def test_frames_are_those_of_the_asked_world(pendulum: Any) -> None:
    """Same seed, same world: the same pictures; world 1 (its own reset noise) gives other pictures."""
    first, again, other = (_frames(pendulum, 4, world=w) for w in (0, 0, 1))
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other, strict=True))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"world": 2}, ValueError, r"`world` must be in \[0, 2\), got 2"),
        ({"steps": 0}, ValueError, "`steps` must be >= 1, got 0"),
    ],
)
def test_bad_arguments_are_named(pendulum: Any, kwargs: dict[str, Any], error: type, message: str) -> None:
    args = {"steps": 2} | kwargs
    with pytest.raises(error, match=message):
        render_frames(pendulum, lambda obs: torch.zeros(2, 1), **args)


def test_an_env_without_mujoco_warp_is_refused() -> None:
    with pytest.raises(TypeError, match="needs a MuJoCo Warp env .* got CartPoleVectorEnv"):
        render_frames(CartPoleVectorEnv(2), lambda obs: torch.zeros(2, dtype=torch.long), 2)


def test_save_gif_writes_every_frame(tmp_path: Path) -> None:
    from PIL import Image

    frames = [np.full((8, 8, 3), 40 * i, dtype=np.uint8) for i in range(4)]
    path = tmp_path / "sub" / "a.gif"
    assert save_gif(frames, path, fps=20)
    with Image.open(path) as gif:
        assert gif.n_frames == 4 and gif.size == (8, 8) and gif.info["duration"] == 50
    with pytest.raises(ValueError, match="at least one frame"):
        save_gif([], path)


def test_world_renderer_puts_the_asked_worlds_side_by_side(pendulum: Any) -> None:
    """Worlds [1, 0]: one image twice as wide, its halves those of world 1 and world 0."""
    from gym_graphreset.envs.mjwarp.rendering import WorldRenderer

    pendulum.reset(seed=3)
    try:
        with (
            WorldRenderer(pendulum, [1, 0], width=64, height=48) as both,
            WorldRenderer(pendulum, [0], width=64, height=48) as one,
        ):
            pair, single = both.frame(), one.frame()
    except RenderUnavailable as exc:
        pytest.skip(f"no OpenGL context on this machine: {exc}")
    assert pair.shape == (48, 128, 3) and single.shape == (48, 64, 3)
    assert np.array_equal(pair[:, 64:], single)
    with pytest.raises(ValueError, match=re.escape("`worlds` must name at least one world, got none")):
        WorldRenderer(pendulum, [])


def test_save_video_falls_back_to_a_gif_without_an_mp4_encoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    from gym_graphreset.envs.mjwarp.rendering import save_video

    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # no encoder, whatever is installed
    frames = [np.full((8, 8, 3), 40 * i, dtype=np.uint8) for i in range(3)]
    assert save_video(frames, tmp_path / "v.mp4", fps=10) == tmp_path / "v.gif"
    assert "no MP4 encoder" in capsys.readouterr().out and (tmp_path / "v.gif").is_file()
    assert not (tmp_path / "v.mp4").exists()
