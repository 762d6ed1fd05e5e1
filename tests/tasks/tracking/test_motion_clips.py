"""Motion clips: the shipped G1 clip and a user's clip in mjlab's format load; a rollout recorded with recorder
terms exports to a clip that loads; bad files are refused naming what is wrong; the quaternion helpers agree
with MuJoCo's."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from gym_graphreset.assets.robots.g1.clip import G1_CLIP, scripted_targets
from gym_graphreset.mdp.math import (
    quat_error_magnitude,
    quat_from_euler_xyz,
    quat_mul,
    rotation_columns,
    yaw_of,
    yaw_quat,
)
from gym_graphreset.tasks.tracking.motion_clips import MOTION_KEYS, load_motion

G1_SHAPE = {"num_joints": 29, "num_bodies": 30}


def _clip(frames: int = 5, joints: int = 29, bodies: int = 30) -> dict[str, np.ndarray]:
    """A user's clip as mjlab's ``csv_to_npz`` writes it: float32 arrays, frames first, identity orientations."""
    rng = np.random.default_rng(0)
    quat = np.zeros((frames, bodies, 4), np.float32)
    quat[..., 0] = 1.0
    return {
        "fps": np.array([50.0]),
        "joint_pos": rng.normal(size=(frames, joints)).astype(np.float32),
        "joint_vel": rng.normal(size=(frames, joints)).astype(np.float32),
        "body_pos_w": rng.normal(size=(frames, bodies, 3)).astype(np.float32),
        "body_quat_w": quat,
        "body_lin_vel_w": np.zeros((frames, bodies, 3), np.float32),
        "body_ang_vel_w": np.zeros((frames, bodies, 3), np.float32),
    }


def test_shipped_clip_loads_and_is_consistent() -> None:
    """The package's G1 clip: 6 s at 50 Hz, feet on the floor, velocities the differences of the poses."""
    clip = load_motion(G1_CLIP, fps=50.0, **G1_SHAPE)
    assert clip.num_frames == 301 and clip.duration_s == pytest.approx(6.0)
    assert G1_CLIP.stat().st_size < 2_000_000
    dt = 1.0 / clip.fps
    finite_diff = (clip.joint_pos[2:] - clip.joint_pos[:-2]) / (2 * dt)
    assert torch.allclose(clip.joint_vel[1:-1], finite_diff, atol=1e-4)
    pelvis = clip.body_pos_w[:, 0]
    assert torch.allclose((pelvis[2:] - pelvis[:-2]) / (2 * dt), clip.body_lin_vel_w[1:-1, 0], atol=2e-3)
    assert torch.allclose(clip.joint_pos[100], scripted_targets(2.0), atol=1e-6)
    assert float(pelvis[:, 2].min()) > 0.7 and float(pelvis[:, 2].max()) < 0.8


def test_a_users_clip_in_mjlabs_format_loads(tmp_path: Path) -> None:
    """Any clip with mjlab's keys and shapes loads as float32 tensors, the values unchanged."""
    arrays = _clip()
    path = tmp_path / "user.npz"
    np.savez(path, **arrays)
    clip = load_motion(path, fps=50.0, **G1_SHAPE)
    for key in MOTION_KEYS:
        assert torch.equal(getattr(clip, key), torch.from_numpy(arrays[key]))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda a: a.pop("body_ang_vel_w"), "lacks ['body_ang_vel_w']"),
        (lambda a: a.update(joint_pos=a["joint_pos"][:, :12]), "'joint_pos' must have shape (frames, 29)"),
        (lambda a: a.update(body_pos_w=a["body_pos_w"][:, :13]), "'body_pos_w' must have shape (frames, 30, 3)"),
        (lambda a: a["joint_vel"].__setitem__((1, 2), np.nan), "'joint_vel' holds non-finite values"),
        (lambda a: a["body_quat_w"].__setitem__((0, 3, 0), 2.0), "'body_quat_w' must hold unit quaternions"),
        (lambda a: a.update(fps=np.array([30.0])), "is at 30 fps; the task steps at 50 per second"),
        (
            lambda a: a.update(joint_pos=np.where(np.arange(29) == 3, 1e39, a["joint_pos"].astype(np.float64))),
            "'joint_pos' holds non-finite values",  # finite in float64, inf as the float32 the clip is kept in
        ),
        (lambda a: a.update(fps=np.array([])), "'fps' must be one number > 0, got []"),
        (lambda a: a.update(fps=np.array([50.0, 30.0])), "'fps' must be one number > 0, got [50.0, 30.0]"),
        (lambda a: a.update(joint_vel=a["joint_vel"] * 1j), "'joint_vel' must hold real numbers (float or int)"),
        (lambda a: a.update(joint_vel=a["joint_vel"].astype(str)), "'joint_vel' must hold real numbers"),
        (lambda a: a.update(joint_vel=a["joint_vel"].astype(object)), "a clip holds numeric arrays only"),
    ],
    ids=[
        "missing_key",
        "other_robot_joints",
        "other_robot_bodies",
        "nan",
        "quaternion",
        "frame_rate",
        "past_float32",
        "no_fps",
        "two_fps",
        "complex",
        "text",
        "objects",
    ],
)
def test_bad_clips_are_refused(tmp_path: Path, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    """Each defect is named with the file."""
    arrays = _clip()
    edit(arrays)
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match=re.escape(message)):
        load_motion(path, fps=50.0, **G1_SHAPE)


def test_missing_and_non_npz_files_are_refused(tmp_path: Path) -> None:
    """No such file, or a file that is not an archive."""
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_motion(tmp_path / "nope.npz", **G1_SHAPE)
    text = tmp_path / "clip.npz"
    text.write_text("not an archive")
    with pytest.raises(ValueError, match="is not an .npz archive"):
        load_motion(text, **G1_SHAPE)


def test_quaternion_helpers_agree_with_mujoco() -> None:
    """Product, rotation columns, Euler angles and error angle against MuJoCo's own functions."""
    import mujoco

    gen = torch.Generator().manual_seed(0)
    q = torch.nn.functional.normalize(torch.randn(4, 4, generator=gen), dim=-1)
    r = torch.nn.functional.normalize(torch.randn(4, 4, generator=gen), dim=-1)
    for i in range(4):
        prod = np.zeros(4)
        mujoco.mju_mulQuat(prod, q[i].double().numpy(), r[i].double().numpy())
        assert np.allclose(prod, quat_mul(q, r)[i].numpy(), atol=1e-6)
        mat = np.zeros(9)
        mujoco.mju_quat2Mat(mat, q[i].double().numpy())
        assert np.allclose(mat.reshape(3, 3)[:, :2].reshape(-1), rotation_columns(q)[i].numpy(), atol=1e-6)
    z, y, x = np.zeros(4), np.zeros(4), np.zeros(4)
    mujoco.mju_axisAngle2Quat(z, np.array([0.0, 0.0, 1.0]), 0.7)
    mujoco.mju_axisAngle2Quat(y, np.array([0.0, 1.0, 0.0]), -0.2)
    mujoco.mju_axisAngle2Quat(x, np.array([1.0, 0.0, 0.0]), 0.3)
    zy, zyx = np.zeros(4), np.zeros(4)
    mujoco.mju_mulQuat(zy, z, y)
    mujoco.mju_mulQuat(zyx, zy, x)
    euler = quat_from_euler_xyz(torch.tensor(0.3), torch.tensor(-0.2), torch.tensor(0.7))
    assert np.allclose(euler.numpy(), zyx, atol=1e-6)
    angle = quat_error_magnitude(torch.tensor(z, dtype=torch.float32), torch.tensor([1.0, 0.0, 0.0, 0.0]))
    assert angle.item() == pytest.approx(0.7, abs=1e-5)
    assert torch.allclose(yaw_of(yaw_quat(torch.tensor([0.4, -2.0]))), torch.tensor([0.4, -2.0]), atol=1e-6)


INF = float("inf")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("adaptive_uniform_ratio", 0.0),  # no bin drawable before a failure: NaN probabilities
        ("adaptive_uniform_ratio", float("nan")),
        ("pose_range", ((0.0, INF),) + ((0.0, 0.0),) * 5),  # a NaN initial state
        ("velocity_range", ((-INF, 0.0),) + ((0.0, 0.0),) * 5),
        ("joint_position_range", (-INF, 0.1)),
        ("adaptive_kernel_size", True),
        ("adaptive_lambda", "0.5"),
        ("adaptive_alpha", True),
        ("motion_file", 3),
    ],
)
def test_motion_command_cfg_refuses_bad_values_naming_the_field(field: str, value: object) -> None:
    """Values that would give NaN probabilities or states, bools and strings are refused naming the field."""
    from gym_graphreset.tasks.tracking.motion_command import MotionCommandCfg

    with pytest.raises(ValueError, match=re.escape(f"MotionCommandCfg: `{field}` must be")):
        MotionCommandCfg(**{"motion_file": G1_CLIP, "anchor_body": "pelvis", "body_names": ("pelvis",), field: value})
