"""Offscreen frames of one world of a MuJoCo Warp env, and a GIF of them: look at what a policy does.

The batched state stays on the device; each frame copies one world's ``qpos`` into a CPU ``mujoco.MjData``
of the same model, runs MuJoCo C's kinematics and renders it with ``mujoco.Renderer``. That costs one host
read per frame, so render after training (or in a separate evaluation loop), never inside a timed one.

MuJoCo picks its OpenGL backend (``MUJOCO_GL``) when it is first imported; headless, with no backend
chosen, an EGL context is made here instead. :func:`render_frames` and :class:`WorldRenderer` raise
:class:`RenderUnavailable` when no context can be made at all. :func:`save_video` writes an MP4 where an
encoder is installed, else a GIF.
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

__all__ = ["RenderUnavailable", "WorldRenderer", "render_frames", "save_gif", "save_video"]

Policy = Callable[[Any], torch.Tensor]
"""Maps the env's batched observation to a batched action (e.g. a trained actor's mean action)."""


class RenderUnavailable(RuntimeError):
    """No OpenGL context could be made for ``mujoco.Renderer`` (no display and no ``MUJOCO_GL`` backend)."""


class WorldRenderer:
    """Offscreen frames of some worlds of a MuJoCo Warp env, as they are now, side by side in one image.

    Use it as a context manager (it owns an OpenGL context); each :meth:`frame` reads those worlds' ``qpos``
    (one host read) and renders each with a free camera aimed at the model's first body (the root).

    Args:
        env: A MuJoCo Warp env or a wrapper around one.
        worlds: The worlds to render, left to right.
        width: Pixels per world.
        height: Pixels.
        distance: The camera's distance from the root body in metres.

    Raises:
        TypeError: ``env`` has no MuJoCo Warp env inside.
        ValueError: a world is not one of the env's, or ``worlds`` is empty.
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
        import copy

        import mujoco

        self._mujoco, self.physics, self.worlds = mujoco, physics, worlds
        model = copy.copy(physics.mjm)  # a brighter headlight for this copy: many task models define no lights
        model.vis.headlight.ambient[:] = 0.45
        model.vis.headlight.diffuse[:] = 0.6
        self.model, self.data = model, mujoco.MjData(model)
        self.renderer, self.context = _renderer(mujoco, model, width, height)
        self.camera = mujoco.MjvCamera()  # aimed at the root body every frame: it follows the robot
        self.camera.distance, self.camera.elevation, self.camera.azimuth = distance, -20.0, 135.0
        self.root = 1 if model.nbody > 1 else 0

    def frame(self) -> np.ndarray:
        """``(height, width * len(worlds), 3)`` uint8: the worlds' current states, left to right."""
        qpos = self.physics.qpos[self.worlds].detach().cpu().numpy()
        images = []
        for q in qpos:
            self.data.qpos[:] = q
            self._mujoco.mj_kinematics(self.model, self.data)
            self.camera.lookat[:] = self.data.xpos[self.root]
            self.renderer.update_scene(self.data, self.camera)
            images.append(self.renderer.render().copy())
        return np.concatenate(images, axis=1)

    def close(self) -> None:
        """Free the renderer and its OpenGL context."""
        self.renderer.close()
        if self.context is not None:
            self.context.free()
            self.context = None

    def __enter__(self) -> WorldRenderer:
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
        ValueError: ``world`` is not one of the env's worlds, or ``steps`` < 1.
        RenderUnavailable: MuJoCo could not make an OpenGL context.
    """
    if steps < 1:
        raise ValueError(f"`steps` must be >= 1, got {steps}")
    with WorldRenderer(env, [world], width=width, height=height, distance=distance) as view:
        obs, _ = env.reset(seed=seed)
        frames = [view.frame()]
        with torch.no_grad():
            for _ in range(steps):
                obs, *_ = env.step(policy(obs))
                frames.append(view.frame())
    return frames


def _renderer(mujoco: Any, model: Any, width: int, height: int) -> tuple[Any, Any]:
    """``mujoco.Renderer`` on the backend MuJoCo chose at import, or on an EGL context made here.

    MuJoCo reads ``MUJOCO_GL`` when it is first imported, and without it uses GLFW, which needs a display.
    Headless with no backend chosen, an EGL context is made current first (a failed GLFW attempt cannot be
    retried in the same process). Returns (renderer, that context or ``None``).
    """
    context = None
    try:
        if not os.environ.get("MUJOCO_GL") and not os.environ.get("DISPLAY"):
            from mujoco.egl import GLContext

            context = GLContext(width, height)
            context.make_current()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # GLFW's "no display" warning when EGL is current
            return mujoco.Renderer(model, height, width), context
    except Exception as exc:  # FatalError / RuntimeError / ImportError / AttributeError, by backend
        if context is not None:
            context.free()
        raise RenderUnavailable(
            f"mujoco.Renderer could not make an OpenGL context ({type(exc).__name__}: {exc}); set MUJOCO_GL=egl "
            "or osmesa before mujoco is first imported, with that library installed"
        ) from exc


def save_gif(frames: list[np.ndarray], path: Path, fps: float = 25.0) -> bool:
    """Write ``frames`` as a looping GIF at ``fps``; returns ``False`` after a one-line notice without Pillow."""
    if not frames:
        raise ValueError("save_gif needs at least one frame")
    try:
        from PIL import Image
    except ImportError:
        print(f"Pillow is not installed (pip install 'gym_graphreset[plot]'): skipped the GIF {path}")
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(f) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0, optimize=True)
    return True


def save_video(frames: list[np.ndarray], path: Path, fps: float = 25.0) -> Path | None:
    """Write ``frames`` as an MP4 where an encoder is installed, else as a GIF next to it; the path written.

    An ``.mp4`` path is encoded with ``imageio`` and its ``imageio-ffmpeg`` plugin when both are installed;
    otherwise (or for any other suffix) the frames go to ``path`` with the suffix ``.gif``, with a one-line
    notice when an MP4 was asked for. ``None`` (after a notice) when neither can be written.
    """
    if not frames:
        raise ValueError("save_video needs at least one frame")
    if path.suffix == ".mp4":
        try:
            import imageio.v2 as imageio
            import imageio_ffmpeg  # noqa: F401  (the encoder imageio's MP4 writer uses)
        except ImportError:
            print(f"no MP4 encoder (pip install imageio imageio-ffmpeg): writing a GIF instead of {path}")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            even: list[Any] = [
                f[: f.shape[0] // 2 * 2, : f.shape[1] // 2 * 2] for f in frames
            ]  # yuv420p wants even sizes
            imageio.mimwrite(path, even, fps=fps, codec="libx264", macro_block_size=1)
            return path
    gif = path.with_suffix(".gif")
    return gif if save_gif(frames, gif, fps=fps) else None
