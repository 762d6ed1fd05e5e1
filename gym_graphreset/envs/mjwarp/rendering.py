"""Offscreen frames of one world of a MuJoCo Warp env, and a GIF of them: look at what a policy does.

The batched state stays on the device; each frame copies one world's ``qpos`` into a CPU ``mujoco.MjData``
of the same model, runs MuJoCo C's kinematics and renders it with ``mujoco.Renderer``. That costs one host
read per frame, so render after training (or in a separate evaluation loop), never inside a timed one.

MuJoCo picks its OpenGL backend (``MUJOCO_GL``) when it is first imported; headless, with no backend
chosen, an EGL context is made here instead. :func:`render_frames` raises :class:`RenderUnavailable`
when no context can be made at all.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gym_graphreset.envs.mjwarp import MJWarpVectorEnv

__all__ = ["MAX_FRAME_SIZE", "MAX_GIF_FPS", "RenderUnavailable", "render_frames", "save_gif"]

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


Policy = Callable[[Any], torch.Tensor]
"""Maps the env's batched observation to a batched action (e.g. a trained actor's mean action)."""


class RenderUnavailable(RuntimeError):
    """No OpenGL context could be made for ``mujoco.Renderer`` (no display and no ``MUJOCO_GL`` backend)."""


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
    import copy

    import mujoco

    model = copy.copy(physics.mjm)  # a brighter headlight for this copy: many task models define no lights
    model.vis.headlight.ambient[:] = 0.45
    model.vis.headlight.diffuse[:] = 0.6
    model.vis.global_.offwidth = max(int(model.vis.global_.offwidth), width)  # the offscreen buffer fits the frame
    model.vis.global_.offheight = max(int(model.vis.global_.offheight), height)
    data = mujoco.MjData(model)
    renderer, context = _renderer(mujoco, model, width, height)
    camera = mujoco.MjvCamera()  # a free camera aimed at the root body every frame: it follows the robot
    camera.distance, camera.elevation, camera.azimuth = distance, -20.0, 135.0
    root = 1 if model.nbody > 1 else 0

    def frame() -> np.ndarray:
        data.qpos[:] = physics.qpos[world].detach().cpu().numpy()
        mujoco.mj_kinematics(model, data)
        camera.lookat[:] = data.xpos[root]
        renderer.update_scene(data, camera)
        return renderer.render().copy()

    frames = []
    try:
        obs, _ = env.reset(seed=seed)
        frames.append(frame())
        with torch.no_grad():
            for _ in range(steps):
                obs, *_ = env.step(policy(obs))
                frames.append(frame())
    finally:
        renderer.close()
        if context is not None:
            context.free()
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
    """Write ``frames`` as a looping GIF at ``fps``; returns ``False`` after a one-line notice without Pillow.

    Raises:
        ValueError: no frames, or ``fps`` not a finite number in ``(0, MAX_GIF_FPS]``.
    """
    if not frames:
        raise ValueError("save_gif needs at least one frame")
    fps = _check_positive("fps", fps, MAX_GIF_FPS)
    try:
        from PIL import Image
    except ImportError:
        print(f"Pillow is not installed (pip install 'gym_graphreset[plot]'): skipped the GIF {path}")
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(f) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0, optimize=True)
    return True
