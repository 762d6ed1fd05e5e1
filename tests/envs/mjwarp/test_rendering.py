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
from gym_graphreset.envs.mjwarp.frames import RenderUnavailable
from gym_graphreset.envs.mjwarp.rendering import render_frames, save_gif


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
        ({"width": 100_000}, ValueError, r"`width` must be an int in \[1, 8192\], got 100000"),
        ({"height": 0}, ValueError, r"`height` must be an int in \[1, 8192\], got 0"),
        ({"width": 64.5}, ValueError, r"`width` must be an int in \[1, 8192\], got 64.5"),
        ({"distance": float("nan")}, ValueError, "`distance` must be a finite number > 0, got nan"),
        ({"distance": -1.0}, ValueError, "`distance` must be a finite number > 0, got -1.0"),
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


@pytest.mark.parametrize("fps", [0, -5.0, float("nan"), float("inf"), 1000.0, True])
def test_save_gif_refuses_a_bad_fps_by_name(tmp_path: Path, fps: Any) -> None:
    frames = [np.zeros((8, 8, 3), dtype=np.uint8)]
    with pytest.raises(ValueError, match=re.escape(f"`fps` must be a finite number > 0 and <= 100, got {fps!r}")):
        save_gif(frames, tmp_path / "a.gif", fps=fps)
    assert not (tmp_path / "a.gif").exists()


def test_frames_larger_than_the_models_offscreen_buffer_render(pendulum: Any) -> None:
    """A size above the model's ``offwidth``/``offheight`` (640 x 480 by default) renders at that size."""
    _frames(pendulum, 1)  # skips where there is no OpenGL context at all
    frames = render_frames(pendulum, lambda obs: torch.zeros(2, 1), 1, width=700, height=500)
    assert frames[0].shape == (500, 700, 3)


# --- render_mode="rgb_array": Gymnasium's render() and RecordVideo -------------------------------------------------


def _rgb_env(num_envs: int = 2, **kwargs: Any) -> Any:
    import gymnasium as gym

    inner = gym.make_vec(
        "gym_graphreset/InvertedPendulum-v5",
        num_envs=num_envs,
        vectorization_mode="vector_entry_point",
        device="cpu",
        render_mode="rgb_array",
        render_size=(64, 48),
        **kwargs,
    )
    return FixedShapeAutoresetVectorEnv(inner, "masked")


def _read(frames: Any, i: int) -> np.ndarray:
    try:
        return frames[i]
    except RenderUnavailable as exc:
        pytest.skip(f"no OpenGL context on this machine: {exc}")


def test_registered_id_renders_every_world_lazily() -> None:
    """The id takes render_mode; render() gives one frame per world (Gymnasium's vector form), drawn when read."""
    env = _rgb_env()
    env.reset(seed=0)
    assert env.render_mode == "rgb_array" and env.metadata["render_fps"] == 25  # InvertedPendulum: dt = 0.04 s
    assert "rgb_array" in env.metadata["render_modes"]
    frames = env.render()
    assert len(frames) == 2
    first = _read(frames, 0)
    assert first.shape == (48, 64, 3) and first.dtype == np.uint8 and first.std() > 0
    assert repr(frames) == "WorldFrames(worlds=2, drawn=1)"  # world 1 not drawn yet
    assert not np.array_equal(first, _read(frames, 1))  # each world's own reset noise
    env.close()


def test_frames_show_the_instant_of_the_render_call() -> None:
    env = _rgb_env()
    env.reset(seed=0)
    before = env.render()
    env.step(torch.full((2, 1), 3.0))
    moved = _read(env.render(), 0)
    read_late = _read(before, 0)  # read after the step: still the pose at render()
    env.reset(seed=0)
    assert np.array_equal(read_late, _read(env.render(), 0))
    assert not np.array_equal(read_late, moved)
    env.close()


def test_render_worlds_chooses_the_frames() -> None:
    env = _rgb_env(num_envs=3, render_worlds=(2, 0))
    env.reset(seed=0)
    chosen = env.render()
    assert len(chosen) == 2 and chosen.worlds == (2, 0)
    every = _rgb_env(num_envs=3)
    every.reset(seed=0)
    assert np.array_equal(_read(chosen, 0), _read(every.render(), 2))
    assert np.array_equal(chosen[-1], every.render()[0]) and len(chosen[0:2]) == 2
    env.close()
    every.close()


def test_no_render_mode_renders_nothing() -> None:
    from gym_graphreset.envs.gym_mujoco.tasks import InvertedPendulumEnv

    env = InvertedPendulumEnv(2, device="cpu")
    assert env.render_mode is None and env.render() is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"render_mode": "human"}, "InvertedPendulumEnv: `render_mode` must be None or 'rgb_array', got 'human'"),
        ({"render_worlds": (0, 2)}, "`render_worlds` must be None (every world) or distinct world indices in [0, 2)"),
        ({"render_worlds": (1, 1)}, "`render_worlds` must be None (every world) or distinct world indices in [0, 2)"),
        ({"render_worlds": ()}, "`render_worlds` must be None (every world) or distinct world indices in [0, 2)"),
        ({"render_size": (64,)}, "`render_size` must be (width, height), two ints >= 1, got (64,)"),
        ({"render_size": (0, 48)}, "`render_size` must be (width, height), two ints >= 1, got (0, 48)"),
    ],
)
def test_bad_render_arguments_are_named(kwargs: dict[str, Any], message: str) -> None:
    import re

    from gym_graphreset.envs.gym_mujoco.tasks import InvertedPendulumEnv

    with pytest.raises(ValueError, match=re.escape(message)):
        InvertedPendulumEnv(2, device="cpu", **kwargs)


@pytest.mark.parametrize(("first_only", "shape"), [(True, (48, 64, 3)), (False, (48, 128, 3))])
def test_gymnasium_record_video(tmp_path: Path, clips: list, first_only: bool, shape: tuple[int, ...]) -> None:
    """gymnasium.wrappers.vector.RecordVideo records the env: world 0 alone, or every world tiled, at 1 / dt fps."""
    from gymnasium.wrappers.vector import RecordVideo

    env = RecordVideo(
        _rgb_env(), str(tmp_path), step_trigger=lambda t: t == 0, video_length=8, record_first_only=first_only
    )
    env.reset(seed=0)
    try:
        for _ in range(10):
            env.step(torch.full((2, 1), 3.0))
    except RenderUnavailable as exc:
        pytest.skip(f"no OpenGL context on this machine: {exc}")
    env.close()
    ((path, frames, fps),) = clips
    assert path.endswith(".mp4") and fps == 25
    assert len(frames) == 9 and all(f.shape == shape and f.dtype == np.uint8 for f in frames)
    assert not np.array_equal(frames[0], frames[-1])  # the cart moves (RecordVideo keeps video_length + 1)


def test_world_renderer_puts_the_asked_worlds_side_by_side(pendulum: Any) -> None:
    """Worlds [1, 0]: one image twice as wide, its halves those of world 1 and world 0."""
    from gym_graphreset.envs.mjwarp.rendering import WorldsView

    pendulum.reset(seed=3)
    try:
        with (
            WorldsView(pendulum, [1, 0], width=64, height=48) as both,
            WorldsView(pendulum, [0], width=64, height=48) as one,
        ):
            pair, single = both.frame(), one.frame()
    except RenderUnavailable as exc:
        pytest.skip(f"no OpenGL context on this machine: {exc}")
    assert pair.shape == (48, 128, 3) and single.shape == (48, 64, 3)
    assert np.array_equal(pair[:, 64:], single)
    with pytest.raises(ValueError, match=re.escape("`worlds` must name at least one world, got none")):
        WorldsView(pendulum, [])


def test_save_video_falls_back_to_a_gif_without_an_mp4_encoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    from gym_graphreset.envs.mjwarp.rendering import save_video

    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # no encoder, whatever is installed
    frames = [np.full((8, 8, 3), 40 * i, dtype=np.uint8) for i in range(3)]
    with pytest.warns(UserWarning, match="no MP4 encoder"):  # a warning, not a print: the caller decides
        assert save_video(frames, tmp_path / "v.mp4", fps=10) == tmp_path / "v.gif"
    assert capsys.readouterr().out == "" and (tmp_path / "v.gif").is_file()
    assert not (tmp_path / "v.mp4").exists()


def test_the_robot_stays_in_view_beside_a_large_terrain() -> None:
    """A model as wide as a generated terrain (extent ~200 m, which MuJoCo's clipping planes scale with) still
    shows the root body from a camera 1 m away: the near plane is set in metres, not in extents."""
    import mujoco

    from gym_graphreset.envs.mjwarp.frames import NEAR_M, WorldRenderer

    xml = """<mujoco><worldbody>
      <geom type="box" pos="150 150 -1" size="50 50 0.5" rgba="0 0 1 1"/>
      <body name="robot" pos="0 0 0.3"><freejoint/><geom type="box" size="0.2 0.2 0.2" rgba="1 0 0 1"/></body>
    </worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    assert model.stat.extent > 100
    try:
        renderer = WorldRenderer(model, 64, 48, distance=1.0)
    except RenderUnavailable as exc:
        pytest.skip(f"no OpenGL context on this machine: {exc}")
    try:
        assert renderer.model.vis.map.znear * renderer.model.stat.extent <= NEAR_M + 1e-9
        frame = renderer.frame(torch.as_tensor(model.qpos0))
    finally:
        renderer.close()
    centre = frame[16:32, 24:40].astype(int)
    assert (centre[..., 0] - centre[..., 2] > 60).mean() > 0.5  # mostly the red robot, not the background


@pytest.mark.parametrize("kind", [str, Path, lambda p: type("PathLikeOnly", (), {"__fspath__": lambda self: str(p)})()])
def test_save_gif_and_save_video_take_a_str_or_pathlike(tmp_path: Path, kind: Any) -> None:
    """A str (or any os.PathLike) path is taken as a Path, not refused with an AttributeError."""
    from gym_graphreset.envs.mjwarp.rendering import save_video

    frames = [np.full((8, 8, 3), 40 * i, dtype=np.uint8) for i in range(2)]
    assert save_gif(frames, kind(tmp_path / "a.gif"))
    assert save_video(frames, kind(tmp_path / "v.gif")) == tmp_path / "v.gif"
    assert (tmp_path / "a.gif").is_file() and (tmp_path / "v.gif").is_file()
    with pytest.raises(TypeError, match=re.escape("`path` must be a str or os.PathLike, got int 3")):
        save_gif(frames, 3)  # type: ignore[arg-type]


def test_a_video_target_is_checked_before_any_frame(tmp_path: Path) -> None:
    """A GIF above 100 fps, or a path under a regular file, is refused by name before frames are made."""
    from gym_graphreset.envs.mjwarp.rendering import check_video_target

    assert check_video_target(tmp_path / "v.gif", 50.0) == tmp_path / "v.gif"
    with pytest.raises(ValueError, match=re.escape("would be a GIF at 500 fps; a GIF holds at most 100 frames")):
        check_video_target(str(tmp_path / "v.gif"), 500.0)
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match=re.escape(f"{str(tmp_path / 'f')!r} is a file, so no folder can be made")):
        check_video_target(tmp_path / "f" / "v.mp4", 25.0)
