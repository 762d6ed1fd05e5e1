"""Offscreen frames of single worlds of a MuJoCo model: what ``render()`` and :mod:`.rendering` draw with.

A frame copies one world's ``qpos`` to a CPU ``mujoco.MjData`` of the same model, runs MuJoCo C's
kinematics and renders it with ``mujoco.Renderer``: one host read and one CPU render per world drawn.
:class:`WorldFrames` is what :meth:`MJWarpVectorEnv.render()
<gym_graphreset.envs.mjwarp.vector_env.MJWarpVectorEnv.render>`
returns: a device snapshot of the worlds' poses, each drawn only when its frame is read.

MuJoCo picks its OpenGL backend (``MUJOCO_GL``) when it is first imported; headless, with no backend
chosen, an EGL context is made here instead. :class:`WorldRenderer` raises :class:`RenderUnavailable`
when no context can be made at all.
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any, overload

import numpy as np
import torch

__all__ = ["RenderUnavailable", "WorldFrames", "WorldRenderer", "check_render_args"]


class RenderUnavailable(RuntimeError):
    """No OpenGL context could be made for ``mujoco.Renderer`` (no display and no ``MUJOCO_GL`` backend)."""


NEAR_M = 0.01
"""The near clipping plane is at most this many metres from the camera, whatever the model's extent."""
FAR_M = 100.0
"""The far clipping plane is at least this many metres from the camera."""


class WorldRenderer:
    """Draws one world's pose of ``model`` offscreen, the camera following the root body.

    Args:
        model: The ``mujoco.MjModel`` (copied: a brighter headlight is set on the copy, since many task
            models define no lights, and clipping planes in metres: ``NEAR_M``, ``FAR_M``).
        width: Frame width in pixels.
        height: Frame height in pixels.
        distance: Camera distance from the root body, in metres.

    Raises:
        RenderUnavailable: MuJoCo could not make an OpenGL context.
    """

    def __init__(self, model: Any, width: int = 320, height: int = 240, distance: float = 1.6) -> None:
        import mujoco

        self._mujoco = mujoco
        self.model = copy.copy(model)
        self.model.vis.headlight.ambient[:] = 0.45
        self.model.vis.headlight.diffuse[:] = 0.6
        self.model.vis.global_.offwidth = max(int(self.model.vis.global_.offwidth), width)  # the buffer fits the frame
        self.model.vis.global_.offheight = max(int(self.model.vis.global_.offheight), height)
        # MuJoCo scales the clipping planes by the model's extent: a generated terrain (~200 m) put the near
        # plane 2 m out, past a camera 1.6 m from the robot, which then vanished from every frame
        extent = max(float(self.model.stat.extent), 1e-6)
        self.model.vis.map.znear = min(float(self.model.vis.map.znear), NEAR_M / extent)
        self.model.vis.map.zfar = max(float(self.model.vis.map.zfar), FAR_M / extent)
        self.data = mujoco.MjData(self.model)
        self.renderer, self.context = _renderer(mujoco, self.model, width, height)
        self.camera = mujoco.MjvCamera()  # a free camera aimed at the root body every frame: it follows the robot
        self.camera.distance, self.camera.elevation, self.camera.azimuth = distance, -20.0, 135.0
        self.root = 1 if self.model.nbody > 1 else 0

    def frame(self, qpos: torch.Tensor) -> np.ndarray:
        """The ``(height, width, 3)`` uint8 frame of one world's ``(nq,)`` pose (one host read)."""
        self.data.qpos[:] = qpos.detach().cpu().numpy()
        self._mujoco.mj_kinematics(self.model, self.data)
        self.camera.lookat[:] = self.data.xpos[self.root]
        self.renderer.update_scene(self.data, self.camera)
        return self.renderer.render().copy()

    def close(self) -> None:
        """Free the renderer and the EGL context made for it (if any); idempotent."""
        if self.renderer is not None:
            self.renderer.close()
            self.renderer = None
        if self.context is not None:
            self.context.free()
            self.context = None


class WorldFrames(Sequence[np.ndarray]):
    """The frames of some worlds at one instant, each drawn when first read.

    Holds a device copy of the worlds' poses taken when it was made, so a frame read later still shows
    that instant. Reading frame ``i`` costs one host read of that world's pose and one CPU render; frames
    never read cost nothing.

    Args:
        draw: Draws one world's ``(nq,)`` pose, e.g. :meth:`WorldRenderer.frame`.
        qpos: ``(nworld, nq)`` poses (copied here, on their device).
        worlds: The world index of each frame, in order.
    """

    def __init__(self, draw: Callable[[torch.Tensor], np.ndarray], qpos: torch.Tensor, worlds: Sequence[int]) -> None:
        self._draw = draw
        self._qpos = qpos.detach().clone()
        self.worlds = tuple(worlds)
        self._drawn: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.worlds)

    @overload
    def __getitem__(self, index: int) -> np.ndarray: ...

    @overload
    def __getitem__(self, index: slice) -> list[np.ndarray]: ...

    def __getitem__(self, index: int | slice) -> np.ndarray | list[np.ndarray]:
        """Frame ``index`` (world ``worlds[index]``), drawn on first read; a slice gives a list."""
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        position = range(len(self))[index]  # IndexError past the end, negative indices as for a list
        if position not in self._drawn:
            self._drawn[position] = self._draw(self._qpos[self.worlds[position]])
        return self._drawn[position]

    def __repr__(self) -> str:
        return f"WorldFrames(worlds={len(self.worlds)}, drawn={len(self._drawn)})"


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


def check_render_args(
    owner: str,
    render_mode: str | None,
    render_worlds: Sequence[int] | None,
    render_size: tuple[int, int],
    num_envs: int,
) -> tuple[str | None, tuple[int, ...] | None, tuple[int, int]]:
    """``(render_mode, render_worlds, render_size)`` checked for an env of ``num_envs`` worlds.

    Raises:
        ValueError: ``render_mode`` is not ``None`` or ``"rgb_array"``, a world is out of range or
            repeated, ``render_worlds`` is empty, or ``render_size`` is not two positive ints.
    """
    if render_mode not in (None, "rgb_array"):
        raise ValueError(f"{owner}: `render_mode` must be None or 'rgb_array', got {render_mode!r}")
    worlds = None
    if render_worlds is not None:
        worlds = tuple(render_worlds)
        bad = [w for w in worlds if isinstance(w, bool) or not isinstance(w, int) or not 0 <= w < num_envs]
        if not worlds or bad or len(set(worlds)) != len(worlds):
            raise ValueError(
                f"{owner}: `render_worlds` must be None (every world) or distinct world indices in "
                f"[0, {num_envs}), got {render_worlds!r}"
            )
    size = tuple(render_size)
    if len(size) != 2 or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in size):
        raise ValueError(f"{owner}: `render_size` must be (width, height), two ints >= 1, got {render_size!r}")
    return render_mode, worlds, (size[0], size[1])
