"""The G1 reference clip the tracking task ships with, and how it was made: scripted joint motion, posed on the floor.

No motion data set comes with the package, so its clip is made by the library itself, the way retargeted
motion capture is: a kinematic sequence of whole-body poses. Joint angles follow scripted waves around the
knees-bent pose (arm swings, a waist twist, a knee dip, a side-to-side weight shift) for 6 s at the task's
50 Hz; each frame's pelvis height is chosen so that the lowest sole point rests on the floor; joint and root
velocities are central differences of the poses (``mj_differentiatePos``), body poses and velocities come
from MuJoCo's kinematics of each frame (``mj_forward``). Frames are written in mjlab's motion format.

Regenerate it with ``python -m gym_graphreset.assets.robots.g1.clip [PATH]``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import torch

from gym_graphreset.assets.robots.g1.model import DEFAULT_JOINT_POS, JOINT_NAMES

__all__ = ["G1_CLIP", "record_reference_clip", "scripted_targets"]

G1_CLIP = Path(__file__).parent / "motions" / "g1_sway.npz"
"""The shipped clip: 6 s at 50 Hz of the scripted sway."""

_WAVES = {  # joint pattern: (amplitude rad, frequency Hz, phase rad)
    "left_shoulder_pitch_joint": (0.5, 0.5, 0.0),
    "right_shoulder_pitch_joint": (0.5, 0.5, math.pi),
    "left_elbow_joint": (0.3, 0.5, 0.0),
    "right_elbow_joint": (0.3, 0.5, math.pi),
    "waist_yaw_joint": (0.25, 0.25, 0.0),
    "left_hip_pitch_joint": (-0.12, 0.5, 0.0),
    "right_hip_pitch_joint": (-0.12, 0.5, 0.0),
    "left_knee_joint": (0.24, 0.5, 0.0),
    "right_knee_joint": (0.24, 0.5, 0.0),
    "left_ankle_pitch_joint": (-0.12, 0.5, 0.0),
    "right_ankle_pitch_joint": (-0.12, 0.5, 0.0),
    "left_hip_roll_joint": (0.05, 0.25, 0.0),
    "right_hip_roll_joint": (0.05, 0.25, 0.0),
    "left_ankle_roll_joint": (-0.05, 0.25, 0.0),
    "right_ankle_roll_joint": (-0.05, 0.25, 0.0),
}


_DIP = ("hip_pitch", "knee", "ankle_pitch")
"""Joints that dip one way only (a squat: ``amp (1 - cos) / 2``); the others swing both ways (``amp sin``)."""


def scripted_targets(t: float) -> torch.Tensor:
    """``(29,)`` joint angles at ``t`` seconds: the knees-bent pose plus the sway's waves."""
    out = []
    for joint in JOINT_NAMES:
        amp, freq, phase = _WAVES.get(joint, (0.0, 0.0, 0.0))
        angle = 2 * math.pi * freq * t + phase
        dip = any(part in joint for part in _DIP)
        out.append(DEFAULT_JOINT_POS.get(joint, 0.0) + amp * (0.5 - 0.5 * math.cos(angle) if dip else math.sin(angle)))
    return torch.tensor(out)


def record_reference_clip(path: str | Path, seconds: float = 6.0, fps: float = 50.0) -> Path:
    """Pose the scripted sway for ``seconds`` at ``fps`` and write it to ``path`` in mjlab's motion format."""
    import mujoco
    import numpy as np

    from gym_graphreset.assets.robots.g1.model import FOOT_GEOMS, build_g1_xml

    m = mujoco.MjModel.from_xml_string(build_g1_xml())
    d = mujoco.MjData(m)
    soles = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, g) for g in FOOT_GEOMS]
    frames = round(seconds * fps) + 1
    qpos = np.zeros((frames, m.nq))
    for k in range(frames):
        d.qpos[:] = 0.0
        d.qpos[3] = 1.0
        d.qpos[7:] = scripted_targets(k / fps).double().numpy()
        mujoco.mj_kinematics(m, d)
        ends = [
            d.geom_xpos[g, 2] + s * m.geom_size[g, 1] * d.geom_xmat[g].reshape(3, 3)[2, 2]
            for g in soles
            for s in (-1, 1)
        ]
        d.qpos[2] = m.geom_size[soles[0], 0] - min(ends)  # the lowest sole point on the floor
        qpos[k] = d.qpos
    qvel = np.zeros((frames, m.nv))
    for k in range(frames):
        lo, hi = max(k - 1, 0), min(k + 1, frames - 1)
        mujoco.mj_differentiatePos(m, qvel[k], (hi - lo) / fps, qpos[lo], qpos[hi])
    out: dict[str, list[np.ndarray]] = {
        k: [] for k in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")
    }
    for k in range(frames):
        d.qpos[:], d.qvel[:] = qpos[k], qvel[k]
        mujoco.mj_forward(m, d)
        ang, lin = d.cvel[1:, 0:3], d.cvel[1:, 3:6]
        offset = d.subtree_com[m.body_rootid[1:]] - d.xpos[1:]
        out["body_pos_w"].append(d.xpos[1:].copy())
        out["body_quat_w"].append(d.xquat[1:].copy())
        out["body_lin_vel_w"].append(lin - np.cross(ang, offset))
        out["body_ang_vel_w"].append(ang.copy())
    arrays = {k: np.stack(v).astype(np.float32) for k, v in out.items()}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays["joint_pos"], arrays["joint_vel"] = qpos[:, 7:].astype(np.float32), qvel[:, 6:].astype(np.float32)
    save: Any = np.savez_compressed  # numpy's stub reads **arrays as its keyword options
    save(path, fps=np.array([fps]), **arrays)
    return path


if __name__ == "__main__":
    print(record_reference_clip(sys.argv[1] if len(sys.argv) > 1 else G1_CLIP))
