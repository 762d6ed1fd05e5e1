"""Offscreen frames of one world of a MuJoCo Warp env, and a GIF of them: look at what a policy does.

The batched state stays on the device; each frame is drawn by
:class:`~gym_graphreset.envs.mjwarp.frames.WorldRenderer` (one host read of one world's ``qpos`` and a CPU
render), so render after training (or in a separate evaluation loop), never inside a timed one. For
Gymnasium's video recorders, build the env with ``render_mode="rgb_array"`` instead (:doc:`/mjwarp`).
:func:`render_frames` raises :class:`RenderUnavailable` when no OpenGL context can be made.
:func:`save_video` writes an MP4 where an encoder is installed, else a GIF.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gym_graphreset.envs.mjwarp import MJWarpVectorEnv
from gym_graphreset.envs.mjwarp.frames import RenderUnavailable, WorldRenderer

__all__ = [
    "MAX_FRAME_SIZE",
    "MAX_GIF_FPS",
    "RenderUnavailable",
    "WorldsView",
    "check_output_path",
    "check_video_target",
    "render_frames",
    "save_gif",
    "save_video",
]

MAX_FRAME_SIZE = 8192
"""The largest frame width or height, in pixels (an offscreen buffer of that size is made for the frames)."""
MAX_GIF_FPS = 100.0
"""GIF frame delays are counted in hundredths of a second: at most 100 frames per second."""


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low or (high and value > high):
        accepted = f"an int in [{low}, {high}]" if high else f"an int >= {low}"
        raise ValueError(f"`{name}` must be {accepted}, got {value!r}")
    return int(value)


def _check_positive(name: str, value: Any, high: float | None = None) -> float:
    ok = not isinstance(value, bool) and isinstance(value, int | float | np.integer | np.floating)
    if not ok or not np.isfinite(value) or value <= 0 or (high is not None and value > high):
        accepted = "a finite number > 0" + (f" and <= {high:g}" if high is not None else "")
        raise ValueError(f"`{name}` must be {accepted}, got {value!r}")
    return float(value)


def check_output_path(path: str | Path, what: str = "path") -> Path:
    """``path`` (a ``str`` or ``os.PathLike``) as a ``Path`` a file can be written at, checked before any work.

    Raises:
        TypeError: ``path`` is neither a ``str`` nor an ``os.PathLike``.
        ValueError: ``path`` is a directory, or one of its parents is a file (no folder can be made there).
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"`{what}` must be a str or os.PathLike, got {type(path).__name__} {path!r}")
    out = Path(os.fspath(path))
    if out.is_dir():
        raise ValueError(f"`{what}` {str(out)!r} is a directory; give a file name")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"`{what}` {str(out)!r}: {str(parent)!r} is a file, so no folder can be made there")
            break
    return out


def _mp4_encoder() -> bool:
    try:
        import imageio.v2  # noqa: F401
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        return False
    return True


def check_video_target(path: str | Path, fps: float, what: str = "path") -> Path:
    """Where :func:`save_video` will write ``path`` at ``fps``, checked before any frame is made.

    Raises:
        TypeError, ValueError: As :func:`check_output_path`; and a GIF (any suffix but ``.mp4``, or an
            ``.mp4`` without an encoder) above ``MAX_GIF_FPS`` frames per second.
    """
    out = check_output_path(path, what)
    fps = _check_positive("fps", fps)
    gif = out.suffix != ".mp4" or not _mp4_encoder()
    if gif and fps > MAX_GIF_FPS:
        encoder = "" if out.suffix != ".mp4" else " (no MP4 encoder is installed: pip install imageio imageio-ffmpeg)"
        raise ValueError(
            f"`{what}` {str(out)!r} would be a GIF at {fps:g} fps{encoder}; a GIF holds at most "
            f"{MAX_GIF_FPS:g} frames per second (its frame delays are hundredths of a second): give an .mp4 path"
        )
    return out


Policy = Callable[[Any], torch.Tensor]
"""Maps the env's batched observation to a batched action (e.g. a trained actor's mean action)."""


class WorldsView:
    """Offscreen frames of some worlds of a MuJoCo Warp env, as they are now, side by side in one image.

    Use it as a context manager (it owns an OpenGL context); each :meth:`frame` reads those worlds' ``qpos``
    (one host read per world) and renders each with a free camera aimed at the model's root body.

    Args:
        env: A MuJoCo Warp env or a wrapper around one.
        worlds: The worlds to render, left to right.
        width: Pixels per world.
        height: Pixels.
        distance: The camera's distance from the root body in metres.

    Raises:
        TypeError: ``env`` has no MuJoCo Warp env inside.
        ValueError: a world is not one of the env's, ``worlds`` is empty, or a size is out of range.
        RenderUnavailable: MuJoCo could not make an OpenGL context.
    """

    def __init__(
        self, env: Any, worlds: Sequence[int], *, width: int = 320, height: int = 240, distance: float = 1.6
    ) -> None:
        physics = env.unwrapped
        if not isinstance(physics, MJWarpVectorEnv):
            raise TypeError(f"rendering needs a MuJoCo Warp env (or a wrapper of one), got {type(physics).__name__}")
        worlds = list(worlds)
        if not worlds:
            raise ValueError("`worlds` must name at least one world, got none")
        bad = [w for w in worlds if not 0 <= w < physics.num_envs]
        if bad:
            raise ValueError(f"`world` must be in [0, {physics.num_envs}), got {bad[0]}")
        width = _check_int("width", width, 1, MAX_FRAME_SIZE)
        height = _check_int("height", height, 1, MAX_FRAME_SIZE)
        distance = _check_positive("distance", distance)
        self.physics, self.worlds = physics, worlds
        self.renderer = WorldRenderer(physics.mjm, width, height, distance)

    def frame(self) -> np.ndarray:
        """``(height, width * len(worlds), 3)`` uint8: the worlds' current states, left to right."""
        return np.concatenate([self.renderer.frame(self.physics.qpos[w]) for w in self.worlds], axis=1)

    def close(self) -> None:
        """Free the renderer and its OpenGL context."""
        self.renderer.close()

    def __enter__(self) -> WorldsView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def render_frames(
    env: Any,
    policy: Policy,
    steps: int,
    *,
    world: int = 0,
    width: int = 320,
    height: int = 240,
    distance: float = 1.6,
    seed: int | None = 0,
) -> list[np.ndarray]:
    """Reset ``env``, step it ``steps`` times with ``policy``, and render world ``world`` after each step.

    ``env`` is a MuJoCo Warp env or a wrapper around one (e.g. :class:`FixedShapeAutoresetVectorEnv`); it is
    stepped as a whole, all worlds at once. The camera follows the model's first body (the root) from
    ``distance`` metres. Returns ``steps + 1`` ``(height, width, 3)`` uint8 frames (the reset first).

    Raises:
        TypeError: ``env`` has no MuJoCo Warp env inside.
        ValueError: ``world`` is not one of the env's worlds, ``steps`` < 1, ``width`` or ``height`` not in
            ``[1, MAX_FRAME_SIZE]``, or ``distance`` not a finite number > 0 (each named, before any work).
        RenderUnavailable: MuJoCo could not make an OpenGL context.
    """
    physics = env.unwrapped
    if not isinstance(physics, MJWarpVectorEnv):
        raise TypeError(f"render_frames needs a MuJoCo Warp env (or a wrapper of one), got {type(physics).__name__}")
    if isinstance(world, bool) or not isinstance(world, int | np.integer) or not 0 <= world < physics.num_envs:
        raise ValueError(f"`world` must be in [0, {physics.num_envs}), got {world!r}")
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 1:
        raise ValueError(f"`steps` must be >= 1, got {steps!r}")
    width = _check_int("width", width, 1, MAX_FRAME_SIZE)
    height = _check_int("height", height, 1, MAX_FRAME_SIZE)
    distance = _check_positive("distance", distance)
    renderer = WorldRenderer(physics.mjm, width, height, distance)
    frames = []
    try:
        obs, _ = env.reset(seed=seed)
        frames.append(renderer.frame(physics.qpos[world]))
        with torch.no_grad():
            for _ in range(steps):
                obs, *_ = env.step(policy(obs))
                frames.append(renderer.frame(physics.qpos[world]))
    finally:
        renderer.close()
    return frames


def save_gif(frames: list[np.ndarray], path: str | Path, fps: float = 25.0) -> bool:
    """Write ``frames`` as a looping GIF at ``fps``; returns ``False`` after a warning without Pillow.

    Raises:
        TypeError: ``path`` not a ``str`` or ``os.PathLike``.
        ValueError: no frames, ``fps`` not a finite number in ``(0, MAX_GIF_FPS]``, or a path no file can be
            written at (:func:`check_output_path`).
    """
    if not frames:
        raise ValueError("save_gif needs at least one frame")
    fps = _check_positive("fps", fps, MAX_GIF_FPS)
    path = check_output_path(path)
    try:
        from PIL import Image
    except ImportError:
        warnings.warn(f"Pillow is not installed (the `plot` extra): skipped the GIF {path}", stacklevel=2)
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(f) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0, optimize=True)
    return True


def save_video(frames: list[np.ndarray], path: str | Path, fps: float = 25.0) -> Path | None:
    """Write ``frames`` as an MP4 where an encoder is installed, else as a GIF next to it; the path written.

    An ``.mp4`` path is encoded with ``imageio`` and its ``imageio-ffmpeg`` plugin when both are installed;
    otherwise (or for any other suffix) the frames go to ``path`` with the suffix ``.gif``, with a warning when
    an MP4 was asked for. ``None`` (after a warning) when neither can be written. ``path`` is a ``str`` or
    ``os.PathLike`` (:func:`check_output_path`).
    """
    if not frames:
        raise ValueError("save_video needs at least one frame")
    path = check_output_path(path)
    if path.suffix == ".mp4":
        try:
            import imageio.v2 as imageio
            import imageio_ffmpeg  # noqa: F401  (the encoder imageio's MP4 writer uses)
        except ImportError:
            no_mp4 = f"no MP4 encoder (the `video` extra: imageio, imageio-ffmpeg): writing a GIF instead of {path}"
            warnings.warn(no_mp4, stacklevel=2)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            even: list[Any] = [
                f[: f.shape[0] // 2 * 2, : f.shape[1] // 2 * 2] for f in frames
            ]  # yuv420p wants even sizes
            imageio.mimwrite(path, even, fps=fps, codec="libx264", macro_block_size=1)
            return path
    gif = path.with_suffix(".gif")
    return gif if save_gif(frames, gif, fps=fps) else None
