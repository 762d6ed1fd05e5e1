"""Reference motions in mjlab's ``.npz`` format: loading and checking a clip before a tracking task uses it.

A clip holds, frames first, at a fixed ``fps``:

- ``joint_pos``, ``joint_vel``: ``(T, joints)``, the robot's hinge joints in model order;
- ``body_pos_w``, ``body_quat_w`` (w, x, y, z), ``body_lin_vel_w``, ``body_ang_vel_w``: ``(T, bodies, 3 or 4)``,
  every body of the robot in model order (the world body left out), world frame.

It is what mjlab's ``csv_to_npz`` writes and what
:meth:`~gym_graphreset.managers.recorder_manager.RecorderManager.export_motion` writes from a recorded rollout (record
every body, :func:`robot_body_names`). :func:`load_motion` checks keys, shapes and values and names what is
wrong, so a clip for another robot or frame rate is refused before training rather than tracked wrongly.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["MOTION_KEYS", "MotionClip", "load_motion", "robot_body_names"]

MOTION_KEYS = ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")
"""The arrays of a clip besides ``fps``."""


@dataclass(frozen=True)
class MotionClip:
    """A clip's arrays as float32 tensors on one device (see the module docstring for the shapes)."""

    fps: float
    joint_pos: torch.Tensor
    joint_vel: torch.Tensor
    body_pos_w: torch.Tensor
    body_quat_w: torch.Tensor
    body_lin_vel_w: torch.Tensor
    body_ang_vel_w: torch.Tensor

    @property
    def num_frames(self) -> int:
        """``T``, the number of frames."""
        return int(self.joint_pos.shape[0])

    @property
    def duration_s(self) -> float:
        """Seconds from the first frame to the last."""
        return (self.num_frames - 1) / self.fps


def robot_body_names(mjm: Any) -> tuple[str, ...]:
    """The bodies a clip of ``mjm``'s robot holds: every body but the world, in model order."""
    import mujoco

    return tuple(mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_BODY, b) or f"body{b}" for b in range(1, mjm.nbody))


def load_motion(
    path: str | Path, *, num_joints: int, num_bodies: int, fps: float | None = None, device: str | torch.device = "cpu"
) -> MotionClip:
    """Load and check a clip for a robot of ``num_joints`` hinge joints and ``num_bodies`` bodies (world excluded).

    ``fps``: the frame rate the task steps at (1 / step dt); a clip at another rate is refused (resample it).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not an ``.npz``, a key missing, a shape or frame count that does not fit, non-finite values,
            quaternions that are not unit length, fewer than 2 frames, or another frame rate; the message names it.
    """
    path = Path(path)
    where = f"motion file {str(path)!r}"
    if not path.is_file():
        raise FileNotFoundError(f"{where}: no such file (a motion .npz in mjlab's format)")
    try:
        data = np.load(path)
    except (ValueError, OSError) as exc:
        raise ValueError(f"{where} is not an .npz archive: {exc}") from exc
    missing = [k for k in ("fps", *MOTION_KEYS) if k not in data.files]
    if missing:
        raise ValueError(f"{where} lacks {missing}; a clip holds 'fps' and {list(MOTION_KEYS)}")
    try:
        arrays = {k: np.asarray(data[k]) for k in MOTION_KEYS}
        raw_fps = np.asarray(data["fps"])
    except ValueError as exc:  # an object array (pickled): np.load refuses it
        raise ValueError(f"{where}: {exc} (a clip holds numeric arrays only)") from exc
    for key, value in arrays.items():
        if not (np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.integer)):
            raise ValueError(f"{where}: {key!r} must hold real numbers (float or int), got dtype {value.dtype}")
    with np.errstate(over="ignore"):  # a value past float32's range becomes inf: refused below, by key
        arrays = {k: v.astype(np.float32) for k, v in arrays.items()}
    frames = arrays["joint_pos"].shape[0] if arrays["joint_pos"].ndim == 2 else -1
    expected = {
        "joint_pos": (frames, num_joints),
        "joint_vel": (frames, num_joints),
        "body_pos_w": (frames, num_bodies, 3),
        "body_quat_w": (frames, num_bodies, 4),
        "body_lin_vel_w": (frames, num_bodies, 3),
        "body_ang_vel_w": (frames, num_bodies, 3),
    }
    for key, shape in expected.items():
        if arrays[key].shape != shape:
            raise ValueError(
                f"{where}: {key!r} must have shape (frames, {', '.join(map(str, shape[1:]))}) for this robot "
                f"({num_joints} joints, {num_bodies} bodies without the world), got {arrays[key].shape}"
            )
    if frames < 2:
        raise ValueError(f"{where}: a clip needs at least 2 frames, got {frames}")
    for key, value in arrays.items():
        if not np.isfinite(value).all():
            raise ValueError(f"{where}: {key!r} holds non-finite values")
    norms = np.linalg.norm(arrays["body_quat_w"], axis=-1)
    if np.abs(norms - 1.0).max() > 1e-3:
        raise ValueError(f"{where}: 'body_quat_w' must hold unit quaternions, got norms up to {norms.max():.4g}")
    if raw_fps.size != 1 or not (np.issubdtype(raw_fps.dtype, np.floating) or np.issubdtype(raw_fps.dtype, np.integer)):
        raise ValueError(f"{where}: 'fps' must be one number > 0, got {raw_fps.tolist()!r}")
    clip_fps = float(raw_fps.reshape(-1)[0])
    if not (np.isfinite(clip_fps) and clip_fps > 0):
        raise ValueError(f"{where}: 'fps' must be one number > 0, got {clip_fps!r}")
    if fps is not None and abs(clip_fps - fps) > 1e-3 * fps:
        raise ValueError(f"{where} is at {clip_fps:g} fps; the task steps at {fps:g} per second (resample the clip)")
    tensors = {k: torch.as_tensor(v, device=device) for k, v in arrays.items()}
    return MotionClip(fps=clip_fps, **tensors)
